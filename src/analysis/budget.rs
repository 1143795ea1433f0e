//! Budgets: `--max-peak SIZE`, `--max-cgroup SIZE` and `--max-gpu SIZE` (summary, bench,
//! compare) fail when a peak exceeds them. Each check judges a stated number — the peak as
//! decided once (`model::peak`), of a named recording or run — and its message names that
//! number, its source and scope, and whose it is.
//!
//! What is judged ([`units`]): a recording with complete bench runs is judged run by run (as
//! `bench` judges them, and `compare` counts them); any other recording as a whole. The verdict
//! in words is `render/budget.rs`'s.

use super::summary::{ExactUpTo, Summary};
use crate::model::peak::{Peak, PeakScope, PeakSource};
use serde::Serialize;

/// The budgets given; `None` is no budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budgets {
    /// `--max-peak`: the peak (`Peak`: a cgroup's tree peak, else the largest process's kernel
    /// peak, else the sampled one).
    pub max_peak: Option<u64>,
    /// `--max-cgroup`: the peak of the memory cgroup recorded.
    pub max_cgroup: Option<u64>,
    /// `--max-gpu`: the largest GPU memory of the tree (`gpu_bytes`, sampled from NVML).
    pub max_gpu: Option<u64>,
}

/// What one unit (a recording, a bench run) offers the budgets.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// Whose numbers: `run.csv`, `run.csv#run 3`, `run 3`.
    pub of: String,
    pub peak: Option<Peak>,
    /// The cgroup's exact peak, or its largest sampled usage when its peak file does not cover
    /// the unit (then not exact).
    pub cgroup: Option<Peak>,
    /// The GPU peak (`gpu::budget_peak`: the driver's exact mark where it covers the unit,
    /// else sampled).
    pub gpu: Option<Peak>,
    /// How far the kernel's per-process counters may be off, where the recording says.
    pub exact_within_bytes: Option<u64>,
    /// Where the exact `peak` stops being exact (`Summary::peak_exact_up_to`: a recorder
    /// killed before its end record).
    pub peak_exact_up_to: Option<ExactUpTo>,
}

impl Unit {
    /// A bench run's numbers: its peak; its cgroup's exact peak, else its largest sampled usage
    /// (`cgroup_sampled_bytes`); its GPU's (the driver's mark where it covers the run).
    pub fn of_run(
        of: String,
        peak: Peak,
        facts: &crate::model::peak::PeakFacts,
        cgroup_sampled_bytes: Option<u64>,
        peak_gpu_bytes: Option<u64>,
        gpu_kernel: &crate::analysis::gpu::GpuKernelPeak,
    ) -> Unit {
        Unit {
            of,
            peak: Some(peak),
            cgroup: cgroup_peak(
                facts.cgroup_peak_bytes,
                cgroup_sampled_bytes,
                facts.cgroup_holds_tree,
                facts.cgroup_v1,
            ),
            gpu: crate::analysis::gpu::budget_peak(peak_gpu_bytes, gpu_kernel),
            exact_within_bytes: facts.exact_within_bytes,
            peak_exact_up_to: None,
        }
    }
}

/// One budget held against one number.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetCheck {
    /// `--max-peak`, `--max-cgroup` or `--max-gpu`.
    pub flag: &'static str,
    pub budget_bytes: u64,
    /// The number judged; `None` when the unit has none (then the check fails).
    pub measured: Option<Peak>,
    /// Whose number: a file, `FILE#run 3`, `run 3`.
    pub of: String,
    pub over_by_bytes: Option<u64>,
    pub passed: bool,
    /// How far the kernel's per-process counters may be off, and where an exact peak stops
    /// being exact (`Unit`'s, for `--max-peak`): what the verdict says beside the number.
    #[serde(skip)]
    pub exact_within_bytes: Option<u64>,
    #[serde(skip)]
    pub peak_exact_up_to: Option<ExactUpTo>,
}

impl BudgetCheck {
    fn new(flag: &'static str, budget: u64, measured: Option<Peak>, unit: &Unit) -> BudgetCheck {
        let over = measured.map(|m| m.bytes.saturating_sub(budget));
        BudgetCheck {
            flag,
            budget_bytes: budget,
            measured,
            of: unit.of.clone(),
            over_by_bytes: over.filter(|&o| o > 0),
            passed: measured.is_some_and(|m| m.bytes <= budget),
            exact_within_bytes: unit.exact_within_bytes,
            peak_exact_up_to: Some(flag)
                .filter(|&f| f == "--max-peak")
                .and(unit.peak_exact_up_to.clone()),
        }
    }
}

impl Budgets {
    pub fn is_empty(&self) -> bool {
        self.max_peak.is_none() && self.max_cgroup.is_none() && self.max_gpu.is_none()
    }

    /// Holds each budget given against `unit`.
    pub fn check(&self, unit: &Unit) -> Vec<BudgetCheck> {
        let mut out = Vec::new();
        if let Some(b) = self.max_peak {
            out.push(BudgetCheck::new("--max-peak", b, unit.peak, unit));
        }
        if let Some(b) = self.max_cgroup {
            out.push(BudgetCheck::new("--max-cgroup", b, unit.cgroup, unit));
        }
        if let Some(b) = self.max_gpu {
            out.push(BudgetCheck::new("--max-gpu", b, unit.gpu, unit));
        }
        out
    }

    /// The budgets held against one recording's units (`units`).
    pub fn check_summary(&self, s: &Summary, of: &str) -> Vec<BudgetCheck> {
        units(s, of).iter().flat_map(|u| self.check(u)).collect()
    }
}

/// A cgroup's number for `--max-cgroup`: its exact peak when its peak file covers the span,
/// else its largest sampled usage (a lower bound).
pub fn cgroup_peak(
    exact: Option<u64>,
    sampled: Option<u64>,
    holds_tree: bool,
    v1: bool,
) -> Option<Peak> {
    let (bytes, source) = match (exact, sampled) {
        (Some(p), _) => (p, PeakSource::Cgroup),
        (None, Some(s)) => (s, PeakSource::Sampled),
        (None, None) => return None,
    };
    Some(Peak {
        bytes,
        source,
        counter: match (source, v1) {
            (PeakSource::Cgroup, _) => source.counter_of(v1),
            (_, true) => "memory.usage_in_bytes",
            (_, false) => "memory.current",
        },
        scope: if holds_tree {
            PeakScope::Tree
        } else {
            PeakScope::Cgroup
        },
        exact: source == PeakSource::Cgroup,
        tree_low_bytes: None,
        tree_high_bytes: None,
        why_not_exact: crate::model::peak::NotExact::Unsaid,
        ram_bytes: None,
        swap_bytes: None,
        needed_high_bytes: None,
    })
}

/// What the budgets judge of a recording: each bench run (`FILE#run N`; one the recording
/// ended before its run-end row as `FILE#run N (incomplete)`, its peak up to there) when it
/// has a complete one, else the whole recording, and beside it, where its peak is not exact,
/// the phase with the highest exact peak above it (`FILE#phase LABEL`: the recording's peak is
/// at least that). `summary` and `compare` judge a file by these alike.
pub fn units(s: &Summary, of: &str) -> Vec<Unit> {
    let runs: Vec<&crate::analysis::span::Span> = if s.spans.runs.iter().any(|r| r.complete) {
        s.spans.runs.iter().collect()
    } else {
        Vec::new()
    };
    // The whole recording: a file without bench runs, or one with sessions that hold none (an
    // `--append`ed record beside a bench), whose peak line no run holds.
    let whole = || Unit {
        of: of.to_string(),
        // A command that ended before its first sample has its peaks from its end record.
        peak: (s.samples > 0
            || s.facts.kernel_peak_rss_bytes.is_some()
            || s.facts.cgroup_peak_bytes.is_some())
        .then_some(s.peak),
        cgroup: s.cgroup.as_ref().and_then(|c| {
            cgroup_peak(
                c.peak_bytes,
                Some(c.largest_current_bytes).filter(|&b| b > 0),
                c.holds_tree,
                s.facts.cgroup_v1,
            )
        }),
        gpu: s.gpu.as_ref().and_then(|g| g.gpu_peak),
        exact_within_bytes: s.facts.exact_within_bytes,
        peak_exact_up_to: s.peak_exact_up_to.clone(),
    };
    // Data, not words: each unit's name (`FILE#phase LABEL`, `FILE#run N`) is the JSON's `of`,
    // by which a check is known.
    if runs.is_empty() {
        let phase = s
            .exact_phase_above_peak()
            .map(|p| span_unit(format!("{of}#phase {}", p.label), p));
        return std::iter::once(whole()).chain(phase).collect();
    }
    let mut units: Vec<Unit> = Vec::new();
    if !s.sessions_without_runs.is_empty() {
        units.push(whole());
    }
    units.extend(runs.iter().map(|r| {
        let incomplete = if r.complete { "" } else { " (incomplete)" };
        span_unit(format!("{of}#{}{incomplete}", r.label), r)
    }));
    units
}

/// A span's numbers, as a budget judges them (a bench run, a phase).
fn span_unit(of: String, span: &crate::analysis::span::Span) -> Unit {
    Unit::of_run(
        of,
        span.peak,
        &span.facts,
        span.cgroup_sampled_peak_bytes,
        span.peak_gpu_bytes,
        &span.gpu_kernel,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::peak::PeakFacts;

    const MIB: u64 = 1 << 20;

    fn largest_process(bytes: u64) -> Peak {
        PeakFacts {
            sampled_peak_rss_bytes: bytes + 200 * MIB,
            kernel_peak_rss_bytes: Some(bytes),
            kernel_peak_source: Some(PeakSource::Vmhwm),
            max_processes: 2,
            exit_records_complete: true,
            kernel_peak_covers_departed: true,
            hwm_sum_bytes: bytes + 300 * MIB,
            exact_within_bytes: Some(512 << 10),
            ..PeakFacts::default()
        }
        .decide()
    }

    fn unit(of: &str, peak: Option<Peak>) -> Unit {
        Unit {
            of: of.into(),
            peak,
            cgroup: None,
            gpu: None,
            peak_exact_up_to: None,
            exact_within_bytes: Some(512 << 10),
        }
    }

    #[test]
    fn a_budget_its_unit_would_round_is_said_with_its_bytes() {
        let check = |budget: u64| {
            let b = Budgets {
                max_peak: Some(budget),
                ..Budgets::default()
            };
            b.check(&unit("a.csv", Some(largest_process(65 * MIB))))[0].describe()
        };
        // 65 MiB less a byte reads "65.00 MiB": the budget's bytes say which it was.
        let d = check(65 * MIB - 1);
        assert!(
            d.starts_with("--max-peak 65.00 MiB (68157439 bytes) exceeded by 1 B"),
            "{d}"
        );
        let d = check(65 * MIB);
        assert!(d.starts_with("--max-peak 65.00 MiB kept"), "{d}");
    }

    #[test]
    fn a_gpu_peak_over_its_budget_fails_and_a_recording_without_one_cannot_pass() {
        let b = Budgets {
            max_gpu: Some(64 * 1024 * MIB),
            ..Budgets::default()
        };
        let over = b.check(&Unit {
            gpu: crate::analysis::gpu::budget_peak(
                Some(70 * 1024 * MIB),
                &crate::analysis::gpu::GpuKernelPeak::default(),
            ),
            ..unit("a.csv", None)
        });
        assert_eq!(over.len(), 1);
        assert!(!over[0].passed);
        assert_eq!(over[0].over_by_bytes, Some(6 * 1024 * MIB));
        assert!(
            over[0]
                .describe()
                .starts_with("--max-gpu 64.00 GiB exceeded by 6.00 GiB"),
            "{}",
            over[0].describe()
        );
        let none = b.check(&unit("b.csv", None));
        assert!(!none[0].passed);
        assert!(
            none[0].describe().contains("b.csv has no GPU peak"),
            "{}",
            none[0].describe()
        );
    }

    #[test]
    fn a_peak_over_the_budget_fails_naming_the_number_its_source_scope_and_bounds() {
        let b = Budgets {
            max_peak: Some(1024 * MIB),
            ..Budgets::default()
        };
        let c = b.check(&unit("run.csv#run 3", Some(largest_process(1224 * MIB))));
        assert_eq!(c.len(), 1);
        assert!(!c[0].passed);
        assert_eq!(c[0].over_by_bytes, Some(200 * MIB));
        let d = c[0].describe();
        assert!(
            d.starts_with("--max-peak 1.00 GiB exceeded by 200.0 MiB")
                && d.contains("judged the peak of run.csv#run 3, 1.20 GiB")
                && d.contains("kernel VmHWM of the largest process, exact within")
                && d.contains("the tree's peak is between 1.20 GiB and 1.49 GiB"),
            "{d}"
        );
    }

    #[test]
    fn a_v1_cgroup_names_its_own_peak_file_and_a_missing_one_fails() {
        let b = Budgets {
            max_peak: Some(100 * MIB),
            max_cgroup: Some(100 * MIB),
            max_gpu: None,
        };
        let c = b.check(&Unit {
            cgroup: cgroup_peak(Some(101 * MIB), None, true, true),
            ..unit("a.csv", Some(largest_process(100 * MIB)))
        });
        assert!(c[0].passed && c[0].over_by_bytes.is_none());
        assert!(!c[1].passed);
        assert!(
            c[1].describe()
                .contains("cgroup memory.max_usage_in_bytes of the tree"),
            "{}",
            c[1].describe()
        );
        let missing = b.check(&unit("a.csv", Some(largest_process(1))));
        assert!(
            missing[1].describe().contains("has no cgroup peak"),
            "{}",
            missing[1].describe()
        );
        // No peak file covering the recording: the largest usage sampled, named as that (not
        // as an RSS), a lower bound that passes under the budget with those words.
        let sampled = b.check(&Unit {
            cgroup: cgroup_peak(None, Some(20 * MIB), true, true),
            ..unit("a.csv", Some(largest_process(1)))
        });
        assert!(sampled[1].passed);
        assert!(
            sampled[1].describe().ends_with("20.00 MiB (20971520 bytes): the cgroup's largest sampled usage (memory.usage_in_bytes), a lower bound: its peak file does not cover the recording"),
            "{}",
            sampled[1].describe()
        );
    }
}
