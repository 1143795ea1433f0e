//! `memmon summary`: each recording's summary, as text or `--json`.

use super::exit::ExitCode;
use super::usage;
use crate::cli::SummaryArgs;
use anyhow::Context;
use memmon::analysis::{Summary, SummaryBuilder};
use memmon::format::read_input_into;
use std::io::Write;

pub fn run(args: SummaryArgs) -> anyhow::Result<ExitCode> {
    let spec = args.input.spec();
    let budgets = args.budgets.budgets();
    let mut all = Vec::new();
    for f in &args.files {
        // An input that is missing, unreadable or malformed exits 2 (`ReadError::class`), as
        // in compare, plot and report.
        let s = summarize(f, &spec).context("cannot summarize")?;
        // A GPU budget of a recording without GPU memory is a mistake in the command, not a
        // budget exceeded.
        if budgets.max_gpu.is_some() && s.gpu.is_none() {
            return Err(usage(format!(
                "--max-gpu: {} has no GPU memory (no gpu_bytes values; record with --gpu)",
                f.display()
            )));
        }
        all.push(s);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let text = if all.len() == 1 {
            serde_json::to_string_pretty(&all[0])?
        } else {
            serde_json::to_string_pretty(&all)?
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
    let mut s = read_input_into(file, spec, &mut b)
        .map(|info| Summary::of_read(b, file.display().to_string(), &info))?;
    s.read_anatomy(file)?;
    s.read_numa(file)?;
    Ok(s)
}
