//! `memmon compare`: the arithmetic of holding a candidate's runs against a baseline's — one
//! row of numbers per run, mean/min/max/spread per side, deltas, noise-aware verdicts, CI gates.
//!
//! # The verdict, precisely
//! For each metric (peak RSS, idle floor, mean RSS, duration, time above a level) let the
//! baseline runs be `B` and the candidate runs `N`. The *allowance* is
//! `w = max(max(N) - min(N), min_noise × mean(B))`: the candidate's own run-to-run range, but
//! never less than a floor (`--min-noise`, default 1% of the baseline mean) so that one run per
//! side does not turn every byte into a regression. The *noise band* is
//! `[min(B) - w, max(B) + w]`: the baseline's range widened by the allowance. The candidate
//! mean above the band is a **regression** (every metric here is better lower), below it an
//! **improvement**, inside it **within noise**. The *run-to-run spread* printed beside it is
//! the larger of the two sides' ranges, in percent of the baseline mean.
//!
//! # Gates
//! A gate (`--max-peak-increase 2%` or `512MiB`, `--max-idle-increase`,
//! `--max-duration-increase 5%` or `5s`) holds the change of the means against its limit; it
//! fails when the change is strictly greater. Gates ignore the noise band: they are the hard
//! line a CI job draws.
//!
//! # Bench recordings: one run per bench run
//! A recording made by `memmon bench -o` holds several runs, each between a `run-start:N` and a
//! `run-end:N` row (analysis/phases.rs delimits them). Such a file counts as one run per
//! complete bench run, labelled `FILE#run N`, not as one run — else its peak would be the
//! largest of all runs and its duration would include the idle time between them. A bench
//! run's numbers are: its **peak** (the kernel's exact peak when the recording is of a single
//! process and the run opened with reset high-water marks, as `bench` does before each run;
//! else the largest sampled RSS, and `peak_source` says which), its **duration**, its **mean
//! RSS** over its rows, its **time above** a level within the run, and, as its **idle floor**,
//! the RSS at its `run-start` row: the daemon's floor just before the run (a percentile of the
//! whole file would mix the floors of all runs). A run the recording ended before its
//! `run-end` is left out and named. A recording without bench runs is one run, as is every
//! file with `--whole-files`.

use crate::analysis::span::Span;
use crate::analysis::stats::pct;
pub use crate::analysis::stats::Stats;
use crate::analysis::summary::ExactUpTo;
use crate::analysis::timeline::Timeline;
use crate::analysis::warnings::Warning;
use crate::analysis::{Summary, SummaryBuilder};
use crate::format::ReadInfo;
use crate::model::peak::{common_basis, Peak, PeakBasis, PeakFacts};
use crate::model::sample::{Event, Sample};
use crate::units::{parse_duration, parse_size};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// The default `--min-noise`: changes below 1% of the baseline mean are never called a change.
pub const DEFAULT_MIN_NOISE_PCT: f64 = 1.0;

pub use crate::model::peak::{PeakScope, PeakSource};

/// The numbers of one recording (or one bench run of it) that a comparison uses.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// The recording, and `#run N` for a bench run of it (`#sK run N` where the recording's
    /// runs come from several sessions: `analysis::phases::run_label`).
    pub file: String,
    /// The bench run's number N, for a run that is one bench run of a recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// The session K of the recording the run is in, where its runs come from several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<u32>,
    /// The run's own peak, decided once (`model::peak`). A comparison holds every run on one
    /// basis (`Comparison::peak_basis`), which may be a lesser kind than a run's own: `--json`
    /// gives this one as `own_peak`, and as `peak` the run's peak on that basis (`peak_on`),
    /// the number its side's stats and the deltas take.
    #[serde(rename = "own_peak")]
    pub peak: Peak,
    #[serde(flatten)]
    pub facts: PeakFacts,
    pub idle_rss_bytes: u64,
    pub mean_rss_bytes: u64,
    pub duration_s: f64,
    /// Seconds with RSS above `--above`, when it was given.
    pub time_above_s: Option<f64>,
    /// The GPU sampled peak (largest `gpu_bytes`), when the recording has GPU memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_gpu_bytes: Option<u64>,
    /// The run's own GPU peak, decided once (`gpu::budget_peak`: the driver's exact mark where
    /// it covers the run, else a lower bound), as `summary` and `--max-gpu` have it; `--json`'s
    /// `own_gpu_peak`. The comparison holds every run's on one kind (`gpu_peak_on`).
    #[serde(rename = "own_gpu_peak", skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Peak>,
    pub samples: u64,
    /// The recording's warnings (`Summary::warnings`), and the run's own.
    pub warnings: Vec<Warning>,
    /// Where its exact peak stops being exact (`Summary::peak_exact_up_to`): a whole recording
    /// whose recorder was killed before its end record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_exact_up_to: Option<ExactUpTo>,
}

impl Run {
    /// The run's numbers from its summary (and the time above a level, measured alongside).
    pub fn from_summary(s: &Summary, time_above_s: Option<f64>) -> Run {
        Run {
            file: s.file.clone().unwrap_or_default(),
            run: None,
            session: None,
            peak: s.peak,
            facts: s.facts,
            idle_rss_bytes: s.idle_rss_bytes,
            mean_rss_bytes: s.mean_rss_bytes,
            duration_s: s.duration_s,
            time_above_s,
            peak_gpu_bytes: s.gpu.as_ref().map(|g| g.peak_gpu_bytes),
            gpu: s.gpu.as_ref().and_then(|g| g.gpu_peak),
            samples: s.samples,
            warnings: s.warnings.clone(),
            peak_exact_up_to: s.peak_exact_up_to.clone(),
        }
    }

    /// The numbers of one bench run (`index`: its place among the recording's runs, for a span
    /// without a number) of the recording `s` summarizes (module docs).
    pub fn from_span(s: &Summary, span: &Span, index: usize, time_above_s: Option<f64>) -> Run {
        let n = span.run.unwrap_or(index as u32 + 1);
        let label = crate::analysis::phases::run_label(n, span.session);
        let mut warnings = s.warnings.clone();
        if !span.complete {
            warnings.push(Warning::RunWithoutEnd {
                label: label.clone(),
            });
        }
        Run {
            // Data, not words: the run's name (`FILE#run N`), the JSON's `file`, by which
            // budgets and reports name it.
            file: format!("{}#{label}", s.file.as_deref().unwrap_or_default()),
            run: Some(n),
            session: span.session,
            peak: span.peak,
            facts: span.facts,
            idle_rss_bytes: span.start_rss_bytes,
            mean_rss_bytes: span.mean_rss_bytes,
            duration_s: span.duration_s,
            time_above_s,
            peak_gpu_bytes: span.peak_gpu_bytes,
            gpu: crate::analysis::gpu::budget_peak(span.peak_gpu_bytes, &span.gpu_kernel),
            samples: span.samples,
            warnings,
            peak_exact_up_to: None,
        }
    }

    /// The run's GPU peak on the comparison's GPU basis: its own decided one where `gpu_exact`
    /// (every run has the driver's exact mark of the tree), else its sampled one. The number
    /// the stats, deltas and `--max-gpu-increase` take; `--json`'s `gpu_peak`.
    pub fn gpu_peak_on(&self, gpu_exact: bool) -> Option<Peak> {
        if gpu_exact {
            self.gpu
        } else {
            crate::analysis::gpu::budget_peak(
                self.peak_gpu_bytes,
                &crate::analysis::gpu::GpuKernelPeak::default(),
            )
        }
    }

    /// The run's peak on `basis` (a run whose basis is lesser than the comparison's cannot be
    /// in it: the basis is the best every run has).
    pub fn peak_on(&self, basis: PeakBasis) -> Peak {
        self.facts.on_basis(basis).unwrap_or(self.peak)
    }
}

/// How a recording was counted in a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Split {
    /// One run per complete bench run (`run-start:N` to `run-end:N`).
    BenchRuns,
    /// The whole file is one run: it holds no complete bench run, or `--whole-files`.
    WholeFile,
}

/// One recording of a side and the runs it gave.
#[derive(Debug, Clone, Serialize)]
pub struct Recording {
    pub file: String,
    pub split: Split,
    /// The number of runs it gave.
    pub runs: usize,
    /// Bench runs left out because the recording (or its session) ended before their run-end:
    /// their numbers, and their labels (`sK run N` where the runs come from several sessions).
    pub incomplete_runs: Vec<u32>,
    #[serde(skip)]
    pub incomplete_labels: Vec<String>,
    /// An incomplete last line that was skipped (the file ends inside it).
    pub truncated_line: Option<u64>,
    /// What reading it said of rows its end records count that it does not hold
    /// (`Summary::rows_lost_warnings`; the runs' `warnings` have it too).
    #[serde(skip)]
    pub rows_lost: Vec<Warning>,
    /// Sessions (from 1) of a recording split into bench runs that hold no run (an
    /// `--append`ed record): not compared, and said.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sessions_without_runs: Vec<usize>,
    /// What budgets judge of it: the units `summary` judges (`budget::units`), each on its own
    /// peak, whatever the comparison's basis; incomplete runs included.
    #[serde(skip)]
    pub budget_units: Vec<crate::analysis::budget::Unit>,
}

/// A recording with no samples: there is nothing to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the recording holds no samples, and no peak in its end record")]
pub struct NoSamples;

impl crate::error::Classified for NoSamples {
    /// Bad input, as a malformed recording is (`ReadError`).
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// What a comparison takes from one recording: how it was counted, its runs, its summary.
#[derive(Debug, Clone)]
pub struct Measured {
    pub recording: Recording,
    pub runs: Vec<Run>,
    pub summary: Summary,
}

/// The numbers of one recording, built as its samples stream by (one pass, whatever reads
/// them: a file, a pipe, samples in memory); [`Measure::finish`] splits them into runs: one per
/// complete bench run, or the whole recording as one run when it holds none or `whole_file` is
/// set (module docs).
pub struct Measure {
    summary: SummaryBuilder,
    above: Option<TimeAbove>,
    per_run: Option<RunTimeAbove>,
    whole_file: bool,
}

impl Measure {
    /// `above`: the level of the time-above metric, when given.
    pub fn new(above: Option<u64>, whole_file: bool) -> Measure {
        Measure {
            summary: SummaryBuilder::new(),
            above: above.map(TimeAbove::new),
            per_run: above.filter(|_| !whole_file).map(RunTimeAbove::new),
            whole_file,
        }
    }

    /// The metadata of the recording's next session (`format::Sink`).
    pub fn session(&mut self, meta: &crate::format::meta::Meta) {
        self.summary.session(meta);
    }

    /// The end record of its current session (`format::Sink`).
    pub fn session_end(&mut self, end: &crate::format::meta::EndInfo) {
        self.summary.session_end(end);
    }

    pub fn push(&mut self, s: &Sample) {
        self.summary.push(s);
        if let Some(t) = self.above.as_mut() {
            t.push(s);
        }
        if let Some(t) = self.per_run.as_mut() {
            t.push(s);
        }
    }

    /// The recording's runs, named `file`; `info` is what reading it found besides the samples
    /// (its metadata, how it ended, a truncated last line).
    pub fn finish(self, file: String, info: &ReadInfo) -> Result<Measured, NoSamples> {
        let summary = Summary::of_read(self.summary, file.clone(), info);
        // A command (or every run of a command bench) that ended before its first sample still
        // has its peaks from its end record, as summary gives them.
        let peak_known = summary.facts.kernel_peak_rss_bytes.is_some()
            || summary.facts.cgroup_peak_bytes.is_some();
        if summary.samples == 0 && !peak_known {
            return Err(NoSamples);
        }
        let whole = Run::from_summary(&summary, self.above.map(|t| t.total_s()));
        let budget_units = crate::analysis::budget::units(&summary, &file);
        let spans = &summary.spans.runs;
        if self.whole_file || !spans.iter().any(|s| s.complete) {
            let recording = Recording {
                file,
                split: Split::WholeFile,
                runs: 1,
                incomplete_runs: Vec::new(),
                incomplete_labels: Vec::new(),
                truncated_line: info.truncated_line,
                rows_lost: summary.rows_lost_warnings(),
                sessions_without_runs: Vec::new(),
                budget_units,
            };
            return Ok(Measured {
                recording,
                runs: vec![whole],
                summary,
            });
        }
        let above_s = self.per_run.map(|t| t.totals()).unwrap_or_default();
        let mut runs = Vec::new();
        let mut incomplete_runs = Vec::new();
        let mut incomplete_labels = Vec::new();
        for (i, span) in spans.iter().enumerate() {
            let run = Run::from_span(&summary, span, i, above_s.get(i).copied());
            if span.complete {
                runs.push(run);
            } else {
                incomplete_runs.extend(run.run);
                incomplete_labels.push(span.label.clone());
            }
        }
        let recording = Recording {
            file,
            split: Split::BenchRuns,
            runs: runs.len(),
            incomplete_runs,
            incomplete_labels,
            truncated_line: info.truncated_line,
            rows_lost: summary.rows_lost_warnings(),
            sessions_without_runs: summary.sessions_without_runs.clone(),
            budget_units,
        };
        Ok(Measured {
            recording,
            runs,
            summary,
        })
    }
}

impl crate::format::Sink for Measure {
    fn session(&mut self, meta: &crate::format::meta::Meta) {
        Measure::session(self, meta)
    }

    fn sample(&mut self, s: &Sample) {
        self.push(s)
    }

    fn rows_lost(&mut self, loss: &crate::format::meta::RowLoss) {
        self.summary.rows_lost(loss)
    }

    fn session_end(&mut self, end: &crate::format::meta::EndInfo) {
        Measure::session_end(self, end)
    }
}

/// [`Measure`] over samples already at hand.
pub fn measure<'a>(
    file: &str,
    samples: impl IntoIterator<Item = &'a Sample>,
    info: &ReadInfo,
    above: Option<u64>,
    whole_file: bool,
) -> Result<Measured, NoSamples> {
    let mut m = Measure::new(above, whole_file);
    samples.into_iter().for_each(|s| m.push(s));
    m.finish(file.to_string(), info)
}

/// Time spent above a level, from the intervals between samples. Between two samples the RSS
/// is taken to move in a straight line, so an interval that crosses the level counts the part
/// above it. A `start` event begins a new session: no interval spans two sessions.
#[derive(Debug, Clone)]
pub struct TimeAbove {
    level: u64,
    timeline: Timeline,
    prev: Option<(f64, u64)>,
    total_s: f64,
}

impl TimeAbove {
    pub fn new(level: u64) -> Self {
        TimeAbove {
            level,
            timeline: Timeline::new(),
            prev: None,
            total_s: 0.0,
        }
    }

    pub fn push(&mut self, s: &Sample) {
        if self.timeline.push(s).new_session {
            self.prev = None;
        }
        if let Some((t0, v0)) = self.prev {
            let dt = s.elapsed_s - t0;
            if dt > 0.0 {
                self.total_s += dt * fraction_above(v0, s.rss_bytes, self.level);
            }
        }
        self.prev = Some((s.elapsed_s, s.rss_bytes));
    }

    pub fn total_s(&self) -> f64 {
        self.total_s
    }
}

/// Time above a level within each bench run, in the order the runs open (the order of the
/// summary's `runs`): a `run-start:N` row opens run N (closing one still open), its
/// `run-end:N` row closes it, and a new session closes it too — as analysis/phases.rs does.
#[derive(Debug, Clone)]
pub struct RunTimeAbove {
    level: u64,
    timeline: Timeline,
    done: Vec<f64>,
    open: Option<(u32, TimeAbove)>,
}

impl RunTimeAbove {
    pub fn new(level: u64) -> Self {
        RunTimeAbove {
            level,
            timeline: Timeline::new(),
            done: Vec::new(),
            open: None,
        }
    }

    pub fn push(&mut self, s: &Sample) {
        if self.timeline.push(s).new_session {
            self.close();
            return;
        }
        match &s.event {
            Some(Event::RunStart(n)) => {
                self.close();
                let mut t = TimeAbove::new(self.level);
                t.push(s);
                self.open = Some((*n, t));
            }
            Some(Event::RunEnd(n)) => {
                if let Some((m, t)) = self.open.as_mut() {
                    if m == n {
                        t.push(s);
                        self.close();
                    }
                }
            }
            _ => {
                if let Some((_, t)) = self.open.as_mut() {
                    t.push(s);
                }
            }
        }
    }

    fn close(&mut self) {
        if let Some((_, t)) = self.open.take() {
            self.done.push(t.total_s());
        }
    }

    /// Seconds above the level in each run so far, a run still open last.
    pub fn totals(&self) -> Vec<f64> {
        self.done
            .iter()
            .copied()
            .chain(self.open.as_ref().map(|(_, t)| t.total_s()))
            .collect()
    }
}

/// The fraction of a straight segment from `a` to `b` that lies strictly above `level`.
fn fraction_above(a: u64, b: u64, level: u64) -> f64 {
    match (a > level, b > level) {
        (true, true) => 1.0,
        (false, false) => 0.0,
        (true, false) => (a - level) as f64 / (a - b) as f64,
        (false, true) => (b - level) as f64 / (b - a) as f64,
    }
}

/// What is compared (named in sentences by `render/compare_table.rs`: `Metric::label`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// The peak, on the comparison's basis (`Comparison::peak_basis`).
    Peak,
    IdleRss,
    MeanRss,
    Duration,
    TimeAbove,
    /// The GPU peak (`gpu_bytes`), where both sides recorded GPU memory.
    PeakGpu,
}

impl Metric {
    pub const ALL: [Metric; 6] = [
        Metric::Peak,
        Metric::IdleRss,
        Metric::MeanRss,
        Metric::Duration,
        Metric::TimeAbove,
        Metric::PeakGpu,
    ];

    /// The key in `--json`, with its unit.
    pub fn key(self) -> &'static str {
        match self {
            Metric::Peak => "peak_bytes",
            Metric::IdleRss => "idle_rss_bytes",
            Metric::MeanRss => "mean_rss_bytes",
            Metric::Duration => "duration_s",
            Metric::TimeAbove => "time_above_s",
            Metric::PeakGpu => "peak_gpu_bytes",
        }
    }

    /// Whether the values are bytes (else seconds).
    pub fn is_bytes(self) -> bool {
        matches!(
            self,
            Metric::Peak | Metric::IdleRss | Metric::MeanRss | Metric::PeakGpu
        )
    }

    /// The run's value; its peak on `basis`, its GPU peak the driver's exact mark where
    /// `gpu_exact` (every run has one), else the sampled one.
    pub fn value(self, r: &Run, basis: PeakBasis, gpu_exact: bool) -> Option<f64> {
        match self {
            Metric::Peak => Some(r.peak_on(basis).bytes as f64),
            // A run that ended before its first sample has no sampled size: a side with one
            // such run has no idle floor or mean to compare.
            Metric::IdleRss => (r.samples > 0).then_some(r.idle_rss_bytes as f64),
            Metric::MeanRss => (r.samples > 0).then_some(r.mean_rss_bytes as f64),
            Metric::Duration => Some(r.duration_s),
            Metric::TimeAbove => r.time_above_s,
            Metric::PeakGpu => r.gpu_peak_on(gpu_exact).map(|g| g.bytes as f64),
        }
    }
}

impl Serialize for Metric {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.key())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Regression,
    Improvement,
    WithinNoise,
}

/// The comparison of one metric.
#[derive(Debug, Clone, Serialize)]
pub struct Delta {
    pub metric: Metric,
    pub base: Stats,
    pub new: Stats,
    /// new mean - base mean, in the metric's unit.
    pub change: f64,
    /// The change in percent of the base mean; `None` when the base mean is 0.
    pub change_pct: Option<f64>,
    /// The larger of the two sides' ranges, in percent of the base mean.
    pub spread_pct: Option<f64>,
    /// The allowance `w` and the noise band `[min(B) - w, max(B) + w]` (module docs).
    pub allowance: f64,
    pub noise_low: f64,
    pub noise_high: f64,
    pub verdict: Verdict,
}

impl Delta {
    /// Compares one metric; `min_noise_pct` is the allowance's floor in percent of the base mean.
    pub fn new(metric: Metric, base: Stats, new: Stats, min_noise_pct: f64) -> Delta {
        let allowance = new.range().max(min_noise_pct / 100.0 * base.mean.abs());
        let noise_low = base.min - allowance;
        let noise_high = base.max + allowance;
        let verdict = if new.mean > noise_high {
            Verdict::Regression
        } else if new.mean < noise_low {
            Verdict::Improvement
        } else {
            Verdict::WithinNoise
        };
        let change = new.mean - base.mean;
        Delta {
            metric,
            base,
            new,
            change,
            change_pct: pct(change, base.mean),
            spread_pct: pct(base.range().max(new.range()), base.mean),
            allowance,
            noise_low,
            noise_high,
            verdict,
        }
    }
}

/// A gate's limit on an increase (said as people write it by `render/compare_table.rs`:
/// `Limit::text`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// Percent of the baseline mean.
    Percent(f64),
    Bytes(u64),
    Seconds(f64),
}

/// Why a gate's limit as typed could not be read (the flag is named by the command line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("'{0}' is not a limit: give a percentage (2%) or a size (512MiB)")]
    NotASizeLimit(String),
    #[error("'{0}' is not a limit: give a percentage (5%) or a duration (5s, 250ms)")]
    NotADurationLimit(String),
    #[error("'{0}' is not a percentage (examples: 2%, 0.5%)")]
    NotAPercentage(String),
}

impl crate::error::Classified for LimitError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// Parses a limit on a size: `2%`, `0.5%`, `512MiB`, `1GB`.
pub fn parse_size_limit(text: &str) -> Result<Limit, LimitError> {
    if let Some(p) = parse_percent(text)? {
        return Ok(Limit::Percent(p));
    }
    parse_size(text)
        .map(Limit::Bytes)
        .map_err(|_| LimitError::NotASizeLimit(text.to_string()))
}

/// Parses a limit on a duration: `5%`, `5s`, `250ms`.
pub fn parse_duration_limit(text: &str) -> Result<Limit, LimitError> {
    if let Some(p) = parse_percent(text)? {
        return Ok(Limit::Percent(p));
    }
    parse_duration(text)
        .map(|d| Limit::Seconds(d.as_secs_f64()))
        .map_err(|_| LimitError::NotADurationLimit(text.to_string()))
}

/// `Some(p)` for `p%`, `None` for text without a `%`.
pub fn parse_percent(text: &str) -> Result<Option<f64>, LimitError> {
    let Some(num) = text.trim().strip_suffix('%') else {
        return Ok(None);
    };
    match num.trim().parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(Some(p)),
        _ => Err(LimitError::NotAPercentage(text.to_string())),
    }
}

/// A CI gate as the user gave it.
#[derive(Debug, Clone)]
pub struct Gate {
    /// The flag, e.g. `--max-peak-increase`.
    pub flag: &'static str,
    pub metric: Metric,
    pub limit: Limit,
}

/// A gate held against the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct GateResult {
    pub flag: &'static str,
    pub metric: Metric,
    /// The limit as given; the JSON's `limit_text` holds it as people write it, with its unit
    /// (`10%`, `512.0 MiB`, `5.00 s`).
    #[serde(rename = "limit_text")]
    pub given: Limit,
    /// The limit as a percentage (`limit_pct`) or in the metric's unit (`limit`).
    pub limit: Option<f64>,
    pub limit_pct: Option<f64>,
    pub change: f64,
    pub change_pct: Option<f64>,
    pub passed: bool,
}

impl Gate {
    pub fn check(&self, d: &Delta) -> GateResult {
        let (limit, limit_pct, passed) = match self.limit {
            Limit::Percent(p) => {
                // From a baseline of 0, any increase is an infinite percentage.
                let passed = match d.change_pct {
                    Some(c) => c <= p,
                    None => d.change <= 0.0,
                };
                (None, Some(p), passed)
            }
            Limit::Bytes(b) => (Some(b as f64), None, d.change <= b as f64),
            Limit::Seconds(s) => (Some(s), None, d.change <= s),
        };
        GateResult {
            flag: self.flag,
            metric: self.metric,
            given: self.limit,
            limit,
            limit_pct,
            change: d.change,
            change_pct: d.change_pct,
            passed,
        }
    }
}

/// One side of a comparison: its runs and the statistics of each metric.
#[derive(Debug, Clone)]
pub struct Side {
    pub runs: Vec<Run>,
    pub stats: Vec<(Metric, Stats)>,
    /// The recordings the runs came from, when known (`Comparison::with_recordings`).
    pub recordings: Vec<Recording>,
    /// The basis the runs' peaks are held on (the comparison's).
    basis: PeakBasis,
    /// The runs' GPU peaks are held on the driver's exact marks (`Run::gpu_peak_on`).
    gpu_exact: bool,
}

/// A run as `--json` gives it: `peak` is its peak on the comparison's basis, the number the
/// stats and deltas take; its own decided peak is `own_peak` (`Run::peak`), a better kind where
/// the run had one.
#[derive(Serialize)]
struct RunOnBasis<'a> {
    peak: Peak,
    /// The run's GPU peak on the comparison's GPU basis (`gpu_peak_basis`).
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_peak: Option<Peak>,
    #[serde(flatten)]
    run: &'a Run,
}

impl Side {
    /// The side's runs, their peaks held on `basis` (and their GPU peaks on the driver's marks
    /// where `gpu_exact`).
    pub fn new(runs: Vec<Run>, basis: PeakBasis, gpu_exact: bool) -> Side {
        let stats = Metric::ALL
            .iter()
            .filter_map(|&m| {
                let values: Option<Vec<f64>> =
                    runs.iter().map(|r| m.value(r, basis, gpu_exact)).collect();
                Some((m, Stats::of(&values?)?))
            })
            .collect();
        Side {
            runs,
            stats,
            recordings: Vec::new(),
            basis,
            gpu_exact,
        }
    }

    pub fn stats(&self, m: Metric) -> Option<&Stats> {
        self.stats.iter().find(|(k, _)| *k == m).map(|(_, s)| s)
    }

    /// Some run's peak on the basis is a lower bound (`≥`: processes left unseen, or marks with
    /// no peak known before a restart or a reset): the side's peak stats are at least what they
    /// say, so a rise over them (the candidate's) or a fall under them (the baseline's) is not
    /// ruled out.
    pub fn peak_lower_bound(&self) -> bool {
        self.runs
            .iter()
            .any(|r| r.peak_on(self.basis).scope.is_partial())
    }
}

impl Serialize for Side {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct StatsMap<'a>(&'a [(Metric, Stats)]);
        impl Serialize for StatsMap<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in self.0 {
                    m.serialize_entry(k.key(), v)?;
                }
                m.end()
            }
        }
        let mut m = s.serialize_map(None)?;
        if !self.recordings.is_empty() {
            m.serialize_entry("recordings", &self.recordings)?;
        }
        let runs: Vec<RunOnBasis> = self
            .runs
            .iter()
            .map(|run| RunOnBasis {
                peak: run.peak_on(self.basis),
                gpu_peak: run.gpu_peak_on(self.gpu_exact),
                run,
            })
            .collect();
        m.serialize_entry("runs", &runs)?;
        m.serialize_entry("stats", &StatsMap(&self.stats))?;
        if self.peak_lower_bound() {
            m.serialize_entry("peak_lower_bound", &true)?;
        }
        m.end()
    }
}

/// A whole comparison, as printed and as `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The kind of peak every run is held on: the best one all runs of both sides have
    /// (`model::peak::common_basis`), so a number is never set against one of another kind.
    pub peak_basis: PeakBasis,
    /// The GPU peak compared, where both sides recorded GPU memory: `nvml-accounting` (the
    /// driver's exact mark of the tree, when every run has one) or `sampled` (a lower bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_peak_basis: Option<&'static str>,
    pub base: Side,
    pub new: Side,
    /// The level of `time_above_s`, when given.
    pub above_bytes: Option<u64>,
    pub min_noise_pct: f64,
    pub deltas: Vec<Delta>,
    pub gates: Vec<GateResult>,
    /// `--max-peak`, `--max-cgroup`, `--max-gpu`: each candidate recording (each of its bench
    /// runs) against the budget, as `summary` judges it (`judge_budgets`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<crate::analysis::budget::BudgetCheck>,
    /// False when any gate or budget failed.
    pub passed: bool,
}

impl Comparison {
    pub fn new(
        base: Vec<Run>,
        new: Vec<Run>,
        above_bytes: Option<u64>,
        min_noise_pct: f64,
        gates: &[Gate],
    ) -> Comparison {
        let peak_basis = common_basis(base.iter().chain(&new).map(|r| &r.facts));
        // The GPU peak, like the host's, on one kind for every run: the driver's exact mark of
        // the tree only when every run has it.
        let gpu_exact = base.iter().chain(&new).all(|r| {
            r.gpu
                .is_some_and(|g| g.exact && g.source == PeakSource::NvmlAccounting)
        });
        let has_gpu = base.iter().chain(&new).any(|r| r.peak_gpu_bytes.is_some());
        let base = Side::new(base, peak_basis, gpu_exact);
        let new = Side::new(new, peak_basis, gpu_exact);
        let deltas: Vec<Delta> = Metric::ALL
            .iter()
            .filter_map(|&m| {
                Some(Delta::new(
                    m,
                    *base.stats(m)?,
                    *new.stats(m)?,
                    min_noise_pct,
                ))
            })
            .collect();
        let gates: Vec<GateResult> = gates
            .iter()
            .filter_map(|g| Some(g.check(deltas.iter().find(|d| d.metric == g.metric)?)))
            .collect();
        let passed = gates.iter().all(|g| g.passed);
        Comparison {
            peak_basis,
            gpu_peak_basis: has_gpu.then_some(if gpu_exact {
                "nvml-accounting"
            } else {
                "sampled"
            }),
            base,
            new,
            above_bytes,
            min_noise_pct,
            deltas,
            gates,
            budgets: Vec::new(),
            passed,
        }
    }

    /// Holds the budgets against every candidate recording as `summary --max-peak` judges it (a
    /// bench recording: each of its runs, each on its own peak): an absolute limit does not
    /// depend on the baseline, whose lesser kind may set the comparison's basis. A failed one
    /// fails the comparison, as a failed gate does.
    pub fn judge_budgets(&mut self, budgets: &crate::analysis::budget::Budgets) {
        self.budgets = self
            .new
            .recordings
            .iter()
            .flat_map(|r| &r.budget_units)
            .flat_map(|u| budgets.check(u))
            .collect();
        self.passed &= self.budgets.iter().all(|b| b.passed);
    }

    /// Runs whose own peak is of a better kind than the comparison's basis: their own number is
    /// not the one compared.
    pub fn runs_above_basis(&self) -> Vec<&Run> {
        self.base
            .runs
            .iter()
            .chain(&self.new.runs)
            .filter(|r| r.facts.basis() < self.peak_basis)
            .collect()
    }

    /// Names the recordings each side's runs came from (for the header and `--json`).
    pub fn with_recordings(mut self, base: Vec<Recording>, new: Vec<Recording>) -> Comparison {
        self.base.recordings = base;
        self.new.recordings = new;
        self
    }

    pub fn delta(&self, m: Metric) -> Option<&Delta> {
        self.deltas.iter().find(|d| d.metric == m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = (1u64 << 20) as f64;

    fn stats(v: &[f64]) -> Stats {
        Stats::of(v).unwrap()
    }

    /// A run with GPU memory: `sampled` the largest sampled, `mark` NVML accounting's exact
    /// mark of the tree (where the driver kept one).
    fn gpu_run(sampled: u64, mark: Option<u64>) -> Run {
        let kernel = crate::analysis::gpu::GpuKernelPeak {
            bytes: mark,
            scope: mark.map(|_| PeakScope::Tree),
            ..Default::default()
        };
        Run {
            peak_gpu_bytes: Some(sampled),
            gpu: crate::analysis::gpu::budget_peak(Some(sampled), &kernel),
            ..run(100 << 20, 1.0)
        }
    }

    #[test]
    fn the_gpu_peak_is_compared_on_the_drivers_mark_only_when_every_run_has_it() {
        const GIB: u64 = 1 << 30;
        // Sampled 8 GiB on both sides; the driver saw 16 GiB, then 20 GiB between samples.
        let gate = Gate {
            flag: "--max-gpu-increase",
            metric: Metric::PeakGpu,
            limit: Limit::Percent(10.0),
        };
        let exact = Comparison::new(
            vec![gpu_run(8 * GIB, Some(16 * GIB))],
            vec![gpu_run(8 * GIB, Some(20 * GIB))],
            None,
            1.0,
            std::slice::from_ref(&gate),
        );
        assert_eq!(exact.gpu_peak_basis, Some("nvml-accounting"));
        let d = exact.delta(Metric::PeakGpu).unwrap();
        assert_eq!(
            (d.base.mean, d.new.mean),
            ((16 * GIB) as f64, (20 * GIB) as f64)
        );
        assert!(!exact.passed, "+25% fails a 10% gate");
        // One run without the mark: both sides on the sampled numbers, never one of each kind.
        let mixed = Comparison::new(
            vec![gpu_run(8 * GIB, Some(16 * GIB))],
            vec![gpu_run(8 * GIB, None)],
            None,
            1.0,
            &[gate],
        );
        assert_eq!(mixed.gpu_peak_basis, Some("sampled"));
        let d = mixed.delta(Metric::PeakGpu).unwrap();
        assert_eq!(
            (d.base.mean, d.new.mean),
            ((8 * GIB) as f64, (8 * GIB) as f64)
        );
        assert!(mixed.passed);
        assert_eq!(
            Comparison::new(vec![run(1, 1.0)], vec![run(1, 1.0)], None, 1.0, &[]).gpu_peak_basis,
            None
        );
    }

    fn run(peak: u64, duration_s: f64) -> Run {
        let facts = PeakFacts {
            sampled_peak_rss_bytes: peak,
            kernel_peak_rss_bytes: Some(peak),
            kernel_peak_source: Some(PeakSource::Vmhwm),
            max_processes: 1,
            ..PeakFacts::default()
        };
        Run {
            file: "r.csv".into(),
            run: None,
            session: None,
            peak: facts.decide(),
            facts,
            gpu: None,
            idle_rss_bytes: peak / 2,
            mean_rss_bytes: peak / 2,
            duration_s,
            time_above_s: None,
            peak_gpu_bytes: None,
            samples: 10,
            warnings: vec![],
            peak_exact_up_to: None,
        }
    }

    fn sample(t: f64, rss: u64) -> Sample {
        Sample {
            elapsed_s: t,
            rss_bytes: rss,
            ..Sample::default()
        }
    }

    #[test]
    fn a_rise_beyond_the_widened_baseline_range_is_a_regression() {
        // Allowance 2 (the new range); band [98 - 2, 102 + 2] = [96, 104]; the new mean 105 is above it.
        let d = Delta::new(
            Metric::Peak,
            stats(&[98.0, 102.0]),
            stats(&[104.0, 106.0]),
            0.0,
        );
        assert_eq!((d.noise_low, d.noise_high), (96.0, 104.0));
        assert_eq!(d.verdict, Verdict::Regression);
        assert_eq!(d.change, 5.0);
        assert_eq!(d.change_pct, Some(5.0));
        assert_eq!(d.spread_pct, Some(4.0));
    }

    #[test]
    fn a_rise_inside_the_widened_baseline_range_is_noise() {
        // Allowance 4; band [98 - 4, 102 + 4] = [94, 106]; the new mean 104 is inside.
        let d = Delta::new(
            Metric::Peak,
            stats(&[98.0, 102.0]),
            stats(&[102.0, 106.0]),
            0.0,
        );
        assert_eq!(d.verdict, Verdict::WithinNoise);
    }

    #[test]
    fn a_fall_below_the_band_is_an_improvement() {
        let d = Delta::new(
            Metric::Duration,
            stats(&[10.0, 10.2]),
            stats(&[8.0, 8.1]),
            1.0,
        );
        assert_eq!(d.verdict, Verdict::Improvement);
        assert!(d.change < 0.0);
    }

    #[test]
    fn with_one_run_per_side_the_min_noise_floor_decides() {
        let base = stats(&[100.0 * MIB]);
        assert_eq!(
            Delta::new(Metric::Peak, base, stats(&[100.9 * MIB]), 1.0).verdict,
            Verdict::WithinNoise
        );
        assert_eq!(
            Delta::new(Metric::Peak, base, stats(&[101.1 * MIB]), 1.0).verdict,
            Verdict::Regression
        );
        assert_eq!(
            Delta::new(Metric::Peak, base, stats(&[98.9 * MIB]), 1.0).verdict,
            Verdict::Improvement
        );
    }

    #[test]
    fn a_zero_baseline_has_no_percentage() {
        let d = Delta::new(Metric::TimeAbove, stats(&[0.0, 0.0]), stats(&[1.5]), 1.0);
        assert_eq!(d.change_pct, None);
        assert_eq!(d.verdict, Verdict::Regression);
    }

    #[test]
    fn limits_parse_as_percent_size_or_duration() {
        assert_eq!(parse_size_limit("2%").unwrap(), Limit::Percent(2.0));
        assert_eq!(parse_size_limit("0.5 %").unwrap(), Limit::Percent(0.5));
        assert_eq!(parse_size_limit("512MiB").unwrap(), Limit::Bytes(512 << 20));
        assert_eq!(
            parse_size_limit("1GB").unwrap(),
            Limit::Bytes(1_000_000_000)
        );
        assert_eq!(parse_duration_limit("5s").unwrap(), Limit::Seconds(5.0));
        assert_eq!(parse_duration_limit("250ms").unwrap(), Limit::Seconds(0.25));
        assert_eq!(parse_duration_limit("10%").unwrap(), Limit::Percent(10.0));
    }

    #[test]
    fn bad_limits_are_refused_with_examples() {
        assert!(parse_size_limit("lots")
            .unwrap_err()
            .to_string()
            .contains("512MiB"));
        assert!(parse_size_limit("5s").is_err());
        assert!(parse_duration_limit("512MiB")
            .unwrap_err()
            .to_string()
            .contains("5s"));
        assert!(parse_size_limit("-3%")
            .unwrap_err()
            .to_string()
            .contains("percentage"));
        assert!(parse_size_limit("x%").is_err());
    }

    #[test]
    fn a_gate_fails_only_when_the_change_exceeds_its_limit() {
        let d = Delta::new(
            Metric::Peak,
            stats(&[100.0 * MIB]),
            stats(&[110.0 * MIB]),
            1.0,
        );
        let gate = |limit| Gate {
            flag: "--max-peak-increase",
            metric: Metric::Peak,
            limit,
        };
        assert!(!gate(Limit::Percent(5.0)).check(&d).passed);
        assert!(gate(Limit::Percent(10.0)).check(&d).passed);
        assert!(!gate(Limit::Bytes(9 << 20)).check(&d).passed);
        assert!(gate(Limit::Bytes(10 << 20)).check(&d).passed);
    }

    #[test]
    fn a_duration_gate_takes_seconds() {
        let d = Delta::new(Metric::Duration, stats(&[10.0]), stats(&[16.0]), 1.0);
        let gate = |limit| Gate {
            flag: "--max-duration-increase",
            metric: Metric::Duration,
            limit,
        };
        assert!(!gate(Limit::Seconds(5.0)).check(&d).passed);
        assert!(gate(Limit::Seconds(6.0)).check(&d).passed);
        assert!(!gate(Limit::Percent(50.0)).check(&d).passed);
    }

    #[test]
    fn a_comparison_fails_when_any_gate_fails() {
        let gates = [
            Gate {
                flag: "--max-peak-increase",
                metric: Metric::Peak,
                limit: Limit::Percent(10.0),
            },
            Gate {
                flag: "--max-duration-increase",
                metric: Metric::Duration,
                limit: Limit::Seconds(1.0),
            },
        ];
        let c = Comparison::new(
            vec![run(100 << 20, 5.0)],
            vec![run(105 << 20, 7.0)],
            None,
            1.0,
            &gates,
        );
        assert_eq!(c.gates.len(), 2);
        assert!(c.gates[0].passed);
        assert!(!c.gates[1].passed);
        assert!(!c.passed);
        assert_eq!(c.delta(Metric::Peak).unwrap().verdict, Verdict::Regression);
        assert!(
            c.delta(Metric::TimeAbove).is_none(),
            "no --above, no time-above metric"
        );
    }

    #[test]
    fn time_above_counts_whole_intervals_and_the_crossing_part() {
        let mut t = TimeAbove::new(100);
        for (time, rss) in [(0.0, 0), (1.0, 200), (2.0, 200), (3.0, 0)] {
            t.push(&sample(time, rss));
        }
        // 0→200 crosses 100 halfway (0.5 s above), 200→200 (1 s), 200→0 (0.5 s).
        assert!((t.total_s() - 2.0).abs() < 1e-9, "{}", t.total_s());
    }

    #[test]
    fn time_above_does_not_span_two_sessions() {
        let mut t = TimeAbove::new(100);
        t.push(&sample(0.0, 200));
        t.push(&sample(4.0, 200));
        let mut restart = sample(0.0, 200);
        restart.event = Some(Event::Start);
        t.push(&restart);
        t.push(&sample(1.0, 200));
        assert_eq!(t.total_s(), 5.0);
    }

    #[test]
    fn a_single_process_peak_is_the_kernels_and_an_unrisen_trees_is_sampled() {
        let mut s = SummaryBuilder::new();
        for hwm in [80, 120] {
            s.push(&Sample {
                rss_bytes: 90,
                top_rss_bytes: 90,
                hwm_bytes: hwm,
                processes: 1,
                ..Sample::default()
            });
        }
        let r = Run::from_summary(&s.finish(None, None), None);
        assert_eq!((r.peak.bytes, r.peak.source), (120, PeakSource::Vmhwm));
        let mut s = SummaryBuilder::new();
        let mib = 1 << 20;
        s.push(&Sample {
            rss_bytes: 90 * mib,
            top_rss_bytes: 60 * mib,
            hwm_bytes: 70 * mib,
            processes: 2,
            ..Sample::default()
        });
        let r = Run::from_summary(&s.finish(None, None), None);
        // The largest process's VmHWM (70 MiB, above every RSS of the row) did not rise: no
        // kernel peak; the sampled sum (90 MiB) is the tree's, a lower bound.
        assert_eq!(
            (r.peak.bytes, r.peak.source),
            (90 * mib, PeakSource::Sampled)
        );
        assert_eq!(r.peak.scope, PeakScope::Tree);
        assert!(!r.peak.exact);
    }

    fn bench_sample(t: f64, rss: u64, hwm: u64, processes: u32, event: Option<Event>) -> Sample {
        Sample {
            elapsed_s: t,
            rss_bytes: rss,
            top_rss_bytes: rss,
            hwm_bytes: hwm,
            processes,
            event,
            ..Sample::default()
        }
    }

    /// A daemon idling at 50, reset before each run: run 1 spikes to 300 between ticks (only
    /// VmHWM saw it), run 2 to 200 on a tick; long idle time between the runs.
    fn two_bench_runs(processes: u32) -> Vec<Sample> {
        let p = processes;
        vec![
            bench_sample(0.0, 50, 50, p, Some(Event::Start)),
            bench_sample(1.0, 50, 50, p, Some(Event::RunStart(1))),
            bench_sample(2.0, 60, 300, p, None),
            bench_sample(3.0, 50, 300, p, Some(Event::RunEnd(1))),
            bench_sample(20.0, 40, 300, p, None),
            bench_sample(30.0, 40, 40, p, Some(Event::RunStart(2))),
            bench_sample(31.0, 200, 200, p, None),
            bench_sample(32.0, 40, 200, p, Some(Event::RunEnd(2))),
            bench_sample(40.0, 40, 200, p, None),
        ]
    }

    fn summary_of(samples: &[Sample]) -> Summary {
        let mut b = SummaryBuilder::new();
        for s in samples {
            b.push(s);
        }
        b.finish(Some("base.csv".into()), None)
    }

    #[test]
    fn a_bench_run_takes_its_own_peak_floor_mean_and_duration() {
        let sum = summary_of(&two_bench_runs(1));
        let runs: Vec<Run> = sum
            .spans
            .runs
            .iter()
            .enumerate()
            .map(|(i, span)| Run::from_span(&sum, span, i, None))
            .collect();
        assert_eq!(runs.len(), 2);
        let (one, two) = (&runs[0], &runs[1]);
        assert_eq!((one.file.as_str(), one.run), ("base.csv#run 1", Some(1)));
        assert_eq!((one.peak.bytes, one.peak.source), (300, PeakSource::Vmhwm));
        assert_eq!(one.facts.sampled_peak_rss_bytes, 60);
        assert_eq!((one.idle_rss_bytes, one.mean_rss_bytes), (50, 53));
        assert_eq!((one.duration_s, one.samples), (2.0, 3));
        assert_eq!((two.peak.bytes, two.peak.source), (200, PeakSource::Vmhwm));
        assert_eq!((two.idle_rss_bytes, two.duration_s), (40, 2.0));
        assert!(
            !one.warnings
                .iter()
                .map(|w| w.to_string())
                .any(|w| w.contains("run-end")),
            "{:?}",
            one.warnings
        );
    }

    #[test]
    fn a_trees_bench_run_peak_is_its_largest_processs_with_the_trees_bounds() {
        let sum = summary_of(&two_bench_runs(3));
        let r = Run::from_span(&sum, &sum.spans.runs[0], 0, None);
        assert_eq!((r.peak.bytes, r.peak.source), (300, PeakSource::Vmhwm));
        assert_eq!(r.peak.scope, PeakScope::LargestProcess);
        assert_eq!(r.peak.tree_low_bytes, Some(300));
    }

    #[test]
    fn runs_of_unlike_kinds_are_compared_on_the_kind_all_have() {
        // The baseline's run had a cgroup holding its tree; the candidate's did not: both
        // sides are held on the largest process's kernel peak.
        let mut with_cgroup = run(100 << 20, 1.0);
        with_cgroup.facts.max_processes = 2;
        with_cgroup.facts.cgroup_peak_bytes = Some(150 << 20);
        with_cgroup.facts.cgroup_holds_tree = true;
        with_cgroup.peak = with_cgroup.facts.decide();
        assert_eq!(with_cgroup.peak.source, PeakSource::Cgroup);
        let c = Comparison::new(vec![with_cgroup], vec![run(102 << 20, 1.0)], None, 1.0, &[]);
        assert_eq!(c.peak_basis, PeakBasis::Kernel);
        let d = c.delta(Metric::Peak).unwrap();
        assert_eq!(
            (d.base.mean, d.new.mean),
            ((100u64 << 20) as f64, (102u64 << 20) as f64)
        );
        assert_eq!(c.runs_above_basis().len(), 1);
        // --json: each run's `peak` is the number the stats take, its own apart.
        let v = serde_json::to_value(&c).unwrap();
        let base = &v["base"]["runs"][0];
        assert_eq!(base["peak"]["source"], "vmhwm", "{base}");
        assert_eq!(base["peak"]["bytes"], 100u64 << 20);
        assert_eq!(
            base["peak"]["bytes"].as_f64(),
            v["base"]["stats"]["peak_bytes"]["mean"].as_f64()
        );
        assert_eq!(base["own_peak"]["source"], "cgroup", "{base}");
        assert_eq!(base["own_peak"]["bytes"], 150u64 << 20);
        let new = &v["new"]["runs"][0];
        assert_eq!(new["own_peak"], new["peak"], "{new}");
    }

    #[test]
    fn time_above_is_counted_within_each_run_only() {
        let mut t = RunTimeAbove::new(45);
        for s in two_bench_runs(1) {
            t.push(&s);
        }
        // Run 1: above 45 for its whole 2 s; the 17 s of idle at 40 after it are not counted
        // (nor the drop to 40, which lies between the runs); run 2: 1/32 of a second below 45
        // on each side of its tick, 2 - 2 × 5/160 s above.
        let totals = t.totals();
        assert_eq!(totals.len(), 2);
        assert!((totals[0] - 2.0).abs() < 1e-9, "{totals:?}");
        assert!(
            (totals[1] - (2.0 - 2.0 * 5.0 / 160.0)).abs() < 1e-9,
            "{totals:?}"
        );
    }

    #[test]
    fn a_run_without_its_run_end_is_still_timed_but_named_incomplete() {
        let mut samples = two_bench_runs(1);
        samples.truncate(7);
        let mut t = RunTimeAbove::new(45);
        samples.iter().for_each(|s| t.push(s));
        assert_eq!(t.totals().len(), 2);
        let sum = summary_of(&samples);
        let r = Run::from_span(&sum, &sum.spans.runs[1], 1, None);
        assert!(
            r.warnings
                .iter()
                .map(|w| w.to_string())
                .any(|w| w.contains("run 2 has no run-end")),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn a_comparison_runs_on_samples_in_memory() {
        // No file: the samples and the metadata are at hand. The baseline is the two bench
        // runs above (peaks 300 and 200); the candidate's reach 500 and 400.
        let info = ReadInfo::default();
        let base = measure("base", &two_bench_runs(1), &info, Some(45), false).unwrap();
        let mut worse = two_bench_runs(1);
        worse[2].hwm_bytes = 500;
        worse[3].hwm_bytes = 500;
        worse[6].rss_bytes = 400;
        worse[6].hwm_bytes = 400;
        worse[7].hwm_bytes = 400;
        let new = measure("new", &worse, &info, Some(45), false).unwrap();
        assert_eq!(base.recording.split, Split::BenchRuns);
        assert_eq!((base.recording.runs, new.runs.len()), (2, 2));
        assert_eq!(new.runs[1].file, "new#run 2");
        assert_eq!(new.runs[1].peak.bytes, 400);
        assert!(base.runs[0].time_above_s.is_some());
        let c = Comparison::new(base.runs, new.runs, Some(45), 1.0, &[]);
        let peak = c.delta(Metric::Peak).unwrap();
        assert_eq!((peak.base.mean, peak.new.mean), (250.0, 450.0));
        assert_eq!(peak.verdict, Verdict::Regression);
        // The whole recording as one run, and nothing to compare without samples.
        let whole = measure("base", &two_bench_runs(1), &info, None, true).unwrap();
        assert_eq!(
            (whole.recording.split, whole.runs.len()),
            (Split::WholeFile, 1)
        );
        assert_eq!(
            measure("empty", &[], &info, None, false).unwrap_err(),
            NoSamples
        );
    }

    #[test]
    fn json_has_sides_deltas_and_gates() {
        let c = Comparison::new(vec![run(100, 1.0)], vec![run(200, 1.0)], None, 1.0, &[]);
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["peak_basis"], "kernel");
        assert_eq!(v["new"]["runs"][0]["peak"]["source"], "vmhwm");
        assert_eq!(v["new"]["runs"][0]["sampled_peak_rss_bytes"], 200);
        assert_eq!(v["new"]["stats"]["peak_bytes"]["mean"], 200.0);
        assert_eq!(v["new"]["stats"]["peak_bytes"]["count"], 1);
        assert!(v["new"]["stats"]["peak_bytes"].get("n").is_none());
        assert_eq!(v["deltas"][0]["metric"], "peak_bytes");
        assert_eq!(v["deltas"][0]["verdict"], "regression");
        assert_eq!(v["passed"], true);
    }
}
