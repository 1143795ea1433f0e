//! Phases and runs of a recording, accumulated sample by sample: a phase runs from a `mark:`
//! event to the next, a run from `run-start:N` to `run-end:N`. Each gets its duration, sampled
//! and kernel peak, mean, start and end RSS. Memory grows only with the number of spans.

use super::summary::{PssReads, PssTrack};
use super::timeline::Timeline;
use crate::model::peak::{choose_peak, PeakScope, PeakSource};
use crate::model::sample::{Event, Sample};
use crate::units::{fmt_bytes, fmt_seconds};
use serde::Serialize;
use std::fmt::Write as _;

/// One phase or run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Span {
    /// The marker's label (phases) or `run N` (runs).
    pub label: String,
    /// The run's number (runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    pub start_elapsed_s: f64,
    pub start_unix_ms: u64,
    pub end_elapsed_s: f64,
    pub duration_s: f64,
    /// Rows from the opening one to the closing one, both included.
    pub samples: u64,
    /// The span's peak RSS: the kernel's when it is known and the sampled one does not exceed
    /// it by more than the counters' batching (`peak_source` `vmhwm`), else the sampled peak
    /// (`sampled`): `crate::model::peak::choose_peak`, as bench and compare choose.
    pub peak_rss_bytes: u64,
    pub peak_source: PeakSource,
    /// What the kernel peak is the peak of: `process`, or `largest-process` when the span saw
    /// several processes.
    pub kernel_peak_scope: PeakScope,
    /// The largest sampled RSS of the tree in the span, and when.
    pub sampled_peak_rss_bytes: u64,
    pub sampled_peak_elapsed_s: f64,
    /// The kernel's exact peak RSS (largest VmHWM; for a tree, of its largest process) over the
    /// span; absent when the span did not open with reset high-water marks (see docs/FORMAT.md).
    pub kernel_peak_rss_bytes: Option<u64>,
    pub mean_rss_bytes: u64,
    pub start_rss_bytes: u64,
    pub end_rss_bytes: u64,
    /// The most processes at one row: above 1, the RSS figures are sums that count a shared
    /// page once per process mapping it.
    pub max_processes: u32,
    /// Processes that left the tree during the span (the `departed` column of its rows after
    /// the opening one).
    pub departed: u64,
    /// The PSS reads in the span (`--pss`), absent when none fell in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pss: Option<PssReads>,
    /// The largest `gpu_bytes` in the span (GPU memory held by the tree), when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_gpu_bytes: Option<u64>,
    /// With a cgroup recorded: the span's exact cgroup peak (each page once, page cache
    /// included), where the kernel's peak file tells it: reset at the span's opening marker
    /// (`--phase-peaks`), or risen above its value at the opening row during the span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_peak_bytes: Option<u64>,
    /// With a cgroup recorded: the largest `cgroup_bytes` sampled in the span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_sampled_peak_bytes: Option<u64>,
    /// Closed by the next marker (phases) or its run-end (runs); false when the recording (or
    /// its session) ended first.
    pub complete: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Phase,
    Run(u32),
}

/// A span still open.
#[derive(Debug, Clone)]
struct Open {
    kind: Kind,
    label: String,
    start_elapsed_s: f64,
    start_unix_ms: u64,
    start_rss: u64,
    /// VmHWM and top RSS at the opening row: equal means no process carried an older peak
    /// into the span (as right after a reset).
    open_hwm: u64,
    open_top_rss: u64,
    /// The largest VmHWM of the rows after the opening one.
    hwm_after: Option<u64>,
    /// Processes that left the tree in the rows after the opening one.
    departed: u64,
    last_elapsed_s: f64,
    last_rss: u64,
    samples: u64,
    rss_sum: f64,
    peak_rss: u64,
    peak_elapsed_s: f64,
    max_processes: u32,
    pss: PssTrack,
    peak_gpu: Option<u64>,
    /// The cgroup's peak file at the opening row, the largest after it, and the largest
    /// sampled usage (all `None` without a cgroup).
    cgroup_open_peak: Option<u64>,
    cgroup_peak_after: Option<u64>,
    cgroup_max: Option<u64>,
}

impl Open {
    fn new(kind: Kind, label: String, s: &Sample) -> Open {
        Open {
            kind,
            label,
            start_elapsed_s: s.elapsed_s,
            start_unix_ms: s.unix_ms,
            start_rss: s.rss_bytes,
            open_hwm: s.hwm_bytes,
            open_top_rss: s.top_rss_bytes,
            hwm_after: None,
            departed: 0,
            last_elapsed_s: s.elapsed_s,
            last_rss: s.rss_bytes,
            samples: 1,
            rss_sum: s.rss_bytes as f64,
            peak_rss: s.rss_bytes,
            peak_elapsed_s: s.elapsed_s,
            max_processes: s.processes,
            pss: {
                let mut t = PssTrack::default();
                t.push(s);
                t
            },
            peak_gpu: s.gpu.bytes,
            cgroup_open_peak: s.cgroup_peak_bytes,
            cgroup_peak_after: None,
            cgroup_max: s.cgroup_bytes,
        }
    }

    fn add(&mut self, s: &Sample) {
        self.samples += 1;
        self.rss_sum += s.rss_bytes as f64;
        self.last_elapsed_s = s.elapsed_s;
        self.last_rss = s.rss_bytes;
        self.hwm_after = Some(self.hwm_after.unwrap_or(0).max(s.hwm_bytes));
        self.departed += s.departed as u64;
        self.max_processes = self.max_processes.max(s.processes);
        self.pss.push(s);
        if let Some(g) = s.gpu.bytes {
            self.peak_gpu = Some(self.peak_gpu.unwrap_or(0).max(g));
        }
        if let Some(p) = s.cgroup_peak_bytes {
            self.cgroup_peak_after = Some(self.cgroup_peak_after.map_or(p, |m| m.max(p)));
        }
        if let Some(c) = s.cgroup_bytes {
            self.cgroup_max = Some(self.cgroup_max.map_or(c, |m| m.max(c)));
        }
        if s.rss_bytes > self.peak_rss {
            self.peak_rss = s.rss_bytes;
            self.peak_elapsed_s = s.elapsed_s;
        }
    }

    /// `reset_after_marks`: the recorder reset the high-water marks right after each marker's
    /// sample (`--phase-peaks`), so the opening row's VmHWM belongs to the phase before and
    /// every later row's to this one. A span still open when the recording ended (`!complete`)
    /// also holds the peaks that exit records gave after the last row (`end`).
    fn close(
        &self,
        reset_after_marks: bool,
        bound_bytes: u64,
        complete: bool,
        end: SpanEnd,
    ) -> Span {
        let tail = end.exit_peak_after_last_sample.filter(|_| !complete);
        let hwm_after = match (self.hwm_after, tail) {
            (Some(h), Some(t)) => Some(h.max(t)),
            (h, t) => h.or(t),
        };
        let kernel = match self.kind {
            Kind::Phase if reset_after_marks => hwm_after,
            // Equal within the counters' batching: a reset sets VmHWM to an RSS read a moment
            // before or after the one sampled.
            _ if self.open_hwm <= self.open_top_rss.saturating_add(bound_bytes) => {
                Some(self.open_hwm.max(hwm_after.unwrap_or(0)))
            }
            _ => None,
        };
        let (peak, source) = choose_peak(
            kernel.map(|k| (k, PeakSource::Vmhwm)),
            self.peak_rss,
            bound_bytes,
        );
        Span {
            label: self.label.clone(),
            run: match self.kind {
                Kind::Run(n) => Some(n),
                Kind::Phase => None,
            },
            start_elapsed_s: self.start_elapsed_s,
            start_unix_ms: self.start_unix_ms,
            end_elapsed_s: self.last_elapsed_s,
            duration_s: self.last_elapsed_s - self.start_elapsed_s,
            samples: self.samples,
            peak_rss_bytes: peak,
            peak_source: source,
            kernel_peak_scope: PeakScope::of_kernel_counter(
                self.max_processes,
                self.departed,
                end.exit_records,
            ),
            sampled_peak_rss_bytes: self.peak_rss,
            sampled_peak_elapsed_s: self.peak_elapsed_s,
            kernel_peak_rss_bytes: kernel,
            mean_rss_bytes: (self.rss_sum / self.samples as f64).round() as u64,
            start_rss_bytes: self.start_rss,
            end_rss_bytes: self.last_rss,
            max_processes: self.max_processes,
            departed: self.departed,
            pss: self.pss.reads(self.start_elapsed_s, self.last_elapsed_s),
            peak_gpu_bytes: self.peak_gpu,
            cgroup_peak_bytes: match (self.kind, self.cgroup_open_peak, self.cgroup_peak_after) {
                (Kind::Phase, _, Some(after)) if reset_after_marks => Some(after),
                // A peak file that rose during the span was set in it: the span's peak.
                (_, Some(open), Some(after)) if after > open => Some(after),
                _ => None,
            },
            cgroup_sampled_peak_bytes: self.cgroup_max,
            complete,
        }
    }
}

/// What the end of a recording tells its spans.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpanEnd {
    /// Every exit record was read (`EndInfo::exit_records_complete`): the peaks of processes
    /// that left the tree are in the rows.
    pub exit_records: bool,
    /// The peak the exit records gave when the target ended, after the last row
    /// (`EndInfo::exit_peak_after_last_sample_bytes`): it belongs to the spans still open.
    pub exit_peak_after_last_sample: Option<u64>,
}

/// Accumulates phases and runs from samples in order.
#[derive(Debug, Default)]
pub struct PhaseBuilder {
    phases: Vec<(Open, bool)>,
    runs: Vec<(Open, bool)>,
    phase: Option<Open>,
    run: Option<Open>,
    timeline: Timeline,
}

/// The phases and runs of a recording.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Phases {
    pub phases: Vec<Span>,
    pub runs: Vec<Span>,
}

impl PhaseBuilder {
    pub fn new() -> PhaseBuilder {
        PhaseBuilder::default()
    }

    pub fn push(&mut self, s: &Sample) {
        if self.timeline.push(s).new_session {
            // A new session (--append): its clock restarts, so nothing spans it.
            self.close_phase(false);
            self.close_run(false);
            return;
        }
        match &s.event {
            Some(Event::Mark(label)) => {
                if let Some(p) = self.phase.as_mut() {
                    p.add(s);
                }
                self.close_phase(true);
                self.phase = Some(Open::new(Kind::Phase, label.clone(), s));
                self.add_to_run(s);
                return;
            }
            Some(Event::RunStart(n)) => {
                self.close_run(false);
                self.run = Some(Open::new(Kind::Run(*n), format!("run {n}"), s));
                self.add_to_phase(s);
                return;
            }
            Some(Event::RunEnd(n)) => {
                self.add_to_phase(s);
                if self.run.as_ref().is_some_and(|r| r.kind == Kind::Run(*n)) {
                    self.add_to_run(s);
                    self.close_run(true);
                }
                return;
            }
            _ => {}
        }
        self.add_to_phase(s);
        self.add_to_run(s);
    }

    fn add_to_phase(&mut self, s: &Sample) {
        if let Some(p) = self.phase.as_mut() {
            p.add(s);
        }
    }

    fn add_to_run(&mut self, s: &Sample) {
        if let Some(r) = self.run.as_mut() {
            r.add(s);
        }
    }

    fn close_phase(&mut self, complete: bool) {
        if let Some(p) = self.phase.take() {
            self.phases.push((p, complete));
        }
    }

    fn close_run(&mut self, complete: bool) {
        if let Some(r) = self.run.take() {
            self.runs.push((r, complete));
        }
    }

    /// The spans so far; open ones end at the last sample. `reset_after_marks`: the recording's
    /// metadata says `phase_peaks`. `bound_bytes`: how far the kernel's counters may be off
    /// (`crate::model::peak::batching_bound_bytes`).
    pub fn finish(&self, reset_after_marks: bool, bound_bytes: u64, end: SpanEnd) -> Phases {
        let close = |list: &[(Open, bool)], open: &Option<Open>| -> Vec<Span> {
            // A span closed by a new session ends before the recording did: no tail for it.
            let closed = SpanEnd {
                exit_peak_after_last_sample: None,
                ..end
            };
            list.iter()
                .map(|(o, complete)| o.close(reset_after_marks, bound_bytes, *complete, closed))
                .chain(
                    open.iter()
                        .map(|o| o.close(reset_after_marks, bound_bytes, false, end)),
                )
                .collect()
        };
        Phases {
            phases: close(&self.phases, &self.phase),
            runs: close(&self.runs, &self.run),
        }
    }
}

impl Phases {
    /// The tables of phases and runs (nothing when there are none), indented for the summary.
    pub fn render(&self) -> String {
        let mut o = String::new();
        for (title, spans) in [("phases", &self.phases), ("runs", &self.runs)] {
            if spans.is_empty() {
                continue;
            }
            let exact = spans
                .iter()
                .filter(|s| s.kernel_peak_rss_bytes.is_some() && !s.kernel_peak_scope.is_partial())
                .count();
            let partial = spans
                .iter()
                .filter(|s| s.kernel_peak_rss_bytes.is_some() && s.kernel_peak_scope.is_partial())
                .count();
            let _ = writeln!(
                o,
                "  {title} ({}; peak: the kernel's (VmHWM, exact within its per-CPU batching) where known and not exceeded by the sampled one, marked *, else sampled)",
                if exact == spans.len() {
                    "kernel peaks exact for all".to_string()
                } else if exact == 0 && partial == 0 {
                    "no exact kernel peaks: record with --phase-peaks".to_string()
                } else {
                    format!("kernel peaks exact for {exact} of {}", spans.len())
                }
            );
            if partial > 0 {
                let _ = writeln!(
                    o,
                    "    ≥: processes left the tree in the {title} so marked with no exit record read: the peak is the largest VmHWM the samples saw, a lower bound"
                );
            }
            let processes = spans.iter().map(|s| s.max_processes).max().unwrap_or(0);
            let with_pss = spans.iter().any(|s| s.pss.is_some());
            let with_gpu = spans.iter().any(|s| s.peak_gpu_bytes.is_some());
            let with_cgroup = spans.iter().any(|s| s.cgroup_sampled_peak_bytes.is_some());
            if spans.iter().any(|s| s.cgroup_sampled_peak_bytes.is_some()) {
                let _ = writeln!(
                    o,
                    "    cgroup peak: the cgroup's (each page once, page cache included), exact (*) where its peak file was reset at the marker (--phase-peaks) or rose in the span, else the largest sampled usage"
                );
            }
            if processes > 1 {
                let _ = writeln!(
                    o,
                    "    sizes are RSS sums over up to {processes} processes, shared pages counted in each{}",
                    if with_pss {
                        "; PSS: sum of PSS, each page once (peak where 2+ reads cover the span, else the reads)"
                    } else {
                        " (record with --pss for a sum that counts them once)"
                    }
                );
            }
            let rows: Vec<Vec<String>> = spans
                .iter()
                .map(|s| {
                    let cells = [
                        s.label.clone(),
                        format!("+{}", fmt_seconds(s.start_elapsed_s)),
                        format!(
                            "{}{}",
                            fmt_seconds(s.duration_s),
                            if s.complete { "" } else { " (open)" }
                        ),
                        match (s.peak_source.is_kernel(), s.kernel_peak_scope.is_partial()) {
                            (true, true) => format!("≥ {} *", fmt_bytes(s.peak_rss_bytes)),
                            (true, false) => format!("{} *", fmt_bytes(s.peak_rss_bytes)),
                            _ => fmt_bytes(s.peak_rss_bytes),
                        },
                        fmt_bytes(s.sampled_peak_rss_bytes),
                        fmt_bytes(s.mean_rss_bytes),
                        fmt_bytes(s.start_rss_bytes),
                        fmt_bytes(s.end_rss_bytes),
                    ];
                    let mut row = cells.to_vec();
                    if with_cgroup {
                        row.push(match (s.cgroup_peak_bytes, s.cgroup_sampled_peak_bytes) {
                            (Some(p), _) => format!("{} *", fmt_bytes(p)),
                            (None, Some(c)) => format!("{} (sampled)", fmt_bytes(c)),
                            (None, None) => "-".into(),
                        });
                    }
                    if with_pss {
                        row.push(match &s.pss {
                            Some(r) if r.is_peak => {
                                format!("{} ({} reads)", fmt_bytes(r.largest_bytes), r.reads)
                            }
                            Some(r) if r.reads == 1 => format!(
                                "{} (1 read at +{})",
                                fmt_bytes(r.largest_bytes),
                                fmt_seconds(r.first_elapsed_s)
                            ),
                            Some(r) => format!(
                                "{} ({} reads, not a peak)",
                                fmt_bytes(r.largest_bytes),
                                r.reads
                            ),
                            None => "-".into(),
                        });
                    }
                    if with_gpu {
                        row.push(s.peak_gpu_bytes.map_or("-".into(), fmt_bytes));
                    }
                    row
                })
                .collect();
            let mut head = vec![
                "label",
                "start",
                "duration",
                "peak",
                "sampled peak",
                "mean",
                "start RSS",
                "end RSS",
            ];
            if with_cgroup {
                head.push("cgroup peak");
            }
            if with_pss {
                head.push("PSS");
            }
            if with_gpu {
                head.push("GPU peak");
            }
            let widths: Vec<usize> = (0..head.len())
                .map(|i| {
                    rows.iter()
                        .map(|r| r[i].chars().count())
                        .chain([head[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |cells: &[&str]| {
                let mut l = String::from("   ");
                for (i, c) in cells.iter().enumerate() {
                    let pad = widths[i] - c.chars().count();
                    if i == 0 {
                        let _ = write!(l, " {c}{}", " ".repeat(pad));
                    } else {
                        let _ = write!(l, "  {}{c}", " ".repeat(pad));
                    }
                }
                l.trim_end().to_string()
            };
            let _ = writeln!(o, "{}", line(&head));
            for r in &rows {
                let cells: Vec<&str> = r.iter().map(String::as_str).collect();
                let _ = writeln!(o, "{}", line(&cells));
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn s(t: f64, rss_mib: u64, hwm_mib: u64, event: Option<Event>) -> Sample {
        Sample {
            unix_ms: 1_000 + (t * 1000.0) as u64,
            elapsed_s: t,
            rss_bytes: rss_mib * MIB,
            top_rss_bytes: rss_mib * MIB,
            hwm_bytes: hwm_mib * MIB,
            processes: 1,
            event,
            ..Sample::default()
        }
    }

    fn mark(l: &str) -> Option<Event> {
        Some(Event::Mark(l.into()))
    }

    /// A phase of a forking daemon: a worker peaked at 900 MiB and left between two samples
    /// (its exit record's peak is in the row where it left).
    fn forked_worker_phases() -> PhaseBuilder {
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 100, 100, mark("serve")));
        b.push(&Sample {
            departed: 1,
            ..s(1.0, 100, 900, None)
        });
        b.push(&s(2.0, 100, 100, mark("idle")));
        b.push(&s(3.0, 100, 100, None));
        b
    }

    #[test]
    fn a_phase_where_a_process_left_is_the_largest_processs_peak_with_exit_records() {
        let end = SpanEnd {
            exit_records: true,
            ..SpanEnd::default()
        };
        let p = forked_worker_phases().finish(true, 0, end);
        let serve = &p.phases[0];
        assert_eq!(serve.departed, 1);
        assert_eq!(serve.kernel_peak_rss_bytes, Some(900 * MIB));
        assert_eq!(serve.kernel_peak_scope, PeakScope::LargestProcess);
        assert_eq!(p.phases[1].kernel_peak_scope, PeakScope::Process);
        assert!(
            p.render().contains("kernel peaks exact for all"),
            "{}",
            p.render()
        );
    }

    #[test]
    fn without_exit_records_a_phase_where_a_process_left_is_a_lower_bound() {
        let p = forked_worker_phases().finish(true, 0, SpanEnd::default());
        assert_eq!(p.phases[0].kernel_peak_scope, PeakScope::LargestProcessSeen);
        assert_eq!(p.phases[1].kernel_peak_scope, PeakScope::Process);
        let text = p.render();
        assert!(text.contains("kernel peaks exact for 1 of 2"), "{text}");
        assert!(text.contains("≥ 900.0 MiB *"), "{text}");
        assert!(text.contains("a lower bound"), "{text}");
    }

    #[test]
    fn the_peak_exit_records_gave_after_the_last_row_goes_to_the_spans_still_open() {
        let end = SpanEnd {
            exit_records: true,
            exit_peak_after_last_sample: Some(700 * MIB),
        };
        let p = forked_worker_phases().finish(true, 0, end);
        assert_eq!(p.phases[0].kernel_peak_rss_bytes, Some(900 * MIB), "closed");
        assert_eq!(
            p.phases[1].kernel_peak_rss_bytes,
            Some(700 * MIB),
            "open at the end"
        );
    }

    #[test]
    fn each_phase_has_its_gpu_peak_in_its_own_column() {
        let mut b = PhaseBuilder::new();
        let row = |t: f64, gpu: Option<u64>, event| {
            let mut r = s(t, 100, 100, event);
            r.gpu.bytes = gpu.map(|g| g * MIB);
            r
        };
        b.push(&row(0.0, Some(0), mark("load")));
        b.push(&row(1.0, Some(4096), None));
        b.push(&row(2.0, Some(1024), mark("prove")));
        b.push(&row(3.0, Some(20480), None));
        b.push(&row(4.0, None, None));
        let p = b.finish(false, 0, SpanEnd::default());
        assert_eq!(p.phases[0].peak_gpu_bytes, Some(4096 * MIB));
        assert_eq!(p.phases[1].peak_gpu_bytes, Some(20480 * MIB));
        let text = p.render();
        assert!(text.contains("GPU peak"), "{text}");
        assert!(text.contains("20.00 GiB"), "{text}");
    }

    #[test]
    fn each_phase_has_its_pss_reads_and_a_tree_says_its_sums_count_shared_pages() {
        let mut b = PhaseBuilder::new();
        let row = |t: f64, rss: u64, pss: Option<u64>, event| Sample {
            processes: 9,
            pss_bytes: pss.map(|p| p * MIB),
            ..s(t, rss, rss / 9, event)
        };
        b.push(&row(0.0, 900, Some(100), mark("load")));
        b.push(&row(1.0, 1600, Some(300), None));
        b.push(&row(2.0, 1000, Some(120), mark("idle")));
        b.push(&row(3.0, 1000, None, None));
        b.push(&row(4.0, 1000, None, None));
        let p = b.finish(false, 0, SpanEnd::default());
        let load = p.phases[0].pss.unwrap();
        assert_eq!(
            (load.largest_bytes, load.reads, load.is_peak),
            (300 * MIB, 3, true)
        );
        let idle = p.phases[1].pss.unwrap();
        assert_eq!((idle.reads, idle.is_peak), (1, false));
        assert_eq!(p.phases[0].max_processes, 9);
        let text = p.render();
        assert!(
            text.contains("sizes are RSS sums over up to 9 processes, shared pages counted in each; PSS: sum of PSS, each page once"),
            "{text}"
        );
        assert!(text.contains("300.0 MiB (3 reads)"), "{text}");
        assert!(text.contains("120.0 MiB (1 read at +2.00 s)"), "{text}");
    }

    #[test]
    fn phases_run_from_one_marker_to_the_next_and_share_the_boundary_row() {
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 10, 10, Some(Event::Start)));
        b.push(&s(1.0, 20, 20, mark("load")));
        b.push(&s(2.0, 40, 40, None));
        b.push(&s(3.0, 30, 40, mark("prove")));
        b.push(&s(4.0, 30, 40, None));
        let p = b.finish(false, 0, SpanEnd::default());
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
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 50, 50, Some(Event::Start)));
        b.push(&s(1.0, 50, 50, mark("spike")));
        // A 150 MiB spike between ticks: only VmHWM saw it.
        b.push(&s(2.0, 50, 200, None));
        b.push(&s(3.0, 50, 200, mark("after")));
        // After the reset, the next phase's hwm starts from the RSS again.
        b.push(&s(4.0, 50, 50, None));
        let p = b.finish(true, 0, SpanEnd::default());
        let spike = &p.phases[0];
        assert_eq!(spike.kernel_peak_rss_bytes, Some(200 * MIB));
        assert_eq!(
            (spike.peak_rss_bytes, spike.peak_source),
            (200 * MIB, PeakSource::Vmhwm)
        );
        assert_eq!(spike.sampled_peak_rss_bytes, 50 * MIB);
        assert_eq!(p.phases[1].kernel_peak_rss_bytes, Some(50 * MIB));
        // The kernel's peak equals the sampled one: it is the kernel's, as bench reports it.
        assert_eq!(p.phases[1].peak_source, PeakSource::Vmhwm);
    }

    #[test]
    fn without_resets_an_older_peak_makes_the_kernel_peak_unknown() {
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 200, 200, Some(Event::Start)));
        b.push(&s(1.0, 50, 200, mark("idle")));
        b.push(&s(2.0, 60, 200, None));
        let p = b.finish(false, 0, SpanEnd::default());
        assert_eq!(p.phases[0].kernel_peak_rss_bytes, None);
        assert_eq!(p.phases[0].peak_rss_bytes, 60 * MIB);
    }

    #[test]
    fn a_run_start_mark_a_page_above_its_rss_still_counts_as_reset() {
        // After a reset VmHWM and VmRSS are two reads of per-CPU batched counters: a page
        // apart is not an older peak.
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 300, 300, Some(Event::Start)));
        let mut start = s(1.0, 50, 50, Some(Event::RunStart(1)));
        start.hwm_bytes += 4096;
        b.push(&start);
        b.push(&s(2.0, 50, 90, Some(Event::RunEnd(1))));
        let p = b.finish(false, 512 * 1024, SpanEnd::default());
        assert_eq!(p.runs[0].kernel_peak_rss_bytes, Some(90 * MIB));
        assert_eq!(p.runs[0].peak_source, PeakSource::Vmhwm);
        assert_eq!(
            b.finish(false, 0, SpanEnd::default()).runs[0].kernel_peak_rss_bytes,
            None
        );
    }

    #[test]
    fn runs_span_run_start_to_run_end_and_take_the_kernel_peak_after_a_reset() {
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 300, 300, Some(Event::Start)));
        b.push(&s(1.0, 50, 50, Some(Event::RunStart(1)))); // reset just before: hwm == rss
        b.push(&s(2.0, 80, 250, None));
        b.push(&s(3.0, 60, 250, Some(Event::RunEnd(1))));
        b.push(&s(4.0, 60, 250, None));
        b.push(&s(5.0, 60, 250, Some(Event::RunStart(2)))); // no reset
        b.push(&s(6.0, 70, 250, None));
        let p = b.finish(false, 0, SpanEnd::default());
        assert_eq!(p.runs.len(), 2);
        let one = &p.runs[0];
        assert_eq!(
            (one.run, one.duration_s, one.samples, one.complete),
            (Some(1), 2.0, 3, true)
        );
        assert_eq!(one.kernel_peak_rss_bytes, Some(250 * MIB));
        assert_eq!(p.runs[1].kernel_peak_rss_bytes, None);
        assert!(!p.runs[1].complete);
        assert!(p.phases.is_empty());
    }

    #[test]
    fn a_new_session_closes_what_is_open() {
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 10, 10, Some(Event::Start)));
        b.push(&s(1.0, 10, 10, mark("a")));
        b.push(&s(0.0, 10, 10, Some(Event::Start)));
        b.push(&s(5.0, 10, 10, None));
        let p = b.finish(false, 0, SpanEnd::default());
        assert_eq!(p.phases.len(), 1);
        assert_eq!(p.phases[0].duration_s, 0.0);
        assert!(!p.phases[0].complete);
    }

    #[test]
    fn a_trees_sampled_sum_above_its_largest_process_is_not_marked_as_the_kernels() {
        // Two processes of 60 MiB: the tree's sum (120 MiB) is sampled, not the kernel's peak
        // of its largest process (60 MiB), and the table must not star it.
        let mut b = PhaseBuilder::new();
        let tree = |t: f64, event| Sample {
            processes: 2,
            rss_bytes: 120 * MIB,
            top_rss_bytes: 60 * MIB,
            hwm_bytes: 60 * MIB,
            ..s(t, 0, 0, event)
        };
        b.push(&tree(0.0, mark("both")));
        b.push(&tree(1.0, None));
        let p = b.finish(false, 512 * 1024, SpanEnd::default());
        let span = &p.phases[0];
        assert_eq!(span.kernel_peak_rss_bytes, Some(60 * MIB));
        assert_eq!(span.kernel_peak_scope, PeakScope::LargestProcess);
        assert_eq!(
            (span.peak_rss_bytes, span.peak_source),
            (120 * MIB, PeakSource::Sampled)
        );
        let text = p.render();
        assert!(
            text.contains("120.0 MiB") && !text.contains("MiB *"),
            "{text}"
        );
    }

    #[test]
    fn the_table_names_each_phase_with_units() {
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 50, 50, mark("synthesis")));
        b.push(&s(2.0, 50, 200, mark("gpu prove")));
        let text = b.finish(true, 0, SpanEnd::default()).render();
        assert!(
            text.contains("phases (kernel peaks exact for 1 of 2"),
            "{text}"
        );
        assert!(
            text.contains("synthesis") && text.contains("200.0 MiB *") && text.contains("2.00 s"),
            "{text}"
        );
    }

    /// A row with the cgroup columns: usage and the peak file.
    fn cg(t: f64, current_mib: u64, peak_mib: u64, event: Option<Event>) -> Sample {
        Sample {
            cgroup_bytes: Some(current_mib * MIB),
            cgroup_peak_bytes: Some(peak_mib * MIB),
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
        let mut b = PhaseBuilder::new();
        rows.iter().for_each(|r| b.push(r));
        let p = b.finish(true, 0, SpanEnd::default()).phases;
        assert_eq!(p[0].cgroup_peak_bytes, Some(300 * MIB));
        assert_eq!(p[1].cgroup_peak_bytes, Some(120 * MIB));
        assert_eq!(p[1].cgroup_sampled_peak_bytes, Some(110 * MIB));
        assert!(p[0].cgroup_peak_bytes > p[0].cgroup_sampled_peak_bytes);
        // Without resets the peak file only grows: phase b's peak is unknown (its file did
        // not rise), and the table shows its sampled usage.
        let rows = [
            cg(0.0, 100, 100, mark("a")),
            cg(1.0, 100, 300, None),
            cg(2.0, 100, 300, mark("b")),
            cg(3.0, 110, 300, None),
        ];
        let mut b = PhaseBuilder::new();
        rows.iter().for_each(|r| b.push(r));
        let ph = b.finish(false, 0, SpanEnd::default());
        assert_eq!(ph.phases[0].cgroup_peak_bytes, Some(300 * MIB));
        assert_eq!(ph.phases[1].cgroup_peak_bytes, None);
        let text = ph.render();
        assert!(
            text.contains("cgroup peak")
                && text.contains("300.0 MiB *")
                && text.contains("110.0 MiB (sampled)"),
            "{text}"
        );
    }
}
