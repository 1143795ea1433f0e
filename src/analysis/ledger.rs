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
//! Calls below the threshold are filtered in the kernel: a munmap that cuts less than that off
//! a mapping the ledger holds is not seen, and the ledger keeps those bytes (a mapping made
//! before the ledger began is not in it at all). The ranges are the calls' ranges, not the
//! kernel's VMAs: adjacent mappings the kernel merges stay apart here, each with its stack.

use crate::model::ledger::{Call, Frame, LedgerAt, StackGroup};
use std::collections::{BTreeMap, HashMap, HashSet};

/// An interned stack.
pub type StackId = u32;

/// The stacks seen, each once (their frames compared).
#[derive(Debug, Default)]
pub struct Stacks {
    list: Vec<(Vec<Frame>, bool)>,
    index: HashMap<(Vec<Frame>, bool), StackId>,
}

impl Stacks {
    /// The ID of `frames` (innermost first; `truncated`: cut short).
    pub fn intern(&mut self, frames: Vec<Frame>, truncated: bool) -> StackId {
        let key = (frames, truncated);
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.list.len() as StackId;
        self.list.push(key.clone());
        self.index.insert(key, id);
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
    /// Processes whose children join the tree, themselves not in it (memmon, launching the
    /// command).
    parents: HashSet<i32>,
    ranges: HashMap<i32, BTreeMap<u64, Range>>,
    entered: HashMap<i32, Entered>,
    brk: HashMap<i32, u64>,
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
            parents: HashSet::new(),
            ranges: HashMap::new(),
            entered: HashMap::new(),
            brk: HashMap::new(),
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

    /// The process is in the tree.
    pub fn is_member(&self, pid: i32) -> bool {
        self.members.contains(&pid)
    }

    /// Applies one call of thread `tid` of process `pid` (calls of processes outside the tree
    /// are left out: forks bring new ones in).
    pub fn apply(&mut self, pid: i32, tid: i32, input: Input) {
        if let Input::Fork { parent } = input {
            // A new process (not a thread) of a process in the tree: its address space is a
            // copy of its parent's.
            let joins = self.members.contains(&parent) || self.parents.contains(&parent);
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
        if !self.members.contains(&pid) {
            return;
        }
        match input {
            Input::Fork { .. } => {}
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
                    self.cut(pid, addr, old_end);
                    let start = ret as u64;
                    let (stack, call) = match (stack, was) {
                        (Some(s), _) => (Some(s), Call::Mremap),
                        (None, Some((s, c))) => (s, c),
                        (None, None) => (None, Call::Mremap),
                    };
                    self.insert(pid, start, start + self.round(new_len), stack, call);
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
            }
            Input::Exit => {
                self.entered.remove(&tid);
                if tid == pid {
                    self.ranges.remove(&pid);
                    self.brk.remove(&pid);
                    self.members.remove(&pid);
                }
            }
        }
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

    /// Cuts `[start, end)` out of the process's ranges.
    fn cut(&mut self, pid: i32, start: u64, end: u64) {
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
    /// first (by bytes, then by their innermost frames).
    pub fn live(&self) -> Vec<StackGroup> {
        #[derive(Default)]
        struct Acc {
            pids: HashSet<i32>,
            mappings: u64,
            bytes: u64,
            min: u64,
            max: u64,
        }
        let mut by: HashMap<(Option<StackId>, Call), Acc> = HashMap::new();
        for (&pid, map) in &self.ranges {
            for r in map.iter() {
                let size = r.1.end - r.0;
                let a = by.entry((r.1.stack, r.1.call)).or_insert_with(|| Acc {
                    min: u64::MAX,
                    ..Acc::default()
                });
                a.pids.insert(pid);
                a.mappings += 1;
                a.bytes += size;
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
                    min_mapping_bytes: a.min,
                    max_mapping_bytes: a.max,
                }
            })
            .collect();
        out.sort_by(|a, b| {
            b.bytes
                .cmp(&a.bytes)
                .then_with(|| a.frames.cmp(&b.frames))
                .then(a.call.cmp(&b.call))
        });
        out
    }
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
    let mut all: Vec<(Vec<Frame>, Call, bool)> =
        from.stacks.iter().chain(&to.stacks).map(key).collect();
    all.sort();
    all.dedup();
    let mut out: Vec<StackChange> = all
        .into_iter()
        .filter_map(|k| {
            let f = from.stacks.iter().find(|g| key(g) == k);
            let t = to.stacks.iter().find(|g| key(g) == k);
            let (fb, tb) = (f.map_or(0, |g| g.bytes), t.map_or(0, |g| g.bytes));
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
    out.sort_by(|a, b| {
        b.delta_bytes
            .unsigned_abs()
            .cmp(&a.delta_bytes.unsigned_abs())
            .then_with(|| a.frames.cmp(&b.frames))
    });
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
        let live = l.live();
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
        let live = l.live();
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
        let live = l.live();
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
            l.live().iter().map(|g| g.bytes).sum::<u64>(),
            21 * MIB - 4096
        );
    }

    #[test]
    fn a_fixed_mapping_replaces_what_was_there() {
        let (mut l, part, params) = ledger();
        mmap(&mut l, 10, 10, 0x1000_0000, 4 * MIB, part);
        mmap(&mut l, 10, 10, 0x1000_0000 + MIB, 2 * MIB, params);
        let live = l.live();
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
            l.live().is_empty(),
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
        let live = l.live();
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
        assert_eq!(l.live().len(), 1);
        assert_eq!(l.live()[0].bytes, 132 * 1024);
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
        let live = l.live();
        assert_eq!((live[0].processes, live[0].mappings), (2, 2));
        // The child execs: its copy is gone; then maps of its own.
        l.apply(20, 20, Input::Exec);
        mmap(&mut l, 20, 20, 0x3000_0000, 2 * MIB, part);
        assert_eq!(l.live()[0].bytes, 6 * MIB);
        // It exits: gone, and no longer in the tree; a thread's exit leaves its process.
        l.apply(20, 20, Input::Exit);
        l.apply(10, 11, Input::Exit);
        assert!(!l.is_member(20) && l.is_member(10));
        assert_eq!(l.live()[0].bytes, 4 * MIB);
    }

    fn at(stacks: Vec<StackGroup>) -> LedgerAt {
        LedgerAt {
            stacks,
            at_unix_ms: 0,
            calls: 0,
            lost: 0,
        }
    }

    #[test]
    fn a_diff_by_stack_names_what_came_and_went_largest_first() {
        let (mut l, part, params) = ledger();
        mmap(&mut l, 10, 10, 0x1000_0000, 32 * MIB, params);
        let before = at(l.live());
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
        let after = at(l.live());
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
