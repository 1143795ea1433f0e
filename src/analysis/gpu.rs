//! GPU memory of a recording: the largest `gpu_bytes` (device memory held by the tree's
//! processes, sampled) and when, the device memory of its GPUs at that tick and at most, the
//! GPU's own peak where NVML accounting kept it (`gpu_hwm_bytes`: the GPU kernel peak, per
//! recording, run and phase), and the budget check of `summary --max-gpu`. Fed sample by sample,
//! beside the RSS summary; `render/gpu.rs` says it.
//!
//! The GPU's high-water mark is a process's `maxMemoryUsage`, which NVML cannot reset while the
//! process runs (`nvmlDeviceClearAccountingPids` clears ended processes' records only). So a
//! span's GPU kernel peak is known when its processes' marks began with it (a launched command,
//! its first span) or rose during it; a mark that did not rise was set before the span, and
//! then only the sampled peak is the span's.

use super::span::Window;
use super::timeline::{Place, When};
use crate::format::meta::{EndInfo, Meta};
use crate::model::peak::{Peak, PeakScope, PeakSource};
use crate::model::sample::Sample;
use serde::Serialize;

/// How a span's GPU kernel peak was known, or why it was not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuKernelWindow {
    /// The span began with its processes (a launched command): their marks are the span's.
    Launched,
    /// The largest mark rose during the span: it was set in it.
    RoseDuringSpan,
    /// The marks did not rise: they were set before the span (NVML cannot reset a running
    /// process's), and the span's own GPU peak is not known from them.
    SetBefore,
}

/// A span's GPU kernel peak: the GPU's exact high-water mark (NVML accounting
/// `maxMemoryUsage`) of its largest process on one GPU, how it was known, and what bounds it.
/// Serialized flattened into every JSON that reports a span, beside `peak_gpu_bytes` (the
/// sampled one). Every field absent: no accounting in the span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GpuKernelPeak {
    /// The exact GPU peak, when the marks covered the span.
    #[serde(
        rename = "gpu_kernel_peak_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub bytes: Option<u64>,
    /// `tree`: one process on one GPU held all the tree's GPU memory, so this is the tree's
    /// exact GPU peak; `largest-process`: the peak of the largest of several, a lower bound of
    /// the tree's.
    #[serde(
        rename = "gpu_kernel_peak_scope",
        skip_serializing_if = "Option::is_none"
    )]
    pub scope: Option<PeakScope>,
    #[serde(
        rename = "gpu_kernel_peak_window",
        skip_serializing_if = "Option::is_none"
    )]
    pub window: Option<GpuKernelWindow>,
    /// The largest sum of the processes' marks: an upper bound of the tree's GPU peak.
    #[serde(rename = "gpu_hwm_sum_bytes", skip_serializing_if = "Option::is_none")]
    pub sum_bytes: Option<u64>,
    /// With `set-before`: the mark that predates the span (the largest process's GPU peak
    /// since it started).
    #[serde(
        rename = "gpu_lifetime_peak_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub lifetime_bytes: Option<u64>,
}

/// The accounting marks of a span's rows (`gpu_hwm_bytes`, `gpu_hwm_sum_bytes`), row by row.
#[derive(Debug, Clone, Copy)]
pub struct GpuHwmAcc {
    /// The opening row's mark (`None`: it had none).
    open: Option<u64>,
    /// The largest mark of the rows after it.
    after: Option<u64>,
    sum_max: Option<u64>,
    /// Every mark equalled its row's sum: one process on one GPU held GPU memory.
    single: bool,
    rows: u64,
    /// The span's last row so far had a mark: the marks cover the span up to its end. A span
    /// that ends on a row without one (a boundary whose GPU reading did not come, a process
    /// without a record) may have risen after its last mark: its GPU kernel peak is not known.
    last_marked: bool,
}

impl GpuHwmAcc {
    /// The marks of a span no row holds.
    pub fn empty() -> GpuHwmAcc {
        GpuHwmAcc {
            open: None,
            after: None,
            sum_max: None,
            single: true,
            rows: 0,
            last_marked: false,
        }
    }

    /// Opened at `s`, the span's first row.
    pub fn open(s: &Sample) -> GpuHwmAcc {
        let mut a = GpuHwmAcc {
            open: s.gpu.hwm_bytes,
            after: None,
            sum_max: None,
            single: true,
            rows: 0,
            last_marked: false,
        };
        a.note(s);
        a
    }

    fn note(&mut self, s: &Sample) {
        self.last_marked = s.gpu.hwm_bytes.is_some();
        if let Some(h) = s.gpu.hwm_bytes {
            let sum = s.gpu.hwm_sum_bytes.unwrap_or(h);
            self.sum_max = Some(self.sum_max.unwrap_or(0).max(sum));
            self.single &= sum == h;
            self.rows += 1;
        }
    }

    /// The next row of the span.
    pub fn add(&mut self, s: &Sample) {
        if let Some(h) = s.gpu.hwm_bytes {
            self.after = Some(self.after.unwrap_or(0).max(h));
        }
        self.note(s);
    }

    /// The span's GPU kernel peak: `window` says whether the marks began with the span
    /// (`FromOpen`) or may predate it (any other: NVML has no reset); `tail` is a mark read after
    /// the span's last row (the recording's end record).
    pub fn decide(&self, window: Window, tail: Option<u64>) -> GpuKernelPeak {
        if self.rows == 0 && tail.is_none() {
            return GpuKernelPeak::default();
        }
        let after = match (self.after, tail) {
            (Some(a), Some(t)) => Some(a.max(t)),
            (a, t) => a.or(t),
        };
        let sum_bytes = match (self.sum_max, tail) {
            (Some(s), Some(t)) => Some(s.max(t)),
            (s, t) => s.or(t),
        };
        let scope = if self.single {
            PeakScope::Tree
        } else {
            PeakScope::LargestProcess
        };
        // Marks that stop before the span's end say nothing of its end: not known.
        let covered = self.last_marked || tail.is_some();
        let (bytes, window, lifetime) = match (window, self.open, after) {
            _ if !covered => (None, None, None),
            (Window::FromOpen, open, after) => (
                Some(open.unwrap_or(0).max(after.unwrap_or(0))),
                Some(GpuKernelWindow::Launched),
                None,
            ),
            (_, Some(o), Some(a)) if a > o => {
                (Some(a), Some(GpuKernelWindow::RoseDuringSpan), None)
            }
            (_, Some(o), a) => (
                None,
                Some(GpuKernelWindow::SetBefore),
                Some(o.max(a.unwrap_or(0))),
            ),
            // No mark at the opening row: whether a later one rose is not known.
            (_, None, _) => (None, None, None),
        };
        GpuKernelPeak {
            bytes,
            scope: bytes.map(|_| scope),
            window,
            sum_bytes,
            lifetime_bytes: lifetime,
        }
    }
}

/// Whether NVML accounting gave marks in a recording's rows that have GPU values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuAccounting {
    /// Every such row has a mark.
    On,
    /// Some rows have none (accounting off on a GPU the tree used, a process without a record,
    /// or turned on during the recording).
    Partial,
    /// None has: the GPU peak is sampled only.
    Off,
}

/// The GPU lines of a summary. Present only when some row has a `gpu_bytes` value.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuPeak {
    /// **The** GPU peak, decided once (`budget_peak`): the driver's exact mark of the tree
    /// where it covers the recording, else a lower bound. What `GPU peak` means in every
    /// command: the summary's line, the report's row, the plot's line, `--max-gpu`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_peak: Option<Peak>,
    /// The largest `gpu_bytes`, sampled (NVML's per-process used memory summed over the tree):
    /// the `GPU sampled peak`.
    pub peak_gpu_bytes: u64,
    pub peak_elapsed_s: f64,
    pub peak_unix_ms: u64,
    /// The peak row's session (from 1) and its x on the recording's time axis (seconds, as
    /// `plot` draws it).
    pub peak_session: u32,
    pub peak_x_s: f64,
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
    /// The GPU kernel peak (NVML accounting), beside the sampled one.
    #[serde(flatten)]
    pub kernel: GpuKernelPeak,
    /// Whether accounting gave marks (`off`: the GPU peak is sampled only).
    pub accounting: Option<GpuAccounting>,
    /// How the per-process list was read (the NVML call and its element layout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_call: Option<String>,
    /// The largest `nvidia_mapped_bytes` (host memory the tree maps from NVIDIA's device
    /// files: CUDA's pinned buffers), and of `nvidia_mapped_rss_bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nvidia_mapped_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nvidia_mapped_rss_bytes: Option<u64>,
}

/// One session's GPU marks: whether it launched its command, its rows' marks, and the mark read
/// after its last row.
#[derive(Debug, Clone, Copy)]
struct SessionMarks {
    launched: bool,
    acc: Option<GpuHwmAcc>,
    tail: Option<u64>,
    /// Some row had a GPU value.
    gpu_rows: bool,
}

/// Accumulates a `GpuPeak`.
#[derive(Debug, Clone, Default)]
pub struct GpuTrack {
    peak: Option<GpuPeak>,
    max_device_used: Option<u64>,
    rows: u64,
    rows_without: u64,
    /// Rows with a GPU value and a mark.
    rows_marked: u64,
    sessions: Vec<SessionMarks>,
    max_mapped: Option<u64>,
    max_mapped_rss: Option<u64>,
    process_call: Option<String>,
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl GpuTrack {
    /// The metadata of the next session, before its first row.
    pub fn session(&mut self, meta: &Meta) {
        self.sessions.push(SessionMarks {
            launched: meta.target.mode == "command",
            acc: None,
            tail: None,
            gpu_rows: false,
        });
    }

    /// The end record of the session the last rows belong to.
    pub fn session_end(&mut self, end: &EndInfo) {
        // A command bench's recording ends no command of its own: each run's end record has
        // the mark read after that run's last row, and the largest is the recording's.
        let ends = || {
            std::iter::once(end)
                .chain(end.runs.iter().map(|r| &r.end))
                .filter_map(|e| e.gpu.as_ref())
        };
        let tail = ends().filter_map(|g| g.hwm_after_last_row_bytes).max();
        if let (Some(s), Some(t)) = (self.sessions.last_mut(), tail) {
            s.tail = Some(t);
        }
        if let Some(c) = ends().find_map(|g| g.process_call.clone()) {
            self.process_call = Some(c);
        }
    }

    /// The recording's next row, at `place` on its timeline.
    pub fn push(&mut self, s: &Sample, place: Place) {
        if self.sessions.is_empty() {
            // A recording without metadata (imported): its marks may predate it.
            self.sessions.push(SessionMarks {
                launched: false,
                acc: None,
                tail: None,
                gpu_rows: false,
            });
        }
        let last = self.sessions.last_mut().expect("a session");
        last.gpu_rows |= s.gpu.bytes.is_some();
        match &mut last.acc {
            Some(a) => a.add(s),
            None => last.acc = Some(GpuHwmAcc::open(s)),
        }
        self.max_mapped = max_opt(self.max_mapped, s.gpu.nvidia_mapped_bytes);
        self.max_mapped_rss = max_opt(self.max_mapped_rss, s.nvidia_mapped_rss_bytes);
        let Some(b) = s.gpu.bytes else {
            self.rows_without += 1;
            return;
        };
        self.rows += 1;
        self.rows_marked += s.gpu.hwm_bytes.is_some() as u64;
        if let Some(u) = s.gpu.device_used_bytes {
            self.max_device_used = Some(self.max_device_used.unwrap_or(0).max(u));
        }
        if self.peak.as_ref().is_none_or(|p| b > p.peak_gpu_bytes) {
            self.peak = Some(GpuPeak {
                peak_gpu_bytes: b,
                peak_elapsed_s: s.elapsed_s,
                peak_unix_ms: s.unix_ms,
                peak_session: place.session,
                peak_x_s: place.x,
                device_used_at_peak_bytes: s.gpu.device_used_bytes,
                device_total_bytes: s.gpu.device_total_bytes,
                ..GpuPeak::default()
            });
        }
    }

    /// The recording's GPU kernel peak from its sessions' (`merge_sessions`); a session with
    /// GPU values but no marks has none known.
    fn kernel(&self) -> GpuKernelPeak {
        let each: Vec<GpuKernelPeak> = self
            .sessions
            .iter()
            .filter_map(|s| {
                let window = if s.launched {
                    Window::FromOpen
                } else {
                    Window::IfRises
                };
                let k = s.acc.map(|a| a.decide(window, s.tail)).unwrap_or_default();
                (k != GpuKernelPeak::default() || s.gpu_rows).then_some(k)
            })
            .collect();
        merge_sessions(&each)
    }

    /// `None` when no row had a GPU value (GPU memory not recorded).
    pub fn finish(&self, meta: Option<&Meta>) -> Option<GpuPeak> {
        let mut p = self.peak.clone()?;
        p.max_device_used_bytes = self.max_device_used;
        p.rows = self.rows;
        p.rows_without = self.rows_without;
        p.kernel = self.kernel();
        p.gpu_peak = budget_peak(Some(p.peak_gpu_bytes), &p.kernel);
        p.accounting = Some(match self.rows_marked {
            0 if p.kernel.window.is_none() => GpuAccounting::Off,
            n if n == self.rows => GpuAccounting::On,
            _ => GpuAccounting::Partial,
        });
        p.process_call = self.process_call.clone().or_else(|| {
            meta.and_then(|m| m.gpu.as_ref())
                .and_then(|g| g.process_call.clone())
        });
        p.max_nvidia_mapped_bytes = self.max_mapped;
        p.max_nvidia_mapped_rss_bytes = self.max_mapped_rss;
        if let Some(g) = meta.and_then(|m| m.gpu.as_ref()) {
            p.every = Some(g.every.clone());
            // Data, not words: each GPU as the metadata names it (`index uuid model`), an
            // identifier in the JSON's `gpus`, shown nowhere else.
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
    /// When the sampled GPU peak came.
    pub fn peak_at(&self) -> When {
        When {
            unix_ms: self.peak_unix_ms,
            elapsed_s: self.peak_elapsed_s,
            session: self.peak_session,
            x_s: self.peak_x_s,
        }
    }
}

/// The GPU kernel peak of a recording of several sessions (`--append`), from each session's
/// (those with GPU memory). The marks never fall while a process runs, and a session's GPU
/// peak is at most its marks: its largest when they began with it or rose in it, at most its
/// lifetime mark when they were set before it (`SetBefore`). So the recording's GPU peak is
/// the largest known session peak, exactly, when no session set before it had a lifetime mark
/// above that (then the peak of that session may be higher, and is not known: `SetBefore`,
/// with the largest lifetime mark); and not known at all when some session's is not (window
/// `None`).
fn merge_sessions(each: &[GpuKernelPeak]) -> GpuKernelPeak {
    let Some(first) = each.first() else {
        return GpuKernelPeak::default();
    };
    let sum_bytes = each.iter().fold(None, |a, k| max_opt(a, k.sum_bytes));
    if each.len() == 1 {
        return *first;
    }
    if each.iter().any(|k| k.window.is_none()) {
        return GpuKernelPeak {
            sum_bytes,
            ..GpuKernelPeak::default()
        };
    }
    let known = each
        .iter()
        .filter(|k| k.bytes.is_some())
        .max_by_key(|k| k.bytes);
    let lifetime = each
        .iter()
        .filter(|k| k.window == Some(GpuKernelWindow::SetBefore))
        .fold(None, |a, k| max_opt(a, k.lifetime_bytes));
    match known {
        Some(k) if lifetime.is_none_or(|l| l <= k.bytes.unwrap_or(0)) => GpuKernelPeak {
            bytes: k.bytes,
            // The largest process's of one session only: a lower bound of the tree's when any
            // session had several.
            scope: if each
                .iter()
                .any(|k| k.scope == Some(PeakScope::LargestProcess))
            {
                Some(PeakScope::LargestProcess)
            } else {
                k.scope
            },
            window: k.window,
            sum_bytes,
            lifetime_bytes: None,
        },
        _ => GpuKernelPeak {
            bytes: None,
            scope: None,
            window: Some(GpuKernelWindow::SetBefore),
            sum_bytes,
            lifetime_bytes: lifetime,
        },
    }
}

/// The GPU peak a GPU budget judges, decided as the host's peak is: the driver's exact mark
/// of the tree (NVML accounting, one process on one GPU held all of it) where it covers the
/// span; else the larger of the largest process's mark and the sampled sum, a lower bound of
/// the tree's (with the sum of the marks as its upper bound); else the sampled GPU memory, a
/// lower bound. `None` without GPU memory.
pub fn budget_peak(sampled: Option<u64>, kernel: &GpuKernelPeak) -> Option<Peak> {
    let sampled_peak = |bytes| Peak {
        bytes,
        source: PeakSource::Sampled,
        counter: PeakSource::Sampled.counter(),
        scope: PeakScope::Tree,
        exact: false,
        tree_low_bytes: None,
        tree_high_bytes: None,
        why_not_exact: crate::model::peak::NotExact::Unsaid,
        ram_bytes: None,
        swap_bytes: None,
        needed_high_bytes: None,
    };
    match (kernel.bytes, kernel.scope) {
        (Some(k), Some(PeakScope::Tree)) => Some(Peak {
            bytes: k,
            source: PeakSource::NvmlAccounting,
            counter: PeakSource::NvmlAccounting.counter(),
            scope: PeakScope::Tree,
            exact: true,
            tree_low_bytes: None,
            tree_high_bytes: None,
            why_not_exact: crate::model::peak::NotExact::Unsaid,
            ram_bytes: None,
            swap_bytes: None,
            needed_high_bytes: None,
        }),
        (Some(k), _) if k >= sampled.unwrap_or(0) => Some(Peak {
            bytes: k,
            source: PeakSource::NvmlAccounting,
            counter: PeakSource::NvmlAccounting.counter(),
            scope: PeakScope::LargestProcess,
            exact: false,
            tree_low_bytes: Some(k),
            tree_high_bytes: kernel.sum_bytes,
            why_not_exact: crate::model::peak::NotExact::Unsaid,
            ram_bytes: None,
            swap_bytes: None,
            needed_high_bytes: None,
        }),
        _ => sampled.map(sampled_peak),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row `s` of a one-session recording, placed at its elapsed time.
    fn push(t: &mut GpuTrack, s: &Sample) {
        let place = Place {
            x: s.elapsed_s,
            new_session: false,
            session: 1,
        };
        t.push(s, place);
    }

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
        push(&mut t, &row(0.0, None, None));
        push(&mut t, &row(1.0, Some(4 * GIB), Some(10 * GIB)));
        push(&mut t, &row(2.0, Some(20 * GIB), Some(30 * GIB)));
        push(&mut t, &row(3.0, Some(2 * GIB), Some(40 * GIB)));
        let p = t.finish(None).unwrap();
        assert_eq!(p.peak_gpu_bytes, 20 * GIB);
        assert_eq!(p.peak_elapsed_s, 2.0);
        assert_eq!(p.device_used_at_peak_bytes, Some(30 * GIB));
        assert_eq!(p.max_device_used_bytes, Some(40 * GIB));
        assert_eq!((p.rows, p.rows_without), (3, 1));
        let text = p.render(1);
        assert!(
            text.contains("GPU sampled peak 20.00 GiB (21474836480 bytes) at +2.00 s"),
            "{text}"
        );
        assert!(text.contains("1 of 4 rows without a GPU value"), "{text}");
    }

    fn marked(t: f64, gpu: u64, hwm: Option<u64>, sum: Option<u64>) -> Sample {
        let mut s = row(t, Some(gpu), Some(gpu + GIB));
        s.gpu.hwm_bytes = hwm;
        s.gpu.hwm_sum_bytes = sum.or(hwm);
        s
    }

    fn decide(rows: &[Sample], window: Window, tail: Option<u64>) -> GpuKernelPeak {
        let mut a = GpuHwmAcc::open(&rows[0]);
        rows[1..].iter().for_each(|r| a.add(r));
        a.decide(window, tail)
    }

    #[test]
    fn a_launched_spans_gpu_kernel_peak_is_its_largest_mark_a_spike_included() {
        // Sampled at 4 and 6 GiB; the driver's mark says a 12 GiB spike came between readings.
        let rows = [
            marked(0.0, 0, Some(0), None),
            marked(1.0, 4 * GIB, Some(12 * GIB), None),
            marked(2.0, 6 * GIB, Some(12 * GIB), None),
        ];
        let k = decide(&rows, Window::FromOpen, None);
        assert_eq!(k.bytes, Some(12 * GIB));
        assert_eq!(k.window, Some(GpuKernelWindow::Launched));
        assert_eq!(k.scope, Some(PeakScope::Tree));
        assert_eq!(k.cell(), "12.00 GiB");
        // A mark read after the last row (the end record's) belongs to the span.
        let k = decide(&rows, Window::FromOpen, Some(14 * GIB));
        assert_eq!(k.bytes, Some(14 * GIB));
    }

    #[test]
    fn a_command_benchs_gpu_peak_holds_the_marks_its_runs_read_after_their_last_rows() {
        // Each run's mark after its last row is in its own end record (`runs`); the bench's end
        // record has none of its own.
        let mut t = GpuTrack::default();
        t.session(&Meta::example("command"));
        push(&mut t, &marked(0.0, GIB, Some(GIB), None));
        push(&mut t, &marked(1.0, 2 * GIB, Some(2 * GIB), None));
        let run = |run, hwm| crate::format::meta::RunEnd {
            run,
            started_elapsed_s: None,
            end: EndInfo {
                gpu: Some(crate::format::meta::GpuEnd {
                    hwm_after_last_row_bytes: Some(hwm),
                    ..Default::default()
                }),
                ..EndInfo::default()
            },
        };
        t.session_end(&EndInfo {
            runs: vec![run(1, 9 * GIB), run(2, 5 * GIB)],
            ..EndInfo::default()
        });
        let p = t.finish(Some(&Meta::example("command"))).unwrap();
        assert_eq!(p.kernel.bytes, Some(9 * GIB));
    }

    #[test]
    fn a_mark_that_predates_the_span_counts_only_when_it_rises() {
        let rose = [
            marked(0.0, GIB, Some(10 * GIB), None),
            marked(1.0, 2 * GIB, Some(20 * GIB), None),
        ];
        let k = decide(&rose, Window::IfRises, None);
        assert_eq!(
            (k.bytes, k.window),
            (Some(20 * GIB), Some(GpuKernelWindow::RoseDuringSpan))
        );
        let flat = [
            marked(0.0, GIB, Some(30 * GIB), None),
            marked(1.0, 9 * GIB, Some(30 * GIB), None),
        ];
        let k = decide(&flat, Window::IfRises, None);
        assert_eq!(k.bytes, None);
        assert_eq!(k.window, Some(GpuKernelWindow::SetBefore));
        assert_eq!(k.lifetime_bytes, Some(30 * GIB));
        assert_eq!(k.cell(), "set before");
        // No mark at the opening row: nothing can be said.
        let unopened = [
            marked(0.0, GIB, None, None),
            marked(1.0, GIB, Some(5 * GIB), None),
        ];
        assert_eq!(decide(&unopened, Window::IfRises, None).window, None);
    }

    #[test]
    fn a_span_whose_last_row_has_no_mark_has_no_gpu_kernel_peak_known() {
        // The boundary row closing the span had no reading of its own: a rise before it may be
        // missing from the marks, so neither "rose" nor "set before" can be said.
        let rows = [
            marked(0.0, GIB, Some(5 * GIB), None),
            marked(1.0, GIB, Some(6 * GIB), None),
            marked(2.0, GIB, None, None),
        ];
        let k = decide(&rows, Window::IfRises, None);
        assert_eq!((k.bytes, k.window), (None, None));
        let flat = [
            marked(0.0, GIB, Some(5 * GIB), None),
            marked(1.0, GIB, None, None),
        ];
        assert_eq!(decide(&flat, Window::IfRises, None).window, None);
        assert_eq!(decide(&flat, Window::FromOpen, None).window, None);
        // A mark read after the last row (the end record's) closes it.
        let k = decide(&flat, Window::IfRises, Some(7 * GIB));
        assert_eq!(
            (k.bytes, k.window),
            (Some(7 * GIB), Some(GpuKernelWindow::RoseDuringSpan))
        );
    }

    /// A recording of `sessions`, each `(launched, rows)`, as `--append` writes them.
    fn sessions(sessions: &[(bool, Vec<Sample>)]) -> GpuPeak {
        let mut t = GpuTrack::default();
        for (i, (launched, rows)) in sessions.iter().enumerate() {
            t.session(&Meta::example(if *launched { "command" } else { "pid" }));
            for r in rows {
                let place = Place {
                    x: r.elapsed_s,
                    new_session: false,
                    session: i as u32 + 1,
                };
                t.push(r, place);
            }
        }
        t.finish(None).unwrap()
    }

    #[test]
    fn an_appended_session_whose_mark_rose_gives_the_recordings_exact_gpu_peak() {
        // Session 1: the mark (5 GiB) set before it, flat; session 2: it rises to 9 GiB. The
        // marks never fall, so session 1's peak is at most 5 GiB: 9 GiB is the recording's.
        let p = sessions(&[
            (
                false,
                vec![
                    marked(0.0, 4 * GIB, Some(5 * GIB), None),
                    marked(1.0, 4 * GIB, Some(5 * GIB), None),
                ],
            ),
            (
                false,
                vec![
                    marked(0.0, 4 * GIB, Some(5 * GIB), None),
                    marked(0.6, 7 * GIB, Some(9 * GIB), None),
                ],
            ),
        ]);
        assert_eq!(p.accounting, Some(GpuAccounting::On));
        assert_eq!(p.kernel.bytes, Some(9 * GIB));
        assert_eq!(p.kernel.window, Some(GpuKernelWindow::RoseDuringSpan));
        assert_eq!(p.kernel.scope, Some(PeakScope::Tree));
        assert_eq!(p.kernel.lifetime_bytes, None);
        let text = p.render(2);
        assert!(
            text.contains("GPU kernel peak 9.00 GiB (9663676416 bytes)")
                && text.contains("reached during the recording"),
            "{text}"
        );
        assert!(!text.contains("no accounting mark"), "{text}");
        let judged = budget_peak(Some(p.peak_gpu_bytes), &p.kernel).unwrap();
        assert_eq!((judged.bytes, judged.exact), (9 * GIB, true));
    }

    #[test]
    fn an_appended_session_set_before_above_the_others_rise_leaves_the_gpu_peak_unknown() {
        // Session 1 (another process) had a 20 GiB mark from before it; session 2's rose to
        // 9 GiB: session 1's own peak may be anything up to 20 GiB.
        let p = sessions(&[
            (false, vec![marked(0.0, GIB, Some(20 * GIB), None)]),
            (
                false,
                vec![
                    marked(0.0, GIB, Some(5 * GIB), None),
                    marked(1.0, GIB, Some(9 * GIB), None),
                ],
            ),
        ]);
        assert_eq!(p.kernel.bytes, None);
        assert_eq!(p.kernel.window, Some(GpuKernelWindow::SetBefore));
        assert_eq!(p.kernel.lifetime_bytes, Some(20 * GIB));
        let text = p.render(2);
        assert!(
            text.contains("was set before a session began, and no mark rose above it"),
            "{text}"
        );
        // Launched sessions: the largest of their peaks, exact.
        let p = sessions(&[
            (true, vec![marked(0.0, GIB, Some(3 * GIB), None)]),
            (true, vec![marked(0.0, GIB, Some(2 * GIB), None)]),
        ]);
        assert_eq!(
            (p.kernel.bytes, p.kernel.window),
            (Some(3 * GIB), Some(GpuKernelWindow::Launched))
        );
    }

    #[test]
    fn an_appended_session_without_marks_leaves_the_recordings_gpu_kernel_peak_unknown() {
        let p = sessions(&[
            (false, vec![marked(0.0, GIB, None, None)]),
            (
                false,
                vec![
                    marked(0.0, GIB, Some(5 * GIB), None),
                    marked(1.0, GIB, Some(9 * GIB), None),
                ],
            ),
        ]);
        assert_eq!(p.accounting, Some(GpuAccounting::Partial));
        assert_eq!((p.kernel.bytes, p.kernel.window), (None, None));
        assert!(p.render(2).contains("some rows have no accounting mark"));
    }

    #[test]
    fn several_gpu_processes_give_the_largest_ones_peak_and_the_sum_bounds_the_trees() {
        let rows = [
            marked(0.0, 0, Some(0), Some(0)),
            marked(1.0, 7 * GIB, Some(4 * GIB), Some(7 * GIB)),
        ];
        let k = decide(&rows, Window::FromOpen, None);
        assert_eq!(k.bytes, Some(4 * GIB));
        assert_eq!(k.scope, Some(PeakScope::LargestProcess));
        assert_eq!(k.sum_bytes, Some(7 * GIB));
        assert_eq!(k.cell(), ">= 4.00 GiB");
    }

    #[test]
    fn without_accounting_the_summary_says_the_gpu_peak_is_sampled_and_how_to_turn_it_on() {
        let mut t = GpuTrack::default();
        push(&mut t, &row(0.0, Some(4 * GIB), Some(10 * GIB)));
        let p = t.finish(None).unwrap();
        assert_eq!(p.accounting, Some(GpuAccounting::Off));
        assert_eq!(p.kernel, GpuKernelPeak::default());
        let text = p.render(1);
        assert!(text.contains("nvidia-smi -am 1"), "{text}");
        assert!(text.contains("GPU peak is sampled"), "{text}");
    }

    #[test]
    fn with_accounting_the_summary_shows_the_kernel_peak_beside_the_sampled_one() {
        let mut t = GpuTrack::default();
        for r in [
            marked(0.0, 0, Some(0), None),
            marked(1.0, 4 * GIB, Some(12 * GIB), None),
        ] {
            push(&mut t, &r);
        }
        let p = t.finish(None).unwrap();
        assert_eq!(p.accounting, Some(GpuAccounting::On));
        // Attached (no metadata): a mark that rose during the recording.
        assert_eq!(p.kernel.bytes, Some(12 * GIB));
        let text = p.render(1);
        assert!(
            text.contains("GPU kernel peak 12.00 GiB (12884901888 bytes)"),
            "{text}"
        );
        assert!(
            text.contains("8.00 GiB above the GPU sampled peak"),
            "{text}"
        );
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["gpu_kernel_peak_bytes"], 12 * GIB);
        assert_eq!(json["gpu_kernel_peak_window"], "rose-during-span");
        assert_eq!(json["accounting"], "on");
    }

    #[test]
    fn no_gpu_values_no_gpu_summary() {
        let mut t = GpuTrack::default();
        push(&mut t, &row(0.0, None, None));
        assert_eq!(t.finish(None), None);
    }

    #[test]
    fn a_gpu_budget_judges_the_drivers_exact_mark_where_it_covers_the_span() {
        let kernel = |bytes, scope| GpuKernelPeak {
            bytes: Some(bytes),
            scope: Some(scope),
            sum_bytes: Some(30 * GIB),
            ..GpuKernelPeak::default()
        };
        let tree = budget_peak(Some(4 * GIB), &kernel(24 * GIB, PeakScope::Tree)).unwrap();
        assert_eq!(
            (tree.bytes, tree.source, tree.exact),
            (24 * GIB, PeakSource::NvmlAccounting, true)
        );
        // Several processes: the largest one's mark, a lower bound with the sum above it.
        let largest =
            budget_peak(Some(4 * GIB), &kernel(20 * GIB, PeakScope::LargestProcess)).unwrap();
        assert_eq!((largest.bytes, largest.exact), (20 * GIB, false));
        assert_eq!(largest.tree_high_bytes, Some(30 * GIB));
        // A sampled sum above the largest mark is the better lower bound.
        let sum =
            budget_peak(Some(25 * GIB), &kernel(20 * GIB, PeakScope::LargestProcess)).unwrap();
        assert_eq!((sum.bytes, sum.source), (25 * GIB, PeakSource::Sampled));
        // No accounting: the sampled peak.
        let sampled = budget_peak(Some(4 * GIB), &GpuKernelPeak::default()).unwrap();
        assert_eq!(
            (sampled.bytes, sampled.source, sampled.exact),
            (4 * GIB, PeakSource::Sampled, false)
        );
        assert_eq!(budget_peak(None, &GpuKernelPeak::default()), None);
    }
}
