//! `memmon demo`: records the built-in workload (`workload::DEMO_STEPS`) as a launched command,
//! writes the recording to a file it names, and prints the summary — memmon's main job on a
//! workload whose memory is known.

use crate::reporter::Reporter;
use crate::sampler::record::{Outcome, RecordObserver, RecordOptions, Recorder};
use crate::sampler::target::TargetSpec;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The first argument on which `memmon` runs the workload steps that follow it instead of its
/// command line (see main.rs): the demo launches `memmon __demo-workload STEP...`.
pub const WORKLOAD_ENTRY: &str = "__demo-workload";

/// Picks `memmon-demo.csv`, or `memmon-demo-2.csv` and so on: a name whose recording, sidecar
/// and plot are all free (an existing file is never reused).
pub fn free_name(dir: &Path) -> PathBuf {
    let free = |p: &PathBuf| {
        let side = crate::format::sidecar_path(p);
        [p.clone(), side, svg_path(p)]
            .iter()
            .all(|f| std::fs::symlink_metadata(f).is_err())
    };
    std::iter::once(dir.join("memmon-demo.csv"))
        .chain((2..).map(|i| dir.join(format!("memmon-demo-{i}.csv"))))
        .find(free)
        .unwrap()
}

/// The plot goes next to the recording: memmon-demo.csv → memmon-demo.svg.
fn svg_path(p: &Path) -> PathBuf {
    let svg = p.with_extension("svg");
    if svg != p {
        return svg;
    }
    let mut name = p.as_os_str().to_owned();
    name.push(".svg");
    PathBuf::from(name)
}

/// Why the demo could not record or plot its workload.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Output(#[from] crate::output::OutputCheckError),
    /// The path of memmon itself, which runs the workload, could not be read.
    #[error("cannot find memmon's own executable")]
    OwnPath(#[source] std::io::Error),
    #[error(transparent)]
    Record(#[from] crate::sampler::error::RecordError),
    #[error(transparent)]
    Plot(#[from] crate::render::plot::PlotError),
}

impl crate::error::Classified for DemoError {
    fn class(&self) -> crate::exit::Class {
        match self {
            DemoError::Output(e) => e.class(),
            DemoError::OwnPath(_) => crate::exit::Class::Failure,
            DemoError::Record(e) => e.class(),
            DemoError::Plot(e) => e.class(),
        }
    }
}

/// What the demo made: the recording's outcome, and where its plot is.
pub struct DemoDone {
    pub outcome: Outcome,
    pub plot: Option<PathBuf>,
}

/// Records the demo workload into `output`, telling `observer` of the recording and `report`
/// (first) what the demo is, then plots it.
pub fn run(
    output: Option<PathBuf>,
    interval: Duration,
    observer: Box<dyn RecordObserver + Send>,
    report: Reporter,
) -> Result<DemoDone, DemoError> {
    let output = output.unwrap_or_else(|| free_name(Path::new(".")));
    let svg = svg_path(&output);
    let side = crate::format::sidecar_path(&output);
    crate::output::check_outputs(
        &[
            (&output, "-o"),
            (&side, "-o's metadata sidecar"),
            (&svg, "the demo's plot"),
        ],
        false,
    )
    .map_err(|e| match e {
        crate::output::OutputCheckError::Exists { path, flag } => {
            crate::output::OutputCheckError::ExistsNoForce { path, flag }
        }
        e => e,
    })?;
    let exe = std::env::current_exe().map_err(DemoError::OwnPath)?;
    let mut command = vec![exe.display().to_string(), WORKLOAD_ENTRY.to_string()];
    command.extend(crate::workload::DEMO_STEPS.iter().map(|s| s.to_string()));
    report.note("demo: recording a built-in workload shaped like a proving pipeline (parameters loaded, synthesis ramp, proving spike, release, idle; about 8 s)");
    let opts = RecordOptions {
        interval,
        output: crate::output::Dest::File(output),
        ..RecordOptions::new(TargetSpec::Command(command))
    };
    let outcome = Recorder::start(opts, report, observer)?.run()?;
    let mut plotted = None;
    if let Some(p) = &outcome.output {
        let plot = crate::render::plot::PlotOptions::default();
        let svg_format = crate::render::plot::ImageFormat::Svg;
        crate::render::plot::plot_files(
            std::slice::from_ref(p),
            &Default::default(),
            &plot,
            &svg,
            svg_format,
        )?;
        plotted = Some(svg);
    }
    Ok(DemoDone {
        outcome,
        plot: plotted,
    })
}
