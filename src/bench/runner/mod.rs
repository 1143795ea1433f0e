//! Runs the benchmark, in one of two ways, each in a file of its own: against a daemon
//! (`daemon.rs`), one `Recorder` on its own thread for the whole bench, the kernel's high-water
//! marks (VmHWM, the daemon's own cgroup peak) reset before each run and read back after it, so
//! each run's peak is exact whatever the interval; without a daemon (`command.rs`), each run
//! recorded in launch mode, its peak wait4's ru_maxrss of that child (or its own cgroup's).
//! What both share is here: the run's environment and `--prepare`, the cooldown, the progress
//! line, the choice between the kernel's and the sampled peak.

mod command;
mod daemon;
mod inflight;
pub mod started;
pub mod sweep;

use super::{BenchOptions, BenchReport, RunResult};
use crate::reporter::{Level, Reporter};
use crate::sampler::target::shell_words;
use crate::sys::{self, Waker};
use crate::units::{fmt_bytes_signed, fmt_interval};
use command::bench_command;
use daemon::Daemon;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where a bench's recorders say what they have to say: only what is said even with `-q` (what
/// was done to an `--append`ed output, a failure); the bench says its own progress and table,
/// not the recorders' notes, banner or summary.
fn recorder_report(opts: &BenchOptions) -> Reporter {
    opts.report.at_least(Level::Notice)
}

/// Why the bench ended before all its runs.
#[derive(Debug)]
pub enum Stop {
    /// memmon was asked to stop (Ctrl-C, SIGTERM, SIGHUP).
    Signal(i32),
    /// The client failed, or the daemon died or restarted: exit 1 with this message.
    Failed(String),
    /// memmon itself failed (the recording could not be written).
    Error(crate::bench::BenchError),
}

/// The runs measured, and why the bench stopped early if it did.
pub struct Done {
    pub report: BenchReport,
    pub stop: Option<Stop>,
}

/// How a client run ended.
struct ClientEnd {
    wall_s: f64,
    code: Option<i32>,
    signal: Option<i32>,
}

impl ClientEnd {
    fn ok(&self) -> bool {
        self.code == Some(0)
    }

    fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("killed by {}", crate::model::signal::name(s)),
            _ => "an unknown status".into(),
        }
    }
}

/// Runs the whole benchmark. An error here is one before any run (no daemon, a bad output).
pub fn run(opts: &BenchOptions) -> Result<Done, crate::bench::BenchError> {
    let mut report = BenchReport {
        memmon_version: env!("CARGO_PKG_VERSION").into(),
        mode: if opts.target.is_some() {
            "daemon"
        } else {
            "command"
        },
        daemon: None,
        client: shell_words(&opts.client),
        interval: fmt_interval(opts.interval),
        warmup_runs: opts.warmup,
        runs_requested: opts.runs,
        recording: None,
        peak_basis: crate::model::peak::PeakBasis::Sampled,
        runs: Vec::new(),
        stats: None,
        leak: None,
        notes: Vec::new(),
        complete: false,
        stopped: None,
        anatomy: Vec::new(),
        window: None,
    };
    let stop = match &opts.target {
        Some(spec) => Daemon::start(opts, spec, &mut report)?.bench(opts, &mut report),
        None => bench_command(opts, &mut report)?,
    };
    let measured = match &report.window {
        Some(w) => w.runs,
        None => report.runs.len() as u32,
    };
    report.complete = stop.is_none() && measured == opts.runs;
    report.stopped = stop.as_ref().map(|s| match s {
        Stop::Signal(sig) => format!("interrupted by {}", crate::model::signal::name(*sig)),
        Stop::Failed(m) => m.clone(),
        Stop::Error(e) => crate::error::chain(e),
    });
    Ok(Done { report, stop })
}

/// Says where the bench's time series goes (`-o`), or that it is not kept.
fn say_recording(opts: &BenchOptions, recording: Option<&str>) {
    match recording {
        Some(r) if opts.concurrency > 1 => say(
            opts,
            format!("bench: recording to {r} (the window as window-start and window-end events, each client's start and end as client-start:N and client-end:N)"),
        ),
        Some(r) => say(
            opts,
            format!("bench: recording to {r} (run boundaries as run-start:N, run-end:N events)"),
        ),
        None => say(
            opts,
            "bench: not keeping the time series (-o FILE keeps it)",
        ),
    }
}

/// Says a progress line (`-q` silences it).
fn say(opts: &BenchOptions, msg: impl AsRef<str>) {
    opts.report.note(msg.as_ref());
}

/// Runs `--prepare` through `sh -c`; a failure stops the bench.
fn prepare(opts: &BenchOptions, run_env: &[(&str, String)]) -> Result<(), Stop> {
    let Some(cmd) = &opts.prepare else {
        return Ok(());
    };
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .envs(run_env.iter().map(|(k, v)| (*k, v.as_str())));
    if opts.stdout_is_data {
        c.stdout(stderr_stdio());
    }
    crate::sys::oom::restore_in_child(&mut c);
    match c.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(Stop::Failed(format!(
            "--prepare '{cmd}' failed ({s}); the bench stopped"
        ))),
        Err(e) => Err(Stop::Failed(format!("cannot run --prepare '{cmd}': {e}"))),
    }
}

fn stderr_stdio() -> std::process::Stdio {
    match std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
        Ok(fd) => std::process::Stdio::from(fd),
        Err(_) => std::process::Stdio::null(),
    }
}

/// The environment a client run sees: MEMMON_BENCH_RUN=N (0 for a warmup run, which also gets
/// MEMMON_BENCH_WARMUP=K).
fn run_env(run: u32, warmup: Option<u32>) -> Vec<(&'static str, String)> {
    let mut v = vec![("MEMMON_BENCH_RUN", run.to_string())];
    if let Some(k) = warmup {
        v.push(("MEMMON_BENCH_WARMUP", k.to_string()));
    }
    v
}

/// The recorder's end, told to the bench's waits: set once when the recorder thread returns
/// (the daemon died, a signal), it wakes whatever waits on it through its waker.
pub struct Quit {
    flag: AtomicBool,
    /// `None` when no eventfd could be made: waits without a timeout then look every 100 ms.
    wake: Option<Waker>,
}

/// How long a wait without a timeout lasts when it cannot be woken (no eventfd).
const WAIT_WITHOUT_WAKER: Duration = Duration::from_millis(100);

impl Quit {
    pub fn new() -> Quit {
        Quit {
            flag: AtomicBool::new(false),
            wake: Waker::new().ok(),
        }
    }

    pub fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(w) = &self.wake {
            w.wake();
        }
    }

    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Sleeps until `fd` is readable (when given), this is set (unless `set_seen`: it was, and
    /// the caller acted on it; the eventfd stays readable) or `timeout` passes; true when `fd`
    /// became readable. A stop signal reaches the recorder, which then ends and sets this.
    fn wait(&self, fd: Option<BorrowedFd<'_>>, set_seen: bool, timeout: Option<Duration>) -> bool {
        let quit_fd = match (&self.wake, set_seen) {
            (Some(w), false) => Some(w.as_fd()),
            _ => None,
        };
        let timeout = match (timeout, &self.wake) {
            (None, None) => Some(WAIT_WITHOUT_WAKER),
            (t, _) => t,
        };
        match sys::wait_ready([fd, quit_fd], timeout) {
            Ok([ready, _]) => ready,
            // `poll` on valid descriptors fails only without memory for its table: this wait
            // lasts as a timeout would (100 ms at most), then the caller looks again.
            Err(_) => {
                std::thread::sleep(timeout.unwrap_or(WAIT_WITHOUT_WAKER));
                false
            }
        }
    }
}

impl Default for Quit {
    fn default() -> Self {
        Quit::new()
    }
}

/// Sleeps for the cooldown, waking early when `quit` is set.
fn cooldown(opts: &BenchOptions, quit: &Quit) {
    let Some(d) = opts.cooldown else { return };
    let until = Instant::now() + d;
    while Instant::now() < until && !quit.is_set() {
        quit.wait(None, false, Some(until - Instant::now()));
    }
}

fn progress(opts: &BenchOptions, r: &RunResult) {
    let over = r
        .rss_before_bytes
        .map(|b| {
            format!(
                ", {} over the floor",
                fmt_bytes_signed(r.peak.bytes as i64 - b as i64)
            )
        })
        .unwrap_or_default();
    let exit = match (r.exit_code, r.exit_signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => crate::model::signal::name(s),
        _ => "exit ?".into(),
    };
    say(
        opts,
        format!(
            "run {}/{}: {}, {exit}, {}{over}",
            r.run,
            opts.runs,
            super::table::fmt_wall(r.wall_s),
            match r.known_peak(r.facts.basis()) {
                Some(p) => format!("peak {} ({} {})", p.cell(), p.counter, p.scope),
                None => "no peak known (it ended before its first sample)".into(),
            }
        ),
    );
}

#[cfg(test)]
mod tests;
