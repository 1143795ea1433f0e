//! The benchmark's table for the terminal, hyperfine-like: one line per run (time, exit status,
//! peak on the bench's one basis with its source and, for a tree, the tree's bounds, sampled
//! peak, peak over the idle floor, RSS before and after, held memory), then the statistics and
//! notes saying what the peak is.

use super::{BenchReport, PeakBasis, RunResult};
use crate::render::table::text_width;
use crate::units::{fmt_bytes, fmt_bytes_signed};
use std::fmt::Write as _;

/// Wall time with a precision that suits it: `12.3 ms`, `1.234 s`, `95.0 s`.
pub fn fmt_wall(secs: f64) -> String {
    if secs < 1.0 {
        format!("{:.1} ms", secs * 1e3)
    } else if secs < 60.0 {
        format!("{secs:.3} s")
    } else {
        format!("{secs:.1} s")
    }
}

/// The CPU time of a run, user / system: the daemon's (`0.12 s / 0.03 s`, in clock ticks), or
/// without a daemon the command's (`0.123 s / 0.031 s`, from wait4); `-` when not known.
pub fn cpu_cell(r: &RunResult) -> String {
    match (
        r.daemon_user_s,
        r.daemon_system_s,
        r.command_user_s,
        r.command_system_s,
    ) {
        (Some(u), Some(s), _, _) => format!("{u:.2} s / {s:.2} s"),
        (_, _, Some(u), Some(s)) => format!("{u:.3} s / {s:.3} s"),
        _ => "-".into(),
    }
}

/// A run's peak on the bench's basis: `1.21 GiB *` (exact), `≥ 3.08 MiB` (a lower bound:
/// processes left the tree with no exit record read), `1.40 GiB` (sampled).
pub fn peak_cell(report: &BenchReport, r: &RunResult) -> String {
    r.known_peak(report.peak_basis)
        .map_or_else(|| "-".into(), |p| p.cell())
}

/// The tree's bounds of a run whose peak is its largest process's: `1.21–1.41 GiB`,
/// `≥ 1.21 GiB`; `-` when the peak is the tree's own (or of a single process).
pub fn tree_cell(report: &BenchReport, r: &RunResult) -> String {
    let p = r.peak_on(report.peak_basis);
    match (p.tree_low_bytes, p.tree_high_bytes) {
        (Some(l), Some(h)) => format!("{}–{}", fmt_bytes(l), fmt_bytes(h)),
        (Some(l), None) => format!("≥ {}", fmt_bytes(l)),
        _ => "-".into(),
    }
}

fn opt_bytes(v: Option<u64>) -> String {
    v.map(fmt_bytes).unwrap_or_else(|| "-".into())
}

fn exit_text(r: &RunResult) -> String {
    match (r.exit_code, r.exit_signal) {
        (Some(c), _) => c.to_string(),
        (None, Some(s)) => crate::model::signal::name(s),
        _ => "?".into(),
    }
}

/// A run's PSS: the largest read, `*` when no read came at the run's RSS peak.
pub fn pss_cell(r: &RunResult) -> String {
    match &r.pss {
        Some(p) if p.is_peak => fmt_bytes(p.largest_bytes),
        Some(p) => format!("{} *", fmt_bytes(p.largest_bytes)),
        None => "-".into(),
    }
}

/// For runs of several processes: which columns are RSS sums that count a shared page in each
/// process, and which count it once.
pub fn shared_pages_note(report: &BenchReport) -> Option<String> {
    let most = report
        .runs
        .iter()
        .map(|r| r.facts.max_processes)
        .max()
        .unwrap_or(0);
    if most <= 1 {
        return None;
    }
    let mut once = Vec::new();
    if report.runs.iter().any(|r| r.pss.is_some()) {
        once.push("PSS (sum of PSS; * where no read came at the run's RSS peak)");
    }
    if report.peak_basis == PeakBasis::Cgroup {
        once.push("Peak (the tree's cgroup)");
    } else if report
        .runs
        .iter()
        .any(|r| r.facts.cgroup_peak_bytes.is_some())
    {
        once.push("Cgroup peak");
    }
    Some(format!(
        "Sampled{}{}: RSS sums over up to {most} processes, shared pages counted in each{}",
        if report.peak_basis == PeakBasis::Sampled {
            ", Peak"
        } else {
            ""
        },
        match (report.daemon.is_some(), report.peak_basis) {
            (true, PeakBasis::Cgroup) => ", RSS before and after",
            (true, _) => ", Over floor, RSS before and after",
            (false, _) => "",
        },
        if once.is_empty() {
            " (--pss for a sum that counts them once)".to_string()
        } else {
            format!("; counted once: {}", once.join(", "))
        }
    ))
}

/// A kind of held memory: its column's header and a run's value.
pub type HeldColumn = (&'static str, fn(&RunResult) -> u64);

/// The kinds of held memory any run had.
pub fn held_columns(report: &BenchReport) -> Vec<HeldColumn> {
    let all: [HeldColumn; 3] = [
        ("Locked", |r| r.held.locked_bytes),
        ("Pinned", |r| r.held.pinned_bytes),
        ("Shared", |r| r.held.shmem_bytes),
    ];
    all.into_iter()
        .filter(|(_, get)| report.runs.iter().any(|r| get(r) > 0))
        .collect()
}

/// The notes under the table: what the peak column holds, how exact, what it lacks.
pub fn notes(report: &BenchReport) -> Vec<String> {
    let mut o = Vec::new();
    if report.runs.is_empty() {
        return o;
    }
    let basis = report.peak_basis;
    let peaks: Vec<_> = report.runs.iter().map(|r| r.peak_on(basis)).collect();
    let exact = peaks.iter().any(|p| p.exact);
    o.push(format!(
        "note: Peak is {}{}",
        basis.describe(),
        match basis {
            PeakBasis::Kernel if exact => format!(
                "; * exact within {} (the kernel counts RSS in per-CPU batches; {})",
                crate::units::fmt_bytes(crate::probe::proc::local_batching_bound_bytes()),
                crate::units::count(crate::probe::proc::online_cpus(), "CPU")
            ),
            PeakBasis::Cgroup if exact => "; * exact, each page once, page cache included".into(),
            PeakBasis::Sampled => "; a lower bound: a spike between two samples is missed".into(),
            _ => String::new(),
        }
    ));
    if basis == PeakBasis::Cgroup {
        let over = report
            .runs
            .iter()
            .any(|r| r.peak_over_floor_bytes.is_some());
        o.push(format!(
            "note: {}Sampled{} count in RSS pages charged to another cgroup (a binary's page cache), the cgroup's Peak does not: Sampled may be above it",
            if over {
                "Over floor is the cgroup's peak less the cgroup's usage at the run's start, in the same counter; "
            } else {
                ""
            },
            if over { " and RSS before" } else { "" }
        ));
    }
    let above: Vec<String> = report
        .runs
        .iter()
        .filter(|r| r.facts.basis() < basis)
        .map(|r| r.run.to_string())
        .collect();
    if !above.is_empty() {
        o.push(format!(
            "note: {} {} also had {}, which not every run has: every run is shown on the basis all share",
            crate::units::plural(above.len(), "run"),
            above.join(", "),
            report.runs.iter().find(|r| r.facts.basis() < basis).map_or("", |r| r.facts.basis().describe())
        ));
    }
    if report.runs.iter().any(|r| r.health.major_faults > 0) {
        o.push("note: Major faults: pages the tree had to read from disk or swap in the run (a count, /proc/PID/stat majflt)".into());
    }
    if report.runs.iter().any(|r| r.health.stalled()) {
        let cgroup = report
            .runs
            .iter()
            .any(|r| r.health.cgroup_psi_memory_some_us.is_some());
        o.push(format!(
            "note: Mem stall: {}",
            crate::analysis::span::MemoryHealth::stall_legend(cgroup)
                .trim_start_matches("memory stall: ")
        ));
    }
    if report.runs.iter().any(|r| r.health.swapped()) {
        let cgroup = report
            .runs
            .iter()
            .any(|r| r.health.cgroup_swap_in_pages.is_some());
        o.push(format!(
            "note: Swap: {}",
            crate::analysis::span::MemoryHealth::swap_legend(cgroup).trim_start_matches("swap: ")
        ));
    }
    if report.runs.iter().any(|r| r.health.thp().is_some()) {
        o.push(format!(
            "note: Huge pages: {}",
            crate::analysis::span::MemoryHealth::thp_legend().trim_start_matches("huge pages: ")
        ));
    }
    let killed: Vec<String> = report
        .runs
        .iter()
        .filter(|r| r.health.oom_killed())
        .map(|r| r.run.to_string())
        .collect();
    if !killed.is_empty() {
        o.push(format!(
            "warning: the kernel's OOM killer killed processes of the cgroup during {} {}: {}",
            crate::units::plural(killed.len(), "run"),
            killed.join(", "),
            crate::analysis::span::MemoryHealth::OOM_MEANS
        ));
    }
    // The numbers of the runs whose facts say `what`.
    let runs_where = |what: fn(&crate::model::peak::PeakFacts) -> bool| -> Vec<String> {
        report
            .runs
            .iter()
            .filter(|r| what(&r.facts))
            .map(|r| r.run.to_string())
            .collect()
    };
    let left = runs_where(|f| f.cgroup_left_tree);
    if !left.is_empty() {
        o.push(format!(
            "warning: a process of the tree was found outside its cgroup during {} {}: Cgroup peak is not the tree's there, and Peak is the kernel's of its largest process",
            crate::units::plural(left.len(), "run"),
            left.join(", "),
        ));
    }
    let below = runs_where(|f| f.cgroup_below_process);
    if !below.is_empty() {
        o.push(format!(
            "note: a process's own peak stood above the cgroup's by more than its page cache explains during {} {} (memory charged to another cgroup between two samples): the cgroup's peak is not exact there, and the process's peak bounds the tree's from below",
            crate::units::plural(below.len(), "run"),
            below.join(", "),
        ));
    }
    if peaks
        .iter()
        .any(|p| p.scope == crate::model::peak::PeakScope::LargestProcess)
    {
        o.push(
            "note: the tree had several processes: Peak is the exact peak of its largest process, the same kind in every run; Tree bounds the tree's own peak (a cgroup of the daemon's own gives it exactly: --cgroup)"
                .into(),
        );
    }
    let partial: Vec<String> = report
        .runs
        .iter()
        .zip(&peaks)
        .filter(|(_, p)| p.scope.is_partial())
        .map(|(r, _)| format!("run {} ({} left)", r.run, r.facts.departed))
        .collect();
    if !partial.is_empty() {
        o.push(format!(
            "warning: ≥: processes left the tree during {} with no exit record read: the peak is the largest VmHWM the samples saw, and a process that peaked after its last sample, or a child born and gone between two samples, is not in it (memmon reads exit records as root or with CAP_NET_ADMIN)",
            partial.join(", ")
        ));
    }
    o
}

/// The whole table, ending with a newline.
pub fn render(report: &BenchReport) -> String {
    let mut o = String::new();
    let against = match &report.daemon {
        Some(d) => format!(
            " against PID {} ({})",
            d.pid,
            crate::outside::shown(&d.comm)
        ),
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "Benchmark: {} of {} of {}{against}, interval {}",
        report
            .window
            .as_ref()
            .map_or(report.runs.len(), |w| w.runs as usize),
        crate::units::count(report.runs_requested, "run"),
        report.client,
        report.interval
    );
    if let Some(w) = &report.window {
        render_window(&mut o, w);
    } else if report.runs.is_empty() {
        let _ = writeln!(o, "  no run was measured");
    } else {
        render_runs(&mut o, report);
    }
    if let Some(l) = &report.leak {
        let _ = writeln!(o, "  {}", l.message);
    }
    render_anatomy(&mut o, report);
    for n in &report.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    if let Some(s) = &report.stopped {
        let _ = writeln!(o, "  stopped: {s}");
    }
    o
}

/// A window of runs in flight together (`--concurrency`): its throughput, latencies and exact
/// peak, the floor under it and what each run in flight cost above it.
fn render_window(o: &mut String, w: &crate::bench::window::Window) {
    use crate::units::{count, fmt_bytes};
    let _ = writeln!(
        o,
        "  window        {} in {}, {} in flight (most at once: {})",
        count(w.runs, "run"),
        fmt_wall(w.wall_s),
        w.concurrency,
        w.most_in_flight
    );
    let steady = match &w.throughput_stretches {
        Some(s) => format!(
            " (each {} completed: {:.0} to {:.0}, σ {:.0})",
            count(w.concurrency, "run"),
            s.min,
            s.max,
            s.stddev
        ),
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "  throughput    {:.0} runs/h{steady}",
        w.throughput_per_hour
    );
    if let Some(l) = &w.latency_s {
        let _ = writeln!(
            o,
            "  latency       p50 {}, p95 {}, max {} (each client from its start to its exit)",
            fmt_wall(l.p50),
            fmt_wall(l.p95),
            fmt_wall(l.max)
        );
    }
    let bound = w.facts.exact_within_bytes;
    let _ = writeln!(
        o,
        "  peak          {} ({}, reset at the window's start)",
        w.peak.cell(),
        w.peak.describe(bound)
    );
    let counter = match w.facts.basis() {
        PeakBasis::Cgroup => "the cgroup's usage",
        _ => "the tree's RSS",
    };
    let _ = writeln!(
        o,
        "  idle floor    {} ({counter} at the window's start)",
        fmt_bytes(w.floor_bytes)
    );
    let _ = writeln!(
        o,
        "  over floor    {}: {} per run in flight",
        fmt_bytes(w.peak_over_floor_bytes),
        fmt_bytes(w.peak_over_floor_per_run_in_flight_bytes)
    );
    if let (Some(u), Some(sys)) = (w.daemon_user_s, w.daemon_system_s) {
        let _ = writeln!(
            o,
            "  daemon CPU    {u:.2} s user, {sys:.2} s system in the window"
        );
    }
    let failed = w.failed();
    if failed > 0 {
        let runs: Vec<String> = w
            .clients
            .iter()
            .filter(|c| c.exit_code != Some(0))
            .map(|c| c.run.to_string())
            .collect();
        let _ = writeln!(
            o,
            "  failed        {} of the window's: {}",
            count(failed, "run"),
            runs.join(", ")
        );
    }
    if w.health.oom_killed() {
        let _ = writeln!(
            o,
            "  warning: the kernel's OOM killer killed processes of the cgroup during the window: {}",
            crate::analysis::span::MemoryHealth::OOM_MEANS
        );
    }
}

/// What grew in each run (`--anatomy`), from the idle floor's anatomy to the run's highest.
fn render_anatomy(o: &mut String, report: &BenchReport) {
    let Some(first) = report.anatomy.first() else {
        return;
    };
    let _ = writeln!(
        o,
        "  what grew in each run, from the idle floor's anatomy ({} at +{}, RSS {}) to the run's highest:",
        first.from.trigger.key(),
        crate::units::fmt_seconds(first.from.elapsed_s),
        crate::units::fmt_bytes(first.from.rss_bytes)
    );
    crate::render::summary::span_growth_lines(o, &report.anatomy, "run");
}

/// One column of the runs' table: its header and each run's cell. The terminal table and the
/// Markdown export are drawn from the same columns.
pub struct Column<'a> {
    pub head: &'static str,
    pub cell: Box<dyn Fn(&RunResult) -> String + 'a>,
}

fn column<'a>(head: &'static str, cell: impl Fn(&RunResult) -> String + 'a) -> Column<'a> {
    Column {
        head,
        cell: Box::new(cell),
    }
}

/// The runs' columns, those that say nothing for this bench (no tree, no cgroup, no PSS, no
/// GPU, no held memory) left out.
pub fn columns(report: &BenchReport) -> Vec<Column<'_>> {
    let basis = report.peak_basis;
    let mut c = vec![
        column("Run", |r| r.run.to_string()),
        column("Time", |r| fmt_wall(r.wall_s)),
        column("Exit", exit_text),
        column("Peak", move |r| peak_cell(report, r)),
        column("Source", move |r| r.peak_on(basis).source.key().to_string()),
    ];
    if report.runs.iter().any(|r| tree_cell(report, r) != "-") {
        c.push(column("Tree", move |r| tree_cell(report, r)));
    }
    // A run that ended before its first sample has no sampled size.
    c.push(column("Sampled", |r| {
        if r.samples == 0 {
            "-".into()
        } else {
            fmt_bytes(r.facts.sampled_peak_rss_bytes)
        }
    }));
    if report.daemon.is_some() {
        c.push(column("Over floor", |r| {
            r.peak_over_floor_bytes
                .map(|b| fmt_bytes_signed(b as i64))
                .unwrap_or_else(|| "-".into())
        }));
        c.push(column("RSS before", |r| opt_bytes(r.rss_before_bytes)));
        c.push(column("RSS after", |r| opt_bytes(r.rss_after_bytes)));
        c.push(column("Daemon CPU u/s", cpu_cell));
    } else {
        c.push(column("CPU u/s", cpu_cell));
    }
    if basis != PeakBasis::Cgroup
        && report
            .runs
            .iter()
            .any(|r| r.facts.cgroup_peak_bytes.is_some())
    {
        c.push(column("Cgroup peak", |r| {
            opt_bytes(r.facts.cgroup_peak_bytes)
        }));
    }
    for (head, get) in held_columns(report) {
        c.push(column(head, move |r| fmt_bytes(get(r))));
    }
    if report.runs.iter().any(|r| r.pss.is_some()) {
        c.push(column("PSS", pss_cell));
    }
    if report.runs.iter().any(|r| r.peak_gpu_bytes.is_some()) {
        c.push(column("GPU sampled peak", |r| opt_bytes(r.peak_gpu_bytes)));
    }
    if report.runs.iter().any(|r| r.gpu_kernel.window.is_some()) {
        c.push(column("GPU kernel peak", |r| r.gpu_kernel.cell()));
    }
    // Memory health, only where some run moved it.
    if report.runs.iter().any(|r| r.health.major_faults > 0) {
        c.push(column("Major faults", |r| r.health.faults_cell()));
    }
    if report.runs.iter().any(|r| r.health.stalled()) {
        c.push(column("Mem stall", |r| r.health.stall_cell()));
    }
    if report.runs.iter().any(|r| r.health.swapped()) {
        c.push(column("Swap pages", |r| r.health.swap_cell()));
    }
    if report.runs.iter().any(|r| r.health.thp().is_some()) {
        c.push(column("Huge pages", |r| r.health.thp_cell()));
    }
    if report.runs.iter().any(|r| r.health.oom_killed()) {
        c.push(column("OOM kills", |r| r.health.oom_cell()));
    }
    c
}

fn render_runs(o: &mut String, report: &BenchReport) {
    let cols = columns(report);
    let cells: Vec<Vec<String>> = report
        .runs
        .iter()
        .map(|r| cols.iter().map(|c| (c.cell)(r)).collect())
        .collect();
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|row| text_width(&row[i]))
                .chain([text_width(c.head)])
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Right-aligned but for Source (words).
    let line = |row: Vec<&str>| {
        let mut l = String::from(" ");
        for (i, cell) in row.iter().enumerate() {
            let pad = " ".repeat(widths[i] - text_width(cell));
            if cols[i].head == "Source" {
                l += &format!(" {cell}{pad} ");
            } else {
                l += &format!(" {pad}{cell} ");
            }
        }
        l.trim_end().to_string()
    };
    if let Some(note) = shared_pages_note(report) {
        let _ = writeln!(o, "  {note}");
    }
    let _ = writeln!(o, "{}", line(cols.iter().map(|c| c.head).collect()));
    for row in &cells {
        let _ = writeln!(o, "{}", line(row.iter().map(String::as_str).collect()));
    }
    if let Some(st) = &report.stats {
        let _ = writeln!(o);
        let w = &st.wall_s;
        let _ = writeln!(
            o,
            "  Time        mean {} ± {}   [min {}, max {}]",
            fmt_wall(w.mean),
            fmt_wall(w.stddev),
            fmt_wall(w.min),
            fmt_wall(w.max)
        );
        let b = fmt_bytes;
        let p = &st.peak_bytes;
        let _ = writeln!(
            o,
            "  Peak        mean {} ± {}   [min {}, max {}]",
            b(p.mean),
            b(p.stddev),
            b(p.min),
            b(p.max)
        );
        if let Some(f) = &st.peak_over_floor_bytes {
            let _ = writeln!(
                o,
                "  Over floor  mean {} ± {}   [min {}, max {}]",
                b(f.mean),
                b(f.stddev),
                b(f.min),
                b(f.max)
            );
        }
    }
    for n in notes(report) {
        let _ = writeln!(o, "  {n}");
    }
}

/// A sweep's table: a row per configuration (its throughput, latencies, exact peak, idle floor
/// and peak above it per run in flight), those on the Pareto front of throughput against peak
/// marked, those over a budget or failed said.
pub fn render_sweep(s: &crate::bench::sweep::SweepReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Sweep{}: {}, {} each{}, of {}",
        if s.parameters.is_empty() {
            String::new()
        } else {
            format!(" of {}", s.parameters.join(" and "))
        },
        crate::units::count(s.configurations.len(), "configuration"),
        crate::units::count(s.runs, "run"),
        if s.concurrency > 1 {
            format!(", {} in flight", s.concurrency)
        } else {
            String::new()
        },
        s.client
    );
    let rows: Vec<Vec<String>> = s.configurations.iter().map(sweep_cells).collect();
    let mut widths: Vec<usize> = SWEEP_HEADS.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut l = String::from(" ");
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = w - c.chars().count();
            // The configuration left, the numbers right, the marks left.
            if i == 0 || i == SWEEP_HEADS.len() - 1 {
                l.push_str(&format!(" {c}{}", " ".repeat(pad)));
            } else {
                l.push_str(&format!(" {}{c}", " ".repeat(pad)));
            }
            l.push(' ');
        }
        l.trim_end().to_string()
    };
    let heads: Vec<String> = SWEEP_HEADS.iter().map(|h| h.to_string()).collect();
    let _ = writeln!(o, "{}", line(&heads));
    for r in &rows {
        let _ = writeln!(o, "{}", line(r));
    }
    for c in s.configurations.iter().filter(|c| c.failed.is_some()) {
        let _ = writeln!(
            o,
            "  failed: {}: {}",
            c.label,
            c.failed.as_deref().unwrap_or_default()
        );
    }
    if s.configurations.iter().any(|c| c.on_front) {
        let _ = writeln!(
            o,
            "  note: front: no other configuration has a throughput at least as high and a peak at least as low (the Pareto front); Peak is each configuration's {}",
            if s.concurrency > 1 {
                "window's exact peak (runs in flight together)"
            } else {
                "highest run's peak"
            }
        );
    }
    if let Some(why) = &s.stopped {
        let _ = writeln!(o, "  stopped: {why}");
    }
    o
}

/// The sweep table's columns.
pub const SWEEP_HEADS: [&str; 8] = [
    "Configuration",
    "Throughput",
    "p50",
    "p95",
    "Peak",
    "Idle floor",
    "Per run in flight",
    "",
];

/// One configuration's cells, under `SWEEP_HEADS`.
pub fn sweep_cells(c: &crate::bench::sweep::ConfigReport) -> Vec<String> {
    use crate::units::fmt_bytes;
    let mut marks = Vec::new();
    if c.on_front {
        marks.push("front".to_string());
    }
    if !c.over_budget.is_empty() {
        marks.push(format!("over {}", c.over_budget.join(", ")));
    }
    if c.failed.is_some() {
        marks.push("failed".into());
    }
    let Some(r) = &c.row else {
        let mut v = vec![c.label.clone()];
        v.extend(std::iter::repeat_n("-".to_string(), 6));
        v.push(marks.join(", "));
        return v;
    };
    vec![
        c.label.clone(),
        format!("{:.0} runs/h", r.throughput_per_hour),
        r.latency_s.map_or("-".into(), |l| fmt_wall(l.p50)),
        r.latency_s.map_or("-".into(), |l| fmt_wall(l.p95)),
        r.peak.cell(),
        r.floor_bytes.map_or("-".into(), fmt_bytes),
        r.peak_over_floor_per_run_in_flight_bytes
            .map_or("-".into(), fmt_bytes),
        marks.join(", "),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_times_keep_their_precision() {
        assert_eq!(fmt_wall(0.0123), "12.3 ms");
        assert_eq!(fmt_wall(1.2345), "1.234 s");
        assert_eq!(fmt_wall(95.04), "95.0 s");
    }
}
