//! A budget's verdict in words (`analysis::budget`): the budget as given, kept or exceeded by
//! how much, and the number judged with its source, scope and whose it is. `summary`, `bench`
//! and `compare` print these alike.

use crate::analysis::budget::BudgetCheck;
use crate::model::peak::PeakSource;
use crate::units::{count, fmt_bytes, parse_size};

impl BudgetCheck {
    /// `--max-peak 1.00 GiB exceeded by 200.0 MiB: judged the peak of run.csv#run 3, 1.20 GiB
    /// (1288490188 bytes): kernel VmHWM of the largest process, exact within 512.0 KiB; the tree's
    /// peak is between 1.20 GiB and 1.40 GiB`.
    pub fn describe(&self) -> String {
        let what = match self.flag {
            "--max-cgroup" => "cgroup peak",
            "--max-gpu" => "GPU peak",
            _ => "peak",
        };
        // The budget as given: its bytes too where the unit rounds them (`68157439` is not
        // `65.00 MiB`).
        let budget = match fmt_bytes(self.budget_bytes) {
            b if parse_size(&b) == Ok(self.budget_bytes) => b,
            b => format!("{b} ({})", count(self.budget_bytes, "byte")),
        };
        let Some(m) = &self.measured else {
            return format!(
                "{} {budget} cannot be checked: {} has no {what}{}",
                self.flag,
                self.of,
                match self.flag {
                    "--max-cgroup" => " (record with --cgroup PATH|auto, or launch the command in memmon's own cgroup, --own-cgroup)",
                    "--max-gpu" => " (no gpu_bytes values: record with --gpu where NVML is available)",
                    _ => "",
                }
            );
        };
        let head = match self.over_by_bytes {
            Some(o) => format!(
                "{} {budget} exceeded by {} ({})",
                self.flag,
                fmt_bytes(o),
                count(o, "byte")
            ),
            None => format!("{} {budget} kept", self.flag),
        };
        let words = match (self.flag, m.source) {
            ("--max-gpu", _) => crate::render::gpu::describe_peak(m),
            ("--max-cgroup", PeakSource::Sampled) => format!(
                "the cgroup's largest sampled usage ({}), a lower bound: its peak file does not cover the recording",
                m.counter
            ),
            _ => match (&self.peak_exact_up_to, m.exact) {
                (Some(up_to), true) => format!("{}; {up_to}", m.describe(self.exact_within_bytes)),
                _ => m.describe(self.exact_within_bytes),
            },
        };
        let bounds = m
            .tree_bounds()
            .map(|b| format!("; the tree's peak is {b}"))
            .unwrap_or_default();
        format!(
            "{head}: judged the {what} of {}, {}{} ({} bytes): {words}{bounds}",
            self.of,
            m.at_least(),
            fmt_bytes(m.bytes),
            m.bytes
        )
    }
}
