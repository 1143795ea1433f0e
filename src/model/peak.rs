//! The one vocabulary of peaks and the one decision of "the peak": what is known of a span (a
//! recording, a session, a run, a phase) goes in as [`PeakFacts`], and [`PeakFacts::decide`]
//! gives the [`Peak`] every table, file, comparison and gate reports, with its source, its
//! scope and, for a tree, the bounds of the tree's own peak. [`PeakBasis`] is the kind of
//! number several spans are compared on (`common_basis`): the best kind all of them have.

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
    /// NVML accounting's `maxMemoryUsage` of a process on a GPU: the driver's own GPU peak
    /// (GPU budgets only; never a host peak).
    NvmlAccounting,
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
            PeakSource::NvmlAccounting => "maxMemoryUsage",
        }
    }

    /// `counter`, with the cgroup's file of its version (v1: `memory.max_usage_in_bytes`).
    pub fn counter_of(self, cgroup_v1: bool) -> &'static str {
        match self {
            PeakSource::Cgroup if cgroup_v1 => "memory.max_usage_in_bytes",
            other => other.counter(),
        }
    }

    /// The word used in JSON and in tables.
    pub fn key(self) -> &'static str {
        match self {
            PeakSource::Vmhwm => "vmhwm",
            PeakSource::RuMaxrss => "ru-maxrss",
            PeakSource::Cgroup => "cgroup",
            PeakSource::Sampled => "sampled",
            PeakSource::NvmlAccounting => "nvml-accounting",
        }
    }
}

impl fmt::Display for PeakSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PeakSource::Vmhwm => "kernel VmHWM",
            PeakSource::RuMaxrss => "wait4 ru_maxrss",
            PeakSource::Cgroup => "cgroup peak",
            PeakSource::Sampled => "sampled",
            PeakSource::NvmlAccounting => "NVML accounting",
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
    /// two samples is not in it; or the target restarted and the process before the restart
    /// has no peak known in the span (`PeakFacts::restart_peak_unknown`), or the marks were
    /// reset at a marker and those before have no peak known (`reset_peak_unknown`), or a
    /// process reset its own (`mark_reset_elsewhere`). A lower bound of the largest process's
    /// peak.
    LargestProcessSeen,
    /// The whole tree (sum of its processes, or its cgroup).
    Tree,
    /// A memory cgroup that may hold processes outside the tree.
    Cgroup,
}

impl PeakScope {
    /// The word used in JSON and in tables.
    pub fn key(self) -> &'static str {
        match self {
            PeakScope::Process => "process",
            PeakScope::LargestProcess => "largest-process",
            PeakScope::LargestProcessSeen => "largest-process-seen",
            PeakScope::Tree => "tree",
            PeakScope::Cgroup => "cgroup",
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
                "of the largest process as its samples saw it (processes left with no exit record read, or marks with no peak known before a restart, a reset at a marker, or a mark that fell: reset by the process itself, or by reclaim)"
            }
            PeakScope::Tree => "of the tree",
            PeakScope::Cgroup => "of the cgroup, which may hold processes outside the tree",
        })
    }
}

/// Whether, and why, a recording's kernel peak is a peak reached during the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelPeakWindow {
    /// The recording launched the command: its high-water mark began with the recording.
    Launched,
    /// The high-water marks were reset at the first sample (`record --reset-peaks`).
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
    /// The sessions of an `--append`ed recording differ: each has its own (see `sessions`).
    PerSession,
}

impl fmt::Display for KernelPeakWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KernelPeakWindow::Launched => "since the launch of the command",
            KernelPeakWindow::ResetAtStart => "since its reset at the start of the recording",
            KernelPeakWindow::RoseDuringRecording => "reached during the recording",
            KernelPeakWindow::BeforeRecording => "set before the recording began",
            KernelPeakWindow::NotRecorded => "not recorded",
            KernelPeakWindow::PerSession => "over every session, each in its own way",
        })
    }
}

/// What is known of one span's peak (a recording, a session, a bench run, a phase): the
/// inputs of the one decision, [`PeakFacts::decide`]. Sizes in bytes. Serialized (flattened)
/// into every JSON that reports a span, under the same names everywhere.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PeakFacts {
    /// The largest RSS of the tree sampled in the span: a sum over its processes at one tick
    /// (shared pages counted in each), which a spike between two ticks escapes.
    pub sampled_peak_rss_bytes: u64,
    /// The exact peak of the span's largest single process (VmHWM, its exit record, or wait4's
    /// ru_maxrss), when the kernel's marks covered the span (reset at its start, a launched
    /// command, or risen during it); `None` when they did not.
    pub kernel_peak_rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_peak_source: Option<PeakSource>,
    /// The most processes at one tick, and how many left the tree during the span.
    pub max_processes: u32,
    pub departed: u64,
    /// Every exit record was read (taskstats, none dropped): each process that left has its
    /// peak at its exit in the rows.
    pub exit_records_complete: bool,
    /// The kernel's peak of the largest process covers the processes that left: their exit
    /// records were read, or it is wait4's ru_maxrss of a launched command, which holds every
    /// process of its tree that ended (a maximum, so it bounds the largest process, not the
    /// tree: only exit records make the sum of high-water marks an upper bound).
    pub kernel_peak_covers_departed: bool,
    /// The memory cgroup's exact peak over the span (each page once, page cache included),
    /// when its peak file covered the span (reset at its start, made for it, or risen during it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_peak_bytes: Option<u64>,
    /// The cgroup holds the tree and nothing else (memmon's own for a launched command, or a
    /// daemon's own cgroup checked at the start): its peak is the tree's.
    pub cgroup_holds_tree: bool,
    /// The cgroup held the tree when the recording began, but not all of the tree's memory in
    /// this span: a process of the tree was found outside it (`cgroup_outside_processes`), or
    /// the largest process's own peak rose above the cgroup's by more than its page cache
    /// explains. `cgroup_holds_tree` is then false: the cgroup's peak is not the tree's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cgroup_left_tree: bool,
    /// The cgroup holds the tree (no process of it was seen outside), but a process's own peak
    /// stands above the cgroup's by more than the page cache and batching explain: some of its
    /// memory was charged elsewhere (a process moved out and back, or gone, between two
    /// samples). The basis stays the cgroup's (only a process seen outside changes it); its
    /// peak is then not exact, and the process's peak bounds the tree's from below.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cgroup_below_process: bool,
    /// The cgroup's peak file fell between two rows with no reset of memmon's between them (the
    /// cgroup removed and made again, as a restarted service's is, or its peak reset by another
    /// program): it does not cover the span, and `cgroup_peak_bytes` is `None`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cgroup_peak_fell: bool,
    /// The cgroup is v1 (its peak file is memory.max_usage_in_bytes, not memory.peak).
    #[serde(skip)]
    pub cgroup_v1: bool,
    /// The largest sum of the processes' VmHWM at one tick (those that left since the tick
    /// before included, at their exit): with every exit record read, an upper bound of the
    /// tree's peak.
    pub hwm_sum_bytes: u64,
    /// How far one process's kernel counters may be off (`batching_bound_bytes` of the
    /// recording machine); `None` when the recording does not say how many CPUs it had.
    pub exact_within_bytes: Option<u64>,
    /// A boundary of the span was taken late (a marker's sample came after the program's
    /// phase had moved on): memory of the next span may be in this one, or this span's in the
    /// one before. The span's peak is then not exact.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub late_boundary: bool,
    /// Rows its end record counts are not in the file (cut from it after the recording), and
    /// no reading of the end record covers them: the rows lost may hold a higher peak. The
    /// span's peak is then not exact.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rows_lost: bool,
    /// The target restarted in the span, and the marks of the process before the restart
    /// never rose in it (they may be older than the span): that process's peak in the span is
    /// not known, and the kernel's peak (the successor's, whose marks all fall in the span) is a
    /// lower bound of the largest process's, scope `largest-process-seen`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub restart_peak_unknown: bool,
    /// The marks were reset at a marker in the span (`--phase-peaks`), and those before the
    /// first reset never rose in it (they may be older than the span): the peak before that
    /// reset is not known, and the kernel's peak (the largest mark after it, or a larger
    /// sampled RSS of the largest process) is a lower bound, scope `largest-process-seen`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reset_peak_unknown: bool,
    /// A process's high-water mark fell in the span with no reset of memmon's: the process
    /// itself or another program reset it (`5` to /proc/PID/clear_refs). What it reached between
    /// the row before and that reset is not known: the kernel's peak is a lower bound, scope
    /// `largest-process-seen` (`EndInfo::marks_reset_elsewhere`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mark_reset_elsewhere: bool,
    /// The most swap the tree held in the span: the largest sum of its processes' VmSwap
    /// sampled, or its cgroup's `memory.swap.peak` where that covers the span. Memory the
    /// program needed that was not in RAM: a RAM peak held down by a limit (memory.max,
    /// memory.high) sent the rest here.
    #[serde(skip_serializing_if = "is_zero")]
    pub swap_peak_bytes: u64,
    /// The largest RAM plus swap sampled at one tick: the tree's RSS sum plus its VmSwap sum,
    /// and the cgroup's usage plus that swap (a lower bound of what the tree needed, each).
    #[serde(skip_serializing_if = "is_zero")]
    pub ram_swap_sampled_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub cgroup_swap_sampled_bytes: u64,
    /// The most page cache the cgroup held at one row that no process of the tree mapped (its
    /// `file` less `shmem` less the tree's file-backed RSS): pages of files read, not needed by
    /// the tree, charged or not by the chance of the cache's state. And the largest usage
    /// less that cache at one row: what the tree held that the cache does not explain.
    #[serde(skip_serializing_if = "is_zero")]
    pub cgroup_cache_sampled_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub cgroup_uncached_sampled_bytes: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The peak a span reports, decided once from its [`PeakFacts`]: the number, where it comes
/// from, what it is the peak of, and, for a tree whose exact peak is not known, the bounds of
/// the tree's peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Peak {
    pub bytes: u64,
    pub source: PeakSource,
    /// The kernel's name of the number (`VmHWM`, `ru_maxrss`, `memory.peak`,
    /// `memory.max_usage_in_bytes`, or `sampled`).
    pub counter: &'static str,
    pub scope: PeakScope,
    /// The number is the peak of what `scope` names (within the counters' batching for
    /// VmHWM and ru_maxrss): a kernel's counter over the whole span, no process missing.
    pub exact: bool,
    /// For a tree whose headline is not the tree's own peak: the tree's peak is at least
    /// `tree_low_bytes` (what was sampled, or the largest process's peak) and at most
    /// `tree_high_bytes` (the sum of the processes' high-water marks), when that is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_low_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_high_bytes: Option<u64>,
    /// Swap was used in the span: `bytes` is what the program needed, RAM and swap together,
    /// at least (`ram_bytes` plus the swap sampled with it), and at most `needed_high_bytes`
    /// (the RAM peak plus the most swap held). `ram_bytes` is the RAM peak the counter gave,
    /// `swap_bytes` the most swap held (`PeakFacts::swap_peak_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ram_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needed_high_bytes: Option<u64>,
    /// Why the number is not exact, where it is a kernel's or a cgroup's (`describe` says it).
    #[serde(skip)]
    pub why_not_exact: NotExact,
}

/// Why a kernel's or a cgroup's peak is not exact: what a budget's verdict and a report's cell
/// say after the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NotExact {
    /// Exact, or not said (a number built elsewhere than [`PeakFacts::decide`]).
    #[default]
    Unsaid,
    /// Processes left the tree with no exit record read (`largest-process-seen`).
    LeftUnseen,
    /// The process before a restart has no peak known in the span (`restart_peak_unknown`).
    BeforeRestart,
    /// The marks before the first reset at a marker have no peak known
    /// (`reset_peak_unknown`).
    BeforeReset,
    /// Rows the end record counts are not in the file (`rows_lost`).
    RowsLost,
    /// A boundary of the span was read late (`late_boundary`).
    LateBoundary,
    /// A process's own peak stands above the cgroup's (`cgroup_below_process`).
    ProcessAbove,
    /// Swap was used: the RAM peak is exact, what the program needed (RAM and swap) is
    /// bounded (`Peak::needed_high_bytes`).
    Swapped,
    /// A process reset its own mark, or another program did (`mark_reset_elsewhere`).
    ResetElsewhere,
}

impl NotExact {
    fn of(facts: &PeakFacts, scope: PeakScope) -> NotExact {
        if scope.is_partial() {
            if facts.restart_peak_unknown {
                NotExact::BeforeRestart
            } else if facts.reset_peak_unknown {
                NotExact::BeforeReset
            } else if facts.mark_reset_elsewhere {
                NotExact::ResetElsewhere
            } else {
                NotExact::LeftUnseen
            }
        } else if facts.rows_lost {
            NotExact::RowsLost
        } else if facts.late_boundary {
            NotExact::LateBoundary
        } else {
            NotExact::Unsaid
        }
    }
}

/// The kind of number spans are compared on: the best one every span has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeakBasis {
    /// The tree's exact peak from a cgroup that holds it alone.
    Cgroup,
    /// The exact peak of the largest process (the process itself, for one).
    Kernel,
    /// The largest sampled RSS.
    Sampled,
}

impl PeakBasis {
    /// `the cgroup's exact peak of the tree`, `the kernel's exact peak of the largest process`.
    pub fn describe(self) -> &'static str {
        match self {
            PeakBasis::Cgroup => "the tree's peak (its cgroup's)",
            PeakBasis::Kernel => {
                "the kernel's peak of the process (or of a tree's largest process: VmHWM, ru_maxrss)"
            }
            PeakBasis::Sampled => "the largest sampled RSS",
        }
    }
}

impl PeakFacts {
    /// The tree had more than one process, or processes left it during the span.
    pub fn is_tree(&self) -> bool {
        self.max_processes > 1 || self.departed > 0
    }

    /// What the kernel's per-process counter is the peak of over this span.
    pub fn kernel_scope(&self) -> PeakScope {
        if self.restart_peak_unknown || self.reset_peak_unknown || self.mark_reset_elsewhere {
            return PeakScope::LargestProcessSeen;
        }
        PeakScope::of_kernel_counter(
            self.max_processes,
            self.departed,
            self.kernel_peak_covers_departed,
        )
    }

    /// The cgroup's peak, when it is the tree's exact peak over the span and the headline's
    /// source: never for a span of one process whose own kernel peak is known, which is what
    /// that process needed, whatever page cache its cgroup was charged with (a parameter file
    /// read cold put its whole cache in the cgroup's peak, read warm none of it).
    fn tree_cgroup_peak(&self) -> Option<u64> {
        if self.one_process_peak_known() || self.cgroup_peak_holds_cache() {
            return None;
        }
        self.cgroup_peak_bytes.filter(|_| self.cgroup_holds_tree)
    }

    /// The cgroup's peak held page cache no process mapped (more than 4 MiB and a 50th of the
    /// peak at some row), and the kernel's peak of the largest process is known: the cgroup's
    /// peak is then not what the tree needed, and a file read cold or warm would move it (a
    /// prover's parameter file: +71%). The headline is the largest process's own peak with the
    /// tree's bounds; the cgroup's peak, page cache included, stays beside it.
    pub fn cgroup_peak_holds_cache(&self) -> bool {
        let Some(c) = self.cgroup_peak_bytes.filter(|_| self.cgroup_holds_tree) else {
            return false;
        };
        self.cgroup_cache_sampled_bytes > (4 << 20).max(c / 50)
            && self.kernel_peak_rss_bytes.is_some_and(|k| k > 0)
    }

    /// The span is one process (none left, no restart) and the kernel's exact peak of it is
    /// known: VmHWM or ru_maxrss, page cache excluded, read over the whole span.
    pub fn one_process_peak_known(&self) -> bool {
        !self.is_tree()
            && self.kernel_peak_rss_bytes.is_some_and(|k| k > 0)
            && self.kernel_scope() == PeakScope::Process
    }

    /// The one decision of a span's peak. In order:
    /// 0. one process whose kernel peak covers the span: that peak (VmHWM, ru_maxrss), what the
    ///    process needed, page cache excluded; its cgroup's charge is said beside it;
    /// 1. a cgroup that holds the tree alone and whose peak file covered the span: its peak is
    ///    the tree's exact peak (each page once, page cache included);
    /// 2. else the kernel's exact peak of the largest process (of the process, for one), and
    ///    for a tree the bounds of the tree's peak: at least the larger of it and the sampled
    ///    sum, at most the sum of the high-water marks (when every process that left has its
    ///    exit record); a sampled sum above it never replaces it, so the headline is of one
    ///    kind whatever the sampling caught;
    /// 3. else the sampled peak, a lower bound (never exact).
    ///
    /// A span with a late boundary, or rows lost (`rows_lost`), is never exact.
    pub fn decide(&self) -> Peak {
        self.with_swap(self.decide_ram())
    }

    /// The RAM peak of the span, decided as `decide` says.
    fn decide_ram(&self) -> Peak {
        let tree = self.is_tree();
        let high =
            (tree && (self.departed == 0 || self.exit_records_complete) && self.hwm_sum_bytes > 0)
                .then_some(self.hwm_sum_bytes);
        if let Some(c) = self.tree_cgroup_peak() {
            // A process's own peak above the cgroup's: the tree reached at least that.
            let above = self
                .kernel_peak_rss_bytes
                .filter(|&k| self.cgroup_below_process && k > c);
            return Peak {
                bytes: above.unwrap_or(c),
                source: PeakSource::Cgroup,
                counter: PeakSource::Cgroup.counter_of(self.cgroup_v1),
                scope: PeakScope::Tree,
                exact: !self.late_boundary && !self.rows_lost && !self.cgroup_below_process,
                tree_low_bytes: above,
                tree_high_bytes: None,
                why_not_exact: if self.cgroup_below_process {
                    NotExact::ProcessAbove
                } else {
                    NotExact::of(self, PeakScope::Tree)
                },
                ram_bytes: None,
                swap_bytes: None,
                needed_high_bytes: None,
            };
        }
        match (self.kernel_peak_rss_bytes, self.kernel_peak_source) {
            (Some(k), source) if k > 0 => {
                let source = source.unwrap_or(PeakSource::Vmhwm);
                let scope = self.kernel_scope();
                // The largest process's own peak: every page of it is the tree's. Not the sampled
                // sum, which counts a page shared between processes (a forked worker's) in each
                // and so may stand above the tree's peak (113 MiB "at least" beside a service
                // whose memory.peak over every run was 108.5 MiB).
                // With the cgroup's page cache left out: what it held beyond the cache is the
                // tree's too, and its peak (cache included) bounds the tree from above.
                let cached = self.cgroup_peak_holds_cache();
                let low = if cached {
                    k.max(self.cgroup_uncached_sampled_bytes)
                } else {
                    k
                };
                let high = match (high, self.cgroup_peak_bytes.filter(|_| cached)) {
                    (Some(h), Some(c)) => Some(h.min(c)),
                    (h, c) => h.or(c).filter(|_| tree),
                };
                Peak {
                    bytes: k,
                    source,
                    counter: source.counter(),
                    scope,
                    exact: !scope.is_partial() && !self.late_boundary && !self.rows_lost,
                    tree_low_bytes: tree.then_some(low),
                    tree_high_bytes: high.map(|h| h.max(low)),
                    why_not_exact: NotExact::of(self, scope),
                    ram_bytes: None,
                    swap_bytes: None,
                    needed_high_bytes: None,
                }
            }
            _ => Peak {
                bytes: self.sampled_peak_rss_bytes,
                source: PeakSource::Sampled,
                counter: PeakSource::Sampled.counter(),
                scope: if tree {
                    PeakScope::Tree
                } else {
                    PeakScope::Process
                },
                exact: false,
                tree_low_bytes: tree.then_some(self.sampled_peak_rss_bytes),
                tree_high_bytes: high.map(|h| h.max(self.sampled_peak_rss_bytes)),
                why_not_exact: NotExact::Unsaid,
                ram_bytes: None,
                swap_bytes: None,
                needed_high_bytes: None,
            },
        }
    }

    /// What the program needed where swap was used in the span (more than the counters'
    /// batching): RAM and swap together, at least the larger of the RAM peak `ram` and the RAM
    /// plus swap sampled at one tick (of the cgroup where the peak is the cgroup's), at most the
    /// RAM peak plus the most swap held. A RAM peak held down by a limit (memory.max with swap,
    /// memory.high) is what the limit allowed, not what the program needed; the pages swapped
    /// out were needed all the same. Never exact: the kernel keeps no mark of RAM and swap
    /// together for a process.
    fn with_swap(&self, ram: Peak) -> Peak {
        let bound = self.exact_within_bytes.unwrap_or(0);
        if self.swap_peak_bytes <= bound {
            return ram;
        }
        let sampled = match ram.source {
            PeakSource::Cgroup => self.cgroup_swap_sampled_bytes,
            _ => self.ram_swap_sampled_bytes,
        };
        let low = ram.bytes.max(sampled);
        // The counter the number rests on, and the swap beside it.
        let counter = match ram.counter {
            "VmHWM" => "VmHWM + VmSwap",
            "ru_maxrss" => "ru_maxrss + VmSwap",
            "memory.peak" => "memory.peak + swap",
            "memory.max_usage_in_bytes" => "memory.max_usage_in_bytes + swap",
            _ => "sampled RSS + VmSwap",
        };
        Peak {
            bytes: low,
            counter,
            exact: false,
            ram_bytes: Some(ram.bytes),
            swap_bytes: Some(self.swap_peak_bytes),
            needed_high_bytes: Some(ram.bytes.saturating_add(self.swap_peak_bytes).max(low)),
            why_not_exact: if ram.exact {
                NotExact::Swapped
            } else {
                ram.why_not_exact
            },
            ..ram
        }
    }

    /// The basis of this span's own headline.
    pub fn basis(&self) -> PeakBasis {
        if self.tree_cgroup_peak().is_some() {
            PeakBasis::Cgroup
        } else if self.kernel_peak_rss_bytes.is_some_and(|k| k > 0) {
            PeakBasis::Kernel
        } else {
            PeakBasis::Sampled
        }
    }

    /// The span's peak on `basis` (`None` when the span has no such number): the headline when
    /// `basis` is the span's own, else the number of that kind, labelled as it is.
    pub fn on_basis(&self, basis: PeakBasis) -> Option<Peak> {
        if basis == self.basis() {
            return Some(self.decide());
        }
        let without_cgroup = PeakFacts {
            cgroup_holds_tree: false,
            ..*self
        };
        let peak = match basis {
            PeakBasis::Cgroup => None,
            PeakBasis::Kernel => self
                .kernel_peak_rss_bytes
                .filter(|&k| k > 0)
                .map(|_| without_cgroup.decide()),
            PeakBasis::Sampled => Some(
                PeakFacts {
                    kernel_peak_rss_bytes: None,
                    kernel_peak_source: None,
                    ..without_cgroup
                }
                .decide(),
            ),
        };
        // Where the cgroup gives the tree's exact peak, bounds from the processes' RSS (which
        // count a shared page in each process) would contradict it: left out.
        peak.map(|p| match self.tree_cgroup_peak() {
            Some(_) => Peak {
                tree_low_bytes: None,
                tree_high_bytes: None,
                ..p
            },
            None => p,
        })
    }
}

/// The best basis every one of `spans` has: their cgroup's tree peak when all have one, else the
/// kernel's peak of the largest process when all have one, else the sampled peak. Comparing and
/// summing runs on one basis keeps a number of one kind from being set against another.
pub fn common_basis<'a>(spans: impl IntoIterator<Item = &'a PeakFacts>) -> PeakBasis {
    spans
        .into_iter()
        .map(|f| f.basis())
        .max()
        .unwrap_or(PeakBasis::Sampled)
}

impl Peak {
    /// `≥ ` when the number is a lower bound of what its scope names (processes left unseen).
    pub fn at_least(&self) -> &'static str {
        if self.scope.is_partial()
            || self.ram_bytes.is_some()
            || self.why_not_exact == NotExact::ProcessAbove
        {
            "≥ "
        } else {
            ""
        }
    }

    /// `1.21 GiB` with `≥ ` for a lower bound and ` *` when exact: a table's cell.
    pub fn cell(&self) -> String {
        format!(
            "{}{}{}",
            self.at_least(),
            crate::units::fmt_bytes(self.bytes),
            if self.exact { " *" } else { "" }
        )
    }

    /// `kernel VmHWM of the largest process, exact within 512.0 KiB` — what the number is, in
    /// words (`bound_bytes`: the batching bound the exactness is stated within).
    pub fn describe(&self, bound_bytes: Option<u64>) -> String {
        if let (Some(ram), Some(swap), Some(high)) =
            (self.ram_bytes, self.swap_bytes, self.needed_high_bytes)
        {
            let b = crate::units::fmt_bytes;
            // The RAM peak as it is, exact where it was before swap was taken in.
            let ram_peak = Peak {
                bytes: ram,
                exact: self.why_not_exact == NotExact::Swapped,
                ram_bytes: None,
                swap_bytes: None,
                needed_high_bytes: None,
                why_not_exact: match self.why_not_exact {
                    NotExact::Swapped => NotExact::Unsaid,
                    other => other,
                },
                ..*self
            };
            return format!(
                    "needed: RAM and swap together, between {} and {}: the RAM peak {} ({}) and up to {} swapped (VmSwap{}); never exact, the kernel keeps no mark of the two together",
                    b(self.bytes),
                    b(high),
                    b(ram),
                    ram_peak.describe(bound_bytes),
                    b(swap),
                    if self.source == PeakSource::Cgroup {
                        ", memory.swap.peak"
                    } else {
                        ""
                    }
                );
        }
        let what = match self.source {
            PeakSource::Cgroup => format!("cgroup {} {}", self.counter, self.scope),
            PeakSource::Sampled => format!("sampled RSS {}", self.scope),
            PeakSource::NvmlAccounting => {
                format!("NVML accounting {} {}", self.counter, self.scope)
            }
            _ => format!("{} {}", self.source, self.scope),
        };
        let how = match (self.exact, self.source) {
            (true, PeakSource::Cgroup) => "exact, each page once, page cache included".to_string(),
            (true, PeakSource::NvmlAccounting) => "exact: the driver's own mark".to_string(),
            (false, PeakSource::NvmlAccounting) => {
                "a lower bound of the tree's: several processes held GPU memory".into()
            }
            (true, _) => exact_within(bound_bytes),
            (false, PeakSource::Sampled) => {
                "a lower bound: a spike between two samples is missed".into()
            }
            (false, _) => match self.why_not_exact {
                NotExact::BeforeRestart => {
                    "a lower bound: the process before a restart has no peak known".into()
                }
                NotExact::BeforeReset => {
                    "a lower bound: the marks before the first marker's reset have no peak known"
                        .into()
                }
                NotExact::RowsLost => "a lower bound: rows were lost from the file".into(),
                NotExact::ResetElsewhere => "a lower bound: a process's mark fell (reset by itself or another program, clear_refs, or its pages reclaimed before the kernel updated it), and what it reached before is not known".into(),
                NotExact::LateBoundary => "not exact: a boundary was taken late".into(),
                NotExact::Swapped => "not exact: swap was used".into(),
                NotExact::ProcessAbove => "at least: a process's own peak (the number) stands above the cgroup's, some of the tree's memory was charged to another cgroup".into(),
                NotExact::LeftUnseen | NotExact::Unsaid if self.scope.is_partial() => {
                    "a lower bound: processes left with no exit record read".into()
                }
                NotExact::LeftUnseen | NotExact::Unsaid => "not exact".into(),
            },
        };
        format!("{what}, {how}")
    }

    /// `tree between 1.21 GiB and 1.41 GiB (sampled sum ..., sum of VmHWM)`: the tree's bounds,
    /// when this headline is not the tree's own peak.
    pub fn tree_bounds(&self) -> Option<String> {
        let low = self.tree_low_bytes?;
        let b = crate::units::fmt_bytes;
        Some(match self.tree_high_bytes {
            Some(h) => format!("between {} and {}", b(low), b(h)),
            None => format!("at least {}", b(low)),
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

/// The one rule for whether a cgroup is charged with all of a process's memory: how many bytes
/// of the process's own count (`process_bytes`: its RssAnon against the cgroup's anonymous
/// charge when the recording begins, its VmHWM against the cgroup's peak when a span closes)
/// stand above what the cgroup holds of it (`cgroup_bytes`, with what else explains a
/// difference: page cache or shared memory charged elsewhere), beyond what the counters allow
/// for: both kept in per-CPU batches (`bound_bytes` each, `batching_bound_bytes`, up to twice
/// over between reads) and a 32nd of the process's count (what it allocates or frees between two
/// reads). `None` where the cgroup holds it all, as far as the counters can tell.
pub fn charged_elsewhere(process_bytes: u64, cgroup_bytes: u64, bound_bytes: u64) -> Option<u64> {
    let allowed = cgroup_bytes
        .saturating_add(4 * bound_bytes)
        .saturating_add(process_bytes / 32);
    (process_bytes > allowed).then(|| process_bytes - cgroup_bytes)
}

/// "exact within 512 KiB": how exact a kernel peak is, in words.
pub fn exact_within(bound_bytes: Option<u64>) -> String {
    match bound_bytes {
        Some(b) => format!("exact within {}", crate::units::fmt_bytes(b)),
        None => "exact within the kernel's per-CPU batching".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;

    #[test]
    fn swap_makes_the_headline_what_was_needed_ram_and_swap_together_never_exact() {
        const MIB: u64 = 1 << 20;
        // One process held at 150 MiB by memory.max, 156 MiB of it swapped.
        let capped = PeakFacts {
            sampled_peak_rss_bytes: 149 * MIB,
            kernel_peak_rss_bytes: Some(150 * MIB),
            kernel_peak_source: Some(PeakSource::Vmhwm),
            max_processes: 1,
            exact_within_bytes: Some(MIB / 2),
            swap_peak_bytes: 156 * MIB,
            ram_swap_sampled_bytes: 303 * MIB,
            ..PeakFacts::default()
        };
        let p = capped.decide();
        assert_eq!(
            (p.bytes, p.exact, p.ram_bytes, p.needed_high_bytes),
            (303 * MIB, false, Some(150 * MIB), Some(306 * MIB))
        );
        assert_eq!(p.cell(), "≥ 303.0 MiB");
        assert_eq!(p.counter, "VmHWM + VmSwap");
        let words = p.describe(Some(MIB / 2));
        assert!(
            words.contains("between 303.0 MiB and 306.0 MiB")
                && words.contains(
                    "the RAM peak 150.0 MiB (kernel VmHWM of the process, exact within 512.0 KiB)"
                ),
            "{words}"
        );
        // Swap within the counters' batching changes nothing.
        let none = PeakFacts {
            swap_peak_bytes: MIB / 4,
            ..capped
        };
        assert_eq!(
            (none.decide().bytes, none.decide().exact),
            (150 * MIB, true)
        );
        // A tree in its cgroup: the cgroup's usage plus the swap sampled with it.
        let tree = PeakFacts {
            max_processes: 3,
            cgroup_peak_bytes: Some(100 * MIB),
            cgroup_holds_tree: true,
            cgroup_swap_sampled_bytes: 180 * MIB,
            ..capped
        };
        let p = tree.decide();
        assert_eq!(
            (p.source, p.bytes, p.ram_bytes),
            (PeakSource::Cgroup, 180 * MIB, Some(100 * MIB))
        );
    }

    #[test]
    fn a_trees_cgroup_peak_holding_page_cache_is_not_its_headline_and_bounds_it_from_above() {
        const MIB: u64 = 1 << 20;
        // Two processes, 68 and 20 MiB; their cgroup also holds 251 MiB of a file read cold.
        let cold = PeakFacts {
            sampled_peak_rss_bytes: 88 * MIB,
            kernel_peak_rss_bytes: Some(68 * MIB),
            kernel_peak_source: Some(PeakSource::Vmhwm),
            max_processes: 2,
            hwm_sum_bytes: 90 * MIB,
            cgroup_peak_bytes: Some(342 * MIB),
            cgroup_holds_tree: true,
            cgroup_cache_sampled_bytes: 251 * MIB,
            cgroup_uncached_sampled_bytes: 91 * MIB,
            ..PeakFacts::default()
        };
        assert!(cold.cgroup_peak_holds_cache());
        let p = cold.decide();
        assert_eq!(
            (p.source, p.bytes, p.tree_low_bytes, p.tree_high_bytes),
            (PeakSource::Vmhwm, 68 * MIB, Some(91 * MIB), Some(91 * MIB))
        );
        assert_eq!(cold.basis(), PeakBasis::Kernel);
        // Warm: no cache in the cgroup, whose peak is the tree's, exact.
        let warm = PeakFacts {
            cgroup_peak_bytes: Some(86 * MIB),
            cgroup_cache_sampled_bytes: 0,
            cgroup_uncached_sampled_bytes: 86 * MIB,
            ..cold
        };
        assert_eq!(warm.decide().source, PeakSource::Cgroup);
        // The two compared on one basis: each one's largest process.
        assert_eq!(common_basis([&cold, &warm]), PeakBasis::Kernel);
        // A few MiB of cache (a binary's, a log) leave the cgroup's peak the headline.
        let little = PeakFacts {
            cgroup_cache_sampled_bytes: 3 * MIB,
            ..warm
        };
        assert_eq!(little.decide().source, PeakSource::Cgroup);
    }

    #[test]
    fn a_tree_held_on_a_lesser_basis_gives_no_bounds_its_cgroup_contradicts() {
        let f = PeakFacts {
            sampled_peak_rss_bytes: 161 * KIB,
            kernel_peak_rss_bytes: Some(70 * KIB),
            kernel_peak_source: Some(PeakSource::Vmhwm),
            cgroup_peak_bytes: Some(151 * KIB),
            cgroup_holds_tree: true,
            max_processes: 3,
            hwm_sum_bytes: 150 * KIB,
            exit_records_complete: true,
            kernel_peak_covers_departed: true,
            ..PeakFacts::default()
        };
        assert_eq!(f.decide().bytes, 151 * KIB);
        for basis in [PeakBasis::Kernel, PeakBasis::Sampled] {
            let p = f.on_basis(basis).unwrap();
            assert_eq!(
                (p.tree_low_bytes, p.tree_high_bytes),
                (None, None),
                "{basis:?}"
            );
        }
        // Without the cgroup the bounds stand.
        let plain = PeakFacts {
            cgroup_peak_bytes: None,
            ..f
        };
        let p = plain.on_basis(PeakBasis::Sampled).unwrap();
        assert_eq!(p.tree_low_bytes, Some(161 * KIB));
    }

    #[test]
    fn one_process_is_held_on_its_own_peak_whatever_page_cache_its_cgroup_was_charged() {
        // A prover reading its parameter file, in memmon's own cgroup: cold, the file's cache
        // is charged to the cgroup (86 MiB); warm, none of it (50 MiB). What the process needed
        // is its VmHWM, 52 MiB either way.
        let read = |cgroup_peak: u64, hwm: u64| PeakFacts {
            sampled_peak_rss_bytes: 50 << 20,
            kernel_peak_rss_bytes: Some(hwm),
            kernel_peak_source: Some(PeakSource::Vmhwm),
            max_processes: 1,
            cgroup_peak_bytes: Some(cgroup_peak),
            cgroup_holds_tree: true,
            ..PeakFacts::default()
        };
        for f in [read(86 << 20, 52 << 20), read(50 << 20, 53 << 20)] {
            let p = f.decide();
            assert_eq!(
                (p.bytes, p.source, p.scope, p.exact),
                (
                    f.kernel_peak_rss_bytes.unwrap(),
                    PeakSource::Vmhwm,
                    PeakScope::Process,
                    true
                )
            );
            assert_eq!(f.basis(), PeakBasis::Kernel);
        }
        // A tree in the same cgroup keeps the cgroup's peak (each page once).
        let tree = PeakFacts {
            max_processes: 2,
            ..read(86 << 20, 52 << 20)
        };
        assert_eq!(tree.decide().source, PeakSource::Cgroup);
        // One process whose peak is not known over the whole span (a restart) is not held on it.
        let restarted = PeakFacts {
            restart_peak_unknown: true,
            ..read(86 << 20, 52 << 20)
        };
        assert_eq!(restarted.decide().source, PeakSource::Cgroup);
    }

    #[test]
    fn a_peak_that_is_not_exact_says_why() {
        let exact = PeakFacts {
            sampled_peak_rss_bytes: 90 * KIB,
            kernel_peak_rss_bytes: Some(100 * KIB),
            kernel_peak_source: Some(PeakSource::Vmhwm),
            max_processes: 1,
            ..PeakFacts::default()
        };
        let why = |f: PeakFacts| {
            let p = f.decide();
            assert!(!p.exact);
            p.describe(None)
        };
        let cases = [
            (
                PeakFacts {
                    rows_lost: true,
                    ..exact
                },
                "a lower bound: rows were lost from the file",
            ),
            (
                PeakFacts {
                    late_boundary: true,
                    ..exact
                },
                "not exact: a boundary was taken late",
            ),
            (
                PeakFacts {
                    restart_peak_unknown: true,
                    ..exact
                },
                "a lower bound: the process before a restart has no peak known",
            ),
            (
                PeakFacts {
                    reset_peak_unknown: true,
                    rows_lost: true,
                    ..exact
                },
                "a lower bound: the marks before the first marker's reset have no peak known",
            ),
            (
                PeakFacts {
                    max_processes: 2,
                    departed: 1,
                    ..exact
                },
                "a lower bound: processes left with no exit record read",
            ),
        ];
        for (facts, said) in cases {
            let text = why(facts);
            assert!(text.ends_with(said), "{text}");
        }
    }

    #[test]
    fn the_bound_is_64_pages_per_cpu_on_small_machines_and_grows_with_many() {
        assert_eq!(batching_bound_bytes(2, 4096), 2 * 64 * 4 * KIB);
        assert_eq!(batching_bound_bytes(16, 4096), 16 * 64 * 4 * KIB);
        assert_eq!(batching_bound_bytes(64, 4096), 64 * 128 * 4 * KIB);
        assert_eq!(batching_bound_bytes(0, 4096), 64 * 4 * KIB);
    }

    #[test]
    fn a_cgroup_is_charged_elsewhere_past_the_batching_and_a_32nd_of_the_process() {
        const MIB: u64 = 1 << 20;
        // 2 CPUs: each counter may be 512 KiB off, 2 MiB for the four; a 310 MiB process is
        // allowed 9.69 MiB more, 311.69 MiB against 300 MiB charged; a 330 MiB one 312.31 MiB.
        let bound = batching_bound_bytes(2, 4096);
        assert_eq!(charged_elsewhere(310 * MIB, 300 * MIB, bound), None);
        assert_eq!(
            charged_elsewhere(330 * MIB, 300 * MIB, bound),
            Some(30 * MIB)
        );
        // A process its cgroup holds more of than it counts (shared pages, page cache).
        assert_eq!(charged_elsewhere(100 * MIB, 300 * MIB, bound), None);
    }

    /// A daemon of 1.21 GiB with a 200 MiB helper per run, as the issue measured it.
    fn daemon_with_helper(sampled_saw_helper: bool) -> PeakFacts {
        let gib = 1u64 << 30;
        PeakFacts {
            sampled_peak_rss_bytes: if sampled_saw_helper {
                1410 << 20
            } else {
                1210 << 20
            },
            kernel_peak_rss_bytes: Some(1210 << 20),
            kernel_peak_source: Some(PeakSource::Vmhwm),
            max_processes: if sampled_saw_helper { 2 } else { 1 },
            departed: 1,
            exit_records_complete: true,
            kernel_peak_covers_departed: true,
            hwm_sum_bytes: gib + (410 << 20),
            exact_within_bytes: Some(512 * KIB),
            ..PeakFacts::default()
        }
    }

    #[test]
    fn a_trees_headline_is_its_largest_process_whatever_the_samples_caught() {
        let seen = daemon_with_helper(true).decide();
        let unseen = daemon_with_helper(false).decide();
        for p in [seen, unseen] {
            assert_eq!(
                (p.bytes, p.source, p.scope),
                (1210 << 20, PeakSource::Vmhwm, PeakScope::LargestProcess)
            );
            assert!(p.exact);
            assert_eq!(p.tree_high_bytes, Some((1u64 << 30) + (410 << 20)));
        }
        // At least the largest process's peak, whatever the samples' sum (which counts a page
        // two processes share twice, so it bounds nothing from below).
        assert_eq!(seen.tree_low_bytes, Some(1210 << 20));
        assert_eq!(unseen.tree_low_bytes, Some(1210 << 20));
    }

    #[test]
    fn a_cgroup_that_holds_the_tree_is_the_headline_and_one_that_does_not_is_not() {
        let mut f = daemon_with_helper(true);
        f.cgroup_peak_bytes = Some(1420 << 20);
        f.cgroup_v1 = true;
        assert_eq!(
            f.decide().source,
            PeakSource::Vmhwm,
            "not known to hold the tree alone"
        );
        f.cgroup_holds_tree = true;
        let p = f.decide();
        assert_eq!(
            (p.bytes, p.source, p.scope, p.exact),
            (1420 << 20, PeakSource::Cgroup, PeakScope::Tree, true)
        );
        assert_eq!(p.counter, "memory.max_usage_in_bytes");
        assert_eq!(p.tree_low_bytes, None);
        assert_eq!(f.basis(), PeakBasis::Cgroup);
        assert_eq!(f.on_basis(PeakBasis::Kernel).unwrap().bytes, 1210 << 20);
    }

    #[test]
    fn without_the_kernels_peak_the_sampled_one_is_a_lower_bound_never_exact() {
        let f = PeakFacts {
            sampled_peak_rss_bytes: 7,
            max_processes: 1,
            ..PeakFacts::default()
        };
        let p = f.decide();
        assert_eq!(
            (p.bytes, p.source, p.scope, p.exact),
            (7, PeakSource::Sampled, PeakScope::Process, false)
        );
        assert_eq!(p.counter, "sampled");
    }

    #[test]
    fn processes_gone_without_exit_records_make_a_lower_bound_and_no_upper_bound() {
        let f = PeakFacts {
            exit_records_complete: false,
            kernel_peak_covers_departed: false,
            ..daemon_with_helper(false)
        };
        let p = f.decide();
        assert_eq!(p.scope, PeakScope::LargestProcessSeen);
        assert!(!p.exact);
        assert_eq!(p.tree_high_bytes, None);
        assert_eq!(p.at_least(), "≥ ");
    }

    #[test]
    fn a_launched_commands_ru_maxrss_without_exit_records_is_exact_of_the_largest_and_bounds_no_tree(
    ) {
        // wait4's ru_maxrss holds the helper that left, but it is a maximum: the sum of the
        // high-water marks the rows saw misses the helper, so it is no upper bound.
        let f = PeakFacts {
            exit_records_complete: false,
            kernel_peak_covers_departed: true,
            ..daemon_with_helper(false)
        };
        let p = f.decide();
        assert_eq!(p.scope, PeakScope::LargestProcess);
        assert!(p.exact);
        assert_eq!(p.tree_low_bytes, Some(1210 << 20));
        assert_eq!(p.tree_high_bytes, None);
    }

    #[test]
    fn a_late_boundary_is_never_exact() {
        let f = PeakFacts {
            late_boundary: true,
            ..daemon_with_helper(false)
        };
        assert!(!f.decide().exact);
    }

    #[test]
    fn the_common_basis_is_the_best_all_spans_have() {
        let mut cg = daemon_with_helper(false);
        cg.cgroup_peak_bytes = Some(1);
        cg.cgroup_holds_tree = true;
        let k = daemon_with_helper(true);
        let sampled = PeakFacts::default();
        assert_eq!(common_basis([&cg, &cg]), PeakBasis::Cgroup);
        assert_eq!(common_basis([&cg, &k]), PeakBasis::Kernel);
        assert_eq!(common_basis([&cg, &k, &sampled]), PeakBasis::Sampled);
        assert_eq!(k.on_basis(PeakBasis::Sampled).unwrap().bytes, 1410 << 20);
        assert_eq!(cg.on_basis(PeakBasis::Cgroup).unwrap().bytes, 1);
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
