//! The kernel's events for the mappings processes make and unmake: perf tracepoints on the
//! mmap, munmap, mremap and brk system calls, opened on every CPU for every process (perf cannot
//! pick out a process tree; `sampler/ledger.rs` keeps the tree's), filtered in the kernel to
//! lengths of at least `min_bytes`; with each large mmap and mremap the user registers and the
//! top of the user stack (PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER), from which
//! `probe/unwind.rs` finds the calls that made it. The exits of mmap and mremap (their
//! addresses) and of brk (the program break) come unfiltered and without stacks (the kernel
//! cannot filter brk by size: a stack with each brk of every process would flood the rings);
//! the kernel's FORK, EXIT and exec (COMM) records tell which processes come and go. With
//! `touch_every`, the tree's write faults are sampled one in N with their addresses and stacks,
//! and every transparent huge page it faults in (`kmem:mm_page_alloc` of a huge page's order, in
//! the faulting thread) with its page frame and stack.
//!
//! Each CPU has one ring buffer (`sys::perf::Ring`) that all its events write to, read on the
//! ledger's thread. Opening needs CAP_PERFMON (or CAP_SYS_ADMIN, or perf_event_paranoid at -1:
//! events on every CPU for every process), and the tracepoints' IDs tracefs
//! (`probe/tracefs.rs`).

use crate::probe::tracefs::{self, TracefsError, Tracepoint};
use crate::sys::perf::{self, flag, record, regs, sample, Attr, Cursor, Ring};
use std::collections::HashMap;
use std::io;
use std::os::fd::BorrowedFd;

/// What the events catch, and how much of each stack.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// mmap, munmap and mremap calls of at least this length (the kernel's filter).
    pub min_bytes: u64,
    /// The top of the user stack copied with each call that carries one (a multiple of 8).
    pub stack_bytes: u32,
    /// Pages of each CPU's ring buffer (a power of two).
    pub ring_pages: usize,
    /// One page fault in this many sampled with its address and stack (`--touch-every`): what
    /// the code first touched, whatever allocator handed it out; 0: none.
    pub touch_every: u64,
    /// Keep the events to the recording's cgroup in the kernel where it can
    /// (`--ledger-in-kernel`): off by default, see `perf_cgroup`.
    pub in_kernel: bool,
}

/// One fault in 1024 (4 MiB of 4 KiB pages between two samples; sampled one in 1031,
/// [`touch_period`]): a prover faulting 200 GiB in a minute gives about 800 samples a second,
/// 6.5 MB/s of stacks into the rings.
pub const DEFAULT_TOUCH_EVERY: u64 = 1024;

/// The period the page faults are sampled with for `--touch-every N`: the smallest prime at
/// least N. A program whose faults come round in a fixed order has every sample of a period
/// that order divides fall on the same site: a prover's constraint system pushes to four
/// vectors in turn, and one fault in 64 sampled only one of them (the other three unsampled, one
/// vector holding four times its samples). A prime period shares none of such a pattern's
/// divisors. 0 and 1 stay as they are (none, every fault).
pub fn touch_period(n: u64) -> u64 {
    let prime = |p: u64| p >= 2 && (2..).take_while(|d| d * d <= p).all(|d| p % d != 0);
    match n {
        0 | 1 => n,
        _ => (n..)
            .find(|&p| prime(p))
            .expect("a prime above any u64 worth sampling by"),
    }
}

/// Whose page faults are sampled (`Options::touch_every`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Faults {
    /// Every process's, on each CPU: the reader keeps the tree's.
    Everyone,
    /// This thread's (`gettid`) and those of every thread and process it starts from now on
    /// (perf's `inherit`, as `perf record COMMAND` does): a launched command's.
    Launcher(i32),
    /// Those of the threads named to [`MapCalls::follow`] and of every thread and process they
    /// start after (`inherit`): an attached tree's, as `perf record -p PID` follows one.
    Followed,
}

/// The most per-thread fault events [`MapCalls::follow`] opens (one for each thread on each
/// CPU): past it the faults of every process are sampled, as without a tree to follow.
pub const FOLLOWED_EVENTS_MAX: usize = 8192;

impl Default for Options {
    fn default() -> Options {
        // Every process's large calls reach the rings (perf cannot pick out a tree): 8 KiB of
        // stack each (perf's own default: the innermost frames, which name the allocating code),
        // 1 MiB of ring a CPU (128 such calls before the reader must have read them).
        Options {
            min_bytes: 1 << 20,
            stack_bytes: 8 << 10,
            ring_pages: 256,
            touch_every: DEFAULT_TOUCH_EVERY,
            in_kernel: false,
        }
    }
}

/// Registers and the top of the stack of a thread as a system call entered or left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserStack {
    /// In the order of `sys::perf::regs::MASK`'s bits (x86_64: BP, SP, IP).
    pub regs: [u64; regs::COUNT],
    /// The stack from its pointer up, as much as was copied.
    pub bytes: Vec<u8>,
    /// The bytes asked of the kernel (`sample_stack_user`, less where the stack's top is
    /// nearer): the copy stops short of them at a page the kernel cannot read without a fault
    /// (one NUMA balancing unmapped to see who touches it, or one swapped out).
    pub asked: usize,
}

/// One call or process event, as the kernel timed it (CLOCK_MONOTONIC, nanoseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub time_ns: u64,
    /// The process (thread group) and the thread.
    pub pid: i32,
    pub tid: i32,
    pub what: What,
}

impl Event {
    /// Whether it moves pages of its process to another address (an mremap).
    pub fn moves_pages(&self) -> bool {
        matches!(self.what, What::Mremap { .. } | What::MremapDone { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// mmap entered (`len >= min_bytes`).
    Mmap {
        addr: u64,
        len: u64,
        prot: u64,
        flags: u64,
        fd: i64,
        stack: Option<UserStack>,
    },
    /// mmap returned: the address, or `-errno`.
    MmapDone { ret: i64 },
    /// munmap entered (`len >= min_bytes`).
    Munmap { addr: u64, len: u64 },
    /// mremap entered (either length at least `min_bytes`).
    Mremap {
        addr: u64,
        old_len: u64,
        new_len: u64,
        stack: Option<UserStack>,
    },
    /// mremap returned: the new address, or `-errno`.
    MremapDone { ret: i64 },
    /// brk returned: the program break now.
    Brk { ret: i64 },
    /// A sampled page fault at `addr` (one in `Options::touch_every`), with the stack of the
    /// code that touched it.
    Touch { addr: u64, stack: Option<UserStack> },
    /// A transparent huge page faulted in (every one: `kmem:mm_page_alloc` of the huge page's
    /// order, in the faulting thread), its first page frame and the stack of the code that
    /// touched it. The kernel's record has no address: the ledger finds the page's at an
    /// anatomy, by its frame in pagemap.
    HugeTouch { pfn: u64, stack: Option<UserStack> },
    /// A task was forked from `parent` (a process's PID; the new task's `pid` and `tid`: a
    /// thread when they differ).
    Fork { parent: i32 },
    /// A task ended (the process when `tid == pid`).
    Exit,
    /// The process exec'd: its old mappings are gone.
    Exec,
}

/// Why the events could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum MapCallsError {
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    #[error("perf_event_open refused to watch every process: {0} (the ledger needs CAP_PERFMON, or root, or perf_event_paranoid at -1; it is {1})")]
    Refused(io::Error, String),
    #[error("cannot {0}: {1}")]
    Failed(String, io::Error),
    #[error("{0} has no field '{1}' in its format")]
    NoField(String, String),
}

impl crate::error::Classified for MapCallsError {
    /// The ledger could not start (no privilege, no tracepoint): it is off and said so.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// Which tracepoint an event is (by its ID in each sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Which {
    MmapEnter,
    MmapExit,
    Munmap,
    MremapEnter,
    MremapExit,
    BrkExit,
    /// A sampled page fault, from the software event (every fault: reads, NUMA balancing's
    /// hints and swap-ins too) where the kernel has no tracepoint for it.
    Fault,
    /// A sampled write fault, from the tracepoint `exceptions:page_fault_user` filtered in the
    /// kernel to writes (x86: `error_code & 2`).
    WriteFault,
    /// A transparent huge page allocated, from `kmem:mm_page_alloc` filtered in the kernel to
    /// the huge page's order.
    HugeAlloc,
}

/// The tracepoints, each with its kernel filter and whether it carries a stack.
const EVENTS: [(&str, Which, bool); 6] = [
    ("sys_enter_mmap", Which::MmapEnter, true),
    ("sys_exit_mmap", Which::MmapExit, false),
    ("sys_enter_munmap", Which::Munmap, false),
    ("sys_enter_mremap", Which::MremapEnter, true),
    ("sys_exit_mremap", Which::MremapExit, false),
    // No stack: the kernel cannot pick out the large raises (brk takes the new break, not a
    // length), and a stack with every brk of every process would flood the rings.
    ("sys_exit_brk", Which::BrkExit, false),
];

/// Offsets of the fields read from each tracepoint's record.
#[derive(Debug, Clone, Default, PartialEq)]
struct Layout {
    /// By name: `addr`, `len`, `prot`, `flags`, `fd`, `old_len`, `new_len`, `ret`.
    fields: HashMap<&'static str, usize>,
}

impl Layout {
    fn of(t: &Tracepoint, names: &[&'static str]) -> Result<Layout, MapCallsError> {
        let mut fields = HashMap::new();
        for n in names {
            let f = t.field(n).filter(|f| f.size == 8).ok_or_else(|| {
                MapCallsError::NoField(format!("{}:{}", t.group, t.name), n.to_string())
            })?;
            fields.insert(*n, f.offset);
        }
        Ok(Layout { fields })
    }

    fn get(&self, raw: &[u8], name: &str) -> Option<u64> {
        let at = *self.fields.get(name)?;
        Some(u64::from_ne_bytes(raw.get(at..at + 8)?.try_into().ok()?))
    }
}

/// The open events and their rings.
pub struct MapCalls {
    rings: Vec<Ring>,
    /// The CPU of each ring.
    ring_cpus: Vec<i32>,
    /// Whose faults are sampled; `Followed` becomes `Everyone` past [`FOLLOWED_EVENTS_MAX`].
    pub faults: Faults,
    /// The per-thread fault events `follow` opened.
    followed: Vec<std::os::fd::OwnedFd>,
    /// What the faults are sampled from: an event for each (`FaultPoint`).
    fault_points: Vec<FaultPoint>,
    /// The events whose records go to a ring of another (each CPU's first): open as long as
    /// the rings are.
    _others: Vec<std::os::fd::OwnedFd>,
    which: HashMap<u64, Which>,
    layouts: HashMap<Which, Layout>,
    /// Records the kernel dropped because a ring was full.
    pub lost: u64,
    /// Samples of calls read.
    pub calls: u64,
    buf: Vec<u8>,
    /// Where the tracepoints' IDs were read, and the filter, for the metadata.
    pub how: String,
    pub opts: Options,
    /// The cgroup the kernel keeps the events to (its processes and those below), where it
    /// could: every event in the rings is then of a process in it.
    pub cgroup: Option<std::path::PathBuf>,
    _cgroup_fd: Option<std::os::fd::OwnedFd>,
    /// The bytes of a transparent huge page, where huge pages faulted in are sampled.
    pub huge_bytes: Option<u64>,
}

impl MapCalls {
    /// Opens the events on every CPU and enables them: of the processes of `cgroup` alone
    /// where the kernel can keep them to it (a v2 cgroup, with perf's cgroup support), else of
    /// every process. The sampled page faults are of whom `faults` says (the cgroup's, where
    /// the kernel keeps the events to it): a launched or followed tree's alone, not every
    /// process's on the host, so that another program faulting in its memory fills no ring.
    pub fn open(
        opts: Options,
        cgroup: Option<&std::path::Path>,
        faults: Faults,
    ) -> Result<MapCalls, MapCallsError> {
        allowed()?;
        let cgroup_fd = cgroup.filter(|_| opts.in_kernel).and_then(perf_cgroup);
        let open_on = |attr: &Attr, cpu: i32| match &cgroup_fd {
            Some(fd) => {
                use std::os::fd::AsFd;
                crate::sys::raw::perf_event_open_cgroup(attr, fd.as_fd(), cpu)
            }
            None => crate::sys::raw::perf_event_open(attr, -1, cpu),
        };
        let mut names: Vec<(&str, &str)> =
            EVENTS.iter().map(|(n, _, _)| ("syscalls", *n)).collect();
        // The sampled faults are writes, where the kernel has the tracepoint (x86): a read
        // fault is no one's memory (NUMA balancing's hints on a prover's parameters, read by
        // its multiexp, credited the parameters to the reader in a 2-node guest).
        let want_writes = opts.touch_every > 0;
        if want_writes {
            names.extend(FAULT_POINTS);
        }
        let (mut points, how) = match tracefs::read(&names) {
            Ok(got) => got,
            Err(TracefsError::Missing(n, _)) if want_writes && n.starts_with("exceptions:") => {
                names.truncate(EVENTS.len());
                tracefs::read(&names)?
            }
            Err(e) => return Err(e.into()),
        };
        let fault_tracepoints = points.split_off(EVENTS.len().min(points.len()));
        let mut layouts = HashMap::new();
        for ((_, which, _), t) in EVENTS.iter().zip(&points) {
            let names: &[&'static str] = match which {
                Which::MmapEnter => &["addr", "len", "prot", "flags", "fd"],
                Which::Munmap => &["addr", "len"],
                Which::MremapEnter => &["addr", "old_len", "new_len"],
                Which::MmapExit | Which::MremapExit | Which::BrkExit => &["ret"],
                Which::Fault | Which::WriteFault | Which::HugeAlloc => &[],
            };
            layouts.insert(*which, Layout::of(t, names)?);
        }
        // Both tracepoints are of one class (x86's exceptions), one layout: checked, not assumed.
        let fault_points = match &fault_tracepoints[..] {
            [user, kernel] => {
                let l = Layout::of(user, &["address"])?;
                let same = Layout::of(kernel, &["address"]).ok() == Some(l.clone());
                layouts.insert(Which::WriteFault, l);
                let mut p = vec![FaultPoint::User(user.id)];
                if same {
                    p.push(FaultPoint::Kernel(kernel.id));
                }
                p
            }
            _ => vec![FaultPoint::Software],
        };
        let writes = fault_points[0] != FaultPoint::Software;
        let mut fault_points = fault_points;
        let mut huge_order = None;
        if let Some((point, layout)) = huge_point().filter(|_| want_writes) {
            layouts.insert(Which::HugeAlloc, layout);
            huge_order = match point {
                FaultPoint::Huge { order, .. } => Some(order),
                _ => None,
            };
            fault_points.push(point);
        }
        let cpus = crate::sys::raw::cpus_configured().unwrap_or(1) as i32;
        let faults = if cgroup_fd.is_some() {
            Faults::Everyone
        } else {
            faults
        };
        let mut rings = Vec::new();
        let mut ring_cpus = Vec::new();
        let mut which = HashMap::new();
        let mut enabled = Vec::new();
        let min = opts.min_bytes;
        for cpu in 0..cpus {
            let mut ring: Option<Ring> = None;
            for (i, ((name, w, stack), t)) in EVENTS.iter().zip(&points).enumerate() {
                let mut kinds = sample::IDENTIFIER | sample::TID | sample::TIME | sample::RAW;
                if *stack {
                    kinds |= sample::REGS_USER | sample::STACK_USER;
                }
                let mut attr = Attr::tracepoint(t.id, kinds);
                if *stack {
                    attr.sample_regs_user = regs::MASK;
                    attr.sample_stack_user = opts.stack_bytes;
                }
                // The reader looks every 200 ms, and is woken when a quarter of the ring is
                // waiting: a wake-up at each large call cost the calling process 9 µs a call
                // (BENCHMARKS.md), and a stack is unwound from the process's files, there 200 ms
                // later but for one that exited at once.
                attr.flags |= flag::WATERMARK;
                attr.wakeup_events = (opts.ring_pages * rustix::param::page_size() / 4) as u32;
                if i == 0 {
                    // One event per CPU carries the processes' comings and goings.
                    attr.flags |= flag::TASK | flag::COMM | flag::COMM_EXEC | flag::SAMPLE_ID_ALL;
                }
                let fd = match open_on(&attr, cpu) {
                    Ok(fd) => fd,
                    // A CPU that is offline (or not there) has no events.
                    Err(e) if e.raw_os_error() == Some(libc::ENODEV) => break,
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                        return Err(MapCallsError::Refused(e, paranoid()));
                    }
                    Err(e) => {
                        return Err(MapCallsError::Failed(
                            format!("open syscalls:{name} on CPU {cpu}"),
                            e,
                        ))
                    }
                };
                let filter = match w {
                    Which::MmapEnter | Which::Munmap => Some(format!("len >= {min}")),
                    Which::MremapEnter => Some(format!("old_len >= {min} || new_len >= {min}")),
                    _ => None,
                };
                if let Some(f) = filter {
                    let c = std::ffi::CString::new(f.clone()).expect("no NUL in a filter");
                    crate::sys::raw::perf_set_filter(&fd, &c).map_err(|e| {
                        MapCallsError::Failed(format!("set the filter '{f}' on syscalls:{name}"), e)
                    })?;
                }
                let id = crate::sys::raw::perf_id(&fd).map_err(|e| {
                    MapCallsError::Failed(format!("read the ID of syscalls:{name}"), e)
                })?;
                which.insert(id, *w);
                match &ring {
                    None => {
                        let r = Ring::map(fd, opts.ring_pages).map_err(|e| {
                            MapCallsError::Failed(format!("map the ring buffer of CPU {cpu}"), e)
                        })?;
                        ring = Some(r);
                    }
                    Some(r) => {
                        crate::sys::raw::perf_set_output(&fd, r.fd()).map_err(|e| {
                            MapCallsError::Failed(
                                format!("send syscalls:{name} to CPU {cpu}'s ring"),
                                e,
                            )
                        })?;
                        enabled.push(fd);
                    }
                }
            }
            let everyone = faults == Faults::Everyone;
            let sampled = opts.touch_every > 0 && faults != Faults::Followed;
            for &point in fault_points.iter().filter(|_| sampled) {
                let Some(r) = &ring else { break };
                let fd = match faults {
                    Faults::Launcher(tid) => {
                        let mut attr = touch_attr(&opts, point);
                        attr.flags |= flag::INHERIT;
                        crate::sys::raw::perf_event_open(&attr, tid, cpu)
                    }
                    _ if everyone => open_on(&touch_attr(&opts, point), cpu),
                    _ => unreachable!("followed faults are opened by follow()"),
                }
                .map_err(|e| MapCallsError::Failed(format!("open page-faults on CPU {cpu}"), e))?;
                let id = crate::sys::raw::perf_id(&fd)
                    .map_err(|e| MapCallsError::Failed("read the ID of page-faults".into(), e))?;
                which.insert(id, writes_only(&fd, point)?);
                crate::sys::raw::perf_set_output(&fd, r.fd()).map_err(|e| {
                    MapCallsError::Failed(format!("send page-faults to CPU {cpu}'s ring"), e)
                })?;
                enabled.push(fd);
            }
            if ring.is_some() {
                ring_cpus.push(cpu);
            }
            rings.extend(ring);
        }
        if rings.is_empty() {
            return Err(MapCallsError::Failed(
                "open the events".into(),
                io::Error::new(io::ErrorKind::NotFound, "no CPU took them"),
            ));
        }
        for fd in rings.iter().map(Ring::fd).chain(enabled.iter().map(|f| {
            use std::os::fd::AsFd;
            f.as_fd()
        })) {
            crate::sys::raw::perf_enable(fd, true)
                .map_err(|e| MapCallsError::Failed("enable the events".into(), e))?;
        }
        Ok(MapCalls {
            rings,
            ring_cpus,
            faults,
            followed: Vec::new(),
            fault_points,
            _others: enabled,
            which,
            layouts,
            lost: 0,
            calls: 0,
            buf: Vec::new(),
            how: format!(
                "{how}; {}; mmap, munmap, mremap of at least {}, brk (without stacks){}; stacks of {}",
                match (cgroup, &cgroup_fd) {
                    (Some(c), Some(_)) => format!("kept by the kernel to the cgroup {}", c.display()),
                    _ => "every process's (perf cannot pick out a process tree), the tree's kept"
                        .into(),
                },
                crate::units::fmt_bytes(min),
                if opts.touch_every > 0 {
                    format!(
                        "; one {} in {}{} with its address ({}{})",
                        if writes { "write fault" } else { "page fault" },
                        touch_period(opts.touch_every),
                        if touch_period(opts.touch_every) != opts.touch_every {
                            format!(" (--touch-every {} up to a prime)", opts.touch_every)
                        } else {
                            String::new()
                        },
                        if writes {
                            "tracepoints exceptions:page_fault_user and page_fault_kernel (on user addresses), filtered to writes"
                        } else {
                            "software event page-faults: this kernel has no tracepoint for writes, reads are sampled too"
                        },
                        match faults {
                            Faults::Launcher(_) => ", of the launched tree alone",
                            Faults::Followed => ", of the tree's threads alone, each followed with its forks",
                            Faults::Everyone => "",
                        }
                    ) + &huge_order
                        .map(|order| format!(
                            "; every transparent huge page faulted in (kmem:mm_page_alloc of order {order}, not NUMA balancing's moves), placed by its page frame"
                        ))
                        .unwrap_or_default()
                } else {
                    String::new()
                },
                crate::units::fmt_bytes(u64::from(opts.stack_bytes))
            ),
            opts,
            cgroup: cgroup.filter(|_| cgroup_fd.is_some()).map(Into::into),
            _cgroup_fd: cgroup_fd,
            huge_bytes: huge_order.map(|o| (rustix::param::page_size() as u64) << o),
        })
    }

    /// Samples the page faults of the threads `tids` too (`Faults::Followed`), and of every
    /// thread and process they start from now on: one event for each thread on each CPU, its
    /// records sent to that CPU's ring. A thread gone already is passed over. Past
    /// [`FOLLOWED_EVENTS_MAX`] events the faults of every process are sampled instead, from
    /// then on (the reader keeps the tree's). The events opened.
    pub fn follow(&mut self, tids: &[i32]) -> Result<usize, MapCallsError> {
        if self.faults != Faults::Followed || self.opts.touch_every == 0 {
            return Ok(0);
        }
        let points = self.fault_points.clone();
        let per_thread = self.rings.len() * points.len();
        if self.followed.len() + tids.len() * per_thread > FOLLOWED_EVENTS_MAX {
            // Closed first, so that no thread's faults are sampled twice.
            self.followed.clear();
            for i in 0..self.rings.len() {
                for &point in &points {
                    let fd = self.open_fault(-1, i, point, false)?;
                    self._others.push(fd);
                }
            }
            self.faults = Faults::Everyone;
            self.how.push_str(&format!(
                "; past {FOLLOWED_EVENTS_MAX} per-thread events, every process's page faults"
            ));
            return Ok(per_thread);
        }
        let before = self.followed.len();
        for &tid in tids {
            'thread: for i in 0..self.rings.len() {
                for &point in &points {
                    match self.open_fault(tid, i, point, true) {
                        Ok(fd) => self.followed.push(fd),
                        Err(MapCallsError::Failed(_, e))
                            if e.raw_os_error() == Some(libc::ESRCH) =>
                        {
                            break 'thread
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(self.followed.len() - before)
    }

    /// A page-fault event of `pid` (a thread, or -1: every process) on ring `i`'s CPU, its
    /// records sent to that ring, enabled; `inherit`: and of the threads it starts.
    fn open_fault(
        &mut self,
        pid: i32,
        i: usize,
        point: FaultPoint,
        inherit: bool,
    ) -> Result<std::os::fd::OwnedFd, MapCallsError> {
        let cpu = self.ring_cpus[i];
        let mut attr = touch_attr(&self.opts, point);
        if inherit {
            attr.flags |= flag::INHERIT;
        }
        let fd = crate::sys::raw::perf_event_open(&attr, pid, cpu).map_err(|e| {
            MapCallsError::Failed(format!("open page-faults of {pid} on CPU {cpu}"), e)
        })?;
        let id = crate::sys::raw::perf_id(&fd)
            .map_err(|e| MapCallsError::Failed("read the ID of page-faults".into(), e))?;
        let w = writes_only(&fd, point)?;
        self.which.insert(id, w);
        crate::sys::raw::perf_set_output(&fd, self.rings[i].fd()).map_err(|e| {
            MapCallsError::Failed(format!("send page-faults to CPU {cpu}'s ring"), e)
        })?;
        crate::sys::raw::perf_enable(&fd, true)
            .map_err(|e| MapCallsError::Failed("enable page-faults".into(), e))?;
        Ok(fd)
    }

    /// The rings' descriptors, readable when a large call wakes the reader.
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.rings.iter().map(Ring::fd)
    }

    /// Reads every ring: the events written since the last call, appended to `out` (each
    /// ring's in time order; the rings' interleaved by the caller).
    pub fn drain(&mut self, out: &mut Vec<Event>) {
        for r in &mut self.rings {
            self.buf.clear();
            r.read_into(&mut self.buf);
            for rec in perf::records(&self.buf) {
                match rec.kind {
                    record::SAMPLE => {
                        if let Some(e) = parse_sample(rec.body, &self.which, &self.layouts) {
                            self.calls += 1;
                            out.push(e);
                        }
                    }
                    record::LOST => {
                        let mut c = Cursor::new(rec.body);
                        let _id = c.u64();
                        self.lost += c.u64().unwrap_or(0);
                    }
                    record::FORK | record::EXIT => {
                        out.extend(parse_task(rec.kind, rec.body));
                    }
                    record::COMM if rec.misc & perf::misc::COMM_EXEC != 0 => {
                        out.extend(parse_exec(rec.body));
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The sampled page faults: every `touch_every`th fault on a CPU, with its address, the user
/// registers and the top of the user stack (of the code that touched the page, or that called
/// into the kernel which did: a read() filling a buffer).
fn touch_attr(opts: &Options, point: FaultPoint) -> Attr {
    // A tracepoint's record holds the address (RAW); the software event gives it as ADDR.
    let (type_, config, addr) = match point {
        FaultPoint::User(id) | FaultPoint::Kernel(id) | FaultPoint::Huge { id, .. } => {
            (perf::TYPE_TRACEPOINT, id, sample::RAW)
        }
        FaultPoint::Software => (perf::TYPE_SOFTWARE, perf::SW_PAGE_FAULTS, sample::ADDR),
    };
    // Every huge page: one fault brings 512 pages in, so one in N would leave most unsampled
    // (one sample per 128 MiB at N = 64).
    let period = match point {
        FaultPoint::Huge { .. } => 1,
        _ => touch_period(opts.touch_every),
    };
    Attr {
        type_,
        size: std::mem::size_of::<Attr>() as u32,
        config,
        sample_period: period,
        sample_type: sample::IDENTIFIER
            | sample::TID
            | sample::TIME
            | addr
            | sample::REGS_USER
            | sample::STACK_USER,
        flags: flag::DISABLED | flag::USE_CLOCKID | flag::WATERMARK,
        clockid: libc::CLOCK_MONOTONIC,
        wakeup_events: (opts.ring_pages * rustix::param::page_size() / 4) as u32,
        sample_regs_user: regs::MASK,
        sample_stack_user: opts.stack_bytes,
        ..Attr::default()
    }
}

/// The tracepoints of page faults, with the fault's address and error code (x86): those taken
/// in user mode, and those the kernel takes on a user address (a read() into a buffer not yet
/// written).
const FAULT_POINTS: [(&str, &str); 2] = [
    ("exceptions", "page_fault_user"),
    ("exceptions", "page_fault_kernel"),
];

/// What the tree's page faults are sampled from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FaultPoint {
    /// The software event page-faults: every fault, reads, NUMA balancing's hints and swap-ins
    /// too (a kernel without the tracepoints).
    Software,
    /// `exceptions:page_fault_user` and `exceptions:page_fault_kernel` (by their IDs), each
    /// filtered in the kernel to writes (`writes_only`).
    User(u64),
    Kernel(u64),
    /// `kmem:mm_page_alloc` (its ID) filtered in the kernel to the order of a transparent huge
    /// page (9 on x86_64: 2 MiB), and to the flags of a fault's allocation (`huge_filter`): a
    /// huge page faulted in, every one.
    Huge {
        id: u64,
        order: u32,
        /// The values of `__GFP_NORETRY` and `__GFP_THISNODE` in this kernel.
        noretry: u64,
        thisnode: u64,
    },
}

/// The kernel's filter that keeps the huge pages faulted in: of the huge page's order, and not
/// a NUMA balancing's move of one (a hinting fault on a page another node touches, in the
/// thread that read it, allocates its new huge page `__GFP_THISNODE` without `__GFP_NORETRY`;
/// a fault's first try on its own node has both, a second neither). In a 2-node guest the
/// moves of a prover's parameters, read by its multiexp, credited 6 MiB of them to the reader.
fn huge_filter(order: u32, noretry: u64, thisnode: u64) -> String {
    format!("order == {order} && ((gfp_flags & {noretry:#x}) || !(gfp_flags & {thisnode:#x}))")
}

/// The huge pages' fault point where the kernel has transparent huge pages and the tracepoint
/// `kmem:mm_page_alloc` (with its page frame), and the layout of its records.
fn huge_point() -> Option<(FaultPoint, Layout)> {
    let order = huge_page_order(&std::fs::read_to_string(HPAGE_PMD_SIZE).ok()?)?;
    let (points, _) = tracefs::read(&[("kmem", "mm_page_alloc")]).ok()?;
    let t = points.first()?;
    let layout = Layout::of(t, &["pfn"]).ok()?;
    // The flags' values from the format (5.10 to 6.18 have these).
    let noretry = t.print_flag("__GFP_NORETRY").unwrap_or(0x10000);
    let thisnode = t.print_flag("__GFP_THISNODE").unwrap_or(0x20_0000);
    Some((
        FaultPoint::Huge {
            id: t.id,
            order,
            noretry,
            thisnode,
        },
        layout,
    ))
}

/// The size of a transparent huge page, where the kernel has them.
const HPAGE_PMD_SIZE: &str = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size";

/// The page order of a transparent huge page of `size` bytes (hpage_pmd_size: `2097152` is
/// order 9 with 4 KiB pages).
fn huge_page_order(size: &str) -> Option<u32> {
    let size: u64 = size.trim().parse().ok()?;
    let page = rustix::param::page_size() as u64;
    (size > page && size.is_power_of_two()).then(|| (size / page).trailing_zeros())
}

/// The kernel's filters that keep the write faults of the tracepoints: bit 1 of x86's error
/// code (X86_PF_WRITE); of the kernel's own faults, those on user addresses (below 2^56, the
/// top of user space with 5-level page tables). The period counts the faults that pass them.
const WRITES_USER: &str = "error_code & 2";
const WRITES_KERNEL: &str = "(error_code & 2) && address < 0x100000000000000";

/// A fault event just opened: where it is a tracepoint, filtered to writes (or to huge pages).
/// What its records are.
fn writes_only(fd: &std::os::fd::OwnedFd, point: FaultPoint) -> Result<Which, MapCallsError> {
    let (filter, name, which) = match point {
        FaultPoint::Software => return Ok(Which::Fault),
        FaultPoint::User(_) => (
            WRITES_USER.to_string(),
            "exceptions:page_fault_user",
            Which::WriteFault,
        ),
        FaultPoint::Kernel(_) => (
            WRITES_KERNEL.to_string(),
            "exceptions:page_fault_kernel",
            Which::WriteFault,
        ),
        FaultPoint::Huge {
            order,
            noretry,
            thisnode,
            ..
        } => (
            huge_filter(order, noretry, thisnode),
            "kmem:mm_page_alloc",
            Which::HugeAlloc,
        ),
    };
    let c = std::ffi::CString::new(filter.clone()).expect("no NUL in a filter");
    crate::sys::raw::perf_set_filter(fd, &c)
        .map_err(|e| MapCallsError::Failed(format!("set the filter '{filter}' on {name}"), e))?;
    Ok(which)
}

/// The cgroup directory `dir` opened for perf to keep events to, where the kernel takes it (a
/// dummy event opened on CPU 0): a v1 memory cgroup is not perf's (its perf_event hierarchy is
/// another), and a kernel without perf's cgroup support takes none.
fn perf_cgroup(dir: &std::path::Path) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    // Off by default (`--ledger-in-kernel`): cgroup events make the kernel patch its scheduler's
    // hot path (perf's sched-in hooks), and in the lane's emulated guests (QEMU's multi-threaded
    // TCG, which misses a kernel's patching of its own code) that broke the kernel: soft lockups
    // in syscall_trace_enter of every process on Debian's 5.10, an `int3` oops in __schedule on
    // 6.12 and 7.3; 6.1 passed. The lane now emulates on one thread; the default is not yet
    // proven there. Never before 6.1.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    if kernel_version(&release)? < (6, 1) {
        return None;
    }
    let fd: std::os::fd::OwnedFd = std::fs::File::open(dir).ok()?.into();
    crate::sys::raw::perf_event_open_cgroup(&dummy(), fd.as_fd(), 0).ok()?;
    Some(fd)
}

/// A software event that counts nothing, disabled: what may be opened, asked cheaply.
fn dummy() -> Attr {
    Attr {
        type_: perf::TYPE_SOFTWARE,
        size: std::mem::size_of::<Attr>() as u32,
        config: perf::SW_DUMMY,
        flags: flag::DISABLED,
        ..Attr::default()
    }
}

/// A kernel release's major and minor version (`6.12.57+deb13-amd64`: (6, 12)).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Whether perf may watch every process on a CPU, asked first with a dummy software event (no
/// tracefs needed): the privilege is what a user lacks most often, and says so plainly.
fn allowed() -> Result<(), MapCallsError> {
    let attr = dummy();
    match crate::sys::raw::perf_event_open(&attr, -1, 0) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            Err(MapCallsError::Refused(e, paranoid()))
        }
        Err(e) => Err(MapCallsError::Failed("open a perf event".into(), e)),
    }
}

/// /proc/sys/kernel/perf_event_paranoid, as it reads.
fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// A sample of one of the tracepoints (`IDENTIFIER | TID | TIME | RAW`, and `REGS_USER |
/// STACK_USER` for those with a stack); `None` for one that is not whole.
fn parse_sample(
    body: &[u8],
    which: &HashMap<u64, Which>,
    layouts: &HashMap<Which, Layout>,
) -> Option<Event> {
    let mut c = Cursor::new(body);
    let w = *which.get(&c.u64()?)?;
    let (pid, tid) = (c.u32()? as i32, c.u32()? as i32);
    let time_ns = c.u64()?;
    if w == Which::Fault {
        let addr = c.u64()?;
        return Some(Event {
            time_ns,
            pid,
            tid,
            what: What::Touch {
                addr,
                stack: user_stack(&mut c),
            },
        });
    }
    let raw_len = c.u32()? as usize;
    let raw = c.bytes(raw_len)?;
    let l = layouts.get(&w)?;
    let f = |name| l.get(raw, name);
    let with_stack = matches!(
        w,
        Which::MmapEnter | Which::MremapEnter | Which::WriteFault | Which::HugeAlloc
    );
    let stack = if with_stack { user_stack(&mut c) } else { None };
    let what = match w {
        Which::MmapEnter => What::Mmap {
            addr: f("addr")?,
            len: f("len")?,
            prot: f("prot")?,
            flags: f("flags")?,
            fd: f("fd")? as i64,
            stack,
        },
        Which::MmapExit => What::MmapDone {
            ret: f("ret")? as i64,
        },
        Which::Munmap => What::Munmap {
            addr: f("addr")?,
            len: f("len")?,
        },
        Which::MremapEnter => What::Mremap {
            addr: f("addr")?,
            old_len: f("old_len")?,
            new_len: f("new_len")?,
            stack,
        },
        Which::MremapExit => What::MremapDone {
            ret: f("ret")? as i64,
        },
        Which::BrkExit => What::Brk {
            ret: f("ret")? as i64,
        },
        Which::WriteFault => What::Touch {
            addr: f("address")?,
            stack,
        },
        // A failed allocation's frame reads -1.
        Which::HugeAlloc => What::HugeTouch {
            pfn: f("pfn").filter(|&p| p != u64::MAX)?,
            stack,
        },
        Which::Fault => return None,
    };
    Some(Event {
        time_ns,
        pid,
        tid,
        what,
    })
}

/// `REGS_USER` (its ABI word, then the registers when there are any: none for a kernel thread)
/// and `STACK_USER` (its size, the bytes, and how many of them were copied).
fn user_stack(c: &mut Cursor<'_>) -> Option<UserStack> {
    let abi = c.u64()?;
    let mut regs = [0u64; regs::COUNT];
    if abi != 0 {
        for r in &mut regs {
            *r = c.u64()?;
        }
    }
    let size = c.u64()? as usize;
    if size == 0 {
        return None;
    }
    let bytes = c.bytes(size)?;
    let copied = (c.u64()? as usize).min(size);
    (abi != 0).then(|| UserStack {
        regs,
        bytes: bytes[..copied].to_vec(),
        asked: size,
    })
}

/// A `FORK` or `EXIT` record: `pid, ppid, tid, ptid` (u32 each), `time`.
fn parse_task(kind: u32, body: &[u8]) -> Option<Event> {
    let mut c = Cursor::new(body);
    let (pid, ppid, tid, _ptid) = (c.u32()?, c.u32()?, c.u32()?, c.u32()?);
    let time_ns = c.u64()?;
    Some(Event {
        time_ns,
        pid: pid as i32,
        tid: tid as i32,
        what: if kind == record::FORK {
            What::Fork {
                parent: ppid as i32,
            }
        } else {
            What::Exit
        },
    })
}

/// A `COMM` record made by an exec: `pid, tid`, the name, then the `sample_id` (`TID, TIME,
/// IDENTIFIER`: the time is 16 bytes from its end).
fn parse_exec(body: &[u8]) -> Option<Event> {
    let mut c = Cursor::new(body);
    let (pid, tid) = (c.u32()? as i32, c.u32()? as i32);
    let n = body.len();
    let time_ns = u64::from_ne_bytes(body.get(n.checked_sub(16)?..n - 8)?.try_into().ok()?);
    Some(Event {
        time_ns,
        pid,
        tid,
        what: What::Exec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fault_sampling_period_is_the_next_prime() {
        assert_eq!(touch_period(0), 0);
        assert_eq!(touch_period(1), 1);
        assert_eq!(touch_period(2), 2);
        assert_eq!(touch_period(64), 67);
        assert_eq!(touch_period(67), 67);
        assert_eq!(touch_period(1024), 1031);
        // No divisor of a pattern of up to 64 sites in turn divides it.
        assert!((2..=64).all(|k| touch_period(1024) % k != 0));
    }

    #[test]
    fn kernel_releases_read_as_their_major_and_minor_version() {
        assert_eq!(kernel_version("5.10.0-46-amd64\n"), Some((5, 10)));
        assert_eq!(kernel_version("6.12.57+deb13-amd64"), Some((6, 12)));
        assert_eq!(kernel_version("7.3.4"), Some((7, 3)));
        assert!(kernel_version("6.18.44-fc-v1272") >= Some((6, 1)));
        assert_eq!(kernel_version("junk"), None);
    }

    fn layouts() -> HashMap<Which, Layout> {
        let l = |pairs: &[(&'static str, usize)]| Layout {
            fields: pairs.iter().copied().collect(),
        };
        [
            (
                Which::MmapEnter,
                l(&[
                    ("addr", 16),
                    ("len", 24),
                    ("prot", 32),
                    ("flags", 40),
                    ("fd", 48),
                ]),
            ),
            (Which::MmapExit, l(&[("ret", 16)])),
            (Which::HugeAlloc, l(&[("pfn", 8)])),
        ]
        .into_iter()
        .collect()
    }

    fn u64s(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    /// A sample as the kernel lays it out: ID, pid/tid, time, raw (size, record), then for an
    /// mmap entry the registers and the stack.
    fn sample_bytes(id: u64, raw: &[u64], stack: Option<(&[u64], &[u8], u64)>) -> Vec<u8> {
        let mut b = u64s(&[id]);
        b.extend_from_slice(&7u32.to_ne_bytes());
        b.extend_from_slice(&8u32.to_ne_bytes());
        b.extend(u64s(&[123_456]));
        let raw = u64s(raw);
        b.extend_from_slice(&((raw.len() + 4) as u32).to_ne_bytes());
        b.extend_from_slice(&raw);
        b.extend_from_slice(&[0; 4]);
        if let Some((regs, stack, copied)) = stack {
            b.extend(u64s(&[2]));
            b.extend(u64s(regs));
            b.extend(u64s(&[stack.len() as u64]));
            b.extend_from_slice(stack);
            b.extend(u64s(&[copied]));
        }
        b
    }

    #[test]
    fn an_mmap_sample_gives_its_arguments_and_the_stack_copied() {
        let which: HashMap<u64, Which> = [(11, Which::MmapEnter), (12, Which::MmapExit)]
            .into_iter()
            .collect();
        // common fields (8 bytes), __syscall_nr and padding (8), then the six arguments.
        let raw = [0, 9, 0, 60 << 20, 3, 0x22, u64::MAX, 0];
        let stack = [0xabu8; 32];
        let regs = [0x1000u64; regs::COUNT];
        let b = sample_bytes(11, &raw, Some((&regs, &stack, 24)));
        let e = parse_sample(&b, &which, &layouts()).unwrap();
        assert_eq!((e.pid, e.tid, e.time_ns), (7, 8, 123_456));
        let What::Mmap {
            len,
            prot,
            flags,
            fd,
            stack,
            ..
        } = e.what
        else {
            panic!("{e:?}")
        };
        assert_eq!((len, prot, flags, fd), (60 << 20, 3, 0x22, -1));
        let stack = stack.unwrap();
        assert_eq!(stack.bytes.len(), 24, "only the bytes copied");
        assert_eq!(stack.regs, regs);
        // An exit: its return value; an unknown ID or a short sample: nothing.
        let b = sample_bytes(12, &[0, 9, 0x7f00_0000_0000], None);
        assert_eq!(
            parse_sample(&b, &which, &layouts()).unwrap().what,
            What::MmapDone {
                ret: 0x7f00_0000_0000
            }
        );
        assert!(parse_sample(&sample_bytes(99, &raw, None), &which, &layouts()).is_none());
        assert!(parse_sample(&b[..20], &which, &layouts()).is_none());
    }

    #[test]
    fn a_huge_page_sample_gives_its_frame_and_stack_and_a_failed_allocation_none() {
        let which: HashMap<u64, Which> = [(13, Which::HugeAlloc)].into_iter().collect();
        // common fields (8 bytes), then pfn, order and gfp_flags, migratetype.
        let regs = [0x2000u64; regs::COUNT];
        let stack = [0xcdu8; 16];
        let b = sample_bytes(
            13,
            &[0, 0x48_1600, 9, 0x14_0cca, 1],
            Some((&regs, &stack, 16)),
        );
        let e = parse_sample(&b, &which, &layouts()).unwrap();
        let What::HugeTouch { pfn, stack: got } = e.what else {
            panic!("{e:?}")
        };
        assert_eq!((pfn, got.unwrap().regs), (0x48_1600, regs));
        let b = sample_bytes(13, &[0, u64::MAX, 9, 0, 1], Some((&regs, &stack, 16)));
        assert!(parse_sample(&b, &which, &layouts()).is_none());
    }

    #[test]
    fn a_huge_pages_order_is_read_from_its_size() {
        let page = rustix::param::page_size() as u64;
        assert_eq!(huge_page_order(&format!("{}\n", page * 512)), Some(9));
        assert_eq!(huge_page_order("0\n"), None);
        assert_eq!(huge_page_order("3000000"), None);
    }

    #[test]
    fn fork_exit_and_exec_records_tell_the_processes_apart_from_threads() {
        let mut b: Vec<u8> = [10u32, 1, 11, 1]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        b.extend(u64s(&[555]));
        let e = parse_task(record::FORK, &b).unwrap();
        assert_eq!((e.pid, e.tid, e.time_ns), (10, 11, 555));
        assert_eq!(e.what, What::Fork { parent: 1 });
        assert_eq!(parse_task(record::EXIT, &b).unwrap().what, What::Exit);
        let mut c: Vec<u8> = [10u32, 10].iter().flat_map(|x| x.to_ne_bytes()).collect();
        c.extend_from_slice(b"prover\0\0");
        c.extend([10u32, 10].iter().flat_map(|x| x.to_ne_bytes()));
        c.extend(u64s(&[777, 5]));
        let e = parse_exec(&c).unwrap();
        assert_eq!((e.pid, e.time_ns, e.what), (10, 777, What::Exec));
    }
}
