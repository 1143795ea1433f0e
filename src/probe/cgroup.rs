//! Reader of a memory cgroup: where a process's is (v2 `memory.peak`, or v1
//! `memory.max_usage_in_bytes`), whether it holds only the watched tree, its peak reset per run,
//! one reading of its memory files per tick ([`CgroupReader`]), and a cgroup of memmon's own for
//! a command it launches ([`OwnCgroup`]): emptied and removed by a watcher outside memmon if
//! memmon is killed, and swept at a later start if even that failed
//! ([`CgroupFs::sweep_stale_own`]).
//!
//! Built over a root path (default /sys/fs/cgroup) so tests point it at a fake tree. Layouts:
//! pure v2 (`ROOT/cgroup.controllers`), hybrid v1 with the memory controller at `ROOT/memory` and
//! v2 at `ROOT/unified`, and v1 alone (`ROOT/memory`, no v2). On a hybrid host the memory
//! controller is v1's.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Why a cgroup file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot read {0}: {1}")]
    Io(PathBuf, io::Error),
    #[error("cannot write {0}: {1}")]
    Write(PathBuf, io::Error),
    #[error("cannot parse {0}: '{1}'")]
    Parse(PathBuf, String),
    #[error("resetting {0} is not permitted (run as root or the cgroup's owner)")]
    NotPermitted(PathBuf),
    #[error("resetting {0} is not supported (cgroup v2 memory.peak can be reset from Linux 6.12)")]
    NotSupported(PathBuf),
    #[error("{0} does not exist (cgroup v2 has memory.peak from Linux 5.19)")]
    NoPeakFile(PathBuf),
    #[error("no memory cgroup '{0}' (--cgroup; looked for its memory files in {1})")]
    NotFound(String, String),
    #[error("cannot make {0}: {1}")]
    Create(PathBuf, io::Error),
    #[error("cannot remove {0}: {1}")]
    Remove(PathBuf, io::Error),
    #[error("no memory controller is mounted under {0} (neither v1 memory/ nor a v2 hierarchy)")]
    NoMemoryController(PathBuf),
    /// cgroup v2 gives no cgroup that holds processes (memmon's) children with controllers, so
    /// a cgroup of memmon's own would sit beside memmon's, outside that cgroup's limits.
    #[error(
        "memmon runs in cgroup {0}, whose {1}; a cgroup of memmon's own beside it would escape that (cgroup v2 gives a cgroup with processes no children with controllers)"
    )]
    WouldEscape(String, String),
    #[error("{0} does not enable the memory controller for the cgroups below it")]
    NoMemoryBelow(PathBuf),
}

/// Which cgroup hierarchy holds the memory controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    pub fn name(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "cgroup v1",
            CgroupVersion::V2 => "cgroup v2",
        }
    }
}

/// A cgroup file system, real or fake.
#[derive(Debug, Clone)]
pub struct CgroupFs {
    root: PathBuf,
}

impl Default for CgroupFs {
    fn default() -> Self {
        CgroupFs::new("/sys/fs/cgroup")
    }
}

/// One process's memory cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemCgroup {
    pub version: CgroupVersion,
    /// The cgroup's path as /proc/PID/cgroup gives it (`/system.slice/proverd.service`).
    pub path: String,
    /// Its directory on this file system.
    pub dir: PathBuf,
}

impl CgroupFs {
    pub fn new(root: impl Into<PathBuf>) -> CgroupFs {
        CgroupFs { root: root.into() }
    }

    /// Finds the memory cgroup named by the text of /proc/PID/cgroup: the v1 line whose
    /// controllers include `memory` (`4:memory:/path`) if there is one, else the v2 line
    /// (`0::/path`). `None` when neither is there or its directory does not exist.
    pub fn locate(&self, proc_cgroup: &str) -> Option<MemCgroup> {
        let mut v1 = None;
        let mut v2 = None;
        for line in proc_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if id == "0" && ctrls.is_empty() {
                v2 = Some(path.to_string());
            } else if ctrls.split(',').any(|c| c == "memory") {
                v1 = Some(path.to_string());
            }
        }
        let (version, path, base) = if let Some(p) = v1 {
            (CgroupVersion::V1, p, self.root.join("memory"))
        } else {
            let p = v2?;
            let base = if self.root.join("cgroup.controllers").exists() {
                self.root.clone()
            } else {
                self.root.join("unified")
            };
            (CgroupVersion::V2, p, base)
        };
        // `/..` leads out of this cgroup namespace (a process in another container): no cgroup
        // this file system shows.
        if path.split('/').any(|c| c == "..") {
            return None;
        }
        let dir = base.join(path.trim_start_matches('/'));
        dir.is_dir().then_some(MemCgroup { version, path, dir })
    }

    /// The memory cgroup of a process, from `PROCROOT/PID/cgroup`.
    pub fn of_pid(&self, proc_root: &Path, pid: i32) -> Option<MemCgroup> {
        let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
        self.locate(&text)
    }
}

impl MemCgroup {
    /// The cgroup whose memory files count this one's memory: itself where it has them, else
    /// its nearest ancestor that has (v2). Memory is a domain controller: a threaded cgroup (a
    /// thread of a process put apart, `cgroup.type` threaded) has no memory files, its threads'
    /// memory is its threaded domain's; and a cgroup whose parent does not enable memory
    /// (`cgroup.subtree_control`) is charged to the nearest one above that does. The root where
    /// none below it has them. v1's memory hierarchy is its own: the cgroup itself.
    pub fn memory_domain(&self) -> MemCgroup {
        let mut cg = self.clone();
        if cg.version == CgroupVersion::V1 {
            return cg;
        }
        while !cg.dir.join("memory.current").exists() {
            let (Some(dir), Some((up, _))) = (cg.dir.parent(), cg.path.rsplit_once('/')) else {
                break;
            };
            if cg.path.trim_matches('/').is_empty() {
                break;
            }
            cg = MemCgroup {
                version: cg.version,
                path: if up.is_empty() { "/".into() } else { up.into() },
                dir: dir.to_path_buf(),
            };
        }
        cg
    }

    /// True for the root cgroup, which holds the whole machine. Inside a cgroup namespace (a
    /// container's) `/proc/PID/cgroup` says `0::/` of the container's own cgroup: on v2 that one
    /// has `memory.current`, which the kernel gives every cgroup but the real root.
    pub fn is_root(&self) -> bool {
        self.path.trim_matches('/').is_empty()
            && !(self.version == CgroupVersion::V2 && self.dir.join("memory.current").exists())
    }

    /// The file that holds the peak: `memory.peak` (v2) or `memory.max_usage_in_bytes` (v1).
    pub fn peak_file(&self) -> PathBuf {
        self.dir.join(match self.version {
            CgroupVersion::V2 => "memory.peak",
            CgroupVersion::V1 => "memory.max_usage_in_bytes",
        })
    }

    /// Every PID in this cgroup and the cgroups below it (`cgroup.procs` of each). A v2
    /// threaded cgroup lists no process of its own (reading its `cgroup.procs` fails): its
    /// threads' processes are listed by its threaded domain, above it.
    pub fn procs(&self) -> Result<Vec<i32>, CgroupError> {
        let mut out = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(d) = dirs.pop() {
            let f = d.join("cgroup.procs");
            let text = match std::fs::read_to_string(&f) {
                Ok(t) => t,
                Err(_) if d != self.dir && is_threaded(&d) => String::new(),
                Err(e) => return Err(CgroupError::Io(f.clone(), e)),
            };
            for w in text.split_ascii_whitespace() {
                out.push(
                    w.parse()
                        .map_err(|_| CgroupError::Parse(f.clone(), w.to_string()))?,
                );
            }
            let entries = std::fs::read_dir(&d).map_err(|e| CgroupError::Io(d.clone(), e))?;
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        Ok(out)
    }

    /// Resets the peak and returns the open file through which to read the peak of what
    /// follows. v2: writes to `memory.peak` (Linux ≥ 6.12; the kernel keeps one mark under
    /// every writer's descriptor and each keeps only the usage at its own last write, so
    /// another program's write lowers what this one reads). v1: writes `0` to
    /// `memory.max_usage_in_bytes`.
    pub fn reset_peak(&self) -> Result<PeakWatch, CgroupError> {
        let path = self.peak_file();
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| self.reset_error(&path, e))?;
        f.write_all(b"0\n")
            .map_err(|e| self.reset_error(&path, e))?;
        Ok(PeakWatch { file: f, path })
    }

    fn reset_error(&self, path: &Path, e: io::Error) -> CgroupError {
        match (e.kind(), e.raw_os_error()) {
            (io::ErrorKind::PermissionDenied, _)
                if self.version == CgroupVersion::V2 && is_read_only(path) =>
            {
                CgroupError::NotSupported(path.to_path_buf())
            }
            (io::ErrorKind::PermissionDenied, _) => CgroupError::NotPermitted(path.to_path_buf()),
            (_, Some(libc::EPERM)) => CgroupError::NotPermitted(path.to_path_buf()),
            (io::ErrorKind::NotFound, _) if self.version == CgroupVersion::V2 => {
                CgroupError::NoPeakFile(path.to_path_buf())
            }
            (io::ErrorKind::NotFound, _)
            | (_, Some(libc::EINVAL))
            | (_, Some(libc::EOPNOTSUPP)) => CgroupError::NotSupported(path.to_path_buf()),
            _ => CgroupError::Write(path.to_path_buf(), e),
        }
    }
}

/// A memory-peak file kept open from its reset to its reading.
#[derive(Debug)]
pub struct PeakWatch {
    file: File,
    path: PathBuf,
}

impl PeakWatch {
    /// The cgroup's peak since the reset, in bytes, read through the descriptor that reset it.
    pub fn read(&mut self) -> Result<u64, CgroupError> {
        let mut text = String::new();
        self.file
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.file.read_to_string(&mut text))
            .map_err(|e| CgroupError::Io(self.path.clone(), e))?;
        text.trim()
            .parse()
            .map_err(|_| CgroupError::Parse(self.path.clone(), text.trim().to_string()))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One reading of a memory cgroup's files. Sizes in bytes. A cgroup counts each page once,
/// whichever of its processes map it, and page cache is part of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CgroupStats {
    /// `memory.current` (v1 `memory.usage_in_bytes`): every page charged to the cgroup.
    pub current: u64,
    /// From `memory.stat`: `anon`, `file`, `shmem` (v1 `total_rss`, `total_cache`,
    /// `total_shmem`); `file` includes `shmem`, as the kernel counts it.
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    /// `kernel` (v2; before Linux 5.18 the sum of kernel_stack, pagetables, percpu, slab and
    /// vmalloc), v1 `memory.kmem.usage_in_bytes`; 0 where the kernel does not say.
    pub kernel: u64,
    /// `sock` (v2), v1 `memory.kmem.tcp.usage_in_bytes`; 0 where the kernel does not say.
    pub sock: u64,
    /// `inactive_file` (v1 `total_inactive_file`): page cache the kernel reclaims first.
    pub inactive_file: u64,
    /// The limit the cgroup's tasks are held to: the smallest `memory.max` of the cgroup and
    /// the cgroups above it (v1: `memory.limit_in_bytes` and memory.stat's
    /// `hierarchical_memory_limit`); `None` for `max` or v1's "unlimited" (2^63 rounded down
    /// to a page) all the way up.
    pub limit: Option<u64>,
    /// `memory.peak` (v1 `memory.max_usage_in_bytes`): the largest `current` since the cgroup
    /// was made or the peak reset; `None` where the file does not exist (v2 before Linux 5.19).
    pub peak: Option<u64>,
    pub events: CgroupEvents,
    /// Transparent huge pages in use: `anon_thp` (v1 `total_rss_huge`), bytes.
    #[serde(default)]
    pub anon_thp: u64,
    /// Pages swapped in and out by the cgroup's tasks since it was made: v2 `pswpin` and
    /// `pswpout`, where the kernel has them (v1 has none: `None`).
    #[serde(default)]
    pub swap_in_pages: Option<u64>,
    #[serde(default)]
    pub swap_out_pages: Option<u64>,
}

impl CgroupStats {
    /// The working set as Kubernetes and cAdvisor compute it: current − inactive_file.
    pub fn working_set(&self) -> u64 {
        self.current.saturating_sub(self.inactive_file)
    }
}

/// `memory.events` counters (since the cgroup was made). v1 has no such file: `oom_kill` comes
/// from `memory.oom_control`, `max` from `memory.failcnt` (times usage hit the limit), and
/// `oom` and `high` are 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CgroupEvents {
    pub oom: u64,
    pub oom_kill: u64,
    pub max: u64,
    pub high: u64,
}

impl CgroupEvents {
    /// The counters of a `memory.events` (or `memory.events.local`) text; a missing key is 0.
    pub fn parse(text: &str) -> CgroupEvents {
        CgroupEvents {
            oom: key_value(text, "oom").unwrap_or(0),
            oom_kill: key_value(text, "oom_kill").unwrap_or(0),
            max: key_value(text, "max").unwrap_or(0),
            high: key_value(text, "high").unwrap_or(0),
        }
    }

    /// How much each counter rose since `first` (a counter that began again counts from 0).
    pub fn since(self, first: CgroupEvents) -> CgroupEvents {
        CgroupEvents {
            oom: self.oom.saturating_sub(first.oom),
            oom_kill: self.oom_kill.saturating_sub(first.oom_kill),
            max: self.max.saturating_sub(first.max),
            high: self.high.saturating_sub(first.high),
        }
    }
}

/// v1 writes "no limit" as PAGE_COUNTER_MAX pages: anything this large is no limit.
pub(crate) const V1_UNLIMITED: u64 = 1 << 62;

/// Reads one memory cgroup's files, tick after tick, reusing one buffer. Each file is opened
/// once and re-read with `pread` (an open costs as much as the read: BENCHMARKS.md); a file found
/// missing is not looked for again. A read that fails (the cgroup was removed and made again,
/// as a restarted service's is) opens every file anew once.
#[derive(Debug)]
pub struct CgroupReader {
    cg: MemCgroup,
    buf: String,
    bytes: Vec<u8>,
    /// Each file asked for: open, or `None` when it does not exist.
    held: Vec<(&'static str, Option<File>)>,
    /// v2: the `memory.max` of each cgroup above this one (the root has none), opened at the
    /// first read; `None` for one that cannot be opened.
    ancestors: Option<Vec<Option<File>>>,
}

impl CgroupReader {
    pub fn new(cg: MemCgroup) -> CgroupReader {
        CgroupReader {
            cg,
            buf: String::with_capacity(4096),
            bytes: Vec::with_capacity(4096),
            held: Vec::new(),
            ancestors: None,
        }
    }

    pub fn cgroup(&self) -> &MemCgroup {
        &self.cg
    }

    /// Reads the cgroup's files. `memory.current` (v1 `memory.usage_in_bytes`) and
    /// `memory.stat` must be there; every other file may be missing (an older kernel, a
    /// controller file turned off) and leaves its numbers at 0 or `None`.
    pub fn read(&mut self) -> Result<CgroupStats, CgroupError> {
        let v1 = self.cg.version == CgroupVersion::V1;
        let mut st = CgroupStats {
            current: self.number(if v1 {
                "memory.usage_in_bytes"
            } else {
                "memory.current"
            })?,
            ..CgroupStats::default()
        };
        self.read_stat(&mut st)?;
        if v1 {
            st.kernel = self
                .optional_number("memory.kmem.usage_in_bytes")?
                .unwrap_or(0);
            st.sock = self
                .optional_number("memory.kmem.tcp.usage_in_bytes")?
                .unwrap_or(0);
            let own = self
                .optional_number("memory.limit_in_bytes")?
                .filter(|&l| l < V1_UNLIMITED);
            st.limit = smaller(own, st.limit);
            st.peak = self.optional_number("memory.max_usage_in_bytes")?;
            st.events.max = self.optional_number("memory.failcnt")?.unwrap_or(0);
            if self.load("memory.oom_control")? {
                st.events.oom_kill = key_value(&self.buf, "oom_kill").unwrap_or(0);
            }
        } else {
            st.limit = smaller(self.optional_number("memory.max")?, self.ancestors_limit());
            st.peak = self.optional_number("memory.peak")?;
            if self.load("memory.events")? {
                st.events = CgroupEvents::parse(&self.buf);
            }
        }
        Ok(st)
    }

    fn read_stat(&mut self, st: &mut CgroupStats) -> Result<(), CgroupError> {
        if !self.load("memory.stat")? {
            return Err(CgroupError::Io(
                self.cg.dir.join("memory.stat"),
                io::Error::from(io::ErrorKind::NotFound),
            ));
        }
        let b = &self.buf;
        if self.cg.version == CgroupVersion::V1 {
            // total_* count the cgroups below too (use_hierarchy), as usage_in_bytes does.
            let get = |k: &str| {
                key_value(b, &format!("total_{k}"))
                    .or_else(|| key_value(b, k))
                    .unwrap_or(0)
            };
            st.anon = get("rss");
            st.file = get("cache");
            st.shmem = get("shmem");
            st.inactive_file = get("inactive_file");
            // The smallest limit of the cgroup and those above it (read with its own below).
            st.limit = key_value(b, "hierarchical_memory_limit").filter(|&l| l < V1_UNLIMITED);
            st.anon_thp = match strict_key_value(b, "total_rss_huge") {
                Ok(None) => strict_key_value(b, "rss_huge"),
                found => found,
            }
            .map_err(|line| self.stat_line_error(line))?
            .unwrap_or(0);
        } else {
            let get = |k: &str| key_value(b, k).unwrap_or(0);
            st.anon = get("anon");
            st.file = get("file");
            st.shmem = get("shmem");
            st.sock = get("sock");
            st.inactive_file = get("inactive_file");
            st.kernel = key_value(b, "kernel").unwrap_or_else(|| {
                ["kernel_stack", "pagetables", "percpu", "slab", "vmalloc"]
                    .iter()
                    .map(|k| get(k))
                    .sum()
            });
            let strict = |k: &str| strict_key_value(b, k);
            st.anon_thp = strict("anon_thp")
                .map_err(|line| self.stat_line_error(line))?
                .unwrap_or(0);
            st.swap_in_pages = strict("pswpin").map_err(|line| self.stat_line_error(line))?;
            st.swap_out_pages = strict("pswpout").map_err(|line| self.stat_line_error(line))?;
        }
        Ok(())
    }

    /// A line of memory.stat memmon needs that is not `key number`.
    fn stat_line_error(&self, line: String) -> CgroupError {
        CgroupError::Parse(self.cg.dir.join("memory.stat"), line)
    }

    /// Reads `name` into the buffer; false when it does not exist.
    fn load(&mut self, name: &'static str) -> Result<bool, CgroupError> {
        match self.load_held(name) {
            Err(_) => {
                // A removed cgroup's descriptors fail (ENODEV): open everything anew, once.
                self.held.clear();
                self.ancestors = None;
                self.load_held(name)
            }
            ok => ok,
        }
    }

    fn load_held(&mut self, name: &'static str) -> Result<bool, CgroupError> {
        let path = || self.cg.dir.join(name);
        let at = match self.held.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                let f = match File::open(path()) {
                    Ok(f) => Some(f),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                    Err(e) => return Err(CgroupError::Io(path(), e)),
                };
                self.held.push((name, f));
                self.held.len() - 1
            }
        };
        let Some(f) = &self.held[at].1 else {
            return Ok(false);
        };
        read_whole_at(f, &mut self.bytes).map_err(|e| CgroupError::Io(path(), e))?;
        self.buf.clear();
        self.buf.push_str(&String::from_utf8_lossy(&self.bytes));
        Ok(true)
    }

    /// The smallest `memory.max` above a v2 cgroup: a limit set on a parent (a systemd
    /// slice's `MemoryMax=`) binds the cgroup's tasks as its own does. One that cannot be read
    /// counts as no limit.
    fn ancestors_limit(&mut self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let files = self.ancestors.get_or_insert_with(|| {
            let depth = self.cg.path.split('/').filter(|c| !c.is_empty()).count();
            self.cg
                .dir
                .ancestors()
                .skip(1)
                .take(depth.saturating_sub(1))
                .map(|d| File::open(d.join("memory.max")).ok())
                .collect()
        });
        let mut limit = None;
        let mut buf = [0u8; 32];
        for f in files.iter().flatten() {
            let Ok(n) = f.read_at(&mut buf, 0) else {
                continue;
            };
            let text = std::str::from_utf8(&buf[..n]).unwrap_or("").trim();
            limit = smaller(limit, text.parse().ok());
        }
        limit
    }

    fn number(&mut self, name: &'static str) -> Result<u64, CgroupError> {
        let path = self.cg.dir.join(name);
        self.optional_number(name)?
            .ok_or_else(|| CgroupError::Io(path, io::Error::from(io::ErrorKind::NotFound)))
    }

    /// A file holding one number, or `max` (no limit: `None`); `None` when it does not exist.
    fn optional_number(&mut self, name: &'static str) -> Result<Option<u64>, CgroupError> {
        if !self.load(name)? {
            return Ok(None);
        }
        let t = self.buf.trim();
        if t == "max" {
            return Ok(None);
        }
        t.parse()
            .map(Some)
            .map_err(|_| CgroupError::Parse(self.cg.dir.join(name), t.to_string()))
    }
}

/// The smaller of two limits, where `None` is no limit.
fn smaller(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The value of `key` in a `key value` per line file (memory.stat, memory.events).
pub(crate) fn key_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// The value of `key` in a `key value` per line file; `Err(line)` when its line holds no
/// number (the readers of the newer keys say so, rather than read 0).
fn strict_key_value(text: &str, key: &str) -> Result<Option<u64>, String> {
    for l in text.lines() {
        let Some((k, v)) = l.split_once(' ') else {
            continue;
        };
        if k == key {
            return v.trim().parse().map(Some).map_err(|_| l.to_string());
        }
    }
    Ok(None)
}

impl CgroupFs {
    /// The v1 memory hierarchy's directory, when one is mounted.
    fn v1_base(&self) -> Option<PathBuf> {
        let d = self.root.join("memory");
        d.join("memory.usage_in_bytes").exists().then_some(d)
    }

    /// The v2 hierarchy's directory: the root itself, or `unified` on a hybrid host.
    fn v2_base(&self) -> Option<PathBuf> {
        if self.root.join("cgroup.controllers").exists() {
            Some(self.root.clone())
        } else {
            let u = self.root.join("unified");
            u.join("cgroup.controllers").exists().then_some(u)
        }
    }

    /// The memory cgroup named by the user (`--cgroup`): a directory (`/sys/fs/cgroup/...`)
    /// or a cgroup path (`/system.slice/proverd.service`, as /proc/PID/cgroup writes it),
    /// looked up in the v1 memory hierarchy if there is one, else in v2's.
    pub fn at(&self, given: &str) -> Result<MemCgroup, CgroupError> {
        let p = Path::new(given);
        let mut tried = Vec::new();
        let mut candidates: Vec<(PathBuf, PathBuf)> = Vec::new();
        for base in [self.v1_base(), self.v2_base()].into_iter().flatten() {
            if let Ok(rel) = p.strip_prefix(&base) {
                candidates.push((base.clone(), rel.to_path_buf()));
            }
        }
        if candidates.is_empty() {
            for base in [self.v1_base(), self.v2_base()].into_iter().flatten() {
                candidates.push((base, PathBuf::from(given.trim_start_matches('/'))));
            }
        }
        for (base, rel) in candidates {
            let dir = base.join(&rel);
            tried.push(dir.display().to_string());
            let version = if dir.join("memory.usage_in_bytes").exists() {
                CgroupVersion::V1
            } else if dir.join("memory.current").exists() || dir == base && dir.is_dir() {
                CgroupVersion::V2
            } else {
                continue;
            };
            let path = format!("/{}", rel.display());
            return Ok(MemCgroup { version, path, dir });
        }
        Err(CgroupError::NotFound(given.to_string(), tried.join(", ")))
    }

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

impl MemCgroup {
    /// The first process in this cgroup (or below) that is not `root` or one of its
    /// descendants; `None` when the cgroup holds only `root`'s tree.
    pub fn foreign_process(
        &self,
        procfs: &crate::probe::ProcFs,
        root: i32,
    ) -> Result<Option<i32>, CgroupError> {
        let descends = |mut pid: i32| {
            for _ in 0..64 {
                if pid == root {
                    return true;
                }
                match procfs.open(pid).ok().and_then(|h| h.ppid()) {
                    Some(pp) if pp > 0 => pid = pp,
                    _ => return false,
                }
            }
            false
        };
        Ok(self.procs()?.into_iter().find(|&p| !descends(p)))
    }

    /// How much of a process's anonymous memory (`anon_rss`, its RssAnon) this cgroup is not
    /// charged for, beyond `slack`. A page is charged to the cgroup its process was in when it
    /// touched the page, and stays charged there when the process moves (v2 never moves
    /// charges; v1 only with memory.move_charge_at_immigrate): a daemon moved into a cgroup
    /// after it allocated holds memory that the cgroup's peak never sees. `None` when the
    /// cgroup's anonymous charge covers it.
    pub fn uncharged_anon(&self, anon_rss: u64, slack: u64) -> Result<Option<u64>, CgroupError> {
        let charged = CgroupReader::new(self.clone()).read()?.anon;
        Ok((charged.saturating_add(slack) < anon_rss).then(|| anon_rss - charged))
    }
}

/// A process of the tree found outside the recorded cgroup: moved by systemd, `cgexec`, a job
/// scheduler or itself. Its memory from then on is charged where it went.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Outside {
    pub pid: i32,
    pub comm: String,
    /// The cgroup it is in now (as /proc/PID/cgroup says it); empty where it could not be read.
    pub cgroup: String,
}

/// Which of a tree's processes are outside a cgroup, tick after tick: the cgroup's
/// `cgroup.procs` is read (v2: held open and re-read with one `pread`; v1 opened anew each
/// time, as its kernel keeps the list of an open file for as long as it is read), and a
/// process it does not list is
/// looked up in its own /proc/PID/cgroup, through the tree's held directory of it (so never a
/// process that took over its PID): in a cgroup below this one it is inside (a threaded part of
/// it, a sub-cgroup the process made); anywhere else, outside.
#[derive(Debug)]
pub struct Membership {
    cg: MemCgroup,
    fs: CgroupFs,
    procs: Option<File>,
    bytes: Vec<u8>,
    listed: Vec<i32>,
}

impl Membership {
    pub fn new(cg: MemCgroup, fs: CgroupFs) -> Membership {
        Membership {
            cg,
            fs,
            procs: None,
            bytes: Vec::with_capacity(1024),
            listed: Vec::new(),
        }
    }

    /// The processes of `members` that are neither in the cgroup nor below it. A process that
    /// has exited since it was sampled counts as inside (nothing of it is charged anywhere now).
    pub fn outside<'a>(
        &mut self,
        members: impl Iterator<Item = &'a crate::probe::ProcHandle>,
    ) -> Result<Vec<Outside>, CgroupError> {
        self.read_listed()?;
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for h in members {
            if self.listed.binary_search(&h.pid).is_ok() {
                continue;
            }
            // Gone (or a zombie's file unreadable): not outside.
            if h.read_file("cgroup", &mut buf).is_err() {
                continue;
            }
            let text = String::from_utf8_lossy(&buf);
            // Exiting (a zombie, or on its way): the kernel has taken it out of its cgroups,
            // and its file names the root. Read after that file: a process not exiting now was
            // not exiting then, and a cgroup elsewhere is one it moved to.
            let mut stat = Vec::new();
            let read = h.read_file("stat", &mut stat);
            let exiting = read.map_or(true, |_| {
                crate::probe::proc::parse_stat_exiting(&stat).unwrap_or(true)
            });
            if exiting {
                continue;
            }
            let now = self.fs.locate(&text);
            if now
                .as_ref()
                .is_some_and(|c| c.dir.starts_with(&self.cg.dir))
            {
                continue;
            }
            let cgroup = match now {
                Some(c) => c.path,
                None => text
                    .lines()
                    .find_map(|l| l.strip_prefix("0::"))
                    .unwrap_or("")
                    .to_string(),
            };
            // Its name now, from that stat: one moved and exec'd since its last read
            // (`echo $$ > cgroup.procs; exec prover`) is named by what it runs.
            let comm =
                crate::probe::proc::parse_stat(&stat).map_or_else(|| h.comm.clone(), |(c, _)| c);
            out.push(Outside {
                pid: h.pid,
                comm,
                cgroup,
            });
        }
        Ok(out)
    }

    /// The PIDs `cgroup.procs` lists now, sorted. A failed read (the cgroup removed and made
    /// again, as a restarted service's is) opens the file anew, once.
    fn read_listed(&mut self) -> Result<(), CgroupError> {
        let path = self.cg.dir.join("cgroup.procs");
        for attempt in 0..2 {
            // v1 builds the list once per open file and serves it again to every read from
            // its start: only a new open sees who moved.
            if self.procs.is_none() || (self.cg.version == CgroupVersion::V1 && attempt == 0) {
                self.procs = Some(File::open(&path).map_err(|e| CgroupError::Io(path.clone(), e))?);
            }
            let f = self.procs.as_ref().expect("opened above");
            match read_whole_at(f, &mut self.bytes) {
                Ok(()) => break,
                Err(e) if attempt == 1 => return Err(CgroupError::Io(path, e)),
                Err(_) => self.procs = None,
            }
        }
        self.listed.clear();
        crate::probe::proc::parse_pid_list(&self.bytes, &mut self.listed);
        self.listed.sort_unstable();
        Ok(())
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

/// A v2 cgroup of type `threaded` (a part of a threaded subtree, below its domain).
fn is_threaded(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.type")).is_ok_and(|t| t.trim() == "threaded")
}

/// Kernels 5.19 to 6.11 make memory.peak read-only (mode 0444).
fn is_read_only(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o222 == 0)
}

/// The whole of a held file, read from its start into `bytes` (a kernel file's contents are
/// made at each read from offset 0: no seek, one descriptor kept).
fn read_whole_at(f: &File, bytes: &mut Vec<u8>) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    bytes.clear();
    loop {
        let len = bytes.len();
        if bytes.capacity() - len < 1024 {
            bytes.reserve(4096);
        }
        bytes.resize(bytes.capacity(), 0);
        match f.read_at(&mut bytes[len..], len as u64) {
            Ok(0) => {
                bytes.truncate(len);
                return Ok(());
            }
            Ok(n) => bytes.truncate(len + n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => bytes.truncate(len),
            Err(e) => {
                bytes.truncate(len);
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkdir(p: &Path) {
        std::fs::create_dir_all(p).unwrap();
    }

    /// A pure v2 host: ROOT/cgroup.controllers, the daemon in /system.slice/proverd.service.
    fn fake_v2() -> (tempfile::TempDir, CgroupFs) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        std::fs::write(root.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        let d = root.join("system.slice/proverd.service");
        mkdir(&d);
        std::fs::write(d.join("memory.peak"), "48318382080\n").unwrap();
        std::fs::write(d.join("cgroup.procs"), "100\n101\n").unwrap();
        mkdir(&d.join("workers"));
        std::fs::write(d.join("workers/cgroup.procs"), "102\n").unwrap();
        (t, CgroupFs::new(root))
    }

    /// A hybrid host like the development machine: v1 memory at ROOT/memory, v2 at ROOT/unified.
    fn fake_hybrid() -> (tempfile::TempDir, CgroupFs) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        let d = root.join("memory/bench/proverd");
        mkdir(&d);
        std::fs::write(d.join("memory.max_usage_in_bytes"), "5242880\n").unwrap();
        std::fs::write(d.join("cgroup.procs"), "200\n").unwrap();
        mkdir(&root.join("unified/user.slice"));
        std::fs::write(root.join("unified/cgroup.controllers"), "").unwrap();
        (t, CgroupFs::new(root))
    }

    #[test]
    fn a_v2_line_locates_the_cgroup_under_the_root() {
        let (t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service\n").unwrap();
        assert_eq!(cg.version, CgroupVersion::V2);
        assert_eq!(cg.dir, t.path().join("system.slice/proverd.service"));
        assert_eq!(cg.peak_file(), cg.dir.join("memory.peak"));
        assert!(!cg.is_root());
    }

    #[test]
    fn a_containers_own_cgroup_is_not_the_machines_root_and_one_outside_it_is_not_found() {
        // In a cgroup namespace a process of the container's own cgroup reads `0::/`; the
        // kernel gives that cgroup memory.current, the real root none.
        let (t, fs) = fake_v2();
        let root = fs.locate("0::/\n").unwrap();
        assert!(root.is_root(), "no memory.current: the machine's root");
        std::fs::write(t.path().join("memory.current"), "1\n").unwrap();
        let container = fs.locate("0::/\n").unwrap();
        assert!(!container.is_root(), "the container's own cgroup");
        // A cgroup outside the namespace shows as `/..`: no directory of this file system.
        assert_eq!(fs.locate("0::/..\n"), None);
        assert_eq!(fs.locate("0::/../system.slice\n"), None);
    }

    #[test]
    fn on_a_hybrid_host_the_v1_memory_line_wins() {
        let (t, fs) = fake_hybrid();
        let text = "9:name=systemd:/\n4:memory:/bench/proverd\n2:cpu,cpuacct:/\n0::/user.slice\n";
        let cg = fs.locate(text).unwrap();
        assert_eq!(cg.version, CgroupVersion::V1);
        assert_eq!(cg.dir, t.path().join("memory/bench/proverd"));
        assert_eq!(cg.peak_file(), cg.dir.join("memory.max_usage_in_bytes"));
    }

    #[test]
    fn a_v2_only_process_on_a_hybrid_host_is_found_under_unified() {
        let (t, fs) = fake_hybrid();
        let cg = fs.locate("0::/user.slice\n").unwrap();
        assert_eq!(cg.version, CgroupVersion::V2);
        assert_eq!(cg.dir, t.path().join("unified/user.slice"));
    }

    #[test]
    fn the_root_cgroup_is_recognised_and_a_missing_directory_is_none() {
        let (_t, fs) = fake_v2();
        assert!(fs.locate("0::/\n").unwrap().is_root());
        assert_eq!(fs.locate("0::/no/such/group\n"), None);
        assert_eq!(fs.locate("garbage"), None);
    }

    #[test]
    fn procs_include_the_cgroups_below() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        let mut p = cg.procs().unwrap();
        p.sort();
        assert_eq!(p, vec![100, 101, 102]);
    }

    #[test]
    fn a_v2_reset_writes_to_memory_peak_and_reads_through_the_same_file() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        let mut w = cg.reset_peak().unwrap();
        // A regular file stands in for the kernel's: the write replaced the first bytes.
        let written = std::fs::read_to_string(cg.dir.join("memory.peak")).unwrap();
        assert!(written.starts_with("0\n"), "{written:?}");
        std::fs::write(cg.dir.join("memory.peak"), "1073741824\n").unwrap();
        assert_eq!(w.read().unwrap(), 1 << 30);
    }

    #[test]
    fn a_v1_reset_writes_zero_to_max_usage_in_bytes() {
        let (_t, fs) = fake_hybrid();
        let cg = fs.locate("4:memory:/bench/proverd").unwrap();
        std::fs::write(cg.peak_file(), "").unwrap();
        let mut w = cg.reset_peak().unwrap();
        assert_eq!(std::fs::read_to_string(cg.peak_file()).unwrap(), "0\n");
        assert_eq!(w.read().unwrap(), 0);
        assert!(
            cg.dir.join("memory.peak").metadata().is_err(),
            "v1 must not touch memory.peak"
        );
    }

    #[test]
    fn a_refused_write_to_a_read_only_memory_peak_is_not_supported() {
        use std::os::unix::fs::PermissionsExt;
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        std::fs::set_permissions(cg.peak_file(), std::fs::Permissions::from_mode(0o444)).unwrap();
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        let e = cg.reset_error(&cg.peak_file(), denied);
        assert!(matches!(e, CgroupError::NotSupported(_)), "{e}");
        assert!(e.to_string().contains("6.12"), "{e}");
        // Before Linux 5.19 there is no memory.peak at all: said so, not "reset from 6.12".
        std::fs::remove_file(cg.peak_file()).unwrap();
        let e = cg.reset_peak().err().unwrap();
        assert!(matches!(e, CgroupError::NoPeakFile(_)), "{e}");
        assert!(e.to_string().contains("from Linux 5.19"), "{e}");
    }

    #[test]
    fn a_refused_write_to_a_writable_file_is_not_permitted() {
        let (_t, fs) = fake_hybrid();
        let cg = fs.locate("4:memory:/bench/proverd").unwrap();
        let e = cg.reset_error(&cg.peak_file(), io::Error::from_raw_os_error(libc::EACCES));
        assert!(matches!(e, CgroupError::NotPermitted(_)), "{e}");
    }

    #[test]
    fn a_garbage_peak_is_an_error_naming_the_file() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        let mut w = cg.reset_peak().unwrap();
        std::fs::write(cg.peak_file(), "lots\n").unwrap();
        let e = w.read().unwrap_err().to_string();
        assert!(e.contains("memory.peak") && e.contains("lots"), "{e}");
    }

    fn write(dir: &Path, files: &[(&str, &str)]) {
        mkdir(dir);
        for (n, v) in files {
            std::fs::write(dir.join(n), v).unwrap();
        }
    }

    const V2_STAT: &str = "anon 104857600\nfile 52428800\nkernel 8388608\nkernel_stack 65536\nshmem 4194304\nsock 4096\ninactive_file 41943040\nactive_file 10485760\n";

    #[test]
    fn a_v2_cgroup_reads_current_stat_max_peak_and_events() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        write(
            &cg.dir,
            &[
                ("memory.current", "167772160\n"),
                ("memory.stat", V2_STAT),
                ("memory.max", "1073741824\n"),
                (
                    "memory.events",
                    "low 0\nhigh 3\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n",
                ),
            ],
        );
        let st = CgroupReader::new(cg).read().unwrap();
        assert_eq!(st.current, 160 << 20);
        assert_eq!((st.anon, st.file, st.shmem), (100 << 20, 50 << 20, 4 << 20));
        assert_eq!((st.kernel, st.sock), (8 << 20, 4096));
        assert_eq!(st.working_set(), (160 - 40) << 20);
        assert_eq!(st.limit, Some(1 << 30));
        assert_eq!(st.peak, Some(48318382080));
        assert_eq!(
            st.events,
            CgroupEvents {
                oom: 2,
                oom_kill: 1,
                max: 7,
                high: 3
            }
        );
    }

    #[test]
    fn max_is_no_limit_and_missing_optional_files_leave_zeros() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        std::fs::remove_file(cg.dir.join("memory.peak")).unwrap();
        // A kernel before 5.18: no `kernel` key; its parts are summed.
        let stat = "anon 10\nfile 20\nkernel_stack 1\npagetables 2\npercpu 3\nslab 4\nvmalloc 5\n";
        write(
            &cg.dir,
            &[
                ("memory.current", "30\n"),
                ("memory.stat", stat),
                ("memory.max", "max\n"),
            ],
        );
        let st = CgroupReader::new(cg).read().unwrap();
        assert_eq!(st.limit, None);
        assert_eq!(st.peak, None);
        assert_eq!(st.kernel, 15);
        assert_eq!(st.events, CgroupEvents::default());
        assert_eq!(st.inactive_file, 0);
        assert_eq!(st.working_set(), 30);
    }

    #[test]
    fn a_v1_cgroup_reads_usage_total_stats_limit_and_oom_kills() {
        let (_t, fs) = fake_hybrid();
        let cg = fs.locate("4:memory:/bench/proverd").unwrap();
        write(
            &cg.dir,
            &[
                ("memory.usage_in_bytes", "3000\n"),
                // total_* include the cgroups below: they win over the cgroup's own lines.
                ("memory.stat", "cache 1\nrss 2\nshmem 3\ninactive_file 4\ntotal_cache 1000\ntotal_rss 1500\ntotal_shmem 100\ntotal_inactive_file 600\n"),
                ("memory.limit_in_bytes", "9223372036854771712\n"),
                ("memory.kmem.usage_in_bytes", "400\n"),
                ("memory.kmem.tcp.usage_in_bytes", "50\n"),
                ("memory.failcnt", "9\n"),
                ("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n"),
            ],
        );
        let st = CgroupReader::new(cg.clone()).read().unwrap();
        assert_eq!(
            (st.current, st.anon, st.file, st.shmem),
            (3000, 1500, 1000, 100)
        );
        assert_eq!((st.kernel, st.sock), (400, 50));
        assert_eq!(st.working_set(), 2400);
        assert_eq!(st.limit, None, "v1's huge limit is no limit");
        assert_eq!(st.peak, Some(5242880));
        assert_eq!(
            (st.events.oom_kill, st.events.max, st.events.oom),
            (4, 9, 0)
        );
        std::fs::write(cg.dir.join("memory.limit_in_bytes"), "536870912\n").unwrap();
        assert_eq!(
            CgroupReader::new(cg.clone()).read().unwrap().limit,
            Some(512 << 20)
        );
        // A parent's smaller limit binds the cgroup too: memory.stat says so.
        let stat = std::fs::read_to_string(cg.dir.join("memory.stat")).unwrap();
        std::fs::write(
            cg.dir.join("memory.stat"),
            format!("{stat}hierarchical_memory_limit 268435456\n"),
        )
        .unwrap();
        assert_eq!(CgroupReader::new(cg).read().unwrap().limit, Some(256 << 20));
    }

    #[test]
    fn a_v2_cgroup_s_limit_is_the_smallest_memory_max_above_it_too() {
        // A systemd slice's MemoryMax= binds the service below it, whose own memory.max is max.
        let (t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        write(
            &cg.dir,
            &[
                ("memory.current", "10\n"),
                ("memory.stat", V2_STAT),
                ("memory.max", "max\n"),
            ],
        );
        // The root has no memory.max; one written there is not a cgroup's and is not read.
        std::fs::write(t.path().join("memory.max"), "1\n").unwrap();
        let mut r = CgroupReader::new(cg.clone());
        assert_eq!(r.read().unwrap().limit, None);
        let slice = t.path().join("system.slice/memory.max");
        std::fs::write(&slice, "max\n").unwrap();
        let mut r = CgroupReader::new(cg.clone());
        assert_eq!(r.read().unwrap().limit, None);
        // Set while recording: the next tick reads it.
        std::fs::write(&slice, "2147483648\n").unwrap();
        assert_eq!(r.read().unwrap().limit, Some(2 << 30));
        std::fs::write(cg.dir.join("memory.max"), "1073741824\n").unwrap();
        assert_eq!(r.read().unwrap().limit, Some(1 << 30));
    }

    #[test]
    fn huge_pages_and_swap_come_from_memory_stat_where_the_kernel_has_them() {
        // v2 with anon_thp, pswpin and pswpout.
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        let stat = format!("{V2_STAT}anon_thp 4194304\npswpin 12\npswpout 345\n");
        write(
            &cg.dir,
            &[("memory.current", "10\n"), ("memory.stat", &stat)],
        );
        let st = CgroupReader::new(cg.clone()).read().unwrap();
        assert_eq!(st.anon_thp, 4 << 20);
        assert_eq!((st.swap_in_pages, st.swap_out_pages), (Some(12), Some(345)));
        // A v2 kernel without them: no THP counted, no swap counts (not zeros).
        write(&cg.dir, &[("memory.stat", V2_STAT)]);
        let st = CgroupReader::new(cg.clone()).read().unwrap();
        assert_eq!(
            (st.anon_thp, st.swap_in_pages, st.swap_out_pages),
            (0, None, None)
        );
        // A malformed line of one of them names the file and the line.
        let bad = format!("{V2_STAT}pswpin lots\npswpout 1\n");
        write(&cg.dir, &[("memory.stat", &bad)]);
        let e = CgroupReader::new(cg).read().unwrap_err().to_string();
        assert!(
            e.contains("memory.stat") && e.contains("pswpin lots"),
            "{e}"
        );

        // v1: total_rss_huge (the cgroups below counted), else rss_huge; no swap counts.
        let (_t, fs) = fake_hybrid();
        let cg = fs.locate("4:memory:/bench/proverd").unwrap();
        let v1 = "rss 2\ncache 1\nrss_huge 2097152\ntotal_rss 2\ntotal_cache 1\ntotal_rss_huge 6291456\n";
        write(
            &cg.dir,
            &[("memory.usage_in_bytes", "3\n"), ("memory.stat", v1)],
        );
        let st = CgroupReader::new(cg.clone()).read().unwrap();
        assert_eq!(st.anon_thp, 6 << 20);
        assert_eq!((st.swap_in_pages, st.swap_out_pages), (None, None));
        write(
            &cg.dir,
            &[("memory.stat", "rss 2\ncache 1\nrss_huge 2097152\n")],
        );
        assert_eq!(
            CgroupReader::new(cg.clone()).read().unwrap().anon_thp,
            2 << 20
        );
        write(
            &cg.dir,
            &[("memory.stat", "rss 2\ncache 1\ntotal_rss_huge x\n")],
        );
        let e = CgroupReader::new(cg).read().unwrap_err().to_string();
        assert!(
            e.contains("memory.stat") && e.contains("total_rss_huge x"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_current_or_garbage_is_an_error_naming_the_file() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        let e = CgroupReader::new(cg.clone())
            .read()
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory.current"), "{e}");
        write(
            &cg.dir,
            &[
                ("memory.current", "12\n"),
                ("memory.stat", V2_STAT),
                ("memory.max", "lots\n"),
            ],
        );
        let e = CgroupReader::new(cg).read().unwrap_err().to_string();
        assert!(e.contains("memory.max") && e.contains("lots"), "{e}");
    }

    #[test]
    fn at_takes_a_directory_or_a_cgroup_path() {
        let (t, fs) = fake_hybrid();
        let d = t.path().join("memory/bench/proverd");
        write(&d, &[("memory.usage_in_bytes", "1\n")]);
        write(
            &t.path().join("memory"),
            &[("memory.usage_in_bytes", "1\n")],
        );
        let by_path = fs.at("/bench/proverd").unwrap();
        assert_eq!((by_path.version, &by_path.dir), (CgroupVersion::V1, &d));
        let by_dir = fs.at(d.to_str().unwrap()).unwrap();
        assert_eq!(by_dir.path, "/bench/proverd");
        let e = fs.at("/no/such").unwrap_err().to_string();
        assert!(e.contains("/no/such") && e.contains("--cgroup"), "{e}");
    }

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

    #[test]
    fn a_reader_sees_each_tick_s_values_through_its_held_files() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        write(
            &cg.dir,
            &[("memory.current", "10\n"), ("memory.stat", V2_STAT)],
        );
        let mut r = CgroupReader::new(cg.clone());
        assert_eq!(r.read().unwrap().current, 10);
        // Longer and shorter contents than before, read through the same descriptors.
        std::fs::write(cg.dir.join("memory.current"), "123456789\n").unwrap();
        assert_eq!(r.read().unwrap().current, 123456789);
        std::fs::write(cg.dir.join("memory.current"), "7\n").unwrap();
        assert_eq!(r.read().unwrap().current, 7);
    }
}
