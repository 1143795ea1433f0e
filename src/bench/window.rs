//! A bench with runs in flight together (`bench --concurrency C`): C clients run at once
//! against the daemon, a new one starting as one ends, so overlap happens under the bench as it
//! does in production (synthesis of the next proof during the GPU phase of this one).
//!
//! Overlapping runs share the daemon's memory: no run's own peak can be told apart. What is
//! exact is the measured window's: the kernel's high-water marks are reset at its start (as
//! each run's are one at a time) and read at its end, so its peak is the daemon's highest over
//! every moment of the window, whatever the interval. Beside it: the throughput (runs per
//! hour), each run's latency, the idle floor before the window and the peak above it per run in
//! flight.

use crate::analysis::span::Span;
use crate::model::peak::{Peak, PeakBasis, PeakFacts};
use serde::Serialize;

/// One client of the window (or a failed one), as it ran.
#[derive(Debug, Clone, Serialize)]
pub struct ClientRun {
    /// From 1, in the order the clients started.
    pub run: u32,
    pub started_unix_ms: u64,
    /// Seconds from the window's start to the client's start.
    pub start_s: f64,
    /// Seconds from the client's start to its exit: its latency.
    pub wall_s: f64,
    /// The client's exit code; `None` when a signal killed it.
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_signal: Option<i32>,
    /// Clients in flight once this one started, itself included.
    pub in_flight: u32,
}

impl ClientRun {
    /// Seconds from the window's start to the client's exit.
    pub fn end_s(&self) -> f64 {
        self.start_s + self.wall_s
    }
}

/// Latency percentiles of the window's runs, in seconds (nearest rank).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// `None` for no runs.
    pub fn of(walls: &[f64]) -> Option<Latency> {
        if walls.is_empty() {
            return None;
        }
        let mut v = walls.to_vec();
        v.sort_by(f64::total_cmp);
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Latency {
            p50: rank(0.50),
            p95: rank(0.95),
            max: v[v.len() - 1],
            mean: v.iter().sum::<f64>() / v.len() as f64,
        })
    }
}

/// The measured window of a bench with runs in flight together.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// Clients in flight at once (`--concurrency`).
    pub concurrency: u32,
    /// The most that were in flight at once (fewer than `concurrency` when there were fewer
    /// runs).
    pub most_in_flight: u32,
    /// Runs completed in the window (failed ones included).
    pub runs: u32,
    /// Seconds from the window's start (the reset of the marks, just before the first client
    /// started) to the last client's exit.
    pub wall_s: f64,
    /// Runs completed per hour: `runs` over `wall_s`.
    pub throughput_per_hour: f64,
    /// The throughput over each stretch of `concurrency` consecutive completions (the first
    /// from the window's start): how steady it was. `None` with fewer than two stretches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_stretches: Option<crate::analysis::stats::Stats>,
    /// The runs' latencies (each client's time from its start to its exit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_s: Option<Latency>,
    /// The window's peak, decided as a run's is (`model::peak`): exact where the marks were
    /// reset at its start.
    pub peak: Peak,
    /// What the kernel and the samples say of the window (the names of `summary --json`).
    #[serde(flatten)]
    pub facts: PeakFacts,
    pub samples: u64,
    /// The largest cgroup usage sampled in the window, when a cgroup is read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_sampled_peak_bytes: Option<u64>,
    /// The largest locked (VmLck), pinned (VmPin) and shared (RssShmem) memory sampled.
    #[serde(flatten)]
    pub held: crate::analysis::span::HeldPeaks,
    /// Major faults, memory stall (PSI), swap, huge pages and OOM kills in the window.
    #[serde(flatten)]
    pub health: crate::analysis::span::MemoryHealth,
    /// The largest `gpu_bytes` in the window, when GPU memory was recorded, and the GPU's own
    /// peak (NVML accounting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_gpu_bytes: Option<u64>,
    #[serde(flatten)]
    pub gpu_kernel: crate::analysis::gpu::GpuKernelPeak,
    /// The idle floor: the daemon's memory at the window's start, in the peak's own counter
    /// (the cgroup's usage for a cgroup peak, else the tree's RSS).
    pub floor_bytes: u64,
    /// The peak less the floor: what the runs in flight together needed above it.
    pub peak_over_floor_bytes: u64,
    /// `peak_over_floor_bytes` over `most_in_flight`: the memory each run in flight cost.
    pub peak_over_floor_per_run_in_flight_bytes: u64,
    /// The tree's RSS just after the window.
    pub rss_after_bytes: u64,
    /// CPU time of the daemon's tree in the window, user and system, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_user_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_system_s: Option<f64>,
    pub clients: Vec<ClientRun>,
}

impl Window {
    /// The window from its span (the rows from its `window-start` to its `window-end`, closed
    /// as `summary` of the recording closes it: the same peak in both) and its clients.
    pub fn of(concurrency: u32, wall_s: f64, span: &Span, clients: Vec<ClientRun>) -> Window {
        let floor = match span.facts.basis() {
            PeakBasis::Cgroup => span.start_cgroup_bytes.unwrap_or(span.start_rss_bytes),
            _ => span.start_rss_bytes,
        };
        let most = clients.iter().map(|c| c.in_flight).max().unwrap_or(0);
        let over = span.peak.bytes.saturating_sub(floor);
        let walls: Vec<f64> = clients.iter().map(|c| c.wall_s).collect();
        Window {
            concurrency,
            most_in_flight: most,
            runs: clients.len() as u32,
            wall_s,
            throughput_per_hour: per_hour(clients.len(), wall_s),
            throughput_stretches: stretches(&clients, concurrency),
            latency_s: Latency::of(&walls),
            peak: span.peak,
            facts: span.facts,
            samples: span.samples,
            cgroup_sampled_peak_bytes: span.cgroup_sampled_peak_bytes,
            held: span.held,
            health: span.health,
            peak_gpu_bytes: span.peak_gpu_bytes,
            gpu_kernel: span.gpu_kernel,
            floor_bytes: floor,
            peak_over_floor_bytes: over,
            peak_over_floor_per_run_in_flight_bytes: over / u64::from(most.max(1)),
            rss_after_bytes: span.end_rss_bytes,
            daemon_user_s: None,
            daemon_system_s: None,
            clients,
        }
    }

    /// The clients that exited non-zero or were killed.
    pub fn failed(&self) -> usize {
        self.clients
            .iter()
            .filter(|c| c.exit_code != Some(0))
            .count()
    }
}

fn per_hour(runs: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        runs as f64 * 3600.0 / secs
    } else {
        0.0
    }
}

/// The throughput of each stretch of `c` consecutive completions, the first from the window's
/// start; a last stretch of fewer than `c` is left out (the window's end drains it).
fn stretches(clients: &[ClientRun], c: u32) -> Option<crate::analysis::stats::Stats> {
    let mut ends: Vec<f64> = clients.iter().map(ClientRun::end_s).collect();
    ends.sort_by(f64::total_cmp);
    let c = c.max(1) as usize;
    let mut rates = Vec::new();
    let mut from = 0.0;
    for chunk in ends.chunks_exact(c) {
        let to = chunk[c - 1];
        rates.push(per_hour(c, to - from));
        from = to;
    }
    (rates.len() >= 2)
        .then(|| crate::analysis::stats::Stats::of(&rates))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(run: u32, start_s: f64, wall_s: f64, in_flight: u32) -> ClientRun {
        ClientRun {
            run,
            started_unix_ms: 0,
            start_s,
            wall_s,
            exit_code: Some(0),
            exit_signal: None,
            in_flight,
        }
    }

    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let walls: Vec<f64> = (1..=20).map(f64::from).collect();
        let l = Latency::of(&walls).unwrap();
        assert_eq!((l.p50, l.p95, l.max), (10.0, 19.0, 20.0));
        assert_eq!(l.mean, 10.5);
        let one = Latency::of(&[2.5]).unwrap();
        assert_eq!((one.p50, one.p95, one.max), (2.5, 2.5, 2.5));
        assert!(Latency::of(&[]).is_none());
    }

    #[test]
    fn two_in_flight_each_1s_give_7200_runs_an_hour_in_every_stretch() {
        // Runs of 1 s, two at a time, a new one as one ends: two complete every second.
        let clients: Vec<ClientRun> = (0..8)
            .map(|i| client(i + 1, f64::from(i / 2), 1.0, 2))
            .collect();
        let s = stretches(&clients, 2).unwrap();
        assert_eq!(s.count, 4);
        assert!((s.mean - 7200.0).abs() < 1e-6 && s.stddev < 1e-6, "{s:?}");
        assert_eq!(per_hour(8, 4.0), 7200.0);
        // A lone stretch says nothing of steadiness.
        assert!(stretches(&clients[..3], 2).is_none());
    }
}
