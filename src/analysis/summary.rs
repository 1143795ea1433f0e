//! The summary of one recording: its peak, decided once (`model::peak`) from what the kernel
//! and the samples say of each session, with its source, scope and, for a tree, the bounds of
//! the tree's own peak; the sampled peak with its time and process; the cgroup; the idle floor
//! and how much of it is locked, pinned or shared; duration, samples, missed ticks, restarts,
//! how the target ended; and the phases and runs (`phases.rs`). Built row by row in constant
//! memory; the same builder runs inside `record` and over a file in `summary`, so both print the
//! same numbers. An `--append`ed recording's numbers cover all its sessions. What it says beside
//! the numbers are values too (`Warning`, `Ended`, `ExactUpTo`, ...): `render/` words them.

use super::gpu::GpuTrack;
use super::phases::{PhaseBuilder, Phases};
use super::span::{
    launched_duration_s, EndTail, HeldPeaks, MemoryHealth, PssReads, SpanAcc, SpanContext, Window,
};
use super::timeline::{Timeline, When};
use super::warnings::{ExitRecords, LossLeaves, Warning};
use crate::format::meta::{CgroupEnd, EndInfo, EndReason, LeftCgroup, Meta, RowLoss, RunPeaks};
use crate::format::ReadInfo;
use crate::model::peak::{KernelPeakWindow, Peak, PeakFacts, PeakScope, PeakSource};
use crate::model::process::ProcessRecord;
use crate::model::sample::{Event, Sample};
use serde::Serialize;

/// A sampled peak below this fraction of the kernel's peak means the interval missed it.
pub const MISSED_PEAK_RATIO: f64 = 0.95;

/// The idle floor is this percentile of the sampled RSS.
pub const IDLE_PERCENTILE: f64 = 10.0;

/// Sessions of an `--append`ed recording summed up one by one; the rows of further sessions
/// join the last one kept (and its kernel peak is then not known).
pub const MAX_SESSIONS: usize = 1000;

/// How a process of the tree is named in the summary: its command line after exec (PostgreSQL's
/// `postgres: checkpointer`), cut to [`PROCESS_NAME_CHARS`]; its command name when it has none.
pub fn process_name(p: &ProcessRecord) -> String {
    let name = if p.cmdline.is_empty() {
        &p.comm
    } else {
        &p.cmdline
    };
    if name.chars().count() <= PROCESS_NAME_CHARS {
        return name.clone();
    }
    let mut cut: String = name.chars().take(PROCESS_NAME_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The longest process name the summary prints.
pub const PROCESS_NAME_CHARS: usize = 48;

/// How many of the largest processes the summary lists for a tree.
pub const PROCESSES_SHOWN: usize = 5;

/// One session's rows and what its metadata and end record say.
#[derive(Debug, Clone)]
struct SessionAcc {
    meta: Option<Meta>,
    end: Option<EndInfo>,
    span: SpanAcc,
    /// Rows of sessions beyond `MAX_SESSIONS` joined this one.
    merged: bool,
    /// The file holds fewer rows than the end records count, found as this session ended.
    rows_lost: Option<RowLoss>,
    /// A bench run began in it (`run-start:N`).
    has_runs: bool,
}

/// What one session says of its peak.
#[derive(Debug, Clone)]
struct SessionPeak {
    facts: PeakFacts,
    window: KernelPeakWindow,
    /// The high-water mark that predates the session: when the window is `BeforeRecording`, or
    /// the opening row's when a reset or a restart took over from it (`reset_peak_unknown`,
    /// `restart_peak_unknown`).
    lifetime: Option<u64>,
}

impl SessionAcc {
    fn launched(&self) -> bool {
        self.meta
            .as_ref()
            .is_some_and(|m| m.target.mode == "command")
            || self
                .end
                .as_ref()
                .is_some_and(|e| e.rusage_maxrss_bytes.is_some())
    }

    /// Seconds the session recorded: its rows' span, or its launched command's wall time from
    /// its start to its exit when its end record has it.
    fn duration_s(&self) -> f64 {
        let rows = self.span.last_elapsed_s() - self.span.start_elapsed_s();
        let wall = self.end.as_ref().and_then(|e| e.command_wall_s);
        launched_duration_s(rows, wall.filter(|_| !self.merged))
    }

    /// The session has rows and no end record: the recorder was killed, or is still writing.
    fn unended(&self) -> bool {
        self.end.is_none() && self.span.samples() > 0
    }

    fn cgroup_end(&self) -> Option<&CgroupEnd> {
        self.end.as_ref().and_then(|e| e.cgroup.as_ref())
    }

    /// The session's peak facts: the windows of its kernel marks and cgroup peak from its
    /// metadata (launched, reset at the start, or neither), the peaks its end record gave after
    /// the last row.
    fn peak(&self) -> SessionPeak {
        let meta = self.meta.as_ref();
        let end = self.end.as_ref();
        let launched = self.launched();
        let resets_held = end.is_none_or(|e| e.peak_reset_failures == 0);
        let reset = meta.is_some_and(|m| m.peak_reset_at_start) && resets_held;
        let bound = meta.map_or_else(
            crate::probe::proc::local_batching_bound_bytes,
            super::phases::bound_of,
        );
        let tail = end.map(|e| session_tail(e, bound)).unwrap_or_default();
        let cg = self.cgroup_end();
        let own = cg.is_some_and(|c| c.own)
            || meta.and_then(|m| m.cgroup.as_ref()).is_some_and(|c| c.own);
        let cgroup_reset = reset && cg.is_none_or(|c| c.peak_reset_failures == 0);
        let ctx = SpanContext {
            kernel: if launched {
                Window::FromOpen
            } else if reset {
                Window::AfterOpen
            } else {
                Window::IfRises
            },
            cgroup: if own {
                Window::FromOpen
            } else if cgroup_reset {
                Window::AfterOpen
            } else {
                Window::IfRises
            },
            cgroup_holds_tree: own || meta.is_some_and(Meta::cgroup_holds_tree),
            cgroup_v1: meta.is_some_and(Meta::cgroup_v1)
                || cg.is_some_and(|c| c.version == crate::probe::cgroup::CgroupVersion::V1),
            bound_bytes: bound,
            bound_known: meta.is_some_and(|m| m.online_cpus.is_some()),
            gpu: if launched {
                Window::FromOpen
            } else {
                Window::IfRises
            },
            // Resets at markers (--phase-peaks) that held: the rows after the first count.
            kernel_inner_resets: resets_held,
            cgroup_inner_resets: resets_held && cg.is_none_or(|c| c.peak_reset_failures == 0),
            ..SpanContext::default()
        }
        .with_tail(&tail);
        let mut facts = self.span.facts(&ctx);
        // The cgroup's own count of its swap (memory.swap.peak), where it holds the tree: a
        // swap-out between two ticks is in it.
        if let Some(s) = cg
            .filter(|_| facts.cgroup_holds_tree)
            .and_then(|c| c.swap_peak_bytes)
        {
            facts.swap_peak_bytes = facts.swap_peak_bytes.max(s);
        }
        if self.rows_lost.is_some_and(|l| l.in_session) {
            facts.rows_lost = !tail_covers(&facts, &tail, meta);
        }
        let (open_hwm, after) = self.span.hwm();
        let rows_hwm = open_hwm.max(after.unwrap_or(0));
        if self.merged {
            facts.kernel_peak_rss_bytes = None;
            facts.kernel_peak_source = None;
            facts.cgroup_peak_bytes = None;
        }
        let window = if rows_hwm == 0 && tail.kernel.is_none() {
            KernelPeakWindow::NotRecorded
        } else if launched {
            KernelPeakWindow::Launched
        } else if reset {
            KernelPeakWindow::ResetAtStart
        } else if facts.kernel_peak_rss_bytes.is_some() {
            KernelPeakWindow::RoseDuringRecording
        } else {
            KernelPeakWindow::BeforeRecording
        };
        // A mark that predates the recording: the whole span's when it never rose; the opening
        // row's when a reset at a marker or a restart took over from it without its rising
        // (the peak before that is then at most this mark).
        let lifetime = if window == KernelPeakWindow::BeforeRecording {
            Some(rows_hwm)
        } else if facts.kernel_peak_rss_bytes.is_some()
            && (facts.reset_peak_unknown || facts.restart_peak_unknown)
        {
            Some(open_hwm)
        } else {
            None
        };
        SessionPeak {
            lifetime,
            facts,
            window,
        }
    }

    /// What the session watched.
    fn target(&self) -> Option<Watched> {
        self.meta.as_ref().map(Watched::of)
    }
}

/// What a session's end record gave after its last row. A command bench's recording ends no
/// command of its own: each run ended its own, and their ends (`runs`) are the session's.
fn session_tail(end: &EndInfo, bound: u64) -> EndTail {
    let runs: Vec<EndTail> = end
        .runs
        .iter()
        .map(|r| EndTail::of(&r.end, bound))
        .collect();
    match EndTail::of_all(&runs) {
        Some(t) => EndTail {
            exit_records: end.exit_records_complete(),
            ..t
        },
        None => EndTail::of(end, bound),
    }
}

/// Whether the end record's own reading, taken after the last row the recorder wrote, holds
/// whatever rows lost from the end of the session held (`facts` decided with it): it is the peak
/// decided, and a mark over the whole session of what that peak is of (no reset inside the
/// session: no `--phase-peaks`, no bench run reset after its start): the tree's cgroup peak,
/// wait4's ru_maxrss (the launched tree's largest process, those that ended included), or the
/// exit record's VmHWM of a single process. Else the rows lost may hold a higher peak.
fn tail_covers(facts: &PeakFacts, tail: &EndTail, meta: Option<&Meta>) -> bool {
    let resets_inside =
        meta.is_some_and(|m| m.phase_peaks || m.run_peaks == Some(RunPeaks::ResetAfterStart));
    let p = facts.decide();
    let from_tail = |source| tail.kernel == Some((p.bytes, source));
    !resets_inside
        && match p.source {
            PeakSource::Cgroup => tail.cgroup == Some(p.bytes),
            PeakSource::RuMaxrss => from_tail(PeakSource::RuMaxrss),
            PeakSource::Vmhwm => !facts.is_tree() && from_tail(PeakSource::Vmhwm),
            PeakSource::Sampled | PeakSource::NvmlAccounting => false,
        }
}

/// The facts of a recording from those of its sessions: its kernel (or cgroup) peak is known
/// only when every session's is, and is then the largest.
fn combine(sessions: &[SessionPeak]) -> PeakFacts {
    let mut all = sessions.iter().map(|s| &s.facts);
    let Some(first) = all.next() else {
        return PeakFacts::default();
    };
    let mut f = *first;
    for s in all {
        f.sampled_peak_rss_bytes = f.sampled_peak_rss_bytes.max(s.sampled_peak_rss_bytes);
        match (f.kernel_peak_rss_bytes, s.kernel_peak_rss_bytes) {
            (Some(a), Some(b)) if b > a => {
                f.kernel_peak_rss_bytes = Some(b);
                f.kernel_peak_source = s.kernel_peak_source;
            }
            (Some(_), Some(_)) => {}
            _ => {
                f.kernel_peak_rss_bytes = None;
                f.kernel_peak_source = None;
            }
        }
        f.cgroup_peak_bytes = match (f.cgroup_peak_bytes, s.cgroup_peak_bytes) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        f.max_processes = f.max_processes.max(s.max_processes);
        // A session that no process left needs no exit record: only those with departures
        // decide (a killed session, with no end record to say it read them, may have none).
        let (a, b) = (f.departed == 0, s.departed == 0);
        f.exit_records_complete = (f.exit_records_complete || a) && (s.exit_records_complete || b);
        f.kernel_peak_covers_departed =
            (f.kernel_peak_covers_departed || a) && (s.kernel_peak_covers_departed || b);
        f.departed += s.departed;
        f.cgroup_holds_tree &= s.cgroup_holds_tree;
        f.cgroup_left_tree |= s.cgroup_left_tree;
        f.cgroup_below_process |= s.cgroup_below_process;
        f.cgroup_peak_fell |= s.cgroup_peak_fell;
        f.cgroup_v1 |= s.cgroup_v1;
        f.hwm_sum_bytes = f.hwm_sum_bytes.max(s.hwm_sum_bytes);
        f.exact_within_bytes = match (f.exact_within_bytes, s.exact_within_bytes) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        f.late_boundary |= s.late_boundary;
        f.rows_lost |= s.rows_lost;
        f.restart_peak_unknown |= s.restart_peak_unknown;
        f.reset_peak_unknown |= s.reset_peak_unknown;
        f.swap_peak_bytes = f.swap_peak_bytes.max(s.swap_peak_bytes);
        f.ram_swap_sampled_bytes = f.ram_swap_sampled_bytes.max(s.ram_swap_sampled_bytes);
        f.cgroup_swap_sampled_bytes = f.cgroup_swap_sampled_bytes.max(s.cgroup_swap_sampled_bytes);
        f.cgroup_cache_sampled_bytes = f
            .cgroup_cache_sampled_bytes
            .max(s.cgroup_cache_sampled_bytes);
        f.cgroup_uncached_sampled_bytes = f
            .cgroup_uncached_sampled_bytes
            .max(s.cgroup_uncached_sampled_bytes);
    }
    f
}

/// Accumulates a summary from a recording in order: each session's metadata (`session`), its
/// rows (`push`), its end record (`session_end`); see `format::Sink`.
pub struct SummaryBuilder {
    samples: u64,
    first_unix_ms: Option<u64>,
    last_unix_ms: u64,
    /// The sessions (each `start` event begins one) and the time recorded in them.
    timeline: Timeline,
    /// Every row of the recording, as one span (the sampled peak, PSS, held memory, GPU).
    all: Option<SpanAcc>,
    /// Where `all`'s sampled peak row lies on the timeline (its session, the plot's x).
    sampled_peak_at: When,
    sessions: Vec<SessionAcc>,
    merged_sessions: u64,
    /// The metadata of the session whose first row is next.
    next_meta: Option<Meta>,
    /// A session that ended without a row, when there is no other.
    rowless: Option<(Meta, EndInfo)>,
    max_top_rss: u64,
    /// The first row of the last launched session, kept out of the idle floor.
    first_launched_rss: Option<u64>,
    missed_done: u64,
    missed_session: u64,
    restarts: u64,
    min_rss: u64,
    hist: LogHistogram,
    /// Locked, pinned and shared memory per row, for their share of the idle floor.
    held_hist: [LogHistogram; 3],
    phases: PhaseBuilder,
    gpu: GpuTrack,
    /// The anatomy table the latest session with one named (`record --anatomy`).
    anatomy_table: Option<String>,
    numa_table: Option<String>,
    /// Why the last session wrote no NUMA table on a machine with several nodes.
    numa_not_read: Option<String>,
    /// The last row's `major_faults`, and the faults the sessions' end records add after
    /// their last rows.
    last_major_faults: u64,
    faults_after_rows: u64,
    /// The row of the largest `cgroup_bytes`: it, with its anon and file parts (every
    /// session's rows, a killed one's too, which has no end record to say it).
    cgroup_largest: Option<(u64, u64, u64)>,
    /// A file another tool wrote (`Summary::of_read`): it never has an end record, so none
    /// missing says the recorder was killed.
    imported: bool,
}

impl Default for SummaryBuilder {
    fn default() -> Self {
        SummaryBuilder {
            samples: 0,
            first_unix_ms: None,
            last_unix_ms: 0,
            timeline: Timeline::new(),
            all: None,
            sampled_peak_at: When::default(),
            sessions: Vec::new(),
            merged_sessions: 0,
            next_meta: None,
            rowless: None,
            max_top_rss: 0,
            first_launched_rss: None,
            missed_done: 0,
            missed_session: 0,
            restarts: 0,
            anatomy_table: None,
            numa_table: None,
            numa_not_read: None,
            last_major_faults: 0,
            faults_after_rows: 0,
            cgroup_largest: None,
            min_rss: u64::MAX,
            hist: LogHistogram::new(),
            held_hist: [
                LogHistogram::new(),
                LogHistogram::new(),
                LogHistogram::new(),
            ],
            phases: PhaseBuilder::new(),
            gpu: GpuTrack::default(),
            imported: false,
        }
    }
}

impl crate::format::Sink for SummaryBuilder {
    fn session(&mut self, meta: &Meta) {
        SummaryBuilder::session(self, meta)
    }

    fn sample(&mut self, s: &Sample) {
        self.push(s)
    }

    fn rows_lost(&mut self, loss: &RowLoss) {
        SummaryBuilder::rows_lost(self, loss)
    }

    fn session_end(&mut self, end: &EndInfo) {
        SummaryBuilder::session_end(self, end)
    }
}

impl SummaryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The metadata of the next session, before its first row.
    pub fn session(&mut self, meta: &Meta) {
        self.next_meta = Some(Meta {
            earlier_sessions: Vec::new(),
            ..meta.clone()
        });
        self.phases.session(meta);
        self.gpu.session(meta);
        if let Some(a) = &meta.anatomy {
            self.anatomy_table = Some(a.file.clone());
        }
        if let Some(n) = &meta.numa {
            self.numa_table = Some(n.file.clone());
        }
        self.numa_not_read.clone_from(&meta.numa_not_read);
    }

    /// The file holds fewer rows than the end records count (`format::Sink::rows_lost`), said
    /// before the end record of the session the last rows belong to.
    pub fn rows_lost(&mut self, loss: &RowLoss) {
        if let Some(s) = self.sessions.last_mut() {
            s.rows_lost = Some(*loss);
        }
        if loss.in_session {
            self.phases.rows_lost();
        }
    }

    /// The end record of the session the last rows belong to.
    pub fn session_end(&mut self, end: &EndInfo) {
        // A session whose metadata came but no row: kept when the recording has no other (its
        // end still says how the target ended).
        if let Some(meta) = self.next_meta.take() {
            if self.sessions.is_empty() {
                self.rowless = Some((meta, end.clone()));
                // A command bench whose runs all ended before their first samples: its runs
                // are in the end record alone.
                self.phases.session_end(end);
                self.faults_after_rows = end.major_faults.unwrap_or(0);
            }
            return;
        }
        if let Some(s) = self.sessions.last_mut() {
            s.end = Some(end.clone());
            for r in &end.marks_reset_elsewhere {
                s.span.mark_reset_elsewhere_at(r.unix_ms);
            }
            // The marks alive after the last row: the recording's, and a command bench's runs'
            // after each one's own last row.
            let runs = end
                .runs
                .iter()
                .filter_map(|r| r.end.exit_hwm_sum_after_last_sample_bytes);
            for sum in end
                .exit_hwm_sum_after_last_sample_bytes
                .into_iter()
                .chain(runs)
            {
                s.span.hwm_sum_at_end(sum);
            }
        }
        // Faults the exit records gave after the session's last row (a command that ended
        // between two ticks): the recording's, in no row.
        if let Some(f) = end.major_faults {
            self.faults_after_rows = self
                .faults_after_rows
                .saturating_add(f.saturating_sub(self.last_major_faults));
        }
        self.phases.session_end(end);
        self.gpu.session_end(end);
    }

    pub fn push(&mut self, s: &Sample) {
        self.last_major_faults = s.major_faults;
        if let Some(c) = s.cgroup_bytes {
            if self.cgroup_largest.is_none_or(|(l, _, _)| c > l) {
                self.cgroup_largest = Some((
                    c,
                    s.cgroup_anon_bytes.unwrap_or(0),
                    s.cgroup_file_bytes.unwrap_or(0),
                ));
            }
        }
        let place = self.timeline.push(s);
        self.phases.push(s);
        self.gpu.push(s, place);
        let first = self.samples == 0;
        if place.new_session || first {
            if !first {
                self.missed_done += self.missed_session;
                self.missed_session = 0;
            }
            if self.sessions.len() < MAX_SESSIONS {
                self.sessions.push(SessionAcc {
                    meta: self.next_meta.take(),
                    end: None,
                    span: SpanAcc::open_session(s),
                    merged: false,
                    rows_lost: None,
                    has_runs: false,
                });
            } else {
                self.next_meta = None;
                self.merged_sessions += 1;
                let last = self.sessions.last_mut().expect("sessions were kept");
                last.merged = true;
                last.span.add(s);
            }
        } else if let Some(last) = self.sessions.last_mut() {
            last.span.add(s);
            // With --phase-peaks the marks are reset right after each marker's row.
            let phase_peaks = last.meta.as_ref().is_some_and(|m| m.phase_peaks);
            if phase_peaks && matches!(s.event, Some(Event::Mark(_))) {
                last.span.marks_reset_after(s);
            }
        }
        // The span's own rule (the first row, then a larger RSS) picks the sampled peak row.
        if self
            .all
            .as_ref()
            .is_none_or(|a| s.rss_bytes > a.sampled_peak_rss())
        {
            self.sampled_peak_at = When::of(s, place);
        }
        match self.all.as_mut() {
            Some(a) => a.add(s),
            None => self.all = Some(SpanAcc::open_session(s)),
        }
        if matches!(s.event, Some(Event::Restart(_))) {
            self.restarts += 1;
        }
        if matches!(s.event, Some(Event::RunStart(_))) {
            if let Some(last) = self.sessions.last_mut() {
                last.has_runs = true;
            }
        }
        self.samples += 1;
        self.first_unix_ms.get_or_insert(s.unix_ms);
        self.last_unix_ms = s.unix_ms;
        self.missed_session = self.missed_session.max(s.missed_ticks);
        self.max_top_rss = self.max_top_rss.max(s.top_rss_bytes);
        self.min_rss = self.min_rss.min(s.rss_bytes);
        // A launched command's first row is its start-up (the program just loaded, its libraries
        // not yet): not part of its idle floor.
        let start_up = self.sessions.last().is_some_and(|last| {
            last.span.samples() == 1
                && last
                    .meta
                    .as_ref()
                    .is_some_and(|m| m.target.mode == "command")
        });
        if start_up {
            self.first_launched_rss = Some(s.rss_bytes);
        } else {
            self.hist.add(s.rss_bytes);
        }
        for (h, v) in self
            .held_hist
            .iter_mut()
            .zip([s.locked_bytes, s.pinned_bytes, s.shmem_bytes])
        {
            h.add(v);
        }
    }

    /// The summary of what was pushed; `file`: the recording's name, `truncated_line`: an
    /// incomplete last line that was skipped.
    pub fn finish(&self, file: Option<String>, truncated_line: Option<u64>) -> Summary {
        let mut peaks: Vec<SessionPeak> = self.sessions.iter().map(SessionAcc::peak).collect();
        if peaks.is_empty() {
            peaks.extend(self.rowless_peak());
        }
        let mut facts = combine(&peaks);
        // Whole sessions (or rows before the last session's) lost: they may hold the peak.
        facts.rows_lost |= self
            .sessions
            .iter()
            .any(|s| s.rows_lost.is_some_and(|l| !l.in_session));
        let peak = facts.decide();
        let cgroup = self.cgroup_summary(&facts);
        let last = self.sessions.last();
        let rowless = self.rowless.as_ref().filter(|_| last.is_none());
        let meta = last.and_then(|s| s.meta.as_ref()).or(rowless.map(|r| &r.0));
        let end = last.and_then(|s| s.end.as_ref()).or(rowless.map(|r| &r.1));
        let all = self.all.as_ref();
        let sampled_row = all.map(|a| a.sampled_peak_row()).unwrap_or_default();
        let window = match peaks.first().map(|p| p.window) {
            Some(w) if peaks.iter().all(|p| p.window == w) => w,
            Some(_) => KernelPeakWindow::PerSession,
            None => KernelPeakWindow::NotRecorded,
        };
        let lifetime = peaks.iter().filter_map(|p| p.lifetime).max();
        let single_process = facts.max_processes <= 1 && facts.departed == 0;
        // A recording of one launched row: that row is all there is.
        let idle = self
            .hist
            .percentile(IDLE_PERCENTILE)
            .or(self.first_launched_rss)
            .unwrap_or(0);
        let mut s = Summary {
            file,
            samples: self.samples,
            duration_s: self.duration_s(),
            first_unix_ms: self.first_unix_ms.unwrap_or(0),
            last_unix_ms: self.last_unix_ms,
            peak,
            facts,
            sampled_peak_unix_ms: sampled_row.unix_ms,
            sampled_peak_elapsed_s: sampled_row.elapsed_s,
            sampled_peak_session: self.sampled_peak_at.session,
            sampled_peak_x_s: self.sampled_peak_at.x_s,
            sampled_peak_pid: sampled_row.pid,
            sampled_peak_processes: sampled_row.processes,
            kernel_peak_window: window,
            kernel_peak_exact_until_s: self.exact_until(),
            lifetime_peak_rss_bytes: lifetime,
            rusage_maxrss_bytes: self
                .sessions
                .iter()
                .filter_map(|s| s.end.as_ref()?.rusage_maxrss_bytes)
                .max(),
            cgroup: cgroup.clone(),
            idle_rss_bytes: idle,
            min_rss_bytes: if self.samples > 0 { self.min_rss } else { 0 },
            mean_rss_bytes: all.map_or(0, |a| a.mean_rss().round() as u64),
            held: all.map(|a| a.held()).unwrap_or_default(),
            health: {
                let mut h = all.map(|a| a.health()).unwrap_or_default();
                h.major_faults = h.major_faults.saturating_add(self.faults_after_rows);
                // The end records count the kills after the last row too (a run killed at its
                // limit between two samples).
                if let Some(c) = &cgroup {
                    h.cgroup_oom_kills = Some(h.cgroup_oom_kills.unwrap_or(0).max(c.oom_kills));
                }
                h
            },
            held_at_idle: HeldPeaks {
                locked_bytes: self.held_hist[0].percentile(IDLE_PERCENTILE).unwrap_or(0),
                pinned_bytes: self.held_hist[1].percentile(IDLE_PERCENTILE).unwrap_or(0),
                shmem_bytes: self.held_hist[2].percentile(IDLE_PERCENTILE).unwrap_or(0),
            },
            pss: all.and_then(|a| a.pss().reads(facts.sampled_peak_rss_bytes)),
            peak_pss_bytes: all
                .and_then(|a| a.pss().reads(facts.sampled_peak_rss_bytes))
                .filter(|r| r.is_peak)
                .map(|r| r.largest_bytes),
            pss_at_peak_bytes: sampled_row.pss_bytes,
            missed_ticks: self.missed_done + self.missed_session,
            restarts: self.restarts,
            interval: self.interval(meta),
            target: meta.map(Watched::of),
            sessions: self.session_summaries(&peaks),
            ended: end.map_or(Ended::NoEndRecord, |e| {
                Ended::Record(Box::new(EndedBy::of(e)))
            }),
            end: end.cloned(),
            processes: {
                let mut all: Vec<ProcessRecord> = self
                    .ends(rowless)
                    .flat_map(|e| e.processes.iter().cloned())
                    .collect();
                all.sort_by_key(|p| std::cmp::Reverse(p.recording_peak().0));
                all
            },
            processes_exit_records: self.ends(rowless).all(EndInfo::exit_records_complete),
            gpu: self.gpu.finish(meta),
            truncated_line,
            // The session whose peak is the recording's (in one of several, the one whose own
            // decided peak reaches it).
            sessions_without_runs: if self.sessions.iter().any(|s| s.has_runs) {
                self.sessions
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| !s.has_runs && s.span.samples() > 0)
                    .map(|(i, _)| i + 1)
                    .collect()
            } else {
                Vec::new()
            },
            peak_unended: self.sessions.iter().zip(&peaks).any(|(s, p)| {
                !self.imported && s.unended() && p.facts.decide().bytes >= peak.bytes
            }),
            peak_exact_up_to: None,
            rows_lost: self
                .sessions
                .iter()
                .enumerate()
                .filter_map(|(i, s)| Some((i + 1, s.rows_lost?)))
                .collect(),
            warnings: Vec::new(),
            spans: self.phases.finish(),
            anatomy_table: self.anatomy_table.clone(),
            numa_table: self.numa_table.clone(),
            numa_not_read: self.numa_not_read.clone(),
            numa_nodes: Vec::new(),
            anatomy: None,
            phase_anatomy: Vec::new(),
            anatomy_at_peak: None,
            ledger: self
                .sessions
                .iter()
                .rev()
                .find_map(|s| s.end.as_ref()?.ledger.clone()),
            anatomy_reads: self
                .sessions
                .iter()
                .filter_map(|s| s.end.as_ref()?.anatomy_reads)
                .reduce(|a, b| crate::format::meta::AnatomyReads {
                    reads: a.reads + b.reads,
                    dropped: a.dropped + b.dropped,
                    read_us: a.read_us + b.read_us,
                    longest_read_us: a.longest_read_us.max(b.longest_read_us),
                }),
        };
        // A command bench's recording: each run is a command launched anew and decided on its
        // own end record; the recording's peak is its largest run's, on the runs' common basis
        // (one process's own peak where every run is one), not a number of another kind over
        // processes that never ran together.
        if self.sessions.len() == 1 && meta.is_some_and(|m| m.run_peaks == Some(RunPeaks::Launched))
        {
            let basis = crate::model::peak::common_basis(s.spans.runs.iter().map(|r| &r.facts));
            if let Some(top) = s
                .spans
                .runs
                .iter()
                .filter_map(|r| r.facts.on_basis(basis))
                .max_by_key(|p| p.bytes)
            {
                s.peak = top;
            }
        }
        s.warnings = self.warnings(&s, meta, end, single_process, truncated_line);
        s.peak_exact_up_to = s.peak_exact_only_up_to();
        s
    }

    /// A launched command that ended before its first sample: its end record still gave its
    /// peaks (wait4's ru_maxrss, the exit records, its cgroup's peak file), decided as the end
    /// of a session with rows is.
    fn rowless_peak(&self) -> Option<SessionPeak> {
        let (meta, end) = self.rowless.as_ref()?;
        let wall = end.command_wall_s.unwrap_or(0.0);
        let start_ms = end
            .ended_unix_ms
            .saturating_sub((wall * 1000.0).round() as u64);
        let session = SessionAcc {
            meta: Some(meta.clone()),
            end: Some(end.clone()),
            span: SpanAcc::without_rows((start_ms, 0.0), (end.ended_unix_ms, wall)),
            merged: false,
            rows_lost: None,
            has_runs: true,
        };
        let p = session.peak();
        (p.facts.kernel_peak_rss_bytes.is_some() || p.facts.cgroup_peak_bytes.is_some())
            .then_some(p)
    }

    /// Every session's end record, then a rowless command's.
    fn ends<'a>(
        &'a self,
        rowless: Option<&'a (Meta, EndInfo)>,
    ) -> impl Iterator<Item = &'a EndInfo> + 'a {
        self.sessions
            .iter()
            .filter_map(|s| s.end.as_ref())
            .chain(rowless.map(|r| &r.1))
    }

    /// The cgroup's part of the summary (none where no cgroup was read): its end records, the
    /// largest reading, the peak the facts hold, and why it is not the tree where its metadata
    /// says so.
    fn cgroup_summary(&self, facts: &PeakFacts) -> Option<CgroupSummary> {
        // A command that ended before its first sample has no session: its end record still
        // tells its cgroup (the peak, what it made inside and was removed).
        let rowless = self
            .rowless
            .as_ref()
            .filter(|_| self.sessions.is_empty())
            .and_then(|(_, end)| end.cgroup.as_ref());
        let ends: Vec<&CgroupEnd> = self
            .sessions
            .iter()
            .filter_map(SessionAcc::cgroup_end)
            .chain(rowless)
            .collect();
        let why = self
            .sessions
            .iter()
            .filter_map(|s| s.meta.as_ref()?.cgroup.as_ref()?.not_the_tree.clone())
            .map(NotTheTree::Recorded)
            .next()
            .or_else(|| {
                facts
                    .cgroup_left_tree
                    .then(|| left_tree_reason(&ends, facts))
            });
        CgroupSummary::of(
            &ends,
            self.cgroup_largest,
            facts.cgroup_peak_bytes,
            facts.cgroup_holds_tree,
            why,
        )
        .map(|c| CgroupSummary {
            peak_fell: facts.cgroup_peak_fell,
            ..c
        })
    }

    /// Each session's own line, for a recording of more than one.
    fn session_summaries(&self, peaks: &[SessionPeak]) -> Vec<SessionSummary> {
        if self.sessions.len() <= 1 {
            return Vec::new();
        }
        self.sessions
            .iter()
            .zip(peaks)
            .map(|(s, p)| SessionSummary {
                target: s.target(),
                started_unix_ms: s.span.start_unix_ms(),
                duration_s: s.duration_s(),
                samples: s.span.samples(),
                peak: p.facts.decide(),
                kernel_peak_window: p.window,
                interval: s.meta.as_ref().map(|m| m.interval.clone()),
                ended: s.end.as_ref().map(EndedBy::of),
            })
            .collect()
    }

    /// Seconds recorded: each session's span of rows, or a launched command's wall time from
    /// its start to its exit when its end record has it (a command shorter than an interval
    /// has its duration all the same).
    fn duration_s(&self) -> f64 {
        if self.sessions.is_empty() {
            let Some((_, end)) = self.rowless.as_ref() else {
                return 0.0;
            };
            // A command bench whose runs all ended before their first samples: from the first
            // run's start to the last one's exit.
            let runs = end.runs.iter().filter_map(|r| {
                let start = r.started_elapsed_s?;
                Some((start, start + r.end.command_wall_s.unwrap_or(0.0)))
            });
            let first = runs.clone().map(|r| r.0).reduce(f64::min);
            let last = runs.map(|r| r.1).reduce(f64::max);
            return end
                .command_wall_s
                .or(first.zip(last).map(|(a, b)| b - a))
                .unwrap_or(0.0);
        }
        self.sessions.iter().map(SessionAcc::duration_s).sum()
    }

    /// What the reader must know besides the numbers: of the peak itself, of how the file was
    /// read, of what the kernel's peak covers, and of the tree's cgroup and sessions.
    fn warnings(
        &self,
        s: &Summary,
        meta: Option<&Meta>,
        end: Option<&EndInfo>,
        single_process: bool,
        truncated_line: Option<u64>,
    ) -> Vec<Warning> {
        let mut warnings = Vec::new();
        self.peak_warnings(s, single_process, &mut warnings);
        self.reading_notes(s, meta, truncated_line, &mut warnings);
        self.scope_warnings(s, end, &mut warnings);
        self.tree_notes(s, meta, &mut warnings);
        warnings
    }

    /// A phase's exact peak above the peak line; a sampled peak far below the kernel's.
    fn peak_warnings(&self, s: &Summary, single_process: bool, warnings: &mut Vec<Warning>) {
        if let Some(p) = s.exact_phase_above_peak() {
            warnings.push(Warning::PhaseAbovePeak {
                label: p.label.clone(),
                peak: p.peak,
                exact_within_bytes: p.facts.exact_within_bytes,
            });
        }
        // The number to hold against the kernel's peak of one process: for a single process
        // its RSS; for a tree, the largest process's RSS.
        let sampled_one = if single_process {
            s.facts.sampled_peak_rss_bytes
        } else {
            self.max_top_rss
        };
        if let Some(k) = s
            .facts
            .kernel_peak_rss_bytes
            .filter(|&k| self.samples > 0 && (sampled_one as f64) < MISSED_PEAK_RATIO * k as f64)
        {
            warnings.push(Warning::MissedPeak {
                single_process,
                sampled_bytes: sampled_one,
                kernel_bytes: k,
            });
        }
    }

    /// No metadata, a cut last line, rows lost, ticks missed.
    fn reading_notes(
        &self,
        s: &Summary,
        meta: Option<&Meta>,
        truncated_line: Option<u64>,
        warnings: &mut Vec<Warning>,
    ) {
        if meta.is_none() && self.samples > 0 {
            warnings.push(Warning::NoMetadata {
                set_before: s.kernel_peak_window == KernelPeakWindow::BeforeRecording,
            });
        }
        if let Some(line) = truncated_line {
            warnings.push(Warning::TruncatedLine { line });
        }
        warnings.extend(s.rows_lost_warnings());
        if s.missed_ticks > 0 {
            warnings.push(Warning::MissedTicks {
                ticks: s.missed_ticks,
            });
        }
    }

    /// Where the kernel's peak does not cover the whole recording: a restart's or a reset's
    /// unknown earlier mark, exit records not read, sessions without an end.
    fn scope_warnings(&self, s: &Summary, end: Option<&EndInfo>, warnings: &mut Vec<Warning>) {
        // Whenever the kernel's peak of a process is partial: the headline, or the `at exit`
        // line of a mark set before the recording, says "see the warning below".
        let partial = s.facts.kernel_scope().is_partial()
            && (s.facts.kernel_peak_rss_bytes.is_some() || s.kernel_peak_exact_until_s.is_some());
        // The mark at the first row, which never rose: the peak before is at most that.
        let at_most_bytes = s.lifetime_peak_rss_bytes.filter(|&l| l > s.peak.bytes);
        if partial && s.facts.restart_peak_unknown {
            warnings.push(Warning::RestartPeakUnknown { at_most_bytes });
        }
        if partial && s.facts.reset_peak_unknown {
            warnings.push(Warning::ResetPeakUnknown { at_most_bytes });
        }
        if partial && s.facts.mark_reset_elsewhere {
            let resets: Vec<&crate::format::meta::MarkResetElsewhere> = self
                .sessions
                .iter()
                .filter_map(|x| x.end.as_ref())
                .flat_map(|e| &e.marks_reset_elsewhere)
                .collect();
            let count: u64 = self
                .sessions
                .iter()
                .filter_map(|x| x.end.as_ref())
                .map(|e| {
                    e.marks_reset_elsewhere_count
                        .max(e.marks_reset_elsewhere.len() as u64)
                })
                .sum();
            if let Some(r) = resets.first() {
                let at_elapsed_s = self.all.as_ref().map(|a| {
                    a.start_elapsed_s()
                        + r.unix_ms.saturating_sub(a.start_unix_ms()) as f64 / 1000.0
                });
                warnings.push(Warning::MarkFell {
                    first: (*r).clone(),
                    at_elapsed_s,
                    falls: count,
                });
            }
        }
        let records_lacking = PeakScope::of_kernel_counter(
            s.facts.max_processes,
            s.facts.departed,
            s.facts.kernel_peak_covers_departed,
        )
        .is_partial();
        if partial && records_lacking {
            // Said of the first session whose departures lack their records.
            let at_fault = self
                .sessions
                .iter()
                .find(|x| {
                    x.span.departed() > 0
                        && !x.end.as_ref().is_some_and(EndInfo::exit_records_complete)
                })
                .map_or(end, |x| x.end.as_ref());
            warnings.push(Warning::ExitRecordsLacking {
                departed: s.facts.departed,
                records: ExitRecords::of(at_fault),
            });
        }
        let unended = if self.imported {
            0
        } else {
            self.sessions.iter().filter(|s| s.unended()).count()
        };
        if unended > 0 {
            warnings.push(Warning::Unended {
                unended,
                sessions: self.sessions.len(),
            });
        }
    }

    /// The cgroup against the sampled sum and the processes' marks, several sessions, and a
    /// peak near the cgroup's limit or the machine's memory.
    fn tree_notes(&self, s: &Summary, meta: Option<&Meta>, warnings: &mut Vec<Warning>) {
        let sampled = s.facts.sampled_peak_rss_bytes;
        let bound = s.facts.exact_within_bytes.unwrap_or(0);
        // (Unless the note below, on a process's own mark above the cgroup's, says why.)
        let process_above = s
            .facts
            .kernel_peak_rss_bytes
            .is_some_and(|k| k > s.peak.bytes.saturating_add(bound));
        if s.peak.source == PeakSource::Cgroup
            && !process_above
            && sampled > s.peak.bytes.saturating_add(bound)
        {
            warnings.push(Warning::SampledAboveCgroup {
                sampled_bytes: sampled,
                cgroup_bytes: s.peak.bytes,
            });
        }
        if let (PeakSource::Cgroup, Some(k)) = (s.peak.source, s.facts.kernel_peak_rss_bytes) {
            if k > s.peak.bytes.saturating_add(bound) {
                warnings.push(Warning::CgroupBelowProcess {
                    by_bytes: k - s.peak.bytes,
                });
            }
        }
        if self.sessions.len() > 1 {
            warnings.push(Warning::Sessions {
                sessions: self.sessions.len(),
            });
        }
        if self.merged_sessions > 0 {
            warnings.push(Warning::SessionsMerged {
                merged: self.merged_sessions,
            });
        }
        let mem_total = meta.and_then(|m| m.mem_total_bytes);
        if let Some(c) = &s.cgroup {
            warnings.extend(c.warnings(mem_total));
        } else if let Some(t) = mem_total.filter(|&t| near(s.peak.bytes, t)) {
            warnings.push(Warning::PeakNearMemTotal {
                peak_bytes: s.peak.bytes,
                source: s.peak.source,
                mem_total_bytes: t,
            });
        }
    }

    /// The sampling interval of every session (`meta`'s, the last one's), `None` when sessions
    /// appended at other intervals differ (each is in its session's line then).
    fn interval(&self, meta: Option<&Meta>) -> Option<String> {
        let last = meta?.interval.clone();
        self.sessions
            .iter()
            .filter_map(|s| s.meta.as_ref())
            .all(|m| m.interval == last)
            .then_some(last)
    }

    /// For an attached target that exited and whose exit record was not read: the seconds
    /// between the last sample and the exit (the end record's time, taken as memmon saw it go).
    fn exact_until(&self) -> Option<f64> {
        let last = self.sessions.last()?;
        let (meta, end) = (last.meta.as_ref()?, last.end.as_ref()?);
        let attached = meta.target.mode != "command" && end.rusage_maxrss_bytes.is_none();
        (attached
            && end.reason == EndReason::TargetExited
            && !end.target_exit_read
            && self.samples > 0)
            .then(|| end.ended_unix_ms.saturating_sub(last.span.last_unix_ms()) as f64 / 1000.0)
    }
}

/// True when `v` came within 10% of `limit`.
fn near(v: u64, limit: u64) -> bool {
    limit > 0 && v as f64 >= 0.9 * limit as f64
}

/// One session of an `--append`ed recording.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSummary {
    /// What it watched, when the session's metadata is known.
    pub target: Option<Watched>,
    pub started_unix_ms: u64,
    pub duration_s: f64,
    pub samples: u64,
    pub peak: Peak,
    pub kernel_peak_window: KernelPeakWindow,
    /// The session's sampling interval (`1s`), when its metadata is known.
    pub interval: Option<String>,
    /// As its end record says; `None`: it has none.
    pub ended: Option<EndedBy>,
}

/// What the summary says of a recording's memory cgroup. Sizes in bytes.
#[derive(Debug, Clone, Serialize)]
pub struct CgroupSummary {
    pub path: String,
    pub version: crate::probe::cgroup::CgroupVersion,
    /// memmon made it for the launched command: it held that tree alone.
    pub own: bool,
    /// The cgroup's peak (each page once, page cache included), when reached during the
    /// recording; `None` when the kernel has no peak file or the peak predates the recording.
    pub peak_bytes: Option<u64>,
    /// It held the target's tree alone: its peak is the tree's (the headline).
    pub holds_tree: bool,
    /// Why not, where the recorder found out (e.g. memory charged to another cgroup).
    pub not_the_tree: Option<NotTheTree>,
    /// The peak file's value when it was set before the recording began (a cgroup memmon did
    /// not make whose peak never rose): the cgroup's lifetime peak, not this recording's.
    pub lifetime_peak_bytes: Option<u64>,
    pub peak_counter: String,
    /// The largest memory.current sampled and its anon and file (page cache) parts then.
    pub largest_current_bytes: u64,
    pub anon_at_largest_bytes: u64,
    pub file_at_largest_bytes: u64,
    pub limit_bytes: Option<u64>,
    /// Every limit over the cgroup, each with the cgroup that sets it and the events its
    /// thresholds counted during the recording (the last session's; `probe::limits`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<crate::probe::limits::LimitEnd>,
    /// The most swap the cgroup's tasks held (`CgroupEnd::swap_peak_bytes`), over the sessions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_peak_bytes: Option<u64>,
    /// OOM kills in the cgroup during the recording (memory.events oom_kill; v1 oom_control).
    pub oom_kills: u64,
    pub events_during: crate::probe::cgroup::CgroupEvents,
    pub moved_out: Vec<i32>,
    /// Cgroups the command made inside memmon's own, removed with it, and the processes
    /// killed in them.
    pub inside_removed: u64,
    pub inside_killed: u64,
    pub error: Option<String>,
    /// The peak file fell between two rows with no reset of memmon's (`PeakFacts::cgroup_peak_fell`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub peak_fell: bool,
}

/// Why a cgroup that held the tree when the recording began does not give its peak: the
/// processes found outside it (from the end records), else the largest process's own peak above
/// the cgroup's.
pub fn left_tree_reason(ends: &[&CgroupEnd], facts: &PeakFacts) -> NotTheTree {
    let left: Vec<LeftCgroup> = ends.iter().flat_map(|e| e.left.iter().cloned()).collect();
    if !left.is_empty() {
        return NotTheTree::Left(left);
    }
    match (facts.kernel_peak_rss_bytes, facts.cgroup_peak_bytes) {
        (Some(k), Some(c)) => NotTheTree::ProcessAbove {
            process_bytes: k,
            cgroup_bytes: c,
        },
        _ => NotTheTree::FoundOutside,
    }
}

impl CgroupSummary {
    /// From the sessions' end records (the last one's cgroup, OOM kills of all), the row of
    /// the largest usage (`rows_largest`: usage, anon, file) and the recording's cgroup peak as
    /// decided (`peak`: `None` when some session's is not known).
    fn of(
        ends: &[&crate::format::meta::CgroupEnd],
        rows_largest: Option<(u64, u64, u64)>,
        peak: Option<u64>,
        holds_tree: bool,
        not_the_tree: Option<NotTheTree>,
    ) -> Option<CgroupSummary> {
        let c = *ends.last()?;
        let ended = ends
            .iter()
            .max_by_key(|e| e.largest_current_bytes)
            .copied()
            .unwrap_or(c);
        let largest = match rows_largest {
            Some(r) if r.0 > ended.largest_current_bytes => r,
            _ => (
                ended.largest_current_bytes,
                ended.anon_at_largest_bytes,
                ended.file_at_largest_bytes,
            ),
        };
        let oom_kills = ends.iter().map(|e| e.events_during.oom_kill).sum();
        Some(CgroupSummary {
            path: c.path.clone(),
            version: c.version,
            own: c.own,
            peak_bytes: peak,
            holds_tree,
            not_the_tree: not_the_tree.filter(|_| !holds_tree),
            lifetime_peak_bytes: c
                .peak_bytes
                .filter(|_| peak.is_none() && !c.peak_during_recording),
            peak_counter: c.peak_counter.clone(),
            largest_current_bytes: largest.0,
            anon_at_largest_bytes: largest.1,
            file_at_largest_bytes: largest.2,
            limit_bytes: c.limit_bytes,
            limits: c.limits.clone(),
            swap_peak_bytes: ends.iter().filter_map(|e| e.swap_peak_bytes).max(),
            oom_kills,
            events_during: c.events_during,
            moved_out: ends
                .iter()
                .flat_map(|e| e.moved_out.iter().copied())
                .collect(),
            inside_removed: ends.iter().map(|e| e.inside_removed).sum(),
            inside_killed: ends.iter().map(|e| e.inside_killed).sum(),
            error: ends.iter().find_map(|e| e.error.clone()),
            peak_fell: false,
        })
    }

    /// The largest number known of the cgroup: its peak, else its largest sampled usage.
    pub fn top_bytes(&self) -> u64 {
        self.peak_bytes.unwrap_or(0).max(self.largest_current_bytes)
    }

    /// What the reader must know of the cgroup: its peak near its limit or the machine's
    /// memory, the tree held at a limit, OOM kills, what memmon moved out or removed, an error.
    fn warnings(&self, mem_total: Option<u64>) -> Vec<Warning> {
        let mut w = Vec::new();
        let top = self.top_bytes();
        if let Some(l) = self.limit_bytes.filter(|&l| near(top, l)) {
            w.push(Warning::CgroupNearLimit {
                top_bytes: top,
                limit_bytes: l,
                version: self.version,
            });
        }
        for l in self.limits.iter().filter(|l| l.held_at()) {
            w.push(Warning::HeldAtLimit {
                limit: l.clone(),
                version: self.version,
            });
        }
        if let Some(t) = mem_total.filter(|&t| near(top, t)) {
            w.push(Warning::CgroupNearMemTotal {
                top_bytes: top,
                mem_total_bytes: t,
            });
        }
        if self.oom_kills > 0 {
            w.push(Warning::CgroupOomKills {
                kills: self.oom_kills,
                path: self.path.clone(),
                version: self.version,
            });
        }
        if !self.moved_out.is_empty() {
            w.push(Warning::MovedOut {
                pids: self.moved_out.clone(),
            });
        }
        if self.inside_removed > 0 {
            w.push(Warning::InsideRemoved {
                removed: self.inside_removed,
                killed: self.inside_killed,
            });
        }
        if let Some(e) = &self.error {
            w.push(Warning::CgroupError {
                path: self.path.clone(),
                error: e.clone(),
            });
        }
        w
    }
}

/// What a session watched, as its metadata names it: said `pid 4121 (proverd)`
/// (`render/summary.rs`, whose words the JSON's `target` holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// How it was found: `pid`, `pidfile`, `name` or `command`.
    pub mode: String,
    /// What the user gave: the PID, the pidfile's path, the regex, or the command line.
    pub spec: String,
    /// The process's command name.
    pub comm: String,
}

impl Watched {
    fn of(m: &Meta) -> Watched {
        Watched {
            mode: m.target.mode.clone(),
            spec: m.target.spec.clone(),
            comm: m.target.comm.clone(),
        }
    }

    /// memmon launched it (`record -- COMMAND`), rather than attached to it.
    pub fn launched(&self) -> bool {
        self.mode == "command"
    }
}

/// How a recording ended: said by `render/summary.rs`, whose words the JSON's `ended` holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// As its end record says.
    Record(Box<EndedBy>),
    /// No end record: the recorder was killed, or is still running.
    NoEndRecord,
    /// A file another tool wrote (named here, `ReadInfo::source`): no recorder's end in it.
    NotRecordedIn(String),
}

/// What an end record says of how the recording and its target ended (a session's too, in an
/// `--append`ed recording's list): said by `render/summary.rs`.
#[derive(Debug, Clone, PartialEq)]
pub struct EndedBy {
    pub reason: EndReason,
    /// The signal that stopped memmon (`EndReason::Signal`), by name.
    pub memmon_signal: Option<String>,
    /// The target's exit code or terminating signal, when memmon learnt it.
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    /// A SIGKILL while the recorded cgroup counted an OOM kill: most likely the kernel's OOM
    /// killer's.
    pub oom_killer: Option<OomKiller>,
    /// Why the recording could not go on.
    pub error: Option<String>,
}

/// The cgroup whose OOM killer most likely killed the target, and at which limit.
#[derive(Debug, Clone, PartialEq)]
pub struct OomKiller {
    pub cgroup: String,
    /// The OOM kills it counted during the recording.
    pub kills: u64,
    /// The limit of the cgroup (or of one above it) the kill came at (`probe::limits::oom_at`).
    pub at: Option<crate::probe::limits::LimitEnd>,
    /// Else the cgroup's own limit, where it has one.
    pub limit_bytes: Option<u64>,
    pub version: crate::probe::cgroup::CgroupVersion,
}

impl EndedBy {
    pub fn of(e: &EndInfo) -> EndedBy {
        EndedBy {
            reason: e.reason,
            memmon_signal: e.memmon_signal.clone(),
            exit_code: e.exit_code,
            exit_signal: e.exit_signal,
            oom_killer: e
                .cgroup
                .as_ref()
                .filter(|c| e.exit_signal == Some(libc::SIGKILL) && c.events_during.oom_kill > 0)
                .map(|c| OomKiller {
                    cgroup: c.path.clone(),
                    kills: c.events_during.oom_kill,
                    at: crate::probe::limits::oom_at(&c.limits).cloned(),
                    limit_bytes: c.limit_bytes,
                    version: c.version,
                }),
            error: e.error.clone(),
        }
    }
}

/// Where an exact peak stops being exact, as every reader says it beside the peak: said by
/// `render/summary.rs`, whose words the JSON's `peak_exact_up_to` holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ExactUpTo {
    /// The last row of a session with no end record (the recorder was killed).
    LastRow,
    /// The last sample, `gap_s` before the attached target exited, its exit record unread:
    /// a rise after it is not seen. `exit_records`: what the end record says of them.
    LastSample {
        gap_s: f64,
        exit_records: Option<String>,
    },
}

/// Why a cgroup's peak is not the tree's: said by `render/summary.rs`, whose words the JSON's
/// `not_the_tree` holds.
#[derive(Debug, Clone, PartialEq)]
pub enum NotTheTree {
    /// The recorder's reason, from the metadata (`CgroupMeta::not_the_tree`).
    Recorded(String),
    /// Processes of the tree left it (from the end records): their memory since is charged
    /// where they went.
    Left(Vec<LeftCgroup>),
    /// The largest process's own peak is above the cgroup's by more than its page cache
    /// explains: some of the tree's memory was charged elsewhere.
    ProcessAbove {
        process_bytes: u64,
        cgroup_bytes: u64,
    },
    /// A process of the tree was found outside it.
    FoundOutside,
}

/// The summary of one recording, as printed and as `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub file: Option<String>,
    pub samples: u64,
    pub duration_s: f64,
    pub first_unix_ms: u64,
    pub last_unix_ms: u64,
    /// The recording's peak, decided once (`model::peak::PeakFacts::decide`) from `facts`: the
    /// number every budget, comparison and table takes.
    pub peak: Peak,
    /// What the kernel and the samples say of the whole recording (all its sessions).
    #[serde(flatten)]
    pub facts: PeakFacts,
    /// When the largest sampled RSS (`sampled_peak_rss_bytes`) was, its largest process, and
    /// how many processes the tree had then.
    pub sampled_peak_unix_ms: u64,
    pub sampled_peak_elapsed_s: f64,
    /// The session of the sampled peak's row (from 1), and its x on the recording's time axis
    /// (seconds, as `plot` and `report` draw it; `analysis::timeline`).
    pub sampled_peak_session: u32,
    pub sampled_peak_x_s: f64,
    pub sampled_peak_pid: i32,
    pub sampled_peak_processes: u32,
    /// Why the kernel's peak counts for the recording (launched, reset at the start, risen),
    /// or why it does not (set before the recording began).
    pub kernel_peak_window: KernelPeakWindow,
    /// An attached target that exited without its exit record read (no taskstats): its kernel
    /// peak is exact up to the last sample only, and this is how many seconds before the exit
    /// that sample was (a rise in between is not seen). `None` when the peak holds to the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_peak_exact_until_s: Option<f64>,
    /// The high-water mark of an attached process that was set before the recording began: its
    /// lifetime peak, not the recording's (never compared, never warned about).
    pub lifetime_peak_rss_bytes: Option<u64>,
    pub rusage_maxrss_bytes: Option<u64>,
    /// The memory cgroup recorded (`--cgroup`, or memmon's own for a launched command).
    pub cgroup: Option<CgroupSummary>,
    /// The 10th percentile of sampled RSS: 90% of samples were at or above it.
    pub idle_rss_bytes: u64,
    pub min_rss_bytes: u64,
    pub mean_rss_bytes: u64,
    /// The largest locked (VmLck), pinned (VmPin) and shared (RssShmem) memory sampled...
    #[serde(flatten)]
    pub held: HeldPeaks,
    /// ...and each at idle (its 10th percentile, as the idle floor is RSS's).
    pub held_at_idle: HeldPeaks,
    /// Major faults, memory stall, swap and huge pages over the whole recording (every
    /// session's).
    #[serde(flatten)]
    pub health: MemoryHealth,
    /// What was read of PSS (`--pss`): peak only when a read came at the RSS peak...
    pub pss: Option<PssReads>,
    /// ...and then its largest read, the peak PSS.
    pub peak_pss_bytes: Option<u64>,
    /// PSS sum of the tree on the row of the sampled RSS peak, when it was read there.
    pub pss_at_peak_bytes: Option<u64>,
    pub missed_ticks: u64,
    pub restarts: u64,
    pub interval: Option<String>,
    /// What the last session watched (`sessions` lists each of an `--append`ed recording).
    pub target: Option<Watched>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionSummary>,
    pub ended: Ended,
    pub end: Option<EndInfo>,
    /// The processes the sessions' end records list, every session's (an `--append`ed
    /// recording's earlier ones too), largest peak within the recording first; whether every one that left had its
    /// exit record read.
    #[serde(skip)]
    pub processes: Vec<ProcessRecord>,
    #[serde(skip)]
    pub processes_exit_records: bool,
    /// GPU memory, when the recording has it (`record --gpu`, or NVML loaded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::analysis::gpu::GpuPeak>,
    pub truncated_line: Option<u64>,
    /// The peak is a session's that has rows and no end record (the recorder was killed, or is
    /// still writing): exact up to its last row only.
    #[serde(skip)]
    pub peak_unended: bool,
    /// Where the exact `peak` stops being exact, as every reader says it beside the peak: at
    /// the last row, with no end record (the recorder was killed), or at a target's last sample
    /// before its unseen exit. Absent where the peak is exact for the whole recording, or not
    /// exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_exact_up_to: Option<ExactUpTo>,
    /// In a recording some of whose sessions hold bench runs, the sessions (from 1) that hold
    /// none (an `--append`ed `record`): a reader that takes the runs one by one leaves them out,
    /// and says so; a budget judges the whole recording too.
    #[serde(skip)]
    pub sessions_without_runs: Vec<usize>,
    /// Rows the end records count that the file does not hold, with the session (from 1) they
    /// were found in (`rows_lost_warnings` says it; the warning is in `warnings`).
    #[serde(skip)]
    pub rows_lost: Vec<(usize, RowLoss)>,
    /// What the reader must know besides the numbers (`render/warnings.rs` says each).
    pub warnings: Vec<Warning>,
    /// `phases`, `runs` and `by_label` (analysis/phases.rs).
    #[serde(flatten)]
    pub spans: Phases,
    /// The anatomy table the metadata names (`record --anatomy`), relative to the recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anatomy_table: Option<String>,
    /// The NUMA table the metadata names (its file name), to be read beside the recording.
    #[serde(skip)]
    pub numa_table: Option<String>,
    /// The cgroup's most memory on each NUMA node (from the NUMA table); empty without one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub numa_nodes: Vec<crate::analysis::numa::NodePeak>,
    /// On a machine with several NUMA nodes, why the recording has no memory per node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_not_read: Option<String>,
    /// What grew between the idle floor and the peak, from that table (the caller reads it:
    /// `Summary::with_anatomies`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anatomy: Option<crate::analysis::anatomy::Growth>,
    /// What grew in each phase that has an anatomy at its end (`phase-end`, or the recording's
    /// `end` for the last), from the one at or before its start.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phase_anatomy: Vec<crate::analysis::anatomy::SpanGrowth>,
    /// The anatomy taken at the highest RSS, whole (the report draws it; its changes are in
    /// `anatomy`).
    #[serde(skip)]
    pub anatomy_at_peak: Option<crate::model::anatomy::Anatomy>,
    /// Every anatomy read of the sessions, written or dropped (their end records), summed.
    #[serde(skip)]
    pub anatomy_reads: Option<crate::format::meta::AnatomyReads>,
    /// The ledger of mappings of the last session that ran one (its end record): what it read,
    /// lost and cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger: Option<crate::format::meta::LedgerEnd>,
}

impl Summary {
    /// The phase with the highest exact peak above the recording's peak, where that is not
    /// exact (the marks before the first marker predate a recording made with
    /// `--phase-peaks`): the recording's peak is at least that phase's.
    pub fn exact_phase_above_peak(&self) -> Option<&crate::analysis::span::Span> {
        if self.peak.exact {
            return None;
        }
        self.spans
            .phases
            .iter()
            .filter(|p| p.peak.exact && p.peak.bytes > self.peak.bytes)
            .max_by_key(|p| p.peak.bytes)
    }

    /// Where the kernel's per-process peak stops being exact: at the last row of a session with
    /// no end record, or at the last sample of a target that exited unseen after it. `None`
    /// where it holds for the whole recording.
    pub fn kernel_exact_only_up_to(&self) -> Option<ExactUpTo> {
        if let Some(gap_s) = self.kernel_peak_exact_until_s {
            return Some(ExactUpTo::LastSample {
                gap_s,
                exit_records: self.end.as_ref().and_then(|e| e.exit_records.clone()),
            });
        }
        self.peak_unended.then_some(ExactUpTo::LastRow)
    }

    /// Where the headline's exact peak stops being exact (`peak_exact_up_to`); `None` where it
    /// is exact for the whole recording, or not exact at all.
    fn peak_exact_only_up_to(&self) -> Option<ExactUpTo> {
        if !self.peak.exact {
            return None;
        }
        match self.peak.source {
            PeakSource::Cgroup => self.peak_unended.then_some(ExactUpTo::LastRow),
            PeakSource::Sampled => None,
            _ => self.kernel_exact_only_up_to(),
        }
    }

    /// Adds what grew between the idle floor and the peak, from the recording's anatomies; a
    /// table too short to tell is said.
    /// The NUMA table's rows (`unix_ms`, bytes per node of `nodes`): each node's most memory
    /// over the recording, and over each phase and run.
    pub fn with_numa(&mut self, nodes: &[u32], rows: &[(u64, Vec<u64>)]) {
        use crate::analysis::numa::peaks;
        self.numa_nodes = peaks(nodes, rows, self.first_unix_ms, self.last_unix_ms);
        for s in self
            .spans
            .phases
            .iter_mut()
            .chain(self.spans.runs.iter_mut())
        {
            s.numa_nodes = peaks(nodes, rows, s.start_unix_ms, s.end_unix_ms);
        }
    }

    pub fn with_anatomies(&mut self, anatomies: &[crate::model::anatomy::Anatomy]) {
        self.anatomy = crate::analysis::anatomy::growth(anatomies, self.idle_rss_bytes);
        if let (Some(g), Some(r)) = (&mut self.anatomy, self.anatomy_reads) {
            g.with_reads(r);
        }
        self.phase_anatomy = crate::analysis::anatomy::span_growth(anatomies, &self.spans.phases);
        self.anatomy_at_peak =
            crate::analysis::anatomy::at_peak(anatomies).map(|i| anatomies[i].clone());
        if self.anatomy.is_none() {
            self.warnings.push(Warning::FewAnatomies {
                anatomies: anatomies.len(),
            });
        }
    }

    /// What the reader must know of rows the end records count that the file does not hold:
    /// a warning per loss, naming the file and both counts, and what the loss leaves of the
    /// peak. Every reader of recordings says these (summary, compare, plot, report).
    pub fn rows_lost_warnings(&self) -> Vec<Warning> {
        let several = self.sessions.len() > 1;
        self.rows_lost
            .iter()
            .map(|&(session, loss)| {
                let peak = if self.peak.exact && loss.sidecar {
                    // The sidecar's reading is this file's only if the sidecar is.
                    LossLeaves::ExactIfTheSidecarIs
                } else if self.peak.exact {
                    LossLeaves::StillExact
                } else if self.facts.rows_lost {
                    LossLeaves::ExactToTheLastRowLeft
                } else {
                    LossLeaves::RowsNumbersStop
                };
                Warning::RowsLost {
                    file: self.file.clone(),
                    session: Some(session).filter(|_| several),
                    loss,
                    peak,
                }
            })
            .collect()
    }

    /// The summary of a recording named `file`, from the builder that saw it (its sessions'
    /// metadata and ends, streamed by the reader) and what reading it found besides (`info`).
    pub fn of_read(mut b: SummaryBuilder, file: String, info: &ReadInfo) -> Summary {
        b.imported = info.source.is_some();
        let mut sum = b.finish(Some(file), info.truncated_line);
        // A file another tool wrote: say how it was read and what it lacks.
        if let Some(source) = &info.source {
            sum.ended = Ended::NotRecordedIn(source.clone());
        }
        sum.warnings
            .extend(info.notes.iter().cloned().map(Warning::ReadNote));
        sum
    }
}

/// A histogram of byte values with 1/1024-octave buckets (each under 0.1% wide) that keeps the
/// smallest exact value seen in each bucket, so a percentile is reported as a real sample.
struct LogHistogram {
    /// Buckets `first..first + counts.len()`: only the span between the lowest and the highest
    /// value seen, so a steady daemon holds a handful of buckets, not the ~30,000 from 0 to its
    /// 200 GiB (12 bytes each, in four histograms).
    first: usize,
    counts: Vec<u32>,
    mins: Vec<u64>,
    total: u64,
}

const SUB_BITS: u32 = 10;

impl LogHistogram {
    fn new() -> Self {
        LogHistogram {
            first: 0,
            counts: Vec::new(),
            mins: Vec::new(),
            total: 0,
        }
    }

    fn bucket(v: u64) -> usize {
        if v < (1 << SUB_BITS) {
            return v as usize;
        }
        let log = 63 - v.leading_zeros();
        let sub = (v >> (log - SUB_BITS)) as usize & ((1 << SUB_BITS) - 1);
        (((log - SUB_BITS + 1) as usize) << SUB_BITS) + sub
    }

    fn add(&mut self, v: u64) {
        let b = Self::bucket(v);
        // Below `first`, the subtraction wraps to past the end: both widen.
        let mut i = b.wrapping_sub(self.first);
        if i >= self.counts.len() {
            i = self.widen(b);
        }
        self.counts[i] = self.counts[i].saturating_add(1);
        self.mins[i] = self.mins[i].min(v);
        self.total += 1;
    }

    /// Makes room for bucket `b` and returns its index: rare (a value below or above all seen
    /// so far), so kept out of `add`, which runs for every row a summary reads.
    #[cold]
    #[inline(never)]
    fn widen(&mut self, b: usize) -> usize {
        if self.counts.is_empty() {
            self.first = b;
        } else if b < self.first {
            let more = self.first - b;
            self.counts.splice(0..0, std::iter::repeat_n(0, more));
            self.mins.splice(0..0, std::iter::repeat_n(u64::MAX, more));
            self.first = b;
        }
        let i = b - self.first;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
            self.mins.resize(i + 1, u64::MAX);
        }
        i
    }

    fn percentile(&self, p: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((p / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return Some(self.mins[b]);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::peak::PeakScope;

    const MIB: u64 = 1 << 20;

    fn s(elapsed: f64, rss: u64, hwm: u64) -> Sample {
        Sample {
            unix_ms: 1_000_000 + (elapsed * 1000.0) as u64,
            elapsed_s: elapsed,
            rss_bytes: rss,
            top_rss_bytes: rss,
            hwm_bytes: hwm,
            hwm_sum_bytes: hwm,
            processes: 1,
            top_pid: 1,
            ..Sample::default()
        }
    }

    fn meta(mode: &str, reset: bool) -> Meta {
        Meta {
            peak_reset_at_start: reset,
            ..Meta::example(mode)
        }
    }

    /// The summary of `rows`, one session described by `meta` and ended by `end`.
    fn summarize(rows: &[Sample], meta: Option<&Meta>, end: Option<&EndInfo>) -> Summary {
        let mut b = SummaryBuilder::new();
        if let Some(m) = meta {
            b.session(m);
        }
        rows.iter().for_each(|r| b.push(r));
        if let Some(e) = end {
            b.session_end(e);
        }
        b.finish(None, None)
    }

    #[test]
    fn a_command_that_ended_before_its_first_sample_has_the_peak_its_rows_would_have_had() {
        // No row: the end record's peaks are decided as at the end of a session with rows, so
        // the command's own exit record gives its exact peak (one process: what it needed, not
        // the 512 KiB its cgroup was charged, without the page cache of its binary), as it does
        // for a longer command (and ru_maxrss at or below memmon's own RSS at the fork says
        // nothing of the command).
        let end = EndInfo {
            command_wall_s: Some(0.002),
            ended_unix_ms: 5_000,
            rusage_maxrss_bytes: Some(4 * MIB),
            launcher_rss_bytes: Some(6 * MIB),
            exit_records: Some(crate::format::meta::EXIT_RECORDS_READ.into()),
            exit_peak_bytes: Some(MIB),
            cgroup: Some(crate::format::meta::CgroupEnd::example_own(512 * 1024)),
            ..EndInfo::default()
        };
        let sum = summarize(&[], Some(&meta("command", false)), Some(&end));
        assert_eq!(sum.samples, 0);
        assert_eq!(
            (sum.peak.bytes, sum.peak.source, sum.peak.exact),
            (MIB, PeakSource::Vmhwm, true)
        );
        assert_eq!(
            (
                sum.facts.kernel_peak_rss_bytes,
                sum.facts.kernel_peak_source
            ),
            (Some(MIB), Some(PeakSource::Vmhwm))
        );
        assert_eq!(sum.duration_s, 0.002);
    }

    /// A pidfile target that restarts: the old process (`old_hwm` MiB its mark at every row,
    /// 100 MiB sampled) replaced by one whose marks reach `new_hwm` MiB. `records`: exit records
    /// read, the restart row counting the old process's departure as memmon writes it now;
    /// without, as an older memmon wrote it (no departure counted).
    fn restarted(old_hwm: u64, new_hwm: u64, reset: bool, records: bool) -> Summary {
        let restart = Sample {
            event: Some(Event::Restart(9)),
            departed: records.into(),
            ..s(2.0, 60 * MIB, 60 * MIB)
        };
        let rows = [
            Sample {
                event: Some(Event::Start),
                ..s(0.0, 100 * MIB, old_hwm * MIB)
            },
            s(1.0, 100 * MIB, old_hwm * MIB),
            restart,
            s(3.0, 60 * MIB, new_hwm * MIB),
            s(4.0, 60 * MIB, new_hwm * MIB),
        ];
        let end = EndInfo {
            exit_records: Some(if records {
                crate::format::meta::EXIT_RECORDS_READ.into()
            } else {
                "off (--no-taskstats)".into()
            }),
            ..EndInfo::default()
        };
        summarize(&rows, Some(&meta("pidfile", reset)), Some(&end))
    }

    #[test]
    fn a_restart_without_exit_records_leaves_the_kernel_peak_a_lower_bound() {
        // The old process may have peaked after its last row: with no exit record read, the
        // peak (its own 150 MiB, risen in the recording) is only a lower bound.
        let sum = restarted(150, 60, true, false);
        assert_eq!(sum.facts.departed, 1);
        assert_eq!(sum.peak.bytes, 150 * MIB);
        assert_eq!(sum.peak.scope, PeakScope::LargestProcessSeen);
        assert!(!sum.peak.exact);
        // With them, exact.
        let sum = restarted(150, 60, true, true);
        assert_eq!((sum.peak.bytes, sum.peak.exact), (150 * MIB, true));
    }

    #[test]
    fn the_marks_of_a_process_that_took_over_count_though_the_old_ones_never_rose() {
        // Attached: the old process's 300 MiB mark predates the recording and never rose.
        // The new process's marks all fall in the recording: 214 MiB is reached in it, a lower
        // bound (the old process's own peak in the recording is not known) ...
        let sum = restarted(300, 214, false, true);
        assert_eq!(sum.facts.kernel_peak_rss_bytes, Some(214 * MIB));
        assert_eq!(sum.peak.bytes, 214 * MIB);
        assert!(sum.facts.restart_peak_unknown);
        assert_eq!(sum.peak.scope, PeakScope::LargestProcessSeen);
        assert!(!sum.peak.exact);
        assert!(
            sum.warnings
                .iter()
                .map(|w| w.to_string())
                .any(|w| w.contains("the target restarted")),
            "{:?}",
            sum.warnings
        );
        assert!(
            !sum.warnings
                .iter()
                .map(|w| w.to_string())
                .any(|w| w.contains("dropped exit records")),
            "{:?}",
            sum.warnings
        );
        // ... exact once above the old mark, which bounds the old process's peak ...
        let sum = restarted(300, 350, false, true);
        assert_eq!((sum.peak.bytes, sum.peak.exact), (350 * MIB, true));
        // ... and exact with the marks reset at the start.
        let sum = restarted(100, 214, true, true);
        assert_eq!((sum.peak.bytes, sum.peak.exact), (214 * MIB, true));
    }

    #[test]
    fn a_phase_across_a_restart_with_no_peak_known_of_the_old_process_says_why_it_is_a_lower_bound()
    {
        let rows = [
            Sample {
                event: Some(Event::Start),
                ..s(0.0, 100 * MIB, 300 * MIB)
            },
            Sample {
                event: Some(Event::Mark("work".into())),
                ..s(1.0, 100 * MIB, 300 * MIB)
            },
            Sample {
                event: Some(Event::Restart(9)),
                departed: 1,
                ..s(2.0, 60 * MIB, 60 * MIB)
            },
            s(3.0, 60 * MIB, 214 * MIB),
        ];
        let end = EndInfo {
            exit_records: Some(crate::format::meta::EXIT_RECORDS_READ.into()),
            ..EndInfo::default()
        };
        let sum = summarize(&rows, Some(&meta("pidfile", false)), Some(&end));
        let work = &sum.spans.phases[0];
        assert!(work.facts.restart_peak_unknown && work.peak.scope.is_partial());
        let text = sum.render();
        assert!(
            text.contains("≥: the target restarted in the phases so marked"),
            "{text}"
        );
        assert!(
            !text.contains("with no exit record read: the peak is"),
            "{text}"
        );
    }

    #[test]
    fn the_sampled_peak_is_the_largest_sample_with_its_time() {
        let rows: Vec<Sample> = [(0.0, 10), (1.0, 50), (2.0, 30), (3.0, 10)]
            .iter()
            .map(|&(t, rss)| s(t, rss * MIB, 50 * MIB))
            .collect();
        let sum = summarize(&rows, Some(&meta("command", false)), None);
        assert_eq!(sum.facts.sampled_peak_rss_bytes, 50 * MIB);
        assert_eq!(sum.sampled_peak_elapsed_s, 1.0);
        assert_eq!(sum.duration_s, 3.0);
        assert_eq!(
            (sum.peak.bytes, sum.peak.source, sum.peak.scope),
            (50 * MIB, PeakSource::Vmhwm, PeakScope::Process)
        );
        assert!(
            !sum.warnings
                .iter()
                .map(|w| w.to_string())
                .any(|w| w.contains("exit record")),
            "{:?}",
            sum.warnings
        );
    }

    #[test]
    fn a_missed_peak_warns_and_the_kernel_peak_is_the_peak() {
        let sum = summarize(
            &[s(0.0, 100 * MIB, 100 * MIB), s(1.0, 100 * MIB, 300 * MIB)],
            None,
            None,
        );
        assert_eq!(sum.facts.kernel_peak_rss_bytes, Some(300 * MIB));
        assert_eq!(
            (sum.peak.bytes, sum.peak.source),
            (300 * MIB, PeakSource::Vmhwm)
        );
        assert_eq!(
            sum.kernel_peak_window,
            KernelPeakWindow::RoseDuringRecording
        );
        assert!(sum.warnings[0].to_string().starts_with("warning:"));
    }

    #[test]
    fn a_trees_missed_peak_warning_names_the_largest_process_not_the_sampled_sum() {
        // Two processes: the sum reached 150 MiB, the largest process 100 MiB at a tick and
        // 200 MiB by its VmHWM. The warning holds 100 against 200, and says so.
        let tick = |t: f64, top: u64, hwm: u64| Sample {
            rss_bytes: 150 * MIB,
            top_rss_bytes: top * MIB,
            processes: 2,
            ..s(t, 150 * MIB, hwm * MIB)
        };
        let sum = summarize(
            &[tick(0.0, 100, 100), tick(1.0, 100, 200)],
            Some(&meta("command", false)),
            None,
        );
        let w = sum.warnings[0].to_string();
        assert!(
            w.starts_with("warning: the largest process's sampled peak (100.0 MiB) is 50% of the kernel's peak of the largest process (200.0 MiB)"),
            "{w}"
        );
    }

    #[test]
    fn a_high_water_mark_that_predates_an_attached_recording_is_its_lifetime_peak_only() {
        let rows: Vec<Sample> = (0..5).map(|t| s(t as f64, 10 * MIB, 800 * MIB)).collect();
        let sum = summarize(&rows, Some(&meta("pid", false)), None);
        assert_eq!(sum.facts.kernel_peak_rss_bytes, None);
        assert_eq!(sum.kernel_peak_window, KernelPeakWindow::BeforeRecording);
        assert_eq!(sum.lifetime_peak_rss_bytes, Some(800 * MIB));
        assert_eq!(
            (sum.peak.source, sum.peak.exact),
            (PeakSource::Sampled, false)
        );
        assert!(
            !sum.warnings
                .iter()
                .map(|w| w.to_string())
                .any(|w| w.contains("exit record")),
            "{:?}",
            sum.warnings
        );
        let text = sum.render();
        assert!(text.contains("record with --reset-peaks"), "{text}");
        assert!(text.contains("lifetime peak 800.0 MiB"), "{text}");
    }

    #[test]
    fn a_mark_no_higher_than_the_first_rows_rss_was_reached_in_the_recording() {
        // Attached as the process held its highest so far (VmHWM = VmRSS, 300 MiB): its mark
        // never rose after, but it was reached at the first row, so it is the recording's
        // exact peak, not a mark set before.
        let rows = [
            s(0.0, 300 * MIB, 300 * MIB),
            s(1.0, 100 * MIB, 300 * MIB),
            s(2.0, 120 * MIB, 300 * MIB),
        ];
        let sum = summarize(&rows, Some(&meta("pid", false)), None);
        assert_eq!(
            (sum.peak.bytes, sum.peak.source, sum.peak.exact),
            (300 * MIB, PeakSource::Vmhwm, true)
        );
        assert_eq!(
            sum.kernel_peak_window,
            KernelPeakWindow::RoseDuringRecording
        );
        assert_eq!(sum.lifetime_peak_rss_bytes, None);
        // A mark above the first row's RSS by more than the counters' batching stays the
        // lifetime's.
        let rows = [s(0.0, 299 * MIB, 300 * MIB), s(1.0, 100 * MIB, 300 * MIB)];
        let sum = summarize(&rows, Some(&meta("pid", false)), None);
        assert_eq!(sum.kernel_peak_window, KernelPeakWindow::BeforeRecording);
        assert!(!sum.peak.exact);
    }

    #[test]
    fn a_refused_reset_says_why_and_what_would_make_it_work_not_to_reset() {
        let rows: Vec<Sample> = (0..5).map(|t| s(t as f64, 10 * MIB, 800 * MIB)).collect();
        let m = meta("pid", true);
        let end = EndInfo {
            peak_reset_failures: 1,
            ..EndInfo::default()
        };
        let sum = summarize(&rows, Some(&m), Some(&end));
        assert_eq!(sum.kernel_peak_window, KernelPeakWindow::BeforeRecording);
        let text = sum.render();
        assert!(!text.contains("--reset-peaks"), "{text}");
        assert!(
            text.contains("resetting it was refused")
                && text.contains("run memmon as the target's user or as root"),
            "{text}"
        );
    }

    #[test]
    fn a_bench_run_the_recording_ended_inside_is_judged_by_budgets_too() {
        // Run 1 ended; the file ends inside run 2, whose 80 MiB the summary lists: a budget
        // of 60 MiB is exceeded, not kept on run 1's 40 MiB alone.
        let ev = |row: Sample, e: Event| Sample {
            event: Some(e),
            ..row
        };
        let rows = [
            s(0.0, 10 * MIB, 10 * MIB),
            ev(s(0.1, 10 * MIB, 10 * MIB), Event::RunStart(1)),
            s(0.2, 40 * MIB, 40 * MIB),
            ev(s(0.3, 10 * MIB, 40 * MIB), Event::RunEnd(1)),
            ev(s(0.4, 10 * MIB, 10 * MIB), Event::RunStart(2)),
            s(0.5, 80 * MIB, 80 * MIB),
        ];
        let sum = summarize(&rows, Some(&meta("pid", true)), None);
        assert!(!sum.spans.runs[1].complete);
        let budgets = crate::analysis::budget::Budgets {
            max_peak: Some(60 * MIB),
            ..Default::default()
        };
        let checks = budgets.check_summary(&sum, "r.csv");
        let judged: Vec<(&str, bool)> = checks.iter().map(|c| (c.of.as_str(), c.passed)).collect();
        assert_eq!(
            judged,
            [("r.csv#run 1", true), ("r.csv#run 2 (incomplete)", false)]
        );
    }

    #[test]
    fn with_phase_peaks_the_rows_after_the_first_markers_reset_hold_the_recordings_peak() {
        // An attached process recorded with --phase-peaks: its marks are reset after each
        // marker's row, so the rows after the first one hold exact peaks of what followed.
        let m = Meta {
            phase_peaks: true,
            ..meta("pid", false)
        };
        let mark = |t: f64, rss: u64, hwm: u64| Sample {
            event: Some(Event::Mark("work".into())),
            ..s(t, rss, hwm)
        };
        let peak_of = |lifetime: u64, before: u64, after: u64| {
            let rows = [
                s(0.0, 100 * MIB, lifetime * MIB),
                mark(1.0, 100 * MIB, before * MIB),
                s(2.0, 100 * MIB, after * MIB),
                s(3.0, 100 * MIB, 100 * MIB),
            ];
            summarize(&rows, Some(&m), Some(&EndInfo::default()))
        };
        // The mark before the marker did not rise (at most its 150 MiB then); the 200 MiB
        // after it are above that: the recording's exact peak.
        let sum = peak_of(150, 150, 200);
        assert_eq!((sum.peak.bytes, sum.peak.exact), (200 * MIB, true));
        // The mark rose before the marker: that part's peak is exact too, and the larger.
        let sum = peak_of(100, 180, 120);
        assert_eq!((sum.peak.bytes, sum.peak.exact), (180 * MIB, true));
        // A lifetime mark of 300 MiB from before the recording: the part before the marker
        // may have reached up to it, so the recording's peak is not known exactly; it is at
        // least the 200 MiB marked after the reset (the phase's exact peak), a lower bound
        // every reader and budget takes.
        let sum = peak_of(300, 300, 200);
        assert!(!sum.peak.exact && sum.facts.reset_peak_unknown);
        assert_eq!(sum.peak.bytes, 200 * MIB);
        assert_eq!(sum.peak.scope, PeakScope::LargestProcessSeen);
        assert_eq!(sum.peak.at_least(), "≥ ");
        assert!(sum.exact_phase_above_peak().is_none());
        assert!(
            sum.warnings.iter().map(|w| w.to_string()).any(|w| w
                .starts_with("warning: with --phase-peaks the marks were reset")
                && w.contains("though at most 300.0 MiB (its mark at the first row)")),
            "{:?}",
            sum.warnings
        );
        // The mark from before the recording bounds the peak from above, and is said as the
        // lifetime peak, with the number given named for what it is.
        assert_eq!(sum.lifetime_peak_rss_bytes, Some(300 * MIB));
        let text = sum.render();
        assert!(
            text.contains("(reached after the first marker's reset)")
                && text.contains("lifetime peak 300.0 MiB")
                && text.contains("the peak before it is at most this"),
            "{text}"
        );
        let budgets = crate::analysis::budget::Budgets {
            max_peak: Some(150 * MIB),
            ..Default::default()
        };
        let checks = budgets.check_summary(&sum, "r.csv");
        assert_eq!(checks.len(), 1);
        assert!(!checks[0].passed, "at least 200 MiB is over the budget");
        // A larger sampled RSS before the marker raises the lower bound.
        let rows = [
            s(0.0, 100 * MIB, 300 * MIB),
            s(0.5, 250 * MIB, 300 * MIB),
            mark(1.0, 100 * MIB, 300 * MIB),
            s(2.0, 100 * MIB, 200 * MIB),
        ];
        let sum = summarize(&rows, Some(&m), Some(&EndInfo::default()));
        assert_eq!((sum.peak.bytes, sum.peak.exact), (250 * MIB, false));
        // A refused reset leaves the marks as they were: only a rise counts.
        let refused = EndInfo {
            peak_reset_failures: 1,
            ..EndInfo::default()
        };
        let rows = [
            s(0.0, 100 * MIB, 150 * MIB),
            mark(1.0, 100 * MIB, 150 * MIB),
            s(2.0, 100 * MIB, 150 * MIB),
        ];
        let sum = summarize(&rows, Some(&m), Some(&refused));
        assert!(!sum.peak.exact);
    }

    #[test]
    fn a_launched_commands_last_phase_runs_on_to_its_exit() {
        // The command printed its marker at +0.3 s, its last row came at +1 s, and it exited
        // 2 s after its start: the phase lasted 1.7 s, as the recording lasted 2 s.
        let rows = [
            s(0.0, 10 * MIB, 10 * MIB),
            Sample {
                event: Some(Event::Mark("b".into())),
                ..s(0.3, 10 * MIB, 10 * MIB)
            },
            s(1.0, 10 * MIB, 10 * MIB),
        ];
        let end = EndInfo {
            command_wall_s: Some(2.0),
            ..EndInfo::default()
        };
        let sum = summarize(&rows, Some(&meta("command", false)), Some(&end));
        assert_eq!(sum.duration_s, 2.0);
        let b = &sum.spans.phases[0];
        assert_eq!(b.end_elapsed_s, 2.0);
        assert!((b.duration_s - 1.7).abs() < 1e-9, "{}", b.duration_s);
        assert_eq!(b.end_unix_ms, 1_002_000);
        // An attached process's last phase ends at its last row.
        let sum = summarize(&rows, Some(&meta("pid", false)), Some(&EndInfo::default()));
        assert_eq!(sum.spans.phases[0].end_elapsed_s, 1.0);
    }

    #[test]
    fn a_recording_without_its_end_record_is_exact_only_up_to_its_last_row() {
        // The recorder was killed at +2 s: what came after is in no row and no record.
        let rows = [s(0.0, 10 * MIB, 10 * MIB), s(2.0, 50 * MIB, 50 * MIB)];
        let sum = summarize(&rows, Some(&meta("command", false)), None);
        let text = sum.render();
        assert!(
            text.contains("exact up to the last row, with no end record")
                && !text.contains("exact within"),
            "{text}"
        );
        assert!(
            sum.warnings.iter().map(|w| w.to_string()).any(|w| w.starts_with(
                "warning: the recording has no end record (the recorder was killed, or is still writing): its peak is exact up to its last row"
            )),
            "{:?}",
            sum.warnings
        );
        let ended = summarize(
            &rows,
            Some(&meta("command", false)),
            Some(&EndInfo::default()),
        );
        assert!(!ended.render().contains("no end record"));
    }

    #[test]
    fn an_appended_recording_whose_peak_is_a_killed_sessions_says_so_and_lists_true_durations() {
        // Session 1 (killed at +2 s, no end record) holds the peak; session 2 ended, its
        // command ran 0.9 s though its rows span 0.5 s.
        let start = |t: f64, rss: u64| Sample {
            event: Some(Event::Start),
            ..s(t, rss, rss)
        };
        let ended = EndInfo {
            command_wall_s: Some(0.9),
            ..EndInfo::default()
        };
        let summarize_two = |first_mib: u64, second_mib: u64| {
            let mut b = SummaryBuilder::new();
            b.session(&meta("command", false));
            b.push(&start(0.0, 10 * MIB));
            b.push(&s(2.0, first_mib * MIB, first_mib * MIB));
            b.session(&meta("command", false));
            b.push(&start(0.0, 10 * MIB));
            b.push(&s(0.5, second_mib * MIB, second_mib * MIB));
            b.session_end(&ended);
            b.finish(None, None)
        };
        let sum = summarize_two(80, 20);
        assert_eq!(sum.peak.bytes, 80 * MIB);
        assert!(sum.peak_unended);
        assert!(
            sum.render()
                .contains("exact up to the last row, with no end record"),
            "{}",
            sum.render()
        );
        let listed: Vec<f64> = sum.sessions.iter().map(|x| x.duration_s).collect();
        assert_eq!(listed, [2.0, 0.9]);
        assert!((sum.duration_s - 2.9).abs() < 1e-9, "the listed ones' sum");
        // The ended session's peak is the recording's: exact as it stands.
        let sum = summarize_two(20, 80);
        assert!(!sum.peak_unended);
        assert!(!sum.render().contains("exact up to the last row"));
    }

    #[test]
    fn an_appended_recordings_process_table_lists_every_sessions_processes() {
        // Session 1's 150 MiB process set the peak; session 2 (a daemon and its helper) ended
        // after it. The table holds both sessions' processes, largest first.
        let proc = |pid, comm: &str, mib| ProcessRecord {
            pid,
            start_time_ticks: 0,
            comm: comm.into(),
            cmdline: String::new(),
            hwm_bytes: mib * MIB,
            recording_peak_bytes: None,
            recording_peak_exact: None,
        };
        let mut b = SummaryBuilder::new();
        b.session(&meta("command", false));
        b.push(&s(0.0, 150 * MIB, 150 * MIB));
        b.session_end(&EndInfo {
            processes: vec![proc(10, "workload", 150)],
            ..EndInfo::default()
        });
        b.session(&meta("pid", false));
        b.push(&Sample {
            event: Some(Event::Start),
            ..s(0.0, 100 * MIB, 100 * MIB)
        });
        b.session_end(&EndInfo {
            processes: vec![proc(20, "daemon", 100), proc(21, "helper", 60)],
            ..EndInfo::default()
        });
        let sum = b.finish(None, None);
        let pids: Vec<i32> = sum.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [10, 20, 21]);
        let text = sum.render();
        assert!(
            text.contains("of 3 listed, every session's") && text.contains("workload"),
            "{text}"
        );
    }

    /// The summary of `rows` with `lost` of the rows its end record counts cut from its end.
    fn summarize_cut(rows: &[Sample], meta: &Meta, end: &EndInfo, lost: u64) -> Summary {
        let mut b = SummaryBuilder::new();
        b.session(meta);
        rows.iter().for_each(|r| b.push(r));
        b.rows_lost(&RowLoss {
            counted: rows.len() as u64 + lost,
            read: rows.len() as u64,
            in_session: true,
            sidecar: true,
            sessions: 1,
            sessions_read: 1,
        });
        b.session_end(end);
        b.finish(Some("cut.csv".into()), None)
    }

    #[test]
    fn rows_cut_from_the_end_leave_the_peak_exact_only_where_the_end_record_covers_them() {
        // Attached, marks reset at the start, stopped while the target ran: the peak is the
        // rows' VmHWM, and the rows cut may hold a higher one.
        let rows = [s(0.0, 10 * MIB, 10 * MIB), s(1.0, 20 * MIB, 20 * MIB)];
        let end = EndInfo {
            samples: 5,
            ..EndInfo::default()
        };
        let sum = summarize_cut(&rows, &meta("pid", true), &end, 3);
        assert_eq!((sum.peak.bytes, sum.peak.exact), (20 * MIB, false));
        assert!(sum.facts.rows_lost);
        let warning = "warning: cut.csv holds 2 rows, but its sidecar's end record counts 5: 3 rows lost (the file was cut after the recording, or the sidecar is another recording's); its peak is exact only up to the last row left";
        assert!(
            sum.warnings
                .iter()
                .map(|w| w.to_string())
                .any(|w| w.starts_with(warning)),
            "{:?}",
            sum.warnings
        );
        assert!(sum
            .render()
            .contains("exact only up to the last row left, a lower bound"));
        // The same rows, whole: exact.
        let whole = summarize(&rows, Some(&meta("pid", true)), Some(&end));
        assert!(whole.peak.exact && !whole.facts.rows_lost);
        assert!(whole.rows_lost_warnings().is_empty());
        // A launched command's ru_maxrss is a mark over its whole life: it holds whatever the
        // rows cut held, and the peak stays exact (said so).
        let launched = EndInfo {
            samples: 5,
            rusage_maxrss_bytes: Some(90 * MIB),
            ..EndInfo::default()
        };
        let sum = summarize_cut(&rows, &meta("command", false), &launched, 3);
        assert_eq!(
            (sum.peak.bytes, sum.peak.source, sum.peak.exact),
            (90 * MIB, PeakSource::RuMaxrss, true)
        );
        assert!(
            sum.warnings
                .iter()
                .map(|w| w.to_string())
                .any(|w| w.contains("3 rows lost")
                    && w.contains("its peak is exact if the sidecar is this file's")),
            "{:?}",
            sum.warnings
        );
    }

    #[test]
    fn after_a_reset_at_the_start_the_later_rows_hold_the_recordings_peak() {
        let rows = [
            s(0.0, 10 * MIB, 800 * MIB),
            s(1.0, 10 * MIB, 10 * MIB),
            s(2.0, 10 * MIB, 40 * MIB),
        ];
        let sum = summarize(&rows, Some(&meta("pid", true)), Some(&EndInfo::default()));
        assert_eq!(sum.peak.bytes, 40 * MIB);
        assert_eq!(sum.kernel_peak_window, KernelPeakWindow::ResetAtStart);
        assert_eq!(sum.facts.exact_within_bytes, Some(512 << 10));
        assert!(
            sum.render().contains("exact within 512.0 KiB"),
            "{}",
            sum.render()
        );
    }

    #[test]
    fn a_launched_commands_high_water_mark_counts_from_its_first_row() {
        let rows = [s(0.0, 10 * MIB, 90 * MIB), s(1.0, 10 * MIB, 90 * MIB)];
        let sum = summarize(&rows, Some(&meta("command", false)), None);
        assert_eq!(sum.facts.kernel_peak_rss_bytes, Some(90 * MIB));
        assert_eq!(sum.kernel_peak_window, KernelPeakWindow::Launched);
    }

    #[test]
    fn ru_maxrss_above_every_sample_is_a_descendants_peak() {
        let end = EndInfo {
            rusage_maxrss_bytes: Some(250 * MIB),
            ..EndInfo::default()
        };
        let rows = [s(0.0, 10 * MIB, 10 * MIB), s(1.0, 10 * MIB, 12 * MIB)];
        let sum = summarize(&rows, Some(&meta("command", false)), Some(&end));
        assert_eq!(
            (sum.peak.bytes, sum.peak.source, sum.peak.scope),
            (250 * MIB, PeakSource::RuMaxrss, PeakScope::LargestProcess)
        );
    }

    /// An attached target that rose from 100 to 200 MiB between samples, then exited 1.5 s
    /// after the last one; `exit_peak`: what its exit record said (None: no record read).
    fn exited_attached(exit_peak: Option<u64>, records: &str) -> Summary {
        let end = EndInfo {
            ended_unix_ms: 1_000_000 + 3_500,
            reason: EndReason::TargetExited,
            exit_records: Some(records.into()),
            exit_peak_bytes: exit_peak,
            target_exit_read: exit_peak.is_some(),
            ..EndInfo::default()
        };
        summarize(
            &[s(0.0, 100 * MIB, 100 * MIB), s(2.0, 200 * MIB, 200 * MIB)],
            Some(&meta("pid", false)),
            Some(&end),
        )
    }

    #[test]
    fn an_exit_record_makes_the_peak_at_exit_the_kernel_peak() {
        let sum = exited_attached(Some(400 * MIB), "taskstats");
        assert_eq!(sum.peak.bytes, 400 * MIB);
        assert_eq!(sum.kernel_peak_exact_until_s, None);
        assert!(sum.render().contains("exact within"), "{}", sum.render());
    }

    #[test]
    fn without_an_exit_record_the_peak_is_exact_only_up_to_the_last_sample() {
        let sum = exited_attached(None, "off (--no-taskstats)");
        assert_eq!(sum.facts.kernel_peak_rss_bytes, Some(200 * MIB));
        assert_eq!(sum.kernel_peak_exact_until_s, Some(1.5));
        let text = sum.render();
        assert!(
            text.contains("exact up to the last sample, 1.50 s before the target exited; a rise after it is not seen (exit records: off (--no-taskstats))"),
            "{text}"
        );
        assert!(!text.contains("exact within"), "{text}");
    }

    #[test]
    fn a_mark_that_never_rose_before_an_unseen_exit_is_not_blamed_on_the_time_before() {
        // The mark (300 MiB, from before the recording) never rose in the rows; the target
        // exited 1.5 s after the last one with no exit record read. The headline is the
        // sampled RSS, and its reason is the unseen exit, not a mark set before (against
        // which --reset-peaks would not help).
        let end = EndInfo {
            ended_unix_ms: 1_000_000 + 3_500,
            reason: EndReason::TargetExited,
            exit_records: Some("off (--no-taskstats)".into()),
            ..EndInfo::default()
        };
        let sum = summarize(
            &[s(0.0, 100 * MIB, 300 * MIB), s(2.0, 120 * MIB, 300 * MIB)],
            Some(&meta("pid", false)),
            Some(&end),
        );
        assert_eq!(
            (sum.peak.bytes, sum.peak.source),
            (120 * MIB, PeakSource::Sampled)
        );
        let text = sum.render();
        assert!(
            text.contains("the target exited 1.50 s after the last sample and no exit record was read (exit records: off (--no-taskstats)): its high-water mark did not rise above its value at the first row up to the last sample, and then is not known"),
            "{text}"
        );
        assert!(!text.contains("record with --reset-peaks"), "{text}");
    }

    /// A daemon (attached) whose worker peaked at 900 MiB and left between two samples; the
    /// recording ended by `--duration`.
    fn forking_daemon(records: &str, lost: u64) -> Summary {
        let end = EndInfo {
            reason: EndReason::Duration,
            exit_records: Some(records.into()),
            exit_records_lost: lost,
            ..EndInfo::default()
        };
        let left = Sample {
            departed: 1,
            hwm_sum_bytes: 1000 * MIB,
            ..s(1.0, 100 * MIB, 900 * MIB)
        };
        summarize(
            &[
                s(0.0, 100 * MIB, 100 * MIB),
                left,
                s(2.0, 100 * MIB, 100 * MIB),
            ],
            Some(&meta("pid", false)),
            Some(&end),
        )
    }

    #[test]
    fn a_worker_that_left_with_its_exit_record_read_is_the_largest_processs_exact_peak() {
        let sum = forking_daemon("taskstats", 0);
        assert_eq!(
            (sum.peak.bytes, sum.peak.scope, sum.peak.exact),
            (900 * MIB, PeakScope::LargestProcess, true)
        );
        assert_eq!(sum.facts.departed, 1);
        assert_eq!(
            (sum.peak.tree_low_bytes, sum.peak.tree_high_bytes),
            (Some(900 * MIB), Some(1000 * MIB))
        );
        assert!(
            !sum.warnings
                .iter()
                .map(|w| w.to_string())
                .any(|w| w.contains("exit record")),
            "{:?}",
            sum.warnings
        );
        let text = sum.render();
        assert!(text.contains("exact within"), "{text}");
        assert!(
            text.contains("tree peak     between 900.0 MiB and 1000.0 MiB"),
            "{text}"
        );
    }

    #[test]
    fn processes_that_left_without_exit_records_make_the_kernel_peak_a_lower_bound() {
        for (records, lost, why) in [
            (
                "off (--no-taskstats)",
                0,
                "exit records were not read (off (--no-taskstats))",
            ),
            (
                "taskstats",
                3,
                "the kernel dropped exit records 3 times (their queue was full)",
            ),
        ] {
            let sum = forking_daemon(records, lost);
            assert_eq!(sum.peak.scope, PeakScope::LargestProcessSeen);
            assert_eq!(sum.peak.tree_high_bytes, None, "not an upper bound then");
            let text = sum.render();
            assert!(text.contains("  peak          ≥ 900.0 MiB"), "{text}");
            assert!(!text.contains("exact within"), "{text}");
            assert!(
                text.contains(&format!(
                    "warning: 1 process left the tree during the recording and {why}"
                )),
                "{text}"
            );
        }
    }

    #[test]
    fn idle_floor_ignores_a_short_start_up() {
        let mut rows = vec![s(0.0, MIB, MIB)];
        for i in 1..100 {
            rows.push(s(
                i as f64,
                if i % 10 == 0 { 200 * MIB } else { 45 * MIB },
                200 * MIB,
            ));
        }
        let sum = summarize(&rows, None, None);
        assert_eq!(sum.idle_rss_bytes, 45 * MIB);
        assert_eq!(sum.min_rss_bytes, MIB);
    }

    #[test]
    fn locked_pinned_and_shared_memory_are_given_with_their_share_of_the_idle_floor() {
        let row = |t: f64, rss: u64| Sample {
            locked_bytes: 512 * MIB,
            shmem_bytes: 128 * MIB,
            ..s(t, rss * MIB, rss * MIB)
        };
        let rows: Vec<Sample> = (0..20)
            .map(|i| row(i as f64, if i == 10 { 1200 } else { 642 }))
            .collect();
        let sum = summarize(&rows, Some(&meta("command", false)), None);
        assert_eq!(sum.held.locked_bytes, 512 * MIB);
        assert_eq!(sum.held_at_idle.locked_bytes, 512 * MIB);
        let text = sum.render();
        assert!(
            text.contains("held memory   locked (VmLck) peak 512.0 MiB, at idle 512.0 MiB of the 642.0 MiB floor; shared (RssShmem) peak 128.0 MiB"),
            "{text}"
        );
        assert!(!text.contains("pinned"), "{text}");
    }

    #[test]
    fn appended_sessions_add_their_durations_and_every_number_covers_them_all() {
        let mut b = SummaryBuilder::new();
        let mut first = s(0.0, 100 * MIB, 112 * MIB);
        first.event = Some(Event::Start);
        b.session(&meta("command", false));
        b.push(&first);
        b.push(&s(10.0, 100 * MIB, 112 * MIB));
        b.session_end(&EndInfo::default());
        let mut again = s(0.0, 20 * MIB, 27 * MIB);
        again.event = Some(Event::Start);
        again.unix_ms += 60_000;
        b.session(&meta("command", false));
        b.push(&again);
        b.push(&Sample {
            unix_ms: again.unix_ms + 5000,
            ..s(5.0, 20 * MIB, 27 * MIB)
        });
        b.session_end(&EndInfo::default());
        let sum = b.finish(None, None);
        assert_eq!(sum.duration_s, 15.0);
        assert_eq!(sum.peak.bytes, 112 * MIB, "the first session's peak");
        assert_eq!(sum.sessions.len(), 2);
        assert_eq!(sum.sessions[1].peak.bytes, 27 * MIB);
        let text = sum.render();
        assert!(text.contains("sessions      2 (--append)"), "{text}");
        assert!(text.contains("2. command 1 (d)"), "{text}");
        // One session whose kernel peak is not known makes the recording's unknown.
        let mut b = SummaryBuilder::new();
        b.session(&meta("command", false));
        b.push(&first);
        b.session(&meta("pid", false));
        b.push(&again);
        b.push(&s(5.0, 20 * MIB, 27 * MIB));
        let sum = b.finish(None, None);
        assert_eq!(sum.facts.kernel_peak_rss_bytes, None);
        assert_eq!(sum.kernel_peak_window, KernelPeakWindow::PerSession);
    }

    #[test]
    fn a_cgroup_holding_the_tree_alone_is_the_headline_named_by_its_file() {
        // A tree of two processes (one process's own VmHWM would be its headline).
        let cg = |t: f64, peak: u64| Sample {
            cgroup_bytes: Some(100 * MIB),
            cgroup_peak_bytes: Some(peak * MIB),
            processes: 2,
            ..s(t, 90 * MIB, 95 * MIB)
        };
        let m = Meta {
            cgroup: Some(crate::format::meta::CgroupMeta::example_own()),
            ..meta("command", false)
        };
        let sum = summarize(&[cg(0.0, 100), cg(1.0, 140)], Some(&m), None);
        assert_eq!(
            (sum.peak.bytes, sum.peak.source, sum.peak.counter),
            (140 * MIB, PeakSource::Cgroup, "memory.max_usage_in_bytes")
        );
        let text = sum.render();
        assert!(text.contains("kernel peak   95.00 MiB"), "{text}");
    }

    fn tree_row(elapsed: f64, rss: u64, processes: u32, pss: Option<u64>) -> Sample {
        Sample {
            processes,
            pss_bytes: pss,
            ..s(elapsed, rss, rss / processes as u64)
        }
    }

    #[test]
    fn pss_read_only_at_idle_is_not_a_peak() {
        let mut rows = vec![tree_row(0.0, 90 * MIB, 9, Some(30 * MIB))];
        rows.extend((1..20).map(|t| tree_row(t as f64, 900 * MIB, 9, None)));
        let sum = summarize(&rows, None, None);
        assert_eq!(sum.peak_pss_bytes, None);
        let reads = sum.pss.unwrap();
        assert_eq!((reads.reads, reads.is_peak), (1, false));
        let text = sum.render();
        assert!(
            text.contains("  PSS at idle   30.00 MiB (31457280 bytes) (1 read at +0 µs, none at the RSS peak;"),
            "{text}"
        );
        assert!(!text.contains("peak PSS"), "{text}");
    }

    #[test]
    fn a_pss_read_above_the_idle_floor_that_missed_the_peak_is_neither() {
        // Idle at 100 MiB, a read during a rise to 500 MiB, the peak at 900 MiB unread.
        let mut rows: Vec<Sample> = (0..18)
            .map(|t| tree_row(t as f64, 100 * MIB, 9, None))
            .collect();
        rows.push(tree_row(18.0, 500 * MIB, 9, Some(200 * MIB)));
        rows.push(tree_row(19.0, 900 * MIB, 9, None));
        let text = summarize(&rows, None, None).render();
        assert!(
            text.contains("  PSS read      200.0 MiB (209715200 bytes) (the largest of 1 read at +18.00 s, none at the RSS peak, at RSS up to 500.0 MiB;"),
            "{text}"
        );
        assert!(
            !text.contains("PSS at idle") && !text.contains("peak PSS"),
            "{text}"
        );
    }

    #[test]
    fn a_pss_read_at_the_rss_peak_makes_the_largest_read_the_peak_pss() {
        let mut b = SummaryBuilder::new();
        b.push(&tree_row(0.0, 90 * MIB, 9, Some(30 * MIB)));
        b.push(&tree_row(1.0, 900 * MIB, 9, None));
        assert_eq!(b.finish(None, None).peak_pss_bytes, None);
        b.push(&tree_row(2.0, 890 * MIB, 9, Some(290 * MIB)));
        let sum = b.finish(None, None);
        assert_eq!(sum.peak_pss_bytes, Some(290 * MIB));
        assert!(
            sum.render().contains("peak PSS      290.0 MiB"),
            "{}",
            sum.render()
        );
    }

    #[test]
    fn a_tree_peak_says_its_rss_sum_counts_shared_pages_in_each_process() {
        let rows = [
            tree_row(0.0, 100 * MIB, 9, Some(40 * MIB)),
            tree_row(1.0, 1600 * MIB, 9, Some(300 * MIB)),
            tree_row(2.0, 100 * MIB, 9, Some(40 * MIB)),
        ];
        let text = summarize(&rows, None, None).render();
        let peak = text.lines().find(|l| l.contains("sampled peak")).unwrap();
        assert!(
            peak.contains("9 processes: RSS sum over 9 processes, shared pages counted in each; PSS sum at that tick 300.0 MiB (each page once)"),
            "{peak}"
        );
        for line in ["idle floor", "mean RSS"] {
            let l = text.lines().find(|l| l.contains(line)).unwrap();
            assert!(l.contains("shared pages counted in each"), "{l}");
        }
    }

    #[test]
    fn a_single_process_needs_no_shared_pages_note() {
        assert!(!summarize(&[s(0.0, 10 * MIB, 10 * MIB)], None, None)
            .render()
            .contains("shared pages"));
    }

    #[test]
    fn the_largest_processes_and_unread_pss_come_from_the_end_record() {
        use crate::format::meta::{PssUnread, PssUnreadReason};
        let end = EndInfo {
            processes: (1..=7)
                .map(|i| ProcessRecord {
                    pid: 100 + i,
                    start_time_ticks: 0,
                    comm: format!("worker{i}"),
                    cmdline: if i == 1 {
                        String::new()
                    } else {
                        format!("worker{i} --serve")
                    },
                    hwm_bytes: (8 - i as u64) * MIB,
                    recording_peak_bytes: Some((8 - i as u64) * MIB),
                    recording_peak_exact: Some(true),
                })
                .collect(),
            pss_unread: vec![PssUnread {
                pid: 101,
                comm: "worker1".into(),
                reason: PssUnreadReason::Refused,
                reads: 3,
            }],
            ..EndInfo::default()
        };
        let text = summarize(&[tree_row(0.0, 100 * MIB, 7, None)], None, Some(&end)).render();
        assert!(
            text.contains(
                "the 5 largest by peak in the recording (VmHWM, exact per process) of 7 listed"
            ),
            "{text}"
        );
        assert!(
            text.contains("    worker1          101  7.00 MiB  7340032\n"),
            "{text}"
        );
        assert!(
            text.contains("    worker2 --serve  102  6.00 MiB  6291456\n"),
            "{text}"
        );
        assert!(text.contains("worker5"), "{text}");
        assert!(!text.contains("worker6"), "{text}");
        assert!(
            text.contains(
                "PID 101 (worker1): smaps_rollup refused (permission denied), missing from 3 reads"
            ),
            "{text}"
        );
        // A process that left, with no exit records read: the peaks are as last read.
        let left = [
            tree_row(0.0, 100 * MIB, 7, None),
            Sample {
                departed: 1,
                ..tree_row(1.0, 90 * MIB, 6, None)
            },
        ];
        let text = summarize(&left, None, Some(&end)).render();
        assert!(
            text.contains("the 5 largest by peak in the recording (VmHWM, as last read) of 7 listed\n    1 process left the tree, and not every exit record was read (exit records: not known): one that left has the peak of its last sample, and may have risen after it\n"),
            "{text}"
        );
        let records = EndInfo {
            exit_records: Some(crate::format::meta::EXIT_RECORDS_READ.into()),
            ..end.clone()
        };
        let text = summarize(&left, None, Some(&records)).render();
        assert!(
            text.contains("(VmHWM, exact per process) of 7 listed\n"),
            "{text}"
        );
        // A process older than the recording whose mark did not rise: at least its RSS read,
        // its lifetime mark named apart.
        let mut older = records.clone();
        older.processes[0].recording_peak_bytes = Some(6 * MIB + MIB / 2);
        older.processes[0].recording_peak_exact = Some(false);
        let text = summarize(&left, None, Some(&older)).render();
        assert!(
            text.contains("(VmHWM, exact per process; ≥ a lower bound) of 7 listed\n"),
            "{text}"
        );
        assert!(
            text.contains("set before the recording: PID 101 7.00 MiB)"),
            "{text}"
        );
        assert!(
            text.contains("    worker2 --serve  102    6.00 MiB  6291456\n")
                && text.contains("    worker1          101  ≥ 6.50 MiB  6815744\n"),
            "{text}"
        );
        // Recorded before memmon kept the peak within the recording: said as read.
        let mut old = records;
        for p in &mut old.processes {
            p.recording_peak_bytes = None;
            p.recording_peak_exact = None;
        }
        let text = summarize(&left, None, Some(&old)).render();
        assert!(
            text.contains("(VmHWM, as last read, maybe from before the recording) of 7 listed\n"),
            "{text}"
        );
    }

    #[test]
    fn histogram_percentile_is_a_real_value_within_a_tenth_of_a_percent() {
        let mut h = LogHistogram::new();
        for v in 1..=1000u64 {
            h.add(v * 1_000_003);
        }
        let p10 = h.percentile(10.0).unwrap();
        let exact = 100 * 1_000_003u64;
        assert!((p10 as f64 - exact as f64).abs() / (exact as f64) < 0.001);
        assert_eq!(p10 % 1_000_003, 0);
    }

    #[test]
    fn histogram_holds_only_the_buckets_between_its_lowest_and_highest_value() {
        let mut h = LogHistogram::new();
        for v in [200 << 30, 45 << 30, 100 << 30] {
            h.add(v);
        }
        // 45 GiB to 200 GiB: two octaves and a bit, 1,024 buckets an octave.
        assert!(h.counts.len() < 3 * 1024, "{}", h.counts.len());
        assert_eq!(h.percentile(1.0), Some(45 << 30));
        assert_eq!(h.percentile(50.0), Some(100 << 30));
        assert_eq!(h.percentile(100.0), Some(200 << 30));
        h.add(0);
        assert_eq!(h.percentile(1.0), Some(0));
        assert_eq!(h.percentile(100.0), Some(200 << 30));
    }
}
