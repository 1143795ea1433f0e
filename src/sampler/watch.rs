//! The sampling engine: one target followed over time. A `Watch` finds its target (or is given
//! the command memmon launched), follows its process tree (`tree.rs`) and, for a pidfile or a
//! name, the process that takes over after an exit; it keeps the kernel's exit records across
//! those restarts, reads PSS under one guard on a thread of its own (`pss.rs`), and at each tick
//! reads the tree, the GPU memory and the memory cgroup into one `Sample`.
//!
//! Who keeps time and where the samples go is the caller's: `record/` (a file, the running
//! summary, a bench's runs; its markers and restarts) and `export/` (a window and a snapshot per
//! target, every target on one thread) call [`Watch::tick`] on a [`Schedule`], and tests call it
//! by hand over a fake /proc.
//!
//! [`Schedule`]: crate::sampler::schedule::Schedule

use crate::format::meta::{PssUnread, EXIT_RECORDS_READ};
use crate::model::sample::{Event, Sample};
use crate::probe::proc::clock_ticks_per_s;
use crate::probe::taskstats::ExitWatch;
use crate::probe::{ProcError, ProcFs, ProcHandle, StatusMem};
use crate::reporter::Reporter;
use crate::sampler::cgroup::CgroupSource;
use crate::sampler::gpu::GpuTracker;
use crate::sampler::psi::PsiSource;
use crate::sampler::pss::{PssGuard, PssRead, PssSchedule, PssThread};
use crate::sampler::swap::SwapSource;
use crate::sampler::target::{self, PidfileStamp, TargetError, TargetSpec};
use crate::sampler::tree::{ProcessRecord, Tree, DEPARTED_KEEP};
use std::sync::mpsc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// How a target is followed.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub procfs: ProcFs,
    /// Follow the target's descendants (`--no-children` turns it off).
    pub children: bool,
    /// Read PSS (`--pss`), under this guard.
    pub pss: Option<PssGuard>,
    /// Read the root as a descendant is read (`Tree::read_root_by_statm`): `export`, whose
    /// gauges need no per-row split; `record` reads the root's status at every tick.
    pub root_by_statm: bool,
}

/// The kernel's exit records of a watched tree (taskstats).
pub enum ExitRecords {
    /// Not asked for (`--no-taskstats`).
    Off,
    /// Asked for: opened with the first tree followed.
    Wanted,
    /// Opened (before a launch, so a command that ends at once still has its record).
    Open(ExitWatch),
    /// Refused by the kernel, and why; not asked again.
    Refused(String),
}

/// Where the exit records stand.
enum ExitState {
    Off,
    Wanted,
    /// Opened, not yet given to a tree.
    Pending(ExitWatch),
    /// Held by the current tree (`Tree::watch_exits`), handed on to the next at a restart.
    Held,
    Refused(String),
}

/// One tick of a watch: the sample, and what the tree's departures since the previous tick
/// add to the largest RSS between the two (`export`'s window).
#[derive(Debug, Clone)]
pub struct Tick {
    pub sample: Sample,
    /// The largest VmHWM, from exit records queued since the last reset of the marks, of the
    /// processes that left since the previous tick (0 without records).
    pub departed_hwm: u64,
    /// The largest of those marks that rose after the process was last read: a peak reached
    /// since the previous tick.
    pub departed_risen_hwm: u64,
}

/// What a tree that ended adds to the first row of the process that took over (the `restart`
/// row): every process it still held left the tree since the row before (its root among them),
/// and the marks its exit records gave after its last row are peaks reached in between.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RestartCarry {
    /// Processes that left: the members alive at the old tree's last row, and those its last
    /// exit records settled.
    departed: u32,
    /// The largest VmHWM from exit records (since the last reset of the marks) of those
    /// processes, and the largest of them that rose after the process was last read: a peak
    /// reached after the last row, which the restart's row takes (one that did not rise is in
    /// the rows already, and for a process attached to may predate the recording).
    hwm: u64,
    risen_hwm: u64,
    /// The sum of the marks of the processes alive after the old tree's last row.
    hwm_sum: u64,
}

impl RestartCarry {
    fn of(old: &Tree) -> RestartCarry {
        let tail = old
            .departures_after_last_sample()
            .cloned()
            .unwrap_or_default();
        let members = old.each_member().count() as u32;
        RestartCarry {
            departed: members.saturating_add(tail.sample.departed),
            hwm: tail.departed_hwm,
            risen_hwm: tail.departed_risen_hwm,
            hwm_sum: tail.sample.hwm_sum_bytes,
        }
    }
}

/// What a look for the target found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The target, found for the first time: its PID and command name.
    First(i32, String),
    /// The process that took over after the watched one exited.
    Restart(i32, String),
}

/// One target followed tick after tick (module docs).
/// The marks reset elsewhere the end record lists (the rest are counted).
const MARK_RESETS_KEPT: usize = 100;

pub struct Watch {
    spec: TargetSpec,
    opts: WatchOptions,
    /// When the watch began: a sample's `elapsed_s` counts from here.
    start: Instant,
    /// The tree of the process watched; kept after that process ended (its processes and exit
    /// records are what the end of a recording reports) until a successor takes its place.
    tree: Option<Tree>,
    /// The watched process ended (or could not be read any more).
    ended: bool,
    /// The last process watched (pid, start time), and the pidfile's stamp when it named it.
    last_root: Option<(i32, u64)>,
    pidfile_stamp: Option<PidfileStamp>,
    /// When the watched process was last seen alive: a `--name` successor started after it.
    last_alive: Option<Instant>,
    restarts: u64,
    exits: ExitState,
    /// The largest peak from exit records of the trees before a restart.
    exit_peak: Option<u64>,
    /// What the tree that ended adds to the restart's row: its processes left the tree since
    /// the row before (`RestartCarry`). Taken by the next tick.
    carry: Option<RestartCarry>,
    /// The processes of the trees before a restart (the largest peaks, at most
    /// `tree::DEPARTED_KEEP`), and how many left with them: the end record lists and counts
    /// them with the last tree's.
    earlier_processes: Vec<ProcessRecord>,
    earlier_departed: u64,
    /// Processes whose mark fell with no reset of memmon's (`Tree::take_marks_reset_elsewhere`),
    /// the first [`MARK_RESETS_KEPT`] timed by the row that saw each, and how many in all.
    marks_reset_elsewhere: Vec<crate::format::meta::MarkResetElsewhere>,
    marks_reset_elsewhere_count: u64,
    /// The major faults of the trees before a restart, and the time since boot (clock
    /// ticks) when the watch was made: a root started since counts its faults from its birth.
    faults_before: u64,
    made_at_ticks: Option<u64>,
    pss: Option<Pss>,
    gpu: Option<GpuTracker>,
    cgroup: Option<CgroupSource>,
    psi: Option<PsiSource>,
    swap: Option<SwapSource>,
    report: Reporter,
}

/// PSS reads of the tree: asked on a schedule, read on their own thread, their sum on the next
/// row.
struct Pss {
    guard: PssGuard,
    thread: PssThread,
    schedule: PssSchedule,
    reads: mpsc::Receiver<PssRead>,
    /// A PSS sum read and not yet on a row, with the resident bytes of the tree's NVIDIA
    /// device-file mappings read with it.
    ready: Option<u64>,
    nvidia_ready: Option<u64>,
    /// The tree's transparent huge pages (AnonHugePages) of the same read.
    thp_ready: Option<u64>,
    /// The read under way was asked knowing which processes map NVIDIA device files.
    asked_knowing_nvidia: bool,
    /// Processes whose PSS was not read, and why: each told once, then counted.
    unread: Vec<PssUnread>,
}

impl Watch {
    /// A watch of `spec`, nothing found yet. With PSS on, a read that ends calls `pss_wake`
    /// (on the PSS thread), so a caller asleep can take its row at once; without one, the
    /// sum goes on the next tick's row.
    pub fn new(
        spec: TargetSpec,
        opts: WatchOptions,
        exits: ExitRecords,
        pss_wake: Option<Box<dyn Fn() + Send>>,
        report: Reporter,
    ) -> std::io::Result<Watch> {
        let pss = match &opts.pss {
            Some(guard) => {
                let (tx, reads) = mpsc::channel();
                let thread = PssThread::start(move |read| {
                    if tx.send(read).is_ok() {
                        if let Some(wake) = &pss_wake {
                            wake();
                        }
                    }
                })?;
                Some(Pss {
                    guard: guard.clone(),
                    thread,
                    schedule: PssSchedule::new(guard.every),
                    reads,
                    ready: None,
                    nvidia_ready: None,
                    thp_ready: None,
                    asked_knowing_nvidia: false,
                    unread: Vec::new(),
                })
            }
            None => None,
        };
        let made_at_ticks = target::boot_ticks_now(&opts.procfs);
        Ok(Watch {
            spec,
            opts,
            start: Instant::now(),
            tree: None,
            ended: true,
            last_root: None,
            pidfile_stamp: None,
            last_alive: None,
            restarts: 0,
            exits: match exits {
                ExitRecords::Off => ExitState::Off,
                ExitRecords::Wanted => ExitState::Wanted,
                ExitRecords::Open(w) => ExitState::Pending(w),
                ExitRecords::Refused(e) => ExitState::Refused(e),
            },
            exit_peak: None,
            carry: None,
            earlier_processes: Vec::new(),
            earlier_departed: 0,
            marks_reset_elsewhere: Vec::new(),
            marks_reset_elsewhere_count: 0,
            faults_before: 0,
            made_at_ticks,
            pss,
            gpu: None,
            cgroup: None,
            psi: None,
            swap: None,
            report,
        })
    }

    /// Reads GPU memory (`sampler/gpu.rs`) into every sample.
    pub fn with_gpu(mut self, gpu: Option<GpuTracker>) -> Watch {
        self.gpu = gpu;
        self
    }

    /// Reads this memory cgroup into every sample.
    pub fn with_cgroup(mut self, cgroup: Option<CgroupSource>) -> Watch {
        self.cgroup = cgroup;
        self
    }

    /// Reads memory pressure (PSI) into every sample.
    pub fn with_psi(mut self, psi: Option<PsiSource>) -> Watch {
        self.psi = psi;
        self
    }

    /// Reads the machine's swap counts (`sampler/swap.rs`) into every sample.
    pub fn with_swap(mut self, swap: Option<SwapSource>) -> Watch {
        self.swap = swap;
        self
    }

    /// Samples count their time from `start` (a recording's start, once it is set up).
    pub fn set_start(&mut self, start: Instant) {
        self.start = start;
    }

    pub fn spec(&self) -> &TargetSpec {
        &self.spec
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    /// Starts following `h` (the target resolved, or the command memmon launched), with the
    /// pidfile's stamp when a pidfile named it.
    pub fn follow(&mut self, h: ProcHandle, stamp: Option<PidfileStamp>) {
        self.last_root = Some((h.pid, h.start_time));
        if stamp.is_some() {
            self.pidfile_stamp = stamp;
        }
        self.last_alive = Some(Instant::now());
        // The exit-record watch goes from tree to tree, and so does its count of lost records.
        let kept = self.tree.as_mut().and_then(Tree::take_exits);
        if let Some(old) = &self.tree {
            self.exit_peak = self.exit_peak.max(old.exit_peak());
            self.faults_before = self.faults_before.saturating_add(old.major_faults());
            // Every process of the old tree has left it: the restart's row counts them (a
            // process gone with no exit record read leaves the peak a lower bound), and the
            // end record lists them.
            let carry = RestartCarry::of(old);
            self.earlier_departed = self
                .earlier_departed
                .saturating_add(old.departed_count())
                .saturating_add(old.each_member().count() as u64);
            self.earlier_processes.extend(old.processes());
            self.earlier_processes
                .sort_by_key(|p| std::cmp::Reverse(p.hwm_bytes));
            self.earlier_processes.truncate(DEPARTED_KEEP);
            // A tree that ended before a row was taken of its successor: both carry over.
            self.carry = Some(match self.carry.take() {
                Some(c) => RestartCarry {
                    departed: c.departed.saturating_add(carry.departed),
                    hwm: c.hwm.max(carry.hwm),
                    risen_hwm: c.risen_hwm.max(carry.risen_hwm),
                    hwm_sum: c.hwm_sum.saturating_add(carry.hwm_sum),
                },
                None => carry,
            });
        }
        let born_since = self.made_at_ticks.is_some_and(|t| h.start_time >= t);
        let mut tree = Tree::new(self.opts.procfs.clone(), h, self.opts.children);
        if let Some(t) = self.made_at_ticks {
            tree.recording_since(t);
        }
        if self.opts.root_by_statm {
            tree.read_root_by_statm();
        }
        if born_since {
            tree.count_faults_from_birth();
        }
        let watch = match std::mem::replace(&mut self.exits, ExitState::Off) {
            ExitState::Pending(w) => Some(w),
            ExitState::Held => kept,
            ExitState::Wanted => match ExitWatch::open_online() {
                Ok(w) => Some(w),
                Err(e) => {
                    self.report.note(&format!("not reading exit records: {e}; a process that peaks and exits between two samples is missed"));
                    self.exits = ExitState::Refused(e.to_string());
                    None
                }
            },
            other => {
                self.exits = other;
                None
            }
        };
        if let Some(w) = watch {
            tree.watch_exits(w);
            self.exits = ExitState::Held;
        }
        self.tree = Some(tree);
        self.ended = false;
        if let Some(p) = &mut self.pss {
            p.ready = None;
            p.nvidia_ready = None;
        }
    }

    /// One look for the target: the first time (or while never found) as `target::resolve`
    /// finds it; after the watched process ended, for the process that took over (a rewritten
    /// pidfile, a new match of the name), which is then followed. `Ok(None)` when there is
    /// none (yet); an error only for the first look.
    pub fn look(&mut self) -> Result<Option<Found>, TargetError> {
        if !self.ended {
            return Ok(None);
        }
        let Some(old) = self.last_root else {
            let r = target::resolve(&self.opts.procfs, &self.spec)?;
            if let Some(note) = &r.note {
                self.report.note(note);
            }
            let found = Found::First(r.handle.pid, r.handle.comm.clone());
            self.follow(r.handle, r.pidfile);
            return Ok(Some(found));
        };
        let found = match &self.spec {
            TargetSpec::Pidfile(path) => {
                target::pidfile_successor(&self.opts.procfs, path, old, self.pidfile_stamp)
                    .map(|(h, stamp)| (h, Some(stamp)))
            }
            TargetSpec::Name(re) => {
                target::name_successor(&self.opts.procfs, re, old, self.not_before())
                    .map(|h| (h, None))
            }
            // A PID once gone is gone; a command or a cgroup is never waited for.
            _ => None,
        };
        let Some((h, stamp)) = found else {
            return Ok(None);
        };
        self.restarts += 1;
        let found = Found::Restart(h.pid, h.comm.clone());
        self.follow(h, stamp);
        Ok(Some(found))
    }

    /// Clock ticks since boot before which a `--name` successor cannot have started: the
    /// old process was alive at its last sample (one clock tick of slack).
    fn not_before(&self) -> u64 {
        let since = self.last_alive.map_or(0.0, |t| t.elapsed().as_secs_f64());
        not_before(target::boot_ticks_now(&self.opts.procfs), since)
    }

    /// Takes one sample: reads the tree (and the GPU and cgroup sources), with `event` and
    /// `missed_ticks` as given; `origin` is when the event happened (its `event_lag_us`
    /// counts from there). `Ok(None)` when the target has ended (or none is watched).
    pub fn tick(
        &mut self,
        event: Option<Event>,
        origin: Option<SystemTime>,
        missed_ticks: u64,
    ) -> Result<Option<Tick>, ProcError> {
        let Some(tree) = self.tree.as_mut().filter(|_| !self.ended) else {
            return Ok(None);
        };
        let ts = match tree.sample() {
            Ok(Some(ts)) => ts,
            Ok(None) => {
                self.ended = true;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        self.last_alive = Some(now);
        // The tree filled its columns; the engine fills the tick's own, then the sources'.
        let mut s = Sample {
            unix_ms: unix_ms_now(),
            elapsed_s: now.duration_since(self.start).as_secs_f64(),
            missed_ticks,
            event_lag_us: origin.filter(|_| event.is_some()).map(|o| {
                SystemTime::now()
                    .duration_since(o)
                    .map_or(0, |d| d.as_micros() as u64)
            }),
            event,
            major_faults: self.faults_before.saturating_add(ts.sample.major_faults),
            ..ts.sample
        };
        self.note_marks_reset_elsewhere(s.unix_ms, s.elapsed_s);
        let mut departed_hwm = ts.departed_hwm;
        let mut departed_risen_hwm = ts.departed_risen_hwm;
        if let Some(c) = self.carry.take() {
            s.departed = s.departed.saturating_add(c.departed);
            s.hwm_bytes = s.hwm_bytes.max(c.risen_hwm);
            s.hwm_sum_bytes = s.hwm_sum_bytes.saturating_add(c.hwm_sum);
            departed_hwm = departed_hwm.max(c.hwm);
            departed_risen_hwm = departed_risen_hwm.max(c.risen_hwm);
        }
        if let Some(p) = &mut self.pss {
            s.pss_bytes = p.ready.take();
            s.nvidia_mapped_rss_bytes = p.nvidia_ready.take();
            s.anon_huge_bytes = p.thp_ready.take();
        }
        if let Some(g) = &mut self.gpu {
            let tree = self.tree.as_ref().expect("sampled a tree");
            // A span's boundary takes a GPU reading of its own: its accounting mark is then
            // the driver's at the boundary, and a rise falls in the span it happened in.
            if s.event.as_ref().is_some_and(Event::bounds_a_span) {
                g.read_at_boundary(tree.each_member().map(|(h, _)| h.pid));
            }
            let (gpu, notes) = g.tick(tree.each_member().map(|(h, _)| h.pid), now);
            notes.iter().for_each(|n| self.report.note(n));
            s.gpu = gpu;
        }
        let cgroup = self.cgroup.as_mut().and_then(|c| c.tick());
        if let Some(c) = &mut self.cgroup {
            c.fill(&mut s, cgroup.as_ref());
            let tree = self.tree.as_ref().expect("sampled a tree");
            let (outside, new) = c.check_members(tree.each_member().map(|(h, _)| h), s.elapsed_s);
            s.cgroup_outside_processes = outside;
            for o in new {
                self.report.warning(&format!(
                    "PID {} ({}) of the tree left the cgroup {} for {} (at +{}): its memory from now on is charged there, so the cgroup's peak is not the tree's from this row on; the peak falls back to the kernel's",
                    o.pid,
                    o.comm,
                    c.cgroup().path,
                    if o.cgroup.is_empty() { "another cgroup" } else { &o.cgroup },
                    crate::units::fmt_seconds(s.elapsed_s)
                ));
            }
        }
        if let Some(p) = &mut self.psi {
            p.fill(&mut s);
        }
        if let Some(w) = &mut self.swap {
            w.fill(&mut s);
        }
        self.maybe_ask_pss(now, s.rss_bytes);
        Ok(Some(Tick {
            sample: s,
            departed_hwm,
            departed_risen_hwm,
        }))
    }

    /// The watched process can no longer be read: it is looked for again as after an exit.
    pub fn lose(&mut self) {
        self.ended = true;
    }

    /// True while a process of the target is watched.
    pub fn is_up(&self) -> bool {
        !self.ended && self.tree.is_some()
    }

    /// The tree of the process watched (or of the last one, after it ended).
    pub fn tree(&self) -> Option<&Tree> {
        self.tree.as_ref()
    }

    pub fn tree_mut(&mut self) -> Option<&mut Tree> {
        self.tree.as_mut()
    }

    /// Each member of the tree with its latest status.
    pub fn members(&self) -> impl Iterator<Item = (&ProcHandle, &StatusMem)> {
        self.tree.iter().flat_map(|t| t.each_member())
    }

    /// The PID of the process watched (or of the last one); 0 before any.
    pub fn root_pid(&self) -> i32 {
        self.tree.as_ref().map_or(0, Tree::root_pid)
    }

    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Keeps (and warns of, the first time) each member whose mark fell in the tick just read,
    /// at row `unix_ms`.
    fn note_marks_reset_elsewhere(&mut self, unix_ms: u64, elapsed_s: f64) {
        let Some(tree) = self.tree.as_mut() else {
            return;
        };
        for mut r in tree.take_marks_reset_elsewhere() {
            self.marks_reset_elsewhere_count += 1;
            if self.marks_reset_elsewhere_count == 1 {
                self.report.warning(&format!(
                    "the high-water mark (VmHWM) of PID {} ({}) fell from {} to {} at +{} with no reset of memmon's: the process itself or another program reset it (a write to /proc/{}/clear_refs), or reclaim took its pages before the kernel updated the mark; what it reached between the row before and that reset is not known, so the kernel's peak of a span holding it is a lower bound",
                    r.pid,
                    crate::outside::shown(&r.comm),
                    crate::units::fmt_bytes(r.before_bytes),
                    crate::units::fmt_bytes(r.after_bytes),
                    crate::units::fmt_seconds(elapsed_s),
                    r.pid,
                ));
            }
            if self.marks_reset_elsewhere.len() < MARK_RESETS_KEPT {
                r.unix_ms = unix_ms;
                self.marks_reset_elsewhere.push(r);
            }
        }
    }

    /// The marks reset elsewhere (`note_marks_reset_elsewhere`), and how many there were.
    pub fn take_marks_reset_elsewhere(
        &mut self,
    ) -> (Vec<crate::format::meta::MarkResetElsewhere>, u64) {
        (
            std::mem::take(&mut self.marks_reset_elsewhere),
            self.marks_reset_elsewhere_count,
        )
    }

    /// A process that started (`start_time`, clock ticks since boot) after this watch was
    /// made: every mark it holds was set since.
    pub fn born_since_made(&self, start_time: u64) -> bool {
        self.made_at_ticks.is_some_and(|t| start_time >= t)
    }

    pub fn gpu_mut(&mut self) -> Option<&mut GpuTracker> {
        self.gpu.as_mut()
    }

    pub fn cgroup_mut(&mut self) -> Option<&mut CgroupSource> {
        self.cgroup.as_mut()
    }

    pub fn cgroup(&self) -> Option<&CgroupSource> {
        self.cgroup.as_ref()
    }

    /// How the kernel's exit records are read, for the metadata: read, off, or why not.
    pub fn exit_records_status(&self) -> String {
        match &self.exits {
            ExitState::Off => "off (--no-taskstats)".into(),
            ExitState::Refused(e) => format!("unavailable: {e}"),
            ExitState::Wanted | ExitState::Pending(_) | ExitState::Held => EXIT_RECORDS_READ.into(),
        }
    }

    /// The kernel refused the exit records.
    pub fn exit_records_refused(&self) -> bool {
        matches!(self.exits, ExitState::Refused(_))
    }

    /// The major faults of every tree followed, as the `major_faults` column counts them, with
    /// what the exit records read since the last row added.
    pub fn major_faults(&self) -> u64 {
        self.faults_before
            .saturating_add(self.tree.as_ref().map_or(0, Tree::major_faults))
    }

    /// Every process seen, largest peak first: the last tree's (`Tree::processes`) and, after a
    /// restart, those of the trees before it (at most `tree::DEPARTED_KEEP` of them).
    pub fn processes(&self) -> Vec<ProcessRecord> {
        let mut all = self.tree.as_ref().map(Tree::processes).unwrap_or_default();
        all.extend(self.earlier_processes.iter().cloned());
        all.sort_by_key(|p| std::cmp::Reverse(p.hwm_bytes));
        all
    }

    /// How many processes left the trees followed: the last tree's departures and, after a
    /// restart, every process of the trees before it.
    pub fn departed_count(&self) -> u64 {
        self.earlier_departed
            .saturating_add(self.tree.as_ref().map_or(0, Tree::departed_count))
    }

    /// The largest peak from exit records, over every tree followed.
    pub fn exit_peak(&self) -> Option<u64> {
        self.exit_peak
            .max(self.tree.as_ref().and_then(Tree::exit_peak))
    }

    /// Resets VmHWM of every process in the tree (at a marker, at the start, at a bench run,
    /// after each tick of `export --reset-peaks`); a message per failure, with its PID. Every
    /// status read and exit record queued before the reset is kept out of the samples after it
    /// (`Tree::reset_marks`).
    /// Each member's VmHWM read right before the last reset (`Tree::hwm_before_reset`).
    pub fn hwm_before_reset(&self) -> &[(i32, u64, u64)] {
        self.tree.as_ref().map_or(&[], Tree::hwm_before_reset)
    }

    pub fn reset_marks(&mut self) -> Vec<(i32, ProcError)> {
        self.tree
            .as_mut()
            .filter(|_| !self.ended)
            .map(Tree::reset_marks)
            .unwrap_or_default()
    }

    /// After a row whose tree RSS is `rss`: asks the PSS thread for a read when one is due
    /// (`sampler::pss::PssSchedule`) and none is under way.
    fn maybe_ask_pss(&mut self, now: Instant, rss: u64) {
        let (Some(p), Some(tree)) = (self.pss.as_mut(), self.tree.as_ref()) else {
            return;
        };
        if p.thread.busy() || !p.schedule.due(now, rss) {
            return;
        }
        p.schedule.asked(now, rss);
        let known = self.gpu.as_ref().and_then(|g| g.nvidia_pids());
        p.asked_knowing_nvidia = known.is_some();
        p.thread
            .ask(tree.each_member(), &p.guard, &known.unwrap_or_default());
    }

    /// Takes the PSS reads that ended since the last call: the processes a read could not
    /// read are told once each (then counted), and a complete sum waits for the next row.
    /// `None` when no read ended; else whether a sum is ready for a row (`false`: the read
    /// missed a process, and a sum without it would look like a drop).
    pub fn pss_arrived(&mut self) -> Option<bool> {
        let mut got = Vec::new();
        if let Some(p) = &mut self.pss {
            while let Ok(read) = p.reads.try_recv() {
                p.thread.done();
                got.push(read);
            }
        }
        if got.is_empty() {
            return None;
        }
        for read in got {
            self.pss_read(read);
        }
        Some(self.pss.as_ref().is_some_and(|p| p.ready.is_some()))
    }

    fn pss_read(&mut self, read: PssRead) {
        let gpu_on = self.gpu.is_some();
        let Some(p) = &mut self.pss else {
            return;
        };
        for u in read.unread {
            if let Some(known) = p
                .unread
                .iter_mut()
                .find(|k| k.pid == u.pid && k.reason == u.reason)
            {
                known.reads += 1;
                continue;
            }
            self.report.note(&format!(
                "not reading PSS of PID {} ({}): {}; ticks without it have no PSS",
                u.pid, u.comm, u.why
            ));
            p.unread.push(PssUnread {
                pid: u.pid,
                comm: u.comm,
                reason: u.reason,
                reads: 1,
            });
        }
        p.ready = read.total;
        p.thp_ready = read.anon_huge;
        // The NVIDIA mappings' resident bytes go on the same row, when GPU memory is read and
        // the read was asked knowing which processes map them.
        p.nvidia_ready = read.nvidia_rss.filter(|_| gpu_on && p.asked_knowing_nvidia);
    }

    /// With PSS on and the target alive: reads the tree's PSS now, on this thread (a
    /// recording's last read, at its end), unless one was asked for within `recent`; true when
    /// it read (its sum, when complete, goes on the next row).
    pub fn read_pss_now(&mut self, recent: std::time::Duration) -> bool {
        let Some(p) = &mut self.pss else {
            return false;
        };
        if p.schedule
            .last_asked()
            .is_some_and(|t| t.elapsed() < recent)
        {
            return false;
        }
        let Some(tree) = self.tree.as_ref().filter(|_| !self.ended) else {
            return false;
        };
        let known = self.gpu.as_ref().and_then(|g| g.nvidia_pids());
        p.asked_knowing_nvidia = known.is_some();
        let read =
            crate::sampler::pss::read_now(tree.each_member(), &p.guard, &known.unwrap_or_default());
        self.pss_read(read);
        true
    }

    /// The processes whose PSS was not read, and why (for the end record).
    pub fn pss_unread(&self) -> Vec<PssUnread> {
        self.pss
            .as_ref()
            .map(|p| p.unread.clone())
            .unwrap_or_default()
    }
}

/// The earliest start (clock ticks since boot) of a process that took over from one last seen
/// alive `since_s` seconds ago, at `boot_ticks_now`: a tick of slack; 0 when the time since boot
/// cannot be read (any match is taken).
fn not_before(boot_ticks_now: Option<u64>, since_s: f64) -> u64 {
    let since = (since_s * clock_ticks_per_s()).ceil() as u64;
    boot_ticks_now.map_or(0, |now| now.saturating_sub(since + 1))
}

/// Milliseconds since the Unix epoch, now.
pub fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::fake::FakeProc;
    use crate::reporter::{Level, Reporter};
    use std::path::Path;
    use std::time::Duration;

    fn watch(root: &Path, spec: &str, pss: Option<PssGuard>, report: Reporter) -> Watch {
        let spec = match spec.split_once(':') {
            Some(("pid", p)) => TargetSpec::Pid(p.parse().unwrap()),
            Some(("pidfile", p)) => TargetSpec::Pidfile(p.into()),
            _ => panic!("{spec}"),
        };
        let opts = WatchOptions {
            procfs: ProcFs::new(root),
            children: true,
            pss,
            root_by_statm: false,
        };
        Watch::new(spec, opts, ExitRecords::Off, None, report).unwrap()
    }

    /// Waits (a loaded machine: up to 30 s) for the PSS read asked at the last tick.
    fn pss_read(w: &mut Watch) -> bool {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(ready) = w.pss_arrived() {
                return ready;
            }
            assert!(Instant::now() < until, "the PSS read never ended");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_pss_sum_goes_on_the_row_after_its_read_and_a_process_over_the_guard_is_told_once() {
        let dir = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(700)
            .rss_kb(4096)
            .pss_kb(1024)
            .write(dir.path());
        let (report, told) = Reporter::collect();
        let guard = PssGuard {
            every: Duration::from_millis(1),
            max_rss: 8 << 20,
            force: false,
        };
        let mut w = watch(dir.path(), "pid:100", Some(guard), report);
        assert!(matches!(w.look(), Ok(Some(Found::First(100, _)))));
        // The first row asks for a read; its sum goes on the next row, and only there.
        let first = w.tick(Some(Event::Start), None, 0).unwrap().unwrap();
        assert_eq!(first.sample.pss_bytes, None);
        assert!(pss_read(&mut w));
        // The next read is due 1 ms after this one was asked: on a quick machine the read and
        // the next tick both come sooner.
        std::thread::sleep(Duration::from_millis(2));
        let second = w.tick(None, None, 0).unwrap().unwrap();
        assert_eq!(second.sample.pss_bytes, Some(1024 << 10));
        // (That row asked for the next read.)
        assert!(pss_read(&mut w));
        // Over --pss-max-rss: not read (its page tables would be walked under its lock), told
        // once, then counted; the rows have no PSS (a sum without it would look like a drop).
        FakeProc::new(100)
            .start(700)
            .rss_kb(16384)
            .pss_kb(1024)
            .write(dir.path());
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(2));
            w.tick(None, None, 0).unwrap().unwrap();
            assert!(!pss_read(&mut w));
            let row = w.tick(None, None, 0).unwrap().unwrap();
            assert_eq!(row.sample.pss_bytes, None);
        }
        let told = told.lock().unwrap().clone();
        let said: Vec<_> = told.iter().filter(|(_, t)| t.contains("PSS")).collect();
        assert_eq!(said.len(), 1, "{told:?}");
        assert_eq!(said[0].0, Level::Note);
        assert!(said[0].1.contains("over --pss-max-rss"), "{told:?}");
        let unread = w.pss_unread();
        assert_eq!(unread.len(), 1);
        assert!(unread[0].reads >= 3, "{unread:?}");
    }

    #[test]
    fn a_pidfile_target_is_followed_across_a_restart_and_a_pid_once_gone_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proc");
        FakeProc::new(100)
            .start(700)
            .rss_kb(10_000)
            .pss_kb(0)
            .write(&root);
        let pidfile = dir.path().join("d.pid");
        std::fs::write(&pidfile, "100\n").unwrap();
        let spec = format!("pidfile:{}", pidfile.display());
        let mut w = watch(&root, &spec, None, Reporter::silent());
        assert!(matches!(w.look(), Ok(Some(Found::First(100, _)))));
        assert_eq!(
            w.look().unwrap(),
            None,
            "a watched target is not looked for"
        );
        let t = w.tick(None, None, 3).unwrap().unwrap();
        assert_eq!(
            (t.sample.rss_bytes, t.sample.missed_ticks),
            (10_000 << 10, 3)
        );
        std::fs::remove_dir_all(root.join("100")).unwrap();
        assert!(w.tick(None, None, 0).unwrap().is_none());
        assert!(!w.is_up());
        // The pidfile still names the old process: no restart.
        assert_eq!(w.look().unwrap(), None);
        FakeProc::new(200)
            .start(990)
            .rss_kb(5_000)
            .pss_kb(0)
            .write(&root);
        std::fs::write(&pidfile, "200\n").unwrap();
        assert!(matches!(w.look(), Ok(Some(Found::Restart(200, _)))));
        assert_eq!(w.restarts(), 1);
        let t = w.tick(Some(Event::Restart(200)), None, 0).unwrap().unwrap();
        assert_eq!(t.sample.rss_bytes, 5_000 << 10);
        // The old process left the tree: the restart's row counts it (with no exit record
        // read, its peak after its last row is not known), and the end lists it.
        assert_eq!(t.sample.departed, 1);
        assert_eq!(w.tick(None, None, 0).unwrap().unwrap().sample.departed, 0);
        assert_eq!(w.departed_count(), 1);
        let pids: Vec<i32> = w.processes().iter().map(|p| p.pid).collect();
        assert_eq!(pids, [100, 200]);

        let mut p = watch(&root, "pid:200", None, Reporter::silent());
        p.look().unwrap();
        std::fs::remove_dir_all(root.join("200")).unwrap();
        assert!(p.tick(None, None, 0).unwrap().is_none());
        FakeProc::new(200)
            .start(5000)
            .rss_kb(5_000)
            .pss_kb(0)
            .write(&root);
        assert_eq!(p.look().unwrap(), None, "a PID reused is another process");
    }

    #[test]
    fn a_name_successor_must_have_started_after_the_old_process_was_last_seen() {
        let hz = clock_ticks_per_s();
        // Last seen 2 s ago, 1000 s after boot: a successor started before 998 s is older.
        let now = (1000.0 * hz) as u64;
        assert_eq!(not_before(Some(now), 2.0), now - (2.0 * hz) as u64 - 1);
        // Seen just now: a tick of slack.
        assert_eq!(not_before(Some(now), 0.0), now - 1);
        assert_eq!(not_before(None, 2.0), 0);
    }
}
