//! The summary of one recording: the sampled peak with its time and process, the kernel's
//! peak (VmHWM, and wait4's ru_maxrss for a launched command) beside it with a warning when
//! sampling missed it, the idle floor, duration, samples, missed ticks, restarts and how the
//! target ended. Built sample by sample in constant memory; the same builder runs inside
//! `record` and over a file in `summary`, so both print the same numbers.

use super::phases::{PhaseBuilder, Phases, SpanEnd};
use super::timeline::Timeline;
use crate::format::meta::{EndInfo, EndReason, Meta};
use crate::format::ReadInfo;
use crate::model::peak::{exact_within, KernelPeakWindow, PeakScope, PeakSource};
use crate::model::process::ProcessRecord;
use crate::model::sample::{Event, Sample};
use crate::units::{fmt_bytes, fmt_seconds, fmt_unix_ms};
use serde::Serialize;
use std::fmt::Write as _;

/// A sampled peak below this fraction of the kernel's peak means the interval missed it.
pub const MISSED_PEAK_RATIO: f64 = 0.95;

/// The idle floor is this percentile of the sampled RSS.
pub const IDLE_PERCENTILE: f64 = 10.0;

/// Accumulates a summary from samples in order.
pub struct SummaryBuilder {
    samples: u64,
    first_unix_ms: Option<u64>,
    last_unix_ms: u64,
    /// The sessions (each `start` event begins one) and the time recorded in them.
    timeline: Timeline,
    peak: Option<Sample>,
    max_top_rss: u64,
    max_hwm: u64,
    /// VmHWM at the first sample, and the largest of the rows after it: a mark that never rose
    /// above its first value may predate the recording.
    first_hwm: u64,
    max_hwm_later: Option<u64>,
    max_hwm_sum: u64,
    single_process: bool,
    /// Processes that left the tree over the rows (the `departed` column).
    departed: u64,
    missed_done: u64,
    missed_session: u64,
    restarts: u64,
    rss_sum: f64,
    min_rss: u64,
    max_processes: u32,
    first_elapsed_s: f64,
    last_elapsed_s: f64,
    pss: PssTrack,
    /// The PSS read on the row of the sampled peak, if it was read there.
    pss_at_peak: Option<u64>,
    hist: LogHistogram,
    phases: PhaseBuilder,
    phase_peaks: bool,
    gpu: crate::analysis::gpu::GpuTrack,
}

impl Default for SummaryBuilder {
    fn default() -> Self {
        SummaryBuilder {
            samples: 0,
            first_unix_ms: None,
            last_unix_ms: 0,
            timeline: Timeline::new(),
            peak: None,
            max_top_rss: 0,
            max_hwm: 0,
            first_hwm: 0,
            max_hwm_later: None,
            max_hwm_sum: 0,
            single_process: true,
            departed: 0,
            missed_done: 0,
            missed_session: 0,
            restarts: 0,
            rss_sum: 0.0,
            min_rss: u64::MAX,
            max_processes: 0,
            first_elapsed_s: 0.0,
            last_elapsed_s: 0.0,
            pss: PssTrack::default(),
            pss_at_peak: None,
            hist: LogHistogram::new(),
            phases: PhaseBuilder::new(),
            phase_peaks: false,
            gpu: Default::default(),
        }
    }
}

/// The PSS reads of a recording or span, fed sample by sample (shared with analysis/phases.rs).
#[derive(Debug, Clone, Copy, Default)]
pub struct PssTrack {
    reads: u64,
    first_s: f64,
    last_s: f64,
    largest: u64,
    largest_s: f64,
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
        self.reads += 1;
        self.last_s = s.elapsed_s;
    }

    /// What was read over samples from `start_s` to `end_s`; `None` when nothing was.
    pub fn reads(&self, start_s: f64, end_s: f64) -> Option<PssReads> {
        if self.reads == 0 {
            return None;
        }
        let midpoint = start_s + (end_s - start_s) / 2.0;
        Some(PssReads {
            largest_bytes: self.largest,
            largest_elapsed_s: self.largest_s,
            reads: self.reads,
            first_elapsed_s: self.first_s,
            last_elapsed_s: self.last_s,
            is_peak: self.reads >= 2 && self.last_s >= midpoint && self.last_s > self.first_s,
        })
    }
}

/// The PSS reads (`--pss`, rate-limited by `--pss-every`) of a recording or span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PssReads {
    /// The largest PSS sum read, and when.
    pub largest_bytes: u64,
    pub largest_elapsed_s: f64,
    pub reads: u64,
    pub first_elapsed_s: f64,
    pub last_elapsed_s: f64,
    /// At least two reads, the last in the second half: the largest may be called a peak. One
    /// read, or reads only near the start, say little of the rest of the recording.
    pub is_peak: bool,
}

impl PssReads {
    /// `1.20 GiB peak PSS (12 reads, +0 µs to +2.00 s)` or `300.0 MiB PSS (1 read at +0 µs,
    /// not a peak)`.
    pub fn describe(&self) -> String {
        format!(
            "{} {} ({})",
            fmt_bytes(self.largest_bytes),
            if self.is_peak {
                "peak PSS"
            } else if self.reads == 1 {
                "PSS"
            } else {
                "largest PSS"
            },
            self.reads_note()
        )
    }

    /// `12 reads, +0 µs to +2.00 s`, `1 read at +0 µs, not a peak`.
    pub fn reads_note(&self) -> String {
        let span = format!(
            "+{} to +{}",
            fmt_seconds(self.first_elapsed_s),
            fmt_seconds(self.last_elapsed_s)
        );
        match (self.is_peak, self.reads) {
            (true, n) => format!("{n} reads, {span}"),
            (false, 1) => format!(
                "1 read at +{}, not a peak",
                fmt_seconds(self.first_elapsed_s)
            ),
            (false, n) => format!("{n} reads, only {span}, not a peak"),
        }
    }
}

/// How a process of the tree is named in the summary: its command line after exec (PostgreSQL's
/// `postgres: checkpointer`), cut to [`PROCESS_NAME_CHARS`]; its command name when it has none.
pub fn process_name(p: &ProcessRecord) -> String {
    let name = if p.cmdline.is_empty() {
        &p.comm
    } else {
        &p.cmdline
    };
    if name.chars().count() <= PROCESS_NAME_CHARS {
        return name.clone();
    }
    let mut cut: String = name.chars().take(PROCESS_NAME_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The longest process name the summary prints.
pub const PROCESS_NAME_CHARS: usize = 48;

/// How many of the largest processes the summary lists for a tree.
pub const PROCESSES_SHOWN: usize = 5;

/// The words that go beside a tree's RSS sum: `RSS sum over 9 processes, shared pages counted
/// in each`. Empty for one process, whose RSS counts each page once.
pub fn rss_sum_words(processes: u32) -> String {
    if processes > 1 {
        format!("RSS sum over {processes} processes, shared pages counted in each")
    } else {
        String::new()
    }
}

impl SummaryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// For a recording made with `--phase-peaks` when no metadata is given to `finish`.
    pub fn with_phase_peaks(mut self, on: bool) -> Self {
        self.phase_peaks = on;
        self
    }

    pub fn push(&mut self, s: &Sample) {
        self.phases.push(s);
        self.gpu.push(s);
        if self.timeline.push(s).new_session {
            self.missed_done += self.missed_session;
            self.missed_session = 0;
        }
        if matches!(s.event, Some(Event::Restart(_))) {
            self.restarts += 1;
        }
        self.samples += 1;
        self.first_unix_ms.get_or_insert(s.unix_ms);
        self.last_unix_ms = s.unix_ms;
        self.missed_session = self.missed_session.max(s.missed_ticks);
        if self.peak.as_ref().is_none_or(|p| s.rss_bytes > p.rss_bytes) {
            self.peak = Some(s.clone());
            self.pss_at_peak = s.pss_bytes;
        }
        if self.samples == 1 {
            self.first_elapsed_s = s.elapsed_s;
        }
        self.last_elapsed_s = s.elapsed_s;
        self.max_processes = self.max_processes.max(s.processes);
        self.pss.push(s);
        self.max_top_rss = self.max_top_rss.max(s.top_rss_bytes);
        self.max_hwm = self.max_hwm.max(s.hwm_bytes);
        if self.samples == 1 {
            self.first_hwm = s.hwm_bytes;
        } else {
            self.max_hwm_later = Some(self.max_hwm_later.unwrap_or(0).max(s.hwm_bytes));
        }
        self.max_hwm_sum = self.max_hwm_sum.max(s.hwm_sum_bytes);
        self.departed += s.departed as u64;
        if s.processes > 1 || s.departed > 0 {
            self.single_process = false;
        }
        self.rss_sum += s.rss_bytes as f64;
        self.min_rss = self.min_rss.min(s.rss_bytes);
        self.hist.add(s.rss_bytes);
    }

    /// Finishes the summary. `meta` and `end` come from the recording when it has them.
    pub fn finish(
        &self,
        file: Option<String>,
        meta: Option<&Meta>,
        end: Option<&EndInfo>,
        truncated_line: Option<u64>,
    ) -> Summary {
        let peak = self.peak.clone().unwrap_or_default();
        let (window, kernel_peak, lifetime_peak) = self.kernel_peak(meta, end);
        let bound = meta.and_then(|m| {
            m.online_cpus
                .map(|c| crate::model::peak::batching_bound_bytes(c, m.page_size_bytes))
        });
        // The number to hold against the kernel's peak of one process: for a single process
        // its RSS; for a tree, the largest process's RSS.
        let sampled_one = if self.single_process {
            peak.rss_bytes
        } else {
            self.max_top_rss
        };
        let mut warnings = Vec::new();
        if let Some((kernel_peak, _)) = kernel_peak.filter(|&(k, _)| {
            self.samples > 0 && (sampled_one as f64) < MISSED_PEAK_RATIO * k as f64
        }) {
            warnings.push(format!(
                "warning: the sampled peak ({}) is {:.0}% of the kernel's peak ({}): the interval missed the peak; trust the kernel's number or sample faster",
                fmt_bytes(sampled_one),
                100.0 * sampled_one as f64 / kernel_peak as f64,
                fmt_bytes(kernel_peak)
            ));
        }
        if meta.is_none() && window == KernelPeakWindow::BeforeRecording {
            warnings.push(
                "note: no metadata: whether memmon launched the target cannot be told, so a high-water mark that never rose above its first value is taken as set before the recording".into(),
            );
        }
        if let Some(line) = truncated_line {
            warnings.push(format!(
                "note: line {line} is incomplete (the recorder was stopped while writing it) and was skipped"
            ));
        }
        let missed = self.missed_done + self.missed_session;
        if missed > 0 {
            warnings.push(format!(
                "note: {missed} ticks could not be taken on time (the machine or memmon was too busy for the interval)"
            ));
        }
        let duration_s = self.timeline.recorded_s();
        let cgroup = end.and_then(|e| e.cgroup.as_ref()).map(CgroupSummary::of);
        let exit_records = end.is_some_and(EndInfo::exit_records_complete);
        // A launched command's ru_maxrss holds every process of its tree that ended (waited for
        // in the tree, or reaped by memmon): the recording's kernel peak misses none of them.
        let rusage = end.is_some_and(|e| e.rusage_maxrss_bytes.is_some());
        let mut scope =
            PeakScope::of_kernel_counter(self.max_processes, self.departed, exit_records || rusage);
        // ru_maxrss above every VmHWM the rows read is a descendant's peak (one never seen at its
        // peak, or at all): the largest process's, not the command's own.
        let bound_now = bound.unwrap_or_else(crate::model::peak::local_batching_bound_bytes);
        if scope == PeakScope::Process
            && kernel_peak.is_some_and(|(k, src)| {
                src == PeakSource::RuMaxrss && k > self.max_hwm.saturating_add(bound_now)
            })
        {
            scope = PeakScope::LargestProcess;
        }
        if scope.is_partial() {
            warnings.push(self.exit_records_warning(end));
        }
        let recording_peak = match cgroup.as_ref().filter(|c| c.own) {
            // memmon's own cgroup held the launched tree alone: its peak is the tree's.
            Some(CgroupSummary {
                peak_bytes: Some(p),
                ..
            }) => RecordingPeak {
                bytes: *p,
                source: PeakSource::Cgroup,
                scope: PeakScope::Tree,
            },
            _ => {
                let (bytes, source) =
                    crate::model::peak::choose_peak(kernel_peak, peak.rss_bytes, bound_now);
                RecordingPeak {
                    bytes,
                    source,
                    scope: match source {
                        PeakSource::Sampled if !self.single_process => PeakScope::Tree,
                        PeakSource::Sampled => PeakScope::Process,
                        _ => scope,
                    },
                }
            }
        };
        let mem_total = meta.and_then(|m| m.mem_total_bytes);
        if let Some(c) = &cgroup {
            warnings.extend(c.warnings(mem_total));
        } else if let Some(t) = mem_total.filter(|&t| near(recording_peak.bytes, t)) {
            warnings.push(format!(
                "warning: the peak {} ({}) came within 10% of the machine's memory (MemTotal {})",
                fmt_bytes(recording_peak.bytes),
                recording_peak.source,
                fmt_bytes(t)
            ));
        }
        Summary {
            file,
            samples: self.samples,
            duration_s,
            first_unix_ms: self.first_unix_ms.unwrap_or(0),
            last_unix_ms: self.last_unix_ms,
            peak_rss_bytes: peak.rss_bytes,
            peak_unix_ms: peak.unix_ms,
            peak_elapsed_s: peak.elapsed_s,
            peak_pid: peak.top_pid,
            peak_processes: peak.processes,
            kernel_peak_rss_bytes: kernel_peak.map(|(k, _)| k),
            kernel_peak_source: kernel_peak.map(|(_, src)| src),
            kernel_peak_scope: scope,
            recording_peak,
            cgroup,
            kernel_peak_window: window,
            kernel_peak_exact_within_bytes: bound,
            kernel_peak_exact_until_s: self.exact_until(meta, end),
            lifetime_peak_rss_bytes: lifetime_peak,
            // Not a bound when processes left unrecorded: their marks after the last read
            // are missing from the sum.
            tree_hwm_sum_bytes: if self.single_process
                || self.max_hwm_sum == 0
                || scope.is_partial()
            {
                None
            } else {
                Some(self.max_hwm_sum)
            },
            rusage_maxrss_bytes: end.and_then(|e| e.rusage_maxrss_bytes),
            idle_rss_bytes: self.hist.percentile(IDLE_PERCENTILE).unwrap_or(0),
            min_rss_bytes: if self.samples > 0 { self.min_rss } else { 0 },
            mean_rss_bytes: if self.samples > 0 {
                (self.rss_sum / self.samples as f64).round() as u64
            } else {
                0
            },
            peak_pss_bytes: self
                .pss
                .reads(self.first_elapsed_s, self.last_elapsed_s)
                .filter(|r| r.is_peak)
                .map(|r| r.largest_bytes),
            pss: self.pss.reads(self.first_elapsed_s, self.last_elapsed_s),
            pss_at_peak_bytes: self.pss_at_peak,
            max_processes: self.max_processes,
            departed: self.departed,
            missed_ticks: missed,
            restarts: self.restarts,
            interval: meta.map(|m| m.interval.clone()),
            target: meta
                .map(|m| format!("{} {} ({})", m.target.mode, m.target.spec, m.target.comm)),
            ended: end.map(describe_end).unwrap_or_else(|| {
                "unknown (no end record: the recorder was killed or is still running)".into()
            }),
            end: end.cloned(),
            gpu: self.gpu.finish(meta),
            truncated_line,
            warnings,
            spans: self.phases.finish(
                meta.map_or(self.phase_peaks, |m| m.phase_peaks)
                    && end.is_none_or(|e| e.peak_reset_failures == 0),
                bound_now,
                SpanEnd {
                    exit_records,
                    exit_peak_after_last_sample: end
                        .and_then(|e| e.exit_peak_after_last_sample_bytes),
                },
            ),
        }
    }
}

impl SummaryBuilder {
    /// What the kernel peak lacks when its scope is `largest-process-seen` (processes left the
    /// tree and not every exit record was read): a warning saying why, with how to get them all.
    fn exit_records_warning(&self, end: Option<&EndInfo>) -> String {
        let how = "memmon reads them as root or with CAP_NET_ADMIN; a cgroup of the tree's own (record -- COMMAND as root, or --cgroup) gives the tree's exact peak, each page once";
        let lost = end.map_or(0, |e| e.exit_records_lost);
        let why = match end.and_then(|e| e.exit_records.as_deref()) {
            Some(crate::format::meta::EXIT_RECORDS_READ) => format!(
                "the kernel dropped exit records {lost} time{} (their queue was full)",
                if lost == 1 { "" } else { "s" }
            ),
            Some(why) => format!("exit records were not read ({why})"),
            None => "whether exit records were read is not known (no end record)".into(),
        };
        format!(
            "warning: {} process{} left the tree during the recording and {why}: the kernel peak is the largest VmHWM its samples saw, so a process that peaked after its last sample, or a child born and gone between two samples, may be missing from it ({how})",
            self.departed,
            if self.departed == 1 { "" } else { "es" }
        )
    }

    /// For an attached target that exited and whose exit record was not read: the seconds
    /// between the last sample and the exit (the end record's time, taken as memmon saw it go).
    fn exact_until(&self, meta: Option<&Meta>, end: Option<&EndInfo>) -> Option<f64> {
        let (meta, end) = (meta?, end?);
        let attached = meta.target.mode != "command" && end.rusage_maxrss_bytes.is_none();
        (attached
            && end.reason == crate::format::meta::EndReason::TargetExited
            && !end.target_exit_read
            && self.samples > 0)
            .then(|| end.ended_unix_ms.saturating_sub(self.last_unix_ms) as f64 / 1000.0)
    }

    /// The recording's kernel peak (with its source), why it counts, and — when the mark was
    /// set before the recording — the process's lifetime peak, reported apart.
    #[allow(clippy::type_complexity)]
    fn kernel_peak(
        &self,
        meta: Option<&Meta>,
        end: Option<&EndInfo>,
    ) -> (KernelPeakWindow, Option<(u64, PeakSource)>, Option<u64>) {
        let rusage = end.and_then(|e| e.rusage_maxrss_bytes).unwrap_or(0);
        // A peak the kernel's exit records gave (a process that rose after its last sample).
        let exit = end.and_then(|e| e.exit_peak_bytes).unwrap_or(0);
        let max_hwm = self.max_hwm.max(exit);
        let max_hwm_later = match self.max_hwm_later {
            Some(l) => Some(l.max(exit)),
            None if exit > 0 => Some(exit),
            None => None,
        };
        let launched = meta.is_some_and(|m| m.target.mode == "command") || rusage > 0;
        let reset = meta.is_some_and(|m| m.peak_reset_at_start)
            && end.is_none_or(|e| e.peak_reset_failures == 0);
        let with_source = |hwm: u64| {
            if rusage >= hwm {
                (rusage, PeakSource::RuMaxrss)
            } else {
                (hwm, PeakSource::Vmhwm)
            }
        };
        if max_hwm == 0 && rusage == 0 {
            return (KernelPeakWindow::NotRecorded, None, None);
        }
        if launched {
            return (KernelPeakWindow::Launched, Some(with_source(max_hwm)), None);
        }
        match max_hwm_later {
            // Reset right after the first sample: the later rows hold the recording's marks.
            Some(later) if reset && later > 0 => (
                KernelPeakWindow::ResetAtStart,
                Some((later, PeakSource::Vmhwm)),
                None,
            ),
            Some(later) if later > self.first_hwm => (
                KernelPeakWindow::RoseDuringRecording,
                Some((later, PeakSource::Vmhwm)),
                None,
            ),
            _ => (KernelPeakWindow::BeforeRecording, None, Some(max_hwm)),
        }
    }
}

/// True when `v` came within 10% of `limit`.
fn near(v: u64, limit: u64) -> bool {
    limit > 0 && v as f64 >= 0.9 * limit as f64
}

/// A peak with where it comes from and what it is the peak of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RecordingPeak {
    pub bytes: u64,
    pub source: PeakSource,
    pub scope: PeakScope,
}

/// What the summary says of a recording's memory cgroup. Sizes in bytes.
#[derive(Debug, Clone, Serialize)]
pub struct CgroupSummary {
    pub path: String,
    pub version: crate::probe::cgroup::CgroupVersion,
    /// memmon made it for the launched command: it held that tree alone.
    pub own: bool,
    /// The cgroup's peak (each page once, page cache included), when reached during the
    /// recording; `None` when the kernel has no peak file or the peak predates the recording.
    pub peak_bytes: Option<u64>,
    pub peak_source: PeakSource,
    pub peak_scope: PeakScope,
    /// The peak file's value when it was set before the recording began (a cgroup memmon did
    /// not make whose peak never rose): the cgroup's lifetime peak, not this recording's.
    pub lifetime_peak_bytes: Option<u64>,
    pub peak_counter: String,
    /// The largest memory.current sampled and its anon and file (page cache) parts then.
    pub largest_current_bytes: u64,
    pub anon_at_largest_bytes: u64,
    pub file_at_largest_bytes: u64,
    pub limit_bytes: Option<u64>,
    /// OOM kills in the cgroup during the recording (memory.events oom_kill; v1 oom_control).
    pub oom_kills: u64,
    pub events_during: crate::probe::cgroup::CgroupEvents,
    pub moved_out: Vec<i32>,
    pub error: Option<String>,
}

impl CgroupSummary {
    fn of(c: &crate::format::meta::CgroupEnd) -> CgroupSummary {
        CgroupSummary {
            path: c.path.clone(),
            version: c.version,
            own: c.own,
            peak_bytes: c.peak_bytes.filter(|_| c.peak_during_recording),
            peak_source: PeakSource::Cgroup,
            peak_scope: PeakScope::Tree,
            lifetime_peak_bytes: c.peak_bytes.filter(|_| !c.peak_during_recording),
            peak_counter: c.peak_counter.clone(),
            largest_current_bytes: c.largest_current_bytes,
            anon_at_largest_bytes: c.anon_at_largest_bytes,
            file_at_largest_bytes: c.file_at_largest_bytes,
            limit_bytes: c.limit_bytes,
            oom_kills: c.events_during.oom_kill,
            events_during: c.events_during,
            moved_out: c.moved_out.clone(),
            error: c.error.clone(),
        }
    }

    /// The largest number known of the cgroup: its peak, else its largest sampled usage.
    pub fn top_bytes(&self) -> u64 {
        self.peak_bytes.unwrap_or(0).max(self.largest_current_bytes)
    }

    fn warnings(&self, mem_total: Option<u64>) -> Vec<String> {
        let mut w = Vec::new();
        let top = self.top_bytes();
        if let Some(l) = self.limit_bytes.filter(|&l| near(top, l)) {
            w.push(format!(
                "warning: the cgroup's peak {} came within 10% of its limit {} (memory.max): {} left; past it the kernel reclaims, then OOM-kills",
                fmt_bytes(top),
                fmt_bytes(l),
                fmt_bytes(l.saturating_sub(top))
            ));
        }
        if let Some(t) = mem_total.filter(|&t| near(top, t)) {
            w.push(format!(
                "warning: the cgroup's peak {} came within 10% of the machine's memory (MemTotal {})",
                fmt_bytes(top),
                fmt_bytes(t)
            ));
        }
        if self.oom_kills > 0 {
            w.push(format!(
                "warning: {} OOM kill{} in the cgroup {} during the recording (memory.events oom_kill)",
                self.oom_kills,
                if self.oom_kills == 1 { "" } else { "s" },
                self.path
            ));
        }
        if !self.moved_out.is_empty() {
            w.push(format!(
                "note: processes {:?} outlived the command in memmon's cgroup and were moved out of it before it was removed",
                self.moved_out
            ));
        }
        if let Some(e) = &self.error {
            w.push(format!("warning: cgroup {}: {e}", self.path));
        }
        w
    }

    fn render(&self, o: &mut String) {
        let b = |v: u64| format!("{} ({v} bytes)", fmt_bytes(v));
        let whose = if self.own {
            "of the tree, in memmon's own cgroup since the launch"
        } else {
            "of the cgroup"
        };
        match (self.peak_bytes, self.lifetime_peak_bytes) {
            (Some(p), _) => {
                let _ = writeln!(
                    o,
                    "  cgroup peak   {} (exact, {} {whose}: a cgroup counts each page once; page cache included)",
                    b(p),
                    self.peak_counter
                );
            }
            (None, Some(l)) => {
                let _ = writeln!(
                    o,
                    "  cgroup peak   unknown for this recording: {} ({}) was set before it began and did not rise (the cgroup's lifetime peak)",
                    self.peak_counter,
                    b(l)
                );
            }
            (None, None) => {
                let _ = writeln!(
                    o,
                    "  cgroup peak   no peak file ({} needs Linux 5.19); largest sampled usage below",
                    self.peak_counter
                );
            }
        }
        let _ = writeln!(
            o,
            "  cgroup usage  largest sampled {}: anon {}, file (page cache) {}{}",
            b(self.largest_current_bytes),
            fmt_bytes(self.anon_at_largest_bytes),
            fmt_bytes(self.file_at_largest_bytes),
            if self.file_at_largest_bytes > self.anon_at_largest_bytes {
                "; mostly page cache, which the kernel reclaims under pressure: not heap"
            } else {
                ""
            }
        );
        let _ = writeln!(
            o,
            "  cgroup        {} ({}), limit {}, {} OOM kill{} during the recording",
            self.path,
            self.version.name(),
            self.limit_bytes.map_or("none".into(), b),
            self.oom_kills,
            if self.oom_kills == 1 { "" } else { "s" }
        );
    }
}

fn describe_end(e: &EndInfo) -> String {
    let mut s = match e.reason {
        EndReason::TargetExited => "the target exited".to_string(),
        EndReason::Signal => format!(
            "memmon was stopped by {}",
            e.memmon_signal.as_deref().unwrap_or("a signal")
        ),
        EndReason::OutputClosed => "the output was closed (broken pipe)".to_string(),
        other => other.as_str().to_string(),
    };
    if let Some(c) = e.exit_code {
        let _ = write!(s, ", exit code {c}");
    }
    if let Some(sig) = e.exit_signal {
        let _ = write!(
            s,
            ", killed by signal {sig} ({})",
            crate::model::signal::name(sig)
        );
    }
    if let Some(err) = &e.error {
        let _ = write!(s, ": {err}");
    }
    s
}

/// The summary of one recording, as printed and as `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub file: Option<String>,
    pub samples: u64,
    pub duration_s: f64,
    pub first_unix_ms: u64,
    pub last_unix_ms: u64,
    /// The largest sampled RSS of the tree, when and where.
    pub peak_rss_bytes: u64,
    pub peak_unix_ms: u64,
    pub peak_elapsed_s: f64,
    pub peak_pid: i32,
    pub peak_processes: u32,
    /// The kernel's peak reached during the recording: VmHWM (or ru_maxrss of a launched
    /// command, `kernel_peak_source`). For a single process it is that process's peak; for a
    /// tree, its largest process's. `None` when the kernel cannot tell (`kernel_peak_window`).
    pub kernel_peak_rss_bytes: Option<u64>,
    pub kernel_peak_source: Option<PeakSource>,
    pub kernel_peak_scope: PeakScope,
    pub kernel_peak_window: KernelPeakWindow,
    /// How far the kernel's batched counters may be off (`crate::model::peak::batching_bound_bytes`),
    /// when the recording says how many CPUs the machine had.
    pub kernel_peak_exact_within_bytes: Option<u64>,
    /// An attached target that exited without its exit record read (no taskstats): its kernel
    /// peak is exact up to the last sample only, and this is how many seconds before the exit
    /// that sample was (a rise in between is not seen). `None` when the peak holds to the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_peak_exact_until_s: Option<f64>,
    /// The recording's peak as budgets (`--max-peak`) check it: the peak of memmon's own
    /// cgroup for a launched tree, else the kernel's peak unless the sampled one exceeds it.
    pub recording_peak: RecordingPeak,
    /// The memory cgroup recorded (`--cgroup`, or memmon's own for a launched command).
    pub cgroup: Option<CgroupSummary>,
    /// The high-water mark of an attached process that was set before the recording began: its
    /// lifetime peak, not the recording's (never compared, never warned about).
    pub lifetime_peak_rss_bytes: Option<u64>,
    /// For a tree: the largest sum of the members' VmHWM — an upper bound of the tree's peak.
    pub tree_hwm_sum_bytes: Option<u64>,
    pub rusage_maxrss_bytes: Option<u64>,
    /// The 10th percentile of sampled RSS: 90% of samples were at or above it.
    pub idle_rss_bytes: u64,
    pub min_rss_bytes: u64,
    pub mean_rss_bytes: u64,
    /// The largest PSS sum of the tree read, only when the reads make it a peak (at least two,
    /// the last in the second half of the recording; see [`PssReads`]).
    pub peak_pss_bytes: Option<u64>,
    /// What was read of PSS (`--pss`), peak or not.
    pub pss: Option<PssReads>,
    /// PSS sum of the tree on the row of the sampled RSS peak, when it was read there.
    pub pss_at_peak_bytes: Option<u64>,
    /// The most processes the tree had at one tick (above 1, RSS sums count shared pages once
    /// per process that maps them).
    pub max_processes: u32,
    /// Processes that left the tree during the recording (the `departed` column's sum).
    pub departed: u64,
    pub missed_ticks: u64,
    pub restarts: u64,
    pub interval: Option<String>,
    pub target: Option<String>,
    pub ended: String,
    pub end: Option<EndInfo>,
    /// GPU memory, when the recording has it (`record --gpu`, or NVML loaded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::analysis::gpu::GpuPeak>,
    pub truncated_line: Option<u64>,
    pub warnings: Vec<String>,
    /// `phases` and `runs` (analysis/phases.rs).
    #[serde(flatten)]
    pub spans: Phases,
}

impl Summary {
    /// For a peak of several processes: `, 9 processes: RSS sum over 9 processes, shared pages
    /// counted in each; PSS sum 300 MiB at that tick (each page once)`.
    fn tree_words(&self) -> String {
        if self.peak_processes <= 1 {
            return String::new();
        }
        let mut w = format!(
            ", {} processes: {}",
            self.peak_processes,
            rss_sum_words(self.peak_processes)
        );
        match (self.pss_at_peak_bytes, &self.pss) {
            (Some(p), _) => {
                let _ = write!(
                    w,
                    "; PSS sum at that tick {} (each page once)",
                    fmt_bytes(p)
                );
            }
            (None, Some(r)) => {
                let _ = write!(w, "; {} of the tree (each page once)", r.describe());
            }
            (None, None) => w.push_str(" (record with --pss for a sum that counts them once)"),
        }
        w
    }

    /// The largest processes of a tree by their peak (VmHWM), from the end record.
    fn render_processes(&self, o: &mut String) {
        let Some(end) = &self.end else {
            return;
        };
        if end.processes.len() < 2 {
            return;
        }
        let shown = &end.processes[..end.processes.len().min(PROCESSES_SHOWN)];
        let _ = writeln!(
            o,
            "  processes     the {} largest by peak (VmHWM, exact per process) of {} listed:",
            shown.len(),
            end.processes.len()
        );
        let name_w = shown
            .iter()
            .map(|p| process_name(p).chars().count())
            .max()
            .unwrap_or(0);
        for p in shown {
            let name = process_name(p);
            let _ = writeln!(
                o,
                "                {name}{}  PID {:>7}  peak {:>10} ({} bytes)",
                " ".repeat(name_w - name.chars().count()),
                p.pid,
                fmt_bytes(p.hwm_bytes),
                p.hwm_bytes
            );
        }
    }

    /// The summary of a recording named `file`, from the builder that saw its samples and what
    /// reading it found besides them (`info`).
    pub fn of_read(b: SummaryBuilder, file: String, info: &ReadInfo) -> Summary {
        let mut sum = b.finish(
            Some(file),
            info.meta.as_ref(),
            info.end.as_ref(),
            info.truncated_line,
        );
        // A file another tool wrote: say how it was read and what it lacks.
        if let Some(source) = &info.source {
            sum.ended = format!("not recorded in {source}");
        }
        sum.warnings
            .extend(info.notes.iter().map(|n| format!("note: {n}")));
        sum
    }

    /// The kernel peak's lines: the recording's own, or why there is none.
    fn render_kernel_peak(&self, o: &mut String) {
        let b = |v: u64| format!("{} ({v} bytes)", fmt_bytes(v));
        let mut exact = exact_within(self.kernel_peak_exact_within_bytes);
        let until = self.kernel_peak_exact_until_s.map(|gap| {
            let why = self
                .end
                .as_ref()
                .and_then(|e| e.exit_records.as_deref())
                .unwrap_or("not read");
            format!(
                "exact up to the last sample, {} before the target exited; a rise after it is not seen (exit records: {why})",
                fmt_seconds(gap)
            )
        });
        if let Some(u) = &until {
            exact = u.clone();
        }
        let at_least = if self.kernel_peak_scope.is_partial() {
            exact = "a lower bound (see the warning below)".into();
            "≥ "
        } else {
            ""
        };
        match (self.kernel_peak_rss_bytes, self.kernel_peak_source) {
            (Some(k), Some(source)) => {
                let _ = writeln!(
                    o,
                    "  kernel peak   {at_least}{} ({exact}, {source} {}, {})",
                    b(k),
                    self.kernel_peak_scope,
                    self.kernel_peak_window
                );
            }
            _ if self.kernel_peak_window == KernelPeakWindow::BeforeRecording => {
                let _ = writeln!(
                    o,
                    "  kernel peak   unknown for this recording: the high-water mark (VmHWM) was set before it began and did not rise; record with --reset-peak for an exact peak from the start"
                );
                if let Some(l) = self.lifetime_peak_rss_bytes {
                    let _ = writeln!(
                        o,
                        "  lifetime peak {} (kernel VmHWM {}, since it started, before this recording: not this recording's peak)",
                        b(l),
                        self.kernel_peak_scope
                    );
                }
                if let Some(u) = &until {
                    let _ = writeln!(o, "  at exit       {u}");
                }
            }
            _ => {
                let _ = writeln!(o, "  kernel peak   not in this recording (no VmHWM: a spike between samples would be missed)");
            }
        }
    }

    /// The human-readable summary. Sizes in binary units (GiB = 2^30 bytes) with exact bytes.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let b = |v: u64| format!("{} ({v} bytes)", fmt_bytes(v));
        if let Some(f) = &self.file {
            let _ = writeln!(o, "{f}");
        }
        if let Some(t) = &self.target {
            let _ = writeln!(o, "  target        {t}");
        }
        if self.samples == 0 {
            let _ = writeln!(o, "  no samples");
            for w in &self.warnings {
                let _ = writeln!(o, "  {w}");
            }
            return o;
        }
        // Imported files may lack a clock (unix_ms 0) or a PID (0): print only what is known.
        let _ = writeln!(
            o,
            "  sampled peak  {} at {}{}{}",
            b(self.peak_rss_bytes),
            if self.peak_unix_ms > 0 {
                format!(
                    "{} (+{})",
                    fmt_unix_ms(self.peak_unix_ms),
                    fmt_seconds(self.peak_elapsed_s)
                )
            } else {
                format!("+{} (elapsed)", fmt_seconds(self.peak_elapsed_s))
            },
            if self.peak_pid > 0 {
                format!(", PID {}", self.peak_pid)
            } else {
                String::new()
            },
            self.tree_words(),
        );
        self.render_kernel_peak(&mut o);
        if let Some(c) = &self.cgroup {
            c.render(&mut o);
        }
        if let Some(sum) = self.tree_hwm_sum_bytes {
            let _ = writeln!(
                o,
                "  tree bound    {} (sum of the processes' VmHWM: an upper bound of the tree's peak, not exact)",
                b(sum)
            );
        }
        if let Some(r) = &self.pss {
            let what = "sum of PSS: shared pages divided among the processes that map them";
            if r.is_peak {
                let _ = writeln!(
                    o,
                    "  peak PSS      {} at +{} ({what}; largest of {} reads, +{} to +{})",
                    b(r.largest_bytes),
                    fmt_seconds(r.largest_elapsed_s),
                    r.reads,
                    fmt_seconds(r.first_elapsed_s),
                    fmt_seconds(r.last_elapsed_s)
                );
            } else {
                let _ = writeln!(
                    o,
                    "  PSS           {} ({}; {what})",
                    b(r.largest_bytes),
                    r.reads_note()
                );
            }
        }
        if let Some(end) = &self.end {
            for u in &end.pss_unread {
                let _ = writeln!(
                    o,
                    "  PSS unread    PID {} ({}): {}, missing from {} read{}; those ticks have no PSS",
                    u.pid,
                    u.comm,
                    u.reason.describe(),
                    u.reads,
                    if u.reads == 1 { "" } else { "s" }
                );
            }
        }
        if let Some(g) = &self.gpu {
            o.push_str(&g.render());
        }
        let sum_note = if self.max_processes > 1 {
            format!(
                ", RSS sum over up to {} processes, shared pages counted in each",
                self.max_processes
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "  idle floor    {} (10th percentile of sampled RSS{sum_note})",
            b(self.idle_rss_bytes)
        );
        if sum_note.is_empty() {
            let _ = writeln!(o, "  mean RSS      {}", b(self.mean_rss_bytes));
        } else {
            let _ = writeln!(
                o,
                "  mean RSS      {} ({})",
                b(self.mean_rss_bytes),
                &sum_note[2..]
            );
        }
        self.render_processes(&mut o);
        let _ = writeln!(
            o,
            "  duration      {}{}, {} samples{}, {} missed ticks, {} restarts",
            fmt_seconds(self.duration_s),
            if self.first_unix_ms > 0 {
                format!(" from {}", fmt_unix_ms(self.first_unix_ms))
            } else {
                String::new()
            },
            self.samples,
            self.interval
                .as_ref()
                .map(|i| format!(" every {i}"))
                .unwrap_or_default(),
            self.missed_ticks,
            self.restarts
        );
        let _ = writeln!(o, "  ended         {}", self.ended);
        let _ = writeln!(
            o,
            "  units         KiB, MiB, GiB = 2^10, 2^20, 2^30 bytes; exact bytes in parentheses"
        );
        o.push_str(&self.spans.render());
        for w in &self.warnings {
            let _ = writeln!(o, "  {w}");
        }
        o
    }
}

/// A histogram of byte values with 1/1024-octave buckets (each under 0.1% wide) that keeps the
/// smallest exact value seen in each bucket, so a percentile is reported as a real sample.
struct LogHistogram {
    counts: Vec<u32>,
    mins: Vec<u64>,
    total: u64,
}

const SUB_BITS: u32 = 10;

impl LogHistogram {
    fn new() -> Self {
        LogHistogram {
            counts: Vec::new(),
            mins: Vec::new(),
            total: 0,
        }
    }

    fn bucket(v: u64) -> usize {
        if v < (1 << SUB_BITS) {
            return v as usize;
        }
        let log = 63 - v.leading_zeros();
        let sub = (v >> (log - SUB_BITS)) as usize & ((1 << SUB_BITS) - 1);
        (((log - SUB_BITS + 1) as usize) << SUB_BITS) + sub
    }

    fn add(&mut self, v: u64) {
        let b = Self::bucket(v);
        if b >= self.counts.len() {
            self.counts.resize(b + 1, 0);
            self.mins.resize(b + 1, u64::MAX);
        }
        self.counts[b] = self.counts[b].saturating_add(1);
        self.mins[b] = self.mins[b].min(v);
        self.total += 1;
    }

    fn percentile(&self, p: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((p / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return Some(self.mins[b]);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(elapsed: f64, rss: u64, hwm: u64) -> Sample {
        Sample {
            unix_ms: 1_000_000 + (elapsed * 1000.0) as u64,
            elapsed_s: elapsed,
            rss_bytes: rss,
            top_rss_bytes: rss,
            hwm_bytes: hwm,
            hwm_sum_bytes: hwm,
            processes: 1,
            top_pid: 1,
            ..Sample::default()
        }
    }

    #[test]
    fn peak_is_the_largest_sample_with_its_time() {
        let mut b = SummaryBuilder::new();
        for (t, rss) in [(0.0, 10), (1.0, 50), (2.0, 30), (3.0, 10)] {
            b.push(&s(t, rss << 20, 50 << 20));
        }
        let sum = b.finish(None, Some(&meta("command", false)), None, None);
        assert_eq!(sum.peak_rss_bytes, 50 << 20);
        assert_eq!(sum.peak_elapsed_s, 1.0);
        assert_eq!(sum.duration_s, 3.0);
        assert!(
            !sum.warnings.iter().any(|w| w.contains("exit record")),
            "{:?}",
            sum.warnings
        );
    }

    #[test]
    fn a_missed_peak_warns_and_the_kernel_peak_is_given() {
        let mut b = SummaryBuilder::new();
        b.push(&s(0.0, 100 << 20, 100 << 20));
        b.push(&s(1.0, 100 << 20, 300 << 20));
        let sum = b.finish(None, None, None, None);
        assert_eq!(sum.kernel_peak_rss_bytes, Some(300 << 20));
        assert_eq!(sum.kernel_peak_source, Some(PeakSource::Vmhwm));
        assert_eq!(
            sum.kernel_peak_window,
            KernelPeakWindow::RoseDuringRecording
        );
        assert!(sum.warnings[0].starts_with("warning:"));
    }

    fn meta(mode: &str, reset: bool) -> Meta {
        Meta {
            mem_total_bytes: None,
            format: "memmon-recording".into(),
            schema_version: 1,
            memmon_version: "0".into(),
            host: "h".into(),
            kernel: "6.1".into(),
            page_size_bytes: 4096,
            started_unix_ms: 0,
            interval_s: 1.0,
            interval: "1s".into(),
            target: crate::format::meta::TargetMeta {
                mode: mode.into(),
                spec: "1".into(),
                pid: 1,
                start_time_ticks: 0,
                comm: "d".into(),
                cmdline: "d".into(),
            },
            children: true,
            phase_peaks: false,
            peak_reset_at_start: reset,
            online_cpus: Some(2),
            sources: vec![],
            columns: vec![],
            gpu: None,
            end: None,
            earlier_sessions: vec![],
        }
    }

    #[test]
    fn a_high_water_mark_that_predates_an_attached_recording_is_its_lifetime_peak_only() {
        let mut b = SummaryBuilder::new();
        for t in 0..5 {
            b.push(&s(t as f64, 10 << 20, 800 << 20));
        }
        let sum = b.finish(None, Some(&meta("pid", false)), None, None);
        assert_eq!(sum.kernel_peak_rss_bytes, None);
        assert_eq!(sum.kernel_peak_window, KernelPeakWindow::BeforeRecording);
        assert_eq!(sum.lifetime_peak_rss_bytes, Some(800 << 20));
        assert!(
            !sum.warnings.iter().any(|w| w.contains("exit record")),
            "{:?}",
            sum.warnings
        );
        let text = sum.render();
        assert!(text.contains("record with --reset-peak"), "{text}");
        assert!(text.contains("lifetime peak 800.0 MiB"), "{text}");
    }

    #[test]
    fn after_a_reset_at_the_start_the_later_rows_hold_the_recordings_peak() {
        let mut b = SummaryBuilder::new();
        b.push(&s(0.0, 10 << 20, 800 << 20));
        b.push(&s(1.0, 10 << 20, 10 << 20));
        b.push(&s(2.0, 10 << 20, 40 << 20));
        let sum = b.finish(None, Some(&meta("pid", true)), None, None);
        assert_eq!(sum.kernel_peak_rss_bytes, Some(40 << 20));
        assert_eq!(sum.kernel_peak_window, KernelPeakWindow::ResetAtStart);
        assert_eq!(sum.kernel_peak_exact_within_bytes, Some(512 << 10));
        assert!(
            sum.render().contains("exact within 512.0 KiB"),
            "{}",
            sum.render()
        );
    }

    #[test]
    fn a_launched_commands_high_water_mark_counts_from_its_first_row() {
        let mut b = SummaryBuilder::new();
        b.push(&s(0.0, 10 << 20, 90 << 20));
        b.push(&s(1.0, 10 << 20, 90 << 20));
        let sum = b.finish(None, Some(&meta("command", false)), None, None);
        assert_eq!(sum.kernel_peak_rss_bytes, Some(90 << 20));
        assert_eq!(sum.kernel_peak_window, KernelPeakWindow::Launched);
    }

    /// An attached target that rose from 100 to 200 MiB between samples, then exited 1.5 s
    /// after the last one; `exit_peak`: what its exit record said (None: no record read).
    fn exited_attached(exit_peak: Option<u64>, records: &str) -> Summary {
        let mut b = SummaryBuilder::new();
        b.push(&s(0.0, 100 << 20, 100 << 20));
        b.push(&s(2.0, 200 << 20, 200 << 20));
        let end = EndInfo {
            ended_unix_ms: 1_000_000 + 3_500,
            reason: crate::format::meta::EndReason::TargetExited,
            exit_records: Some(records.into()),
            exit_peak_bytes: exit_peak,
            target_exit_read: exit_peak.is_some(),
            ..EndInfo::default()
        };
        b.finish(None, Some(&meta("pid", false)), Some(&end), None)
    }

    #[test]
    fn an_exit_record_makes_the_peak_at_exit_the_kernel_peak() {
        let sum = exited_attached(Some(400 << 20), "taskstats");
        assert_eq!(sum.kernel_peak_rss_bytes, Some(400 << 20));
        assert_eq!(sum.kernel_peak_exact_until_s, None);
        assert!(sum.render().contains("exact within"), "{}", sum.render());
    }

    #[test]
    fn without_an_exit_record_the_peak_is_exact_only_up_to_the_last_sample() {
        let sum = exited_attached(None, "off (--no-taskstats)");
        assert_eq!(sum.kernel_peak_rss_bytes, Some(200 << 20));
        assert_eq!(sum.kernel_peak_exact_until_s, Some(1.5));
        let text = sum.render();
        assert!(
            text.contains("exact up to the last sample, 1.50 s before the target exited; a rise after it is not seen (exit records: off (--no-taskstats))"),
            "{text}"
        );
        assert!(!text.contains("exact within"), "{text}");
    }

    /// A daemon (attached) whose worker peaked at 900 MiB and left between two samples; the
    /// recording ended by `--duration`.
    fn forking_daemon(records: &str, lost: u64) -> Summary {
        let mut b = SummaryBuilder::new();
        b.push(&s(0.0, 100 << 20, 100 << 20));
        b.push(&Sample {
            departed: 1,
            ..s(1.0, 100 << 20, 900 << 20)
        });
        b.push(&s(2.0, 100 << 20, 100 << 20));
        let end = EndInfo {
            reason: crate::format::meta::EndReason::Duration,
            exit_records: Some(records.into()),
            exit_records_lost: lost,
            ..EndInfo::default()
        };
        b.finish(None, Some(&meta("pid", false)), Some(&end), None)
    }

    #[test]
    fn a_worker_that_left_with_its_exit_record_read_is_the_largest_processs_exact_peak() {
        let sum = forking_daemon("taskstats", 0);
        assert_eq!(sum.kernel_peak_rss_bytes, Some(900 << 20));
        assert_eq!(sum.kernel_peak_scope, PeakScope::LargestProcess);
        assert_eq!(sum.departed, 1);
        assert!(
            !sum.warnings.iter().any(|w| w.contains("exit record")),
            "{:?}",
            sum.warnings
        );
        assert!(sum.render().contains("exact within"), "{}", sum.render());
    }

    #[test]
    fn processes_that_left_without_exit_records_make_the_kernel_peak_a_lower_bound() {
        for (records, lost, why) in [
            (
                "off (--no-taskstats)",
                0,
                "exit records were not read (off (--no-taskstats))",
            ),
            (
                "taskstats",
                3,
                "the kernel dropped exit records 3 times (their queue was full)",
            ),
        ] {
            let sum = forking_daemon(records, lost);
            assert_eq!(sum.kernel_peak_scope, PeakScope::LargestProcessSeen);
            assert_eq!(sum.tree_hwm_sum_bytes, None, "not an upper bound then");
            let text = sum.render();
            assert!(text.contains("kernel peak   ≥ 900.0 MiB"), "{text}");
            assert!(!text.contains("exact within"), "{text}");
            assert!(
                text.contains(&format!(
                    "warning: 1 process left the tree during the recording and {why}"
                )),
                "{text}"
            );
        }
    }

    #[test]
    fn idle_floor_ignores_a_short_start_up() {
        let mut b = SummaryBuilder::new();
        b.push(&s(0.0, 1 << 20, 1 << 20));
        for i in 1..100 {
            b.push(&s(
                i as f64,
                if i % 10 == 0 { 200 << 20 } else { 45 << 20 },
                200 << 20,
            ));
        }
        let sum = b.finish(None, None, None, None);
        assert_eq!(sum.idle_rss_bytes, 45 << 20);
        assert_eq!(sum.min_rss_bytes, 1 << 20);
    }

    #[test]
    fn a_refused_peak_reset_makes_phase_peaks_not_exact() {
        let mut b = SummaryBuilder::new().with_phase_peaks(true);
        let mut m = s(1.0, 50 << 20, 300 << 20);
        m.event = Some(Event::Mark("idle".into()));
        b.push(&m);
        b.push(&s(2.0, 50 << 20, 300 << 20));
        let exact = b.finish(None, None, None, None);
        assert_eq!(exact.spans.phases[0].kernel_peak_rss_bytes, Some(300 << 20));
        let end = EndInfo {
            peak_reset_failures: 1,
            ..EndInfo::default()
        };
        let refused = b.finish(None, None, Some(&end), None);
        assert_eq!(refused.spans.phases[0].kernel_peak_rss_bytes, None);
        assert_eq!(refused.spans.phases[0].peak_rss_bytes, 50 << 20);
    }

    #[test]
    fn appended_sessions_add_their_durations() {
        let mut b = SummaryBuilder::new();
        let mut first = s(0.0, 1, 1);
        first.event = Some(Event::Start);
        b.push(&first);
        b.push(&s(10.0, 1, 1));
        let mut again = s(0.0, 1, 1);
        again.event = Some(Event::Start);
        b.push(&again);
        b.push(&s(5.0, 1, 1));
        assert_eq!(b.finish(None, None, None, None).duration_s, 15.0);
    }

    fn tree_row(elapsed: f64, rss: u64, processes: u32, pss: Option<u64>) -> Sample {
        Sample {
            processes,
            pss_bytes: pss,
            ..s(elapsed, rss, rss / processes as u64)
        }
    }

    #[test]
    fn one_pss_read_at_the_start_is_not_a_peak() {
        let mut b = SummaryBuilder::new();
        b.push(&tree_row(0.0, 90 << 20, 9, Some(30 << 20)));
        for t in 1..20 {
            b.push(&tree_row(t as f64, 900 << 20, 9, None));
        }
        let sum = b.finish(None, None, None, None);
        assert_eq!(sum.peak_pss_bytes, None);
        let reads = sum.pss.unwrap();
        assert_eq!((reads.reads, reads.is_peak), (1, false));
        let text = sum.render();
        assert!(
            text.contains(
                "  PSS           30.00 MiB (31457280 bytes) (1 read at +0 µs, not a peak;"
            ),
            "{text}"
        );
        assert!(!text.contains("peak PSS"), "{text}");
    }

    #[test]
    fn pss_reads_only_near_the_start_are_not_a_peak_but_covering_reads_are() {
        let mut b = SummaryBuilder::new();
        b.push(&tree_row(0.0, 90 << 20, 9, Some(30 << 20)));
        b.push(&tree_row(1.0, 90 << 20, 9, Some(31 << 20)));
        b.push(&tree_row(10.0, 90 << 20, 9, None));
        assert_eq!(b.finish(None, None, None, None).peak_pss_bytes, None);
        b.push(&tree_row(10.5, 90 << 20, 9, Some(29 << 20)));
        let sum = b.finish(None, None, None, None);
        assert_eq!(sum.peak_pss_bytes, Some(31 << 20));
        assert!(sum.render().contains("peak PSS      31.00 MiB"));
    }

    #[test]
    fn a_tree_peak_says_its_rss_sum_counts_shared_pages_in_each_process() {
        let mut b = SummaryBuilder::new();
        b.push(&tree_row(0.0, 100 << 20, 9, Some(40 << 20)));
        b.push(&tree_row(1.0, 1600 << 20, 9, Some(300 << 20)));
        b.push(&tree_row(2.0, 100 << 20, 9, Some(40 << 20)));
        let text = b.finish(None, None, None, None).render();
        let peak = text.lines().find(|l| l.contains("sampled peak")).unwrap();
        assert!(
            peak.contains("9 processes: RSS sum over 9 processes, shared pages counted in each; PSS sum at that tick 300.0 MiB (each page once)"),
            "{peak}"
        );
        for line in ["idle floor", "mean RSS"] {
            let l = text.lines().find(|l| l.contains(line)).unwrap();
            assert!(l.contains("shared pages counted in each"), "{l}");
        }
    }

    #[test]
    fn a_single_process_needs_no_shared_pages_note() {
        let mut b = SummaryBuilder::new();
        b.push(&s(0.0, 10 << 20, 10 << 20));
        assert!(!b
            .finish(None, None, None, None)
            .render()
            .contains("shared pages"));
    }

    #[test]
    fn the_largest_processes_and_unread_pss_come_from_the_end_record() {
        use crate::format::meta::{PssUnread, PssUnreadReason};
        let mut b = SummaryBuilder::new();
        b.push(&tree_row(0.0, 100 << 20, 7, None));
        let end = EndInfo {
            processes: (1..=7)
                .map(|i| ProcessRecord {
                    pid: 100 + i,
                    start_time_ticks: 0,
                    comm: format!("worker{i}"),
                    cmdline: if i == 1 {
                        String::new()
                    } else {
                        format!("worker{i} --serve")
                    },
                    hwm_bytes: (8 - i as u64) << 20,
                })
                .collect(),
            pss_unread: vec![PssUnread {
                pid: 101,
                comm: "worker1".into(),
                reason: PssUnreadReason::Refused,
                reads: 3,
            }],
            ..EndInfo::default()
        };
        let text = b.finish(None, None, Some(&end), None).render();
        assert!(
            text.contains("the 5 largest by peak (VmHWM, exact per process) of 7 listed"),
            "{text}"
        );
        assert!(
            text.contains("worker1          PID     101  peak   7.00 MiB (7340032 bytes)"),
            "{text}"
        );
        assert!(
            text.contains("worker2 --serve  PID     102  peak   6.00 MiB (6291456 bytes)"),
            "{text}"
        );
        assert!(text.contains("worker5"), "{text}");
        assert!(!text.contains("worker6"), "{text}");
        assert!(
            text.contains(
                "PID 101 (worker1): smaps_rollup refused (permission denied), missing from 3 reads"
            ),
            "{text}"
        );
    }

    #[test]
    fn histogram_percentile_is_a_real_value_within_a_tenth_of_a_percent() {
        let mut h = LogHistogram::new();
        for v in 1..=1000u64 {
            h.add(v * 1_000_003);
        }
        let p10 = h.percentile(10.0).unwrap();
        let exact = 100 * 1_000_003u64;
        assert!((p10 as f64 - exact as f64).abs() / (exact as f64) < 0.001);
        assert_eq!(p10 % 1_000_003, 0);
    }
}
