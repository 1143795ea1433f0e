//! The ledger of mappings of a recording (`--anatomy` where perf may be used): the kernel's
//! mapping calls (`probe/mapcalls.rs`) read on a thread of its own, never on the sampler's
//! tick; the tree's picked out, their stacks unwound and named (`probe/unwind.rs`) as they come
//! (the process must still be there), then applied in time order to the ledger
//! (`analysis/ledger.rs`). The anatomy thread asks it for the mappings alive at a moment
//! ([`LedgerHandle::snapshot`]): the calls up to that moment are applied, the later ones wait.
//!
//! The tree: the processes the recorder names ([`LedgerHandle::members`]: its root and the
//! descendants it found), and every process they fork after (the kernel's FORK records, in
//! order with the calls, so a child's first mapping is never missed); for a launched command,
//! the children of memmon itself (`launcher`), memmon's own calls left out.
//!
//! Rewrites: where faults are sampled and the kernel keeps soft-dirty bits, a snapshot asked
//! with `rearm` (the start's anatomy, each span's end anatomy) clears the tree's bits once the
//! samples are weighed ([`Reader::rearm`]), so memory an allocator hands out again faults on its
//! next write and is credited to the code that wrote it (`analysis/ledger.rs`).

use crate::analysis::ledger::{Input, Ledger, ResidentMaps};
use crate::format::meta::LedgerEnd;
use crate::model::ledger::LedgerAt;
use crate::probe::mapcalls::{Event, Faults, MapCalls, MapCallsError, Options, What};
use crate::probe::proc::PageState;
use crate::probe::unwind::Unwinder;
use crate::sys::Waker;
use std::collections::{HashMap, HashSet};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// The calls the thread has not applied yet are applied in the background once they are this
/// old: a snapshot may ask for a moment up to this far back (a late marker's own time) and get
/// the ledger as it was then.
const SETTLE_NS: u64 = 2_000_000_000;

/// Appends what the rings hold to `raw` (events read and not yet resolved), within the
/// backlog's bound: past it the newest are dropped and counted as lost.
fn take_rings(calls: &mut MapCalls, raw: &mut Vec<Event>) {
    let from = raw.len();
    calls.drain(raw);
    raw[from..].sort_by_key(|e| e.time_ns);
    if raw.len() == from {
        return;
    }
    let mut held: usize = raw.iter().map(stack_bytes).sum();
    while held > BACKLOG_BYTES && raw.len() > from {
        let e = raw.pop().expect("longer than from");
        held -= stack_bytes(&e);
        calls.lost += 1;
    }
}

/// Events resolved between two reads of the rings (`Reader::read`).
const RESOLVE_BATCH: usize = 32;

/// The most stack bytes held in events read and not yet resolved.
const BACKLOG_BYTES: usize = 64 << 20;

/// The stack bytes an event holds.
fn stack_bytes(e: &Event) -> usize {
    match &e.what {
        What::Mmap { stack, .. }
        | What::Mremap { stack, .. }
        | What::Touch { stack, .. }
        | What::HugeTouch { stack, .. } => stack.as_ref().map_or(0, |s| s.bytes.len()),
        _ => 0,
    }
}

/// The ledger thread's nice value where memmon may lower it (the tree's is usually 0).
const LEDGER_NICE: i32 = -10;

/// Without a wake-up, the thread reads the rings this often.
const LOOK: Duration = Duration::from_millis(200);

enum Msg {
    Members(Vec<i32>),
    Snapshot {
        at_unix_ms: u64,
        maps: Option<Vec<ResidentMaps>>,
        /// When `maps` had been read (CLOCK_MONOTONIC, ns): the sampled faults are weighed
        /// against them with every call up to then applied.
        maps_read_ns: u64,
        /// A span begins after it: the tree's soft-dirty bits are cleared once the samples
        /// are weighed (`Reader::rearm`).
        rearm: bool,
        reply: mpsc::Sender<LedgerAt>,
    },
}

/// How other threads talk to the ledger's.
pub struct LedgerHandle {
    tx: Mutex<mpsc::Sender<Msg>>,
    wake: Arc<Waker>,
}

impl LedgerHandle {
    /// The tree's processes as the recorder knows them now (their calls count from here on).
    pub fn members(&self, pids: Vec<i32>) {
        self.send(Msg::Members(pids));
    }

    /// The tree's live mappings by stack at `at_unix_ms` (wall clock): every call up to then
    /// applied, none after (a moment before the last one asked for is answered as of that
    /// one); with `maps` (the tree's mappings and their Rss, read with smaps), each stack's
    /// resident bytes and the sampled page faults' credit. `rearm`: a span begins after this
    /// moment (the recording's start, a span's end): the tree's soft-dirty bits are cleared
    /// before the answer, so what the tree writes from then on is sampled as written anew.
    /// `None` when the thread is gone or does not answer within 10 s.
    pub fn snapshot(
        &self,
        at_unix_ms: u64,
        maps: Option<Vec<ResidentMaps>>,
        rearm: bool,
    ) -> Option<LedgerAt> {
        let (reply, rx) = mpsc::channel();
        if !self.send(Msg::Snapshot {
            at_unix_ms,
            maps,
            maps_read_ns: now_mono_ns(),
            rearm,
            reply,
        }) {
            return None;
        }
        rx.recv_timeout(Duration::from_secs(10)).ok()
    }

    fn send(&self, m: Msg) -> bool {
        let sent = self.tx.lock().map(|tx| tx.send(m).is_ok()).unwrap_or(false);
        if sent {
            self.wake.wake();
        }
        sent
    }
}

/// The ledger's thread.
pub struct LedgerThread {
    handle: Arc<LedgerHandle>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<LedgerEnd>>,
    /// How the calls are read, for the metadata.
    pub how: String,
}

impl LedgerThread {
    /// Opens the kernel's events (an error says why it cannot: no privilege, no tracefs) and
    /// starts the thread. `launcher`: memmon's own PID when it launches the command, whose
    /// children then join the tree. `cgroup`: a cgroup that holds the tree alone (memmon's
    /// own, or one found to), to which the kernel keeps the events where it can: every
    /// process in it is then the tree's.
    pub fn start(
        opts: Options,
        launcher: Option<i32>,
        cgroup: Option<&std::path::Path>,
    ) -> Result<LedgerThread, MapCallsError> {
        // The sampled faults of the tree alone: a launched one's from this thread, which
        // starts the command; an attached one's from each of its threads as they are named.
        let faults = match launcher {
            Some(_) => Faults::Launcher(rustix::thread::gettid().as_raw_nonzero().get()),
            None => Faults::Followed,
        };
        let mut calls = MapCalls::open(opts, cgroup, faults)?;
        if opts.touch_every > 0 {
            calls.how.push_str(if crate::probe::proc::soft_dirty_tracked() {
                "; rewrites sampled (the tree's soft-dirty bits cleared after the start's and each span's end anatomy)"
            } else {
                "; rewrites not sampled (this kernel keeps no soft-dirty bits): memory handed out again stays with the code that first touched it"
            });
        }
        let how = calls.how.clone();
        let wake = Arc::new(
            Waker::new().map_err(|e| MapCallsError::Failed("make the ledger's waker".into(), e))?,
        );
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let handle = Arc::new(LedgerHandle {
            tx: Mutex::new(tx),
            wake: wake.clone(),
        });
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("memmon-ledger".into())
            .spawn(move || {
                // Ahead of the tree on a busy CPU, where memmon may (root): a ring buffer fills
                // in tens of milliseconds while the tree faults in its memory, and what the
                // kernel drops is lost to the ledger. The thread only copies and unwinds.
                let _ = rustix::process::setpriority_process(
                    Some(rustix::thread::gettid()),
                    LEDGER_NICE,
                );
                let mut l = Reader::new(calls, opts, launcher);
                l.run(&rx, &wake, &stopped)
            })
            .map_err(|e| MapCallsError::Failed("start the ledger's thread".into(), e))?;
        Ok(LedgerThread {
            handle,
            stop,
            thread: Some(thread),
            how,
        })
    }

    pub fn handle(&self) -> Arc<LedgerHandle> {
        self.handle.clone()
    }

    /// Stops the thread: what it did.
    pub fn stop(mut self) -> LedgerEnd {
        self.end().unwrap_or_default()
    }

    fn end(&mut self) -> Option<LedgerEnd> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.handle.wake.wake();
        self.thread.take()?.join().ok()
    }
}

impl Drop for LedgerThread {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// A call read and resolved (its stack unwound and interned), waiting for its time to come.
struct Resolved {
    time_ns: u64,
    pid: i32,
    tid: i32,
    input: Input,
}

/// The thread's state.
struct Reader {
    calls: MapCalls,
    ledger: Ledger,
    unwinder: Unwinder,
    /// Processes whose calls are unwound as they are read: the ledger's members, and those
    /// forked from them (or from `launcher`) in calls not yet applied.
    known: HashSet<i32>,
    launcher: Option<i32>,
    /// Processes whose page faults are sampled (`Faults::Followed`): each named one's threads
    /// as found, and what they fork after (the kernel's `inherit`).
    followed: HashSet<i32>,
    pending: Vec<Resolved>,
    raw: Vec<Event>,
    /// Rewrites are sampled: faults are, and the kernel keeps soft-dirty bits.
    rewrites: bool,
    /// When the tree's soft-dirty bits were cleared (wall clock, ms), in order; and the wall
    /// time the clearings took, microseconds.
    rearmed_unix_ms: Vec<u64>,
    rearm_us: u64,
}

impl Reader {
    fn new(calls: MapCalls, opts: Options, launcher: Option<i32>) -> Reader {
        let mut ledger = Ledger::new(opts.min_bytes, rustix::param::page_size() as u64);
        if let Some(b) = calls.huge_bytes {
            ledger.set_huge_bytes(b);
        }
        ledger.add_parents(launcher);
        if calls.cgroup.is_some() {
            ledger.take_everyone();
        }
        Reader {
            calls,
            ledger,
            unwinder: Unwinder::new(crate::probe::ProcFs::default()),
            known: HashSet::new(),
            launcher,
            followed: HashSet::new(),
            pending: Vec::new(),
            raw: Vec::new(),
            rewrites: opts.touch_every > 0 && crate::probe::proc::soft_dirty_tracked(),
            rearmed_unix_ms: Vec::new(),
            rearm_us: 0,
        }
    }

    fn run(
        &mut self,
        rx: &mpsc::Receiver<Msg>,
        wake: &Waker,
        stop: &std::sync::atomic::AtomicBool,
    ) -> LedgerEnd {
        let cpu0 = thread_cpu_us();
        loop {
            let fds: Vec<Option<std::os::fd::BorrowedFd<'_>>> =
                std::iter::once(Some(std::os::fd::AsFd::as_fd(wake)))
                    .chain(self.calls.fds().map(Some))
                    .collect();
            let mut ready = vec![false; fds.len()];
            // Without events, a look every 200 ms: the calls settle and are applied.
            let _ = crate::sys::wait_ready_into(&fds, Some(LOOK), &mut ready);
            drop(fds);
            wake.reset();
            self.read();
            for m in rx.try_iter() {
                match m {
                    Msg::Members(pids) => {
                        self.follow(&pids);
                        self.known.extend(pids.iter().copied());
                        self.ledger.add_members(pids);
                    }
                    Msg::Snapshot {
                        at_unix_ms,
                        maps,
                        maps_read_ns,
                        rearm,
                        reply,
                    } => {
                        // Read again: every call up to now is in a ring by now.
                        self.read();
                        let at = mono_of_unix_ms(at_unix_ms);
                        self.apply_to(at);
                        let stacks = self.live(maps.as_deref());
                        // The mappings are the ledger's at the row's moment; the sampled pages
                        // are weighed against smaps as read, later: the calls up to then are
                        // applied first, so that a vector an mremap moved in between has its
                        // samples where smaps found its pages (a prover's first proof grows its
                        // vectors by mremap many times a second). Not a process's exit or exec,
                        // though: a program that ended while smaps was read (the highest
                        // anatomy is often its last) keeps its samples for the weighing.
                        if maps.is_some() {
                            self.apply_while_alive(maps_read_ns.max(at));
                        }
                        let touch = maps.as_deref().and_then(|m| self.touch_at(m));
                        if rearm {
                            self.rearm();
                        }
                        let _ = reply.send(LedgerAt {
                            stacks,
                            at_unix_ms,
                            calls: self.ledger.calls,
                            lost: self.calls.lost,
                            touch,
                        });
                    }
                }
            }
            self.apply_to(now_mono_ns().saturating_sub(SETTLE_NS));
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
        }
        LedgerEnd {
            how: self.calls.how.clone(),
            calls: self.ledger.calls,
            records: self.calls.calls,
            lost: self.calls.lost,
            stacks: self.unwinder.unwound,
            truncated: self.unwinder.truncated,
            stacks_completed: self.unwinder.completed,
            stacks_over_cap: self.ledger.stacks.over_cap,
            touch_samples: self.ledger.touch_samples,
            touches_dropped: self.ledger.touches_dropped,
            huge_samples: self.ledger.huge_samples,
            huge_unfound: self.ledger.huge_unfound,
            sections_refused: std::mem::take(&mut self.unwinder.sections_refused),
            rearms: self.rearmed_unix_ms.len() as u64,
            rearm_us: self.rearm_us,
            cpu_us: thread_cpu_us().saturating_sub(cpu0),
        }
    }

    /// Reads the rings: the tree's calls resolved (stacks unwound now, while the process is
    /// there), in time order, into `pending`. The rings are read again after every
    /// `RESOLVE_BATCH` events resolved, so they keep room while stacks are unwound (a tree
    /// faulting in its memory fills one in tens of milliseconds); what waits is held here, at
    /// most `BACKLOG_BYTES` of stacks (past that, the newest are dropped and counted as lost).
    fn read(&mut self) {
        take_rings(&mut self.calls, &mut self.raw);
        let mut at = 0;
        while at < self.raw.len() {
            let end = (at + RESOLVE_BATCH).min(self.raw.len());
            for i in at..end {
                let e = self.raw[i].clone();
                if let Some(r) = self.resolve(&e) {
                    self.pending.push(r);
                }
            }
            at = end;
            // Those read meanwhile join the ones still waiting, in time order.
            let before = self.raw.len();
            take_rings(&mut self.calls, &mut self.raw);
            if self.raw.len() > before {
                self.raw[at..].sort_by_key(|e| e.time_ns);
            }
        }
        self.raw.clear();
        // Each read is in order; one read's calls may come before another's last ones.
        self.pending.sort_by_key(|r| r.time_ns);
    }

    /// Samples the page faults of the processes of `pids` not followed yet (an attached tree's
    /// as found, a restarted daemon's): their threads now, and what they start from now on. A
    /// thread started between the listing and its event is missed; one that fails to open
    /// leaves the faults sampled as they were.
    fn follow(&mut self, pids: &[i32]) {
        if self.calls.faults != Faults::Followed {
            return;
        }
        for &pid in pids {
            if !self.followed.insert(pid) {
                continue;
            }
            let tids = crate::probe::ProcFs::default()
                .open(pid)
                .and_then(|h| h.threads())
                .unwrap_or_default();
            if self.calls.follow(&tids).is_err() {
                return;
            }
        }
    }

    fn relevant(&self, pid: i32) -> bool {
        self.calls.cgroup.is_some() || self.known.contains(&pid) || self.ledger.is_member(pid)
    }

    fn resolve(&mut self, e: &Event) -> Option<Resolved> {
        let stack = |this: &mut Reader, s: &Option<crate::probe::mapcalls::UserStack>| {
            s.as_ref().map(|s| {
                let (frames, cut) = this.unwinder.frames(e.pid, s);
                this.ledger.stacks.intern(frames, cut)
            })
        };
        let input = match &e.what {
            What::Fork { parent } => {
                let process = e.pid == e.tid && e.pid != *parent;
                if process && (self.relevant(*parent) || Some(*parent) == self.launcher) {
                    self.known.insert(e.pid);
                }
                if process && self.followed.contains(parent) {
                    // Its faults come through the parent's events, inherited.
                    self.followed.insert(e.pid);
                }
                Input::Fork { parent: *parent }
            }
            _ if !self.relevant(e.pid) => return None,
            What::Exec => {
                self.unwinder.forget(e.pid);
                Input::Exec
            }
            What::Exit => {
                if e.pid == e.tid {
                    self.unwinder.forget(e.pid);
                }
                Input::Exit
            }
            What::Mmap { len, stack: s, .. } => Input::Mmap {
                len: *len,
                stack: stack(self, s),
            },
            What::MmapDone { ret } => Input::MmapDone { ret: *ret },
            What::Munmap { addr, len } => Input::Munmap {
                addr: *addr,
                len: *len,
            },
            What::Mremap {
                addr,
                old_len,
                new_len,
                stack: s,
            } => Input::Mremap {
                addr: *addr,
                old_len: *old_len,
                new_len: *new_len,
                stack: stack(self, s),
            },
            What::MremapDone { ret } => Input::MremapDone { ret: *ret },
            What::Brk { ret } => Input::Brk {
                ret: *ret,
                stack: None,
            },
            What::Touch { addr, stack: s } => Input::Touch {
                addr: *addr,
                stack: stack(self, s),
            },
            What::HugeTouch { pfn, stack: s } => Input::HugeTouch {
                pfn: *pfn,
                stack: stack(self, s),
            },
        };
        Some(Resolved {
            time_ns: e.time_ns,
            pid: e.pid,
            tid: e.tid,
            input,
        })
    }

    /// The sampled page faults' credit against `maps` (`Ledger::touch_at`), each sampled page
    /// checked in its process's pagemap now; `None` where faults are not sampled.
    fn touch_at(&mut self, maps: &[ResidentMaps]) -> Option<crate::model::ledger::TouchAt> {
        let every = crate::probe::mapcalls::touch_period(self.calls.opts.touch_every);
        if every == 0 {
            return None;
        }
        let page = rustix::param::page_size() as u64;
        let procfs = crate::probe::ProcFs::default();
        self.place_huge(maps, page);
        // A page as it stood: present, not written since the last clearing.
        let settled = PageState {
            present: true,
            soft_dirty: false,
        };
        let states = self
            .ledger
            .touched_pages()
            .into_iter()
            .map(|(pid, pages)| {
                // A process whose pagemap cannot be read: none of its pages counts. One gone
                // since smaps was read (its exit not applied yet): its pages as they stood.
                let here = match procfs.open(pid).and_then(|h| h.page_states(&pages, page)) {
                    Ok(here) => here,
                    Err(crate::probe::ProcError::NoSuchProcess(_)) => vec![settled; pages.len()],
                    Err(_) => vec![PageState::default(); pages.len()],
                };
                // The rings keep room while pagemap is read (`read` resolves what came).
                take_rings(&mut self.calls, &mut self.raw);
                (pid, here)
            })
            .collect::<HashMap<i32, Vec<PageState>>>();
        // A sampled page not in RAM is forgotten (its memory released), but not where the
        // process moved pages after the moment the ledger stands at: its calls since wait, and a
        // page an mremap moved reads as gone at its old address (vectors growing by mremap lost
        // up to 32 samples to one snapshot taken mid-growth). Those samples stay, and count
        // where the mappings smaps read (before the move) hold them, as not written again (a
        // move marks pages soft-dirty).
        let unsettled: HashSet<i32> = self
            .pending
            .iter()
            .filter(|r| moves_pages(&r.input))
            .map(|r| r.pid)
            .chain(self.raw.iter().filter(|e| e.moves_pages()).map(|e| e.pid))
            .collect();
        let states = states
            .into_iter()
            .map(|(pid, here)| {
                if unsettled.contains(&pid) {
                    (pid, vec![settled; here.len()])
                } else {
                    (pid, here)
                }
            })
            .collect();
        let mut t = self.ledger.touch_at(maps, &states, every);
        t.rearmed_unix_ms = (t.rearms as usize)
            .checked_sub(1)
            .and_then(|i| self.rearmed_unix_ms.get(i).copied());
        Some(t)
    }

    /// Finds the huge pages' samples waiting (`Ledger::huge_pending`) by their page frames:
    /// pagemap read at each huge page's first address in the data mappings smaps found huge
    /// pages in (one entry each), within `HUGE_LOOKUP_MAX` entries at a snapshot. A process
    /// whose frames cannot be read (memmon without CAP_SYS_ADMIN reads them as 0) finds none.
    fn place_huge(&mut self, maps: &[ResidentMaps], page: u64) {
        let huge = self.ledger.huge_bytes();
        let procfs = crate::probe::ProcFs::default();
        let mut budget = HUGE_LOOKUP_MAX;
        for (pid, pfns) in self.ledger.huge_pending() {
            let mut found = HashMap::new();
            let addrs: Vec<u64> = maps
                .iter()
                .filter(|m| m.pid == pid)
                .flat_map(|m| &m.maps)
                .filter(|m| m.data && m.anon_huge > 0)
                .flat_map(|m| {
                    (m.start.next_multiple_of(huge)..m.end.saturating_sub(huge - 1))
                        .step_by(huge as usize)
                })
                .take(budget)
                .collect();
            budget -= addrs.len();
            if let Ok(entries) = procfs
                .open(pid)
                .and_then(|h| h.pagemap_entries(&addrs, page))
            {
                for (&at, &e) in addrs.iter().zip(&entries) {
                    if let Some(pfn) =
                        crate::probe::proc::pagemap_pfn(e).filter(|p| pfns.contains(p))
                    {
                        found.insert(pfn, at);
                    }
                }
            }
            take_rings(&mut self.calls, &mut self.raw);
            self.ledger.place_huge(pid, &found);
        }
    }

    /// Clears the soft-dirty bits of the tree's processes (`ProcHandle::clear_soft_dirty`),
    /// where rewrites are sampled: from now on the first write to each page faults, and the
    /// ledger's span of each process cleared begins now (`Input::Rearm`, in time order with the
    /// calls). A process gone, or that refuses, keeps its span: its pages' bits say nothing
    /// new.
    fn rearm(&mut self) {
        if !self.rewrites {
            return;
        }
        let t0 = now_mono_ns();
        let began = std::time::Instant::now();
        let procfs = crate::probe::ProcFs::default();
        let mut pids: Vec<i32> = self.ledger.members().collect();
        pids.sort_unstable();
        pids.retain(|&pid| {
            let cleared = procfs.open(pid).and_then(|h| h.clear_soft_dirty()).is_ok();
            // The rings keep room meanwhile (a large process takes milliseconds).
            take_rings(&mut self.calls, &mut self.raw);
            cleared
        });
        self.rearm_us += began.elapsed().as_micros() as u64;
        self.rearmed_unix_ms.push(unix_now_ms());
        let at = self.pending.partition_point(|r| r.time_ns <= t0);
        self.pending.insert(
            at,
            Resolved {
                time_ns: t0,
                pid: 0,
                tid: 0,
                input: Input::Rearm { pids },
            },
        );
    }

    /// The live mappings by stack at a snapshot, weighed against `maps`; the rings are read
    /// between pagemap reads, so they keep room meanwhile.
    fn live(&mut self, maps: Option<&[ResidentMaps]>) -> Vec<crate::model::ledger::StackGroup> {
        let Reader {
            ledger, calls, raw, ..
        } = self;
        let mut present = present_bytes();
        ledger.live(maps, &mut |pid, start, end| {
            let b = present(pid, start, end);
            take_rings(calls, raw);
            b
        })
    }

    /// Applies the pending calls up to `at` (CLOCK_MONOTONIC ns).
    fn apply_to(&mut self, at: u64) {
        let n = self.pending.partition_point(|r| r.time_ns <= at);
        for r in self.pending.drain(..n) {
            self.ledger.apply(r.pid, r.tid, r.input);
        }
    }

    /// Applies the pending calls up to `at`, but not from a process's exit or exec on: what
    /// smaps read of a process, alive, is weighed with its samples, not with none.
    fn apply_while_alive(&mut self, at: u64) {
        let n = self.pending.partition_point(|r| r.time_ns <= at);
        let n = self.pending[..n]
            .iter()
            .position(ends_its_memory)
            .unwrap_or(n);
        for r in self.pending.drain(..n) {
            self.ledger.apply(r.pid, r.tid, r.input);
        }
    }
}

/// Whether an event ends its process's memory: an exec, or the exit of the process (not of a
/// thread).
fn ends_its_memory(r: &Resolved) -> bool {
    match r.input {
        Input::Exec => true,
        Input::Exit => r.pid == r.tid,
        _ => false,
    }
}

/// Whether a call moves a process's pages to another address (an mremap: what a snapshot's
/// pagemap read may have met before the ledger applied it). The calls that release pages need
/// no such care: their pages are gone, and their samples go with them when they are applied.
fn moves_pages(input: &Input) -> bool {
    matches!(input, Input::Mremap { .. } | Input::MremapDone { .. })
}

/// At most this many huge pages' first addresses are read in pagemap at one snapshot, looking
/// for the frames of huge pages faulted in (8 TiB of 2 MiB pages).
const HUGE_LOOKUP_MAX: usize = 1 << 22;

/// At most this much address space is checked page by page in pagemap at one snapshot (parts
/// of mappings the kernel merged with others); beyond it a part's Rss is its share.
const PAGEMAP_BUDGET_BYTES: u64 = 16 << 30;

/// The bytes of a process's `[start, end)` present in RAM now (pagemap), within the snapshot's
/// budget; `None` past it or where pagemap cannot be read.
fn present_bytes() -> impl FnMut(i32, u64, u64) -> Option<u64> {
    let procfs = crate::probe::ProcFs::default();
    let page = rustix::param::page_size() as u64;
    let mut handles: std::collections::HashMap<i32, Option<crate::probe::ProcHandle>> =
        std::collections::HashMap::new();
    let mut budget = PAGEMAP_BUDGET_BYTES;
    move |pid, start, end| {
        let len = end.saturating_sub(start);
        if len > budget {
            return None;
        }
        budget -= len;
        let h = handles
            .entry(pid)
            .or_insert_with(|| procfs.open(pid).ok())
            .as_ref()?;
        h.present_bytes(start, end, page).ok()
    }
}

/// The wall clock now, ms since the Unix epoch.
fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// CLOCK_MONOTONIC now, in nanoseconds (the clock of the events' times).
fn now_mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The CLOCK_MONOTONIC time of a wall-clock moment (read against both clocks now).
fn mono_of_unix_ms(unix_ms: u64) -> u64 {
    let unix_now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mono_now = now_mono_ns();
    let back = unix_now_ns.saturating_sub(unix_ms.saturating_mul(1_000_000));
    mono_now.saturating_sub(back)
}

/// The calling thread's CPU time (user and system), microseconds.
fn thread_cpu_us() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000
}
