//! The memmon binary: parse the command line, run the subcommand, print any error once to
//! stderr with its whole context chain, and exit with a documented code (see `exit.rs`).

use anyhow::Context;
use clap::Parser;
use memmon::analysis::Summary;
use memmon::cli::{Cli, Command, PlotArgs, RecordArgs, SummaryArgs};
use memmon::exit::{CodedError, ExitCode};
use memmon::format::{InputSpec, ReadError};
use memmon::probe::ProcFs;
use memmon::sampler::record::{RecordOptions, Recorder};
use memmon::render::plot::{ImageFormat, PlotError, PlotOptions};
use memmon::sampler::target::TargetSpec;
use std::io::Write;

fn main() {
    // The demo's workload runs as a child memmon (a real process for the recorder to watch) on
    // an entry point outside the command line: not in `--help`, not a subcommand.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == memmon::demo::WORKLOAD_ENTRY) {
        let steps: Vec<String> = argv[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        match memmon::workload::run(&steps) {
            Ok(code) => std::process::exit(code),
            Err(msg) => {
                eprintln!("memmon: error: {msg}");
                std::process::exit(ExitCode::Usage.code());
            }
        }
    }
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(err) => {
            let code = err
                .downcast_ref::<CodedError>()
                .map(|c| c.code)
                .or_else(|| {
                    err.chain()
                        .find_map(|c| c.downcast_ref::<CodedError>().map(|c| c.code))
                })
                .unwrap_or(ExitCode::Failure);
            if is_broken_pipe(&err) {
                ExitCode::Success
            } else {
                eprintln!("memmon: error: {err:#}");
                code
            }
        }
    };
    std::process::exit(code.code());
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Record(args) => record(args),
        Command::Summary(args) => summary(args),
        Command::Demo(args) => Ok(memmon::demo::run(args.output, args.interval, args.quiet)?.exit),
        Command::Plot(args) => plot(args),
        Command::Compare(args) => memmon::render::compare_table::run(&args),
        Command::Report(args) => memmon::render::html::run(&args),
        Command::Mark(args) => memmon::marks::mark_command(&args.label, args.socket.as_deref()),
        Command::Bench(args) => memmon::bench::run_cli(args),
    }
}

fn record(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let usage = |m: &str| CodedError::new(ExitCode::Usage, m.to_string());
    let attached = TargetSpec::from_flags(args.pid, args.pidfile.as_deref(), args.name.as_deref())
        .map_err(|m| usage(&m))?;
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
    let output = sampling.output.clone().filter(|p| p.as_os_str() != "-");
    let plot_to = match &args.plot {
        Some(_) if output.is_none() => return Err(usage(
            "--plot needs the recording in a file: add -o FILE (the recording is going to stdout)",
        )),
        Some(p) => Some((
            p.clone(),
            ImageFormat::from_path(p, "--plot").map_err(plot_error)?,
        )),
        None => None,
    };
    let opts = RecordOptions {
        target,
        interval: sampling.interval,
        children: !sampling.no_children,
        output,
        format: sampling.format,
        force: sampling.force,
        append: sampling.append,
        pss: sampling.pss_guard(),
        wait: args.wait,
        exit_with_target: args.exit_with_target,
        duration: args.duration,
        quiet: args.quiet,
        procfs: ProcFs::default(),
        phase_peaks: args.marks.phase_peaks,
        capture_stdout: args.marks.mark_stdout.is_some(),
    };
    if args.marks.mark_stdout.is_some() && !matches!(opts.target, TargetSpec::Command(_)) {
        return Err(usage(
            "--mark-stdout applies to a launched command (-- COMMAND) only",
        ));
    }
    let data_on_stdout = opts.output.is_none();
    let marks = memmon::marks::MarkSetup::prepare(&memmon::marks::MarkOptions::from_args(
        &args.marks,
        args.quiet,
    ))?;
    let mut rec = Recorder::start(opts)?;
    let sources = marks.start(&mut rec, data_on_stdout);
    let outcome = rec.run();
    drop(sources); // stops the marker threads and removes the socket
    let outcome = outcome?;
    if let (Some((plot, format)), Some(recording)) = (plot_to, &outcome.output) {
        let opts = PlotOptions::default();
        memmon::render::plot::plot_files(
            std::slice::from_ref(recording),
            &InputSpec::default(),
            &opts,
            &plot,
            format,
        )
        .map_err(plot_error)?;
        if !args.quiet {
            eprintln!(
                "memmon: plot written to {}",
                memmon::format::absolute(&plot).display()
            );
        }
    }
    Ok(outcome.exit)
}

fn plot(args: PlotArgs) -> anyhow::Result<ExitCode> {
    let format = ImageFormat::from_path(&args.output, "--output").map_err(plot_error)?;
    let mut opts = PlotOptions {
        width: args.width,
        height: args.height,
        parts: args.parts,
        title: args.title,
        ..PlotOptions::default()
    };
    opts.add_series(&args.series).map_err(plot_error)?;
    let flagged = [(args.swap, "swap_bytes"), (args.pss, "pss_bytes")];
    opts.add_series(
        &flagged
            .iter()
            .filter(|f| f.0)
            .map(|f| f.1)
            .collect::<Vec<_>>(),
    )
    .map_err(plot_error)?;
    memmon::render::plot::plot_files(&args.files, &args.input.spec(), &opts, &args.output, format)
        .map_err(plot_error)?;
    eprintln!(
        "memmon plot: wrote {}",
        memmon::format::absolute(&args.output).display()
    );
    Ok(ExitCode::Success)
}

/// Bad flags and unreadable or malformed recordings exit 2; a plot that cannot be written, 1.
fn plot_error(e: PlotError) -> anyhow::Error {
    let code = if e.is_input_error() {
        ExitCode::Usage
    } else {
        ExitCode::Failure
    };
    anyhow::Error::new(e).context(CodedError {
        code,
        message: "cannot plot".into(),
    })
}

fn summary(args: SummaryArgs) -> anyhow::Result<ExitCode> {
    let mut all = Vec::new();
    for f in &args.files {
        let s = Summary::of_file(f, &args.input.spec()).map_err(|e| {
            let code = match e {
                ReadError::Io(..) => ExitCode::Failure,
                _ => ExitCode::Usage,
            };
            anyhow::Error::new(e).context(CodedError {
                code,
                message: "cannot summarize".into(),
            })
        })?;
        all.push(s);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let text = if all.len() == 1 {
            serde_json::to_string_pretty(&all[0])?
        } else {
            serde_json::to_string_pretty(&all)?
        };
        writeln!(out, "{text}").context("cannot write to stdout")?;
    } else {
        for (i, s) in all.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            write!(out, "{}", s.render()).context("cannot write to stdout")?;
        }
    }
    Ok(ExitCode::Success)
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
