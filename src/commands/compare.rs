//! `memmon compare`: the flags become `CompareOptions` (sides, gates, noise floor); the
//! comparison is printed as a table or `--json`; a failed gate exits 1.

use super::exit::ExitCode;
use super::stderr::errln;
use super::usage;
use crate::cli::CompareArgs;
use anyhow::Context;
use memmon::analysis::compare::{Gate, Metric};
use memmon::render::compare_table::{self, CompareOptions};
use std::io::Write;

/// The comparison's options from the command line: `BASE... -- NEW...` or `BASE NEW`, a gate per
/// `--max-*-increase`.
fn options(args: &CompareArgs) -> anyhow::Result<CompareOptions> {
    let (base, new) = compare_table::split_sides(&args.base, &args.new).map_err(usage)?;
    let gates = [
        ("--max-peak-increase", Metric::Peak, args.max_peak_increase),
        (
            "--max-idle-increase",
            Metric::IdleRss,
            args.max_idle_increase,
        ),
        ("--max-gpu-increase", Metric::PeakGpu, args.max_gpu_increase),
        (
            "--max-duration-increase",
            Metric::Duration,
            args.max_duration_increase,
        ),
    ]
    .into_iter()
    .filter_map(|(flag, metric, limit)| {
        limit.map(|limit| Gate {
            flag,
            metric,
            limit,
        })
    })
    .collect();
    Ok(CompareOptions {
        base,
        new,
        input: args.input.spec(),
        above: args.above,
        whole_files: args.whole_files,
        min_noise: args.min_noise,
        gates,
    })
}

pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let opts = options(&args)?;
    let c = compare_table::compare(&opts)?;
    // A gate with nothing to hold (no GPU memory on a side) fails loudly, never passes.
    for g in &opts.gates {
        if c.delta(g.metric).is_none() {
            return Err(usage(format!(
                "{}: no {} on both sides to compare (record with --gpu)",
                g.flag,
                g.metric.label()
            )));
        }
    }
    let text = if args.json {
        serde_json::to_string_pretty(&c)? + "\n"
    } else {
        compare_table::render(&c)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .context("cannot write to stdout")?;
    out.flush().context("cannot write to stdout")?;
    for g in c.gates.iter().filter(|g| !g.passed) {
        if let Some(d) = c.delta(g.metric) {
            errln!(
                "memmon: gate failed: {}",
                compare_table::gate_sentence(d, g)
            );
        }
    }
    // Budgets hold for every candidate run, on the number the comparison holds them on (a
    // bench recording: each of its runs), as the gates do.
    let budgets = args.budgets.budgets();
    let checks: Vec<_> = if budgets.is_empty() {
        Vec::new()
    } else {
        c.new
            .runs
            .iter()
            .flat_map(|r| budgets.check(&r.unit(c.peak_basis)))
            .collect()
    };
    let budgets_kept = super::report_budgets(&checks);
    Ok(if c.passed && budgets_kept {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}
