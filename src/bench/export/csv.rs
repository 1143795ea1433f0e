//! The CSV export: one row per run, each column named with its unit; empty where a value does
//! not apply (no daemon, no cgroup, no `--pss`). `peak_bytes` is the run's peak on the bench's
//! basis (`peak_source`, `peak_scope`, `peak_exact`; for a tree whose peak is its largest
//! process's, `tree_peak_low_bytes` and `tree_peak_high_bytes` bound the tree's).
//! `sampled_peak_rss_bytes`, `rss_before_bytes` and `rss_after_bytes` of a run with
//! `max_processes` above 1 are RSS sums that count a shared page in each process; `pss_bytes`
//! (the largest PSS read, a peak when `pss_is_peak`) counts it once. `departed`: processes that
//! left the tree during the run; where `peak_scope` is `largest-process-seen`, no exit record
//! was read for them and the peak is a lower bound.
//! `daemon_user_s` and `daemon_system_s`: the CPU seconds the daemon's tree used during the run
//! (each process's own and its reaped children's), from /proc/PID/stat in clock ticks (10 ms);
//! `command_user_s` and `command_system_s`, without a daemon: the CPU seconds of the run's
//! command and the descendants it waited for (wait4, to the microsecond).

use super::Exporter;
use crate::bench::{BenchReport, RunResult};

pub struct CsvExporter;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The columns, each declared once: its name (with its unit) and its value of a run, given the
/// report (whose basis the peak columns are on).
type Cell = fn(&BenchReport, &RunResult) -> String;

const COLUMNS: &[(&str, Cell)] = &[
    ("run", |_, r| r.run.to_string()),
    ("started_unix_ms", |_, r| r.started_unix_ms.to_string()),
    ("wall_s", |_, r| format!("{:.6}", r.wall_s)),
    ("exit_code", |_, r| opt(r.exit_code)),
    ("exit_signal", |_, r| opt(r.exit_signal)),
    ("peak_bytes", |b, r| {
        r.peak_on(b.peak_basis).bytes.to_string()
    }),
    ("peak_source", |b, r| {
        r.peak_on(b.peak_basis).source.key().into()
    }),
    ("peak_scope", |b, r| {
        r.peak_on(b.peak_basis).scope.key().into()
    }),
    ("peak_exact", |b, r| {
        r.peak_on(b.peak_basis).exact.to_string()
    }),
    ("tree_peak_low_bytes", |b, r| {
        opt(r.peak_on(b.peak_basis).tree_low_bytes)
    }),
    ("tree_peak_high_bytes", |b, r| {
        opt(r.peak_on(b.peak_basis).tree_high_bytes)
    }),
    ("kernel_peak_rss_bytes", |_, r| {
        opt(r.facts.kernel_peak_rss_bytes)
    }),
    ("sampled_peak_rss_bytes", |_, r| {
        r.facts.sampled_peak_rss_bytes.to_string()
    }),
    ("cgroup_peak_bytes", |_, r| opt(r.facts.cgroup_peak_bytes)),
    ("rss_before_bytes", |_, r| opt(r.rss_before_bytes)),
    ("rss_after_bytes", |_, r| opt(r.rss_after_bytes)),
    ("peak_over_floor_bytes", |_, r| opt(r.peak_over_floor_bytes)),
    ("max_processes", |_, r| r.facts.max_processes.to_string()),
    ("departed", |_, r| r.facts.departed.to_string()),
    ("samples", |_, r| r.samples.to_string()),
    ("locked_bytes", |_, r| r.held.locked_bytes.to_string()),
    ("pinned_bytes", |_, r| r.held.pinned_bytes.to_string()),
    ("shmem_bytes", |_, r| r.held.shmem_bytes.to_string()),
    ("pss_bytes", |_, r| opt(r.pss.map(|p| p.largest_bytes))),
    ("pss_reads", |_, r| opt(r.pss.map(|p| p.reads))),
    ("pss_is_peak", |_, r| opt(r.pss.map(|p| p.is_peak))),
    ("peak_gpu_bytes", |_, r| opt(r.peak_gpu_bytes)),
    ("gpu_kernel_peak_bytes", |_, r| opt(r.gpu_kernel.bytes)),
    ("daemon_user_s", |_, r| {
        opt(r.daemon_user_s.map(|s| format!("{s:.2}")))
    }),
    ("daemon_system_s", |_, r| {
        opt(r.daemon_system_s.map(|s| format!("{s:.2}")))
    }),
    ("command_user_s", |_, r| {
        opt(r.command_user_s.map(|s| format!("{s:.6}")))
    }),
    ("command_system_s", |_, r| {
        opt(r.command_system_s.map(|s| format!("{s:.6}")))
    }),
];

impl Exporter for CsvExporter {
    fn serialize(&self, report: &BenchReport) -> anyhow::Result<Vec<u8>> {
        let mut o: String = COLUMNS.iter().map(|c| c.0).collect::<Vec<_>>().join(",");
        o.push('\n');
        for r in &report.runs {
            // No value holds a comma, a quote or a line break (numbers and fixed words).
            let row: Vec<String> = COLUMNS.iter().map(|c| (c.1)(report, r)).collect();
            o.push_str(&row.join(","));
            o.push('\n');
        }
        Ok(o.into_bytes())
    }
}
