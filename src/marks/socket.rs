//! The marker socket: a running recorder listens on a Unix socket (mode 0600, in
//! $XDG_RUNTIME_DIR or a private 0700 temp dir) and `memmon mark LABEL` asks it for a marker.
//! One JSON line each way: `{"mark":"LABEL"}` and the reply with the sample's time.
//! A request that says when its marker was made (`{"mark":"LABEL","at_unix_us":N}`, what the
//! `memmon-mark` crate sends from a daemon's own code) does not wait for its row: the marker is
//! queued like a log line's, stamped with that time (its row's `event_lag_us` counts from it),
//! and answered at once with `{"ok":true,"label":"LABEL","queued":true}`.
//!
//! Each client is answered on a thread of its own (a client that sends its request a byte at a
//! time delays nobody else), its whole request due within [`REQUEST_TIMEOUT`] of its connection.
//! A marker is either taken and answered, or not taken: the recorder takes it only if it gets
//! to it within [`SAMPLE_TIMEOUT`] and its client is still connected (`ProbeIfWanted`: whoever
//! of the recorder and this side claims the request first decides), so a client told it failed
//! never sees its marker land later. `memmon mark` waits [`REPLY_TIMEOUT`], well past both.

use super::{clean_label, Worker};
use crate::model::sample::{Event, Sample};
use crate::sampler::record::{Control, ControlHandle};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long a client may take to send its whole request, from its connection.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a marker waits for the recorder to take its sample; not taken after that.
pub const SAMPLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `memmon mark` waits for the reply: the two above and a sample's time, with room.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// Clients answered at once; one more is told to try again.
const MAX_CLIENTS: usize = 32;
/// The longest request line read.
const MAX_REQUEST_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{0} is used by a running recorder")]
    InUse(PathBuf),
    #[error("{0} exists and is not a socket")]
    NotASocket(PathBuf),
    #[error("{0} is not a private directory (it must be owned by you, mode 0700)")]
    NotPrivate(PathBuf),
    #[error("cannot create the socket {0}: {1}")]
    Create(PathBuf, std::io::Error),
    #[error("no recorder is listening on {0}: {1}")]
    Connect(PathBuf, std::io::Error),
    #[error("{0} cannot be a socket's path: {1}")]
    BadPath(PathBuf, std::io::Error),
    #[error("cannot connect to {0}: permission denied (a recorder's socket is mode 0600, in a private directory: send markers as the user who runs the recorder, or as root)")]
    Denied(PathBuf),
    #[error("no reply from the recorder on {0}: {1}")]
    NoReply(PathBuf, String),
}

impl crate::error::Classified for SocketError {
    /// No recorder to reach is no target (`memmon mark`); a path that cannot be a socket, or one
    /// already taken, is bad input; the rest failures.
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            SocketError::Connect(..) => Class::NoTarget,
            SocketError::InUse(_)
            | SocketError::NotASocket(_)
            | SocketError::NotPrivate(_)
            | SocketError::BadPath(..) => Class::Usage,
            SocketError::Create(..) | SocketError::Denied(_) | SocketError::NoReply(..) => {
                Class::Failure
            }
        }
    }
}

/// What `memmon mark` (and the `memmon-mark` crate) sends.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub mark: String,
    /// When the marker was made, in microseconds since the Unix epoch: the marker is queued
    /// without waiting for its row, and its row's lag counts from this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_unix_us: Option<u64>,
}

/// What the recorder answers a request with `at_unix_us`: the marker is queued, in order with
/// the markers before it; its row is taken as soon as the recorder gets to it.
#[derive(Debug, Serialize)]
struct Queued {
    ok: bool,
    label: String,
    queued: bool,
}

/// What the recorder answers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default)]
    pub label: String,
    /// The marker's sample: its time since the recording started and its RSS.
    #[serde(default)]
    pub elapsed_s: f64,
    #[serde(default)]
    pub unix_ms: u64,
    #[serde(default)]
    pub rss_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The directories where recorders put their sockets by default: $XDG_RUNTIME_DIR (when set to
/// an existing directory), then `memmon-UID` in the temp directory.
pub fn default_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        if x.is_absolute() && x.is_dir() {
            dirs.push(x);
        }
    }
    dirs.push(std::env::temp_dir().join(format!("memmon-{}", uid())));
    dirs
}

/// The socket path of this memmon: `memmon-PID.sock` in $XDG_RUNTIME_DIR when it is private
/// (mode 0700, as it should be), else in the private temp directory, created when missing.
pub fn default_path() -> Result<PathBuf, SocketError> {
    let mut dirs = default_dirs();
    let dir = dirs
        .pop()
        .expect("the temp directory is always a candidate");
    if let Some(xdg) = dirs.into_iter().find(|d| is_private(d)) {
        remove_stale(&xdg);
        return Ok(xdg.join(format!("memmon-{}.sock", std::process::id())));
    }
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .or_else(|e| if dir.is_dir() { Ok(()) } else { Err(e) })
            .map_err(|e| SocketError::Create(dir.clone(), e))?;
    }
    if !is_private(&dir) {
        return Err(SocketError::NotPrivate(dir));
    }
    remove_stale(&dir);
    Ok(dir.join(format!("memmon-{}.sock", std::process::id())))
}

/// Removes the default-named sockets in `dir` that nobody answers on and whose recorder is gone:
/// what a recorder killed with SIGKILL leaves (it never ran its cleanup). A socket a recorder
/// answers on is kept, and so is anything that is not a socket, and the socket of a process
/// that is alive: a recorder starting beside this one has bound its socket but may not listen
/// on it yet (a connection is refused then), and removing it would fail that recorder. (A
/// killed recorder's PID taken by another process keeps its socket until that one ends; a new
/// recorder of that PID replaces it.)
pub fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(socket_pid) else {
            continue;
        };
        if crate::sys::process_exists(pid) {
            continue;
        }
        let path = e.path();
        let is_socket = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        let refused = matches!(UnixStream::connect(&path),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused);
        if is_socket && refused {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// A directory owned by us that nobody else can enter.
fn is_private(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == uid() && m.mode() & 0o077 == 0)
}

/// A bound socket, not yet answering. Dropping it removes the socket file.
pub struct Listener {
    listener: UnixListener,
    file: SocketFile,
}

/// The socket's file, removed on drop if it is still ours (not replaced by another recorder's).
struct SocketFile {
    path: PathBuf,
    ino: u64,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Listener {
    /// Binds `path` with mode 0600. A stale socket left by a killed recorder is replaced; one a
    /// recorder still answers on is not.
    pub fn bind(path: &Path) -> Result<Listener, SocketError> {
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if !m.file_type().is_socket() {
                return Err(SocketError::NotASocket(path.to_path_buf()));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(SocketError::InUse(path.to_path_buf()));
            }
            let _ = std::fs::remove_file(path);
        }
        let create = |e: std::io::Error| SocketError::Create(path.to_path_buf(), e);
        // Created 0600 by the umask, not chmod'ed after: a chmod by path would follow a symlink
        // swapped in between. (Only the marker setup runs now: no other thread creates files.)
        let old_mask = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
        let bound = UnixListener::bind(path);
        rustix::process::umask(old_mask);
        let listener = bound.map_err(create)?;
        let ino = std::fs::symlink_metadata(path)
            .map(|m| m.ino())
            .map_err(create)?;
        let file = SocketFile {
            path: path.to_path_buf(),
            ino,
        };
        listener.set_nonblocking(true).map_err(create)?;
        Ok(Listener { listener, file })
    }

    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Answers requests until the returned value is dropped, which removes the socket file:
    /// a thread accepts, and each client is answered on a thread of its own. An error: the
    /// accepting thread could not be started (the socket file is removed).
    pub fn serve(self, control: ControlHandle) -> std::io::Result<Serving> {
        let Listener { listener, file } = self;
        let worker = Worker::spawn("memmon-socket", move |stop| {
            let active = Arc::new(AtomicUsize::new(0));
            // Sleeps until a client connects or the recording ends: no periodic wake-up.
            while !stop.is_set() {
                if !stop.wait(Some(listener.as_fd()), None) {
                    continue;
                }
                while let Ok((stream, _)) = listener.accept() {
                    let accepted = Instant::now();
                    if active.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
                        active.fetch_sub(1, Ordering::SeqCst);
                        busy(stream);
                        continue;
                    }
                    let (control, done) = (control.clone(), active.clone());
                    let spawned = std::thread::Builder::new()
                        .name("memmon-mark".into())
                        .spawn(move || {
                            answer(stream, accepted, &control);
                            done.fetch_sub(1, Ordering::SeqCst);
                        });
                    if spawned.is_err() {
                        active.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            }
        });
        Ok(Serving {
            _worker: worker?,
            _file: file,
        })
    }
}

/// A socket being answered; dropping it stops the thread, then removes the file.
pub struct Serving {
    _worker: Worker,
    _file: SocketFile,
}

/// Too many clients at once: told so at once, without reading the request.
fn busy(stream: UnixStream) {
    let _ = stream.set_nonblocking(true);
    write_reply(
        &stream,
        &failure(format!(
            "the recorder is answering {MAX_CLIENTS} other marker requests; try again (the marker was not taken)"
        )),
    );
}

/// Reads one request (whole within `REQUEST_TIMEOUT` of `accepted`), has the recorder take the
/// marker's sample (or queues it, for a request that says when it was made), and replies.
fn answer(stream: UnixStream, accepted: Instant, control: &ControlHandle) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let Some(line) = read_request(&stream, accepted + REQUEST_TIMEOUT) else {
        return; // a liveness check by `memmon mark`, or a client too slow: nothing taken
    };
    match serde_json::from_str::<Request>(line.trim_end()) {
        Err(e) => write_reply(&stream, &failure(format!("not a marker request: {e}"))),
        Ok(Request {
            mark,
            at_unix_us: Some(at),
        }) => match queue_marker(&mark, at, control) {
            Ok(queued) => write_reply(&stream, &queued),
            Err(reply) => write_reply(&stream, &reply),
        },
        Ok(req) => write_reply(&stream, &take_marker(&req.mark, control, &stream)),
    }
}

/// Queues a marker made at `at_unix_us` (a daemon's own, sent by the `memmon-mark` crate): its
/// row is taken when the recorder gets to it, after the markers queued before it, and says how
/// long after `at_unix_us` that was. The client does not wait for the row.
fn queue_marker(label: &str, at_unix_us: u64, control: &ControlHandle) -> Result<Queued, Reply> {
    let label = clean_label(label);
    if label.is_empty() {
        return Err(failure("the label is empty".into()));
    }
    // A time not yet come (or out of range) counts from now: the lag is never made up.
    let now = std::time::SystemTime::now();
    let at = std::time::UNIX_EPOCH
        .checked_add(Duration::from_micros(at_unix_us))
        .filter(|at| *at <= now)
        .unwrap_or(now);
    if !super::send_mark_at(control, label.clone(), at) {
        return Err(failure("the recording has ended".into()));
    }
    Ok(Queued {
        ok: true,
        label,
        queued: true,
    })
}

/// The request's line, read until `deadline` (not a timeout per read: a client that sends a
/// byte now and then gets no more time); `None` when the client closes, is too slow or too long.
fn read_request(mut stream: &UnixStream, deadline: Instant) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = memchr::memchr(b'\n', &buf) {
            buf.truncate(end);
            return String::from_utf8(buf).ok();
        }
        if buf.len() > MAX_REQUEST_BYTES {
            return None;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

fn write_reply(mut stream: &UnixStream, reply: &impl Serialize) {
    let mut text = serde_json::to_string(reply).expect("a reply serializes");
    text.push('\n');
    let _ = stream.write_all(text.as_bytes());
}

fn failure(msg: String) -> Reply {
    Reply {
        ok: false,
        error: Some(msg),
        ..Reply::default()
    }
}

/// Asks the recorder for the marker's sample and waits for it: until `SAMPLE_TIMEOUT`, or until
/// the client hangs up. Then the request is withdrawn unless the recorder has claimed it first,
/// in which case its sample is waited for (a tick's time).
fn take_marker(label: &str, control: &ControlHandle, client: &UnixStream) -> Reply {
    let label = clean_label(label);
    if label.is_empty() {
        return failure("the label is empty".into());
    }
    let wanted = Arc::new(AtomicBool::new(true));
    let (tx, rx) = mpsc::channel();
    let asked = Control::ProbeIfWanted(Event::Mark(label.clone()), wanted.clone(), tx);
    if !control.send(asked) {
        return failure("the recording has ended".into());
    }
    let taken = |s: Sample| Reply {
        ok: true,
        label: label.clone(),
        elapsed_s: s.elapsed_s,
        unix_ms: s.unix_ms,
        rss_bytes: s.rss_bytes,
        error: None,
    };
    let answered = |r: Result<Option<Sample>, mpsc::RecvTimeoutError>| match r {
        Ok(Some(s)) => Some(taken(s)),
        Ok(None) => Some(failure(
            "the target has ended: no sample could be taken (the marker was not taken)".into(),
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => Some(failure(
            "the recording has ended (the marker was not taken)".into(),
        )),
        Err(mpsc::RecvTimeoutError::Timeout) => None,
    };
    let give_up = Instant::now() + SAMPLE_TIMEOUT;
    // Looks at the client every 100 ms while the marker waits (a tick's time, normally).
    let client_left = loop {
        let left = give_up.saturating_duration_since(Instant::now());
        if let Some(reply) = answered(rx.recv_timeout(left.min(Duration::from_millis(100)))) {
            return reply;
        }
        let gone = hung_up(client);
        if gone || Instant::now() >= give_up {
            break gone;
        }
    };
    if wanted.swap(false, Ordering::SeqCst) {
        // Withdrawn before the recorder got to it: it never will.
        return failure(if client_left {
            "the client hung up before the sample was taken (the marker was not taken)".into()
        } else {
            format!(
                "the recorder did not get to the marker within {} s (it may be waiting for the target to restart); the marker was not taken",
                SAMPLE_TIMEOUT.as_secs()
            )
        });
    }
    // The recorder claimed it first: its sample is being taken.
    answered(rx.recv_timeout(REPLY_TIMEOUT)).unwrap_or_else(|| {
        failure(format!(
            "the recorder took up the marker but gave no sample within {} s; the marker may be in the recording",
            REPLY_TIMEOUT.as_secs()
        ))
    })
}

/// True once the client has closed its end (not merely shut down its writing).
fn hung_up(client: &UnixStream) -> bool {
    use rustix::event::{PollFd, PollFlags};
    let mut fds = [PollFd::new(client, PollFlags::empty())];
    // A poll that fails (no memory for its table) tells nothing: the client is taken as there.
    matches!(crate::sys::poll(&mut fds, Some(Duration::ZERO)), Ok(n) if n > 0)
        && fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
}

/// Sends a marker to the recorder listening on `path` and waits for its reply (at most
/// `REPLY_TIMEOUT`, the whole reply).
pub fn send(path: &Path, label: &str) -> Result<Reply, SocketError> {
    let stream = UnixStream::connect(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => SocketError::Denied(path.to_path_buf()),
        // Longer than a socket's path may be: no recorder could ever listen there.
        std::io::ErrorKind::InvalidInput => SocketError::BadPath(path.to_path_buf(), e),
        _ => SocketError::Connect(path.to_path_buf(), e),
    })?;
    let no_reply = |e: std::io::Error| SocketError::NoReply(path.to_path_buf(), e.to_string());
    stream
        .set_write_timeout(Some(REQUEST_TIMEOUT))
        .map_err(no_reply)?;
    let mut text = serde_json::to_string(&Request {
        mark: label.to_string(),
        at_unix_us: None,
    })
    .expect("a request serializes");
    text.push('\n');
    (&stream).write_all(text.as_bytes()).map_err(no_reply)?;
    let deadline = Instant::now() + REPLY_TIMEOUT;
    let mut line = Vec::new();
    let mut chunk = [0u8; 4096];
    while memchr::memchr(b'\n', &line).is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(SocketError::NoReply(
                path.to_path_buf(),
                format!(
                    "none within {} s; the marker may have been taken: look for it in the recording before sending it again",
                    REPLY_TIMEOUT.as_secs()
                ),
            ));
        }
        stream.set_read_timeout(Some(left)).map_err(no_reply)?;
        match (&stream).read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => line.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(no_reply(e)),
        }
    }
    if line.is_empty() {
        return Err(SocketError::NoReply(
            path.to_path_buf(),
            "the connection was closed".into(),
        ));
    }
    let line = String::from_utf8_lossy(&line);
    serde_json::from_str(line.trim_end())
        .map_err(|e| SocketError::NoReply(path.to_path_buf(), format!("an unreadable reply: {e}")))
}

/// The sockets of running recorders in the default directories (stale ones, left by a killed
/// recorder, are skipped).
pub fn find_recorders() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in default_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut here: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| is_socket_name(&e.file_name().to_string_lossy()))
            .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
            .map(|e| e.path())
            .filter(|p| UnixStream::connect(p).is_ok())
            .collect();
        here.sort();
        found.extend(here);
    }
    found
}

/// `memmon-PID.sock`.
fn is_socket_name(name: &str) -> bool {
    socket_pid(name).is_some()
}

/// The PID in a default socket name (`memmon-PID.sock`), `None` for any other name.
fn socket_pid(name: &str) -> Option<i32> {
    name.strip_prefix("memmon-")
        .and_then(|n| n.strip_suffix(".sock"))
        .filter(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|pid| pid.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_default_socket_names_are_recognised() {
        assert!(is_socket_name("memmon-4242.sock"));
        assert!(!is_socket_name("memmon-.sock"));
        assert!(!is_socket_name("memmon-42.sock.bak"));
        assert!(!is_socket_name("other-42.sock"));
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sock");
        drop(UnixListener::bind(&path).unwrap()); // a socket nobody answers
        let live = Listener::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(matches!(Listener::bind(&path), Err(SocketError::InUse(_))));
        drop(live);
    }

    #[test]
    fn stale_default_sockets_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join("memmon-999999.sock");
        drop(UnixListener::bind(&stale).unwrap()); // a killed recorder's socket
        let live_path = dir.path().join("memmon-1.sock");
        let live = UnixListener::bind(&live_path).unwrap();
        let other = dir.path().join("other.sock");
        drop(UnixListener::bind(&other).unwrap());
        // A recorder starting now: bound, not listening yet (connections refused), alive.
        let starting = dir
            .path()
            .join(format!("memmon-{}.sock", std::process::id()));
        let bound = rustix::net::socket(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::STREAM,
            None,
        )
        .unwrap();
        rustix::net::bind(
            &bound,
            &rustix::net::SocketAddrUnix::new(&starting).unwrap(),
        )
        .unwrap();
        remove_stale(dir.path());
        assert!(!stale.exists());
        assert!(live_path.exists());
        assert!(other.exists());
        assert!(
            starting.exists(),
            "a live recorder's socket, not listening yet"
        );
        drop(live);
    }

    #[test]
    fn a_file_in_the_way_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sock");
        std::fs::write(&path, "data").unwrap();
        assert!(matches!(
            Listener::bind(&path),
            Err(SocketError::NotASocket(_))
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "data");
    }
}
