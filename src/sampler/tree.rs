//! The watched process tree: a root process and, unless `--no-children`, its descendants,
//! found each tick through /proc/PID/task/TID/children (never by scanning all of /proc).
//! `Tree::sample` reads every member's memory once and sums it into a [`TreeSample`].
//!
//! The root's /proc/PID/status is read every tick. A descendant's status costs seven times its
//! statm (BENCHMARKS.md), so for descendants statm is read every tick and status only when statm changed or the
//! last status read is older than [`STATUS_MAX_AGE`]: a tree of a thousand idle workers costs
//! little, and every number is at most that old for a process whose statm did not move.

use crate::probe::{ProcError, ProcFs, ProcHandle, StatusMem};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The longest a descendant's status values are carried while its statm stays the same.
pub const STATUS_MAX_AGE: Duration = Duration::from_secs(1);

/// One tick of the tree, summed over its members. Sizes in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeSample {
    pub rss: u64,
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    pub swap: u64,
    pub locked: u64,
    pub pinned: u64,
    pub processes: u32,
    /// The member with the largest RSS, and that RSS.
    pub top_pid: i32,
    pub top_rss: u64,
    /// The largest VmHWM of any member: the exact peak of that one process so far.
    pub hwm_max: u64,
    /// The sum of the members' VmHWM: an upper bound of the tree's RSS so far, never exact.
    pub hwm_sum: u64,
}

/// What is known of one process that was part of the tree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessRecord {
    pub pid: i32,
    pub start_time_ticks: u64,
    pub comm: String,
    /// The highest VmHWM read while it was alive (exact when read after its peak).
    pub hwm_bytes: u64,
}

struct Member {
    handle: ProcHandle,
    last: StatusMem,
    /// statm when `last` was read, and when.
    statm: [u64; 7],
    status_at: Instant,
}

/// The tree being watched.
pub struct Tree {
    procfs: ProcFs,
    root_pid: i32,
    with_children: bool,
    members: Vec<Member>,
    index: HashMap<i32, usize>,
    /// Members that left the tree, kept with their last high-water mark (largest first, bounded).
    departed: Vec<ProcessRecord>,
    departed_count: u64,
    /// A process whose children join the tree although it is not a member: memmon itself,
    /// the subreaper of a launched command, to which the command's orphans are re-parented.
    adopter: Option<ProcHandle>,
    buf: Vec<u8>,
    kids: Vec<i32>,
}

/// At most this many departed processes are remembered (those with the largest peaks).
const DEPARTED_KEEP: usize = 32;

impl Tree {
    /// Starts watching `root` (already opened, so already identified by start time).
    pub fn new(procfs: ProcFs, root: ProcHandle, with_children: bool) -> Tree {
        let root_pid = root.pid;
        let mut t = Tree {
            procfs,
            root_pid,
            with_children,
            members: Vec::new(),
            index: HashMap::new(),
            departed: Vec::new(),
            departed_count: 0,
            adopter: None,
            buf: Vec::with_capacity(2048),
            kids: Vec::new(),
        };
        t.index.insert(root_pid, 0);
        t.members.push(Member {
            handle: root,
            last: StatusMem::default(),
            statm: [0; 7],
            status_at: Instant::now(),
        });
        t
    }

    pub fn root(&self) -> Option<&ProcHandle> {
        self.members
            .first()
            .filter(|m| m.handle.pid == self.root_pid)
            .map(|m| &m.handle)
    }

    pub fn root_pid(&self) -> i32 {
        self.root_pid
    }

    /// Makes the children of `adopter` (other than the root) members too: orphans of the tree
    /// that the kernel re-parented to a subreaper (memmon, for a command it launched).
    pub fn adopt_orphans_of(&mut self, adopter: ProcHandle) {
        self.adopter = Some(adopter);
    }

    /// Reads every member once and returns the sum. Returns `None` when the root is gone (or is
    /// a zombie): the tree has ended. Members that vanish between two reads are dropped quietly.
    pub fn sample(&mut self) -> Result<Option<TreeSample>, ProcError> {
        // First the members already known, so a PID that was reused since the last tick is seen
        // as gone before the children lists are read again.
        let now = Instant::now();
        let mut i = 0;
        while i < self.members.len() {
            match self.read_member(i, now) {
                Ok(m) if m.has_mm => {
                    self.members[i].last = m;
                    i += 1;
                }
                Ok(_) | Err(ProcError::NoSuchProcess(_)) if i == 0 => return Ok(None),
                Err(e) if i == 0 => return Err(e),
                // A child that exited, became a zombie or cannot be read any more.
                Ok(_) | Err(_) => self.remove(i),
            }
        }
        // Then new children, read as they are found (the list grows while it is walked), and
        // orphans re-parented to the adopter.
        if self.with_children {
            self.adopt_orphans();
            let mut j = 0;
            while j < self.members.len() {
                self.discover_children(j);
                j += 1;
            }
        }
        let mut s = TreeSample::default();
        for m in &self.members {
            add(&mut s, m.handle.pid, &m.last);
        }
        Ok(Some(s))
    }

    /// Reads member `i`: status for the root; for a descendant, statm first, and status only
    /// when statm moved or the last status read is too old.
    fn read_member(&mut self, i: usize, now: Instant) -> Result<StatusMem, ProcError> {
        let m = &mut self.members[i];
        if i == 0 {
            return m.handle.read_status(&mut self.buf);
        }
        let statm = m.handle.read_statm(&mut self.buf)?;
        if statm == m.statm && now.duration_since(m.status_at) < STATUS_MAX_AGE {
            return Ok(m.last);
        }
        let status = m.handle.read_status(&mut self.buf)?;
        m.statm = statm;
        m.status_at = now;
        Ok(status)
    }

    /// Adds the adopter's children that are not members yet.
    fn adopt_orphans(&mut self) {
        let Some(adopter) = &self.adopter else { return };
        self.kids.clear();
        if adopter
            .read_children(1, &mut self.buf, &mut self.kids)
            .is_err()
        {
            return;
        }
        self.add_new_kids();
    }

    /// Adds the children of member `i` that are not members yet, each read once on the spot.
    fn discover_children(&mut self, i: usize) {
        self.kids.clear();
        let threads = self.members[i].last.threads;
        if self.members[i]
            .handle
            .read_children(threads, &mut self.buf, &mut self.kids)
            .is_err()
        {
            return;
        }
        self.add_new_kids();
    }

    /// Adds the processes in `self.kids` that are not members yet, each read once on the spot.
    fn add_new_kids(&mut self) {
        for k in 0..self.kids.len() {
            let pid = self.kids[k];
            if self.index.contains_key(&pid) {
                continue;
            }
            let Ok(handle) = self.procfs.open(pid) else {
                continue;
            };
            let Ok(statm) = handle.read_statm(&mut self.buf) else {
                continue;
            };
            match handle.read_status(&mut self.buf) {
                Ok(last) if last.has_mm => {
                    self.index.insert(pid, self.members.len());
                    self.members.push(Member {
                        handle,
                        last,
                        statm,
                        status_at: Instant::now(),
                    });
                }
                _ => {}
            }
        }
    }

    fn remove(&mut self, i: usize) {
        let m = self.members.swap_remove(i);
        self.index.remove(&m.handle.pid);
        if let Some(moved) = self.members.get(i) {
            self.index.insert(moved.handle.pid, i);
        }
        self.remember_departed(ProcessRecord {
            pid: m.handle.pid,
            start_time_ticks: m.handle.start_time,
            comm: m.handle.comm.clone(),
            hwm_bytes: m.last.hwm,
        });
    }

    fn remember_departed(&mut self, rec: ProcessRecord) {
        self.departed_count += 1;
        let pos = self
            .departed
            .partition_point(|r| r.hwm_bytes >= rec.hwm_bytes);
        if pos < DEPARTED_KEEP {
            self.departed.insert(pos, rec);
            self.departed.truncate(DEPARTED_KEEP);
        }
    }

    /// Every process seen so far with its highest VmHWM: members still alive and the departed
    /// with the largest peaks; largest first.
    pub fn processes(&self) -> Vec<ProcessRecord> {
        let mut all: Vec<ProcessRecord> = self
            .members
            .iter()
            .map(|m| ProcessRecord {
                pid: m.handle.pid,
                start_time_ticks: m.handle.start_time,
                comm: m.handle.comm.clone(),
                hwm_bytes: m.last.hwm,
            })
            .chain(self.departed.iter().cloned())
            .collect();
        all.sort_by_key(|p| std::cmp::Reverse(p.hwm_bytes));
        all
    }

    /// How many processes have left the tree since it was first sampled.
    pub fn departed_count(&self) -> u64 {
        self.departed_count
    }

    /// Each member's handle with its latest status, for per-process work (PSS, resets).
    pub fn each_member(&self) -> impl Iterator<Item = (&ProcHandle, &StatusMem)> {
        self.members.iter().map(|m| (&m.handle, &m.last))
    }
}

fn add(s: &mut TreeSample, pid: i32, m: &StatusMem) {
    s.rss += m.rss;
    s.anon += m.anon;
    s.file += m.file;
    s.shmem += m.shmem;
    s.swap += m.swap;
    s.locked += m.locked;
    s.pinned += m.pinned;
    s.processes += 1;
    if m.rss > s.top_rss || s.processes == 1 {
        s.top_rss = m.rss;
        s.top_pid = pid;
    }
    s.hwm_max = s.hwm_max.max(m.hwm);
    s.hwm_sum += m.hwm;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    /// Writes a fake /proc/PID with the given start time, RSS, HWM (kB) and children.
    fn fake_proc(root: &Path, pid: i32, start: u64, rss_kb: u64, hwm_kb: u64, kids: &[i32]) {
        let dir = root.join(pid.to_string());
        fs::create_dir_all(dir.join(format!("task/{pid}"))).unwrap();
        fs::write(
            dir.join("stat"),
            format!("{pid} (fake{pid}) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0\n"),
        )
        .unwrap();
        fs::write(
            dir.join("status"),
            format!(
                "Name:\tfake\nVmHWM:\t{hwm_kb} kB\nVmRSS:\t{rss_kb} kB\nRssAnon:\t{rss_kb} kB\n\
RssFile:\t0 kB\nRssShmem:\t0 kB\nVmSwap:\t0 kB\nThreads:\t1\n"
            ),
        )
        .unwrap();
        fs::write(
            dir.join("statm"),
            format!("100 {} 10 1 0 50 0\n", rss_kb / 4),
        )
        .unwrap();
        let list: Vec<String> = kids.iter().map(|k| k.to_string()).collect();
        fs::write(dir.join(format!("task/{pid}/children")), list.join(" ")).unwrap();
    }

    fn tree_over(root: &Path, pid: i32) -> Tree {
        let fs = ProcFs::new(root);
        let h = fs.open(pid).unwrap();
        Tree::new(fs, h, true)
    }

    #[test]
    fn sums_a_tree_found_through_children_files() {
        let tmp = tempfile::tempdir().unwrap();
        fake_proc(tmp.path(), 100, 1000, 1000, 1500, &[101, 102]);
        fake_proc(tmp.path(), 101, 1001, 200, 300, &[103]);
        fake_proc(tmp.path(), 102, 1002, 300, 300, &[]);
        fake_proc(tmp.path(), 103, 1003, 50, 900, &[]);
        fake_proc(tmp.path(), 999, 1, 7777, 7777, &[]); // not in the tree
        let mut t = tree_over(tmp.path(), 100);
        let s = t.sample().unwrap().unwrap();
        assert_eq!(s.processes, 4);
        assert_eq!(s.rss, (1000 + 200 + 300 + 50) * 1024);
        assert_eq!(s.top_pid, 100);
        assert_eq!(s.hwm_max, 1500 * 1024);
        assert_eq!(s.hwm_sum, (1500 + 300 + 300 + 900) * 1024);
    }

    #[test]
    fn without_children_only_the_root_counts() {
        let tmp = tempfile::tempdir().unwrap();
        fake_proc(tmp.path(), 100, 1000, 1000, 1500, &[101]);
        fake_proc(tmp.path(), 101, 1001, 200, 300, &[]);
        let fs = ProcFs::new(tmp.path());
        let h = fs.open(100).unwrap();
        let mut t = Tree::new(fs, h, false);
        assert_eq!(t.sample().unwrap().unwrap().processes, 1);
    }

    #[test]
    fn a_child_vanishing_between_two_reads_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        fake_proc(tmp.path(), 100, 1000, 1000, 1000, &[101]);
        fake_proc(tmp.path(), 101, 1001, 200, 400, &[]);
        let mut t = tree_over(tmp.path(), 100);
        assert_eq!(t.sample().unwrap().unwrap().processes, 2);
        // The child exits: its directory goes away, though the parent's list still names it.
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        let s = t.sample().unwrap().unwrap();
        assert_eq!(s.processes, 1);
        assert_eq!(s.rss, 1000 * 1024);
        // Its peak is remembered.
        let procs = t.processes();
        assert!(procs
            .iter()
            .any(|p| p.pid == 101 && p.hwm_bytes == 400 * 1024));
    }

    #[test]
    fn a_reused_pid_is_a_new_process() {
        let tmp = tempfile::tempdir().unwrap();
        fake_proc(tmp.path(), 100, 1000, 1000, 1000, &[101]);
        fake_proc(tmp.path(), 101, 1001, 200, 400, &[]);
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap().unwrap();
        // PID 101 exits and a new process gets PID 101 (a later start time).
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        fake_proc(tmp.path(), 101, 5000, 700, 700, &[]);
        let s = t.sample().unwrap().unwrap();
        // The old handle fails, the new process is discovered in the same pass.
        assert_eq!(s.processes, 2);
        assert_eq!(s.rss, (1000 + 700) * 1024);
        let procs = t.processes();
        assert!(procs
            .iter()
            .any(|p| p.pid == 101 && p.start_time_ticks == 1001));
        assert!(procs
            .iter()
            .any(|p| p.pid == 101 && p.start_time_ticks == 5000));
    }

    #[test]
    fn a_descendants_status_is_read_again_when_its_statm_moves() {
        let tmp = tempfile::tempdir().unwrap();
        fake_proc(tmp.path(), 100, 1000, 1000, 1000, &[101]);
        fake_proc(tmp.path(), 101, 1001, 200, 200, &[]);
        let mut t = tree_over(tmp.path(), 100);
        assert_eq!(t.sample().unwrap().unwrap().rss, 1200 * 1024);
        // The status changes but statm does not: the last status read (under 1 s old) stands.
        let status = tmp.path().join("101/status");
        let text = fs::read_to_string(&status)
            .unwrap()
            .replace("VmRSS:\t200 kB", "VmRSS:\t800 kB");
        fs::write(&status, text).unwrap();
        assert_eq!(t.sample().unwrap().unwrap().rss, 1200 * 1024);
        // statm moves: status is read again.
        fs::write(tmp.path().join("101/statm"), "100 200 10 1 0 50 0\n").unwrap();
        assert_eq!(t.sample().unwrap().unwrap().rss, 1800 * 1024);
    }

    #[test]
    fn orphans_reparented_to_the_adopter_stay_in_the_tree() {
        let tmp = tempfile::tempdir().unwrap();
        fake_proc(tmp.path(), 1, 1, 5000, 5000, &[100, 300]); // the adopter (memmon)
        fake_proc(tmp.path(), 100, 1000, 1000, 1000, &[]);
        fake_proc(tmp.path(), 300, 3000, 300, 300, &[]); // an orphan of the command
        let fs = ProcFs::new(tmp.path());
        let mut t = Tree::new(fs.clone(), fs.open(100).unwrap(), true);
        assert_eq!(t.sample().unwrap().unwrap().processes, 1);
        t.adopt_orphans_of(fs.open(1).unwrap());
        let s = t.sample().unwrap().unwrap();
        assert_eq!(s.processes, 2, "the adopter itself is not a member");
        assert_eq!(s.rss, 1300 * 1024);
    }

    #[test]
    fn the_root_vanishing_ends_the_tree() {
        let tmp = tempfile::tempdir().unwrap();
        fake_proc(tmp.path(), 100, 1000, 1000, 1000, &[]);
        let mut t = tree_over(tmp.path(), 100);
        assert!(t.sample().unwrap().is_some());
        fs::remove_dir_all(tmp.path().join("100")).unwrap();
        assert!(t.sample().unwrap().is_none());
    }

    #[test]
    fn a_reused_root_pid_is_not_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        fake_proc(tmp.path(), 100, 1000, 1000, 1000, &[]);
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap();
        fs::remove_dir_all(tmp.path().join("100")).unwrap();
        fake_proc(tmp.path(), 100, 9999, 5, 5, &[]);
        assert!(t.sample().unwrap().is_none());
    }
}
