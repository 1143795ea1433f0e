//! The Markdown export: the terminal table's columns (`table::columns`; sizes in binary units,
//! the exact bytes in the JSON and CSV exports), the statistics, and the terminal table's notes.

use super::Exporter;
use crate::bench::table::{columns, fmt_wall, notes, shared_pages_note};
use crate::bench::BenchReport;
use crate::units::fmt_bytes;
use std::fmt::Write as _;

pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn serialize(&self, report: &BenchReport) -> Result<Vec<u8>, super::ExportError> {
        let mut o = String::new();
        if let Some(w) = &report.window {
            window_table(&mut o, w)?;
            notes_and_end(&mut o, report)?;
            return Ok(o.into_bytes());
        }
        if let Some(note) = shared_pages_note(report) {
            writeln!(o, "{note}\n")?;
        }
        // The terminal table's columns, as a Markdown table.
        let cols = columns(report);
        let cell = |text: String| text.replace('|', "\\|");
        writeln!(
            o,
            "| {} |",
            cols.iter().map(|c| c.head).collect::<Vec<_>>().join(" | ")
        )?;
        writeln!(
            o,
            "|{}",
            cols.iter()
                .map(|c| if c.head == "Source" { ":---|" } else { "---:|" })
                .collect::<String>()
        )?;
        for r in &report.runs {
            writeln!(
                o,
                "| {} |",
                cols.iter()
                    .map(|c| cell((c.cell)(r)))
                    .collect::<Vec<_>>()
                    .join(" | ")
            )?;
        }
        if let Some(st) = &report.stats {
            let b = fmt_bytes;
            writeln!(o)?;
            writeln!(o, "| Across runs | Mean ± σ | Min | Max |")?;
            writeln!(o, "|:---|---:|---:|---:|")?;
            let w = &st.wall_s;
            writeln!(
                o,
                "| Time | {} ± {} | {} | {} |",
                fmt_wall(w.mean),
                fmt_wall(w.stddev),
                fmt_wall(w.min),
                fmt_wall(w.max)
            )?;
            let p = &st.peak_bytes;
            writeln!(
                o,
                "| Peak | {} ± {} | {} | {} |",
                b(p.mean),
                b(p.stddev),
                b(p.min),
                b(p.max)
            )?;
            if let Some(f) = &st.peak_over_floor_bytes {
                writeln!(
                    o,
                    "| Over floor | {} ± {} | {} | {} |",
                    b(f.mean),
                    b(f.stddev),
                    b(f.min),
                    b(f.max)
                )?;
            }
        }
        notes_and_end(&mut o, report)?;
        Ok(o.into_bytes())
    }

    fn serialize_sweep(
        &self,
        sweep: &crate::bench::sweep::SweepReport,
    ) -> Result<Vec<u8>, super::ExportError> {
        use crate::bench::table::{sweep_cells, SWEEP_HEADS};
        let mut o = String::new();
        let cell = |text: &str| text.replace('|', "\\|");
        writeln!(o, "| {} |", SWEEP_HEADS.join(" | "))?;
        writeln!(o, "|:---|{}:---|", "---:|".repeat(SWEEP_HEADS.len() - 2))?;
        for c in &sweep.configurations {
            let cells: Vec<String> = sweep_cells(c).iter().map(|t| cell(t)).collect();
            writeln!(o, "| {} |", cells.join(" | "))?;
        }
        writeln!(o)?;
        for c in sweep.configurations.iter().filter(|c| c.failed.is_some()) {
            writeln!(
                o,
                "- failed: {}: {}",
                c.label,
                c.failed.as_deref().unwrap_or_default()
            )?;
        }
        writeln!(o, "- front: no other configuration has a throughput at least as high and a peak at least as low (the Pareto front)")?;
        if let Some(s) = &sweep.stopped {
            writeln!(o, "- stopped: {s}")?;
        }
        Ok(o.into_bytes())
    }
}

/// A window of runs in flight together: one row of its numbers.
fn window_table(o: &mut String, w: &crate::bench::window::Window) -> std::fmt::Result {
    writeln!(
        o,
        "| Runs | In flight | Time | Throughput | p50 | p95 | Peak | Idle floor | Over floor per run in flight |"
    )?;
    writeln!(o, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    let (p50, p95) = w.latency_s.map_or((String::new(), String::new()), |l| {
        (fmt_wall(l.p50), fmt_wall(l.p95))
    });
    writeln!(
        o,
        "| {} | {} | {} | {:.0} runs/h | {p50} | {p95} | {} | {} | {} |",
        w.runs,
        w.concurrency,
        fmt_wall(w.wall_s),
        w.throughput_per_hour,
        w.peak.cell(),
        fmt_bytes(w.floor_bytes),
        fmt_bytes(w.peak_over_floor_per_run_in_flight_bytes)
    )
}

/// The terminal table's notes, the bench's own, and why it stopped early.
fn notes_and_end(o: &mut String, report: &BenchReport) -> std::fmt::Result {
    let notes = notes(report);
    if !notes.is_empty() || report.leak.is_some() || !report.notes.is_empty() {
        writeln!(o)?;
    }
    for n in &notes {
        writeln!(o, "- {n}")?;
    }
    if let Some(l) = &report.leak {
        writeln!(o, "- {}", l.message)?;
    }
    for n in &report.notes {
        writeln!(o, "- note: {n}")?;
    }
    if let Some(s) = &report.stopped {
        writeln!(o, "- stopped: {s}")?;
    }
    Ok(())
}
