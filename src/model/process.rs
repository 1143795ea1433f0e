//! One process that was part of a watched tree, as the recording's end record lists it: its
//! identity (PID and start time), its names, and its own exact peak.

/// What is known of one process that was part of the tree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessRecord {
    pub pid: i32,
    pub start_time_ticks: u64,
    /// The command name (at most 15 bytes) as last read: after an exec, the new program's.
    pub comm: String,
    /// The command line as last read, arguments joined by spaces, at most
    /// [`CMDLINE_MAX_BYTES`](crate::sampler::tree::CMDLINE_MAX_BYTES) bytes; it shows titles a process sets itself
    /// (`postgres: checkpointer`). Empty in recordings made before it was kept.
    #[serde(default)]
    pub cmdline: String,
    /// The highest VmHWM read while it was alive, over all phases and runs (resets included;
    /// exact when read after its peak).
    pub hwm_bytes: u64,
}
