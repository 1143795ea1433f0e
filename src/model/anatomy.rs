//! What a process tree's memory is made of. A [`Mapping`] is one line of /proc/PID/maps (with
//! smaps' resident numbers when they were read); an [`Anatomy`] is the tree's mappings at one
//! moment, summed into [`Group`]s (heap, stacks, anonymous mappings by size class, files by
//! path...), as a recording's anatomy table keeps them (docs/FORMAT.md).

use serde::{Deserialize, Serialize};

/// The access of a mapping: `rw-p`, `r-xp`, `---p`, `rw-s`...
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Perms {
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    /// `s`: shared (`MAP_SHARED`); `p`: private (copy on write).
    pub shared: bool,
}

impl Perms {
    /// No access at all (`---p`, `---s`): a reservation or a guard, never memory in use.
    pub fn none(self) -> bool {
        !(self.read || self.write || self.exec)
    }

    /// Readable and writable, private: what an allocator or a stack uses.
    pub fn rw_private(self) -> bool {
        self.read && self.write && !self.exec && !self.shared
    }
}

/// What smaps says of one mapping, in bytes (the kernel prints kB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// `Rss`: pages of the mapping resident now (huge pages of hugetlbfs not included).
    pub rss_bytes: u64,
    /// `Pss`: the resident pages, each divided by the number of processes mapping it.
    pub pss_bytes: u64,
    /// `Swap`: pages of the mapping swapped out.
    pub swap_bytes: u64,
    /// `AnonHugePages`: the part of `Rss` held in transparent huge pages.
    pub anon_huge_bytes: u64,
    /// `Locked`: the part of `Rss` locked in memory (mlock).
    pub locked_bytes: u64,
    /// `Shared_Hugetlb` + `Private_Hugetlb`: hugetlbfs pages mapped (not in `Rss`).
    pub hugetlb_bytes: u64,
}

impl Usage {
    pub fn add(&mut self, o: &Usage) {
        self.rss_bytes += o.rss_bytes;
        self.pss_bytes += o.pss_bytes;
        self.swap_bytes += o.swap_bytes;
        self.anon_huge_bytes += o.anon_huge_bytes;
        self.locked_bytes += o.locked_bytes;
        self.hugetlb_bytes += o.hugetlb_bytes;
    }

    /// Memory the mapping holds in RAM: `Rss` and the hugetlbfs pages (which `Rss` leaves out).
    pub fn resident_bytes(&self) -> u64 {
        self.rss_bytes + self.hugetlb_bytes
    }
}

/// One mapping of a process's address space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub perms: Perms,
    /// The offset in the mapped file.
    pub offset: u64,
    /// The device of the mapped file, major and minor (`fe:00` is `(0xfe, 0)`): with the inode,
    /// which file it is.
    pub dev: (u32, u32),
    pub inode: u64,
    /// What the kernel shows after the inode: a file's path (` (deleted)` when it was
    /// removed), `[heap]`, `[stack]`, `[anon:NAME]`...; empty for an anonymous mapping.
    pub path: String,
    /// smaps' numbers; `None` when only /proc/PID/maps was read.
    pub usage: Option<Usage>,
    /// smaps' `VmFlags` holds `sd`: the mapping was made or grown (a brk raise, a mapping
    /// merged into it) since the process's soft-dirty bits were last cleared, and the kernel
    /// reports every page of it soft-dirty, written or not.
    pub all_soft_dirty: bool,
}

impl Mapping {
    /// Its size in bytes (virtual: address space, not memory used).
    pub fn size(&self) -> u64 {
        self.end - self.start
    }

    /// Anonymous: no file, no name.
    pub fn anonymous(&self) -> bool {
        self.path.is_empty()
    }
}

/// One process's mappings, as read for an anatomy.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessMaps {
    pub pid: i32,
    pub comm: String,
    /// The path of its program (the /proc/PID/exe link), to tell its own mappings from the
    /// libraries'; `None` when it cannot be read (a kernel thread, a zombie).
    pub exe: Option<String>,
    pub mappings: Vec<Mapping>,
    /// Whether the mappings carry smaps' numbers (read under the PSS guard's rules).
    pub smaps: bool,
}

pub use super::kind::GroupKind;

/// What tells one group from another: its kind, and its name or size class.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupKey {
    pub kind: GroupKind,
    /// The path or name for the kinds told apart by one (`GroupKind::named`); empty for the
    /// others, and for the group that gathers the smallest groups of a kind when an anatomy has
    /// more than `MAX_GROUPS` (`rest`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// For `anon` and `reserved`: the size class of the mappings (analysis::anatomy::size_class);
    /// `None` for the others, and for the rest of a kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_class: Option<u16>,
    /// The smallest groups of this kind, gathered (an anatomy keeps at most `MAX_GROUPS`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rest: bool,
}

/// An anatomy keeps at most this many groups; the smallest of each kind beyond them are
/// gathered into one group of their kind (`GroupKey::rest`), so a process mapping 10,000 files
/// keeps its anatomy small.
pub const MAX_GROUPS: usize = 200;

/// The mappings of one group, summed over the tree's processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    #[serde(flatten)]
    pub key: GroupKey,
    /// Processes with at least one mapping in the group.
    pub processes: u32,
    pub mappings: u64,
    /// The sum of the mappings' sizes (address space), exact.
    pub virtual_bytes: u64,
    /// The smallest and largest mapping of the group.
    pub min_mapping_bytes: u64,
    pub max_mapping_bytes: u64,
    /// smaps' numbers summed; `None` when one of the group's processes' smaps was not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident: Option<Usage>,
}

/// Why an anatomy was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// The first row of a recording session.
    Start,
    /// A new high of the tree's RSS (at least the ratio above the last one taken for a high):
    /// tables written before memmon read each stretch's highest (`peak`).
    NewHigh,
    /// The highest read of a stretch of the recording, between two of its span boundaries
    /// (markers, a bench run's start and end, a restart): read at each new high of the
    /// stretch, and the highest kept and written when the stretch ends (`sampler/anatomy.rs`).
    Peak,
    /// The end of a benchmark run.
    RunEnd,
    /// The end of a phase (the next marker).
    PhaseEnd,
    /// The end of the recording.
    End,
}

impl Trigger {
    pub fn key(self) -> &'static str {
        match self {
            Trigger::Start => "start",
            Trigger::NewHigh => "new-high",
            Trigger::Peak => "peak",
            Trigger::RunEnd => "run-end",
            Trigger::PhaseEnd => "phase-end",
            Trigger::End => "end",
        }
    }
}

/// A process whose mappings an anatomy could not read, or read without smaps, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnatomyUnread {
    pub pid: i32,
    pub comm: String,
    /// True when its maps were read but not its smaps (the PSS guard): its groups' virtual
    /// sizes are in the anatomy, their resident numbers not; false when nothing of it is.
    pub maps_read: bool,
    pub why: String,
}

/// The row an anatomy was asked at: its time, why, and the tree's RSS there.
#[derive(Debug, Clone, Copy)]
pub struct Taken {
    pub trigger: Trigger,
    pub unix_ms: u64,
    pub elapsed_s: f64,
    pub tree_rss: u64,
}

/// The tree's mappings at one moment, grouped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anatomy {
    /// When the reads began: wall clock (ms since the Unix epoch) and seconds since the
    /// recording started, on the clock of the recording's rows.
    pub unix_ms: u64,
    pub elapsed_s: f64,
    pub trigger: Trigger,
    /// The run (`run-end`) or the phase's label (`phase-end`) it closes; for a stretch's
    /// highest (`peak`), the run or phase the stretch is in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<String>,
    /// The tree's RSS at the row that asked for it (VmRSS summed).
    pub rss_bytes: u64,
    /// Processes whose maps were read, and of them those whose smaps was read.
    pub processes: u32,
    pub smaps_processes: u32,
    /// Wall time the reads took, microseconds.
    pub read_us: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<AnatomyUnread>,
    pub groups: Vec<Group>,
    /// The ledger of mappings at this anatomy's row (a late marker's: at its own time): the
    /// live mappings of the calls it saw, by the stack that made them; absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<crate::model::ledger::LedgerAt>,
    /// The ledger was running but did not answer for this anatomy within 10 s (its thread busy
    /// unwinding a flood of stacks, or ended): the anatomy has no stacks, and says why.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ledger_unanswered: bool,
}

impl Anatomy {
    /// An anatomy asked for at a row (`when`: its time, trigger and tree RSS), of `processes`
    /// read (`smaps_processes` with smaps) in `read_us`, grouped into `groups`.
    pub fn new(
        when: Taken,
        counts: (u32, u32),
        read_us: u64,
        unread: Vec<AnatomyUnread>,
        groups: Vec<Group>,
    ) -> Anatomy {
        Anatomy {
            unix_ms: when.unix_ms,
            elapsed_s: when.elapsed_s,
            trigger: when.trigger,
            span: None,
            rss_bytes: when.tree_rss,
            processes: counts.0,
            smaps_processes: counts.1,
            read_us,
            unread,
            groups,
            ledger: None,
            ledger_unanswered: false,
        }
    }

    /// Every group has smaps' numbers (no process's smaps was skipped); not of an anatomy
    /// that read no mapping at all.
    pub fn resident_known(&self) -> bool {
        !self.groups.is_empty() && self.groups.iter().all(|g| g.resident.is_some())
    }

    /// The processes whose maps were not read, each `PID N (comm): why` (one read without its
    /// smaps is in the anatomy, in virtual sizes, as the measure's words say).
    pub fn unread_words(&self) -> Vec<String> {
        self.unread
            .iter()
            .filter(|u| !u.maps_read)
            .map(|u| format!("PID {} ({}): {}", u.pid, u.comm, u.why))
            .collect()
    }

    /// The sum of the groups' virtual sizes.
    pub fn virtual_bytes(&self) -> u64 {
        self.groups.iter().map(|g| g.virtual_bytes).sum()
    }

    /// The sum of the groups' resident bytes (`Usage::resident_bytes`), when all are known.
    pub fn resident_bytes(&self) -> Option<u64> {
        self.groups
            .iter()
            .map(|g| g.resident.map(|r| r.resident_bytes()))
            .sum()
    }
}
