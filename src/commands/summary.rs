//! `memmon summary`: each recording's summary, as text or `--json`.

use crate::cli::SummaryArgs;
use anyhow::Context;
use memmon::analysis::{Summary, SummaryBuilder};
use memmon::exit::{CodedError, ExitCode};
use memmon::format::read_input;
use std::io::Write;

pub fn run(args: SummaryArgs) -> anyhow::Result<ExitCode> {
    let spec = args.input.spec();
    let mut all = Vec::new();
    for f in &args.files {
        // An input that is missing, unreadable or malformed exits 2, as in compare, plot and
        // report.
        let mut b = SummaryBuilder::new();
        let s = read_input(f, &spec, |s| b.push(s))
            .map(|info| Summary::of_read(b, f.display().to_string(), &info))
            .map_err(|e| {
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
    Ok(ExitCode::Success)
}
