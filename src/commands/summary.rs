//! `memmon summary`: each recording's summary, as text or `--json`.

use super::exit::ExitCode;
use super::stderr::errln;
use super::usage;
use crate::cli::SummaryArgs;
use anyhow::Context;
use memmon::analysis::{Summary, SummaryBuilder};
use memmon::format::read_input_into;
use std::io::Write;

pub fn run(args: SummaryArgs) -> anyhow::Result<ExitCode> {
    let spec = args.input.spec();
    // --max-gpu is held by `check_gpu_budget`, which refuses (exit 2) a recording without GPU
    // memory rather than failing it.
    let budgets = memmon::analysis::budget::Budgets {
        max_gpu: None,
        ..args.budgets.budgets()
    };
    let mut all = Vec::new();
    for f in &args.files {
        // An input that is missing, unreadable or malformed exits 2 (`ReadError::class`), as
        // in compare, plot and report.
        let s = summarize(f, &spec).context("cannot summarize")?;
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
    let within = super::report_budgets(&checks);
    let gpu_within = check_gpu_budget(&all, args.budgets.max_gpu)? == ExitCode::Success;
    Ok(if within && gpu_within {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}

/// `--max-gpu`: exit 1 naming each recording over it; a recording without GPU memory cannot
/// pass a GPU budget (exit 2).
fn check_gpu_budget(all: &[Summary], budget: Option<u64>) -> anyhow::Result<ExitCode> {
    let Some(budget) = budget else {
        return Ok(ExitCode::Success);
    };
    let mut over = false;
    for s in all {
        let file = s.file.as_deref().unwrap_or("the recording");
        let Some(g) = &s.gpu else {
            return Err(usage(format!(
                "--max-gpu: {file} has no GPU memory (no gpu_bytes values; record with --gpu)"
            )));
        };
        if let Some(msg) = memmon::analysis::gpu::over_budget(g, budget) {
            errln!("memmon: budget exceeded: {file}: {msg}");
            over = true;
        }
    }
    Ok(if over {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}

/// The summary of one recording, read from `file` (a path, `-`, compressed or not).
pub(super) fn summarize(
    file: &std::path::Path,
    spec: &memmon::format::InputSpec,
) -> Result<Summary, memmon::format::ReadError> {
    let mut b = SummaryBuilder::new();
    read_input_into(file, spec, &mut b)
        .map(|info| Summary::of_read(b, file.display().to_string(), &info))
}
