//! `memmon summary`: each recording's summary, as text or `--json`.

use super::exit::ExitCode;
use super::stderr::errln;
use crate::cli::SummaryArgs;
use anyhow::Context;
use memmon::analysis::{Summary, SummaryBuilder};
use memmon::format::read_input_into;
use memmon::outside::guard;
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
    // `--folded -`: the folded stacks are what goes to stdout.
    let folded_to_stdout = matches!(args.folded, Some(memmon::output::Dest::Stdout));
    if !folded_to_stdout {
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
                // Names from the recorded program escaped once more as the text leaves
                // (`render::outside`): no control character reaches the terminal.
                let text = s.render();
                write!(out, "{}", guard(&text)).context("cannot write to stdout")?;
            }
        }
    }
    drop(out);
    if let Some(dest) = &args.folded {
        write_folded(dest, &all, &args.files, args.force)?;
    }
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

/// `--folded FILE`: the folded stacks of the live mappings at the highest anatomy of the one
/// recording given.
fn write_folded(
    dest: &memmon::output::Dest,
    all: &[Summary],
    files: &[std::path::PathBuf],
    force: bool,
) -> anyhow::Result<()> {
    let [s] = all else {
        return Err(super::usage(
            "--folded takes the stacks of one recording: give one FILE",
        ));
    };
    let Some(l) = s.anatomy_at_peak.as_ref().and_then(|a| a.ledger.as_ref()) else {
        let unanswered = s
            .anatomy_at_peak
            .as_ref()
            .is_some_and(|a| a.ledger_unanswered);
        return Err(super::usage(if unanswered {
            format!(
                "--folded: {} has no stacks at its highest anatomy: {}",
                files[0].display(),
                memmon::render::stacks::UNANSWERED
            )
        } else {
            format!(
                "--folded: {} has no ledger of mappings at its highest anatomy (record it with --anatomy where memmon may use perf: root or CAP_PERFMON)",
                files[0].display()
            )
        }));
    };
    let text = memmon::render::stacks::folded(l);
    match dest.file() {
        Some(path) => {
            memmon::output::write_whole(path, text.as_bytes(), force)
                .with_context(|| format!("cannot write {}", path.display()))?;
            errln!(
                "memmon: wrote the folded stacks of {} ({}) to {}",
                memmon::units::count(l.stacks.len(), "stack"),
                memmon::units::fmt_bytes(l.bytes()),
                path.display()
            );
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .context("cannot write to stdout")?;
        }
    }
    Ok(())
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
