//! `memmon bench`: run a client N times against a long-lived daemon (or run a command N times)
//! and give each run its wall time and the exact peak memory during that run, with statistics.
//!
//! The runner (`runner/`: `daemon.rs` against a daemon, `command.rs` for a command) drives a
//! `Recorder` on its own thread and resets the kernel's high-water marks before each run;
//! `stats.rs` sums the runs up; `table.rs` prints them; `export/` writes JSON, CSV and Markdown;
//! `push.rs` sends them to a Pushgateway; `sweep_plot.rs` draws a sweep's configurations (with
//! `render::plot`'s picture and axes). (The daemon of known memory the tests run is in
//! src/bin/memmon-test/.)

pub mod export;
pub mod push;
pub mod runner;
pub mod stats;
pub mod sweep;
pub mod sweep_compare;
pub mod sweep_plot;
pub mod table;
pub mod window;

use crate::output::Dest;
use crate::probe::cgroup::CgroupFs;
use crate::probe::ProcFs;
use crate::sampler::record::PssGuard;
use crate::sampler::target::TargetSpec;
use serde::Serialize;
use stats::{ByteStats, LeakCheck, Stats};
use std::time::Duration;

/// Everything `memmon bench` was asked to do.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The daemon; `None` measures the client's own process tree, run by run.
    pub target: Option<TargetSpec>,
    /// Wait for the daemon (`--pidfile`, `--name`) to appear instead of failing (`--wait`).
    pub wait: bool,
    pub client: Vec<String>,
    pub runs: u32,
    pub warmup: u32,
    /// Clients in flight together against the daemon (`--concurrency`); 1: one after another,
    /// each run's own peak exact. Above 1 the measured window's peak is (`window.rs`).
    pub concurrency: u32,
    pub prepare: Option<String>,
    pub cooldown: Option<Duration>,
    pub ignore_failure: bool,
    pub interval: Duration,
    pub children: bool,
    /// Where the time series goes: `None` for nowhere.
    pub output: Option<Dest>,
    pub format: Option<crate::format::Format>,
    pub force: bool,
    pub append: bool,
    pub pss: Option<PssGuard>,
    /// GPU memory through NVML (`--gpu`, `--no-gpu`, `--gpu-every`), for every run's recorder.
    pub gpu: crate::sampler::gpu::GpuOptions,
    /// Read the kernel's exit records where memmon may (`--no-taskstats` turns it off): a
    /// process of the tree that peaks and exits between two samples keeps its peak in its run.
    pub exit_records: bool,
    /// Where the bench's progress lines and notes go (`commands/bench.rs` shows them on
    /// stderr): the runner itself prints nothing.
    pub report: crate::reporter::Reporter,
    /// True when stdout carries data (a recording or an export): the table and the client's
    /// output then go to stderr.
    pub stdout_is_data: bool,
    pub procfs: ProcFs,
    pub cgroupfs: CgroupFs,
    /// Markers against a daemon (`--mark-log`, `memmon mark`), and whether each resets the
    /// high-water marks (`--phase-peaks`).
    pub marks: crate::marks::MarkOptions,
    pub phase_peaks: bool,
    /// Against a daemon: the cgroup to read (`--cgroup auto|PATH`); `None` reads the daemon's
    /// own cgroup where it holds the daemon's tree alone.
    pub cgroup: Option<crate::sampler::cgroup::CgroupChoice>,
    /// A command bench (no daemon): run each run in a memory cgroup of memmon's own
    /// (`--own-cgroup`): `None` where memmon may make one.
    pub own_cgroup: Option<bool>,
    /// `--max-peak`, `--max-cgroup`: budgets the runs' peaks must not exceed.
    pub budgets: crate::analysis::budget::Budgets,
    /// `--anatomy` (a bench against a daemon): anatomies at each run's end and new highs.
    pub anatomy: Option<crate::sampler::anatomy::AnatomyOptions>,
}

pub use crate::model::peak::{Peak, PeakBasis, PeakFacts, PeakScope, PeakSource};

/// Why a bench cannot be run as asked (beside the recorder's, the target's and the output's
/// errors), with its class (`exit::Class`).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// `--cgroup PATH` holds more than the daemon's tree, or not the daemon.
    #[error("--cgroup {given}: the cgroup {cgroup} does not hold the daemon's tree alone ({why}): its peak would not be the tree's; {CGROUP_ADVICE}")]
    CgroupNotAlone {
        given: String,
        cgroup: String,
        why: String,
    },
    /// `--cgroup auto`: the daemon's own cgroup cannot give its tree's peak (`why`). Bench
    /// takes only a cgroup that holds the daemon's tree alone, so `record`'s advice (give the
    /// shared cgroup's path) is not bench's.
    #[error(
        "--cgroup auto: {why}: a run's peak would not be the daemon's tree's; {CGROUP_ADVICE}"
    )]
    CgroupAuto { why: String },
    /// The recorder could not start or go on.
    #[error(transparent)]
    Record(#[from] crate::sampler::error::RecordError),
    /// The bench's own recording (`-o`) could not be made or written.
    #[error(transparent)]
    Output(#[from] crate::format::OutputError),
    /// A marker flag is wrong, or the markers' socket cannot be made.
    #[error(transparent)]
    Mark(#[from] crate::marks::MarkError),
    /// The daemon's /proc files could not be opened once found.
    #[error("cannot read the daemon (PID {pid})")]
    DaemonUnreadable {
        pid: i32,
        #[source]
        source: crate::probe::ProcError,
    },
    /// What the bench needs of the system (`what`: a thread, the signal handlers) could not be
    /// had, or waiting for the client failed.
    #[error("{what}")]
    System {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the recorder thread panicked")]
    RecorderPanicked,
    #[error("the recorder has already ended")]
    RecorderEnded,
    #[error("a run's recorder still holds the bench's recording")]
    RecordingHeld,
    /// The recording stopped during `what` (`run 3`) on `source`.
    #[error("the recording stopped during {what}")]
    StoppedDuring {
        what: String,
        #[source]
        source: Box<BenchError>,
    },
}

impl BenchError {
    /// `source` for `what` the bench needed of the system.
    pub fn system(what: &'static str) -> impl FnOnce(std::io::Error) -> BenchError {
        move |source| BenchError::System { what, source }
    }
}

/// What works for a bench whose daemon has no cgroup of its own.
const CGROUP_ADVICE: &str = "start the daemon in a cgroup of its own (e.g. systemd-run --scope), or leave out --cgroup: each run's peak is then the kernel's peak of the daemon's largest process (VmHWM), with the tree's bounds";

impl crate::error::Classified for BenchError {
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            BenchError::CgroupNotAlone { .. } | BenchError::CgroupAuto { .. } => Class::Usage,
            BenchError::Record(e) => e.class(),
            BenchError::Output(e) => e.class(),
            BenchError::Mark(e) => e.class(),
            BenchError::StoppedDuring { source, .. } => source.class(),
            BenchError::DaemonUnreadable { .. }
            | BenchError::System { .. }
            | BenchError::RecorderPanicked
            | BenchError::RecorderEnded
            | BenchError::RecordingHeld => Class::Failure,
        }
    }
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// From 1.
    pub run: u32,
    pub started_unix_ms: u64,
    pub wall_s: f64,
    /// The client's exit code; `None` when a signal killed it.
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_signal: Option<i32>,
    /// The run's own peak, decided once (`model::peak`): the tree's exact peak from a cgroup
    /// that holds it alone, else the kernel's exact peak of the largest process (VmHWM reset
    /// for the run, or the command's ru_maxrss), else sampled. The table and the statistics
    /// hold every run on the bench's basis (`BenchReport::peak_basis`).
    pub peak: Peak,
    /// What the kernel and the samples say of the run (the same names as `summary --json`).
    #[serde(flatten)]
    pub facts: PeakFacts,
    pub samples: u64,
    /// The largest cgroup usage sampled during the run, when a cgroup is read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_sampled_peak_bytes: Option<u64>,
    /// The daemon's RSS just before and just after the run (`None` without a daemon).
    pub rss_before_bytes: Option<u64>,
    pub rss_after_bytes: Option<u64>,
    /// The cgroup's usage at the run's start, when a cgroup is read (a daemon's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_before_bytes: Option<u64>,
    /// Peak (on the bench's basis) minus the floor before the run in the peak's own counter
    /// (the cgroup's usage for a cgroup peak, else the RSS before): what the run itself needed
    /// above the idle floor.
    pub peak_over_floor_bytes: Option<u64>,
    /// CPU time the daemon's tree used during the run, user and system, in seconds: each
    /// process's own (all its threads) and that of the children it reaped (a worker that exited
    /// during the run counts through its parent), from /proc/PID/stat's utime + cutime and
    /// stime + cstime at the run's start and end, in clock ticks (10 ms at CLK_TCK 100). `None`
    /// without a daemon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_user_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_system_s: Option<f64>,
    /// Without a daemon: the CPU time, user and system, of the run's command and the
    /// descendants it waited for, in seconds (wait4's rusage of that child, to the microsecond).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_user_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_system_s: Option<f64>,
    /// The largest locked (VmLck), pinned (VmPin) and shared (RssShmem) memory sampled.
    #[serde(flatten)]
    pub held: crate::analysis::span::HeldPeaks,
    /// Major faults, memory stall (PSI), swap and huge pages in the run.
    #[serde(flatten)]
    pub health: crate::analysis::span::MemoryHealth,
    /// The PSS reads in the run (`--pss`): shared pages counted once, divided among the
    /// processes that map them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pss: Option<crate::analysis::span::PssReads>,
    /// The largest `gpu_bytes` in the run (GPU memory held by the tree), when GPU memory was
    /// recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_gpu_bytes: Option<u64>,
    /// The run's GPU kernel peak (NVML accounting), beside the sampled one: exact where the
    /// run launched its command (a command bench) or the mark rose during it.
    #[serde(flatten)]
    pub gpu_kernel: crate::analysis::gpu::GpuKernelPeak,
    /// Processes in the daemon's tree right after the run (`None` without a daemon); the leak
    /// check compares RSS after runs only while this stays the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes_after: Option<u32>,
    /// Processes of a command bench's run still alive once the command exited; they were ended
    /// before the next run (absent when none were left).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leftovers: Option<Leftovers>,
}

impl RunResult {
    /// The run's numbers from its span (`analysis::span::Span`): the same as `summary` of the
    /// bench's recording gives it.
    pub fn of_span(
        run: u32,
        started_unix_ms: u64,
        wall_s: f64,
        span: &crate::analysis::span::Span,
    ) -> RunResult {
        RunResult {
            run,
            started_unix_ms,
            wall_s,
            exit_code: None,
            exit_signal: None,
            peak: span.peak,
            facts: span.facts,
            samples: span.samples,
            cgroup_sampled_peak_bytes: span.cgroup_sampled_peak_bytes,
            cgroup_before_bytes: None,
            rss_before_bytes: None,
            rss_after_bytes: None,
            peak_over_floor_bytes: None,
            daemon_user_s: None,
            daemon_system_s: None,
            command_user_s: None,
            command_system_s: None,
            held: span.held,
            health: span.health,
            pss: span.pss,
            peak_gpu_bytes: span.peak_gpu_bytes,
            gpu_kernel: span.gpu_kernel,
            processes_after: None,
            leftovers: None,
        }
    }

    /// The run's peak on `basis` (its own when it has none of that kind).
    pub fn peak_on(&self, basis: PeakBasis) -> Peak {
        self.facts.on_basis(basis).unwrap_or(self.peak)
    }

    /// `peak_on`, unless nothing is known of it: a command over before its first sample, with
    /// no kernel peak (its sampled "peak" would read 0 B).
    pub fn known_peak(&self, basis: PeakBasis) -> Option<Peak> {
        let p = self.peak_on(basis);
        (p.source != PeakSource::Sampled || self.samples > 0).then_some(p)
    }
}

/// What a run of `bench -- COMMAND` left behind: processes it started that were still alive
/// (re-parented to memmon, their subreaper) after the command exited. They are ended (SIGTERM,
/// SIGKILL after 2 s) before the next run, so no run is billed for another's processes.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Leftovers {
    pub processes: u32,
    /// Their RSS summed when the command had exited (memory the run's peak may not include).
    pub rss_bytes: u64,
    pub pids: Vec<i32>,
    pub commands: Vec<String>,
    /// True when some ignored SIGTERM for 2 s and were killed.
    pub needed_sigkill: bool,
    /// Still alive after SIGKILL (a process stuck in the kernel); normally 0.
    pub still_alive: u32,
}

impl Leftovers {
    /// `left 1 process behind (PID 42 workload, RSS 60.0 MiB); ended with SIGTERM`.
    pub fn describe(&self) -> String {
        let list = self
            .pids
            .iter()
            .zip(&self.commands)
            .take(5)
            .map(|(p, c)| format!("PID {p} {c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let more = if self.pids.len() > 5 { ", …" } else { "" };
        let how = if self.needed_sigkill {
            "ended with SIGTERM, then SIGKILL after 2 s"
        } else {
            "ended with SIGTERM"
        };
        let stuck = if self.still_alive > 0 {
            format!("; {} still alive after SIGKILL", self.still_alive)
        } else {
            String::new()
        };
        format!(
            "left {} behind ({list}{more}; RSS {} in all): {how} before the next run{stuck}",
            crate::units::count(self.processes, "process"),
            crate::units::fmt_bytes(self.rss_bytes)
        )
    }
}

/// Statistics across the measured runs.
#[derive(Debug, Clone, Serialize)]
pub struct RunStats {
    pub wall_s: Stats,
    /// The runs' peaks on the bench's basis (`BenchReport::peak_basis`).
    pub peak_bytes: ByteStats,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_over_floor_bytes: Option<ByteStats>,
}

/// The watched daemon.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonInfo {
    pub pid: i32,
    pub comm: String,
    /// How it was given: `pid 123`, `pidfile /run/d.pid`, `name proverd`.
    pub spec: String,
    pub children: bool,
    /// The daemon's own cgroup, when its peak is read per run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

/// The whole benchmark, as exported.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub memmon_version: String,
    /// `daemon` (a client against a daemon) or `command` (each run's own tree).
    pub mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon: Option<DaemonInfo>,
    pub client: String,
    pub interval: String,
    pub warmup_runs: u32,
    pub runs_requested: u32,
    /// The time series with `run-start:N` / `run-end:N` events, when `-o` was given.
    pub recording: Option<String>,
    /// The kind of peak every run is shown and summed on: the best one all runs have
    /// (`model::peak::common_basis`).
    pub peak_basis: PeakBasis,
    pub runs: Vec<RunResult>,
    pub stats: Option<RunStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leak: Option<LeakCheck>,
    /// What the reader must know: resets that failed, the cgroup, sampled peaks.
    pub notes: Vec<String>,
    /// False when the bench stopped before all runs; `stopped` says why.
    pub complete: bool,
    pub stopped: Option<String>,
    /// `--anatomy`: what grew in each run, from the idle floor's anatomy (the last before the
    /// first run) to the run's highest.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub anatomy: Vec<crate::analysis::anatomy::SpanGrowth>,
    /// `--concurrency` above 1: the measured window of runs in flight together, its exact peak
    /// and its throughput (`runs` is then empty: no run's own peak can be told apart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<window::Window>,
}

impl BenchReport {
    /// Fills in the basis, the statistics and the leak check from the runs.
    pub fn finish(&mut self) {
        self.peak_basis = crate::model::peak::common_basis(self.runs.iter().map(|r| &r.facts));
        let basis = self.peak_basis;
        for r in &mut self.runs {
            // The floor in the peak's own counter: a cgroup's peak counts each page once and
            // pages charged elsewhere (the page cache of a binary) not at all, an RSS sum
            // otherwise.
            let floor = match basis {
                PeakBasis::Cgroup => r.cgroup_before_bytes,
                _ => r.rss_before_bytes,
            };
            r.peak_over_floor_bytes = floor
                .filter(|_| r.rss_before_bytes.is_some())
                .map(|before| r.peak_on(basis).bytes.saturating_sub(before));
        }
        let walls: Vec<f64> = self.runs.iter().map(|r| r.wall_s).collect();
        let peaks: Vec<u64> = self.runs.iter().map(|r| r.peak_on(basis).bytes).collect();
        let over: Vec<u64> = self
            .runs
            .iter()
            .filter_map(|r| r.peak_over_floor_bytes)
            .collect();
        self.stats = match (Stats::of(&walls), ByteStats::of(&peaks)) {
            (Some(w), Some(p)) => Some(RunStats {
                wall_s: w,
                peak_bytes: p,
                peak_over_floor_bytes: if over.len() == self.runs.len() {
                    ByteStats::of(&over)
                } else {
                    None
                },
            }),
            _ => None,
        };
        let pairs: Vec<(u64, u64, u32)> = self
            .runs
            .iter()
            .filter_map(|r| Some((r.rss_before_bytes?, r.rss_after_bytes?, r.processes_after?)))
            .collect();
        self.leak = stats::leak_check(&pairs);
    }

    /// What the budgets judge of each run: its peak on the bench's basis (after `finish`); of
    /// a window of runs in flight together, the window's peak.
    pub fn units(&self) -> Vec<crate::analysis::budget::Unit> {
        let window = self.window.iter().map(|w| {
            crate::analysis::budget::Unit::of_run(
                "the window".into(),
                w.peak,
                &w.facts,
                w.cgroup_sampled_peak_bytes,
                w.peak_gpu_bytes,
                &w.gpu_kernel,
            )
        });
        self.runs
            .iter()
            .map(|r| {
                crate::analysis::budget::Unit::of_run(
                    format!("run {}", r.run),
                    r.peak_on(self.peak_basis),
                    &r.facts,
                    r.cgroup_sampled_peak_bytes,
                    r.peak_gpu_bytes,
                    &r.gpu_kernel,
                )
            })
            .chain(window)
            .collect()
    }
}

#[cfg(test)]
impl BenchReport {
    /// For the tests: a complete bench of `runs`, not yet finished (`finish`).
    pub fn example(runs: Vec<RunResult>) -> BenchReport {
        BenchReport {
            memmon_version: "0".into(),
            mode: "command",
            daemon: None,
            client: "c".into(),
            interval: "1s".into(),
            warmup_runs: 0,
            runs_requested: 1,
            recording: None,
            peak_basis: PeakBasis::Sampled,
            runs,
            stats: None,
            leak: None,
            notes: vec![],
            complete: true,
            stopped: None,
            anatomy: Vec::new(),
            window: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A daemon's run: RSS before, the cgroup's usage at its start, and the tree's peak by
    /// the kernel and (where given) by its cgroup.
    fn run(rss_before: u64, cgroup: Option<(u64, u64)>) -> RunResult {
        let span = crate::analysis::span::SpanAcc::open(&Default::default()).close(
            String::new(),
            None,
            false,
            &Default::default(),
        );
        let mut r = RunResult::of_span(1, 0, 1.0, &span);
        r.facts.kernel_peak_rss_bytes = Some(250 * MIB);
        if let Some((before, peak)) = cgroup {
            // A daemon of two processes: its cgroup's peak is the tree's headline (one
            // process's own VmHWM would be).
            r.facts.max_processes = 2;
            r.facts.cgroup_peak_bytes = Some(peak);
            r.facts.cgroup_holds_tree = true;
            r.cgroup_before_bytes = Some(before);
        }
        r.rss_before_bytes = Some(rss_before);
        r
    }

    fn finished(runs: Vec<RunResult>) -> BenchReport {
        let mut b = BenchReport::example(runs);
        b.finish();
        b
    }

    /// `bench --export-json`'s keys, for three runs against a daemon in a cgroup of its own:
    /// those docs/json/memmon-bench.keys lists for its schema version.
    #[test]
    fn bench_json_keys_are_those_listed_for_its_schema_version() {
        let runs = (1..=3)
            .map(|n| {
                let mut r = run(99 * MIB, Some((97 * MIB, (250 + n) * MIB)));
                r.run = n as u32;
                r.exit_code = Some(0);
                r
            })
            .collect();
        let mut b = BenchReport::example(runs);
        b.mode = "daemon";
        b.runs_requested = 3;
        b.daemon = Some(DaemonInfo {
            pid: 7,
            comm: "prover".into(),
            spec: "pidfile prover.pid".into(),
            children: true,
            cgroup: Some("/prover".into()),
        });
        b.notes.push("a note".into());
        // A bench with runs in flight together writes a window where the runs would be: one
        // report holds both here, so the list names every key either kind writes.
        let span = crate::analysis::span::SpanAcc::open(&Default::default()).close(
            String::new(),
            None,
            false,
            &Default::default(),
        );
        let client = |run, start_s| window::ClientRun {
            run,
            started_unix_ms: 1,
            start_s,
            wall_s: 1.0,
            exit_code: Some(0),
            exit_signal: None,
            in_flight: 2,
        };
        let mut w = window::Window::of(2, 2.0, &span, (1..=4).map(|n| client(n, 0.0)).collect());
        w.daemon_user_s = Some(0.5);
        w.daemon_system_s = Some(0.1);
        b.window = Some(w);
        b.finish();
        let doc = crate::format::json::BENCH;
        let v = serde_json::to_value(doc.of(&b)).unwrap();
        crate::format::json::check_keys(doc, &v);
    }

    #[test]
    fn over_floor_takes_the_floor_in_the_peaks_own_counter() {
        // A cgroup's peak (257 MiB) less its usage at the start (97 MiB), not less the RSS
        // before (99 MiB, which counts a binary's page cache the cgroup was never charged).
        let b = finished(vec![run(99 * MIB, Some((97 * MIB, 257 * MIB)))]);
        assert_eq!(b.peak_basis, PeakBasis::Cgroup);
        assert_eq!(b.runs[0].peak_over_floor_bytes, Some(160 * MIB));
        // A kernel peak less the RSS before.
        let b = finished(vec![run(99 * MIB, None)]);
        assert_eq!(b.peak_basis, PeakBasis::Kernel);
        assert_eq!(b.runs[0].peak_over_floor_bytes, Some(151 * MIB));
    }
}
