//! `memmon summary`: each recording's summary, as text or `--json`.

use super::exit::ExitCode;
use crate::cli::SummaryArgs;
use anyhow::Context;
use memmon::analysis::{Summary, SummaryBuilder};
use memmon::format::read_input_into;
use std::io::Write;

pub fn run(args: SummaryArgs) -> anyhow::Result<ExitCode> {
    let spec = args.input.spec();
    let budgets = args.budgets.budgets();
    super::stdin_once(&args.files)?;
    let mut all = Vec::new();
    for f in &args.files {
        // An input that is missing, unreadable or malformed exits 2 (`ReadError::class`), as
        // in compare, plot and report.
        let s = summarize(f, &spec).context("cannot summarize")?;
        all.push(s);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        // Each summary with its kind and schema version (docs/FORMAT.md, "JSON outputs").
        let doc = memmon::format::json::SUMMARY;
        let text = if all.len() == 1 {
            serde_json::to_string_pretty(&doc.of(&all[0]))?
        } else {
            let docs: Vec<_> = all.iter().map(|s| doc.of(s)).collect();
            serde_json::to_string_pretty(&docs)?
        };
        writeln!(out, "{text}").context("cannot write to stdout")?;
    } else {
        for (i, s) in all.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            write!(out, "{}", s.render()).context("cannot write to stdout")?;
        }
    }
    drop(out);
    // A budget of a number a recording lacks (--max-gpu without GPU memory) fails as "cannot
    // be checked", exit 1, as in compare and bench.
    let checks: Vec<_> = all
        .iter()
        .zip(&args.files)
        .flat_map(|(s, f)| budgets.check_summary(s, &f.display().to_string()))
        .collect();
    Ok(if super::report_budgets(&checks) {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}

/// The summary of one recording, read from `file` (a path, `-`, compressed or not).
pub(super) fn summarize(
    file: &std::path::Path,
    spec: &memmon::format::InputSpec,
) -> Result<Summary, memmon::format::ReadError> {
    let mut b = SummaryBuilder::new();
    let info = read_input_into(file, spec, &mut b)?;
    // Nothing recorded: no row, and no end record to say how the recording ended (a header
    // alone). compare, plot and report refuse it too; a CI step must not pass on it. (A
    // command that ended before its first sample has its end record, and its peaks where the
    // kernel gave them.)
    let mut s = Summary::of_read(b, file.display().to_string(), &info);
    if info.end.is_none() && s.samples == 0 {
        return Err(memmon::format::ReadError::Malformed {
            path: file.to_path_buf(),
            line: 1,
            msg: "the recording holds no samples and no end record: nothing was recorded".into(),
        });
    }
    s.read_anatomy(file)?;
    s.read_numa(file)?;
    Ok(s)
}
