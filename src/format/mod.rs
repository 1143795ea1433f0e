//! Recordings on disk: where they go (`Output` here: a file that is never clobbered, or stdout),
//! how a sample becomes a line (`csv.rs`, `jsonl.rs`, one file per format with its writer and
//! its row parser), and reading: `read.rs` recognises an input (`input.rs` opens it) and hands
//! it to its reader, memmon's own (`recording.rs`) or another tool's (`import/`).

pub mod anatomy;
pub mod csv;
#[cfg(test)]
mod fuzz;
pub mod import;
pub mod input;
pub mod json;
pub mod jsonl;
pub mod many;
pub mod meta;
pub mod numa;
pub mod read;
pub mod recording;
pub mod zstd;

pub use read::{
    check_times, for_each_line, read_input, read_input_into, too_long, InputFormat, InputSpec,
    LinesError, ReadError, ReadInfo, Sink, Tee, MAX_ELAPSED_S, MAX_UNIX_MS,
};
pub use recording::read_recording;

use crate::model::sample::Sample;
use crate::output::{At, FileId, OpenError, OutFile, Pending, Place};
use meta::{EndInfo, Meta};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
    #[error(transparent)]
    Check(#[from] crate::output::OutputCheckError),
    #[error("cannot append to {0}: {1}")]
    CannotAppend(PathBuf, String),
    /// Opening (or creating) the file failed or was refused; the verb says which.
    #[error("cannot {1} {0}: {2}")]
    Open(PathBuf, &'static str, OpenError),
    #[error("cannot write {0}")]
    Write(String, #[source] io::Error),
    /// Nothing of the recording could be written (a full disk at the start): the file memmon
    /// had created for it was removed, not left empty to look like a recording.
    #[error("cannot write {0}: {1}; removed {2}, which memmon had created and could write no recording to")]
    Unwritten(String, io::Error, String),
    /// The file's last link is gone (it or its directory was deleted): what is written goes
    /// into an inode nobody can open again.
    #[error("{0} was deleted while recording (the file or its directory was removed): nothing written to it can be read back")]
    Removed(PathBuf),
}

impl crate::error::Classified for OutputError {
    /// What memmon refused (an existing file, one another process is writing, a planted link
    /// or FIFO) is `Usage`; a signal that ended a wait for a FIFO's reader, `Signal`; the rest
    /// (the file could not be written) `Failure`. The same from record, bench and demo.
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            OutputError::Exists(_) | OutputError::Check(_) | OutputError::CannotAppend(..) => {
                Class::Usage
            }
            OutputError::Open(_, _, e) => match e.signal() {
                Some(sig) => Class::Signal(sig),
                None if e.is_refusal() => Class::Usage,
                None => Class::Failure,
            },
            _ => Class::Failure,
        }
    }
}

/// The destination of a recording.
pub struct Output {
    /// `None` for stdout.
    path: Option<PathBuf>,
    /// Where the file is (its directory opened once); `None` for stdout and a descriptor name.
    place: Option<Place>,
    /// The file memmon created for this recording (not one appended to, not a stream): what
    /// `discard` may remove.
    created: Option<FileId>,
    /// With `--force` over an existing file: the new file, still at a temporary name; it
    /// replaces the old one at the first successful flush (the metadata's, once the command
    /// has started), and `discard` removes it, leaving the old recording as it was.
    pending: Option<Pending>,
    format: Format,
    sink: Box<dyn RowSink + Send>,
    /// A second handle on the file (also on stdout when it is a regular file), to fsync it and
    /// to notice that it was deleted.
    sync_handle: Option<File>,
    /// stdout's file opened again: the holder of its lock for the session.
    _lock: Option<File>,
    /// Where a CSV recording's metadata goes: `FILE.meta.json`, also for stdout redirected to
    /// a regular file; `None` for a pipe, a terminal or a device.
    sidecar: Option<Place>,
    /// Whether the sidecar may replace an existing file (--force, --append, an orphan, or ours
    /// already).
    sidecar_replace: bool,
    /// The sidecar memmon last put in place.
    sidecar_id: Option<FileId>,
    /// With --append: the metadata of the sessions already in the file, oldest first.
    earlier_sessions: Vec<Meta>,
    meta: Option<Meta>,
    /// Samples handed to the writer, and those of them known to be in the file (all of them
    /// at a successful flush; between flushes, those whose bytes the buffer has written out).
    written: u64,
    flushed: u64,
    tally: Tally,
    /// What the user should know about how the output was opened (a repaired --append, an
    /// orphan sidecar replaced).
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

/// The largest sidecar read before appending: the readers' cap.
const SIDECAR_MAX_BYTES: u64 = input::MAX_SIDECAR_BYTES;

/// What is at a new recording's sidecar name.
enum SidecarState {
    Free,
    /// A memmon sidecar whose recording is gone (deleted): nothing to keep, replaced.
    Orphan,
    Taken,
}

fn sidecar_state(recording: &Place, side: &Place) -> SidecarState {
    match side.at() {
        Ok(At::Nothing) => SidecarState::Free,
        _ if matches!(recording.at(), Ok(At::Nothing)) && is_memmon_sidecar(side) => {
            SidecarState::Orphan
        }
        _ => SidecarState::Taken,
    }
}

/// A regular file holding a memmon recording's metadata (`"format": "memmon-recording"`).
fn is_memmon_sidecar(side: &Place) -> bool {
    side.read_regular(SIDECAR_MAX_BYTES)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v["format"] == "memmon-recording")
}

/// Whether `recording`'s sidecar is an orphan: a memmon sidecar whose recording is not there
/// (it was deleted). A new recording of that name replaces it without `--force`.
pub fn sidecar_is_orphan(recording: &Path) -> bool {
    let Ok(place) = Place::resolve(recording) else {
        return false;
    };
    let side = place.sibling(&sidecar_name(&place));
    matches!(sidecar_state(&place, &side), SidecarState::Orphan)
}

fn sidecar_name(place: &Place) -> std::ffi::OsString {
    let mut name = place.path().file_name().unwrap_or_default().to_os_string();
    name.push(".meta.json");
    name
}

fn orphan_note(side: &Place) -> String {
    format!(
        "replacing {}: the metadata of a recording that is no longer there",
        side.path().display()
    )
}

impl Output {
    /// Opens `path` (or stdout for `None`) for a new recording. An existing file (or sidecar)
    /// is refused unless `force` (replaced, never followed if a symlink) or `append` (same
    /// format, same CSV header, checked before a byte changes; an incomplete last line of a
    /// recording is cut off and said so). The file is locked for the session: a second writer
    /// is refused, naming the first.
    pub fn create(
        path: Option<&Path>,
        format: Format,
        force: bool,
        append: bool,
    ) -> Result<Output, OutputError> {
        let Some(path) = path else {
            return Self::stdout(format, force, append);
        };
        let path = crate::output::absolute(path);
        let verb = if append { "append to" } else { "create" };
        let cannot = |e: OpenError| match e {
            OpenError::Exists => OutputError::Exists(path.clone()),
            e => OutputError::Open(path.clone(), verb, e),
        };
        if crate::output::is_descriptor_alias(&path) {
            let file = crate::output::open_alias(&path).map_err(|e| cannot(e.into()))?;
            return Self::finish_open(
                Some(path.clone()),
                None,
                None,
                format,
                file,
                true,
                Vec::new(),
            );
        }
        let place = Place::resolve(&path).map_err(cannot)?;
        let side = (format == Format::Csv).then(|| place.sibling(&sidecar_name(&place)));
        let mut notes = Vec::new();
        let rec_at = place.at().map_err(cannot)?;
        // Before anything is created: a new recording's sidecar name must be free, or hold
        // the metadata of a recording that is gone.
        let mut sidecar_replace = force;
        if let (Some(s), false, false) = (&side, force, matches!(rec_at, At::Stream(_))) {
            if append && !matches!(rec_at, At::Nothing) {
                sidecar_replace = true; // the recording's own: its sessions are read below
            } else {
                match sidecar_state(&place, s) {
                    SidecarState::Free => {}
                    SidecarState::Orphan => {
                        sidecar_replace = true;
                        notes.push(orphan_note(s));
                    }
                    SidecarState::Taken => {
                        return Err(OutputError::Check(
                            crate::output::OutputCheckError::Exists {
                                path: s.path().to_path_buf(),
                                flag: "the recording's metadata sidecar".into(),
                            },
                        ))
                    }
                }
            }
        }
        let opened = if append {
            place.open_append()
        } else {
            place.create_recording(force)
        }
        .map_err(cannot)?;
        let mut earlier_sessions = Vec::new();
        let mut write_header = true;
        if !opened.created && !opened.stream {
            // --append onto an existing file: checked before a byte of it changes.
            let plan = check_append(&opened.file, &path, format)?;
            if let Some(s) = &side {
                earlier_sessions = sessions_before(&path, s, plan.rows.as_ref())?;
            }
            write_header = plan.apply(&opened.file, &path, &mut notes)?;
            use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
            fcntl_getfl(&opened.file)
                .and_then(|fl| fcntl_setfl(&opened.file, fl | OFlags::APPEND))
                .map_err(|e| cannot(e.into()))?;
        }
        let created = opened.created.then_some(opened.id);
        let pending = opened.pending;
        let sidecar = side.filter(|_| !opened.stream);
        let mut out = Self::finish_open(
            Some(path),
            Some(place),
            sidecar,
            format,
            opened.file,
            write_header,
            notes,
        )?;
        out.created = created;
        out.pending = pending;
        out.sidecar_replace = sidecar_replace || append;
        out.earlier_sessions = earlier_sessions;
        Ok(out)
    }

    /// The writer over an opened file.
    fn finish_open(
        path: Option<PathBuf>,
        place: Option<Place>,
        sidecar: Option<Place>,
        format: Format,
        file: File,
        write_header: bool,
        notes: Vec<String>,
    ) -> Result<Output, OutputError> {
        let shown = path
            .as_ref()
            .map_or_else(|| "stdout".into(), |p| p.display().to_string());
        let sync_handle = file.try_clone().ok();
        let (sink, tally) = counted_sink(OutFile::new(file), format, write_header)
            .map_err(|e| OutputError::Write(shown, e))?;
        Ok(Output {
            path,
            place,
            sidecar,
            sync_handle,
            notes,
            ..Output::over(format, sink, tally)
        })
    }

    /// An output writing to `sink`, nothing more known yet (no file, no sidecar).
    fn over(format: Format, sink: Box<dyn RowSink + Send>, tally: Tally) -> Output {
        Output {
            path: None,
            place: None,
            created: None,
            pending: None,
            format,
            sink,
            sync_handle: None,
            _lock: None,
            sidecar: None,
            sidecar_replace: false,
            sidecar_id: None,
            earlier_sessions: Vec::new(),
            meta: None,
            written: 0,
            flushed: 0,
            tally,
            link_checked: None,
            notes: Vec::new(),
            stdout_file: None,
        }
    }

    /// Stdout. When it is a regular file (`> run.csv`), a CSV recording's metadata goes to the
    /// sidecar next to that file, where `summary` looks for it, and the file is locked for the
    /// session as `-o` is.
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
        let shown = |p: &Path| format!("stdout ({})", p.display());
        let side = match (format, &file_path) {
            (Format::Csv, Some(p)) => {
                let s = sidecar_path(p);
                Some(Place::resolve(&s).map_err(|e| OutputError::Open(s, "create", e))?)
            }
            _ => None,
        };
        // `>>`: the shell appends; the sidecar keeps the earlier sessions as --append does.
        let appending = handle.as_ref().is_some_and(|f| {
            rustix::fs::fcntl_getfl(f).is_ok_and(|fl| fl.contains(rustix::fs::OFlags::APPEND))
        }) || append;
        let nonempty = handle
            .as_ref()
            .is_some_and(|f| f.metadata().is_ok_and(|m| m.len() > 0));
        // The file opened again through /proc/self/fd/1 (the same file, whatever its name
        // now): to read its head before appending, and to hold its lock.
        let must_read = appending && nonempty;
        let again = match (&handle, &file_path) {
            (Some(h), Some(p)) => match reopen_stdout(h) {
                Ok(f) => Some(f),
                // Not readable (a write-only file), and nothing to read: the lock on stdout's
                // own descriptor then.
                Err(OpenError::Io(_)) if !must_read => {
                    crate::output::lock_file(h)
                        .map_err(|e| OutputError::Open(shown(p).into(), "write", e))?;
                    None
                }
                Err(e) => return Err(OutputError::Open(shown(p).into(), "write", e)),
            },
            _ => None,
        };
        if let (Some(s), false, false) = (&side, appending, force) {
            if !matches!(s.at(), Ok(At::Nothing)) {
                return Err(OutputError::Check(
                    crate::output::OutputCheckError::Exists {
                        path: s.path().to_path_buf(),
                        flag: "the metadata sidecar of stdout's file".into(),
                    },
                ));
            }
        }
        // `>> run.csv` onto a recording: checked and repaired as --append does.
        let mut notes = Vec::new();
        let mut earlier_sessions = Vec::new();
        let write_header = match (&file_path, &again, must_read) {
            (Some(p), Some(f), true) => {
                let plan = check_append(f, p, format)?;
                if let Some(s) = &side {
                    earlier_sessions = sessions_before(p, s, plan.rows.as_ref())?;
                }
                plan.apply(f, p, &mut notes)?
            }
            (_, _, true) => false,
            (_, _, false) => {
                if let (Some(s), Some(p), true) = (&side, &file_path, appending) {
                    earlier_sessions = sessions_before(p, s, None)?;
                }
                true
            }
        };
        let (sink, tally) = counted_sink(io::stdout(), format, write_header)
            .map_err(|e| OutputError::Write("stdout".into(), e))?;
        Ok(Output {
            sync_handle: handle,
            _lock: again,
            sidecar: side,
            sidecar_replace: force || appending,
            earlier_sessions,
            notes,
            stdout_file: file_path,
            ..Output::over(format, sink, tally)
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
        self.sidecar.as_ref().map(|s| s.path().to_path_buf())
    }

    /// Samples known to be in the file: those of the last successful flush, and after it
    /// those whose every byte the OS took (the buffer writes out as it fills).
    pub fn flushed_samples(&self) -> u64 {
        self.flushed + self.tally.reached_rows()
    }

    /// Removes what memmon created for a recording that is not going to happen (the command
    /// could not be launched): the file and its sidecar, if the names are still memmon's
    /// files. An existing recording (`--append`, or one `--force` was to replace), a stream or
    /// stdout is left as it is. Returns whether the file was removed.
    pub fn discard(&mut self) -> bool {
        if let Some(pending) = self.pending.take() {
            // Never put in place: only the new file goes.
            drop(pending);
            self.created = None;
            return true;
        }
        let (Some(place), Some(id)) = (&self.place, self.created.take()) else {
            return false;
        };
        if let (Some(s), Some(sid)) = (&self.sidecar, self.sidecar_id.take()) {
            s.remove_if(sid);
        }
        place.remove_if(id)
    }

    /// Writes the metadata: a sidecar for CSV, the first record for JSON Lines. The CSV
    /// header is flushed too, so that a recorder killed at once leaves a readable file. When
    /// none of it can be written (a full disk), a file memmon created is removed again.
    pub fn write_meta(&mut self, meta: &Meta) -> Result<(), OutputError> {
        match self.write_meta_once(meta) {
            Err(OutputError::Write(what, e)) if self.created.is_some() => {
                let shown = match self.pending {
                    Some(_) => format!(
                        "the new file that was to replace {} (left as it was)",
                        self.describe()
                    ),
                    None => self.describe(),
                };
                if self.discard() {
                    Err(OutputError::Unwritten(what, e, shown))
                } else {
                    Err(OutputError::Write(what, e))
                }
            }
            r => r,
        }
    }

    fn write_meta_once(&mut self, meta: &Meta) -> Result<(), OutputError> {
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
            // A directory removed between the header and the sidecar: say what happened to
            // the recording, not that its sidecar had nowhere to go.
            if let Err(e) = self.write_sidecar() {
                self.check_linked()?;
                return Err(e);
            }
        }
        Ok(())
    }

    pub fn write_sample(&mut self, s: &Sample) -> Result<(), OutputError> {
        self.written += 1;
        let r = self.sink.write_sample(s);
        if r.is_ok() {
            self.tally.row_written();
        }
        self.flushed += self.tally.settle();
        r.map_err(|e| self.err(e))
    }

    /// Flushes to the file, and checks (at most every [`LINK_CHECK_EVERY`]) that the file still
    /// has a name: a recording whose file (or directory) was deleted is an error, not hours of
    /// writing into nothing.
    pub fn flush(&mut self) -> Result<(), OutputError> {
        self.sink.flush().map_err(|e| self.err(e))?;
        if let Some(pending) = self.pending.take() {
            pending
                .commit()
                .map_err(|e| OutputError::Open(PathBuf::from(self.describe()), "replace", e))?;
        }
        let due = self
            .link_checked
            .is_none_or(|t| t.elapsed() >= LINK_CHECK_EVERY);
        if due {
            self.check_linked()?;
        }
        self.flushed = self.written;
        self.tally.row_ends.clear();
        Ok(())
    }

    /// An error when the file has lost its last name (it or its directory was deleted); the
    /// sidecar memmon wrote for it goes too (it would describe a recording that is gone).
    fn check_linked(&mut self) -> Result<(), OutputError> {
        if self.unlinked() {
            if let (Some(s), Some(sid)) = (&self.sidecar, self.sidecar_id.take()) {
                s.remove_if(sid);
            }
            self.sidecar = None;
            return Err(OutputError::Removed(PathBuf::from(self.describe())));
        }
        self.link_checked = Some(std::time::Instant::now());
        Ok(())
    }

    /// The recording's file has lost its last name (it or its directory was deleted).
    fn unlinked(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.sync_handle
            .as_ref()
            .is_some_and(|f| f.metadata().is_ok_and(|m| m.is_file() && m.nlink() == 0))
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
            if let Err(e) = self.write_sidecar() {
                self.check_linked()?;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Writes the sidecar whole (random temporary name created exclusively in the recording's
    /// directory, fsynced, renamed over): never through a planted symlink, never to a FIFO or
    /// device, never half.
    fn write_sidecar(&mut self) -> Result<(), OutputError> {
        let (Some(side), Some(meta)) = (&self.sidecar, &self.meta) else {
            return Ok(());
        };
        let text = serde_json::to_string_pretty(meta).expect("serializes") + "\n";
        // fsynced at the end (the start's copy is replaced then; its fsync would only delay
        // the first sample).
        let sync = meta.end.is_some();
        let id = side
            .write_whole(self.sidecar_replace, sync, false, |f| {
                f.write_all(text.as_bytes())
            })
            .map_err(|e| match e {
                OpenError::Exists => OutputError::Check(crate::output::OutputCheckError::Exists {
                    path: side.path().to_path_buf(),
                    flag: "the recording's metadata sidecar".into(),
                }),
                e => OutputError::Write(side.path().display().to_string(), e.into()),
            })?;
        self.sidecar_id = id;
        self.sidecar_replace = true;
        Ok(())
    }

    fn err(&self, e: io::Error) -> OutputError {
        OutputError::Write(self.describe(), e)
    }
}

/// What of a recording's rows reached the file between flushes: the bytes handed to the
/// buffered writer (`accepted`, above its buffer) and those the OS took from it (`reached`,
/// below it; a full disk stops it at what the file holds). A row is in the file once the
/// bytes up to its end have reached it.
struct Tally {
    accepted: Arc<AtomicU64>,
    reached: Arc<AtomicU64>,
    /// Where each row not yet counted as in the file ends (bytes of the stream), oldest first.
    row_ends: VecDeque<u64>,
}

impl Tally {
    /// A row was handed over whole: it ends where the bytes accepted end now.
    fn row_written(&mut self) {
        self.row_ends
            .push_back(self.accepted.load(Ordering::Relaxed));
    }

    /// The rows not yet counted whose every byte reached the file.
    fn reached_rows(&self) -> u64 {
        let reached = self.reached.load(Ordering::Relaxed);
        self.row_ends
            .iter()
            .take_while(|&&end| end <= reached)
            .count() as u64
    }

    /// Counts (and forgets) the rows that reached the file: how many.
    fn settle(&mut self) -> u64 {
        let n = self.reached_rows();
        self.row_ends.drain(..n as usize);
        n
    }
}

/// A writer that counts the bytes its inner writer took.
struct Counted<W> {
    inner: W,
    n: Arc<AtomicU64>,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The row writer of `format` over `out` (a file or stdout), through a 64 KiB buffer whose
/// bytes are counted on both sides ([`Tally`]); the CSV header first unless `write_header` is
/// false (appending after one).
fn counted_sink<W: Write + Send + 'static>(
    out: W,
    format: Format,
    write_header: bool,
) -> io::Result<(Box<dyn RowSink + Send>, Tally)> {
    let (accepted, reached) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let below = Counted {
        inner: out,
        n: reached.clone(),
    };
    let above = Counted {
        inner: BufWriter::with_capacity(64 * 1024, below),
        n: accepted.clone(),
    };
    let sink: Box<dyn RowSink + Send> = match format {
        Format::Csv => Box::new(csv::CsvWriter::new(above, write_header)?),
        Format::Jsonl => Box::new(jsonl::JsonlWriter::new(above)),
    };
    let tally = Tally {
        accepted,
        reached,
        row_ends: VecDeque::new(),
    };
    Ok((sink, tally))
}

/// stdout's regular file opened again for reading and writing through /proc/self/fd/1 (the
/// same file whatever its name is now), checked to be the same file, and locked.
fn reopen_stdout(handle: &File) -> Result<File, OpenError> {
    use rustix::fs::{open, Mode, OFlags};
    let flags = OFlags::RDWR | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let again = File::from(open("/proc/self/fd/1", flags, Mode::empty())?);
    if FileId::of_file(&again)? != FileId::of_file(handle)? {
        return Err(OpenError::Unstable);
    }
    crate::output::lock_file(&again)?;
    Ok(again)
}

/// What appending to an existing recording takes: a header still to write (an empty file),
/// and an incomplete last line to cut (`keep` bytes of `len` kept); the rows a CSV recording
/// already holds.
struct AppendPlan {
    header: bool,
    cut: Option<(u64, u64)>,
    rows: Option<ExistingRows>,
}

/// A CSV recording's complete lines after its header, before appending.
struct ExistingRows {
    /// The lowest and highest `unix_ms` of its first and last row (`None` where neither
    /// parses): what a sidecar's sessions must cover.
    times: Option<(u64, u64)>,
    /// Its complete rows (lines after the header): at most what its sidecar's end records
    /// count, if the sidecar is its own.
    rows: u64,
}

impl AppendPlan {
    /// Cuts the incomplete last line off, saying so in `notes`; whether a CSV header must
    /// still be written.
    fn apply(&self, f: &File, path: &Path, notes: &mut Vec<String>) -> Result<bool, OutputError> {
        if let Some((keep, len)) = self.cut {
            f.set_len(keep)
                .map_err(|e| OutputError::Write(path.display().to_string(), e))?;
            notes.push(format!(
                "{} ended in an incomplete line ({} with no newline, what a killed recorder or a full disk leaves): cut it off before appending",
                path.display(),
                crate::units::count(len - keep, "byte")
            ));
        }
        Ok(self.header)
    }
}

/// Before appending to `f`: checks, changing nothing, that it is a recording of `format` (its
/// first line a whole line: this memmon's CSV header, or a JSON Lines metadata record), and
/// finds an incomplete last line to cut (what a SIGKILL or a full disk leaves). An empty file
/// takes a header. Anything else is refused and left as it is.
fn check_append(f: &File, path: &Path, format: Format) -> Result<AppendPlan, OutputError> {
    use std::os::unix::fs::FileExt;
    let refuse = |why: String| OutputError::CannotAppend(path.to_path_buf(), why);
    let io_err = |e: io::Error| OutputError::Open(path.to_path_buf(), "append to", e.into());
    let len = f.metadata().map_err(io_err)?.len();
    if len == 0 {
        return Ok(AppendPlan {
            header: true,
            cut: None,
            rows: None,
        });
    }
    // The first line, read at its offset (the file's own offset is left alone).
    let mut head = vec![0u8; (len as usize).min(1 << 20)];
    let mut got = 0;
    while got < head.len() {
        match f.read_at(&mut head[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(e)),
        }
    }
    head.truncate(got);
    let Some(end) = memchr::memchr(b'\n', &head) else {
        return Err(refuse(format!(
            "its first {} bytes hold no complete line: not a memmon recording (left as it is)",
            head.len()
        )));
    };
    let first = head[..end].strip_suffix(b"\r").unwrap_or(&head[..end]);
    let name = |f: Format| match f {
        Format::Csv => "CSV",
        Format::Jsonl => "JSON Lines",
    };
    let found = if first.first() == Some(&b'{') {
        if !matches!(jsonl::parse_line(first), Ok(jsonl::Line::Meta(_))) {
            return Err(refuse(
                "its first line is not a JSON Lines recording's metadata record: not a memmon recording (left as it is)".into(),
            ));
        }
        Format::Jsonl
    } else if first.trim_ascii_end() == csv::header().as_bytes() {
        Format::Csv
    } else if csv::CsvLayout::from_header(first.trim_ascii_end()).is_ok() {
        if format == Format::Csv {
            return Err(refuse(
                "its header differs from this memmon's columns (left as it is)".into(),
            ));
        }
        Format::Csv
    } else {
        return Err(refuse(
            "its first line is neither a memmon CSV header nor a JSON Lines metadata record: not a memmon recording (left as it is)".into(),
        ));
    };
    if found != format {
        return Err(refuse(format!(
            "it is a {} recording and this one is {} (name the format with --format, or use another file)",
            name(found),
            name(format)
        )));
    }
    // The end of the last complete line: search back from the end.
    let mut keep = 0u64;
    let mut pos = len;
    let mut buf = vec![0u8; 64 * 1024];
    while pos > 0 {
        let n = (pos as usize).min(buf.len());
        pos -= n as u64;
        f.read_exact_at(&mut buf[..n], pos).map_err(io_err)?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            keep = pos + i as u64 + 1;
            break;
        }
    }
    let body_at = end as u64 + 1;
    let rows = if format == Format::Csv && keep > body_at {
        Some(ExistingRows {
            times: row_times(f, first, &head[end + 1..], body_at, keep),
            rows: count_lines(f, body_at, keep).map_err(io_err)?,
        })
    } else {
        None
    };
    Ok(AppendPlan {
        header: false,
        cut: (keep < len).then_some((keep, len)),
        rows,
    })
}

/// The newlines in `f` from byte `from` to byte `to`.
fn count_lines(f: &File, from: u64, to: u64) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 1 << 20];
    let (mut at, mut lines) = (from, 0u64);
    while at < to {
        let n = ((to - at) as usize).min(buf.len());
        f.read_exact_at(&mut buf[..n], at)?;
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        at += n as u64;
    }
    Ok(lines)
}

/// The lowest and highest `unix_ms` of a CSV recording's first row (at the start of `body`,
/// the head read after the header line) and of its last complete row (ending at `keep`), as
/// the readers parse them; `None` where neither is a row (damaged, or a line over 64 KiB).
fn row_times(f: &File, header: &[u8], body: &[u8], body_at: u64, keep: u64) -> Option<(u64, u64)> {
    use std::os::unix::fs::FileExt;
    let layout = csv::CsvLayout::from_header(header.trim_ascii_end()).ok()?;
    let mut fields = Vec::new();
    let mut unix_ms = |line: &[u8]| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        layout
            .parse(line, &mut fields)
            .ok()
            .map(|s| s.unix_ms)
            .filter(|&t| t > 0)
    };
    let first = memchr::memchr(b'\n', body).and_then(|k| unix_ms(&body[..k]));
    // The last row: the line before the newline at `keep - 1`, read back at most 64 KiB.
    let from = body_at.max(keep.saturating_sub(64 * 1024));
    let mut tail = vec![0u8; (keep - 1 - from) as usize];
    let last =
        f.read_exact_at(&mut tail, from)
            .ok()
            .and_then(|()| match memchr::memrchr(b'\n', &tail) {
                Some(i) => unix_ms(&tail[i + 1..]),
                None if from == body_at => unix_ms(&tail),
                None => None,
            });
    match (first, last) {
        (Some(a), Some(b)) => Some((a.min(b), a.max(b))),
        (Some(t), None) | (None, Some(t)) => Some((t, t)),
        (None, None) => None,
    }
}

/// The sessions recorded in CSV recording `csv` before this one, from its sidecar, oldest
/// first (the sidecar's own session last, its `earlier_sessions` before it). Refused, as every
/// reader refuses them, when the sidecar cannot be read (a symlink, a FIFO, not valid) or
/// describes another recording (`recording::check_sidecar_times` on `rows`); and when rows
/// are there without a sidecar: a new sidecar would hold only the new session, and readers
/// would give its metadata to the first session's rows. No rows and no sidecar: none.
fn sessions_before(
    csv: &Path,
    side: &Place,
    rows: Option<&ExistingRows>,
) -> Result<Vec<Meta>, OutputError> {
    let refuse = |why: String| OutputError::CannotAppend(csv.to_path_buf(), why);
    let text = match side.read_regular(SIDECAR_MAX_BYTES) {
        Ok(Some(t)) => t,
        Ok(None) if rows.is_some() => {
            return Err(refuse(format!(
                "it holds rows but no metadata sidecar ({} is not there; recorded to a pipe, or the sidecar was lost), so a new session's metadata could not be told from theirs: record to a new file (left as it is)",
                side.path().display()
            )))
        }
        Ok(None) => return Ok(Vec::new()),
        Err(e) if e.is_refusal() => {
            return Err(OutputError::CannotAppend(
                side.path().to_path_buf(),
                format!("{e}; it is not read"),
            ))
        }
        Err(e) => return Err(OutputError::Open(side.path().to_path_buf(), "read", e)),
    };
    let meta = parse_meta(&text)
        .map_err(|e| OutputError::CannotAppend(side.path().to_path_buf(), e.to_string()))?;
    if let Some(times) = rows.and_then(|r| r.times) {
        recording::check_sidecar_times(side.path(), csv, &meta, times)
            .map_err(|e| refuse(format!("{e} (left as it is)")))?;
    }
    if let Some(rows) = rows {
        recording::check_sidecar_counts(side.path(), csv, &meta, rows.rows)
            .map_err(|e| refuse(format!("{e} (left as it is)")))?;
    }
    Ok(sessions_of(meta))
}

fn parse_meta(text: &[u8]) -> Result<Meta, MetaError> {
    let m = serde_json::from_slice(text).map_err(MetaError::Invalid)?;
    meta::check_schema(&m).map_err(MetaError::Schema)?;
    Ok(m)
}

/// A recording's metadata sidecar that `--append` cannot go on: not valid JSON of a `Meta` (it
/// would be lost), or of a schema this memmon does not write (its rows would mean two things).
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("its metadata is not valid ({0}); it would be lost")]
    Invalid(serde_json::Error),
    #[error("{0}; rows of this memmon appended to it would mean something else")]
    Schema(meta::SchemaError),
}

impl crate::error::Classified for MetaError {
    /// An output refused: bad input, as `OutputError::CannotAppend` is.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// A sidecar's sessions, oldest first: its `earlier_sessions`, then its own.
fn sessions_of(mut last: Meta) -> Vec<Meta> {
    let mut all = std::mem::take(&mut last.earlier_sessions);
    all.push(last);
    all
}

#[cfg(test)]
fn parse_sessions(text: &[u8]) -> Result<Vec<Meta>, MetaError> {
    parse_meta(text).map(sessions_of)
}

/// `run.csv` → `run.csv.meta.json`.
pub fn sidecar_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".meta.json");
    PathBuf::from(s)
}

/// Opens the side table `path` of a recording (`what`: "the anatomy table"): created, refused
/// when it exists unless `force` (then replaced), or with `append` opened as it is; a FIFO or
/// a device is refused (a side table is a regular file beside the recording). The place is
/// returned with it, for a writer that removes what it created.
pub(crate) fn open_side_table(
    path: &Path,
    force: bool,
    append: bool,
    what: &str,
) -> Result<(crate::output::Place, crate::output::Opened), OutputError> {
    let verb = if append { "append to" } else { "create" };
    let cannot = |e| OutputError::Open(path.to_path_buf(), verb, e);
    let place = crate::output::Place::resolve(path).map_err(cannot)?;
    let opened = if append {
        place.open_append()
    } else {
        place.create_recording(force)
    }
    .map_err(|e| match e {
        crate::output::OpenError::Exists => OutputError::Exists(path.to_path_buf()),
        e => cannot(e),
    })?;
    if opened.stream {
        return Err(OutputError::CannotAppend(
            path.to_path_buf(),
            format!("{what} must be a regular file"),
        ));
    }
    Ok((place, opened))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CSV recording of `rows` samples (several read chunks long when large).
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

    /// A finished CSV recording of `rows` samples one second apart from `t0` (unix ms), with
    /// a sidecar of a session that ran from `started` to `ended` when `started` is given.
    fn recording(dir: &Path, rows: u64, t0: u64, started: Option<(u64, u64)>) -> PathBuf {
        let p = dir.join("r.csv");
        let mut buf = Vec::new();
        let mut w = csv::CsvWriter::new(&mut buf, true).unwrap();
        for i in 0..rows {
            let s = Sample {
                unix_ms: t0 + i * 1000,
                elapsed_s: i as f64,
                rss_bytes: 1 << 20,
                processes: 1,
                ..Sample::default()
            };
            w.write_sample(&s).unwrap();
        }
        drop(w);
        std::fs::write(&p, buf).unwrap();
        if let Some((started, ended)) = started {
            let meta = Meta {
                started_unix_ms: started,
                end: Some(EndInfo {
                    ended_unix_ms: ended,
                    samples: rows,
                    ..EndInfo::default()
                }),
                ..Meta::example("pid")
            };
            std::fs::write(sidecar_path(&p), serde_json::to_vec(&meta).unwrap()).unwrap();
        }
        p
    }

    fn append(p: &Path) -> Result<Output, OutputError> {
        Output::create(Some(p), Format::Csv, false, true)
    }

    #[test]
    fn append_onto_rows_without_a_sidecar_is_refused_leaving_the_file_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let t = 1_700_000_000_000;
        let p = recording(dir.path(), 3, t, None);
        let before = std::fs::read(&p).unwrap();
        let err = append(&p).err().unwrap();
        assert!(matches!(err, OutputError::CannotAppend(..)), "{err}");
        assert!(
            err.to_string()
                .contains("holds rows but no metadata sidecar"),
            "{err}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), before);
        assert!(!sidecar_path(&p).exists());
        // A header alone has no session to mistake: appended to.
        std::fs::write(&p, csv::header() + "\n").unwrap();
        assert!(append(&p).is_ok());
    }

    #[test]
    fn append_refuses_a_sidecar_of_another_recording_as_the_readers_do() {
        let dir = tempfile::tempdir().unwrap();
        let t = 1_700_000_000_000;
        const HOUR: u64 = 3_600_000;
        // The sidecar's session ran an hour after the rows.
        let p = recording(dir.path(), 3, t, Some((t + HOUR, t + HOUR + 500)));
        let (rows, side) = (
            std::fs::read(&p).unwrap(),
            std::fs::read(sidecar_path(&p)).unwrap(),
        );
        let err = append(&p).err().unwrap();
        assert!(matches!(err, OutputError::CannotAppend(..)), "{err}");
        assert!(err.to_string().contains("does not describe"), "{err}");
        assert_eq!(std::fs::read(&p).unwrap(), rows);
        assert_eq!(std::fs::read(sidecar_path(&p)).unwrap(), side);
        // Its own sidecar (the rows within its session): appended to.
        let p = recording(dir.path(), 3, t, Some((t, t + 2500)));
        let out = append(&p).unwrap();
        assert_eq!(out.earlier_sessions.len(), 1);
        drop(out);
        // One whose session was within seconds of the rows but wrote fewer of them.
        let p = recording(dir.path(), 3, t, Some((t, t + 2500)));
        let mut meta: Meta =
            serde_json::from_slice(&std::fs::read(sidecar_path(&p)).unwrap()).unwrap();
        meta.end.as_mut().unwrap().samples = 2;
        std::fs::write(sidecar_path(&p), serde_json::to_vec(&meta).unwrap()).unwrap();
        let rows = std::fs::read(&p).unwrap();
        let err = append(&p).err().unwrap();
        assert!(
            err.to_string()
                .contains("its end records count 2 rows, the file holds 3 rows"),
            "{err}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), rows);
    }

    /// Takes `left` bytes, then fails as a full disk does (a short write first).
    struct FailAfter {
        left: usize,
    }

    impl Write for FailAfter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.left == 0 {
                return Err(io::Error::from_raw_os_error(28));
            }
            let k = buf.len().min(self.left);
            self.left -= k;
            Ok(k)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn rows_the_buffer_wrote_out_before_a_full_disk_count_as_kept() {
        use crate::sampler::sink::SampleSink;
        let sample = |i: u64| Sample {
            unix_ms: 1_700_000_000_000 + i,
            elapsed_s: i as f64 / 1000.0,
            rss_bytes: 123_456_789 + i,
            processes: 1,
            ..Sample::default()
        };
        for left in [0, 10, 100_000, 150_003] {
            // What reached the disk: the rows whose every byte is within `left`.
            let mut all = Vec::new();
            let mut w = csv::CsvWriter::new(&mut all, true).unwrap();
            for i in 0..5000 {
                w.write_sample(&sample(i)).unwrap();
            }
            drop(w);
            let in_file = all[..left.min(all.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                .saturating_sub(1) as u64; // the header's
            let (sink, tally) = counted_sink(FailAfter { left }, Format::Csv, true).unwrap();
            let mut out = Output::over(Format::Csv, sink, tally);
            let mut taken = 0;
            for i in 0..5000 {
                taken += 1;
                if out.write_sample(&sample(i)).is_err() {
                    break;
                }
            }
            assert!(taken < 5000, "the disk filled");
            assert_eq!(out.flushed_samples(), in_file, "{left} bytes");
            assert!(out.flush().is_err());
            assert_eq!(out.flushed_samples(), in_file, "{left} bytes, flushed");
            let said = out.kept(taken, false);
            assert!(
                said.starts_with(&format!("at least {in_file} of the {taken} samples")),
                "{said}"
            );
        }
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
