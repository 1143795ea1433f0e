//! Which PID namespace memmon sees, and how NVML's PIDs map into it.
//!
//! The NVIDIA driver gives the PIDs of the host's (initial) PID namespace, whatever namespace the
//! caller is in (some recent drivers translate them into the caller's). memmon in the host's
//! namespace matches them with its own directly. memmon in a container sees its namespace's
//! PIDs, and its /proc shows no host PID (`NSpid` in /proc/PID/status lists a process's PID in
//! the namespace of that /proc and in the namespaces below it, never above): there the host's
//! /proc, mounted into the container (`--gpu-host-proc`), maps them: `NSpid` of a host PID there
//! lists its PID at each level, memmon's level included (and the start time in both /procs
//! tells that it is the same process). Without it, NVML's PIDs are taken as memmon's only when
//! every one of them is a process here (a driver that translates); else they cannot be
//! attributed, and memmon says so. With it, a reading's PIDs are taken as host PIDs or as
//! memmon's own, whichever places more of them (a driver that translates gives PIDs that are no
//! host process of memmon's namespace).

use std::io;
use std::path::{Path, PathBuf};

/// The inode of the initial PID namespace's /proc/PID/ns/pid (PROC_PID_INIT_INO, fixed by the
/// kernel).
pub const INITIAL_PID_NS: &str = "pid:[4026531836]";

/// Where an NVML PID is in memmon's PID namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// This PID in memmon's namespace.
    Pid(u32),
    /// A process of another namespace, or one that is gone: not memmon's.
    NotOurs,
    /// Not a PID memmon can place: the driver gives host PIDs and memmon cannot map them.
    Unknown,
}

/// Why memmon's PID namespace, or the host's /proc given (`--gpu-host-proc`), cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PidnsError {
    #[error("cannot read memmon's PID namespace ({}): {error}", .path.display())]
    Own { path: PathBuf, error: io::Error },
    #[error("--gpu-host-proc {}: {error}", .path.display())]
    HostProc { path: PathBuf, error: io::Error },
    #[error("--gpu-host-proc {}: memmon is not among its processes: it is not a /proc of an ancestor of memmon's PID namespace (mount the host's /proc there)", .0.display())]
    NotAncestor(PathBuf),
}

impl crate::error::Classified for PidnsError {
    /// A host /proc given that is not one is bad input; an unreadable namespace a failure.
    fn class(&self) -> crate::exit::Class {
        match self {
            PidnsError::HostProc { .. } | PidnsError::NotAncestor(_) => crate::exit::Class::Usage,
            PidnsError::Own { .. } => crate::exit::Class::Failure,
        }
    }
}

/// How NVML's PIDs are read in memmon's PID namespace.
#[derive(Debug, Clone)]
pub enum PidView {
    /// memmon is in the host's PID namespace: NVML's PIDs are its own.
    Host,
    /// memmon is in another PID namespace and has no host /proc: a PID that is a process here is
    /// taken as its own (a driver that translates PIDs), one that is not is `Unknown`.
    Child { proc_root: PathBuf },
    /// memmon is in another PID namespace and reads the host's /proc at `host_root`.
    Mapped(HostProc),
}

impl PidView {
    /// The view of memmon's own namespace (read from `proc_root`, normally /proc), with the
    /// host's /proc at `host_root` when given.
    pub fn new(proc_root: &Path, host_root: Option<&Path>) -> Result<PidView, PidnsError> {
        let own = ns_of(&proc_root.join("self")).map_err(|error| PidnsError::Own {
            path: proc_root.join("self/ns/pid"),
            error,
        })?;
        match host_root {
            Some(host) => Ok(PidView::Mapped(HostProc::open(
                host,
                proc_root,
                std::process::id(),
                &own,
            )?)),
            None if own == INITIAL_PID_NS => Ok(PidView::Host),
            None => Ok(PidView::Child {
                proc_root: proc_root.to_path_buf(),
            }),
        }
    }

    /// Where NVML's `pid` is in memmon's namespace.
    pub fn local(&self, pid: u32) -> Local {
        self.place(&[pid])[0]
    }

    /// Where each of one reading's NVML PIDs is in memmon's namespace. In a container, the
    /// driver either gives host PIDs (most) or translates them into the caller's namespace
    /// (some recent ones): a reading's PIDs are taken the way that places more of them here.
    pub fn place(&self, pids: &[u32]) -> Vec<Local> {
        match self {
            PidView::Host => pids.iter().map(|&p| Local::Pid(p)).collect(),
            PidView::Child { proc_root } => pids
                .iter()
                .map(|&p| match p {
                    0 => Local::NotOurs,
                    p if proc_root.join(p.to_string()).exists() => Local::Pid(p),
                    _ => Local::Unknown,
                })
                .collect(),
            PidView::Mapped(h) => {
                let mapped: Vec<Local> = pids.iter().map(|&p| h.local(p)).collect();
                let here = |p: u32| p != 0 && h.own_root.join(p.to_string()).exists();
                let as_host = mapped.iter().filter(|l| matches!(l, Local::Pid(_))).count();
                let as_own = pids.iter().filter(|&&p| here(p)).count();
                if as_own > as_host {
                    // A driver that translates: its PIDs are already memmon's.
                    pids.iter()
                        .map(|&p| {
                            if here(p) {
                                Local::Pid(p)
                            } else {
                                Local::NotOurs
                            }
                        })
                        .collect()
                } else {
                    mapped
                }
            }
        }
    }

    /// For the metadata: how PIDs are matched.
    pub fn describe(&self) -> String {
        match self {
            PidView::Host => "the host's PID namespace: NVML's PIDs are memmon's".into(),
            PidView::Child { .. } => "a PID namespace other than the host's (a container), no host /proc given: NVML's PIDs are used only when every one is a process here (a driver that translates them)".into(),
            PidView::Mapped(h) => format!(
                "a PID namespace other than the host's (a container): NVML's host PIDs mapped through NSpid in {} (level {}), or taken as memmon's where the driver translates them",
                h.root.display(),
                h.level
            ),
        }
    }
}

/// The target of DIR/ns/pid (`pid:[INODE]`).
fn ns_of(dir: &Path) -> io::Result<String> {
    Ok(std::fs::read_link(dir.join("ns/pid"))?
        .to_string_lossy()
        .into_owned())
}

/// The PIDs of a process in each namespace it is in, from the NSpid line of its status.
fn nspid(status: &str) -> Option<Vec<u32>> {
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line["NSpid:".len()..]
        .split_whitespace()
        .map(|p| p.parse().ok())
        .collect()
}

/// Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot (after the
/// command name, which may hold spaces and parentheses).
fn start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn read(path: PathBuf) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The host's /proc, read from a PID namespace below it.
#[derive(Debug, Clone)]
pub struct HostProc {
    root: PathBuf,
    own_root: PathBuf,
    /// memmon's namespace's position in NSpid lines of the host's /proc (0: the host's).
    level: usize,
}

impl HostProc {
    /// The host's /proc at `root`, for memmon (`own_pid` in its namespace, `own_ns` its
    /// ns/pid link) reading its own namespace's /proc at `own_root`. Finds memmon's level: the
    /// position of its own PID in its NSpid line as the host's /proc shows it.
    pub fn open(
        root: &Path,
        own_root: &Path,
        own_pid: u32,
        own_ns: &str,
    ) -> Result<HostProc, PidnsError> {
        let entries = std::fs::read_dir(root).map_err(|error| PidnsError::HostProc {
            path: root.to_path_buf(),
            error,
        })?;
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_str().and_then(|n| n.parse::<u32>().ok()).is_none() {
                continue;
            }
            let dir = e.path();
            if ns_of(&dir).ok().as_deref() != Some(own_ns) {
                continue;
            }
            let Some(ids) = read(dir.join("status")).as_deref().and_then(nspid) else {
                continue;
            };
            if ids.last() == Some(&own_pid) {
                return Ok(HostProc {
                    root: root.to_path_buf(),
                    own_root: own_root.to_path_buf(),
                    level: ids.len() - 1,
                });
            }
        }
        Err(PidnsError::NotAncestor(root.to_path_buf()))
    }

    /// Host PID `pid` in memmon's namespace: its NSpid entry at memmon's level, when that is
    /// the same process here (the same start time).
    pub fn local(&self, pid: u32) -> Local {
        let dir = self.root.join(pid.to_string());
        let (Some(ids), Some(start)) = (
            read(dir.join("status")).as_deref().and_then(nspid),
            read(dir.join("stat")).as_deref().and_then(start_time),
        ) else {
            return Local::NotOurs;
        };
        let Some(&here) = ids.get(self.level) else {
            return Local::NotOurs;
        };
        match read(self.own_root.join(here.to_string()).join("stat"))
            .as_deref()
            .and_then(start_time)
        {
            Some(s) if s == start => Local::Pid(here),
            _ => Local::NotOurs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(root: &Path, pid: u32, nspid: &str, start: u64, ns: &str) {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(d.join("ns")).unwrap();
        std::fs::write(
            d.join("status"),
            format!("Name:\tx\nPid:\t{pid}\nNSpid:\t{nspid}\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("stat"),
            format!("{pid} (a (b) c) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0\n"),
        )
        .unwrap();
        std::os::unix::fs::symlink(ns, d.join("ns/pid")).unwrap();
    }

    #[test]
    fn host_pids_map_through_nspid_to_this_namespace_and_only_the_same_process() {
        let host = tempfile::tempdir().unwrap();
        let own = tempfile::tempdir().unwrap();
        let ours = "pid:[4026532999]";
        // memmon: host 5000, 7 in its namespace.
        fake(host.path(), 5000, "5000\t7", 900, ours);
        // The daemon: host 5100, 12 here.
        fake(host.path(), 5100, "5100\t12", 950, ours);
        fake(own.path(), 12, "12", 950, ours);
        // A process of another container: 3 in its namespace, and a 3 here that is another
        // process (started at another time).
        fake(host.path(), 6000, "6000\t3", 1000, "pid:[4026533111]");
        fake(own.path(), 3, "3", 1200, ours);
        // A host daemon: no PID here.
        fake(host.path(), 800, "800", 10, INITIAL_PID_NS);

        let h = HostProc::open(host.path(), own.path(), 7, ours).unwrap();
        assert_eq!(h.level, 1);
        assert_eq!(h.local(5100), Local::Pid(12));
        assert_eq!(h.local(6000), Local::NotOurs);
        assert_eq!(h.local(800), Local::NotOurs);
        assert_eq!(h.local(4242), Local::NotOurs, "gone");
        let view = PidView::Mapped(h);
        // A driver giving host PIDs: the daemon is placed, the others are not ours.
        assert_eq!(
            view.place(&[5100, 6000, 800]),
            [Local::Pid(12), Local::NotOurs, Local::NotOurs]
        );
        // A driver translating PIDs into memmon's namespace gives 12 (and 3): as host PIDs
        // they are nothing of memmon's; as its own, both are processes here.
        assert_eq!(view.place(&[12, 3]), [Local::Pid(12), Local::Pid(3)]);
        let err = HostProc::open(own.path(), own.path(), 7, ours)
            .unwrap_err()
            .to_string();
        assert!(err.contains("memmon is not among its processes"), "{err}");
    }

    #[test]
    fn stat_start_time_is_read_past_a_name_with_parentheses() {
        assert_eq!(
            start_time("1 (a (b) c) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0"),
            Some(4242)
        );
        assert_eq!(nspid("NSpid:\t10\t3\t1\n"), Some(vec![10, 3, 1]));
    }

    #[test]
    fn this_process_sees_its_own_namespace() {
        let v = PidView::new(Path::new("/proc"), None).unwrap();
        let me = std::process::id();
        assert_eq!(v.local(me), Local::Pid(me));
    }
}
