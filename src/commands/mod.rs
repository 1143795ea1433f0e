//! One file per subcommand: the only code that sees the clap structs of `cli.rs`, prints to
//! the terminal and chooses exit codes (`exit.rs`, from the classes of the core's error types
//! listed in `classes.rs`). Each turns its arguments into the core's options (`memmon::...`),
//! calls the core, and prints what came back.

mod bench;
mod classes;
mod compare;
mod completions;
mod demo;
pub(crate) mod exit;
mod export;
mod live;
mod man;
mod mark;
mod plot;
mod record;
mod report;
pub(crate) mod stderr;
mod summary;

use crate::cli::{Cli, Command, Deferred, MarkArgs, PssArgs, SamplingArgs};
use exit::{ExitCode, UsageError};
use stderr::errln;

/// Runs the subcommand.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The subcommands that watch a process may share its memory limit: killed last
    // (`sys/oom.rs`), their children as they would be without memmon.
    if matches!(
        cli.command,
        Command::Record(_) | Command::Bench(_) | Command::Demo(_)
    ) {
        memmon::sys::oom::shield_self();
    }
    match cli.command {
        Command::Record(Deferred(args)) => record::run(args),
        Command::Summary(Deferred(args)) => summary::run(args),
        Command::Demo(Deferred(args)) => demo::run(args),
        Command::Plot(Deferred(args)) => plot::run(args),
        Command::Compare(Deferred(args)) => compare::run(args),
        Command::Report(Deferred(args)) => report::run(args),
        Command::Mark(Deferred(args)) => mark::run(args),
        Command::Bench(Deferred(args)) => bench::run(args),
        Command::Export(Deferred(args)) => export::run(args),
        Command::Completions(Deferred(args)) => completions::run(args),
        Command::Man(Deferred(args)) => man::run(args),
    }
}

/// The exit code of a subcommand's result, for every subcommand alike: an error is printed once
/// to stderr with its whole chain of causes and exits with the code of its class
/// (`exit::class_of`); a closed stdout (`memmon ... | head`) is a success.
pub fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::Success,
        Err(err) => {
            errln!("memmon: error: {err:#}");
            exit::class_of(&err).into()
        }
    }
}

/// The demo's workload (a child memmon, `memmon::demo::WORKLOAD_ENTRY`): its exit code.
pub fn workload(steps: &[String]) -> i32 {
    match memmon::workload::run(steps) {
        Ok(code) => code,
        Err(e) => {
            errln!("memmon: error: {e}");
            ExitCode::from(memmon::error::Classified::class(&e)).code()
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Prints each budget's verdict to stderr (`memmon: budget exceeded: ...`, `budget failed: ...
/// cannot be checked` where the recording lacks the number); true when all kept.
fn report_budgets(checks: &[memmon::analysis::budget::BudgetCheck]) -> bool {
    for c in checks {
        let verdict = match (c.passed, c.measured.is_some()) {
            (true, _) => "budget kept",
            (false, true) => "budget exceeded",
            // The recording lacks the number: failed, not exceeded.
            (false, false) => "budget failed",
        };
        errln!("memmon: {verdict}: {}", c.describe());
    }
    checks.iter().all(|c| c.passed)
}

/// Refuses `-` (stdin) given more than once among a reader's inputs: the stream would be split
/// between them, and each would be blamed for a damaged recording.
fn stdin_once<'a>(inputs: impl IntoIterator<Item = &'a std::path::PathBuf>) -> anyhow::Result<()> {
    let n = inputs.into_iter().filter(|p| p.as_os_str() == "-").count();
    if n > 1 {
        return Err(usage(format!(
            "`-` (stdin) is given {n} times: stdin can be read once; save it to a file for the others"
        )));
    }
    Ok(())
}

/// A usage error (exit 2) with this message.
fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// The marker flags as `marks::MarkSetup` takes them.
fn mark_options(a: &MarkArgs, mark_stdout: Option<&String>) -> memmon::marks::MarkOptions {
    memmon::marks::MarkOptions {
        mark_log: a.mark_log.clone(),
        mark_regex: a.mark_regex.clone(),
        mark_stdout: mark_stdout.cloned(),
        socket: a.socket.clone(),
        no_socket: false,
    }
}

/// The PSS settings, when `--pss` is on.
/// `--gpu`, `--no-gpu`, `--gpu-every`, `--gpu-timeout`, `--gpu-host-proc` as the recorder's
/// options (record and bench).
fn gpu_options(s: &SamplingArgs) -> anyhow::Result<memmon::sampler::gpu::GpuOptions> {
    use memmon::sampler::gpu::{GpuMode, GpuOptions};
    if s.gpu_every.is_zero() {
        return Err(usage("--gpu-every must be above 0"));
    }
    if s.gpu_timeout.is_zero() {
        return Err(usage("--gpu-timeout must be above 0"));
    }
    Ok(GpuOptions {
        mode: match (s.gpu, s.no_gpu) {
            (true, _) => GpuMode::Required,
            (false, true) => GpuMode::Off,
            (false, false) => GpuMode::Auto,
        },
        every: s.gpu_every,
        timeout: s.gpu_timeout,
        host_proc: s.gpu_host_proc.clone(),
    })
}

fn pss_guard(s: &PssArgs) -> Option<memmon::sampler::record::PssGuard> {
    s.pss.then_some(memmon::sampler::record::PssGuard {
        every: s.pss_every,
        max_rss: s.pss_max_rss,
        force: s.pss_force,
    })
}
