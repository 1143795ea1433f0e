//! The cgroups memmon manages, beside the reading of `mod.rs` (which writes only to reset a
//! peak): a memory cgroup of memmon's own for a command it launches or a daemon a bench starts,
//! made where every limit over memmon binds it ([`CgroupFs::create_own`], [`OwnCgroup`]);
//! emptied and removed at the end, or by a watcher outside memmon if memmon is killed
//! (`Reaper`); and swept, what is left in it killed, at a later start if even that failed
//! ([`CgroupFs::sweep_stale_own`]). Built on the reader's types (`CgroupFs`, `MemCgroup`,
//! `CgroupError`), over the same root.

use super::{CgroupError, CgroupFs, CgroupVersion, MemCgroup};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

impl CgroupFs {
    /// Where a cgroup of memmon's own goes, for memmon in cgroup `mine` (from
    /// `/proc/self/cgroup`): beneath `mine` in v1, so that every limit over memmon binds the
    /// command too. v2 gives a cgroup with processes no children with controllers, so there it
    /// goes beside `mine`, under the same parent, and only if `mine` sets no limit of its own
    /// that the command would then escape. At the top of the hierarchy where memmon runs at its
    /// root (or its cgroup is not known).
    fn own_place(&self, mine: Option<&MemCgroup>) -> Result<OwnPlace, CgroupError> {
        if let Some(base) = self.v1_base() {
            let under = mine.filter(|m| {
                m.version == CgroupVersion::V1 && m.dir.starts_with(&base) && m.dir.is_dir()
            });
            return Ok(match under {
                Some(m) => OwnPlace {
                    version: CgroupVersion::V1,
                    dir: m.dir.clone(),
                    path: m.path.clone(),
                    enable_memory: false,
                    back_to: m.dir.join("cgroup.procs"),
                },
                None => OwnPlace::top(CgroupVersion::V1, &base),
            });
        }
        let Some(base) = self.v2_base() else {
            return Err(CgroupError::NoMemoryController(self.root.clone()));
        };
        let beside = mine
            .filter(|m| m.version == CgroupVersion::V2 && !m.is_root() && m.dir.starts_with(&base));
        let Some(m) = beside else {
            let mut top = OwnPlace::top(CgroupVersion::V2, &base);
            top.enable_memory = true;
            return Ok(top);
        };
        if let Some(limit) = own_limit(&m.dir) {
            return Err(CgroupError::WouldEscape(m.path.clone(), limit));
        }
        let parent = m.dir.parent().unwrap_or(&base).to_path_buf();
        let ctl = parent.join("cgroup.subtree_control");
        if !enables_memory(&ctl)? {
            return Err(CgroupError::NoMemoryBelow(ctl));
        }
        let path = match m.path.trim_end_matches('/').rsplit_once('/') {
            Some((up, _)) if !up.is_empty() => up.to_string(),
            _ => "/".to_string(),
        };
        Ok(OwnPlace {
            version: CgroupVersion::V2,
            dir: parent,
            path,
            enable_memory: false,
            back_to: m.dir.join("cgroup.procs"),
        })
    }

    /// Makes a memory cgroup of memmon's own, `NAME`, for a command it launches, where
    /// [`CgroupFs::own_place`] puts it for memmon in cgroup `mine`. Needs root, or a writable
    /// hierarchy. The processes the command leaves behind go back to `mine`.
    pub fn create_own(
        &self,
        name: &str,
        mine: Option<&MemCgroup>,
    ) -> Result<OwnCgroup, CgroupError> {
        let place = self.own_place(mine)?;
        if place.enable_memory {
            let ctl = place.dir.join("cgroup.subtree_control");
            if !enables_memory(&ctl)? {
                std::fs::write(&ctl, "+memory").map_err(|e| CgroupError::Create(ctl.clone(), e))?;
            }
        }
        let dir = place.dir.join(name);
        std::fs::create_dir(&dir).map_err(|e| CgroupError::Create(dir.clone(), e))?;
        let procs_path = dir.join("cgroup.procs");
        let procs = OpenOptions::new()
            .write(true)
            .open(&procs_path)
            .map_err(|e| {
                let _ = std::fs::remove_dir(&dir);
                CgroupError::Write(procs_path.clone(), e)
            })?;
        let reaper = Reaper::watch(&dir);
        Ok(OwnCgroup {
            cg: MemCgroup {
                version: place.version,
                path: format!("{}/{name}", place.path.trim_end_matches('/')),
                dir,
            },
            parent_procs: place.back_to,
            procs: Some(procs),
            removed: false,
            reaper: reaper.ok(),
            inside: Inside::default(),
        })
    }

    /// Removes the cgroups of memmon's own (`memmon-PID-N-START`, [`own_cgroup_name`]; the
    /// `memmon-PID-N` of earlier versions too) whose memmon is no longer running: left when its
    /// watcher died with it (or gave up). What still runs in one is killed (memmon's death
    /// orphaned it), then the cgroup is removed. A cgroup whose PID runs with the start time in
    /// its name, or a memmon process with that start time under another PID (one in a PID
    /// namespace of its own names it by its PID there), is kept; else the PID was reused and
    /// the cgroup is swept (an old name without a start time is kept while its PID runs at
    /// all). Only for a memmon in the initial PID namespace ([`in_initial_pid_namespace`]),
    /// which sees every memmon.
    pub fn sweep_stale_own(&self, mine: Option<&MemCgroup>) -> Vec<Swept> {
        let mut out = Vec::new();
        let mut memmons = None;
        let mut places: Vec<PathBuf> = [self.v1_base(), self.v2_base()]
            .into_iter()
            .flatten()
            .collect();
        if let Ok(p) = self.own_place(mine) {
            if !places.contains(&p.dir) {
                places.push(p.dir);
            }
        }
        for base in places {
            let Ok(entries) = std::fs::read_dir(&base) else {
                continue;
            };
            for e in entries.flatten() {
                let Some((pid, start)) = e.file_name().to_str().and_then(own_cgroup_maker) else {
                    continue;
                };
                // Only a directory this user may remove (root, or a delegated hierarchy's owner).
                let mine = std::fs::symlink_metadata(e.path()).is_ok_and(|m| {
                    let me = crate::sys::euid();
                    m.is_dir() && (me == 0 || std::os::unix::fs::MetadataExt::uid(&m) == me)
                });
                if !mine || maker_runs(pid, start, &mut memmons) {
                    continue;
                }
                let dir = e.path();
                let (killed, result) = kill_and_remove(&dir, std::time::Duration::from_secs(2));
                out.push(Swept {
                    dir,
                    pid,
                    killed,
                    error: result.err().map(|e| e.to_string()),
                });
            }
        }
        out
    }
}

/// Where a cgroup of memmon's own is made: in `dir` (cgroup path `path`); `back_to` is the
/// `cgroup.procs` that takes what the command leaves behind (memmon's own cgroup).
#[derive(Debug, Clone, PartialEq, Eq)]
struct OwnPlace {
    version: CgroupVersion,
    dir: PathBuf,
    path: String,
    /// v2's top: memory is enabled in its `cgroup.subtree_control` first if it is not.
    enable_memory: bool,
    back_to: PathBuf,
}

impl OwnPlace {
    fn top(version: CgroupVersion, base: &Path) -> OwnPlace {
        OwnPlace {
            version,
            dir: base.to_path_buf(),
            path: "/".into(),
            enable_memory: false,
            back_to: base.join("cgroup.procs"),
        }
    }
}

/// Whether a v2 `cgroup.subtree_control` (`ctl`) hands the memory controller down.
fn enables_memory(ctl: &Path) -> Result<bool, CgroupError> {
    Ok(std::fs::read_to_string(ctl)
        .map_err(|e| CgroupError::Io(ctl.to_path_buf(), e))?
        .split_whitespace()
        .any(|c| c == "memory"))
}

/// The first limit or setting a v2 cgroup has of its own (`memory.max 2147483648`,
/// `cpuset.mems 1`), of those a cgroup beside it would not have: memory (max, high, swap,
/// zswap, the protections min and low, the OOM group), tasks, CPU (bandwidth, weight, idle,
/// cpuset), I/O (limits, weight) and huge pages. `None`: it has none, and a cgroup beside it
/// under the same parent runs under exactly what it runs under.
fn own_limit(dir: &Path) -> Option<String> {
    let mut names: Vec<String> = [
        "memory.max",
        "memory.high",
        "memory.swap.max",
        "memory.swap.high",
        "memory.zswap.max",
        "memory.min",
        "memory.low",
        "memory.oom.group",
        "pids.max",
        "cpu.max",
        "cpu.weight",
        "cpu.idle",
        "cpuset.cpus",
        "cpuset.mems",
        "io.max",
        "io.weight",
    ]
    .iter()
    .map(|n| n.to_string())
    .collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut huge: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("hugetlb.") && n.ends_with(".max"))
            .collect();
        huge.sort();
        names.extend(huge);
    }
    for name in &names {
        let Ok(text) = std::fs::read_to_string(dir.join(name)) else {
            continue;
        };
        let t = text.trim();
        // What each file says when the cgroup sets nothing of its own.
        let unset = match name.as_str() {
            // "QUOTA PERIOD"
            "cpu.max" => t.split_whitespace().next() == Some("max"),
            // A line per limited device, none when unlimited.
            "io.max" => t.is_empty(),
            "io.weight" => t.lines().all(|l| l.trim() == "default 100"),
            "cpu.weight" => t == "100",
            "cpu.idle" | "memory.oom.group" | "memory.min" | "memory.low" => t == "0",
            // Empty: the parent's effective set.
            "cpuset.cpus" | "cpuset.mems" => t.is_empty(),
            _ => t == "max",
        };
        if !unset && !t.is_empty() {
            return Some(format!("{name} is {}", t.lines().next().unwrap_or(t)));
        }
    }
    None
}

/// A cgroup of memmon's own that a memmon no longer running left, swept at a later start.
#[derive(Debug)]
pub struct Swept {
    pub dir: PathBuf,
    /// The memmon that made it.
    pub pid: i32,
    /// Processes that were still in it, killed.
    pub killed: usize,
    /// Why it could not be removed (then it is tried again at the next start).
    pub error: Option<String>,
}

/// The PID and, in names made since it was added, the start time (clock ticks since boot) of
/// the memmon that made the cgroup `name`: `memmon-PID-N-START` (`memmon-PID-N` before).
fn own_cgroup_maker(name: &str) -> Option<(i32, Option<u64>)> {
    let mut parts = name.strip_prefix("memmon-")?.split('-');
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (pid, n, start) = (parts.next()?, parts.next()?, parts.next());
    if !digits(pid) || !digits(n) || parts.next().is_some() {
        return None;
    }
    let start = match start {
        Some(s) if digits(s) => Some(s.parse().ok()?),
        Some(_) => return None,
        None => None,
    };
    Some((pid.parse().ok()?, start))
}

/// The name of the next cgroup this memmon makes for itself (for a command it launches, a
/// daemon it starts): `memmon-PID-N-START`, N counting from 0 in this process. The start time
/// makes the name this process's alone: on a host that reuses PIDs within seconds (pid_max
/// 32768), a killed memmon's watcher or another memmon's sweep that goes by the name can never
/// take a later memmon's cgroup of the same PID for the dead one's.
pub fn own_cgroup_name() -> String {
    static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id() as i32;
    let start = crate::probe::ProcFs::default().start_time(pid).unwrap_or(0);
    format!("memmon-{pid}-{n}-{start}")
}

/// True while the memmon that made a cgroup runs. An old name (no start time): a process of
/// its PID exists (ours or not). A name with its start time: the process of that PID has it,
/// or else some process named memmon does (`memmons`, the start times of every memmon, read
/// once when first needed): a memmon in a PID namespace of its own names its cgroup by its PID
/// there, which here is another process's or none.
fn maker_runs(pid: i32, start: Option<u64>, memmons: &mut Option<Vec<u64>>) -> bool {
    let procfs = crate::probe::ProcFs::default();
    let Some(start) = start else {
        return crate::sys::process_exists(pid);
    };
    if procfs.start_time(pid) == Some(start) {
        return true;
    }
    memmons
        .get_or_insert_with(|| {
            procfs
                .all_pids()
                .unwrap_or_default()
                .into_iter()
                .filter(|&p| {
                    std::fs::read(procfs.root().join(format!("{p}/comm")))
                        .is_ok_and(|c| c.trim_ascii() == b"memmon")
                })
                .filter_map(|p| procfs.start_time(p))
                .collect()
        })
        .contains(&start)
}

/// True when memmon runs in the initial PID namespace (whose inode number the kernel fixes:
/// `PROC_PID_INIT_INO`), where every process on the host is visible: the only place a sweep
/// of stale cgroups ([`CgroupFs::sweep_stale_own`]) may run. One in a namespace of its own (a
/// container sharing this hierarchy, `unshare --pid`) would take every memmon outside it for
/// gone, and kill what their commands run.
pub fn in_initial_pid_namespace() -> bool {
    std::fs::read_link("/proc/self/ns/pid").is_ok_and(|l| l.as_os_str() == "pid:[4026531836]")
}

/// Kills every process in the cgroup `dir` (v2: `cgroup.kill`, Linux ≥ 5.14, which also stops
/// forks; else each PID of `cgroup.procs`, again until none is left), then removes it. Returns
/// how many processes were killed.
fn kill_and_remove(dir: &Path, patience: std::time::Duration) -> (usize, Result<(), CgroupError>) {
    // What was made inside it first, depth first: a cgroup with children cannot be removed.
    let (inside, _) = remove_children(dir, patience);
    let (killed, r) = kill_and_remove_leaf(dir, patience);
    (inside.killed + killed, r)
}

/// What `remove_children` removed: the cgroups made inside one, and the processes killed in them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Inside {
    pub cgroups: usize,
    pub killed: usize,
}

/// Removes every cgroup below `dir`, depth first, killing what runs in each (`kill_and_remove`);
/// `dir` itself is left. The first failure is returned beside what was done.
fn remove_children(dir: &Path, patience: std::time::Duration) -> (Inside, Option<CgroupError>) {
    let mut done = Inside::default();
    let mut first_error = None;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (done, None);
    };
    for e in entries.flatten() {
        // A cgroup's children are its directories (never links: cgroupfs makes none).
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let (below, err) = remove_children(&e.path(), patience);
        done.cgroups += below.cgroups;
        done.killed += below.killed;
        if let Some(err) = err {
            first_error.get_or_insert(err);
        }
        let (killed, r) = kill_and_remove_leaf(&e.path(), patience);
        done.killed += killed;
        match r {
            Ok(()) => done.cgroups += 1,
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    (done, first_error)
}

/// `kill_and_remove` of a cgroup without children.
fn kill_and_remove_leaf(
    dir: &Path,
    patience: std::time::Duration,
) -> (usize, Result<(), CgroupError>) {
    let procs_of = || -> Vec<i32> {
        std::fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_ascii_whitespace()
            .filter_map(|w| w.parse::<i32>().ok())
            .collect()
    };
    let mut killed = std::collections::HashSet::new();
    let kill_file = dir.join("cgroup.kill");
    if kill_file.exists() {
        // Those in it now are what cgroup.kill kills: counted before, as a fast kernel has them
        // gone from cgroup.procs by the time it is read again.
        let inside = procs_of();
        if std::fs::write(&kill_file, "1").is_ok() {
            killed.extend(inside);
        }
    }
    let until = std::time::Instant::now() + patience;
    loop {
        for pid in procs_of() {
            if crate::sys::kill(pid, libc::SIGKILL).is_ok() {
                killed.insert(pid);
            }
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return (killed.len(), Ok(())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return (killed.len(), Ok(())),
            // Busy while the killed processes exit.
            Err(e)
                if std::time::Instant::now() < until && e.raw_os_error() == Some(libc::EBUSY) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return (killed.len(), Err(CgroupError::Remove(dir.to_path_buf(), e))),
        }
    }
}

/// A watcher of a cgroup of memmon's own that outlives memmon: a `sh` reading a pipe whose only
/// writer is memmon. At a normal end memmon writes `done` and the watcher exits; if memmon dies
/// any other way (SIGKILL too) the pipe closes unsaid, and the watcher kills everything in the
/// cgroup (`cgroup.kill`, or each PID of `cgroup.procs` until none is left) and removes it. A
/// shell, not a fork of memmon: a fork of a threaded process may run only async-signal-safe
/// code, and an exec'd `sh` holds none of memmon's memory. It is in a process group of its own
/// (Ctrl-C is memmon's to handle) and ignores the stop signals, so it outlives memmon.
///
/// It is started, and waited for, by a thread of its own: a child of that thread is not in the
/// main thread's `children` file, where the recorder finds the orphans it adopts (memmon is the
/// launched command's subreaper), so the watcher is never taken for one.
#[derive(Debug)]
struct Reaper {
    /// The pipe's write end (close-on-exec: no launched command holds it).
    said: Option<File>,
    /// Waits for the watcher; ends once it has exited and is reaped.
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The watcher's script; `$1` is the cgroup's directory.
const REAPER_SCRIPT: &str = r#"trap '' INT TERM HUP QUIT PIPE
IFS= read -r said
[ "$said" = done ] && exit 0
cd /
[ -e "$1/cgroup.kill" ] && echo 1 > "$1/cgroup.kill"
i=0
while [ -d "$1" ] && [ "$i" -lt 500 ]; do
    # Deepest first: the cgroups the command made inside, then the cgroup itself.
    for d in $(find "$1" -depth -type d 2>/dev/null); do
        pids=$(cat "$d/cgroup.procs" 2>/dev/null)
        [ -n "$pids" ] && kill -9 $pids 2>/dev/null
        rmdir "$d" 2>/dev/null
    done
    [ -d "$1" ] && { sleep 0.02 2>/dev/null || sleep 1; }
    i=$((i + 1))
done
"#;

impl Reaper {
    fn watch(dir: &Path) -> io::Result<Reaper> {
        use std::os::unix::process::CommandExt;
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let write = File::from(write);
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(REAPER_SCRIPT)
            .arg("memmon-cgroup-reaper")
            .arg(dir)
            .stdin(read)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0);
        let (tx, started) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("memmon-cgroup-watch".into())
            .spawn(move || match cmd.spawn() {
                Ok(mut child) => {
                    let _ = tx.send(Ok(()));
                    let _ = child.wait();
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            })?;
        started
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("the watcher's thread ended")))?;
        Ok(Reaper {
            said: Some(write),
            thread: Some(thread),
        })
    }

    /// memmon is done with the cgroup: the watcher exits (and is reaped) without a kill.
    fn dismiss(&mut self) {
        if let Some(mut w) = self.said.take() {
            let _ = w.write_all(b"done\n");
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A memory cgroup memmon made for a command it launches; removed when dropped (what is left
/// in it is moved to the parent first).
#[derive(Debug)]
pub struct OwnCgroup {
    cg: MemCgroup,
    parent_procs: PathBuf,
    /// `cgroup.procs`, open for writing: the launched child writes `0` to it (itself) between
    /// fork and exec, so it is in the cgroup before its first allocation.
    procs: Option<File>,
    removed: bool,
    /// The watcher that empties and removes the cgroup if memmon dies first (none where no
    /// `sh` could be run).
    reaper: Option<Reaper>,
    /// What the command made inside the cgroup, removed with it.
    inside: Inside,
}

impl OwnCgroup {
    pub fn cgroup(&self) -> &MemCgroup {
        &self.cg
    }

    /// The descriptor of `cgroup.procs` to write `0` to in the child (async-signal-safe).
    pub fn procs_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.procs.as_ref().map(|f| f.as_fd())
    }

    /// What the command made inside the cgroup (cgroups of its own, and the processes killed
    /// in them) and `remove` removed with it.
    pub fn inside(&self) -> Inside {
        self.inside
    }

    /// Removes the cgroups the command made inside this one, depth first, killing what runs
    /// in them; moves the processes still in this one to its parent and removes it; returns the
    /// PIDs moved out. A process exiting right then may keep the directory busy a moment:
    /// retried for up to a second.
    pub fn remove(&mut self) -> Result<Vec<i32>, CgroupError> {
        let r = self.move_out_and_remove();
        // Removed or not, memmon is done with it: its watcher goes (what could not be removed
        // is swept by a later start).
        if let Some(mut w) = self.reaper.take() {
            w.dismiss();
        }
        r
    }

    fn move_out_and_remove(&mut self) -> Result<Vec<i32>, CgroupError> {
        if self.removed {
            return Ok(Vec::new());
        }
        self.procs = None;
        let (inside, err) = remove_children(&self.cg.dir, std::time::Duration::from_secs(1));
        self.inside.cgroups += inside.cgroups;
        self.inside.killed += inside.killed;
        if let Some(e) = err {
            return Err(e);
        }
        let mut moved = Vec::new();
        for _ in 0..50 {
            let left = self.cg.procs().unwrap_or_default();
            for pid in &left {
                if std::fs::write(&self.parent_procs, format!("{pid}\n")).is_ok()
                    && !moved.contains(pid)
                {
                    moved.push(*pid);
                }
            }
            match std::fs::remove_dir(&self.cg.dir) {
                Ok(()) => {
                    self.removed = true;
                    return Ok(moved);
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    self.removed = true;
                    return Ok(moved);
                }
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(CgroupError::Remove(self.cg.dir.clone(), e)),
            }
        }
        Err(CgroupError::Remove(
            self.cg.dir.clone(),
            io::Error::from_raw_os_error(libc::EBUSY),
        ))
    }
}

impl Drop for OwnCgroup {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::cgroup::tests::{fake_hybrid, fake_v2, mkdir, write};

    #[test]
    fn an_own_cgroup_goes_in_the_v1_hierarchy_and_a_failed_one_leaves_no_directory() {
        // A plain file system makes no cgroup.procs in a new directory, as the kernel would:
        // the creation fails naming that file and removes the directory it made. (A real
        // cgroup is made by the integration tests, as root.)
        let (t, fs) = fake_hybrid();
        write(
            &t.path().join("memory"),
            &[("memory.usage_in_bytes", "1\n")],
        );
        let e = fs
            .create_own("memmon-test-1", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory/memmon-test-1/cgroup.procs"), "{e}");
        assert!(!t.path().join("memory/memmon-test-1").exists());
        // memmon in a cgroup of its caller's: the command's goes beneath it.
        let mine = fs
            .locate("4:memory:/bench/proverd\n0::/user.slice\n")
            .unwrap();
        let e = fs
            .create_own("memmon-test-2", Some(&mine))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("memory/bench/proverd/memmon-test-2/cgroup.procs"),
            "{e}"
        );
    }

    #[test]
    fn an_own_cgroup_sits_under_every_limit_memmon_runs_under() {
        // v1: beneath memmon's cgroup, whatever it limits; what is left goes back to it.
        let (t, fs) = fake_hybrid();
        write(
            &t.path().join("memory"),
            &[("memory.usage_in_bytes", "1\n")],
        );
        let mine = fs
            .locate("4:memory:/bench/proverd\n0::/user.slice\n")
            .unwrap();
        let p = fs.own_place(Some(&mine)).unwrap();
        assert_eq!(p.dir, t.path().join("memory/bench/proverd"));
        assert_eq!(p.path, "/bench/proverd");
        assert_eq!(
            p.back_to,
            t.path().join("memory/bench/proverd/cgroup.procs")
        );
        assert_eq!(fs.own_place(None).unwrap().path, "/");

        // v2: beside memmon's cgroup (which holds processes: memmon), under the same parent.
        let (t, fs) = fake_v2();
        let slice = t.path().join("system.slice");
        std::fs::write(slice.join("cgroup.subtree_control"), "memory pids\n").unwrap();
        let runner = slice.join("runner.service");
        write(
            &runner,
            &[
                ("memory.current", "1\n"),
                ("memory.max", "max\n"),
                ("memory.high", "max\n"),
                ("pids.max", "max\n"),
                ("cpu.max", "max 100000\n"),
                ("io.max", ""),
                ("memory.min", "0\n"),
                ("memory.low", "0\n"),
                ("memory.swap.high", "max\n"),
                ("memory.zswap.max", "max\n"),
                ("memory.oom.group", "0\n"),
                ("cpu.weight", "100\n"),
                ("cpu.idle", "0\n"),
                ("cpuset.cpus", "\n"),
                ("cpuset.mems", "\n"),
                ("io.weight", "default 100\n"),
                ("hugetlb.2MB.max", "max\n"),
            ],
        );
        let mine = fs.locate("0::/system.slice/runner.service\n").unwrap();
        let p = fs.own_place(Some(&mine)).unwrap();
        assert_eq!(
            (p.dir.clone(), p.path.as_str(), p.enable_memory),
            (slice.clone(), "/system.slice", false)
        );
        assert_eq!(p.back_to, runner.join("cgroup.procs"));

        // ... unless memmon's cgroup sets a limit of its own the command would escape there.
        for (file, value) in [
            ("memory.max", "2147483648\n"),
            ("memory.high", "1073741824\n"),
            ("pids.max", "64\n"),
            ("cpu.max", "50000 100000\n"),
            ("io.max", "8:0 rbps=1048576 wbps=max riops=max wiops=max\n"),
            // What a cgroup beside it would not inherit either: the NUMA nodes and CPUs it may
            // use, its protections, its OOM group, its weights, its huge page limits.
            ("cpuset.mems", "1\n"),
            ("cpuset.cpus", "1\n"),
            ("memory.min", "1048576\n"),
            ("memory.low", "1048576\n"),
            ("memory.swap.high", "1048576\n"),
            ("memory.zswap.max", "0\n"),
            ("memory.oom.group", "1\n"),
            ("cpu.weight", "50\n"),
            ("cpu.idle", "1\n"),
            ("io.weight", "default 200\n"),
            ("hugetlb.2MB.max", "0\n"),
        ] {
            let before = std::fs::read_to_string(runner.join(file)).unwrap();
            std::fs::write(runner.join(file), value).unwrap();
            let e = fs.own_place(Some(&mine)).unwrap_err();
            assert!(
                matches!(&e, CgroupError::WouldEscape(path, what)
                    if path == "/system.slice/runner.service" && what.starts_with(file)),
                "{file}: {e}"
            );
            std::fs::write(runner.join(file), before).unwrap();
        }

        // ... or its parent does not hand the memory controller down.
        std::fs::write(slice.join("cgroup.subtree_control"), "pids\n").unwrap();
        let e = fs.own_place(Some(&mine)).unwrap_err();
        assert!(matches!(e, CgroupError::NoMemoryBelow(_)), "{e}");

        // memmon at the root (or in a cgroup namespace's root): the top, memory enabled there.
        let root = fs.locate("0::/\n").unwrap();
        let p = fs.own_place(Some(&root)).unwrap();
        assert_eq!(
            (p.dir, p.path.as_str(), p.enable_memory),
            (t.path().to_path_buf(), "/", true)
        );
    }

    #[test]
    fn stale_own_cgroups_are_swept_killing_what_is_left_and_live_or_foreign_ones_are_kept() {
        use std::os::unix::process::ExitStatusExt;
        let (t, fs) = fake_hybrid();
        let mem = t.path().join("memory");
        write(&mem, &[("memory.usage_in_bytes", "1\n")]);
        // A PID above pid_max never runs: the memmon that made these cgroups is gone.
        let pid_max: i32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let gone = pid_max + 1;
        mkdir(&mem.join(format!("memmon-{gone}-0")));
        // A process left in one (a fake directory keeps its files: it is not removed).
        let mut left = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        write(
            &mem.join(format!("memmon-{gone}-1")),
            &[("cgroup.procs", &format!("{}\n", left.id()))],
        );
        let live = mem.join(format!("memmon-{}-0", std::process::id()));
        mkdir(&live);
        // This PID with its own start time runs; with another, it is a PID reused since.
        let me = std::process::id() as i32;
        let start = crate::probe::ProcFs::default().start_time(me).unwrap();
        let live_now = mem.join(format!("memmon-{me}-1-{start}"));
        mkdir(&live_now);
        let reused = mem.join(format!("memmon-{me}-2-{}", start + 1));
        mkdir(&reused);
        let foreign = mem.join(format!("memmon-test-x-{gone}"));
        mkdir(&foreign);
        let mut swept = fs.sweep_stale_own(None);
        swept.sort_by(|a, b| a.dir.cmp(&b.dir));
        assert_eq!(swept.len(), 3, "{swept:?}");
        let at = swept.iter().position(|x| x.pid == me).unwrap();
        let r = swept.remove(at);
        assert_eq!((r.dir, r.error), (reused, None));
        assert!(live_now.exists());
        assert_eq!(
            (swept[0].pid, swept[0].killed, swept[0].error.is_none()),
            (gone, 0, true)
        );
        assert!(!swept[0].dir.exists());
        assert_eq!((swept[1].pid, swept[1].killed), (gone, 1));
        assert!(
            swept[1].error.as_deref().is_some_and(
                |e| e.starts_with("cannot remove") && e.contains(&format!("memmon-{gone}-1"))
            ),
            "{swept:?}"
        );
        assert_eq!(left.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(live.exists() && foreign.exists());
    }

    #[test]
    fn own_cgroup_names_carry_the_pid_of_the_memmon_that_made_them() {
        assert_eq!(own_cgroup_maker("memmon-4242-0").map(|m| m.0), Some(4242));
        assert_eq!(own_cgroup_maker("memmon-4242-17").map(|m| m.0), Some(4242));
        assert_eq!(
            own_cgroup_maker("memmon-4242-1-987"),
            Some((4242, Some(987)))
        );
        assert_eq!(own_cgroup_maker("memmon-4242-1"), Some((4242, None)));
        let mine = own_cgroup_name();
        let me = std::process::id() as i32;
        assert!(
            matches!(own_cgroup_maker(&mine), Some((p, Some(_))) if p == me),
            "{mine}"
        );
        for other in [
            "memmon-test-x-1",
            "memmon-4242",
            "memmon--0",
            "memmon-42-",
            "memmon-4x-0",
            "memmon-42-0-x",
            "memmon-42-0-1-2",
            "other-1-0",
        ] {
            assert_eq!(own_cgroup_maker(other), None, "{other}");
        }
    }

    #[test]
    fn without_a_memory_controller_no_own_cgroup_is_made() {
        let t = tempfile::tempdir().unwrap();
        let e = CgroupFs::new(t.path()).create_own("x", None).unwrap_err();
        assert!(matches!(e, CgroupError::NoMemoryController(_)), "{e}");
    }
}
