//! The summary of one recording: the sampled peak with its time and process, the kernel's
//! peak (VmHWM, and wait4's ru_maxrss for a launched command) beside it with a warning when
//! sampling missed it, the idle floor, duration, samples, missed ticks, restarts and how the
//! target ended. Built sample by sample in constant memory; the same builder runs inside
//! `record` and over a file in `summary`, so both print the same numbers.

use super::phases::{PhaseBuilder, Phases};
use crate::format::meta::{EndInfo, Meta};
use crate::format::ReadInfo;
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
    /// Durations of finished sessions (each `start` event begins one), plus the current one's.
    done_sessions_s: f64,
    session_first_s: f64,
    session_last_s: f64,
    peak: Option<Sample>,
    max_top_rss: u64,
    max_hwm: u64,
    max_hwm_sum: u64,
    single_process: bool,
    missed_done: u64,
    missed_session: u64,
    restarts: u64,
    rss_sum: f64,
    min_rss: u64,
    max_pss: Option<u64>,
    hist: LogHistogram,
    phases: PhaseBuilder,
    phase_peaks: bool,
}

impl Default for SummaryBuilder {
    fn default() -> Self {
        SummaryBuilder {
            samples: 0,
            first_unix_ms: None,
            last_unix_ms: 0,
            done_sessions_s: 0.0,
            session_first_s: 0.0,
            session_last_s: 0.0,
            peak: None,
            max_top_rss: 0,
            max_hwm: 0,
            max_hwm_sum: 0,
            single_process: true,
            missed_done: 0,
            missed_session: 0,
            restarts: 0,
            rss_sum: 0.0,
            min_rss: u64::MAX,
            max_pss: None,
            hist: LogHistogram::new(),
            phases: PhaseBuilder::new(),
            phase_peaks: false,
        }
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
        let new_session = matches!(s.event, Some(Event::Start)) && self.samples > 0;
        if new_session {
            self.done_sessions_s += self.session_last_s - self.session_first_s;
            self.missed_done += self.missed_session;
            self.missed_session = 0;
        }
        if self.samples == 0 || new_session {
            self.session_first_s = s.elapsed_s;
        }
        if matches!(s.event, Some(Event::Restart(_))) {
            self.restarts += 1;
        }
        self.samples += 1;
        self.first_unix_ms.get_or_insert(s.unix_ms);
        self.last_unix_ms = s.unix_ms;
        self.session_last_s = s.elapsed_s;
        self.missed_session = self.missed_session.max(s.missed_ticks);
        if self.peak.as_ref().is_none_or(|p| s.rss_bytes > p.rss_bytes) {
            self.peak = Some(s.clone());
        }
        self.max_top_rss = self.max_top_rss.max(s.top_rss_bytes);
        self.max_hwm = self.max_hwm.max(s.hwm_bytes);
        self.max_hwm_sum = self.max_hwm_sum.max(s.hwm_sum_bytes);
        if s.processes > 1 {
            self.single_process = false;
        }
        self.rss_sum += s.rss_bytes as f64;
        self.min_rss = self.min_rss.min(s.rss_bytes);
        if let Some(p) = s.pss_bytes {
            self.max_pss = Some(self.max_pss.unwrap_or(0).max(p));
        }
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
        let rusage = end.and_then(|e| e.rusage_maxrss_bytes).unwrap_or(0);
        let kernel_peak = self.max_hwm.max(rusage);
        // The number to hold against the kernel's peak of one process: for a single process
        // its RSS; for a tree, the largest process's RSS.
        let sampled_one = if self.single_process {
            peak.rss_bytes
        } else {
            self.max_top_rss
        };
        let mut warnings = Vec::new();
        if self.samples > 0
            && kernel_peak > 0
            && (sampled_one as f64) < MISSED_PEAK_RATIO * kernel_peak as f64
        {
            warnings.push(format!(
                "warning: the sampled peak ({}) is {:.0}% of the kernel's peak ({}): the interval missed the peak; trust the kernel's number or sample faster",
                fmt_bytes(sampled_one),
                100.0 * sampled_one as f64 / kernel_peak as f64,
                fmt_bytes(kernel_peak)
            ));
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
        let duration_s = self.done_sessions_s + (self.session_last_s - self.session_first_s);
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
            kernel_peak_rss_bytes: kernel_peak,
            kernel_peak_scope: if self.single_process {
                "process"
            } else {
                "largest-process"
            },
            tree_hwm_sum_bytes: if self.single_process || self.max_hwm_sum == 0 {
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
            peak_pss_bytes: self.max_pss,
            missed_ticks: missed,
            restarts: self.restarts,
            interval: meta.map(|m| m.interval.clone()),
            target: meta
                .map(|m| format!("{} {} ({})", m.target.mode, m.target.spec, m.target.comm)),
            ended: end.map(describe_end).unwrap_or_else(|| {
                "unknown (no end record: the recorder was killed or is still running)".into()
            }),
            end: end.cloned(),
            truncated_line,
            warnings,
            spans: self.phases.finish(
                meta.map_or(self.phase_peaks, |m| m.phase_peaks)
                    && end.is_none_or(|e| e.peak_reset_failures == 0),
            ),
        }
    }
}

fn describe_end(e: &EndInfo) -> String {
    let mut s = match e.reason.as_str() {
        "target-exited" => "the target exited".to_string(),
        "signal" => format!(
            "memmon was stopped by {}",
            e.memmon_signal.as_deref().unwrap_or("a signal")
        ),
        "output-closed" => "the output was closed (broken pipe)".to_string(),
        other => other.to_string(),
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
    /// The kernel's peak: VmHWM (and ru_maxrss of a launched command). For a single process it
    /// is that process's exact peak; for a tree, the exact peak of its largest process.
    pub kernel_peak_rss_bytes: u64,
    pub kernel_peak_scope: &'static str,
    /// For a tree: the largest sum of the members' VmHWM — an upper bound of the tree's peak.
    pub tree_hwm_sum_bytes: Option<u64>,
    pub rusage_maxrss_bytes: Option<u64>,
    /// The 10th percentile of sampled RSS: 90% of samples were at or above it.
    pub idle_rss_bytes: u64,
    pub min_rss_bytes: u64,
    pub mean_rss_bytes: u64,
    pub peak_pss_bytes: Option<u64>,
    pub missed_ticks: u64,
    pub restarts: u64,
    pub interval: Option<String>,
    pub target: Option<String>,
    pub ended: String,
    pub end: Option<EndInfo>,
    pub truncated_line: Option<u64>,
    pub warnings: Vec<String>,
    /// `phases` and `runs` (analysis/phases.rs).
    #[serde(flatten)]
    pub spans: Phases,
}

impl Summary {
    /// Summarizes a recording file in one streaming pass.
    pub fn of_file(
        path: &std::path::Path,
        spec: &crate::format::InputSpec,
    ) -> Result<Summary, crate::format::ReadError> {
        let mut b = SummaryBuilder::new();
        let info: ReadInfo = crate::format::read_input(path, spec, |s| b.push(s))?;
        let mut sum = b.finish(
            Some(path.display().to_string()),
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
        Ok(sum)
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
            "  peak RSS      {} at {}{}{}",
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
            if self.peak_processes > 1 {
                format!(", {} processes", self.peak_processes)
            } else {
                String::new()
            }
        );
        let scope = if self.kernel_peak_scope == "process" {
            "exact, VmHWM"
        } else {
            "exact for the largest process, VmHWM"
        };
        if self.kernel_peak_rss_bytes > 0 {
            let _ = writeln!(
                o,
                "  kernel peak   {} ({scope})",
                b(self.kernel_peak_rss_bytes)
            );
        } else {
            let _ = writeln!(o, "  kernel peak   not in this recording (no VmHWM: a spike between samples would be missed)");
        }
        if let Some(sum) = self.tree_hwm_sum_bytes {
            let _ = writeln!(
                o,
                "  tree bound    {} (sum of the processes' VmHWM: an upper bound of the tree's peak, not exact)",
                b(sum)
            );
        }
        if let Some(pss) = self.peak_pss_bytes {
            let _ = writeln!(o, "  peak PSS      {}", b(pss));
        }
        let _ = writeln!(
            o,
            "  idle floor    {} (10th percentile of sampled RSS)",
            b(self.idle_rss_bytes)
        );
        let _ = writeln!(o, "  mean RSS      {}", b(self.mean_rss_bytes));
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
        let sum = b.finish(None, None, None, None);
        assert_eq!(sum.peak_rss_bytes, 50 << 20);
        assert_eq!(sum.peak_elapsed_s, 1.0);
        assert_eq!(sum.duration_s, 3.0);
        assert!(sum.warnings.is_empty(), "{:?}", sum.warnings);
    }

    #[test]
    fn a_missed_peak_warns_and_the_kernel_peak_is_given() {
        let mut b = SummaryBuilder::new();
        b.push(&s(0.0, 100 << 20, 100 << 20));
        b.push(&s(1.0, 100 << 20, 300 << 20));
        let sum = b.finish(None, None, None, None);
        assert_eq!(sum.kernel_peak_rss_bytes, 300 << 20);
        assert!(sum.warnings[0].starts_with("warning:"));
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
