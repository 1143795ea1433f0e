//! Phases, runs and phases by label as tables (`Phases::tables`): what `memmon summary`
//! prints after its lines and `memmon report` shows. The spans are decided in
//! `analysis::phases`; this file only says them.

use crate::analysis::phases::{LabelStats, Phases, MAX_LISTED};
use crate::analysis::span::{MemoryHealth, Span};
use crate::model::peak::{PeakBasis, PeakSource};
use crate::render::table::Table;
use crate::units::{fmt_bytes, fmt_seconds};

impl Phases {
    /// The tables of phases, runs and phases by label (none when there are none): what the
    /// summary prints and the report shows.
    pub fn tables(&self) -> Vec<Table> {
        let mut tables = Vec::new();
        for (title, spans, unlisted) in [
            ("phases", &self.phases, self.unlisted_phases),
            ("runs", &self.runs, self.unlisted_runs),
        ] {
            if spans.is_empty() {
                continue;
            }
            let mut t = spans_table(title, spans);
            if unlisted > 0 {
                t.footer.push(format!(
                    "and {unlisted} more {title} not listed (the first {MAX_LISTED} are){}",
                    if title == "phases" {
                        "; the sums by label below hold them all"
                    } else {
                        ""
                    }
                ));
            }
            tables.push(t);
        }
        tables.extend(by_label_table(&self.by_label));
        tables
    }

    /// The tables, indented for the summary.
    pub fn render(&self) -> String {
        let mut o = String::new();
        for t in self.tables() {
            t.write_text(&mut o);
        }
        o
    }
}

/// What a table's peak column holds, in words: one line naming the kinds of peak in it.
fn peak_legend(spans: &[Span]) -> String {
    let mut kinds: Vec<String> = Vec::new();
    for s in spans {
        let what = match s.peak.source {
            PeakSource::Cgroup => format!("the tree's, from its cgroup ({})", s.peak.counter),
            PeakSource::Sampled => "sampled (no kernel peak covers it)".to_string(),
            _ if s.peak.scope == crate::model::peak::PeakScope::Process => {
                format!("the process's {}", s.peak.counter)
            }
            _ => format!("the largest process's {}", s.peak.counter),
        };
        if !kinds.contains(&what) {
            kinds.push(what);
        }
    }
    // A span of one process beside trees: "the largest process's" says it for both.
    let all = kinds.clone();
    kinds.retain(|k| {
        k.strip_prefix("the process's ")
            .is_none_or(|c| !all.contains(&format!("the largest process's {c}")))
    });
    kinds.join("; ")
}

/// Why no span of a table has an exact peak, with what would give one: every boundary came
/// late, or the advice that fits (a cgroup is not advised to a tree that has one).
fn no_exact_peak(kind: &str, spans: &[Span]) -> String {
    if spans.iter().all(|s| s.facts.late_boundary) {
        return format!(
            "no exact peak: every {} boundary came more than 5 ms after its marker (late)",
            if kind == "runs" { "run's" } else { "phase's" }
        );
    }
    let cgroup = spans.iter().any(|s| s.facts.cgroup_holds_tree);
    match (kind, cgroup) {
        ("runs", false) => "no exact peak: give the tree a cgroup of its own, or let memmon read exit records (as root, without --no-taskstats)".into(),
        ("runs", true) => "no exact peak: let memmon read exit records (as root, without --no-taskstats)".into(),
        (_, false) => "no exact peak: record with --phase-peaks, or give the tree a cgroup".into(),
        (_, true) => "no exact peak: record with --phase-peaks".into(),
    }
}

fn spans_table(kind: &str, spans: &[Span]) -> Table {
    let exact = spans.iter().filter(|s| s.peak.exact).count();
    let title = format!(
        "{kind} ({}; peak: {}; * exact)",
        if exact == spans.len() {
            "peaks exact for all".to_string()
        } else if exact == 0 {
            no_exact_peak(kind, spans)
        } else {
            format!("peaks exact for {exact} of {}", spans.len())
        },
        peak_legend(spans)
    );
    let columns = SpanColumns::of(spans);
    Table {
        title,
        notes: columns.notes(kind, spans),
        head: columns.head(),
        rows: spans.iter().map(|s| columns.row(s)).collect(),
        footer: Vec::new(),
    }
}

/// The columns a table of spans has beyond the ones every table has: those some span has a
/// value for.
struct SpanColumns {
    tree: bool,
    /// The cgroup's numbers, where they are not the headline already.
    cgroup: bool,
    pss: bool,
    gpu: bool,
    gpu_kernel: bool,
    /// Major faults, and memory stall (the cgroup's when it has its own), where a span had any.
    faults: bool,
    stall: bool,
    stall_cgroup: bool,
    /// Swap (the cgroup's when it counts its own), and huge pages, where a span had any.
    swap: bool,
    swap_cgroup: bool,
    thp: bool,
    /// OOM kills in the cgroup, where a span had any.
    oom: bool,
    /// The cgroup's memory per NUMA node, where a NUMA table was read.
    numa: bool,
    /// The most processes a span's tree had.
    processes: u32,
}

impl SpanColumns {
    fn of(spans: &[Span]) -> SpanColumns {
        SpanColumns {
            tree: spans.iter().any(|s| s.peak.tree_low_bytes.is_some()),
            cgroup: spans.iter().any(|s| {
                s.cgroup_sampled_peak_bytes.is_some() && s.peak.source != PeakSource::Cgroup
            }),
            pss: spans.iter().any(|s| s.pss.is_some()),
            gpu: spans.iter().any(|s| s.peak_gpu_bytes.is_some()),
            gpu_kernel: spans.iter().any(|s| s.gpu_kernel.window.is_some()),
            faults: spans.iter().any(|s| s.health.major_faults > 0),
            stall: spans.iter().any(|s| s.health.stalled()),
            stall_cgroup: spans
                .iter()
                .any(|s| s.health.cgroup_psi_memory_some_us.is_some()),
            swap: spans.iter().any(|s| s.health.swapped()),
            swap_cgroup: spans
                .iter()
                .any(|s| s.health.cgroup_swap_in_pages.is_some()),
            thp: spans.iter().any(|s| s.health.thp().is_some()),
            oom: spans.iter().any(|s| s.health.oom_killed()),
            numa: spans.iter().any(|s| !s.numa_nodes.is_empty()),
            processes: spans
                .iter()
                .map(|s| s.facts.max_processes)
                .max()
                .unwrap_or(0),
        }
    }

    /// What the marks and columns of a table of `kind` (phases, runs) mean, a sentence each.
    fn notes(&self, kind: &str, spans: &[Span]) -> Vec<String> {
        let mut notes = Vec::new();
        if spans.iter().any(|s| s.session.is_some()) {
            notes.push(if kind == "runs" {
                "sK run N: run N of session K of this --append'ed recording (each bench numbers its runs from 1; the sessions are listed above)".into()
            } else {
                "sK +T: T into session K of this --append'ed recording, on that session's clock (the sessions are listed above)".into()
            });
        }
        let partial = |s: &&Span| s.peak.scope.is_partial();
        if spans
            .iter()
            .filter(partial)
            .any(|s| !s.facts.restart_peak_unknown)
        {
            notes.push(format!(
                "≥: processes left the tree in the {kind} so marked with no exit record read: the peak is the largest VmHWM the samples saw, a lower bound"
            ));
        }
        if spans
            .iter()
            .filter(partial)
            .any(|s| s.facts.restart_peak_unknown)
        {
            notes.push(format!(
                "≥: the target restarted in the {kind} so marked, and the process before it has no peak known there (its VmHWM never rose above the mark it brought in): the peak is the largest the marks and samples saw, a lower bound"
            ));
        }
        if spans.iter().any(|s| s.facts.late_boundary) {
            notes.push(
                "(late): a boundary's sample came late, so memory of the span next to it may be counted here: not exact".into(),
            );
        }
        if self.tree {
            notes.push(
                "tree: the tree's own peak lies within these bounds (at least the largest process's peak, at most the sum of the processes' VmHWM)".into(),
            );
        }
        if self.cgroup {
            notes.push(
                "cgroup peak: the cgroup's (each page once, page cache included), exact (*) where its peak file was reset at the span's start or rose in it, else the largest sampled usage".into(),
            );
        }
        if self.gpu_kernel {
            notes.push(crate::analysis::gpu::GpuKernelPeak::legend().to_string());
        }
        if self.faults {
            notes.push(
                "major faults: pages the tree had to read from disk or swap (a count, /proc/PID/stat majflt)".into(),
            );
        }
        if self.stall {
            notes.push(MemoryHealth::stall_legend(self.stall_cgroup).to_string());
        }
        if self.swap {
            notes.push(MemoryHealth::swap_legend(self.swap_cgroup).to_string());
        }
        if self.thp {
            notes.push(MemoryHealth::thp_legend().to_string());
        }
        if self.oom {
            notes.push(MemoryHealth::oom_legend());
        }
        if self.numa {
            notes.push(
                "NUMA nodes: the recorded cgroup's most memory on each node (memory.numa_stat)"
                    .into(),
            );
        }
        if self.processes > 1 {
            notes.push(format!(
                "sampled sizes are RSS sums over up to {} processes, shared pages counted in each{}",
                self.processes,
                if self.pss {
                    "; PSS: sum of PSS, each page once (peak where a read came at the span's RSS peak)"
                } else {
                    " (record with --pss for a sum that counts them once)"
                }
            ));
        }
        notes
    }

    fn head(&self) -> Vec<String> {
        let mut head = vec!["label", "start", "duration", "peak"];
        if self.tree {
            head.push("tree");
        }
        head.extend(["sampled peak", "mean", "start RSS", "end RSS"]);
        for (on, name) in [
            (self.cgroup, "cgroup peak"),
            (self.pss, "PSS"),
            (self.gpu, "GPU sampled peak"),
            (self.gpu_kernel, "GPU kernel peak"),
            (self.faults, "major faults"),
            (self.stall, "memory stall"),
            (self.swap, "swap"),
            (self.thp, "huge pages"),
            (self.oom, "OOM kills"),
            (self.numa, "NUMA nodes"),
        ] {
            if on {
                head.push(name);
            }
        }
        head.into_iter().map(String::from).collect()
    }

    fn row(&self, s: &Span) -> Vec<String> {
        let mut row = vec![
            s.label.clone(),
            // A phase of one session of several: its start on that session's clock, named.
            match s.session.filter(|_| s.run.is_none()) {
                Some(k) => format!("s{k} +{}", fmt_seconds(s.start_elapsed_s)),
                None => format!("+{}", fmt_seconds(s.start_elapsed_s)),
            },
            format!(
                "{}{}",
                fmt_seconds(s.duration_s),
                if s.complete { "" } else { " (open)" }
            ),
            format!(
                "{}{}",
                s.peak.cell(),
                if s.facts.late_boundary { " (late)" } else { "" }
            ),
        ];
        if self.tree {
            row.push(s.peak.tree_bounds().unwrap_or_else(|| "-".into()));
        }
        // A run that ended before its first sample has no sampled size.
        let sampled = |b: u64| {
            if s.samples == 0 {
                "-".to_string()
            } else {
                fmt_bytes(b)
            }
        };
        row.extend([
            sampled(s.facts.sampled_peak_rss_bytes),
            sampled(s.mean_rss_bytes),
            sampled(s.start_rss_bytes),
            sampled(s.end_rss_bytes),
        ]);
        if self.cgroup {
            row.push(
                match (s.facts.cgroup_peak_bytes, s.cgroup_sampled_peak_bytes) {
                    // Exact as the peak column is: not where a boundary came late or rows
                    // were lost.
                    (Some(p), _) if s.facts.late_boundary => format!("{} (late)", fmt_bytes(p)),
                    (Some(p), _) if s.facts.rows_lost => fmt_bytes(p),
                    (Some(p), _) => format!("{} *", fmt_bytes(p)),
                    (None, Some(c)) => format!("{} (sampled)", fmt_bytes(c)),
                    (None, None) => "-".into(),
                },
            );
        }
        if self.pss {
            row.push(match &s.pss {
                Some(r) if r.is_peak => {
                    format!("{} ({} reads)", fmt_bytes(r.largest_bytes), r.reads)
                }
                Some(r) => format!(
                    "{} not at the peak ({})",
                    fmt_bytes(r.largest_bytes),
                    r.reads_note()
                ),
                None => "-".into(),
            });
        }
        if self.gpu {
            row.push(s.peak_gpu_bytes.map_or("-".into(), fmt_bytes));
        }
        if self.gpu_kernel {
            row.push(s.gpu_kernel.cell());
        }
        if self.faults {
            row.push(s.health.faults_cell());
        }
        if self.stall {
            row.push(s.health.stall_cell());
        }
        if self.swap {
            row.push(s.health.swap_cell());
        }
        if self.thp {
            row.push(s.health.thp_cell());
        }
        if self.oom {
            row.push(s.health.oom_cell());
        }
        if self.numa {
            row.push(crate::render::span::numa_cell(&s.numa_nodes));
        }
        row
    }
}

fn by_label_table(by_label: &[LabelStats]) -> Option<Table> {
    if by_label.is_empty() {
        return None;
    }
    let head = ["label", "count", "duration", "peak", "peak of"];
    let rows: Vec<Vec<String>> = by_label
        .iter()
        .map(|l| {
            let d = &l.duration_s;
            let p = &l.peak_bytes;
            let b = |v: f64| fmt_bytes(v.round() as u64);
            vec![
                l.label.clone(),
                l.count.to_string(),
                format!(
                    "{} [{}, {}]",
                    fmt_seconds(d.mean),
                    fmt_seconds(d.min),
                    fmt_seconds(d.max)
                ),
                format!(
                    "{} [{}, {}]{}",
                    b(p.mean),
                    b(p.min),
                    b(p.max),
                    if l.exact == l.count { " *" } else { "" }
                ),
                match l.peak_basis {
                    PeakBasis::Cgroup => "tree (cgroup)".into(),
                    PeakBasis::Kernel if l.tree => "largest process".into(),
                    PeakBasis::Kernel => "process".into(),
                    PeakBasis::Sampled => "sampled".into(),
                },
            ]
        })
        .collect();
    Some(Table {
        title: "phases by label (complete phases of labels that came more than once: mean [min, max]; * all exact)".into(),
        notes: Vec::new(),
        head: head.into_iter().map(String::from).collect(),
        rows,
        footer: Vec::new(),
    })
}
