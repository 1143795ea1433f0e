//! The memmon binary: parse the command line, run the subcommand, print any error once to
//! stderr with its whole context chain, and exit with a documented code (see `exit.rs`).

use anyhow::Context;
use clap::Parser;
use memmon::analysis::Summary;
use memmon::cli::{Cli, Command, RecordArgs, SummaryArgs};
use memmon::exit::{CodedError, ExitCode};
use memmon::format::ReadError;
use memmon::probe::ProcFs;
use memmon::record::{PssGuard, RecordOptions, Recorder};
use memmon::target::TargetSpec;
use std::io::Write;

fn main() {
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(err) => {
            let code = err
                .downcast_ref::<CodedError>()
                .map(|c| c.code)
                .or_else(|| err.chain().find_map(|c| c.downcast_ref::<CodedError>().map(|c| c.code)))
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
        Command::Workload { steps } => match memmon::workload::run(&steps) {
            Ok(code) => Ok(ExitCode::Passthrough(code)),
            Err(msg) => Err(CodedError::new(ExitCode::Usage, msg)),
        },
    }
}

fn record(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let usage = |m: &str| CodedError::new(ExitCode::Usage, m.to_string());
    let target = match (&args.pid, &args.pidfile, &args.name, args.command.is_empty()) {
        (Some(pid), None, None, true) => TargetSpec::Pid(*pid),
        (None, Some(f), None, true) => TargetSpec::Pidfile(f.clone()),
        (None, None, Some(re), true) => TargetSpec::Name(
            regex::Regex::new(re).map_err(|e| usage(&format!("--name: not a valid regex: {e}")))?,
        ),
        (None, None, None, false) => TargetSpec::Command(args.command.clone()),
        (None, None, None, true) => {
            return Err(usage("nothing to watch: give --pid PID, --pidfile FILE, --name REGEX, or -- COMMAND"))
        }
        _ => return Err(usage("give one target: --pid, --pidfile, --name, or -- COMMAND, not several")),
    };
    if args.interval.is_zero() {
        return Err(usage("--interval must be above 0"));
    }
    if (args.wait || args.exit_with_target) && !target.can_restart() {
        return Err(usage("--wait and --exit-with-target apply to --pidfile and --name only"));
    }
    let output = args.output.filter(|p| p.as_os_str() != "-");
    let opts = RecordOptions {
        target,
        interval: args.interval,
        children: !args.no_children,
        output,
        format: args.format,
        force: args.force,
        append: args.append,
        pss: args.pss.then_some(PssGuard {
            every: args.pss_every,
            max_rss: args.pss_max_rss,
            force: args.pss_force,
        }),
        wait: args.wait,
        exit_with_target: args.exit_with_target,
        duration: args.duration,
        quiet: args.quiet,
        procfs: ProcFs::default(),
        phase_peaks: false,
        capture_stdout: false,
    };
    Ok(Recorder::start(opts)?.run()?.exit)
}

fn summary(args: SummaryArgs) -> anyhow::Result<ExitCode> {
    let mut all = Vec::new();
    for f in &args.files {
        let s = Summary::of_file(f, &args.input.spec()).map_err(|e| {
            let code = match e {
                ReadError::Io(..) => ExitCode::Failure,
                _ => ExitCode::Usage,
            };
            anyhow::Error::new(e).context(CodedError { code, message: "cannot summarize".into() })
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
