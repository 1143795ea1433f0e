//! `memmon record`: the flags become `RecordOptions` and `MarkOptions`; the recorder runs; with
//! `--plot`, the finished recording is plotted.

use super::exit::ExitCode;
use super::live::LiveLine;
use super::stderr::{errln, errprint};
use super::{gpu_options, mark_options, pss_guard, usage};
use crate::cli::RecordArgs;
use memmon::analysis::Summary;
use memmon::format::{Format, InputSpec};
use memmon::marks::MarkSetup;
use memmon::model::sample::Sample;
use memmon::output::{self, Dest};
use memmon::render::plot::{ImageFormat, PlotOptions};
use memmon::sampler::anatomy::AnatomyOptions;
use memmon::sampler::cgroup::CgroupChoice;
use memmon::sampler::record::{RecordObserver, RecordOptions, RecordStart, Recorder};
use memmon::sampler::target::TargetSpec;
use std::path::Path;

/// The recorder's options from the command line; errors are usage errors (exit 2).
fn options(args: &RecordArgs) -> anyhow::Result<RecordOptions> {
    let attached = args.target.spec();
    let cgroup = args.cgroup.cgroup.as_deref().map(CgroupChoice::parse);
    let target = match (attached, args.command.is_empty()) {
        (Some(t), true) => t,
        (None, false) => TargetSpec::Command(args.command.clone()),
        (None, true) if matches!(cgroup, Some(CgroupChoice::Path(_))) => {
            TargetSpec::Cgroup(args.cgroup.cgroup.clone().unwrap_or_default())
        }
        (None, true) if cgroup.is_some() => {
            return Err(usage(
                "--cgroup auto needs a target (--pid, --pidfile, --name or -- COMMAND); to record a whole cgroup give its path",
            ))
        }
        (None, true) => {
            return Err(usage(
                "nothing to watch: give --pid PID, --pidfile FILE, --name REGEX, --cgroup PATH, or -- COMMAND",
            ))
        }
        (Some(_), false) => {
            return Err(usage(
                "give one target: --pid, --pidfile, --name, or -- COMMAND, not several",
            ))
        }
    };
    if args.cgroup.own_cgroup && !matches!(target, TargetSpec::Command(_)) {
        return Err(usage(
            "--own-cgroup applies to a launched command (-- COMMAND) only",
        ));
    }
    let sampling = &args.sampling;
    if (args.wait || args.exit_with_target) && !target.can_restart() {
        return Err(usage(
            "--wait and --exit-with-target apply to --pidfile and --name only",
        ));
    }
    let anatomy = anatomy_options(args)?;
    Ok(RecordOptions {
        anatomy,
        interval: sampling.interval,
        children: !sampling.no_children,
        output: sampling.output.clone().unwrap_or(Dest::Stdout),
        format: sampling.format.map(Into::into),
        force: sampling.force,
        append: sampling.append,
        pss: pss_guard(&sampling.pss_args),
        gpu: gpu_options(sampling)?,
        wait: args.wait,
        exit_with_target: args.exit_with_target,
        duration: args.duration,
        phase_peaks: args.marks.phase_peaks,
        reset_peak: args.reset_peaks,
        exit_records: !args.sampling.no_taskstats,
        capture_stdout: args.mark_stdout.is_some(),
        cgroup,
        own_cgroup: args.cgroup.own(),
        ..RecordOptions::new(target)
    })
}

/// `--anatomy` and its flags: a side file needs a recording's file (not stdout or a device).
fn anatomy_options(args: &RecordArgs) -> anyhow::Result<Option<AnatomyOptions>> {
    if !args.anatomy.anatomy {
        return Ok(None);
    }
    match args.sampling.output.as_ref().and_then(Dest::file) {
        Some(p) if !output::is_stream(p) && !output::is_descriptor_alias(p) => {}
        _ => {
            return Err(usage(
                "--anatomy needs -o FILE: its table goes to a side file next to the recording (FILE.anatomy.jsonl)",
            ))
        }
    }
    Ok(args.anatomy.options())
}

pub fn run(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let mut opts = options(&args)?;
    let plot_to = match &args.plot {
        Some(_) if opts.output.is_stdout() => return Err(usage(
            "--plot needs the recording in a file: add -o FILE (the recording is going to stdout)",
        )),
        Some(p) => Some((
            p.clone(),
            ImageFormat::from_path(p, "--plot").map_err(super::plot::plot_error)?,
        )),
        None => None,
    };
    if let Some(o) = opts.output.file() {
        check_outputs(o, &args, plot_to.as_ref().map(|(p, _)| p.as_path()))?;
    }
    if args.mark_stdout.is_some() && !matches!(opts.target, TargetSpec::Command(_)) {
        return Err(usage(
            "--mark-stdout applies to a launched command (-- COMMAND) only",
        ));
    }
    let data_on_stdout = opts.output.is_stdout();
    let marks = MarkSetup::prepare(&mark_options(&args.marks, args.mark_stdout.as_ref()))?;
    if let (TargetSpec::Command(_), Some(path)) = (&opts.target, marks.socket_path()) {
        // The command's own markers (memmon-mark, or the protocol by hand) find this recorder.
        opts.env
            .push(("MEMMON_SOCKET".into(), path.display().to_string()));
    }
    let report = super::stderr::reporter("memmon", args.quiet, args.verbose);
    let terminal = Terminal::new(args.quiet, args.verbose, data_on_stdout);
    let mut rec = Recorder::start(opts, report.clone(), Box::new(terminal))?;
    let sources = marks.start(&mut rec, data_on_stdout, &report);
    let outcome = rec.run();
    drop(sources); // stops the marker threads and removes the socket
    let outcome = outcome?;
    if let (Some((plot, format)), Some(recording)) = (plot_to, &outcome.output) {
        let notes = memmon::render::plot::plot_files(
            std::slice::from_ref(recording),
            &InputSpec::default(),
            &PlotOptions {
                force: args.sampling.force,
                ..PlotOptions::default()
            },
            &plot,
            format,
        )
        .map_err(super::plot::plot_error)?;
        if !args.quiet {
            for note in notes {
                errln!("memmon: plot: {note}");
            }
            errln!(
                "memmon: plot written to {}",
                memmon::output::absolute(&plot).display()
            );
        }
    }
    Ok(outcome.exit.into())
}

/// Every output is checked before anything starts: none may exist without --force (with
/// --append the recording and its sidecar may), and no two may be one file.
fn check_outputs(o: &Path, args: &RecordArgs, plot: Option<&Path>) -> anyhow::Result<()> {
    let sampling = &args.sampling;
    let stream = output::is_stream(o);
    if plot.is_some() && stream {
        return Err(usage(
            "--plot needs the recording in a regular file, not a device",
        ));
    }
    let format = sampling
        .format
        .map(Into::into)
        .unwrap_or_else(|| Format::from_path(o));
    let side = memmon::format::sidecar_path(o);
    let mut outs: Vec<(&Path, &str)> = Vec::new();
    if !sampling.append {
        outs.push((o, "-o"));
        // An orphan sidecar (its recording deleted) is replaced without --force.
        if format == Format::Csv && !stream && !memmon::format::sidecar_is_orphan(o) {
            outs.push((&side, "-o's metadata sidecar"));
        }
    }
    if let Some(p) = plot {
        if let Err(e @ output::OutputCheckError::Same { .. }) =
            output::check_outputs(&[(o, "-o"), (p, "--plot")], true)
        {
            return Err(e.into());
        }
        outs.push((p, "--plot"));
    }
    output::check_outputs(&outs, sampling.force)?;
    // The plot is written at the end: a long recording never ends failing to write it.
    if let Some(p) = plot {
        output::check_writable(&[(p, "--plot")])?;
    }
    Ok(())
}

/// What a recording shows on the terminal (stderr): where the data goes and what is watched at
/// the start, a live status line (on a terminal), the summary at the end; none of it with
/// `--quiet`. (The recorder's notes go through the terminal's reporter, `stderr::reporter`.)
pub(crate) struct Terminal {
    quiet: bool,
    verbose: bool,
    live: LiveLine,
    samples: u64,
}

impl Terminal {
    /// `verbose`: the banner names the sources read; `data_on_stdout`: the recording goes to
    /// stdout (no `-o`).
    pub(crate) fn new(quiet: bool, verbose: bool, data_on_stdout: bool) -> Terminal {
        Terminal {
            quiet,
            verbose,
            live: LiveLine::new(quiet, data_on_stdout),
            samples: 0,
        }
    }
}

impl Drop for Terminal {
    /// An error printed after the recording starts on a clean line.
    fn drop(&mut self) {
        self.live.clear();
    }
}

impl RecordObserver for Terminal {
    fn on_sample(&mut self, s: &Sample) {
        self.samples += 1;
        self.live.update(
            std::time::Instant::now(),
            s.elapsed_s,
            s.rss_bytes,
            self.samples,
            s.missed_ticks,
        );
    }

    fn on_start(&mut self, start: &RecordStart) {
        if !self.quiet {
            errln!("{}", banner(start, self.verbose));
        }
    }

    fn on_end(&mut self, summary: &Summary) {
        self.live.clear();
        if !self.quiet {
            errprint!("{}", summary.render());
        }
    }
}

/// One message: where the data goes, then what is watched and how often (a long command line
/// cut short: the summary and the metadata have it whole); with `verbose`, a line per source
/// read (the metadata's `sources`).
fn banner(start: &RecordStart, verbose: bool) -> String {
    let meta = start.meta;
    let mut text = format!(
        "memmon: recording to {}\nmemmon: target {} {}: PID {} ({}){}, every {}",
        start.destination,
        meta.target.mode,
        cut(&meta.target.spec, SPEC_SHOWN),
        meta.target.pid,
        meta.target.comm,
        if meta.children {
            " and its descendants"
        } else {
            " alone"
        },
        meta.interval,
    );
    if verbose {
        for s in &meta.sources {
            text.push_str("\nmemmon: reading ");
            text.push_str(s);
        }
    }
    text
}

/// The most characters of a target's spec the banner shows.
const SPEC_SHOWN: usize = 80;

/// `text` cut to `max` characters, ending in `…` when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((at, _)) if text.chars().count() > max => format!("{}…", &text[..at]),
        _ => text.to_string(),
    }
}
