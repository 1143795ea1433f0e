//! GPU memory of a recording: the largest `gpu_bytes` (device memory held by the tree's
//! processes) and when, the device memory of its GPUs at that tick and at most, and the budget
//! check of `summary --max-gpu`. Fed sample by sample, beside the RSS summary.

use crate::format::meta::Meta;
use crate::model::sample::Sample;
use crate::units::{fmt_bytes, fmt_seconds};
use serde::Serialize;

/// The GPU lines of a summary. Present only when some row has a `gpu_bytes` value.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuPeak {
    /// The largest `gpu_bytes`, sampled (NVML's per-process used memory summed over the tree).
    pub peak_gpu_bytes: u64,
    pub peak_elapsed_s: f64,
    pub peak_unix_ms: u64,
    /// The used and total memory of the tree's GPUs at that tick.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_used_at_peak_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_total_bytes: Option<u64>,
    /// The largest `gpu_device_used_bytes` of the recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_device_used_bytes: Option<u64>,
    /// Rows with a GPU value, and rows without one (no reading yet, a failed or stale reading).
    pub rows: u64,
    pub rows_without: u64,
    /// `--gpu-every` of the recording, from its metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// The GPUs of the recording (`index uuid model`), from its metadata.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
}

/// Accumulates a `GpuPeak`.
#[derive(Debug, Clone, Default)]
pub struct GpuTrack {
    peak: Option<GpuPeak>,
    max_device_used: Option<u64>,
    rows: u64,
    rows_without: u64,
}

impl GpuTrack {
    pub fn push(&mut self, s: &Sample) {
        let Some(b) = s.gpu.bytes else {
            self.rows_without += 1;
            return;
        };
        self.rows += 1;
        if let Some(u) = s.gpu.device_used_bytes {
            self.max_device_used = Some(self.max_device_used.unwrap_or(0).max(u));
        }
        if self.peak.as_ref().is_none_or(|p| b > p.peak_gpu_bytes) {
            self.peak = Some(GpuPeak {
                peak_gpu_bytes: b,
                peak_elapsed_s: s.elapsed_s,
                peak_unix_ms: s.unix_ms,
                device_used_at_peak_bytes: s.gpu.device_used_bytes,
                device_total_bytes: s.gpu.device_total_bytes,
                ..GpuPeak::default()
            });
        }
    }

    /// `None` when no row had a GPU value (GPU memory not recorded).
    pub fn finish(&self, meta: Option<&Meta>) -> Option<GpuPeak> {
        let mut p = self.peak.clone()?;
        p.max_device_used_bytes = self.max_device_used;
        p.rows = self.rows;
        p.rows_without = self.rows_without;
        if let Some(g) = meta.and_then(|m| m.gpu.as_ref()) {
            p.every = Some(g.every.clone());
            p.gpus = g
                .devices
                .iter()
                .map(|d| format!("{} {} {}", d.index, d.uuid, d.name))
                .collect();
        }
        Some(p)
    }
}

impl GpuPeak {
    /// The summary's GPU lines.
    pub fn render(&self) -> String {
        let b = |v: u64| format!("{} ({v} bytes)", fmt_bytes(v));
        let mut o = format!(
            "  GPU peak      {} at +{} (device memory held by the tree's processes: NVML per-process used memory, summed over their PIDs; sampled{})\n",
            b(self.peak_gpu_bytes),
            fmt_seconds(self.peak_elapsed_s),
            self.every
                .as_ref()
                .map(|e| format!(" every {e}"))
                .unwrap_or_default()
        );
        if let (Some(u), Some(t)) = (self.device_used_at_peak_bytes, self.device_total_bytes) {
            o.push_str(&format!(
                "  GPU devices   {} used of {} at that tick on the GPUs the tree used (all processes); at most {} used\n",
                b(u),
                b(t),
                b(self.max_device_used_bytes.unwrap_or(u))
            ));
        }
        if self.rows_without > 0 {
            o.push_str(&format!(
                "  GPU unread    {} of {} rows have no GPU value (no reading yet, or a failed or stale one)\n",
                self.rows_without,
                self.rows + self.rows_without
            ));
        }
        o
    }
}

/// `summary --max-gpu`: the sentence of a budget exceeded, `None` when within it.
pub fn over_budget(p: &GpuPeak, budget: u64) -> Option<String> {
    (p.peak_gpu_bytes > budget).then(|| {
        format!(
            "GPU peak {} ({} bytes; gpu_bytes, sampled from NVML) is over --max-gpu {} ({} bytes) by {} ({} bytes)",
            fmt_bytes(p.peak_gpu_bytes),
            p.peak_gpu_bytes,
            fmt_bytes(budget),
            budget,
            fmt_bytes(p.peak_gpu_bytes - budget),
            p.peak_gpu_bytes - budget
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gpu::GpuTick;

    const GIB: u64 = 1 << 30;

    fn row(t: f64, gpu: Option<u64>, used: Option<u64>) -> Sample {
        Sample {
            elapsed_s: t,
            gpu: GpuTick {
                bytes: gpu,
                device_used_bytes: used,
                device_total_bytes: used.map(|_| 141 * GIB),
                ..GpuTick::default()
            },
            ..Sample::default()
        }
    }

    #[test]
    fn the_gpu_peak_is_the_largest_tree_value_with_its_devices_at_that_tick() {
        let mut t = GpuTrack::default();
        t.push(&row(0.0, None, None));
        t.push(&row(1.0, Some(4 * GIB), Some(10 * GIB)));
        t.push(&row(2.0, Some(20 * GIB), Some(30 * GIB)));
        t.push(&row(3.0, Some(2 * GIB), Some(40 * GIB)));
        let p = t.finish(None).unwrap();
        assert_eq!(p.peak_gpu_bytes, 20 * GIB);
        assert_eq!(p.peak_elapsed_s, 2.0);
        assert_eq!(p.device_used_at_peak_bytes, Some(30 * GIB));
        assert_eq!(p.max_device_used_bytes, Some(40 * GIB));
        assert_eq!((p.rows, p.rows_without), (3, 1));
        let text = p.render();
        assert!(
            text.contains("GPU peak      20.00 GiB (21474836480 bytes) at +2.00 s"),
            "{text}"
        );
        assert!(text.contains("1 of 4 rows have no GPU value"), "{text}");
    }

    #[test]
    fn no_gpu_values_no_gpu_summary() {
        let mut t = GpuTrack::default();
        t.push(&row(0.0, None, None));
        assert_eq!(t.finish(None), None);
    }

    #[test]
    fn the_budget_names_the_number_its_source_and_the_excess() {
        let p = GpuPeak {
            peak_gpu_bytes: 20 * GIB,
            ..GpuPeak::default()
        };
        assert_eq!(over_budget(&p, 20 * GIB), None);
        let msg = over_budget(&p, 16 * GIB).unwrap();
        assert!(msg.contains("GPU peak 20.00 GiB"), "{msg}");
        assert!(msg.contains("--max-gpu 16.00 GiB"), "{msg}");
        assert!(msg.contains("by 4.00 GiB (4294967296 bytes)"), "{msg}");
    }
}
