//! What the reader must know of a recording besides its numbers: each warning or note a fact,
//! with the numbers it names. The summary decides them (`SummaryBuilder::finish`, from what its
//! sessions, end records and cgroup say), the comparison adds its own, and `render/` those of
//! the tables it reads beside a recording; `render/warnings.rs` says each, as `summary` prints
//! it, `report` shows it and the JSON's `warnings` hold it.

use crate::format::meta::{EndInfo, MarkResetElsewhere, RowLoss};
use crate::model::peak::{Peak, PeakSource};
use crate::probe::cgroup::CgroupVersion;
use crate::probe::limits::LimitEnd;
use std::path::PathBuf;

/// One warning or note of a recording (module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    /// A phase's exact peak is above the recording's peak line, which is not exact (the marks
    /// before the first marker are older than the recording): the recording's is at least that.
    PhaseAbovePeak {
        label: String,
        peak: Peak,
        exact_within_bytes: Option<u64>,
    },
    /// The sampled peak (of one process: the tree's largest process's, for a tree) is below
    /// `MISSED_PEAK_RATIO` of the kernel's: the interval missed the peak.
    MissedPeak {
        single_process: bool,
        sampled_bytes: u64,
        kernel_bytes: u64,
    },
    /// No metadata: the file is read by the rules of an attached target; `set_before`: a mark
    /// that never rose is taken as set before the recording.
    NoMetadata { set_before: bool },
    /// The file ends inside this line, which was skipped.
    TruncatedLine { line: u64 },
    /// Rows the end records count that the file does not hold (`Summary::rows_lost_warnings`):
    /// the recording's name, the session they were found in where it has several, the counts,
    /// and what the loss leaves of the peak.
    RowsLost {
        file: Option<String>,
        session: Option<usize>,
        loss: RowLoss,
        peak: LossLeaves,
    },
    /// Ticks that could not be taken on time.
    MissedTicks { ticks: u64 },
    /// The target restarted, and the mark of the process before never rose in the recording:
    /// that process's peak is not known. `at_most_bytes`: its mark at the first row, where it
    /// is above the peak given (the peak before is at most that).
    RestartPeakUnknown { at_most_bytes: Option<u64> },
    /// With `--phase-peaks`, the marks were reset at the first marker and never rose before
    /// it: the peak before the first marker is not known (`at_most_bytes` as above).
    ResetPeakUnknown { at_most_bytes: Option<u64> },
    /// A process's high-water mark fell with no reset of memmon's: the first such fall, when it
    /// came (seconds on the recording's clock, where it has rows), and how many in all.
    MarkFell {
        first: MarkResetElsewhere,
        at_elapsed_s: Option<f64>,
        falls: u64,
    },
    /// Processes left the tree and not every exit record was read: the kernel peak is the
    /// largest its samples saw.
    ExitRecordsLacking { departed: u64, records: ExitRecords },
    /// Sessions with rows and no end record (of all the recording's sessions).
    Unended { unended: usize, sessions: usize },
    /// The sampled RSS sum is above the cgroup's exact peak: shared pages counted in each.
    SampledAboveCgroup {
        sampled_bytes: u64,
        cgroup_bytes: u64,
    },
    /// The cgroup's peak is this far below the largest process's VmHWM: pages first charged
    /// elsewhere (the page cache).
    CgroupBelowProcess { by_bytes: u64 },
    /// The recording holds several sessions (`--append`), which every number covers.
    Sessions { sessions: usize },
    /// Sessions beyond `MAX_SESSIONS` summed into the last one kept.
    SessionsMerged { merged: u64 },
    /// The peak came within 10% of the machine's memory.
    PeakNearMemTotal {
        peak_bytes: u64,
        source: PeakSource,
        mem_total_bytes: u64,
    },
    /// The cgroup's peak came within 10% of its limit.
    CgroupNearLimit {
        top_bytes: u64,
        limit_bytes: u64,
        version: CgroupVersion,
    },
    /// The tree was held at a limit during the recording (its thresholds counted events).
    HeldAtLimit {
        limit: LimitEnd,
        version: CgroupVersion,
    },
    /// The cgroup's peak came within 10% of the machine's memory.
    CgroupNearMemTotal {
        top_bytes: u64,
        mem_total_bytes: u64,
    },
    /// The kernel's OOM killer killed processes in the cgroup.
    CgroupOomKills {
        kills: u64,
        path: String,
        version: CgroupVersion,
    },
    /// Processes still in memmon's cgroup at the end, moved out before it was removed.
    MovedOut { pids: Vec<i32> },
    /// Cgroups the command made inside memmon's own, removed with it, and the processes
    /// killed in them.
    InsideRemoved { removed: u64, killed: u64 },
    /// An error reading (or removing) the cgroup.
    CgroupError { path: String, error: String },
    /// The anatomy table holds too few anatomies to compare the peak with.
    FewAnatomies { anatomies: usize },
    /// What the reader of another tool's file said of it (`ReadInfo::notes`).
    ReadNote(String),
    /// A side table the metadata names (`table`: `anatomy`, `NUMA`), not read for a recording
    /// on stdin.
    SideTableOnStdin { table: &'static str, name: String },
    /// A side table the metadata names that is not there.
    SideTableMissing { table: &'static str, path: PathBuf },
    /// A bench run with no run-end row (`compare`): the recording ended first.
    RunWithoutEnd { label: String },
}

/// What a loss of rows leaves of the recording's peak (`Warning::RowsLost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossLeaves {
    /// The peak is exact if the sidecar that counts the rows is this file's (its end record's
    /// own reading covers the rows lost).
    ExactIfTheSidecarIs,
    /// The peak is still exact: the end record's own reading covers the rows lost.
    StillExact,
    /// The peak is exact only up to the last row left: the rows lost may hold a higher one.
    ExactToTheLastRowLeft,
    /// The peak was not exact anyway: every number taken from rows stops at the last row left.
    RowsNumbersStop,
}

/// Why exit records are missing, as the end record of the session at fault says
/// (`Warning::ExitRecordsLacking`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitRecords {
    /// They were read, and the kernel dropped some (their queue was full), this many times.
    Dropped { times: u64 },
    /// They were not read, and why.
    NotRead(String),
    /// Not known: no end record.
    Unknown,
}

impl ExitRecords {
    /// As `end` says.
    pub fn of(end: Option<&EndInfo>) -> ExitRecords {
        match end.and_then(|e| e.exit_records.as_deref()) {
            Some(crate::format::meta::EXIT_RECORDS_READ) => ExitRecords::Dropped {
                times: end.map_or(0, |e| e.exit_records_lost),
            },
            Some(why) => ExitRecords::NotRead(why.to_string()),
            None => ExitRecords::Unknown,
        }
    }
}
