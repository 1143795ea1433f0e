//! The watched process tree: a root process and, unless `--no-children`, its descendants,
//! found through /proc/PID/task/TID/children (never by scanning all of /proc).
//! `Tree::sample` reads every member's memory once and sums it into a [`TreeSample`].
//!
//! New children are found from the kernel's fork events where memmon may hear them (root, in
//! the initial PID namespace: `probe::forks`): a member's children files (one per thread) are
//! read once, when the member is found, after the events' filter names it, so a child forked
//! before that is in a file and one forked after is an event; a tick then reads no children
//! file at all, whatever the thread count. Where the events are refused, or the kernel dropped
//! some (a full queue), each member's children files are read as `ProcHandle::read_children`
//! says: the main thread's at every tick, the other threads' when the thread count changes or
//! every `OTHER_THREADS_EVERY`.
//!
//! The root's /proc/PID/status is read every tick. A descendant's status costs seven times its
//! statm (BENCHMARKS.md), so for descendants statm is read every tick and status only when statm changed or the
//! last status read is older than [`STATUS_MAX_AGE`]: a tree of a thousand idle workers costs
//! little, and every number is at most that old for a process whose statm did not move.
//! After a reset of the high-water marks ([`Tree::invalidate_after_reset`]) every member's status
//! is read again at the next sample: nothing read before a reset is used after it.
//!
//! Each member is named by its command name and its command line, read when it is found, again
//! when its name changes (an exec), and once more at the first status read [`CMDLINE_AGAIN_AFTER`]
//! after it was found (a title set after the fork, as PostgreSQL's processes set theirs); never
//! at every tick.
//!
//! With exit records ([`Tree::watch_exits`], taskstats), a member that left since the last
//! tick gets the high-water mark the kernel reported as it exited, not the last one read: a
//! process that peaks and exits between two samples keeps its peak. So do children that were
//! born and exited between two ticks (never members), from their parent's records. Each such
//! peak is in the sample of the tick that finds the process gone (its `departed` and
//! `hwm_bytes` columns), so the phase or run it left in holds it; records queued before a reset of the
//! marks ([`Tree::reset_marks`]) are kept out of the samples after it. Without exit records
//! each departure is still counted once (`reaps.rs`), and so is a child born and gone unseen
//! where its parent reaped it (its `cminflt` rose) or it is listed as an exited child: its peak
//! is then not known.
//!
//! Members are kept in the order they were found, so a parent is read before its children in
//! every tick (`reaps.rs` relies on it).

use crate::model::process::CMDLINE_MAX_BYTES;
use crate::model::sample::{for_columns, Sample};
use crate::probe::forks::{Fork, ForkWatch};
use crate::probe::proc::{clock_ticks_per_s, same_statm};
use crate::probe::taskstats::{Exit, ExitWatch};
use crate::probe::{ProcError, ProcFs, ProcHandle, StatusMem};
use crate::sampler::reaps::{Reaper, Reaps};
use crate::sys::Watched;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The longest a descendant's status values are carried while its statm stays the same.
pub const STATUS_MAX_AGE: Duration = Duration::from_secs(1);

/// A command line is read once more this long after it was first read (at a status read): a
/// process that sets its own title right after its fork was maybe found before it did.
const CMDLINE_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// One tick of the tree, summed over its members: the columns of a row the tree fills (the
/// /proc/PID/status sums of the column table, `processes`, the largest process, the high-water
/// marks, `departed`; the engine fills the others), and what the departures since the previous
/// sample add to the tree's peak in between. Sizes in bytes.
///
/// In `sample`, `hwm_bytes` is the largest VmHWM of a member (or of a process that left since
/// the previous sample, from its exit record): the exact peak of that one process so far;
/// `hwm_sum_bytes` the sum of those marks: an upper bound of the tree's RSS so far, never
/// exact; `departed` the processes that left since the previous sample, each counted once:
/// members found gone, and children born and gone in between (from exit records; without them,
/// those a reap or an exited child listed shows: a lower bound).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TreeSample {
    pub sample: Sample,
    /// The largest VmHWM among the departed, from exit records queued since the last reset of
    /// the marks (0 without records); already in `hwm_bytes`.
    pub departed_hwm: u64,
    /// The largest of those marks that rose after the process was last read (or that belong
    /// to a child never read): a peak reached since the previous sample.
    pub departed_risen_hwm: u64,
}

/// A tree's tick reads as the row it fills.
impl std::ops::Deref for TreeSample {
    type Target = Sample;

    fn deref(&self) -> &Sample {
        &self.sample
    }
}

pub use crate::format::meta::MarkResetElsewhere;
pub use crate::model::process::ProcessRecord;

struct Member {
    handle: ProcHandle,
    last: StatusMem,
    /// statm when `last` was read, and when; `None` after a reset of the high-water marks: the
    /// next sample reads status whatever statm says.
    statm: [u64; 7],
    status_at: Option<Instant>,
    /// The highest VmHWM read so far (a reset lowers `last.hwm`, not this).
    hwm_peak: u64,
    /// Its peak within the recording, as its reads tell it.
    recording: RecordingPeak,
    /// Its major faults (`majflt` of /proc/PID/stat), read with each status read.
    majflt: u64,
    cmdline: String,
    /// When the command line is read once more (at a status read); `None` once it was.
    cmdline_again: Option<Instant>,
    /// Without exit records: the minor faults of its reaped children (`cminflt`) when last
    /// read (a rise means it reaped a child), and the tick of that read ([`Reaps::now`]).
    children_minflt: Option<u64>,
    reaps_read_at: u64,
    /// Its parent: the process whose children list named it, then the parent PID read with
    /// `cminflt` (it changes when the parent leaves first and it is re-parented).
    parent: i32,
    /// With fork events: its children files were read after the events' filter named it.
    scanned: bool,
    /// memmon reset its marks since its status was last read: a lower VmHWM next is that
    /// reset, not another's.
    reset_here: bool,
}

impl Member {
    fn new(
        handle: ProcHandle,
        parent: i32,
        last: StatusMem,
        statm: [u64; 7],
        majflt: u64,
        now: Instant,
        older: bool,
    ) -> Member {
        let mut recording = RecordingPeak::new(older);
        if last.has_mm {
            recording.read(last.hwm, Some(last.rss));
        }
        let mut m = Member {
            handle,
            last,
            statm,
            status_at: Some(now),
            hwm_peak: last.hwm,
            recording,
            majflt,
            cmdline: String::new(),
            cmdline_again: None,
            children_minflt: None,
            reaps_read_at: 0,
            parent,
            scanned: false,
            reset_here: false,
        };
        m.read_cmdline(now, &mut Vec::new());
        m
    }

    /// Takes a fresh status: keeps the peak, and reads the name and command line again when
    /// the name changed (an exec), or the command line once more when that is due.
    /// A VmHWM more than `tolerance` below the last one read, in the same address space
    /// (VmPeak did not fall, as it does at an exec) and with no reset of memmon's since, is
    /// returned as (before, after): the process itself, or another program, reset its mark
    /// (`5` to /proc/PID/clear_refs), or reclaim took pages before the kernel updated its mark
    /// (VmHWM is the larger of that mark and the RSS now: it updates the mark when memory is
    /// unmapped, not when reclaim takes it). A fall within the RSS counters' batching is
    /// neither: the RSS read above the mark was that much off.
    fn took_status(
        &mut self,
        status: StatusMem,
        now: Instant,
        buf: &mut Vec<u8>,
        tolerance: u64,
    ) -> Option<(u64, u64)> {
        let reset_elsewhere = (self.last.has_mm
            && !std::mem::take(&mut self.reset_here)
            && status.hwm.saturating_add(tolerance) < self.last.hwm
            && status.vm_peak >= self.last.vm_peak)
            .then_some((self.last.hwm, status.hwm));
        self.hwm_peak = self.hwm_peak.max(status.hwm);
        self.recording.read(status.hwm, Some(status.rss));
        if status.name_hash != self.last.name_hash {
            if let Ok(comm) = self.handle.read_comm(buf) {
                self.handle.comm = comm;
            }
            self.read_cmdline(now, buf);
        } else if self.cmdline_again.is_some_and(|at| now >= at) {
            if let Some(c) = self.handle.read_cmdline(buf, CMDLINE_MAX_BYTES) {
                self.cmdline = c;
            }
            self.cmdline_again = None;
        }
        self.last = status;
        reset_elsewhere
    }

    /// Reads the command line (at discovery, and after an exec), and once more later.
    fn read_cmdline(&mut self, now: Instant, buf: &mut Vec<u8>) {
        if let Some(c) = self.handle.read_cmdline(buf, CMDLINE_MAX_BYTES) {
            self.cmdline = c;
        }
        self.cmdline_again = Some(now + CMDLINE_AGAIN_AFTER);
    }

    fn record(&self) -> ProcessRecord {
        let (peak, exact) = self.recording.peak();
        ProcessRecord {
            pid: self.handle.pid,
            start_time_ticks: self.handle.start_time,
            comm: self.handle.comm.clone(),
            cmdline: self.cmdline.clone(),
            hwm_bytes: self.hwm_peak.max(self.last.hwm),
            recording_peak_bytes: Some(peak),
            recording_peak_exact: Some(exact),
        }
    }
}

/// What a process's reads tell of its peak within the recording (the end record's
/// `recording_peak_bytes`), by the window rules of the recording's own peak: a mark counts when
/// it was set after a reset of the marks, by a process born during the recording, or when it
/// rose above the mark a process older than the recording brought in. A mark that did not rise
/// may be older than the recording and tells nothing of it: that stretch's peak is known only
/// as at least the largest RSS read in it, and at most the mark.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RecordingPeak {
    /// The highest VmHWM read that fell within the recording.
    hwm: u64,
    /// For a process older than the recording while no reset came: the mark of its first read
    /// (`u64::MAX` before it); a mark above it was set during the recording.
    older: Option<u64>,
    /// A stretch of the recording whose peak is not known (the mark predated it and did not
    /// rise): the largest RSS read in it, and the mark that bounds it from above.
    unknown: Option<(u64, u64)>,
}

impl RecordingPeak {
    fn new(older: bool) -> RecordingPeak {
        RecordingPeak {
            hwm: 0,
            older: older.then_some(u64::MAX),
            unknown: older.then_some((0, u64::MAX)),
        }
    }

    /// A VmHWM read (or an exit record's), with the RSS read beside it when there is one.
    fn read(&mut self, hwm: u64, rss: Option<u64>) {
        match self.older {
            None => self.hwm = self.hwm.max(hwm),
            // Risen: the mark is the largest since the process began, reached during the
            // recording, so it holds the stretch before too.
            Some(first) if first != u64::MAX && hwm > first => {
                self.hwm = self.hwm.max(hwm);
                self.older = None;
                self.unknown = None;
            }
            Some(first) => {
                let mark = if first == u64::MAX { hwm } else { first };
                self.older = Some(mark);
                let seen = self.unknown.map_or(0, |(r, _)| r);
                self.unknown = Some((seen.max(rss.unwrap_or(0)), mark));
            }
        }
    }

    /// The process's mark was reset: every later mark counts. `opening`: the reset came right
    /// after the recording's opening row (`--reset-peaks`, a bench's first run), whose marks
    /// close the span before the recording's window, as the recording's own peak takes them;
    /// a later reset (a marker with `--phase-peaks`) leaves the stretch before it unknown.
    fn reset(&mut self, opening: bool) {
        self.older = None;
        if opening {
            self.unknown = None;
        }
    }

    /// The peak and whether it is exact; else a lower bound, the largest of the marks that
    /// count and the RSS read in the stretch not known. That stretch peaked at least at the
    /// RSS read and at most at its mark: exact still when either reaches the mark.
    fn peak(&self) -> (u64, bool) {
        match self.unknown {
            Some((rss, below)) if self.hwm.max(rss) < below => (self.hwm.max(rss), false),
            Some((_, below)) => (self.hwm.max(below), true),
            None => (self.hwm, true),
        }
    }
}

/// The tree being watched.
pub struct Tree {
    procfs: ProcFs,
    root_pid: i32,
    /// memmon's own PID: never a member (`add_new_kids_of`), read once.
    own_pid: i32,
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
    /// See [`Tree::hwm_before_reset`].
    hwm_before_reset: Vec<(i32, u64, u64)>,
    /// See [`Tree::take_marks_reset_elsewhere`].
    reset_elsewhere: Vec<MarkResetElsewhere>,
    /// How far a mark may fall and be the RSS counters' batching (this machine's bound).
    fall_tolerance: u64,
    kids: Vec<i32>,
    /// Exit records (taskstats), when memmon may read them.
    exits: Option<ExitWatch>,
    /// Records taken from the socket and not yet settled. Those before `exit_fresh_from` were
    /// queued before the last reset of the marks: they name their processes' peaks, but a
    /// sample after the reset does not count them.
    exit_buf: Vec<Exit>,
    exit_fresh_from: usize,
    /// Members found gone in this tick, with the VmHWM and the major faults last read of each
    /// and its peak within the recording, settled with their exit records before they join `departed`.
    leaving: Vec<(ProcessRecord, u64, u64, RecordingPeak)>,
    /// The departures settled when the root was found gone (the root's own exit record among
    /// them): what the exit records gave after the last sample.
    tail: Option<TreeSample>,
    /// The boot time, seconds since 1970 (to compare a record's start with a member's).
    boot_unix_s: f64,
    /// The largest VmHWM an exit record gave for a process of the tree, and the root's own.
    exit_peak: Option<u64>,
    root_exit_peak: Option<u64>,
    /// The members changed since the exit records' filter was last set.
    filter_stale: bool,
    /// Without exit records: the departures, each counted once, and the children born and
    /// gone unseen (reaps seen in `cminflt`, exited children listed).
    reaps: Reaps,
    /// The kernel's fork events, when memmon may hear them; `None`: children files every tick.
    forks: Option<ForkWatch>,
    fork_buf: Vec<Fork>,
    /// Major faults: those of the processes that left the tree (each one's exit records, or
    /// its last read), what the first sample's members had made before it (not counted:
    /// `None` until that sample; 0 when the tree counts from its root's birth), and the count
    /// of the last sample.
    faults_departed: u64,
    faults_base: Option<u64>,
    faults_from_birth: bool,
    faults_last: u64,
    /// The event sockets that the sleep before this tick watched to its end and found empty
    /// (`Tree::heard_nothing`): their drains are skipped, a syscall each. Cleared by every sample.
    quiet: Quiet,
    /// The root read as a descendant (`read_root_by_statm`).
    root_by_statm: bool,
    /// When the recording began (clock ticks since boot), so a process that started before
    /// it is told from one born during it (`Tree::recording_since`); `None`: every process is
    /// taken as older, whose marks count only once reset or risen.
    recording_from: Option<u64>,
    /// The samples taken: a reset after the first is the recording's opening one.
    samples: u64,
    /// The event sockets whose last drain found them empty (or that a sleep found quiet): the
    /// ones a sleep polls (`event_fds`). One that had news at its last drain is drained at the
    /// next tick without being polled: a busy socket (every exit on the machine, when the filter
    /// is off for a large tree) would otherwise wake each sleep early.
    idle: Quiet,
}

/// Which of the tree's event sockets a sleep watched and found empty (see [`Tree::event_fds`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quiet {
    pub forks: bool,
    pub exits: bool,
}

/// At most this many departed processes are remembered (those with the largest peaks).
pub const DEPARTED_KEEP: usize = 32;

impl Tree {
    /// Starts watching `root` (already opened, so already identified by start time).
    pub fn new(procfs: ProcFs, root: ProcHandle, with_children: bool) -> Tree {
        let root_pid = root.pid;
        let mut t = Tree {
            procfs,
            root_pid,
            own_pid: std::process::id() as i32,
            with_children,
            members: Vec::new(),
            index: HashMap::new(),
            departed: Vec::new(),
            departed_count: 0,
            adopter: None,
            buf: Vec::with_capacity(2048),
            hwm_before_reset: Vec::new(),
            reset_elsewhere: Vec::new(),
            fall_tolerance: crate::probe::proc::local_batching_bound_bytes(),
            kids: Vec::new(),
            exits: None,
            exit_buf: Vec::new(),
            exit_fresh_from: 0,
            leaving: Vec::new(),
            tail: None,
            boot_unix_s: 0.0,
            exit_peak: None,
            root_exit_peak: None,
            filter_stale: true,
            reaps: Reaps::default(),
            forks: None,
            fork_buf: Vec::new(),
            faults_departed: 0,
            quiet: Quiet::default(),
            root_by_statm: false,
            idle: Quiet {
                forks: true,
                exits: true,
            },
            faults_base: None,
            faults_from_birth: false,
            faults_last: 0,
            recording_from: None,
            samples: 0,
        };
        // Fork events name the kernel's PIDs: only over the real /proc.
        if with_children && t.procfs.is_real() {
            t.forks = ForkWatch::open().ok();
        }
        t.index.insert(root_pid, 0);
        let mut root = Member::new(
            root,
            0,
            StatusMem::default(),
            [0; 7],
            0,
            Instant::now(),
            true,
        );
        root.status_at = None;
        t.members.push(root);
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

    /// Reads the root as a descendant: statm at each tick, status (with stat) only when statm
    /// moved, the last status is a second old, or the marks were reset. The RSS and its sum are
    /// each tick's; VmHWM (which a spike between ticks raises without moving statm), the
    /// anon/file/shmem split and the major faults are at most a second old. For `export`, whose
    /// window peak over 15 s takes a raised VmHWM a second late as well as at once.
    pub fn read_root_by_statm(&mut self) {
        self.root_by_statm = true;
    }

    /// Counts the tree's major faults from its root's birth (a process launched, or one that
    /// started after the recording began: every fault it made is the recording's), not from
    /// the first sample (an attached process: what it made before is not).
    pub fn count_faults_from_birth(&mut self) {
        self.faults_from_birth = true;
    }

    /// The recording began at `ticks` (clock ticks since boot): a member that started since
    /// has every mark within it; one older (an attached target and the children it had) has a
    /// mark that counts only after a reset, or once it rises above the mark it brought in.
    /// Call it before the first sample.
    pub fn recording_since(&mut self, ticks: u64) {
        self.recording_from = Some(ticks);
        for m in &mut self.members {
            m.recording = RecordingPeak::new(m.handle.start_time < ticks);
        }
    }

    /// Whether a process that started at `start_time` (clock ticks since boot) is older than
    /// the recording.
    fn older(&self, start_time: u64) -> bool {
        self.recording_from.is_none_or(|t| start_time < t)
    }

    /// The tree's major faults counted so far (the `major_faults` of its last sample, with
    /// what the exit records read since added): what a tree that takes over after a restart
    /// counts on from.
    pub fn major_faults(&self) -> u64 {
        // An attached tree never sampled has counted nothing yet.
        let Some(base) = self.faults_base.or(self.faults_from_birth.then_some(0)) else {
            return self.faults_last;
        };
        let live: u64 = self.members.iter().map(|m| m.majflt).sum();
        let total = live.saturating_add(self.faults_departed);
        self.faults_last.max(total.saturating_sub(base))
    }

    /// Makes the children of `adopter` (other than the root) members too: orphans of the tree
    /// that the kernel re-parented to a subreaper (memmon, for a command it launched).
    pub fn adopt_orphans_of(&mut self, adopter: ProcHandle) {
        self.adopter = Some(adopter);
    }

    /// Reads the kernel's exit records from now on: a member that leaves gets the peak of its
    /// record (taken at the tick that finds it gone, so the record is already queued).
    pub fn watch_exits(&mut self, watch: ExitWatch) {
        let uptime_ticks = crate::sampler::target::boot_ticks_now(&self.procfs).unwrap_or(0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        self.boot_unix_s = now - uptime_ticks as f64 / clock_ticks_per_s();
        self.exits = Some(watch);
    }

    /// The sockets the kernel's fork events and exit records arrive on, in that order, for a
    /// sleep to watch: one that stays empty through a whole sleep needs no drain at the next
    /// tick (`heard_nothing`). `None` where they are not read; unarmed where the last drain
    /// found news (it is drained at the next tick, unwatched).
    pub fn event_fds(&self) -> [Option<Watched<'_>>; 2] {
        [
            self.forks.as_ref().map(|w| w.watched(self.idle.forks)),
            self.exits.as_ref().map(|w| w.watched(self.idle.exits)),
        ]
    }

    /// The sleep before the next sample polled these sockets until its deadline and nothing
    /// arrived. That sample skips their drains: what arrives after the poll is taken at the
    /// tick after, as a fork or an exit after a drain always was, except that exit records are
    /// drained whenever a member is found gone (its record is queued before it leaves /proc).
    pub fn heard_nothing(&mut self, quiet: Quiet) {
        self.quiet = quiet;
    }

    /// The exit-record watch, to carry over to the tree of a restarted target.
    pub fn take_exits(&mut self) -> Option<ExitWatch> {
        self.exits.take()
    }

    /// Whether exit records are read.
    pub fn watches_exits(&self) -> bool {
        self.exits.is_some()
    }

    /// How new children are found, for the recording's `sources`.
    pub fn children_source(&self) -> &'static str {
        if self.forks.is_some() {
            "the kernel's fork events (process events connector) for new children, and each process's /proc/PID/task/TID/children once, when it is found"
        } else {
            "/proc/PID/task/TID/children: the main thread's every tick, other threads' every 100 ms and when the thread count changes"
        }
    }

    /// The largest VmHWM the kernel's exit records gave for a process of the tree.
    pub fn exit_peak(&self) -> Option<u64> {
        self.exit_peak
    }

    /// The root's VmHWM from its exit record, once it has exited and the record was read.
    pub fn root_exit_peak(&self) -> Option<u64> {
        self.root_exit_peak
    }

    /// When the root has gone: what the exit records read then gave (the root's, and those of
    /// members that left with it) as a sample's departures (`departed_hwm`, counted since the
    /// last reset of the marks; `departed_risen_hwm`). It was reached after the last sample, so
    /// only the recording's end holds it.
    pub fn departures_after_last_sample(&self) -> Option<&TreeSample> {
        self.tail.as_ref()
    }

    /// Times the kernel dropped exit records because their queue was full: a process of the
    /// tree that exited then may have left with a peak memmon never saw.
    pub fn exit_records_lost(&self) -> u64 {
        self.exits.as_ref().map_or(0, |w| w.overruns)
    }

    /// Reads every member once and returns the sum. Returns `None` when the root is gone (or is
    /// a zombie): the tree has ended. Members that vanish between two reads are dropped quietly.
    pub fn sample(&mut self) -> Result<Option<TreeSample>, ProcError> {
        self.sample_at(Instant::now())
    }

    /// [`Tree::sample`] at a given time (tests move the clock forward).
    fn sample_at(&mut self, now: Instant) -> Result<Option<TreeSample>, ProcError> {
        self.reaps.tick();
        self.samples += 1;
        // First the members already known, so a PID that was reused since the last tick is seen
        // as gone before the children lists are read again.
        let mut left = Vec::new();
        for i in 0..self.members.len() {
            match self.read_member(i, now) {
                Ok(m) if m.has_mm => {}
                Ok(_) | Err(ProcError::NoSuchProcess(_)) if i == 0 => {
                    self.tail = Some(self.settle_departures(true));
                    return Ok(None);
                }
                Err(e) if i == 0 => return Err(e),
                // A child that exited: reaped already (gone from /proc), or not yet.
                Err(ProcError::NoSuchProcess(_)) => {
                    self.leave(i, true);
                    left.push(i);
                }
                // A zombie, or a process that cannot be read any more.
                Ok(_) | Err(_) => {
                    self.leave(i, false);
                    left.push(i);
                }
            }
        }
        self.remove(&left);
        // Then new children, read as they are found (the list grows while it is walked), and
        // orphans re-parented to the adopter.
        if self.with_children {
            self.adopt_orphans(now);
            if !self.discover_by_forks(now) {
                let mut j = 0;
                while j < self.members.len() {
                    self.discover_children(j, now);
                    j += 1;
                }
            }
        }
        let mut s = self.settle_departures(false);
        let mut live_faults = 0u64;
        for m in &self.members {
            add(&mut s.sample, m.handle.pid, &m.last);
            live_faults = live_faults.saturating_add(m.majflt);
        }
        let total = live_faults.saturating_add(self.faults_departed);
        let from_birth = self.faults_from_birth;
        let base = *self
            .faults_base
            .get_or_insert(if from_birth { 0 } else { total });
        // Never falling: a member's count only rises, and one that leaves keeps its last.
        self.faults_last = self.faults_last.max(total.saturating_sub(base));
        s.sample.major_faults = self.faults_last;
        self.quiet = Quiet::default();
        Ok(Some(s))
    }

    /// Reads member `i` and keeps what it read: status for the root (unless it is read as a
    /// descendant: `read_root_by_statm`); for a descendant, statm first, and status only when
    /// statm moved, the last status read is too old, or the marks were reset since. (When the last status is too old, statm is not read at all: the status
    /// read gives what statm would, for the next tick to compare with.)
    fn read_member(&mut self, i: usize, now: Instant) -> Result<StatusMem, ProcError> {
        let m = &mut self.members[i];
        let fresh = m
            .status_at
            .is_some_and(|at| now.duration_since(at) < STATUS_MAX_AGE);
        if (i != 0 || self.root_by_statm) && fresh {
            let statm = m.handle.read_statm(&mut self.buf)?;
            if same_statm(&statm, &m.statm) {
                return Ok(m.last);
            }
        }
        let (status, statm) = m.handle.read_status_and_statm(&mut self.buf)?;
        m.statm = statm;
        if status.has_mm {
            m.status_at = Some(now);
            if let Some((before, after)) =
                m.took_status(status, now, &mut self.buf, self.fall_tolerance)
            {
                self.reset_elsewhere.push(MarkResetElsewhere {
                    pid: m.handle.pid,
                    comm: m.handle.comm.clone(),
                    unix_ms: 0,
                    before_bytes: before,
                    after_bytes: after,
                });
            }
            // stat with each status read (one more pread of a held descriptor): the major
            // faults, and without exit records the one sign of a child born and gone unseen.
            if let Ok(c) = m.handle.read_stat_counts(&mut self.buf) {
                m.majflt = m.majflt.max(c.majflt);
                if self.exits.is_none() && self.with_children {
                    let f = c.children_minflt;
                    let rose = m.children_minflt.is_some_and(|before| f > before);
                    m.children_minflt = Some(f);
                    m.reaps_read_at = self.reaps.now();
                    m.parent = c.ppid;
                    self.reaps.reaper_read(m.handle.pid, rose);
                }
            }
        }
        Ok(status)
    }

    /// Resets the high-water marks of every member (writes `5` to clear_refs), so each
    /// process's VmHWM counts from now; returns each failure with its PID. A process that left
    /// in the meantime needs no reset. Exit records queued before the reset are taken first:
    /// they still name their processes' peaks, but the next sample does not count them, so a
    /// process that exited before a phase or run began gives it nothing.
    pub fn reset_marks(&mut self) -> Vec<(i32, ProcError)> {
        self.take_exit_records(true);
        self.exit_fresh_from = self.exit_buf.len();
        let opening = self.samples <= 1;
        let buf = &mut self.buf;
        let before = &mut self.hwm_before_reset;
        before.clear();
        let failed = self
            .members
            .iter_mut()
            .filter_map(|m| {
                // The mark read right before it is reset: what rose since the sample's read of
                // status (a spike that came and went while the tick went on) is not lost.
                if let Ok(st) = m.handle.read_status(buf) {
                    before.push((m.handle.pid, m.handle.start_time, st.hwm));
                }
                match m.handle.reset_hwm() {
                    Ok(()) => {
                        m.reset_here = true;
                        m.recording.reset(opening);
                        None
                    }
                    Err(ProcError::NoSuchProcess(_)) => None,
                    Err(e) => Some((m.handle.pid, e)),
                }
            })
            .collect();
        self.invalidate_after_reset();
        failed
    }

    /// The members whose VmHWM fell since the last call with no reset of memmon's: each reset
    /// its own mark, or another program did (`unix_ms` left for the caller, who times the row).
    /// What such a process reached between its last read and that reset is not known.
    pub fn take_marks_reset_elsewhere(&mut self) -> Vec<MarkResetElsewhere> {
        std::mem::take(&mut self.reset_elsewhere)
    }

    /// Each member's VmHWM read right before the last `reset_marks` reset it, by (PID, start
    /// time): what it reached between the last sample and that reset, where its mark was reset
    /// before too.
    pub fn hwm_before_reset(&self) -> &[(i32, u64, u64)] {
        &self.hwm_before_reset
    }

    /// Forgets every status read so far, so the next sample reads status for every member:
    /// call it right after resetting the high-water marks (clear_refs), or a descendant whose
    /// statm did not move would carry its VmHWM from before the reset for up to
    /// [`STATUS_MAX_AGE`], and a phase or run would inherit the last one's peak.
    pub fn invalidate_after_reset(&mut self) {
        for m in &mut self.members {
            m.status_at = None;
        }
    }

    /// Adds the adopter's children that are not members yet.
    fn adopt_orphans(&mut self, now: Instant) {
        let Some(adopter) = &mut self.adopter else {
            return;
        };
        self.kids.clear();
        if adopter
            .read_children(1, now, &mut self.buf, &mut self.kids)
            .is_err()
        {
            return;
        }
        let parent = adopter.pid;
        self.add_new_kids(parent, now);
    }

    /// With fork events: adds the new children they name, then reads the children files of
    /// every member not read since the events' filter named it (the filter first, so no fork
    /// falls between the two). Returns false without fork events (or when the kernel refused a
    /// filter: they are then given up), and the caller reads the children files.
    fn discover_by_forks(&mut self, now: Instant) -> bool {
        let Some(w) = self.forks.as_mut() else {
            return false;
        };
        self.fork_buf.clear();
        let quiet = std::mem::take(&mut self.quiet.forks);
        let before = w.received;
        let complete = quiet || w.drain(&mut self.fork_buf);
        self.idle.forks = w.received == before;
        if !complete {
            // The kernel dropped events: every member's files are read again.
            self.members.iter_mut().for_each(|m| m.scanned = false);
        }
        let forks = std::mem::take(&mut self.fork_buf);
        for f in &forks {
            let (parent, child) = (f.parent as i32, f.child as i32);
            // A member read in this tick is the process its PID names; a child still its own
            // (not one re-parented, or a PID since reused) is what the children file would list.
            if !self.index.contains_key(&parent) || self.index.contains_key(&child) {
                continue;
            }
            self.kids.clear();
            self.kids.push(child);
            self.add_new_kids_of(parent, now, true);
        }
        self.fork_buf = forks;
        loop {
            let unscanned: Vec<usize> = (0..self.members.len())
                .filter(|&i| !self.members[i].scanned)
                .collect();
            if unscanned.is_empty() {
                return true;
            }
            let pids: Vec<u32> = self.members.iter().map(|m| m.handle.pid as u32).collect();
            if !self.forks.as_mut().is_some_and(|w| w.keep_parents(&pids)) {
                self.forks = None;
                return false;
            }
            for i in unscanned {
                self.members[i].scanned = true;
                self.kids.clear();
                let m = &self.members[i];
                if m.handle
                    .read_children_of_every_thread(&mut self.buf, &mut self.kids)
                    .is_ok()
                {
                    let parent = m.handle.pid;
                    self.add_new_kids(parent, now);
                }
            }
        }
    }

    /// Adds the children of member `i` that are not members yet, each read once on the spot.
    fn discover_children(&mut self, i: usize, now: Instant) {
        self.kids.clear();
        let threads = self.members[i].last.threads;
        if self.members[i]
            .handle
            .read_children(threads, now, &mut self.buf, &mut self.kids)
            .is_err()
        {
            return;
        }
        let parent = self.members[i].handle.pid;
        self.add_new_kids(parent, now);
    }

    /// Adds the processes in `self.kids` (children of `parent`) that are not members yet, each
    /// read once on the spot.
    fn add_new_kids(&mut self, parent: i32, now: Instant) {
        self.add_new_kids_of(parent, now, false);
    }

    /// [`Tree::add_new_kids`]; with `check_parent`, each must be a child of `parent` still (a
    /// fork event names a PID that may since have been reused).
    fn add_new_kids_of(&mut self, parent: i32, now: Instant, check_parent: bool) {
        for k in 0..self.kids.len() {
            let pid = self.kids[k];
            // memmon itself, in the tree it watches (`record --pid $$` from a shell, a bench
            // of a daemon that started it): never a member, so neither its memory nor what
            // it runs (a bench's client) counts as the target's.
            if self.index.contains_key(&pid) || pid == self.own_pid {
                continue;
            }
            let Ok(handle) = self.procfs.open(pid) else {
                continue;
            };
            let older = self.older(handle.start_time);
            if check_parent && handle.ppid() != Some(parent) {
                continue;
            }
            match handle.read_status_and_statm(&mut self.buf) {
                Ok((last, statm)) if last.has_mm => {
                    // Born since the previous sample (found in a children list or a fork
                    // event): every fault it made is the recording's.
                    let majflt = handle
                        .read_stat_counts(&mut self.buf)
                        .map_or(0, |c| c.majflt);
                    self.index.insert(pid, self.members.len());
                    self.members
                        .push(Member::new(handle, parent, last, statm, majflt, now, older));
                    self.filter_stale = true;
                }
                // A child that exited and is not yet reaped: without exit records, a child
                // born and gone unseen shows here until its parent reaps it (a member that
                // left shows here too, and is known).
                Ok(_) if self.exits.is_none() => {
                    let reaper = self.reaper_of(parent);
                    self.reaps
                        .exited_child_listed(pid, handle.start_time, reaper);
                }
                _ => {}
            }
        }
    }

    /// Who reaps a child of `parent`, as far as the tree can tell.
    fn reaper_of(&self, parent: i32) -> Reaper {
        if self.adopter.as_ref().is_some_and(|a| a.pid == parent) {
            Reaper::Outside
        } else {
            Reaper::Member(parent)
        }
    }

    /// Member `i` was found gone in this tick: `reaped` when /proc no longer has it. It joins
    /// `leaving` (and, without exit records, the departures waiting for their reap); the
    /// caller removes it from the members.
    fn leave(&mut self, i: usize, reaped: bool) {
        let m = &self.members[i];
        self.leaving
            .push((m.record(), m.last.hwm, m.majflt, m.recording));
        if self.exits.is_none() && self.with_children {
            // A zombie's parent is read now: it may have been re-parented since the last read.
            let parent = if reaped {
                m.parent
            } else {
                m.handle
                    .read_stat_counts(&mut self.buf)
                    .map_or(m.parent, |c| c.ppid)
            };
            let (pid, start) = (m.handle.pid, m.handle.start_time);
            let reaper = self.reaper_of(parent);
            self.reaps.member_left(pid, start, reaper, reaped);
        }
    }

    /// Removes the members at `left` (ascending indices), keeping the others in their order.
    fn remove(&mut self, left: &[usize]) {
        let Some(&first) = left.first() else {
            return;
        };
        for &i in left {
            self.index.remove(&self.members[i].handle.pid);
        }
        let mut k = 0;
        let mut at = 0;
        self.members.retain(|_| {
            let keep = left.get(k) != Some(&at);
            if !keep {
                k += 1;
            }
            at += 1;
            keep
        });
        // Only those after the first removed moved.
        for (i, m) in self.members.iter().enumerate().skip(first) {
            self.index.insert(m.handle.pid, i);
        }
        self.filter_stale = true;
    }

    /// Takes the exit records queued in the kernel since the last call: those of the tree's
    /// processes (a member or its thread, a member that left this tick, the root) and of
    /// their children.
    /// `always`: drain even after a quiet sleep (a record that came after its poll must be
    /// taken now: the root is gone, or the marks are being reset).
    fn take_exit_records(&mut self, always: bool) {
        // Nothing arrived during the sleep, and no member left since: nothing of ours to take.
        let quiet = std::mem::take(&mut self.quiet.exits);
        if quiet && !always && self.leaving.is_empty() {
            return;
        }
        let Some(mut w) = self.exits.take() else {
            return;
        };
        let (index, leaving, root) = (&self.index, &self.leaving, self.root_pid as u32);
        let ours = |p: u32| {
            p == root
                || index.contains_key(&(p as i32))
                || leaving.iter().any(|(r, ..)| r.pid as u32 == p)
        };
        let before = w.received;
        w.drain(&mut self.exit_buf, |e| {
            ours(e.tgid.unwrap_or(e.pid)) || ours(e.ppid)
        });
        self.idle.exits = w.received == before;
        self.exits = Some(w);
    }

    /// Moves the members found gone in this tick to `departed`, each with the peak of its exit
    /// record when there is one (and the root's, when `root_gone`); children that exited
    /// unseen since the last tick join `departed` from their records. Returns what the
    /// departures add to this tick's sample (their count, and the marks of their records).
    fn settle_departures(&mut self, root_gone: bool) -> TreeSample {
        self.take_exit_records(root_gone);
        let mut s = TreeSample::default();
        let leaving = std::mem::take(&mut self.leaving);
        let settled: Vec<i32> = leaving.iter().map(|(r, ..)| r.pid).collect();
        for (mut rec, last_hwm, majflt, mut recording) in leaving {
            s.sample.departed += 1;
            // Its count at the exit: its threads' records (each thread's own), else the last
            // read.
            let exited = self.exit_majflt(rec.pid, rec.start_time_ticks);
            self.faults_departed = self.faults_departed.saturating_add(majflt.max(exited));
            let fresh = self.exit_hwm(rec.pid, rec.start_time_ticks, self.exit_fresh_from);
            if let Some(h) = self.exit_hwm(rec.pid, rec.start_time_ticks, 0) {
                rec.hwm_bytes = rec.hwm_bytes.max(h);
                recording.read(h, None);
                let (peak, exact) = recording.peak();
                rec.recording_peak_bytes = Some(peak);
                rec.recording_peak_exact = Some(exact);
                self.exit_peak = self.exit_peak.max(Some(h));
            }
            // Alive during the interval: its mark bounds the tree's peak in it.
            s.sample.hwm_sum_bytes += fresh.unwrap_or(last_hwm);
            if let Some(h) = fresh {
                s.departed_hwm = s.departed_hwm.max(h);
                if h > last_hwm {
                    s.departed_risen_hwm = s.departed_risen_hwm.max(h);
                }
            }
            self.remember_departed(rec);
        }
        let root = if root_gone {
            self.index.get(&self.root_pid).copied()
        } else {
            None
        };
        if let Some(i) = root {
            let (start, last_hwm) = {
                let root = &self.members[i];
                (root.handle.start_time, root.last.hwm)
            };
            let exited = self.exit_majflt(self.root_pid, start);
            let root = &mut self.members[i];
            root.majflt = root.majflt.max(exited);
            if let Some(h) = self.exit_hwm(self.root_pid, start, 0) {
                let root = &mut self.members[i];
                root.hwm_peak = root.hwm_peak.max(h);
                root.recording.read(h, None);
                self.exit_peak = self.exit_peak.max(Some(h));
                self.root_exit_peak = Some(h);
            }
            if let Some(h) = self.exit_hwm(self.root_pid, start, self.exit_fresh_from) {
                s.departed_hwm = s.departed_hwm.max(h);
                if h > last_hwm {
                    s.departed_risen_hwm = s.departed_risen_hwm.max(h);
                }
            }
        }
        if root_gone {
            // After the last sample every member still listed was alive, the root among them:
            // with the departures above and the unseen children below, their marks (at their
            // exit where its record came) bound the tree's peak there.
            for m in &self.members {
                let (pid, start) = (m.handle.pid, m.handle.start_time);
                s.sample.hwm_sum_bytes += self
                    .exit_hwm(pid, start, self.exit_fresh_from)
                    .unwrap_or(m.last.hwm);
            }
        }
        self.settle_unseen_children(&settled, &mut s);
        if self.exits.is_none() {
            let unseen = self.settle_reaps();
            s.sample.departed += unseen;
            self.departed_count += unseen as u64;
        }
        self.exit_buf.clear();
        self.exit_fresh_from = 0;
        s.sample.hwm_bytes = s.departed_hwm;
        if self.filter_stale && !root_gone {
            self.filter_stale = false;
            if let Some(w) = &mut self.exits {
                let pids: Vec<u32> = self.members.iter().map(|m| m.handle.pid as u32).collect();
                // Refused: every record comes meanwhile (sorted out here); tried again next tick.
                self.filter_stale = w.keep_only(&pids).is_err();
            }
        }
        s
    }

    /// Children that were born and exited between two ticks: never members, known from their
    /// leader's exit record (a live process's thread that exited is skipped: the process is a
    /// member by now, found by this tick's walk; so are the members `settled` in this tick).
    /// Each adds to `s` as a departure.
    fn settle_unseen_children(&mut self, settled: &[i32], s: &mut TreeSample) {
        let mut unseen: Vec<(ProcessRecord, bool)> = Vec::new();
        // Born after the previous sample, so during the recording, unless this is the first
        // sample of an older tree.
        let older = self.samples <= 1
            && self
                .members
                .first()
                .is_none_or(|r| self.older(r.handle.start_time));
        for (k, e) in self.exit_buf.iter().enumerate() {
            let p = e.tgid.unwrap_or(e.pid);
            if e.pid != p
                || self.index.contains_key(&(p as i32))
                || p as i32 == self.root_pid
                || settled.contains(&(p as i32))
                || unseen.iter().any(|(d, _)| d.pid == p as i32)
            {
                continue;
            }
            let start_s = (e.btime_s as f64 - self.boot_unix_s).max(0.0);
            unseen.push((
                ProcessRecord {
                    pid: p as i32,
                    start_time_ticks: (start_s * clock_ticks_per_s()) as u64,
                    comm: e.comm.clone(),
                    cmdline: String::new(),
                    hwm_bytes: e.hiwater_bytes,
                    recording_peak_bytes: None,
                    recording_peak_exact: None,
                },
                k >= self.exit_fresh_from,
            ));
        }
        for (mut rec, fresh) in unseen {
            if let Some(h) = self.exit_hwm(rec.pid, rec.start_time_ticks, 0) {
                rec.hwm_bytes = h;
            }
            let mut recording = RecordingPeak::new(older);
            recording.read(rec.hwm_bytes, None);
            let (peak, exact) = recording.peak();
            rec.recording_peak_bytes = Some(peak);
            rec.recording_peak_exact = Some(exact);
            // Born and gone since the previous sample: its whole count is the recording's.
            let faults = self.exit_majflt(rec.pid, rec.start_time_ticks);
            self.faults_departed = self.faults_departed.saturating_add(faults);
            self.exit_peak = self.exit_peak.max(Some(rec.hwm_bytes));
            s.sample.departed += 1;
            if fresh {
                // Never read: its whole life, and so its peak, fell since the last sample.
                s.departed_hwm = s.departed_hwm.max(rec.hwm_bytes);
                s.departed_risen_hwm = s.departed_risen_hwm.max(rec.hwm_bytes);
                s.sample.hwm_sum_bytes += rec.hwm_bytes;
            }
            self.remember_departed(rec);
        }
    }

    /// Without exit records: the exited children that were never members, and the reaps since
    /// the last sample that no departure explains, are children born and gone between samples
    /// (their peaks are not known); returns how many. A lower bound (`reaps.rs`).
    fn settle_reaps(&mut self) -> u32 {
        let oldest_read = self
            .members
            .iter()
            .filter(|m| m.children_minflt.is_some())
            .map(|m| m.reaps_read_at)
            .min()
            .unwrap_or_else(|| self.reaps.now());
        let (procfs, index) = (&self.procfs, &self.index);
        self.reaps.settle(
            |pid, start| procfs.start_time(pid) == Some(start),
            |pid| index.contains_key(&pid),
            oldest_read,
        )
    }

    /// The largest VmHWM among this tick's exit records of process `pid` started at
    /// `start_ticks` (clock ticks since boot), from record `from` on (`exit_fresh_from`: those
    /// queued since the last reset). A record of its leader must start within 2 s of it and
    /// one of another thread no earlier: a record of a later process that reused the PID is not
    /// taken for it.
    fn exit_hwm(&self, pid: i32, start_ticks: u64, from: usize) -> Option<u64> {
        let start_unix = self.boot_unix_s + start_ticks as f64 / clock_ticks_per_s();
        self.exit_buf
            .get(from..)?
            .iter()
            .filter(|e| e.tgid.unwrap_or(e.pid) == pid as u32)
            .filter(|e| {
                let b = e.btime_s as f64;
                if e.pid == pid as u32 {
                    (b - start_unix).abs() <= 2.0
                } else {
                    b >= start_unix - 2.0
                }
            })
            .map(|e| e.hiwater_bytes)
            .max()
    }

    /// The major faults of process `pid` started at `start_ticks` in this tick's exit records:
    /// the sum of its threads' (each record holds its own thread's count), matched as in
    /// [`Tree::exit_hwm`]; 0 without records.
    fn exit_majflt(&self, pid: i32, start_ticks: u64) -> u64 {
        let start_unix = self.boot_unix_s + start_ticks as f64 / clock_ticks_per_s();
        self.exit_buf
            .iter()
            .filter(|e| e.tgid.unwrap_or(e.pid) == pid as u32)
            .filter(|e| {
                let b = e.btime_s as f64;
                if e.pid == pid as u32 {
                    (b - start_unix).abs() <= 2.0
                } else {
                    b >= start_unix - 2.0
                }
            })
            .fold(0u64, |sum, e| sum.saturating_add(e.majflt))
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
            .map(Member::record)
            .chain(self.departed.iter().cloned())
            .collect();
        all.sort_by_key(|p| std::cmp::Reverse(p.hwm_bytes));
        all
    }

    /// How many processes have left the tree since it was first sampled.
    pub fn departed_count(&self) -> u64 {
        self.departed_count
    }

    /// The CPU time of the tree so far, user and system, in clock ticks: each member's own (all
    /// its threads) and that of the children it reaped. Between two calls the difference is
    /// what the tree spent: a member that exited in between is in its reaper's reaped time, by
    /// its whole life, less what the first call had counted of it; one born in between counts
    /// whole. A process reaped by one outside the tree (an orphan) is missed.
    pub fn cpu_ticks(&self) -> (u64, u64) {
        let mut buf = Vec::new();
        self.members
            .iter()
            .filter_map(|m| m.handle.cpu_ticks_with_reaped(&mut buf))
            .fold((0, 0), |(u, s), (mu, ms)| (u + mu, s + ms))
    }

    /// Each member's handle with its latest status, for per-process work (PSS, resets).
    pub fn each_member(&self) -> impl Iterator<Item = (&ProcHandle, &StatusMem)> {
        self.members.iter().map(|m| (&m.handle, &m.last))
    }
}

/// Adds one member to the row: its /proc/PID/status values into the columns the column table
/// sums or maxes them into (`add_status`, generated from `for_columns!`), and the tree's own
/// columns (the count, the largest process).
fn add(s: &mut Sample, pid: i32, m: &StatusMem) {
    add_status(s, m);
    s.processes += 1;
    if m.rss > s.top_rss_bytes || s.processes == 1 {
        s.top_rss_bytes = m.rss;
        s.top_pid = pid;
    }
}

/// `add_status(s, m)`: for each column whose source is `sum(F)` or `max(F)` in `for_columns!`,
/// the member's `StatusMem::F` added to (or kept the largest in) that column.
macro_rules! status_sums {
    ($(($name:ident, $($f:ident).+, $kind:ident, $unit:expr, $meaning:expr, $src:ident $(($from:ident))?),)*) => {
        fn add_status(s: &mut Sample, m: &StatusMem) {
            $(status_sum!($src $(($from))?, s.$($f).+, m);)*
        }
    };
}

macro_rules! status_sum {
    (sum($from:ident), $dst:expr, $m:ident) => {
        $dst = $dst.saturating_add($m.$from)
    };
    (max($from:ident), $dst:expr, $m:ident) => {
        $dst = $dst.max($m.$from)
    };
    ($other:ident, $dst:expr, $m:ident) => {};
}
for_columns!(status_sums);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::fake::FakeProc;
    use crate::probe::proc::OTHER_THREADS_EVERY;
    use std::fs;
    use std::path::Path;

    fn tree_over(root: &Path, pid: i32) -> Tree {
        let fs = ProcFs::new(root);
        let h = fs.open(pid).unwrap();
        Tree::new(fs, h, true)
    }

    fn exit(pid: u32, tgid: u32, ppid: u32, btime_s: u64, mib: u64) -> Exit {
        Exit {
            pid,
            tgid: Some(tgid),
            ppid,
            btime_s,
            hiwater_bytes: mib << 20,
            majflt: 0,
            comm: "gone".into(),
        }
    }

    #[test]
    fn an_exit_record_counts_for_its_process_and_not_for_a_later_one_with_its_pid() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1500)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap();
        t.boot_unix_s = 1_700_000_000.0;
        let start = 1_700_000_000 + (1000.0 / clock_ticks_per_s()) as u64;
        t.exit_buf = vec![
            // A later process that reused PID 100, started a minute after ours.
            exit(100, 100, 1, start + 60, 9000),
            // Ours: its leader, and a thread that started later and exited last.
            exit(100, 100, 1, start, 400),
            exit(105, 100, 1, start + 5, 450),
            // Another process.
            exit(300, 300, 1, start, 800),
        ];
        assert_eq!(t.exit_hwm(100, 1000, 0), Some(450 << 20));
        assert_eq!(
            t.exit_hwm(100, 5000, 0),
            None,
            "started 40 s later: not ours"
        );
    }

    /// Rewrites a fake process's stat with `majflt` major faults (field 12).
    fn set_majflt(root: &Path, pid: i32, start: u64, majflt: u64) {
        fs::write(
            root.join(format!("{pid}/stat")),
            format!(
                "{pid} (fake{pid}) S 1 1 1 0 -1 0 0 0 {majflt} 0 0 0 0 0 20 0 1 0 {start} 0 0\n"
            ),
        )
        .unwrap();
    }

    #[test]
    fn major_faults_count_from_the_first_sample_and_keep_a_departed_processs_exit_count() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        set_majflt(tmp.path(), 100, 1000, 500);
        let mut t = tree_over(tmp.path(), 100);
        // Attached: what the root made before the first sample is not the recording's.
        assert_eq!(t.major_faults(), 0, "never sampled: nothing counted");
        assert_eq!(t.sample().unwrap().unwrap().major_faults, 0);
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        set_majflt(tmp.path(), 100, 1000, 520);
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        set_majflt(tmp.path(), 101, 1001, 30);
        // A child found later was born since: all of its faults count.
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.processes, s.major_faults), (2, 20 + 30));
        // It faults 15 more (10 in a thread) after its last read and exits: its threads'
        // exit records hold its final count.
        t.boot_unix_s = 1_700_000_000.0;
        let start = 1_700_000_000 + (1001.0 / clock_ticks_per_s()) as u64;
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        t.exit_buf = vec![
            Exit {
                majflt: 35,
                ..exit(101, 101, 100, start, 1)
            },
            Exit {
                majflt: 10,
                ..exit(102, 101, 100, start, 1)
            },
        ];
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.processes, s.departed), (1, 1));
        assert_eq!(s.major_faults, 20 + 45);
        // A child born and gone between two samples, known from its record alone.
        t.exit_buf = vec![Exit {
            majflt: 7,
            ..exit(103, 103, 100, start, 1)
        }];
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.departed, s.major_faults), (1, 20 + 45 + 7));
        // Never falling, and a member that leaves without a record keeps its last read.
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[104])
            .write(tmp.path());
        set_majflt(tmp.path(), 100, 1000, 520);
        FakeProc::new(104)
            .start(1500)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        set_majflt(tmp.path(), 104, 1500, 3);
        assert_eq!(t.sample().unwrap().unwrap().major_faults, 20 + 45 + 7 + 3);
        fs::remove_dir_all(tmp.path().join("104")).unwrap();
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.departed, s.major_faults), (1, 20 + 45 + 7 + 3));
        assert_eq!(t.major_faults(), s.major_faults);
    }

    #[test]
    fn a_tree_born_during_the_recording_counts_its_faults_from_its_birth() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        set_majflt(tmp.path(), 100, 1000, 500);
        let mut t = tree_over(tmp.path(), 100);
        t.count_faults_from_birth();
        assert_eq!(t.sample().unwrap().unwrap().major_faults, 500);
    }

    #[test]
    fn a_member_that_leaves_puts_the_peak_of_its_exit_record_in_that_row() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1500)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(300)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.processes, s.departed, s.hwm_bytes), (2, 0, 1500 << 10));
        t.boot_unix_s = 1_700_000_000.0;
        let start = 1_700_000_000 + (1001.0 / clock_ticks_per_s()) as u64;
        // 101 rose to 4000 KiB after its last sample and exited.
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        t.exit_buf = vec![Exit {
            hiwater_bytes: 4000 << 10,
            ..exit(101, 101, 100, start, 0)
        }];
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.processes, s.departed), (1, 1));
        assert_eq!(
            s.hwm_bytes,
            4000 << 10,
            "the exit record's peak is in the row"
        );
        assert_eq!(
            s.departed_risen_hwm,
            4000 << 10,
            "it rose after the last read"
        );
        assert_eq!(s.hwm_sum_bytes, (1500 + 4000) << 10);
        // The next row has no departure.
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.departed, s.hwm_bytes), (0, 1500 << 10));
        assert_eq!(t.exit_peak(), Some(4000 << 10));
    }

    /// On the kernel itself (root): a sleep that found the event sockets empty skips their
    /// drains, yet a member found gone after it is settled with its exit record (sent before it
    /// left /proc), and a child forked after it is found at the tick after.
    #[test]
    fn after_a_quiet_sleep_a_member_that_leaves_still_gets_its_exit_record() {
        let Ok(exits) = crate::probe::taskstats::ExitWatch::open_online() else {
            assert_ne!(crate::sys::euid(), 0, "root could not open exit records");
            return;
        };
        // A shell whose child (`cat`) exits when its stdin closes; the shell sleeps on.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "cat >/dev/null; sleep 30; :"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let fs = ProcFs::new("/proc");
        let mut t = Tree::new(fs.clone(), fs.open(sh.id() as i32).unwrap(), true);
        t.watch_exits(exits);
        // Each sleep polls the sockets the tree asks for, as record's and export's do at their
        // deadlines; the exit socket is called quiet even when a record is there: one that
        // came after the poll, the case this test is about.
        let quiet = |t: &mut Tree| {
            let fds = t
                .event_fds()
                .map(|w| w.filter(|w| w.armed()).map(|w| w.fd()));
            let polled = fds.map(|fd| fd.is_some());
            let ready = crate::sys::wait_ready(fds, Some(Duration::ZERO)).unwrap();
            t.heard_nothing(Quiet {
                forks: polled[0] && !ready[0],
                exits: polled[1],
            });
        };
        let until = Instant::now() + Duration::from_secs(30);
        // cat is found (children are read when the tree starts, and after fork events).
        while t.members.len() < 2 && Instant::now() < until {
            quiet(&mut t);
            t.sample().unwrap().unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(t.members.len(), 2, "cat joined the tree");
        assert_eq!(t.exit_peak(), None);
        assert!(
            t.event_fds()[1].is_some_and(|w| w.armed()),
            "an idle exit socket is polled"
        );
        drop(sh.stdin.take());
        let mut departed = 0;
        while departed == 0 && Instant::now() < until {
            quiet(&mut t);
            departed += t.sample().unwrap().unwrap().sample.departed;
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(departed, 1, "cat left the tree");
        assert!(t.exit_peak().is_some(), "exit records were taken");
        // The drain that took cat's record had news: the next sleep leaves the socket alone
        // and the next tick drains it; found empty then, it is polled again.
        assert!(
            t.event_fds()[1].is_some_and(|w| !w.armed()),
            "a socket with news is not polled"
        );
        quiet(&mut t);
        t.sample().unwrap().unwrap();
        assert!(
            t.event_fds()[1].is_some_and(|w| w.armed()),
            "an emptied socket is polled again"
        );
        let _ = sh.kill();
        sh.wait().unwrap();
    }

    #[test]
    fn an_exit_record_queued_before_a_reset_is_kept_out_of_the_rows_after_it() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(300)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap().unwrap();
        t.boot_unix_s = 1_700_000_000.0;
        let start = 1_700_000_000 + (1001.0 / clock_ticks_per_s()) as u64;
        // 101 exits with a 5000 KiB peak, then a run begins: the marks are reset.
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        t.exit_buf = vec![Exit {
            hiwater_bytes: 5000 << 10,
            ..exit(101, 101, 100, start, 0)
        }];
        t.reset_marks();
        let s = t.sample().unwrap().unwrap();
        assert_eq!(s.departed, 1);
        assert_eq!(s.hwm_bytes, 1000 << 10, "a peak from before the reset");
        assert_eq!(s.departed_hwm, 0);
        // It is still that process's peak, and the recording's.
        assert!(t
            .processes()
            .iter()
            .any(|p| p.pid == 101 && p.hwm_bytes == 5000 << 10));
        assert_eq!(t.exit_peak(), Some(5000 << 10));
    }

    #[test]
    fn without_exit_records_a_reaped_child_no_departure_explains_counts_as_departed() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(300)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        let set_cminflt = |pid: i32, n: u64| {
            let path = tmp.path().join(format!("{pid}/stat"));
            fs::write(
                &path,
                format!(
                    "{pid} (fake{pid}) S 1 1 1 0 -1 0 0 {n} 0 0 0 0 0 0 20 0 1 0 {} 0 0\n",
                    1000 + pid - 100
                ),
            )
            .unwrap();
        };
        assert_eq!(t.sample().unwrap().unwrap().departed, 0);
        // The root reaps a child born and gone between two samples.
        set_cminflt(100, 51_200);
        assert_eq!(t.sample().unwrap().unwrap().departed, 1);
        assert_eq!(t.sample().unwrap().unwrap().departed, 0);
        // A member leaves and is reaped: one departure, not two.
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        set_cminflt(100, 60_000);
        assert_eq!(t.sample().unwrap().unwrap().departed, 1);
        assert_eq!(t.departed_count(), 2);
    }

    #[test]
    fn without_exit_records_an_unseen_zombie_child_counts_once_and_its_reap_adds_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        assert_eq!(t.sample().unwrap().unwrap().departed, 0);
        // A child appears already exited (a zombie: no memory lines), listed until reaped.
        FakeProc::new(101)
            .start(1001)
            .rss_kb(0)
            .hwm_kb(0)
            .write(tmp.path());
        fs::write(
            tmp.path().join("101/status"),
            "Name:\tfake\nState:\tZ (zombie)\n",
        )
        .unwrap();
        fs::write(tmp.path().join("100/task/100/children"), "101").unwrap();
        assert_eq!(t.sample().unwrap().unwrap().departed, 1);
        assert_eq!(t.sample().unwrap().unwrap().departed, 0, "counted once");
        // Its parent reaps it: the rise of cminflt is that same child.
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        fs::write(tmp.path().join("100/task/100/children"), "").unwrap();
        fs::write(
            tmp.path().join("100/stat"),
            "100 (fake100) S 1 1 1 0 -1 0 0 4000 0 0 0 0 0 0 20 0 1 0 1000 0 0\n",
        )
        .unwrap();
        assert_eq!(t.sample().unwrap().unwrap().departed, 0);
        assert_eq!(t.departed_count(), 1);
    }

    /// Sets `cminflt` (field 11 of stat) of fake process `pid` started at `start`.
    fn set_cminflt(root: &Path, pid: i32, start: u64, n: u64) {
        fs::write(
            root.join(format!("{pid}/stat")),
            format!("{pid} (fake{pid}) S 1 1 1 0 -1 0 0 {n} 0 0 0 0 0 0 20 0 1 0 {start} 0 0\n"),
        )
        .unwrap();
    }

    /// Makes fake process `pid` a zombie: its status has no memory lines.
    fn make_zombie(root: &Path, pid: i32) {
        fs::write(
            root.join(format!("{pid}/status")),
            "Name:\tfake\nState:\tZ (zombie)\nThreads:\t1\n",
        )
        .unwrap();
        fs::write(root.join(format!("{pid}/statm")), "0 0 0 0 0 0 0\n").unwrap();
    }

    #[test]
    fn without_exit_records_a_member_that_waits_as_a_zombie_counts_once() {
        // Seen alive, then exited and still listed by its parent, then reaped (the parent's
        // cminflt rises): one departure.
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(300)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        assert_eq!(t.sample().unwrap().unwrap().processes, 2);
        make_zombie(tmp.path(), 101);
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.processes, s.departed), (1, 1));
        assert_eq!(t.sample().unwrap().unwrap().departed, 0, "still listed");
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        fs::write(tmp.path().join("100/task/100/children"), "").unwrap();
        set_cminflt(tmp.path(), 100, 1000, 4000);
        assert_eq!(t.sample().unwrap().unwrap().departed, 0, "its reap");
        assert_eq!(t.departed_count(), 1);
        // A rise with no departure behind it is a child born and gone unseen.
        set_cminflt(tmp.path(), 100, 1000, 9000);
        assert_eq!(t.sample().unwrap().unwrap().departed, 1);
        assert_eq!(t.departed_count(), 2);
    }

    #[test]
    fn without_exit_records_a_grandchild_reaped_by_its_parent_counts_once() {
        // 102 is 101's child; 101 reaps it (101's statm moved, so its status and cminflt are
        // read at once). 102 is found gone at the tick its reap shows.
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(300)
            .children(&[102])
            .write(tmp.path());
        FakeProc::new(102)
            .start(1002)
            .rss_kb(50)
            .hwm_kb(50)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap().unwrap();
        // 101's first cminflt read (its statm moves).
        fs::write(tmp.path().join("101/statm"), "100 60 10 1 0 50 0\n").unwrap();
        assert_eq!(t.sample().unwrap().unwrap().departed, 0);
        fs::remove_dir_all(tmp.path().join("102")).unwrap();
        fs::write(tmp.path().join("101/task/101/children"), "").unwrap();
        set_cminflt(tmp.path(), 101, 1001, 700);
        fs::write(tmp.path().join("101/statm"), "100 70 10 1 0 50 0\n").unwrap();
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.processes, s.departed), (2, 1));
        assert_eq!(t.departed_count(), 1);
    }

    #[test]
    fn members_keep_the_order_they_were_found_in_so_a_parent_is_read_before_its_children() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101, 102])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(300)
            .write(tmp.path());
        FakeProc::new(102)
            .start(1002)
            .rss_kb(200)
            .hwm_kb(300)
            .children(&[103])
            .write(tmp.path());
        FakeProc::new(103)
            .start(1003)
            .rss_kb(200)
            .hwm_kb(300)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap().unwrap();
        let order = |t: &Tree| t.each_member().map(|(h, _)| h.pid).collect::<Vec<_>>();
        assert_eq!(order(&t), [100, 101, 102, 103]);
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        t.sample().unwrap().unwrap();
        assert_eq!(order(&t), [100, 102, 103]);
        // The index follows: 103 is still found (not taken for new).
        let s = t.sample().unwrap().unwrap();
        assert_eq!((s.processes, s.departed), (3, 0));
    }

    #[test]
    fn a_child_born_and_gone_between_ticks_joins_the_departed_from_its_record() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1500)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(300)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap();
        t.boot_unix_s = 1_700_000_000.0;
        t.exit_buf = vec![
            // The unseen child of 100, and a thread of live member 101 (not a departure).
            exit(200, 200, 100, 1_700_000_050, 700),
            exit(102, 101, 100, 1_700_000_050, 900),
        ];
        let mut s = TreeSample::default();
        t.settle_unseen_children(&[], &mut s);
        assert_eq!((s.departed, s.departed_hwm), (1, 700 << 20));
        let procs = t.processes();
        let gone: Vec<_> = procs.iter().filter(|p| p.pid == 200).collect();
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].hwm_bytes, 700 << 20);
        assert_eq!(t.exit_peak(), Some(700 << 20));
        assert!(procs.iter().all(|p| p.pid != 102));
        assert_eq!(t.departed_count(), 1);
    }

    #[test]
    fn each_status_value_reaches_its_column_through_the_column_table_alone() {
        // A different value in every number StatusMem holds.
        let m = StatusMem {
            rss: 1,
            anon: 2,
            file: 3,
            shmem: 4,
            swap: 5,
            locked: 6,
            pinned: 7,
            hwm: 8,
            vm_peak: 11,
            vm_size: 9,
            threads: 10,
            name_hash: 0,
            has_mm: true,
        };
        let value = |f: &str| -> u64 {
            match f {
                "rss" => 1,
                "anon" => 2,
                "file" => 3,
                "shmem" => 4,
                "swap" => 5,
                "locked" => 6,
                "pinned" => 7,
                "hwm" => 8,
                "vm_size" => 9,
                "threads" => 10,
                other => panic!("the column table names StatusMem::{other}, not listed here"),
            }
        };
        let mut s = Sample::default();
        add(&mut s, 41, &m);
        add(&mut s, 42, &m);
        let mut routed = Vec::new();
        for c in crate::model::sample::COLUMNS {
            let got = match c.field {
                crate::model::sample::Field::U64(get, _) => get(&s),
                crate::model::sample::Field::U32(get, _) => get(&s) as u64,
                _ => continue,
            };
            if let Some(f) = c
                .source
                .strip_prefix("sum(")
                .and_then(|f| f.strip_suffix(')'))
            {
                assert_eq!(got, 2 * value(f), "{}", c.name);
                routed.push(f);
            } else if let Some(f) = c
                .source
                .strip_prefix("max(")
                .and_then(|f| f.strip_suffix(')'))
            {
                assert_eq!(got, value(f), "{}", c.name);
                routed.push(f);
            }
        }
        // Every number read from status lands in a column (hwm twice: its max and its sum).
        routed.sort();
        routed.dedup();
        assert_eq!(
            routed,
            [
                "anon", "file", "hwm", "locked", "pinned", "rss", "shmem", "swap", "threads",
                "vm_size"
            ]
        );
        assert_eq!((s.processes, s.top_pid, s.top_rss_bytes), (2, 41, 1));
    }

    #[test]
    fn sums_a_tree_found_through_children_files() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1500)
            .children(&[101, 102])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(300)
            .children(&[103])
            .write(tmp.path());
        FakeProc::new(102)
            .start(1002)
            .rss_kb(300)
            .hwm_kb(300)
            .write(tmp.path());
        FakeProc::new(103)
            .start(1003)
            .rss_kb(50)
            .hwm_kb(900)
            .write(tmp.path());
        FakeProc::new(999)
            .start(1)
            .rss_kb(7777)
            .hwm_kb(7777)
            .write(tmp.path()); // not in the tree
        let mut t = tree_over(tmp.path(), 100);
        let s = t.sample().unwrap().unwrap();
        assert_eq!(s.processes, 4);
        assert_eq!(s.rss_bytes, (1000 + 200 + 300 + 50) * 1024);
        assert_eq!(s.top_pid, 100);
        assert_eq!(s.hwm_bytes, 1500 * 1024);
        assert_eq!(s.hwm_sum_bytes, (1500 + 300 + 300 + 900) * 1024);
    }

    #[test]
    fn without_children_only_the_root_counts() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1500)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(300)
            .write(tmp.path());
        let fs = ProcFs::new(tmp.path());
        let h = fs.open(100).unwrap();
        let mut t = Tree::new(fs, h, false);
        assert_eq!(t.sample().unwrap().unwrap().processes, 1);
    }

    #[test]
    fn a_child_vanishing_between_two_reads_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(400)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        assert_eq!(t.sample().unwrap().unwrap().processes, 2);
        // The child exits: its directory goes away, though the parent's list still names it.
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        let s = t.sample().unwrap().unwrap();
        assert_eq!(s.processes, 1);
        assert_eq!(s.rss_bytes, 1000 * 1024);
        // Its peak is remembered.
        let procs = t.processes();
        assert!(procs
            .iter()
            .any(|p| p.pid == 101 && p.hwm_bytes == 400 * 1024));
    }

    #[test]
    fn a_reused_pid_is_a_new_process() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(400)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap().unwrap();
        // PID 101 exits and a new process gets PID 101 (a later start time).
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        FakeProc::new(101)
            .start(5000)
            .rss_kb(700)
            .hwm_kb(700)
            .write(tmp.path());
        let s = t.sample().unwrap().unwrap();
        // The old handle fails, the new process is discovered in the same pass.
        assert_eq!(s.processes, 2);
        assert_eq!(s.rss_bytes, (1000 + 700) * 1024);
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
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        assert_eq!(t.sample().unwrap().unwrap().rss_bytes, 1200 * 1024);
        // The status changes but statm does not: the last status read (under 1 s old) stands.
        let status = tmp.path().join("101/status");
        let text = fs::read_to_string(&status)
            .unwrap()
            .replace("VmRSS:\t200 kB", "VmRSS:\t800 kB");
        fs::write(&status, text).unwrap();
        assert_eq!(t.sample().unwrap().unwrap().rss_bytes, 1200 * 1024);
        // statm moves: status is read again.
        fs::write(tmp.path().join("101/statm"), "100 200 10 1 0 50 0\n").unwrap();
        assert_eq!(t.sample().unwrap().unwrap().rss_bytes, 1800 * 1024);
    }

    #[test]
    fn orphans_reparented_to_the_adopter_stay_in_the_tree() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(1)
            .start(1)
            .rss_kb(5000)
            .hwm_kb(5000)
            .children(&[100, 300])
            .write(tmp.path()); // the adopter (memmon)
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        FakeProc::new(300)
            .start(3000)
            .rss_kb(300)
            .hwm_kb(300)
            .write(tmp.path()); // an orphan of the command
        let fs = ProcFs::new(tmp.path());
        let mut t = Tree::new(fs.clone(), fs.open(100).unwrap(), true);
        assert_eq!(t.sample().unwrap().unwrap().processes, 1);
        t.adopt_orphans_of(fs.open(1).unwrap());
        let s = t.sample().unwrap().unwrap();
        assert_eq!(s.processes, 2, "the adopter itself is not a member");
        assert_eq!(s.rss_bytes, 1300 * 1024);
    }

    #[test]
    fn the_root_vanishing_ends_the_tree() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        assert!(t.sample().unwrap().is_some());
        fs::remove_dir_all(tmp.path().join("100")).unwrap();
        assert!(t.sample().unwrap().is_none());
    }

    #[test]
    fn a_reused_root_pid_is_not_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap();
        fs::remove_dir_all(tmp.path().join("100")).unwrap();
        FakeProc::new(100)
            .start(9999)
            .rss_kb(5)
            .hwm_kb(5)
            .write(tmp.path());
        assert!(t.sample().unwrap().is_none());
    }

    /// Rewrites line `key` of /proc/PID/status in a fake tree.
    fn set_status(root: &Path, pid: i32, key: &str, value: &str) {
        let path = root.join(format!("{pid}/status"));
        let text: Vec<String> = fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| {
                if l.starts_with(&format!("{key}:")) {
                    format!("{key}:\t{value}")
                } else {
                    l.to_string()
                }
            })
            .collect();
        fs::write(&path, text.join("\n") + "\n").unwrap();
    }

    #[test]
    fn after_a_reset_every_members_status_is_read_again() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        // A child that spiked to 300 MiB and is idle at 5 MiB.
        FakeProc::new(101)
            .start(1001)
            .rss_kb(5 * 1024)
            .hwm_kb(300 * 1024)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        assert_eq!(t.sample().unwrap().unwrap().hwm_bytes, 300 * 1024 * 1024);
        // clear_refs: the kernel's mark drops to the current RSS; statm does not move.
        set_status(tmp.path(), 101, "VmHWM", "5120 kB");
        t.invalidate_after_reset();
        let s = t.sample().unwrap().unwrap();
        assert_eq!(
            s.hwm_bytes,
            5 * 1024 * 1024,
            "the mark read before the reset"
        );
        assert_eq!(s.hwm_sum_bytes, (1000 + 5 * 1024) * 1024);
        // The record of the process keeps its highest mark over the whole recording.
        let rec = t.processes().into_iter().find(|p| p.pid == 101).unwrap();
        assert_eq!(rec.hwm_bytes, 300 * 1024 * 1024);
    }

    #[test]
    fn a_mark_that_falls_with_no_reset_of_memmons_is_told_and_an_exec_or_memmons_own_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(5 * 1024)
            .hwm_kb(300 * 1024)
            .clear_refs()
            .write(tmp.path());
        set_status(tmp.path(), 100, "VmSize", "400000 kB\nVmPeak:\t500000 kB");
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap().unwrap();
        // The process resets its own mark: VmHWM falls, VmPeak stays.
        set_status(tmp.path(), 100, "VmHWM", "5120 kB");
        t.sample().unwrap().unwrap();
        let rec = t.processes().into_iter().find(|p| p.pid == 100).unwrap();
        assert_eq!(rec.hwm_bytes, 300 << 20, "the highest mark read is kept");
        let told = t.take_marks_reset_elsewhere();
        assert_eq!(told.len(), 1);
        assert_eq!(
            (told[0].pid, told[0].before_bytes, told[0].after_bytes),
            (100, 300 << 20, 5 << 20)
        );
        // memmon's own reset lowers it too, and is not told.
        set_status(tmp.path(), 100, "VmHWM", "9000 kB");
        t.sample().unwrap().unwrap();
        t.reset_marks();
        set_status(tmp.path(), 100, "VmHWM", "5120 kB");
        t.sample().unwrap().unwrap();
        // An exec: a new address space, VmPeak falls with VmHWM.
        set_status(tmp.path(), 100, "VmHWM", "9000 kB");
        t.sample().unwrap().unwrap();
        set_status(tmp.path(), 100, "VmHWM", "1000 kB");
        set_status(tmp.path(), 100, "VmPeak", "2000 kB");
        t.sample().unwrap().unwrap();
        assert!(t.take_marks_reset_elsewhere().is_empty());
    }

    #[test]
    fn without_a_reset_an_idle_descendants_status_is_carried() {
        // The counterpart of the test above: the same change without a reset is seen only
        // once the status is STATUS_MAX_AGE old.
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(5 * 1024)
            .hwm_kb(300 * 1024)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        let t0 = Instant::now();
        t.sample_at(t0).unwrap().unwrap();
        set_status(tmp.path(), 101, "VmHWM", "5120 kB");
        let s = t
            .sample_at(t0 + Duration::from_millis(10))
            .unwrap()
            .unwrap();
        assert_eq!(s.hwm_bytes, 300 * 1024 * 1024);
        let s = t.sample_at(t0 + STATUS_MAX_AGE).unwrap().unwrap();
        assert_eq!(s.hwm_bytes, 5 * 1024 * 1024);
    }

    #[test]
    fn a_status_due_by_age_is_read_without_statm_and_gives_the_next_tick_its_statm() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        let t0 = Instant::now();
        t.sample_at(t0).unwrap().unwrap();
        // statm cannot be read any more: a tick with the status due by age does not need it.
        let statm = tmp.path().join("101/statm");
        let kept = fs::read_to_string(&statm).unwrap();
        fs::remove_file(&statm).unwrap();
        set_status(tmp.path(), 101, "VmHWM", "900 kB");
        let s = t.sample_at(t0 + STATUS_MAX_AGE).unwrap().unwrap();
        assert_eq!((s.processes, s.hwm_bytes), (2, 1000 << 10));
        assert_eq!(t.processes()[1].hwm_bytes, 900 << 10);
        // The next tick compares statm with what that status said: the same, so it is carried
        // (a status changed since is not read).
        fs::write(&statm, kept).unwrap();
        set_status(tmp.path(), 101, "VmHWM", "950 kB");
        t.sample_at(t0 + STATUS_MAX_AGE + Duration::from_millis(10))
            .unwrap()
            .unwrap();
        assert_eq!(t.processes()[1].hwm_bytes, 900 << 10);
    }

    #[test]
    fn a_process_that_execs_is_named_by_its_new_program() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        fs::write(
            tmp.path().join("101/cmdline"),
            "sh\0-c\0exec python3 job.py\0",
        )
        .unwrap();
        let mut t = tree_over(tmp.path(), 100);
        let t0 = Instant::now();
        t.sample_at(t0).unwrap().unwrap();
        let rec = |t: &Tree| t.processes().into_iter().find(|p| p.pid == 101).unwrap();
        assert_eq!(rec(&t).comm, "fake101");
        assert_eq!(rec(&t).cmdline, "sh -c exec python3 job.py");
        // exec: a new name, a new command line, a new address space (statm moves).
        fs::write(
            tmp.path().join("101/stat"),
            "101 (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1001 0 0\n",
        )
        .unwrap();
        set_status(tmp.path(), 101, "Name", "python3");
        fs::write(tmp.path().join("101/cmdline"), "python3\0job.py\0").unwrap();
        fs::write(tmp.path().join("101/statm"), "900 70 10 1 0 50 0\n").unwrap();
        t.sample_at(t0 + Duration::from_millis(10))
            .unwrap()
            .unwrap();
        assert_eq!(rec(&t).comm, "python3");
        assert_eq!(rec(&t).cmdline, "python3 job.py");
        assert_eq!(rec(&t).start_time_ticks, 1001, "the same process");
        // It is remembered by that name once it has left.
        fs::remove_dir_all(tmp.path().join("101")).unwrap();
        t.sample_at(t0 + Duration::from_millis(20))
            .unwrap()
            .unwrap();
        assert_eq!(rec(&t).cmdline, "python3 job.py");
    }

    #[test]
    fn a_title_set_after_the_fork_is_read_at_a_later_status_read() {
        // PostgreSQL forks a backend, which then sets its title in its command line; the name
        // (`postgres`) stays the same.
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .children(&[101])
            .write(tmp.path());
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        fs::write(tmp.path().join("101/cmdline"), "postgres\0-D\0/data\0").unwrap();
        let mut t = tree_over(tmp.path(), 100);
        let t0 = Instant::now();
        t.sample_at(t0).unwrap().unwrap();
        fs::write(tmp.path().join("101/cmdline"), "postgres: checkpointer ").unwrap();
        // Not read on every tick...
        t.sample_at(t0 + Duration::from_millis(10))
            .unwrap()
            .unwrap();
        let rec = |t: &Tree| t.processes().into_iter().find(|p| p.pid == 101).unwrap();
        assert_eq!(rec(&t).cmdline, "postgres -D /data");
        // ...but at the status read once CMDLINE_AGAIN_AFTER has passed...
        t.sample_at(t0 + STATUS_MAX_AGE + CMDLINE_AGAIN_AFTER)
            .unwrap()
            .unwrap();
        assert_eq!(rec(&t).cmdline, "postgres: checkpointer");
        // ...and not again while it lives (titles that change with each query are not
        // followed: a status read would cost an open, a read and a close more).
        fs::write(
            tmp.path().join("101/cmdline"),
            "postgres: checkpointer busy",
        )
        .unwrap();
        for k in 2..6 {
            t.sample_at(t0 + STATUS_MAX_AGE * 8 * k).unwrap().unwrap();
        }
        assert_eq!(rec(&t).cmdline, "postgres: checkpointer");
    }

    #[test]
    fn a_command_line_is_kept_to_its_bound() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        let long = format!("prog\0{}\0", "x".repeat(1000));
        fs::write(tmp.path().join("100/cmdline"), long).unwrap();
        let mut t = tree_over(tmp.path(), 100);
        t.sample().unwrap().unwrap();
        let rec = &t.processes()[0];
        assert_eq!(rec.cmdline.len(), CMDLINE_MAX_BYTES);
        assert!(rec.cmdline.starts_with("prog xxx"));
    }

    /// Gives fake process `pid` a thread `tid` with the given children, and sets its count.
    fn fake_thread(root: &Path, pid: i32, tid: i32, kids: &[i32], threads: u32) {
        let dir = root.join(format!("{pid}/task/{tid}"));
        fs::create_dir_all(&dir).unwrap();
        let list: Vec<String> = kids.iter().map(|k| k.to_string()).collect();
        fs::write(dir.join("children"), list.join(" ")).unwrap();
        set_status(root, pid, "Threads", &threads.to_string());
    }

    fn pids(t: &Tree) -> Vec<i32> {
        let mut v: Vec<i32> = t.each_member().map(|(h, _)| h.pid).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn children_of_other_threads_are_found_at_once_when_the_thread_count_changes() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        fake_thread(tmp.path(), 100, 150, &[101], 2);
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        let mut t = tree_over(tmp.path(), 100);
        let t0 = Instant::now();
        t.sample_at(t0).unwrap().unwrap();
        assert_eq!(pids(&t), [100, 101]);
        // A new thread that has forked a child: the count moves, task/ is listed again.
        FakeProc::new(102)
            .start(1002)
            .rss_kb(300)
            .hwm_kb(300)
            .write(tmp.path());
        fake_thread(tmp.path(), 100, 160, &[102], 3);
        t.sample_at(t0 + Duration::from_millis(1)).unwrap().unwrap();
        assert_eq!(pids(&t), [100, 101, 102]);
    }

    #[test]
    fn children_of_other_threads_are_read_again_within_the_rescan_time() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        fake_thread(tmp.path(), 100, 150, &[], 2);
        let mut t = tree_over(tmp.path(), 100);
        let t0 = Instant::now();
        t.sample_at(t0).unwrap().unwrap();
        // Thread 150 forks; the count stays 2. The main thread's file is read every tick, the
        // others' only once OTHER_THREADS_EVERY has passed.
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        fake_thread(tmp.path(), 100, 150, &[101], 2);
        t.sample_at(t0 + Duration::from_millis(1)).unwrap().unwrap();
        assert_eq!(pids(&t), [100]);
        t.sample_at(t0 + OTHER_THREADS_EVERY).unwrap().unwrap();
        assert_eq!(pids(&t), [100, 101]);
        // The main thread forks: found at the next tick.
        FakeProc::new(102)
            .start(1002)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        fs::write(tmp.path().join("100/task/100/children"), "102").unwrap();
        t.sample_at(t0 + OTHER_THREADS_EVERY + Duration::from_millis(1))
            .unwrap()
            .unwrap();
        assert_eq!(pids(&t), [100, 101, 102]);
    }

    #[test]
    fn a_thread_replaced_by_another_with_the_same_count_is_listed_again() {
        let tmp = tempfile::tempdir().unwrap();
        FakeProc::new(100)
            .start(1000)
            .rss_kb(1000)
            .hwm_kb(1000)
            .write(tmp.path());
        fake_thread(tmp.path(), 100, 150, &[], 2);
        let mut t = tree_over(tmp.path(), 100);
        let t0 = Instant::now();
        t.sample_at(t0).unwrap().unwrap();
        // Thread 150 ends, thread 170 starts and forks: still 2 threads.
        fs::remove_dir_all(tmp.path().join("100/task/150")).unwrap();
        FakeProc::new(101)
            .start(1001)
            .rss_kb(200)
            .hwm_kb(200)
            .write(tmp.path());
        fake_thread(tmp.path(), 100, 170, &[101], 2);
        t.sample_at(t0 + OTHER_THREADS_EVERY).unwrap().unwrap();
        assert_eq!(pids(&t), [100, 101]);
    }

    /// Each process's peak within the recording and whether it is exact, by PID.
    fn recording_peaks(t: &Tree) -> Vec<(i32, u64, bool)> {
        let mut all: Vec<_> = t
            .processes()
            .iter()
            .map(|p| {
                let (b, exact) = p.recording_peak();
                (p.pid, b >> 20, exact.unwrap())
            })
            .collect();
        all.sort();
        all
    }

    /// A root older than the recording with a 300 MiB lifetime mark, idle at 5 MiB, and a child
    /// with an 80 MiB mark at 10 MiB.
    fn older_tree(root: &Path) -> Tree {
        FakeProc::new(100)
            .start(1000)
            .rss_kb(5 << 10)
            .hwm_kb(300 << 10)
            .children(&[101])
            .write(root);
        FakeProc::new(101)
            .start(1001)
            .rss_kb(10 << 10)
            .hwm_kb(80 << 10)
            .write(root);
        // Where a reset writes.
        for pid in [100, 101] {
            fs::write(root.join(format!("{pid}/clear_refs")), "").unwrap();
        }
        let mut t = tree_over(root, 100);
        t.recording_since(2000);
        t
    }

    #[test]
    fn an_older_process_has_a_peak_in_the_recording_only_where_its_mark_rose_or_was_reset() {
        let tmp = tempfile::tempdir().unwrap();
        let mut t = older_tree(tmp.path());
        let t0 = Instant::now();
        t.sample_at(t0).unwrap().unwrap();
        // Marks that did not rise tell nothing of the recording: at least the RSS read.
        assert_eq!(recording_peaks(&t), [(100, 5, false), (101, 10, false)]);
        assert_eq!(t.processes()[0].hwm_bytes, 300 << 20, "the lifetime mark");
        // The root grows to 20 MiB, its mark stays; the child's mark rises to 90 MiB: set
        // during the recording, it is its exact peak there.
        set_status(tmp.path(), 100, "VmRSS", "20480 kB");
        set_status(tmp.path(), 101, "VmHWM", "92160 kB");
        t.sample_at(t0 + STATUS_MAX_AGE).unwrap().unwrap();
        assert_eq!(recording_peaks(&t), [(100, 20, false), (101, 90, true)]);
        // A marker's reset later on (--phase-peaks): the root's mark counts from there, but
        // the stretch before it is still not known (its peak there may be up to 300 MiB).
        set_status(tmp.path(), 100, "VmHWM", "20480 kB");
        t.reset_marks();
        set_status(tmp.path(), 100, "VmHWM", "40960 kB");
        t.sample_at(t0 + 2 * STATUS_MAX_AGE).unwrap().unwrap();
        assert_eq!(recording_peaks(&t), [(100, 40, false), (101, 90, true)]);
        // An RSS read at its lifetime mark: the process was at that peak during the recording.
        set_status(tmp.path(), 100, "VmRSS", "307200 kB");
        set_status(tmp.path(), 100, "VmHWM", "307200 kB");
        t.sample_at(t0 + 3 * STATUS_MAX_AGE).unwrap().unwrap();
        assert_eq!(recording_peaks(&t), [(100, 300, true), (101, 90, true)]);
    }

    #[test]
    fn a_reset_right_after_the_opening_row_starts_every_processs_peak_in_the_recording() {
        // --reset-peaks, or a bench's first run: the marks read at the opening row, the
        // lifetime ones, close the span before the recording's window.
        let tmp = tempfile::tempdir().unwrap();
        let mut t = older_tree(tmp.path());
        t.sample().unwrap().unwrap();
        t.reset_marks();
        set_status(tmp.path(), 100, "VmHWM", "5120 kB");
        set_status(tmp.path(), 101, "VmHWM", "10240 kB");
        t.sample().unwrap().unwrap();
        assert_eq!(recording_peaks(&t), [(100, 5, true), (101, 10, true)]);
        assert_eq!(t.processes()[0].hwm_bytes, 300 << 20, "the lifetime mark");
    }

    #[test]
    fn a_process_born_during_the_recording_has_every_mark_in_it() {
        let tmp = tempfile::tempdir().unwrap();
        let mut t = older_tree(tmp.path());
        t.recording_since(500);
        t.sample().unwrap().unwrap();
        assert_eq!(recording_peaks(&t), [(100, 300, true), (101, 80, true)]);
    }
}
