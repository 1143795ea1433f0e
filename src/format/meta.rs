//! What a recording says about itself: the metadata written when it starts (in the sidecar
//! `FILE.meta.json` for CSV, in the first record for JSON Lines) and how it ended.

use crate::sampler::tree::ProcessRecord;
use serde::{Deserialize, Serialize};

/// The schema version of recordings written by this memmon (docs/FORMAT.md).
pub const SCHEMA_VERSION: u32 = 1;

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
    /// The kernel files read, and how often.
    pub sources: Vec<String>,
    /// Column names in order, each with its unit.
    pub columns: Vec<ColumnMeta>,
    /// Present once the recording has ended cleanly (absent after a crash or SIGKILL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<EndInfo>,
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

/// How a recording ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EndInfo {
    pub ended_unix_ms: u64,
    /// `target-exited`, `signal` (memmon was asked to stop), `output-closed` or `error`.
    pub reason: String,
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
    /// including any rise after the last tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rusage_maxrss_bytes: Option<u64>,
    /// The processes seen, largest peak first (bounded), and how many left the tree in all.
    pub processes: Vec<ProcessRecord>,
    pub processes_departed: u64,
    /// With `phase_peaks`: markers at which a peak reset was refused (phase peaks not exact).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub peak_reset_failures: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Meta {
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("metadata serializes")
    }
}
