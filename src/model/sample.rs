//! One row of a recording: the tree's memory at one tick, with the time it was taken and, on
//! some rows, the event that happened then (the start, a restart, a marker). This struct is
//! what the writers in `format/` write and what their readers give back.

use std::fmt;

/// A sample as written to and read from a recording. Sizes are bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Wall-clock time, milliseconds since the Unix epoch (UTC).
    pub unix_ms: u64,
    /// Seconds since the recording started, from a monotonic clock.
    pub elapsed_s: f64,
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub shmem_bytes: u64,
    pub swap_bytes: u64,
    pub locked_bytes: u64,
    pub pinned_bytes: u64,
    /// Processes in the tree at this tick.
    pub processes: u32,
    /// The process with the largest RSS, and that RSS.
    pub top_pid: i32,
    pub top_rss_bytes: u64,
    /// Largest VmHWM of any process alive at this tick: that process's exact peak so far.
    pub hwm_bytes: u64,
    /// Sum of VmHWM over the processes alive at this tick: an upper bound, not a peak.
    pub hwm_sum_bytes: u64,
    /// PSS of the tree, only on ticks where it was read (`--pss`).
    pub pss_bytes: Option<u64>,
    /// Ticks missed since the recording started (cumulative).
    pub missed_ticks: u64,
    /// GPU memory of the tree and of the GPUs it uses (all `None` when GPU memory is not read).
    pub gpu: crate::model::gpu::GpuTick,
    pub event: Option<Event>,
}

/// Something that happened at a sample's tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The first sample of a recording session (also after `--append`).
    Start,
    /// The watched process was replaced by a new one (same name or pidfile), PID given.
    Restart(i32),
    /// A marker, with its label (`memmon mark`, `--mark-log`, `--mark-stdout`).
    Mark(String),
    /// A benchmark run began or ended (run number, from 1).
    RunStart(u32),
    RunEnd(u32),
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Start => write!(f, "start"),
            Event::Restart(pid) => write!(f, "restart:{pid}"),
            Event::Mark(label) => write!(f, "mark:{label}"),
            Event::RunStart(n) => write!(f, "run-start:{n}"),
            Event::RunEnd(n) => write!(f, "run-end:{n}"),
        }
    }
}

impl Event {
    /// Parses the text written by `Display`.
    pub fn parse(text: &str) -> Result<Event, String> {
        let (kind, arg) = match text.split_once(':') {
            Some((k, a)) => (k, Some(a)),
            None => (text, None),
        };
        // A number that does not fit (`restart:99999999999`) is refused, not wrapped.
        let number = |a: Option<&str>, max: i64| {
            a.and_then(|a| a.parse::<i64>().ok())
                .filter(|n| (0..=max).contains(n))
                .ok_or_else(|| {
                    format!("event '{text}' needs a whole number from 0 to {max} after ':'")
                })
        };
        match kind {
            "start" => Ok(Event::Start),
            "restart" => Ok(Event::Restart(number(arg, i32::MAX as i64)? as i32)),
            "mark" => Ok(Event::Mark(arg.unwrap_or("").to_string())),
            "run-start" => Ok(Event::RunStart(number(arg, u32::MAX as i64)? as u32)),
            "run-end" => Ok(Event::RunEnd(number(arg, u32::MAX as i64)? as u32)),
            _ => Err(format!(
                "unknown event '{text}' (expected start, restart:PID, mark:LABEL, run-start:N, run-end:N)"
            )),
        }
    }
}

/// A column of the recording: name (with its unit), unit, meaning. The order is the CSV order.
pub struct Column {
    pub name: &'static str,
    pub unit: &'static str,
    pub meaning: &'static str,
}

pub const COLUMNS: &[Column] = &[
    Column {
        name: "unix_ms",
        unit: "ms since 1970-01-01 UTC",
        meaning: "wall-clock time of the tick",
    },
    Column {
        name: "elapsed_s",
        unit: "s",
        meaning: "time since the recording started, monotonic clock",
    },
    Column {
        name: "rss_bytes",
        unit: "bytes",
        meaning: "resident set size of the tree (sum of VmRSS)",
    },
    Column {
        name: "anon_bytes",
        unit: "bytes",
        meaning: "anonymous resident memory (sum of RssAnon)",
    },
    Column {
        name: "file_bytes",
        unit: "bytes",
        meaning: "file-backed resident memory (sum of RssFile)",
    },
    Column {
        name: "shmem_bytes",
        unit: "bytes",
        meaning: "shared-memory resident pages (sum of RssShmem)",
    },
    Column {
        name: "swap_bytes",
        unit: "bytes",
        meaning: "swapped-out anonymous memory (sum of VmSwap)",
    },
    Column {
        name: "locked_bytes",
        unit: "bytes",
        meaning: "mlock'd memory (sum of VmLck)",
    },
    Column {
        name: "pinned_bytes",
        unit: "bytes",
        meaning: "long-term pinned memory (sum of VmPin)",
    },
    Column {
        name: "processes",
        unit: "count",
        meaning: "processes in the tree",
    },
    Column {
        name: "top_pid",
        unit: "pid",
        meaning: "the process with the largest RSS",
    },
    Column {
        name: "top_rss_bytes",
        unit: "bytes",
        meaning: "that process's RSS",
    },
    Column {
        name: "hwm_bytes",
        unit: "bytes",
        meaning: "largest VmHWM of a live process: its exact peak so far",
    },
    Column {
        name: "hwm_sum_bytes",
        unit: "bytes",
        meaning: "sum of VmHWM of live processes: an upper bound, not a peak",
    },
    Column {
        name: "pss_bytes",
        unit: "bytes",
        meaning: "proportional set size of the tree; empty when not read at this tick",
    },
    Column {
        name: "missed_ticks",
        unit: "count",
        meaning: "ticks that could not be taken on time, so far",
    },
    Column {
        name: "event",
        unit: "text",
        meaning: "empty, or start, restart:PID, mark:LABEL, run-start:N, run-end:N",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_text() {
        for e in [
            Event::Start,
            Event::Restart(42),
            Event::Mark("gpu prove: done".into()),
            Event::RunStart(3),
            Event::RunEnd(3),
        ] {
            assert_eq!(Event::parse(&e.to_string()).unwrap(), e);
        }
        assert!(Event::parse("explode").is_err());
    }
}
