//! `memmon bench`: run a client N times against a long-lived daemon (or run a command N times)
//! and give each run its wall time and the exact peak memory during that run, with statistics.
//!
//! The runner (`runner.rs`) drives a `Recorder` on its own thread and resets the kernel's
//! high-water marks before each run; `stats.rs` sums the runs up; `table.rs` prints them;
//! `export/` writes JSON, CSV and Markdown. (The daemon of known memory the tests run is in
//! src/bin/memmon-test/.)

pub mod export;
pub mod runner;
pub mod stats;
pub mod table;

use crate::probe::cgroup::CgroupFs;
use crate::probe::ProcFs;
use crate::sampler::record::PssGuard;
use crate::sampler::target::TargetSpec;
use serde::Serialize;
use stats::{ByteStats, LeakCheck, Stats};
use std::path::PathBuf;
use std::time::Duration;

/// Everything `memmon bench` was asked to do.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The daemon; `None` measures the client's own process tree, run by run.
    pub target: Option<TargetSpec>,
    pub client: Vec<String>,
    pub runs: u32,
    pub warmup: u32,
    pub prepare: Option<String>,
    pub cooldown: Option<Duration>,
    pub ignore_failure: bool,
    pub interval: Duration,
    pub children: bool,
    /// Where the time series goes: `None` for nowhere, `-` for stdout.
    pub output: Option<PathBuf>,
    pub format: Option<crate::format::Format>,
    pub force: bool,
    pub append: bool,
    pub pss: Option<PssGuard>,
    pub quiet: bool,
    /// True when stdout carries data (a recording or an export): the table and the client's
    /// output then go to stderr.
    pub stdout_is_data: bool,
    pub procfs: ProcFs,
    pub cgroupfs: CgroupFs,
    /// Markers against a daemon (`--mark-log`, `memmon mark`), and whether each resets the
    /// high-water marks (`--phase-peaks`).
    pub marks: crate::marks::MarkOptions,
    pub phase_peaks: bool,
}

/// Where the number reported as a run's peak comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PeakSource {
    /// The kernel's high-water mark, reset before the run (VmHWM), or wait4's ru_maxrss.
    Kernel,
    /// The largest sampled RSS of the run: the kernel's mark could not be used.
    Sampled,
}

impl PeakSource {
    pub fn name(self) -> &'static str {
        match self {
            PeakSource::Kernel => "kernel",
            PeakSource::Sampled => "sampled",
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
    /// The run's peak RSS: the kernel's when it could be reset for the run, else sampled.
    pub peak_rss_bytes: u64,
    pub peak_source: PeakSource,
    /// The kernel's peak of the run (VmHWM after a reset, or wait4's ru_maxrss), if known.
    pub kernel_peak_bytes: Option<u64>,
    /// `process` (one process: its exact peak) or `largest-process` (a tree: the exact peak of
    /// its largest process, a lower bound of the tree's).
    pub kernel_peak_scope: &'static str,
    /// The largest RSS of the tree among the run's samples.
    pub sampled_peak_bytes: u64,
    pub samples: u64,
    /// The peak of the daemon's own cgroup during the run (all its memory: page cache included).
    pub cgroup_peak_bytes: Option<u64>,
    /// The daemon's RSS just before and just after the run (`None` without a daemon).
    pub rss_before_bytes: Option<u64>,
    pub rss_after_bytes: Option<u64>,
    /// Peak minus the RSS before the run: what the run itself needed above the idle floor.
    pub peak_over_floor_bytes: Option<u64>,
    /// Most processes in the tree during the run.
    pub processes: u32,
}

/// Statistics across the measured runs.
#[derive(Debug, Clone, Serialize)]
pub struct RunStats {
    pub wall_s: Stats,
    pub peak_rss_bytes: ByteStats,
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
    pub runs: Vec<RunResult>,
    pub stats: Option<RunStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leak: Option<LeakCheck>,
    /// What the reader must know: resets that failed, the cgroup, sampled peaks.
    pub notes: Vec<String>,
    /// False when the bench stopped before all runs; `stopped` says why.
    pub complete: bool,
    pub stopped: Option<String>,
}

impl BenchReport {
    /// Fills in the statistics and the leak check from the runs.
    pub fn finish(&mut self) {
        let walls: Vec<f64> = self.runs.iter().map(|r| r.wall_s).collect();
        let peaks: Vec<u64> = self.runs.iter().map(|r| r.peak_rss_bytes).collect();
        let over: Vec<u64> = self
            .runs
            .iter()
            .filter_map(|r| r.peak_over_floor_bytes)
            .collect();
        self.stats = match (Stats::of(&walls), Stats::of_bytes(&peaks)) {
            (Some(w), Some(p)) => Some(RunStats {
                wall_s: w,
                peak_rss_bytes: p,
                peak_over_floor_bytes: if over.len() == self.runs.len() {
                    Stats::of_bytes(&over)
                } else {
                    None
                },
            }),
            _ => None,
        };
        let pairs: Vec<(u64, u64)> = self
            .runs
            .iter()
            .filter_map(|r| Some((r.rss_before_bytes?, r.rss_after_bytes?)))
            .collect();
        self.leak = stats::leak_check(&pairs);
    }
}
