//! `memmon summary`: each recording's summary, as text or `--json`.

use crate::cli::SummaryArgs;
use anyhow::Context;
use memmon::analysis::Summary;
use memmon::exit::{CodedError, ExitCode};
use std::io::Write;

pub fn run(args: SummaryArgs) -> anyhow::Result<ExitCode> {
    let spec = args.input.spec();
    let budgets = args.budgets.budgets();
    let mut all = Vec::new();
    for f in &args.files {
        // An input that is missing, unreadable or malformed exits 2, as in compare, plot and
        // report.
        let s = Summary::of_file(f, &spec).map_err(|e| {
            anyhow::Error::new(e).context(CodedError {
                code: ExitCode::Usage,
                message: "cannot summarize".into(),
            })
        })?;
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
