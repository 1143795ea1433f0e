//! The calls that made a mapping: a user stack perf copied with the call
//! (`probe::mapcalls::UserStack`) unwound with framehop from the unwind tables (.eh_frame,
//! .debug_frame) of the files the process maps, read with `object` through
//! /proc/PID/map_files (the file as mapped, even deleted or replaced on disk), and each frame
//! named from the file's ELF symbols by blazesym. Release builds without frame pointers keep
//! .eh_frame (C++ exceptions, Rust panics and backtraces need it); where a file has none,
//! framehop follows the frame pointers.
//!
//! A process's files are read when one of its stacks is first unwound, and again when a
//! stack's instruction pointer is in none of them (a library loaded since): its /proc/PID/maps
//! (`maps.rs`'s reader) and map_files read through the `ProcFs` the unwinder is built over.
//! Files are read once for every process that maps them (by device and inode).

use crate::model::ledger::Frame;
use crate::probe::mapcalls::UserStack;
use crate::probe::proc::{ProcFs, PssSource};
use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

/// A stack unwound at most this deep.
pub const MAX_FRAMES: usize = 64;

#[cfg(target_arch = "x86_64")]
mod arch {
    use framehop::x86_64::UnwindRegsX86_64;
    pub use framehop::x86_64::{CacheX86_64 as Cache, UnwinderX86_64 as Unwinder};

    /// The instruction pointer, stack pointer and unwind registers of `regs` (BP, SP, IP).
    pub fn start(regs: &[u64]) -> (u64, u64, UnwindRegsX86_64) {
        (
            regs[2],
            regs[1],
            UnwindRegsX86_64::new(regs[2], regs[1], regs[0]),
        )
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    use framehop::aarch64::UnwindRegsAarch64;
    pub use framehop::aarch64::{CacheAarch64 as Cache, UnwinderAarch64 as Unwinder};

    /// The program counter, stack pointer and unwind registers of `regs` (X29, LR, SP, PC).
    pub fn start(regs: &[u64]) -> (u64, u64, UnwindRegsAarch64) {
        (
            regs[3],
            regs[2],
            UnwindRegsAarch64::new(regs[1], regs[2], regs[0]),
        )
    }
}

/// What the unwinder needs of a file, read once: its unwind sections, where its code and
/// segments lie, and a path blazesym can open to name its symbols.
struct FileInfo {
    /// The name shown in frames (`libc.so.6`).
    name: String,
    /// A path to the file: the one in maps where it is still that file, else map_files'.
    path: PathBuf,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, Arc<[u8]>)>,
    eh_frame_hdr: Option<(Range<u64>, Arc<[u8]>)>,
    debug_frame: Option<Arc<[u8]>>,
    /// The file carries DWARF debug info (`.debug_info`): its frames are named from it, with
    /// the functions inlined at each address; else from its ELF symbols alone.
    dwarf: bool,
    /// Executable PT_LOAD segments: file offset, size in the file, and virtual address.
    segments: Vec<(u64, u64, u64)>,
}

/// Which file a mapping maps: its device (major, minor) and inode.
type FileKey = ((u32, u32), u64);

/// A file mapped into one process, and where.
struct Module {
    range: Range<u64>,
    /// Address in the process minus address in the file (`object`'s SVMA).
    bias: u64,
    file: Arc<FileInfo>,
}

/// One process's modules and framehop's unwinder over them.
struct Process {
    unwinder: arch::Unwinder<Arc<[u8]>>,
    modules: Vec<Module>,
    /// Its /proc/PID/mem, where it could be opened (memmon may read the process's memory).
    mem: Option<std::fs::File>,
}

/// Unwinds and names the stacks of many processes.
pub struct Unwinder {
    /// Where the processes' maps and mapped files are read.
    procfs: ProcFs,
    /// The maps read, reused.
    buf: Vec<u8>,
    procs: HashMap<i32, Process>,
    /// By (device, inode) of the mapped file; `None`: it could not be read.
    files: HashMap<FileKey, Option<Arc<FileInfo>>>,
    cache: arch::Cache,
    symbolizer: blazesym::symbolize::Symbolizer,
    /// Names found, by file and address in it: the function, and those inlined into it at
    /// that address, innermost first.
    names: HashMap<(usize, u64), Vec<String>>,
    /// Stacks unwound, and of them those cut short.
    pub unwound: u64,
    pub truncated: u64,
    /// Stacks the kernel copied short (a page it could not read without a fault) whose rest
    /// was read from the process's memory as they were unwound.
    pub completed: u64,
    /// Files whose unwind sections were not read: larger than `MAX_SECTION_BYTES`, or said
    /// to lie past the file's end (their stacks end at their frames). Each once, at most 100.
    pub sections_refused: Vec<String>,
}

/// The most bytes of one unwind section read into memory: a real program's `.eh_frame` is a
/// few MiB (a Rust prover's 5 to 20); a header that claims more (a sparse file of gigabytes) is
/// not believed.
pub const MAX_SECTION_BYTES: u64 = 64 << 20;

impl Default for Unwinder {
    /// Over the kernel's /proc.
    fn default() -> Self {
        Unwinder::new(ProcFs::default())
    }
}

impl Unwinder {
    /// An unwinder that reads the processes' maps and files under `procfs`.
    pub fn new(procfs: ProcFs) -> Unwinder {
        Unwinder {
            procfs,
            buf: Vec::new(),
            procs: HashMap::new(),
            files: HashMap::new(),
            cache: arch::Cache::new(),
            // Code info is what inlined functions come with: DWARF's, where a file has it.
            symbolizer: blazesym::symbolize::Symbolizer::builder()
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .build(),
            names: HashMap::new(),
            unwound: 0,
            truncated: 0,
            completed: 0,
            sections_refused: Vec::new(),
        }
    }

    /// The process has exited or exec'd: its modules are forgotten.
    pub fn forget(&mut self, pid: i32) {
        self.procs.remove(&pid);
    }

    /// The frames of `stack` of process `pid`, innermost first, and whether the walk was cut
    /// short (the copied stack ended, or a frame could not be unwound).
    pub fn frames(&mut self, pid: i32, stack: &UserStack) -> (Vec<Frame>, bool) {
        self.unwound += 1;
        let (pc, sp, _) = arch::start(&stack.regs);
        if !self.procs.get(&pid).is_some_and(|p| p.covers(pc)) {
            self.load(pid);
        }
        let Some(p) = self.procs.get(&pid) else {
            self.truncated += 1;
            return (vec![unknown()], true);
        };
        let (mut addrs, mut end, read) = walk(p, &mut self.cache, &stack.regs, &stack.bytes);
        // The kernel's copy stopped short of what was asked, at a page it could not read
        // without a fault, and the walk needs what lies past it: the rest is read from the
        // process's memory now, up to a look at the rings later (200 ms at most). What lies
        // there are the callers' frames, the same while their calls last. A caller that has
        // returned since leaves other words there: the last word the walk read from the copy
        // (the return address of the frame nearest the gap, which the next call made from
        // its caller would overwrite) is read again, and the rest is taken only where it is
        // unchanged; and the frames it adds are taken only where each is in a file the
        // process maps (the words a later call left there seldom are).
        if let (Walk::Unreadable(at), Some(last)) = (end, read) {
            let copied = stack.bytes.len() as u64;
            let asked = stack.asked as u64;
            if copied < asked && (sp + copied..sp + asked).contains(&at) {
                let mut now = Vec::new();
                p.read_memory(last..sp + asked, &mut now);
                let from = (last - sp) as usize;
                let kept = stack.bytes.get(from..from + 8);
                if now.len() as u64 > copied - (last - sp) && now.get(..8) == kept {
                    let mut more = stack.bytes.clone();
                    more.extend_from_slice(&now[stack.bytes.len() - from..]);
                    let (all, all_end, _) = walk(p, &mut self.cache, &stack.regs, &more);
                    if all[addrs.len().min(all.len())..]
                        .iter()
                        .all(|&a| p.covers(a))
                    {
                        self.completed += 1;
                        (addrs, end) = (all, all_end);
                    }
                }
            }
        }
        let cut = !matches!(end, Walk::Ended);
        if cut {
            self.truncated += 1;
        }
        let mut frames = Vec::with_capacity(addrs.len());
        for a in addrs {
            self.name(pid, a, &mut frames);
        }
        (frames, cut)
    }

    /// The frames at address `addr` of process `pid`, pushed on `out`: the functions inlined
    /// there (where the file's DWARF says), innermost first, then the function itself.
    fn name(&mut self, pid: i32, addr: u64, out: &mut Vec<Frame>) {
        let Some(m) = self
            .procs
            .get(&pid)
            .and_then(|p| p.modules.iter().find(|m| m.range.contains(&addr)))
        else {
            out.push(unknown());
            return;
        };
        let svma = addr.wrapping_sub(m.bias);
        let file = Arc::clone(&m.file);
        let key = (Arc::as_ptr(&file) as usize, svma);
        let names = match self.names.get(&key) {
            Some(n) => n,
            None => {
                use blazesym::symbolize::source::{Elf, Source};
                use blazesym::symbolize::{Input, Symbolized};
                // The file's DWARF where it has some (its inlined functions), else its ELF
                // symbols (a file without debug info, or one whose DWARF does not cover the
                // address, as libc's, whose debug info is in another package).
                let symbolize = |debug_syms: bool| {
                    let mut elf = Elf::new(&file.path);
                    elf.debug_syms = debug_syms;
                    match self
                        .symbolizer
                        .symbolize_single(&Source::Elf(elf), Input::VirtOffset(svma))
                    {
                        Ok(Symbolized::Sym(s)) => Some(s),
                        _ => None,
                    }
                };
                let dwarf = file.dwarf;
                let names = match symbolize(dwarf).or_else(|| symbolize(false).filter(|_| dwarf)) {
                    Some(s) => s
                        .inlined
                        .iter()
                        .rev()
                        .map(|f| f.name.to_string())
                        .chain(std::iter::once(s.name.into_owned()))
                        .collect(),
                    None => vec![format!("[{}+{:#x}]", file.name, svma)],
                };
                self.names.entry(key).or_insert(names)
            }
        };
        out.extend(names.iter().map(|function| Frame {
            function: function.clone(),
            module: file.name.clone(),
        }));
    }

    /// Reads process `pid`'s mapped files from its maps (those with code).
    fn load(&mut self, pid: i32) {
        let read = self.procfs.open(pid).ok().and_then(|h| {
            let src = h.pss_source().ok()?;
            let maps = super::maps::read(&src, false, &mut self.buf).ok()?;
            Some((src, maps.mappings))
        });
        let Some((src, mappings)) = read else {
            self.procs.remove(&pid);
            return;
        };
        // Each file's mappings: their union, and the bias from its first executable one (its
        // address, offset and range as map_files names it).
        struct Seen {
            range: Range<u64>,
            exec: Option<(u64, u64, String)>,
            path: String,
        }
        let mut seen: Vec<(FileKey, Seen)> = Vec::new();
        for m in mappings {
            if m.inode == 0 || !m.path.starts_with('/') {
                continue;
            }
            let (s, e, off) = (m.start, m.end, m.offset);
            let range = format!("{s:x}-{e:x}");
            let key = (m.dev, m.inode);
            let exec = m.perms.exec;
            match seen.iter_mut().find(|(k, _)| *k == key) {
                Some((_, f)) => {
                    f.range.start = f.range.start.min(s);
                    f.range.end = f.range.end.max(e);
                    if exec && f.exec.is_none() {
                        f.exec = Some((s, off, range));
                    }
                }
                None => seen.push((
                    key,
                    Seen {
                        range: s..e,
                        exec: exec.then_some((s, off, range)),
                        path: m.path,
                    },
                )),
            }
        }
        let mut unwinder = arch::Unwinder::new();
        let mut modules = Vec::new();
        for (key, f) in seen {
            let Some((start, offset, range)) = f.exec else {
                continue;
            };
            let info = match self.files.get(&key) {
                Some(i) => i.clone(),
                None => {
                    let mut refused = false;
                    let i = read_file(&src, &range, &f.path, &key, &mut refused).map(Arc::new);
                    if refused && self.sections_refused.len() < 100 {
                        self.sections_refused.push(f.path.clone());
                    }
                    self.files.insert(key, i.clone());
                    i
                }
            };
            let Some(info) = info else {
                continue;
            };
            // The executable segment that maps `offset` (its offset rounded down to a page, as
            // the mapping begins; a linker may pack a segment into the page of the one before,
            // so only the executable ones are looked at): its address in the file there,
            // against `start`.
            let page = rustix::param::page_size() as u64;
            let Some(&(seg_off, _, seg_addr)) = info
                .segments
                .iter()
                .find(|(o, size, _)| *o / page * page <= offset && offset < o + size)
            else {
                continue;
            };
            let svma_at = seg_addr.wrapping_add(offset).wrapping_sub(seg_off);
            let bias = start.wrapping_sub(svma_at);
            let sections = framehop::ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: info.text.clone(),
                got_svma: info.got.clone(),
                eh_frame_svma: info.eh_frame.as_ref().map(|(r, _)| r.clone()),
                eh_frame: info.eh_frame.as_ref().map(|(_, d)| d.clone()),
                eh_frame_hdr_svma: info.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
                eh_frame_hdr: info.eh_frame_hdr.as_ref().map(|(_, d)| d.clone()),
                debug_frame: info.debug_frame.clone(),
                ..Default::default()
            };
            use framehop::Unwinder as _;
            unwinder.add_module(framehop::Module::new(
                info.name.clone(),
                f.range.clone(),
                bias,
                sections,
            ));
            modules.push(Module {
                range: f.range,
                bias,
                file: info,
            });
        }
        let mem = src.open("mem").ok();
        self.procs.insert(
            pid,
            Process {
                unwinder,
                modules,
                mem,
            },
        );
    }
}

impl Process {
    fn covers(&self, pc: u64) -> bool {
        self.modules.iter().any(|m| m.range.contains(&pc))
    }

    /// Appends the process's memory over `range` to `out`, a page at a time, up to the first
    /// byte that cannot be read (past the stack's top, or the process gone).
    fn read_memory(&self, range: Range<u64>, out: &mut Vec<u8>) {
        use std::os::unix::fs::FileExt;
        let Some(mem) = &self.mem else {
            return;
        };
        let page = rustix::param::page_size() as u64;
        let mut at = range.start;
        while at < range.end {
            let upto = ((at / page + 1) * page).min(range.end);
            let old = out.len();
            out.resize(old + (upto - at) as usize, 0);
            let got = mem.read_at(&mut out[old..], at).unwrap_or(0);
            out.truncate(old + got);
            if at + got as u64 != upto {
                return;
            }
            at = upto;
        }
    }
}

/// How a walk up a stack ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// At its outermost frame.
    Ended,
    /// At `MAX_FRAMES`, or a frame that could not be unwound.
    Cut,
    /// At a word past the copied bytes, at this address.
    Unreadable(u64),
}

/// Walks `bytes`, the stack from the stack pointer of `regs` up, with the process's unwind
/// tables: the frames' lookup addresses, innermost first, how the walk ended, and the highest
/// address it read a word at.
fn walk(
    p: &Process,
    cache: &mut arch::Cache,
    regs: &[u64],
    bytes: &[u8],
) -> (Vec<u64>, Walk, Option<u64>) {
    use framehop::Unwinder as _;
    let (pc, sp, regs) = arch::start(regs);
    let mut highest = None;
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        let off = addr.checked_sub(sp).ok_or(())? as usize;
        let word = bytes.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
        highest = highest.max(Some(addr));
        Ok(u64::from_ne_bytes(word.try_into().map_err(|_| ())?))
    };
    let mut addrs = Vec::new();
    let end = {
        let mut iter = p.unwinder.iter_frames(pc, regs, cache, &mut read_stack);
        loop {
            if addrs.len() >= MAX_FRAMES {
                break Walk::Cut;
            }
            match iter.next() {
                Ok(Some(f)) => addrs.push(f.address_for_lookup()),
                Ok(None) => break Walk::Ended,
                Err(framehop::Error::CouldNotReadStack(at)) => break Walk::Unreadable(at),
                Err(_) => break Walk::Cut,
            }
        }
    };
    (addrs, end, highest)
}

fn unknown() -> Frame {
    Frame {
        function: "[unknown]".into(),
        module: String::new(),
    }
}

/// Reads a mapped file's unwind sections and segments: through the process's
/// map_files/RANGE (the file as mapped), else its path. A section over `MAX_SECTION_BYTES`, or
/// past the file's end, is not read (`refused` set): the file then has no unwind sections at
/// all.
fn read_file(
    src: &PssSource,
    range: &str,
    path: &str,
    key: &FileKey,
    refused: &mut bool,
) -> Option<FileInfo> {
    use object::{Object, ObjectSection, ObjectSegment};
    let rel = format!("map_files/{range}");
    let (file, opened) = match src.open(&rel) {
        Ok(f) => (f, src.dir_path().join(rel)),
        Err(_) => (std::fs::File::open(path).ok()?, PathBuf::from(path)),
    };
    // blazesym reads the symbols again from a path: the path in maps where it is still the
    // same file (its symbols then read once for every process), else the one opened.
    let same = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).is_ok_and(|m| m.ino() == key.1)
    };
    let sym_path = if same { PathBuf::from(path) } else { opened };
    let file_len = file.metadata().ok()?.len();
    let cache = object::ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    // Sized before a byte is read: what a header says is checked against the cap and the file.
    let believable = |s: &object::Section<'_, '_, &object::ReadCache<std::fs::File>>| {
        s.file_range().is_some_and(|(off, size)| {
            size <= MAX_SECTION_BYTES && off.checked_add(size).is_some_and(|end| end <= file_len)
        })
    };
    let unwind_sections = [".eh_frame", ".eh_frame_hdr", ".debug_frame"];
    let all_believable = unwind_sections
        .iter()
        .filter_map(|n| obj.section_by_name(n))
        .all(|s| believable(&s));
    if !all_believable {
        *refused = true;
    }
    let section = |name: &str| {
        if !all_believable {
            return None;
        }
        let s = obj.section_by_name(name)?;
        let data: Arc<[u8]> = Arc::from(s.data().ok()?);
        Some((s.address()..s.address() + s.size(), data))
    };
    let range_of = |name: &str| {
        let s = obj.section_by_name(name)?;
        Some(s.address()..s.address() + s.size())
    };
    let name = path
        .strip_suffix(" (deleted)")
        .unwrap_or(path)
        .rsplit('/')
        .next()
        .unwrap_or(path)
        .to_string();
    Some(FileInfo {
        name,
        path: sym_path,
        text: range_of(".text"),
        got: range_of(".got"),
        eh_frame: section(".eh_frame"),
        eh_frame_hdr: section(".eh_frame_hdr"),
        debug_frame: section(".debug_frame").map(|(_, d)| d),
        dwarf: obj.section_by_name(".debug_info").is_some(),
        segments: obj
            .segments()
            .filter(|s| {
                matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0)
            })
            .map(|s| (s.file_range().0, s.file_range().1, s.address()))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::fake::FakeProc;

    /// A fake /proc whose process 4242 maps what this test process maps (its maps copied), with
    /// its program's path gone from disk: the program is found only through the fake
    /// map_files, the libraries by their paths.
    #[test]
    fn a_process_is_read_from_its_maps_and_map_files_under_the_unwinders_root() {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let gone = "/gone/unwind-test (deleted)";
        let mut maps = String::new();
        let map_files = dir.path().join("4242/map_files");
        std::fs::create_dir_all(&map_files).unwrap();
        for line in std::fs::read_to_string("/proc/self/maps").unwrap().lines() {
            if !line.ends_with(&*exe.to_string_lossy()) {
                maps.push_str(line);
                maps.push('\n');
                continue;
            }
            let range = line.split(' ').next().unwrap();
            let (s, e) = range.split_once('-').unwrap();
            let (s, e) = (
                u64::from_str_radix(s, 16).unwrap(),
                u64::from_str_radix(e, 16).unwrap(),
            );
            std::os::unix::fs::symlink(&exe, map_files.join(format!("{s:x}-{e:x}"))).unwrap();
            let kept = &line[..line.len() - exe.as_os_str().len()];
            maps.push_str(&format!("{kept}{gone}\n"));
        }
        FakeProc::new(4242).mappings(&maps, "").write(dir.path());
        let mut u = Unwinder::new(ProcFs::new(dir.path()));
        u.load(4242);
        let here = a_process_is_read_from_its_maps_and_map_files_under_the_unwinders_root as fn()
            as usize as u64;
        let p = u.procs.get(&4242).expect("the process's maps were read");
        assert!(p.covers(here));
        let m = p.modules.iter().find(|m| m.range.contains(&here)).unwrap();
        assert_eq!(m.file.name, "unwind-test");
        assert!(m.file.path.starts_with(&map_files), "{:?}", m.file.path);
        assert!(m.file.eh_frame.is_some() && !m.file.segments.is_empty());
        // A library (where the test program has one: libc), by its path.
        if maps.contains(".so") {
            assert!(p
                .modules
                .iter()
                .any(|m| m.file.path.is_absolute() && !m.file.path.starts_with(dir.path())));
        }
        // A process the root does not hold is not read, though the machine's /proc has it.
        let me = std::process::id() as i32;
        u.load(me);
        assert!(!u.procs.contains_key(&me));
    }
}
