//! The machine's swap traffic: `pswpin` and `pswpout` of `/proc/vmstat`, pages swapped in and
//! out since boot (every process's, not only the tree's). The file is opened once and re-read
//! with `pread`; its two lines are found by a hand parser over the bytes. /proc/vmstat has some
//! 180 lines, each printed by the kernel at every read: a read costs more than a whole sample
//! of an idle tree (BENCHMARKS.md), so the recorder reads it on a thread of its own
//! (`sampler/swap.rs`), not at the tick.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The machine's vmstat file, under a /proc root.
pub fn path(proc_root: &Path) -> PathBuf {
    proc_root.join("vmstat")
}

/// Pages swapped in and out (a count of pages: one 2 MiB folio swapped whole counts 512).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwapPages {
    pub swap_in: u64,
    pub swap_out: u64,
}

/// Why the vmstat file gives nothing.
#[derive(Debug, thiserror::Error)]
pub enum VmstatError {
    #[error("{0} does not exist")]
    Missing(PathBuf),
    #[error("cannot read {0}: {1}")]
    Io(PathBuf, io::Error),
    #[error("cannot parse {0}: {1}")]
    Parse(PathBuf, VmstatParseError),
    /// The thread that reads the file once a second could not be started.
    #[error("cannot start the thread that reads {0}: {1}")]
    Thread(PathBuf, io::Error),
}

impl crate::error::Classified for VmstatError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// /proc/vmstat held open.
#[derive(Debug)]
pub struct Vmstat {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
}

impl Vmstat {
    /// Opens `path` and reads it once: an error says why it gives nothing.
    pub fn open(path: &Path) -> Result<Vmstat, VmstatError> {
        let file = File::open(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => VmstatError::Missing(path.to_path_buf()),
            _ => VmstatError::Io(path.to_path_buf(), e),
        })?;
        let mut v = Vmstat {
            path: path.to_path_buf(),
            file,
            buf: vec![0; 16 * 1024],
        };
        v.read()?;
        Ok(v)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The counts now.
    pub fn read(&mut self) -> Result<SwapPages, VmstatError> {
        let mut len = 0;
        loop {
            if self.buf.len() - len < 1024 {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match self.file.read_at(&mut self.buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(VmstatError::Io(self.path.clone(), e)),
            }
        }
        parse(&self.buf[..len]).map_err(|why| VmstatError::Parse(self.path.clone(), why))
    }
}

/// The `pswpin` and `pswpout` lines of a vmstat text; an error says which line is missing or
/// not a number.
pub fn parse(text: &[u8]) -> Result<SwapPages, VmstatParseError> {
    Ok(SwapPages {
        swap_in: counter(text, b"pswpin")?,
        swap_out: counter(text, b"pswpout")?,
    })
}

/// The number on the line `KEY N`.
fn counter(text: &[u8], key: &[u8]) -> Result<u64, VmstatParseError> {
    let name = String::from_utf8_lossy(key);
    for line in text.split(|&b| b == b'\n') {
        let Some(rest) = line.strip_prefix(key) else {
            continue;
        };
        let Some(value) = rest.strip_prefix(b" ") else {
            continue;
        };
        return number(value).ok_or_else(|| VmstatParseError::Line {
            line: String::from_utf8_lossy(line).into_owned(),
            key: name.into_owned(),
        });
    }
    Err(VmstatParseError::NoLine(name.into_owned()))
}

/// What in a vmstat text is not as the kernel writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VmstatParseError {
    #[error("the line '{line}' is not '{key} N'")]
    Line { line: String, key: String },
    #[error("no '{0}' line")]
    NoLine(String),
}

impl crate::error::Classified for VmstatParseError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// A decimal number, the whole of `s`.
fn number(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    s.iter().try_fold(0u64, |v, &b| {
        b.is_ascii_digit()
            .then(|| v.checked_mul(10)?.checked_add((b - b'0') as u64))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VMSTAT: &str =
        "nr_free_pages 3977447\nnr_zone_inactive_anon 1\npgpgin 123\npgpgout 456\n\
                          pswpin 1200\npswpout 3400\npgalloc_dma 0\n";

    #[test]
    fn pswpin_and_pswpout_are_read_and_nothing_else_is_taken_for_them() {
        assert_eq!(
            parse(VMSTAT.as_bytes()),
            Ok(SwapPages {
                swap_in: 1200,
                swap_out: 3400
            })
        );
        // pswpin_zero is not pswpin.
        assert_eq!(
            parse(b"pswpin_zero 9\npswpin 1\npswpout 2\n"),
            Ok(SwapPages {
                swap_in: 1,
                swap_out: 2
            })
        );
    }

    #[test]
    fn a_missing_or_malformed_line_is_named() {
        let e = parse(b"pswpin 1\n").unwrap_err().to_string();
        assert!(e.contains("no 'pswpout' line"), "{e}");
        let e = parse(b"pswpin 1x\npswpout 2\n").unwrap_err().to_string();
        assert!(e.contains("'pswpin 1x'"), "{e}");
        assert!(parse(b"pswpin \npswpout 2\n").is_err());
        assert!(parse(b"pswpin 99999999999999999999999\npswpout 2\n").is_err());
    }

    #[test]
    fn a_held_file_reads_new_counts_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        let e = Vmstat::open(&p).unwrap_err();
        assert!(matches!(e, VmstatError::Missing(_)), "{e}");
        std::fs::write(&p, VMSTAT).unwrap();
        let mut v = Vmstat::open(&p).unwrap();
        assert_eq!(v.read().unwrap().swap_in, 1200);
        // A file longer than the first buffer is read whole.
        let long = format!("{}pswpin 1300\npswpout 3500\n", "nr_x 1\n".repeat(5000));
        std::fs::write(&p, long).unwrap();
        assert_eq!(
            v.read().unwrap(),
            SwapPages {
                swap_in: 1300,
                swap_out: 3500
            }
        );
        std::fs::write(&p, "pswpin one\npswpout 2\n").unwrap();
        let e = v.read().unwrap_err().to_string();
        assert!(
            e.contains(&p.display().to_string()) && e.contains("pswpin one"),
            "{e}"
        );
    }

    #[test]
    fn this_machines_vmstat_has_both_counts() {
        let mut v = Vmstat::open(Path::new("/proc/vmstat")).unwrap();
        let a = v.read().unwrap();
        let b = v.read().unwrap();
        assert!(b.swap_in >= a.swap_in && b.swap_out >= a.swap_out);
    }
}
