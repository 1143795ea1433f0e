//! Phases and runs of a recording, accumulated row by row: a phase runs from a `mark:` event to
//! the next, a run from `run-start:N` to `run-end:N`. Each is a span (`span.rs`) whose peak is
//! decided once (`PeakFacts::decide`); phases of one label are also summed up (`LabelStats`:
//! how many, their durations and peaks), so the time per proof of a batch is one line.
//!
//! Memory is bounded whatever the input: the first [`MAX_LISTED`] spans of each kind are kept
//! one by one, later ones only in the sums by label (at most [`MAX_LABELS`] labels; further
//! labels are summed as one), and the count of what was not listed is said.

use super::span::{launched_duration_s, EndTail, SpanAcc, SpanContext, Window};
use super::stats::{RunningStats, Stats};
use super::timeline::Timeline;
use crate::format::meta::{EndInfo, Meta, RunPeaks};
use crate::model::peak::{PeakBasis, PeakSource};
use crate::model::sample::{Event, Sample};
use serde::Serialize;

pub use super::span::Span;

/// Spans of each kind (phases, runs) kept one by one; later ones are only summed by label.
pub const MAX_LISTED: usize = 1000;

/// Labels whose phases are summed apart; phases of further labels are summed as one.
pub const MAX_LABELS: usize = 256;

/// A span boundary read more than this long after its event (`event_lag_us`) is late: the
/// span is not called exact.
pub const LATE_EVENT_US: u64 = 5_000;

/// The label the phases of labels beyond [`MAX_LABELS`] are summed under.
pub const OTHER_LABELS: &str = "(other labels)";

/// How the spans of a session begin their peaks, from the session's metadata.
#[derive(Debug, Clone, Copy)]
struct Windows {
    phase: SpanContext,
    run: SpanContext,
    /// Each run is a command launched at its `run-start` row (`run_peaks: launched`): its
    /// cumulative counters (major faults, PSI, swap) began with it, so its opening row's count
    /// is its own.
    runs_launched: bool,
}

impl Windows {
    /// Without metadata (another tool's file, a CSV without its sidecar): no reset is known,
    /// but a bench run that opens with its marks settled was reset (schema 1 bench files).
    fn unknown() -> Windows {
        let ctx = SpanContext {
            bound_bytes: crate::probe::proc::local_batching_bound_bytes(),
            ..SpanContext::default()
        };
        Windows {
            phase: ctx,
            run: SpanContext {
                kernel: Window::ResetIfSettled,
                ..ctx
            },
            runs_launched: false,
        }
    }

    fn of(meta: &Meta) -> Windows {
        let ctx = SpanContext {
            exit_records: meta.exit_records.as_deref()
                == Some(crate::format::meta::EXIT_RECORDS_READ),
            cgroup_holds_tree: meta.cgroup_holds_tree(),
            cgroup_v1: meta.cgroup_v1(),
            bound_bytes: bound_of(meta),
            bound_known: meta.online_cpus.is_some(),
            ..SpanContext::default()
        };
        let marks = if meta.phase_peaks {
            Window::AfterOpen
        } else {
            Window::IfRises
        };
        let (run_kernel, run_cgroup) = match meta.run_peaks {
            Some(RunPeaks::Launched) => (Window::FromOpen, Window::FromOpen),
            Some(RunPeaks::ResetAfterStart) => (Window::AfterOpen, Window::AfterOpen),
            None => (Window::ResetIfSettled, Window::IfRises),
        };
        Windows {
            phase: SpanContext {
                kernel: marks,
                cgroup: marks,
                ..ctx
            },
            run: SpanContext {
                kernel: run_kernel,
                cgroup: run_cgroup,
                // A run's command launched for it starts its GPU marks; a daemon's are never
                // reset (NVML cannot reset a running process's).
                gpu: if meta.run_peaks == Some(RunPeaks::Launched) {
                    Window::FromOpen
                } else {
                    Window::IfRises
                },
                ..ctx
            },
            runs_launched: meta.run_peaks == Some(RunPeaks::Launched),
        }
    }
}

/// How far the recording machine's counters may be off: from the metadata, else this machine's.
pub fn bound_of(meta: &Meta) -> u64 {
    meta.online_cpus
        .map_or_else(crate::probe::proc::local_batching_bound_bytes, |c| {
            crate::model::peak::batching_bound_bytes(c, meta.page_size_bytes)
        })
}

/// A span closed in the session still open, kept until the session's end says all it knows.
#[derive(Debug, Clone)]
struct Pending {
    acc: SpanAcc,
    label: String,
    run: Option<u32>,
    /// The session the span is in (from 1).
    session: u32,
    complete: bool,
    /// What the end record gave after the span's last row, for the span open at the end.
    tail: AfterRows,
    /// A command bench's run: what its own end record gave after its last row, and its
    /// command's wall time.
    run_end: Option<(EndTail, Option<f64>)>,
    /// A daemon bench's run: its client's time (the end record's `client_walls`), the run's
    /// duration as the bench's table gives it.
    client_wall: Option<f64>,
    /// A launched command's last phase: where the command exited, on the recording's clock
    /// (after its last row): the phase runs on to it.
    ends_at_s: Option<f64>,
}

/// What came after the last row of a session, read as the target or the recorder ended: the
/// last tree's exit records (`exit_peak_after_last_sample_bytes`), the cgroup's peak file and
/// the GPU's accounting mark read then. The span still open then takes them as one more row,
/// under its own window (after a reset at its opening marker, the peak file holds its own).
#[derive(Debug, Clone, Copy, Default)]
struct AfterRows {
    kernel: Option<(u64, PeakSource)>,
    cgroup: Option<u64>,
    gpu: Option<u64>,
}

impl Pending {
    /// The span, decided under `ctx` (the session's), with what came after its last row.
    fn close(self, ctx: &SpanContext) -> Span {
        let session = Some(self.session);
        let Some((tail, wall)) = self.run_end else {
            let ctx = SpanContext {
                kernel_after_last_row: self.tail.kernel,
                cgroup_after_last_row: self.tail.cgroup,
                gpu_after_last_row: self.tail.gpu,
                // The last tree's exit records (`exit_peak_after_last_sample_bytes`).
                kernel_after_last_row_of_last_tree: true,
                ..*ctx
            };
            let mut span = self.acc.close(self.label, self.run, self.complete, &ctx);
            span.session = session;
            if let Some(wall) = self.client_wall {
                span.duration_s = wall;
            }
            if let Some(end) = self.ends_at_s.filter(|&e| e > span.end_elapsed_s) {
                let ms = ((end - span.end_elapsed_s) * 1000.0).round() as u64;
                span.end_unix_ms += ms;
                span.end_elapsed_s = end;
                span.duration_s = end - span.start_elapsed_s;
            }
            return span;
        };
        let mut span = self
            .acc
            .close(self.label, self.run, self.complete, &ctx.with_tail(&tail));
        span.duration_s = launched_duration_s(span.duration_s, wall);
        span.session = session;
        span
    }
}

/// A bench run's label: `run N`, or `sK run N` for run N of session K of a recording whose runs
/// come from several sessions (`--append`ed benches each number their runs from 1): every
/// table, plot, report, comparison and budget names a run by it.
/// A bench's measured window of runs in flight together (`model::sample::WINDOW`) is `window`.
pub fn run_label(run: u32, session: Option<u32>) -> String {
    // Data, not words: the label is a run's name, written to files and compared.
    let run = match run {
        crate::model::sample::WINDOW => "window".to_string(),
        n => format!("run {n}"),
    };
    match session {
        Some(k) => format!("s{k} {run}"),
        None => run,
    }
}

/// The session of each span, kept only where the spans come from more than one session (a
/// run's number, a phase's start alone are then not unique), with the labels of the runs that
/// say it.
fn label_sessions(runs: &mut [Span]) {
    let first = runs.first().and_then(|r| r.session);
    let several = runs.iter().any(|r| r.session != first);
    for r in runs {
        if !several {
            r.session = None;
        }
        if let Some(n) = r.run {
            r.label = run_label(n, r.session);
        }
    }
}

/// The spans of one kind: the first `MAX_LISTED` one by one, the later ones summed by label.
/// The listed spans of the session still open wait in `pending`, undecided, until its end
/// record says whether every exit record was read and every reset held.
#[derive(Debug, Default)]
struct Listed {
    spans: Vec<Span>,
    pending: Vec<Pending>,
    unlisted: u64,
    /// The sums of spans beyond the listed ones (phases only).
    later: LabelSums,
}

impl Listed {
    fn len(&self) -> usize {
        self.spans.len() + self.pending.len()
    }

    fn push(&mut self, p: Pending, ctx: &SpanContext, sum_later: bool) {
        if self.len() < MAX_LISTED {
            self.pending.push(p);
        } else {
            self.unlisted += 1;
            if sum_later {
                self.later.add(&p.close(ctx));
            }
        }
    }

    /// Decides the session's spans under `ctx`, the session's whole context.
    fn settle(&mut self, ctx: &SpanContext) {
        for p in self.pending.drain(..) {
            self.spans.push(p.close(ctx));
        }
    }

    /// The spans and the sums, with the pending ones decided under `ctx` (a session whose end
    /// never came) and `open` (a span still open at the last row) added.
    fn finish(&self, ctx: &SpanContext, open: Option<Pending>) -> (Vec<Span>, u64, LabelSums) {
        let mut all = Listed {
            spans: self.spans.clone(),
            pending: self.pending.clone(),
            unlisted: self.unlisted,
            later: self.later.clone(),
        };
        if let Some(p) = open {
            all.push(p, ctx, true);
        }
        all.settle(ctx);
        (all.spans, all.unlisted, all.later)
    }
}

/// Accumulates phases and runs from rows in order; each session's metadata (`session`) says
/// how its spans begin their peaks, its end (`session_end`) what came after its last row.
#[derive(Debug)]
pub struct PhaseBuilder {
    windows: Windows,
    phase: Option<(SpanAcc, String)>,
    run: Option<(SpanAcc, u32)>,
    phases: Listed,
    runs: Listed,
    timeline: Timeline,
    /// The session the spans open now are in (from 1; 0 before the first row).
    session: u32,
    /// Rows after the last one of this session were lost from the file (`rows_lost`).
    rows_lost: bool,
    /// The first row of the session now (its `elapsed_s`): a launched command starts there.
    session_start_s: f64,
}

impl PhaseBuilder {
    /// The session the spans open now are in (from 1).
    fn session_now(&self) -> u32 {
        self.session.max(1)
    }
}

impl Default for PhaseBuilder {
    fn default() -> Self {
        PhaseBuilder {
            windows: Windows::unknown(),
            phase: None,
            run: None,
            phases: Listed::default(),
            runs: Listed::default(),
            timeline: Timeline::new(),
            session: 0,
            rows_lost: false,
            session_start_s: 0.0,
        }
    }
}

impl PhaseBuilder {
    pub fn new() -> PhaseBuilder {
        PhaseBuilder::default()
    }

    /// The next session's metadata, before its first row.
    pub fn session(&mut self, meta: &Meta) {
        self.windows = Windows::of(meta);
    }

    /// From now on, the resets at span boundaries may not have held (a bench run whose reset
    /// was refused): of the kernel's marks (`kernel`), of the cgroup's peak file (`cgroup`); a
    /// mark whose reset was refused counts for a span only when it rose in it.
    pub fn resets_refused(&mut self, kernel: bool, cgroup: bool) {
        for ctx in [&mut self.windows.phase, &mut self.windows.run] {
            if kernel && ctx.kernel == Window::AfterOpen {
                ctx.kernel = Window::IfRises;
            }
            if cgroup && ctx.cgroup == Window::AfterOpen {
                ctx.cgroup = Window::IfRises;
            }
        }
    }

    /// Rows after the last one read were lost from the session (`format::Sink::rows_lost`):
    /// the spans still open are not exact (the lost rows were theirs, or opened others), and
    /// what the session's end record gave after its last row is not theirs.
    pub fn rows_lost(&mut self) {
        self.rows_lost = true;
        if let Some((acc, _)) = self.phase.as_mut() {
            acc.mark_rows_lost();
        }
        if let Some((acc, _)) = self.run.as_mut() {
            acc.mark_rows_lost();
        }
    }

    /// The end record of the session the last rows belong to: the spans still open end with
    /// the session, holding the peaks the kernel gave after its last row; the session's spans
    /// are decided knowing whether every exit record was read and every reset held (a refused
    /// reset leaves marks older than the span: only a mark that rose in it counts then).
    pub fn session_end(&mut self, end: &EndInfo) {
        // Marks reset by a process itself: each span of this session holding one.
        for r in &end.marks_reset_elsewhere {
            let open = [
                self.phase.as_mut().map(|p| &mut p.0),
                self.run.as_mut().map(|r| &mut r.0),
            ];
            let pending = self
                .phases
                .pending
                .iter_mut()
                .chain(self.runs.pending.iter_mut());
            for acc in open
                .into_iter()
                .flatten()
                .chain(pending.map(|p| &mut p.acc))
            {
                acc.mark_reset_elsewhere_at(r.unix_ms);
            }
        }
        let records = end.exit_records_complete();
        for ctx in [&mut self.windows.phase, &mut self.windows.run] {
            ctx.exit_records = records;
            if end.peak_reset_failures > 0 && ctx.kernel == Window::AfterOpen {
                ctx.kernel = Window::IfRises;
            }
            let refused = end
                .cgroup
                .as_ref()
                .is_some_and(|c| c.peak_reset_failures > 0);
            if refused && ctx.cgroup == Window::AfterOpen {
                ctx.cgroup = Window::IfRises;
            }
        }
        // A command bench's runs, each ended by its own command: what its end record gave
        // after its last row is the run's (of this session: an earlier one's run N, left
        // undecided by a session with no end record, is another run).
        let session = self.session_now();
        for r in &end.runs {
            let bound = self.windows.run.bound_bytes;
            if let Some(p) = self
                .runs
                .pending
                .iter_mut()
                .find(|p| p.complete && p.run == Some(r.run) && p.session == session)
            {
                if let Some(f) = r.end.major_faults {
                    p.acc.faults_at_end(f);
                }
                if let Some(sum) = r.end.exit_hwm_sum_after_last_sample_bytes {
                    p.acc.hwm_sum_at_end(sum);
                }
                p.run_end = Some((EndTail::of(&r.end, bound), r.end.command_wall_s));
            } else if !self
                .runs
                .pending
                .iter()
                .any(|p| p.run == Some(r.run) && p.session == session)
            {
                self.rowless_run(r, bound);
            }
        }
        // A daemon bench's runs: each one's time is its client's.
        for w in &end.client_walls {
            if let Some(p) = self
                .runs
                .pending
                .iter_mut()
                .find(|p| p.complete && p.run == Some(w.run) && p.session == session)
            {
                p.client_wall = Some(w.wall_s);
            }
        }
        // What came after the last row the recorder wrote is the open spans' only when that
        // row is the last one read.
        let after_rows = !std::mem::take(&mut self.rows_lost);
        // (Not a schema 1 recording's cgroup peak: over the whole recording, not read apart
        // after its last row.)
        let tail = AfterRows {
            kernel: end
                .exit_peak_after_last_sample_bytes
                .map(|b| (b, PeakSource::Vmhwm)),
            cgroup: end.cgroup.as_ref().and_then(|c| c.final_peak_bytes),
            gpu: end.gpu.as_ref().and_then(|g| g.hwm_after_last_row_bytes),
        };
        let tail = if after_rows {
            tail
        } else {
            AfterRows::default()
        };
        if let Some(sum) = end
            .exit_hwm_sum_after_last_sample_bytes
            .filter(|_| after_rows)
        {
            if let Some((acc, _)) = self.phase.as_mut() {
                acc.hwm_sum_at_end(sum);
            }
            if let Some((acc, _)) = self.run.as_mut() {
                acc.hwm_sum_at_end(sum);
            }
        }
        if let Some(f) = end.major_faults.filter(|_| after_rows) {
            // Faults after the last row (a target that ended between two ticks): the open
            // phase's and run's.
            if let Some((acc, _)) = self.phase.as_mut() {
                acc.faults_at_end(f);
            }
            if let Some((acc, _)) = self.run.as_mut() {
                acc.faults_at_end(f);
            }
        }
        self.close_phase(false, tail);
        // A launched command's last phase runs on to the command's exit, as its session does
        // (`command_wall_s` from its start, at the session's first row).
        if let (Some(wall), Some(p)) = (end.command_wall_s, self.phases.pending.last_mut()) {
            if p.session == session && !p.complete {
                p.ends_at_s = Some(self.session_start_s + wall);
            }
        }
        self.close_run(false, tail);
        self.phases.settle(&self.windows.phase);
        self.runs.settle(&self.windows.run);
    }

    /// A command bench's run that ended before its first sample: no row holds it, its end
    /// record alone gives its peaks and its time; listed in the order of the runs.
    fn rowless_run(&mut self, r: &crate::format::meta::RunEnd, bound: u64) {
        let wall = r.end.command_wall_s.unwrap_or(0.0);
        let start_ms = r
            .end
            .ended_unix_ms
            .saturating_sub((wall * 1000.0).round() as u64);
        let start_s = r.started_elapsed_s.unwrap_or(0.0);
        let mut acc =
            SpanAcc::without_rows((start_ms, start_s), (r.end.ended_unix_ms, start_s + wall));
        if let Some(f) = r.end.major_faults {
            acc.faults_at_end(f);
        }
        let session = self.session_now();
        let p = Pending {
            acc,
            label: run_label(r.run, None),
            run: Some(r.run),
            session,
            complete: true,
            tail: AfterRows::default(),
            run_end: Some((EndTail::of(&r.end, bound), r.end.command_wall_s)),
            client_wall: None,
            ends_at_s: None,
        };
        if self.runs.len() >= MAX_LISTED {
            self.runs.unlisted += 1;
            return;
        }
        let at = self
            .runs
            .pending
            .iter()
            .position(|q| q.session == session && q.run.is_some_and(|n| n > r.run))
            .unwrap_or(self.runs.pending.len());
        self.runs.pending.insert(at, p);
    }

    pub fn push(&mut self, s: &Sample) {
        let first = self.session == 0;
        if self.timeline.push(s).new_session {
            // A new session (--append) without an end record before it: its clock restarts,
            // so nothing spans it.
            self.close_phase(false, AfterRows::default());
            self.close_run(false, AfterRows::default());
            self.session_start_s = s.elapsed_s;
        } else if first {
            self.session_start_s = s.elapsed_s;
        }
        self.session = self.timeline.sessions();
        // A boundary read late: the spans on both sides of it may hold each other's memory.
        let late = s.event_lag_us.is_some_and(|l| l > LATE_EVENT_US);
        match &s.event {
            Some(Event::Mark(label)) => {
                if let Some((p, _)) = self.phase.as_mut() {
                    p.add(s);
                    if late {
                        p.mark_late();
                    }
                }
                self.close_phase(true, AfterRows::default());
                let mut opened = SpanAcc::open(s);
                if late {
                    opened.mark_late();
                }
                self.phase = Some((opened, label.clone()));
                self.add_to_run(s);
            }
            Some(Event::RunStart(n)) => {
                self.close_run(false, AfterRows::default());
                let mut opened = if self.windows.runs_launched {
                    SpanAcc::open_session(s)
                } else {
                    SpanAcc::open(s)
                };
                if late {
                    opened.mark_late();
                }
                self.run = Some((opened, *n));
                self.add_to_phase(s);
            }
            Some(Event::RunEnd(n)) => {
                self.add_to_phase(s);
                if self.run.as_ref().is_some_and(|(_, m)| m == n) {
                    self.add_to_run(s);
                    if late {
                        if let Some((r, _)) = self.run.as_mut() {
                            r.mark_late();
                        }
                    }
                    self.close_run(true, AfterRows::default());
                }
            }
            _ => {
                self.add_to_phase(s);
                self.add_to_run(s);
            }
        }
    }

    fn add_to_phase(&mut self, s: &Sample) {
        if let Some((p, _)) = self.phase.as_mut() {
            p.add(s);
        }
    }

    fn add_to_run(&mut self, s: &Sample) {
        if let Some((r, _)) = self.run.as_mut() {
            r.add(s);
        }
    }

    fn close_phase(&mut self, complete: bool, tail: AfterRows) {
        if let Some((acc, label)) = self.phase.take() {
            let p = Pending {
                acc,
                label,
                run: None,
                session: self.session_now(),
                complete,
                tail,
                run_end: None,
                client_wall: None,
                ends_at_s: None,
            };
            self.phases.push(p, &self.windows.phase, true);
        }
    }

    fn close_run(&mut self, complete: bool, tail: AfterRows) {
        if let Some((acc, n)) = self.run.take() {
            let p = Pending {
                acc,
                label: run_label(n, None),
                run: Some(n),
                session: self.session_now(),
                complete,
                tail,
                run_end: None,
                client_wall: None,
                ends_at_s: None,
            };
            self.runs.push(p, &self.windows.run, false);
        }
    }

    /// The spans so far; those still open end at the last row.
    pub fn finish(&self) -> Phases {
        let open_phase = self.phase.as_ref().map(|(acc, label)| Pending {
            acc: acc.clone(),
            label: label.clone(),
            run: None,
            session: self.session_now(),
            complete: false,
            tail: AfterRows::default(),
            run_end: None,
            client_wall: None,
            ends_at_s: None,
        });
        let open_run = self.run.as_ref().map(|(acc, n)| Pending {
            acc: acc.clone(),
            label: run_label(*n, None),
            run: Some(*n),
            session: self.session_now(),
            complete: false,
            tail: AfterRows::default(),
            run_end: None,
            client_wall: None,
            ends_at_s: None,
        });
        let (phases, unlisted_phases, later) = self.phases.finish(&self.windows.phase, open_phase);
        let (mut runs, unlisted_runs, _) = self.runs.finish(&self.windows.run, open_run);
        label_sessions(&mut runs);
        let mut phases = phases;
        label_sessions(&mut phases);
        let mut sums = LabelSums::default();
        phases.iter().for_each(|p| sums.add(p));
        sums.merge(&later);
        Phases {
            by_label: sums.finish(),
            phases,
            runs,
            unlisted_phases,
            unlisted_runs,
        }
    }
}

/// The span of one bench run from its rows (its `run-start:N` row to its `run-end:N` row) in a
/// recording whose metadata is `meta`, closed as the summary of that recording closes it: a
/// run reads the same in bench's table as in `summary` of bench's recording. `resets_held`:
/// the run's resets were all taken.
pub fn run_span(
    meta: &Meta,
    rows: &[Sample],
    kernel_reset_held: bool,
    cgroup_reset_held: bool,
) -> Option<Span> {
    let mut b = PhaseBuilder::new();
    b.session(meta);
    b.resets_refused(!kernel_reset_held, !cgroup_reset_held);
    rows.iter().for_each(|s| b.push(s));
    b.finish().runs.into_iter().next()
}

/// The phases and runs of a recording.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Phases {
    /// The first `MAX_LISTED` phases, in order.
    pub phases: Vec<Span>,
    /// The first `MAX_LISTED` bench runs, in order.
    pub runs: Vec<Span>,
    /// The complete phases summed by label, for labels that came more than once.
    pub by_label: Vec<LabelStats>,
    /// Spans beyond the listed ones (phases are in `by_label` all the same).
    #[serde(skip_serializing_if = "is_zero")]
    pub unlisted_phases: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub unlisted_runs: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The complete phases of one label, summed: how many, how long, how high.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelStats {
    pub label: String,
    pub count: usize,
    pub duration_s: Stats,
    /// Their peaks on one basis, the best every one of them has (`model::peak::common_basis`).
    pub peak_basis: PeakBasis,
    /// Some of them had several processes (the kernel's peak is then the largest process's).
    pub tree: bool,
    pub peak_bytes: Stats,
    /// How many of those peaks are exact.
    pub exact: usize,
}

/// Sums of phases by label (at most `MAX_LABELS` labels, then one for the rest).
#[derive(Debug, Clone, Default, PartialEq)]
struct LabelSums {
    labels: Vec<(String, LabelSum)>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct LabelSum {
    count: usize,
    duration: RunningStats,
    /// The peaks on each basis (cgroup, kernel, sampled), of the spans that have it, and how
    /// many of them are exact.
    peaks: [RunningStats; 3],
    exact: [usize; 3],
    tree: bool,
}

const BASES: [PeakBasis; 3] = [PeakBasis::Cgroup, PeakBasis::Kernel, PeakBasis::Sampled];

impl LabelSums {
    /// The sum of `label`'s phases (of the other labels' once `MAX_LABELS` are summed apart).
    fn of(&mut self, label: &str) -> &mut LabelSum {
        let i = match self.labels.iter().position(|(l, _)| l == label) {
            Some(i) => i,
            None if self.labels.len() < MAX_LABELS => {
                self.labels.push((label.to_string(), LabelSum::default()));
                self.labels.len() - 1
            }
            None => match self.labels.iter().position(|(l, _)| l == OTHER_LABELS) {
                Some(i) => i,
                None => {
                    self.labels
                        .push((OTHER_LABELS.to_string(), LabelSum::default()));
                    self.labels.len() - 1
                }
            },
        };
        &mut self.labels[i].1
    }

    fn merge(&mut self, other: &LabelSums) {
        for (label, o) in &other.labels {
            let sum = self.of(label);
            sum.count += o.count;
            sum.tree |= o.tree;
            sum.duration.merge(&o.duration);
            for k in 0..3 {
                sum.peaks[k].merge(&o.peaks[k]);
                sum.exact[k] += o.exact[k];
            }
        }
    }

    fn add(&mut self, span: &Span) {
        if !span.complete {
            return;
        }
        let sum = self.of(&span.label);
        sum.count += 1;
        sum.tree |= span.facts.is_tree();
        sum.duration.push(span.duration_s);
        for (k, basis) in BASES.iter().enumerate() {
            if let Some(p) = span.facts.on_basis(*basis) {
                sum.peaks[k].push(p.bytes as f64);
                sum.exact[k] += p.exact as usize;
            }
        }
    }

    /// The labels that came more than once, in the order each first came.
    fn finish(&self) -> Vec<LabelStats> {
        self.labels
            .iter()
            .filter(|(_, s)| s.count > 1)
            .filter_map(|(label, s)| {
                let k = (0..3).find(|&k| s.peaks[k].count() == s.count)?;
                Some(LabelStats {
                    label: label.clone(),
                    count: s.count,
                    duration_s: s.duration.finish()?,
                    peak_basis: BASES[k],
                    tree: s.tree,
                    peak_bytes: s.peaks[k].finish()?,
                    exact: s.exact[k],
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::peak::PeakScope;

    const MIB: u64 = 1 << 20;

    fn s(t: f64, rss_mib: u64, hwm_mib: u64, event: Option<Event>) -> Sample {
        Sample {
            unix_ms: 1_000 + (t * 1000.0) as u64,
            elapsed_s: t,
            rss_bytes: rss_mib * MIB,
            top_rss_bytes: rss_mib * MIB,
            hwm_bytes: hwm_mib * MIB,
            hwm_sum_bytes: hwm_mib * MIB,
            processes: 1,
            event,
            ..Sample::default()
        }
    }

    fn mark(l: &str) -> Option<Event> {
        Some(Event::Mark(l.into()))
    }

    /// A recording's metadata: `--phase-peaks` or not, exit records read or not.
    fn meta(phase_peaks: bool, exit_records: bool) -> Meta {
        Meta {
            phase_peaks,
            exit_records: exit_records.then(|| crate::format::meta::EXIT_RECORDS_READ.into()),
            ..Meta::example("pid")
        }
    }

    /// The phases and runs of `rows` in a session described by `meta` and ended by `end`.
    fn build(rows: &[Sample], meta: Option<&Meta>, end: Option<&EndInfo>) -> Phases {
        let mut b = PhaseBuilder::new();
        if let Some(m) = meta {
            b.session(m);
        }
        rows.iter().for_each(|r| b.push(r));
        if let Some(e) = end {
            b.session_end(e);
        }
        b.finish()
    }

    /// A phase of a forking daemon: a worker peaked at 900 MiB and left between two samples
    /// (its exit record's peak is in the row where it left).
    fn forked_worker_rows() -> Vec<Sample> {
        vec![
            s(0.0, 100, 100, mark("serve")),
            Sample {
                departed: 1,
                ..s(1.0, 100, 900, None)
            },
            s(2.0, 100, 100, mark("idle")),
            s(3.0, 100, 100, None),
        ]
    }

    /// A phase open across a restart, with `--phase-peaks` and exit records: the old process
    /// spiked to 300 MiB after its last row; `carried` the restart row holds that (and counts
    /// its departure), as memmon writes it now; else as an older memmon wrote it (the old
    /// process's exit peak in the end record alone).
    fn restart_in_a_phase(carried: bool) -> Phases {
        let restart = Sample {
            departed: carried.into(),
            ..s(
                2.0,
                60,
                if carried { 300 } else { 60 },
                Some(Event::Restart(9)),
            )
        };
        let rows = vec![
            s(0.0, 100, 100, Some(Event::Start)),
            s(0.5, 100, 100, mark("pre")),
            s(1.0, 250, 250, None),
            restart,
            s(3.0, 60, 60, mark("post")),
            s(4.0, 60, 60, None),
        ];
        let end = EndInfo {
            exit_records: Some(crate::format::meta::EXIT_RECORDS_READ.into()),
            exit_peak_bytes: Some(300 * MIB),
            ..EndInfo::default()
        };
        build(&rows, Some(&meta(true, true)), Some(&end))
    }

    #[test]
    fn a_phase_open_across_a_restart_holds_the_old_processs_exit_peak_or_is_not_exact() {
        let p = restart_in_a_phase(true);
        let pre = &p.phases[0];
        assert_eq!(pre.label, "pre");
        assert_eq!((pre.peak.bytes, pre.peak.exact), (300 * MIB, true));
        assert_eq!(pre.facts.departed, 1);
        // Written by a memmon that did not carry it: the phase never saw the exit peak, so
        // it is a lower bound, not exact.
        let p = restart_in_a_phase(false);
        let pre = &p.phases[0];
        assert_eq!(pre.peak.bytes, 250 * MIB);
        assert!(!pre.peak.exact, "{:?}", pre.peak);
        assert_eq!(pre.peak.scope, PeakScope::LargestProcessSeen);
        assert!(p.phases[1].peak.exact);
    }

    #[test]
    fn a_phase_where_a_process_left_is_the_largest_processs_peak_with_exit_records() {
        let p = build(&forked_worker_rows(), Some(&meta(true, true)), None);
        let serve = &p.phases[0];
        assert_eq!(serve.facts.departed, 1);
        assert_eq!(serve.facts.kernel_peak_rss_bytes, Some(900 * MIB));
        assert_eq!(serve.peak.scope, PeakScope::LargestProcess);
        assert!(serve.peak.exact);
        assert_eq!(p.phases[1].peak.scope, PeakScope::Process);
        assert!(p.render().contains("peaks exact for all"), "{}", p.render());
    }

    #[test]
    fn without_exit_records_a_phase_where_a_process_left_is_a_lower_bound() {
        let p = build(&forked_worker_rows(), Some(&meta(true, false)), None);
        assert_eq!(p.phases[0].peak.scope, PeakScope::LargestProcessSeen);
        assert_eq!(p.phases[1].peak.scope, PeakScope::Process);
        let text = p.render();
        assert!(text.contains("peaks exact for 1 of 2"), "{text}");
        assert!(text.contains("≥ 900.0 MiB"), "{text}");
        assert!(
            text.contains("≥: processes left the tree in the phases so marked"),
            "the note names the table's kind: {text}"
        );
        assert!(text.contains("a lower bound"), "{text}");
    }

    #[test]
    fn records_lost_by_the_end_make_the_sessions_phases_lower_bounds() {
        let end = EndInfo {
            exit_records: Some(crate::format::meta::EXIT_RECORDS_READ.into()),
            exit_records_lost: 2,
            ..EndInfo::default()
        };
        let p = build(&forked_worker_rows(), Some(&meta(true, true)), Some(&end));
        assert_eq!(p.phases[0].peak.scope, PeakScope::LargestProcessSeen);
    }

    #[test]
    fn the_peak_exit_records_gave_after_the_last_row_goes_to_the_spans_still_open() {
        let end = EndInfo {
            exit_records: Some(crate::format::meta::EXIT_RECORDS_READ.into()),
            exit_peak_after_last_sample_bytes: Some(700 * MIB),
            ..EndInfo::default()
        };
        let p = build(&forked_worker_rows(), Some(&meta(true, true)), Some(&end));
        assert_eq!(
            p.phases[0].facts.kernel_peak_rss_bytes,
            Some(900 * MIB),
            "closed"
        );
        assert_eq!(
            p.phases[1].facts.kernel_peak_rss_bytes,
            Some(700 * MIB),
            "open at the end"
        );
    }

    #[test]
    fn faults_after_the_last_row_go_to_the_phase_still_open_and_a_quiet_phase_shows_none() {
        let row = |t: f64, faults: u64, event| Sample {
            major_faults: faults,
            ..s(t, 100, 100, event)
        };
        let rows = [
            row(0.0, 3, mark("load")),
            row(1.0, 4003, None),
            row(2.0, 4003, mark("idle")),
            row(3.0, 4003, None),
            row(4.0, 4010, mark("prove")),
            row(5.0, 4020, None),
        ];
        let end = EndInfo {
            major_faults: Some(4500),
            ..EndInfo::default()
        };
        let p = build(&rows, Some(&meta(true, true)), Some(&end));
        let faults: Vec<u64> = p.phases.iter().map(|s| s.health.major_faults).collect();
        assert_eq!(faults, [4000, 7, 490]);
        let text = p.render();
        assert!(text.contains("major faults"), "{text}");
        assert!(
            !text.contains("memory stall"),
            "no PSI column of nothing: {text}"
        );
        // No phase faulted: no column.
        let quiet = build(&rows[2..4], Some(&meta(true, true)), None);
        assert_eq!(quiet.phases[0].health.major_faults, 0);
        assert!(
            !quiet.render().contains("major faults"),
            "{}",
            quiet.render()
        );
    }

    #[test]
    fn a_refused_reset_makes_phase_peaks_count_only_where_they_rose() {
        let rows = [
            s(0.0, 50, 300, mark("idle")),
            s(1.0, 50, 300, None),
            s(2.0, 50, 300, mark("work")),
            s(3.0, 50, 400, None),
        ];
        let exact = build(&rows, Some(&meta(true, true)), None);
        assert_eq!(exact.phases[0].facts.kernel_peak_rss_bytes, Some(300 * MIB));
        let end = EndInfo {
            peak_reset_failures: 1,
            ..EndInfo::default()
        };
        let refused = build(&rows, Some(&meta(true, true)), Some(&end));
        assert_eq!(refused.phases[0].facts.kernel_peak_rss_bytes, None);
        assert_eq!(refused.phases[0].peak.source, PeakSource::Sampled);
        assert_eq!(
            refused.phases[1].facts.kernel_peak_rss_bytes,
            Some(400 * MIB)
        );
    }

    #[test]
    fn each_phase_has_its_gpu_peak_in_its_own_column() {
        let row = |t: f64, gpu: Option<u64>, event| {
            let mut r = s(t, 100, 100, event);
            r.gpu.bytes = gpu.map(|g| g * MIB);
            r
        };
        let p = build(
            &[
                row(0.0, Some(0), mark("load")),
                row(1.0, Some(4096), None),
                row(2.0, Some(1024), mark("prove")),
                row(3.0, Some(20480), None),
                row(4.0, None, None),
            ],
            None,
            None,
        );
        assert_eq!(p.phases[0].peak_gpu_bytes, Some(4096 * MIB));
        assert_eq!(p.phases[1].peak_gpu_bytes, Some(20480 * MIB));
        let text = p.render();
        assert!(text.contains("GPU sampled peak"), "{text}");
        assert!(text.contains("20.00 GiB"), "{text}");
    }

    #[test]
    fn each_phase_has_its_pss_reads_and_a_tree_says_its_sums_count_shared_pages() {
        let row = |t: f64, rss: u64, pss: Option<u64>, event| Sample {
            processes: 9,
            pss_bytes: pss.map(|p| p * MIB),
            ..s(t, rss, rss / 9, event)
        };
        let p = build(
            &[
                row(0.0, 900, Some(100), mark("load")),
                row(1.0, 1600, Some(300), None),
                row(2.0, 1000, Some(120), mark("idle")),
                row(3.0, 1000, None, None),
                row(4.0, 1100, None, None),
            ],
            None,
            None,
        );
        let load = p.phases[0].pss.unwrap();
        assert_eq!(
            (load.largest_bytes, load.reads, load.is_peak),
            (300 * MIB, 3, true)
        );
        // Idle's one read came at 1000 MiB, its RSS peak is 1100 MiB: not a read at the peak.
        let idle = p.phases[1].pss.unwrap();
        assert_eq!((idle.reads, idle.is_peak), (1, false));
        assert_eq!(p.phases[0].facts.max_processes, 9);
        let text = p.render();
        assert!(
            text.contains("sampled sizes are RSS sums over up to 9 processes, shared pages counted in each; PSS: sum of PSS, each page once"),
            "{text}"
        );
        assert!(text.contains("300.0 MiB (3 reads)"), "{text}");
        assert!(
            text.contains("120.0 MiB not at the peak (1 read at +2.00 s, none at the RSS peak)"),
            "{text}"
        );
    }

    #[test]
    fn phases_run_from_one_marker_to_the_next_and_share_the_boundary_row() {
        let p = build(
            &[
                s(0.0, 10, 10, Some(Event::Start)),
                s(1.0, 20, 20, mark("load")),
                s(2.0, 40, 40, None),
                s(3.0, 30, 40, mark("prove")),
                s(4.0, 30, 40, None),
            ],
            None,
            None,
        );
        assert_eq!(p.phases.len(), 2);
        let load = &p.phases[0];
        assert_eq!(
            (load.label.as_str(), load.start_elapsed_s, load.duration_s),
            ("load", 1.0, 2.0)
        );
        assert_eq!(
            (load.start_rss_bytes, load.end_rss_bytes, load.samples),
            (20 * MIB, 30 * MIB, 3)
        );
        assert_eq!(load.mean_rss_bytes, 30 * MIB);
        assert!(load.complete);
        assert!(!p.phases[1].complete);
        assert_eq!(p.phases[1].duration_s, 1.0);
    }

    #[test]
    fn with_resets_after_markers_a_phase_gets_its_own_kernel_peak() {
        let p = build(
            &[
                s(0.0, 50, 50, Some(Event::Start)),
                s(1.0, 50, 50, mark("spike")),
                // A 150 MiB spike between ticks: only VmHWM saw it.
                s(2.0, 50, 200, None),
                s(3.0, 50, 200, mark("after")),
                // After the reset, the next phase's hwm starts from the RSS again.
                s(4.0, 50, 50, None),
            ],
            Some(&meta(true, true)),
            None,
        );
        let spike = &p.phases[0];
        assert_eq!(
            (spike.peak.bytes, spike.peak.source, spike.peak.exact),
            (200 * MIB, PeakSource::Vmhwm, true)
        );
        assert_eq!(spike.facts.sampled_peak_rss_bytes, 50 * MIB);
        assert_eq!(p.phases[1].facts.kernel_peak_rss_bytes, Some(50 * MIB));
        assert_eq!(p.phases[1].peak.source, PeakSource::Vmhwm);
    }

    #[test]
    fn without_resets_an_older_peak_makes_the_kernel_peak_unknown() {
        let p = build(
            &[
                s(0.0, 200, 200, Some(Event::Start)),
                s(1.0, 50, 200, mark("idle")),
                s(2.0, 60, 200, None),
            ],
            Some(&meta(false, true)),
            None,
        );
        assert_eq!(p.phases[0].facts.kernel_peak_rss_bytes, None);
        assert_eq!(
            (p.phases[0].peak.bytes, p.phases[0].peak.source),
            (60 * MIB, PeakSource::Sampled)
        );
    }

    #[test]
    fn an_old_bench_runs_start_a_page_above_its_rss_still_counts_as_reset() {
        // Schema 1 bench recordings said nothing of their resets: a run whose opening row has
        // VmHWM at its RSS (two reads of per-CPU batched counters: a page apart is not an
        // older peak) was reset before it.
        let mut start = s(1.0, 50, 50, Some(Event::RunStart(1)));
        start.hwm_bytes += 4096;
        let rows = [
            s(0.0, 300, 300, Some(Event::Start)),
            start,
            s(2.0, 50, 90, Some(Event::RunEnd(1))),
        ];
        let old = Meta {
            run_peaks: None,
            ..meta(false, true)
        };
        let p = build(&rows, Some(&old), None);
        assert_eq!(p.runs[0].facts.kernel_peak_rss_bytes, Some(90 * MIB));
        let exact_counters = Meta {
            page_size_bytes: 0,
            ..old
        };
        let mut unrisen = rows.clone();
        unrisen[2].hwm_bytes = unrisen[1].hwm_bytes;
        let p = build(&unrisen, Some(&exact_counters), None);
        assert_eq!(p.runs[0].facts.kernel_peak_rss_bytes, None);
    }

    #[test]
    fn a_command_bench_run_takes_what_its_own_end_record_gave_after_its_last_row() {
        // Each run's command peaked after its last row: run 1 at 100 MiB (wait4's ru_maxrss;
        // its exit record a little lower), run 2 at 60 MiB (its exit record; wait4 gave
        // nothing above memmon's own RSS). Each `run-end` row repeats its last sample.
        let row = |t: f64, faults: u64, event| Sample {
            major_faults: faults,
            ..s(t, 5, 5, event)
        };
        let rows = [
            row(0.1, 2, Some(Event::Start)),
            row(0.1, 2, Some(Event::RunStart(1))),
            row(0.3, 2, Some(Event::RunEnd(1))),
            row(0.5, 1, Some(Event::RunStart(2))),
            row(0.9, 1, Some(Event::RunEnd(2))),
        ];
        let run_end = |run, end| crate::format::meta::RunEnd {
            run,
            started_elapsed_s: None,
            end,
        };
        let ended = EndInfo {
            exit_records: Some(crate::format::meta::EXIT_RECORDS_READ.into()),
            ..EndInfo::default()
        };
        let end = EndInfo {
            runs: vec![
                run_end(
                    1,
                    EndInfo {
                        rusage_maxrss_bytes: Some(100 * MIB),
                        launcher_rss_bytes: Some(8 * MIB),
                        exit_peak_after_last_sample_bytes: Some(99 * MIB),
                        command_wall_s: Some(0.25),
                        major_faults: Some(12),
                        ..ended.clone()
                    },
                ),
                run_end(
                    2,
                    EndInfo {
                        rusage_maxrss_bytes: Some(8 * MIB),
                        launcher_rss_bytes: Some(8 * MIB),
                        exit_peak_after_last_sample_bytes: Some(60 * MIB),
                        ..ended.clone()
                    },
                ),
            ],
            ..ended.clone()
        };
        let bench = Meta {
            run_peaks: Some(RunPeaks::Launched),
            ..Meta::example("command")
        };
        let p = build(&rows, Some(&bench), Some(&end));
        let (one, two) = (&p.runs[0], &p.runs[1]);
        assert_eq!(
            (one.peak.bytes, one.peak.source),
            (100 * MIB, PeakSource::RuMaxrss)
        );
        // ru_maxrss far above every mark the rows read: a process left unseen, and wait4
        // holds it.
        assert_eq!(one.peak.scope, PeakScope::LargestProcess);
        assert!(one.peak.exact);
        assert_eq!(one.duration_s, 0.25, "its command's wall time");
        assert_eq!(one.health.major_faults, 12, "counted from the run's launch");
        assert_eq!(
            (two.peak.bytes, two.peak.source),
            (60 * MIB, PeakSource::Vmhwm)
        );
        assert!((two.duration_s - 0.4).abs() < 1e-9, "its rows' span");
        // Without the end record (the bench was killed), only the rows are known.
        let p = build(&rows, Some(&bench), None);
        assert_eq!(p.runs[0].peak.bytes, 5 * MIB);
    }

    #[test]
    fn a_command_bench_run_that_ended_before_its_first_sample_is_listed_from_its_end_record() {
        // Run 2's command ended before memmon's first sample of it: no row, only its end record
        // (its cgroup's peak, its wall time, where it started), as bench's table has it.
        let rows = [
            s(0.1, 5, 5, Some(Event::Start)),
            s(0.1, 5, 5, Some(Event::RunStart(1))),
            s(0.3, 5, 5, Some(Event::RunEnd(1))),
            s(0.9, 7, 7, Some(Event::RunStart(3))),
            s(1.0, 7, 7, Some(Event::RunEnd(3))),
        ];
        let run = |run, started, wall, peak| crate::format::meta::RunEnd {
            run,
            started_elapsed_s: Some(started),
            end: EndInfo {
                command_wall_s: Some(wall),
                ended_unix_ms: 1_000 + ((started + wall) * 1000.0) as u64,
                cgroup: Some(crate::format::meta::CgroupEnd::example_own(peak)),
                major_faults: Some(3),
                ..EndInfo::default()
            },
        };
        let end = EndInfo {
            runs: vec![
                run(1, 0.1, 0.2, 6 * MIB),
                run(2, 0.5, 0.004, 2 * MIB),
                run(3, 0.9, 0.1, 8 * MIB),
            ],
            ..EndInfo::default()
        };
        let bench = Meta {
            run_peaks: Some(RunPeaks::Launched),
            cgroup: Some(crate::format::meta::CgroupMeta::example_own()),
            ..Meta::example("command")
        };
        let p = build(&rows, Some(&bench), Some(&end));
        let listed: Vec<_> = p.runs.iter().map(|r| (r.run, r.peak.bytes)).collect();
        // Runs 1 and 3 are one process each with its VmHWM read: what it needed (5 and 7 MiB),
        // not its cgroup's charge (6 and 8, page cache included); run 2 has no row, only its
        // cgroup's peak.
        assert_eq!(
            listed,
            [(Some(1), 5 * MIB), (Some(2), 2 * MIB), (Some(3), 7 * MIB)]
        );
        let two = &p.runs[1];
        assert_eq!(two.peak.source, PeakSource::Cgroup);
        assert!(two.peak.exact && two.complete);
        assert_eq!((two.samples, two.start_elapsed_s), (0, 0.5));
        assert!(
            (two.duration_s - 0.004).abs() < 1e-9,
            "its command's wall time"
        );
        assert_eq!(two.health.major_faults, 3, "its exit records' count");
        // A bench whose every run was that short: the runs are in its end record alone.
        let p = build(&[], Some(&bench), Some(&end));
        assert_eq!(p.runs.len(), 3);
        assert_eq!(p.runs[2].peak.bytes, 8 * MIB);
    }

    #[test]
    fn bench_runs_reset_after_their_start_row_hold_their_own_peaks() {
        // The daemon peaked at 300 MiB before run 1; the reset right after run 1's first row
        // leaves the later rows with the run's own marks.
        let rows = [
            s(0.0, 300, 300, Some(Event::Start)),
            s(1.0, 50, 300, Some(Event::RunStart(1))),
            s(2.0, 80, 250, None),
            s(3.0, 60, 250, Some(Event::RunEnd(1))),
            s(4.0, 60, 250, Some(Event::RunStart(2))),
            s(5.0, 70, 70, None),
            s(6.0, 60, 120, Some(Event::RunEnd(2))),
        ];
        let bench = Meta {
            run_peaks: Some(RunPeaks::ResetAfterStart),
            ..meta(false, true)
        };
        let p = build(&rows, Some(&bench), None);
        assert_eq!(p.runs.len(), 2);
        let one = &p.runs[0];
        assert_eq!(
            (one.run, one.duration_s, one.samples, one.complete),
            (Some(1), 2.0, 3, true)
        );
        assert_eq!(one.facts.kernel_peak_rss_bytes, Some(250 * MIB));
        assert_eq!(p.runs[1].facts.kernel_peak_rss_bytes, Some(120 * MIB));
        assert!(p.phases.is_empty());
        assert_eq!(
            run_span(&bench, &rows[1..4], true, true).unwrap(),
            p.runs[0],
            "bench's own span of a run is the summary's"
        );
        assert_eq!(
            run_span(&bench, &rows[1..4], false, true)
                .unwrap()
                .facts
                .kernel_peak_rss_bytes,
            None,
            "a refused reset: the marks did not rise above the older peak"
        );
        assert_eq!(
            run_span(&bench, &rows[1..4], true, false)
                .unwrap()
                .facts
                .kernel_peak_rss_bytes,
            Some(250 * MIB),
            "a refused reset of the cgroup's peak alone leaves the kernel's marks reset"
        );
    }

    #[test]
    fn runs_of_appended_benches_are_told_apart_by_their_session() {
        // Two benches into one file (--append), each numbering its runs from 1; the first
        // session's end record never came (killed), so its runs wait undecided when the
        // second's end record, with its own run 1's, arrives.
        let bench = |t0: f64| {
            vec![
                s(t0, 5, 5, Some(Event::Start)),
                s(t0 + 0.1, 5, 5, Some(Event::RunStart(1))),
                s(t0 + 0.3, 50, 50, Some(Event::RunEnd(1))),
                s(t0 + 0.5, 5, 5, Some(Event::RunStart(2))),
                s(t0 + 0.7, 40, 40, Some(Event::RunEnd(2))),
            ]
        };
        let meta = Meta {
            run_peaks: Some(RunPeaks::Launched),
            ..Meta::example("command")
        };
        let mut b = PhaseBuilder::new();
        b.session(&meta);
        bench(0.0).iter().for_each(|r| b.push(r));
        b.session(&meta);
        bench(0.0).iter().for_each(|r| b.push(r));
        let run_end = |run, bytes| crate::format::meta::RunEnd {
            run,
            started_elapsed_s: None,
            end: EndInfo {
                rusage_maxrss_bytes: Some(bytes),
                ..EndInfo::default()
            },
        };
        b.session_end(&EndInfo {
            runs: vec![run_end(1, 300 * MIB), run_end(2, 200 * MIB)],
            ..EndInfo::default()
        });
        let p = b.finish();
        let labels: Vec<(&str, Option<u32>, Option<u32>)> = p
            .runs
            .iter()
            .map(|r| (r.label.as_str(), r.run, r.session))
            .collect();
        assert_eq!(
            labels,
            [
                ("s1 run 1", Some(1), Some(1)),
                ("s1 run 2", Some(2), Some(1)),
                ("s2 run 1", Some(1), Some(2)),
                ("s2 run 2", Some(2), Some(2)),
            ]
        );
        // Session 2's end record is its own runs', not session 1's run 1's.
        let peaks: Vec<u64> = p.runs.iter().map(|r| r.peak.bytes / MIB).collect();
        assert_eq!(peaks, [50, 40, 300, 200]);
        // One session: the runs are `run N`, with no session.
        let p = build(&bench(0.0), Some(&meta), None);
        assert_eq!(p.runs[1].label, "run 2");
        assert_eq!(p.runs[1].session, None);
        let v = serde_json::to_value(&p.runs[1]).unwrap();
        assert!(v.get("session").is_none(), "{v}");
    }

    #[test]
    fn a_new_session_closes_what_is_open() {
        let p = build(
            &[
                s(0.0, 10, 10, Some(Event::Start)),
                s(1.0, 10, 10, mark("a")),
                s(0.0, 10, 10, Some(Event::Start)),
                s(5.0, 10, 10, None),
            ],
            None,
            None,
        );
        assert_eq!(p.phases.len(), 1);
        assert_eq!(p.phases[0].duration_s, 0.0);
        assert!(!p.phases[0].complete);
    }

    #[test]
    fn phases_of_several_sessions_say_which_their_start_is_in() {
        // Two sessions with a phase each, both 0.5 s into their own session's clock.
        let rows = [
            s(0.0, 10, 10, Some(Event::Start)),
            s(0.5, 10, 10, mark("x")),
            s(1.0, 10, 10, None),
            s(0.0, 10, 10, Some(Event::Start)),
            s(0.5, 10, 10, mark("x")),
            s(1.0, 10, 10, None),
        ];
        let p = build(&rows, None, None);
        let sessions: Vec<Option<u32>> = p.phases.iter().map(|s| s.session).collect();
        assert_eq!(sessions, [Some(1), Some(2)]);
        let text = p.render();
        assert!(
            text.contains("s1 +500 ms") && text.contains("s2 +500 ms") && text.contains("sK +T"),
            "{text}"
        );
        // One session: no session said.
        let one = build(&rows[..3], None, None);
        assert_eq!(one.phases[0].session, None);
        assert!(!one.render().contains("s1 +"), "{}", one.render());
    }

    #[test]
    fn a_trees_peak_is_its_largest_process_whatever_its_sampled_sum() {
        // Two processes of 60 MiB: the tree's sum (120 MiB) bounds the tree's peak from below;
        // the peak is the kernel's of its largest process (60 MiB), in every phase alike.
        let tree = |t: f64, event| Sample {
            processes: 2,
            rss_bytes: 120 * MIB,
            top_rss_bytes: 60 * MIB,
            hwm_bytes: 60 * MIB,
            hwm_sum_bytes: 120 * MIB,
            ..s(t, 0, 0, event)
        };
        let p = build(
            &[tree(0.0, mark("both")), tree(1.0, None)],
            Some(&meta(true, true)),
            None,
        );
        let span = &p.phases[0];
        assert_eq!(
            (span.peak.bytes, span.peak.source, span.peak.scope),
            (60 * MIB, PeakSource::Vmhwm, PeakScope::LargestProcess)
        );
        // At least the largest process's 60 MiB (a sum of RSS counts a shared page in each, so
        // it bounds nothing from below), at most the sum of the marks.
        assert_eq!(
            (span.peak.tree_low_bytes, span.peak.tree_high_bytes),
            (Some(60 * MIB), Some(120 * MIB))
        );
        let text = p.render();
        assert!(
            text.contains("60.00 MiB *") && text.contains("between 60.00 MiB and 120.0 MiB"),
            "{text}"
        );
    }

    #[test]
    fn phases_of_one_label_sum_up_in_one_line() {
        let mut rows = Vec::new();
        for (i, peak) in [100u64, 120, 110].iter().enumerate() {
            let t = i as f64 * 10.0;
            rows.push(s(t, 50, 50, mark("synthesis")));
            rows.push(s(t + 4.0 + i as f64, 50, *peak, mark("idle")));
        }
        rows.push(s(40.0, 50, 50, mark("end")));
        let p = build(&rows, Some(&meta(true, true)), None);
        let synthesis = p.by_label.iter().find(|l| l.label == "synthesis").unwrap();
        assert_eq!((synthesis.count, synthesis.exact), (3, 3));
        assert_eq!(synthesis.peak_basis, PeakBasis::Kernel);
        assert_eq!(synthesis.peak_bytes.mean, (110 * MIB) as f64);
        assert_eq!(
            (synthesis.peak_bytes.min, synthesis.peak_bytes.max),
            ((100 * MIB) as f64, (120 * MIB) as f64)
        );
        assert_eq!(synthesis.duration_s.mean, 5.0);
        assert!(p.by_label.iter().all(|l| l.label != "end"), "came once");
        let text = p.render();
        assert!(text.contains("phases by label"), "{text}");
        let line = text
            .lines()
            .find(|l| l.contains("synthesis      3"))
            .unwrap();
        assert!(
            line.contains("5.00 s [4.00 s, 6.00 s]")
                && line.contains("110.0 MiB [100.0 MiB, 120.0 MiB] *")
                && line.ends_with("  process"),
            "{text}"
        );
    }

    #[test]
    fn spans_beyond_the_listed_ones_are_counted_and_summed_not_kept() {
        let mut b = PhaseBuilder::new();
        b.session(&meta(true, true));
        for i in 0..(MAX_LISTED + 50) {
            b.push(&s(
                i as f64,
                50,
                60,
                mark(if i % 2 == 0 { "a" } else { "b" }),
            ));
        }
        let p = b.finish();
        assert_eq!(p.phases.len(), MAX_LISTED);
        assert_eq!(p.unlisted_phases, 50);
        let summed: usize = p.by_label.iter().map(|l| l.count).sum();
        assert_eq!(
            summed,
            MAX_LISTED + 49,
            "every complete phase, listed or not"
        );
        assert!(
            p.render().contains("and 50 more phases not listed"),
            "{}",
            p.render()
        );
    }

    #[test]
    fn a_marker_read_late_leaves_both_phases_beside_it_not_exact() {
        let late = Sample {
            event_lag_us: Some(LATE_EVENT_US + 1),
            ..s(2.0, 50, 90, mark("b"))
        };
        let on_time = Sample {
            event_lag_us: Some(LATE_EVENT_US),
            ..s(4.0, 50, 60, mark("c"))
        };
        let p = build(
            &[
                s(0.0, 50, 50, mark("a")),
                s(1.0, 50, 90, None),
                late,
                s(3.0, 50, 60, None),
                on_time,
                s(5.0, 50, 55, None),
            ],
            Some(&meta(true, true)),
            None,
        );
        let exact: Vec<bool> = p.phases.iter().map(|p| p.peak.exact).collect();
        assert_eq!(exact, [false, false, true]);
        assert!(p.phases[0].facts.late_boundary && p.phases[1].facts.late_boundary);
        let text = p.render();
        assert!(text.contains("(late)"), "{text}");
        // Every boundary late: the title says so, not to record with --phase-peaks.
        let mut all_late = p.clone();
        all_late.phases.truncate(2);
        let text = all_late.render();
        assert!(
            text.contains(
                "no exact peak: every phase's boundary came more than 5 ms after its marker (late)"
            ),
            "{text}"
        );
    }

    /// A row with the cgroup columns: usage and the peak file.
    /// A row of a tree of two processes in a cgroup (a tree: the cgroup's peak is its
    /// headline; one process's own VmHWM would be).
    fn cg(t: f64, current_mib: u64, peak_mib: u64, event: Option<Event>) -> Sample {
        Sample {
            cgroup_bytes: Some(current_mib * MIB),
            cgroup_peak_bytes: Some(peak_mib * MIB),
            processes: 2,
            ..s(t, current_mib, current_mib, event)
        }
    }

    #[test]
    fn a_phase_cgroup_peak_is_exact_after_a_reset_at_its_marker_or_when_the_peak_file_rose() {
        // Phase a peaks at 300 MiB between samples; after the reset at mark b the peak file
        // starts again, and phase b's own peak (120 MiB) is told apart from a's.
        let rows = [
            cg(0.0, 100, 100, mark("a")),
            cg(1.0, 100, 300, None),
            cg(2.0, 100, 300, mark("b")),
            cg(3.0, 110, 120, None),
            cg(4.0, 100, 120, None),
        ];
        let p = build(&rows, Some(&meta(true, true)), None).phases;
        assert_eq!(p[0].facts.cgroup_peak_bytes, Some(300 * MIB));
        assert_eq!(p[1].facts.cgroup_peak_bytes, Some(120 * MIB));
        assert_eq!(p[1].cgroup_sampled_peak_bytes, Some(110 * MIB));
        // Without resets the peak file only grows: phase b's peak is unknown (its file did
        // not rise), and the table shows its sampled usage.
        let rows = [
            cg(0.0, 100, 100, mark("a")),
            cg(1.0, 100, 300, None),
            cg(2.0, 100, 300, mark("b")),
            cg(3.0, 110, 300, None),
        ];
        let ph = build(&rows, Some(&meta(false, true)), None);
        assert_eq!(ph.phases[0].facts.cgroup_peak_bytes, Some(300 * MIB));
        assert_eq!(ph.phases[1].facts.cgroup_peak_bytes, None);
        let text = ph.render();
        assert!(
            text.contains("cgroup peak")
                && text.contains("300.0 MiB *")
                && text.contains("110.0 MiB (sampled)"),
            "{text}"
        ); // A late boundary: the cgroup's peak is no more exact than the peak column says.
        let mut late = ph.clone();
        late.phases[0].facts.late_boundary = true;
        let text = late.render();
        assert!(
            text.contains("300.0 MiB (late)") && !text.contains("300.0 MiB *"),
            "{text}"
        );
    }

    #[test]
    fn the_last_phase_takes_the_cgroups_peak_read_after_the_last_row() {
        // The command spiked to 90 MiB after the last row and exited: the peak file read at
        // the end (after the reset at mark b) is phase b's, exact, not the 10 MiB of its rows.
        let rows = [
            cg(0.0, 10, 10, mark("a")),
            cg(0.2, 10, 10, mark("b")),
            cg(0.7, 10, 10, None),
        ];
        let end = EndInfo {
            cgroup: Some(crate::format::meta::CgroupEnd::example_own(90 * MIB)),
            ..EndInfo::default()
        };
        let m = Meta {
            cgroup: Some(crate::format::meta::CgroupMeta {
                path: "/d".into(),
                version: crate::probe::cgroup::CgroupVersion::V2,
                own: true,
                holds_tree: true,
                not_the_tree: None,
            }),
            ..meta(true, true)
        };
        let p = build(&rows, Some(&m), Some(&end)).phases;
        assert_eq!(p[0].peak.bytes, 10 * MIB);
        assert_eq!(
            (p[1].peak.bytes, p[1].peak.source, p[1].peak.exact),
            (90 * MIB, PeakSource::Cgroup, true)
        );
    }

    #[test]
    fn a_cgroup_that_holds_the_tree_is_each_phases_peak() {
        let rows = [
            cg(0.0, 100, 100, mark("a")),
            cg(1.0, 100, 300, None),
            cg(2.0, 100, 300, mark("b")),
            cg(3.0, 110, 120, None),
        ];
        let m = Meta {
            cgroup: Some(crate::format::meta::CgroupMeta {
                path: "/d".into(),
                version: crate::probe::cgroup::CgroupVersion::V2,
                own: false,
                holds_tree: true,
                not_the_tree: None,
            }),
            ..meta(true, true)
        };
        let p = build(&rows, Some(&m), None);
        assert_eq!(
            (p.phases[0].peak.bytes, p.phases[0].peak.source),
            (300 * MIB, PeakSource::Cgroup)
        );
        assert_eq!(p.phases[0].peak.counter, "memory.peak");
        assert!(
            p.render()
                .contains("the tree's, from its cgroup (memory.peak)"),
            "{}",
            p.render()
        );
    }
}
