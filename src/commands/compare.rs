//! `memmon compare`: the flags become `CompareOptions` (sides, gates, noise floor); the
//! comparison is printed as a table or `--json`; a failed gate exits 1.

use super::exit::ExitCode;
use super::stderr::errln;
use super::usage;
use crate::cli::CompareArgs;
use anyhow::Context;
use memmon::analysis::anatomy::{peak_vs_peak, PeakVsPeak};
use memmon::analysis::compare::{Gate, Metric};
use memmon::render::compare_table::{self, CompareOptions};
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

/// The comparison's options from the command line: `BASE... -- NEW...` or `BASE NEW`, a gate per
/// `--max-*-increase`.
fn options(args: &CompareArgs) -> anyhow::Result<CompareOptions> {
    super::stdin_once(args.base.iter().chain(&args.new))?;
    let (base, new) = compare_table::split_sides(&args.base, &args.new)?;
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

/// The two files of `compare A B` (or `A -- B`) when both are sweep documents.
fn sweep_sides(args: &CompareArgs) -> (Option<std::path::PathBuf>, Option<std::path::PathBuf>) {
    let sides = match (args.base.as_slice(), args.new.as_slice()) {
        ([a, b], []) | ([a], [b]) => (a, b),
        _ => return (None, None),
    };
    let is = memmon::bench::sweep_compare::is_sweep;
    if is(sides.0) && is(sides.1) {
        (Some(sides.0.clone()), Some(sides.1.clone()))
    } else {
        (None, None)
    }
}

/// With an anatomy table beside the first recording of each side (`record --anatomy` names it
/// FILE.anatomy.jsonl): the baseline's peak anatomy against the candidate's.
fn peak_anatomies(opts: &CompareOptions) -> anyhow::Result<Option<PeakVsPeak>> {
    let table = |files: &[std::path::PathBuf]| {
        files
            .first()
            .map(|f| memmon::format::anatomy::side_path(f))
            .filter(|p| p.is_file())
    };
    let (Some(b), Some(n)) = (table(&opts.base), table(&opts.new)) else {
        return Ok(None);
    };
    let (b, n) = (
        memmon::format::anatomy::read(&b)?,
        memmon::format::anatomy::read(&n)?,
    );
    Ok(peak_vs_peak(&b, &n))
}

/// `which groups grew`: the baseline's peak anatomy against the candidate's.
fn render_anatomy(o: &mut String, a: &PeakVsPeak) {
    use memmon::render::summary::{grew_words, growth_lines};
    use memmon::units::{fmt_bytes, fmt_seconds};
    let _ = writeln!(
        o,
        "highest anatomies: {}, from the baseline's (+{}, RSS {}) to the candidate's (+{}, RSS {}):",
        grew_words(&a.diff, [&a.base, &a.new]),
        fmt_seconds(a.base.elapsed_s),
        fmt_bytes(a.base.rss_bytes),
        fmt_seconds(a.new.elapsed_s),
        fmt_bytes(a.new.rss_bytes)
    );
    growth_lines(o, [&a.base, &a.new], &a.diff.changes);
    if !a.diff.stacks.is_empty() {
        let grew: i64 = a.diff.stacks.iter().map(|c| c.delta_bytes).sum();
        let _ = writeln!(
            o,
            "by stack: {} mapped in the mappings the ledgers saw made, from the baseline's highest anatomy to the candidate's:",
            memmon::units::fmt_bytes_signed(grew)
        );
        memmon::render::stacks::change_lines(
            o,
            &a.diff.stacks,
            memmon::render::stacks::STACK_LINES,
        );
    }
    if !a.diff.touches.is_empty() {
        let grew: i64 = a.diff.touches.iter().map(|c| c.delta_bytes).sum();
        let _ = writeln!(
            o,
            "by touch: {} resident by the code that first touched it (sampled page faults), from the baseline's highest anatomy to the candidate's:",
            memmon::units::fmt_bytes_signed(grew)
        );
        memmon::render::stacks::touch_change_lines(
            o,
            &a.diff.touches,
            memmon::render::stacks::STACK_LINES,
        );
    }
}

/// `compare BASE.json NEW.json` of two sweeps (`bench --export-json` of a sweep): each
/// configuration on both sides, gated on its peak and floor.
fn compare_sweeps(args: &CompareArgs, base: &Path, new: &Path) -> anyhow::Result<ExitCode> {
    use memmon::bench::sweep_compare::{SweepComparison, SweepGates};
    if args.max_gpu_increase.is_some()
        || args.max_duration_increase.is_some()
        || args.above.is_some()
        || args.whole_files
        || args.budgets.budgets() != Default::default()
    {
        return Err(usage(
            "two sweeps are compared configuration by configuration, on throughput and peak: they take --max-peak-increase and --max-idle-increase (a budget marks configurations in `bench --max-peak` itself)",
        ));
    }
    let c = SweepComparison::of(
        base,
        new,
        SweepGates {
            max_peak_increase: args.max_peak_increase,
            max_idle_increase: args.max_idle_increase,
        },
    )?;
    let text = if args.json {
        serde_json::to_string_pretty(&memmon::format::json::SWEEP_COMPARISON.of(&c))? + "\n"
    } else {
        c.render()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(memmon::outside::guard(&text).as_bytes())
        .and_then(|_| out.flush())
        .context("cannot write to stdout")?;
    for g in c.gates.iter().filter(|g| !g.passed) {
        errln!(
            "memmon: gate failed: {} {} for {}",
            g.flag,
            g.limit,
            g.label
        );
    }
    Ok(if c.passed {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}

pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    if let (Some(base), Some(new)) = sweep_sides(&args) {
        return compare_sweeps(&args, &base, &new);
    }
    let opts = options(&args)?;
    let mut c = compare_table::compare(&opts)?;
    // Budgets are gates too: in the table's `gates:` section and in `--json`.
    c.judge_budgets(&args.budgets.budgets());
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
    let anatomy = peak_anatomies(&opts).context("cannot compare the anatomies")?;
    let text = if args.json {
        // The comparison, and the anatomies' where there are some, after its kind and version.
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            #[serde(flatten)]
            comparison: &'a memmon::analysis::compare::Comparison,
            #[serde(skip_serializing_if = "Option::is_none")]
            anatomy: Option<&'a PeakVsPeak>,
        }
        let doc = Doc {
            comparison: &c,
            anatomy: anatomy.as_ref(),
        };
        serde_json::to_string_pretty(&memmon::format::json::COMPARISON.of(&doc))? + "\n"
    } else {
        let mut text = compare_table::render(&c);
        if let Some(a) = &anatomy {
            render_anatomy(&mut text, a);
        }
        text
    };
    let mut out = std::io::stdout().lock();
    out.write_all(memmon::outside::guard(&text).as_bytes())
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
    // Each budget's verdict on stderr too, as `summary` and `bench` say it.
    super::report_budgets(&c.budgets);
    Ok(if c.passed {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}
