//! `memmon report`: builds the report (`render::html`) of the recordings and writes the page to
//! `-o FILE` or stdout.

use super::stderr::errln;
use super::usage;
use crate::cli::ReportArgs;
use anyhow::Context;
use memmon::exit::{CodedError, ExitCode};
use memmon::render::html::Report;
use memmon::units::fmt_bytes;
use std::io::Write;

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    memmon::render::compare_table::no_flags_after_separator(&args.new).map_err(usage)?;
    let Some(output) = &args.output else {
        return Err(usage(
            "give the report's file with -o FILE (or -o - for stdout)",
        ));
    };
    let to_stdout = output.as_os_str() == "-";
    let output = memmon::format::absolute(output);
    memmon::output::check_outputs(&[(&output, "-o")], args.force)
        .map_err(|e| usage(e.to_string()))?;
    let report = Report::build(
        &args.files,
        &args.new,
        &args.input.spec(),
        args.above,
        args.title.clone(),
    )
    .map_err(|e| {
        anyhow::Error::new(e).context(CodedError {
            code: ExitCode::Usage,
            message: "cannot write a report".into(),
        })
    })?;
    for note in report.series.iter().filter_map(|s| s.events_note.as_ref()) {
        errln!("memmon report: {note}");
    }
    let html = report.to_html();
    if to_stdout {
        let mut out = std::io::stdout().lock();
        out.write_all(html.as_bytes())
            .context("cannot write to stdout")?;
        out.flush().context("cannot write to stdout")?;
    } else {
        memmon::output::write_whole(&output, html.as_bytes(), args.force)
            .with_context(|| format!("cannot write {}", output.display()))?;
        errln!(
            "memmon: wrote the report of {} to {} ({})",
            memmon::units::count(report.series.len(), "recording"),
            output.display(),
            fmt_bytes(html.len() as u64)
        );
    }
    Ok(ExitCode::Success)
}
