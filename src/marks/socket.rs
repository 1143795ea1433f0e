//! The marker socket: a running recorder listens on a Unix socket (mode 0600, in
//! $XDG_RUNTIME_DIR or a private 0700 temp dir) and `memmon mark LABEL` asks it for a marker.
//! One JSON line each way: `{"mark":"LABEL"}` and the reply with the sample's time.

use super::{clean_label, Worker};
use crate::model::sample::Event;
use crate::sampler::record::{Control, ControlHandle};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the listener waits for the recorder to take the sample.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `memmon mark` waits for the reply.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(15);

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
    #[error("no reply from the recorder on {0}: {1}")]
    NoReply(PathBuf, String),
}

/// What `memmon mark` sends.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub mark: String,
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
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() }
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

/// Removes the default-named sockets in `dir` that nobody answers on: what a recorder killed
/// with SIGKILL leaves (it never ran its cleanup). A socket a recorder answers on is kept, and
/// so is anything that is not a socket.
pub fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_str().is_some_and(is_socket_name) {
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
        // SAFETY: umask has no preconditions.
        let old_mask = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(path);
        // SAFETY: as above.
        unsafe { libc::umask(old_mask) };
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

    /// Answers requests on a thread until the returned value is dropped, which removes the
    /// socket file.
    pub fn serve(self, control: ControlHandle) -> Serving {
        let Listener { listener, file } = self;
        let worker = Worker::spawn("memmon-socket", move |stop| {
            // Sleeps until a client connects or the recording ends: no periodic wake-up.
            while !stop.is_set() {
                if !stop.wait(listener.as_raw_fd(), None) {
                    continue;
                }
                while let Ok((stream, _)) = listener.accept() {
                    answer(stream, &control);
                }
            }
        });
        Serving {
            _worker: worker,
            _file: file,
        }
    }
}

/// A socket being answered; dropping it stops the thread, then removes the file.
pub struct Serving {
    _worker: Worker,
    _file: SocketFile,
}

/// Reads one request, has the recorder take the marker's sample, and replies.
fn answer(stream: UnixStream, control: &ControlHandle) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut line = String::new();
    let mut reader = BufReader::new((&stream).take(64 * 1024));
    match reader.read_line(&mut line) {
        Ok(0) => return, // a liveness check by `memmon mark`
        Ok(_) => {}
        Err(_) => return,
    }
    let reply = match serde_json::from_str::<Request>(line.trim_end()) {
        Err(e) => failure(format!("not a marker request: {e}")),
        Ok(req) => take_marker(&req.mark, control),
    };
    let mut text = serde_json::to_string(&reply).expect("a reply serializes");
    text.push('\n');
    let _ = (&stream).write_all(text.as_bytes());
}

fn failure(msg: String) -> Reply {
    Reply {
        ok: false,
        error: Some(msg),
        ..Reply::default()
    }
}

fn take_marker(label: &str, control: &ControlHandle) -> Reply {
    let label = clean_label(label);
    if label.is_empty() {
        return failure("the label is empty".into());
    }
    let (tx, rx) = mpsc::channel();
    if !control.send(Control::Probe(Event::Mark(label.clone()), tx)) {
        return failure("the recording has ended".into());
    }
    match rx.recv_timeout(SAMPLE_TIMEOUT) {
        Ok(Some(s)) => Reply {
            ok: true,
            label,
            elapsed_s: s.elapsed_s,
            unix_ms: s.unix_ms,
            rss_bytes: s.rss_bytes,
            error: None,
        },
        Ok(None) => failure("the target has ended: no sample could be taken".into()),
        Err(mpsc::RecvTimeoutError::Disconnected) => failure("the recording has ended".into()),
        Err(mpsc::RecvTimeoutError::Timeout) => failure(format!(
            "the recorder did not take the sample within {} s (it may be waiting for the target to restart; the marker will be taken when it resumes)",
            SAMPLE_TIMEOUT.as_secs()
        )),
    }
}

/// Sends a marker to the recorder listening on `path` and waits for its reply.
pub fn send(path: &Path, label: &str) -> Result<Reply, SocketError> {
    let stream =
        UnixStream::connect(path).map_err(|e| SocketError::Connect(path.to_path_buf(), e))?;
    let no_reply = |e: std::io::Error| SocketError::NoReply(path.to_path_buf(), e.to_string());
    stream
        .set_write_timeout(Some(REQUEST_TIMEOUT))
        .map_err(no_reply)?;
    stream
        .set_read_timeout(Some(REPLY_TIMEOUT))
        .map_err(no_reply)?;
    let mut text = serde_json::to_string(&Request {
        mark: label.to_string(),
    })
    .expect("a request serializes");
    text.push('\n');
    (&stream).write_all(text.as_bytes()).map_err(no_reply)?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .map_err(no_reply)?;
    if line.is_empty() {
        return Err(SocketError::NoReply(
            path.to_path_buf(),
            "the connection was closed".into(),
        ));
    }
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
    name.strip_prefix("memmon-")
        .and_then(|n| n.strip_suffix(".sock"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
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
        remove_stale(dir.path());
        assert!(!stale.exists());
        assert!(live_path.exists());
        assert!(other.exists());
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
