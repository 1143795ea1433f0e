//! The Markdown export: the runs as a table (sizes in binary units, the exact bytes in the JSON
//! and CSV exports), then the statistics and the leak check.

use super::Exporter;
use crate::bench::table::{cpu_cell, fmt_wall, pss_cell, shared_pages_note};
use crate::bench::BenchReport;
use crate::units::{fmt_bytes, fmt_bytes_signed};
use std::fmt::Write as _;

pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn serialize(&self, report: &BenchReport) -> anyhow::Result<Vec<u8>> {
        let mut o = String::new();
        let opt = |v: Option<u64>| v.map(fmt_bytes).unwrap_or_else(|| "–".into());
        if let Some(note) = shared_pages_note(report) {
            writeln!(o, "{note}\n")?;
        }
        let pss = report.runs.iter().any(|r| r.pss.is_some());
        let gpu = report.runs.iter().any(|r| r.peak_gpu_bytes.is_some());
        writeln!(
            o,
            "| Run | Time | Exit | Peak | Source | Over floor | RSS before | RSS after | {} CPU user / sys |{}{}",
            if report.daemon.is_some() { "Daemon" } else { "Command" },
            if pss { " PSS |" } else { "" },
            if gpu { " GPU peak |" } else { "" }
        )?;
        writeln!(
            o,
            "|---:|---:|---:|---:|:---|---:|---:|---:|---:|{}{}",
            if pss { "---:|" } else { "" },
            if gpu { "---:|" } else { "" }
        )?;
        for r in &report.runs {
            let exit = match (r.exit_code, r.exit_signal) {
                (Some(c), _) => c.to_string(),
                (None, Some(s)) => crate::sampler::signals::name(s),
                _ => "?".into(),
            };
            writeln!(
                o,
                "| {} | {} | {exit} | {} | {} | {} | {} | {} | {} |{}{}",
                r.run,
                fmt_wall(r.wall_s),
                crate::bench::table::peak_cell(r),
                r.peak_source.key(),
                r.peak_over_floor_bytes
                    .map(|b| fmt_bytes_signed(b as i64))
                    .unwrap_or_else(|| "–".into()),
                opt(r.rss_before_bytes),
                opt(r.rss_after_bytes),
                cpu_cell(r),
                if pss {
                    format!(" {} |", pss_cell(r))
                } else {
                    String::new()
                },
                match r.peak_gpu_bytes {
                    Some(g) if gpu => format!(" {} |", fmt_bytes(g)),
                    _ if gpu => " – |".into(),
                    _ => String::new(),
                }
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
            let p = &st.peak_rss_bytes;
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
        if let Some(l) = &report.leak {
            writeln!(o, "\n{}", l.message)?;
        }
        Ok(o.into_bytes())
    }
}
