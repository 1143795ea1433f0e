//! `memmon bench`: the flags become `BenchOptions` (and the export targets); the runner runs;
//! the table goes to stdout (stderr when stdout carries data), then the exports are written.

use super::exit::ExitCode;
use super::stderr::{errln, errprint};
use super::{gpu_options, mark_options, pss_guard, usage};
use crate::cli::BenchArgs;
use memmon::bench::runner::started::{DaemonOptions, Ready};
use memmon::bench::sweep::{self, ConfigReport, Configuration, Parameter, SweepReport};
use memmon::bench::{export, runner, table, BenchOptions};
use memmon::format::Format;
use memmon::probe::cgroup::CgroupFs;
use memmon::probe::ProcFs;
use std::io::Write;

/// The bench's options from the command line; errors are usage errors (exit 2).
fn options(args: &BenchArgs) -> anyhow::Result<BenchOptions> {
    let target = args.daemon.spec();
    // A daemon given, or one memmon starts for each configuration of a sweep (--daemon).
    let daemon = target.is_some() || args.sweep.daemon.is_some();
    if args.sweep.daemon.is_some() && args.cgroup.cgroup.is_some() {
        return Err(usage(
            "--cgroup with --daemon: memmon starts the daemon in a cgroup of its own and reads that one",
        ));
    }
    if !daemon && (args.marks.mark_log.is_some() || args.marks.phase_peaks) {
        return Err(usage(
            "--mark-log and --phase-peaks apply to a bench against a daemon (--pid, --pidfile, --name)",
        ));
    }
    if !daemon && args.cgroup.cgroup.is_some() {
        return Err(usage(
            "--cgroup applies to a bench against a daemon (--pid, --pidfile, --name); a command bench runs each run in a cgroup of memmon's own (--own-cgroup)",
        ));
    }
    if !daemon && args.anatomy.anatomy {
        return Err(usage(
            "--anatomy applies to a bench against a daemon (--pid, --pidfile, --name); record a command's run with `memmon record --anatomy -o FILE -- COMMAND`",
        ));
    }
    if args.wait && !target.as_ref().is_some_and(|t| t.can_restart()) {
        return Err(usage(
            "--wait applies to a daemon given by --pidfile or --name: it waits for it to appear",
        ));
    }
    if daemon && args.cgroup.own_cgroup {
        return Err(usage(
            "--own-cgroup applies to a command bench (no daemon); a daemon's own cgroup is read when it has one",
        ));
    }
    if args.concurrency > 1 {
        if !daemon {
            return Err(usage(
                "--concurrency applies to a bench against a daemon (--pid, --pidfile, --name, --daemon): runs of a command in flight together are measured by recording them, `memmon record -- sh -c 'CMD & CMD & wait'`",
            ));
        }
        if args.cooldown.is_some() {
            return Err(usage(
                "--cooldown pauses between runs one after another; with --concurrency a run starts as soon as another ends",
            ));
        }
        if args.marks.phase_peaks {
            return Err(usage(
                "--phase-peaks resets the peaks at each marker, which would cut the window of runs in flight (--concurrency) whose peak the bench gives",
            ));
        }
        if args.push.is_some() {
            return Err(usage(
                "--push sends each run's own peak, which runs in flight together (--concurrency) do not have; export the window with --export-json",
            ));
        }
    }
    let s = &args.sampling;
    let on_stdout: Vec<&str> = [
        (&s.output, "-o"),
        (&args.export_json, "--export-json"),
        (&args.export_csv, "--export-csv"),
        (&args.export_markdown, "--export-markdown"),
    ]
    .into_iter()
    .filter(|(d, _)| d.as_ref().is_some_and(|d| d.is_stdout()))
    .map(|(_, flag)| flag)
    .collect();
    if on_stdout.len() > 1 {
        let flags: Vec<String> = on_stdout.iter().map(|f| format!("{f} -")).collect();
        return Err(usage(format!(
            "{} would {} write to stdout: give all but one of them a file",
            flags.join(" and "),
            if flags.len() == 2 { "both" } else { "all" }
        )));
    }
    let stdout_is_data = !on_stdout.is_empty();
    Ok(BenchOptions {
        target,
        wait: args.wait,
        client: args.client.clone(),
        runs: args.runs,
        warmup: args.warmup,
        concurrency: args.concurrency,
        prepare: args.prepare.clone(),
        cooldown: args.cooldown,
        ignore_failure: args.ignore_failure,
        interval: s.interval,
        children: !s.no_children,
        output: s.output.clone(),
        format: s.format.map(Into::into),
        force: s.force,
        append: s.append,
        pss: pss_guard(&s.pss_args),
        gpu: gpu_options(s)?,
        exit_records: !s.no_taskstats,
        report: super::stderr::reporter("memmon", args.quiet, false),
        stdout_is_data,
        procfs: ProcFs::default(),
        cgroupfs: CgroupFs::default(),
        marks: mark_options(&args.marks, None),
        phase_peaks: args.marks.phase_peaks,
        own_cgroup: args.cgroup.own(),
        cgroup: args
            .cgroup
            .cgroup
            .as_deref()
            .map(memmon::sampler::cgroup::CgroupChoice::parse),
        budgets: args.budgets.budgets(),
        anatomy: args.anatomy.options(),
    })
}

/// A sweep's configurations and the daemon started for each (`--daemon`); `None` for a
/// plain bench (no parameter, no --daemon).
struct Plan {
    parameters: Vec<String>,
    configurations: Vec<Configuration>,
    daemon: Option<DaemonOptions>,
}

fn plan(args: &BenchArgs, opts: &BenchOptions) -> anyhow::Result<Option<Plan>> {
    let sw = &args.sweep;
    let mut params = Vec::new();
    for pair in sw.parameter_list.chunks(2) {
        params.push(Parameter::list(&pair[0], &pair[1])?);
    }
    if let [name, min, max] = sw.parameter_scan.as_slice() {
        params.push(Parameter::scan(name, min, max, &sw.parameter_step_size)?);
    }
    if params.is_empty() && sw.daemon.is_none() {
        if sw.plot.is_some() {
            return Err(usage(
                "--plot draws a sweep's configurations (--parameter-list, --parameter-scan); draw a bench's recording with `memmon plot FILE`",
            ));
        }
        return Ok(None);
    }
    let daemon = match &sw.daemon {
        Some(command) => {
            let ready: Vec<Ready> = [
                sw.ready_pidfile.clone().map(Ready::Pidfile),
                sw.ready_socket.clone().map(Ready::Socket),
                sw.ready_log.clone().map(Ready::Log),
            ]
            .into_iter()
            .flatten()
            .collect();
            let [ready] = <[Ready; 1]>::try_from(ready).map_err(|r| {
                usage(format!(
                    "--daemon needs one of --ready-pidfile, --ready-socket or --ready-log to know when it is ready ({} given)",
                    r.len()
                ))
            })?;
            Some(DaemonOptions {
                command: command.clone(),
                ready,
                ready_timeout: sw.ready_timeout,
                stop_timeout: sw.stop_timeout,
            })
        }
        None => None,
    };
    if args.push.is_some() {
        return Err(usage(
            "--push sends one bench's runs; a sweep's configurations are exported with --export-json, --export-csv or --export-markdown",
        ));
    }
    let configurations = sweep::configurations(&params)?;
    if opts.output.as_ref().is_some_and(|d| d.is_stdout()) && configurations.len() > 1 {
        return Err(usage(
            "-o -: several configurations would write their recordings one after another on stdout; give -o a file named by the parameters, e.g. -o run-{NAME}.csv",
        ));
    }
    if let (Some(o), true) = (
        opts.output.as_ref().and_then(|d| d.file()),
        configurations.len() > 1,
    ) {
        let paths: std::collections::HashSet<String> = configurations
            .iter()
            .map(|c| c.substitute(&o.to_string_lossy()))
            .collect();
        if paths.len() < configurations.len() {
            return Err(usage(format!(
                "-o {}: configurations would share a recording; name it by the parameters, e.g. -o run-{{{}}}.csv",
                o.display(),
                params.first().map_or("NAME", |p| p.name.as_str())
            )));
        }
    }
    Ok(Some(Plan {
        parameters: params.into_iter().map(|p| p.name).collect(),
        configurations,
        daemon,
    }))
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let opts = options(&args)?;
    let plan = plan(&args, &opts)?;
    let exports = export::targets(
        args.export_json.as_ref(),
        args.export_csv.as_ref(),
        args.export_markdown.as_ref(),
    );
    if let Some(plan) = plan {
        check_sweep_outputs(&args, &opts, &exports, &plan)?;
        return run_sweep(&args, &opts, &exports, plan);
    }
    if let Some(url) = &args.push {
        // Before any run: a URL this build cannot push to (https:// without `push-https`) too.
        memmon::bench::push::PushUrl::parse(url).and_then(|u| u.check_built(url))?;
    }
    check_outputs(&opts, &exports)?;
    let done = runner::run(&opts)?;
    let mut report = done.report;
    report.finish();

    let table = table::render(&report);
    let table = memmon::outside::guard(&table);
    if opts.stdout_is_data {
        errprint!("{table}");
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(table.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| anyhow::Error::from(e).context("cannot write to stdout"))?;
    }
    export::write_all(&exports, export::Results::Bench(&report), opts.force)?;
    if let Some(url) = &args.push {
        let name = args.push_name.clone().unwrap_or_else(|| {
            std::path::Path::new(&args.client[0])
                .file_name()
                .map_or_else(
                    || args.client[0].clone(),
                    |n| n.to_string_lossy().into_owned(),
                )
        });
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let n = memmon::bench::push::push(url, &name, &host, &report)?;
        opts.report.note(&format!(
            "pushed {} to {url} (job {}, instance=\"{host}\", bench=\"{name}\", run=1..{n})",
            memmon::units::count(n, "run"),
            memmon::bench::push::JOB
        ));
    }
    let checks: Vec<_> = report
        .units()
        .iter()
        .flat_map(|u| opts.budgets.check(u))
        .collect();
    if !super::report_budgets(&checks) && done.stop.is_none() {
        return Ok(ExitCode::Failure);
    }
    match done.stop {
        None => Ok(ExitCode::Success),
        Some(runner::Stop::Signal(sig)) => {
            errln!(
                "memmon: bench interrupted by {} after {} of {}; the runs measured are kept",
                memmon::model::signal::name(sig),
                report.runs.len(),
                memmon::units::count(report.runs_requested, "run")
            );
            Ok(ExitCode::Signal(sig))
        }
        Some(runner::Stop::Failed(msg)) => {
            errln!("memmon: error: {msg}");
            Ok(ExitCode::Failure)
        }
        Some(runner::Stop::Error(e)) => Err(e.into()),
    }
}

/// A sweep: each configuration's bench, its table on stderr as it ends; then the sweep's table
/// and its exports. Exit 1 when a configuration failed, the signal's code when one stopped it.
fn run_sweep(
    args: &BenchArgs,
    opts: &BenchOptions,
    exports: &[export::ExportTarget],
    plan: Plan,
) -> anyhow::Result<ExitCode> {
    let done = runner::sweep::sweep(opts, &plan.configurations, plan.daemon.as_ref(), |r| {
        if let (Some(rep), false) = (&r.report, args.quiet) {
            errprint!("{}", memmon::outside::guard(&table::render(rep)));
        }
        if let Some(why) = &r.failed {
            errln!(
                "memmon: configuration {} failed: {why}",
                r.configuration.label()
            );
        }
    });
    let ran = done.runs.len();
    let mut report = SweepReport {
        memmon_version: env!("CARGO_PKG_VERSION").into(),
        client: memmon::sampler::target::shell_words(&args.client),
        daemon_command: args.sweep.daemon.clone(),
        parameters: plan.parameters,
        runs: opts.runs,
        concurrency: opts.concurrency,
        configurations: done
            .runs
            .into_iter()
            .map(|r| ConfigReport {
                label: r.configuration.label(),
                parameters: r.configuration,
                row: r.report.as_ref().and_then(sweep::Row::of),
                on_front: false,
                over_budget: Vec::new(),
                failed: r.failed,
                daemon: r.daemon,
                bench: r.report,
            })
            .collect(),
        complete: done.signal.is_none() && ran == plan.configurations.len(),
        stopped: done
            .signal
            .map(|sig| format!("interrupted by {}", memmon::model::signal::name(sig))),
    };
    report.finish(|b| {
        let mut flags: Vec<String> = b
            .units()
            .iter()
            .flat_map(|u| opts.budgets.check(u))
            .filter(|c| !c.passed)
            .map(|c| c.flag.to_string())
            .collect();
        flags.dedup();
        flags
    });
    let table = table::render_sweep(&report);
    let text = memmon::outside::guard(&table);
    if opts.stdout_is_data {
        errprint!("{text}");
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| anyhow::Error::from(e).context("cannot write to stdout"))?;
    }
    export::write_all(exports, export::Results::Sweep(&report), opts.force)?;
    if let Some(p) = &args.sweep.plot {
        let format = memmon::render::plot::ImageFormat::from_path(p, "--plot")?;
        memmon::bench::sweep_plot::draw_sweep(&report, p, format, opts.force)?;
    }
    if let Some(sig) = done.signal {
        return Ok(ExitCode::Signal(sig));
    }
    Ok(
        if report.configurations.iter().any(|c| c.failed.is_some()) {
            ExitCode::Failure
        } else {
            ExitCode::Success
        },
    )
}

/// A sweep's outputs, checked before its first configuration: the exports, and each
/// configuration's own recording (-o with its `{NAME}`s replaced).
fn check_sweep_outputs(
    args: &BenchArgs,
    opts: &BenchOptions,
    exports: &[export::ExportTarget],
    plan: &Plan,
) -> anyhow::Result<()> {
    if let Some(p) = &args.sweep.plot {
        memmon::render::plot::ImageFormat::from_path(p, "--plot")?;
        memmon::output::check_outputs(&[(p.as_path(), "--plot")], opts.force)?;
        memmon::output::check_writable(&[(p.as_path(), "--plot")])?;
    }
    let mut one = opts.clone();
    for c in &plan.configurations {
        one.output = opts.output.as_ref().map(|d| c.output(d));
        check_outputs(&one, exports)?;
    }
    Ok(())
}

/// Every output is checked now, not after a long bench: none may exist without --force, no two
/// may be one file, and the exports, written at the end, can be written (their directories
/// there and writable).
fn check_outputs(opts: &BenchOptions, exports: &[export::ExportTarget]) -> anyhow::Result<()> {
    let mut outs = export::paths(exports);
    let written_at_end = outs.clone();
    let file = opts.output.as_ref().and_then(|d| d.file());
    let side = file.map(memmon::format::sidecar_path);
    if let (Some(o), false) = (file, opts.append) {
        outs.push((o, "-o"));
        let csv = opts.format.unwrap_or_else(|| Format::from_path(o)) == Format::Csv;
        let orphan = memmon::format::sidecar_is_orphan(o);
        if let (Some(side), true) = (&side, csv && !memmon::output::is_stream(o) && !orphan) {
            outs.push((side, "-o's metadata sidecar"));
        }
    }
    memmon::output::check_outputs(&outs, opts.force)?;
    memmon::output::check_writable(&written_at_end)?;
    Ok(())
}
