//! The summary as text: what `memmon summary` prints for a recording (`Summary::render`), its
//! tables as data for the report too (`Summary::processes_table`, `Phases::tables`), and the
//! words of what it says in a phrase (what a session watched, how it ended, where an exact peak
//! stops being exact, why a cgroup is not the tree's), which the JSON holds too. The numbers are
//! decided in `analysis::summary`; this file only says them.

use crate::analysis::anatomy::{AnatomyAt, AnatomyDiff, GroupChange, Measure};
use crate::analysis::summary::{
    process_name, CgroupSummary, Ended, EndedBy, ExactUpTo, NotTheTree, Summary, Watched,
    PROCESSES_SHOWN,
};
use crate::analysis::timeline::When;
use crate::analysis::warnings::Warning;
use crate::format::meta::EndReason;
use crate::model::anatomy::{Group, GroupKind};
use crate::model::peak::{exact_within, KernelPeakWindow, NotExact, PeakSource};
use crate::outside::shown;
use crate::render::table::Table;
use crate::units::{count, fmt_bytes, fmt_bytes_signed, fmt_seconds, fmt_unix_ms};
use std::fmt::Write as _;

/// `1.50 GiB (1610612736 bytes)`.
fn bytes(v: u64) -> String {
    format!("{} ({})", fmt_bytes(v), count(v, "byte"))
}

/// How exact a peak is that rows lost from the file may have held more than (`PeakFacts::rows_lost`).
const ROWS_LOST: &str =
    "exact only up to the last row left, a lower bound: rows were lost from the file (see the warning below)";

/// The most groups `what grew` lists; the rest are summed on one line.
const ANATOMY_LINES: usize = 8;

/// The groups that changed, a line each (at most `ANATOMY_LINES`, the rest summed on one).
pub fn change_lines(o: &mut String, changes: &[GroupChange]) {
    let shown = changes.len().min(ANATOMY_LINES);
    for c in &changes[..shown] {
        let _ = writeln!(
            o,
            "                {:>11}  {}",
            fmt_bytes_signed(c.delta_bytes),
            describe(c)
        );
    }
    let rest = &changes[shown..];
    if !rest.is_empty() {
        let sum: i64 = rest.iter().map(|c| c.delta_bytes).sum();
        let _ = writeln!(
            o,
            "                {:>11}  in {} other groups",
            fmt_bytes_signed(sum),
            rest.len()
        );
    }
}

/// What grew in each span (`what`: `phase`, `run`): a heading line per span, then its changes.
pub fn span_growth_lines(
    o: &mut String,
    spans: &[crate::analysis::anatomy::SpanGrowth],
    what: &str,
) {
    for g in spans {
        let grew = grew_words(&g.diff, [&g.from, &g.to]);
        let name = if what == "run" {
            g.label.clone()
        } else {
            format!("{what} {} '{}'", g.index, g.label)
        };
        let late = if g.late { LATE_WORDS } else { "" };
        let _ = writeln!(
            o,
            "    {name}: {grew}, from the {} anatomy at +{} to the {} one at +{}{late}",
            g.from.trigger.key(),
            fmt_seconds(g.from.elapsed_s),
            g.to.trigger.key(),
            fmt_seconds(g.to.elapsed_s)
        );
        growth_lines(o, [&g.from, &g.to], &g.diff.changes);
        if !g.diff.stacks.is_empty() {
            let _ = writeln!(
                o,
                "                by stack (the ledger's mappings, resident bytes where smaps was read at both ends, else mapped):"
            );
            crate::render::stacks::change_lines(o, &g.diff.stacks, SPAN_STACK_LINES);
        }
        if !g.diff.touches.is_empty() {
            let _ = writeln!(
                o,
                "                by touch (resident memory by the code that touched it, sampled page faults{}):",
                if g.to.ledger_lost > 0 {
                    format!(
                        "; the kernel had dropped {}: samples are missing",
                        count(g.to.ledger_lost, "record")
                    )
                } else {
                    String::new()
                }
            );
            crate::render::stacks::touch_change_lines(o, &g.diff.touches, SPAN_STACK_LINES);
        }
    }
}

/// The most stacks a phase's or run's growth lists.
const SPAN_STACK_LINES: usize = 5;

/// Said of a span whose boundary was taken late.
const LATE_WORDS: &str =
    " (late: a boundary's row came late, so what came after it may be counted here)";

/// A table of the groups that changed between two anatomies: the change, the group, and its
/// size on each side (`sides`), in the difference's measure; `-` where a side has none of it.
fn growth_table(title: String, note: String, sides: [&str; 2], diff: &AnatomyDiff) -> Table {
    let size = |grp: Option<&Group>| match grp {
        None => "-".to_string(),
        Some(grp) => fmt_bytes(match diff.measure {
            Measure::Resident => grp.resident.map_or(0, |r| r.resident_bytes()),
            Measure::Virtual => grp.virtual_bytes,
        }),
    };
    Table {
        title,
        notes: vec![note],
        head: ["change", "group", sides[0], sides[1]]
            .map(String::from)
            .to_vec(),
        rows: diff
            .changes
            .iter()
            .map(|c| {
                vec![
                    fmt_bytes_signed(c.delta_bytes),
                    describe(c),
                    size(c.from.as_ref()),
                    size(c.to.as_ref()),
                ]
            })
            .collect(),
        footer: Vec::new(),
    }
}

/// What a difference of two anatomies is measured in, in words.
pub fn measure_words(m: Measure, one_had_smaps: bool) -> &'static str {
    match m {
        Measure::Resident => "resident (smaps)",
        Measure::Virtual if one_had_smaps => {
            "virtual size (maps; one of the two read without smaps)"
        }
        Measure::Virtual => "virtual size (maps; a process's smaps was not read)",
    }
}

/// `+240.0 MiB resident (smaps)`: a growth between two anatomies (`sides`), in its measure;
/// `unknown` where neither read any process's mappings.
pub fn grew_words(diff: &AnatomyDiff, sides: [&AnatomyAt; 2]) -> String {
    if sides.iter().all(|a| a.processes == 0) {
        return "unknown (no process's mappings could be read)".into();
    }
    let measure = measure_words(diff.measure, sides.iter().any(|a| a.resident_known));
    format!("{} {measure}", fmt_bytes_signed(diff.delta_bytes))
}

/// The lines under a growth: its changes (or that none changed), then the processes its
/// anatomies did not read and why (three, then a count).
pub fn growth_lines(o: &mut String, sides: [&AnatomyAt; 2], changes: &[GroupChange]) {
    let read = sides.iter().any(|a| a.processes > 0);
    if read && changes.is_empty() {
        let _ = writeln!(o, "                no group changed");
    }
    change_lines(o, changes);
    let mut unread: Vec<&String> = Vec::new();
    for w in sides.iter().flat_map(|a| &a.not_read) {
        if !unread.contains(&w) {
            unread.push(w);
        }
    }
    for w in unread.iter().take(3) {
        let _ = writeln!(o, "                not read: {w}");
    }
    if unread.len() > 3 {
        let _ = writeln!(o, "                not read: {} more", unread.len() - 3);
    }
}

/// `640 µs`, `12.3 ms`.
fn fmt_us(us: u64) -> String {
    if us >= 1000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else {
        format!("{us} µs")
    }
}

/// One group that changed, in words: `10 anonymous mappings of 24.0 MiB (new)`, `heap`.
fn describe(c: &GroupChange) -> String {
    let what = group_words(&c.key, c.to.as_ref().or(c.from.as_ref()));
    let tag = if c.new {
        " (new)"
    } else if c.gone {
        " (gone)"
    } else {
        ""
    };
    format!("{what}{tag}")
}

/// One group in words, from its key and its numbers where known: `10 anonymous mappings of
/// 24.0 MiB`, `memfd 'params' (1 mapping of 32.0 MiB)`, `heap ([heap])`.
pub fn group_words(key: &crate::model::anatomy::GroupKey, g: Option<&Group>) -> String {
    let n = g.map_or(0, |g| g.mappings);
    let sizes = g.map_or(String::new(), |g| {
        if g.min_mapping_bytes == g.max_mapping_bytes {
            fmt_bytes(g.max_mapping_bytes)
        } else {
            format!(
                "{} to {}",
                fmt_bytes(g.min_mapping_bytes),
                fmt_bytes(g.max_mapping_bytes)
            )
        }
    });
    let mappings = |what: &str| {
        if n == 1 {
            format!("1 {what} of {sizes}")
        } else {
            format!("{n} {what}s of {sizes}")
        }
    };
    let name = shown(&key.name);
    let rest = if key.rest {
        "smaller ones gathered: "
    } else {
        ""
    };
    let what = match key.kind {
        GroupKind::Heap => "heap ([heap])".to_string(),
        GroupKind::Stack => "main thread's stack".to_string(),
        GroupKind::ThreadStacks => format!("{n} thread stack(s)"),
        GroupKind::Arenas => format!("{n} malloc arena(s)"),
        GroupKind::Anon => mappings("anonymous mapping"),
        GroupKind::Reserved => mappings("no-access reservation"),
        GroupKind::SharedAnon => mappings("shared anonymous mapping"),
        GroupKind::Named => format!("[anon:{name}] ({})", mappings("mapping")),
        GroupKind::Memfd => format!("memfd '{name}' ({})", mappings("mapping")),
        GroupKind::Shm => format!("shared memory {name} ({})", mappings("mapping")),
        GroupKind::Sysv => format!("SysV shared memory {name}"),
        GroupKind::Device => format!("device {name} ({})", mappings("mapping")),
        GroupKind::HugePages => mappings("huge-page mapping"),
        GroupKind::Binary => format!("the program {name}"),
        GroupKind::Library => format!("library {name}"),
        GroupKind::File => format!("file {name} ({})", mappings("mapping")),
        GroupKind::Special => name.to_string(),
    };
    format!("{rest}{what}")
}

impl Summary {
    /// Reads the anatomy table the metadata names (`record --anatomy`), next to the recording
    /// `file`, into the summary: what grew between the idle floor and the peak. A table that is
    /// not there is said (the recording is still summarized); one that is malformed is an error.
    pub fn read_anatomy(&mut self, file: &std::path::Path) -> Result<(), crate::format::ReadError> {
        let name = self.anatomy_table.clone();
        if let Some(table) = self.side_table(file, name, "anatomy") {
            let anatomies = crate::format::anatomy::read(&table)?;
            self.with_anatomies(&anatomies);
        }
        Ok(())
    }

    /// Reads the NUMA table the metadata names, beside `file` (the cgroup's memory per node):
    /// each node's most memory over the recording and each phase and run.
    pub fn read_numa(&mut self, file: &std::path::Path) -> Result<(), crate::format::ReadError> {
        let name = self.numa_table.clone();
        if let Some(table) = self.side_table(file, name, "NUMA") {
            let t = crate::format::numa::read(&table)?;
            self.with_numa(&t.nodes, &t.rows);
        }
        Ok(())
    }

    /// The path of the side table (`what`: anatomy, NUMA) the metadata names as `name`, beside
    /// the recording `file`; `None`, with a note where it cannot be read, without one.
    fn side_table(
        &mut self,
        file: &std::path::Path,
        name: Option<String>,
        what: &'static str,
    ) -> Option<std::path::PathBuf> {
        let name = name?;
        if file == std::path::Path::new("-") {
            self.warnings
                .push(Warning::SideTableOnStdin { table: what, name });
            return None;
        }
        // Only a file name: a metadata that names a path elsewhere is not followed.
        let table = file.with_file_name(std::path::Path::new(&name).file_name()?);
        if !table.is_file() {
            self.warnings.push(Warning::SideTableMissing {
                table: what,
                path: table,
            });
            return None;
        }
        Some(table)
    }

    /// What grew between the idle floor and the peak as a table (`report`).
    pub fn anatomy_table(&self) -> Option<Table> {
        let g = self.anatomy.as_ref()?;
        let grew = grew_words(&g.diff, [&g.from, &g.to]);
        Some(growth_table(
            format!(
                "what grew between the idle floor and the peak: {grew}",
            ),
            format!(
                "from the anatomy nearest the idle floor at +{} (RSS {}) to the highest at +{} (RSS {})",
                fmt_seconds(g.from.elapsed_s),
                fmt_bytes(g.from.rss_bytes),
                fmt_seconds(g.to.elapsed_s),
                fmt_bytes(g.to.rss_bytes)
            ),
            ["at idle", "at the highest"],
            &g.diff,
        ))
    }

    /// What grew in each phase with an anatomy at its end, one table each (as `summary` says
    /// under "what grew by phase"), for the report.
    pub fn phase_anatomy_tables(&self) -> Vec<Table> {
        self.phase_anatomy
            .iter()
            .map(|g| {
                let grew = grew_words(&g.diff, [&g.from, &g.to]);
                growth_table(
                    format!("what grew in phase {} '{}': {grew}", g.index, g.label,),
                    format!(
                        "from the {} anatomy at +{} (RSS {}) to the {} one at +{} (RSS {}){}",
                        g.from.trigger.key(),
                        fmt_seconds(g.from.elapsed_s),
                        fmt_bytes(g.from.rss_bytes),
                        g.to.trigger.key(),
                        fmt_seconds(g.to.elapsed_s),
                        fmt_bytes(g.to.rss_bytes),
                        if g.late { LATE_WORDS } else { "" }
                    ),
                    ["at its start", "at its highest"],
                    &g.diff,
                )
            })
            .collect()
    }

    /// For a peak of several processes: `, 9 processes: RSS sum over 9 processes, shared pages
    /// counted in each; PSS sum 300 MiB at that tick (each page once)`.
    fn tree_words(&self) -> String {
        if self.sampled_peak_processes <= 1 {
            return String::new();
        }
        let mut w = format!(
            ", {} processes: {}",
            self.sampled_peak_processes,
            rss_sum_words(self.sampled_peak_processes)
        );
        match (self.pss_at_peak_bytes, &self.pss) {
            (Some(p), _) => {
                let _ = write!(
                    w,
                    "; PSS sum at that tick {} (each page once)",
                    fmt_bytes(p)
                );
            }
            (None, Some(r)) => {
                let _ = write!(w, "; {} of the tree (each page once)", r.describe());
            }
            (None, None) => w.push_str(" (record with --pss for a sum that counts them once)"),
        }
        w
    }

    /// The largest processes of a tree by their peak within the recording (VmHWM), from the
    /// end record: a table for the summary and the report (none for a single process). A
    /// process older than the recording whose mark neither was reset nor rose has no peak
    /// known there: it shows `≥` the largest RSS read, and its lifetime mark in a note.
    pub fn processes_table(&self) -> Option<Table> {
        let end = self.end.as_ref()?;
        // Every session's processes (an appended recording's peak may be an earlier one's).
        let all = &self.processes;
        if all.len() < 2 {
            return None;
        }
        let shown = &all[..all.len().min(PROCESSES_SHOWN)];
        // A process that left has its peak at its exit only from its exit record; without one,
        // that of its last sample.
        let exact = self.processes_exit_records || self.facts.departed == 0;
        // Recorded before memmon kept each process's peak within the recording: the marks as
        // read, which for a process older than the recording may be set before it (every
        // process of a launched command began with the recording).
        let as_read = shown.iter().any(|p| p.recording_peak().1.is_none())
            && self.kernel_peak_window != KernelPeakWindow::Launched;
        let lower: Vec<_> = shown
            .iter()
            .filter(|p| p.recording_peak().1 == Some(false))
            .collect();
        let mut notes = Vec::new();
        if !exact {
            notes.push(format!(
                "{} left the tree, and not every exit record was read (exit records: {}): one that left has the peak of its last sample, and may have risen after it",
                crate::units::count(self.facts.departed, "process"),
                end.exit_records.as_deref().unwrap_or("not known")
            ));
        }
        if !lower.is_empty() {
            notes.push(format!(
                "≥: older than the recording, with a high-water mark that was not reset and did not rise during it: its peak in the recording is not known, and is at least the largest RSS read (lifetime peak, set before the recording: {})",
                lower
                    .iter()
                    .map(|p| format!("PID {} {}", p.pid, fmt_bytes(p.hwm_bytes)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if as_read {
            notes.push("recorded by a memmon that did not keep each process's peak within the recording: a process older than the recording may show its lifetime peak, set before it".into());
        }
        Some(Table {
            title: format!(
                "processes: the {} largest by peak in the recording (VmHWM, {}{}) of {} listed{}",
                shown.len(),
                match (exact, as_read) {
                    (_, true) => "as last read, maybe from before the recording",
                    (true, false) => "exact per process",
                    (false, false) => "as last read",
                },
                if lower.is_empty() {
                    ""
                } else {
                    "; ≥ a lower bound"
                },
                all.len(),
                if self.sessions.len() > 1 {
                    ", every session's"
                } else {
                    ""
                }
            ),
            notes,
            head: ["process", "PID", "peak", "bytes"]
                .map(String::from)
                .to_vec(),
            rows: shown
                .iter()
                .map(|p| {
                    let (bytes, exact) = p.recording_peak();
                    let at_least = if exact == Some(false) { "≥ " } else { "" };
                    vec![
                        process_name(p),
                        p.pid.to_string(),
                        format!("{at_least}{}", fmt_bytes(bytes)),
                        bytes.to_string(),
                    ]
                })
                .collect(),
            footer: Vec::new(),
        })
    }

    /// How exact the kernel's per-process peak is, in words, with its window.
    fn kernel_exactness(&self) -> String {
        if self.facts.kernel_scope().is_partial() {
            return "a lower bound (see the warning below)".into();
        }
        if self.facts.rows_lost {
            return ROWS_LOST.into();
        }
        self.kernel_exact_only_up_to()
            .map(|u| u.to_string())
            .unwrap_or_else(|| exact_within(self.facts.exact_within_bytes))
    }

    /// The peak is that of a session with rows and no end record: the recorder was killed, or
    /// is still writing. It is exact up to that session's last row only.
    fn unended(&self) -> bool {
        self.peak_unended
    }

    /// The headline: the recording's peak, what it is, and for a tree its bounds.
    fn render_peak(&self, o: &mut String) {
        let b = bytes;
        let p = &self.peak;
        let how = match p.source {
            // What it needed with swap, or a cgroup's peak a process's own stands above: the
            // peak's own words, then its window.
            _ if p.ram_bytes.is_some() || p.why_not_exact == NotExact::ProcessAbove => format!(
                "{} ({})",
                p.describe(self.facts.exact_within_bytes),
                self.kernel_peak_window_words(p.source == PeakSource::Cgroup)
            ),
            PeakSource::Sampled => {
                let why = match self.kernel_peak_window {
                    // The target exited after the last sample, its exit record unread: what
                    // its mark did then is not known, whatever it did before.
                    _ if self.kernel_peak_exact_until_s.is_some() => &self.exited_unseen(),
                    KernelPeakWindow::BeforeRecording if self.end.as_ref().is_some_and(|e| e.peak_reset_failures > 0) => "the kernel's high-water mark (VmHWM) was set before the recording began and did not rise, and resetting it was refused: only the target's owner and root may write /proc/PID/clear_refs (only root, for a process that is not dumpable, such as a setuid program); run memmon as the target's user or as root for an exact peak from the start",
                    KernelPeakWindow::BeforeRecording => "the kernel's high-water mark (VmHWM) was set before the recording began and did not rise; record with --reset-peaks for an exact peak from the start",
                    KernelPeakWindow::NotRecorded => "no kernel high-water mark in this recording",
                    _ => "the kernel's peak does not cover every session",
                };
                format!(
                    "sampled RSS {}, a lower bound: a spike between two samples is missed ({why})",
                    p.scope
                )
            }
            PeakSource::Cgroup if self.facts.rows_lost => format!(
                "cgroup {} {}, {ROWS_LOST}: each page once, page cache included ({})",
                p.counter,
                p.scope,
                self.kernel_peak_window_words(true)
            ),
            PeakSource::Cgroup => format!(
                "cgroup {} {}, exact{}: each page once, page cache included ({})",
                p.counter,
                p.scope,
                if self.unended() {
                    " up to the last row (no end record)"
                } else {
                    ""
                },
                self.kernel_peak_window_words(true)
            ),
            _ => format!(
                "{} {}, {} ({})",
                p.source,
                p.scope,
                self.kernel_exactness(),
                self.kernel_peak_window_words(false)
            ),
        };
        let _ = writeln!(o, "  peak          {}{}: {how}", p.at_least(), b(p.bytes));
        if let Some(bounds) = p
            .tree_bounds()
            .filter(|_| self.facts.cgroup_peak_holds_cache())
        {
            let _ = writeln!(
                o,
                "  tree peak     {bounds}, page cache left out (at least the largest process's own peak and the cgroup's usage less the {} of page cache no process mapped, at most the cgroup's peak, which holds that cache, or the sum of the processes' VmHWM)",
                b(self.facts.cgroup_cache_sampled_bytes)
            );
        } else if let Some(bounds) = p.tree_bounds() {
            let _ = writeln!(
                o,
                "  tree peak     {bounds} (at least the {}, at most the sum of the processes' VmHWM{}; give the tree a cgroup of its own for its exact peak)",
                if p.source == PeakSource::Sampled {
                    "RSS sum sampled at one tick, which counts a page processes share in each"
                } else {
                    "largest process's own peak"
                },
                match p.tree_high_bytes {
                    Some(_) => "",
                    // An import, or rows with no marks read: no sum to bound it.
                    None if self.facts.hwm_sum_bytes == 0 => {
                        ": unknown, the recording has no high-water marks"
                    }
                    None => ": unknown, processes left with no exit record read",
                }
            );
        }
    }

    /// Why the kernel's peak is not the headline of a target that exited after its last
    /// sample with no exit record read.
    fn exited_unseen(&self) -> String {
        let gap = self.kernel_peak_exact_until_s.unwrap_or(0.0);
        let records = self
            .end
            .as_ref()
            .and_then(|e| e.exit_records.as_deref())
            .unwrap_or("not read");
        format!(
            "the target exited {} after the last sample and no exit record was read (exit records: {records}): its high-water mark{} then is not known",
            fmt_seconds(gap),
            if self.kernel_peak_window == KernelPeakWindow::BeforeRecording {
                " did not rise above its value at the first row up to the last sample, and"
            } else {
                ""
            }
        )
    }

    /// `since the launch of the command`, `reached during the recording`.
    fn kernel_peak_window_words(&self, cgroup: bool) -> String {
        if cgroup {
            return match &self.cgroup {
                Some(c) if c.own => {
                    "memmon's own cgroup, holding the tree alone since the launch".into()
                }
                _ => "the cgroup holds the tree alone".into(),
            };
        }
        match self.kernel_peak_window {
            // The number is the largest mark after the reset or the restart; the marks before
            // are older than the recording.
            KernelPeakWindow::RoseDuringRecording if self.facts.reset_peak_unknown => {
                "reached after the first marker's reset".into()
            }
            KernelPeakWindow::RoseDuringRecording if self.facts.restart_peak_unknown => {
                "reached by the process that took over at the restart".into()
            }
            w if self.facts.mark_reset_elsewhere => {
                format!("{w}, but a process's mark fell: reset by itself or another program, or by reclaim")
            }
            w => w.to_string(),
        }
    }

    /// The kernel's per-process peak when it is not the headline (a cgroup's is), or why the
    /// kernel tells none.
    fn render_kernel_peak(&self, o: &mut String) {
        let b = bytes;
        match (
            self.facts.kernel_peak_rss_bytes,
            self.facts.kernel_peak_source,
        ) {
            (Some(_), _) if self.peak.source != PeakSource::Cgroup => {}
            (Some(k), Some(source)) => {
                let scope = self.facts.kernel_scope();
                let _ = writeln!(
                    o,
                    "  kernel peak   {}{} ({}, {source} {scope}, {})",
                    if scope.is_partial() { "≥ " } else { "" },
                    b(k),
                    self.kernel_exactness(),
                    self.kernel_peak_window
                );
            }
            _ if self.kernel_peak_window == KernelPeakWindow::BeforeRecording => {
                if let Some(l) = self.lifetime_peak_rss_bytes {
                    let _ = writeln!(
                        o,
                        "  lifetime peak {} (kernel VmHWM {}, since it started or its mark was last reset (a bench, or any write to /proc/PID/clear_refs), before this recording: not this recording's peak)",
                        b(l),
                        self.facts.kernel_scope()
                    );
                }
                if self.kernel_peak_exact_until_s.is_some() {
                    let _ = writeln!(o, "  at exit       {}", self.kernel_exactness());
                }
            }
            _ => {}
        }
        // A reset at a marker or a restart took over from a mark that never rose: it bounds
        // the peak before it from above.
        if let (Some(l), Some(_)) = (
            self.lifetime_peak_rss_bytes,
            self.facts.kernel_peak_rss_bytes,
        ) {
            if self.kernel_peak_window != KernelPeakWindow::BeforeRecording {
                let _ = writeln!(
                    o,
                    "  lifetime peak {} (the largest VmHWM at the first row, set before the recording and never risen before the {}: the peak before it is at most this)",
                    b(l),
                    if self.facts.reset_peak_unknown {
                        "first marker's reset"
                    } else {
                        "restart"
                    }
                );
            }
        }
    }

    /// `locked (VmLck) peak 512.0 MiB, at idle 512.0 MiB of the 642.0 MiB floor`: how much of
    /// the idle floor is memory the kernel will not reclaim (locked) or a driver holds (pinned),
    /// and shared memory; `None` when the recording held none.
    pub fn held_words(&self) -> Option<String> {
        if self.held.is_empty() {
            return None;
        }
        let idle = self.idle_rss_bytes;
        let mut parts = Vec::new();
        for (what, counter, peak, at_idle) in [
            (
                "locked",
                "VmLck",
                self.held.locked_bytes,
                self.held_at_idle.locked_bytes,
            ),
            (
                "pinned",
                "VmPin",
                self.held.pinned_bytes,
                self.held_at_idle.pinned_bytes,
            ),
            (
                "shared",
                "RssShmem",
                self.held.shmem_bytes,
                self.held_at_idle.shmem_bytes,
            ),
        ] {
            if peak == 0 {
                continue;
            }
            parts.push(format!(
                "{what} ({counter}) peak {}, at idle {} of the {} floor",
                fmt_bytes(peak),
                fmt_bytes(at_idle),
                fmt_bytes(idle)
            ));
        }
        Some(parts.join("; "))
    }

    fn render_sessions(&self, o: &mut String) {
        if self.sessions.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "  sessions      {} (--append), each with its own clock:",
            self.sessions.len()
        );
        for line in self.session_lines() {
            let _ = writeln!(o, "                {line}");
        }
    }

    /// One line per session of an `--append`ed recording: `2. command ./prove from …, 4.00 s,
    /// 5 samples every 1s, peak 300.0 MiB * (memory.peak); the target exited, exit code 0`.
    pub fn session_lines(&self) -> Vec<String> {
        self.sessions
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                "{}. {} from {}, {}, {}{}, peak {} ({}); {}",
                i + 1,
                s.target
                    .as_ref()
                    .map_or_else(|| "target unknown (no metadata)".into(), Watched::to_string),
                if s.started_unix_ms > 0 {
                    fmt_unix_ms(s.started_unix_ms)
                } else {
                    "?".into()
                },
                fmt_seconds(s.duration_s),
                count(s.samples, "sample"),
                s.interval
                    .as_deref()
                    .map(|i| format!(" every {i}"))
                    .unwrap_or_default(),
                s.peak.cell(),
                s.peak.counter,
                s.ended.as_ref().map_or_else(
                    || "no end record (the recorder was killed, or is still writing): exact up to its last row".into(),
                    EndedBy::to_string
                )
            )
            })
            .collect()
    }

    /// The human-readable summary. Sizes in binary units (GiB = 2^30 bytes) with exact bytes.
    pub fn render(&self) -> String {
        let mut o = String::new();
        if let Some(f) = &self.file {
            let _ = writeln!(o, "{f}");
        }
        if self.sessions.is_empty() {
            if let Some(t) = &self.target {
                let _ = writeln!(o, "  target        {}", shown(&t.to_string()));
            }
        } else {
            self.render_sessions(&mut o);
        }
        if self.samples == 0 {
            self.render_rowless(&mut o);
            return o;
        }
        self.render_peak(&mut o);
        self.render_sampled_peak(&mut o);
        self.render_kernel_peak(&mut o);
        if let Some(c) = &self.cgroup {
            c.render(&mut o, self.peak.source == PeakSource::Cgroup);
        }
        self.render_pss(&mut o);
        self.render_anatomy(&mut o);
        if let Some(g) = &self.gpu {
            o.push_str(&g.render(self.sessions.len()));
        }
        self.render_levels(&mut o);
        if let Some(t) = self.processes_table() {
            t.write_text(&mut o);
        }
        self.render_duration(&mut o);
        o.push_str(&self.spans.render());
        self.render_phase_anatomy(&mut o);
        for w in &self.warnings {
            let _ = writeln!(o, "  {w}");
        }
        o
    }

    /// What grew between the idle floor and the peak (`record --anatomy`): the groups that
    /// moved, largest change first, in resident bytes where both anatomies read smaps.
    fn render_anatomy(&self, o: &mut String) {
        let Some(g) = &self.anatomy else {
            return;
        };
        let grew = grew_words(&g.diff, [&g.from, &g.to]);
        let at = |a: &crate::analysis::anatomy::AnatomyAt| {
            format!(
                "+{} (RSS {})",
                fmt_seconds(a.elapsed_s),
                fmt_bytes(a.rss_bytes)
            )
        };
        let _ = writeln!(
            o,
            "  what grew     {grew}, from the anatomy nearest the idle floor at {} to the highest at {}:",
            at(&g.from),
            at(&g.to)
        );
        growth_lines(o, [&g.from, &g.to], &g.diff.changes);
        if self
            .anatomy_at_peak
            .as_ref()
            .is_some_and(|a| a.ledger_unanswered)
        {
            let _ = writeln!(
                o,
                "  by stack      at the highest anatomy, none: {}",
                crate::render::stacks::UNANSWERED
            );
        }
        if let Some(l) = self
            .anatomy_at_peak
            .as_ref()
            .and_then(|a| a.ledger.as_ref())
        {
            let _ = writeln!(
                o,
                "  by stack      at the highest anatomy, {}:",
                crate::render::stacks::live_heading(l)
            );
            crate::render::stacks::live_lines(o, l, &g.diff.stacks);
            if let Some(t) = &l.touch {
                let _ = writeln!(
                    o,
                    "  by touch      at the highest anatomy, {}:",
                    crate::render::stacks::touch_heading(
                        t,
                        !self.target.as_ref().is_some_and(Watched::launched),
                        l.lost,
                        l.at_unix_ms
                    )
                );
                crate::render::stacks::touch_lines(o, t);
            }
        }
        if let Some(l) = &self.ledger {
            let lost = if l.lost > 0 {
                format!(
                    ", {} lost (rings full: mappings may be missing)",
                    count(l.lost, "record")
                )
            } else {
                String::new()
            };
            let touches = if l.touch_samples > 0 {
                format!(
                    ", {}{}",
                    count(l.touch_samples, "sampled page fault"),
                    if l.touches_dropped > 0 {
                        format!(
                            " ({} past the cap on pages kept, not counted)",
                            l.touches_dropped
                        )
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            };
            let touches = if l.huge_samples > 0 {
                format!(
                    "{touches}, {} faulted in{}",
                    count(l.huge_samples, "transparent huge page"),
                    if l.huge_unfound > 0 {
                        format!(
                            " ({} never found in the tree's data mappings: freed, split or moved first, not its memory, or page frames memmon may not read without CAP_SYS_ADMIN)",
                            l.huge_unfound
                        )
                    } else {
                        String::new()
                    }
                )
            } else {
                touches
            };
            let cap = if l.stacks_over_cap > 0 {
                format!(
                    " ({} past memmon's cap of {}, kept as one: [other stacks])",
                    l.stacks_over_cap,
                    crate::analysis::ledger::STACKS_KEPT
                )
            } else {
                String::new()
            };
            let mut short = Vec::new();
            if l.truncated > 0 {
                short.push(format!("{} cut short", l.truncated));
            }
            if l.stacks_completed > 0 {
                short.push(format!(
                    "{} the kernel copied short read on from the process's memory",
                    l.stacks_completed
                ));
            }
            let short = if short.is_empty() {
                String::new()
            } else {
                format!(" ({})", short.join("; "))
            };
            let rearms = if l.rearms > 0 {
                format!(
                    ", the tree's soft-dirty bits cleared {} ({} in all: rewrites sampled)",
                    count(l.rearms, "time"),
                    fmt_us(l.rearm_us)
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "  ledger        {} of the tree followed ({} read{lost}){touches}{rearms}, {} unwound{short}{cap}, {} of CPU on a thread of its own",
                count(l.calls, "call"),
                count(l.records, "record"),
                count(l.stacks, "stack"),
                fmt_us(l.cpu_us)
            );
            if let Some(first) = l.sections_refused.first() {
                let _ = writeln!(
                    o,
                    "  note: the unwind sections of {} were not read (each over {} or past its file's end, as its header said): stacks end at their frames; the first: {}",
                    count(l.sections_refused.len(), "file"),
                    fmt_bytes(crate::probe::unwind::MAX_SECTION_BYTES),
                    shown(first)
                );
            }
        }
        let taken = match (g.reads, g.reads_dropped) {
            (Some(reads), Some(dropped)) if dropped > 0 => format!(
                "{reads} taken, {} kept ({dropped} dropped: lower than another of their stretch, or at the start in the program's loader)",
                g.anatomies
            ),
            (Some(reads), _) => format!("{reads} taken"),
            (None, _) => format!("{} taken", g.anatomies),
        };
        let _ = writeln!(
            o,
            "  anatomy reads {taken}, the longest {} ({} in all, on a thread of their own)",
            fmt_us(g.longest_read_us),
            fmt_us(g.total_read_us)
        );
    }

    /// What grew in each phase (`record --anatomy` with markers): the groups that moved from the
    /// anatomy at or before the phase's start to the one at its end.
    fn render_phase_anatomy(&self, o: &mut String) {
        if self.phase_anatomy.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "  what grew by phase (from each phase's start to its highest anatomy):"
        );
        span_growth_lines(o, &self.phase_anatomy, "phase");
    }

    /// A recording without rows: a command that ended before its first sample (its end record
    /// told its peaks: wait4's, the exit records', its cgroup's), or nothing.
    fn render_rowless(&self, o: &mut String) {
        if self.facts.kernel_peak_rss_bytes.is_some() || self.facts.cgroup_peak_bytes.is_some() {
            self.render_peak(o);
            self.render_kernel_peak(o);
            if let Some(c) = &self.cgroup {
                c.render(o, self.peak.source == PeakSource::Cgroup);
            }
            let _ = writeln!(
                o,
                "  duration      {} ({} ended before its first sample)",
                fmt_seconds(self.duration_s),
                if self.spans.runs.is_empty() {
                    "the command"
                } else {
                    "every run"
                }
            );
            let _ = writeln!(o, "  ended         {}", self.ended);
        } else {
            let _ = writeln!(o, "  no samples");
        }
        o.push_str(&self.spans.render());
        for w in &self.warnings {
            let _ = writeln!(o, "  {w}");
        }
    }

    /// The largest sampled RSS: when, which process, and how a tree's sum counts.
    fn render_sampled_peak(&self, o: &mut String) {
        // Imported files may lack a clock (unix_ms 0) or a PID (0): print only what is known.
        let _ = writeln!(
            o,
            "  sampled peak  {} at {}{}{}",
            bytes(self.facts.sampled_peak_rss_bytes),
            self.sampled_peak_when(),
            if self.sampled_peak_pid > 0 {
                format!(", PID {}", self.sampled_peak_pid)
            } else {
                String::new()
            },
            self.tree_words(),
        );
    }

    /// PSS: a peak only where a read came at the RSS peak; the processes it could not read.
    fn render_pss(&self, o: &mut String) {
        if let Some(r) = &self.pss {
            let what = "sum of PSS: shared pages divided among the processes that map them";
            if r.is_peak {
                let _ = writeln!(
                    o,
                    "  peak PSS      {} at +{} ({what}; largest of {}, +{} to +{}, one at the RSS peak)",
                    bytes(r.largest_bytes),
                    fmt_seconds(r.largest_elapsed_s),
                    count(r.reads, "read"),
                    fmt_seconds(r.first_elapsed_s),
                    fmt_seconds(r.last_elapsed_s)
                );
            } else if r.at_idle(self.idle_rss_bytes) {
                let _ = writeln!(
                    o,
                    "  PSS at idle   {} ({}; {what}; not a peak)",
                    bytes(r.largest_bytes),
                    r.reads_note()
                );
            } else {
                // Above the idle floor yet below the peak: neither.
                let _ = writeln!(
                    o,
                    "  PSS read      {} (the largest of {}, at RSS up to {}; {what}; not a peak)",
                    bytes(r.largest_bytes),
                    r.reads_note(),
                    fmt_bytes(r.max_rss_at_read_bytes)
                );
            }
        }
        if let Some(end) = &self.end {
            for u in &end.pss_unread {
                let _ = writeln!(
                    o,
                    "  PSS unread    PID {} ({}): {}, missing from {}; those ticks have no PSS",
                    u.pid,
                    shown(&u.comm),
                    u.reason.describe(),
                    count(u.reads, "read")
                );
            }
        }
    }

    /// The idle floor, the memory held in it, and the mean.
    fn render_levels(&self, o: &mut String) {
        let sum_note = if self.facts.max_processes > 1 {
            format!(
                ", RSS sum over up to {} processes, shared pages counted in each",
                self.facts.max_processes
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "  idle floor    {} (10th percentile of sampled RSS{sum_note})",
            bytes(self.idle_rss_bytes)
        );
        if let Some(held) = self.held_words() {
            let _ = writeln!(o, "  held memory   {held}");
        }
        if let Some(health) = self.health.describe() {
            let _ = writeln!(o, "  memory health {health}");
        }
        if !self.numa_nodes.is_empty() {
            let _ = writeln!(
                o,
                "  NUMA nodes    {} (the cgroup's most memory on each, memory.numa_stat)",
                crate::render::span::numa_cell(&self.numa_nodes)
            );
        } else if let Some(why) = &self.numa_not_read {
            let _ = writeln!(o, "  NUMA nodes    not read: {why}");
        }
        if sum_note.is_empty() {
            let _ = writeln!(o, "  mean RSS      {}", bytes(self.mean_rss_bytes));
        } else {
            let _ = writeln!(
                o,
                "  mean RSS      {} ({})",
                bytes(self.mean_rss_bytes),
                &sum_note[2..]
            );
        }
    }

    /// When the sampled peak came: `2026-12-02 10:42:01.050 UTC (+201 ms)`, the elapsed time on
    /// its session's clock, and in an `--append`ed recording which session and where the plot
    /// draws it (`analysis::timeline::When`); `+201 ms (elapsed)` for a file without a clock.
    /// The report says it so too.
    pub fn sampled_peak_when(&self) -> String {
        self.sampled_peak_at().describe(self.sessions.len())
    }

    pub fn sampled_peak_at(&self) -> When {
        When {
            unix_ms: self.sampled_peak_unix_ms,
            elapsed_s: self.sampled_peak_elapsed_s,
            session: self.sampled_peak_session,
            x_s: self.sampled_peak_x_s,
        }
    }

    /// How long, how sampled, how it ended, and the units.
    fn render_duration(&self, o: &mut String) {
        let _ = writeln!(
            o,
            "  duration      {}{}, {}{}, {}, {}",
            fmt_seconds(self.duration_s),
            if self.first_unix_ms > 0 {
                format!(" from {}", fmt_unix_ms(self.first_unix_ms))
            } else {
                String::new()
            },
            count(self.samples, "sample"),
            match &self.interval {
                Some(i) => format!(" every {i}"),
                None if !self.sessions.is_empty() => " at each session's interval".into(),
                None => String::new(),
            },
            count(self.missed_ticks, "missed tick"),
            count(self.restarts, "restart")
        );
        let _ = writeln!(o, "  ended         {}", self.ended);
        let _ = writeln!(
            o,
            "  units         KiB, MiB, GiB = 2^10, 2^20, 2^30 bytes; exact bytes in parentheses"
        );
    }
}

impl CgroupSummary {
    /// `headline`: the recording's peak is this cgroup's (its line says it all already).
    pub(crate) fn render(&self, o: &mut String, headline: bool) {
        let b = bytes;
        let not_tree = match (&self.not_the_tree, self.holds_tree) {
            (Some(why), false) => format!("; not the tree's peak: {why}"),
            _ => String::new(),
        };
        match (self.peak_bytes, self.lifetime_peak_bytes) {
            (Some(_), _) if headline => {}
            (Some(p), _) => {
                let _ = writeln!(
                    o,
                    "  cgroup peak   {} (exact, {} of the cgroup: each page once, page cache included; {})",
                    b(p),
                    self.peak_counter,
                    match (&self.not_the_tree, self.holds_tree) {
                        // One process: its own peak is the headline, what it needed, which the
                        // page cache its cgroup was charged (or not) does not move.
                        (_, true) => "what the tree was charged; the headline leaves page cache out, so a file read cold or warm does not move it".to_string(),
                        (Some(why), false) => format!("not the tree's peak: {why}"),
                        (None, false) => "it may hold processes outside the tree, so it is not the tree's peak".to_string(),
                    }
                );
            }
            (None, Some(l)) => {
                let _ = writeln!(
                    o,
                    "  cgroup peak   unknown for this recording: {} ({}) was set before it began and did not rise (the cgroup's lifetime peak){not_tree}",
                    self.peak_counter,
                    b(l)
                );
            }
            (None, None) if self.peak_fell => {
                let _ = writeln!(
                    o,
                    "  cgroup peak   unknown: {} fell between two rows with no reset of memmon's (the cgroup was removed and made again, as a restarted service's is, or another program reset it), so it does not cover the recording; largest sampled usage below{not_tree}",
                    self.peak_counter
                );
            }
            (None, None) => {
                let _ = writeln!(
                    o,
                    "  cgroup peak   unknown: {} was not read over the whole recording (no peak file before Linux 5.19, or a session without it); largest sampled usage below{not_tree}",
                    self.peak_counter
                );
            }
        }
        let _ = writeln!(
            o,
            "  cgroup usage  largest sampled {}: anon {}, file (page cache) {}{}",
            b(self.largest_current_bytes),
            fmt_bytes(self.anon_at_largest_bytes),
            fmt_bytes(self.file_at_largest_bytes),
            if self.file_at_largest_bytes > self.anon_at_largest_bytes {
                "; mostly page cache, which the kernel reclaims under pressure: not heap"
            } else {
                ""
            }
        );
        let _ = writeln!(
            o,
            "  cgroup        {} ({}{}), limit {}, {} during the recording",
            shown(&self.path.to_string()),
            self.version.name(),
            if self.own {
                ", memmon's own for the command"
            } else {
                ""
            },
            self.limit_bytes.map_or("none".into(), b),
            count(self.oom_kills, "OOM kill")
        );
        for l in &self.limits {
            let set = if l.limits() {
                format!("{} set by", l.thresholds(self.version))
            } else {
                "none set by".into()
            };
            let _ = writeln!(
                o,
                "  limit         {set} {}{}",
                shown(&l.path),
                limit_events(l)
            );
        }
        if let Some(s) = self.swap_peak_bytes.filter(|&s| s > 0) {
            let _ = writeln!(
                o,
                "  cgroup swap   {} at most ({})",
                b(s),
                match self.version {
                    crate::probe::cgroup::CgroupVersion::V1 => "v1 counts none",
                    crate::probe::cgroup::CgroupVersion::V2 =>
                        "memory.swap.peak, or memory.swap.current at the start and end",
                }
            );
        }
    }
}

/// `: 51 high events, 3 max events during the recording` — what a limit's thresholds counted,
/// and whose (its own, or with the cgroups below it).
fn limit_events(l: &crate::probe::limits::LimitEnd) -> String {
    let e = l.events_during;
    let mut parts = Vec::new();
    for (n, what) in [
        (e.high, "high event"),
        (e.max, "max event"),
        (e.oom, "OOM"),
        (e.oom_kill, "OOM kill"),
    ] {
        if n > 0 {
            parts.push(count(n, what));
        }
    }
    if parts.is_empty() {
        return ", no event during the recording".into();
    }
    format!(
        ": {} during the recording{}",
        parts.join(", "),
        if l.local_events {
            ""
        } else {
            " (memory.events: the cgroups below it counted too)"
        }
    )
}

/// The words that go beside a tree's RSS sum: `RSS sum over 9 processes, shared pages counted
/// in each`. Empty for one process, whose RSS counts each page once.
pub fn rss_sum_words(processes: u32) -> String {
    if processes > 1 {
        format!("RSS sum over {processes} processes, shared pages counted in each")
    } else {
        String::new()
    }
}

/// `pid 4121 (proverd)`: what a session watched.
impl std::fmt::Display for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.mode, self.spec, self.comm)
    }
}

/// `the target exited, exit code 0`, `unknown (no end record: ...)`, `not recorded in mprof`.
impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Record(e) => e.fmt(f),
            Ended::NoEndRecord => {
                f.write_str("unknown (no end record: the recorder was killed or is still running)")
            }
            Ended::NotRecordedIn(source) => write!(f, "not recorded in {source}"),
        }
    }
}

/// `the target exited, killed by signal 9 (SIGKILL), most likely by the kernel's OOM killer:
/// cgroup /x counted 1 OOM kill during the recording, at the limit of 100.0 MiB`.
impl std::fmt::Display for EndedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.reason {
            EndReason::TargetExited => f.write_str("the target exited")?,
            EndReason::Signal => write!(
                f,
                "memmon was stopped by {}",
                self.memmon_signal.as_deref().unwrap_or("a signal")
            )?,
            EndReason::OutputClosed => f.write_str("the output was closed (broken pipe)")?,
            other => f.write_str(other.as_str())?,
        }
        if let Some(c) = self.exit_code {
            write!(f, ", exit code {c}")?;
        }
        if let Some(sig) = self.exit_signal {
            write!(
                f,
                ", killed by signal {sig} ({})",
                crate::model::signal::name(sig)
            )?;
            if let Some(k) = &self.oom_killer {
                write!(
                    f,
                    ", most likely by the kernel's OOM killer: cgroup {} counted {} during the recording{}",
                    k.cgroup,
                    count(k.kills, "OOM kill"),
                    match &k.at {
                        Some(at) => format!(
                            ", at the limit of {} ({})",
                            at.path,
                            at.thresholds(k.version)
                        ),
                        None => k
                            .limit_bytes
                            .map(|l| format!(", at the limit of {}", fmt_bytes(l)))
                            .unwrap_or_default(),
                    }
                )?;
            }
        }
        if let Some(err) = &self.error {
            write!(f, ": {err}")?;
        }
        Ok(())
    }
}

/// `exact up to the last row, with no end record`.
impl std::fmt::Display for ExactUpTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExactUpTo::LastRow => f.write_str("exact up to the last row, with no end record"),
            ExactUpTo::LastSample {
                gap_s,
                exit_records,
            } => write!(
                f,
                "exact up to the last sample, {} before the target exited; a rise after it is not seen (exit records: {})",
                fmt_seconds(*gap_s),
                exit_records.as_deref().unwrap_or("not read")
            ),
        }
    }
}

/// `PID 4122 (worker) left it for /other at +1.00 s: its memory since is charged there`.
impl std::fmt::Display for NotTheTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotTheTree::Recorded(why) => f.write_str(why),
            NotTheTree::Left(left) => write!(
                f,
                "{}: its memory since is charged there",
                left.iter()
                    .map(|l| format!(
                        "PID {} ({}) left it for {} at +{}",
                        l.pid,
                        l.comm,
                        if l.to.is_empty() {
                            "another cgroup"
                        } else {
                            &l.to
                        },
                        fmt_seconds(l.elapsed_s)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            NotTheTree::ProcessAbove {
                process_bytes,
                cgroup_bytes,
            } => write!(
                f,
                "the largest process's own peak ({}) is above the cgroup's ({}) by more than its page cache explains: some of the tree's memory was charged elsewhere (a process moved out of the cgroup between two samples)",
                fmt_bytes(*process_bytes),
                fmt_bytes(*cgroup_bytes)
            ),
            NotTheTree::FoundOutside => f.write_str("a process of the tree was found outside it"),
        }
    }
}

// The JSON holds these as their words (`target`, `ended`, a session's `ended`,
// `peak_exact_up_to`, a cgroup's `not_the_tree`), as the summary says them.
serialized_as_words!(Watched, Ended, EndedBy, ExactUpTo, NotTheTree);
