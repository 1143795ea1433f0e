//! The CSV export: one row per run, each column named with its unit; empty where a value does
//! not apply (no daemon, no cgroup, no `--pss`). `sampled_peak_bytes`, `rss_before_bytes` and
//! `rss_after_bytes` of a run with `processes` above 1 are RSS sums that count a shared page in
//! each process; `pss_bytes` (the largest PSS read, a peak when `pss_is_peak`) counts it once.
//! `departed`: processes that left the tree during the run; where `kernel_peak_scope` is
//! `largest-process-seen`, no exit record was read for them and the kernel peak is a lower bound.
//! `daemon_user_s` and `daemon_system_s`: the CPU seconds the daemon's tree used during the run
//! (each process's own and its reaped children's), from /proc/PID/stat in clock ticks (10 ms);
//! `command_user_s` and `command_system_s`, without a daemon: the CPU seconds of the run's
//! command and the descendants it waited for (wait4, to the microsecond).

use super::Exporter;
use crate::bench::BenchReport;

pub struct CsvExporter;

const HEADER: &str = "run,started_unix_ms,wall_s,exit_code,exit_signal,peak_rss_bytes,peak_source,\
kernel_peak_bytes,kernel_peak_scope,sampled_peak_bytes,cgroup_peak_bytes,rss_before_bytes,\
rss_after_bytes,peak_over_floor_bytes,processes,departed,samples,pss_bytes,pss_reads,pss_is_peak,\
peak_gpu_bytes,daemon_user_s,daemon_system_s,command_user_s,command_system_s";

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

impl Exporter for CsvExporter {
    fn serialize(&self, report: &BenchReport) -> anyhow::Result<Vec<u8>> {
        let mut o = String::from(HEADER);
        o.push('\n');
        for r in &report.runs {
            let fields = [
                r.run.to_string(),
                r.started_unix_ms.to_string(),
                format!("{:.6}", r.wall_s),
                opt(r.exit_code),
                opt(r.exit_signal),
                r.peak_rss_bytes.to_string(),
                r.peak_source.key().to_string(),
                opt(r.kernel_peak_bytes),
                r.kernel_peak_scope.key().to_string(),
                r.sampled_peak_bytes.to_string(),
                opt(r.cgroup_peak_bytes),
                opt(r.rss_before_bytes),
                opt(r.rss_after_bytes),
                opt(r.peak_over_floor_bytes),
                r.processes.to_string(),
                r.departed.to_string(),
                r.samples.to_string(),
                opt(r.pss.map(|p| p.largest_bytes)),
                opt(r.pss.map(|p| p.reads)),
                opt(r.pss.map(|p| p.is_peak)),
                opt(r.peak_gpu_bytes),
                opt(r.daemon_user_s.map(|s| format!("{s:.2}"))),
                opt(r.daemon_system_s.map(|s| format!("{s:.2}"))),
                opt(r.command_user_s.map(|s| format!("{s:.6}"))),
                opt(r.command_system_s.map(|s| format!("{s:.6}"))),
            ];
            o.push_str(&fields.join(","));
            o.push('\n');
        }
        Ok(o.into_bytes())
    }
}
