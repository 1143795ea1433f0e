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
//! Then the memory health of each run, a column only where some run moved it (as the table
//! shows them): `major_faults`; the stall, µs (`psi_memory_some_us`, `_full_us`, the cgroup's
//! `cgroup_psi_memory_*`); the pages swapped (`swap_in_pages`, `swap_out_pages`: machine-wide;
//! `cgroup_swap_*_pages`: the cgroup's own); the most transparent huge pages in use
//! (`anon_huge_bytes`: the tree's, read with PSS; `cgroup_anon_thp_bytes`); the OOM kills in the
//! cgroup (`cgroup_oom_kills`).
//!
//! With runs in flight together (`--concurrency`), a row per client instead (`run`,
//! `started_unix_ms`, `start_s` from the window's start, `wall_s`, the exit, `in_flight` at its
//! start), each with the window's numbers (`concurrency`, `window_wall_s`,
//! `throughput_per_hour`, `window_peak_bytes` and its source, scope and exactness, `floor_bytes`,
//! `peak_over_floor_bytes`, `peak_over_floor_per_run_in_flight_bytes`): no run has a peak of its
//! own there.

use super::Exporter;
use crate::analysis::span::MemoryHealth;
use crate::bench::{BenchReport, RunResult};
use serde::Serialize;

pub struct CsvExporter;

/// One run's row: each field a column (its name with its unit), empty where it has no value.
/// Written by the `csv` crate, which quotes what needs quoting.
#[derive(Serialize)]
struct Row {
    run: u32,
    started_unix_ms: u64,
    wall_s: String,
    exit_code: Option<i32>,
    exit_signal: Option<i32>,
    peak_bytes: u64,
    peak_source: &'static str,
    peak_scope: &'static str,
    peak_exact: bool,
    tree_peak_low_bytes: Option<u64>,
    tree_peak_high_bytes: Option<u64>,
    kernel_peak_rss_bytes: Option<u64>,
    sampled_peak_rss_bytes: u64,
    cgroup_peak_bytes: Option<u64>,
    rss_before_bytes: Option<u64>,
    rss_after_bytes: Option<u64>,
    peak_over_floor_bytes: Option<u64>,
    max_processes: u32,
    departed: u64,
    samples: u64,
    locked_bytes: u64,
    pinned_bytes: u64,
    shmem_bytes: u64,
    pss_bytes: Option<u64>,
    pss_reads: Option<u64>,
    pss_is_peak: Option<bool>,
    peak_gpu_bytes: Option<u64>,
    gpu_kernel_peak_bytes: Option<u64>,
    daemon_user_s: Option<String>,
    daemon_system_s: Option<String>,
    command_user_s: Option<String>,
    command_system_s: Option<String>,
}

impl Row {
    /// `r` as the report shows it: its peak on the bench's basis.
    fn of(report: &BenchReport, r: &RunResult) -> Row {
        let p = r.peak_on(report.peak_basis);
        let secs = |v: Option<f64>, decimals: usize| v.map(|s| format!("{s:.decimals$}"));
        Row {
            run: r.run,
            started_unix_ms: r.started_unix_ms,
            wall_s: format!("{:.6}", r.wall_s),
            exit_code: r.exit_code,
            exit_signal: r.exit_signal,
            peak_bytes: p.bytes,
            peak_source: p.source.key(),
            peak_scope: p.scope.key(),
            peak_exact: p.exact,
            tree_peak_low_bytes: p.tree_low_bytes,
            tree_peak_high_bytes: p.tree_high_bytes,
            kernel_peak_rss_bytes: r.facts.kernel_peak_rss_bytes,
            sampled_peak_rss_bytes: r.facts.sampled_peak_rss_bytes,
            cgroup_peak_bytes: r.facts.cgroup_peak_bytes,
            rss_before_bytes: r.rss_before_bytes,
            rss_after_bytes: r.rss_after_bytes,
            peak_over_floor_bytes: r.peak_over_floor_bytes,
            max_processes: r.facts.max_processes,
            departed: r.facts.departed,
            samples: r.samples,
            locked_bytes: r.held.locked_bytes,
            pinned_bytes: r.held.pinned_bytes,
            shmem_bytes: r.held.shmem_bytes,
            pss_bytes: r.pss.map(|p| p.largest_bytes),
            pss_reads: r.pss.map(|p| p.reads),
            pss_is_peak: r.pss.map(|p| p.is_peak),
            peak_gpu_bytes: r.peak_gpu_bytes,
            gpu_kernel_peak_bytes: r.gpu_kernel.bytes,
            daemon_user_s: secs(r.daemon_user_s, 2),
            daemon_system_s: secs(r.daemon_system_s, 2),
            command_user_s: secs(r.command_user_s, 6),
            command_system_s: secs(r.command_system_s, 6),
        }
    }
}

/// One client of a window of runs in flight together, with the window's numbers.
#[derive(Serialize)]
struct ClientRow {
    run: u32,
    started_unix_ms: u64,
    start_s: String,
    wall_s: String,
    exit_code: Option<i32>,
    exit_signal: Option<i32>,
    in_flight: u32,
    concurrency: u32,
    window_wall_s: String,
    throughput_per_hour: String,
    window_peak_bytes: u64,
    window_peak_source: &'static str,
    window_peak_scope: &'static str,
    window_peak_exact: bool,
    floor_bytes: u64,
    peak_over_floor_bytes: u64,
    peak_over_floor_per_run_in_flight_bytes: u64,
}

fn window_rows(w: &crate::bench::window::Window) -> Result<Vec<u8>, super::ExportError> {
    let mut out = csv::Writer::from_writer(Vec::new());
    for c in &w.clients {
        out.serialize(ClientRow {
            run: c.run,
            started_unix_ms: c.started_unix_ms,
            start_s: format!("{:.6}", c.start_s),
            wall_s: format!("{:.6}", c.wall_s),
            exit_code: c.exit_code,
            exit_signal: c.exit_signal,
            in_flight: c.in_flight,
            concurrency: w.concurrency,
            window_wall_s: format!("{:.6}", w.wall_s),
            throughput_per_hour: format!("{:.1}", w.throughput_per_hour),
            window_peak_bytes: w.peak.bytes,
            window_peak_source: w.peak.source.key(),
            window_peak_scope: w.peak.scope.key(),
            window_peak_exact: w.peak.exact,
            floor_bytes: w.floor_bytes,
            peak_over_floor_bytes: w.peak_over_floor_bytes,
            peak_over_floor_per_run_in_flight_bytes: w.peak_over_floor_per_run_in_flight_bytes,
        })?;
    }
    Ok(out.into_inner().map_err(|e| e.into_error())?)
}

/// The memory health columns: each written only when some run moved it (no column of zeros),
/// after the fixed ones; a run without the figure (not read) has an empty cell.
type HealthGet = fn(&MemoryHealth) -> Option<u64>;
const HEALTH: [(&str, HealthGet); 12] = [
    ("major_faults", |h| Some(h.major_faults)),
    ("psi_memory_some_us", |h| h.psi_memory_some_us),
    ("psi_memory_full_us", |h| h.psi_memory_full_us),
    ("cgroup_psi_memory_some_us", |h| h.cgroup_psi_memory_some_us),
    ("cgroup_psi_memory_full_us", |h| h.cgroup_psi_memory_full_us),
    ("swap_in_pages", |h| h.swap_in_pages),
    ("swap_out_pages", |h| h.swap_out_pages),
    ("cgroup_swap_in_pages", |h| h.cgroup_swap_in_pages),
    ("cgroup_swap_out_pages", |h| h.cgroup_swap_out_pages),
    ("anon_huge_bytes", |h| h.anon_huge_bytes),
    ("cgroup_anon_thp_bytes", |h| h.cgroup_anon_thp_bytes),
    ("cgroup_oom_kills", |h| h.cgroup_oom_kills),
];

impl Exporter for CsvExporter {
    fn serialize(&self, report: &BenchReport) -> Result<Vec<u8>, super::ExportError> {
        if let Some(win) = report.window.as_ref().filter(|w| !w.clients.is_empty()) {
            return window_rows(win);
        }
        let mut w = csv::Writer::from_writer(Vec::new());
        if report.runs.is_empty() {
            // No row to take the header from: the header alone.
            w.serialize(Row::of(report, &empty_run()))?;
            let text = String::from_utf8(w.into_inner().map_err(|e| e.into_error())?)?;
            let header = text.lines().next().unwrap_or_default();
            return Ok(format!("{header}\n").into_bytes());
        }
        for r in &report.runs {
            w.serialize(Row::of(report, r))?;
        }
        let fixed = w.into_inner().map_err(|e| e.into_error())?;
        let health: Vec<_> = HEALTH
            .iter()
            .filter(|(_, get)| report.runs.iter().any(|r| get(&r.health).unwrap_or(0) > 0))
            .collect();
        if health.is_empty() {
            return Ok(fixed);
        }
        // The fixed columns as serde wrote them, each record extended by the health cells.
        let mut read = csv::Reader::from_reader(fixed.as_slice());
        let mut out = csv::Writer::from_writer(Vec::new());
        let mut head = read.headers()?.clone();
        health.iter().for_each(|(name, _)| head.push_field(name));
        out.write_record(&head)?;
        for (record, r) in read.records().zip(&report.runs) {
            let mut record = record?;
            for (_, get) in &health {
                record.push_field(&get(&r.health).map(|v| v.to_string()).unwrap_or_default());
            }
            out.write_record(&record)?;
        }
        Ok(out.into_inner().map_err(|e| e.into_error())?)
    }

    fn serialize_sweep(
        &self,
        sweep: &crate::bench::sweep::SweepReport,
    ) -> Result<Vec<u8>, super::ExportError> {
        sweep_rows(sweep)
    }
}

/// A sweep: a row per configuration, a column per parameter (its name) and then its numbers.
fn sweep_rows(s: &crate::bench::sweep::SweepReport) -> Result<Vec<u8>, super::ExportError> {
    let mut out = csv::Writer::from_writer(Vec::new());
    let mut head: Vec<String> = s.parameters.clone();
    head.extend(
        [
            "concurrency",
            "runs",
            "throughput_per_hour",
            "latency_p50_s",
            "latency_p95_s",
            "peak_bytes",
            "peak_source",
            "peak_exact",
            "floor_bytes",
            "peak_over_floor_per_run_in_flight_bytes",
            "on_front",
            "over_budget",
            "failed",
        ]
        .map(String::from),
    );
    out.write_record(&head)?;
    for c in &s.configurations {
        let mut rec: Vec<String> = c.parameters.values.iter().map(|(_, v)| v.clone()).collect();
        let runs = c
            .bench
            .as_ref()
            .map(|b| b.window.as_ref().map_or(b.runs.len() as u32, |w| w.runs));
        let opt = |v: Option<String>| v.unwrap_or_default();
        let r = c.row.as_ref();
        rec.extend([
            s.concurrency.to_string(),
            opt(runs.map(|n| n.to_string())),
            opt(r.map(|r| format!("{:.1}", r.throughput_per_hour))),
            opt(r.and_then(|r| r.latency_s).map(|l| format!("{:.6}", l.p50))),
            opt(r.and_then(|r| r.latency_s).map(|l| format!("{:.6}", l.p95))),
            opt(r.map(|r| r.peak.bytes.to_string())),
            opt(r.map(|r| r.peak.source.key().to_string())),
            opt(r.map(|r| r.peak.exact.to_string())),
            opt(r.and_then(|r| r.floor_bytes).map(|b| b.to_string())),
            opt(r
                .and_then(|r| r.peak_over_floor_per_run_in_flight_bytes)
                .map(|b| b.to_string())),
            c.on_front.to_string(),
            c.over_budget.join(" "),
            opt(c.failed.clone()),
        ]);
        out.write_record(&rec)?;
    }
    Ok(out.into_inner().map_err(|e| e.into_error())?)
}

/// A run with nothing in it, for the header of an export with no run.
fn empty_run() -> RunResult {
    RunResult::of_span(
        0,
        0,
        0.0,
        &crate::analysis::span::SpanAcc::open(&Default::default()).close(
            String::new(),
            None,
            false,
            &Default::default(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(runs: Vec<RunResult>) -> BenchReport {
        BenchReport::example(runs)
    }

    #[test]
    fn every_run_is_a_row_under_one_header_and_no_run_is_the_header_alone() {
        let mut r = empty_run();
        r.run = 1;
        r.wall_s = 1.5;
        r.command_user_s = Some(0.25);
        let text = String::from_utf8(CsvExporter.serialize(&report(vec![r])).unwrap()).unwrap();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let head = reader.headers().unwrap().clone();
        assert_eq!(&head[0], "run");
        assert!(head.iter().any(|h| h == "peak_bytes"));
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 1);
        let cell = |name: &str| rows[0][head.iter().position(|h| h == name).unwrap()].to_string();
        assert_eq!(cell("wall_s"), "1.500000");
        assert_eq!(cell("command_user_s"), "0.250000");
        assert_eq!(cell("exit_code"), "");
        let none = String::from_utf8(CsvExporter.serialize(&report(vec![])).unwrap()).unwrap();
        assert_eq!(none.lines().count(), 1);
        assert_eq!(none.trim_end(), head.iter().collect::<Vec<_>>().join(","));
        // Nothing moved: no health column.
        assert!(!head
            .iter()
            .any(|h| h == "major_faults" || h == "swap_in_pages"));
    }

    #[test]
    fn health_columns_come_only_where_some_run_moved_them() {
        let mut quiet = empty_run();
        quiet.run = 1;
        quiet.health.swap_in_pages = Some(0);
        quiet.health.swap_out_pages = Some(0);
        let mut swapped = empty_run();
        swapped.run = 2;
        swapped.health.swap_in_pages = Some(12);
        swapped.health.swap_out_pages = Some(0);
        swapped.health.cgroup_anon_thp_bytes = Some(2 << 20);
        let text = String::from_utf8(
            CsvExporter
                .serialize(&report(vec![quiet, swapped]))
                .unwrap(),
        )
        .unwrap();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let head = reader.headers().unwrap().clone();
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        let cell = |row: usize, name: &str| {
            rows[row][head
                .iter()
                .position(|h| h == name)
                .unwrap_or_else(|| panic!("{name}"))]
            .to_string()
        };
        assert_eq!(
            (cell(0, "swap_in_pages"), cell(1, "swap_in_pages")),
            ("0".into(), "12".into())
        );
        // swap_out_pages moved in no run, and neither did faults, stall, the tree's THP.
        for absent in [
            "swap_out_pages",
            "major_faults",
            "psi_memory_some_us",
            "anon_huge_bytes",
        ] {
            assert!(!head.iter().any(|h| h == absent), "{absent}: {head:?}");
        }
        assert_eq!(cell(0, "cgroup_anon_thp_bytes"), "");
        assert_eq!(cell(1, "cgroup_anon_thp_bytes"), (2u64 << 20).to_string());
        assert_eq!(cell(1, "run"), "2");
        assert_eq!(head.len(), rows[1].len());
    }
}
