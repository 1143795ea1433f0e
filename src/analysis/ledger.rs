//! The ledger of mappings: the tree's live address ranges made by the calls the kernel reported
//! (`probe/mapcalls.rs`), each with the stack that made it, kept from the calls alone, so the
//! set alive at any moment is known rather than sampled ([`Ledger::live`]). Pure: the sampler
//! feeds it the calls in time order, their stacks already unwound and interned
//! ([`Stacks`]).
//!
//! How each call moves the ledger (per process, as the kernel does it):
//! - mmap (its entry gives the length and stack, its exit on the same thread the address):
//!   the range `[address, address + length rounded up to pages)`, replacing whatever the
//!   ledger had there (MAP_FIXED over an older mapping unmaps it);
//! - munmap: the range is cut out, splitting a mapping where it falls inside one;
//! - mremap: the old range goes, the new one comes with mremap's stack (or the old one's);
//! - brk: a raise of the break is a range `[old, new)`, with the stack of that brk call when
//!   the raise is at least the threshold, else none; a lowering cuts it out. The first brk the
//!   ledger sees of a process only tells where its break is;
//! - fork: a new process of a process in the tree joins it with a copy of its parent's ranges
//!   (its address space is a copy); exec empties a process's ranges; its exit removes it.
//!
//! Sampled page faults (`Input::Touch`: one fault in `--touch-every`, with the stack of the
//! code that touched the page) are kept by page, the latest sample of a page winning, and go
//! with the range they fall in when it is cut, with the process at its exec or exit. At an
//! anatomy ([`Ledger::touch_at`]) each data mapping's resident bytes (smaps' Rss) are shared
//! among the stacks whose sampled pages in it are still present (pagemap), in proportion:
//! memory credited to the code that first touched it whatever allocator handed it out (glibc's
//! brk heap and arenas, jemalloc, mimalloc), where the mapping ledger sees only the mmap calls
//! an allocator makes. A mapping no present sample fell in is unsampled: resident before the
//! ledger began (attached), or too small for one fault in N to land in it.
//!
//! Memory an allocator hands out again (freed by one piece of code, kept, then written by
//! another) faults no more, so the first toucher would keep it. Where the kernel keeps
//! soft-dirty bits, the sampler clears them at the recording's start and at each span's end
//! (`Input::Rearm`): the kernel write-protects every page, and the next write to each faults
//! and is sampled like a first touch. The ledger's span counts those clearings; at an anatomy a
//! sample from an earlier span whose page pagemap reads soft-dirty is given up, its page now
//! stood for by the samples of the rewrite. Memory not written since stays with its earlier
//! writer, and says so ([`TouchGroup::before_bytes`]). Where the bits cannot tell (a mapping
//! made or grown since the clearing reads all soft-dirty; an mremap marks the pages it moves),
//! the earlier sample stays.
//!
//! A transparent huge page is one fault for 512 pages: one fault in N would leave huge pages
//! next to unsampled, and a mapping's Rss would go to the small pages' code in it. Every huge
//! page faulted in is sampled (`Input::HugeTouch`, by its page frame: the kernel's record has no
//! address), placed at its address at the next anatomy ([`Ledger::place_huge`]), and stands for
//! the whole huge page; a small page's sample stands for N pages.
//!
//! Calls below the threshold are filtered in the kernel: a munmap that cuts less than that off
//! a mapping the ledger holds is not seen, and the ledger keeps those bytes (a mapping made
//! before the ledger began is not in it at all). The ranges are the calls' ranges, not the
//! kernel's VMAs: adjacent mappings the kernel merges stay apart here, each with its stack.

use crate::model::anatomy::GroupKind;
use crate::model::ledger::{Call, Frame, LedgerAt, StackGroup, TouchAt, TouchGroup};
use crate::probe::proc::PageState;
use std::collections::{BTreeMap, HashMap, HashSet};

/// An interned stack.
pub type StackId = u32;

/// The most distinct stacks kept: a program whose mappings come from ever new call paths
/// would otherwise grow memmon without bound (51,242 stacks held 545 MB). Past it, new stacks
/// are one, `[other stacks]`, and counted (`Stacks::over_cap`).
pub const STACKS_KEPT: usize = 20_000;

/// The stacks seen, each once (their frames compared), at most [`STACKS_KEPT`].
#[derive(Debug, Default)]
pub struct Stacks {
    list: Vec<(Vec<Frame>, bool)>,
    /// The IDs of the stacks by a hash of their frames (kept once, in `list`).
    index: HashMap<u64, Vec<StackId>>,
    /// The stack that stands for every new one past the cap, once made.
    other: Option<StackId>,
    /// Distinct stacks past the cap (counted as they come, a stack once per call).
    pub over_cap: u64,
}

impl Stacks {
    /// The ID of `frames` (innermost first; `truncated`: cut short).
    pub fn intern(&mut self, frames: Vec<Frame>, truncated: bool) -> StackId {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&frames, truncated).hash(&mut h);
        let hash = h.finish();
        if let Some(ids) = self.index.get(&hash) {
            if let Some(&id) = ids.iter().find(|&&id| {
                self.list[id as usize].0 == frames && self.list[id as usize].1 == truncated
            }) {
                return id;
            }
        }
        if self.list.len() >= STACKS_KEPT {
            self.over_cap += 1;
            if let Some(id) = self.other {
                return id;
            }
            let id = self.list.len() as StackId;
            // Data, not words: a frame of its own, folded and compared like any other.
            self.list.push((
                vec![Frame {
                    function: format!("[other stacks: past memmon's {STACKS_KEPT}]"),
                    module: String::new(),
                }],
                false,
            ));
            self.other = Some(id);
            return id;
        }
        let id = self.list.len() as StackId;
        self.list.push((frames, truncated));
        self.index.entry(hash).or_default().push(id);
        id
    }

    pub fn get(&self, id: StackId) -> Option<(&[Frame], bool)> {
        self.list.get(id as usize).map(|(f, t)| (f.as_slice(), *t))
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// One call as the ledger takes it (`probe::mapcalls::What`, its stack interned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Mmap {
        len: u64,
        stack: Option<StackId>,
    },
    MmapDone {
        ret: i64,
    },
    Munmap {
        addr: u64,
        len: u64,
    },
    Mremap {
        addr: u64,
        old_len: u64,
        new_len: u64,
        stack: Option<StackId>,
    },
    MremapDone {
        ret: i64,
    },
    Brk {
        ret: i64,
        stack: Option<StackId>,
    },
    Fork {
        parent: i32,
    },
    Exit,
    Exec,
    /// A sampled page fault at `addr`, and the stack of the code that touched it.
    Touch {
        addr: u64,
        stack: Option<StackId>,
    },
    /// A transparent huge page faulted in (every one), by its first page frame: placed at its
    /// address at an anatomy ([`Ledger::place_huge`]), where it stands for the whole huge page.
    HugeTouch {
        pfn: u64,
        stack: Option<StackId>,
    },
    /// The soft-dirty bits of the processes `pids` were cleared at this moment (at the
    /// recording's start and at each span's end): every present page is write-protected again,
    /// so the next write to it faults and is sampled like a first touch. A new span of each
    /// begins; a sample from before it whose page is written again after it is given up at the
    /// next anatomy (the rewrite stands for the page, by the code that wrote it).
    Rearm {
        pids: Vec<i32>,
    },
}

/// A sampled page: the stack of the code that touched it, its process's span it was sampled in
/// (`Ledger::spans`), and the span in which an mremap last moved it, if any (a move marks the
/// page soft-dirty without a write, so that span's bits say nothing of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sampled {
    stack: StackId,
    span: u32,
    moved_in: Option<u32>,
    /// A huge page's sample (`Input::HugeTouch`), at the huge page's first address: it stands
    /// for the whole huge page, every one being sampled.
    huge: bool,
    /// The pages the sampled fault made writable: 1, or a huge page's where the fault wrote
    /// again a huge page whose earlier sample it took over (the rewrite of a huge page after a
    /// clearing of the soft-dirty bits is one fault, sampled one in N).
    scale: u32,
}

/// A huge page's sample not yet placed at an address: its page frame, the sample, and the
/// anatomies that have looked for it.
#[derive(Debug, Clone, Copy)]
struct HugePending {
    pfn: u64,
    sampled: Sampled,
    looked: u8,
}

/// A huge page's sample not found by this many anatomies is dropped (`Ledger::huge_unfound`):
/// its page was freed, split or moved before one looked, or it was not the tree's memory (a
/// file's large folio read in).
const HUGE_LOOKS: u8 = 2;

/// The most huge pages' samples waiting to be placed (an anatomy places them; where none reads
/// smaps, none would): past it a new one is dropped, counted in `huge_unfound`.
const HUGE_PENDING_MAX: usize = 1 << 18;

/// The most sampled pages kept (each about 24 bytes and a tree node): past it a new sample is
/// counted and dropped until pages go.
const TOUCHES_KEPT: usize = 1 << 20;

/// One process's mappings at an anatomy, with their resident bytes (smaps' Rss), sorted by
/// address: what the ledger's ranges and samples are weighed against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResidentMaps {
    pub pid: i32,
    pub maps: Vec<ResidentMap>,
}

/// One mapping of [`ResidentMaps`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResidentMap {
    /// `[start, end)`.
    pub start: u64,
    pub end: u64,
    pub rss: u64,
    /// It holds data, not code: a fault on executable pages is the code running, not memory
    /// it asked for.
    pub data: bool,
    /// What the anatomy took it for (`analysis::anatomy::classify`): the heap, an arena, a
    /// thread's stack...
    pub kind: GroupKind,
    /// The kernel reports every page of it soft-dirty (made or grown since the bits were
    /// cleared: smaps' `sd`), so pagemap cannot tell which of its pages were written again.
    pub all_soft_dirty: bool,
    /// Of `rss`, the bytes in transparent huge pages (smaps' `AnonHugePages`): where huge
    /// pages' samples are looked for.
    pub anon_huge: u64,
}

/// A live range of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    end: u64,
    stack: Option<StackId>,
    call: Call,
}

/// A call entered on a thread, waiting for its exit.
#[derive(Debug, Clone, Copy)]
enum Entered {
    Mmap {
        len: u64,
        stack: Option<StackId>,
    },
    Mremap {
        addr: u64,
        old_len: u64,
        new_len: u64,
        stack: Option<StackId>,
    },
}

/// The ledger (module docs).
#[derive(Debug)]
pub struct Ledger {
    min_bytes: u64,
    page: u64,
    members: HashSet<i32>,
    /// Every process is the tree's (`take_everyone`).
    everyone: bool,
    /// Processes whose children join the tree, themselves not in it (memmon, launching the
    /// command).
    parents: HashSet<i32>,
    ranges: HashMap<i32, BTreeMap<u64, Range>>,
    entered: HashMap<i32, Entered>,
    brk: HashMap<i32, u64>,
    /// The sampled pages of each process (page address -> the latest sample of the page).
    touches: HashMap<i32, BTreeMap<u64, Sampled>>,
    /// Each process's span: how many times its soft-dirty bits were cleared (`Input::Rearm`);
    /// and how many times the tree's were.
    spans: HashMap<i32, u32>,
    rearms: u32,
    touches_kept: usize,
    /// Samples applied, and those dropped past `TOUCHES_KEPT`.
    pub touch_samples: u64,
    pub touches_dropped: u64,
    /// Huge pages' samples waiting to be placed, by process; the bytes of a huge page; and the
    /// huge pages' samples applied, and those never found at an address.
    huge_pending: HashMap<i32, Vec<HugePending>>,
    huge_bytes: u64,
    pub huge_samples: u64,
    pub huge_unfound: u64,
    pub stacks: Stacks,
    /// Calls of the tree applied.
    pub calls: u64,
}

/// A return value that is an error (`-4095..=-1`).
fn failed(ret: i64) -> bool {
    (-4095..0).contains(&ret)
}

impl Ledger {
    /// A ledger of calls of at least `min_bytes`, on pages of `page` bytes.
    pub fn new(min_bytes: u64, page: u64) -> Ledger {
        Ledger {
            min_bytes,
            page: page.max(1),
            members: HashSet::new(),
            everyone: false,
            parents: HashSet::new(),
            ranges: HashMap::new(),
            entered: HashMap::new(),
            brk: HashMap::new(),
            touches: HashMap::new(),
            spans: HashMap::new(),
            rearms: 0,
            touches_kept: 0,
            touch_samples: 0,
            touches_dropped: 0,
            huge_pending: HashMap::new(),
            huge_bytes: 2 << 20,
            huge_samples: 0,
            huge_unfound: 0,
            stacks: Stacks::default(),
            calls: 0,
        }
    }

    /// The processes of the tree (its root and the descendants the recorder knows): their calls
    /// count from now on.
    pub fn add_members(&mut self, pids: impl IntoIterator<Item = i32>) {
        self.members.extend(pids);
    }

    /// Processes whose children join the tree, themselves left out.
    pub fn add_parents(&mut self, pids: impl IntoIterator<Item = i32>) {
        self.parents.extend(pids);
    }

    /// Every process whose calls come is in the tree: the kernel keeps the events to a cgroup
    /// that holds it alone.
    pub fn take_everyone(&mut self) {
        self.everyone = true;
    }

    /// The process is in the tree.
    pub fn is_member(&self, pid: i32) -> bool {
        self.everyone || self.members.contains(&pid)
    }

    /// Applies one call of thread `tid` of process `pid` (calls of processes outside the tree
    /// are left out: forks bring new ones in).
    pub fn apply(&mut self, pid: i32, tid: i32, input: Input) {
        if let Input::Rearm { pids } = &input {
            for pid in pids {
                *self.spans.entry(*pid).or_default() += 1;
            }
            self.rearms += 1;
            return;
        }
        if let Input::Fork { parent } = input {
            // A new process (not a thread) of a process in the tree: its address space is a
            // copy of its parent's.
            let joins = self.is_member(parent) || self.parents.contains(&parent);
            if pid == tid && pid != parent && joins {
                self.members.insert(pid);
                if let Some(r) = self.ranges.get(&parent).cloned() {
                    self.ranges.insert(pid, r);
                }
                if let Some(b) = self.brk.get(&parent).copied() {
                    self.brk.insert(pid, b);
                }
            }
            return;
        }
        if !self.is_member(pid) {
            return;
        }
        match input {
            Input::Fork { .. } | Input::Rearm { .. } => {}
            Input::Mmap { len, stack } => {
                self.entered.insert(tid, Entered::Mmap { len, stack });
            }
            Input::MmapDone { ret } => {
                if let Some(Entered::Mmap { len, stack }) = self.entered.remove(&tid) {
                    if !failed(ret) {
                        self.calls += 1;
                        let start = ret as u64;
                        self.insert(pid, start, start + self.round(len), stack, Call::Mmap);
                    }
                }
            }
            Input::Munmap { addr, len } => {
                self.calls += 1;
                let end = addr.saturating_add(self.round(len));
                self.cut(pid, addr, end);
            }
            Input::Mremap {
                addr,
                old_len,
                new_len,
                stack,
            } => {
                self.entered.insert(
                    tid,
                    Entered::Mremap {
                        addr,
                        old_len,
                        new_len,
                        stack,
                    },
                );
            }
            Input::MremapDone { ret } => {
                if let Some(Entered::Mremap {
                    addr,
                    old_len,
                    new_len,
                    stack,
                }) = self.entered.remove(&tid)
                {
                    if failed(ret) {
                        return;
                    }
                    self.calls += 1;
                    let old_end = addr.saturating_add(self.round(old_len));
                    let was = self.stack_at(pid, addr);
                    // The pages move with the mapping, without a fault: so do their samples.
                    let moved = self.take_touches(pid, addr, old_end);
                    self.cut(pid, addr, old_end);
                    let start = ret as u64;
                    let (stack, call) = match (stack, was) {
                        (Some(s), _) => (Some(s), Call::Mremap),
                        (None, Some((s, c))) => (s, c),
                        (None, None) => (None, Call::Mremap),
                    };
                    let new_end = start + self.round(new_len);
                    self.insert(pid, start, new_end, stack, call);
                    let span = self.span_of(pid);
                    let pages = self.touches.entry(pid).or_default();
                    for (page, s) in moved {
                        let at = start + (page - addr);
                        let s = Sampled {
                            moved_in: Some(span),
                            ..s
                        };
                        if at < new_end && pages.insert(at, s).is_none() {
                            self.touches_kept += 1;
                        }
                    }
                }
            }
            Input::Brk { ret, stack } => {
                if failed(ret) {
                    return;
                }
                let now = ret as u64;
                if let Some(old) = self.brk.insert(pid, now) {
                    if now > old {
                        self.calls += 1;
                        let stack = stack.filter(|_| now - old >= self.min_bytes);
                        self.insert(pid, old, now, stack, Call::Brk);
                    } else if now < old {
                        self.calls += 1;
                        self.cut(pid, now, old);
                    }
                }
            }
            Input::Exec => {
                self.ranges.remove(&pid);
                self.brk.remove(&pid);
                self.forget_touches(pid);
                self.huge_pending.remove(&pid);
            }
            Input::Exit => {
                self.entered.remove(&tid);
                if tid == pid {
                    self.ranges.remove(&pid);
                    self.brk.remove(&pid);
                    self.members.remove(&pid);
                    self.spans.remove(&pid);
                    self.forget_touches(pid);
                    self.huge_pending.remove(&pid);
                }
            }
            Input::Touch { addr, stack } => {
                self.touch_samples += 1;
                let Some(stack) = stack else { return };
                let page = addr & !(self.page - 1);
                let pages = self.touches.entry(pid).or_default();
                if pages.contains_key(&page) || self.touches_kept < TOUCHES_KEPT {
                    let s = Sampled {
                        stack,
                        span: self.spans.get(&pid).copied().unwrap_or(0),
                        moved_in: None,
                        huge: false,
                        scale: 1,
                    };
                    if pages.insert(page, s).is_none() {
                        self.touches_kept += 1;
                    }
                } else {
                    self.touches_dropped += 1;
                }
            }
            Input::HugeTouch { pfn, stack } => {
                self.huge_samples += 1;
                let Some(stack) = stack else { return };
                if self.huge_pending.values().map(Vec::len).sum::<usize>() >= HUGE_PENDING_MAX {
                    self.huge_unfound += 1;
                    return;
                }
                let sampled = Sampled {
                    stack,
                    span: self.span_of(pid),
                    moved_in: None,
                    huge: true,
                    scale: 1,
                };
                self.huge_pending.entry(pid).or_default().push(HugePending {
                    pfn,
                    sampled,
                    looked: 0,
                });
            }
        }
    }

    /// The bytes of a transparent huge page on this machine (2 MiB by default).
    pub fn set_huge_bytes(&mut self, bytes: u64) {
        self.huge_bytes = bytes.max(self.page);
    }

    pub fn huge_bytes(&self) -> u64 {
        self.huge_bytes
    }

    /// The page frames of the huge pages' samples waiting to be placed, by process.
    pub fn huge_pending(&self) -> Vec<(i32, HashSet<u64>)> {
        self.huge_pending
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(&pid, v)| (pid, v.iter().map(|h| h.pfn).collect()))
            .collect()
    }

    /// Places the huge pages' samples of `pid` whose frames an anatomy found (`found`: page
    /// frame -> the huge page's first address): each stands for its huge page from then on, in
    /// place of any sample in it. Those not found wait for the next anatomy, and are dropped
    /// after [`HUGE_LOOKS`] (counted in `huge_unfound`).
    pub fn place_huge(&mut self, pid: i32, found: &HashMap<u64, u64>) {
        let Some(waiting) = self.huge_pending.remove(&pid) else {
            return;
        };
        let mut left = Vec::new();
        for mut h in waiting {
            match found.get(&h.pfn) {
                Some(&at) => {
                    // A sample in it is of the same fault (a huge page is faulted into an
                    // empty range), or of a page freed before it.
                    self.take_touches(pid, at, at.saturating_add(self.huge_bytes));
                    if self.touches_kept < TOUCHES_KEPT {
                        self.touches.entry(pid).or_default().insert(at, h.sampled);
                        self.touches_kept += 1;
                    } else {
                        self.touches_dropped += 1;
                    }
                }
                None => {
                    h.looked += 1;
                    if h.looked >= HUGE_LOOKS {
                        self.huge_unfound += 1;
                    } else {
                        left.push(h);
                    }
                }
            }
        }
        if !left.is_empty() {
            self.huge_pending.insert(pid, left);
        }
    }

    /// Takes the sampled pages of `[start, end)` out of the process's.
    fn take_touches(&mut self, pid: i32, start: u64, end: u64) -> Vec<(u64, Sampled)> {
        let Some(t) = self.touches.get_mut(&pid) else {
            return Vec::new();
        };
        let inside: Vec<(u64, Sampled)> = t.range(start..end).map(|(&p, &s)| (p, s)).collect();
        for (p, _) in &inside {
            t.remove(p);
        }
        self.touches_kept -= inside.len();
        inside
    }

    fn forget_touches(&mut self, pid: i32) {
        if let Some(t) = self.touches.remove(&pid) {
            self.touches_kept -= t.len();
        }
    }

    /// The sampled pages of each process, sorted, for a presence check (`touch_at`).
    pub fn touched_pages(&self) -> Vec<(i32, Vec<u64>)> {
        self.touches
            .iter()
            .map(|(&pid, t)| (pid, t.keys().copied().collect()))
            .collect()
    }

    /// The sampled page faults' credit at an anatomy (module docs): `maps`, the tree's
    /// mappings with smaps' Rss; `states`, for each process of `touched_pages`, what pagemap
    /// says of each of its sampled pages now. A page not in RAM is forgotten (its memory was
    /// released, and a fault there again is sampled anew); a page sampled before the ledger's
    /// span began and written again since (soft-dirty, in a mapping whose bits tell: not made
    /// or grown since, not moved by mremap in this span) is given up to the samples of that
    /// write. `every`: one fault in so many.
    pub fn touch_at(
        &mut self,
        maps: &[ResidentMaps],
        states: &HashMap<i32, Vec<PageState>>,
        every: u64,
    ) -> TouchAt {
        let (mut gone, mut rewritten) = (0u64, 0u64);
        let huge_pages = (self.huge_bytes / self.page).max(1);
        let every = every.max(1);
        for (pid, flags) in states {
            let span = self.span_of(*pid);
            let Some(t) = self.touches.get_mut(pid) else {
                continue;
            };
            let mine = maps.iter().find(|m| m.pid == *pid);
            let pages: Vec<(u64, Sampled)> = t.iter().map(|(&p, &s)| (p, s)).collect();
            // Huge pages written again: their rewrites' samples stand for a huge page each.
            let mut huge_rewritten = Vec::new();
            for ((p, s), state) in pages.iter().zip(flags) {
                if !state.present {
                    t.remove(p);
                    gone += 1;
                } else if s.span < span
                    && state.soft_dirty
                    && s.moved_in != Some(span)
                    && mine.is_some_and(|m| bits_tell(m, *p))
                {
                    t.remove(p);
                    rewritten += 1;
                    if s.huge || s.scale > 1 {
                        huge_rewritten.push(p - p % self.huge_bytes);
                    }
                }
            }
            for at in huge_rewritten {
                for (_, s) in t.range_mut(at..at.saturating_add(self.huge_bytes)) {
                    if !s.huge && s.span == span {
                        s.scale = huge_pages as u32;
                    }
                }
            }
        }
        self.touches_kept = self.touches.values().map(BTreeMap::len).sum();
        let huge_samples = self
            .touches
            .values()
            .flat_map(BTreeMap::values)
            .filter(|s| s.huge)
            .count() as u64;
        // Each stack's bytes, those of them from samples before the span, and its samples.
        let mut credit: HashMap<StackId, (f64, f64, u64)> = HashMap::new();
        let (mut resident, mut unsampled) = (0u64, 0u64);
        let mut unsampled_by_kind: HashMap<GroupKind, u64> = HashMap::new();
        for m in maps {
            let pages = self.touches.get(&m.pid);
            let span = self.span_of(m.pid);
            for &ResidentMap {
                start,
                end,
                rss,
                data,
                kind,
                ..
            } in &m.maps
            {
                if !data || rss == 0 {
                    continue;
                }
                resident += rss;
                // Each stack's samples in it, the pages they stand for, and those of them from
                // before the span: a fault sampled one in `every` stands for `every` pages, a
                // huge page's (every one sampled) for the huge page; a sample in a huge page
                // sampled is of the same fault.
                let mut by: HashMap<StackId, (u64, f64, f64)> = HashMap::new();
                let mut huge_until = 0;
                for (&p, s) in pages.into_iter().flat_map(|t| t.range(start..end)) {
                    let w = if s.huge {
                        huge_until = p.saturating_add(self.huge_bytes);
                        huge_pages as f64
                    } else if p < huge_until {
                        continue;
                    } else {
                        (every * u64::from(s.scale)) as f64
                    };
                    let c = by.entry(s.stack).or_default();
                    c.0 += 1;
                    c.1 += w;
                    if s.span < span {
                        c.2 += w;
                    }
                }
                let n: f64 = by.values().map(|c| c.1).sum();
                if n == 0.0 {
                    unsampled += rss;
                    *unsampled_by_kind.entry(kind).or_default() += rss;
                    continue;
                }
                for (s, (k, w, before)) in by {
                    let c = credit.entry(s).or_default();
                    c.0 += rss as f64 * w / n;
                    c.1 += rss as f64 * before / n;
                    c.2 += k;
                }
            }
        }
        let mut stacks: Vec<TouchGroup> = credit
            .into_iter()
            .map(|(s, (bytes, before, samples))| {
                let (frames, truncated) = self
                    .stacks
                    .get(s)
                    .map_or((Vec::new(), false), |(f, t)| (f.to_vec(), t));
                TouchGroup {
                    frames,
                    truncated,
                    resident_bytes: bytes.round() as u64,
                    before_bytes: before.round() as u64,
                    samples,
                }
            })
            .collect();
        stacks.sort_by(|a, b| {
            b.resident_bytes
                .cmp(&a.resident_bytes)
                .then_with(|| a.frames.cmp(&b.frames))
        });
        let mut unsampled_by_kind: Vec<(GroupKind, u64)> = unsampled_by_kind.into_iter().collect();
        unsampled_by_kind.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        TouchAt {
            every,
            stacks,
            resident_bytes: resident,
            unsampled_bytes: unsampled,
            unsampled_by_kind,
            samples: self.touch_samples,
            samples_gone: gone,
            huge_samples,
            samples_rewritten: rewritten,
            rearms: self.rearms,
            rearmed_unix_ms: None,
        }
    }

    /// The process's span (`spans`).
    fn span_of(&self, pid: i32) -> u32 {
        self.spans.get(&pid).copied().unwrap_or(0)
    }

    /// The processes of the tree now.
    pub fn members(&self) -> impl Iterator<Item = i32> + '_ {
        self.members.iter().copied()
    }

    fn round(&self, len: u64) -> u64 {
        len.div_ceil(self.page).saturating_mul(self.page)
    }

    /// The stack and call of the range holding `addr`.
    fn stack_at(&self, pid: i32, addr: u64) -> Option<(Option<StackId>, Call)> {
        let (_, r) = self.ranges.get(&pid)?.range(..=addr).next_back()?;
        (r.end > addr).then_some((r.stack, r.call))
    }

    fn insert(&mut self, pid: i32, start: u64, end: u64, stack: Option<StackId>, call: Call) {
        if end <= start {
            return;
        }
        self.cut(pid, start, end);
        self.ranges
            .entry(pid)
            .or_default()
            .insert(start, Range { end, stack, call });
    }

    /// Cuts `[start, end)` out of the process's ranges, and its sampled pages.
    fn cut(&mut self, pid: i32, start: u64, end: u64) {
        if let Some(t) = self.touches.get_mut(&pid) {
            let inside: Vec<u64> = t.range(start..end).map(|(&p, _)| p).collect();
            self.touches_kept -= inside.len();
            for p in inside {
                t.remove(&p);
            }
        }
        let Some(map) = self.ranges.get_mut(&pid) else {
            return;
        };
        // The range that begins before `start` and reaches into the cut, if any.
        if let Some((&s, &r)) = map.range(..start).next_back() {
            if r.end > start {
                map.insert(s, Range { end: start, ..r });
                if r.end > end {
                    map.insert(end, r);
                }
            }
        }
        let inside: Vec<u64> = map.range(start..end).map(|(&s, _)| s).collect();
        for s in inside {
            let r = map.remove(&s).expect("a key just listed");
            if r.end > end {
                map.insert(end, r);
            }
        }
    }

    /// The live ranges of the tree, grouped by the stack (and call) that made them, largest
    /// first (by their resident bytes where `maps` gives them, else by address space; then by
    /// their innermost frames). `maps`: the tree's mappings with smaps' Rss. A range that is a
    /// whole mapping is resident by its Rss; part of one (the kernel merges neighbours: four
    /// partitions, or a partition and a thread's stack), by `present(pid, start, end)`, the
    /// bytes of it in RAM (pagemap), where that answers, else by its share of the mapping's Rss.
    pub fn live(
        &self,
        maps: Option<&[ResidentMaps]>,
        present: &mut dyn FnMut(i32, u64, u64) -> Option<u64>,
    ) -> Vec<StackGroup> {
        #[derive(Default)]
        struct Acc {
            pids: HashSet<i32>,
            mappings: u64,
            bytes: u64,
            resident: f64,
            kinds: HashMap<GroupKind, u64>,
            min: u64,
            max: u64,
        }
        let mut by: HashMap<(Option<StackId>, Call), Acc> = HashMap::new();
        for (&pid, map) in &self.ranges {
            let resident = maps.and_then(|m| m.iter().find(|m| m.pid == pid));
            for r in map.iter() {
                let size = r.1.end - r.0;
                let a = by.entry((r.1.stack, r.1.call)).or_insert_with(|| Acc {
                    min: u64::MAX,
                    ..Acc::default()
                });
                a.pids.insert(pid);
                a.mappings += 1;
                a.bytes += size;
                if let Some(m) = resident {
                    a.resident += resident_in(m, *r.0, r.1.end, &mut |s, e| present(pid, s, e));
                    for o in overlapping(m, *r.0, r.1.end) {
                        *a.kinds.entry(o.kind).or_default() +=
                            r.1.end.min(o.end) - (*r.0).max(o.start);
                    }
                }
                a.min = a.min.min(size);
                a.max = a.max.max(size);
            }
        }
        let mut out: Vec<StackGroup> = by
            .into_iter()
            .map(|((stack, call), a)| {
                let (frames, truncated) = stack
                    .and_then(|s| self.stacks.get(s))
                    .map_or((Vec::new(), false), |(f, t)| (f.to_vec(), t));
                StackGroup {
                    frames,
                    call,
                    truncated,
                    processes: a.pids.len() as u32,
                    mappings: a.mappings,
                    bytes: a.bytes,
                    resident_bytes: maps.map(|_| (a.resident.round() as u64).min(a.bytes)),
                    kind: kind_of(&a.kinds),
                    min_mapping_bytes: a.min,
                    max_mapping_bytes: a.max,
                }
            })
            .collect();
        out.sort_by(|a, b| {
            b.weight()
                .cmp(&a.weight())
                .then_with(|| a.frames.cmp(&b.frames))
                .then(a.call.cmp(&b.call))
        });
        out
    }
}

/// The resident bytes of `[start, end)` in one process: of each mapping it overlaps, all its
/// Whether pagemap's soft-dirty bit of `page` tells a write: the page lies in a mapping of `m`
/// that the kernel does not report all soft-dirty (one made or grown since the bits were
/// cleared reads so, written or not; a page in no mapping read with smaps is not known).
fn bits_tell(m: &ResidentMaps, page: u64) -> bool {
    let i = m.maps.partition_point(|r| r.end <= page);
    m.maps
        .get(i)
        .is_some_and(|r| r.start <= page && !r.all_soft_dirty)
}

/// Rss where it covers the mapping, else what `present` says of the overlap, else the Rss in
/// proportion to the overlap.
fn resident_in(
    m: &ResidentMaps,
    start: u64,
    end: u64,
    present: &mut dyn FnMut(u64, u64) -> Option<u64>,
) -> f64 {
    overlapping(m, start, end)
        .map(|r| {
            let (from, to) = (start.max(r.start), end.min(r.end));
            if (from, to) == (r.start, r.end) || r.rss == 0 {
                return r.rss as f64;
            }
            match present(from, to) {
                Some(b) => b.min(r.rss) as f64,
                None => r.rss as f64 * (to - from) as f64 / (r.end - r.start) as f64,
            }
        })
        .sum()
}

/// The mappings of `m` that `[start, end)` overlaps.
fn overlapping(m: &ResidentMaps, start: u64, end: u64) -> impl Iterator<Item = &ResidentMap> {
    let first = m.maps.partition_point(|r| r.end <= start);
    m.maps[first..].iter().take_while(move |r| r.start < end)
}

/// What a stack's ranges are, where most of their address space lies in mappings the anatomy
/// took for a structure of the runtime: malloc's heap or arenas, threads' stacks.
fn kind_of(bytes_by_kind: &HashMap<GroupKind, u64>) -> Option<GroupKind> {
    let total: u64 = bytes_by_kind.values().sum();
    let (&kind, &most) = bytes_by_kind.iter().max_by_key(|(k, b)| (**b, **k))?;
    (most * 2 > total
        && matches!(
            kind,
            GroupKind::Heap | GroupKind::Arenas | GroupKind::ThreadStacks | GroupKind::Stack
        ))
    .then_some(kind)
}

/// How the memory credited to one stack that first touched it changed between two anatomies
/// (`touch_diff`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TouchChange {
    pub frames: Vec<Frame>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub delta_bytes: i64,
    /// Its samples present at the second anatomy.
    pub samples: u64,
}

/// How the credit of each stack that first touched memory changed from `from` to `to`, the
/// largest change first (stacks unchanged left out).
pub fn touch_diff(from: &TouchAt, to: &TouchAt) -> Vec<TouchChange> {
    let mut out: Vec<TouchChange> = to
        .stacks
        .iter()
        .map(|t| {
            let f = from
                .stacks
                .iter()
                .find(|f| f.frames == t.frames && f.truncated == t.truncated);
            let fb = f.map_or(0, |f| f.resident_bytes);
            TouchChange {
                frames: t.frames.clone(),
                truncated: t.truncated,
                from_bytes: fb,
                to_bytes: t.resident_bytes,
                delta_bytes: t.resident_bytes as i64 - fb as i64,
                samples: t.samples,
            }
        })
        .collect();
    for f in &from.stacks {
        if !to
            .stacks
            .iter()
            .any(|t| t.frames == f.frames && t.truncated == f.truncated)
        {
            out.push(TouchChange {
                frames: f.frames.clone(),
                truncated: f.truncated,
                from_bytes: f.resident_bytes,
                to_bytes: 0,
                delta_bytes: -(f.resident_bytes as i64),
                samples: 0,
            });
        }
    }
    out.retain(|c| c.delta_bytes != 0);
    out.sort_by(|a, b| by_change(a.delta_bytes, &a.frames, b.delta_bytes, &b.frames));
    out
}

/// The order of changes: the largest (either way) first, then by their innermost frames.
fn by_change(a: i64, fa: &[Frame], b: i64, fb: &[Frame]) -> std::cmp::Ordering {
    b.unsigned_abs()
        .cmp(&a.unsigned_abs())
        .then_with(|| fa.cmp(fb))
}

/// How one stack's live mappings changed between two moments (`stack_diff`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StackChange {
    /// The stack, innermost first, and the call.
    pub frames: Vec<Frame>,
    pub call: Call,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub from_mappings: u64,
    pub to_mappings: u64,
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub delta_bytes: i64,
    /// The smallest and largest of its mappings at the second moment (at the first, when it
    /// has none left).
    pub min_mapping_bytes: u64,
    pub max_mapping_bytes: u64,
    /// None of it at the first moment; none left at the second.
    pub new: bool,
    pub gone: bool,
}

/// Each stack's change from `from` to `to` (the stacks that did not change left out), the
/// largest change first.
pub fn stack_diff(from: &LedgerAt, to: &LedgerAt) -> Vec<StackChange> {
    let key = |g: &StackGroup| (g.frames.clone(), g.call, g.truncated);
    // Resident bytes where both moments have them (smaps read at both), else address space.
    let resident = from
        .stacks
        .iter()
        .chain(&to.stacks)
        .all(|g| g.resident_bytes.is_some());
    let weight = |g: &StackGroup| if resident { g.weight() } else { g.bytes };
    let mut all: Vec<(Vec<Frame>, Call, bool)> =
        from.stacks.iter().chain(&to.stacks).map(key).collect();
    all.sort();
    all.dedup();
    let mut out: Vec<StackChange> = all
        .into_iter()
        .filter_map(|k| {
            let f = from.stacks.iter().find(|g| key(g) == k);
            let t = to.stacks.iter().find(|g| key(g) == k);
            let (fb, tb) = (f.map_or(0, weight), t.map_or(0, weight));
            if fb == tb {
                return None;
            }
            let sizes = t.or(f).expect("in one of the two");
            Some(StackChange {
                frames: k.0,
                call: k.1,
                truncated: k.2,
                from_mappings: f.map_or(0, |g| g.mappings),
                to_mappings: t.map_or(0, |g| g.mappings),
                from_bytes: fb,
                to_bytes: tb,
                delta_bytes: tb as i64 - fb as i64,
                min_mapping_bytes: sizes.min_mapping_bytes,
                max_mapping_bytes: sizes.max_mapping_bytes,
                new: f.is_none(),
                gone: t.is_none(),
            })
        })
        .collect();
    out.sort_by(|a, b| by_change(a.delta_bytes, &a.frames, b.delta_bytes, &b.frames));
    out
}

/// The frames that name the code that allocated: the stack without its innermost frames that
/// are the allocator's or a system call's wrapper (the C library and the dynamic loader, the
/// allocators' libraries and C++'s `operator new`, and Rust's allocation, collection and
/// system call crates: `alloc::`, `core::`, `std::sys::`, `hashbrown::`, `rustix::`, `libc::`,
/// `memmap2::`, `__rust_alloc`...), and without its outermost frames that start the program or
/// the thread (`_start`, `__libc_start_main`, `start_thread`, `clone3`, Rust's `std::rt::`,
/// `std::sys::` and `std::thread::`). All of them when every frame is one.
pub fn allocating_frames(frames: &[Frame]) -> &[Frame] {
    &frames[allocating_range(frames)]
}

/// Where `allocating_frames` lie in `frames`.
pub fn allocating_range(frames: &[Frame]) -> std::ops::Range<usize> {
    let inner = frames.iter().take_while(|f| is_allocator(f)).count();
    if inner == frames.len() {
        return 0..frames.len();
    }
    let outer = frames[inner..]
        .iter()
        .rev()
        .take_while(|f| is_start(f))
        .count();
    if inner + outer == frames.len() {
        inner..frames.len()
    } else {
        inner..frames.len() - outer
    }
}

/// A frame that starts the program or a thread (`allocating_frames`).
fn is_start(f: &Frame) -> bool {
    const FUNCTIONS: [&str; 10] = [
        "_start",
        "__libc_start",
        "start_thread",
        "clone",
        "__clone",
        "std::rt::",
        "std::sys::",
        "std::panic",
        "core::ops::function::",
        "<core::ops::function::",
    ];
    // Rust's thread start (`std::` then `thread::`: spelled apart, this file being the analysis,
    // which tests/layout.rs holds to no threads).
    let thread_start = f
        .function
        .strip_prefix("std::")
        .is_some_and(|rest| rest.starts_with("thread::"));
    thread_start
        || f.module.starts_with("libc.so")
        || f.module.starts_with("ld-linux")
        || f.function.contains("__rust_begin_short_backtrace")
        || (f
            .function
            .starts_with("<alloc::boxed::Box<F,A> as core::ops::function::FnOnce"))
        || FUNCTIONS.iter().any(|p| f.function.starts_with(p))
        || f.function.starts_with("[libc.so")
}

/// A frame of the allocator or of a system call's wrapper (`allocating_frames`).
fn is_allocator(f: &Frame) -> bool {
    const LIBRARIES: [&str; 8] = [
        "libc.so",
        "libc-",
        "ld-linux",
        "ld64.so",
        "libpthread",
        "libjemalloc",
        "libtcmalloc",
        "libmimalloc",
    ];
    const FUNCTIONS: [&str; 16] = [
        "__rust_",
        "__rdl_",
        "__rg_",
        "alloc::",
        "<alloc::",
        "core::",
        "<core::",
        "std::sys::",
        "<std::sys::",
        "hashbrown::",
        "<hashbrown::",
        "rustix::",
        "<rustix::",
        "libc::",
        "memmap2::",
        "<memmap2::",
    ];
    LIBRARIES.iter().any(|l| f.module.starts_with(l))
        || (f.module.starts_with("libstdc++") || f.function.starts_with("operator new"))
        || FUNCTIONS.iter().any(|p| f.function.starts_with(p))
        // A standard trait's method for a type (`<u8 as alloc::vec::SpecFromElem>::from_elem`).
        || (f.function.starts_with('<')
            && (f.function.contains(" as alloc::") || f.function.contains(" as core::alloc")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn frame(f: &str) -> Frame {
        Frame {
            function: f.into(),
            module: "prover".into(),
        }
    }

    fn ledger() -> (Ledger, StackId, StackId) {
        let mut l = Ledger::new(MIB, 4096);
        let part = l
            .stacks
            .intern(vec![frame("alloc_partition"), frame("synthesize")], false);
        let params = l.stacks.intern(vec![frame("load_params")], false);
        l.add_members([10]);
        (l, part, params)
    }

    fn mmap(l: &mut Ledger, pid: i32, tid: i32, at: u64, len: u64, stack: StackId) {
        l.apply(
            pid,
            tid,
            Input::Mmap {
                len,
                stack: Some(stack),
            },
        );
        l.apply(pid, tid, Input::MmapDone { ret: at as i64 });
    }

    #[test]
    fn ten_partitions_from_ten_threads_are_one_stack_apart_from_the_parameters() {
        let (mut l, part, params) = ledger();
        // Adjacent: the kernel would merge them into one VMA; the ledger keeps each call.
        mmap(&mut l, 10, 10, 0x7000_0000, 512 * MIB, params);
        for t in 0..10u64 {
            mmap(
                &mut l,
                10,
                11 + t as i32,
                0x7000_0000 + 512 * MIB + t * 60 * MIB,
                60 * MIB,
                part,
            );
        }
        let live = l.live(None, &mut |_, _, _| None);
        assert_eq!(live.len(), 2);
        assert_eq!(live[0].frames[0].function, "alloc_partition");
        assert_eq!(
            (live[0].mappings, live[0].bytes, live[0].min_mapping_bytes),
            (10, 600 * MIB, 60 * MIB)
        );
        assert_eq!((live[1].mappings, live[1].bytes), (1, 512 * MIB));
        assert_eq!(l.calls, 11);
    }

    #[test]
    fn munmap_cuts_a_mapping_anywhere_and_mremap_moves_it_with_its_stack() {
        let (mut l, part, params) = ledger();
        mmap(&mut l, 10, 10, 0x1000_0000, 8 * MIB, part);
        // A hole in the middle: two pieces left.
        l.apply(
            10,
            10,
            Input::Munmap {
                addr: 0x1000_0000 + 2 * MIB,
                len: MIB + 1,
            },
        );
        let live = l.live(None, &mut |_, _, _| None);
        assert_eq!(
            (live[0].mappings, live[0].bytes),
            (2, 8 * MIB - MIB - 4096),
            "the length is rounded up to pages"
        );
        // The first piece moves and grows, by a call with a stack of its own.
        l.apply(
            10,
            10,
            Input::Mremap {
                addr: 0x1000_0000,
                old_len: 2 * MIB,
                new_len: 16 * MIB,
                stack: Some(params),
            },
        );
        l.apply(10, 10, Input::MremapDone { ret: 0x2000_0000 });
        let live = l.live(None, &mut |_, _, _| None);
        assert_eq!(live[0].call, Call::Mremap);
        assert_eq!(
            (live[0].frames[0].function.as_str(), live[0].bytes),
            ("load_params", 16 * MIB)
        );
        assert_eq!(live[1].bytes, 8 * MIB - 3 * MIB - 4096);
        // A failed call changes nothing; an exit with no entry is another thread's small call.
        l.apply(
            10,
            10,
            Input::Mmap {
                len: 4 * MIB,
                stack: Some(part),
            },
        );
        l.apply(10, 10, Input::MmapDone { ret: -12 });
        l.apply(10, 12, Input::MmapDone { ret: 0x5000_0000 });
        assert_eq!(
            l.live(None, &mut |_, _, _| None)
                .iter()
                .map(|g| g.bytes)
                .sum::<u64>(),
            21 * MIB - 4096
        );
    }

    #[test]
    fn a_fixed_mapping_replaces_what_was_there() {
        let (mut l, part, params) = ledger();
        mmap(&mut l, 10, 10, 0x1000_0000, 4 * MIB, part);
        mmap(&mut l, 10, 10, 0x1000_0000 + MIB, 2 * MIB, params);
        let live = l.live(None, &mut |_, _, _| None);
        assert_eq!(live.iter().map(|g| g.bytes).sum::<u64>(), 4 * MIB);
        assert_eq!(
            (live[0].frames[0].function.as_str(), live[0].mappings),
            ("alloc_partition", 2)
        );
    }

    #[test]
    fn brk_raises_are_ranges_with_a_stack_only_when_large_and_the_first_only_a_start() {
        let (mut l, part, _) = ledger();
        l.apply(
            10,
            10,
            Input::Brk {
                ret: 0x100_0000,
                stack: Some(part),
            },
        );
        assert!(
            l.live(None, &mut |_, _, _| None).is_empty(),
            "the first brk tells where the break is"
        );
        l.apply(
            10,
            10,
            Input::Brk {
                ret: 0x100_0000 + 132 * 1024,
                stack: Some(part),
            },
        );
        l.apply(
            10,
            10,
            Input::Brk {
                ret: (0x100_0000 + 132 * 1024 + 4 * MIB) as i64,
                stack: Some(part),
            },
        );
        let live = l.live(None, &mut |_, _, _| None);
        assert_eq!(live.len(), 2);
        assert_eq!(
            (live[0].call, live[0].bytes, live[0].frames.len()),
            (Call::Brk, 4 * MIB, 2)
        );
        assert_eq!(
            (live[1].bytes, live[1].frames.len()),
            (132 * 1024, 0),
            "too small: no stack"
        );
        // Lowered: cut from the top.
        l.apply(
            10,
            10,
            Input::Brk {
                ret: 0x100_0000 + 132 * 1024,
                stack: None,
            },
        );
        assert_eq!(l.live(None, &mut |_, _, _| None).len(), 1);
        assert_eq!(l.live(None, &mut |_, _, _| None)[0].bytes, 132 * 1024);
    }

    #[test]
    fn the_tree_is_followed_through_forks_execs_and_exits_and_others_are_left_out() {
        let (mut l, part, _) = ledger();
        mmap(&mut l, 10, 10, 0x1000_0000, 4 * MIB, part);
        // Another process, not forked from the tree: left out.
        mmap(&mut l, 99, 99, 0x1000_0000, 4 * MIB, part);
        // A launcher's children join; the launcher itself does not.
        l.add_parents([5]);
        l.apply(6, 6, Input::Fork { parent: 5 });
        mmap(&mut l, 5, 5, 0x4000_0000, 2 * MIB, part);
        assert!(l.is_member(6) && !l.is_member(5));
        l.apply(6, 6, Input::Exit);
        // A thread of the tree is no new process; a child is, with its parent's mappings.
        l.apply(10, 11, Input::Fork { parent: 10 });
        assert!(!l.is_member(11));
        l.apply(20, 20, Input::Fork { parent: 10 });
        assert!(l.is_member(20));
        let live = l.live(None, &mut |_, _, _| None);
        assert_eq!((live[0].processes, live[0].mappings), (2, 2));
        // The child execs: its copy is gone; then maps of its own.
        l.apply(20, 20, Input::Exec);
        mmap(&mut l, 20, 20, 0x3000_0000, 2 * MIB, part);
        assert_eq!(l.live(None, &mut |_, _, _| None)[0].bytes, 6 * MIB);
        // It exits: gone, and no longer in the tree; a thread's exit leaves its process.
        l.apply(20, 20, Input::Exit);
        l.apply(10, 11, Input::Exit);
        assert!(!l.is_member(20) && l.is_member(10));
        assert_eq!(l.live(None, &mut |_, _, _| None)[0].bytes, 4 * MIB);
    }

    fn at(stacks: Vec<StackGroup>) -> LedgerAt {
        LedgerAt {
            stacks,
            at_unix_ms: 0,
            calls: 0,
            lost: 0,
            touch: None,
        }
    }

    fn rm(start: u64, len: u64, rss: u64, data: bool, kind: GroupKind) -> ResidentMap {
        ResidentMap {
            start,
            end: start + len,
            rss,
            data,
            kind,
            all_soft_dirty: false,
            anon_huge: 0,
        }
    }

    /// Pages present (`true`) or gone, none soft-dirty.
    fn states(present: &[bool]) -> Vec<PageState> {
        present
            .iter()
            .map(|&present| PageState {
                present,
                soft_dirty: false,
            })
            .collect()
    }

    #[test]
    fn stacks_past_the_cap_are_one_and_counted() {
        let mut s = Stacks::default();
        for i in 0..STACKS_KEPT + 5 {
            s.intern(vec![frame(&format!("f{i}"))], false);
        }
        assert_eq!(s.len(), STACKS_KEPT + 1);
        assert_eq!(s.over_cap, 5);
        let first = s.intern(vec![frame("f0")], false);
        assert_eq!(
            s.get(first).unwrap().0[0].function,
            "f0",
            "a kept one is found again"
        );
        let other = s.intern(vec![frame("new")], true);
        assert!(s.get(other).unwrap().0[0]
            .function
            .starts_with("[other stacks"));
    }

    #[test]
    fn a_stack_weighs_what_is_resident_of_its_mappings_and_keeps_what_it_mapped() {
        let (mut l, parts, params) = ledger();
        // An arena-like reservation of 64 MiB with 4 MiB resident (its own mapping), and two
        // partitions of 8 MiB the kernel merged with 8 MiB of something else into one mapping.
        mmap(&mut l, 10, 10, 0x1000_0000, 64 * MIB, params);
        mmap(&mut l, 10, 10, 0x2000_0000, 8 * MIB, parts);
        mmap(&mut l, 10, 10, 0x2000_0000 + 8 * MIB, 8 * MIB, parts);
        let maps = [ResidentMaps {
            pid: 10,
            maps: vec![
                rm(0x1000_0000, 64 * MIB, 4 * MIB, true, GroupKind::Arenas),
                rm(0x2000_0000, 24 * MIB, 17 * MIB, true, GroupKind::Anon),
            ],
        }];
        // pagemap says each partition is whole in RAM.
        let mut asked = Vec::new();
        let live = l.live(Some(&maps), &mut |pid, s, e| {
            asked.push((pid, s, e));
            Some(e - s)
        });
        let w = |s: StackId| {
            let (f, _) = l.stacks.get(s).unwrap();
            live.iter().find(|g| g.frames == f).unwrap().clone()
        };
        assert_eq!(
            (w(params).bytes, w(params).resident_bytes),
            (64 * MIB, Some(4 * MIB))
        );
        assert_eq!(
            (w(params).kind, w(parts).kind),
            (Some(GroupKind::Arenas), None)
        );
        assert_eq!(
            (w(parts).bytes, w(parts).resident_bytes),
            (16 * MIB, Some(16 * MIB))
        );
        assert_eq!(
            live[0].resident_bytes,
            Some(16 * MIB),
            "largest resident first"
        );
        assert_eq!(
            asked.len(),
            2,
            "only the parts of a merged mapping: {asked:?}"
        );
        // Without pagemap, the share of the mapping's Rss.
        let live = l.live(Some(&maps), &mut |_, _, _| None);
        let parts_g = live.iter().find(|g| g.bytes == 16 * MIB).unwrap();
        let share = (17 * MIB) as f64 * 16.0 / 24.0;
        assert_eq!(parts_g.resident_bytes, Some(share.round() as u64));
    }

    #[test]
    fn touched_pages_share_out_each_mappings_rss_and_pages_gone_are_forgotten() {
        let (mut l, parts, params) = ledger();
        let page = 4096;
        let touch = |l: &mut Ledger, addr: u64, s: StackId| touch_of(l, 10, addr, s);
        // The heap [0x1000, ...): 3 samples of `parts`, 1 of `params`; an arena with none.
        for k in 0..3 {
            touch(&mut l, 0x10_0000 + k * page + 17, parts);
        }
        touch(&mut l, 0x10_0000 + 3 * page, params);
        // One sample in a mapping since unmapped by a call the ledger saw: forgotten with it.
        mmap(&mut l, 10, 10, 0x4000_0000, 2 * MIB, parts);
        touch(&mut l, 0x4000_0000, parts);
        l.apply(
            10,
            10,
            Input::Munmap {
                addr: 0x4000_0000,
                len: 2 * MIB,
            },
        );
        // A sample in a mapping mremap moved: it moves with it.
        mmap(&mut l, 10, 10, 0x6000_0000, 2 * MIB, parts);
        touch(&mut l, 0x6000_0000 + page, parts);
        l.apply(
            10,
            10,
            Input::Mremap {
                addr: 0x6000_0000,
                old_len: 2 * MIB,
                new_len: 4 * MIB,
                stack: None,
            },
        );
        l.apply(10, 10, Input::MremapDone { ret: 0x7000_0000 });
        assert!(l.touched_pages()[0].1.contains(&(0x7000_0000 + page)));
        l.apply(
            10,
            10,
            Input::Munmap {
                addr: 0x7000_0000,
                len: 4 * MIB,
            },
        );
        // A sample outside any mapping's Rss now (its page was freed).
        touch(&mut l, 0x20_0000, params);
        let maps = [ResidentMaps {
            pid: 10,
            maps: vec![
                rm(0x10_0000, 0x8_0000, 8 * MIB, true, GroupKind::Heap),
                rm(0x20_0000, 0x8_0000, 0, true, GroupKind::Anon),
                rm(0x30_0000, 0x8_0000, 2 * MIB, true, GroupKind::Arenas),
                // Code: never credited, never counted.
                rm(0x50_0000, 0x8_0000, 3 * MIB, false, GroupKind::Binary),
            ],
        }];
        let pages = l.touched_pages();
        assert_eq!(pages[0].1.len(), 5, "{pages:?}");
        let present: HashMap<i32, Vec<PageState>> =
            [(10, states(&[true, true, true, true, false]))]
                .into_iter()
                .collect();
        let t = l.touch_at(&maps, &present, 64);
        assert_eq!((t.resident_bytes, t.unsampled_bytes), (10 * MIB, 2 * MIB));
        assert_eq!(t.unsampled_by_kind, [(GroupKind::Arenas, 2 * MIB)]);
        assert_eq!((t.samples, t.samples_gone), (7, 1));
        assert_eq!((t.rearms, t.samples_rewritten), (0, 0));
        assert_eq!(t.stacks.len(), 2);
        assert!(t.stacks.iter().all(|s| s.before_bytes == 0));
        assert_eq!(
            (t.stacks[0].resident_bytes, t.stacks[0].samples),
            (6 * MIB, 3)
        );
        assert_eq!(
            (t.stacks[1].resident_bytes, t.stacks[1].samples),
            (2 * MIB, 1)
        );
        // The page gone is forgotten; an exit forgets the process's.
        assert_eq!(l.touched_pages()[0].1.len(), 4);
        l.apply(10, 10, Input::Exit);
        assert!(l.touched_pages().is_empty());
        // How a stack's credit changed between two anatomies.
        let mut later = t.clone();
        later.stacks[0].resident_bytes = 9 * MIB;
        later.stacks.pop();
        let d = touch_diff(&t, &later);
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].delta_bytes, d[1].delta_bytes),
            (3 * MIB as i64, -2 * MIB as i64)
        );
    }

    /// One mapping, written by two pieces of code: `parts` faults 4 KiB pages (1 in 64
    /// sampled), `params` faults huge pages (every one sampled, placed by its page frame at the
    /// anatomy). Each is credited the pages it faulted, not the samples it left.
    #[test]
    fn a_huge_pages_sample_stands_for_its_huge_page_and_a_small_pages_for_every_page() {
        let (mut l, parts, params) = ledger();
        let page = 4096;
        l.set_huge_bytes(2 * MIB);
        // [0x4000_0000, +16 MiB): 4 MiB of small pages by `parts` (1024 faults, 16 sampled),
        // then 8 MiB in four huge pages by `params`.
        mmap(&mut l, 10, 10, 0x4000_0000, 16 * MIB, parts);
        for k in 0..16 {
            touch_of(&mut l, 10, 0x4000_0000 + k * 64 * page, parts);
        }
        huge_touches(&mut l, params);
        // The first one's fault sampled as a small one too (one in 64 may land on it).
        touch_of(&mut l, 10, 0x4080_0000 + 5 * page, params);
        // A huge page whose frame no anatomy finds (freed, or not the tree's).
        l.apply(
            10,
            10,
            Input::HugeTouch {
                pfn: 0x9999,
                stack: Some(parts),
            },
        );
        assert_eq!(l.huge_pending()[0].1.len(), 5);
        l.place_huge(10, &huge_found_at(0x4080_0000));
        let maps = [ResidentMaps {
            pid: 10,
            maps: vec![ResidentMap {
                anon_huge: 8 * MIB,
                ..rm(0x4000_0000, 16 * MIB, 12 * MIB, true, GroupKind::Anon)
            }],
        }];
        let pages = l.touched_pages();
        assert_eq!(pages[0].1.len(), 20, "the small sample in a huge page goes");
        let present: HashMap<i32, Vec<PageState>> =
            [(10, states(&[true; 20]))].into_iter().collect();
        let t = l.touch_at(&maps, &present, 64);
        let by = |s: StackId| {
            let (f, _) = l.stacks.get(s).unwrap();
            t.stacks.iter().find(|g| g.frames == f).unwrap().clone()
        };
        assert_eq!((by(parts).resident_bytes, by(parts).samples), (4 * MIB, 16));
        assert_eq!(
            (by(params).resident_bytes, by(params).samples),
            (8 * MIB, 4)
        );
        assert_eq!(t.huge_samples, 4);
        // The frame not found is looked for once more, then dropped and counted.
        assert_eq!(l.huge_unfound, 0);
        l.place_huge(10, &HashMap::new());
        assert_eq!((l.huge_unfound, l.huge_samples), (1, 5));
        assert!(l.huge_pending().is_empty());
    }

    /// A huge page written again after a clearing of the soft-dirty bits faults once for its
    /// 2 MiB: the rewrite's sample takes the huge page's over and stands for a huge page too.
    #[test]
    fn a_huge_page_written_again_goes_to_its_new_writer_whole() {
        let (mut l, parts, params) = ledger();
        l.set_huge_bytes(2 * MIB);
        mmap(&mut l, 10, 10, 0x4000_0000, 8 * MIB, params);
        huge_touches(&mut l, params);
        l.place_huge(10, &huge_found_at(0x4000_0000));
        let maps = [ResidentMaps {
            pid: 10,
            maps: vec![ResidentMap {
                anon_huge: 8 * MIB,
                ..rm(0x4000_0000, 8 * MIB, 8 * MIB, true, GroupKind::Anon)
            }],
        }];
        l.apply(10, 10, Input::Rearm { pids: vec![10] });
        // `parts` writes huge pages 0 and 1 again: one fault each, both sampled (every = 1).
        touch_of(&mut l, 10, 0x4000_0000 + 300 * 4096, parts);
        touch_of(&mut l, 10, 0x4020_0000 + 7 * 4096, parts);
        let pages = l.touched_pages();
        let dirty: Vec<PageState> = pages[0]
            .1
            .iter()
            .map(|&p| PageState {
                present: true,
                soft_dirty: p < 0x4040_0000,
            })
            .collect();
        let t = l.touch_at(&maps, &[(10, dirty)].into_iter().collect(), 1);
        let by = |s: StackId| {
            let (f, _) = l.stacks.get(s).unwrap();
            t.stacks.iter().find(|g| g.frames == f).unwrap().clone()
        };
        assert_eq!(t.samples_rewritten, 2);
        assert_eq!(
            (by(parts).resident_bytes, by(params).resident_bytes),
            (4 * MIB, 4 * MIB)
        );
        assert_eq!(by(params).before_bytes, 4 * MIB);
    }

    #[test]
    fn memory_written_again_after_a_rearm_goes_to_its_new_writer_and_the_rest_stays_before() {
        let (mut l, first, second) = ledger();
        let page = 4096;
        let touch = |l: &mut Ledger, addr: u64, s: StackId| touch_of(l, 10, addr, s);
        // Span 0: `first` wrote the heap's 8 pages (a sample each, for the test) and a
        // mapping's 2 pages that the kernel will report all soft-dirty (grown since).
        for k in 0..8 {
            touch(&mut l, 0x10_0000 + k * page, first);
        }
        touch(&mut l, 0x40_0000, first);
        touch(&mut l, 0x40_0000 + page, first);
        // A mapping an mremap moves after the rearm: its page reads soft-dirty, unwritten.
        mmap(&mut l, 10, 10, 0x6000_0000, 2 * MIB, first);
        touch(&mut l, 0x6000_0000, first);
        l.apply(10, 10, Input::Rearm { pids: vec![10] });
        l.apply(
            10,
            10,
            Input::Mremap {
                addr: 0x6000_0000,
                old_len: 2 * MIB,
                new_len: 2 * MIB,
                stack: None,
            },
        );
        l.apply(10, 10, Input::MremapDone { ret: 0x7000_0000 });
        // Span 1: `second` writes 6 of the heap's pages again (the allocator handed them out
        // anew); 2 of those writes are sampled.
        touch(&mut l, 0x10_0000, second);
        touch(&mut l, 0x10_0000 + 3 * page, second);
        let maps = [ResidentMaps {
            pid: 10,
            maps: vec![
                rm(0x10_0000, 8 * page, 8 * MIB, true, GroupKind::Heap),
                ResidentMap {
                    all_soft_dirty: true,
                    ..rm(0x40_0000, 2 * page, 2 * MIB, true, GroupKind::Anon)
                },
                rm(0x7000_0000, 2 * MIB, 2 * MIB, true, GroupKind::Anon),
            ],
        }];
        let pages = l.touched_pages();
        assert_eq!(pages[0].1.len(), 11, "{pages:?}");
        // The heap's pages 0..6 written again (soft-dirty), 6 and 7 not; the grown mapping's
        // and the moved page read soft-dirty too.
        let dirty: Vec<PageState> = pages[0]
            .1
            .iter()
            .map(|&p| PageState {
                present: true,
                soft_dirty: p >= 0x40_0000 || p < 0x10_0000 + 6 * page,
            })
            .collect();
        let t = l.touch_at(&maps, &[(10, dirty)].into_iter().collect(), 64);
        // The heap's earlier samples of pages written again are given up (pages 1, 2, 4 and
        // 5: the rewrite's own samples took pages 0 and 3's place); 2 of `first`'s stay there
        // (pages 6 and 7), beside the rewrite's 2 of `second`; the grown mapping's and the
        // moved page's stay (their bits cannot tell).
        assert_eq!((t.rearms, t.samples_rewritten), (1, 4));
        let by = |s: StackId| {
            let frames = l.stacks.get(s).unwrap().0;
            t.stacks.iter().find(|g| g.frames[..] == *frames).unwrap()
        };
        assert_eq!(
            (by(second).resident_bytes, by(second).before_bytes),
            (4 * MIB, 0)
        );
        assert_eq!(by(second).samples, 2);
        assert_eq!(
            (by(first).resident_bytes, by(first).before_bytes),
            (8 * MIB, 8 * MIB),
            "the heap's other half, the grown mapping and the moved one, all from before"
        );
        // Given up for good: the next anatomy does not count them again.
        assert_eq!(l.touched_pages()[0].1.len(), 7);
        // A process whose bits were not cleared (gone, refused) keeps its span: its samples are
        // not of an earlier one, whatever its pages read.
        l.apply(11, 11, Input::Fork { parent: 10 });
        touch_of(&mut l, 11, 0x10_0000, first);
        let maps11 = [ResidentMaps {
            pid: 11,
            maps: vec![rm(0x10_0000, 8 * page, MIB, true, GroupKind::Heap)],
        }];
        let dirty11 = [(
            11,
            vec![PageState {
                present: true,
                soft_dirty: true,
            }],
        )]
        .into_iter()
        .collect();
        let t = l.touch_at(&maps11, &dirty11, 64);
        assert_eq!((t.samples_rewritten, t.stacks[0].before_bytes), (0, 0));
    }

    /// Four huge pages faulted in by process 10 with stack `s`, frames 0x1000, 0x1200, ...
    fn huge_touches(l: &mut Ledger, s: StackId) {
        for k in 0..4 {
            l.apply(
                10,
                10,
                Input::HugeTouch {
                    pfn: 0x1000 + k * 0x200,
                    stack: Some(s),
                },
            );
        }
    }

    /// Where an anatomy found `huge_touches`' frames: one huge page after another from `at`.
    fn huge_found_at(at: u64) -> HashMap<u64, u64> {
        (0..4)
            .map(|k| (0x1000 + k * 0x200, at + k * 2 * MIB))
            .collect()
    }

    fn touch_of(l: &mut Ledger, pid: i32, addr: u64, s: StackId) {
        l.apply(
            pid,
            pid,
            Input::Touch {
                addr,
                stack: Some(s),
            },
        );
    }

    #[test]
    fn a_diff_by_stack_names_what_came_and_went_largest_first() {
        let (mut l, part, params) = ledger();
        mmap(&mut l, 10, 10, 0x1000_0000, 32 * MIB, params);
        let before = at(l.live(None, &mut |_, _, _| None));
        for t in 0..4 {
            mmap(&mut l, 10, 10, 0x2000_0000 + t * 24 * MIB, 24 * MIB, part);
        }
        l.apply(
            10,
            10,
            Input::Munmap {
                addr: 0x1000_0000,
                len: 32 * MIB,
            },
        );
        let after = at(l.live(None, &mut |_, _, _| None));
        let d = stack_diff(&before, &after);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].frames[0].function, "alloc_partition");
        assert!(d[0].new && !d[0].gone);
        assert_eq!((d[0].to_mappings, d[0].delta_bytes), (4, 96 * MIB as i64));
        assert!(d[1].gone);
        assert_eq!(
            (d[1].delta_bytes, d[1].max_mapping_bytes),
            (-(32 * MIB as i64), 32 * MIB)
        );
        assert!(stack_diff(&after, &after).is_empty());
    }

    #[test]
    fn the_allocating_frames_skip_the_allocator_and_the_wrappers() {
        let f = |function: &str, module: &str| Frame {
            function: function.into(),
            module: module.into(),
        };
        let c = [
            f("mmap64", "libc.so.6"),
            f("sysmalloc", "libc.so.6"),
            f("malloc", "libc.so.6"),
            f("alloc::raw_vec::RawVec<T,A>::allocate_in", "prover"),
            f(
                "<alloc::vec::Vec<T> as core::clone::Clone>::clone",
                "prover",
            ),
            f("prover::synth::alloc_partition", "prover"),
            f("prover::main", "prover"),
            f("core::ops::function::FnOnce::call_once", "prover"),
            f("std::rt::lang_start_internal", "prover"),
            f("main", "prover"),
            f("__libc_start_main", "libc.so.6"),
            f("_start", "prover"),
        ];
        let site: Vec<&str> = allocating_frames(&c)
            .iter()
            .map(|f| f.function.as_str())
            .collect();
        // The start frames go from the outermost end only: `main` stays below the runtime's.
        assert_eq!(
            site,
            [
                "prover::synth::alloc_partition",
                "prover::main",
                "core::ops::function::FnOnce::call_once",
                "std::rt::lang_start_internal",
                "main"
            ]
        );
        let cpp = [
            f("operator new(unsigned long)", "libstdc++.so.6"),
            f("Pool::grow", "daemon"),
        ];
        assert_eq!(allocating_frames(&cpp)[0].function, "Pool::grow");
        // Only the allocator's: all of it is said.
        assert_eq!(allocating_frames(&c[..2]).len(), 2);
    }
}
