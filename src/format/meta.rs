//! What a recording says about itself: the metadata written when it starts (in the sidecar
//! `FILE.meta.json` for CSV, in the first record for JSON Lines) and how it ended.

use crate::model::process::ProcessRecord;
use crate::probe::cgroup::{CgroupEvents, CgroupVersion};
use serde::{Deserialize, Serialize};

/// The schema version of recordings written by this memmon (docs/FORMAT.md).
/// 2: `run_peaks` and `cgroup` in the metadata (bench runs reset after their run-start row; the
/// cgroup recorded and whether it holds the tree alone). Schema 1 files read as before.
pub const SCHEMA_VERSION: u32 = 2;

/// A recording's metadata of a schema version this memmon does not know. The version changes
/// only when a column or key changes meaning or is removed (docs/FORMAT.md, "Compatibility"), so
/// a newer one is never read as if it were known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "its schema version is {0}; this memmon ({version}) reads schema 1 to {SCHEMA_VERSION}{newer}",
    version = env!("CARGO_PKG_VERSION"),
    newer = if *.0 > SCHEMA_VERSION {
        ": a newer memmon wrote it, whose columns may mean something else; read it with that memmon"
    } else {
        ""
    }
)]
pub struct SchemaError(pub u32);

impl crate::error::Classified for SchemaError {
    /// A file this memmon cannot read: bad input, as a malformed recording is.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// Refuses metadata (or any of its earlier sessions') of a schema version this memmon does not
/// know.
pub fn check_schema(meta: &Meta) -> Result<(), SchemaError> {
    let known = |m: &Meta| (1..=SCHEMA_VERSION).contains(&m.schema_version);
    match std::iter::once(meta)
        .chain(&meta.earlier_sessions)
        .find(|m| !known(m))
    {
        None => Ok(()),
        Some(m) => Err(SchemaError(m.schema_version)),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    /// Always `memmon-recording`.
    pub format: String,
    pub schema_version: u32,
    pub memmon_version: String,
    pub host: String,
    pub kernel: String,
    pub page_size_bytes: u64,
    pub started_unix_ms: u64,
    /// The sampling interval, in seconds and as typed.
    pub interval_s: f64,
    pub interval: String,
    pub target: TargetMeta,
    /// Whether descendants are included.
    pub children: bool,
    /// Whether the high-water marks were reset right after each marker's sample
    /// (`--phase-peaks`), which makes each phase's largest `hwm_bytes` its exact peak.
    #[serde(default)]
    pub phase_peaks: bool,
    /// Whether the high-water marks of an attached target were reset right after the first
    /// sample (`record --reset-peaks`), so its kernel peak is the recording's from its start.
    #[serde(default)]
    pub peak_reset_at_start: bool,
    /// How the peaks of bench runs (`run-start:N` to `run-end:N`) begin; absent outside bench
    /// recordings, and in bench recordings of schema 1 (whose runs are told by their rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_peaks: Option<RunPeaks>,
    /// How the peaks of processes at their exit are read, as at the start: `taskstats` (the
    /// kernel's exit records), or why not; absent in schema 1 recordings (the end record says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_records: Option<String>,
    /// The memory cgroup read at every tick, as it was at the start; absent without one (and
    /// in schema 1 recordings, where only the end record tells of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupMeta>,
    /// CPUs online on the recording machine: they bound how far the kernel's batched RSS
    /// counters may be off (`crate::model::peak::batching_bound_bytes`). Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online_cpus: Option<u64>,
    /// MemTotal of the recording machine, in bytes (a peak near it is near the machine's end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    /// The kernel files read, and how often.
    pub sources: Vec<String>,
    /// Column names in order, each with its unit.
    pub columns: Vec<ColumnMeta>,
    /// GPU memory, when it is recorded (`record --gpu`, or NVML loaded): how often it is read
    /// and the GPUs seen at the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuMeta>,
    /// The anatomy table (`record --anatomy`): its side file and when anatomies are taken;
    /// absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anatomy: Option<AnatomyMeta>,
    /// The NUMA table (the cgroup's memory per node, on a machine with more than one node):
    /// its side file and nodes; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<NumaMeta>,
    /// On a machine with more than one NUMA node, why no NUMA table was written (no cgroup
    /// recorded, the recording not a file); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_not_read: Option<String>,
    /// Present once the recording has ended cleanly (absent after a crash or SIGKILL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<EndInfo>,
    /// In a CSV sidecar after `--append`: the metadata (with its end) of each earlier session
    /// in the file, oldest first; this object itself is the latest session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_sessions: Vec<Meta>,
}

/// How a bench recording's runs begin their peaks.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RunPeaks {
    /// Each run is a command of its own, launched at its `run-start` row: its marks (and the
    /// cgroup memmon made for it) begin with it.
    Launched,
    /// The high-water marks of the daemon's tree, and its cgroup's peak, were reset right after
    /// each `run-start` row was read: the rows after it hold the run's own peaks.
    ResetAfterStart,
}

/// The memory cgroup a recording reads, as it was at the start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CgroupMeta {
    pub path: String,
    pub version: CgroupVersion,
    /// memmon made it for the command it launched.
    pub own: bool,
    /// It held the target's tree and nothing else when the recording began (memmon's own, or a
    /// daemon's own cgroup checked: no process in it outside the tree): its peak is the tree's.
    pub holds_tree: bool,
    /// Why it does not hold the tree, when memmon found out (processes outside the tree, memory
    /// the tree holds charged to another cgroup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_the_tree: Option<String>,
}

impl Meta {
    /// The recording's cgroup holds the tree alone. Schema 1 recordings did not say; memmon's
    /// own cgroup was named in their sources.
    pub fn cgroup_holds_tree(&self) -> bool {
        match &self.cgroup {
            Some(c) => c.holds_tree,
            None => self.sources.iter().any(|s| s.contains("memmon's own")),
        }
    }

    /// The recording's cgroup is v1 (its peak file is memory.max_usage_in_bytes).
    pub fn cgroup_v1(&self) -> bool {
        match &self.cgroup {
            Some(c) => c.version == CgroupVersion::V1,
            None => self.sources.iter().any(|s| s.starts_with("cgroup v1")),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetMeta {
    /// `pid`, `pidfile`, `name` or `command`.
    pub mode: String,
    /// What the user gave: the PID, the pidfile's path, the regex, or the command line.
    pub spec: String,
    pub pid: i32,
    pub start_time_ticks: u64,
    pub comm: String,
    pub cmdline: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ColumnMeta {
    pub name: String,
    pub unit: String,
}

/// Why a recording ended; written as its kebab-case name (`target-exited`, ...).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum EndReason {
    /// The watched process exited.
    TargetExited,
    /// memmon was stopped by SIGINT, SIGTERM or SIGHUP.
    Signal,
    /// `--duration` was reached.
    Duration,
    /// Stopped by its caller (a `Stop` control message, the end of a bench); also what a
    /// recording whose end nobody named gets.
    #[default]
    Stopped,
    /// The output was closed (a broken pipe).
    OutputClosed,
    /// An error stopped the recording.
    Error,
    /// A reason this memmon does not know (written by a later version).
    #[serde(other)]
    Other,
}

impl EndReason {
    /// The name as written in the metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::TargetExited => "target-exited",
            EndReason::Signal => "signal",
            EndReason::Duration => "duration",
            EndReason::Stopped => "stopped",
            EndReason::OutputClosed => "output-closed",
            EndReason::Error => "error",
            EndReason::Other => "other",
        }
    }
}

/// Rows an end record counts that the file does not hold: rows cut from a finished recording
/// (`head -n -3` of a CSV whose sidecar was kept, lines taken out of a JSON Lines file). A
/// reader finds it and hands it to its sink before the end record of the session the last rows
/// belong to (`read::Sink::rows_lost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLoss {
    /// The rows the end records count (of the sessions read and of any after them of which
    /// no row is left), and the rows read of them.
    pub counted: u64,
    pub read: u64,
    /// The session the last rows belong to holds fewer rows than its end record counts: rows
    /// after its last one are gone (else only whole sessions after it, or earlier rows).
    pub in_session: bool,
    /// The counts come from a CSV recording's sidecar (else from the file's own end records).
    pub sidecar: bool,
    /// The sessions whose end records count `counted` rows, and how many of them hold a row in
    /// the file (fewer when whole sessions were cut).
    pub sessions: u32,
    pub sessions_read: u32,
}

impl RowLoss {
    /// The rows lost.
    pub fn lost(&self) -> u64 {
        self.counted.saturating_sub(self.read)
    }
}

/// A process's high-water mark (VmHWM) found lower than the last one read, with no reset of
/// memmon's in between (`EndInfo::marks_reset_elsewhere`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MarkResetElsewhere {
    pub pid: i32,
    pub comm: String,
    /// The row that read the lower mark (the reset came after the row before it).
    pub unix_ms: u64,
    /// The mark read before, and the one read after.
    pub before_bytes: u64,
    pub after_bytes: u64,
}

/// How a recording ended, and what the recorder learned only at the end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndInfo {
    pub ended_unix_ms: u64,
    pub reason: EndReason,
    /// The target's exit code or terminating signal, when memmon could learn it (always for a
    /// launched command; not for a process memmon did not start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_signal: Option<i32>,
    /// The signal that stopped memmon (SIGINT, SIGTERM, SIGHUP), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memmon_signal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub samples: u64,
    pub missed_ticks: u64,
    pub restarts: u64,
    /// For a launched command: `ru_maxrss` from wait4 on that very child, in bytes — the
    /// kernel's peak RSS of the largest single process among it and its waited-for children,
    /// including any rise after the last tick — or, when larger, that of an orphan of its tree
    /// that memmon (its subreaper) reaped. Every process of the tree that ended is in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rusage_maxrss_bytes: Option<u64>,
    /// For a launched command: that `ru_maxrss` of the command's own process and the children
    /// it waited for, without the orphans memmon reaped (one of an earlier bench run may be
    /// reaped in a later one): a peak of this run's tree, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_maxrss_bytes: Option<u64>,
    /// For a launched command: the CPU time, user and system, of it and the descendants it
    /// waited for, in seconds (wait4's rusage on that child, microseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rusage_user_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rusage_system_s: Option<f64>,
    /// For a launched command: memmon's own RSS when it started the command. The command is
    /// forked from memmon, and exec keeps the forked copy's high-water mark (memmon's
    /// anonymous pages, and what the copy touched before exec) in `ru_maxrss`; so a
    /// `rusage_maxrss_bytes` not above this (within the counters' batching) may be memmon's,
    /// not the command's, and is not taken as its peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_rss_bytes: Option<u64>,
    /// For a launched command: seconds from its start to its exit (as memmon reaped it): its
    /// duration even when it ended before a second sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_wall_s: Option<f64>,
    /// The processes seen, largest peak first (bounded), and how many left the tree in all.
    pub processes: Vec<ProcessRecord>,
    pub processes_departed: u64,
    /// With `phase_peaks`: markers at which a peak reset was refused (phase peaks not exact).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub peak_reset_failures: u64,
    /// Processes of the tree whose high-water mark fell with no reset of memmon's: reset by
    /// the process itself or another program (clear_refs); the first 100, by the row that saw
    /// each. A span holding one has its kernel peak as a lower bound.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks_reset_elsewhere: Vec<MarkResetElsewhere>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub marks_reset_elsewhere_count: u64,
    /// With GPU memory recorded: how the reading thread fared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuEnd>,
    /// With `--pss`: the processes whose PSS could not be read at some tick, and why. Ticks
    /// where one was unread have no `pss_bytes` (a partial sum would look like a drop).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pss_unread: Vec<PssUnread>,
    /// With `--anatomy`: every anatomy read of the session, those dropped for a higher one of
    /// their stretch included, and what they took. Absent in recordings made before memmon
    /// kept each stretch's highest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anatomy_reads: Option<AnatomyReads>,
    /// With `--anatomy` and the ledger of mappings running: what it read and what it cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<LedgerEnd>,
    /// How the peaks of processes at their exit were read: `taskstats` (the kernel's exit
    /// records), or why not (`off (--no-taskstats)`, `unavailable: ...`). Absent in recordings
    /// made before memmon read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_records: Option<String>,
    /// The tree's major faults since the recording (this session) began, at its end: as the
    /// `major_faults` column counts them, with the exit records read when the target ended
    /// (faults after the last row) added. Absent in recordings made before memmon read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults: Option<u64>,
    /// The largest high-water mark (VmHWM, bytes) the exit records gave for a process of the
    /// tree: a peak reached after the process's last sample counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_peak_bytes: Option<u64>,
    /// The largest high-water mark the exit records read when the target ended gave (the
    /// target's own, and those of processes that left with it), counted since the last reset
    /// of the marks: reached after the last row, so the last phase and run hold it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_peak_after_last_sample_bytes: Option<u64>,
    /// When the target ended after the last sample: the sum of the high-water marks of every
    /// process of the tree alive after that sample (at its exit where its record came), counted
    /// since the last reset of the marks: with every exit record read, an upper bound of the
    /// tree's peak after the last row, as a row's `hwm_sum_bytes` is of the time before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_hwm_sum_after_last_sample_bytes: Option<u64>,
    /// Times the kernel dropped exit records because their queue was full: a process of the
    /// tree that exited then may have peaked unseen, so the kernel peak may miss it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit_records_lost: u64,
    /// The target's own exit record was read: its kernel peak holds up to its exit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub target_exit_read: bool,
    /// With a cgroup source (`--cgroup`, or the cgroup of memmon's own a launched command ran
    /// in): its peak, the split at its largest usage, its limit and the OOM kills seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupEnd>,
    /// A command bench's recording (`run_peaks: launched`): each measured run's own end
    /// record, as its recorder ended it (without its `processes`). What the kernel gave after
    /// the run's last row (wait4's ru_maxrss, the exit records, the cgroup's peak file read at
    /// the exit) is there, and the run takes it as one more row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<RunEnd>,
    /// A daemon bench's recording (`run_peaks: reset-after-start`): each measured run's client
    /// time, from its start to its exit, as bench's table gives it. The run's rows span a little
    /// more (its `run-start` row is read before the client starts, its `run-end` row after it
    /// exits); a run listed here takes this as its duration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_walls: Vec<ClientWall>,
}

/// One run of a daemon bench: its client's time (the end record's `client_walls`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct ClientWall {
    /// The run's number (`run-start:N`, `run-end:N`).
    pub run: u32,
    /// Seconds from the client's start to its exit.
    pub wall_s: f64,
}

/// One run of a command bench, as its recording ended (the end record's `runs`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunEnd {
    /// The run's number (`run-start:N`, `run-end:N`).
    pub run: u32,
    /// When its command started, in the recording's `elapsed_s` seconds: where a run that
    /// ended before its first sample (and has no rows) lies on the recording's time line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_elapsed_s: Option<f64>,
    /// The run's end record.
    pub end: EndInfo,
}

impl EndInfo {
    /// Every exit record of the tree was read: taskstats was on and the kernel dropped none,
    /// so each process that left has its peak at its exit in the rows.
    pub fn exit_records_complete(&self) -> bool {
        self.exit_records.as_deref() == Some(EXIT_RECORDS_READ) && self.exit_records_lost == 0
    }
}

/// `exit_records` when the kernel's exit records were read.
pub const EXIT_RECORDS_READ: &str = "taskstats";

/// What the ledger thread did, at its end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEnd {
    /// How the calls were read (`tracefs ...; mmap, munmap, mremap of at least 1.00 MiB, brk`).
    pub how: String,
    /// Calls of the tree the ledger applied, records of every process read, and records the
    /// kernel dropped (a ring full).
    pub calls: u64,
    pub records: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost: u64,
    /// Stacks unwound, and of them those cut short.
    pub stacks: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub truncated: u64,
    /// Stacks the kernel copied short, stopped at a page it could not read without a fault (one
    /// NUMA balancing made inaccessible for a moment, or one swapped out), whose rest was read
    /// from the process's memory as they were unwound.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stacks_completed: u64,
    /// Distinct stacks past memmon's cap (`analysis::ledger::STACKS_KEPT`), each counted as one
    /// `[other stacks]`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stacks_over_cap: u64,
    /// Sampled page faults of the tree applied (`--touch-every`), and those dropped past the
    /// cap on pages kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub touch_samples: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub touches_dropped: u64,
    /// Transparent huge pages the tree faulted in (each sampled: `kmem:mm_page_alloc` of a huge
    /// page's order), and those of them no anatomy found at an address of the tree's data
    /// mappings (freed, split or moved first, or a file's page, not the tree's memory).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub huge_samples: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub huge_unfound: u64,
    /// Files whose unwind sections were too large to be believed (over 64 MiB, or past the
    /// file's end) and were not read: stacks through them end there. At most 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections_refused: Vec<String>,
    /// Clearings of the tree's soft-dirty bits (at the start and at each span's end, where the
    /// kernel keeps them: rewrites of memory an allocator hands out again are then sampled),
    /// and their wall time in all, microseconds (each holds a process's memory-map lock while
    /// the kernel write-protects its pages).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rearms: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rearm_us: u64,
    /// CPU time of the ledger's thread (user and system), microseconds: what it cost memmon.
    pub cpu_us: u64,
}

/// What a session's anatomy reads cost (`EndInfo::anatomy_reads`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AnatomyReads {
    /// Reads made, written or not.
    pub reads: u64,
    /// Reads not written: at a stretch's new highs, dropped for a higher one of the same
    /// stretch; and at the start, those that caught a launched program in its loader.
    pub dropped: u64,
    /// Their wall time in all, and the longest one's, in microseconds (on a thread of their
    /// own; smaps holds each process's memory-map lock while it is read).
    pub read_us: u64,
    pub longest_read_us: u64,
}

/// A recording's anatomy table (`record --anatomy`; format/anatomy.rs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AnatomyMeta {
    /// The side file's name, in the recording's directory (`run.csv.anatomy.jsonl`).
    pub file: String,
    /// Within each stretch (the rows between two markers, bench run starts and ends), an
    /// anatomy is read at each new high of the tree's RSS at least this fraction above the RSS
    /// of the last one read in it (0.01: 1%), and the highest is kept (`peak`)...
    pub rise: f64,
    /// ...at most one such read every this many seconds; one at the first row, one at each
    /// phase's and bench run's end, and one at the end too.
    pub gap_s: f64,
    /// Whether resident sizes are read (/proc/PID/smaps, under its guard); each anatomy says
    /// which processes were read without.
    pub smaps: bool,
    /// smaps is read only of processes whose RSS is at most this (`--anatomy-smaps-max`);
    /// absent in tables written before memmon read smaps by default (there, `--pss`'s guard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smaps_max_rss_bytes: Option<u64>,
    /// The ledger of mappings: how its calls are read (each anatomy then carries the live
    /// mappings by the stack that made them, `ledger`), or why it is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_off: Option<String>,
}

/// A recording's NUMA table (format/numa.rs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NumaMeta {
    /// The side file's name, in the recording's directory (`run.csv.numa.csv`).
    pub file: String,
    /// The machine's nodes, as the table's columns.
    pub nodes: Vec<u32>,
    /// What a node's bytes are: `memory.numa_stat`'s v1 `hierarchical_total` or v2 `anon` +
    /// `file`.
    pub source: String,
}

/// How GPU memory is read, and the GPUs there were at the start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GpuMeta {
    /// `nvml` (libnvidia-ml.so.1), or `fake` in memmon's own tests.
    pub source: String,
    /// `--gpu-every`, in seconds and as printed.
    pub every_s: f64,
    pub every: String,
    pub devices: Vec<GpuDeviceMeta>,
    /// The driver's version, where NVML says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// How the per-process list is read: the NVML call and its element layout (at the start;
    /// the end record has the last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_call: Option<String>,
    /// How NVML's PIDs are matched with memmon's (the host's PID namespace, or a container's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_namespace: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GpuDeviceMeta {
    /// NVML's index (nvidia-smi's order).
    pub index: u32,
    pub uuid: String,
    /// The model, e.g. `NVIDIA H200`.
    pub name: String,
    pub total_bytes: u64,
    /// NVML accounting mode at the start (`nvidia-smi -am 1`): absent where not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<bool>,
}

/// The GPU reading thread at the end of a recording.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuEnd {
    /// Readings taken (each: the device list, then the processes of every GPU).
    pub readings: u64,
    /// Readings that failed (their ticks have empty GPU columns).
    pub failed_readings: u64,
    /// What one reading cost, mean and largest, in milliseconds.
    pub mean_reading_ms: f64,
    pub max_reading_ms: f64,
    /// The distinct failures (at most 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// What was told of empty GPU numbers (a size NVML does not give, a process without an
    /// accounting record...), at most 8.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// How the last reading read the per-process list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_call: Option<String>,
    /// With NVML accounting on: the largest `maxMemoryUsage` of the tree's processes (those of
    /// the last row and those that had left) read after the last row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hwm_after_last_row_bytes: Option<u64>,
}

/// What a recording's memory cgroup showed, read at its end. Sizes in bytes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CgroupEnd {
    /// The cgroup's path (`/system.slice/proverd.service`) and directory.
    pub path: String,
    pub dir: String,
    pub version: CgroupVersion,
    /// True when memmon made it for the command it launched (then it held that tree alone,
    /// from before its first instruction, and was removed after).
    pub own: bool,
    /// The largest peak read (`memory.peak`, v1 `memory.max_usage_in_bytes`) over the
    /// recording, including the reading after the end; `None` where the kernel has no peak file.
    pub peak_bytes: Option<u64>,
    /// The peak file read at the very end, after the last row (a rise after the last tick is
    /// in it); absent in schema 1 recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_peak_bytes: Option<u64>,
    /// The file the peak was read from.
    pub peak_counter: String,
    /// False for a cgroup memmon did not make whose peak never rose above its value at the
    /// first sample: the peak was set before the recording.
    pub peak_during_recording: bool,
    /// The largest `memory.current` sampled, and its anon and file (page cache) parts then.
    pub largest_current_bytes: u64,
    pub anon_at_largest_bytes: u64,
    pub file_at_largest_bytes: u64,
    /// `memory.max` (v1 `memory.limit_in_bytes`) at the end; `None`: no limit.
    pub limit_bytes: Option<u64>,
    /// Every limit over the cgroup, each with the cgroup that sets it and the events its
    /// thresholds counted during the recording (`probe::limits`): those that set a limit or
    /// counted an event, the recorded cgroup first. Absent in recordings before memmon read them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<crate::probe::limits::LimitEnd>,
    /// The most swap the cgroup's tasks held: `memory.swap.peak` where it covers the recording
    /// (memmon's own cgroup), else the larger of
    /// `memory.swap.current` at the start and at the end; `None` where the kernel counts no
    /// swap per cgroup (v1, or swap accounting off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_peak_bytes: Option<u64>,
    /// `memory.events` counters that rose during the recording (v1: oom_kill and max only).
    pub events_during: CgroupEvents,
    /// The `oom_kill` counter at the very end, after the last row (the column
    /// `cgroup_oom_kill_events` read once more): a kill after the last row is in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_oom_kill_events: Option<u64>,
    /// MemTotal of the machine, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    /// Peak resets at markers (`--phase-peaks`), and those refused.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub peak_resets: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub peak_reset_failures: u64,
    /// Processes still in memmon's own cgroup at the end, moved to its parent to remove it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved_out: Vec<i32>,
    /// Cgroups the command made inside memmon's own, removed with it (depth first), and the
    /// processes killed in them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inside_removed: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inside_killed: u64,
    /// The tree's processes found outside the cgroup during the recording (moved out by
    /// systemd, cgexec, a scheduler), each the first time: their memory since was charged
    /// elsewhere, so the cgroup's peak is not the tree's in the spans where they were outside.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<LeftCgroup>,
    /// The first error reading (or removing) the cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A process of the tree found outside the recorded cgroup.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LeftCgroup {
    pub pid: i32,
    pub comm: String,
    /// The cgroup it was in then (as /proc/PID/cgroup says it).
    pub to: String,
    /// When it was first found outside, on the recording's clock (s).
    pub elapsed_s: f64,
}

/// A process whose PSS (/proc/PID/smaps_rollup) memmon did not read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PssUnread {
    pub pid: i32,
    pub comm: String,
    pub reason: PssUnreadReason,
    /// How many PSS reads of the tree it was missing from.
    pub reads: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PssUnreadReason {
    /// Its RSS was over `--pss-max-rss` (reading would stall it) and `--pss-force` was off.
    OverMaxRss,
    /// The kernel refused the read (EACCES: not the process's owner, or ptrace rules).
    Refused,
    /// Another read error.
    Failed,
}

impl PssUnreadReason {
    /// How a person reads the reason.
    pub fn describe(self) -> &'static str {
        match self {
            PssUnreadReason::OverMaxRss => "skipped, RSS over --pss-max-rss",
            PssUnreadReason::Refused => "smaps_rollup refused (permission denied)",
            PssUnreadReason::Failed => "smaps_rollup could not be read",
        }
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The most characters of a command line (or target spec) kept in the metadata: a command
/// line can be megabytes long, and a reader caps a line at 1 MiB (docs/FORMAT.md).
pub const MAX_META_TEXT_CHARS: usize = 16 * 1024;

/// `text`, cut to `MAX_META_TEXT_CHARS` characters (`...` marks a cut).
pub fn bounded_text(text: String) -> String {
    match text.char_indices().nth(MAX_META_TEXT_CHARS) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}

impl Meta {
    /// A recording's metadata for the tests: target `mode` (`command`, `pid`...), 2 CPUs and
    /// 4 KiB pages (a 512 KiB batching bound), nothing reset, exit records read.
    #[cfg(test)]
    pub fn example(mode: &str) -> Meta {
        Meta {
            format: "memmon-recording".into(),
            schema_version: SCHEMA_VERSION,
            memmon_version: "0".into(),
            host: "h".into(),
            kernel: "6.1".into(),
            page_size_bytes: 4096,
            started_unix_ms: 0,
            interval_s: 1.0,
            interval: "1s".into(),
            target: TargetMeta {
                mode: mode.into(),
                spec: "1".into(),
                pid: 1,
                start_time_ticks: 0,
                comm: "d".into(),
                cmdline: "d".into(),
            },
            children: true,
            phase_peaks: false,
            peak_reset_at_start: false,
            run_peaks: None,
            exit_records: Some(EXIT_RECORDS_READ.into()),
            cgroup: None,
            online_cpus: Some(2),
            mem_total_bytes: None,
            sources: vec![],
            columns: vec![],
            gpu: None,
            anatomy: None,
            numa: None,
            numa_not_read: None,
            end: None,
            earlier_sessions: vec![],
        }
    }

    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("metadata serializes")
    }
}

#[cfg(test)]
impl CgroupMeta {
    /// For the tests: a v1 cgroup memmon made for a launched command (it holds the tree alone).
    pub fn example_own() -> CgroupMeta {
        CgroupMeta {
            path: "/memmon-1-0".into(),
            version: CgroupVersion::V1,
            own: true,
            holds_tree: true,
            not_the_tree: None,
        }
    }
}

#[cfg(test)]
impl CgroupEnd {
    /// For the tests: the end of [`CgroupMeta::example_own`], its peak file read at the exit
    /// saying `peak` bytes.
    pub fn example_own(peak: u64) -> CgroupEnd {
        serde_json::from_value(serde_json::json!({
            "path": "/memmon-1-0", "dir": "/sys/fs/cgroup/memory/memmon-1-0", "version": "v1",
            "own": true, "peak_bytes": peak, "final_peak_bytes": peak,
            "peak_counter": "memory.max_usage_in_bytes", "peak_during_recording": true,
            "largest_current_bytes": 0, "anon_at_largest_bytes": 0, "file_at_largest_bytes": 0,
            "limit_bytes": null, "events_during": {"oom": 0, "oom_kill": 0, "max": 0, "high": 0}
        }))
        .expect("a complete cgroup end record")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_reasons_keep_the_names_older_recordings_hold() {
        use EndReason::*;
        for (reason, name) in [
            (TargetExited, "target-exited"),
            (Signal, "signal"),
            (Duration, "duration"),
            (Stopped, "stopped"),
            (OutputClosed, "output-closed"),
            (Error, "error"),
        ] {
            let json = format!("\"{name}\"");
            assert_eq!(serde_json::to_string(&reason).unwrap(), json);
            assert_eq!(serde_json::from_str::<EndReason>(&json).unwrap(), reason);
            assert_eq!(reason.as_str(), name);
        }
        // A later version's reason does not make the metadata unreadable.
        assert_eq!(
            serde_json::from_str::<EndReason>("\"oom-killed\"").unwrap(),
            Other
        );
    }

    #[test]
    fn a_long_command_line_is_cut_to_fit_a_line() {
        let long = "é".repeat(MAX_META_TEXT_CHARS + 5);
        let cut = bounded_text(long);
        assert_eq!(cut.chars().count(), MAX_META_TEXT_CHARS + 3);
        assert!(cut.ends_with("..."));
        assert_eq!(bounded_text("short".into()), "short");
    }
}
