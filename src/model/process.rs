//! One process that was part of a watched tree, as the recording's end record lists it: its
//! identity (PID and start time), its names, and its own exact peak.

/// A command line is kept (in [`ProcessRecord::cmdline`], as the tree reads it) to at most this
/// many bytes.
pub const CMDLINE_MAX_BYTES: usize = 256;

/// What is known of one process that was part of the tree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessRecord {
    pub pid: i32,
    pub start_time_ticks: u64,
    /// The command name (at most 15 bytes) as last read: after an exec, the new program's.
    pub comm: String,
    /// The command line as last read, arguments joined by spaces, at most [`CMDLINE_MAX_BYTES`]
    /// bytes; it shows titles a process sets itself (`postgres: checkpointer`). Empty in
    /// recordings made before it was kept.
    #[serde(default)]
    pub cmdline: String,
    /// The highest VmHWM read while it was alive, over all phases and runs (resets included;
    /// exact when read after its peak). For a process older than the recording, this may be
    /// its lifetime mark, set before the recording began: `recording_peak_bytes` is the
    /// recording's own.
    pub hwm_bytes: u64,
    /// Its peak within the recording, by the window rules of the recording's own peak: the
    /// highest VmHWM read after a reset of the marks, of a process born during the recording,
    /// or that rose above the mark an older process brought in. Exact when
    /// `recording_peak_exact`; else (an older process whose mark did not rise, in a stretch
    /// with no reset) a lower bound: at least the largest RSS read there. `None` in recordings
    /// made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_peak_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_peak_exact: Option<bool>,
}

impl ProcessRecord {
    /// Its peak within the recording, and whether it is exact (`Some(false)`: a lower bound);
    /// in a recording made before memmon kept that, its `hwm_bytes` and `None`: as read, maybe
    /// set before the recording began.
    pub fn recording_peak(&self) -> (u64, Option<bool>) {
        match (self.recording_peak_bytes, self.recording_peak_exact) {
            (Some(b), Some(exact)) => (b, Some(exact)),
            _ => (self.hwm_bytes, None),
        }
    }
}
