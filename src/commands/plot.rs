//! `memmon plot`: the flags become `PlotOptions`; the recordings are drawn to one image.

use super::exit::ExitCode;
use super::stderr::errln;
use crate::cli::PlotArgs;
use memmon::render::plot::{ImageFormat, PlotError, PlotOptions};

/// The plot's options from the command line: size, title, and the series asked for.
fn options(args: &PlotArgs) -> Result<PlotOptions, PlotError> {
    let mut opts = PlotOptions {
        force: args.force,
        width: args.width,
        height: args.height,
        parts: args.parts,
        title: args.title.clone(),
        ..PlotOptions::default()
    };
    opts.add_series(&args.series)?;
    let flagged = [(args.swap, "swap_bytes"), (args.pss, "pss_bytes")];
    opts.add_series(
        &flagged
            .iter()
            .filter(|f| f.0)
            .map(|f| f.1)
            .collect::<Vec<_>>(),
    )?;
    Ok(opts)
}

pub fn run(args: PlotArgs) -> anyhow::Result<ExitCode> {
    super::stdin_once(&args.files)?;
    let format = ImageFormat::from_path(&args.output, "--output").map_err(plot_error)?;
    memmon::output::check_outputs(&[(&args.output, "--output")], args.force)?;
    // Written once every recording is read: a missing or read-only directory is said now.
    memmon::output::check_writable(&[(&args.output, "--output")])?;
    let opts = options(&args).map_err(plot_error)?;
    let notes = memmon::render::plot::plot_files(
        &args.files,
        &args.input.spec(),
        &opts,
        &args.output,
        format,
    )
    .map_err(plot_error)?;
    for note in notes {
        errln!("memmon: {note}");
    }
    errln!(
        "memmon: wrote {}",
        memmon::output::absolute(&args.output).display()
    );
    Ok(ExitCode::Success)
}

/// The error, said to be the plot's (its class is `PlotError::class`: bad flags and unreadable
/// or malformed recordings exit 2, a plot that cannot be written 1).
pub(super) fn plot_error(e: PlotError) -> anyhow::Error {
    anyhow::Error::new(e).context("cannot plot")
}
