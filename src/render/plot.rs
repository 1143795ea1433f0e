//! `memmon plot`: draws recordings as memory over time, to SVG or PNG from one drawing code,
//! with the sampled peak, the kernel's peak, the idle floor and the events marked on it.
//!
//! Each file is read once, its series decimated as they are read (`decimate::Stream`: at most
//! 16,384 time buckets of four points per series) and its events thinned to at most
//! `events::MAX_EVENTS`, so memory does not grow with the file; its summary is built on the
//! way, so the numbers printed on the plot are the ones `memmon summary` prints. The lines are
//! then reduced to four points per pixel column (`decimate::keep_indices`): a day-long
//! recording draws in a fraction of a second and no spike is lost. The text is laid out with
//! DejaVu Sans compiled into the binary, so no system font is needed.

use super::decimate;
use super::events::Events;
use crate::analysis::timeline::Timeline;
use crate::analysis::{Summary, SummaryBuilder};
use crate::format::{InputSpec, ReadError};
use crate::model::sample::{Event, Sample};
use crate::units::{fmt_bytes, fmt_seconds};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::io;
use std::path::{Path, PathBuf};

/// The font family name the embedded font is registered under.
pub(crate) const FONT: &str = "sans-serif";
/// The runs in flight of a bench's window (`bench --concurrency`), on the right axis.
const IN_FLIGHT: RGBColor = RGBColor(120, 120, 120);

/// A size column of a recording that can be drawn as a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeColumn {
    Rss,
    Anon,
    File,
    Shmem,
    Swap,
    Locked,
    Pinned,
    TopRss,
    Hwm,
    HwmSum,
    Pss,
}

impl SizeColumn {
    pub const ALL: [SizeColumn; 11] = [
        SizeColumn::Rss,
        SizeColumn::Anon,
        SizeColumn::File,
        SizeColumn::Shmem,
        SizeColumn::Swap,
        SizeColumn::Locked,
        SizeColumn::Pinned,
        SizeColumn::TopRss,
        SizeColumn::Hwm,
        SizeColumn::HwmSum,
        SizeColumn::Pss,
    ];

    /// The column's name in a recording.
    pub fn name(self) -> &'static str {
        match self {
            SizeColumn::Rss => "rss_bytes",
            SizeColumn::Anon => "anon_bytes",
            SizeColumn::File => "file_bytes",
            SizeColumn::Shmem => "shmem_bytes",
            SizeColumn::Swap => "swap_bytes",
            SizeColumn::Locked => "locked_bytes",
            SizeColumn::Pinned => "pinned_bytes",
            SizeColumn::TopRss => "top_rss_bytes",
            SizeColumn::Hwm => "hwm_bytes",
            SizeColumn::HwmSum => "hwm_sum_bytes",
            SizeColumn::Pss => "pss_bytes",
        }
    }

    /// What the legend calls it.
    pub fn label(self) -> &'static str {
        match self {
            SizeColumn::Rss => "RSS",
            SizeColumn::Anon => "anon (RssAnon)",
            SizeColumn::File => "file (RssFile)",
            SizeColumn::Shmem => "shmem (RssShmem)",
            SizeColumn::Swap => "swap (VmSwap)",
            SizeColumn::Locked => "locked (VmLck)",
            SizeColumn::Pinned => "pinned (VmPin)",
            SizeColumn::TopRss => "largest process's RSS",
            SizeColumn::Hwm => "largest VmHWM",
            SizeColumn::HwmSum => "sum of VmHWM (upper bound)",
            SizeColumn::Pss => "PSS",
        }
    }

    /// Parses a column name, with or without its `_bytes` suffix (`locked_bytes`, `locked`).
    pub fn parse(text: &str) -> Option<SizeColumn> {
        let text = text.trim();
        SizeColumn::ALL
            .into_iter()
            .find(|c| c.name() == text || c.name().strip_suffix("_bytes") == Some(text))
    }

    /// The column's value in a sample; `None` where it was not read (PSS between reads).
    pub fn value(self, s: &Sample) -> Option<u64> {
        Some(match self {
            SizeColumn::Rss => s.rss_bytes,
            SizeColumn::Anon => s.anon_bytes,
            SizeColumn::File => s.file_bytes,
            SizeColumn::Shmem => s.shmem_bytes,
            SizeColumn::Swap => s.swap_bytes,
            SizeColumn::Locked => s.locked_bytes,
            SizeColumn::Pinned => s.pinned_bytes,
            SizeColumn::TopRss => s.top_rss_bytes,
            SizeColumn::Hwm => s.hwm_bytes,
            SizeColumn::HwmSum => s.hwm_sum_bytes,
            SizeColumn::Pss => return s.pss_bytes,
        })
    }
}

/// The image formats a plot can be written as, chosen by the output's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    /// The format `path` asks for; `flag` names the flag it came from, for the error.
    pub fn from_path(path: &Path, flag: &'static str) -> Result<ImageFormat, PlotError> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase())
        {
            Some(e) if e == "svg" => Ok(ImageFormat::Svg),
            Some(e) if e == "png" => Ok(ImageFormat::Png),
            _ => Err(PlotError::BadExtension {
                flag,
                path: path.to_path_buf(),
            }),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{flag} {}: a plot is written as SVG or PNG: give a file name ending in .svg or .png", path.display())]
    BadExtension { flag: &'static str, path: PathBuf },
    #[error("--series {0}: no such size column (choose from {list})", list = series_names())]
    UnknownSeries(String),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("--pss: no PSS values in {0} (PSS is recorded only with `memmon record --pss`)")]
    NoPss(String),
    #[error("{0} holds no samples: there is nothing to plot")]
    NoSamples(PathBuf),
    #[error("cannot draw {0}: {1}")]
    Draw(PathBuf, String),
    #[error("cannot write {0}: {1}")]
    Write(PathBuf, io::Error),
}

impl crate::error::Classified for PlotError {
    /// What the user gave (a flag, a recording) is at fault: `Usage`; the plot could not be
    /// drawn or written: `Failure`.
    fn class(&self) -> crate::exit::Class {
        match self {
            PlotError::Draw(..) | PlotError::Write(..) => crate::exit::Class::Failure,
            _ => crate::exit::Class::Usage,
        }
    }
}

fn series_names() -> String {
    SizeColumn::ALL
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What to draw and how big.
#[derive(Debug, Clone)]
pub struct PlotOptions {
    /// Image size in pixels.
    pub width: u32,
    pub height: u32,
    /// RSS split into anon, file and shmem, drawn as stacked areas under the RSS line.
    pub parts: bool,
    /// Further series drawn as lines (swap, PSS, any size column but RSS).
    pub series: Vec<SizeColumn>,
    /// The title; by default the files' names.
    pub title: Option<String>,
    /// Replace an existing file (`--force`); without it an existing file is refused.
    pub force: bool,
}

impl Default for PlotOptions {
    fn default() -> Self {
        PlotOptions {
            width: 1200,
            height: 600,
            parts: false,
            series: Vec::new(),
            title: None,
            force: false,
        }
    }
}

impl PlotOptions {
    /// Adds the series named by `--series` (and `--swap`, `--pss`), refusing unknown names.
    pub fn add_series<S: AsRef<str>>(&mut self, names: &[S]) -> Result<(), PlotError> {
        for name in names {
            let name = name.as_ref();
            let col = SizeColumn::parse(name)
                .ok_or_else(|| PlotError::UnknownSeries(name.to_string()))?;
            if col != SizeColumn::Rss && !self.series.contains(&col) {
                self.series.push(col);
            }
        }
        Ok(())
    }
}

/// A series as drawn: the points kept of it (x on the recording's timeline, value), in
/// segments, one per session of an `--append`ed recording.
type Line = decimate::Points;

/// One extra series of a recording (a sparse column, PSS, only at the rows that have it).
struct Series {
    column: SizeColumn,
    line: Line,
}

/// One recording, read for drawing: each series decimated as it was read
/// (`decimate::Stream`), its events thinned to at most `events::MAX_EVENTS`, so a trace holds
/// a bounded amount whatever the recording's length.
pub struct Trace {
    /// The name in the legend: the file's name.
    pub name: String,
    /// RSS at the points kept.
    rss: Line,
    /// The x of the last sample: the recording's span on its timeline.
    span_s: f64,
    /// anon, anon + file, anon + file + shmem: the tops of the stacked areas.
    parts: Option<[Line; 3]>,
    series: Vec<Series>,
    /// GPU memory held by the tree (`gpu_bytes`), at the rows that have it.
    gpu: Line,
    events: Events,
    /// The clients of a bench's window in flight over time (`bench --concurrency`).
    in_flight: super::events::InFlight,
    pub summary: Summary,
}

impl Trace {
    /// The x of each RSS point drawn (seconds on the recording's timeline): the first and the
    /// last sample's among them.
    pub fn xs(&self) -> &[f64] {
        &self.rss.xs
    }

    /// The sampled peak as the summary states it: its x (`Summary::sampled_peak_x_s`) and RSS.
    fn peak(&self) -> (f64, u64) {
        (
            self.summary.sampled_peak_x_s,
            self.summary.facts.sampled_peak_rss_bytes,
        )
    }

    /// What the plot left out of this recording, for the user (`None` when nothing).
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.events.note(&self.name).into_iter().collect();
        if self.in_flight.cut {
            notes.push(format!(
                "{}: the runs in flight are drawn up to their {}th change (the rest left out)",
                self.name,
                super::events::MAX_IN_FLIGHT_STEPS
            ));
        }
        if let Some(l) = self.summary.truncated_line {
            notes.push(format!(
                "{}: line {l} is incomplete (the file ends inside it) and was skipped",
                self.name
            ));
        }
        notes.extend(
            self.summary
                .rows_lost_warnings()
                .iter()
                .map(|w| w.to_string()),
        );
        notes
    }
}

/// Reads a recording for drawing with `opts`, building its summary on the way. What is kept
/// does not grow with the recording (`Trace`).
pub fn load(path: &Path, spec: &InputSpec, opts: &PlotOptions) -> Result<Trace, PlotError> {
    let mut builder = SummaryBuilder::new();
    // x: seconds on the recording's timeline (sessions of an --append'ed one included).
    let mut timeline = Timeline::new();
    let mut rss = decimate::Stream::new();
    let mut parts = opts.parts.then(<[decimate::Stream; 3]>::default);
    let mut series: Vec<(SizeColumn, decimate::Stream)> = opts
        .series
        .iter()
        .map(|&column| (column, decimate::Stream::new()))
        .collect();
    let mut events = Events::default();
    let mut in_flight = super::events::InFlight::default();
    let mut gpu = decimate::Stream::new();
    let on_sample = |s: &Sample| {
        let place = timeline.push(s);
        let x = place.x;
        if place.new_session {
            // The time between two sessions is drawn as a gap.
            rss.cut();
            gpu.cut();
            for stream in parts.iter_mut().flatten() {
                stream.cut();
            }
            for (_, stream) in &mut series {
                stream.cut();
            }
        }
        if let Some(ev) = &s.event {
            if !(rss.seen() == 0 && *ev == Event::Start) {
                events.push(x, ev, timeline.sessions());
            }
            in_flight.push(x, ev);
        }
        rss.push(x, s.rss_bytes);
        if let Some(g) = s.gpu.bytes {
            gpu.push(x, g);
        }
        if let Some([anon, file, shmem]) = &mut parts {
            anon.push(x, s.anon_bytes);
            file.push(x, s.anon_bytes + s.file_bytes);
            shmem.push(x, s.anon_bytes + s.file_bytes + s.shmem_bytes);
        }
        for (column, stream) in &mut series {
            if let Some(v) = column.value(s) {
                stream.push(x, v);
            }
        }
    };
    let info = crate::format::read_input_into(
        path,
        spec,
        &mut crate::format::Tee {
            sink: &mut builder,
            on_sample,
        },
    )?;
    let summary = Summary::of_read(builder, path.display().to_string(), &info);
    if summary.samples == 0 {
        return Err(PlotError::NoSamples(path.to_path_buf()));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    Ok(Trace {
        name,
        rss: rss.points(),
        span_s: timeline.last_x(),
        parts: parts.map(|p| p.each_ref().map(decimate::Stream::points)),
        series: series
            .iter()
            .map(|(column, stream)| Series {
                column: *column,
                line: stream.points(),
            })
            .collect(),
        gpu: gpu.points(),
        events,
        in_flight,
        summary,
    })
}

/// Each trace's name: its file name; files of one name from different folders are all told
/// apart by the path as given, and a file given twice by its place (`run.csv (2)`).
fn trace_names(files: &[PathBuf]) -> Vec<String> {
    let short: Vec<String> = files
        .iter()
        .map(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.display().to_string())
        })
        .collect();
    let given: Vec<String> = files
        .iter()
        .zip(&short)
        .map(|(p, n)| {
            if short.iter().filter(|m| *m == n).count() > 1 {
                p.display().to_string()
            } else {
                n.clone()
            }
        })
        .collect();
    given
        .iter()
        .enumerate()
        .map(
            |(i, n)| match given[..i].iter().filter(|m| *m == n).count() {
                0 => n.clone(),
                before => format!("{n} ({})", before + 1),
            },
        )
        .collect()
}

/// Reads `files` and draws them, overlaid, into `out`. Returns what the user should know of
/// what was left out (events past `events::MAX_EVENTS` of a recording), a line each.
pub fn plot_files(
    files: &[PathBuf],
    spec: &InputSpec,
    opts: &PlotOptions,
    out: &Path,
    format: ImageFormat,
) -> Result<Vec<String>, PlotError> {
    let mut traces = files
        .iter()
        .map(|f| load(f, spec, opts))
        .collect::<Result<Vec<_>, _>>()?;
    for (t, name) in traces.iter_mut().zip(trace_names(files)) {
        // A file's name is text from outside: no control character in the SVG (`render::outside`).
        t.name = crate::outside::shown(&name).into_owned();
    }
    let has_pss = |t: &Trace| {
        t.series
            .iter()
            .any(|s| s.column == SizeColumn::Pss && !s.line.ys.is_empty())
    };
    if opts.series.contains(&SizeColumn::Pss) && !traces.iter().any(has_pss) {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        return Err(PlotError::NoPss(names.join(", ")));
    }
    draw(&traces, opts, out, format)?;
    Ok(traces.iter().flat_map(Trace::notes).collect())
}

/// Draws `traces` into `out` (SVG or PNG: the same drawing code on two backends).
pub fn draw(
    traces: &[Trace],
    opts: &PlotOptions,
    out: &Path,
    format: ImageFormat,
) -> Result<(), PlotError> {
    struct Recordings<'a>(&'a [Trace], &'a PlotOptions);
    impl Picture for Recordings<'_> {
        fn draw_on<DB: DrawingBackend>(
            &self,
            root: &DrawingArea<DB, Shift>,
            vector: bool,
        ) -> DrawResult<DB> {
            draw_on(root, self.0, self.1, vector)
        }
    }
    let size = (opts.width.max(200), opts.height.max(150));
    write_picture(&Recordings(traces, opts), size, out, format, opts.force)
}

/// An image drawn the same way on either backend (`vector`: SVG, where text is not raster).
pub trait Picture {
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        vector: bool,
    ) -> DrawResult<DB>;
}

/// Draws `picture` at `size` pixels into `out`, as SVG or PNG, the file written whole (an
/// existing one only with `force`).
pub fn write_picture(
    picture: &impl Picture,
    size: (u32, u32),
    out: &Path,
    format: ImageFormat,
    force: bool,
) -> Result<(), PlotError> {
    register_font();
    let draw_err = |e: String| PlotError::Draw(out.to_path_buf(), e);
    match format {
        ImageFormat::Svg => {
            let mut text = String::new();
            {
                let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
                picture
                    .draw_on(&root, true)
                    .map_err(|e| draw_err(e.to_string()))?;
                root.present().map_err(|e| draw_err(e.to_string()))?;
            }
            crate::output::write_whole(out, text.as_bytes(), force)
                .map_err(|e| PlotError::Write(out.to_path_buf(), e))
        }
        ImageFormat::Png => {
            let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
                picture
                    .draw_on(&root, false)
                    .map_err(|e| draw_err(e.to_string()))?;
                root.present().map_err(|e| draw_err(e.to_string()))?;
            }
            // Encoded into a fresh temporary file of our own, renamed over `out` when complete.
            crate::output::write_via(out, force, |tmp| write_png(tmp, &rgb, size))
                .map_err(|e| PlotError::Write(out.to_path_buf(), e))
        }
    }
}

/// Encodes an RGB buffer as an 8-bit PNG (plotters draws it; the `png` crate alone encodes it,
/// so no image library with its decoders is linked in).
fn write_png(file: &mut std::fs::File, rgb: &[u8], (width, height): (u32, u32)) -> io::Result<()> {
    let mut encoder = png::Encoder::new(io::BufWriter::new(file), width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(io::Error::other)?;
    writer.write_image_data(rgb).map_err(io::Error::other)?;
    writer.finish().map_err(io::Error::other)
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bytes are DejaVu Sans from the `dejavu` crate: a valid font, so this cannot fail.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

/// The longest recording's span on its timeline (seconds; at least a millisecond).
fn span_of(traces: &[Trace]) -> f64 {
    traces
        .iter()
        .map(|t| t.span_s)
        .fold(0.0, f64::max)
        .max(1e-3)
}

/// A binary size unit for the y axis.
pub(crate) struct SizeUnit {
    pub bytes: f64,
    pub label: &'static str,
}

impl SizeUnit {
    /// GiB from 1 GiB up, MiB from 1 MiB, else KiB.
    pub fn for_max(max: u64) -> SizeUnit {
        if max >= 1 << 30 {
            SizeUnit {
                bytes: (1u64 << 30) as f64,
                label: "GiB, 2^30 bytes",
            }
        } else if max >= 1 << 20 {
            SizeUnit {
                bytes: (1u64 << 20) as f64,
                label: "MiB, 2^20 bytes",
            }
        } else {
            SizeUnit {
                bytes: 1024.0,
                label: "KiB, 2^10 bytes",
            }
        }
    }
}

/// A time unit for the x axis: seconds up to an hour, then minutes up to ten hours, then hours.
fn time_unit(span_s: f64) -> (f64, &'static str) {
    if span_s <= 3600.0 {
        (1.0, "s")
    } else if span_s <= 36_000.0 {
        (60.0, "min")
    } else {
        (3600.0, "h")
    }
}

const LINE_COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
];
/// Extra series of a single recording, in `--series` order.
const EXTRA_COLORS: [RGBColor; 5] = [
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(227, 119, 194),
];
/// anon, file, shmem areas.
const PART_COLORS: [RGBColor; 3] = [
    RGBColor(174, 199, 232),
    RGBColor(255, 187, 120),
    RGBColor(152, 223, 138),
];

pub type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// A text to place beside a point without covering the other labels.
struct Label {
    text: String,
    /// The point, in pixels; the label sits above it (or below, or further away, when taken).
    at: (i32, i32),
    /// Whether the label extends to the right of the point (else to its left).
    left: bool,
    color: RGBColor,
    size: u32,
    /// How many heights away from the point it may go.
    rows: i32,
    /// Whether it is left out when it finds no room (else it overlaps another).
    optional: bool,
}

/// Draws `labels` in order, each on a light background, moving each one up or down by its
/// height until it overlaps none placed before it, within `area` (pixels). An optional label
/// that finds no room within its `rows` is left out (of many events close together, some).
fn place_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: (std::ops::Range<i32>, std::ops::Range<i32>),
    labels: &[Label],
) -> DrawResult<DB> {
    let (xr, yr) = area;
    let mut placed: Vec<[i32; 4]> = Vec::new();
    let overlaps =
        |a: &[i32; 4], b: &[i32; 4]| a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
    for l in labels {
        let font = TextStyle::from((FONT, l.size).into_font());
        let (w, h) = root.estimate_text_size(&l.text, &font)?;
        let (w, h) = (w as i32 + 6, h as i32 + 4);
        let x0 = if l.left { l.at.0 } else { l.at.0 - w };
        let x0 = x0.clamp(xr.start + 1, (xr.end - w - 1).max(xr.start + 1));
        let above = l.at.1 - h - 1;
        let below = l.at.1 + 2;
        let candidates = (0..l.rows).flat_map(|k| [above - k * h, below + k * h]);
        let fits = |top: i32| top >= yr.start && top + h <= yr.end;
        let rect = |top: i32| [x0, top, x0 + w, top + h];
        let free = candidates
            .clone()
            .find(|&top| fits(top) && !placed.iter().any(|p| overlaps(p, &rect(top))));
        let top = match (free, l.optional) {
            (Some(top), _) => top,
            (None, true) => continue,
            (None, false) => candidates.clone().find(|&top| fits(top)).unwrap_or(above),
        };
        placed.push(rect(top));
        root.draw(&Rectangle::new(
            [(x0, top), (x0 + w, top + h)],
            WHITE.mix(0.75).filled(),
        ))?;
        root.draw(&Text::new(
            l.text.clone(),
            (x0 + 3, top + 2),
            font.color(&l.color).pos(Pos::new(HPos::Left, VPos::Top)),
        ))?;
    }
    Ok(())
}

/// The grid, tick labels and axis names of a chart: `x_desc` across, `y_desc` up.
pub(crate) fn draw_axes<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    x_desc: &str,
    y_desc: &str,
) -> DrawResult<DB> {
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(220, 220, 220))
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()
}

/// An axis tick without trailing zeros: `0`, `2.5`, `1000`.
pub(crate) fn tick(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// An event's label on the image; `session`: a bench run's session, where the recording's runs
/// come from several (`Events::iter`).
fn event_label(ev: &Event, session: Option<u32>) -> String {
    use crate::analysis::phases::run_label;
    match ev {
        Event::Start => "recording resumed".to_string(),
        Event::Restart(pid) => format!("restart (pid {pid})"),
        Event::Mark(label) if label.chars().count() > 40 => {
            format!("{}…", label.chars().take(39).collect::<String>())
        }
        Event::Mark(label) => label.clone(),
        Event::RunStart(n) => format!("{} start", run_label(*n, session)),
        Event::RunEnd(n) => format!("{} end", run_label(*n, session)),
        Event::ClientStart(n) => format!("client {n} start"),
        Event::ClientEnd(n) => format!("client {n} end"),
    }
}

/// The whole image: host memory on top and, when a recording has GPU memory, a second panel
/// below with its own axis (device memory is never drawn on the host axis).
fn draw_on<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    traces: &[Trace],
    opts: &PlotOptions,
    vector: bool,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let (_, h) = root.dim_in_pixel();
    // A bench's runs in flight in a band of their own at the bottom; the memory panels keep
    // the top-left corner, so their label coordinates stay the image's.
    let (memory, in_flight) = if traces.iter().any(|t| t.in_flight.most() > 0) {
        let (m, f) = root.split_vertically(h.saturating_sub(IN_FLIGHT_BAND_PX));
        (m, Some(f))
    } else {
        (root.clone(), None)
    };
    if traces.iter().any(|t| !t.gpu.ys.is_empty()) {
        let (_, h) = memory.dim_in_pixel();
        let (host, gpu) = memory.split_vertically((h as f64 * 0.64) as u32);
        draw_host(&host, traces, opts, vector)?;
        draw_gpu(&gpu, traces)?;
    } else {
        draw_host(&memory, traces, opts, vector)?;
    }
    match in_flight {
        Some(band) => draw_in_flight(&band, traces),
        None => Ok(()),
    }
}

/// The height of the runs-in-flight band.
const IN_FLIGHT_BAND_PX: u32 = 150;

/// The runs of a bench's window in flight over time (`bench --concurrency`: its
/// `client-start:N` and `client-end:N` rows), over the same time axis as the memory above.
fn draw_in_flight<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    traces: &[Trace],
) -> DrawResult<DB> {
    let span_s = span_of(traces);
    let (t_scale, t_name) = time_unit(span_s);
    let most = traces.iter().map(|t| t.in_flight.most()).max().unwrap_or(1);
    let mut chart = ChartBuilder::on(area)
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..span_s / t_scale, 0f64..f64::from(most) * 1.25)?;
    chart
        .configure_mesh()
        .x_desc(format!("Time since start ({t_name})"))
        .y_desc("Runs in flight")
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(220, 220, 220))
        .y_labels(most as usize + 2)
        .x_label_formatter(&|v| tick(*v))
        // Whole runs only.
        .y_label_formatter(&|v| {
            if v.fract() == 0.0 {
                tick(*v)
            } else {
                String::new()
            }
        })
        .draw()?;
    let several = traces.len() > 1;
    for (i, t) in traces
        .iter()
        .enumerate()
        .filter(|(_, t)| t.in_flight.most() > 0)
    {
        let color = if several {
            LINE_COLORS[i % LINE_COLORS.len()]
        } else {
            IN_FLIGHT
        };
        let points: Vec<(f64, f64)> = t
            .in_flight
            .corners()
            .into_iter()
            .map(|(x, n)| (x / t_scale, n))
            .collect();
        chart.draw_series(LineSeries::new(points, color.stroke_width(2)))?;
    }
    Ok(())
}

/// The GPU panel: each recording's `gpu_bytes` over the same time axis as the host panel.
fn draw_gpu<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, traces: &[Trace]) -> DrawResult<DB> {
    let several = traces.len() > 1;
    let span_s = span_of(traces);
    let (t_scale, t_name) = time_unit(span_s);
    let x_max = span_s / t_scale;
    // The decided GPU peak of each recording (`analysis::gpu::budget_peak`), drawn as a line
    // where it is the driver's mark rather than the samples' largest.
    let marks = |t: &Trace| {
        t.summary
            .gpu
            .as_ref()
            .and_then(|g| g.gpu_peak)
            .filter(|p| p.source != crate::model::peak::PeakSource::Sampled)
    };
    let y_max = traces
        .iter()
        .map(|t| t.gpu.max().max(marks(t).map_or(0, |p| p.bytes)))
        .max()
        .unwrap_or(0)
        .max(1);
    let unit = SizeUnit::for_max(y_max);
    let y_top = (y_max.max(1024) as f64 / unit.bytes) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, 0f64..y_top)?;
    let across = format!("Time since start ({t_name})");
    draw_axes(&mut chart, &across, &format!("GPU memory ({})", unit.label))?;
    let (px_range, _) = chart.plotting_area().get_pixel_range();
    let width_px = (px_range.end - px_range.start).max(1) as usize;
    for (ti, t) in traces.iter().enumerate() {
        if t.gpu.ys.is_empty() {
            continue;
        }
        let color = LINE_COLORS[ti % LINE_COLORS.len()];
        let prefix = if several {
            format!("{}: ", t.name)
        } else {
            String::new()
        };
        let label = format!(
            "{prefix}GPU memory of the tree (NVML, sampled), GPU sampled peak {}",
            fmt_bytes(t.gpu.max())
        );
        if let Some(p) = marks(t) {
            let k = p.bytes as f64 / unit.bytes;
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.0, k), (x_max, k)],
                    7,
                    4,
                    color.mix(0.8).stroke_width(1),
                ))?
                .label(format!(
                    "{prefix}GPU peak {} ({}) {}{}",
                    p.scope,
                    p.counter,
                    p.at_least(),
                    fmt_bytes(p.bytes)
                ))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.mix(0.8).stroke_width(1))
                });
        }
        // A step line per session: a GPU value holds until the next reading.
        let kept = t.gpu.keep(0.0, span_s, width_px);
        let steps = kept.segments().map(|seg| {
            let mut pts: Vec<(f64, f64)> = Vec::with_capacity(seg.len() * 2);
            for i in seg {
                let (x, y) = (kept.xs[i] / t_scale, kept.ys[i] as f64 / unit.bytes);
                if let Some(&(_, before)) = pts.last() {
                    pts.push((x, before));
                }
                pts.push((x, y));
            }
            PathElement::new(pts, color.stroke_width(2))
        });
        chart
            .draw_series(steps)?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// The chart type of both panels: seconds (scaled) against sizes (scaled); a sweep's picture's
/// too (peaks against throughputs).
pub(crate) type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The legend of the series drawn with a label, at `at`.
pub(crate) fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    at: SeriesLabelPosition,
) -> DrawResult<DB> {
    chart
        .configure_series_labels()
        .position(at)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .draw()
}

/// How the host panel maps a recording onto its axes, and whether it shows several files.
struct HostScale {
    several: bool,
    span_s: f64,
    /// Seconds per x unit, and sizes per y unit.
    t_scale: f64,
    unit: SizeUnit,
    x_max: f64,
    y_top: f64,
    /// The plotting area's width, for the decimation.
    width_px: usize,
}

impl HostScale {
    fn y(&self, bytes: u64) -> f64 {
        bytes as f64 / self.unit.bytes
    }

    /// `line` as its segments (one per session), reduced to the pixel columns.
    fn segments(&self, line: &Line) -> Vec<Vec<(f64, f64)>> {
        let kept = line.keep(0.0, self.span_s, self.width_px);
        kept.segments()
            .map(|seg| {
                seg.map(|i| (kept.xs[i] / self.t_scale, self.y(kept.ys[i])))
                    .collect()
            })
            .collect()
    }

    /// `NAME: ` before a label when several files are drawn.
    fn prefix(&self, t: &Trace) -> String {
        if self.several {
            format!("{}: ", t.name)
        } else {
            String::new()
        }
    }
}

/// The host panel: RSS, its parts and extra series, peaks, idle floor and events.
fn draw_host<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    traces: &[Trace],
    opts: &PlotOptions,
    vector: bool,
) -> DrawResult<DB> {
    let span_s = span_of(traces);
    let mut y_max = 0u64;
    for t in traces {
        y_max = y_max
            .max(t.summary.facts.sampled_peak_rss_bytes)
            .max(t.summary.peak.bytes);
        if let Some(p) = &t.parts {
            y_max = y_max.max(p[2].max());
        }
        for s in &t.series {
            y_max = y_max.max(s.line.max());
        }
    }
    let unit = SizeUnit::for_max(y_max.max(1));
    let (t_scale, t_name) = time_unit(span_s);
    // Headroom above the highest value for the labels.
    let y_top = (y_max.max(1024) as f64 / unit.bytes) * 1.15;

    let title = opts.title.clone().unwrap_or_else(|| {
        let names: Vec<&str> = traces.iter().map(|t| t.name.as_str()).collect();
        format!("Memory of {}", names.join(" vs "))
    });
    let what = if opts.parts || !opts.series.is_empty() {
        "Memory"
    } else {
        "RSS"
    };
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..span_s / t_scale, 0f64..y_top)?;
    let across = format!("Time since start ({t_name})");
    draw_axes(&mut chart, &across, &format!("{what} ({})", unit.label))?;
    let (px_range, _) = chart.plotting_area().get_pixel_range();
    let scale = HostScale {
        several: traces.len() > 1,
        span_s,
        t_scale,
        unit,
        x_max: span_s / t_scale,
        y_top,
        width_px: (px_range.end - px_range.start).max(1) as usize,
    };

    // Stacked parts first, so the lines are drawn over them; labels are placed last, where
    // there is room: the peak dots' first, the events' last.
    draw_parts(&mut chart, &scale, traces)?;
    let mut labels = draw_levels(&mut chart, &scale, traces)?;
    let event_labels = draw_events(&mut chart, &scale, traces)?;
    draw_lines(&mut chart, &scale, traces, vector)?;
    let mut peak_labels = draw_peaks(&mut chart, &scale, traces)?;
    peak_labels.append(&mut labels);
    let mut labels = peak_labels;
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    labels.extend(events_left_out(traces, &scale, (xr.start, yr.start)));
    labels.extend(event_labels);
    place_labels(root, (xr, yr), &labels)?;
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}

/// The stacked areas of anon, file and shmem (`--parts`), a polygon per session.
fn draw_parts<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    scale: &HostScale,
    traces: &[Trace],
) -> DrawResult<DB> {
    const PARTS: [SizeColumn; 3] = [SizeColumn::Anon, SizeColumn::File, SizeColumn::Shmem];
    for t in traces {
        let Some(parts) = &t.parts else { continue };
        for k in (0..3).rev() {
            let color = PART_COLORS[k].mix(if scale.several { 0.45 } else { 1.0 });
            let label = format!("{}{}", scale.prefix(t), PARTS[k].label());
            chart
                .draw_series(scale.segments(&parts[k]).into_iter().map(|mut seg| {
                    // The area under the segment: down to 0 at its ends.
                    if let (Some(&(x0, _)), Some(&(x1, _))) = (seg.first(), seg.last()) {
                        seg.extend([(x1, 0.0), (x0, 0.0)]);
                    }
                    Polygon::new(seg, color.filled())
                }))?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 18, y + 5)], color.filled())
                });
        }
    }
    Ok(())
}

/// Horizontal lines across the panel: the recording's peak where the kernel (or its cgroup)
/// knows it, the line every sample stays under, and the idle floor. Returns their labels.
fn draw_levels<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    scale: &HostScale,
    traces: &[Trace],
) -> Result<Vec<Label>, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut labels = Vec::new();
    for (ti, t) in traces.iter().enumerate() {
        let color = LINE_COLORS[ti % LINE_COLORS.len()];
        let prefix = scale.prefix(t);
        let s = &t.summary;
        if s.peak.source != crate::model::peak::PeakSource::Sampled {
            let k = scale.y(s.peak.bytes);
            let scope = if s.peak.scope == crate::model::peak::PeakScope::Process {
                String::new()
            } else {
                format!(" {}", s.peak.scope)
            };
            chart.draw_series(DashedLineSeries::new(
                [(0.0, k), (scale.x_max, k)],
                7,
                4,
                color.mix(0.8).stroke_width(1),
            ))?;
            labels.push(Label {
                text: format!(
                    "{prefix}peak{scope} ({}) {}{}",
                    s.peak.counter,
                    s.peak.at_least(),
                    fmt_bytes(s.peak.bytes)
                ),
                at: chart.backend_coord(&(scale.x_max, k)),
                left: false,
                color,
                size: 13,
                rows: 8,
                optional: false,
            });
        }
        let idle = scale.y(s.idle_rss_bytes);
        chart.draw_series(DashedLineSeries::new(
            [(0.0, idle), (scale.x_max, idle)],
            2,
            3,
            color.mix(0.7).stroke_width(1),
        ))?;
        labels.push(Label {
            text: format!(
                "{prefix}idle floor (10th percentile) {}",
                fmt_bytes(s.idle_rss_bytes)
            ),
            at: chart.backend_coord(&(0.0, idle)),
            left: true,
            color,
            size: 13,
            rows: 8,
            optional: false,
        });
    }
    Ok(labels)
}

/// Events as vertical lines. Returns their labels, to go at the top where there is room.
fn draw_events<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    scale: &HostScale,
    traces: &[Trace],
) -> Result<Vec<Label>, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut labels = Vec::new();
    for (ti, t) in traces.iter().enumerate() {
        let color = if scale.several {
            LINE_COLORS[ti % LINE_COLORS.len()]
        } else {
            RGBColor(90, 90, 90)
        };
        for (x, ev, session) in t.events.iter() {
            let x = x / scale.t_scale;
            chart.draw_series(LineSeries::new(
                [(x, 0.0), (x, scale.y_top)],
                color.mix(0.55).stroke_width(1),
            ))?;
            let (px, top) = chart.backend_coord(&(x, scale.y_top));
            labels.push(Label {
                text: event_label(ev, session),
                at: (px + 2, top),
                left: true,
                color,
                size: 12,
                rows: 4,
                optional: true,
            });
        }
    }
    Ok(labels)
}

/// The lines: RSS of each file, then the extra series, a path per session. A bitmap gets a
/// wide line as 1-pixel lines side by side: plotters' wide-line polygons spike at the sharp
/// turns of a decimated series, drawing values that are not there.
fn draw_lines<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    scale: &HostScale,
    traces: &[Trace],
    vector: bool,
) -> DrawResult<DB> {
    let (_, py_range) = chart.plotting_area().get_pixel_range();
    let one_px = scale.y_top / (py_range.end - py_range.start).max(1) as f64;
    let strokes = |segments: Vec<Vec<(f64, f64)>>, color: RGBAColor, width: u32| {
        let mut paths = Vec::new();
        for pts in segments {
            if vector {
                paths.push(PathElement::new(pts, color.stroke_width(width)));
                continue;
            }
            for k in 0..width {
                let shifted: Vec<(f64, f64)> = pts
                    .iter()
                    .map(|&(x, y)| (x, y - k as f64 * one_px))
                    .collect();
                paths.push(PathElement::new(shifted, color.stroke_width(1)));
            }
        }
        paths
    };
    for (ti, t) in traces.iter().enumerate() {
        let color = LINE_COLORS[ti % LINE_COLORS.len()];
        let label = if scale.several {
            format!("{} RSS", t.name)
        } else {
            "RSS (sampled)".to_string()
        };
        chart
            .draw_series(strokes(scale.segments(&t.rss), color.to_rgba(), 2))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
        for (si, s) in t.series.iter().enumerate() {
            if s.line.ys.is_empty() {
                continue;
            }
            let color = if scale.several {
                color.mix(0.9)
            } else {
                EXTRA_COLORS[si % EXTRA_COLORS.len()].mix(1.0)
            };
            let width = if scale.several { 1 } else { 2 };
            chart
                .draw_series(strokes(scale.segments(&s.line), color, width))?
                .label(format!("{}{}", scale.prefix(t), s.column.label()))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(width))
                });
        }
    }
    Ok(())
}

/// The sampled peak of each file: a dot. Returns the labels of its value and time, the first
/// to be placed.
fn draw_peaks<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    scale: &HostScale,
    traces: &[Trace],
) -> Result<Vec<Label>, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut labels = Vec::new();
    for (ti, t) in traces.iter().enumerate().rev() {
        let color = LINE_COLORS[ti % LINE_COLORS.len()];
        let (x, y) = (t.peak().0 / scale.t_scale, scale.y(t.peak().1));
        chart
            .plotting_area()
            .draw(&Circle::new((x, y), 4, color.filled()))?;
        let (px, py) = chart.backend_coord(&(x, y));
        let left = x < 0.6 * scale.x_max;
        labels.insert(
            0,
            Label {
                text: format!(
                    "{}sampled peak {} at {}",
                    scale.prefix(t),
                    fmt_bytes(t.summary.facts.sampled_peak_rss_bytes),
                    fmt_seconds(t.peak().0)
                ),
                at: (if left { px + 8 } else { px - 8 }, py - 2),
                left,
                color,
                size: 14,
                rows: 8,
                optional: false,
            },
        );
    }
    Ok(labels)
}

/// For each file with events left out, a line at the top left of the plot saying how many were
/// drawn (the plot's top-left corner is `corner`, in pixels).
fn events_left_out(traces: &[Trace], scale: &HostScale, corner: (i32, i32)) -> Vec<Label> {
    traces
        .iter()
        .enumerate()
        .filter(|(_, t)| t.events.dropped() > 0)
        .map(|(ti, t)| Label {
            text: format!(
                "{}{} of {} events drawn (one in {}, spread over the recording)",
                scale.prefix(t),
                t.events.seen() - t.events.dropped(),
                t.events.seen(),
                t.events.stride()
            ),
            at: (corner.0 + 4, corner.1 + 4 + 18 * (ti as i32 + 1)),
            left: true,
            color: RGBColor(90, 90, 90),
            size: 12,
            rows: 8,
            optional: false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_of_one_name_are_each_labelled_by_their_path_and_a_repeat_by_its_place() {
        let names = |f: &[&str]| {
            super::trace_names(&f.iter().map(std::path::PathBuf::from).collect::<Vec<_>>())
        };
        // The second lost its folder: "base/run.csv vs run.csv".
        assert_eq!(
            names(&["base/run.csv", "cand/run.csv"]),
            ["base/run.csv", "cand/run.csv"]
        );
        assert_eq!(names(&["a/x.csv", "b/y.csv"]), ["x.csv", "y.csv"]);
        assert_eq!(
            names(&["good.csv", "good.csv", "good.csv", "other.csv"]),
            ["good.csv", "good.csv (2)", "good.csv (3)", "other.csv"]
        );
    }

    #[test]
    fn size_columns_parse_with_or_without_their_unit() {
        assert_eq!(SizeColumn::parse("locked_bytes"), Some(SizeColumn::Locked));
        assert_eq!(SizeColumn::parse("hwm_sum"), Some(SizeColumn::HwmSum));
        assert_eq!(SizeColumn::parse("processes"), None);
        assert_eq!(SizeColumn::parse("elapsed_s"), None);
    }

    #[test]
    fn an_unknown_series_is_refused_with_the_flag_and_the_choices() {
        let err = PlotOptions::default().add_series(&["bogus"]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("--series bogus:"), "{msg}");
        assert!(msg.contains("locked_bytes"), "{msg}");
        assert_eq!(
            crate::error::Classified::class(&err),
            crate::exit::Class::Usage
        );
    }

    #[test]
    fn the_output_format_comes_from_the_extension() {
        assert_eq!(
            ImageFormat::from_path(Path::new("a/b.SVG"), "-o").unwrap(),
            ImageFormat::Svg
        );
        assert_eq!(
            ImageFormat::from_path(Path::new("b.png"), "-o").unwrap(),
            ImageFormat::Png
        );
        let msg = ImageFormat::from_path(Path::new("b.jpg"), "--plot")
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("--plot b.jpg:"), "{msg}");
    }

    #[test]
    fn units_follow_the_range() {
        assert_eq!(SizeUnit::for_max(200 << 30).label, "GiB, 2^30 bytes");
        assert_eq!(SizeUnit::for_max(300 << 20).label, "MiB, 2^20 bytes");
        assert_eq!(time_unit(90.0).1, "s");
        assert_eq!(time_unit(86_400.0).1, "h");
    }
}
