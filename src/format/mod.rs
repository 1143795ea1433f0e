//! Recordings on disk: where they go (a file that is never clobbered, or stdout), how a sample
//! becomes a line (`csv.rs`, `jsonl.rs`, one file per format with its writer and reader), and
//! the streaming reader that gives the samples back with the recording's metadata.

pub mod csv;
#[cfg(test)]
mod fuzz;
pub mod import;
pub mod input;
pub mod jsonl;
pub mod many;
pub mod meta;
pub mod zstd;

use crate::model::sample::Sample;
use meta::{EndInfo, Meta};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A line that could not be parsed, and why.
#[derive(Debug)]
pub struct RowError(pub String);

/// Where samples are written, one line each.
pub trait RowSink {
    fn write_sample(&mut self, s: &Sample) -> io::Result<()>;
    fn flush(&mut self) -> io::Result<()>;
    fn get_mut(&mut self) -> &mut dyn Write;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Csv,
    Jsonl,
}

impl Format {
    /// The format a file name implies: `.jsonl`/`.ndjson` is JSON Lines, anything else CSV.
    pub fn from_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl") | Some("ndjson") | Some("json") => Format::Jsonl,
            _ => Format::Csv,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{0} already exists: pass --force to overwrite it or --append to add to it")]
    Exists(PathBuf),
    #[error("{0}")]
    Check(#[from] crate::output::OutputCheckError),
    #[error("cannot append to {0}: {1}")]
    CannotAppend(PathBuf, String),
    #[error("cannot create {0}: {1}")]
    Create(PathBuf, io::Error),
    #[error("cannot write {0}")]
    Write(String, #[source] io::Error),
    /// The file's last link is gone (it or its directory was deleted): what is written goes
    /// into an inode nobody can open again.
    #[error("{0} was deleted while recording (the file or its directory was removed): nothing written to it can be read back")]
    Removed(PathBuf),
}

/// The destination of a recording.
pub struct Output {
    /// `None` for stdout.
    path: Option<PathBuf>,
    format: Format,
    sink: Box<dyn RowSink + Send>,
    /// A second handle on the file (also on stdout when it is a regular file), to fsync it and
    /// to notice that it was deleted.
    sync_handle: Option<File>,
    /// Where a CSV recording's metadata goes: `FILE.meta.json`, also for stdout redirected to
    /// a regular file; `None` for a pipe, a terminal or a device.
    sidecar: Option<PathBuf>,
    /// Whether the sidecar may replace an existing file (--force, --append, or ours already).
    sidecar_replace: bool,
    /// With --append: the metadata of the sessions already in the file, oldest first.
    earlier_sessions: Vec<Meta>,
    meta: Option<Meta>,
    /// Samples handed to the writer, and those of them known to be in the file (at the last
    /// successful flush).
    written: u64,
    flushed: u64,
    /// What the user should know about how the output was opened (a repaired --append).
    pub notes: Vec<String>,
    /// The regular file stdout was redirected to, for messages.
    stdout_file: Option<PathBuf>,
    /// When the file was last seen to still have a name (`flush` looks every
    /// [`LINK_CHECK_EVERY`]).
    link_checked: Option<std::time::Instant>,
}

/// How often a flush checks that the recording's file still has a name: a deleted output is
/// noticed within this long, at one `fstat` per check rather than per flush (a flush per
/// sample at 1 Hz).
pub const LINK_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

impl Output {
    /// Opens `path` (or stdout for `None`) for a new recording. An existing file (or sidecar)
    /// is refused unless `force` (replaced, never followed if a symlink) or `append` (same
    /// format, same CSV header; an incomplete last line is cut off and said so).
    pub fn create(
        path: Option<&Path>,
        format: Format,
        force: bool,
        append: bool,
    ) -> Result<Output, OutputError> {
        let Some(path) = path else {
            return Self::stdout(format, force, append);
        };
        let path = absolute(path);
        let stream = crate::output::is_stream(&path);
        let sidecar = (format == Format::Csv && !stream).then(|| sidecar_path(&path));
        let exists = std::fs::symlink_metadata(&path).is_ok();
        // The earlier sessions' metadata first: an unreadable sidecar refuses before the file
        // is touched.
        let earlier_sessions = match (&sidecar, append) {
            (Some(s), true) => earlier_sessions(s)?,
            _ => Vec::new(),
        };
        let mut notes = Vec::new();
        let mut write_header = true;
        let file = if exists && append && !stream {
            write_header = prepare_append(&path, format, &mut notes)?;
            OpenOptions::new()
                .append(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
        } else {
            let mut outs: Vec<(&Path, &str)> = vec![(&path, "-o")];
            if let Some(s) = &sidecar {
                if !append {
                    outs.push((s, "the recording's metadata sidecar"));
                }
            }
            crate::output::check_outputs(&outs, force).map_err(|e| match e {
                crate::output::OutputCheckError::Exists { path: p, .. } if p == path => {
                    OutputError::Exists(p)
                }
                e => OutputError::Check(e),
            })?;
            crate::output::create_streaming(&path, force)
        }
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => OutputError::Exists(path.clone()),
            _ => OutputError::Create(path.clone(), e),
        })?;
        let sync_handle = file.try_clone().ok();
        let out = BufWriter::with_capacity(64 * 1024, file);
        let sink: Box<dyn RowSink + Send> = match format {
            Format::Csv => Box::new(
                csv::CsvWriter::new(out, write_header)
                    .map_err(|e| OutputError::Write(path.display().to_string(), e))?,
            ),
            Format::Jsonl => Box::new(jsonl::JsonlWriter::new(out)),
        };
        Ok(Output {
            path: Some(path),
            format,
            sink,
            sync_handle,
            sidecar,
            sidecar_replace: force || append,
            earlier_sessions,
            meta: None,
            written: 0,
            flushed: 0,
            link_checked: None,
            notes,
            stdout_file: None,
        })
    }

    /// Stdout. When it is a regular file (`> run.csv`), a CSV recording's metadata goes to the
    /// sidecar next to that file, where `summary` looks for it.
    fn stdout(format: Format, force: bool, append: bool) -> Result<Output, OutputError> {
        use std::os::fd::AsFd;
        let handle = io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .ok()
            .map(File::from)
            .filter(|f| f.metadata().is_ok_and(|m| m.is_file()));
        let file_path = handle
            .as_ref()
            .and_then(|_| std::fs::read_link("/proc/self/fd/1").ok())
            .filter(|p| p.is_absolute() && p.exists());
        let sidecar = match (format, &file_path) {
            (Format::Csv, Some(p)) => Some(sidecar_path(p)),
            _ => None,
        };
        // `>>`: the shell appends; the sidecar keeps the earlier sessions as --append does.
        let appending = handle.as_ref().is_some_and(|f| {
            use std::os::fd::AsRawFd;
            // SAFETY: F_GETFL on a descriptor we own.
            let fl = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
            fl >= 0 && fl & libc::O_APPEND != 0
        }) || append;
        let nonempty = handle
            .as_ref()
            .is_some_and(|f| f.metadata().is_ok_and(|m| m.len() > 0));
        if let (Some(s), false) = (&sidecar, appending) {
            crate::output::check_outputs(&[(s, "the metadata sidecar of stdout's file")], force)?;
        }
        let earlier_sessions = match &sidecar {
            Some(s) if appending => earlier_sessions(s)?,
            _ => Vec::new(),
        };
        // `>> run.csv` onto a recording: checked and repaired as --append does.
        let mut notes = Vec::new();
        let write_header = match (&file_path, appending && nonempty) {
            (Some(p), true) => prepare_append(p, format, &mut notes)?,
            (None, true) => false,
            (_, false) => true,
        };
        let out = BufWriter::with_capacity(64 * 1024, io::stdout());
        let sink: Box<dyn RowSink + Send> = match format {
            Format::Csv => Box::new(
                csv::CsvWriter::new(out, write_header)
                    .map_err(|e| OutputError::Write("stdout".into(), e))?,
            ),
            Format::Jsonl => Box::new(jsonl::JsonlWriter::new(out)),
        };
        Ok(Output {
            path: None,
            format,
            sink,
            sync_handle: handle,
            sidecar,
            sidecar_replace: force || appending,
            earlier_sessions,
            meta: None,
            written: 0,
            flushed: 0,
            link_checked: None,
            notes,
            stdout_file: file_path,
        })
    }

    /// The absolute path, or `None` for stdout.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// A name for messages: the absolute path or `stdout`.
    pub fn describe(&self) -> String {
        match (&self.path, &self.stdout_file) {
            (Some(p), _) => p.display().to_string(),
            (None, Some(f)) => format!("stdout ({})", f.display()),
            (None, None) => "stdout".to_string(),
        }
    }

    /// Where the metadata of a CSV recording goes: `FILE.meta.json` (also for stdout
    /// redirected to a regular file; none for a pipe or a device).
    pub fn meta_path(&self) -> Option<PathBuf> {
        self.sidecar.clone()
    }

    /// Samples known to be in the file: those written before the last successful flush.
    pub fn flushed_samples(&self) -> u64 {
        self.flushed
    }

    /// Writes the metadata: a sidecar for CSV, the first record for JSON Lines. The CSV
    /// header is flushed too, so that a recorder killed at once leaves a readable file.
    pub fn write_meta(&mut self, meta: &Meta) -> Result<(), OutputError> {
        let mut meta = meta.clone();
        meta.earlier_sessions = std::mem::take(&mut self.earlier_sessions);
        self.meta = Some(meta);
        if self.format == Format::Jsonl {
            let line = jsonl::meta_line(self.meta.as_ref().expect("set above"));
            self.sink
                .get_mut()
                .write_all(&line)
                .map_err(|e| self.err(e))?;
        }
        self.flush()?;
        if self.format == Format::Csv {
            self.write_sidecar()?;
        }
        Ok(())
    }

    pub fn write_sample(&mut self, s: &Sample) -> Result<(), OutputError> {
        self.written += 1;
        self.sink.write_sample(s).map_err(|e| self.err(e))
    }

    /// Flushes to the file, and checks (at most every [`LINK_CHECK_EVERY`]) that the file still
    /// has a name: a recording whose file (or directory) was deleted is an error, not hours of
    /// writing into nothing.
    pub fn flush(&mut self) -> Result<(), OutputError> {
        self.sink.flush().map_err(|e| self.err(e))?;
        let due = self
            .link_checked
            .is_none_or(|t| t.elapsed() >= LINK_CHECK_EVERY);
        if due {
            self.check_linked()?;
        }
        self.flushed = self.written;
        Ok(())
    }

    /// An error when the file has lost its last name (it or its directory was deleted).
    fn check_linked(&mut self) -> Result<(), OutputError> {
        if let Some(f) = &self.sync_handle {
            use std::os::unix::fs::MetadataExt;
            if f.metadata().is_ok_and(|m| m.is_file() && m.nlink() == 0) {
                return Err(OutputError::Removed(PathBuf::from(self.describe())));
            }
        }
        self.link_checked = Some(std::time::Instant::now());
        Ok(())
    }

    /// Records how the recording ended, flushes and syncs the file to disk.
    pub fn finish(&mut self, end: &EndInfo) -> Result<(), OutputError> {
        match self.format {
            Format::Jsonl => {
                let line = jsonl::end_line(end);
                self.sink
                    .get_mut()
                    .write_all(&line)
                    .map_err(|e| self.err(e))?;
            }
            Format::Csv => {
                if let Some(m) = self.meta.as_mut() {
                    m.end = Some(end.clone());
                }
            }
        }
        self.flush()?;
        self.check_linked()?;
        if let Some(f) = &self.sync_handle {
            if f.metadata().is_ok_and(|m| m.is_file()) {
                f.sync_all().map_err(|e| self.err(e))?;
            }
        }
        if self.format == Format::Csv {
            self.write_sidecar()?;
        }
        Ok(())
    }

    /// Writes the sidecar whole (random temporary name created exclusively in the same
    /// directory, fsynced, renamed over): never through a planted symlink, never half.
    fn write_sidecar(&mut self) -> Result<(), OutputError> {
        let (Some(side), Some(meta)) = (self.meta_path(), &self.meta) else {
            return Ok(());
        };
        let text = serde_json::to_string_pretty(meta).expect("serializes") + "\n";
        // fsynced at the end (the start's copy is replaced then; its fsync would only delay
        // the first sample).
        let sync = meta.end.is_some();
        crate::output::write_whole_synced(&side, text.as_bytes(), self.sidecar_replace, sync)
            .map_err(|e| OutputError::Write(side.display().to_string(), e))?;
        self.sidecar_replace = true;
        Ok(())
    }

    fn err(&self, e: io::Error) -> OutputError {
        OutputError::Write(self.describe(), e)
    }
}

/// Before appending to `path`: checks that it is a recording of `format` (CSV with this
/// memmon's header), and cuts off an incomplete last line (what a SIGKILL or a full disk
/// leaves), saying so in `notes`. Returns whether a CSV header must still be written.
fn prepare_append(
    path: &Path,
    format: Format,
    notes: &mut Vec<String>,
) -> Result<bool, OutputError> {
    use std::io::{Seek, SeekFrom};
    let refuse = |why: String| OutputError::CannotAppend(path.to_path_buf(), why);
    let meta = std::fs::symlink_metadata(path).map_err(|e| OutputError::Create(path.into(), e))?;
    if !meta.is_file() {
        return Err(refuse("it is not a regular file".into()));
    }
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| OutputError::Create(path.into(), e))?;
    let len = meta.len();
    // The end of the last complete line: search back from the end.
    let mut keep = 0u64;
    let mut pos = len;
    let mut buf = vec![0u8; 64 * 1024];
    while pos > 0 {
        let n = (pos as usize).min(buf.len());
        pos -= n as u64;
        f.seek(SeekFrom::Start(pos))
            .and_then(|_| f.read_exact(&mut buf[..n]))
            .map_err(|e| OutputError::Create(path.into(), e))?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            keep = pos + i as u64 + 1;
            break;
        }
    }
    if keep < len {
        f.set_len(keep)
            .map_err(|e| OutputError::Create(path.into(), e))?;
        notes.push(format!(
            "{} ended in an incomplete line ({} bytes with no newline, what a killed recorder or a full disk leaves): cut it off before appending",
            path.display(),
            len - keep
        ));
    }
    if keep == 0 {
        return Ok(true);
    }
    let mut head = Vec::new();
    f.seek(SeekFrom::Start(0))
        .and_then(|_| {
            io::BufRead::read_until(
                &mut io::BufReader::new(&mut f).take(1 << 20),
                b'\n',
                &mut head,
            )
        })
        .map_err(|e| OutputError::Create(path.into(), e))?;
    let found = if head.first() == Some(&b'{') {
        Format::Jsonl
    } else {
        Format::Csv
    };
    if found != format {
        let name = |f: Format| match f {
            Format::Csv => "CSV",
            Format::Jsonl => "JSON Lines",
        };
        return Err(refuse(format!(
            "it is a {} recording and this one is {} (name the format with --format, or use another file)",
            name(found),
            name(format)
        )));
    }
    if format == Format::Csv && head.trim_ascii_end() != csv::header().as_bytes() {
        return Err(refuse(
            "its header differs from this memmon's columns".into(),
        ));
    }
    Ok(false)
}

/// The sessions recorded in a CSV recording's sidecar before this one, oldest first (the
/// sidecar's own session last, its `earlier_sessions` before it). A missing sidecar is none;
/// an unreadable one is refused rather than replaced.
fn earlier_sessions(side: &Path) -> Result<Vec<Meta>, OutputError> {
    let text = match std::fs::read_to_string(side) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(OutputError::Create(side.to_path_buf(), e)),
    };
    let mut last: Meta = serde_json::from_str(&text).map_err(|e| {
        OutputError::CannotAppend(
            side.to_path_buf(),
            format!("its metadata is not valid ({e}); it would be lost"),
        )
    })?;
    let mut all = std::mem::take(&mut last.earlier_sessions);
    all.push(last);
    Ok(all)
}

/// `run.csv` → `run.csv.meta.json`.
pub fn sidecar_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".meta.json");
    PathBuf::from(s)
}

pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// What kind of file a reader is given: memmon's own recordings, or what people have today.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InputFormat {
    /// Recognised by content.
    #[default]
    Auto,
    /// A memmon recording (CSV or JSON Lines).
    Memmon,
    /// A psrecord log (plain `--log` text or CSV).
    Psrecord,
    /// A memory_profiler `mprof run` .dat file.
    Mprof,
    /// A headerless CSV whose columns are declared with `--columns`.
    Columns,
}

/// How to read an input file.
#[derive(Debug, Clone, Default)]
pub struct InputSpec {
    pub format: InputFormat,
    /// For `InputFormat::Columns`: the declared columns, with units (`unix_ms,rss_kb,-`).
    pub columns: Option<String>,
}

/// Streams any supported input file as samples: memmon recordings, and (see `import/`) the
/// files other tools write. Every reader of recordings (summary, compare, plot, report) goes
/// through here.
pub fn read_input(
    path: &Path,
    spec: &InputSpec,
    on_sample: impl FnMut(&Sample),
) -> Result<ReadInfo, ReadError> {
    import::read(path, spec, on_sample)
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not a format memmon reads by itself (e.g. a headerless CSV): what to declare.
    #[error("{0}: {1}")]
    Unrecognised(PathBuf, String),
    /// A bad `--columns` declaration.
    #[error("--columns {0}")]
    Columns(String),
    #[error("cannot read {0}: {1}")]
    Io(PathBuf, io::Error),
    #[error("{path}:{line}: {msg}")]
    Malformed {
        path: PathBuf,
        line: u64,
        msg: String,
    },
    #[error("{0} is empty: it holds no header and no samples")]
    Empty(PathBuf),
    /// Not empty, but nothing in it except blank lines.
    #[error("{0} holds only blank lines ({1} bytes): no header and no samples")]
    Blank(PathBuf, u64),
}

impl ReadError {
    /// `Empty` for a file of no bytes, `Blank` for one of only blank lines.
    pub fn empty(path: &Path, bytes: u64) -> ReadError {
        if bytes == 0 {
            ReadError::Empty(path.to_path_buf())
        } else {
            ReadError::Blank(path.to_path_buf(), bytes)
        }
    }
}

/// The largest `elapsed_s` a reader accepts: 10^10 s (317 years).
pub const MAX_ELAPSED_S: f64 = 1e10;
/// The largest `unix_ms` a reader accepts: 10^14 ms (the year 5138).
pub const MAX_UNIX_MS: u64 = 100_000_000_000_000;

/// Refuses times no recording holds: a non-finite, negative or absurdly large `elapsed_s`, a
/// `unix_ms` past `MAX_UNIX_MS` (plots and durations would run away on them).
pub fn check_times(unix_ms: u64, elapsed_s: f64) -> Result<(), String> {
    if !elapsed_s.is_finite() || elapsed_s < 0.0 {
        return Err(format!(
            "elapsed_s is {elapsed_s}: seconds since the start are a finite number, 0 or more"
        ));
    }
    if elapsed_s > MAX_ELAPSED_S {
        return Err(format!(
            "elapsed_s is {elapsed_s:.3e} s, past the {MAX_ELAPSED_S:e} s (317 years) a recording can span"
        ));
    }
    if unix_ms > MAX_UNIX_MS {
        return Err(format!(
            "unix_ms is {unix_ms}, past {MAX_UNIX_MS} ms (the year 5138): not a wall-clock time"
        ));
    }
    Ok(())
}

/// What reading a recording found besides its samples.
#[derive(Debug, Clone, Default)]
pub struct ReadInfo {
    pub path: PathBuf,
    pub format: Option<Format>,
    pub meta: Option<Meta>,
    pub end: Option<EndInfo>,
    /// The line number of an incomplete last line that was skipped (memmon was killed while
    /// writing it).
    pub truncated_line: Option<u64>,
    pub bytes: u64,
    /// For a file another tool wrote: what it is (`a psrecord log`); `None` for memmon's own.
    pub source: Option<String>,
    /// What the importer did that a reader should know: units, rounding, what the file lacks.
    pub notes: Vec<String>,
}

/// Streams a memmon recording (CSV or JSON Lines, told apart by content), calling `on_sample`
/// for each sample in order. Memory use does not grow with the file. For CSV, the sidecar
/// `FILE.meta.json` is read when present. `-` is stdin; gzip and zstd are decompressed.
pub fn read_recording(path: &Path, on_sample: impl FnMut(&Sample)) -> Result<ReadInfo, ReadError> {
    read_recording_from(input::open(path)?, on_sample)
}

/// `read_recording` on an input already opened (and recognised) by `import::read`.
pub fn read_recording_from(
    input: input::Input,
    mut on_sample: impl FnMut(&Sample),
) -> Result<ReadInfo, ReadError> {
    let path = input.path.clone();
    let io_err = |e| ReadError::Io(path.clone(), e);
    let mut info = ReadInfo {
        path: path.clone(),
        ..ReadInfo::default()
    };
    let malformed = |line: u64, msg: String| ReadError::Malformed {
        path: path.clone(),
        line,
        msg,
    };
    // Blank lines before the first line that says what the file is.
    let head = &input.head;
    let (mut pos, mut blank_lines) = (0, 0u64);
    while let Some(k) = memchr::memchr(b'\n', &head[pos..]) {
        if !head[pos..pos + k].trim_ascii().is_empty() {
            break;
        }
        pos += k + 1;
        blank_lines += 1;
    }
    if input.head_is_all && head[pos..].trim_ascii().is_empty() {
        return Err(ReadError::empty(&path, head.len() as u64));
    }
    if pos >= head.len() {
        return Err(malformed(
            blank_lines,
            format!(
                "the first {} KiB hold only blank lines",
                input::HEAD_BYTES >> 10
            ),
        ));
    }

    if head[pos] != b'{' {
        // CSV: the header, then a body (the bulk of most recordings) parsed on several threads.
        info.format = Some(Format::Csv);
        let header_line = blank_lines + 1;
        let (header, body_at) = match memchr::memchr(b'\n', &head[pos..]) {
            Some(k) => (&head[pos..pos + k], pos + k + 1),
            None if input.head_is_all => (&head[pos..], head.len()),
            None => {
                return Err(malformed(
                    header_line,
                    format!(
                        "the first line is longer than {} KiB: not a recording's header",
                        input::HEAD_BYTES >> 10
                    ),
                ))
            }
        };
        let layout = csv::CsvLayout::from_header(header.trim_ascii_end())
            .map_err(|m| malformed(header_line, m))?;
        let body_at_bytes = body_at as u64;
        let sidecar = input::sidecar_for(&input);
        let mut head = input.head;
        head.drain(..body_at);
        let mut body: Box<dyn Read + Send> = Box::new(io::Cursor::new(head).chain(input.rest));
        let end =
            csv::read_body(&mut body, &layout, header_line, &mut on_sample).map_err(
                |e| match e {
                    csv::BodyError::Io(e) => io_err(e),
                    csv::BodyError::Row(line, msg) => malformed(line, msg),
                },
            )?;
        info.bytes = body_at_bytes + end.bytes;
        info.truncated_line = end.truncated_line;
        if let Some(side) = sidecar {
            read_sidecar(&side, &mut info)?;
        }
        return Ok(info);
    }

    info.format = Some(Format::Jsonl);
    let mut result: Result<(), ReadError> = Ok(());
    let mut reader = input.into_reader();
    let lines = for_each_line(
        &mut reader,
        input::MAX_LINE_BYTES,
        |line_no, line, complete| {
            if !complete {
                info.truncated_line = Some(line_no);
                return true;
            }
            if line.trim_ascii().is_empty() {
                return true;
            }
            match jsonl::parse_line(line) {
                Ok(jsonl::Line::Sample(s)) => on_sample(&s),
                Ok(jsonl::Line::Meta(m)) => {
                    if info.meta.is_none() {
                        info.meta = Some(*m)
                    }
                }
                Ok(jsonl::Line::End(e)) => info.end = Some(*e),
                Err(e) => {
                    result = Err(malformed(line_no, e.0));
                    return false;
                }
            }
            true
        },
    );
    info.bytes = lines.map_err(|e| e.into_read_error(&path))?;
    result?;
    Ok(info)
}

/// Reads a CSV recording's metadata sidecar, when there is one. A sidecar that is there but
/// cannot be read or parsed is always an error (never silently ignored).
fn read_sidecar(side: &Path, info: &mut ReadInfo) -> Result<(), ReadError> {
    let Some(text) = input::read_sidecar_text(side)? else {
        return Ok(());
    };
    match serde_json::from_str::<Meta>(&text) {
        Ok(m) => {
            info.end = m.end.clone();
            info.meta = Some(m);
            Ok(())
        }
        Err(e) => Err(ReadError::Malformed {
            path: side.to_path_buf(),
            line: e.line() as u64,
            msg: format!("damaged metadata sidecar: {e}"),
        }),
    }
}

/// Why reading lines stopped before the end.
#[derive(Debug)]
pub enum LinesError {
    Io(io::Error),
    /// This line is longer than the cap.
    TooLong(u64, usize),
}

impl LinesError {
    pub fn into_read_error(self, path: &Path) -> ReadError {
        match self {
            LinesError::Io(e) => ReadError::Io(path.to_path_buf(), e),
            LinesError::TooLong(line, max) => ReadError::Malformed {
                path: path.to_path_buf(),
                line,
                msg: too_long(max),
            },
        }
    }
}

/// The message for a line past the cap.
pub fn too_long(max: usize) -> String {
    format!(
        "the line is longer than {} (the cap on one line): the file is damaged or not a recording",
        if max >= 1 << 20 && max % (1 << 20) == 0 {
            format!("{} MiB", max >> 20)
        } else {
            format!("{max} bytes")
        }
    )
}

/// Calls `f(line_number, line, complete)` for each line of `r`, reading 1 MiB at a time;
/// `complete` is false only for a last line with no newline. `f` returns false to stop.
/// A line longer than `max_line` bytes (its newline not counted) stops the reading with
/// `TooLong`, so memory stays bounded whatever the input. Returns the number of bytes read.
pub fn for_each_line(
    r: &mut dyn Read,
    max_line: usize,
    mut f: impl FnMut(u64, &[u8], bool) -> bool,
) -> Result<u64, LinesError> {
    const CHUNK: usize = 1 << 20;
    let mut buf = vec![0u8; CHUNK.max(max_line + 2)];
    let mut filled = 0;
    let mut line_no = 0u64;
    let mut total = 0u64;
    loop {
        let n = match r.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LinesError::Io(e)),
        };
        total += n as u64;
        if n == 0 {
            if filled > 0 {
                line_no += 1;
                let line = &buf[..filled];
                f(line_no, line.strip_suffix(b"\r").unwrap_or(line), false);
            }
            return Ok(total);
        }
        let end = filled + n;
        let mut start = 0;
        while let Some(k) = memchr::memchr(b'\n', &buf[start..end]) {
            line_no += 1;
            if k > max_line {
                return Err(LinesError::TooLong(line_no, max_line));
            }
            let line = &buf[start..start + k];
            if !f(line_no, line.strip_suffix(b"\r").unwrap_or(line), true) {
                return Ok(total);
            }
            start += k + 1;
        }
        if end - start > max_line {
            return Err(LinesError::TooLong(line_no + 1, max_line));
        }
        buf.copy_within(start..end, 0);
        filled = end - start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks_come_whole() {
        let text: Vec<u8> = (0..200_000)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let mut n = 0;
        for_each_line(&mut &text[..], 100, |no, line, complete| {
            assert!(complete);
            assert_eq!(line, format!("line {}", no - 1).as_bytes());
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 200_000);
    }

    #[test]
    fn a_last_line_without_newline_is_incomplete() {
        let mut seen = vec![];
        for_each_line(&mut &b"a\nb\nc"[..], 100, |_, line, complete| {
            seen.push((line.to_vec(), complete));
            true
        })
        .unwrap();
        assert_eq!(seen.last().unwrap(), &(b"c".to_vec(), false));
    }

    /// A CSV recording of `rows` samples (several read chunks long when large).
    fn big_csv(rows: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = csv::CsvWriter::new(&mut buf, true).unwrap();
        for i in 0..rows {
            let s = Sample {
                unix_ms: 1_700_000_000_000 + i as u64,
                elapsed_s: i as f64 / 1000.0,
                rss_bytes: (i as u64 % 977) << 20,
                processes: 1,
                ..Sample::default()
            };
            w.write_sample(&s).unwrap();
        }
        buf
    }

    #[test]
    fn a_large_csv_comes_back_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.csv");
        std::fs::write(&p, big_csv(60_000)).unwrap();
        let mut next = 0u64;
        let info = read_recording(&p, |s| {
            assert_eq!(s.unix_ms, 1_700_000_000_000 + next);
            next += 1;
        })
        .unwrap();
        assert_eq!(next, 60_000);
        assert_eq!(info.truncated_line, None);
        assert_eq!(info.bytes, std::fs::metadata(&p).unwrap().len());
    }

    #[test]
    fn a_bad_line_deep_in_a_large_csv_is_named_by_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.csv");
        let text = String::from_utf8(big_csv(60_000)).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[45_000] = "1,2,oops";
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        match read_recording(&p, |_| {}) {
            Err(ReadError::Malformed { line, .. }) => assert_eq!(line, 45_001),
            other => panic!("expected a malformed line, got {other:?}"),
        }
    }

    #[test]
    fn a_truncated_large_csv_names_its_incomplete_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cut.csv");
        let mut data = big_csv(60_000);
        data.truncate(data.len() - 7);
        std::fs::write(&p, &data).unwrap();
        let mut n = 0;
        let info = read_recording(&p, |_| n += 1).unwrap();
        assert_eq!(n, 59_999);
        assert_eq!(info.truncated_line, Some(60_001));
    }

    #[test]
    fn a_sidecar_of_one_session_without_earlier_sessions_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.csv");
        std::fs::write(&p, csv::header() + "\n").unwrap();
        // A sidecar as memmon wrote it before `earlier_sessions` existed.
        let old = r#"{"format":"memmon-recording","schema_version":1,"memmon_version":"0.1.0",
            "host":"h","kernel":"6.1","page_size_bytes":4096,"started_unix_ms":1,
            "interval_s":0.1,"interval":"100ms","target":{"mode":"pid","spec":"7","pid":7,
            "start_time_ticks":1,"comm":"x","cmdline":"x"},"children":true,"sources":[],
            "columns":[]}"#;
        std::fs::write(sidecar_path(&p), old).unwrap();
        let info = read_recording(&p, |_| {}).unwrap();
        assert!(info.meta.unwrap().earlier_sessions.is_empty());
        // Appending turns it into the first of the earlier sessions.
        let sessions = earlier_sessions(&sidecar_path(&p)).unwrap();
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions[0].interval, "100ms");
    }

    #[test]
    fn append_refuses_a_sidecar_it_cannot_read_rather_than_lose_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv");
        std::fs::write(&p, csv::header() + "\n").unwrap();
        std::fs::write(sidecar_path(&p), "{ not json").unwrap();
        let err = Output::create(Some(&p), Format::Csv, false, true)
            .err()
            .unwrap();
        assert!(matches!(err, OutputError::CannotAppend(..)), "{err}");
        assert_eq!(
            std::fs::read_to_string(sidecar_path(&p)).unwrap(),
            "{ not json"
        );
    }

    #[test]
    fn an_existing_file_is_never_clobbered() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.csv");
        std::fs::write(&p, "precious").unwrap();
        let err = Output::create(Some(&p), Format::Csv, false, false)
            .err()
            .unwrap();
        assert!(matches!(err, OutputError::Exists(_)));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "precious");
    }
}
