//! Phases and runs of a recording, accumulated sample by sample: a phase runs from a `mark:`
//! event to the next, a run from `run-start:N` to `run-end:N`. Each gets its duration, sampled
//! and kernel peak, mean, start and end RSS. Memory grows only with the number of spans.

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
    /// The span's peak RSS: the kernel's exact peak when it is known and above the sampled
    /// one (`peak_source` `kernel`), else the sampled peak (`sampled`).
    pub peak_rss_bytes: u64,
    pub peak_source: &'static str,
    /// The largest sampled RSS of the tree in the span, and when.
    pub sampled_peak_rss_bytes: u64,
    pub sampled_peak_elapsed_s: f64,
    /// The kernel's exact peak RSS (largest VmHWM; for a tree, of its largest process) over the
    /// span; absent when the span did not open with reset high-water marks (see docs/FORMAT.md).
    pub kernel_peak_rss_bytes: Option<u64>,
    pub mean_rss_bytes: u64,
    pub start_rss_bytes: u64,
    pub end_rss_bytes: u64,
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
    last_elapsed_s: f64,
    last_rss: u64,
    samples: u64,
    rss_sum: f64,
    peak_rss: u64,
    peak_elapsed_s: f64,
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
            last_elapsed_s: s.elapsed_s,
            last_rss: s.rss_bytes,
            samples: 1,
            rss_sum: s.rss_bytes as f64,
            peak_rss: s.rss_bytes,
            peak_elapsed_s: s.elapsed_s,
        }
    }

    fn add(&mut self, s: &Sample) {
        self.samples += 1;
        self.rss_sum += s.rss_bytes as f64;
        self.last_elapsed_s = s.elapsed_s;
        self.last_rss = s.rss_bytes;
        self.hwm_after = Some(self.hwm_after.unwrap_or(0).max(s.hwm_bytes));
        if s.rss_bytes > self.peak_rss {
            self.peak_rss = s.rss_bytes;
            self.peak_elapsed_s = s.elapsed_s;
        }
    }

    /// `reset_after_marks`: the recorder reset the high-water marks right after each marker's
    /// sample (`--phase-peaks`), so the opening row's VmHWM belongs to the phase before and
    /// every later row's to this one.
    fn close(&self, reset_after_marks: bool, complete: bool) -> Span {
        let kernel = match self.kind {
            Kind::Phase if reset_after_marks => self.hwm_after,
            _ if self.open_hwm <= self.open_top_rss => {
                Some(self.open_hwm.max(self.hwm_after.unwrap_or(0)))
            }
            _ => None,
        };
        let (peak, source) = match kernel {
            Some(k) if k > self.peak_rss => (k, "kernel"),
            _ => (self.peak_rss, "sampled"),
        };
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
            sampled_peak_rss_bytes: self.peak_rss,
            sampled_peak_elapsed_s: self.peak_elapsed_s,
            kernel_peak_rss_bytes: kernel,
            mean_rss_bytes: (self.rss_sum / self.samples as f64).round() as u64,
            start_rss_bytes: self.start_rss,
            end_rss_bytes: self.last_rss,
            complete,
        }
    }
}

/// Accumulates phases and runs from samples in order.
#[derive(Debug, Default)]
pub struct PhaseBuilder {
    phases: Vec<(Open, bool)>,
    runs: Vec<(Open, bool)>,
    phase: Option<Open>,
    run: Option<Open>,
    samples: u64,
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
        let first = self.samples == 0;
        self.samples += 1;
        match &s.event {
            Some(Event::Start) if !first => {
                // A new session (--append): its clock restarts, so nothing spans it.
                self.close_phase(false);
                self.close_run(false);
                return;
            }
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
    /// metadata says `phase_peaks`.
    pub fn finish(&self, reset_after_marks: bool) -> Phases {
        let close = |list: &[(Open, bool)], open: &Option<Open>| -> Vec<Span> {
            list.iter()
                .map(|(o, complete)| o.close(reset_after_marks, *complete))
                .chain(open.iter().map(|o| o.close(reset_after_marks, false)))
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
                .filter(|s| s.kernel_peak_rss_bytes.is_some())
                .count();
            let _ = writeln!(
                o,
                "  {title} ({}; peak: the kernel's exact peak (VmHWM) where known, marked *, else sampled)",
                if exact == spans.len() {
                    "kernel peaks exact for all".to_string()
                } else if exact == 0 {
                    "no exact kernel peaks: record with --phase-peaks".to_string()
                } else {
                    format!("kernel peaks exact for {exact} of {}", spans.len())
                }
            );
            let rows: Vec<[String; 8]> = spans
                .iter()
                .map(|s| {
                    [
                        s.label.clone(),
                        format!("+{}", fmt_seconds(s.start_elapsed_s)),
                        format!(
                            "{}{}",
                            fmt_seconds(s.duration_s),
                            if s.complete { "" } else { " (open)" }
                        ),
                        format!(
                            "{}{}",
                            fmt_bytes(s.peak_rss_bytes),
                            if s.kernel_peak_rss_bytes.is_some() {
                                " *"
                            } else {
                                ""
                            }
                        ),
                        fmt_bytes(s.sampled_peak_rss_bytes),
                        fmt_bytes(s.mean_rss_bytes),
                        fmt_bytes(s.start_rss_bytes),
                        fmt_bytes(s.end_rss_bytes),
                    ]
                })
                .collect();
            let head = [
                "label",
                "start",
                "duration",
                "peak",
                "sampled peak",
                "mean",
                "start RSS",
                "end RSS",
            ];
            let widths: Vec<usize> = (0..8)
                .map(|i| {
                    rows.iter()
                        .map(|r| r[i].chars().count())
                        .chain([head[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |cells: [&str; 8]| {
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
            let _ = writeln!(o, "{}", line(head));
            for r in &rows {
                let cells: Vec<&str> = r.iter().map(String::as_str).collect();
                let _ = writeln!(o, "{}", line(cells.try_into().expect("eight cells")));
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

    #[test]
    fn phases_run_from_one_marker_to_the_next_and_share_the_boundary_row() {
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 10, 10, Some(Event::Start)));
        b.push(&s(1.0, 20, 20, mark("load")));
        b.push(&s(2.0, 40, 40, None));
        b.push(&s(3.0, 30, 40, mark("prove")));
        b.push(&s(4.0, 30, 40, None));
        let p = b.finish(false);
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
        let p = b.finish(true);
        let spike = &p.phases[0];
        assert_eq!(spike.kernel_peak_rss_bytes, Some(200 * MIB));
        assert_eq!(
            (spike.peak_rss_bytes, spike.peak_source),
            (200 * MIB, "kernel")
        );
        assert_eq!(spike.sampled_peak_rss_bytes, 50 * MIB);
        assert_eq!(p.phases[1].kernel_peak_rss_bytes, Some(50 * MIB));
        assert_eq!(p.phases[1].peak_source, "sampled");
    }

    #[test]
    fn without_resets_an_older_peak_makes_the_kernel_peak_unknown() {
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 200, 200, Some(Event::Start)));
        b.push(&s(1.0, 50, 200, mark("idle")));
        b.push(&s(2.0, 60, 200, None));
        let p = b.finish(false);
        assert_eq!(p.phases[0].kernel_peak_rss_bytes, None);
        assert_eq!(p.phases[0].peak_rss_bytes, 60 * MIB);
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
        let p = b.finish(false);
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
        let p = b.finish(false);
        assert_eq!(p.phases.len(), 1);
        assert_eq!(p.phases[0].duration_s, 0.0);
        assert!(!p.phases[0].complete);
    }

    #[test]
    fn the_table_names_each_phase_with_units() {
        let mut b = PhaseBuilder::new();
        b.push(&s(0.0, 50, 50, mark("synthesis")));
        b.push(&s(2.0, 50, 200, mark("gpu prove")));
        let text = b.finish(true).render();
        assert!(
            text.contains("phases (kernel peaks exact for 1 of 2"),
            "{text}"
        );
        assert!(
            text.contains("synthesis") && text.contains("200.0 MiB *") && text.contains("2.00 s"),
            "{text}"
        );
    }
}
