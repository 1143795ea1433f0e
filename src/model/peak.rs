//! The one vocabulary of peaks: which number is reported (`PeakSource`), over what scope
//! (`PeakScope`), how exact the kernel's counters are (`batching_bound_bytes`), and which
//! number a peak is when the kernel's and the sampled one are both known (`choose_peak`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a peak number comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeakSource {
    /// The kernel's high-water mark of a process (VmHWM in /proc/PID/status).
    Vmhwm,
    /// wait4's ru_maxrss of a launched command (its largest single process).
    RuMaxrss,
    /// A cgroup's memory.peak (all its memory, page cache included).
    Cgroup,
    /// The largest RSS among the samples: a spike between two ticks is missed.
    Sampled,
}

impl PeakSource {
    /// A number the kernel kept itself (not one memmon sampled).
    pub fn is_kernel(self) -> bool {
        !matches!(self, PeakSource::Sampled)
    }

    /// The kernel's name of the counter: `VmHWM`, `ru_maxrss`, `memory.peak` (or `sampled`).
    pub fn counter(self) -> &'static str {
        match self {
            PeakSource::Vmhwm => "VmHWM",
            PeakSource::RuMaxrss => "ru_maxrss",
            PeakSource::Cgroup => "memory.peak",
            PeakSource::Sampled => "sampled",
        }
    }

    /// The word used in JSON and in tables.
    pub fn key(self) -> &'static str {
        match self {
            PeakSource::Vmhwm => "vmhwm",
            PeakSource::RuMaxrss => "ru-maxrss",
            PeakSource::Cgroup => "cgroup",
            PeakSource::Sampled => "sampled",
        }
    }
}

impl fmt::Display for PeakSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PeakSource::Vmhwm => "kernel VmHWM",
            PeakSource::RuMaxrss => "wait4 ru_maxrss",
            PeakSource::Cgroup => "cgroup memory.peak",
            PeakSource::Sampled => "sampled",
        })
    }
}

/// The peaks of several runs together: all the kernel's, all sampled, or some of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeakKind {
    Kernel,
    Sampled,
    Mixed,
}

impl PeakKind {
    /// The kind of these sources together.
    pub fn of(sources: impl IntoIterator<Item = PeakSource>) -> PeakKind {
        let (mut kernel, mut sampled) = (false, false);
        for s in sources {
            if s.is_kernel() {
                kernel = true;
            } else {
                sampled = true;
            }
        }
        match (kernel, sampled) {
            (true, true) => PeakKind::Mixed,
            (true, false) => PeakKind::Kernel,
            _ => PeakKind::Sampled,
        }
    }
}

impl fmt::Display for PeakKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PeakKind::Kernel => "kernel",
            PeakKind::Sampled => "sampled",
            PeakKind::Mixed => "mixed",
        })
    }
}

/// What a peak is the peak of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeakScope {
    /// The one process recorded.
    Process,
    /// The largest single process of a tree: a lower bound of the tree's peak.
    LargestProcess,
    /// The largest process of a tree as far as its samples saw: processes left the tree and
    /// not every exit record was read (no taskstats, or the kernel dropped some), so one of
    /// them may have peaked higher after its last sample, and a child born and gone between
    /// two samples is not in it. A lower bound of the largest process's peak.
    LargestProcessSeen,
    /// The whole tree (sum of its processes, or its cgroup).
    Tree,
}

impl PeakScope {
    /// The word used in JSON and in tables.
    pub fn key(self) -> &'static str {
        match self {
            PeakScope::Process => "process",
            PeakScope::LargestProcess => "largest-process",
            PeakScope::LargestProcessSeen => "largest-process-seen",
            PeakScope::Tree => "tree",
        }
    }

    /// A lower bound of the tree's peak, not the peak of the process or tree it names.
    pub fn is_partial(self) -> bool {
        matches!(self, PeakScope::LargestProcessSeen)
    }

    /// The scope of a per-process kernel counter (VmHWM, ru_maxrss) over rows with at most
    /// `processes` processes, during which `departed` processes left the tree; `exit_records`:
    /// every exit record was read (taskstats, none dropped), so each departed process's peak
    /// at its exit is in the rows.
    pub fn of_kernel_counter(processes: u32, departed: u64, exit_records: bool) -> PeakScope {
        match (processes, departed) {
            (_, d) if d > 0 && !exit_records => PeakScope::LargestProcessSeen,
            (p, d) if p > 1 || d > 0 => PeakScope::LargestProcess,
            _ => PeakScope::Process,
        }
    }
}

impl fmt::Display for PeakScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PeakScope::Process => "of the process",
            PeakScope::LargestProcess => "of the largest process",
            PeakScope::LargestProcessSeen => {
                "of the largest process as its samples saw it (processes left with no exit record read)"
            }
            PeakScope::Tree => "of the tree",
        })
    }
}

/// Whether, and why, a recording's kernel peak is a peak reached during the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelPeakWindow {
    /// The recording launched the command: its high-water mark began with the recording.
    Launched,
    /// The high-water marks were reset at the first sample (`record --reset-peak`).
    ResetAtStart,
    /// Attached to a running process whose high-water mark rose above its value at the first
    /// sample: the mark was set during the recording.
    RoseDuringRecording,
    /// Attached, and the high-water mark never rose above its value at the first sample: it was
    /// set before the recording (the process's lifetime peak), and the kernel cannot tell the
    /// recording's own peak.
    BeforeRecording,
    /// No high-water mark in the recording (imported from another tool).
    NotRecorded,
}

impl fmt::Display for KernelPeakWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KernelPeakWindow::Launched => "since the launch of the command",
            KernelPeakWindow::ResetAtStart => "from the start of the recording (--reset-peak)",
            KernelPeakWindow::RoseDuringRecording => "reached during the recording",
            KernelPeakWindow::BeforeRecording => "set before the recording began",
            KernelPeakWindow::NotRecorded => "not recorded",
        })
    }
}

/// Pages of RSS a CPU may hold back from a process's counters, at least.
pub const BATCH_PAGES_PER_CPU: u64 = 64;

/// How far the kernel's RSS counters of one process (VmRSS, VmHWM, ru_maxrss) may be from the
/// truth, in bytes. The kernel counts RSS in per-CPU batches: before Linux 6.2 each thread kept
/// up to 64 pages (TASK_RSS_EVENTS_THRESH) unsynced; since 6.2 the counters are percpu_counters
/// whose reads may miss up to `batch` pages per CPU, batch = max(32, 2 × CPUs). The bound taken
/// is CPUs × max(64, 2 × CPUs) pages, which covers both (e.g. 512 KiB on 2 CPUs with 4 KiB pages,
/// 4 MiB on 16). Two such readings (a sample and a high-water mark) may differ by this much
/// without either being wrong.
pub fn batching_bound_bytes(online_cpus: u64, page_size_bytes: u64) -> u64 {
    let cpus = online_cpus.max(1);
    cpus * BATCH_PAGES_PER_CPU.max(2 * cpus) * page_size_bytes
}

/// The CPUs online on this machine (1 if the kernel will not say).
pub fn online_cpus() -> u64 {
    // SAFETY: sysconf takes no pointers.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as u64
    } else {
        1
    }
}

/// `batching_bound_bytes` of this machine.
pub fn local_batching_bound_bytes() -> u64 {
    batching_bound_bytes(online_cpus(), crate::probe::proc::ProcFs::page_size())
}

/// "exact within 512 KiB": how exact a kernel peak is, in words.
pub fn exact_within(bound_bytes: Option<u64>) -> String {
    match bound_bytes {
        Some(b) => format!("exact within {}", crate::units::fmt_bytes(b)),
        None => "exact within the kernel's per-CPU batching".into(),
    }
}

/// The peak to report when the kernel's (`kernel`, with its source) and the sampled one are
/// known: the kernel's unless the sampled one exceeds it by more than the batching bound (a
/// tree's sampled sum above its largest process's peak), then the sampled one. A kernel number
/// a page or two below a sample is the batching of the counters, not a missed peak.
pub fn choose_peak(
    kernel: Option<(u64, PeakSource)>,
    sampled: u64,
    bound_bytes: u64,
) -> (u64, PeakSource) {
    match kernel {
        Some((k, source)) if k > 0 && k.saturating_add(bound_bytes) >= sampled => (k, source),
        _ => (sampled, PeakSource::Sampled),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;

    #[test]
    fn the_bound_is_64_pages_per_cpu_on_small_machines_and_grows_with_many() {
        assert_eq!(batching_bound_bytes(2, 4096), 2 * 64 * 4 * KIB);
        assert_eq!(batching_bound_bytes(16, 4096), 16 * 64 * 4 * KIB);
        assert_eq!(batching_bound_bytes(64, 4096), 64 * 128 * 4 * KIB);
        assert_eq!(batching_bound_bytes(0, 4096), 64 * 4 * KIB);
    }

    #[test]
    fn a_kernel_peak_one_page_below_a_sample_is_kept() {
        let bound = batching_bound_bytes(2, 4096);
        assert_eq!(
            choose_peak(Some((100 * KIB, PeakSource::Vmhwm)), 104 * KIB, bound),
            (100 * KIB, PeakSource::Vmhwm)
        );
    }

    #[test]
    fn a_sample_beyond_the_bound_wins_and_says_sampled() {
        let bound = batching_bound_bytes(2, 4096);
        assert_eq!(
            choose_peak(
                Some((100 * KIB, PeakSource::Vmhwm)),
                100 * KIB + bound + 1,
                bound
            ),
            (100 * KIB + bound + 1, PeakSource::Sampled)
        );
        assert_eq!(choose_peak(None, 7, bound), (7, PeakSource::Sampled));
        assert_eq!(
            choose_peak(Some((0, PeakSource::Vmhwm)), 7, bound),
            (7, PeakSource::Sampled)
        );
    }

    #[test]
    fn sources_and_scopes_serialize_in_kebab_case() {
        assert_eq!(
            serde_json::to_string(&PeakSource::RuMaxrss).unwrap(),
            "\"ru-maxrss\""
        );
        assert_eq!(
            serde_json::to_string(&PeakSource::Vmhwm).unwrap(),
            "\"vmhwm\""
        );
        assert_eq!(
            serde_json::to_string(&PeakScope::LargestProcess).unwrap(),
            "\"largest-process\""
        );
        for s in [
            PeakSource::Vmhwm,
            PeakSource::RuMaxrss,
            PeakSource::Cgroup,
            PeakSource::Sampled,
        ] {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.key())
            );
        }
    }
}
