//! Writers of a benchmark's results, one file per format behind one small trait: JSON (the
//! whole report), CSV (one row per run), Markdown (a table), each to a file or stdout (`Dest`);
//! of a sweep, the same formats with a row per configuration.

mod csv;
mod json;
mod markdown;

use super::sweep::SweepReport;
use super::BenchReport;
use crate::output::Dest;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Turns a report (a bench's, or a sweep's) into the bytes of one format.
pub trait Exporter {
    fn serialize(&self, report: &BenchReport) -> Result<Vec<u8>, ExportError>;
    fn serialize_sweep(&self, sweep: &SweepReport) -> Result<Vec<u8>, ExportError>;
}

/// What the exports write: one bench, or a sweep of them.
#[derive(Clone, Copy)]
pub enum Results<'a> {
    Bench(&'a BenchReport),
    Sweep(&'a SweepReport),
}

/// Why an export could not be made or written; a write names its file and flag.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Csv(#[from] ::csv::Error),
    #[error(transparent)]
    Text(#[from] std::fmt::Error),
    #[error(transparent)]
    Utf8(#[from] std::string::FromUtf8Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("cannot write to stdout")]
    Stdout(#[source] std::io::Error),
    #[error("cannot write {} ({flag})", .path.display())]
    File {
        path: PathBuf,
        flag: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl crate::error::Classified for ExportError {
    /// Written after the bench (its outputs were checked before it started): a failure.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
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
    results: Results<'_>,
    force: bool,
) -> Result<(), ExportError> {
    for t in targets {
        let bytes = match results {
            Results::Bench(r) => t.exporter.serialize(r)?,
            Results::Sweep(s) => t.exporter.serialize_sweep(s)?,
        };
        match &t.dest {
            Dest::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(&bytes)
                    .and_then(|_| out.flush())
                    .map_err(ExportError::Stdout)?;
            }
            Dest::File(path) => {
                crate::output::write_whole(path, &bytes, force).map_err(|source| {
                    ExportError::File {
                        path: path.clone(),
                        flag: t.flag,
                        source,
                    }
                })?
            }
        }
    }
    Ok(())
}
