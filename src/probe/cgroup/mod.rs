//! Reader of a memory cgroup: where a process's is (v2 `memory.peak`, or v1
//! `memory.max_usage_in_bytes`), whether it holds only the watched tree (and which of the tree's
//! processes are outside it, [`Membership`]), its peak reset per run, one reading of its memory
//! files per tick ([`CgroupReader`]). Making, emptying, sweeping and removing a cgroup of
//! memmon's own is `manage.rs`.
//!
//! Built over a root path (default /sys/fs/cgroup) so tests point it at a fake tree. Layouts:
//! pure v2 (`ROOT/cgroup.controllers`), hybrid v1 with the memory controller at `ROOT/memory` and
//! v2 at `ROOT/unified`, and v1 alone (`ROOT/memory`, no v2). On a hybrid host the memory
//! controller is v1's.

pub mod manage;

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
}

impl MemCgroup {
    /// The first process in this cgroup (or below) that is not `root` or one of its
    /// descendants; `None` when the cgroup holds only `root`'s tree.
    pub fn foreign_process(
        &self,
        procfs: &crate::probe::ProcFs,
        root: i32,
    ) -> Result<Option<i32>, CgroupError> {
        Ok(self
            .procs()?
            .into_iter()
            .find(|&p| !procfs.descends(p, root)))
    }

    /// How much of a process's anonymous memory (`anon_rss`, its RssAnon) this cgroup is not
    /// charged for, as `model::peak::charged_elsewhere` judges it (`bound_bytes`: how far each
    /// counter may be off). A page is charged to the cgroup its process was in when it touched
    /// the page, and stays charged there when the process moves (v2 never moves charges; v1
    /// only with memory.move_charge_at_immigrate): a daemon moved into a cgroup after it
    /// allocated holds memory that the cgroup's peak never sees. `None` when the cgroup's
    /// anonymous charge covers it.
    pub fn uncharged_anon(
        &self,
        anon_rss: u64,
        bound_bytes: u64,
    ) -> Result<Option<u64>, CgroupError> {
        let charged = CgroupReader::new(self.clone()).read()?.anon;
        Ok(crate::model::peak::charged_elsewhere(
            anon_rss,
            charged,
            bound_bytes,
        ))
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

    pub(super) fn mkdir(p: &Path) {
        std::fs::create_dir_all(p).unwrap();
    }

    /// A pure v2 host: ROOT/cgroup.controllers, the daemon in /system.slice/proverd.service.
    pub(super) fn fake_v2() -> (tempfile::TempDir, CgroupFs) {
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
    pub(super) fn fake_hybrid() -> (tempfile::TempDir, CgroupFs) {
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

    pub(super) fn write(dir: &Path, files: &[(&str, &str)]) {
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
