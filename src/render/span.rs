//! A span's numbers in words (`analysis::span`): its PSS reads, its memory health (the cells and
//! legends of a table's columns, and the summary's sentence), its memory per NUMA node
//! (`analysis::numa`). The summary, the phases and runs tables, the report and bench's table all
//! say them here, so a run reads alike in each.

use crate::analysis::numa::NodePeak;
use crate::analysis::span::{MemoryHealth, PssReads};
use crate::units::{count, fmt_bytes, fmt_seconds};

impl PssReads {
    /// `1.20 GiB peak PSS (12 reads, +0 µs to +2.00 s)` or `300.0 MiB PSS, not at the peak
    /// (4 reads, ..., none at the RSS peak)`.
    pub fn describe(&self) -> String {
        format!(
            "{} {} ({})",
            fmt_bytes(self.largest_bytes),
            if self.is_peak {
                "peak PSS"
            } else {
                "PSS, not at the peak"
            },
            self.reads_note()
        )
    }

    /// `12 reads, +0 µs to +2.00 s`, `1 read at +0 µs, none at the RSS peak`.
    pub fn reads_note(&self) -> String {
        let reads = if self.reads == 1 {
            format!("1 read at +{}", fmt_seconds(self.first_elapsed_s))
        } else {
            format!(
                "{} reads, +{} to +{}",
                self.reads,
                fmt_seconds(self.first_elapsed_s),
                fmt_seconds(self.last_elapsed_s)
            )
        };
        if self.is_peak {
            reads
        } else {
            format!("{reads}, none at the RSS peak")
        }
    }
}

impl MemoryHealth {
    /// What a span's peak is where the OOM killer struck in it.
    pub const OOM_MEANS: &'static str =
        "the peak is where the limit stopped the tree, not what it would have used";

    /// `2`, or `-` when none.
    pub fn oom_cell(&self) -> String {
        match self.cgroup_oom_kills {
            Some(n) if n > 0 => n.to_string(),
            _ => "-".into(),
        }
    }

    /// What a table's OOM kills column holds, in words.
    pub fn oom_legend() -> String {
        format!(
            "OOM kills: processes of the recorded cgroup the kernel's OOM killer killed (memory.events oom_kill, v1 memory.oom_control): where any, {}",
            Self::OOM_MEANS
        )
    }

    /// `12 in, 340 out` (pages), or `-` when none.
    pub fn swap_cell(&self) -> String {
        match self.swap() {
            (i, o) if i.unwrap_or(0) > 0 || o.unwrap_or(0) > 0 => {
                format!("{} in, {} out", i.unwrap_or(0), o.unwrap_or(0))
            }
            _ => "-".into(),
        }
    }

    /// `24.0 MiB`, or `-` when none.
    pub fn thp_cell(&self) -> String {
        self.thp().map_or_else(|| "-".into(), fmt_bytes)
    }

    /// What a table's swap column holds, in words.
    pub fn swap_legend(cgroup: bool) -> &'static str {
        if cgroup {
            "swap: pages the recorded cgroup's tasks swapped in and out (its memory.stat pswpin, pswpout)"
        } else {
            "swap: pages the machine swapped in and out (/proc/vmstat pswpin, pswpout): machine-wide, other programs' swap counts too"
        }
    }

    /// What a table's huge pages column holds, in words.
    pub fn thp_legend() -> &'static str {
        "huge pages: the most transparent huge pages in use: the tree's (AnonHugePages, read with --pss) where read, else the cgroup's (memory.stat anon_thp, v1 total_rss_huge)"
    }

    /// `1234 major faults`, or `-` when none.
    pub fn faults_cell(&self) -> String {
        match self.major_faults {
            0 => "-".into(),
            n => n.to_string(),
        }
    }

    /// `12 ms some, 0 µs full` (the cgroup's when it has one, else the machine's), or `-`.
    pub fn stall_cell(&self) -> String {
        match self.stall() {
            (Some(s), full) if s > 0 => {
                format!(
                    "{} some, {} full",
                    fmt_stall(s),
                    fmt_stall(full.unwrap_or(0))
                )
            }
            _ => "-".into(),
        }
    }

    /// What a table's stall column holds, in words.
    pub fn stall_legend(cgroup: bool) -> &'static str {
        if cgroup {
            "memory stall: the time some (all) of the recorded cgroup's tasks waited on memory, from its memory.pressure (PSI)"
        } else {
            "memory stall: the time some (all) tasks of the machine waited on memory, from /proc/pressure/memory (PSI): machine-wide, other programs' stalls count too"
        }
    }

    /// `3 major faults; memory stall 12 ms some, 0 µs full (machine-wide)`, `None` when
    /// nothing moved.
    pub fn describe(&self) -> Option<String> {
        if !self.moved() {
            return None;
        }
        let mut parts = Vec::new();
        if self.major_faults > 0 {
            parts.push(count(self.major_faults, "major fault"));
        }
        if let Some(s) = self.psi_memory_some_us.filter(|&s| s > 0) {
            parts.push(format!(
                "memory stall {} some, {} full (machine-wide, /proc/pressure/memory)",
                fmt_stall(s),
                fmt_stall(self.psi_memory_full_us.unwrap_or(0))
            ));
        }
        if let Some(s) = self.cgroup_psi_memory_some_us.filter(|&s| s > 0) {
            parts.push(format!(
                "the cgroup's {} some, {} full",
                fmt_stall(s),
                fmt_stall(self.cgroup_psi_memory_full_us.unwrap_or(0))
            ));
        }
        let pages = |i: Option<u64>, o: Option<u64>| {
            (i.unwrap_or(0) > 0 || o.unwrap_or(0) > 0)
                .then(|| format!("{} in, {} out", i.unwrap_or(0), o.unwrap_or(0)))
        };
        if let Some(p) = pages(self.swap_in_pages, self.swap_out_pages) {
            parts.push(format!("swap {p} pages (machine-wide, /proc/vmstat)"));
        }
        if let Some(p) = pages(self.cgroup_swap_in_pages, self.cgroup_swap_out_pages) {
            parts.push(format!("the cgroup swapped {p} pages"));
        }
        if let Some(b) = self.anon_huge_bytes.filter(|&b| b > 0) {
            parts.push(format!(
                "transparent huge pages up to {} (the tree's AnonHugePages)",
                fmt_bytes(b)
            ));
        }
        if let Some(b) = self.cgroup_anon_thp_bytes.filter(|&b| b > 0) {
            parts.push(format!("the cgroup's huge pages up to {}", fmt_bytes(b)));
        }
        if let Some(n) = self.cgroup_oom_kills.filter(|&n| n > 0) {
            parts.push(format!("{} in the cgroup", count(n, "OOM kill")));
        }
        Some(parts.join("; "))
    }
}

/// A stall's microseconds for people: `850 µs`, `12 ms`, `3.40 s`.
fn fmt_stall(us: u64) -> String {
    fmt_seconds(us as f64 / 1e6)
}

/// `node 0 1.00 GiB, node 1 3.00 GiB`, or `-` when none was read.
pub fn numa_cell(peaks: &[NodePeak]) -> String {
    if peaks.is_empty() {
        return "-".into();
    }
    peaks
        .iter()
        .map(|p| format!("node {} {}", p.node, fmt_bytes(p.peak_bytes)))
        .collect::<Vec<_>>()
        .join(", ")
}
