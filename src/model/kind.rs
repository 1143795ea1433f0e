//! What a group of mappings is ([`GroupKind`]): the anatomy's groups (`model::anatomy`) and the
//! ledger's unsampled memory (`model::ledger`) are told by it, each file on its own.

use serde::{Deserialize, Serialize};

/// What a group of mappings is. The order here is the order of a table's ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupKind {
    /// The brk heap (`[heap]`): the main malloc arena.
    Heap,
    /// The main thread's stack (`[stack]`).
    Stack,
    /// Other threads' stacks, with their guard pages (analysis::anatomy says how they are told).
    ThreadStacks,
    /// malloc's other arenas, with their reserves.
    Arenas,
    /// Other anonymous private mappings, by size class: large allocations (malloc's mmapped
    /// chunks, a Vec's buffer), pools.
    Anon,
    /// Anonymous mappings with no access (`---p`) that are no stack's guard and no arena's
    /// reserve: address space reserved (by a runtime, a GPU driver), not memory.
    Reserved,
    /// Anonymous shared mappings (`MAP_SHARED|MAP_ANONYMOUS`, shown as `/dev/zero (deleted)`).
    SharedAnon,
    /// Anonymous mappings a program named (`[anon:NAME]`, `PR_SET_VMA_ANON_NAME`), by name.
    Named,
    /// memfds (`/memfd:NAME (deleted)`), by name.
    Memfd,
    /// POSIX shared memory (`/dev/shm/...`), by path.
    Shm,
    /// System V shared memory segments (`/SYSV<key> (deleted)`), by key.
    Sysv,
    /// Device files (`/dev/nvidia*`: CUDA's pinned host buffers; `/dev/dri/*`...), by path.
    Device,
    /// Anonymous huge pages of hugetlbfs (`MAP_HUGETLB`, shown as `/anon_hugepage`).
    HugePages,
    /// The process's own program file.
    Binary,
    /// Shared libraries (`*.so`, `*.so.N`), by path.
    Library,
    /// Other mapped files (parameter files, databases, locale archives), by path.
    File,
    /// The kernel's own mappings and other named ones: `[vdso]`, `[vvar]`, `anon_inode:...`.
    Special,
}

impl GroupKind {
    /// The kebab-case name (JSON's).
    pub fn key(self) -> &'static str {
        match self {
            GroupKind::Heap => "heap",
            GroupKind::Stack => "stack",
            GroupKind::ThreadStacks => "thread-stacks",
            GroupKind::Arenas => "arenas",
            GroupKind::Anon => "anon",
            GroupKind::Reserved => "reserved",
            GroupKind::SharedAnon => "shared-anon",
            GroupKind::Named => "named",
            GroupKind::Memfd => "memfd",
            GroupKind::Shm => "shm",
            GroupKind::Sysv => "sysv",
            GroupKind::Device => "device",
            GroupKind::HugePages => "huge-pages",
            GroupKind::Binary => "binary",
            GroupKind::Library => "library",
            GroupKind::File => "file",
            GroupKind::Special => "special",
        }
    }

    /// Groups of this kind are told apart by a name (a path, a memfd's name...).
    pub fn named(self) -> bool {
        matches!(
            self,
            GroupKind::Named
                | GroupKind::Memfd
                | GroupKind::Shm
                | GroupKind::Sysv
                | GroupKind::Device
                | GroupKind::Binary
                | GroupKind::Library
                | GroupKind::File
                | GroupKind::Special
        )
    }

    /// Groups of this kind are told apart by the size class of their mappings.
    pub fn by_size(self) -> bool {
        matches!(self, GroupKind::Anon | GroupKind::Reserved)
    }
}
