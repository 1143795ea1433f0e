//! GPU memory in words (`analysis::gpu`): the summary's GPU lines, a table's GPU kernel peak
//! cell and its legend, and what a decided GPU peak is, alike in the summary, the report and a
//! `--max-gpu` verdict.

use crate::analysis::gpu::{GpuAccounting, GpuKernelPeak, GpuKernelWindow, GpuPeak};
use crate::model::peak::{Peak, PeakScope, PeakSource};
use crate::units::{count, fmt_bytes};

impl GpuKernelPeak {
    /// A cell of a table: `20.00 GiB`, `>= 20.00 GiB` (the largest of several processes),
    /// `set before`, or `-` (no accounting).
    pub fn cell(&self) -> String {
        match (self.bytes, self.window) {
            (Some(b), _) if self.scope == Some(PeakScope::Tree) => fmt_bytes(b),
            (Some(b), _) => format!(">= {}", fmt_bytes(b)),
            (None, Some(GpuKernelWindow::SetBefore)) => "set before".into(),
            _ => "-".into(),
        }
    }

    /// The legend of a table's `GPU kernel peak` column.
    pub fn legend() -> &'static str {
        "GPU kernel peak: NVML accounting's maxMemoryUsage, exact where it began with the span or rose in it (>= : the largest of several processes, a lower bound of the tree's; set before: it did not rise, and NVML cannot reset it for a running process)"
    }
}

impl GpuPeak {
    /// The summary's GPU lines, for a recording of `sessions` sessions.
    pub fn render(&self, sessions: usize) -> String {
        let b = |v: u64| format!("{} ({v} bytes)", fmt_bytes(v));
        let at = self.peak_at();
        let mut o = String::new();
        if let Some(p) = &self.gpu_peak {
            o.push_str(&format!(
                "  GPU peak      {}{}: {}{}\n",
                p.at_least(),
                b(p.bytes),
                describe_peak(p),
                p.tree_bounds()
                    .map(|t| format!("; the tree's GPU peak is {t}"))
                    .unwrap_or_default()
            ));
        }
        o.push_str(&format!(
            "  GPU sampled peak {} at {} (device memory held by the tree's processes: NVML per-process used memory, summed over their PIDs; sampled{})\n",
            b(self.peak_gpu_bytes),
            at.offset(sessions),
            self.every
                .as_ref()
                .map(|e| format!(" every {e}"))
                .unwrap_or_default()
        ));
        if let (Some(u), Some(t)) = (self.device_used_at_peak_bytes, self.device_total_bytes) {
            o.push_str(&format!(
                "  GPU devices   {} used of {} at that tick on the GPUs the tree used (all processes); at most {} used\n",
                b(u),
                b(t),
                b(self.max_device_used_bytes.unwrap_or(u))
            ));
        }
        let every = self
            .every
            .as_ref()
            .map(|e| format!(" every {e}"))
            .unwrap_or_default();
        let k = &self.kernel;
        match (k.bytes, k.window) {
            (Some(bytes), window) => o.push_str(&format!(
                "  GPU kernel peak {} (NVML accounting maxMemoryUsage, {}{}){}\n",
                b(bytes),
                match k.scope {
                    Some(PeakScope::Tree) => "the tree's exact GPU peak: one process on one GPU held it".to_string(),
                    _ => format!(
                        "of the largest process on one GPU: the tree's GPU peak is at least this{}",
                        k.sum_bytes
                            .map(|s| format!(" and at most {} (the sum of the processes' marks)", fmt_bytes(s)))
                            .unwrap_or_default()
                    ),
                },
                match window {
                    Some(GpuKernelWindow::Launched) => "; since the command started",
                    Some(GpuKernelWindow::RoseDuringSpan) => "; reached during the recording",
                    _ => "",
                },
                if bytes > self.peak_gpu_bytes {
                    format!(
                        "; {} above the GPU sampled peak: a spike between two readings",
                        fmt_bytes(bytes - self.peak_gpu_bytes)
                    )
                } else {
                    String::new()
                }
            )),
            (None, Some(GpuKernelWindow::SetBefore)) => o.push_str(&format!(
                "  GPU kernel peak not known for the recording: the processes' maxMemoryUsage{} was set before {} (NVML cannot reset it for a running process); the GPU peak is the sampled one{every}\n",
                k.lifetime_bytes
                    .map(|l| format!(" ({})", fmt_bytes(l)))
                    .unwrap_or_default(),
                if sessions > 1 {
                    "a session began, and no mark rose above it during the recording"
                } else {
                    "it began and did not rise"
                }
            )),
            (None, _) if self.accounting == Some(GpuAccounting::Off) => o.push_str(&format!(
                "  GPU peak is sampled{every}: a GPU allocation spike between two readings is missed. For the GPU's exact peak, turn on NVML accounting (as root: nvidia-smi -am 1; no cost to the GPU) before the GPU processes start\n"
            )),
            (None, _) => o.push_str(
                "  GPU kernel peak not known: some rows have no accounting mark (accounting off on a GPU the tree used, a process without a record, or a boundary row whose GPU reading did not come)\n",
            ),
        }
        if let Some(m) = self.max_nvidia_mapped_bytes.filter(|&m| m > 0) {
            o.push_str(&format!(
                "  NVIDIA maps   {} mapped from /dev/nvidia* at most (CUDA's pinned host buffers among them){}\n",
                b(m),
                self.max_nvidia_mapped_rss_bytes
                    .map(|r| format!("; {} of it resident at most (read with PSS)", fmt_bytes(r)))
                    .unwrap_or_default()
            ));
        }
        if self.rows_without > 0 {
            o.push_str(&format!(
                "  GPU unread    {} of {} without a GPU value (no reading yet, or a failed or stale one)\n",
                self.rows_without,
                count(self.rows + self.rows_without, "row")
            ));
        }
        o
    }
}

/// What a decided GPU peak (`budget_peak`) is, in words: the same in the summary's `GPU peak`
/// line, the report's row, the plot's legend and a `--max-gpu` verdict.
pub fn describe_peak(p: &Peak) -> String {
    match p.source {
        PeakSource::Sampled => "sampled GPU memory of the tree (NVML), a lower bound".to_string(),
        _ => p.describe(None),
    }
}
