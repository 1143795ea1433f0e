//! What the ledger of mappings says at one moment: the mappings of the tree still alive that
//! calls it saw made (mmap, mremap, brk of at least its threshold), grouped by the stack of the
//! call that made them ([`StackGroup`]), as an anatomy carries them (`Anatomy::ledger`).

use serde::{Deserialize, Serialize};

/// One frame of a stack: the function, and the file of its code (its name only: `libc.so.6`,
/// `prover`); a frame that no symbol covers is named by its file and offset
/// (`[libfoo.so+0x1a2b]`), one in no file `[unknown]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Frame {
    pub function: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub module: String,
}

/// The call a mapping was made by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Call {
    Mmap,
    /// Moved or resized by mremap (realloc of a large block): the stack is mremap's.
    Mremap,
    /// The program break raised by brk (malloc's main heap): counted, without a stack (the
    /// kernel cannot pick out large brk calls, so none is unwound).
    Brk,
}

impl Call {
    pub fn key(self) -> &'static str {
        match self {
            Call::Mmap => "mmap",
            Call::Mremap => "mremap",
            Call::Brk => "brk",
        }
    }
}

/// The live mappings one stack made, summed over the tree's processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackGroup {
    /// The calls, innermost first (the system call's wrapper, the allocator, ..., `main`);
    /// empty for brk raises (never unwound).
    pub frames: Vec<Frame>,
    pub call: Call,
    /// The stack was cut short: the copy of the stack ended, or a frame could not be unwound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub processes: u32,
    pub mappings: u64,
    /// The address space they hold (mapped, not necessarily resident), exact.
    pub bytes: u64,
    /// What of it was resident at the anatomy: each mapping's share of the Rss smaps gave the
    /// mappings it lies in (an arena's reserve, a thread's unused stack are not); `None` where
    /// smaps was not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_bytes: Option<u64>,
    /// What its mappings are, where most of them lie in what the anatomy took for malloc's
    /// heap or arenas, or threads' stacks (a glibc arena's reservation is made by glibc's
    /// own frames, which name nothing of the program).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<crate::model::kind::GroupKind>,
    pub min_mapping_bytes: u64,
    pub max_mapping_bytes: u64,
}

impl StackGroup {
    /// What it weighs: its resident bytes where known, else its address space.
    pub fn weight(&self) -> u64 {
        self.resident_bytes.unwrap_or(self.bytes)
    }
}

/// The resident memory credited to the code that touched it (sampled page faults: one fault in
/// `TouchAt::every`, with the user stack), whatever allocator handed it out: the code that wrote
/// it last where its rewrites are tracked (`TouchAt::rearms`), else the code that first touched
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TouchGroup {
    /// The stack of the faulting code, innermost first.
    pub frames: Vec<Frame>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Its estimate: each mapping's Rss shared out among the stacks by the sampled pages of
    /// it still present, in proportion.
    pub resident_bytes: u64,
    /// Of `resident_bytes`, what its samples from before the ledger's last clearing of the
    /// soft-dirty bits stand for (`TouchAt::rearmed_unix_ms`): pages not written since (an
    /// allocator's free memory kept from an earlier run, or data the span only read).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub before_bytes: u64,
    /// The samples behind it (still present at the anatomy).
    pub samples: u64,
}

/// What the sampled page faults say at one anatomy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TouchAt {
    /// One page fault in this many was sampled.
    pub every: u64,
    /// The stacks, largest first.
    pub stacks: Vec<TouchGroup>,
    /// Resident bytes of the tree's data mappings (not code) that read with smaps, and those
    /// no sample still present fell in: memory faulted before the ledger began (attached),
    /// or in mappings too small to be sampled.
    pub resident_bytes: u64,
    pub unsampled_bytes: u64,
    /// The unsampled bytes by what the anatomy took their mappings for (the heap, arenas,
    /// anonymous mappings, files...), largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsampled_by_kind: Vec<(crate::model::kind::GroupKind, u64)>,
    /// Samples read, and those whose page was gone by the anatomy.
    pub samples: u64,
    pub samples_gone: u64,
    /// Of the samples weighed, those of transparent huge pages (every one faulted in is
    /// sampled, each standing for its huge page, where a 4 KiB fault's sample stands for
    /// `every` pages).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub huge_samples: u64,
    /// Samples given up at this anatomy as their page was written again since the last
    /// clearing of the soft-dirty bits (the rewrite's samples stand for it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub samples_rewritten: u64,
    /// How many times the tree's soft-dirty bits had been cleared by this anatomy (at the
    /// recording's start and at each span's end, where the kernel keeps them): 0, rewrites are
    /// not tracked and memory is credited to the code that first touched it.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub rearms: u32,
    /// When they were last cleared (wall clock, ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rearmed_unix_ms: Option<u64>,
}

/// The ledger at one anatomy: what is alive, and what the ledger saw until then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerAt {
    /// The live mappings by stack, largest first.
    pub stacks: Vec<StackGroup>,
    /// When the ledger's state is of (wall clock, ms since the Unix epoch): the row's time, or
    /// a late marker's own time.
    pub at_unix_ms: u64,
    /// Calls of the tree the ledger has seen since it began, and records the kernel dropped
    /// (a ring buffer full: the ledger may miss mappings, and then says so).
    pub calls: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost: u64,
    /// The sampled page faults' credit (`--touch-every`); `None` where they were not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touch: Option<TouchAt>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

impl LedgerAt {
    /// The bytes of every live mapping the ledger saw made.
    pub fn bytes(&self) -> u64 {
        self.stacks.iter().map(|s| s.bytes).sum()
    }
}
