//! Writers of a benchmark's results, one file per format behind one small trait: JSON (the
//! whole report), CSV (one row per run), Markdown (a table), each to a file or stdout (`Dest`).

mod csv;
mod json;
mod markdown;

use super::BenchReport;
use crate::output::Dest;
use anyhow::Context;
use std::io::Write;
use std::path::Path;

/// Turns a report into the bytes of one format.
pub trait Exporter {
    fn serialize(&self, report: &BenchReport) -> anyhow::Result<Vec<u8>>;
}

/// One export asked for: its format, where it goes, and the flag that asked.
pub struct ExportTarget {
    exporter: Box<dyn Exporter>,
    dest: Dest,
    flag: &'static str,
}

/// The exports of `--export-json`, `--export-csv`, `--export-markdown` (the caller has made
/// sure at most one output of the bench goes to stdout).
pub fn targets(
    json: Option<&Dest>,
    csv: Option<&Dest>,
    markdown: Option<&Dest>,
) -> Vec<ExportTarget> {
    let mut out = Vec::new();
    let mut add = |d: Option<&Dest>, exporter: Box<dyn Exporter>, flag: &'static str| {
        if let Some(dest) = d {
            out.push(ExportTarget {
                exporter,
                dest: dest.clone(),
                flag,
            });
        }
    };
    add(json, Box::new(json::JsonExporter), "--export-json");
    add(csv, Box::new(csv::CsvExporter), "--export-csv");
    add(
        markdown,
        Box::new(markdown::MarkdownExporter),
        "--export-markdown",
    );
    out
}

/// The exports' files with their flags, for `output::check_outputs` before the bench starts.
pub fn paths(targets: &[ExportTarget]) -> Vec<(&Path, &'static str)> {
    targets
        .iter()
        .filter_map(|t| t.dest.file().map(|p| (p, t.flag)))
        .collect()
}

/// Writes every export, each file whole (see `output::write_whole`); an existing file was
/// refused before the bench started unless `force`.
pub fn write_all(
    targets: &[ExportTarget],
    report: &BenchReport,
    force: bool,
) -> anyhow::Result<()> {
    for t in targets {
        let bytes = t.exporter.serialize(report)?;
        match &t.dest {
            Dest::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(&bytes)
                    .and_then(|_| out.flush())
                    .context("cannot write to stdout")?;
            }
            Dest::File(path) => crate::output::write_whole(path, &bytes, force)
                .with_context(|| format!("cannot write {} ({})", path.display(), t.flag))?,
        }
    }
    Ok(())
}
