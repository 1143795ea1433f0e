//! Reading: every input a reader is given comes through here. It is recognised by its first
//! line (or named by `--input-format`) and handed to its reader, each a peer of the others:
//! memmon's own recordings (`recording.rs`: CSV with its sidecar, JSON Lines) and the files
//! other tools write (`import/`: psrecord, mprof, declared columns). No reader calls another.
//! What every reader shares is here too: what it hands samples to (`Sink`), what it found
//! besides them (`ReadInfo`), its errors, and the bounded line reader.

use super::import::{self, COLUMNS_EXAMPLE};
use super::input::{self, Input};
use super::meta::{EndInfo, Meta, RowLoss};
use super::{recording, Format};
use crate::model::sample::Sample;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

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

/// What a reader hands a recording to, in the file's order: each session's metadata before
/// the session's first row (when the recording has it), the rows, and each session's end record
/// after its last row (when it has one). A closure over samples is a sink that takes the rows
/// alone.
pub trait Sink {
    /// A session begins (the recording's first, or one `--append` added): its metadata.
    fn session(&mut self, _meta: &Meta) {}
    fn sample(&mut self, s: &Sample);
    /// The file holds fewer rows than the end records count: rows were cut from it after the
    /// recording. Said before the `session_end` of the session the last rows belong to.
    fn rows_lost(&mut self, _loss: &RowLoss) {}
    /// The session that the last rows belong to has ended: its end record.
    fn session_end(&mut self, _end: &EndInfo) {}
}

impl<F: FnMut(&Sample)> Sink for F {
    fn sample(&mut self, s: &Sample) {
        self(s)
    }
}

/// A sink that also hands every sample to a closure (the plot draws what the summary reads).
pub struct Tee<'a, S: Sink, F: FnMut(&Sample)> {
    pub sink: &'a mut S,
    pub on_sample: F,
}

impl<S: Sink, F: FnMut(&Sample)> Sink for Tee<'_, S, F> {
    fn session(&mut self, meta: &Meta) {
        self.sink.session(meta);
    }

    fn sample(&mut self, s: &Sample) {
        self.sink.sample(s);
        (self.on_sample)(s);
    }

    fn rows_lost(&mut self, loss: &RowLoss) {
        self.sink.rows_lost(loss);
    }

    fn session_end(&mut self, end: &EndInfo) {
        self.sink.session_end(end);
    }
}

/// Streams any supported input file into `sink`: memmon recordings (`recording.rs`), and the
/// files other tools write (`import/`). Every reader of recordings (summary, compare, plot,
/// report) goes through here.
pub fn read_input(
    path: &Path,
    spec: &InputSpec,
    mut on_sample: impl FnMut(&Sample),
) -> Result<ReadInfo, ReadError> {
    read_from(input::open(path)?, spec, &mut on_sample)
}

/// `read_input` into a sink that also takes each session's metadata and end record (the
/// summary, which needs them to know when the kernel's marks were reset).
pub fn read_input_into(
    path: &Path,
    spec: &InputSpec,
    sink: &mut impl Sink,
) -> Result<ReadInfo, ReadError> {
    read_from(input::open(path)?, spec, sink)
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
    /// A CSV recording's sidecar that describes another recording: its sessions' times and
    /// the rows' lie apart (`recording::check_sidecar_times`).
    #[error("{}: {msg}", sidecar.display())]
    ForeignSidecar { sidecar: PathBuf, msg: String },
    /// A CSV recording's metadata sidecar (`run.csv.meta.json`) given as a recording.
    #[error("{}", sidecar_text(path, recording.as_deref(), *there))]
    Sidecar {
        path: PathBuf,
        /// The recording it belongs to, from its name (`run.csv` for `run.csv.meta.json`).
        recording: Option<PathBuf>,
        /// Whether that recording is there.
        there: bool,
    },
}

fn sidecar_text(path: &Path, recording: Option<&Path>, there: bool) -> String {
    match (recording, there) {
        (Some(r), true) => format!(
            "{} is the metadata sidecar of the recording {}, not a recording: give {} (memmon reads the sidecar with it)",
            path.display(),
            r.display(),
            r.display()
        ),
        (Some(r), false) => format!(
            "{} is the metadata sidecar of the recording {}, not a recording, and {} is not there (deleted?): the samples are in the recording",
            path.display(),
            r.display(),
            r.display()
        ),
        (None, _) => format!(
            "{} is a recording's metadata sidecar (memmon names it RECORDING.meta.json), not a recording: give the recording",
            path.display()
        ),
    }
}

/// Whether a file that starts with `{` is a sidecar (one pretty-printed JSON object whose
/// first line is a lone `{`, naming memmon's format) rather than JSON Lines (one object a line).
pub(super) fn is_sidecar_head(head: &[u8]) -> bool {
    let first = memchr::memchr(b'\n', head).map_or(head, |k| &head[..k]);
    first.trim_ascii() == b"{" && memchr::memmem::find(head, b"\"memmon-recording\"").is_some()
}

impl ReadError {
    /// A recording's metadata sidecar given as a recording: names the recording it belongs to.
    pub fn sidecar(path: &Path) -> ReadError {
        let recording = path
            .to_str()
            .and_then(|p| p.strip_suffix(".meta.json"))
            .filter(|r| !r.is_empty())
            .map(PathBuf::from);
        let there = recording
            .as_deref()
            .is_some_and(|r| std::fs::symlink_metadata(r).is_ok());
        ReadError::Sidecar {
            path: path.to_path_buf(),
            recording,
            there,
        }
    }

    /// `Empty` for a file of no bytes, `Blank` for one of only blank lines.
    pub fn empty(path: &Path, bytes: u64) -> ReadError {
        if bytes == 0 {
            ReadError::Empty(path.to_path_buf())
        } else {
            ReadError::Blank(path.to_path_buf(), bytes)
        }
    }
}

impl crate::error::Classified for ReadError {
    /// Always `Usage`: an input recording that is missing, unreadable, malformed or
    /// unrecognised is bad input, never a failed gate or budget (exit 1), so a CI job cannot
    /// take a broken file for a regression. The same in summary, compare, plot and report.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// The largest `elapsed_s` a reader accepts: 10^10 s (317 years).
pub const MAX_ELAPSED_S: f64 = 1e10;
/// The largest `unix_ms` a reader accepts: 10^14 ms (the year 5138).
pub const MAX_UNIX_MS: u64 = 100_000_000_000_000;

/// Refuses times no recording holds: a non-finite, negative or absurdly large `elapsed_s`, a
/// `unix_ms` past `MAX_UNIX_MS` (plots and durations would run away on them).
pub fn check_times(unix_ms: u64, elapsed_s: f64) -> Result<(), TimeError> {
    if !elapsed_s.is_finite() || elapsed_s < 0.0 {
        return Err(TimeError::Elapsed(elapsed_s));
    }
    if elapsed_s > MAX_ELAPSED_S {
        return Err(TimeError::ElapsedTooLong(elapsed_s));
    }
    if unix_ms > MAX_UNIX_MS {
        return Err(TimeError::UnixMs(unix_ms));
    }
    Ok(())
}

/// A row's time no recording holds (`check_times`); its reader names the file and line.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum TimeError {
    #[error("elapsed_s is {0}: seconds since the start are a finite number, 0 or more")]
    Elapsed(f64),
    #[error(
        "elapsed_s is {0:.3e} s, past the {MAX_ELAPSED_S:e} s (317 years) a recording can span"
    )]
    ElapsedTooLong(f64),
    #[error("unix_ms is {0}, past {MAX_UNIX_MS} ms (the year 5138): not a wall-clock time")]
    UnixMs(u64),
}

impl crate::error::Classified for TimeError {
    /// A malformed recording: bad input, as `ReadError` is.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
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

/// What the first non-empty line of a file says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A memmon recording (its CSV header or a JSON Lines record).
    Memmon,
    /// psrecord's `--log` text: `# Elapsed time   CPU (%)     Real (MB)   Virtual (MB)`.
    PsrecordPlain,
    /// psrecord's `--log-format csv`: `elapsed_time,nproc,cpu,mem_real,mem_virtual`.
    PsrecordCsv,
    /// memory_profiler's `mprof run` output: `CMDLINE ...`, `MEM <MiB> <unix s>`, ...
    Mprof,
    /// The first line starts with a number: data with no header.
    Headerless,
    /// A header line that is none of the above (the line is kept for the message).
    OtherHeader(String),
}

/// Recognises a file by its first non-empty line.
pub fn detect(first_line: &str) -> Kind {
    let line = first_line.trim_start_matches('\u{feff}').trim_end();
    // A header naming memmon's time column is memmon's, even when damaged (its reader then
    // says what is missing); a header memmon's reader takes names `unix_ms`, so it is only
    // parsed there, once.
    let memmon_like = line
        .split(',')
        .any(|n| n.trim() == "unix_ms" || n.trim() == "elapsed_s");
    if line.starts_with('{') || memmon_like {
        return Kind::Memmon;
    }
    if import::psrecord::is_plain_header(line) {
        return Kind::PsrecordPlain;
    }
    if import::psrecord::is_csv_header(line) {
        return Kind::PsrecordCsv;
    }
    if import::mprof::is_mprof_line(line) {
        return Kind::Mprof;
    }
    let first_field = line
        .split(|c: char| c == ',' || c == ';' || c == '\t' || c.is_whitespace())
        .find(|f| !f.is_empty())
        .unwrap_or("")
        .trim_matches('"');
    if import::Decimal::parse(first_field).is_ok() || first_field.starts_with('-') {
        Kind::Headerless
    } else {
        Kind::OtherHeader(line.to_string())
    }
}

/// Reads an input already opened: `spec.format` names its reader, or `Auto` recognises the
/// file by its first line; memmon's own recordings and each other tool's file alike.
pub fn read_from(
    input: Input,
    spec: &InputSpec,
    sink: &mut impl Sink,
) -> Result<ReadInfo, ReadError> {
    let on_sample = |s: &Sample| sink.sample(s);
    let path = &input.path.clone();
    input::refuse_cr_line_ends(&input)?;
    let kind = match spec.format {
        InputFormat::Memmon => return recording::read_from(input, sink),
        InputFormat::Psrecord => return import::psrecord::read_from(input, on_sample),
        InputFormat::Mprof => return import::mprof::read_from(input, on_sample),
        InputFormat::Columns => {
            let Some(text) = spec.columns.as_deref() else {
                return Err(ReadError::Columns(format!(
                    "is missing: --input-format columns needs the columns declared, e.g. {COLUMNS_EXAMPLE}"
                )));
            };
            return import::columns::read_from(input, text, on_sample);
        }
        // A JSON Lines record may be longer (up to the line cap): its `{` says enough.
        InputFormat::Auto
            if !input.head_is_all
                && memchr::memchr(b'\n', &input.head).is_none()
                && !input.head.trim_ascii_start().starts_with(b"{") =>
        {
            return Err(ReadError::Malformed {
                path: path.clone(),
                line: 1,
                msg: format!(
                    "the first line is longer than {} KiB: not a recording or a file memmon imports",
                    input::HEAD_BYTES >> 10
                ),
            });
        }
        InputFormat::Auto => match first_line(&input) {
            None => return Err(ReadError::empty(path, input.head.len() as u64)),
            Some(line) => detect(&line),
        },
    };
    match kind {
        Kind::Memmon => recording::read_from(input, sink),
        Kind::PsrecordPlain | Kind::PsrecordCsv => import::psrecord::read_from(input, on_sample),
        Kind::Mprof => import::mprof::read_from(input, on_sample),
        // `--columns` without `--input-format` already selects `Columns` (cli::InputArgs::spec).
        Kind::Headerless => Err(ReadError::Unrecognised(
            path.to_path_buf(),
            format!(
                "this file has no header; declare its columns with --columns, e.g. \
                 {COLUMNS_EXAMPLE} (a name with its unit per column, '-' to skip one: memmon never guesses units)"
            ),
        )),
        Kind::OtherHeader(line) => Err(ReadError::Unrecognised(
            path.to_path_buf(),
            format!(
                "its header '{}' is not memmon's, psrecord's or mprof's; declare its columns with \
                 --columns, e.g. {COLUMNS_EXAMPLE},- (a name with its unit per column, '-' to skip one; \
                 the header line is then skipped)",
                import::shorten(&line, 80)
            ),
        )),
    }
}

/// The first non-empty line of an input (from its first `input::HEAD_BYTES`), or `None` when
/// it has none there.
fn first_line(input: &Input) -> Option<String> {
    let text = String::from_utf8_lossy(&input.head);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(String::from)
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
    fn files_are_recognised_by_their_first_line() {
        assert_eq!(
            detect("# Elapsed time   CPU (%)     Real (MB)   Virtual (MB)"),
            Kind::PsrecordPlain
        );
        assert_eq!(
            detect("elapsed_time,nproc,cpu,mem_real,mem_virtual"),
            Kind::PsrecordCsv
        );
        assert_eq!(detect("CMDLINE python3 x.py"), Kind::Mprof);
        assert_eq!(detect("MEM 0.199219 1795980241.1737"), Kind::Mprof);
        assert_eq!(detect(&crate::format::csv::header()), Kind::Memmon);
        assert_eq!(detect("{\"type\":\"meta\"}"), Kind::Memmon);
        assert_eq!(detect("1771372328313,46578280,44.42"), Kind::Headerless);
        assert_eq!(detect("1771372328313\t46578280"), Kind::Headerless);
        assert_eq!(detect("time,rss"), Kind::OtherHeader("time,rss".into()));
    }

    proptest::proptest! {
        #[test]
        fn any_first_line_is_recognised_or_refused_without_panic(line in "\\PC{0,120}") {
            let _ = detect(&line);
        }
    }

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
}
