//! /proc readers: the memory lines of /proc/PID/status, a process's start time (field 22 of
//! /proc/PID/stat), its direct children (/proc/PID/task/TID/children), PSS from smaps_rollup,
//! and the high-water-mark reset (writing `5` to /proc/PID/clear_refs). Also the machine's
//! numbers they are read in: clock ticks, the page size, the CPUs online (and so how far this
//! machine's RSS counters may be off, `local_batching_bound_bytes`).
//!
//! A process is opened once, by (pid, start time), and keeps a handle on its /proc directory and
//! open descriptors of the files read every tick (status, statm, children), re-read with pread:
//! no path lookup per tick, and once the process is gone — even if its PID is reused at once —
//! the reads fail (ESRCH) instead of reading the newcomer.
//!
//! Each thread has its own children file. The main thread's is read every time; those of the
//! other threads are held open too but read, with a fresh listing of task/, only when the
//! thread count changed or [`OTHER_THREADS_EVERY`] has passed (see `read_children`), so a
//! daemon with hundreds of threads costs about what a single-threaded process does.

use rustix::fs::{Mode, OFlags};
use std::cell::OnceCell;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the children files of threads other than the main thread are read (and task/
/// listed again) while the thread count stays the same.
pub const OTHER_THREADS_EVERY: Duration = Duration::from_millis(100);

/// Clock ticks per second (`CLK_TCK`): the unit of /proc/PID/stat's start time and CPU times.
pub fn clock_ticks_per_s() -> f64 {
    rustix::param::clock_ticks_per_second().max(1) as f64
}

/// The CPUs online on this machine (1 if the kernel will not say).
pub fn online_cpus() -> u64 {
    crate::sys::raw::cpus_online().unwrap_or(1)
}

/// `model::peak::batching_bound_bytes` of this machine.
pub fn local_batching_bound_bytes() -> u64 {
    crate::model::peak::batching_bound_bytes(online_cpus(), ProcFs::page_size())
}

/// Why a /proc read failed.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("no process with PID {0}")]
    NoSuchProcess(i32),
    #[error("permission denied on {0} (run as the target's owner or root)")]
    PermissionDenied(PathBuf),
    #[error("cannot read {0}: {1}")]
    Io(PathBuf, io::Error),
    #[error("cannot parse {0}: {1}")]
    Parse(PathBuf, String),
}

impl crate::error::Classified for ProcError {
    /// A process that is gone or not ours to read is a target not found or not readable.
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            ProcError::NoSuchProcess(_) | ProcError::PermissionDenied(_) => Class::NoTarget,
            ProcError::Io(..) | ProcError::Parse(..) => Class::Failure,
        }
    }
}

/// The memory fields memmon reads from /proc/PID/status, in bytes (the kernel prints kB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusMem {
    pub rss: u64,
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    pub swap: u64,
    pub locked: u64,
    pub pinned: u64,
    pub hwm: u64,
    /// VmPeak: the most address space mapped. A reset of the marks (clear_refs) lowers VmHWM
    /// alone; an exec, which gives the process a new address space, lowers both.
    pub vm_peak: u64,
    /// VmSize: the virtual address space mapped (bytes), not memory used.
    pub vm_size: u64,
    pub threads: u32,
    /// A hash of the `Name:` line (the command name): when it changes, the process has exec'd
    /// (or renamed itself), and its name and command line are read again.
    pub name_hash: u64,
    /// False for a zombie or a kernel thread: no `VmRSS` line at all.
    pub has_mm: bool,
}

/// A /proc file system, real or fake.
#[derive(Debug, Clone)]
pub struct ProcFs {
    root: PathBuf,
    /// True for a tree of ordinary files (tests), where a deleted file stands for an ended
    /// process: the kernel's ESRCH on a held descriptor is emulated by checking its link count.
    fake: bool,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs::new("/proc")
    }
}

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> ProcFs {
        let root = root.into();
        let fake = !is_procfs(&root);
        ProcFs { root, fake }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True for the kernel's own /proc (not a tree of files made by a test): its PIDs are
    /// those of the processes the kernel's events name.
    pub fn is_real(&self) -> bool {
        !self.fake
    }

    /// Whether `pid` is `root` or descends from it, its parents read up to 64 generations (a
    /// process gone, or one whose parent cannot be read, does not).
    pub fn descends(&self, mut pid: i32, root: i32) -> bool {
        for _ in 0..64 {
            if pid == root {
                return true;
            }
            match self.open(pid).ok().and_then(|h| h.ppid()) {
                Some(pp) if pp > 0 => pid = pp,
                _ => return false,
            }
        }
        false
    }

    /// Opens a process: reads its start time and command name, and keeps its directory.
    pub fn open(&self, pid: i32) -> Result<ProcHandle, ProcError> {
        let dir_path = self.root.join(pid.to_string());
        let dir = open_dir(&dir_path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ProcError::NoSuchProcess(pid),
            io::ErrorKind::PermissionDenied => ProcError::PermissionDenied(dir_path.clone()),
            _ => ProcError::Io(dir_path.clone(), e),
        })?;
        let status = open_at(&dir, "status").map_err(|e| classify(pid, &dir_path, "status", e))?;
        let mut handle = ProcHandle {
            pid,
            start_time: 0,
            comm: String::new(),
            dir,
            dir_path,
            status,
            statm: OnceCell::new(),
            stat: OnceCell::new(),
            children: OnceCell::new(),
            others: OtherThreads::default(),
            fake: self.fake,
        };
        let mut buf = Vec::with_capacity(512);
        handle
            .read_file("stat", &mut buf)
            .map_err(|e| handle.classify("stat", e))?;
        let (comm, start) = parse_stat(&buf).ok_or_else(|| {
            ProcError::Parse(handle.dir_path.join("stat"), "malformed stat line".into())
        })?;
        handle.comm = comm;
        handle.start_time = start;
        Ok(handle)
    }

    /// The start time of process `pid` (clock ticks since boot), `None` when there is none.
    pub fn start_time(&self, pid: i32) -> Option<u64> {
        let mut buf = Vec::with_capacity(512);
        let mut f = File::open(self.root.join(format!("{pid}/stat"))).ok()?;
        read_all(&mut f, &mut buf).ok()?;
        parse_stat(&buf).map(|(_, start)| start)
    }

    /// Lists every PID under the root (used once to resolve `--name`, never per tick).
    pub fn all_pids(&self) -> Result<Vec<i32>, ProcError> {
        let entries =
            std::fs::read_dir(&self.root).map_err(|e| ProcError::Io(self.root.clone(), e))?;
        let mut pids: Vec<i32> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .collect();
        pids.sort_unstable();
        Ok(pids)
    }

    /// Page size in bytes, for the recording's metadata.
    pub fn page_size() -> u64 {
        rustix::param::page_size() as u64
    }
}

/// What pagemap says of one page ([`ProcHandle::page_states`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageState {
    /// In RAM (bit 63): not swapped out, not released.
    pub present: bool,
    /// Soft-dirty (bit 55): written since the process's soft-dirty bits were last cleared, or
    /// in a mapping made or grown since (the kernel then reports every page of it so).
    pub soft_dirty: bool,
}

/// The page frame number of a pagemap entry (bits 0-54) where its page is present: 0 where the
/// reader may not see frames (without CAP_SYS_ADMIN the kernel gives 0).
pub fn pagemap_pfn(entry: u64) -> Option<u64> {
    let pfn = entry & ((1 << 55) - 1);
    (entry >> 63 == 1 && pfn != 0).then_some(pfn)
}

impl PageState {
    /// From a pagemap entry.
    pub fn of(entry: u64) -> PageState {
        PageState {
            present: entry >> 63 == 1,
            soft_dirty: (entry >> 55) & 1 == 1,
        }
    }
}

/// Whether this kernel keeps soft-dirty bits (CONFIG_MEM_SOFT_DIRTY: Debian's 5.10 to 7.3 do, as
/// the lane found; this machine's 6.18 cloud kernel does not, and there clear_refs `4` does
/// nothing): a page of
/// memmon's own, written, reads soft-dirty in its pagemap. Asked once.
pub fn soft_dirty_tracked() -> bool {
    static TRACKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACKED.get_or_init(|| {
        // Where the kernel keeps the bits, a page written since they were last cleared (never,
        // for memmon's own) reads soft-dirty; where it does not, no page ever does.
        let page = rustix::param::page_size() as u64;
        let mut mine = vec![0u8; 2 * page as usize];
        let at = mine.as_mut_ptr() as u64;
        let first = at.div_ceil(page);
        std::hint::black_box(&mut mine)[(first * page - at) as usize] = 1;
        read_own_pagemap(first).is_some_and(|e| PageState::of(e).soft_dirty)
    })
}

/// memmon's own pagemap entry for page number `n`.
fn read_own_pagemap(n: u64) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let f = File::open("/proc/self/pagemap").ok()?;
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, n * 8).ok()?;
    Some(u64::from_ne_bytes(b))
}

/// One process, pinned by (pid, start time) through a handle on its /proc directory.
#[derive(Debug)]
pub struct ProcHandle {
    pub pid: i32,
    /// Start time in clock ticks since boot (field 22 of /proc/PID/stat).
    pub start_time: u64,
    /// The command name (`comm`, at most 15 bytes).
    pub comm: String,
    dir: OwnedFd,
    dir_path: PathBuf,
    status: File,
    statm: OnceCell<File>,
    /// /proc/PID/stat, held once `read_stat_counts` is first called.
    stat: OnceCell<File>,
    children: OnceCell<File>,
    others: OtherThreads,
    fake: bool,
}

/// The children files of the threads other than the main thread, held open.
#[derive(Debug, Default)]
struct OtherThreads {
    /// (TID, its task/TID/children), sorted by TID.
    files: Vec<(i32, File)>,
    /// The thread count given when task/ was last listed, and when; `None`: never listed.
    listed: Option<(u32, Instant)>,
}

impl ProcHandle {
    /// Reads the memory lines of /proc/PID/status. `buf` is reused between calls.
    pub fn read_status(&self, buf: &mut Vec<u8>) -> Result<StatusMem, ProcError> {
        let n = self
            .pread(&self.status, buf)
            .map_err(|e| self.classify("status", e))?;
        Ok(parse_status(&buf[..n]))
    }

    /// Reads the memory lines of /proc/PID/status, and what /proc/PID/statm would say at the
    /// same moment (see [`statm_of_status`]): one read where a caller compares statm later.
    pub fn read_status_and_statm(
        &self,
        buf: &mut Vec<u8>,
    ) -> Result<(StatusMem, [u64; 7]), ProcError> {
        let n = self
            .pread(&self.status, buf)
            .map_err(|e| self.classify("status", e))?;
        Ok(parse_status_and_statm(&buf[..n]))
    }

    /// Reads /proc/PID/statm: the seven page counts (size, resident, shared, text, lib, data,
    /// dirty). Five times cheaper than status; used to tell whether status needs reading.
    pub fn read_statm(&self, buf: &mut Vec<u8>) -> Result<[u64; 7], ProcError> {
        let f = match self.statm.get() {
            Some(f) => f,
            None => {
                let f = open_at(&self.dir, "statm").map_err(|e| self.classify("statm", e))?;
                self.statm.get_or_init(|| f)
            }
        };
        let n = self.pread(f, buf).map_err(|e| self.classify("statm", e))?;
        let mut out = [0u64; 7];
        for (slot, word) in out
            .iter_mut()
            .zip(buf[..n].split(|b| b.is_ascii_whitespace()))
        {
            *slot = parse_u64(word);
        }
        Ok(out)
    }

    /// The fault counts of /proc/PID/stat, with the parent PID (field 4), read from its held
    /// descriptor: the process's own major faults (`majflt`, field 12: every thread's, those
    /// of threads that exited included) and the minor faults of its waited-for children
    /// (`cminflt`, field 11): that rises each time the process reaps a child, by the faults of
    /// that child's whole life (never 0 for a process that touched memory), so a rise tells
    /// that a child exited, even one born and gone between two samples.
    pub fn read_stat_counts(&self, buf: &mut Vec<u8>) -> Result<StatCounts, ProcError> {
        let f = match self.stat.get() {
            Some(f) => f,
            None => {
                let f = open_at(&self.dir, "stat").map_err(|e| self.classify("stat", e))?;
                self.stat.get_or_init(|| f)
            }
        };
        let n = self.pread(f, buf).map_err(|e| self.classify("stat", e))?;
        parse_stat_counts(&buf[..n]).ok_or_else(|| {
            ProcError::Parse(self.dir_path.join("stat"), "malformed stat line".into())
        })
    }

    /// Appends the PIDs of this process's direct children to `out`; `threads` is its thread
    /// count (from status), `now` the time of the tick.
    ///
    /// Each thread has its own children file (a child belongs to the thread that forked it).
    /// What is exact: the main thread's file is read at every call, so the children of a
    /// single-threaded process, and those forked by the main thread, are found at the tick
    /// they appear. The other threads' files are held open and read only when `threads`
    /// differs from the count at the last listing of task/ (a thread started or ended: task/ is
    /// listed again at once), or when [`OTHER_THREADS_EVERY`] has passed since — then task/ is
    /// listed again too, which catches a thread replaced by another while the count stayed the
    /// same (its held file would read empty). So a child forked by another thread is found
    /// within that time (at the next call, when calls are further apart); its VmHWM still
    /// covers its whole life. Children of a thread that ends pass to a live thread of the
    /// same process, usually the main one.
    pub fn read_children(
        &mut self,
        threads: u32,
        now: Instant,
        buf: &mut Vec<u8>,
        out: &mut Vec<i32>,
    ) -> Result<(), ProcError> {
        let f = match self.children.get() {
            Some(f) => f,
            None => {
                let rel = format!("task/{}/children", self.pid);
                let f = open_at(&self.dir, &rel).map_err(|e| self.classify(&rel, e))?;
                self.children.get_or_init(|| f)
            }
        };
        let n = self
            .pread(f, buf)
            .map_err(|e| self.classify("children", e))?;
        parse_pid_list(&buf[..n], out);
        let due = match self.others.listed {
            None => threads > 1,
            Some((count, at)) => {
                count != threads || (threads > 1 && now.duration_since(at) >= OTHER_THREADS_EVERY)
            }
        };
        if !due {
            return Ok(());
        }
        // A listing that fails (the process is ending) is tried again at the next due time; the
        // main thread's children are kept meanwhile.
        self.others.listed = Some((threads, now));
        if self.list_other_threads().is_err() {
            return Ok(());
        }
        for (_, f) in &self.others.files {
            // A thread may have ended since the listing: its file reads empty or fails, and
            // that is not an error.
            if let Ok(n) = self.pread(f, buf) {
                parse_pid_list(&buf[..n], out);
            }
        }
        Ok(())
    }

    /// The IDs of this process's threads (task/ listed now); errors when the process has ended.
    pub fn threads(&self) -> Result<Vec<i32>, ProcError> {
        let task_dir = self.dir_path.join("task");
        let entries = std::fs::read_dir(&task_dir).map_err(|e| self.classify("task", e))?;
        Ok(entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
            .collect())
    }

    /// Appends the PIDs of this process's direct children to `out`, from the children file of
    /// every thread (task/ listed now), each opened, read and closed: for a tree that hears of
    /// new children from fork events, which reads them once, when it first meets the process.
    /// Errors when task/ cannot be listed (the process has ended); a thread that ends meanwhile
    /// is skipped.
    pub fn read_children_of_every_thread(
        &self,
        buf: &mut Vec<u8>,
        out: &mut Vec<i32>,
    ) -> Result<(), ProcError> {
        let task_dir = self.dir_path.join("task");
        let entries = std::fs::read_dir(&task_dir).map_err(|e| self.classify("task", e))?;
        for tid in entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        {
            if let Ok(f) = open_at(&self.dir, &format!("task/{tid}/children")) {
                if let Ok(n) = self.pread(&f, buf) {
                    parse_pid_list(&buf[..n], out);
                }
            }
        }
        Ok(())
    }

    /// Lists task/ and holds a children file open for each thread but the main one: the files
    /// of threads still listed are kept, those of threads that ended are closed. (A kept file
    /// could belong to an ended thread only if its TID were given to a new thread of the same
    /// process between two listings: PIDs are reused only after pid_max others.)
    fn list_other_threads(&mut self) -> Result<(), ProcError> {
        let task_dir = self.dir_path.join("task");
        let entries = std::fs::read_dir(&task_dir).map_err(|e| self.classify("task", e))?;
        let mut tids: Vec<i32> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .filter(|&tid| tid != self.pid)
            .collect();
        tids.sort_unstable();
        let mut old = std::mem::take(&mut self.others.files)
            .into_iter()
            .peekable();
        for tid in tids {
            while old.next_if(|(t, _)| *t < tid).is_some() {}
            if let Some(kept) = old.next_if(|(t, _)| *t == tid) {
                self.others.files.push(kept);
                continue;
            }
            // A thread may end between the listing and the open: that is not an error.
            if let Ok(f) = open_at(&self.dir, &format!("task/{tid}/children")) {
                self.others.files.push((tid, f));
            }
        }
        Ok(())
    }

    /// Proportional set size from /proc/PID/smaps_rollup, in bytes. Walks the page tables
    /// under the target's mmap lock: callers rate-limit and guard it by RSS.
    pub fn read_pss(&self, buf: &mut Vec<u8>) -> Result<u64, ProcError> {
        self.read_file("smaps_rollup", buf)
            .map_err(|e| self.classify("smaps_rollup", e))?;
        find_kb(buf, b"Pss:").ok_or_else(|| {
            ProcError::Parse(self.dir_path.join("smaps_rollup"), "no Pss line".into())
        })
    }

    /// What another thread needs to read this process's PSS: a descriptor of its own on the
    /// process's /proc directory (a reused PID cannot be read in its place).
    pub fn pss_source(&self) -> io::Result<PssSource> {
        Ok(PssSource {
            pid: self.pid,
            comm: self.comm.clone(),
            dir: self.dir.try_clone()?,
            dir_path: self.dir_path.clone(),
        })
    }

    /// Clears the soft-dirty bits of every page of the process by writing `4` to
    /// /proc/PID/clear_refs: the kernel write-protects each present page, so the next write to
    /// it faults (a page fault the ledger samples, with the writer's stack) and sets its bit
    /// again. It holds the process's memory-map lock while it walks the page tables. A kernel
    /// built without soft-dirty bits takes the write and does nothing ([`soft_dirty_tracked`]).
    pub fn clear_soft_dirty(&self) -> Result<(), ProcError> {
        self.clear_refs(b"4")
    }

    /// Resets the kernel's high-water mark (VmHWM) to the current RSS by writing `5` to
    /// /proc/PID/clear_refs — the only value that does not touch page reclaim state.
    pub fn reset_hwm(&self) -> Result<(), ProcError> {
        self.clear_refs(b"5")
    }

    /// Writes `value` to /proc/PID/clear_refs.
    fn clear_refs(&self, value: &[u8]) -> Result<(), ProcError> {
        use std::io::Write;
        let mut f = self
            .open_file("clear_refs", libc::O_WRONLY)
            .map_err(|e| self.classify("clear_refs", e))?;
        f.write_all(value)
            .map_err(|e| self.classify("clear_refs", e))
    }

    /// The full command line, arguments joined by spaces (empty for a zombie).
    pub fn cmdline(&self) -> String {
        let mut buf = Vec::new();
        if self.read_file("cmdline", &mut buf).is_err() {
            return String::new();
        }
        while buf.last() == Some(&0) {
            buf.pop();
        }
        buf.iter_mut().for_each(|b| {
            if *b == 0 {
                *b = b' '
            }
        });
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// The command name now (`comm`, from /proc/PID/stat): it changes at exec.
    pub fn read_comm(&self, buf: &mut Vec<u8>) -> Result<String, ProcError> {
        self.read_file("stat", buf)
            .map_err(|e| self.classify("stat", e))?;
        parse_stat(buf).map(|(comm, _)| comm).ok_or_else(|| {
            ProcError::Parse(self.dir_path.join("stat"), "malformed stat line".into())
        })
    }

    /// The command line now, arguments joined by spaces and cut to at most `max` bytes (one
    /// read, whatever the full length). `None` when it cannot be read or is empty (a zombie, a
    /// kernel thread). Processes that set their own title (PostgreSQL's `postgres: checkpointer`)
    /// show it here.
    pub fn read_cmdline(&self, buf: &mut Vec<u8>, max: usize) -> Option<String> {
        let mut f = self.open_file("cmdline", libc::O_RDONLY).ok()?;
        buf.clear();
        buf.resize(max, 0);
        let n = loop {
            match f.read(&mut buf[..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        };
        Some(join_cmdline(&buf[..n])).filter(|s| !s.is_empty())
    }

    /// The parent PID (field 4 of /proc/PID/stat), if the process is still there.
    pub fn ppid(&self) -> Option<i32> {
        let mut buf = Vec::new();
        self.read_file("stat", &mut buf).ok()?;
        let close = memchr::memrchr(b')', &buf)?;
        let rest = std::str::from_utf8(&buf[close + 1..]).ok()?;
        rest.split_ascii_whitespace().nth(1)?.parse().ok()
    }

    /// The CPU time used so far by this process (all its threads) and by the children it has
    /// reaped, user and system, in clock ticks (`CLK_TCK`): fields 14 + 16 and 15 + 17 of
    /// /proc/PID/stat. `None` once it is gone or replaced by another process with its PID.
    pub fn cpu_ticks_with_reaped(&self, buf: &mut Vec<u8>) -> Option<(u64, u64)> {
        self.read_file("stat", buf).ok()?;
        let c = parse_stat_cpu(buf)?;
        (c.start == self.start_time)
            .then_some((c.user + c.children_user, c.system + c.children_system))
    }

    /// The kernel has finished loading the process's program (exec): its code is mapped
    /// (`startcode`, field 26 of /proc/PID/stat, is set at the end of the ELF loader; it reads
    /// 0 before, and 1 when the reader may not see it). False once the process is gone.
    pub fn exec_done(&self) -> bool {
        let mut buf = Vec::new();
        self.read_file("stat", &mut buf).is_ok()
            && parse_stat_startcode(&buf).is_some_and(|c| c != 0)
    }

    /// True while this very process (not a successor with the same PID) still exists.
    pub fn is_alive(&self) -> bool {
        let mut buf = Vec::new();
        match self.read_file("stat", &mut buf) {
            Ok(()) => parse_stat(&buf).is_some_and(|(_, start)| start == self.start_time),
            Err(_) => false,
        }
    }

    pub fn dir_path(&self) -> &Path {
        &self.dir_path
    }

    fn open_file(&self, rel: &str, flags: libc::c_int) -> io::Result<File> {
        open_at_flags(&self.dir, rel, flags)
    }

    /// Re-reads a held descriptor from offset 0 into `buf`; returns the number of bytes, which
    /// are `buf[..n]`. A read that does not fill the buffer is the end of the file (seq_file
    /// fills the buffer while it has records), so the common case is one system call; asking
    /// again at the end would make the kernel generate the whole file a second time.
    fn pread(&self, f: &File, buf: &mut Vec<u8>) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        if buf.len() < 4096 {
            buf.resize(4096, 0);
        }
        let mut n = 0;
        loop {
            match f.read_at(&mut buf[n..], n as u64) {
                Ok(0) => break,
                Ok(k) => {
                    n += k;
                    if n < buf.len() {
                        break;
                    }
                    let grown = buf.len() * 2;
                    buf.resize(grown, 0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.fake {
            use std::os::unix::fs::MetadataExt;
            if f.metadata()?.nlink() == 0 {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        Ok(n)
    }

    /// Reads a whole file relative to the process directory into `buf` (cleared first):
    /// through the directory held since the process was found, so never a later process that
    /// took its PID.
    pub fn read_file(&self, rel: &str, buf: &mut Vec<u8>) -> io::Result<()> {
        let mut f = self.open_file(rel, libc::O_RDONLY)?;
        read_all(&mut f, buf)
    }

    /// The bytes of `[start, end)` present in RAM now (pages of `page` bytes): its pagemap
    /// entries read 8192 at a time, bit 63 counted. Costs a walk of those pages' tables, as
    /// smaps does of the whole process.
    pub fn present_bytes(&self, start: u64, end: u64, page: u64) -> Result<u64, ProcError> {
        use std::os::unix::fs::FileExt;
        let f = self
            .open_file("pagemap", libc::O_RDONLY)
            .map_err(|e| self.classify("pagemap", e))?;
        let (mut at, last) = (start / page, end.div_ceil(page));
        let mut buf = vec![0u8; 8192 * 8];
        let mut present = 0u64;
        while at < last {
            let n = ((last - at).min(8192) * 8) as usize;
            let got = f
                .read_at(&mut buf[..n], at * 8)
                .map_err(|e| self.classify("pagemap", e))?;
            if got == 0 {
                break;
            }
            present += buf[..got - got % 8]
                .chunks_exact(8)
                .filter(|e| e[7] & 0x80 != 0)
                .count() as u64;
            at += (got / 8) as u64;
        }
        Ok(present * page)
    }

    /// Each page's state now (its address, a multiple of `page`): /proc/PID/pagemap's bit 63
    /// (present in RAM) and bit 55 (soft-dirty: written since the bits were last cleared), one
    /// 8-byte entry per page read where it is (no page-table walk beyond those pages). `pages`
    /// sorted; a run of neighbours is read at once.
    pub fn page_states(&self, pages: &[u64], page: u64) -> Result<Vec<PageState>, ProcError> {
        Ok(self
            .pagemap_entries(pages, page)?
            .into_iter()
            .map(PageState::of)
            .collect())
    }

    /// The pagemap entries of the pages at `pages` (sorted addresses), one each: 0 for a page
    /// past the end of what pagemap gives. Neighbours within 64 pages are read together.
    pub fn pagemap_entries(&self, pages: &[u64], page: u64) -> Result<Vec<u64>, ProcError> {
        use std::os::unix::fs::FileExt;
        let f = self
            .open_file("pagemap", libc::O_RDONLY)
            .map_err(|e| self.classify("pagemap", e))?;
        let mut out = Vec::with_capacity(pages.len());
        let mut buf = Vec::new();
        let mut i = 0;
        while i < pages.len() {
            let first = pages[i] / page;
            // The neighbours within 64 pages of the first: one read of up to 512 bytes.
            let mut j = i + 1;
            while j < pages.len() && pages[j] / page < first + 64 {
                j += 1;
            }
            let last = pages[j - 1] / page;
            buf.resize(((last - first + 1) * 8) as usize, 0);
            let n = f
                .read_at(&mut buf, first * 8)
                .map_err(|e| self.classify("pagemap", e))?;
            // A process that has exited (a zombie until reaped) has no memory left to read.
            if n == 0 && self.is_dead() {
                return Err(ProcError::NoSuchProcess(self.pid));
            }
            for p in &pages[i..j] {
                let at = ((p / page - first) * 8) as usize;
                let entry = buf
                    .get(at..(at + 8).min(n))
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_ne_bytes);
                out.push(entry);
            }
            i = j;
        }
        Ok(out)
    }

    /// Whether the process has exited or is exiting (its stat says so, or it is gone).
    fn is_dead(&self) -> bool {
        let mut buf = [0u8; 1024];
        match self.open_file("stat", libc::O_RDONLY) {
            Ok(f) => {
                use std::os::unix::fs::FileExt;
                let n = f.read_at(&mut buf, 0).unwrap_or(0);
                parse_stat_exiting(&buf[..n]).unwrap_or(true)
            }
            Err(_) => true,
        }
    }

    fn classify(&self, rel: &str, e: io::Error) -> ProcError {
        classify(self.pid, &self.dir_path, rel, e)
    }
}

/// One process's PSS, read on whatever thread holds this (`ProcHandle::pss_source`).
#[derive(Debug)]
pub struct PssSource {
    pub pid: i32,
    pub comm: String,
    dir: OwnedFd,
    dir_path: PathBuf,
}

impl PssSource {
    /// Proportional set size from /proc/PID/smaps_rollup, in bytes (see `ProcHandle::read_pss`),
    /// and the transparent huge pages of the same read (`AnonHugePages`; 0 where the kernel
    /// has no such line).
    pub fn read(&self, buf: &mut Vec<u8>) -> Result<SmapsSums, ProcError> {
        let rel = "smaps_rollup";
        open_at(&self.dir, rel)
            .and_then(|mut f| read_all(&mut f, buf))
            .map_err(|e| classify(self.pid, &self.dir_path, rel, e))?;
        let pss = find_kb(buf, b"Pss:")
            .ok_or_else(|| ProcError::Parse(self.dir_path.join(rel), "no Pss line".into()))?;
        Ok(SmapsSums {
            pss,
            anon_huge: find_kb(buf, b"AnonHugePages:").unwrap_or(0),
            nvidia_rss: 0,
        })
    }

    /// The process's resident size now, in bytes (statm's second field: a read of a few
    /// words, no page walk).
    pub fn resident_bytes(&self, buf: &mut Vec<u8>) -> Result<u64, ProcError> {
        self.read_file("statm", buf)?;
        let pages = buf
            .split(|b| b.is_ascii_whitespace())
            .nth(1)
            .map(parse_u64)
            .ok_or_else(|| {
                ProcError::Parse(self.dir_path.join("statm"), "no resident field".into())
            })?;
        Ok(pages * ProcFs::page_size())
    }

    /// Reads the file `rel` of the process's directory whole into `buf` (cleared first): its
    /// maps or smaps, for `probe::maps`.
    pub fn read_file(&self, rel: &str, buf: &mut Vec<u8>) -> Result<(), ProcError> {
        open_at(&self.dir, rel)
            .and_then(|mut f| read_all(&mut f, buf))
            .map_err(|e| classify(self.pid, &self.dir_path, rel, e))
    }

    /// The path of the process's program (the /proc/PID/exe link); `None` when it has none (a
    /// kernel thread, a zombie) or it may not be read.
    pub fn exe(&self) -> Option<String> {
        let link = rustix::fs::readlinkat(&self.dir, "exe", Vec::new()).ok()?;
        Some(link.to_string_lossy().into_owned())
    }

    /// The process's /proc directory, for messages.
    pub fn dir_path(&self) -> &Path {
        &self.dir_path
    }

    /// Opens a file of the process's directory (`map_files/RANGE`: the file a mapping maps, as
    /// it is mapped).
    pub fn open(&self, rel: &str) -> io::Result<File> {
        open_at(&self.dir, rel)
    }

    /// PSS and the resident bytes of the process's mappings of NVIDIA device files, in one
    /// read of /proc/PID/smaps (the page walk of `read`, with a line per mapping): for a process
    /// holding GPU memory, whose pinned host buffers are such mappings. The PSS is the sum of
    /// the mappings' (each rounded down to a kB by the kernel: at most 1 KiB less per mapping
    /// than smaps_rollup's).
    pub fn read_with_nvidia(&self, buf: &mut Vec<u8>) -> Result<SmapsSums, ProcError> {
        let rel = "smaps";
        open_at(&self.dir, rel)
            .and_then(|mut f| read_all(&mut f, buf))
            .map_err(|e| classify(self.pid, &self.dir_path, rel, e))?;
        let text = String::from_utf8_lossy(buf);
        smaps_pss_and_nvidia_rss(&text)
            .ok_or_else(|| ProcError::Parse(self.dir_path.join(rel), "no Pss line".into()))
    }
}

/// What one read of smaps_rollup or smaps gives, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmapsSums {
    /// `Pss:`.
    pub pss: u64,
    /// `AnonHugePages:`: transparent huge pages.
    pub anon_huge: u64,
    /// `Rss:` of the mappings of NVIDIA device files (smaps only; 0 from smaps_rollup).
    pub nvidia_rss: u64,
}

/// The sum of `Pss:` and `AnonHugePages:` over every mapping of a /proc/PID/smaps text, and of
/// `Rss:` over the mappings of NVIDIA device files (`/dev/nvidia*`), in bytes; `None` without a
/// Pss line (a process with no mappings left: a zombie).
pub fn smaps_pss_and_nvidia_rss(smaps: &str) -> Option<SmapsSums> {
    let (mut pss, mut nvidia, mut huge, mut seen) = (0u64, 0u64, 0u64, false);
    let mut in_nvidia = false;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else {
            continue;
        };
        let kb = || -> u64 {
            line.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        match first {
            "Pss:" => {
                pss += kb() * 1024;
                seen = true;
            }
            "Rss:" if in_nvidia => nvidia += kb() * 1024,
            "AnonHugePages:" => huge += kb() * 1024,
            f if f.ends_with(':') => {}
            // A mapping's first line: `start-end perms offset dev inode path`.
            _ => in_nvidia = crate::probe::gpu::is_nvidia_mapping(line),
        }
    }
    seen.then_some(SmapsSums {
        pss,
        anon_huge: huge,
        nvidia_rss: nvidia,
    })
}

fn classify(pid: i32, dir_path: &Path, rel: &str, e: io::Error) -> ProcError {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ESRCH) => ProcError::NoSuchProcess(pid),
        Some(libc::EACCES) | Some(libc::EPERM) => ProcError::PermissionDenied(dir_path.join(rel)),
        _ => ProcError::Io(dir_path.join(rel), e),
    }
}

fn open_at(dir: &OwnedFd, rel: &str) -> io::Result<File> {
    open_at_flags(dir, rel, libc::O_RDONLY)
}

fn open_at_flags(dir: &OwnedFd, rel: &str, flags: libc::c_int) -> io::Result<File> {
    let flags = OFlags::from_bits_retain(flags as u32) | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::openat(
        dir,
        rel,
        flags,
        Mode::empty(),
    )?))
}

/// True when `root` is a mounted proc file system.
fn is_procfs(root: &Path) -> bool {
    rustix::fs::statfs(root).is_ok_and(|st| st.f_type == rustix::fs::PROC_SUPER_MAGIC)
}

/// Reads `f` to its end into `buf` (cleared first). Unlike `Read::read_to_end`, it does not ask
/// the file's size and position first (two system calls that /proc answers with 0 anyway).
fn read_all(f: &mut File, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    loop {
        let len = buf.len();
        buf.resize(len + 4096, 0);
        match f.read(&mut buf[len..]) {
            Ok(0) => {
                buf.truncate(len);
                return Ok(());
            }
            Ok(n) => buf.truncate(len + n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => buf.truncate(len),
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        }
    }
}

fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(rustix::fs::open(path, flags, Mode::empty())?)
}

/// Parses the memory lines of /proc/PID/status. Lines it does not need are skipped; a value
/// that is missing stays 0. It runs at every tick on the root's status (some 1,400 bytes, 56
/// lines), so lines are found with memchr, a line is looked at only when its first byte can
/// start a wanted key, and parsing stops at `Threads:` once the memory lines were seen: the
/// kernel prints the memory lines, then `Threads:`, then the signal, capability and scheduling
/// lines memmon never reads.
pub fn parse_status(buf: &[u8]) -> StatusMem {
    parse_status_and_statm(buf).0
}

/// [`parse_status`], and the page counts of /proc/PID/statm that the same text gives, from the
/// same kernel counters (fs/proc/task_mmu.c): size (`VmSize`), resident (`VmRSS`: anon + file +
/// shmem), shared (`RssFile` + `RssShmem`) and data (`VmData` + `VmStk`), in pages, at their
/// places (0, 1, 2 and 5); text, lib and dirty are left 0 (compare with [`same_statm`]).
pub fn parse_status_and_statm(buf: &[u8]) -> (StatusMem, [u64; 7]) {
    let mut m = StatusMem::default();
    let (mut data, mut stack) = (0u64, 0u64);
    let mut start = 0;
    while start < buf.len() {
        let end = memchr::memchr(b'\n', &buf[start..]).map_or(buf.len(), |i| start + i);
        let line = &buf[start..end];
        start = end + 1;
        if !matches!(line.first(), Some(b'V' | b'R' | b'T' | b'N')) {
            continue;
        }
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        let key = &line[..colon];
        let slot: &mut u64 = match key {
            b"VmRSS" => {
                m.has_mm = true;
                &mut m.rss
            }
            b"RssAnon" => &mut m.anon,
            b"RssFile" => &mut m.file,
            b"RssShmem" => &mut m.shmem,
            b"VmSwap" => &mut m.swap,
            b"VmLck" => &mut m.locked,
            b"VmPin" => &mut m.pinned,
            b"VmHWM" => &mut m.hwm,
            b"VmPeak" => &mut m.vm_peak,
            b"VmSize" => &mut m.vm_size,
            b"VmData" => &mut data,
            b"VmStk" => &mut stack,
            b"Threads" => {
                m.threads = u32::try_from(parse_u64(&line[colon + 1..])).unwrap_or(u32::MAX);
                if m.has_mm {
                    break;
                }
                continue;
            }
            b"Name" => {
                m.name_hash = fnv1a(&line[colon + 1..]);
                continue;
            }
            _ => continue,
        };
        // Saturating: a damaged (or fake) 20-digit value must not overflow.
        *slot = parse_u64(&line[colon + 1..]).saturating_mul(1024);
    }
    let page = page_bytes();
    let mut statm = [0u64; 7];
    statm[0] = m.vm_size / page;
    statm[1] = m.rss / page;
    statm[2] = m.file / page + m.shmem / page;
    statm[5] = data / page + stack / page;
    (m, statm)
}

/// Whether two statm readings (or one and [`statm_of_status`]) say the same of the memory:
/// size, resident, shared and data alike.
pub fn same_statm(a: &[u64; 7], b: &[u64; 7]) -> bool {
    [0, 1, 2, 5].iter().all(|&i| a[i] == b[i])
}

/// The page size in bytes, asked once.
fn page_bytes() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(ProcFs::page_size)
}

/// FNV-1a, 64 bits: a cheap fingerprint of a short line.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The value of `key` (e.g. `Pss:`) in a `key   N kB` file, in bytes.
/// A `KEY: N kB` line of a status file (`VmRSS:`), in bytes.
pub fn status_bytes(buf: &[u8], key: &[u8]) -> Option<u64> {
    find_kb(buf, key)
}

fn find_kb(buf: &[u8], key: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(buf, key)?;
    let rest = &buf[at + key.len()..];
    let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
    Some(parse_u64(&rest[..end]).saturating_mul(1024))
}

/// Parses the first run of decimal digits in `s` (skipping leading blanks); 0 if none.
fn parse_u64(s: &[u8]) -> u64 {
    let mut v: u64 = 0;
    let mut seen = false;
    for &b in s {
        if b.is_ascii_digit() {
            v = v.saturating_mul(10).saturating_add((b - b'0') as u64);
            seen = true;
        } else if seen {
            break;
        }
    }
    v
}

/// Parses /proc/PID/stat into (comm, start time in clock ticks). The command name is in
/// parentheses and may itself contain spaces and parentheses, so fields are counted from the
/// last `)`.
pub fn parse_stat(buf: &[u8]) -> Option<(String, u64)> {
    let open = memchr::memchr(b'(', buf)?;
    let close = memchr::memrchr(b')', buf)?;
    if close < open {
        return None;
    }
    let comm = String::from_utf8_lossy(&buf[open + 1..close]).into_owned();
    let rest = std::str::from_utf8(&buf[close + 1..]).ok()?;
    // After ")": field 3 (state) is the first; start time is field 22, so the 20th here.
    let start = rest.split_ascii_whitespace().nth(19)?.parse().ok()?;
    Some((comm, start))
}

/// The CPU fields of /proc/PID/stat, in clock ticks, with the start time that identifies the
/// process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatCpu {
    pub start: u64,
    /// utime, stime: this process's threads.
    pub user: u64,
    pub system: u64,
    /// cutime, cstime: the children it has reaped (and theirs).
    pub children_user: u64,
    pub children_system: u64,
}

/// Parses the CPU fields of /proc/PID/stat: fields 14 to 17 and 22.
pub fn parse_stat_cpu(buf: &[u8]) -> Option<StatCpu> {
    let (_, start) = parse_stat(buf)?;
    let close = memchr::memrchr(b')', buf)?;
    let rest = std::str::from_utf8(&buf[close + 1..]).ok()?;
    // Fields 14 to 17 (utime, stime, cutime, cstime): the 12th to 15th after ")".
    let mut f = rest.split_ascii_whitespace().skip(11);
    let mut next = || f.next()?.parse::<u64>().ok();
    Some(StatCpu {
        start,
        user: next()?,
        system: next()?,
        children_user: next()?,
        children_system: next()?,
    })
}

/// Whether /proc/PID/stat says the process is exiting: state `Z` (a zombie) or `X`, or the
/// kernel's `PF_EXITING` in field 9 (`flags`). An exiting process has left its cgroups: its
/// /proc/PID/cgroup names the root.
pub fn parse_stat_exiting(buf: &[u8]) -> Option<bool> {
    const PF_EXITING: u64 = 0x4;
    let close = memchr::memrchr(b')', buf)?;
    let rest = std::str::from_utf8(&buf[close + 1..]).ok()?;
    // Field 3 (state) is the first after ")", field 9 (flags) the 7th.
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?;
    let flags: u64 = f.nth(5)?.parse().ok()?;
    Some(matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0)
}

/// Field 26 of /proc/PID/stat, `startcode`: where the program's code begins (0 while exec has
/// not mapped it yet).
pub fn parse_stat_startcode(buf: &[u8]) -> Option<u64> {
    let close = memchr::memrchr(b')', buf)?;
    let rest = std::str::from_utf8(&buf[close + 1..]).ok()?;
    // Field 3 (state) is the first after ")": field 26 is the 24th.
    rest.split_ascii_whitespace().nth(23)?.parse().ok()
}

/// The counts memmon reads from /proc/PID/stat at a tick (`ProcHandle::read_stat_counts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatCounts {
    /// Field 4: the parent PID.
    pub ppid: i32,
    /// Field 11, `cminflt`: the minor faults of the waited-for children.
    pub children_minflt: u64,
    /// Field 12, `majflt`: the process's major faults (a page read from disk, or from swap),
    /// its exited threads' included; not its children's.
    pub majflt: u64,
}

/// Fields 4, 11 and 12 of /proc/PID/stat: the parent PID, `cminflt` and `majflt`.
pub fn parse_stat_counts(buf: &[u8]) -> Option<StatCounts> {
    let close = memchr::memrchr(b')', buf)?;
    let rest = std::str::from_utf8(&buf[close + 1..]).ok()?;
    // Field 3 (state) is the first after ")": field 4 is the 2nd, field 11 the 9th, 12 the 10th.
    let mut fields = rest.split_ascii_whitespace();
    let ppid = fields.nth(1)?.parse().ok()?;
    let children_minflt = fields.nth(6)?.parse().ok()?;
    let majflt = fields.next()?.parse().ok()?;
    Some(StatCounts {
        ppid,
        children_minflt,
        majflt,
    })
}

/// Turns the NUL-separated arguments of /proc/PID/cmdline into one line joined by spaces,
/// without the padding at its end (PostgreSQL pads its titles with spaces). A character cut at
/// the end of a bounded read is dropped, not replaced.
pub fn join_cmdline(raw: &[u8]) -> String {
    let end = raw
        .iter()
        .rposition(|&b| b != 0 && b != b' ')
        .map_or(0, |i| i + 1);
    let joined: Vec<u8> = raw[..end]
        .iter()
        .map(|&b| if b == 0 { b' ' } else { b })
        .collect();
    match std::str::from_utf8(&joined) {
        Ok(s) => s.to_owned(),
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&joined[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(&joined).into_owned(),
    }
}

/// Parses a space-separated PID list (the format of /proc/PID/task/TID/children).
pub fn parse_pid_list(buf: &[u8], out: &mut Vec<i32>) {
    for word in buf.split(|b| b.is_ascii_whitespace()) {
        if word.is_empty() {
            continue;
        }
        if let Some(pid) = std::str::from_utf8(word).ok().and_then(|s| s.parse().ok()) {
            out.push(pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake process's pagemap, an entry per page: its pages' states are read where they are,
    /// a run of neighbours at once, a page past the file's end as absent.
    #[test]
    fn page_states_read_present_and_soft_dirty_bits_from_pagemap() {
        let dir = tempfile::tempdir().unwrap();
        crate::probe::fake::FakeProc::new(42)
            .start(1)
            .write(dir.path());
        let page = 4096u64;
        // Pages 0..200: page 3 present, 5 present and soft-dirty, 7 swapped and soft-dirty
        // (bit 62: not present), 150 soft-dirty only (a page the kernel reports so, absent).
        let mut map = vec![0u64; 200];
        map[3] = 1 << 63;
        map[5] = 1 << 63 | 1 << 55;
        map[7] = 1 << 62 | 1 << 55;
        map[150] = 1 << 55;
        let bytes: Vec<u8> = map.iter().flat_map(|e| e.to_ne_bytes()).collect();
        std::fs::write(dir.path().join("42/pagemap"), bytes).unwrap();
        let h = ProcFs::new(dir.path()).open(42).unwrap();
        let pages: Vec<u64> = [3, 4, 5, 7, 150, 300].iter().map(|p| p * page).collect();
        let got: Vec<(bool, bool)> = h
            .page_states(&pages, page)
            .unwrap()
            .iter()
            .map(|s| (s.present, s.soft_dirty))
            .collect();
        assert_eq!(
            got,
            [
                (true, false),
                (false, false),
                (true, true),
                (false, true),
                (false, true),
                (false, false)
            ]
        );
    }

    /// A process that has exited and is not reaped yet (a zombie: its /proc files there, its
    /// memory gone) reads as gone in pagemap, not as a process whose pages are all out of RAM.
    #[test]
    fn the_pagemap_of_a_process_that_exited_reads_as_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        let h = ProcFs::default().open(pid).unwrap();
        let zombie = || {
            std::fs::read(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|b| parse_stat_exiting(&b))
                == Some(true)
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !zombie() {
            assert!(std::time::Instant::now() < deadline, "`true` never exited");
            std::thread::yield_now();
        }
        let got = h.pagemap_entries(&[0x40_0000], 4096);
        child.wait().unwrap();
        assert!(
            matches!(got, Err(ProcError::NoSuchProcess(p)) if p == pid),
            "{got:?}"
        );
    }

    /// statm and status of a real idle process, read back to back: the page counts a status
    /// read gives are statm's own.
    #[test]
    fn an_exiting_process_is_told_by_its_state_or_its_flags() {
        // Fields: pid (comm) state ppid pgrp session tty_nr tpgid flags ...
        let stat = |state: &str, flags: u64| {
            format!("42 (a (b) c) {state} 1 42 42 0 -1 {flags} 10 0 0 0 0 0").into_bytes()
        };
        assert_eq!(parse_stat_exiting(&stat("S", 0x400100)), Some(false));
        assert_eq!(parse_stat_exiting(&stat("R", 0x400104)), Some(true));
        assert_eq!(parse_stat_exiting(&stat("Z", 0x400100)), Some(true));
        assert_eq!(parse_stat_exiting(&stat("X", 0)), Some(true));
        assert_eq!(parse_stat_exiting(b"42 (cut"), None);
    }

    #[test]
    fn a_status_read_gives_what_statm_says() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let fs = ProcFs::default();
        let h = fs.open(child.id() as i32).unwrap();
        let mut buf = Vec::new();
        // A process just started may still be loading: wait for its statm to hold still.
        let mut last = [u64::MAX; 7];
        let mut same = 0;
        for _ in 0..500 {
            let statm = h.read_statm(&mut buf).unwrap();
            let (status, from_status) = h.read_status_and_statm(&mut buf).unwrap();
            let again = h.read_statm(&mut buf).unwrap();
            if statm == again && statm == last {
                assert!(
                    same_statm(&statm, &from_status),
                    "statm {statm:?}, from status {from_status:?} ({status:?})"
                );
                same += 1;
                if same == 3 {
                    break;
                }
            }
            last = statm;
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(same, 3, "statm never held still");
    }

    #[test]
    fn smaps_gives_pss_of_every_mapping_and_rss_of_the_nvidia_ones() {
        let smaps = "\
00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/python3
Size:                328 kB
Rss:                 300 kB
Pss:                 150 kB
Pss_Anon:             99 kB
AnonHugePages:         0 kB
7f0000000000-7f0100000000 rw-s 00000000 00:05 1041 /dev/nvidiactl
Size:            4194304 kB
Rss:             4194304 kB
Pss:             4194304 kB
7f0200000000-7f0300000000 rw-p 00000000 00:00 0
Rss:                 4096 kB
Pss:                 4096 kB
AnonHugePages:       2048 kB
";
        assert_eq!(
            smaps_pss_and_nvidia_rss(smaps),
            Some(SmapsSums {
                pss: (150 + 4_194_304 + 4096) * 1024,
                anon_huge: 2048 * 1024,
                nvidia_rss: 4_194_304 * 1024
            })
        );
        assert_eq!(smaps_pss_and_nvidia_rss(""), None);
    }

    const STATUS: &str = "Name:\tprover\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t 9000 kB\n\
VmSize:\t 8000 kB\nVmLck:\t      16 kB\nVmPin:\t       8 kB\nVmHWM:\t    5000 kB\nVmRSS:\t    4000 kB\n\
RssAnon:\t    3000 kB\nRssFile:\t     900 kB\nRssShmem:\t     100 kB\nVmSwap:\t      12 kB\nThreads:\t7\n";

    #[test]
    fn status_fields_become_bytes() {
        let m = parse_status(STATUS.as_bytes());
        assert_eq!(m.rss, 4000 * 1024);
        assert_eq!(m.anon, 3000 * 1024);
        assert_eq!(m.file, 900 * 1024);
        assert_eq!(m.shmem, 100 * 1024);
        assert_eq!(m.swap, 12 * 1024);
        assert_eq!(m.locked, 16 * 1024);
        assert_eq!(m.pinned, 8 * 1024);
        assert_eq!(m.hwm, 5000 * 1024);
        assert_eq!(m.vm_size, 8000 * 1024);
        assert_eq!(m.threads, 7);
        assert!(m.has_mm);
    }

    /// Every line, no shortcut: what `parse_status` must agree with.
    fn parse_status_every_line(buf: &[u8]) -> StatusMem {
        let mut m = StatusMem::default();
        for line in buf.split(|&b| b == b'\n') {
            let Some((key, value)) = std::str::from_utf8(line)
                .ok()
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let kb = || parse_u64(value.as_bytes()).saturating_mul(1024);
            match key {
                "VmRSS" => (m.rss, m.has_mm) = (kb(), true),
                "RssAnon" => m.anon = kb(),
                "RssFile" => m.file = kb(),
                "RssShmem" => m.shmem = kb(),
                "VmSwap" => m.swap = kb(),
                "VmLck" => m.locked = kb(),
                "VmPin" => m.pinned = kb(),
                "VmHWM" => m.hwm = kb(),
                "VmPeak" => m.vm_peak = kb(),
                "VmSize" => m.vm_size = kb(),
                "Threads" => m.threads = parse_u64(value.as_bytes()) as u32,
                "Name" => m.name_hash = fnv1a(value.as_bytes()),
                _ => {}
            }
        }
        m
    }

    #[test]
    fn the_kernels_own_status_parses_as_every_line_read_would() {
        // This kernel's layout, read whole and read the short way: the memory lines all come
        // before `Threads:`, where the parser stops.
        let text = std::fs::read("/proc/self/status").unwrap();
        assert_eq!(parse_status(&text), parse_status_every_line(&text));
        assert!(parse_status(&text).has_mm && parse_status(&text).hwm > 0);
    }

    #[test]
    fn a_status_value_of_20_digits_saturates_instead_of_overflowing() {
        let m = parse_status(b"VmRSS:\t99999999999999999999 kB\nThreads:\t99999999999\n");
        assert_eq!(m.rss, u64::MAX);
        assert_eq!(m.threads, u32::MAX);
        assert!(m.has_mm);
    }

    #[test]
    fn zombie_status_has_no_memory() {
        let m = parse_status(b"Name:\tx\nState:\tZ (zombie)\nThreads:\t1\n");
        assert!(!m.has_mm);
        assert_eq!(m.rss, 0);
    }

    #[test]
    fn stat_start_time_survives_odd_command_names() {
        let line =
            b"1234 (a b) c)) S 1 1234 1234 0 -1 4194560 100 51234 17 0 5 3 7 2 20 0 1 0 987654 1000 50";
        let (comm, start) = parse_stat(line).unwrap();
        assert_eq!(comm, "a b) c)");
        assert_eq!(start, 987654);
        let c = parse_stat_cpu(line).unwrap();
        assert_eq!((c.start, c.user, c.system), (987654, 5, 3));
        assert_eq!((c.children_user, c.children_system), (7, 2));
        assert_eq!(
            parse_stat_counts(line),
            Some(StatCounts {
                ppid: 1,
                children_minflt: 51234,
                majflt: 17
            })
        );
        assert_eq!(parse_stat_counts(b"1 (x) S 1 1"), None);
    }

    #[test]
    fn status_name_changes_its_hash() {
        let sh = parse_status(b"Name:\tsh\nVmRSS:\t4 kB\n");
        let py = parse_status(b"Name:\tpython3\nVmRSS:\t4 kB\n");
        assert_ne!(sh.name_hash, py.name_hash);
        assert_eq!(sh.name_hash, parse_status(b"Name:\tsh\n").name_hash);
    }

    #[test]
    fn cmdline_arguments_are_joined_by_spaces() {
        assert_eq!(
            join_cmdline(b"python3\0-c\0print(1)\0"),
            "python3 -c print(1)"
        );
        assert_eq!(
            join_cmdline(b"postgres: checkpointer \0\0\0"),
            "postgres: checkpointer"
        );
        assert_eq!(join_cmdline(b""), "");
        // A bounded read that cut a two-byte character in half drops the half.
        assert_eq!(
            join_cmdline("ab\u{e9}".as_bytes().split_last().unwrap().1),
            "ab"
        );
    }

    #[test]
    fn children_list_parses_with_trailing_space() {
        let mut out = vec![];
        parse_pid_list(b"12 345 6789 ", &mut out);
        assert_eq!(out, vec![12, 345, 6789]);
    }

    proptest::proptest! {
        #[test]
        fn status_parser_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse_status(&bytes);
            let _ = parse_stat(&bytes);
            let mut out = vec![];
            parse_pid_list(&bytes, &mut out);
        }

        #[test]
        fn status_parser_reads_any_rss(kb in 0u64..(1u64 << 40)) {
            let text = format!("Name:\tx\nVmRSS:\t{kb} kB\nThreads:\t1\n");
            proptest::prop_assert_eq!(parse_status(text.as_bytes()).rss, kb * 1024);
        }
    }
}
