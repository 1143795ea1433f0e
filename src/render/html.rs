//! `memmon report`: one self-contained HTML file (no network: script, style and data inline)
//! with an interactive chart of the recordings, a summary table per file and the comparison.
//!
//! The series are decimated with `decimate.rs` (the same peak-preserving reduction `plot`
//! uses): at most four points — first, lowest, highest, last — per each of `BUCKETS` time
//! buckets, so the file stays small and no peak is lost. The page's script records its own
//! errors in `<body data-errors>`, the number of series drawn in `data-series`, and with
//! `#selftest` in the URL it hovers the first series' peak and writes the tooltip's text into
//! `#selftest-hover` (tests/report.rs checks these in headless Chromium).

use crate::analysis::compare::{Comparison, Metric, Run, DEFAULT_MIN_NOISE_PCT};
use crate::analysis::timeline::Timeline;
use crate::analysis::Summary;
use crate::format::InputSpec;
use crate::model::sample::{Event, Sample};
use crate::outside::markup as esc;
use crate::render::compare_table::{
    fmt_change, fmt_value, measure_file, metric_label, verdict_sentence,
};
use crate::render::decimate::Stream;
use crate::render::events::Events;
use crate::units::{fmt_bytes, fmt_seconds, fmt_unix_ms};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A flame graph of `folded` stacks (`render::stacks`) under a heading, as inferno's SVG in an
/// `<object>` (so its script runs on its own); nothing where there are no stacks.
fn flame_graph(o: &mut String, folded: &str, title: &str, heading: &str) {
    if let Some(svg) = crate::render::stacks::flame_graph_svg(folded, title) {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(svg);
        let _ = writeln!(
            o,
            "<h3>{heading}</h3>\n<object class=\"flame-graph\" type=\"image/svg+xml\" data=\"data:image/svg+xml;base64,{data}\" width=\"100%\"></object>"
        );
    }
}

/// Time buckets per series in the embedded data (each keeps at most four points).
pub const BUCKETS: usize = 2000;

const SCRIPT: &str = include_str!("report.js");
const STYLE: &str = include_str!("report.css");

/// Which side of a comparison a recording is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Base,
    New,
}

/// One recording as the page draws it.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// A short name: the file's name, or the path as given when two files share a name.
    pub name: String,
    /// The path as the user gave it.
    pub file: String,
    pub role: Option<Role>,
    /// Seconds on the recording's timeline (`analysis::timeline`, as `memmon plot` draws them:
    /// an appended session after the wall-clock gap), rounded to the millisecond, and RSS in
    /// bytes at those times.
    pub t: Vec<f64>,
    pub v: Vec<u64>,
    /// Indices into `t` where a later session of an `--append`ed recording begins: the chart
    /// does not join a point to the one before it there (the time between is a gap).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaks: Vec<usize>,
    /// How many samples the recording has, and how many points are embedded.
    pub samples: u64,
    pub kept: usize,
    /// The recording's peak, as `summary` decides it, and its largest sampled RSS.
    pub peak: crate::model::peak::Peak,
    /// `≥ ` when the peak is a lower bound (`Peak::at_least`), as every table prints it.
    pub peak_at_least: &'static str,
    pub sampled_peak_rss_bytes: u64,
    pub lifetime_peak_rss_bytes: Option<u64>,
    /// `[seconds, label]` of marks, restarts and benchmark runs: at most
    /// `events::MAX_EVENTS`, spread over the recording when it holds more.
    pub events: Vec<(f64, String)>,
    /// How many events the recording holds, and, when some were left out, a sentence saying so.
    pub events_seen: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_note: Option<String>,
    /// GPU memory held by the tree (`gpu_bytes`), at the rows that have it (decimated as `t`,
    /// `v`); empty when the recording has none. Drawn in a panel of its own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_t: Vec<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_v: Vec<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_breaks: Vec<usize>,
    /// A bench window's runs in flight (`bench --concurrency`): `[seconds, count]` after each
    /// change (`events::InFlight`), drawn as steps at the foot of the chart; empty without.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<(f64, u32)>,
}

/// Collects a recording's RSS over time, one sample at a time, in memory that does not grow
/// with it: the series decimated as they come (`decimate::Stream`), at most
/// `events::MAX_EVENTS` events.
#[derive(Default)]
struct Collector {
    rss: Stream,
    gpu: Stream,
    timeline: Timeline,
    events: Events,
    in_flight: crate::render::events::InFlight,
}

impl Collector {
    fn push(&mut self, s: &Sample) {
        let place = self.timeline.push(s);
        if place.new_session {
            self.rss.cut();
            self.gpu.cut();
        }
        let t = place.x;
        self.rss.push(t, s.rss_bytes);
        if let Some(g) = s.gpu.bytes {
            self.gpu.push(t, g);
        }
        if let Some(e) = &s.event {
            self.in_flight.push(round_ms(t), e);
        }
        match &s.event {
            None | Some(Event::Start) => {}
            Some(e) => self.events.push(round_ms(t), e, self.timeline.sessions()),
        }
    }

    fn finish(self, name: String, file: String, role: Option<Role>, summary: &Summary) -> Series {
        let events_note = self.events.note(&name);
        let rss = self.rss.points();
        let (x0, x1) = (
            rss.xs.first().copied().unwrap_or(0.0),
            self.timeline.last_x(),
        );
        let rss = rss.keep(x0, x1, BUCKETS);
        let gpu = self.gpu.points().keep(x0, x1, BUCKETS);
        Series {
            name,
            file,
            role,
            t: rss.xs.iter().map(|&x| round_ms(x)).collect(),
            v: rss.ys,
            breaks: rss.cuts,
            samples: summary.samples,
            kept: rss.xs.len(),
            peak: summary.peak,
            peak_at_least: summary.peak.at_least(),
            sampled_peak_rss_bytes: summary.facts.sampled_peak_rss_bytes,
            lifetime_peak_rss_bytes: summary.lifetime_peak_rss_bytes,
            events: self
                .events
                .iter()
                .map(|(x, e, session)| (x, Events::text(e, session)))
                .collect(),
            events_seen: self.events.seen(),
            events_note,
            gpu_t: gpu.xs.iter().map(|&x| round_ms(x)).collect(),
            gpu_v: gpu.ys,
            gpu_breaks: gpu.cuts,
            in_flight: self.in_flight.steps().to_vec(),
        }
    }
}

fn round_ms(t: f64) -> f64 {
    (t * 1000.0).round() / 1000.0
}

/// One row of the summary table: how to fill a recording's cell.
type SummaryCell<'a> = Box<dyn Fn(&Summary) -> String + 'a>;

/// Everything a report shows.
pub struct Report {
    pub title: String,
    pub series: Vec<Series>,
    pub summaries: Vec<Summary>,
    pub comparison: Option<Comparison>,
    /// Why there is no comparison, when there are several files but no sides.
    pub comparison_note: Option<String>,
}

impl Report {
    /// Reads the recordings (each once). With `new` non-empty, `files` are the baseline and
    /// `new` the candidate; two files without `new` are one run each; else nothing is compared.
    pub fn build(
        files: &[PathBuf],
        new: &[PathBuf],
        spec: &InputSpec,
        above: Option<u64>,
        title: Option<String>,
    ) -> Result<Report, crate::format::ReadError> {
        let roles: Vec<(PathBuf, Option<Role>)> = match (files.len(), new.len()) {
            (2, 0) => vec![
                (files[0].clone(), Some(Role::Base)),
                (files[1].clone(), Some(Role::New)),
            ],
            (_, 0) => files.iter().map(|f| (f.clone(), None)).collect(),
            _ => files
                .iter()
                .map(|f| (f.clone(), Some(Role::Base)))
                .chain(new.iter().map(|f| (f.clone(), Some(Role::New))))
                .collect(),
        };
        let mut series = Vec::new();
        let mut summaries = Vec::new();
        let (mut base, mut cand): (Vec<Run>, Vec<Run>) = (Vec::new(), Vec::new());
        let names = short_names(roles.iter().map(|(p, _)| p.as_path()));
        for ((path, role), name) in roles.iter().zip(names) {
            let mut c = Collector::default();
            // A bench recording counts one run per bench run, as in `memmon compare`.
            let m = measure_file(path, spec, above, false, |s| c.push(s))?;
            let (runs, mut summary) = (m.runs, m.summary);
            summary.read_anatomy(path)?;
            series.push(c.finish(name, path.display().to_string(), *role, &summary));
            summaries.push(summary);
            match role {
                Some(Role::Base) => base.extend(runs),
                Some(Role::New) => cand.extend(runs),
                None => {}
            }
        }
        let comparison = (!base.is_empty() && !cand.is_empty())
            .then(|| Comparison::new(base, cand, above, DEFAULT_MIN_NOISE_PCT, &[]));
        let comparison_note = (comparison.is_none() && roles.len() > 2).then(|| {
            "No comparison: put `--` between the baseline's recordings and the candidate's \
             (memmon report BASE... -- NEW... -o report.html) to compare them."
                .to_string()
        });
        let title = title.unwrap_or_else(|| {
            let names: Vec<String> = roles.iter().map(|(p, _)| file_name(p)).collect();
            format!("memmon report: {}", names.join(", "))
        });
        Ok(Report {
            title,
            series,
            summaries,
            comparison,
            comparison_note,
        })
    }

    /// The whole page.
    pub fn to_html(&self) -> String {
        let mut o = String::with_capacity(64 * 1024);
        let title = esc(&self.title);
        let _ = write!(
            o,
            "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{title}</title>\n<style>\n{STYLE}</style>\n</head>\n\
             <body data-errors=\"0\" data-series=\"0\">\n"
        );
        // First, so that it records errors of everything after it.
        o.push_str(
            "<script>\nwindow.memmonErrors = [];\n\
             function memmonError(text) {\n  window.memmonErrors.push(String(text));\n  \
             document.body.setAttribute('data-errors', String(window.memmonErrors.length));\n  \
             document.body.setAttribute('data-last-error', String(text));\n}\n\
             window.onerror = function (msg, src, line, col) { memmonError(msg + ' (line ' + line + ':' + col + ')'); };\n\
             window.addEventListener('unhandledrejection', function (e) { memmonError('unhandled rejection: ' + e.reason); });\n\
             (function () { var orig = console.error; console.error = function () { memmonError(Array.prototype.join.call(arguments, ' ')); orig.apply(console, arguments); }; })();\n\
             </script>\n",
        );
        let _ = write!(
            o,
            "<header>\n<h1>{title}</h1>\n<p class=\"meta\">Written by memmon {} from {}. \
             Sizes in binary units (1 GiB = 2<sup>30</sup> bytes); time since each recording started.</p>\n</header>\n",
            env!("CARGO_PKG_VERSION"),
            crate::units::count(self.series.len(), "recording")
        );
        o.push_str(
            "<section id=\"chart-section\">\n<h2>RSS over time</h2>\n<div class=\"toolbar\">\
             <button id=\"reset\" type=\"button\">Reset zoom</button>\
             <span class=\"hint\">wheel: zoom · drag: pan · shift+drag: zoom to a range · double-click: reset</span>\
             <span id=\"range\"></span></div>\n\
             <div id=\"chart-wrap\"><canvas id=\"chart\" aria-label=\"RSS over time\"></canvas>\
             <div id=\"tooltip\" role=\"status\" hidden></div></div>\n\
             <div id=\"legend\"></div>\n<p class=\"note\" id=\"decimation-note\"></p>\n\
             <div id=\"selftest-hover\" hidden></div>\n</section>\n",
        );
        if self.series.iter().any(|s| !s.gpu_v.is_empty()) {
            // Device memory has an axis of its own: never drawn on the host's.
            o.push_str(
                "<section id=\"gpu-section\">\n<h2>GPU memory over time</h2>\n\
                 <p class=\"note\">Device memory held by each recording's processes (NVML's \
                 per-process used memory, summed over the tree; sampled), on the time axis above.</p>\n\
                 <div id=\"gpu-wrap\"><canvas id=\"gpu-chart\" aria-label=\"GPU memory over time\"></canvas></div>\n\
                 </section>\n",
            );
        }
        self.write_summaries(&mut o);
        self.write_tables(&mut o);
        self.write_comparison(&mut o);
        let data = serde_json::json!({ "title": self.title, "series": self.series });
        // `<` escaped so that no string in the data can close the script element.
        let data = serde_json::to_string(&data)
            .expect("report data serializes")
            .replace('<', "\\u003c");
        let _ = write!(
            o,
            "<script type=\"application/json\" id=\"memmon-data\">{data}</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n"
        );
        o
    }

    /// Each recording's runs, phases, phases by label and largest processes, and what grew
    /// between the idle floor and the peak and in each phase: the tables `memmon summary`
    /// prints, with the same columns.
    fn write_tables(&self, o: &mut String) {
        for (series, summary) in self.series.iter().zip(&self.summaries) {
            let tables: Vec<_> = summary
                .spans
                .tables()
                .into_iter()
                .chain(summary.processes_table())
                .chain(summary.anatomy_table())
                .chain(summary.phase_anatomy_tables())
                .collect();
            let bar = summary
                .anatomy_at_peak
                .as_ref()
                .and_then(crate::render::anatomy_bar::bar_html);
            let stacks = summary.anatomy_at_peak.as_ref().and_then(|a| {
                let l = a.ledger.as_ref()?;
                let since = summary
                    .anatomy
                    .as_ref()
                    .map_or(&[][..], |g| &g.diff.stacks[..]);
                Some((l, since, a.elapsed_s))
            });
            if tables.is_empty() && bar.is_none() && stacks.is_none() {
                continue;
            }
            let _ = writeln!(
                o,
                "<section class=\"tables\">\n<h2>{}: runs, phases, processes and what grew</h2>",
                esc(&series.name)
            );
            for t in tables {
                t.write_html(o);
            }
            // Beside the table of what grew: what the peak is made of.
            if let Some(bar) = bar {
                o.push_str(&bar);
            }
            if summary
                .anatomy_at_peak
                .as_ref()
                .is_some_and(|a| a.ledger_unanswered)
            {
                let _ = writeln!(
                    o,
                    "<p class=\"note\">No stacks at the highest anatomy: {}.</p>",
                    esc(crate::render::stacks::UNANSWERED)
                );
            }
            // And the code that made it: the ledger's live mappings by stack, as a table and
            // as a flame graph (inferno's SVG, in an <object> so its script runs on its own).
            if let Some((l, since, at)) = stacks {
                crate::render::stacks::live_table(
                    format!(
                        "at the highest anatomy (+{}), the live mappings by the code that made them",
                        fmt_seconds(at)
                    ),
                    l,
                    since,
                )
                .write_html(o);
                flame_graph(
                    o,
                    &crate::render::stacks::folded(l),
                    "the live mappings at the highest anatomy, by the stack that made them (width: bytes resident, or mapped where smaps was not read)",
                    "flame graph of the peak's mappings",
                );
                // Whatever the allocator: the resident memory by the code that first touched
                // it (sampled page faults).
                if let Some(t) = &l.touch {
                    crate::render::stacks::touch_table(
                        format!(
                            "at the highest anatomy (+{}), the resident memory by the code that touched it",
                            fmt_seconds(at)
                        ),
                        t,
                        !summary
                            .target
                            .as_ref()
                            .is_some_and(crate::analysis::summary::Watched::launched),
                        l.lost,
                        l.at_unix_ms,
                    )
                    .write_html(o);
                    flame_graph(
                        o,
                        &crate::render::stacks::folded_touch(t),
                        "the resident memory at the highest anatomy, by the code that touched it (sampled page faults; width: bytes resident)",
                        "flame graph of the peak's memory by touch",
                    );
                }
            }
            o.push_str("</section>\n");
        }
    }

    fn write_summaries(&self, o: &mut String) {
        o.push_str("<section id=\"summaries\">\n<h2>Summary per recording</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th></th>");
        for s in &self.series {
            let role = match s.role {
                Some(Role::Base) => "<span class=\"role base\">baseline</span> ",
                Some(Role::New) => "<span class=\"role new\">candidate</span> ",
                None => "",
            };
            let _ = write!(
                o,
                "<th title=\"{}\">{role}{}</th>",
                esc(&s.file),
                esc(&s.name)
            );
        }
        o.push_str("</tr></thead>\n<tbody>\n");
        let rows = summary_rows(
            self.summaries.iter().any(|s| s.gpu.is_some()),
            self.summaries.iter().any(|s| !s.sessions.is_empty()),
        );
        for (label, cell) in rows.iter() {
            let _ = write!(o, "<tr><th>{label}</th>");
            for s in &self.summaries {
                let _ = write!(o, "<td>{}</td>", cell(s));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</tbody></table></div>\n</section>\n");
    }

    fn write_comparison(&self, o: &mut String) {
        let Some(c) = &self.comparison else {
            if let Some(note) = &self.comparison_note {
                let _ = write!(
                    o,
                    "<section id=\"comparison\">\n<h2>Comparison</h2>\n<p>{}</p>\n</section>\n",
                    esc(note)
                );
            }
            return;
        };
        let runs = |n: usize| {
            if n == 1 {
                "1 run".to_string()
            } else {
                format!("mean of {n} runs")
            }
        };
        let _ = write!(
            o,
            "<section id=\"comparison\">\n<h2>Comparison: candidate against baseline</h2>\n<div class=\"scroll\"><table>\n\
             <thead><tr><th>metric</th><th>baseline ({})</th><th>baseline range</th><th>candidate ({})</th>\
             <th>candidate range</th><th>change</th><th>change %</th><th>verdict</th></tr></thead>\n<tbody>\n",
            runs(c.base.runs.len()),
            runs(c.new.runs.len())
        );
        for d in &c.deltas {
            let range = |s: &crate::analysis::compare::Stats| {
                if s.count == 1 {
                    "–".to_string()
                } else {
                    format!(
                        "{} – {}",
                        fmt_value(d.metric, s.min),
                        fmt_value(d.metric, s.max)
                    )
                }
            };
            let (class, verdict) = match d.verdict {
                crate::analysis::compare::Verdict::Regression => ("regression", "regression"),
                crate::analysis::compare::Verdict::Improvement => ("improvement", "improvement"),
                crate::analysis::compare::Verdict::WithinNoise => ("noise", "within noise"),
            };
            let _ = writeln!(
                o,
                "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{verdict}</td></tr>",
                esc(&metric_label(c, d.metric)),
                esc(&fmt_value(d.metric, d.base.mean)),
                esc(&range(&d.base)),
                esc(&fmt_value(d.metric, d.new.mean)),
                esc(&range(&d.new)),
                esc(&fmt_change(d.metric, d.change)),
                d.change_pct.map(|p| format!("{p:+.1}%")).unwrap_or_else(|| "n/a".into()),
            );
        }
        o.push_str("</tbody></table></div>\n<ul class=\"verdicts\">\n");
        for d in &c.deltas {
            let _ = writeln!(o, "<li>{}</li>", esc(&verdict_sentence(c, d)));
        }
        let not_compared = crate::render::compare_table::above_basis_note(c)
            .map(|n| format!(" ({})", esc(&n)))
            .unwrap_or_default();
        let gpu = crate::render::compare_table::gpu_basis_line(c)
            .map(|g| format!(" {}.", esc(g)))
            .unwrap_or_default();
        let _ = write!(
            o,
            "</ul>\n<p class=\"note\">Peak is {} on both sides, the best kind every run has{not_compared}.{gpu} A change is a regression or an improvement only when the \
             candidate's mean lies outside the baseline's [min, max] widened by the candidate's own range (at least {}% of \
             the baseline mean).</p>\n</section>\n",
            esc(c.peak_basis.describe()),
            c.min_noise_pct
        );
        if c.delta(Metric::Peak).is_none() {
            o.push_str("<p class=\"note\">No peak to compare.</p>\n");
        }
    }
}

/// Each file's name when those are all different, else each path as given.
fn short_names<'a>(paths: impl Iterator<Item = &'a Path> + Clone) -> Vec<String> {
    let names: Vec<String> = paths.clone().map(file_name).collect();
    let unique = names.iter().collect::<std::collections::HashSet<_>>().len() == names.len();
    if unique {
        names
    } else {
        paths.map(|p| p.display().to_string()).collect()
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// A size in a cell: `1.50 GiB (1610612736 bytes)`, the bytes muted.
fn size_cell(v: u64) -> String {
    format!(
        "{} <span class=\"exact\">({v} bytes)</span>",
        esc(&fmt_bytes(v))
    )
}

/// The rows of the summary table: a label and how a recording's cell reads; a GPU row when
/// some recording has GPU memory.
fn summary_rows(with_gpu: bool, with_sessions: bool) -> Vec<(&'static str, SummaryCell<'static>)> {
    let mut rows: Vec<(&str, SummaryCell)> = vec![
        (
            "peak",
            Box::new(|s| {
                // As the summary's headline: where an exact peak holds only up to a row.
                let limit = s
                    .peak_exact_up_to
                    .as_ref()
                    .map(|l| format!("; {l}"))
                    .unwrap_or_default();
                format!(
                    "{}{} ({}{})",
                    esc(s.peak.at_least()),
                    size_cell(s.peak.bytes),
                    esc(&s.peak.describe(s.facts.exact_within_bytes)),
                    esc(&limit)
                )
            }),
        ),
        (
            "tree peak",
            Box::new(|s| {
                s.peak
                    .tree_bounds()
                    .map(|t| esc(&t))
                    .unwrap_or_else(|| "-".into())
            }),
        ),
        (
            "sampled peak",
            Box::new(|s| {
                format!(
                    "{} at {}",
                    size_cell(s.facts.sampled_peak_rss_bytes),
                    esc(&s.sampled_peak_when())
                )
            }),
        ),
        (
            "lifetime peak",
            Box::new(|s| match s.lifetime_peak_rss_bytes {
                Some(l) => format!("{} (set before the recording began)", size_cell(l)),
                None => "-".into(),
            }),
        ),
        (
            "idle floor (10th percentile)",
            Box::new(|s| size_cell(s.idle_rss_bytes)),
        ),
        (
            "held memory",
            Box::new(|s| esc(s.held_words().as_deref().unwrap_or("none"))),
        ),
        ("mean RSS", Box::new(|s| size_cell(s.mean_rss_bytes))),
        ("duration", Box::new(|s| esc(&fmt_seconds(s.duration_s)))),
        ("started", Box::new(|s| esc(&fmt_unix_ms(s.first_unix_ms)))),
        (
            "samples",
            Box::new(|s| {
                let every = s
                    .interval
                    .as_ref()
                    .map(|i| format!(" every {}", esc(i)))
                    .unwrap_or_default();
                format!(
                    "{}{every}, {}, {}",
                    s.samples,
                    crate::units::count(s.missed_ticks, "missed tick"),
                    crate::units::count(s.restarts, "restart")
                )
            }),
        ),
        (
            "target",
            Box::new(|s| {
                esc(&s
                    .target
                    .as_ref()
                    .map_or_else(|| "unknown".into(), |t| t.to_string()))
            }),
        ),
        ("ended", Box::new(|s| esc(&s.ended.to_string()))),
        (
            // An `--append`ed recording's sessions, as `summary` lists them (its notes say
            // "listed above").
            "sessions",
            Box::new(|s| {
                let lines = s.session_lines();
                if lines.is_empty() {
                    "one".into()
                } else {
                    lines
                        .iter()
                        .map(|l| esc(l))
                        .collect::<Vec<_>>()
                        .join("<br>")
                }
            }),
        ),
        (
            "warnings",
            Box::new(|s| {
                if s.warnings.is_empty() {
                    "none".into()
                } else {
                    s.warnings
                        .iter()
                        .map(|w| esc(&w.to_string()))
                        .collect::<Vec<_>>()
                        .join("<br>")
                }
            }),
        ),
    ];
    if !with_sessions {
        rows.retain(|(label, _)| *label != "sessions");
    }
    // GPU memory beside host memory, in its own row (never summed with RSS).
    if with_gpu {
        rows.insert(
            2,
            (
                "GPU peak",
                Box::new(|s| match s.gpu.as_ref().and_then(|g| g.gpu_peak) {
                    Some(p) => format!(
                        "{}{} ({}{})",
                        esc(p.at_least()),
                        size_cell(p.bytes),
                        esc(&crate::render::gpu::describe_peak(&p)),
                        esc(&p
                            .tree_bounds()
                            .map(|t| format!("; the tree's GPU peak is {t}"))
                            .unwrap_or_default())
                    ),
                    None => "not recorded".into(),
                }),
            ),
        );
        rows.insert(
            3,
            (
                "GPU sampled peak (NVML, tree's processes)",
                Box::new(|s| match &s.gpu {
                    Some(g) => format!(
                        "{} at {}{}",
                        size_cell(g.peak_gpu_bytes),
                        esc(&g.peak_at().offset(s.sessions.len())),
                        match (g.device_used_at_peak_bytes, g.device_total_bytes) {
                            (Some(u), Some(t)) => format!(
                                "; its GPUs {} used of {}",
                                esc(&fmt_bytes(u)),
                                esc(&fmt_bytes(t))
                            ),
                            _ => String::new(),
                        }
                    ),
                    None => "not recorded".into(),
                }),
            ),
        );
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::SummaryBuilder;

    fn series(n: usize, spike_at: usize) -> (Collector, Summary) {
        let mut c = Collector::default();
        let mut b = SummaryBuilder::new();
        for i in 0..n {
            let s = Sample {
                elapsed_s: i as f64 * 0.01,
                rss_bytes: if i == spike_at { 200 << 30 } else { 45 << 30 },
                ..Sample::default()
            };
            c.push(&s);
            b.push(&s);
        }
        (c, b.finish(None, None))
    }

    #[test]
    fn a_long_series_is_decimated_and_keeps_its_peak() {
        let (c, sum) = series(100_000, 77_777);
        let s = c.finish("a".into(), "a".into(), None, &sum);
        assert!(s.kept <= 4 * BUCKETS, "{}", s.kept);
        assert_eq!(s.t.len(), s.v.len());
        assert!(s.v.contains(&(200 << 30)));
        assert_eq!(s.samples, 100_000);
    }

    #[test]
    fn an_appended_session_is_drawn_after_the_first() {
        let mut c = Collector::default();
        for (t, ev) in [
            (0.0, Some(Event::Start)),
            (5.0, None),
            (0.0, Some(Event::Start)),
            (1.0, Some(Event::Mark("x".into()))),
        ] {
            c.push(&Sample {
                elapsed_s: t,
                event: ev,
                ..Sample::default()
            });
        }
        let p = c.rss.points();
        assert_eq!(p.xs, vec![0.0, 5.0, 5.0, 6.0]);
        assert_eq!(
            p.cuts,
            vec![2],
            "the second session is not joined to the first"
        );
        let events: Vec<(f64, String)> = c
            .events
            .iter()
            .map(|(x, e, _)| (x, e.to_string()))
            .collect();
        assert_eq!(events, vec![(6.0, "mark:x".to_string())]);
    }

    #[test]
    fn short_names_are_file_names_unless_two_are_alike() {
        let p = |v: &[&'static str]| v.iter().map(|s| Path::new(*s)).collect::<Vec<_>>();
        assert_eq!(
            short_names(p(&["/a/x.csv", "/b/y.csv"]).into_iter()),
            vec!["x.csv", "y.csv"]
        );
        assert_eq!(
            short_names(p(&["/a/x.csv", "/b/x.csv"]).into_iter()),
            vec!["/a/x.csv", "/b/x.csv"]
        );
    }

    #[test]
    fn embedded_data_cannot_close_its_script_element() {
        let (c, sum) = series(3, 1);
        let r = Report {
            title: "t".into(),
            series: vec![c.finish("</script><b>x".into(), "x".into(), None, &sum)],
            summaries: vec![sum],
            comparison: None,
            comparison_note: None,
        };
        let html = r.to_html();
        assert!(!html.contains("</script><b>"));
        assert!(html.contains("\\u003c/script>\\u003cb>x"));
        assert!(html.contains("&lt;/script&gt;&lt;b&gt;x"));
    }

    #[test]
    fn the_page_fetches_nothing() {
        let (c, sum) = series(3, 1);
        let r = Report {
            title: "t".into(),
            series: vec![c.finish("a".into(), "a".into(), None, &sum)],
            summaries: vec![sum],
            comparison: None,
            comparison_note: None,
        };
        let html = r.to_html();
        for needle in ["src=\"http", "href=\"http", "<link", "import(", "fetch("] {
            assert!(!html.contains(needle), "page references {needle}");
        }
    }
}
