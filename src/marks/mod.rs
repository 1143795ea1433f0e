//! Markers: labelled instants that split a recording into phases. They come from `memmon mark`
//! over a Unix socket (`socket.rs`), from lines of a followed log (`logfollow.rs`) or of a
//! launched command's stdout (`stdout.rs`); each becomes a `mark:LABEL` sample of the recorder.

pub mod logfollow;
pub mod socket;
pub mod stdout;

use crate::exit::Class;
use crate::model::sample::Event;
use crate::reporter::Reporter;
use crate::sampler::record::{Control, ControlHandle, Recorder};
use crate::sys::{self, Waker};
use regex::Regex;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Labels longer than this (in characters) are cut (readers cut longer ones too).
pub const MAX_LABEL_CHARS: usize = crate::model::sample::MAX_LABEL_CHARS;

/// Why markers cannot be taken or sent, each with its class (`exit::Class`).
#[derive(Debug, thiserror::Error)]
pub enum MarkError {
    /// A marker regex that does not compile, named by its flag.
    #[error("{flag}: not a valid regex: {error}")]
    Regex {
        flag: &'static str,
        error: regex::Error,
    },
    #[error("--mark-log needs --mark-regex REGEX")]
    LogWithoutRegex,
    #[error("--mark-regex needs --mark-log FILE")]
    RegexWithoutLog,
    #[error("--mark-log {}: it is a directory, not a log file", .0.display())]
    LogIsDirectory(PathBuf),
    /// `--socket PATH` cannot be made the recording's socket.
    #[error("--socket")]
    Bind(#[source] socket::SocketError),
    #[error("the marker's label is empty")]
    EmptyLabel,
    #[error("no running recorder found (looked for memmon-PID.sock in {dirs}); start `memmon record`, or give --socket PATH")]
    NoRecorder { dirs: String },
    #[error("several recorders are running ({list}); choose one with --socket PATH")]
    SeveralRecorders { list: String },
    /// The recorder's socket could not be reached, or did not answer.
    #[error(transparent)]
    Send(socket::SocketError),
    #[error("the recorder on {} did not take the marker: {reason}", path.display())]
    NotTaken { path: PathBuf, reason: String },
}

impl crate::error::Classified for MarkError {
    /// No recorder to send to is `NoTarget`; a marker sent and not taken, or no answer,
    /// `Failure`; the rest is bad input.
    fn class(&self) -> Class {
        match self {
            MarkError::NoRecorder { .. } | MarkError::Send(socket::SocketError::Connect(..)) => {
                Class::NoTarget
            }
            MarkError::Regex { .. }
            | MarkError::LogWithoutRegex
            | MarkError::RegexWithoutLog
            | MarkError::LogIsDirectory(_)
            | MarkError::Send(socket::SocketError::BadPath(..))
            | MarkError::Bind(_)
            | MarkError::EmptyLabel
            | MarkError::SeveralRecorders { .. } => Class::Usage,
            MarkError::Send(_) | MarkError::NotTaken { .. } => Class::Failure,
        }
    }
}

/// A regex that turns lines into marker labels: its `(?P<label>...)` group when it has one,
/// else the whole match.
#[derive(Debug, Clone)]
pub struct MarkPattern {
    re: Regex,
    has_label: bool,
}

impl MarkPattern {
    /// Compiles `text`; `flag` names the flag in the error.
    pub fn new(flag: &'static str, text: &str) -> Result<MarkPattern, MarkError> {
        let re = Regex::new(text).map_err(|error| MarkError::Regex { flag, error })?;
        let has_label = re.capture_names().any(|n| n == Some("label"));
        Ok(MarkPattern { re, has_label })
    }

    /// The label of the marker this line makes, if it matches (and the label is not empty).
    pub fn label(&self, line: &str) -> Option<String> {
        let caps = self.re.captures(line)?;
        let whole = caps.get(0)?;
        let m = if self.has_label {
            caps.name("label").unwrap_or(whole)
        } else {
            whole
        };
        let label = clean_label(m.as_str());
        (!label.is_empty()).then_some(label)
    }
}

/// A label fit for the event column: one line, trimmed, control characters made spaces, at
/// most `MAX_LABEL_CHARS` characters.
pub fn clean_label(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_LABEL_CHARS)
        .collect();
    one_line.trim().to_string()
}

/// What the marker flags ask for, checked before the recording starts (so a bad regex or a
/// socket in use leaves no output file behind).
pub struct MarkSetup {
    socket: Option<socket::Listener>,
    log: Option<logfollow::LogFollower>,
    log_pattern: Option<MarkPattern>,
    stdout_pattern: Option<MarkPattern>,
    /// Why there is no socket, told after the recorder's first messages.
    no_socket_warning: Option<String>,
}

/// The options of `MarkSetup::prepare`, as given on the command line (`--mark-*`, `--socket`).
#[derive(Debug, Clone, Default)]
pub struct MarkOptions {
    pub mark_log: Option<PathBuf>,
    pub mark_regex: Option<String>,
    pub mark_stdout: Option<String>,
    /// `None`: the default place (`socket::default_path`).
    pub socket: Option<PathBuf>,
    /// Create no socket at all.
    pub no_socket: bool,
}

impl MarkSetup {
    /// The marker socket's path, when there is one: what a launched command is told in
    /// `MEMMON_SOCKET`, so that markers from its own code (the `memmon-mark` crate, or any
    /// program that speaks the protocol) reach this recorder.
    pub fn socket_path(&self) -> Option<&std::path::Path> {
        self.socket.as_ref().map(|l| l.path())
    }

    /// Compiles the regexes, binds the socket and opens the log at its end. Errors name the flag.
    pub fn prepare(o: &MarkOptions) -> Result<MarkSetup, MarkError> {
        let log_pattern = match (&o.mark_log, &o.mark_regex) {
            (Some(_), Some(re)) => Some(MarkPattern::new("--mark-regex", re)?),
            (Some(_), None) => return Err(MarkError::LogWithoutRegex),
            (None, Some(_)) => return Err(MarkError::RegexWithoutLog),
            (None, None) => None,
        };
        if let Some(p) = o.mark_log.as_ref().filter(|p| p.is_dir()) {
            return Err(MarkError::LogIsDirectory(p.clone()));
        }
        let stdout_pattern = match &o.mark_stdout {
            Some(re) => Some(MarkPattern::new("--mark-stdout", re)?),
            None => None,
        };
        let log = o
            .mark_log
            .as_ref()
            .map(|p| logfollow::LogFollower::open_at_end(p.clone()));
        let mut no_socket_warning = None;
        let socket = if o.no_socket {
            None
        } else {
            match &o.socket {
                Some(path) => Some(socket::Listener::bind(path).map_err(MarkError::Bind)?),
                None => match socket::default_path().and_then(|p| socket::Listener::bind(&p)) {
                    Ok(l) => Some(l),
                    Err(e) => {
                        no_socket_warning = Some(format!(
                            "no marker socket ({e}); `memmon mark` will not reach this recording (give --socket PATH)"
                        ));
                        None
                    }
                },
            }
        };
        Ok(MarkSetup {
            socket,
            log,
            log_pattern,
            stdout_pattern,
            no_socket_warning,
        })
    }

    /// Starts the threads that feed markers to the recorder. `stdout_to_stderr`: the recording
    /// goes to stdout, so the command's passed-through stdout goes to stderr. What the user
    /// should know (where to send a marker, which log is followed, a socket that could not be
    /// made) goes to `report`.
    pub fn start(
        self,
        rec: &mut Recorder,
        stdout_to_stderr: bool,
        report: &Reporter,
    ) -> MarkSources {
        let control = rec.control();
        let mut sources = MarkSources {
            socket: None,
            log: None,
            relay: None,
        };
        if let Some(w) = &self.no_socket_warning {
            report.warning(w);
        }
        if let Some(listener) = self.socket {
            let path = listener.path().to_path_buf();
            match listener.serve(control.clone()) {
                Ok(serving) => {
                    sources.socket = Some(serving);
                    report.note(&format!(
                        "add a marker with: memmon mark LABEL --socket {}",
                        path.display()
                    ));
                }
                Err(e) => report.warning(&format!(
                    "no marker socket: cannot start its thread ({e}); `memmon mark` will not reach this recording"
                )),
            }
        }
        if let (Some(follower), Some(pattern)) = (self.log, self.log_pattern) {
            let path = follower.path().to_path_buf();
            let re = pattern.re.as_str().to_string();
            match follower.spawn(pattern, control.clone()) {
                Ok(following) => {
                    sources.log = Some(following);
                    report.note(&format!(
                        "following {} for markers (lines matching {re})",
                        path.display()
                    ));
                }
                Err(e) => report.warning(&format!(
                    "--mark-log {}: cannot start the thread that follows it ({e}); its lines give no markers",
                    path.display()
                )),
            }
        }
        if let Some(pattern) = self.stdout_pattern {
            if let Some(pipe) = rec.take_command_stdout_for_markers() {
                match stdout::spawn_relay(pipe, pattern, control, stdout_to_stderr) {
                    Ok(relay) => sources.relay = Some(relay),
                    Err(e) => report.warning(&format!(
                        "--mark-stdout: cannot start the thread that relays the command's output ({e}); \
                         that output is lost and gives no markers"
                    )),
                }
            }
        }
        sources
    }
}

/// The running marker sources. Dropping it stops them and removes the socket.
pub struct MarkSources {
    socket: Option<socket::Serving>,
    log: Option<logfollow::Following>,
    relay: Option<stdout::Relay>,
}

impl Drop for MarkSources {
    fn drop(&mut self) {
        // The log follower and the socket stop within one poll; the relay drains the command's
        // remaining output (bounded wait: a descendant may keep the pipe open).
        drop(self.log.take());
        drop(self.socket.take());
        if let Some(r) = self.relay.take() {
            r.finish(std::time::Duration::from_secs(2));
        }
    }
}

/// `memmon mark LABEL [--socket PATH]`: asks the running recorder for a marker and waits for
/// its reply. Without a socket path, the one running recorder is found in the default places.
/// Returns the socket it used and the recorder's reply.
pub fn request_mark(
    label: &str,
    socket_path: Option<&std::path::Path>,
) -> Result<(PathBuf, socket::Reply), MarkError> {
    let label = clean_label(label);
    if label.is_empty() {
        return Err(MarkError::EmptyLabel);
    }
    let path = match socket_path {
        Some(p) => p.to_path_buf(),
        None => {
            let mut found = socket::find_recorders();
            match found.len() {
                0 => {
                    let dirs: Vec<String> = socket::default_dirs()
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect();
                    return Err(MarkError::NoRecorder {
                        dirs: dirs.join(" and "),
                    });
                }
                1 => found.remove(0),
                _ => {
                    let list: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
                    return Err(MarkError::SeveralRecorders {
                        list: list.join(", "),
                    });
                }
            }
        }
    };
    let reply = socket::send(&path, &label).map_err(MarkError::Send)?;
    if !reply.ok {
        return Err(MarkError::NotTaken {
            reason: reply
                .error
                .clone()
                .unwrap_or_else(|| "no reason given".into()),
            path,
        });
    }
    Ok((path, reply))
}

/// Sends a marker to the recorder without waiting; false once the recording has ended.
pub(crate) fn send_mark(control: &ControlHandle, label: String) -> bool {
    control.send(Control::Event(Event::Mark(label)))
}

/// `send_mark` for a marker written at `at` (a log line): its row's lag counts from then.
pub(crate) fn send_mark_at(
    control: &ControlHandle,
    label: String,
    at: std::time::SystemTime,
) -> bool {
    control.send_at(Control::Event(Event::Mark(label)), at)
}

/// What a worker thread waits on: a flag, and a waker woken when the flag is set, so the thread
/// sleeps in `poll` on its own input and the waker (no timeout to look at the flag: an idle
/// recorder has no thread waking up for nothing).
pub(crate) struct Stop {
    flag: std::sync::atomic::AtomicBool,
    /// `None` when no eventfd could be made (then `wait` falls back to its timeout).
    waker: Option<Waker>,
}

/// How long a wait without a timeout lasts when it cannot be woken (no eventfd).
const WAIT_WITHOUT_WAKER: Duration = Duration::from_millis(100);

impl Stop {
    fn new() -> Stop {
        Stop {
            flag: std::sync::atomic::AtomicBool::new(false),
            waker: Waker::new().ok(),
        }
    }

    pub(crate) fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(w) = &self.waker {
            w.wake();
        }
    }

    /// Waits until `fd` (when given) is readable, the stop is set, or `timeout` (`None`: no
    /// timeout, unless there is no waker, then 100 ms). True when `fd` is readable.
    pub(crate) fn wait(&self, fd: Option<BorrowedFd<'_>>, timeout: Option<Duration>) -> bool {
        let stop_fd = self.waker.as_ref().map(|w| w.as_fd());
        let timeout = match (timeout, stop_fd) {
            (Some(t), _) => Some(t),
            (None, None) => Some(WAIT_WITHOUT_WAKER),
            (None, Some(_)) => None,
        };
        match sys::wait_ready([fd, stop_fd], timeout) {
            Ok([ready, _]) => ready,
            // `poll` on valid descriptors fails only without memory for its table: this wait
            // lasts as a timeout would (100 ms at most), then the caller looks at the stop.
            Err(_) => {
                std::thread::sleep(timeout.unwrap_or(WAIT_WITHOUT_WAKER));
                false
            }
        }
    }
}

/// A stop and the thread watching it.
pub(crate) struct Worker {
    stop: Arc<Stop>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts `f` on a thread named `name`; a thread that cannot be started (a `pids.max` or
    /// `RLIMIT_NPROC` reached) is an error for the caller to tell, not a source gone quiet.
    pub(crate) fn spawn(
        name: &str,
        f: impl FnOnce(&Stop) + Send + 'static,
    ) -> std::io::Result<Worker> {
        let stop = Arc::new(Stop::new());
        let theirs = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || f(&theirs))?;
        Ok(Worker {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.set();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_label_group_names_the_marker() {
        let p = MarkPattern::new("--mark-regex", r"phase (?P<label>\w+)").unwrap();
        assert_eq!(
            p.label("12:00 phase synthesis begins").as_deref(),
            Some("synthesis")
        );
        assert_eq!(p.label("nothing here"), None);
    }

    #[test]
    fn without_a_label_group_the_whole_match_is_the_label() {
        let p = MarkPattern::new("--mark-stdout", r"gpu prove (start|done)").unwrap();
        assert_eq!(
            p.label("[INFO] gpu prove done in 3s").as_deref(),
            Some("gpu prove done")
        );
    }

    #[test]
    fn labels_are_one_trimmed_line_of_bounded_length() {
        assert_eq!(clean_label(" a\tb\r\n"), "a b");
        assert_eq!(clean_label(&"x".repeat(1000)).len(), MAX_LABEL_CHARS);
    }

    #[test]
    fn a_bad_regex_names_its_flag() {
        let e = MarkPattern::new("--mark-regex", "phase (")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--mark-regex: not a valid regex"), "{e}");
    }
}
