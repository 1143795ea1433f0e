//! Writers of a benchmark's results, one file per format behind one small trait: JSON (the
//! whole report), CSV (one row per run), Markdown (a table). A path of `-` means stdout.

mod csv;
mod json;
mod markdown;

use super::BenchReport;
use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Turns a report into the bytes of one format.
pub trait Exporter {
    fn serialize(&self, report: &BenchReport) -> anyhow::Result<Vec<u8>>;
}

/// One export asked for: its format, its path, and the flag that asked.
pub struct ExportTarget {
    exporter: Box<dyn Exporter>,
    path: PathBuf,
    flag: &'static str,
}

/// The exports of `--export-json`, `--export-csv`, `--export-markdown`. At most one may be `-`.
pub fn targets(
    json: &Option<PathBuf>,
    csv: &Option<PathBuf>,
    markdown: &Option<PathBuf>,
) -> anyhow::Result<Vec<ExportTarget>> {
    let mut out = Vec::new();
    let mut add = |p: &Option<PathBuf>, exporter: Box<dyn Exporter>, flag: &'static str| {
        if let Some(path) = p {
            out.push(ExportTarget {
                exporter,
                path: path.clone(),
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
    if out.iter().filter(|t| is_stdout(&t.path)).count() > 1 {
        return Err(crate::exit::CodedError::new(
            crate::exit::ExitCode::Usage,
            "only one --export-* can write to stdout ('-')",
        ));
    }
    Ok(out)
}

fn is_stdout(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// The exports' paths with their flags, for `output::check_outputs` before the bench starts.
pub fn paths(targets: &[ExportTarget]) -> Vec<(&Path, &'static str)> {
    targets.iter().map(|t| (t.path.as_path(), t.flag)).collect()
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
        if is_stdout(&t.path) {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)
                .and_then(|_| out.flush())
                .context("cannot write to stdout")?;
        } else {
            crate::output::write_whole(&t.path, &bytes, force)
                .with_context(|| format!("cannot write {} ({})", t.path.display(), t.flag))?;
        }
    }
    Ok(())
}
