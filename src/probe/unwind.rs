//! The calls that made a mapping: a user stack perf copied with the call
//! (`probe::mapcalls::UserStack`) unwound with framehop from the unwind tables (.eh_frame,
//! .debug_frame) of the files the process maps, read with `object` through
//! /proc/PID/map_files (the file as mapped, even deleted or replaced on disk), and each frame
//! named from the file's ELF symbols by blazesym. Release builds without frame pointers keep
//! .eh_frame (C++ exceptions, Rust panics and backtraces need it); where a file has none,
//! framehop follows the frame pointers.
//!
//! A process's files are read when one of its stacks is first unwound, and again when a
//! stack's instruction pointer is in none of them (a library loaded since). Files are read once
//! for every process that maps them (by device and inode).

use crate::model::ledger::Frame;
use crate::probe::mapcalls::UserStack;
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
}

/// Unwinds and names the stacks of many processes.
pub struct Unwinder {
    procs: HashMap<i32, Process>,
    /// By (device, inode) of the mapped file; `None`: it could not be read.
    files: HashMap<(String, u64), Option<Arc<FileInfo>>>,
    cache: arch::Cache,
    symbolizer: blazesym::symbolize::Symbolizer,
    /// Names found, by file and address in it: the function, and those inlined into it at
    /// that address, innermost first.
    names: HashMap<(usize, u64), Vec<String>>,
    /// Stacks unwound, and of them those cut short.
    pub unwound: u64,
    pub truncated: u64,
    /// Files whose unwind sections were not read: larger than `MAX_SECTION_BYTES`, or said
    /// to lie past the file's end (their stacks end at their frames). Each once, at most 100.
    pub sections_refused: Vec<String>,
}

/// The most bytes of one unwind section read into memory: a real program's `.eh_frame` is a
/// few MiB (a Rust prover's 5 to 20); a header that claims more (a sparse file of gigabytes) is
/// not believed.
pub const MAX_SECTION_BYTES: u64 = 64 << 20;

impl Default for Unwinder {
    fn default() -> Self {
        Unwinder::new()
    }
}

impl Unwinder {
    pub fn new() -> Unwinder {
        Unwinder {
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
        let (pc, sp, regs) = arch::start(&stack.regs);
        if !self.procs.get(&pid).is_some_and(|p| p.covers(pc)) {
            self.load(pid);
        }
        let Some(p) = self.procs.get(&pid) else {
            self.truncated += 1;
            return (vec![unknown()], true);
        };
        let bytes = &stack.bytes;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(sp).ok_or(())? as usize;
            let word = bytes.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(word.try_into().map_err(|_| ())?))
        };
        use framehop::Unwinder as _;
        let mut iter = p
            .unwinder
            .iter_frames(pc, regs, &mut self.cache, &mut read_stack);
        let mut addrs = Vec::new();
        let mut cut = true;
        while addrs.len() < MAX_FRAMES {
            match iter.next() {
                Ok(Some(f)) => addrs.push(f.address_for_lookup()),
                Ok(None) => {
                    cut = false;
                    break;
                }
                Err(_) => break,
            }
        }
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
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            self.procs.remove(&pid);
            return;
        };
        // Each file's mappings: their union, and the bias from its first executable one.
        struct Seen {
            range: Range<u64>,
            exec: Option<(u64, u64, String)>,
            path: String,
        }
        let mut seen: Vec<((String, u64), Seen)> = Vec::new();
        for line in text.lines() {
            let mut w = line.split_ascii_whitespace();
            let (Some(range), Some(perms), Some(offset), Some(dev), Some(inode)) =
                (w.next(), w.next(), w.next(), w.next(), w.next())
            else {
                continue;
            };
            let path = w.collect::<Vec<_>>().join(" ");
            let Ok(inode) = inode.parse::<u64>() else {
                continue;
            };
            if inode == 0 || !path.starts_with('/') {
                continue;
            }
            let Some((s, e)) = range.split_once('-') else {
                continue;
            };
            let (Ok(s), Ok(e), Ok(off)) = (
                u64::from_str_radix(s, 16),
                u64::from_str_radix(e, 16),
                u64::from_str_radix(offset, 16),
            ) else {
                continue;
            };
            let key = (dev.to_string(), inode);
            let exec = perms.as_bytes().get(2) == Some(&b'x');
            match seen.iter_mut().find(|(k, _)| *k == key) {
                Some((_, f)) => {
                    f.range.start = f.range.start.min(s);
                    f.range.end = f.range.end.max(e);
                    if exec && f.exec.is_none() {
                        f.exec = Some((s, off, range.to_string()));
                    }
                }
                None => seen.push((
                    key,
                    Seen {
                        range: s..e,
                        exec: exec.then(|| (s, off, range.to_string())),
                        path,
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
                    let i = read_file(pid, &range, &f.path, &key, &mut refused).map(Arc::new);
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
        self.procs.insert(pid, Process { unwinder, modules });
    }
}

impl Process {
    fn covers(&self, pc: u64) -> bool {
        self.modules.iter().any(|m| m.range.contains(&pc))
    }
}

fn unknown() -> Frame {
    Frame {
        function: "[unknown]".into(),
        module: String::new(),
    }
}

/// Reads a mapped file's unwind sections and segments: through /proc/PID/map_files/RANGE (the
/// file as mapped), else its path. A section over `MAX_SECTION_BYTES`, or past the file's end,
/// is not read (`refused` set): the file then has no unwind sections at all.
fn read_file(
    pid: i32,
    range: &str,
    path: &str,
    key: &(String, u64),
    refused: &mut bool,
) -> Option<FileInfo> {
    use object::{Object, ObjectSection, ObjectSegment};
    let mapped = PathBuf::from(format!("/proc/{pid}/map_files/{range}"));
    let (file, opened) = match std::fs::File::open(&mapped) {
        Ok(f) => (f, mapped),
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
