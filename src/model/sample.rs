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
    /// Largest VmHWM of a process alive at this tick, or of one that left the tree since the
    /// previous row as its exit record gave it: that process's exact peak so far.
    pub hwm_bytes: u64,
    /// Sum of VmHWM over those processes: an upper bound, not a peak.
    pub hwm_sum_bytes: u64,
    /// PSS of the tree, only on ticks where it was read (`--pss`).
    pub pss_bytes: Option<u64>,
    /// Ticks missed since the recording started (cumulative).
    pub missed_ticks: u64,
    /// GPU memory of the tree and of the GPUs it uses (all `None` when GPU memory is not read).
    pub gpu: crate::model::gpu::GpuTick,
    /// With `--pss` and GPU memory read, on ticks where PSS was read: the resident part of the
    /// tree's GPU processes' mappings of NVIDIA device files (smaps).
    pub nvidia_mapped_rss_bytes: Option<u64>,
    /// With `--pss`, on ticks where PSS was read: transparent huge pages of the tree (sum of
    /// AnonHugePages in the same smaps_rollup or smaps read).
    pub anon_huge_bytes: Option<u64>,
    /// Sum of VmSize over the tree: virtual address space mapped, not memory used.
    pub vm_size_bytes: u64,
    /// Threads in the tree (sum of each process's `Threads`).
    pub threads: u32,
    /// Processes that left the tree since the previous row (exited; or, known from exit
    /// records only, born and gone in between).
    pub departed: u32,
    /// Major page faults of the tree since the recording began (cumulative, never falling):
    /// each member's `majflt` (/proc/PID/stat), those that left included (their exit records,
    /// or their last read).
    pub major_faults: u64,
    /// The machine's memory pressure stall (/proc/pressure/memory `some` and `full` total=),
    /// microseconds since the recording began; `None` where the kernel has no PSI.
    pub psi_memory_some_us: Option<u64>,
    pub psi_memory_full_us: Option<u64>,
    /// The machine's swap traffic (/proc/vmstat `pswpin`, `pswpout`), pages since the
    /// recording began; `None` where the recorded cgroup counts its own (`cgroup_swap_*`).
    pub swap_in_pages: Option<u64>,
    pub swap_out_pages: Option<u64>,
    /// The memory cgroup's files at this tick (`record --cgroup`, or memmon's own cgroup of a
    /// launched command); all `None` when no cgroup is recorded. See probe::cgroup::CgroupStats.
    pub cgroup_bytes: Option<u64>,
    pub cgroup_anon_bytes: Option<u64>,
    pub cgroup_file_bytes: Option<u64>,
    pub cgroup_kernel_bytes: Option<u64>,
    pub cgroup_shmem_bytes: Option<u64>,
    pub cgroup_sock_bytes: Option<u64>,
    pub cgroup_working_set_bytes: Option<u64>,
    /// `None` also when the cgroup has no limit (`max`).
    pub cgroup_limit_bytes: Option<u64>,
    /// The cgroup's peak since it was made or last reset (at markers with `--phase-peaks`).
    pub cgroup_peak_bytes: Option<u64>,
    pub cgroup_oom_events: Option<u64>,
    pub cgroup_oom_kill_events: Option<u64>,
    pub cgroup_max_events: Option<u64>,
    pub cgroup_high_events: Option<u64>,
    /// The cgroup's memory pressure stall (its memory.pressure, v2 only), microseconds since
    /// the recording began.
    pub cgroup_psi_memory_some_us: Option<u64>,
    pub cgroup_psi_memory_full_us: Option<u64>,
    /// The cgroup's own swap traffic (v2 memory.stat `pswpin`, `pswpout`, where the kernel has
    /// them), pages since the recording began.
    pub cgroup_swap_in_pages: Option<u64>,
    pub cgroup_swap_out_pages: Option<u64>,
    /// The cgroup's transparent huge pages (memory.stat `anon_thp`, v1 `total_rss_huge`).
    pub cgroup_anon_thp_bytes: Option<u64>,
    /// The tree's processes found outside the recorded cgroup at this tick (moved by systemd,
    /// cgexec, a scheduler): their memory is charged elsewhere, so the cgroup's peak is not the
    /// tree's. Checked only where the cgroup held the tree alone.
    pub cgroup_outside_processes: Option<u64>,
    /// On a row taken for a marker that did not wait for its row (a followed log, a command's
    /// stdout): microseconds from the marker (its arrival, or its log line's last write) to
    /// this row's reading.
    pub event_lag_us: Option<u64>,
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
    /// A benchmark run began or ended (run number, from 1). Run [`WINDOW`] is the measured
    /// window of a bench with several runs in flight (`bench --concurrency`), written
    /// `window-start` and `window-end`: the span whose peak is reset at its start and exact.
    RunStart(u32),
    RunEnd(u32),
    /// A client of a bench with several runs in flight started or ended (its run number, from
    /// 1; 0 for a warmup run). Such runs overlap, so these rows bound no span: they say how many
    /// were in flight at each moment of the window.
    ClientStart(u32),
    ClientEnd(u32),
}

/// The run number of a bench's measured window (`bench --concurrency`): no run has it, as runs
/// count from 1.
pub const WINDOW: u32 = 0;

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Start => write!(f, "start"),
            Event::Restart(pid) => write!(f, "restart:{pid}"),
            Event::Mark(label) => write!(f, "mark:{label}"),
            Event::RunStart(WINDOW) => write!(f, "window-start"),
            Event::RunEnd(WINDOW) => write!(f, "window-end"),
            Event::RunStart(n) => write!(f, "run-start:{n}"),
            Event::RunEnd(n) => write!(f, "run-end:{n}"),
            Event::ClientStart(n) => write!(f, "client-start:{n}"),
            Event::ClientEnd(n) => write!(f, "client-end:{n}"),
        }
    }
}

/// The longest marker label, in characters: what the marker sources write at most
/// (`marks::clean_label`), and what a reader keeps of a longer one (`Event::parse` cuts it), so
/// no reader holds more than this per event whatever a file says.
pub const MAX_LABEL_CHARS: usize = 200;

impl Event {
    /// A marker or a bench run's start or end: a row that closes or opens a phase or a run.
    pub fn bounds_a_span(&self) -> bool {
        matches!(self, Event::Mark(_) | Event::RunStart(_) | Event::RunEnd(_))
    }

    /// Parses the text written by `Display`. A marker's label longer than [`MAX_LABEL_CHARS`]
    /// characters (not one memmon wrote) is cut to that many.
    pub fn parse(text: &str) -> Result<Event, EventError> {
        let (kind, arg) = match text.split_once(':') {
            Some((k, a)) => (k, Some(a)),
            None => (text, None),
        };
        // A number that does not fit (`restart:99999999999`) is refused, not wrapped.
        let number = |a: Option<&str>, max: i64| {
            a.and_then(|a| a.parse::<i64>().ok())
                .filter(|n| (0..=max).contains(n))
                .ok_or_else(|| EventError::Number {
                    event: crate::units::printable(text, 80),
                    max,
                })
        };
        match kind {
            "start" => Ok(Event::Start),
            "restart" => Ok(Event::Restart(number(arg, i32::MAX as i64)? as i32)),
            "mark" => {
                // As a marker's label is written (`marks::clean_label`): control characters
                // become spaces, in a file edited by hand too.
                let label = arg.unwrap_or("");
                Ok(Event::Mark(
                    label
                        .chars()
                        .take(MAX_LABEL_CHARS)
                        .map(|c| if c.is_control() { ' ' } else { c })
                        .collect(),
                ))
            }
            "run-start" => Ok(Event::RunStart(number(arg, u32::MAX as i64)? as u32)),
            "run-end" => Ok(Event::RunEnd(number(arg, u32::MAX as i64)? as u32)),
            "window-start" => Ok(Event::RunStart(WINDOW)),
            "window-end" => Ok(Event::RunEnd(WINDOW)),
            "client-start" => Ok(Event::ClientStart(number(arg, u32::MAX as i64)? as u32)),
            "client-end" => Ok(Event::ClientEnd(number(arg, u32::MAX as i64)? as u32)),
            _ => Err(EventError::Unknown(crate::units::printable(text, 80))),
        }
    }
}

/// An event cell no memmon writes (`Event::parse`); its reader names the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("event '{event}' needs a whole number from 0 to {max} after ':'")]
    Number { event: String, max: i64 },
    #[error(
        "unknown event '{0}' (expected start, restart:PID, mark:LABEL, run-start:N, run-end:N, window-start, window-end, client-start:N, client-end:N)"
    )]
    Unknown(String),
}

impl crate::error::Classified for EventError {
    /// A malformed recording: bad input.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// A column of the recording: its name (with its unit), unit, meaning and how it is read from
/// and written to a `Sample`. `COLUMNS`, built from `for_columns!`, is followed by the CSV and
/// JSON Lines writers and readers, the metadata's column list and docs/FORMAT.md (checked by a
/// test).
pub struct Column {
    pub name: &'static str,
    pub unit: &'static str,
    pub meaning: &'static str,
    /// Who fills it while recording (`for_columns!`): `sum(F)` or `max(F)` of the members'
    /// `probe::StatusMem::F`, `tree`, `tick`, `pss`, `gpu`, `cgroup`, `psi` or `swap`.
    pub source: &'static str,
    pub field: Field,
}

/// How a column's value lives in a `Sample`: its type, and a getter and setter of that field.
/// The kind decides how a value is written (integer, 6-decimal seconds, text) and read back.
#[derive(Clone, Copy)]
pub enum Field {
    /// An unsigned integer (bytes, milliseconds, counts); 0 when a reader's file lacks it.
    U64(fn(&Sample) -> u64, fn(&mut Sample, u64)),
    /// A count that fits 32 bits; a larger value is refused by the readers, not wrapped.
    U32(fn(&Sample) -> u32, fn(&mut Sample, u32)),
    /// A PID.
    I32(fn(&Sample) -> i32, fn(&mut Sample, i32)),
    /// Seconds, written with 6 decimals.
    Seconds(fn(&Sample) -> f64, fn(&mut Sample, f64)),
    /// A value read only on some ticks, or only when its source is on (`--pss`; a column whose
    /// source may be absent): an empty CSV cell, an absent JSON key when `None`.
    OptU64(fn(&Sample) -> Option<u64>, fn(&mut Sample, Option<u64>)),
    /// The event, as text (`Event`'s `Display`); last in the table, so that a CSV row's
    /// unquoted text runs to the end of the line.
    Event(
        fn(&Sample) -> Option<&Event>,
        fn(&mut Sample, Option<Event>),
    ),
}

/// One entry of `COLUMNS`, from a line of `for_columns!`: named `name`, held in the `Sample`
/// field at the path `f.sub...`, filled by `source`.
macro_rules! column {
    ($name:ident = $($f:ident).+, $kind:ident, $unit:expr, $meaning:expr, $source:expr) => {
        Column {
            name: stringify!($name),
            unit: $unit,
            meaning: $meaning,
            source: $source,
            field: Field::$kind(|s| column!(@get $kind s.$($f).+), |s, v| s.$($f).+ = v),
        }
    };
    (@get Event $e:expr) => { $e.as_ref() };
    (@get $kind:ident $e:expr) => { $e };
}

/// The columns, in CSV order: `(name, field path in Sample, Kind, unit, meaning, source)`. This
/// list is the one declaration of the columns; `for_columns!(m)` hands it to the macro `m`,
/// which builds `COLUMNS` here, the CSV row writer and fast-path parser in `format/csv.rs`
/// (straight-line code, no per-field indirection) and the tree's sum of its members'
/// /proc/PID/status values in `sampler/tree.rs`.
///
/// The source says who fills the column: `sum(F)` and `max(F)` the tree, as the sum (the
/// largest) over its members of `probe::StatusMem`'s field `F` (generated from this line: no
/// other code names the column); `tree` the tree's own logic (counts, the largest process,
/// departures); `tick` the engine (time, missed ticks, the event); `pss`, `gpu`, `cgroup`, `psi`
/// those sources (`sampler/watch.rs`, `sampler/cgroup.rs`, `sampler/gpu.rs`, `sampler/psi.rs`).
///
/// To add a /proc/PID/status column: its probe (a `StatusMem` field and its key in
/// `probe::proc::parse_status`), its field in `Sample` and its line here with `sum(F)` (an
/// `OptU64` when its source may be off), and its row in docs/FORMAT.md. `event` stays last.
#[rustfmt::skip]
macro_rules! for_columns {
    ($m:ident) => {
        $m! {
            (unix_ms, unix_ms, U64, "ms since 1970-01-01 UTC", "wall-clock time of the tick", tick),
            (elapsed_s, elapsed_s, Seconds, "s", "time since the recording started, monotonic clock", tick),
            (rss_bytes, rss_bytes, U64, "bytes", "resident set size of the tree (sum of VmRSS)", sum(rss)),
            (anon_bytes, anon_bytes, U64, "bytes", "anonymous resident memory (sum of RssAnon)", sum(anon)),
            (file_bytes, file_bytes, U64, "bytes", "file-backed resident memory (sum of RssFile)", sum(file)),
            (shmem_bytes, shmem_bytes, U64, "bytes", "shared-memory resident pages (sum of RssShmem)", sum(shmem)),
            (swap_bytes, swap_bytes, U64, "bytes", "swapped-out anonymous memory (sum of VmSwap)", sum(swap)),
            (locked_bytes, locked_bytes, U64, "bytes", "mlock'd memory (sum of VmLck)", sum(locked)),
            (pinned_bytes, pinned_bytes, U64, "bytes", "long-term pinned memory (sum of VmPin)", sum(pinned)),
            (processes, processes, U32, "count", "processes in the tree", tree),
            (top_pid, top_pid, I32, "pid", "the process with the largest RSS", tree),
            (top_rss_bytes, top_rss_bytes, U64, "bytes", "that process's RSS", tree),
            (hwm_bytes, hwm_bytes, U64, "bytes", "largest VmHWM of a live process, or of one that left since the previous row (its exit record): its exact peak so far", max(hwm)),
            (hwm_sum_bytes, hwm_sum_bytes, U64, "bytes", "sum of VmHWM of those processes: an upper bound, not a peak", sum(hwm)),
            (pss_bytes, pss_bytes, OptU64, "bytes", "proportional set size of the tree; empty when not read at this tick", pss),
            (missed_ticks, missed_ticks, U64, "count", "ticks that could not be taken on time, so far", tick),
            (gpu_bytes, gpu.bytes, OptU64, "bytes", "GPU memory held by the tree's processes (NVML, summed over their PIDs); empty when GPU memory is not read", gpu),
            (gpu_device_used_bytes, gpu.device_used_bytes, OptU64, "bytes", "used memory of the GPUs the tree uses (every process's); empty when it uses none or GPU memory is not read", gpu),
            (gpu_device_total_bytes, gpu.device_total_bytes, OptU64, "bytes", "total memory of those GPUs; empty as gpu_device_used_bytes", gpu),
            (gpu_hwm_bytes, gpu.hwm_bytes, OptU64, "bytes", "largest NVML accounting maxMemoryUsage of a tree process on one GPU, running or ended since the previous row: its exact GPU peak so far; empty when accounting is off or a tree process has no record", gpu),
            (gpu_hwm_sum_bytes, gpu.hwm_sum_bytes, OptU64, "bytes", "sum of those maxima: an upper bound of the tree's GPU peak, not a peak; empty as gpu_hwm_bytes", gpu),
            (nvidia_mapped_bytes, gpu.nvidia_mapped_bytes, OptU64, "bytes", "size of the tree's GPU processes' mappings of NVIDIA device files (/dev/nvidia*, from /proc/PID/maps), read with each GPU reading: where CUDA's pinned host buffers live; empty when GPU memory is not read", gpu),
            (nvidia_mapped_rss_bytes, nvidia_mapped_rss_bytes, OptU64, "bytes", "resident part of those mappings (Rss in /proc/PID/smaps), read with PSS (--pss) on its ticks; empty elsewhere", pss),
            (anon_huge_bytes, anon_huge_bytes, OptU64, "bytes", "transparent huge pages of the tree (sum of AnonHugePages), read with PSS (--pss) on its ticks from the same smaps_rollup (smaps) read; empty elsewhere", pss),
            (vm_size_bytes, vm_size_bytes, U64, "bytes", "virtual address space of the tree (sum of VmSize): mapped, not used", sum(vm_size)),
            (threads, threads, U32, "count", "threads in the tree (sum of Threads)", sum(threads)),
            (departed, departed, U32, "count", "processes that left the tree since the previous row (exited, or born and gone in between: known from exit records)", tree),
            (major_faults, major_faults, U64, "count", "major page faults of the tree since the recording began (cumulative, never falling): each process's majflt (/proc/PID/stat) counted from the first row for a process already running then, from its start for one started after; a process that left counts with its exit records' count (taskstats), else its last read", tree),
            (psi_memory_some_us, psi_memory_some_us, OptU64, "µs", "the machine's memory pressure stall since the recording began (cumulative): time some task waited on memory (/proc/pressure/memory some total=); empty where the kernel has PSI off", psi),
            (psi_memory_full_us, psi_memory_full_us, OptU64, "µs", "as psi_memory_some_us for full total=: time every non-idle task waited on memory at once", psi),
            (swap_in_pages, swap_in_pages, OptU64, "pages", "the machine's pages swapped in since the recording began (cumulative; /proc/vmstat pswpin: every program's, not only the tree's), read off the tick at least once a second; empty where the recorded cgroup counts its own (cgroup_swap_in_pages)", swap),
            (swap_out_pages, swap_out_pages, OptU64, "pages", "as swap_in_pages for pages swapped out (/proc/vmstat pswpout)", swap),
            (cgroup_bytes, cgroup_bytes, OptU64, "bytes", "the memory cgroup's memory.current (v1 memory.usage_in_bytes): each page once, page cache included; empty without a cgroup", cgroup),
            (cgroup_anon_bytes, cgroup_anon_bytes, OptU64, "bytes", "anon of its memory.stat (v1 total_rss)", cgroup),
            (cgroup_file_bytes, cgroup_file_bytes, OptU64, "bytes", "file (page cache, shmem included) of its memory.stat (v1 total_cache)", cgroup),
            (cgroup_kernel_bytes, cgroup_kernel_bytes, OptU64, "bytes", "kernel of its memory.stat (v1 memory.kmem.usage_in_bytes)", cgroup),
            (cgroup_shmem_bytes, cgroup_shmem_bytes, OptU64, "bytes", "shmem of its memory.stat (v1 total_shmem)", cgroup),
            (cgroup_sock_bytes, cgroup_sock_bytes, OptU64, "bytes", "sock of its memory.stat (v1 memory.kmem.tcp.usage_in_bytes)", cgroup),
            (cgroup_working_set_bytes, cgroup_working_set_bytes, OptU64, "bytes", "working set as Kubernetes computes it: current - inactive_file", cgroup),
            (cgroup_limit_bytes, cgroup_limit_bytes, OptU64, "bytes", "memory.max (v1 memory.limit_in_bytes); empty also when it has no limit", cgroup),
            (cgroup_peak_bytes, cgroup_peak_bytes, OptU64, "bytes", "memory.peak (v1 memory.max_usage_in_bytes) since the cgroup was made or reset (--phase-peaks resets it at markers)", cgroup),
            (cgroup_oom_events, cgroup_oom_events, OptU64, "count", "memory.events oom, since the cgroup was made (v1: 0)", cgroup),
            (cgroup_oom_kill_events, cgroup_oom_kill_events, OptU64, "count", "memory.events oom_kill (v1 memory.oom_control oom_kill)", cgroup),
            (cgroup_max_events, cgroup_max_events, OptU64, "count", "memory.events max: usage hit the limit (v1 memory.failcnt)", cgroup),
            (cgroup_high_events, cgroup_high_events, OptU64, "count", "memory.events high: usage went over memory.high (v1: 0)", cgroup),
            (cgroup_psi_memory_some_us, cgroup_psi_memory_some_us, OptU64, "µs", "as psi_memory_some_us for the tasks of the recorded cgroup (its memory.pressure); empty without a v2 cgroup that has it", psi),
            (cgroup_psi_memory_full_us, cgroup_psi_memory_full_us, OptU64, "µs", "as psi_memory_full_us for the tasks of the recorded cgroup", psi),
            (cgroup_swap_in_pages, cgroup_swap_in_pages, OptU64, "pages", "pages the recorded cgroup's tasks swapped in since the recording began (cumulative; v2 memory.stat pswpin); empty without a v2 cgroup whose kernel has it (v1 has none)", cgroup),
            (cgroup_swap_out_pages, cgroup_swap_out_pages, OptU64, "pages", "as cgroup_swap_in_pages for pages swapped out (memory.stat pswpout)", cgroup),
            (cgroup_anon_thp_bytes, cgroup_anon_thp_bytes, OptU64, "bytes", "transparent huge pages of the cgroup (memory.stat anon_thp, v1 total_rss_huge)", cgroup),
            (cgroup_outside_processes, cgroup_outside_processes, OptU64, "count", "the tree's processes found outside the recorded cgroup at this tick (moved out by systemd, cgexec, a scheduler): above 0, the cgroup's peak misses their memory and is not the tree's; empty without a cgroup that held the tree alone", cgroup),
            (event_lag_us, event_lag_us, OptU64, "µs", "on the row of a marker that did not wait for it (--mark-log, --mark-stdout, a socket request with at_unix_us): from the marker's arrival, its log line's last write, or the time the program made it, to this reading; empty elsewhere", tick),
            (event, event, Event, "text", "empty, or start, restart:PID, mark:LABEL, run-start:N, run-end:N", tick),
        }
    };
}
pub(crate) use for_columns;

macro_rules! column_table {
    ($(($name:ident, $($f:ident).+, $kind:ident, $unit:expr, $meaning:expr, $src:ident $(($from:ident))?),)*) => {
        /// The columns, in CSV order (see `for_columns!`).
        pub const COLUMNS: &[Column] = &[$(column!(
            $name = $($f).+, $kind, $unit, $meaning,
            concat!(stringify!($src) $(, "(", stringify!($from), ")")?)
        )),*];
    };
}
for_columns!(column_table);

/// The columns a recording must have to be read (a memmon recording of any version has them);
/// any other column a file lacks reads as 0, or empty.
pub const REQUIRED_COLUMNS: [&str; 3] = ["unix_ms", "elapsed_s", "rss_bytes"];

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
            Event::RunStart(WINDOW),
            Event::RunEnd(WINDOW),
            Event::ClientStart(4),
            Event::ClientEnd(0),
        ] {
            assert_eq!(Event::parse(&e.to_string()).unwrap(), e);
        }
        assert!(Event::parse("explode").is_err());
    }

    #[test]
    fn a_label_longer_than_memmon_writes_is_cut_when_read() {
        let long = format!("mark:{}", "é".repeat(1 << 19));
        let Event::Mark(label) = Event::parse(&long).unwrap() else {
            panic!("a mark");
        };
        assert_eq!(label, "é".repeat(MAX_LABEL_CHARS));
        let Event::Mark(label) = Event::parse(&format!("mark:{}", "x".repeat(200))).unwrap() else {
            panic!("a mark");
        };
        assert_eq!(
            label.len(),
            200,
            "a label of the most memmon writes is kept whole"
        );
    }

    #[test]
    fn the_event_column_is_last_and_the_only_text_one() {
        let last = COLUMNS.len() - 1;
        for (i, c) in COLUMNS.iter().enumerate() {
            assert_eq!(matches!(c.field, Field::Event(..)), i == last, "{}", c.name);
        }
        for name in REQUIRED_COLUMNS {
            assert!(COLUMNS.iter().any(|c| c.name == name), "{name}");
        }
    }

    #[test]
    fn each_column_gets_and_sets_its_own_field() {
        // Set every column to a distinct value through the table; each field must hold its own.
        let mut s = Sample::default();
        for (i, c) in COLUMNS.iter().enumerate() {
            let v = 1000 + i as u64;
            match c.field {
                Field::U64(_, set) => set(&mut s, v),
                Field::U32(_, set) => set(&mut s, v as u32),
                Field::I32(_, set) => set(&mut s, v as i32),
                Field::Seconds(_, set) => set(&mut s, v as f64),
                Field::OptU64(_, set) => set(&mut s, Some(v)),
                Field::Event(_, set) => set(&mut s, Some(Event::RunEnd(v as u32))),
            }
        }
        assert_eq!(s.rss_bytes, 1002);
        assert_eq!(s.top_pid, 1010);
        assert_eq!(s.pss_bytes, Some(1014));
        assert_eq!(s.missed_ticks, 1015);
        assert_eq!(s.gpu.bytes, Some(1016));
        assert_eq!(s.gpu.device_total_bytes, Some(1018));
        assert_eq!(s.gpu.hwm_bytes, Some(1019));
        assert_eq!(s.gpu.nvidia_mapped_bytes, Some(1021));
        assert_eq!(s.nvidia_mapped_rss_bytes, Some(1022));
        assert_eq!(s.anon_huge_bytes, Some(1023));
        assert_eq!(s.vm_size_bytes, 1024);
        assert_eq!(s.threads, 1025);
        assert_eq!(
            s.event,
            Some(Event::RunEnd(1000 + COLUMNS.len() as u32 - 1))
        );
        for (i, c) in COLUMNS.iter().enumerate() {
            let v = 1000 + i as u64;
            let got = match c.field {
                Field::U64(get, _) => get(&s),
                Field::U32(get, _) => get(&s) as u64,
                Field::I32(get, _) => get(&s) as u64,
                Field::Seconds(get, _) => get(&s) as u64,
                Field::OptU64(get, _) => get(&s).unwrap(),
                Field::Event(get, _) => match get(&s) {
                    Some(Event::RunEnd(n)) => *n as u64,
                    _ => 0,
                },
            };
            assert_eq!(got, v, "{}", c.name);
        }
    }

    #[test]
    fn format_md_lists_exactly_these_columns_in_order() {
        let doc = include_str!("../../docs/FORMAT.md");
        let section = doc
            .split("## Columns")
            .nth(1)
            .expect("docs/FORMAT.md has a '## Columns' section");
        let documented: Vec<&str> = section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2) // the header and its rule
            .map(|l| l.split('|').nth(1).unwrap().trim().trim_matches('`'))
            .collect();
        let table: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(
            documented, table,
            "docs/FORMAT.md's column table and COLUMNS differ"
        );
    }
}
