//! Budgets: `--max-peak SIZE`, `--max-cgroup SIZE` and `--max-gpu SIZE` (summary, bench,
//! compare) fail when a recording's peak exceeds them, naming which number it was, its source
//! and by how much.

use super::summary::{RecordingPeak, Summary};
use crate::model::peak::{PeakScope, PeakSource};
use crate::units::fmt_bytes;
use serde::Serialize;

/// The budgets given; `None` is no budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budgets {
    /// `--max-peak`: the recording's peak (`Summary::recording_peak`).
    pub max_peak: Option<u64>,
    /// `--max-cgroup`: the peak of the recording's memory cgroup.
    pub max_cgroup: Option<u64>,
    /// `--max-gpu`: the largest GPU memory of the tree (`gpu_bytes`, sampled from NVML).
    pub max_gpu: Option<u64>,
}

/// One budget held against one number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetCheck {
    /// `--max-peak`, `--max-cgroup` or `--max-gpu`.
    pub flag: &'static str,
    pub budget_bytes: u64,
    /// The number checked; `None` when the recording has none (then the check fails).
    pub measured_bytes: Option<u64>,
    pub source: Option<PeakSource>,
    pub scope: Option<PeakScope>,
    /// Whose number: a file, `run 3`.
    pub of: String,
    pub over_by_bytes: Option<u64>,
    pub passed: bool,
}

impl BudgetCheck {
    fn new(
        flag: &'static str,
        budget: u64,
        measured: Option<RecordingPeak>,
        of: &str,
    ) -> BudgetCheck {
        let over = measured.map(|m| m.bytes.saturating_sub(budget));
        BudgetCheck {
            flag,
            budget_bytes: budget,
            measured_bytes: measured.map(|m| m.bytes),
            source: measured.map(|m| m.source),
            scope: measured.map(|m| m.scope),
            of: of.to_string(),
            over_by_bytes: over.filter(|&o| o > 0),
            passed: measured.is_some_and(|m| m.bytes <= budget),
        }
    }

    /// `--max-peak 1 GiB exceeded by 200 MiB: peak 1.2 GiB (kernel VmHWM of the largest
    /// process) of run 3`.
    pub fn describe(&self) -> String {
        let what = match self.flag {
            "--max-cgroup" => "cgroup peak",
            "--max-gpu" => "GPU peak",
            _ => "peak",
        };
        let budget = fmt_bytes(self.budget_bytes);
        match (self.measured_bytes, self.source, self.scope) {
            (Some(m), Some(src), Some(scope)) => {
                let head = match self.over_by_bytes {
                    Some(o) => format!(
                        "{} {budget} exceeded by {} ({o} bytes)",
                        self.flag,
                        fmt_bytes(o)
                    ),
                    None => format!("{} {budget} kept", self.flag),
                };
                format!(
                    "{head}: {what} {} ({m} bytes; {src} {scope}) of {}",
                    fmt_bytes(m),
                    self.of
                )
            }
            _ => format!(
                "{} {budget} cannot be checked: {} has no {what}{}",
                self.flag,
                self.of,
                match self.flag {
                    "--max-cgroup" => " (record with --cgroup PATH|auto, or launch the command in memmon's own cgroup, --own-cgroup)",
                    "--max-gpu" => " (no gpu_bytes values: record with --gpu where NVML is available)",
                    _ => "",
                }
            ),
        }
    }
}

impl Budgets {
    pub fn is_empty(&self) -> bool {
        self.max_peak.is_none() && self.max_cgroup.is_none() && self.max_gpu.is_none()
    }

    /// Checks `peak` against `--max-peak`, `cgroup` against `--max-cgroup` and `gpu` (the
    /// largest sampled GPU memory of the tree) against `--max-gpu`.
    pub fn check(
        &self,
        peak: Option<RecordingPeak>,
        cgroup: Option<u64>,
        gpu: Option<u64>,
        of: &str,
    ) -> Vec<BudgetCheck> {
        let mut out = Vec::new();
        if let Some(b) = self.max_peak {
            out.push(BudgetCheck::new("--max-peak", b, peak, of));
        }
        if let Some(b) = self.max_cgroup {
            let c = cgroup.map(|bytes| RecordingPeak {
                bytes,
                source: PeakSource::Cgroup,
                scope: PeakScope::Tree,
            });
            out.push(BudgetCheck::new("--max-cgroup", b, c, of));
        }
        if let Some(b) = self.max_gpu {
            let g = gpu.map(|bytes| RecordingPeak {
                bytes,
                source: PeakSource::Sampled,
                scope: PeakScope::Tree,
            });
            out.push(BudgetCheck::new("--max-gpu", b, g, of));
        }
        out
    }

    /// The budgets held against one recording's summary.
    pub fn check_summary(&self, s: &Summary, of: &str) -> Vec<BudgetCheck> {
        let peak = (s.samples > 0 || s.recording_peak.bytes > 0).then_some(s.recording_peak);
        let cgroup = s.cgroup.as_ref().map(|c| c.top_bytes()).filter(|&b| b > 0);
        let gpu = s.gpu.as_ref().map(|g| g.peak_gpu_bytes);
        self.check(peak, cgroup, gpu, of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn peak(bytes: u64, source: PeakSource, scope: PeakScope) -> Option<RecordingPeak> {
        Some(RecordingPeak {
            bytes,
            source,
            scope,
        })
    }

    #[test]
    fn a_gpu_peak_over_its_budget_fails_and_a_recording_without_one_cannot_pass() {
        let b = Budgets {
            max_gpu: Some(64 * 1024 * MIB),
            ..Budgets::default()
        };
        let over = b.check(None, None, Some(70 * 1024 * MIB), "a.csv");
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
        let none = b.check(None, None, None, "b.csv");
        assert!(!none[0].passed);
        assert!(
            none[0].describe().contains("b.csv has no GPU peak"),
            "{}",
            none[0].describe()
        );
        assert!(b.check(None, None, Some(1024), "c.csv")[0].passed);
    }

    #[test]
    fn a_peak_over_the_budget_fails_naming_the_number_its_source_and_the_excess() {
        let b = Budgets {
            max_peak: Some(1024 * MIB),
            max_cgroup: None,
            max_gpu: None,
        };
        let c = b.check(
            peak(1224 * MIB, PeakSource::Vmhwm, PeakScope::LargestProcess),
            None,
            None,
            "run 3",
        );
        assert_eq!(c.len(), 1);
        assert!(!c[0].passed);
        assert_eq!(c[0].over_by_bytes, Some(200 * MIB));
        let d = c[0].describe();
        assert!(
            d.starts_with("--max-peak 1.00 GiB exceeded by 200")
                && d.contains("kernel VmHWM of the largest process")
                && d.ends_with("of run 3"),
            "{d}"
        );
    }

    #[test]
    fn a_peak_at_the_budget_passes_and_a_missing_cgroup_fails() {
        let b = Budgets {
            max_peak: Some(100 * MIB),
            max_cgroup: Some(100 * MIB),
            max_gpu: None,
        };
        let c = b.check(
            peak(100 * MIB, PeakSource::Cgroup, PeakScope::Tree),
            None,
            None,
            "a.csv",
        );
        assert!(c[0].passed && c[0].over_by_bytes.is_none());
        assert!(!c[1].passed);
        assert!(
            c[1].describe().contains("has no cgroup peak"),
            "{}",
            c[1].describe()
        );
        let c = b.check(None, Some(101 * MIB), None, "a.csv");
        assert!(!c[0].passed && !c[1].passed);
        assert!(
            c[1].describe().contains("cgroup memory.peak of the tree"),
            "{}",
            c[1].describe()
        );
    }
}
