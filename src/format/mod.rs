//! Recordings on disk: where they go (a file that is never clobbered, or stdout), how a sample
//! becomes a line (`csv.rs`, `jsonl.rs`, one file per format with its writer and reader), and
//! the streaming reader that gives the samples back with the recording's metadata.

pub mod csv;
pub mod import;
pub mod jsonl;
pub mod meta;

use crate::model::sample::Sample;
use meta::{EndInfo, Meta};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
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
    #[error("cannot append to {0}: {1}")]
    CannotAppend(PathBuf, String),
    #[error("cannot create {0}: {1}")]
    Create(PathBuf, io::Error),
    #[error("cannot write {0}")]
    Write(String, #[source] io::Error),
}

/// The destination of a recording.
pub struct Output {
    /// `None` for stdout.
    path: Option<PathBuf>,
    format: Format,
    sink: Box<dyn RowSink + Send>,
    /// A second handle on the file, to fsync it.
    sync_handle: Option<File>,
    meta: Option<Meta>,
}

impl Output {
    /// Opens `path` (or stdout for `None`) for a new recording. An existing file is refused
    /// unless `force` (truncate) or `append` (its header must match this memmon's).
    pub fn create(
        path: Option<&Path>,
        format: Format,
        force: bool,
        append: bool,
    ) -> Result<Output, OutputError> {
        let Some(path) = path else {
            let out = BufWriter::with_capacity(64 * 1024, io::stdout());
            let sink: Box<dyn RowSink + Send> = match format {
                Format::Csv => Box::new(
                    csv::CsvWriter::new(out, true)
                        .map_err(|e| OutputError::Write("stdout".into(), e))?,
                ),
                Format::Jsonl => Box::new(jsonl::JsonlWriter::new(out)),
            };
            return Ok(Output {
                path: None,
                format,
                sink,
                sync_handle: None,
                meta: None,
            });
        };
        let path = absolute(path);
        let exists = path.exists();
        let mut write_header = true;
        let file = if exists && append {
            if format == Format::Csv {
                let mut first = String::new();
                let f = File::open(&path).map_err(|e| OutputError::Create(path.clone(), e))?;
                let mut r = io::BufReader::new(f);
                io::BufRead::read_line(&mut r, &mut first)
                    .map_err(|e| OutputError::Create(path.clone(), e))?;
                if !first.is_empty() {
                    if first.trim_end() != csv::header() {
                        return Err(OutputError::CannotAppend(
                            path.clone(),
                            "its header differs from this memmon's columns".into(),
                        ));
                    }
                    write_header = false;
                }
            }
            OpenOptions::new().append(true).open(&path)
        } else if exists && !force {
            return Err(OutputError::Exists(path));
        } else {
            let mut o = OpenOptions::new();
            o.write(true);
            if force {
                o.create(true).truncate(true);
            } else {
                // create_new: a file that appears between the check and here is not clobbered.
                o.create_new(true);
            }
            o.open(&path)
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
            meta: None,
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
        match &self.path {
            Some(p) => p.display().to_string(),
            None => "stdout".to_string(),
        }
    }

    /// Where the metadata of a CSV recording goes: `FILE.meta.json` (none for stdout).
    pub fn meta_path(&self) -> Option<PathBuf> {
        match (&self.path, self.format) {
            (Some(p), Format::Csv) => Some(sidecar_path(p)),
            _ => None,
        }
    }

    /// Writes the metadata: a sidecar for CSV, the first record for JSON Lines.
    pub fn write_meta(&mut self, meta: &Meta) -> Result<(), OutputError> {
        self.meta = Some(meta.clone());
        match self.format {
            Format::Jsonl => {
                let line = jsonl::meta_line(meta);
                self.sink
                    .get_mut()
                    .write_all(&line)
                    .map_err(|e| self.err(e))?;
                self.flush()
            }
            Format::Csv => self.write_sidecar(),
        }
    }

    pub fn write_sample(&mut self, s: &Sample) -> Result<(), OutputError> {
        self.sink.write_sample(s).map_err(|e| self.err(e))
    }

    pub fn flush(&mut self) -> Result<(), OutputError> {
        self.sink.flush().map_err(|e| self.err(e))
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
        if let Some(f) = &self.sync_handle {
            f.sync_all().map_err(|e| self.err(e))?;
        }
        if self.format == Format::Csv {
            self.write_sidecar()?;
        }
        Ok(())
    }

    fn write_sidecar(&self) -> Result<(), OutputError> {
        let (Some(side), Some(meta)) = (self.meta_path(), &self.meta) else {
            return Ok(());
        };
        // Written whole to a temporary name, then renamed: a reader never sees half of it.
        let tmp = side.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(meta).expect("serializes") + "\n";
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, &side))
            .map_err(|e| OutputError::Write(side.display().to_string(), e))
    }

    fn err(&self, e: io::Error) -> OutputError {
        OutputError::Write(self.describe(), e)
    }
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
/// `FILE.meta.json` is read when present.
pub fn read_recording(
    path: &Path,
    mut on_sample: impl FnMut(&Sample),
) -> Result<ReadInfo, ReadError> {
    let io_err = |e| ReadError::Io(path.to_path_buf(), e);
    let mut file = File::open(path).map_err(io_err)?;
    let mut info = ReadInfo {
        path: path.to_path_buf(),
        ..ReadInfo::default()
    };
    let malformed = |line: u64, msg: String| ReadError::Malformed {
        path: path.to_path_buf(),
        line,
        msg,
    };

    // A CSV body (the bulk of most recordings) is parsed on several threads.
    if let Some(header) = csv_header(&mut file).map_err(io_err)? {
        let layout =
            csv::CsvLayout::from_header(header.trim_ascii_end()).map_err(|m| malformed(1, m))?;
        info.format = Some(Format::Csv);
        let end = csv::read_body(&mut file, &layout, 1, &mut on_sample).map_err(|e| match e {
            csv::BodyError::Io(e) => io_err(e),
            csv::BodyError::Row(line, msg) => malformed(line, msg),
        })?;
        info.bytes = header.len() as u64 + end.bytes;
        info.truncated_line = end.truncated_line;
        read_sidecar(path, &mut info)?;
        return Ok(info);
    }

    let mut layout: Option<csv::CsvLayout> = None;
    let mut fields = Vec::with_capacity(32);
    let mut result: Result<(), ReadError> = Ok(());
    let bytes = for_each_line(&mut file, |line_no, line, complete| {
        if !complete {
            info.truncated_line = Some(line_no);
            return true;
        }
        if line.is_empty() {
            return true;
        }
        if info.format.is_none() {
            if line[0] == b'{' {
                info.format = Some(Format::Jsonl);
            } else {
                info.format = Some(Format::Csv);
                match csv::CsvLayout::from_header(line) {
                    Ok(l) => layout = Some(l),
                    Err(msg) => {
                        result = Err(malformed(line_no, msg));
                        return false;
                    }
                }
                return true;
            }
        }
        match info.format {
            Some(Format::Csv) => {
                let l = layout.as_ref().expect("header read");
                match l.parse(line, &mut fields) {
                    Ok(s) => on_sample(&s),
                    Err(e) => {
                        result = Err(malformed(line_no, e.0));
                        return false;
                    }
                }
            }
            _ => match jsonl::parse_line(line) {
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
            },
        }
        true
    })
    .map_err(io_err)?;
    result?;
    info.bytes = bytes;
    if info.format.is_none() {
        return Err(ReadError::Empty(path.to_path_buf()));
    }
    if info.format == Some(Format::Csv) {
        read_sidecar(path, &mut info)?;
    }
    Ok(info)
}

/// The first line of `file` when it is a whole, non-empty line that is not JSON (a CSV
/// header), leaving the file positioned after it; otherwise `None`, back at the start.
fn csv_header(file: &mut File) -> io::Result<Option<Vec<u8>>> {
    use std::io::{BufRead, Seek, SeekFrom};
    let mut head = Vec::new();
    io::BufReader::new(&mut *file)
        .take(1 << 20)
        .read_until(b'\n', &mut head)?;
    let csv = head.ends_with(b"\n") && !matches!(head.first(), Some(b'{' | b'\n' | b'\r'));
    file.seek(SeekFrom::Start(if csv { head.len() as u64 } else { 0 }))?;
    Ok(csv.then_some(head))
}

/// Reads a CSV recording's metadata sidecar (`FILE.meta.json`), when there is one.
fn read_sidecar(path: &Path, info: &mut ReadInfo) -> Result<(), ReadError> {
    let side = sidecar_path(path);
    let Ok(text) = std::fs::read_to_string(&side) else {
        return Ok(());
    };
    match serde_json::from_str::<Meta>(&text) {
        Ok(m) => {
            info.end = m.end.clone();
            info.meta = Some(m);
            Ok(())
        }
        Err(e) => Err(ReadError::Malformed {
            path: side,
            line: e.line() as u64,
            msg: e.to_string(),
        }),
    }
}

/// Calls `f(line_number, line, complete)` for each line of `r`, reading 1 MiB at a time;
/// `complete` is false only for a last line with no newline. `f` returns false to stop.
/// Returns the number of bytes read.
pub fn for_each_line(
    r: &mut impl Read,
    mut f: impl FnMut(u64, &[u8], bool) -> bool,
) -> io::Result<u64> {
    const CHUNK: usize = 1 << 20;
    let mut buf = vec![0u8; CHUNK];
    let mut filled = 0;
    let mut line_no = 0u64;
    let mut total = 0u64;
    loop {
        if filled == buf.len() {
            // A line longer than the buffer: grow it.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match r.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
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
            let line = &buf[start..start + k];
            if !f(line_no, line.strip_suffix(b"\r").unwrap_or(line), true) {
                return Ok(total);
            }
            start += k + 1;
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
        for_each_line(&mut &text[..], |no, line, complete| {
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
        for_each_line(&mut &b"a\nb\nc"[..], |_, line, complete| {
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
