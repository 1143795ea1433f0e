//! Opening what a reader is given: a file, `-` (stdin), a pipe or a FIFO, plain or compressed
//! with gzip or zstd (told by the first bytes, not the name; every member or frame is read,
//! `zstd.rs` caps a zstd frame's window), and the size caps every reader of outside input keeps
//! (docs/FORMAT.md, "Reading: inputs, compression and size caps").

use super::ReadError;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The longest line any reader accepts (a CSV row, a JSON Lines record, an imported line), in
/// bytes without its newline. memmon writes rows of a few hundred bytes (a marker's label is at
/// most `marks::MAX_LABEL_CHARS` characters), so a longer line is damage, not data.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The largest metadata sidecar (`FILE.meta.json`) read, in bytes.
pub const MAX_SIDECAR_BYTES: u64 = 16 << 20;

/// How much of the start of an input is read first, to recognise it: its header line (or first
/// line) must end within this many bytes.
pub const HEAD_BYTES: usize = 64 << 10;

/// A compression recognised by its magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Zstd,
}

impl Compression {
    fn of(magic: &[u8]) -> Option<Compression> {
        if magic.starts_with(&[0x1f, 0x8b]) {
            Some(Compression::Gzip)
        } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
            || (magic.len() == 4 && magic[0] & 0xf0 == 0x50 && magic[1..] == [0x2a, 0x4d, 0x18])
        {
            // A zstd frame, or a skippable frame (magic 0x184D2A50 to 0x184D2A5F), which is
            // how `pzstd` output begins.
            Some(Compression::Zstd)
        } else {
            None
        }
    }
}

/// An opened input: its first bytes (decompressed) already read, and the rest.
pub struct Input {
    pub path: PathBuf,
    /// The first `HEAD_BYTES` bytes (fewer when the input is shorter), a UTF-8 byte-order mark
    /// removed.
    pub head: Vec<u8>,
    /// Whether `head` holds the whole input.
    pub head_is_all: bool,
    pub rest: Box<dyn Read + Send>,
    pub compression: Option<Compression>,
    /// `-`: no sidecar can go with it.
    pub stdin: bool,
}

impl Input {
    /// The whole input as one stream, from its first byte (after a byte-order mark).
    pub fn into_reader(self) -> Box<dyn Read + Send> {
        Box::new(io::Cursor::new(self.head).chain(self.rest))
    }
}

/// Whether `path` names stdin.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Opens `path` (or stdin for `-`) for reading, decompressing gzip and zstd. A directory is
/// refused here, with its name; a FIFO is read as it comes (opening it waits for a writer).
pub fn open(path: &Path) -> Result<Input, ReadError> {
    let io_err = |e| ReadError::Io(path.to_path_buf(), e);
    let stdin = is_stdin(path);
    let raw: Box<dyn Read + Send> = if stdin {
        Box::new(io::stdin())
    } else {
        if std::fs::metadata(path).map_err(io_err)?.is_dir() {
            return Err(io_err(io::Error::other(
                "it is a directory, not a recording",
            )));
        }
        let file = std::fs::File::open(path).map_err(io_err)?;
        // A recording others may not read (one of another user's process): what is made from
        // it (a report, a plot, folded stacks, exports) is kept as private.
        use std::os::unix::fs::PermissionsExt;
        if file
            .metadata()
            .is_ok_and(|m| m.permissions().mode() & 0o004 == 0)
        {
            crate::output::keep_private();
        }
        Box::new(file)
    };
    from_reader(path, raw, stdin)
}

/// An input over any byte stream, named `path` in messages (and for its sidecar, unless
/// `stdin`).
pub fn from_reader(
    path: &Path,
    mut raw: Box<dyn Read + Send>,
    stdin: bool,
) -> Result<Input, ReadError> {
    let io_err = |e| ReadError::Io(path.to_path_buf(), e);
    let mut magic = Vec::with_capacity(4);
    read_up_to(&mut raw, &mut magic, 4).map_err(io_err)?;
    let compression = Compression::of(&magic);
    let joined = io::Cursor::new(magic).chain(raw);
    let mut rest: Box<dyn Read + Send> = match compression {
        None => Box::new(joined),
        Some(Compression::Gzip) => Box::new(flate2::read::MultiGzDecoder::new(joined)),
        Some(Compression::Zstd) => {
            Box::new(super::zstd::ZstdReader::new(joined, path).map_err(io_err)?)
        }
    };
    let mut head = Vec::with_capacity(HEAD_BYTES);
    read_up_to(&mut rest, &mut head, HEAD_BYTES).map_err(io_err)?;
    let head_is_all = head.len() < HEAD_BYTES;
    if head.starts_with(b"\xef\xbb\xbf") {
        head.drain(..3);
    }
    Ok(Input {
        path: path.to_path_buf(),
        head,
        head_is_all,
        rest,
        compression,
        stdin,
    })
}

/// Refuses an input whose lines end in a carriage return alone (classic Mac OS line ends, what
/// some spreadsheets still export): read as LF lines it would be one long first line and no
/// rows. Told by a CR followed by anything but LF before the first LF.
pub fn refuse_cr_line_ends(input: &Input) -> Result<(), ReadError> {
    let head = &input.head;
    let first_line = &head[..memchr::memchr(b'\n', head).unwrap_or(head.len())];
    // A CR inside the first line (a CRLF line's CR ends it; one at the end of what was read
    // may be the first half of a CRLF).
    match memchr::memchr(b'\r', first_line) {
        Some(cr) if cr + 1 < first_line.len() => {}
        _ => return Ok(()),
    }
    let shown = if input.stdin {
        "FILE".to_string()
    } else {
        input.path.display().to_string()
    };
    Err(ReadError::Malformed {
        path: input.path.clone(),
        line: 1,
        msg: format!(
            "its lines end in a carriage return alone (CR, the line end of classic Mac OS), not \
             LF or CRLF: convert it first, e.g. `tr '\\r' '\\n' < {shown} > converted.csv`"
        ),
    })
}

/// Reads until `buf` holds `n` bytes or the input ends.
fn read_up_to(r: &mut dyn Read, buf: &mut Vec<u8>, n: usize) -> io::Result<()> {
    let start = buf.len();
    buf.resize(start + n, 0);
    let mut filled = start;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(filled);
                return Err(e);
            }
        }
    }
    buf.truncate(filled);
    Ok(())
}

/// The sidecar that goes with a recording: `run.csv.meta.json` for `run.csv`; for a compressed
/// `run.csv.gz` (or `.zst`), `run.csv.gz.meta.json` when it exists, else `run.csv.meta.json`
/// (the sidecar as it was before the recording was compressed). `None` for stdin.
pub fn sidecar_for(input: &Input) -> Option<PathBuf> {
    if input.stdin {
        return None;
    }
    let own = super::sidecar_path(&input.path);
    if input.compression.is_none() || own.exists() {
        return Some(own);
    }
    let stem = input.path.with_extension("");
    Some(super::sidecar_path(&stem))
}

/// Reads a file memmon found beside a recording by its name (a sidecar, an anatomy or NUMA
/// table: `what`), not one the user named: never through a symbolic link, never waiting on a
/// FIFO, a regular file only, and refused before a byte is read when its size is over `max`
/// (a sparse file of gigabytes costs nothing). `Ok(None)` when there is none.
pub fn read_beside(path: &Path, max: u64, what: &str) -> Result<Option<Vec<u8>>, ReadError> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let io_err = |e| ReadError::Io(path.to_path_buf(), e);
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io_err(io::Error::other(format!(
                "it is a symbolic link, and {what} is read only from a file of its own beside \
                 the recording (never through a link someone could have planted): put the file \
                 itself there"
            ))))
        }
        Err(e) => return Err(io_err(e)),
    };
    let meta = file.metadata().map_err(io_err)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let is = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else {
            "not a regular file"
        };
        return Err(io_err(io::Error::other(format!("it is {is}, not {what}"))));
    }
    let too_large = |size: u64| {
        ReadError::Malformed {
        path: path.to_path_buf(),
        line: 0,
        msg: format!(
            "it is {} ({size} bytes), larger than {} ({max} bytes), the most {what} may be: damaged? not read",
            crate::units::fmt_bytes(size),
            crate::units::fmt_bytes(max),
        ),
    }
    };
    if meta.len() > max {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes).map_err(io_err)?;
    // Grown since its size was read: still never more than `max` + 1 bytes held.
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// Reads a sidecar: `Ok(None)` when there is none; any other failure (unreadable, a
/// directory, larger than `MAX_SIDECAR_BYTES`, not UTF-8) is an error naming it.
pub fn read_sidecar_text(side: &Path) -> Result<Option<String>, ReadError> {
    let Some(bytes) = read_beside(side, MAX_SIDECAR_BYTES, "a metadata sidecar")? else {
        return Ok(None);
    };
    String::from_utf8(bytes).map(Some).map_err(|e| {
        let before = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        ReadError::Malformed {
            path: side.to_path_buf(),
            line: 1 + memchr::memchr_iter(b'\n', before).count() as u64,
            msg: "the sidecar is not UTF-8 text".into(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_file_is_sized_before_it_is_read_and_never_taken_through_a_link_or_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv.numa.csv");
        assert!(read_beside(&p, 1024, "a NUMA table").unwrap().is_none());

        std::fs::write(&p, "node,0\n").unwrap();
        assert_eq!(
            read_beside(&p, 1024, "a NUMA table").unwrap().unwrap(),
            b"node,0\n"
        );

        // A sparse 2 GiB file: refused from its size (reading it would hold 2 GiB).
        std::fs::File::create(&p).unwrap().set_len(2 << 30).unwrap();
        let e = read_beside(&p, crate::format::numa::MAX_BYTES, "a NUMA table")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("it is 2.00 GiB (2147483648 bytes), larger than 1.00 GiB (1073741824 bytes), the most a NUMA table may be"),
            "{e}"
        );
        assert!(e.contains("r.csv.numa.csv"), "{e}");

        let real = dir.path().join("real");
        std::fs::write(&real, "x").unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&real, &p).unwrap();
        let e = read_beside(&p, 1024, "an anatomy table")
            .unwrap_err()
            .to_string();
        assert!(e.contains("it is a symbolic link"), "{e}");

        // A FIFO: refused at once, never waited on for a writer.
        std::fs::remove_file(&p).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &p,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = read_beside(&p, 1024, "an anatomy table")
            .unwrap_err()
            .to_string();
        assert!(e.contains("it is a FIFO, not an anatomy table"), "{e}");
    }
}
