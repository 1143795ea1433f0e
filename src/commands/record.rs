//! `memmon record`: the flags become `RecordOptions` and `MarkOptions`; the recorder runs; with
//! `--plot`, the finished recording is plotted.

use super::{mark_options, pss_guard, usage};
use crate::cli::RecordArgs;
use memmon::exit::ExitCode;
use memmon::format::InputSpec;
use memmon::marks::MarkSetup;
use memmon::probe::ProcFs;
use memmon::render::plot::{ImageFormat, PlotOptions};
use memmon::sampler::record::{RecordOptions, Recorder};
use memmon::sampler::target::TargetSpec;

/// The recorder's options from the command line; errors are usage errors (exit 2).
fn options(args: &RecordArgs) -> anyhow::Result<RecordOptions> {
    let attached = TargetSpec::from_flags(args.pid, args.pidfile.as_deref(), args.name.as_deref())
        .map_err(usage)?;
    let target = match (attached, args.command.is_empty()) {
        (Some(t), true) => t,
        (None, false) => TargetSpec::Command(args.command.clone()),
        (None, true) => {
            return Err(usage(
                "nothing to watch: give --pid PID, --pidfile FILE, --name REGEX, or -- COMMAND",
            ))
        }
        (Some(_), false) => {
            return Err(usage(
                "give one target: --pid, --pidfile, --name, or -- COMMAND, not several",
            ))
        }
    };
    let sampling = &args.sampling;
    if sampling.interval.is_zero() {
        return Err(usage("--interval must be above 0"));
    }
    if (args.wait || args.exit_with_target) && !target.can_restart() {
        return Err(usage(
            "--wait and --exit-with-target apply to --pidfile and --name only",
        ));
    }
    Ok(RecordOptions {
        target,
        interval: sampling.interval,
        children: !sampling.no_children,
        output: sampling.output.clone().filter(|p| p.as_os_str() != "-"),
        format: sampling.format.map(Into::into),
        force: sampling.force,
        append: sampling.append,
        pss: pss_guard(sampling),
        wait: args.wait,
        exit_with_target: args.exit_with_target,
        duration: args.duration,
        quiet: args.quiet,
        procfs: ProcFs::default(),
        phase_peaks: args.marks.phase_peaks,
        capture_stdout: args.marks.mark_stdout.is_some(),
    })
}

pub fn run(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let opts = options(&args)?;
    let plot_to = match &args.plot {
        Some(_) if opts.output.is_none() => return Err(usage(
            "--plot needs the recording in a file: add -o FILE (the recording is going to stdout)",
        )),
        Some(p) => Some((
            p.clone(),
            ImageFormat::from_path(p, "--plot").map_err(super::plot::plot_error)?,
        )),
        None => None,
    };
    if args.marks.mark_stdout.is_some() && !matches!(opts.target, TargetSpec::Command(_)) {
        return Err(usage(
            "--mark-stdout applies to a launched command (-- COMMAND) only",
        ));
    }
    let data_on_stdout = opts.output.is_none();
    let marks = MarkSetup::prepare(&mark_options(&args.marks, args.quiet))?;
    let mut rec = Recorder::start(opts)?;
    let sources = marks.start(&mut rec, data_on_stdout);
    let outcome = rec.run();
    drop(sources); // stops the marker threads and removes the socket
    let outcome = outcome?;
    if let (Some((plot, format)), Some(recording)) = (plot_to, &outcome.output) {
        memmon::render::plot::plot_files(
            std::slice::from_ref(recording),
            &InputSpec::default(),
            &PlotOptions::default(),
            &plot,
            format,
        )
        .map_err(super::plot::plot_error)?;
        if !args.quiet {
            eprintln!(
                "memmon: plot written to {}",
                memmon::format::absolute(&plot).display()
            );
        }
    }
    Ok(outcome.exit)
}
