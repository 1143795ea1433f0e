//! Which recorder's socket to send markers to: `$MEMMON_SOCKET` when set; else, of the
//! recorders listening in memmon's default places (`memmon-PID.sock` in `$XDG_RUNTIME_DIR`, then
//! in `memmon-UID` in the temp directory), the one that is an ancestor of this process (it
//! launched it: `memmon record -- daemon`), or else the only one. With several and none an
//! ancestor, none: the marks would land in a recording of something else.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Where a `Marker` sends its markers.
#[derive(Debug, Clone)]
pub enum Target {
    /// Looked up as above, each time the marker looks for a recorder.
    Discover,
    /// This socket only.
    Path(PathBuf),
}

impl Target {
    /// The socket of a recorder listening now, if any.
    pub fn find(&self) -> Option<PathBuf> {
        match self {
            Target::Path(p) => listening(p).then(|| p.clone()),
            Target::Discover => match std::env::var_os("MEMMON_SOCKET") {
                Some(p) if !p.is_empty() => {
                    let p = PathBuf::from(p);
                    listening(&p).then_some(p)
                }
                _ => choose(recorders(&default_dirs()), &ancestors()),
            },
        }
    }
}

/// Someone accepts connections on `path` (memmon's recorder takes a connection that sends
/// nothing as a liveness check).
fn listening(path: &Path) -> bool {
    UnixStream::connect(path).is_ok()
}

/// memmon's default socket directories, in its order.
pub fn default_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        if x.is_absolute() && x.is_dir() {
            dirs.push(x);
        }
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    dirs.push(std::env::temp_dir().join(format!("memmon-{uid}")));
    dirs
}

/// The recorders listening in `dirs`: their PID (from the socket's name) and socket.
fn recorders(dirs: &[PathBuf]) -> Vec<(u32, PathBuf)> {
    let mut found = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut here: Vec<(u32, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
            .filter_map(|e| Some((socket_pid(&e.file_name().to_string_lossy())?, e.path())))
            .filter(|(_, p)| listening(p))
            .collect();
        here.sort();
        found.extend(here);
    }
    found
}

/// The PID in `memmon-PID.sock`.
fn socket_pid(name: &str) -> Option<u32> {
    let pid = name.strip_prefix("memmon-")?.strip_suffix(".sock")?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// The nearest ancestor's recorder, else the only one.
fn choose(found: Vec<(u32, PathBuf)>, ancestors: &[u32]) -> Option<PathBuf> {
    for a in ancestors {
        if let Some((_, p)) = found.iter().find(|(pid, _)| pid == a) {
            return Some(p.clone());
        }
    }
    match <[_; 1]>::try_from(found) {
        Ok([(_, only)]) => Some(only),
        Err(_) => None,
    }
}

/// This process's parent, its parent's parent, ... up to PID 1 (from /proc/PID/stat).
fn ancestors() -> Vec<u32> {
    let mut out = Vec::new();
    let mut pid = std::os::unix::process::parent_id();
    while pid > 1 && out.len() < 128 {
        out.push(pid);
        match std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| parent_in_stat(&s))
        {
            Some(p) => pid = p,
            None => break,
        }
    }
    out
}

/// The parent PID in a /proc/PID/stat line: the second field after the name, whose closing
/// parenthesis is the line's last one (a name may hold parentheses and spaces).
fn parent_in_stat(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_ascii_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn only_memmons_socket_names_give_a_pid() {
        assert_eq!(socket_pid("memmon-4242.sock"), Some(4242));
        assert_eq!(socket_pid("memmon-.sock"), None);
        assert_eq!(socket_pid("memmon-42.sock.bak"), None);
        assert_eq!(socket_pid("other-42.sock"), None);
    }

    #[test]
    fn the_parent_pid_is_read_past_a_name_with_parentheses() {
        assert_eq!(parent_in_stat("77 (a) b) (c) S 12 77 77 0"), Some(12));
        assert_eq!(parent_in_stat("garbage"), None);
    }

    #[test]
    fn an_ancestors_recorder_wins_else_the_only_one_else_none() {
        let p = |s: &str| PathBuf::from(s);
        let two = vec![(10, p("/r/memmon-10.sock")), (20, p("/r/memmon-20.sock"))];
        assert_eq!(
            choose(two.clone(), &[30, 20, 1]),
            Some(p("/r/memmon-20.sock"))
        );
        assert_eq!(choose(two, &[30]), None);
        assert_eq!(
            choose(vec![(10, p("/r/memmon-10.sock"))], &[30]),
            Some(p("/r/memmon-10.sock"))
        );
        assert_eq!(choose(vec![], &[30]), None);
    }

    #[test]
    fn this_process_has_its_parent_among_its_ancestors() {
        let a = ancestors();
        assert_eq!(
            a.first().copied(),
            Some(std::os::unix::process::parent_id())
        );
    }

    #[test]
    fn listening_sockets_are_found_and_dead_ones_and_other_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("memmon-7.sock");
        let _l = UnixListener::bind(&live).unwrap();
        drop(UnixListener::bind(dir.path().join("memmon-8.sock")).unwrap()); // nobody listens
        std::fs::write(dir.path().join("memmon-9.sock"), "not a socket").unwrap();
        let _other = UnixListener::bind(dir.path().join("other.sock")).unwrap();
        assert_eq!(recorders(&[dir.path().to_path_buf()]), vec![(7, live)]);
    }
}
