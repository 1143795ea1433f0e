//! The warnings and notes of a recording in words (`analysis::warnings::Warning`): what
//! `summary` prints under its numbers, `report` shows in its summary table, `compare` and `plot`
//! say of a file, and the JSON's `warnings` hold (each serialized as its words).

use crate::analysis::summary::MAX_SESSIONS;
use crate::analysis::warnings::{ExitRecords, LossLeaves, Warning};
use crate::probe::cgroup::CgroupVersion;
use crate::units::{count, fmt_bytes, fmt_seconds};
use std::fmt;

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::PhaseAbovePeak {
                label,
                peak,
                exact_within_bytes,
            } => write!(
                f,
                "warning: phase '{label}' has an exact peak of {} ({}), above the recording's peak line: the recording's peak is at least that; the marks before the first marker are older than the recording (record with --reset-peaks for its exact peak), and budgets judge the phase too",
                fmt_bytes(peak.bytes),
                peak.describe(*exact_within_bytes)
            ),
            Warning::MissedPeak {
                single_process,
                sampled_bytes,
                kernel_bytes,
            } => {
                // For a tree the number held is not the `sampled peak` line's (a sum): say whose.
                let (whose, kernels) = if *single_process {
                    ("the sampled peak", "the kernel's peak")
                } else {
                    (
                        "the largest process's sampled peak",
                        "the kernel's peak of the largest process",
                    )
                };
                write!(
                    f,
                    "warning: {whose} ({}) is {:.0}% of {kernels} ({}): the interval missed the peak; trust the kernel's number or sample faster",
                    fmt_bytes(*sampled_bytes),
                    100.0 * *sampled_bytes as f64 / *kernel_bytes as f64,
                    fmt_bytes(*kernel_bytes)
                )
            }
            Warning::NoMetadata { set_before } => write!(
                f,
                "note: no metadata (a CSV recording's FILE.meta.json sidecar, or an imported file): whether memmon launched the target, its cgroup and its exit records cannot be told, so the file is read by the rules of an attached target{}",
                if *set_before {
                    ": a high-water mark that never rose above its first value is taken as set before the recording"
                } else {
                    ""
                }
            ),
            Warning::TruncatedLine { line } => write!(
                f,
                "note: line {line} is incomplete (the file ends inside it: the recorder was stopped while writing it, or the file was cut) and was skipped"
            ),
            Warning::RowsLost {
                file,
                session,
                loss,
                peak,
            } => rows_lost(f, file.as_deref(), *session, loss, *peak),
            Warning::MissedTicks { ticks } => write!(
                f,
                "note: {} could not be taken on time (the machine or memmon was too busy for the interval)",
                count(*ticks, "tick")
            ),
            Warning::RestartPeakUnknown { at_most_bytes } => write!(
                f,
                "warning: the target restarted, and the VmHWM of the process before the restart never rose above its value at the first row (it may have been set before the recording began): that process's peak in the recording is not known and may be above the peak given (of the process that took over, all of whose marks fall in the recording){}",
                at_most(*at_most_bytes)
            ),
            Warning::ResetPeakUnknown { at_most_bytes } => write!(
                f,
                "warning: with --phase-peaks the marks were reset at the first marker, and VmHWM never rose above its value at the first row before that (it may have been set before the recording began): the peak before the first marker is not known and may be above the peak given (the largest mark after the reset){}; record with --reset-peaks for the recording's exact peak",
                at_most(*at_most_bytes)
            ),
            Warning::MarkFell {
                first,
                at_elapsed_s,
                falls,
            } => write!(
                f,
                "warning: the high-water mark (VmHWM) of PID {} ({}) fell from {} to {}{} with no reset of memmon's{}: the process itself or another program reset it (a write to /proc/PID/clear_refs), or reclaim took its pages before the kernel updated the mark, and what it reached between the row before and that reset is not known; the peak given is a lower bound",
                first.pid,
                crate::outside::shown(&first.comm),
                fmt_bytes(first.before_bytes),
                fmt_bytes(first.after_bytes),
                at_elapsed_s
                    .map(|t| format!(" at +{}", fmt_seconds(t)))
                    .unwrap_or_default(),
                if *falls > 1 {
                    format!(" ({} in all)", count(*falls, "such fall"))
                } else {
                    String::new()
                }
            ),
            Warning::ExitRecordsLacking { departed, records } => {
                let how = "memmon reads them as root or with CAP_NET_ADMIN; a cgroup of the tree's own (record -- COMMAND as root, or --cgroup) gives the tree's exact peak, each page once";
                let why = match records {
                    ExitRecords::Dropped { times } => format!(
                        "the kernel dropped exit records {} (their queue was full)",
                        count(*times, "time")
                    ),
                    ExitRecords::NotRead(why) => format!("exit records were not read ({why})"),
                    ExitRecords::Unknown => {
                        "whether exit records were read is not known (no end record)".into()
                    }
                };
                write!(
                    f,
                    "warning: {} left the tree during the recording and {why}: the kernel peak is the largest VmHWM its samples saw, so a process that peaked after its last sample, or a child born and gone between two samples, may be missing from it ({how})",
                    count(*departed, "process")
                )
            }
            Warning::Unended { unended, sessions } => write!(
                f,
                "warning: {} no end record (the recorder was killed, or is still writing): {} exact up to {} last row; what the target did after it is not in the recording",
                if *sessions > 1 {
                    format!(
                        "{} of the {} sessions {}",
                        unended,
                        sessions,
                        if *unended == 1 { "has" } else { "have" }
                    )
                } else {
                    "the recording has".into()
                },
                if *unended == 1 { "its peak is" } else { "their peaks are" },
                if *unended == 1 { "its" } else { "their" },
            ),
            Warning::SampledAboveCgroup {
                sampled_bytes,
                cgroup_bytes,
            } => write!(
                f,
                "note: the sampled peak ({}) is above the cgroup's exact peak ({}) by {}: a sum of RSS counts a page its processes share once in each (and pages first charged elsewhere, such as a binary already in the page cache), the cgroup each page once: the cgroup's is the tree's",
                fmt_bytes(*sampled_bytes),
                fmt_bytes(*cgroup_bytes),
                fmt_bytes(sampled_bytes - cgroup_bytes)
            ),
            Warning::CgroupBelowProcess { by_bytes } => write!(
                f,
                "note: the cgroup's peak is {} below the largest process's VmHWM: a cgroup is charged for the pages first touched in it, so pages already in the page cache (a binary, libraries) count in RSS but not in it",
                fmt_bytes(*by_bytes)
            ),
            Warning::Sessions { sessions } => write!(
                f,
                "note: {} (--append): every number above covers all of them; the sessions are listed above",
                count(*sessions, "session")
            ),
            Warning::SessionsMerged { merged } => write!(
                f,
                "note: {} beyond the first {MAX_SESSIONS} were summed into the last one kept; its kernel peak is not known",
                count(*merged, "session")
            ),
            Warning::PeakNearMemTotal {
                peak_bytes,
                source,
                mem_total_bytes,
            } => write!(
                f,
                "warning: the peak {} ({source}) came within 10% of the machine's memory (MemTotal {})",
                fmt_bytes(*peak_bytes),
                fmt_bytes(*mem_total_bytes)
            ),
            Warning::CgroupNearLimit {
                top_bytes,
                limit_bytes,
                version,
            } => write!(
                f,
                "warning: the cgroup's peak {} came within 10% of its limit {} ({}): {} left; past it the kernel reclaims, then OOM-kills",
                fmt_bytes(*top_bytes),
                fmt_bytes(*limit_bytes),
                limit_file(*version),
                fmt_bytes(limit_bytes.saturating_sub(*top_bytes))
            ),
            Warning::HeldAtLimit { limit, version } => write!(
                f,
                "warning: the tree was held at the limit of {} ({}): {} there during the recording; its RAM peak is capped by it, what it needed may be more (swapped out, or reclaimed and read again)",
                limit.path,
                limit.thresholds(*version),
                [
                    (limit.events_during.high, "high event"),
                    (limit.events_during.max, "max event"),
                ]
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, what)| count(*n, what))
                .collect::<Vec<_>>()
                .join(", ")
            ),
            Warning::CgroupNearMemTotal {
                top_bytes,
                mem_total_bytes,
            } => write!(
                f,
                "warning: the cgroup's peak {} came within 10% of the machine's memory (MemTotal {})",
                fmt_bytes(*top_bytes),
                fmt_bytes(*mem_total_bytes)
            ),
            Warning::CgroupOomKills {
                kills,
                path,
                version,
            } => write!(
                f,
                "warning: {} in the cgroup {path} during the recording ({})",
                count(*kills, "OOM kill"),
                match version {
                    CgroupVersion::V1 => "memory.oom_control oom_kill",
                    CgroupVersion::V2 => "memory.events oom_kill",
                }
            ),
            Warning::MovedOut { pids } => write!(
                f,
                "note: processes {pids:?} were still running in memmon's cgroup when the recording ended and were moved out of it before it was removed"
            ),
            Warning::InsideRemoved { removed, killed } => write!(
                f,
                "note: the command made {} inside memmon's own: removed with it, deepest first, killing {} left in {}",
                count(*removed, "cgroup"),
                count(*killed, "process"),
                if *removed == 1 { "it" } else { "them" },
            ),
            Warning::CgroupError { path, error } => write!(f, "warning: cgroup {path}: {error}"),
            Warning::FewAnatomies { anatomies } => write!(
                f,
                "note: the anatomy table holds {anatomies} anatom{}: nothing to compare the peak with",
                if *anatomies == 1 { "y" } else { "ies" }
            ),
            Warning::ReadNote(note) => write!(f, "note: {note}"),
            Warning::SideTableOnStdin { table, name } => write!(
                f,
                "note: the recording has a{} {table} table ({name}), not read for a recording on stdin",
                if table.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "n"
                } else {
                    ""
                }
            ),
            Warning::SideTableMissing { table, path } => write!(
                f,
                "note: the {table} table {} that the metadata names is not there",
                path.display()
            ),
            Warning::RunWithoutEnd { label } => write!(
                f,
                "note: {label} has no run-end row: the recording ended first"
            ),
        }
    }
}

// The JSON's `warnings` hold each as its words.
serialized_as_words!(Warning);

/// ` though at most 1.00 GiB (its mark at the first row)`, where a mark bounds the unknown
/// peak before a restart or a reset.
fn at_most(bytes: Option<u64>) -> String {
    bytes
        .map(|l| {
            format!(
                " though at most {} (its mark at the first row)",
                fmt_bytes(l)
            )
        })
        .unwrap_or_default()
}

/// Where a cgroup's limit is set: `memory.max` (v1 `memory.limit_in_bytes`) of the cgroup or
/// of one above it, whichever is smallest.
fn limit_file(version: CgroupVersion) -> &'static str {
    match version {
        CgroupVersion::V1 => "the smallest memory.limit_in_bytes of the cgroup and those above it",
        CgroupVersion::V2 => "the smallest memory.max of the cgroup and those above it",
    }
}

/// Rows the end records count that the file (`file`, the recording's name) does not hold:
/// both counts, found in `session` (of several), and what the loss leaves of the peak.
fn rows_lost(
    f: &mut fmt::Formatter<'_>,
    file: Option<&str>,
    session: Option<usize>,
    loss: &crate::format::meta::RowLoss,
    peak: LossLeaves,
) -> fmt::Result {
    let file = file.unwrap_or("the recording");
    // A sidecar's counts are the whole file's; a JSON Lines end record's its session's.
    let (whose, from, how) = if loss.sidecar {
        let records = if loss.sessions > 1 {
            "sidecar's end records count"
        } else {
            "sidecar's end record counts"
        };
        let how = if loss.sessions_read < loss.sessions {
            let none = loss.sessions - loss.sessions_read;
            format!(
                "{none} of its {} sessions {} no row: the file was cut after the recording, or the sidecar is another recording's",
                loss.sessions,
                if none == 1 { "holds" } else { "hold" }
            )
        } else {
            "the file was cut after the recording, or the sidecar is another recording's".into()
        };
        (String::new(), records, how)
    } else {
        (
            session
                .map(|k| format!(" in session {k}"))
                .unwrap_or_default(),
            "end record counts",
            "lines were taken out of the file after the recording".into(),
        )
    };
    let peak = match peak {
        LossLeaves::ExactIfTheSidecarIs => "its peak is exact if the sidecar is this file's (its end record's own reading covers the rows lost), but every number taken from rows (sampled peak, idle floor, mean, phases, runs) stops at the last row left",
        LossLeaves::StillExact => "its peak is still exact (the end record's own reading covers them), but every number taken from rows (sampled peak, idle floor, mean, phases, runs) stops at the last row left",
        LossLeaves::ExactToTheLastRowLeft => "its peak is exact only up to the last row left, not the recording's: the rows lost may hold a higher one",
        LossLeaves::RowsNumbersStop => "every number taken from rows stops at the last row left",
    };
    write!(
        f,
        "warning: {file} holds {}{whose}, but its {from} {}: {} lost ({how}); {peak}",
        count(loss.read, "row"),
        loss.counted,
        count(loss.lost(), "row"),
    )
}
