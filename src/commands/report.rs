//! `memmon report`: builds the report (`render::html`) of the recordings and writes the page to
//! `-o FILE` or stdout.

use super::exit::ExitCode;
use super::stderr::errln;
use super::usage;
use crate::cli::ReportArgs;
use anyhow::Context;
use memmon::output::Dest;
use memmon::render::html::Report;
use memmon::units::fmt_bytes;
use std::io::Write;

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    memmon::render::compare_table::no_flags_after_separator(&args.new)?;
    super::stdin_once(args.files.iter().chain(&args.new))?;
    let Some(output) = &args.output else {
        return Err(usage(
            "give the report's file with -o FILE (or -o - for stdout)",
        ));
    };
    let output = match output {
        Dest::Stdout => None,
        Dest::File(p) => Some(memmon::output::absolute(p)),
    };
    if let Some(o) = &output {
        memmon::output::check_outputs(&[(o, "-o")], args.force)?;
        // Written once every recording is read: a missing or read-only directory is said now.
        memmon::output::check_writable(&[(o, "-o")])?;
    }
    let report = Report::build(
        &args.files,
        &args.new,
        &args.input.spec(),
        args.above,
        args.title.clone(),
    )
    .context("cannot write a report")?;
    for note in report.series.iter().filter_map(|s| s.events_note.as_ref()) {
        errln!("memmon: {note}");
    }
    // Also on the page, in each recording's summary.
    for warning in report.summaries.iter().flat_map(|s| s.rows_lost_warnings()) {
        errln!("memmon: {warning}");
    }
    let html = report.to_html();
    if let Some(output) = output {
        memmon::output::write_whole(&output, html.as_bytes(), args.force)
            .with_context(|| format!("cannot write {}", output.display()))?;
        errln!(
            "memmon: wrote the report of {} to {} ({})",
            memmon::units::count(report.series.len(), "recording"),
            output.display(),
            fmt_bytes(html.len() as u64)
        );
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(html.as_bytes())
            .context("cannot write to stdout")?;
        out.flush().context("cannot write to stdout")?;
    }
    Ok(ExitCode::Success)
}
