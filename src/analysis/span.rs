//! One span of a recording — a session, a bench run, a phase — accumulated row by row in
//! constant memory ([`SpanAcc`]), and what its rows say of its peak ([`PeakFacts`], decided
//! once by `model::peak`). The summary, the phases and runs, and bench's runner all close their
//! spans here, so a run reads the same in bench's table as in `summary` of bench's recording.
//!
//! Whether the kernel's high-water marks cover a span depends on when they were last reset
//! ([`Window`]): a mark can only be trusted for a span when it began with it, was reset at its
//! opening row, or rose during it.

use super::gpu::{GpuHwmAcc, GpuKernelPeak};
use crate::format::meta::EndInfo;
use crate::model::peak::{Peak, PeakFacts, PeakSource};
use crate::model::sample::{Event, Sample};
use serde::Serialize;

/// A PSS read is taken as the span's peak when it was read at a tick whose RSS was at least this
/// share of the span's largest sampled RSS.
pub const PSS_COVERS_PEAK: f64 = 0.95;

/// When the kernel's marks (VmHWM, the cgroup's peak file) last began before a span, as the
/// recording tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// They began, or were reset, before the opening row was read (a launched command; a
    /// cgroup memmon made): every row of the span counts.
    FromOpen,
    /// They were reset right after the opening row was read (markers with `--phase-peaks`,
    /// bench runs, `--reset-peaks` at a session's first row): the opening row's marks close the
    /// span before; the rows after it hold this span's.
    AfterOpen,
    /// No reset is known: a mark that rose above its value at the opening row was set during
    /// the span; one that did not may be older, and tells nothing of it.
    IfRises,
    /// Bench recordings made before memmon wrote when it reset (schema 1): reset right before
    /// the opening row when, there, the largest VmHWM is the largest RSS within the counters'
    /// batching (as right after a reset), else as `IfRises`.
    ResetIfSettled,
}

/// What the recording says of a span that its rows do not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpanContext {
    pub kernel: Window,
    pub cgroup: Window,
    /// Every exit record was read (`EndInfo::exit_records_complete`).
    pub exit_records: bool,
    /// wait4's ru_maxrss of a launched command covers the span: the largest process's peak
    /// holds every process that ended, exit records or not (`PeakFacts::kernel_peak_covers_departed`).
    pub rusage_covers_departed: bool,
    /// The cgroup recorded holds the tree alone (`CgroupEnd::holds_tree`).
    pub cgroup_holds_tree: bool,
    pub cgroup_v1: bool,
    /// How far one process's counters may be off (`model::peak::batching_bound_bytes`), and
    /// whether the recording says it (else this machine's is taken for the heuristics).
    pub bound_bytes: u64,
    pub bound_known: bool,
    /// A peak the kernel gave after the span's last row (the exit records read when the target
    /// ended, or wait4's ru_maxrss of a launched command), which belongs to it.
    pub kernel_after_last_row: Option<(u64, PeakSource)>,
    /// That peak is of the last tree followed (its exit records read after its last row, or
    /// wait4's ru_maxrss), not one of every tree's exit records (`EndInfo::exit_peak_bytes`):
    /// after a restart, it is of the process that took over.
    pub kernel_after_last_row_of_last_tree: bool,
    /// wait4's ru_maxrss of a launched command's own process (`EndTail::command`).
    pub command_after_last_row: Option<u64>,
    /// The exit records' peak after the span's last row where no process left the tree in the
    /// whole recording (`EndTail::exit_of_root`): the root's own mark at its exit.
    pub root_exit_after_last_row: Option<u64>,
    /// The cgroup's peak file read after the span's last row (at the recording's end).
    pub cgroup_after_last_row: Option<u64>,
    /// The cgroup's OOM kill counter read then (`cgroup_oom_kill_events`), and how much it rose
    /// over the whole recording (for a span no row holds): a kill after the last row counts.
    pub cgroup_oom_after_last_row: Option<u64>,
    pub cgroup_oom_during: Option<u64>,
    /// Whether the GPU's accounting marks (`gpu_hwm_bytes`) began with the span (`FromOpen`: a
    /// launched command's first span) or may predate it (`IfRises`: NVML has no reset).
    pub gpu: Window,
    /// The accounting mark read after the span's last row (the recording's end record).
    pub gpu_after_last_row: Option<u64>,
    /// The resets inside the span (`SpanAcc::marks_reset_after`) held, for the kernel's marks
    /// and for the cgroup's peak file: under `IfRises`, the rows after them count (a session
    /// recorded with `--phase-peaks`, reset at each marker).
    pub kernel_inner_resets: bool,
    pub cgroup_inner_resets: bool,
}

impl SpanContext {
    /// This context with what an end record gave after the span's last row (`tail`).
    pub fn with_tail(self, tail: &EndTail) -> SpanContext {
        SpanContext {
            kernel_after_last_row: tail.kernel,
            kernel_after_last_row_of_last_tree: tail.kernel_last_tree,
            command_after_last_row: tail.command,
            root_exit_after_last_row: tail.exit_of_root,
            rusage_covers_departed: tail.rusage_covers_departed,
            cgroup_after_last_row: tail.cgroup,
            cgroup_oom_after_last_row: tail.cgroup_oom,
            cgroup_oom_during: tail.cgroup_oom_during,
            gpu_after_last_row: tail.gpu,
            exit_records: tail.exit_records,
            ..self
        }
    }
}

/// What an end record says of the span that ends at its last row: the peaks the kernel gave
/// after that row — wait4's ru_maxrss of a launched command, or the exit records read when the
/// target ended (`exit_peak_after_last_sample_bytes`, else `exit_peak_bytes`), whichever is
/// larger (ties go to ru_maxrss); the cgroup's peak file read at the end; the GPU's accounting
/// mark read then — and whether every exit record was read. A recording's last span takes it
/// as one more row; so does each run of a command bench, from its own end record (`runs`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EndTail {
    pub kernel: Option<(u64, PeakSource)>,
    /// `kernel` is of the last tree followed: its exit records read after its last row, or
    /// wait4's ru_maxrss (not `exit_peak_bytes`, which holds every tree's).
    pub kernel_last_tree: bool,
    /// wait4's ru_maxrss of the launched command's own process and the children it waited for,
    /// without the orphans memmon reaped (`EndInfo::command_maxrss_bytes`), where it says
    /// something of the tree (`launched_rusage_peak`): a peak this span's tree reached.
    pub command: Option<u64>,
    /// The exit records' peak after the last row when no process but the root ever left the
    /// tree (`processes_departed` 0) and every exit record was read: the root's own VmHWM at
    /// its exit.
    pub exit_of_root: Option<u64>,
    /// wait4's ru_maxrss is known: it holds every process of the launched tree that ended.
    pub rusage_covers_departed: bool,
    pub cgroup: Option<u64>,
    /// The cgroup's OOM kill counter at the end (`CgroupEnd::final_oom_kill_events`), and its
    /// rise over the recording (`events_during`).
    pub cgroup_oom: Option<u64>,
    pub cgroup_oom_during: Option<u64>,
    pub gpu: Option<u64>,
    pub exit_records: bool,
}

impl EndTail {
    /// The tail of `end`; `bound_bytes`: how far the recording machine's counters may be off.
    pub fn of(end: &EndInfo, bound_bytes: u64) -> EndTail {
        let rusage = launched_rusage_peak(end, bound_bytes);
        let exit = end
            .exit_peak_after_last_sample_bytes
            .or(end.exit_peak_bytes);
        let last_tree = end.exit_peak_after_last_sample_bytes.is_some();
        let (kernel, kernel_last_tree) = match (rusage, exit) {
            (Some(r), e) if r >= e.unwrap_or(0) => (Some((r, PeakSource::RuMaxrss)), true),
            (_, Some(e)) => (Some((e, PeakSource::Vmhwm)), last_tree),
            _ => (None, false),
        };
        EndTail {
            kernel,
            kernel_last_tree,
            command: end
                .command_maxrss_bytes
                .filter(|&r| above_launcher(end, r, bound_bytes)),
            exit_of_root: end
                .exit_peak_after_last_sample_bytes
                .filter(|_| end.processes_departed == 0 && end.exit_records_complete()),
            rusage_covers_departed: rusage.is_some(),
            // Schema 1 recordings did not keep the last reading apart: their peak was taken
            // over the recording when it rose in it.
            cgroup: end.cgroup.as_ref().and_then(|c| {
                c.final_peak_bytes
                    .or(c.peak_bytes.filter(|_| c.peak_during_recording))
            }),
            cgroup_oom: end.cgroup.as_ref().and_then(|c| c.final_oom_kill_events),
            cgroup_oom_during: end.cgroup.as_ref().map(|c| c.events_during.oom_kill),
            gpu: end.gpu.as_ref().and_then(|g| g.hwm_after_last_row_bytes),
            exit_records: end.exit_records_complete(),
        }
    }

    /// The tail of a span that holds several that ended in it (a command bench's recording,
    /// whose runs each ended with their own): the largest of each peak, ties going to
    /// ru_maxrss; ru_maxrss covers the departed when it does in every one.
    pub fn of_all(tails: &[EndTail]) -> Option<EndTail> {
        let first = *tails.first()?;
        Some(tails[1..].iter().fold(first, |a, b| EndTail {
            kernel: match (a.kernel, b.kernel) {
                (Some(x), Some(y)) if y.0 > x.0 || (y.0 == x.0 && y.1 == PeakSource::RuMaxrss) => {
                    Some(y)
                }
                (x, y) => x.or(y),
            },
            kernel_last_tree: a.kernel_last_tree && b.kernel_last_tree,
            command: a.command.max(b.command),
            // Several ends: each root's exit is another process's.
            exit_of_root: None,
            rusage_covers_departed: a.rusage_covers_departed && b.rusage_covers_departed,
            cgroup: a.cgroup.max(b.cgroup),
            // Each run's cgroup counts its own kills: the last run's are the span's tail.
            cgroup_oom: b.cgroup_oom,
            cgroup_oom_during: b.cgroup_oom_during,
            gpu: a.gpu.max(b.gpu),
            exit_records: a.exit_records && b.exit_records,
        }))
    }
}

/// A launched command's `ru_maxrss` when it says something of the command's tree: above
/// memmon's own RSS when it forked the command (exec keeps the fork's mark in it), by more than
/// the counters' batching (`bound_bytes`). Below that it may be memmon's, not the tree's.
pub fn launched_rusage_peak(end: &EndInfo, bound_bytes: u64) -> Option<u64> {
    end.rusage_maxrss_bytes
        .filter(|&r| above_launcher(end, r, bound_bytes))
}

/// An ru_maxrss `r` of a launched command is above memmon's RSS at the fork by more than
/// `bound_bytes`: it is the command's, not the forked copy's.
fn above_launcher(end: &EndInfo, r: u64, bound_bytes: u64) -> bool {
    end.launcher_rss_bytes
        .is_none_or(|l| r > l.saturating_add(bound_bytes))
}

/// A launched command's duration: its wall time from its start to its exit when its end
/// record has it (a command shorter than an interval has its duration all the same), else its
/// rows' span.
pub fn launched_duration_s(rows_s: f64, command_wall_s: Option<f64>) -> f64 {
    command_wall_s.map_or(rows_s, |w| w.max(rows_s))
}

impl Default for SpanContext {
    fn default() -> Self {
        SpanContext {
            kernel: Window::IfRises,
            cgroup: Window::IfRises,
            exit_records: false,
            rusage_covers_departed: false,
            cgroup_holds_tree: false,
            cgroup_v1: false,
            bound_bytes: 0,
            bound_known: false,
            kernel_after_last_row: None,
            kernel_after_last_row_of_last_tree: false,
            command_after_last_row: None,
            root_exit_after_last_row: None,
            cgroup_after_last_row: None,
            cgroup_oom_after_last_row: None,
            cgroup_oom_during: None,
            gpu: Window::IfRises,
            gpu_after_last_row: None,
            kernel_inner_resets: false,
            cgroup_inner_resets: false,
        }
    }
}

/// The larger of two readings, either of which may be missing.
fn larger(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// How much of a span the kernel's peak (`SpanAcc::kernel_peak`) covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Covered {
    Whole,
    /// Not the process before a restart, whose marks never rose in the span.
    NotBeforeRestart,
    /// Not the rows before the first reset at a marker (`--phase-peaks`), whose marks never
    /// rose in the span.
    NotBeforeReset,
}

/// The marks reset inside a span, after one of its rows (a marker's with `--phase-peaks`):
/// what the first such row read, which covers all before it, and the largest the rows after it
/// read, which cover all after it.
#[derive(Debug, Clone, Copy, Default)]
struct InnerReset {
    hwm_at: u64,
    cgroup_at: Option<u64>,
    hwm_after: Option<u64>,
    cgroup_after: Option<u64>,
}

impl InnerReset {
    /// The span's exact peak from marks that began before it (its opening row read `open`):
    /// the part before the first reset counts where its mark rose above `open`; the part after
    /// it always does (`after`, with what came after the last row). Where the part before did
    /// not rise, its peak was at most `open`: the span's is the part after's, if that reached
    /// `open`; else it is not known.
    fn peak(open: Option<u64>, at: Option<u64>, after: Option<u64>) -> Option<u64> {
        let open = open?;
        match at {
            Some(at) if at > open => Some(at.max(after.unwrap_or(0))),
            _ => after.filter(|&a| a >= open),
        }
    }
}

/// The PSS reads of a span, fed row by row.
#[derive(Debug, Clone, Copy, Default)]
pub struct PssTrack {
    reads: u64,
    first_s: f64,
    last_s: f64,
    largest: u64,
    largest_s: f64,
    /// The largest RSS of a row where PSS was read.
    max_rss_at_read: u64,
}

impl PssTrack {
    pub fn push(&mut self, s: &Sample) {
        let Some(p) = s.pss_bytes else {
            return;
        };
        if self.reads == 0 {
            self.first_s = s.elapsed_s;
        }
        if self.reads == 0 || p > self.largest {
            self.largest = p;
            self.largest_s = s.elapsed_s;
        }
        self.max_rss_at_read = self.max_rss_at_read.max(s.rss_bytes);
        self.reads += 1;
        self.last_s = s.elapsed_s;
    }

    /// What was read in a span whose largest sampled RSS is `sampled_peak`; `None` when nothing
    /// was.
    pub fn reads(&self, sampled_peak: u64) -> Option<PssReads> {
        if self.reads == 0 {
            return None;
        }
        Some(PssReads {
            largest_bytes: self.largest,
            largest_elapsed_s: self.largest_s,
            reads: self.reads,
            first_elapsed_s: self.first_s,
            last_elapsed_s: self.last_s,
            is_peak: self.max_rss_at_read as f64 >= PSS_COVERS_PEAK * sampled_peak as f64,
            max_rss_at_read_bytes: self.max_rss_at_read,
        })
    }
}

/// The PSS reads (`--pss`) of a recording or span (said by `render/span.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PssReads {
    /// The largest PSS sum read, and when.
    pub largest_bytes: u64,
    pub largest_elapsed_s: f64,
    pub reads: u64,
    pub first_elapsed_s: f64,
    pub last_elapsed_s: f64,
    /// A read was taken at a tick whose RSS was within 5% of the span's largest sampled RSS (a
    /// read at the RSS peak): the largest read may be called the peak PSS. Reads only at lower
    /// RSS say nothing of the PSS at the peak.
    pub is_peak: bool,
    /// The largest RSS at a tick where PSS was read: reads at or near the idle floor are
    /// "PSS at idle"; higher ones that still missed the peak are neither.
    pub max_rss_at_read_bytes: u64,
}

impl PssReads {
    /// Every read came at a tick whose RSS was within 5% of `idle_floor` (the recording's 10th
    /// percentile): the largest read is the PSS at idle.
    pub fn at_idle(&self, idle_floor: u64) -> bool {
        !self.is_peak && self.max_rss_at_read_bytes as f64 <= 1.05 * idle_floor as f64
    }
}

/// A row's page cache in the cgroup that no process of the tree maps (the cgroup's `file` less
/// its `shmem` and the tree's file-backed RSS: a page mapped by two processes counts twice
/// there, so this leaves out no more cache than is mapped), and the cgroup's usage less it.
fn unmapped_cache(s: &Sample) -> Option<(u64, u64)> {
    let (current, file) = (s.cgroup_bytes?, s.cgroup_file_bytes?);
    let cache = file
        .saturating_sub(s.cgroup_shmem_bytes.unwrap_or(0))
        .saturating_sub(s.file_bytes);
    Some((cache, current.saturating_sub(cache)))
}

/// The largest locked, pinned and shared memory sampled in a span: a GPU prover's pinned
/// parameters, a shared mapping counted in each process that maps it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HeldPeaks {
    /// VmLck: mlock'd memory (never swapped, never reclaimed).
    pub locked_bytes: u64,
    /// VmPin: memory pinned long-term (by a driver, for DMA).
    pub pinned_bytes: u64,
    /// RssShmem: resident shared memory (tmpfs, memfd, shared anonymous mappings).
    pub shmem_bytes: u64,
}

impl HeldPeaks {
    fn push(&mut self, s: &Sample) {
        self.locked_bytes = self.locked_bytes.max(s.locked_bytes);
        self.pinned_bytes = self.pinned_bytes.max(s.pinned_bytes);
        self.shmem_bytes = self.shmem_bytes.max(s.shmem_bytes);
    }

    pub fn is_empty(&self) -> bool {
        *self == HeldPeaks::default()
    }
}

/// A cumulative column's rise over a span's rows (`major_faults`, the PSI and swap columns). A value
/// below the last one is a counter that began again (the next session of an `--append`ed
/// recording): it counts from 0.
#[derive(Debug, Clone, Copy, Default)]
struct Rise {
    last: Option<u64>,
    total: u64,
}

impl Rise {
    /// Opened at `v`: what the opening row holds came before the span (`from_zero`: a
    /// recording's or session's first row, where the counter began at 0, counts whole).
    fn open(v: Option<u64>, from_zero: bool) -> Rise {
        Rise {
            last: v,
            total: v.filter(|_| from_zero).unwrap_or(0),
        }
    }

    fn push(&mut self, v: Option<u64>) {
        let Some(v) = v else {
            return;
        };
        if let Some(l) = self.last {
            self.total = self.total.saturating_add(if v >= l { v - l } else { v });
        }
        self.last = Some(v);
    }

    /// `None` when no row had the column.
    fn get(&self) -> Option<u64> {
        self.last.map(|_| self.total)
    }
}

/// Was the span slowed by memory: the tree's major page faults in it, the memory pressure stall
/// (PSI) and the swap during it, from the cumulative columns; and the most transparent huge
/// pages in use. `render/span.rs` says them: a table's cells and legends, a summary's sentence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MemoryHealth {
    /// Major page faults of the tree (pages read from disk or swap).
    pub major_faults: u64,
    /// The machine's memory stall, µs: some task waiting (`some`), every task at once
    /// (`full`); absent where PSI was not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psi_memory_some_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psi_memory_full_us: Option<u64>,
    /// The recorded v2 cgroup's own, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_psi_memory_some_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_psi_memory_full_us: Option<u64>,
    /// Pages swapped in and out during the span: the machine's (/proc/vmstat), absent where
    /// not read (the recorded cgroup counted its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_in_pages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_out_pages: Option<u64>,
    /// The recorded cgroup's own (v2 memory.stat pswpin, pswpout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_swap_in_pages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_swap_out_pages: Option<u64>,
    /// The most transparent huge pages in use: the tree's (AnonHugePages, read with PSS) and
    /// the cgroup's (anon_thp); absent where not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anon_huge_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_anon_thp_bytes: Option<u64>,
    /// Processes of the recorded cgroup the kernel's OOM killer killed in the span (the rises
    /// of `cgroup_oom_kill_events` between its rows); absent where no cgroup was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_oom_kills: Option<u64>,
}

impl MemoryHealth {
    /// Some fault, stall, swap or OOM kill happened, or huge pages were in use (a quiet span
    /// shows nothing).
    pub fn moved(&self) -> bool {
        self.major_faults > 0
            || self.stalled()
            || self.swapped()
            || self.thp().is_some()
            || self.oom_killed()
    }

    /// The OOM killer killed a process of the cgroup in the span.
    pub fn oom_killed(&self) -> bool {
        self.cgroup_oom_kills.unwrap_or(0) > 0
    }

    /// Pages were swapped in or out: the cgroup's where it counts its own, else the machine's.
    pub fn swapped(&self) -> bool {
        let (i, o) = self.swap();
        i.unwrap_or(0) > 0 || o.unwrap_or(0) > 0
    }

    /// The swap counts a table shows: the cgroup's where it has them, else the machine's.
    pub fn swap(&self) -> (Option<u64>, Option<u64>) {
        match self.cgroup_swap_in_pages {
            Some(_) => (self.cgroup_swap_in_pages, self.cgroup_swap_out_pages),
            None => (self.swap_in_pages, self.swap_out_pages),
        }
    }

    /// The most huge pages in use a table shows, when some were: the tree's where PSS read
    /// them, else the cgroup's.
    pub fn thp(&self) -> Option<u64> {
        self.anon_huge_bytes
            .or(self.cgroup_anon_thp_bytes)
            .filter(|&b| b > 0)
    }

    /// Some memory stall was counted, machine-wide or in the cgroup.
    pub fn stalled(&self) -> bool {
        self.psi_memory_some_us.unwrap_or(0) > 0 || self.cgroup_psi_memory_some_us.unwrap_or(0) > 0
    }

    /// The stall a table shows, µs (`some`, `full`): the cgroup's where it has one, else the
    /// machine's.
    pub fn stall(&self) -> (Option<u64>, Option<u64>) {
        match self.cgroup_psi_memory_some_us {
            Some(_) => (
                self.cgroup_psi_memory_some_us,
                self.cgroup_psi_memory_full_us,
            ),
            None => (self.psi_memory_some_us, self.psi_memory_full_us),
        }
    }
}

/// The health counters of a span, fed row by row.
#[derive(Debug, Clone, Copy, Default)]
struct HealthAcc {
    faults: Rise,
    some: Rise,
    full: Rise,
    cg_some: Rise,
    cg_full: Rise,
    swap_in: Rise,
    swap_out: Rise,
    cg_swap_in: Rise,
    cg_swap_out: Rise,
    /// The largest huge pages of the span's rows.
    thp: Option<u64>,
    cg_thp: Option<u64>,
    /// The cgroup's OOM kill counter: the cgroup's own since it was made, so only its rises
    /// between rows count, whatever the opening row holds.
    cg_oom: Rise,
}

impl HealthAcc {
    fn open(s: &Sample, from_zero: bool) -> HealthAcc {
        HealthAcc {
            faults: Rise::open(Some(s.major_faults), from_zero),
            some: Rise::open(s.psi_memory_some_us, from_zero),
            full: Rise::open(s.psi_memory_full_us, from_zero),
            cg_some: Rise::open(s.cgroup_psi_memory_some_us, from_zero),
            cg_full: Rise::open(s.cgroup_psi_memory_full_us, from_zero),
            swap_in: Rise::open(s.swap_in_pages, from_zero),
            swap_out: Rise::open(s.swap_out_pages, from_zero),
            cg_swap_in: Rise::open(s.cgroup_swap_in_pages, from_zero),
            cg_swap_out: Rise::open(s.cgroup_swap_out_pages, from_zero),
            thp: s.anon_huge_bytes,
            cg_thp: s.cgroup_anon_thp_bytes,
            cg_oom: Rise::open(s.cgroup_oom_kill_events, false),
        }
    }

    fn push(&mut self, s: &Sample) {
        self.faults.push(Some(s.major_faults));
        self.some.push(s.psi_memory_some_us);
        self.full.push(s.psi_memory_full_us);
        self.cg_some.push(s.cgroup_psi_memory_some_us);
        self.cg_full.push(s.cgroup_psi_memory_full_us);
        self.swap_in.push(s.swap_in_pages);
        self.swap_out.push(s.swap_out_pages);
        self.cg_swap_in.push(s.cgroup_swap_in_pages);
        self.cg_swap_out.push(s.cgroup_swap_out_pages);
        let max = |a: Option<u64>, b: Option<u64>| a.max(b);
        self.thp = max(self.thp, s.anon_huge_bytes);
        self.cg_thp = max(self.cg_thp, s.cgroup_anon_thp_bytes);
        self.cg_oom.push(s.cgroup_oom_kill_events);
    }

    fn get(&self) -> MemoryHealth {
        MemoryHealth {
            major_faults: self.faults.get().unwrap_or(0),
            psi_memory_some_us: self.some.get(),
            psi_memory_full_us: self.full.get(),
            cgroup_psi_memory_some_us: self.cg_some.get(),
            cgroup_psi_memory_full_us: self.cg_full.get(),
            swap_in_pages: self.swap_in.get(),
            swap_out_pages: self.swap_out.get(),
            cgroup_swap_in_pages: self.cg_swap_in.get(),
            cgroup_swap_out_pages: self.cg_swap_out.get(),
            anon_huge_bytes: self.thp,
            cgroup_anon_thp_bytes: self.cg_thp,
            cgroup_oom_kills: self.cg_oom.get(),
        }
    }
}

/// The rows of one span, accumulated in constant memory.
#[derive(Debug, Clone)]
pub struct SpanAcc {
    start_elapsed_s: f64,
    start_unix_ms: u64,
    start_rss: u64,
    /// The opening row's largest VmHWM and largest RSS, and its cgroup peak file.
    open_hwm: u64,
    open_top_rss: u64,
    open_cgroup_peak: Option<u64>,
    /// The opening row's cgroup usage.
    open_cgroup: Option<u64>,
    /// The largest VmHWM and cgroup peak of the rows after the opening one.
    hwm_after: Option<u64>,
    cgroup_peak_after: Option<u64>,
    /// Processes that left the tree in the rows after the opening one.
    departed: u64,
    /// From the first `restart` row after the opening one: the largest VmHWM of the rows before
    /// it (after the opening one), and of it and the rows after it. The process that took over
    /// started after the span's rows before it (`--name`: after the old process was last seen;
    /// a pidfile: once rewritten), so all of its marks were set in the span.
    hwm_before_restart: Option<Option<u64>>,
    hwm_since_restart: Option<u64>,
    /// The largest process's largest RSS sampled before the first restart (opening row
    /// included): what is known of the old process's peak when its marks never rose.
    top_rss_before_restart: u64,
    /// A `restart` row that counts no departure: written by a memmon that did not yet carry
    /// the old tree's end into the restart's row, so the old process's peak at its exit (its
    /// exit record) is in no row.
    restart_uncarried: bool,
    last_elapsed_s: f64,
    last_unix_ms: u64,
    last_rss: u64,
    samples: u64,
    rss_sum: f64,
    /// The row with the largest RSS (the first of equals).
    peak_rss: u64,
    peak_elapsed_s: f64,
    peak_unix_ms: u64,
    peak_pid: i32,
    peak_processes: u32,
    pss_at_peak: Option<u64>,
    max_processes: u32,
    /// The opening row's `hwm_sum_bytes`, and the largest of the rows after it (with the sum
    /// the end record gave after the last row).
    open_hwm_sum: u64,
    hwm_sum_max: Option<u64>,
    pss: PssTrack,
    peak_gpu: Option<u64>,
    /// The GPU's accounting marks (`gpu_hwm_bytes`).
    gpu_hwm: GpuHwmAcc,
    /// The largest cgroup usage sampled.
    cgroup_max: Option<u64>,
    /// The most swap the tree held at a tick (its VmSwap sum), and the largest RAM plus that
    /// swap: RSS sum plus swap, cgroup usage plus swap (`PeakFacts::swap_peak_bytes`...).
    swap_max: u64,
    ram_swap_max: u64,
    cgroup_swap_max: u64,
    /// The most page cache in the cgroup no process of the tree mapped, and the largest usage
    /// less it (`PeakFacts::cgroup_cache_sampled_bytes`).
    cgroup_cache_max: u64,
    cgroup_uncached_max: u64,
    held: HeldPeaks,
    health: HealthAcc,
    late_boundary: bool,
    rows_lost: bool,
    /// Marks reset inside the span (`marks_reset_after`).
    inner_reset: Option<InnerReset>,
    /// A process's mark was reset in the span by itself or another program
    /// (`mark_reset_elsewhere_at`).
    reset_elsewhere: bool,
    /// A row found a process of the tree outside the recorded cgroup
    /// (`cgroup_outside_processes`).
    cgroup_left: bool,
    /// The largest file-backed RSS of the tree sampled (`file_bytes`): pages a cgroup may not
    /// be charged for (a binary's page cache, charged to whoever read it first).
    file_max: u64,
    /// The last row's cgroup peak, and whether that row bounds a span (memmon resets the peak
    /// right after such a row, and after the opening row: a lower peak next is that reset).
    last_cgroup_peak: Option<u64>,
    after_boundary: bool,
    /// The cgroup's peak fell between two rows with no reset of memmon's between them: the
    /// cgroup was removed and made again (a restarted service's), or another program reset its
    /// peak. Its peak file then does not cover the span.
    cgroup_peak_fell: bool,
}

impl SpanAcc {
    /// A span opened by row `s` (which belongs to it).
    pub fn open(s: &Sample) -> SpanAcc {
        let mut pss = PssTrack::default();
        pss.push(s);
        let mut held = HeldPeaks::default();
        held.push(s);
        SpanAcc {
            start_elapsed_s: s.elapsed_s,
            start_unix_ms: s.unix_ms,
            start_rss: s.rss_bytes,
            open_hwm: s.hwm_bytes,
            open_top_rss: s.top_rss_bytes,
            open_cgroup_peak: s.cgroup_peak_bytes,
            open_cgroup: s.cgroup_bytes,
            hwm_after: None,
            cgroup_peak_after: None,
            departed: 0,
            hwm_before_restart: None,
            hwm_since_restart: None,
            top_rss_before_restart: s.top_rss_bytes,
            restart_uncarried: false,
            last_elapsed_s: s.elapsed_s,
            last_unix_ms: s.unix_ms,
            last_rss: s.rss_bytes,
            samples: 1,
            rss_sum: s.rss_bytes as f64,
            peak_rss: s.rss_bytes,
            peak_elapsed_s: s.elapsed_s,
            peak_unix_ms: s.unix_ms,
            peak_pid: s.top_pid,
            peak_processes: s.processes,
            pss_at_peak: s.pss_bytes,
            max_processes: s.processes,
            open_hwm_sum: s.hwm_sum_bytes,
            hwm_sum_max: None,
            pss,
            peak_gpu: s.gpu.bytes,
            gpu_hwm: GpuHwmAcc::open(s),
            cgroup_max: s.cgroup_bytes,
            swap_max: s.swap_bytes,
            ram_swap_max: s.rss_bytes.saturating_add(s.swap_bytes),
            cgroup_swap_max: s.cgroup_bytes.map_or(0, |c| c.saturating_add(s.swap_bytes)),
            cgroup_cache_max: unmapped_cache(s).map_or(0, |u| u.0),
            cgroup_uncached_max: unmapped_cache(s).map_or(0, |u| u.1),
            held,
            health: HealthAcc::open(s, false),
            late_boundary: false,
            rows_lost: false,
            inner_reset: None,
            reset_elsewhere: false,
            cgroup_left: s.cgroup_outside_processes.is_some_and(|n| n > 0),
            file_max: s.file_bytes,
            last_cgroup_peak: s.cgroup_peak_bytes,
            after_boundary: true,
            cgroup_peak_fell: false,
        }
    }

    /// A span that no row holds, from `start` to `end` (each in ms since 1970 and in seconds
    /// on the recording's clock): a launched command that ended before its first sample. Only
    /// what its end record gave after it (`SpanContext::with_tail`) says anything of its peak;
    /// its counters began with it.
    pub fn without_rows(start: (u64, f64), end: (u64, f64)) -> SpanAcc {
        let (unix_ms, elapsed_s) = start;
        SpanAcc {
            start_elapsed_s: elapsed_s,
            start_unix_ms: unix_ms,
            start_rss: 0,
            open_hwm: 0,
            open_top_rss: 0,
            open_cgroup_peak: None,
            open_cgroup: None,
            hwm_after: None,
            cgroup_peak_after: None,
            departed: 0,
            hwm_before_restart: None,
            hwm_since_restart: None,
            top_rss_before_restart: 0,
            restart_uncarried: false,
            last_elapsed_s: end.1.max(elapsed_s),
            last_unix_ms: end.0.max(unix_ms),
            last_rss: 0,
            samples: 0,
            rss_sum: 0.0,
            peak_rss: 0,
            peak_elapsed_s: elapsed_s,
            peak_unix_ms: unix_ms,
            peak_pid: 0,
            peak_processes: 0,
            pss_at_peak: None,
            max_processes: 0,
            open_hwm_sum: 0,
            hwm_sum_max: None,
            pss: PssTrack::default(),
            peak_gpu: None,
            gpu_hwm: GpuHwmAcc::empty(),
            cgroup_max: None,
            swap_max: 0,
            ram_swap_max: 0,
            cgroup_swap_max: 0,
            cgroup_cache_max: 0,
            cgroup_uncached_max: 0,
            held: HeldPeaks::default(),
            health: HealthAcc {
                faults: Rise::open(Some(0), true),
                ..HealthAcc::default()
            },
            late_boundary: false,
            rows_lost: false,
            inner_reset: None,
            reset_elsewhere: false,
            cgroup_left: false,
            file_max: 0,
            last_cgroup_peak: None,
            after_boundary: true,
            cgroup_peak_fell: false,
        }
    }

    /// A span opened by a recording's (or a session's) first row: its counters began with the
    /// recording, so what that row holds counts in the span.
    pub fn open_session(s: &Sample) -> SpanAcc {
        let mut a = SpanAcc::open(s);
        a.health = HealthAcc::open(s, true);
        a
    }

    /// A process's mark was found reset by itself or another program at the row of `unix_ms`
    /// (`EndInfo::marks_reset_elsewhere`): the span holds that reset when the row is one of its
    /// own after the opening one (the reset came after the row before).
    pub fn mark_reset_elsewhere_at(&mut self, unix_ms: u64) {
        if unix_ms > self.start_unix_ms && unix_ms <= self.last_unix_ms {
            self.reset_elsewhere = true;
        }
    }

    /// The marks (VmHWM, the cgroup's peak file) were reset right after row `s`, the span's last
    /// (a marker's, recorded with `--phase-peaks`): the rows after it hold what came after.
    pub fn marks_reset_after(&mut self, s: &Sample) {
        if self.inner_reset.is_none() {
            self.inner_reset = Some(InnerReset {
                hwm_at: s.hwm_bytes,
                cgroup_at: s.cgroup_peak_bytes,
                ..InnerReset::default()
            });
        }
    }

    /// The next row of the span.
    pub fn add(&mut self, s: &Sample) {
        if let Some(r) = self.inner_reset.as_mut() {
            r.hwm_after = Some(r.hwm_after.unwrap_or(0).max(s.hwm_bytes));
            if let Some(p) = s.cgroup_peak_bytes {
                r.cgroup_after = Some(r.cgroup_after.map_or(p, |m| m.max(p)));
            }
        }
        self.samples += 1;
        self.rss_sum += s.rss_bytes as f64;
        self.last_elapsed_s = s.elapsed_s;
        self.last_unix_ms = s.unix_ms;
        self.last_rss = s.rss_bytes;
        let restart = matches!(s.event, Some(Event::Restart(_)));
        if restart && self.hwm_before_restart.is_none() {
            self.hwm_before_restart = Some(self.hwm_after);
        }
        if self.hwm_before_restart.is_some() {
            self.hwm_since_restart = Some(self.hwm_since_restart.unwrap_or(0).max(s.hwm_bytes));
        } else {
            self.top_rss_before_restart = self.top_rss_before_restart.max(s.top_rss_bytes);
        }
        self.hwm_after = Some(self.hwm_after.unwrap_or(0).max(s.hwm_bytes));
        // The process a restart replaced left the tree (recordings made before the restart's
        // row counted it say 0).
        self.restart_uncarried |= restart && s.departed == 0;
        let departed = if restart {
            s.departed.max(1)
        } else {
            s.departed
        };
        self.departed += departed as u64;
        self.max_processes = self.max_processes.max(s.processes);
        self.raise_hwm_sum(s.hwm_sum_bytes);
        self.pss.push(s);
        self.held.push(s);
        self.health.push(s);
        if let Some(g) = s.gpu.bytes {
            self.peak_gpu = Some(self.peak_gpu.unwrap_or(0).max(g));
        }
        self.gpu_hwm.add(s);
        if let Some(p) = s.cgroup_peak_bytes {
            self.cgroup_peak_after = Some(self.cgroup_peak_after.map_or(p, |m| m.max(p)));
        }
        if let Some(c) = s.cgroup_bytes {
            self.cgroup_max = Some(self.cgroup_max.map_or(c, |m| m.max(c)));
            self.cgroup_swap_max = self.cgroup_swap_max.max(c.saturating_add(s.swap_bytes));
        }
        if let Some((cache, uncached)) = unmapped_cache(s) {
            self.cgroup_cache_max = self.cgroup_cache_max.max(cache);
            self.cgroup_uncached_max = self.cgroup_uncached_max.max(uncached);
        }
        self.swap_max = self.swap_max.max(s.swap_bytes);
        self.ram_swap_max = self
            .ram_swap_max
            .max(s.rss_bytes.saturating_add(s.swap_bytes));
        self.cgroup_left |= s.cgroup_outside_processes.is_some_and(|n| n > 0);
        self.file_max = self.file_max.max(s.file_bytes);
        if let (Some(last), Some(now)) = (self.last_cgroup_peak, s.cgroup_peak_bytes) {
            self.cgroup_peak_fell |= now < last && !self.after_boundary;
        }
        if s.cgroup_peak_bytes.is_some() {
            self.last_cgroup_peak = s.cgroup_peak_bytes;
        }
        self.after_boundary = s.event.as_ref().is_some_and(Event::bounds_a_span);
        if s.rss_bytes > self.peak_rss {
            self.peak_rss = s.rss_bytes;
            self.peak_elapsed_s = s.elapsed_s;
            self.peak_unix_ms = s.unix_ms;
            self.peak_pid = s.top_pid;
            self.peak_processes = s.processes;
            self.pss_at_peak = s.pss_bytes;
        }
    }

    /// A boundary of the span was taken late (see `PeakFacts::late_boundary`).
    pub fn mark_late(&mut self) {
        self.late_boundary = true;
    }

    /// Rows after the span's last one were lost from the file (see `PeakFacts::rows_lost`).
    pub fn mark_rows_lost(&mut self) {
        self.rows_lost = true;
    }

    /// Processes that left the tree in the span's rows after the opening one.
    pub fn departed(&self) -> u64 {
        self.departed
    }

    /// The largest RSS of the span's rows so far (a row above it is the new sampled peak).
    pub fn sampled_peak_rss(&self) -> u64 {
        self.peak_rss
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    pub fn start_unix_ms(&self) -> u64 {
        self.start_unix_ms
    }

    pub fn start_elapsed_s(&self) -> f64 {
        self.start_elapsed_s
    }

    pub fn last_elapsed_s(&self) -> f64 {
        self.last_elapsed_s
    }

    pub fn last_unix_ms(&self) -> u64 {
        self.last_unix_ms
    }

    /// The largest VmHWM of the opening row, and of the rows after it (`None`: no row after).
    pub fn hwm(&self) -> (u64, Option<u64>) {
        (self.open_hwm, self.hwm_after)
    }

    /// The kernel's peak of the span's largest process under `window`, with `tail` (a peak the
    /// kernel gave after the last row) taken as one more row; `None` when the marks do not
    /// cover the span. Unless the second value is `Covered::Whole` it is a lower bound only:
    /// the marks began inside the span (a restart's process, or a reset at a marker with
    /// `--phase-peaks`), and those before never rose in it, so the peak before is not known
    /// and may have been higher. `inner_resets`: the resets inside the span
    /// (`marks_reset_after`) held.
    fn kernel_peak(
        &self,
        window: Window,
        bound_bytes: u64,
        tail: Option<(u64, bool)>,
        inner_resets: bool,
    ) -> (Option<u64>, Covered) {
        let rises = matches!(window, Window::IfRises | Window::ResetIfSettled);
        let (Some(before), true) = (self.hwm_before_restart, rises) else {
            // Marks reset inside the span (--phase-peaks): the rows after the first reset
            // count.
            if let (Window::IfRises, Some(r)) = (window, self.inner_reset.filter(|_| inner_resets))
            {
                let after_reset = larger(r.hwm_after, tail.map(|t| t.0));
                return match InnerReset::peak(Some(self.open_hwm), Some(r.hwm_at), after_reset) {
                    Some(p) => (Some(p), Covered::Whole),
                    // The marks before the first reset are older than the span: the peak is
                    // at least the largest mark after it, and what the samples saw.
                    None => (
                        after_reset
                            .filter(|&a| a > 0)
                            .map(|a| a.max(self.top_rss_before_restart)),
                        Covered::NotBeforeReset,
                    ),
                };
            }
            let after = larger(self.hwm_after, tail.map(|t| t.0));
            return (
                self.kernel_peak_of(window, bound_bytes, after),
                Covered::Whole,
            );
        };
        // A restart in a span whose marks count only when they rise: the rows before it as
        // before; the restart's process began in the span, so its marks all count (and so does
        // a tail of the last tree, `EndTail::kernel_last_tree`).
        let (tail_before, tail_since) = match tail {
            Some((t, true)) => (None, Some(t)),
            Some((t, false)) => (Some(t), None),
            None => (None, None),
        };
        let since = larger(self.hwm_since_restart, tail_since).unwrap_or(0);
        let before_max = self.open_hwm.max(larger(before, tail_before).unwrap_or(0));
        match self.kernel_peak_of(window, bound_bytes, larger(before, tail_before)) {
            Some(b) => (Some(b.max(since)), Covered::Whole),
            None if since == 0 => (None, Covered::Whole),
            // The earlier process's marks never rose: its peak in the span is at most its
            // mark, which the restart's process reached (exact), or not: a lower bound, at
            // least what the earlier process's samples saw.
            None if since >= before_max => (Some(since), Covered::Whole),
            None => (
                Some(since.max(self.top_rss_before_restart)),
                Covered::NotBeforeRestart,
            ),
        }
    }

    /// `kernel_peak` over rows without a restart: `after` the largest mark after the opening.
    fn kernel_peak_of(&self, window: Window, bound_bytes: u64, after: Option<u64>) -> Option<u64> {
        match window {
            Window::FromOpen => Some(self.open_hwm.max(after.unwrap_or(0))),
            Window::AfterOpen => after,
            // A mark no higher than the opening row's largest RSS (within the counters'
            // batching) was reached at that row: the process holding that RSS has a mark at
            // least that, so the largest mark is its RSS there, in the span, and nothing
            // before the span was higher.
            Window::IfRises if self.open_hwm <= self.open_top_rss.saturating_add(bound_bytes) => {
                Some(self.open_hwm.max(after.unwrap_or(0)))
            }
            Window::IfRises => after.filter(|&a| a > self.open_hwm),
            // Equal within the counters' batching: a reset sets VmHWM to an RSS read a moment
            // before or after the one sampled.
            Window::ResetIfSettled
                if self.open_hwm <= self.open_top_rss.saturating_add(bound_bytes) =>
            {
                Some(self.open_hwm.max(after.unwrap_or(0)))
            }
            Window::ResetIfSettled => after.filter(|&a| a > self.open_hwm),
        }
    }

    /// The cgroup's exact peak over the span under `window`, with `tail` (the peak file read
    /// after the last row) taken as one more row.
    fn cgroup_peak(&self, window: Window, tail: Option<u64>, inner_resets: bool) -> Option<u64> {
        let after = larger(self.cgroup_peak_after, tail);
        if let (Window::IfRises, Some(r)) = (window, self.inner_reset.filter(|_| inner_resets)) {
            let after_reset = larger(r.cgroup_after, tail);
            return InnerReset::peak(self.open_cgroup_peak, r.cgroup_at, after_reset);
        }
        match window {
            Window::FromOpen => match (self.open_cgroup_peak, after) {
                (None, None) => None,
                (o, a) => Some(o.unwrap_or(0).max(a.unwrap_or(0))),
            },
            Window::AfterOpen => after,
            Window::IfRises | Window::ResetIfSettled => match (self.open_cgroup_peak, after) {
                // A peak file that rose during the span was set in it: the span's peak.
                (Some(open), Some(a)) if a > open => Some(a),
                _ => None,
            },
        }
    }

    /// What the span's rows, and `ctx`, say of its peak.
    pub fn facts(&self, ctx: &SpanContext) -> PeakFacts {
        let tail = ctx.kernel_after_last_row;
        let inner = ctx.kernel_inner_resets;
        let (rows, _) = self.kernel_peak(ctx.kernel, ctx.bound_bytes, None, inner);
        let (kernel, covered) = self.kernel_peak(
            ctx.kernel,
            ctx.bound_bytes,
            tail.map(|t| (t.0, ctx.kernel_after_last_row_of_last_tree)),
            inner,
        );
        let kernel = kernel.filter(|&k| k > 0).map(|k| match tail {
            // The peak after the last row is the span's (ties go to it: wait4's ru_maxrss
            // covers the whole command, the rows only its ticks).
            Some((t, source)) if t == k && rows.is_none_or(|r| t >= r) => (k, source),
            _ => (k, PeakSource::Vmhwm),
        });
        // ru_maxrss above every VmHWM the rows read is a descendant's peak (one never seen at
        // its peak, or at all): a process that left unseen, so the peak is the largest
        // process's, not the command's.
        let rows_hwm = self.open_hwm.max(self.hwm_after.unwrap_or(0));
        // A restart row of an older memmon's: the old process's exit record is in no row, only
        // in the end record's peak of every tree (`exit_peak_bytes`) when the span takes that.
        let carried =
            !self.restart_uncarried || (tail.is_some() && !ctx.kernel_after_last_row_of_last_tree);
        // Not where the root's own exit record holds it (no process ever left the tree): the root
        // grew after the last row (a command shorter than an interval).
        let left_unseen = kernel.is_some_and(|(k, source)| {
            source == PeakSource::RuMaxrss
                && k > rows_hwm.saturating_add(ctx.bound_bytes)
                && ctx
                    .root_exit_after_last_row
                    .is_none_or(|e| e.saturating_add(ctx.bound_bytes) < k)
        });
        let cgroup_peak = self.cgroup_peak(
            ctx.cgroup,
            ctx.cgroup_after_last_row,
            ctx.cgroup_inner_resets,
        );
        // A process's peak above the cgroup's: a VmHWM (rows, exit records), or wait4's
        // ru_maxrss of the command's own process (not the orphans', whose marks may predate
        // the span: one of the run before, reaped in this one). One above every RSS the rows
        // read is a peak no row saw (a VmHWM a row took from an exit record included), its file
        // pages unknown: they may be charged elsewhere (a binary's and its libraries' page
        // cache, faulted in by another cgroup first), and up to 16 MiB or a quarter of the peak
        // is taken for them.
        let beyond = |k: u64| {
            let unseen = k > self.peak_rss.saturating_add(ctx.bound_bytes);
            let unseen_files = if unseen { (16 << 20).max(k / 4) } else { 0 };
            self.beyond_cgroup(Some(k), cgroup_peak, ctx.bound_bytes, unseen_files)
        };
        // Only a process seen outside the cgroup changes the basis; a peak above it is said.
        let cgroup_left_tree = ctx.cgroup_holds_tree && self.cgroup_left;
        let cgroup_below_process = ctx.cgroup_holds_tree
            && !cgroup_left_tree
            && (kernel
                .filter(|k| k.1 == PeakSource::Vmhwm)
                .is_some_and(|k| beyond(k.0))
                || ctx.command_after_last_row.is_some_and(beyond));
        PeakFacts {
            sampled_peak_rss_bytes: self.peak_rss,
            kernel_peak_rss_bytes: kernel.map(|k| k.0),
            kernel_peak_source: kernel.map(|k| k.1),
            max_processes: self.max_processes,
            departed: if left_unseen {
                self.departed.max(1)
            } else {
                self.departed
            },
            exit_records_complete: ctx.exit_records && carried,
            kernel_peak_covers_departed: (ctx.exit_records || ctx.rusage_covers_departed)
                && carried,
            cgroup_peak_bytes: cgroup_peak.filter(|_| !self.cgroup_peak_fell),
            cgroup_peak_fell: self.cgroup_peak_fell,
            cgroup_holds_tree: ctx.cgroup_holds_tree && !cgroup_left_tree,
            cgroup_left_tree,
            cgroup_below_process,
            cgroup_v1: ctx.cgroup_v1,
            // The opening row's sum may hold marks from before a reset at the span's start
            // (the span before's); the rows after it bound the tree from the opening on, so it
            // counts only in a span of one row.
            hwm_sum_bytes: self.hwm_sum_max.unwrap_or(self.open_hwm_sum),
            exact_within_bytes: ctx.bound_known.then_some(ctx.bound_bytes),
            late_boundary: self.late_boundary,
            rows_lost: self.rows_lost,
            // A restart's process set the peak, and the one before it may have peaked higher
            // in the span.
            restart_peak_unknown: kernel.is_some() && covered == Covered::NotBeforeRestart,
            reset_peak_unknown: kernel.is_some() && covered == Covered::NotBeforeReset,
            mark_reset_elsewhere: kernel.is_some() && self.reset_elsewhere,
            swap_peak_bytes: self.swap_max,
            ram_swap_sampled_bytes: self.ram_swap_max,
            cgroup_swap_sampled_bytes: self.cgroup_swap_max,
            cgroup_cache_sampled_bytes: self.cgroup_cache_max,
            cgroup_uncached_sampled_bytes: self.cgroup_uncached_max,
        }
    }

    /// A cgroup that held the whole tree peaks at least as high as the tree's largest process
    /// (`kernel`, its exact peak), but for the process's file pages charged elsewhere (a
    /// binary's page cache) and the counters' batching: a process peak above the cgroup's by
    /// more than that, as `model::peak::charged_elsewhere` judges it (the rule the recorder
    /// applies to an attached target's cgroup at the start), was reached, at least in part,
    /// outside the cgroup (a process moved out and gone between two samples).
    /// `unseen_files`: file pages of that process the rows did not see, allowed beside theirs.
    fn beyond_cgroup(
        &self,
        kernel: Option<u64>,
        cgroup: Option<u64>,
        bound_bytes: u64,
        unseen_files: u64,
    ) -> bool {
        let (Some(k), Some(c)) = (kernel, cgroup) else {
            return false;
        };
        let explained = c
            .saturating_add(self.file_max)
            .saturating_add(unseen_files)
            .saturating_add(self.held.shmem_bytes);
        crate::model::peak::charged_elsewhere(k, explained, bound_bytes).is_some()
    }

    /// The span's memory health, with the OOM kills the end record counted after its last row
    /// (all of them, for a span no row holds).
    fn health_with_tail(&self, ctx: &SpanContext) -> MemoryHealth {
        let mut h = self.health;
        if self.samples == 0 {
            let mut health = h.get();
            health.cgroup_oom_kills = ctx.cgroup_oom_during.or(health.cgroup_oom_kills);
            return health;
        }
        h.cg_oom.push(ctx.cgroup_oom_after_last_row);
        h.get()
    }

    /// The span, closed: `label`, its run number (runs only), `complete` when its closing row
    /// came (else the recording or its session ended first).
    pub fn close(
        &self,
        label: String,
        run: Option<u32>,
        complete: bool,
        ctx: &SpanContext,
    ) -> Span {
        let facts = self.facts(ctx);
        Span {
            label,
            run,
            session: None,
            start_elapsed_s: self.start_elapsed_s,
            start_unix_ms: self.start_unix_ms,
            end_unix_ms: self.last_unix_ms,
            numa_nodes: Vec::new(),
            end_elapsed_s: self.last_elapsed_s,
            duration_s: self.last_elapsed_s - self.start_elapsed_s,
            samples: self.samples,
            peak: facts.decide(),
            facts,
            sampled_peak_elapsed_s: self.peak_elapsed_s,
            mean_rss_bytes: if self.samples == 0 {
                0
            } else {
                (self.rss_sum / self.samples as f64).round() as u64
            },
            start_rss_bytes: self.start_rss,
            end_rss_bytes: self.last_rss,
            held: self.held,
            health: self.health_with_tail(ctx),
            pss: self.pss.reads(self.peak_rss),
            peak_gpu_bytes: self.peak_gpu,
            gpu_kernel: self.gpu_hwm.decide(ctx.gpu, ctx.gpu_after_last_row),
            cgroup_sampled_peak_bytes: self.cgroup_max,
            start_cgroup_bytes: self.open_cgroup,
            complete,
        }
    }

    /// The row of the largest RSS: when, which process was largest, how many processes.
    pub fn sampled_peak_row(&self) -> SampledPeakRow {
        SampledPeakRow {
            unix_ms: self.peak_unix_ms,
            elapsed_s: self.peak_elapsed_s,
            pid: self.peak_pid,
            processes: self.peak_processes,
            pss_bytes: self.pss_at_peak,
        }
    }

    pub fn pss(&self) -> &PssTrack {
        &self.pss
    }

    pub fn held(&self) -> HeldPeaks {
        self.held
    }

    /// The tree's `major_faults` count at the recording's end, after the span's last row (the
    /// end record's: exit records read when the target ended): what it holds beyond that row
    /// is the span's too.
    /// The sum of the marks of the processes alive after the span's last row, when the target
    /// ended after it (`EndInfo::exit_hwm_sum_after_last_sample_bytes`): the tree's upper bound
    /// for the time no row covers.
    pub fn hwm_sum_at_end(&mut self, sum: u64) {
        self.raise_hwm_sum(sum);
    }

    fn raise_hwm_sum(&mut self, sum: u64) {
        self.hwm_sum_max = Some(self.hwm_sum_max.map_or(sum, |m| m.max(sum)));
    }

    pub fn faults_at_end(&mut self, total: u64) {
        if let Some(last) = self.health.faults.last.filter(|&l| total > l) {
            self.health.faults.total = self.health.faults.total.saturating_add(total - last);
            self.health.faults.last = Some(total);
        }
    }

    /// The span's major faults and memory stall so far.
    pub fn health(&self) -> MemoryHealth {
        self.health.get()
    }

    pub fn peak_gpu(&self) -> Option<u64> {
        self.peak_gpu
    }

    pub fn cgroup_max(&self) -> Option<u64> {
        self.cgroup_max
    }

    pub fn mean_rss(&self) -> f64 {
        self.rss_sum / self.samples as f64
    }
}

/// Where and when a span's largest sampled RSS was.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampledPeakRow {
    pub unix_ms: u64,
    pub elapsed_s: f64,
    pub pid: i32,
    pub processes: u32,
    pub pss_bytes: Option<u64>,
}

/// One phase or run, closed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Span {
    /// The marker's label (phases) or `run N` (runs; `sK run N` when the recording's runs
    /// come from several sessions: `analysis::phases::run_label`).
    pub label: String,
    /// The run's number (runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// The session of an `--append`ed recording the run is in (from 1), where the recording's
    /// runs come from several sessions (each bench numbers its runs from 1); `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<u32>,
    pub start_elapsed_s: f64,
    pub start_unix_ms: u64,
    /// The closing row's time (for the side tables read afterwards: NUMA).
    #[serde(skip)]
    pub end_unix_ms: u64,
    pub end_elapsed_s: f64,
    pub duration_s: f64,
    /// Rows from the opening one to the closing one, both included.
    pub samples: u64,
    /// The span's peak, decided once (`model::peak::PeakFacts::decide`) from `facts`.
    pub peak: Peak,
    #[serde(flatten)]
    pub facts: PeakFacts,
    /// When the largest sampled RSS (`sampled_peak_rss_bytes`) was.
    pub sampled_peak_elapsed_s: f64,
    pub mean_rss_bytes: u64,
    pub start_rss_bytes: u64,
    pub end_rss_bytes: u64,
    /// The largest locked, pinned and shared memory sampled.
    #[serde(flatten)]
    pub held: HeldPeaks,
    /// Major faults, memory stall and swap in the span (the rows' rise), and the most huge
    /// pages in use.
    #[serde(flatten)]
    pub health: MemoryHealth,
    /// The cgroup's most memory on each NUMA node in the span (the NUMA table's rows in it:
    /// `Summary::with_numa`); empty without a table.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub numa_nodes: Vec<super::numa::NodePeak>,
    /// The PSS reads in the span (`--pss`), absent when none fell in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pss: Option<PssReads>,
    /// The largest `gpu_bytes` in the span (GPU memory held by the tree), when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_gpu_bytes: Option<u64>,
    /// The GPU's own peak in the span (NVML accounting), beside the sampled one: never part of
    /// `peak`, which is host memory's.
    #[serde(flatten)]
    pub gpu_kernel: GpuKernelPeak,
    /// With a cgroup recorded: the largest `cgroup_bytes` sampled in the span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_sampled_peak_bytes: Option<u64>,
    /// With a cgroup recorded: its usage at the span's opening row (the floor, in the cgroup
    /// peak's own counter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_cgroup_bytes: Option<u64>,
    /// Closed by the next marker (phases) or its run-end (runs); false when the recording (or
    /// its session) ended first.
    pub complete: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::peak::PeakScope;

    const MIB: u64 = 1 << 20;

    fn row(rss: u64, hwm: u64) -> Sample {
        Sample {
            rss_bytes: rss * MIB,
            top_rss_bytes: rss * MIB,
            hwm_bytes: hwm * MIB,
            hwm_sum_bytes: hwm * MIB,
            processes: 1,
            ..Sample::default()
        }
    }

    fn span(rows: &[Sample]) -> SpanAcc {
        let mut a = SpanAcc::open(&rows[0]);
        rows[1..].iter().for_each(|r| a.add(r));
        a
    }

    /// A tree of two: `hwm_sum` apart from the largest mark.
    fn tree_row(rss: u64, hwm: u64, hwm_sum: u64) -> Sample {
        Sample {
            hwm_sum_bytes: hwm_sum * MIB,
            processes: 2,
            ..row(rss, hwm)
        }
    }

    #[test]
    fn a_spans_upper_bound_is_from_the_rows_after_its_opening_one_and_the_end_records_sum() {
        // The opening row's marks predate the reset at the span's start (a 200 MiB warm-up
        // run): they bound the span before, not this one.
        let rows = [
            tree_row(100, 300, 420),
            tree_row(120, 120, 150),
            tree_row(110, 125, 160),
        ];
        let ctx = SpanContext::default();
        assert_eq!(span(&rows).facts(&ctx).hwm_sum_bytes, 160 * MIB);
        // A span of its opening row alone has only that row's sum.
        assert_eq!(span(&rows[..1]).facts(&ctx).hwm_sum_bytes, 420 * MIB);
        // Helpers that lived after the last row (the end record's sum) raise it.
        let mut a = span(&rows);
        a.hwm_sum_at_end(250 * MIB);
        assert_eq!(a.facts(&ctx).hwm_sum_bytes, 250 * MIB);
        let mut a = span(&rows[..1]);
        a.hwm_sum_at_end(90 * MIB);
        assert_eq!(a.facts(&ctx).hwm_sum_bytes, 90 * MIB);
    }

    fn kernel(rows: &[Sample], window: Window) -> Option<u64> {
        let ctx = SpanContext {
            kernel: window,
            ..SpanContext::default()
        };
        span(rows)
            .facts(&ctx)
            .kernel_peak_rss_bytes
            .map(|k| k / MIB)
    }

    #[test]
    fn each_window_reads_the_marks_it_covers() {
        // Opened at 50 MiB with an older mark of 300 MiB; the span itself reached 120 MiB.
        let older = [row(50, 300), row(60, 300), row(50, 300)];
        assert_eq!(kernel(&older, Window::IfRises), None);
        assert_eq!(kernel(&older, Window::ResetIfSettled), None);
        // Reset right after the opening row: the later rows hold the span's own peak.
        let reset_after = [row(50, 300), row(120, 120), row(50, 120)];
        assert_eq!(kernel(&reset_after, Window::AfterOpen), Some(120));
        // Reset right before it: the opening row counts too.
        let reset_before = [row(50, 50), row(120, 120)];
        assert_eq!(kernel(&reset_before, Window::FromOpen), Some(120));
        assert_eq!(kernel(&reset_before, Window::ResetIfSettled), Some(120));
        // A mark that rose during the span was set in it.
        let rose = [row(50, 300), row(400, 400)];
        assert_eq!(kernel(&rose, Window::IfRises), Some(400));
    }

    #[test]
    fn a_peak_after_the_last_row_raises_a_known_kernel_peak_only() {
        let rows = [row(50, 50), row(60, 60)];
        let ctx = SpanContext {
            kernel: Window::FromOpen,
            kernel_after_last_row: Some((90 * MIB, PeakSource::RuMaxrss)),
            ..SpanContext::default()
        };
        let f = span(&rows).facts(&ctx);
        assert_eq!(f.kernel_peak_rss_bytes, Some(90 * MIB));
        assert_eq!(f.kernel_peak_source, Some(PeakSource::RuMaxrss));
        let unknown = SpanContext {
            kernel: Window::IfRises,
            ..ctx
        };
        let older = [row(50, 300), row(60, 300)];
        assert_eq!(span(&older).facts(&unknown).kernel_peak_rss_bytes, None);
    }

    #[test]
    fn the_cgroup_peak_counts_from_its_reset_or_when_it_rose() {
        let cg = |peak: u64| Sample {
            cgroup_bytes: Some(10 * MIB),
            cgroup_peak_bytes: Some(peak * MIB),
            processes: 2,
            ..row(10, 10)
        };
        let ctx = |w| SpanContext {
            cgroup: w,
            cgroup_holds_tree: true,
            ..SpanContext::default()
        };
        let flat = span(&[cg(300), cg(300)]);
        assert_eq!(flat.facts(&ctx(Window::IfRises)).cgroup_peak_bytes, None);
        assert_eq!(
            flat.facts(&ctx(Window::FromOpen)).cgroup_peak_bytes,
            Some(300 * MIB)
        );
        let after = span(&[cg(300), cg(40), cg(45)]);
        let f = after.facts(&ctx(Window::AfterOpen));
        assert_eq!(f.cgroup_peak_bytes, Some(45 * MIB));
        let p = f.decide();
        assert_eq!((p.source, p.scope), (PeakSource::Cgroup, PeakScope::Tree));
    }

    #[test]
    fn a_command_peak_no_row_saw_far_above_the_cgroup_s_makes_it_inexact_and_only_a_process_seen_outside_moves_the_basis(
    ) {
        // Rows of a few MiB, the cgroup's peak 256 KiB: the command moved out, then peaked.
        let cg = Sample {
            cgroup_bytes: Some(MIB / 4),
            cgroup_peak_bytes: Some(MIB / 4),
            ..row(3, 3)
        };
        let rows = [cg.clone(), cg];
        let ctx = |command: Option<u64>| SpanContext {
            kernel: Window::FromOpen,
            cgroup: Window::FromOpen,
            cgroup_holds_tree: true,
            bound_bytes: MIB / 2,
            kernel_after_last_row: command.map(|c| (c, PeakSource::RuMaxrss)),
            command_after_last_row: command,
            ..SpanContext::default()
        };
        // No process was seen outside: the basis stays the cgroup's, the headline the command's
        // peak, a lower bound of the tree's.
        let left = span(&rows).facts(&ctx(Some(208 * MIB)));
        assert!(!left.cgroup_left_tree && left.cgroup_holds_tree && left.cgroup_below_process);
        let p = left.decide();
        assert_eq!(
            (p.source, p.bytes, p.exact, p.tree_low_bytes),
            (PeakSource::Cgroup, 208 * MIB, false, Some(208 * MIB))
        );
        assert_eq!(p.at_least(), "≥ ");
        // A process seen outside changes the basis.
        let seen = Sample {
            cgroup_outside_processes: Some(1),
            ..rows[0].clone()
        };
        let moved = span(&[rows[0].clone(), seen]).facts(&ctx(Some(208 * MIB)));
        assert!(moved.cgroup_left_tree && !moved.cgroup_holds_tree);
        let p = moved.decide();
        assert_eq!((p.source, p.bytes), (PeakSource::RuMaxrss, 208 * MIB));
        // 12 MiB no row saw may be the program's code and libraries, charged elsewhere.
        let small = span(&rows).facts(&ctx(Some(12 * MIB)));
        assert!(!small.cgroup_below_process && small.cgroup_holds_tree);
        // So may a run no row saw at all, its exit record's VmHWM 4 MiB (a run of 2 ms).
        let exit_record = SpanContext {
            kernel_after_last_row: Some((4 * MIB, PeakSource::Vmhwm)),
            cgroup_after_last_row: Some(MIB / 2),
            command_after_last_row: Some(4 * MIB + MIB / 4),
            ..ctx(None)
        };
        let none = SpanAcc::without_rows((0, 0.0), (2, 0.002));
        let f = none.facts(&exit_record);
        assert_eq!(f.cgroup_peak_bytes, Some(MIB / 2));
        assert!(!f.cgroup_below_process && f.cgroup_holds_tree);
        // Or one whose rows hold that VmHWM (from the exit record) but never read its RSS there.
        let late = Sample {
            cgroup_bytes: Some(MIB / 4),
            cgroup_peak_bytes: Some(MIB / 2),
            ..row(0, 4)
        };
        let f = span(&[late.clone(), late]).facts(&ctx(None));
        assert_eq!(f.kernel_peak_rss_bytes, Some(4 * MIB));
        assert!(!f.cgroup_below_process && f.cgroup_holds_tree);
        // An orphan's mark (ru_maxrss with the orphans, not the command's own) is no sign.
        let orphan = SpanContext {
            command_after_last_row: None,
            root_exit_after_last_row: None,
            ..ctx(Some(208 * MIB))
        };
        assert!(!span(&rows).facts(&orphan).cgroup_below_process);
    }

    #[test]
    fn peak_pss_needs_a_read_at_the_rss_peak() {
        let with_pss = |rss: u64, pss: Option<u64>| Sample {
            pss_bytes: pss.map(|p| p * MIB),
            ..row(rss, rss)
        };
        let idle_reads = span(&[
            with_pss(100, Some(40)),
            with_pss(900, None),
            with_pss(100, Some(41)),
        ]);
        let r = idle_reads.pss().reads(900 * MIB).unwrap();
        assert!(!r.is_peak);
        assert!(
            r.describe().contains("PSS, not at the peak"),
            "{}",
            r.describe()
        );
        let at_peak = span(&[with_pss(100, Some(40)), with_pss(900, Some(300))]);
        let r = at_peak.pss().reads(900 * MIB).unwrap();
        assert!(r.is_peak);
        assert_eq!(r.largest_bytes, 300 * MIB);
    }

    #[test]
    fn health_is_the_rise_of_the_counters_over_the_span_and_a_counter_that_began_again_counts_from_0(
    ) {
        let h = |faults: u64, some: Option<u64>| Sample {
            major_faults: faults,
            psi_memory_some_us: some,
            psi_memory_full_us: some.map(|s| s / 10),
            ..row(10, 10)
        };
        // The opening row's count came before the span.
        let a = span(&[
            h(100, Some(5_000)),
            h(140, Some(5_000)),
            h(160, Some(25_000)),
        ]);
        let got = a.health();
        assert_eq!(got.major_faults, 60);
        assert_eq!(
            (got.psi_memory_some_us, got.psi_memory_full_us),
            (Some(20_000), Some(2_000))
        );
        assert_eq!(got.cgroup_psi_memory_some_us, None, "not recorded: absent");
        assert_eq!(got.faults_cell(), "60");
        assert_eq!(got.stall_cell(), "20 ms some, 2 ms full");
        assert_eq!(
            got.describe().unwrap(),
            "60 major faults; memory stall 20 ms some, 2 ms full (machine-wide, /proc/pressure/memory)"
        );
        // A session's first row counts whole; a drop is a new session's counter from 0.
        let mut s = SpanAcc::open_session(&h(7, Some(0)));
        s.add(&h(9, Some(0)));
        s.add(&h(3, Some(0)));
        assert_eq!(s.health().major_faults, 9 + 3);
        // A quiet span shows nothing.
        let quiet = span(&[h(5, Some(10)), h(5, Some(10))]).health();
        assert!(!quiet.moved());
        assert_eq!(
            (quiet.faults_cell(), quiet.stall_cell()),
            ("-".into(), "-".into())
        );
        assert_eq!(quiet.describe(), None);
        assert_eq!(quiet.psi_memory_some_us, Some(0), "read, and zero");
    }

    #[test]
    fn oom_kills_are_the_rises_of_the_cgroups_counter_within_the_span() {
        // The counter is the cgroup's own since it was made: 3 kills before the recording
        // count in no span, even a session's first; the two after do.
        let k = |n: u64| Sample {
            cgroup_oom_kill_events: Some(n),
            ..row(10, 10)
        };
        let mut s = SpanAcc::open_session(&k(3));
        s.add(&k(3));
        s.add(&k(5));
        let got = s.health();
        assert_eq!(got.cgroup_oom_kills, Some(2));
        assert!(got.oom_killed() && got.moved());
        assert_eq!(got.oom_cell(), "2");
        assert_eq!(got.describe().unwrap(), "2 OOM kills in the cgroup");
        let quiet = span(&[k(5), k(5)]).health();
        assert_eq!(
            (quiet.cgroup_oom_kills, quiet.oom_cell()),
            (Some(0), "-".into())
        );
        assert!(!quiet.moved());
        assert_eq!(span(&[row(10, 10)]).health().cgroup_oom_kills, None);
    }

    #[test]
    fn swap_is_the_rise_over_the_span_and_huge_pages_the_most_in_use() {
        let h = |swap_in: u64, swap_out: u64, thp: Option<u64>| Sample {
            swap_in_pages: Some(swap_in),
            swap_out_pages: Some(swap_out),
            anon_huge_bytes: thp,
            cgroup_anon_thp_bytes: Some(2 * MIB),
            ..row(10, 10)
        };
        let got = span(&[
            h(10, 100, None),
            h(14, 100, Some(4 * MIB)),
            h(30, 400, None),
        ])
        .health();
        assert_eq!(
            (got.swap_in_pages, got.swap_out_pages),
            (Some(20), Some(300))
        );
        assert_eq!(got.cgroup_swap_in_pages, None, "not recorded: absent");
        assert!(got.swapped() && got.moved());
        assert_eq!(got.swap_cell(), "20 in, 300 out");
        // The tree's huge pages (read with PSS) before the cgroup's.
        assert_eq!(
            (got.anon_huge_bytes, got.cgroup_anon_thp_bytes),
            (Some(4 * MIB), Some(2 * MIB))
        );
        assert_eq!(got.thp_cell(), "4.00 MiB");
        assert_eq!(
            got.describe().unwrap(),
            "swap 20 in, 300 out pages (machine-wide, /proc/vmstat); transparent huge pages up to \
             4.00 MiB (the tree's AnonHugePages); the cgroup's huge pages up to 2.00 MiB"
        );
        // The cgroup's own swap counts are the ones a table shows.
        let c = |n: u64| Sample {
            cgroup_swap_in_pages: Some(n),
            cgroup_swap_out_pages: Some(0),
            ..row(10, 10)
        };
        let cg = span(&[c(0), c(8)]).health();
        assert_eq!(cg.swap_cell(), "8 in, 0 out");
        assert_eq!(
            cg.describe().unwrap(),
            "the cgroup swapped 8 in, 0 out pages"
        );
        // No swap and no huge pages: nothing to show.
        let none = |n: u64| Sample {
            swap_in_pages: Some(n),
            swap_out_pages: Some(n),
            anon_huge_bytes: Some(0),
            cgroup_anon_thp_bytes: Some(0),
            ..row(10, 10)
        };
        let quiet = span(&[none(5), none(5)]).health();
        assert_eq!(
            (quiet.swap_cell(), quiet.thp_cell()),
            ("-".into(), "-".into())
        );
        assert!(!quiet.moved());
        assert_eq!(quiet.describe(), None);
    }

    #[test]
    fn held_memory_is_the_largest_of_each_part() {
        let mut a = row(600, 600);
        a.locked_bytes = 512 * MIB;
        a.shmem_bytes = 128 * MIB;
        let mut b = row(700, 700);
        b.locked_bytes = 512 * MIB;
        b.pinned_bytes = 4 * MIB;
        let h = span(&[a, b]).held();
        assert_eq!(
            (h.locked_bytes, h.pinned_bytes, h.shmem_bytes),
            (512 * MIB, 4 * MIB, 128 * MIB)
        );
    }
}
