//! `memmon compare` for people and for CI: reads both sides' recordings, prints the comparison
//! as a side-by-side table with a sentence per metric (or `--json`), and exits 1 when a gate fails.
//! A `bench -o` recording gives one run per bench run (analysis/compare.rs), and the header says
//! how many runs came from which file. A metric's name and a gate's limit are said here too.

use super::table::text_width;
use crate::analysis::compare::{
    Comparison, Delta, Gate, GateResult, Limit, Measure, Measured, Metric, Recording, Run, Side,
    Split, Verdict,
};
use crate::format::{InputSpec, ReadError};
use crate::model::sample::Sample;
use crate::units::{fmt_bytes, fmt_bytes_signed, fmt_seconds};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What `memmon compare` compares: both sides' recordings, how to read them, and the gates.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    pub base: Vec<PathBuf>,
    pub new: Vec<PathBuf>,
    pub input: InputSpec,
    /// Also compare the time spent with RSS above this many bytes.
    pub above: Option<u64>,
    /// Count each file as one run, even a `bench -o` recording of several runs.
    pub whole_files: bool,
    /// Changes smaller than this share of the baseline mean, in percent, are noise.
    pub min_noise: f64,
    pub gates: Vec<Gate>,
}

/// Why the sides of a comparison cannot be told from the files given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SidesError {
    #[error("give the baseline's recordings before `--`")]
    NoBaseline,
    #[error("{} and nothing to compare it with: give BASE NEW, or BASE... -- NEW... to compare several runs per side", crate::units::count(*.0, "file"))]
    NothingToCompare(usize),
    #[error("'{}' comes after `--`, where every word is a recording: put flags before `--`", .0.display())]
    FlagAfterSeparator(PathBuf),
}

impl crate::error::Classified for SidesError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// A recording of either side that could not be read: the comparison is not made.
#[derive(Debug, thiserror::Error)]
#[error("cannot compare")]
pub struct CompareError(#[source] pub ReadError);

impl crate::error::Classified for CompareError {
    /// The recording's: bad input (`ReadError`), never a failed gate.
    fn class(&self) -> crate::exit::Class {
        crate::error::Classified::class(&self.0)
    }
}

/// Reads both sides' recordings and compares them (`render` and `gate_sentence` print it).
pub fn compare(o: &CompareOptions) -> Result<Comparison, CompareError> {
    // Both sides' files are read together, in parallel; errors are reported in argument order.
    let all: Vec<PathBuf> = o.base.iter().chain(&o.new).cloned().collect();
    let mut recordings = read_runs(&all, &o.input, o.above, o.whole_files)?;
    let new = recordings.split_off(o.base.len());
    let (base_recordings, base): (Vec<Recording>, Vec<Vec<Run>>) = recordings.into_iter().unzip();
    let (new_recordings, new): (Vec<Recording>, Vec<Vec<Run>>) = new.into_iter().unzip();
    Ok(
        Comparison::new(base.concat(), new.concat(), o.above, o.min_noise, &o.gates)
            .with_recordings(base_recordings, new_recordings),
    )
}

/// `BASE... -- NEW...`, or two files without `--`: one run each.
pub fn split_sides(
    files: &[PathBuf],
    new: &[PathBuf],
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), SidesError> {
    no_flags_after_separator(new)?;
    match (files.len(), new.len()) {
        (_, 0) if files.len() == 2 => Ok((vec![files[0].clone()], vec![files[1].clone()])),
        (0, _) => Err(SidesError::NoBaseline),
        (n, 0) => Err(SidesError::NothingToCompare(n)),
        _ => Ok((files.to_vec(), new.to_vec())),
    }
}

/// Everything after `--` is a file name; a flag there is a mistake worth naming.
pub fn no_flags_after_separator(new: &[PathBuf]) -> Result<(), SidesError> {
    match new
        .iter()
        .find(|p| p.to_string_lossy().starts_with('-') && !p.exists())
    {
        Some(flag) => Err(SidesError::FlagAfterSeparator(flag.clone())),
        None => Ok(()),
    }
}

/// Reads a recording once and measures its runs (`analysis::compare::Measure`: one per bench
/// run, unless `whole_file`); `on_sample` sees every sample too (the report draws them). A
/// recording without samples is malformed: there is nothing to compare.
pub fn measure_file(
    path: &Path,
    spec: &InputSpec,
    above: Option<u64>,
    whole_file: bool,
    mut on_sample: impl FnMut(&Sample),
) -> Result<Measured, ReadError> {
    let mut m = Measure::new(above, whole_file);
    let info = crate::format::read_input_into(
        path,
        spec,
        &mut crate::format::Tee {
            sink: &mut m,
            on_sample: &mut on_sample,
        },
    )?;
    m.finish(path.display().to_string(), &info)
        .map_err(|e| ReadError::Malformed {
            path: path.to_path_buf(),
            line: 1,
            msg: e.to_string(),
        })
}

/// Reads each recording once into its runs (one per bench run, unless `whole_files`); any
/// unreadable or malformed file is bad input (exit 2), never a regression (exit 1), so a CI job
/// cannot mistake one for the other.
pub fn read_runs(
    paths: &[PathBuf],
    spec: &InputSpec,
    above: Option<u64>,
    whole_files: bool,
) -> Result<Vec<(Recording, Vec<Run>)>, CompareError> {
    crate::format::many::read_parallel(paths, |path| {
        measure_file(path, spec, above, whole_files, |_| {}).map(|m| (m.recording, m.runs))
    })
    .into_iter()
    .map(|r| r.map_err(CompareError))
    .collect()
}

/// A metric's value with its unit.
pub fn fmt_value(m: Metric, v: f64) -> String {
    if m.is_bytes() {
        fmt_bytes(v.max(0.0).round() as u64)
    } else if v == 0.0 {
        "0 s".into()
    } else {
        fmt_seconds(v)
    }
}

/// A metric's change with its sign and unit.
pub fn fmt_change(m: Metric, v: f64) -> String {
    if m.is_bytes() {
        fmt_bytes_signed(v.round() as i64)
    } else if v > 0.0 {
        format!("+{}", fmt_seconds(v))
    } else if v < 0.0 {
        fmt_seconds(v)
    } else {
        "0 s".into()
    }
}

fn fmt_pct(p: Option<f64>) -> String {
    match p {
        Some(p) => format!("{p:+.1}%"),
        None => "n/a (baseline 0)".into(),
    }
}

impl Metric {
    /// The name in sentences.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Peak => "peak",
            Metric::IdleRss => "idle floor",
            Metric::MeanRss => "mean RSS",
            Metric::Duration => "duration",
            Metric::TimeAbove => "time above",
            Metric::PeakGpu => "GPU peak",
        }
    }
}

impl Limit {
    /// The limit as people write it: `10%`, `512.0 MiB`, `5.00 s`.
    pub fn text(&self) -> String {
        match *self {
            Limit::Percent(p) => format!("{p}%"),
            Limit::Bytes(b) => fmt_bytes(b),
            Limit::Seconds(s) => fmt_seconds(s),
        }
    }
}

// The JSON's `limit_text` holds a gate's limit as people write it.
impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}
serialized_as_words!(Limit);

/// The metric's name in sentences, with the level for time above.
pub fn metric_label(c: &Comparison, m: Metric) -> String {
    match (m, c.above_bytes) {
        (Metric::TimeAbove, Some(level)) => format!("time above {}", fmt_bytes(level)),
        _ => m.label().to_string(),
    }
}

/// The verdict in words: "peak RSS rose 12.0% (+1.20 GiB): a regression (above the noise band;
/// the run-to-run spread of 0.4%)".
pub fn verdict_sentence(c: &Comparison, d: &Delta) -> String {
    let label = metric_label(c, d.metric);
    let moved = if d.change > 0.0 {
        "rose"
    } else if d.change < 0.0 {
        "fell"
    } else {
        "did not change"
    };
    let head = if d.change == 0.0 {
        format!("{label} did not change")
    } else {
        match d.change_pct {
            Some(p) => format!(
                "{label} {moved} {:.1}% ({})",
                p.abs(),
                fmt_change(d.metric, d.change)
            ),
            None => format!(
                "{label} {moved} from 0 ({})",
                fmt_change(d.metric, d.change)
            ),
        }
    };
    let one_run = d.base.count == 1 && d.new.count == 1;
    let (noise, note) = if one_run {
        (
            format!("the --min-noise allowance of {:.1}%", c.min_noise_pct),
            "one run per side, so no run-to-run spread is known".to_string(),
        )
    } else {
        match d.spread_pct {
            Some(s) => (format!("the run-to-run spread of {s:.1}%"), String::new()),
            None => (
                format!(
                    "the run-to-run spread of {}",
                    fmt_value(d.metric, d.base.range().max(d.new.range()))
                ),
                "from a baseline of 0".to_string(),
            ),
        }
    };
    // The verdict is the candidate's mean against the baseline's range widened by the
    // candidate's (the noise band), not against the spread printed beside it: a change smaller
    // than the spread can still leave the band.
    let (verdict, band) = match d.verdict {
        Verdict::Regression => ("a regression", "above the noise band; "),
        Verdict::Improvement => ("an improvement", "below the noise band; "),
        Verdict::WithinNoise => ("within noise", ""),
    };
    let mut sentence = if note.is_empty() {
        format!("{head}: {verdict} ({band}{noise})")
    } else {
        format!("{head}: {verdict} ({band}{noise}; {note})")
    };
    if d.metric == Metric::Peak {
        if let Some(caveat) = lower_bound_caveat(c, d.verdict) {
            let _ = write!(sentence, "; {caveat}");
        }
    }
    sentence
}

/// What a lower-bound peak (`≥`) on a side leaves open of `verdict`: a candidate's may be
/// higher (a rise is not ruled out), a baseline's too (a fall is not).
fn lower_bound_caveat(c: &Comparison, verdict: Verdict) -> Option<String> {
    let new = c.new.peak_lower_bound() && verdict != Verdict::Regression;
    let base = c.base.peak_lower_bound() && verdict != Verdict::Improvement;
    let open = match (base, new) {
        (false, false) => return None,
        (true, false) => "a fall is not ruled out",
        (false, true) => "a rise is not ruled out",
        (true, true) => "neither a rise nor a fall is ruled out",
    };
    let sides = match (c.base.peak_lower_bound(), c.new.peak_lower_bound()) {
        (true, true) => "both sides' peaks are",
        (true, false) => "the baseline's peak is",
        _ => "the candidate's peak is",
    };
    Some(format!("{sides} a lower bound (≥), so {open}"))
}

/// "--max-peak-increase 10%: peak RSS rose 134.4% (+70.0 MiB), over the limit of 10%".
pub fn gate_sentence(d: &Delta, g: &GateResult) -> String {
    let measured = format!(
        "{} ({})",
        fmt_change(d.metric, d.change),
        fmt_pct(d.change_pct)
    );
    format!(
        "{} {}: {} changed by {measured}, limit +{}",
        g.flag,
        g.given.text(),
        d.metric.label(),
        g.given.text()
    )
}

/// The runs that had a better kind of peak than the one all share, named: `new.csv also had
/// the tree's peak (its cgroup's), not compared: ...`; `None` when none had.
pub fn above_basis_note(c: &Comparison) -> Option<String> {
    let above = c.runs_above_basis();
    let first = above.first()?;
    let names: Vec<String> = above
        .iter()
        .take(5)
        .map(|r| display_name(&r.file))
        .collect();
    Some(format!(
        "{}{} also had {}, not compared: a number of one kind is never set against another",
        names.join(", "),
        if above.len() > 5 { ", …" } else { "" },
        first.facts.basis().describe()
    ))
}

/// What the peak compared is, and which runs had a better kind than the one all share.
fn source_line(c: &Comparison) -> String {
    let mut line = format!(
        "peak is {} on both sides: the best kind every run has",
        c.peak_basis.describe()
    );
    if let Some(note) = above_basis_note(c) {
        let _ = write!(line, " ({note})");
    }
    if let Some(g) = gpu_basis_line(c) {
        let _ = write!(line, "\n{g}");
    }
    line
}

/// What the GPU peak compared is, where both sides recorded GPU memory: `compare`'s text and
/// the report's comparison say it alike.
pub fn gpu_basis_line(c: &Comparison) -> Option<&'static str> {
    match c.gpu_peak_basis? {
        "nvml-accounting" => Some(
            "GPU peak is NVML accounting's exact mark of the tree on both sides (every run has one)",
        ),
        _ => Some(
            "GPU peak is the sampled GPU memory on both sides, a lower bound (not every run has the driver's exact mark of the tree: each run's GPU sampled peak is compared)",
        ),
    }
}

fn runs_text(n: usize) -> String {
    crate::units::count(n, "run")
}

/// "baseline: 3 runs from base.csv (bench runs)": how many runs came from which recording.
pub fn side_line(name: &str, s: &Side) -> String {
    let recs = &s.recordings;
    let names = |r: &Recording| display_name(&r.file);
    let all = |split: Split| recs.iter().all(|r| r.split == split);
    let from = if all(Split::WholeFile) {
        let list: Vec<String> = recs.iter().map(names).collect();
        format!(
            "{} ({})",
            list.join(", "),
            if recs.len() == 1 {
                "whole file"
            } else {
                "one run per file"
            }
        )
    } else if recs.len() == 1 {
        format!("{} (bench runs)", names(&recs[0]))
    } else {
        let list: Vec<String> = recs
            .iter()
            .map(|r| match r.split {
                Split::BenchRuns => format!(
                    "{} ({} bench {})",
                    names(r),
                    r.runs,
                    if r.runs == 1 { "run" } else { "runs" }
                ),
                Split::WholeFile => format!("{} (whole file)", names(r)),
            })
            .collect();
        list.join(", ")
    };
    let mut line = format!("{name}: {} from {from}", runs_text(s.runs.len()));
    for r in recs.iter().filter(|r| !r.incomplete_labels.is_empty()) {
        let _ = write!(
            line,
            "; left out of {}: {} (the recording ended before its run-end)",
            names(r),
            r.incomplete_labels.join(", ")
        );
    }
    for r in recs.iter().filter(|r| !r.sessions_without_runs.is_empty()) {
        let k = &r.sessions_without_runs;
        let _ = write!(
            line,
            "; left out of {}: {} {} (no bench run in {}: --whole-files compares the file as one run)",
            names(r),
            if k.len() == 1 { "session" } else { "sessions" },
            k.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
            if k.len() == 1 { "it" } else { "them" }
        );
    }
    for r in recs {
        if let Some(l) = r.truncated_line {
            let _ = write!(
                line,
                "; {}: line {l} is incomplete (the file ends inside it) and was skipped",
                names(r)
            );
        }
    }
    line
}

/// A note when one side was split into bench runs and the other was not.
fn split_note(c: &Comparison) -> Option<String> {
    let bench = |s: &Side| s.recordings.iter().any(|r| r.split == Split::BenchRuns);
    let whole = |s: &Side| s.recordings.iter().any(|r| r.split == Split::WholeFile);
    let mixed = (bench(&c.base) || bench(&c.new)) && (whole(&c.base) || whole(&c.new));
    mixed.then(|| {
        "note: some runs are bench runs of a recording and some whole files — not like for like (--whole-files counts every file as one run)".to_string()
    })
}

/// The comparison as text: the runs, a side-by-side table, a sentence per metric, the gates.
pub fn render(c: &Comparison) -> String {
    let mut o = String::new();
    if c.base.recordings.is_empty() || c.new.recordings.is_empty() {
        let _ = writeln!(
            o,
            "baseline: {}; candidate: {}",
            runs_text(c.base.runs.len()),
            runs_text(c.new.runs.len())
        );
    } else {
        let _ = writeln!(o, "{}", side_line("baseline", &c.base));
        let _ = writeln!(o, "{}", side_line("candidate", &c.new));
        if let Some(note) = split_note(c) {
            let _ = writeln!(o, "{note}");
        }
        for r in c.base.recordings.iter().chain(&c.new.recordings) {
            for w in &r.rows_lost {
                let _ = writeln!(o, "{w}");
            }
        }
    }
    runs(c, &mut o);
    let _ = writeln!(o, "{}", source_line(c));
    let _ = writeln!(o);

    table(c, &mut o);
    let _ = writeln!(o);
    for d in &c.deltas {
        let _ = writeln!(o, "{}", verdict_sentence(c, d));
    }
    if !c.gates.is_empty() || !c.budgets.is_empty() {
        gates(c, &mut o);
    }
    o
}

/// One line per run of each side: its peak (on the comparison's basis), idle floor, duration.
fn runs(c: &Comparison, o: &mut String) {
    let width = c
        .base
        .runs
        .iter()
        .chain(&c.new.runs)
        .map(|r| text_width(&display_name(&r.file)))
        .max()
        .unwrap_or(0);
    for (side, s) in [("base", &c.base), ("new ", &c.new)] {
        for r in &s.runs {
            let name = display_name(&r.file);
            // A bench run's idle floor is its RSS at run-start (analysis/compare.rs).
            let floor = match (r.samples, r.run) {
                (0, _) => "no sample (it ended before its first)".to_string(),
                (_, Some(_)) => format!("floor at start {}", fmt_bytes(r.idle_rss_bytes)),
                (_, None) => format!("idle {}", fmt_bytes(r.idle_rss_bytes)),
            };
            let peak = r.peak_on(c.peak_basis);
            // A recording whose recorder was killed: its exact peak holds up to its last row.
            let up_to = match &r.peak_exact_up_to {
                Some(u) if peak.exact => format!("; {u}"),
                _ => String::new(),
            };
            let _ = writeln!(
                o,
                "  {side}  {name}{}  peak {} ({}{up_to}), {floor}, {}",
                " ".repeat(width - text_width(&name)),
                peak.cell(),
                peak.source.key(),
                fmt_seconds(r.duration_s)
            );
        }
    }
    // A floor above a cgroup's peak: two counters, not a contradiction.
    let above = c.base.runs.iter().chain(&c.new.runs).any(|r| {
        let p = r.peak_on(c.peak_basis);
        r.samples > 0
            && p.source == crate::model::peak::PeakSource::Cgroup
            && r.idle_rss_bytes > p.bytes
    });
    if above {
        let _ = writeln!(
            o,
            "  note: a floor above its cgroup peak: the floor is an RSS sum, which counts pages charged to another cgroup (a binary's page cache), the cgroup's peak does not"
        );
    }
}

/// The side-by-side table: a row per metric, both sides' means and ranges, the change and the
/// verdict; text columns left-aligned, numbers right-aligned.
fn table(c: &Comparison, o: &mut String) {
    let range = |m: Metric, s: &crate::analysis::compare::Stats| {
        if s.count == 1 {
            "-".to_string()
        } else {
            format!("{} – {}", fmt_value(m, s.min), fmt_value(m, s.max))
        }
    };
    let mut rows = vec![[
        "metric".to_string(),
        format!(
            "baseline ({})",
            if c.base.runs.len() == 1 {
                "1 run".into()
            } else {
                format!("mean of {}", c.base.runs.len())
            }
        ),
        "baseline range".into(),
        format!(
            "candidate ({})",
            if c.new.runs.len() == 1 {
                "1 run".into()
            } else {
                format!("mean of {}", c.new.runs.len())
            }
        ),
        "candidate range".into(),
        "change".into(),
        "change %".into(),
        "verdict".into(),
    ]];
    // A side whose peak is a lower bound in some run says so in its cells, as each run does.
    let at_least = |d: &Delta, side: &Side| {
        if d.metric == Metric::Peak && side.peak_lower_bound() {
            "≥ "
        } else {
            ""
        }
    };
    for d in &c.deltas {
        let (b, n) = (at_least(d, &c.base), at_least(d, &c.new));
        let marked = |mark: &str, cell: String| {
            if cell == "-" {
                cell
            } else {
                format!("{mark}{cell}")
            }
        };
        rows.push([
            metric_label(c, d.metric),
            marked(b, fmt_value(d.metric, d.base.mean)),
            marked(b, range(d.metric, &d.base)),
            marked(n, fmt_value(d.metric, d.new.mean)),
            marked(n, range(d.metric, &d.new)),
            fmt_change(d.metric, d.change),
            fmt_pct(d.change_pct),
            match d.verdict {
                Verdict::Regression => "regression",
                Verdict::Improvement => "improvement",
                Verdict::WithinNoise => "within noise",
            }
            .to_string(),
        ]);
    }
    let mut widths = [0usize; 8];
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(text_width(cell));
        }
    }
    for r in &rows {
        let mut line = String::from(" ");
        for (i, (cell, w)) in r.iter().zip(widths).enumerate() {
            let pad = w - text_width(cell);
            // Text columns left-aligned, numbers right-aligned.
            if i == 0 || i == 7 {
                let _ = write!(line, " {cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(line, " {}{cell}", " ".repeat(pad));
            }
            line.push(' ');
        }
        let _ = writeln!(o, "{}", line.trim_end());
    }
}

/// Each gate, passed or FAILED, with a lower bound's caveat on the peak; then each budget
/// (`--max-peak`, `--max-cgroup`, `--max-gpu`) of each candidate recording or run.
fn gates(c: &Comparison, o: &mut String) {
    let _ = writeln!(o);
    let _ = writeln!(o, "gates:");
    for g in &c.gates {
        let Some(d) = c.delta(g.metric) else { continue };
        let caveat = match (g.metric, lower_bound_caveat(c, d.verdict)) {
            (Metric::Peak, Some(why)) => format!(" ({why})"),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "  {}: {}{caveat}",
            if g.passed { "passed" } else { "FAILED" },
            gate_sentence(d, g)
        );
    }
    for b in &c.budgets {
        let _ = writeln!(
            o,
            "  {}: {}",
            if b.passed { "passed" } else { "FAILED" },
            b.describe()
        );
    }
}

/// A file's name as given; the full path stays in `--json`.
fn display_name(file: &str) -> String {
    let p = Path::new(file);
    match p.file_name() {
        Some(n) if p.components().count() > 3 => format!(".../{}", n.to_string_lossy()),
        _ => file.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::{PeakSource, Stats};
    use crate::model::peak::{PeakBasis, PeakFacts};

    fn run(file: &str, peak: u64) -> Run {
        let facts = PeakFacts {
            sampled_peak_rss_bytes: peak,
            kernel_peak_rss_bytes: Some(peak),
            kernel_peak_source: Some(PeakSource::Vmhwm),
            max_processes: 1,
            ..PeakFacts::default()
        };
        Run {
            file: file.into(),
            run: None,
            session: None,
            peak: facts.decide(),
            facts,
            gpu: None,
            idle_rss_bytes: 1 << 20,
            mean_rss_bytes: peak / 2,
            duration_s: 2.0,
            time_above_s: None,
            peak_gpu_bytes: None,
            samples: 40,
            warnings: vec![],
            peak_exact_up_to: None,
        }
    }

    #[test]
    fn a_regression_reads_as_the_sentence_people_expect() {
        let gib = 1u64 << 30;
        let c = Comparison::new(
            vec![run("a", 10 * gib), run("b", 10 * gib + gib / 25)],
            vec![run("c", 11 * gib + gib / 5), run("d", 11 * gib + gib / 5)],
            None,
            1.0,
            &[],
        );
        let s = verdict_sentence(&c, c.delta(Metric::Peak).unwrap());
        assert!(
            s.starts_with(
                "peak rose 11.8% (+1.18 GiB): a regression (above the noise band; the run-to-run spread of 0.4%)"
            ),
            "{s}"
        );
    }

    #[test]
    fn a_lower_bound_peak_marks_its_sides_cells_and_qualifies_the_verdict() {
        let mib = 1u64 << 20;
        // The candidate's runs lost processes with no exit record read: ≥ their VmHWM.
        let seen = |file: &str, peak: u64| {
            let mut r = run(file, peak);
            r.facts.max_processes = 2;
            r.facts.departed = 1;
            r.peak = r.facts.decide();
            r
        };
        let c = Comparison::new(
            vec![run("a", 100 * mib), run("b", 100 * mib)],
            vec![seen("c", 90 * mib), seen("d", 90 * mib)],
            None,
            1.0,
            &[],
        );
        assert!(c.new.peak_lower_bound() && !c.base.peak_lower_bound());
        let s = verdict_sentence(&c, c.delta(Metric::Peak).unwrap());
        assert!(
            s.starts_with("peak fell 10.0% (-10.00 MiB): an improvement")
                && s.ends_with(
                    "; the candidate's peak is a lower bound (≥), so a rise is not ruled out"
                ),
            "{s}"
        );
        let text = render(&c);
        let peak_row = text
            .lines()
            .find(|l| l.trim_start().starts_with("peak ") && l.ends_with("improvement"))
            .unwrap();
        assert!(
            peak_row.contains("≥ 90.00 MiB") && !peak_row.contains("≥ 100"),
            "{peak_row}"
        );
        // A regression over a lower bound holds: the real peak is higher still.
        let c = Comparison::new(
            vec![run("a", 100 * mib)],
            vec![seen("c", 150 * mib)],
            None,
            1.0,
            &[],
        );
        let s = verdict_sentence(&c, c.delta(Metric::Peak).unwrap());
        assert!(!s.contains("lower bound"), "{s}");
    }

    fn recording(file: &str, split: Split, runs: usize, incomplete: &[u32]) -> Recording {
        Recording {
            file: file.into(),
            split,
            runs,
            incomplete_runs: incomplete.to_vec(),
            incomplete_labels: incomplete.iter().map(|&n| format!("run {n}")).collect(),
            truncated_line: None,
            rows_lost: Vec::new(),
            sessions_without_runs: Vec::new(),
            budget_units: Vec::new(),
        }
    }

    #[test]
    fn the_header_says_how_many_runs_came_from_which_file() {
        let c = Comparison::new(
            vec![run("a", 1), run("a", 1), run("a", 1)],
            vec![run("n1", 1), run("n2", 1)],
            None,
            1.0,
            &[],
        )
        .with_recordings(
            vec![recording("base.csv", Split::BenchRuns, 3, &[4])],
            vec![
                recording("n1.csv", Split::WholeFile, 1, &[]),
                recording("n2.csv", Split::WholeFile, 1, &[]),
            ],
        );
        let text = render(&c);
        assert!(
            text.contains("baseline: 3 runs from base.csv (bench runs); left out of base.csv: run 4 (the recording ended before its run-end)\n"),
            "{text}"
        );
        assert!(
            text.contains("candidate: 2 runs from n1.csv, n2.csv (one run per file)\n"),
            "{text}"
        );
        assert!(text.contains("not like for like (--whole-files"), "{text}");
    }

    #[test]
    fn a_side_of_several_recordings_names_each_ones_runs() {
        let mut side = Side::new(vec![run("a", 1); 4], PeakBasis::Kernel, false);
        side.recordings = vec![
            recording("a.csv", Split::BenchRuns, 3, &[]),
            recording("b.csv", Split::WholeFile, 1, &[]),
        ];
        assert_eq!(
            side_line("baseline", &side),
            "baseline: 4 runs from a.csv (3 bench runs), b.csv (whole file)"
        );
    }

    #[test]
    fn two_files_without_a_separator_are_one_run_each() {
        let f = |s: &str| PathBuf::from(s);
        assert_eq!(
            split_sides(&[f("a"), f("b")], &[]).unwrap(),
            (vec![f("a")], vec![f("b")])
        );
        assert_eq!(
            split_sides(&[f("a")], &[f("b"), f("c")]).unwrap().1.len(),
            2
        );
        assert!(split_sides(&[f("a"), f("b"), f("c")], &[])
            .unwrap_err()
            .to_string()
            .contains("--"));
        assert!(split_sides(&[f("a")], &[]).is_err());
        assert!(split_sides(&[f("a")], &[f("b"), f("--json")])
            .unwrap_err()
            .to_string()
            .contains("put flags before `--`"));
    }

    #[test]
    fn changes_print_with_sign_and_unit() {
        assert_eq!(
            fmt_change(Metric::Peak, -((1u64 << 20) as f64)),
            "-1.00 MiB"
        );
        assert_eq!(fmt_change(Metric::Duration, 1.5), "+1.50 s");
        assert_eq!(fmt_pct(Some(2.0)), "+2.0%");
        assert_eq!(Stats::of(&[1.0]).unwrap().count, 1);
    }

    #[test]
    fn the_table_names_every_metric_and_the_peak_source() {
        let c = Comparison::new(
            vec![run("a", 100 << 20)],
            vec![run("b", 100 << 20)],
            None,
            1.0,
            &[],
        );
        let text = render(&c);
        for word in [
            "  peak ",
            "idle floor",
            "mean RSS",
            "duration",
            "within noise",
            "peak is the kernel's peak of the process (or of a tree's largest process: VmHWM, ru_maxrss) on both sides",
        ] {
            assert!(text.contains(word), "{word} missing in:\n{text}");
        }
        assert!(!text.contains("a floor above its cgroup peak"), "{text}");
    }

    #[test]
    fn a_floor_above_a_cgroups_peak_is_explained() {
        // A launched command in memmon's cgroup: its binary's page cache counts in the RSS
        // floor, not in the cgroup's peak.
        let cg = |file: &str| {
            let mut r = run(file, 50 << 20);
            r.facts.max_processes = 2;
            r.facts.cgroup_peak_bytes = Some(48 << 20);
            r.facts.cgroup_holds_tree = true;
            r.peak = r.facts.decide();
            r.idle_rss_bytes = 52 << 20;
            r
        };
        let c = Comparison::new(vec![cg("a")], vec![cg("b")], None, 1.0, &[]);
        let text = render(&c);
        assert!(
            text.contains("note: a floor above its cgroup peak"),
            "{text}"
        );
    }
}
