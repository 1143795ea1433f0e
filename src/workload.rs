//! A workload with known memory, for the demo and the tests: `memmon-test workload STEP...`
//! (src/bin/memmon-test/) or the demo's child (`demo::WORKLOAD_ENTRY`) runs
//! steps such as `ramp:300MiB:1s` (allocate and touch progressively), `alloc:100MiB`,
//! `mlock:64MiB` (allocate, touch and mlock: VmLck), `partitions:10:60MiB` (that many separate
//! anonymous mappings), `memfd:NAME:128MiB`, `heap:64MiB` (small mallocs: the brk heap grows),
//! `threads:4` (threads that wait), `thp:32MiB` (asked for as transparent huge pages; says
//! `thp BYTES`, the AnonHugePages it got), `spike:200MiB:20ms` (allocate, touch, hold,
//! free), `hold:2s`, `map-file:PATH:8MiB` (map a file shared and touch it), `cold-read:PATH:32MiB` (write a file,
//! drop it from the page cache, read it back through a mapping: a major fault per page), `wait-file:PATH` (until it exists), `read:PATH` and `read-cold:PATH` (the file read once
//! through read(), its pages in the page cache, not the process; `read-cold` drops them first), `free` (the latest
//! allocation), `children:3:50MiB:2s` (that many child processes, each holding that much),
//! `forks:1000:0s:1` (that many forked children that each live that long, reaped that many at a
//! time: a known count of short-lived processes), `reset-hwm` (its own VmHWM reset, a write of
//! `5` to /proc/self/clear_refs), `undumpable` (its /proc files become root's,
//! as a setuid program's are), `say:TEXT` (a line on stdout), `mark:LABEL` (a marker through `$MEMMON_SOCKET`, waiting for its row), `exit:CODE`. Memory is mapped anonymously and every page is written, so RSS rises by
//! exactly the size asked (in whole pages).

use crate::sys::raw::{self, Forked};
use crate::units::{parse_duration, parse_size, UnitError};
use rustix::mm::{MapFlags, ProtFlags};
use std::ffi::c_void;
use std::io;
use std::time::{Duration, Instant};

/// An anonymous private mapping; RSS rises by exactly the pages written (`touch`). Also the
/// memory the bench tests' daemon serves (`src/bin/memmon-test/testdaemon.rs`).
pub struct Block {
    ptr: *mut c_void,
    len: usize,
}

// SAFETY: a Block owns its mapping alone; moving it to another thread moves that ownership.
unsafe impl Send for Block {}

impl Block {
    /// Maps `len` bytes (nothing resident yet).
    pub fn map(len: usize) -> std::io::Result<Block> {
        Block::map_with(len, MapFlags::PRIVATE)
    }

    /// Maps `len` bytes shared (`MAP_SHARED`: resident pages count as RssShmem) and writes
    /// every page.
    pub fn shared_touched(len: usize) -> std::io::Result<Block> {
        let mut b = Block::map_with(len, MapFlags::SHARED)?;
        b.touch(0, b.len);
        Ok(b)
    }

    /// Where the mapping starts.
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// Locks the whole block in memory (`mlock`: VmLck).
    pub fn lock(&self) -> std::io::Result<()> {
        // SAFETY: locking exactly the pages we mapped, which stay mapped while `self` lives
        // (munmap unlocks them).
        unsafe { rustix::mm::mlock(self.ptr, self.len) }?;
        Ok(())
    }

    fn map_with(len: usize, kind: MapFlags) -> std::io::Result<Block> {
        let len = len.max(1);
        // SAFETY: a new anonymous mapping with no address hint overlaps no memory in use.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                kind,
            )
        }?;
        Ok(Block { ptr, len })
    }

    /// Maps `len` bytes and writes every page, with an unmapped page on each side: the kernel
    /// merges adjacent anonymous mappings of the same access, and the gaps keep this one a
    /// mapping of its own (as buffers placed apart in a long-running daemon's address space
    /// are), so an anatomy sees it as one mapping of `len` bytes.
    pub fn apart_touched(len: usize) -> std::io::Result<Block> {
        let page = page_size();
        let len = len.max(1).div_ceil(page) * page;
        let outer = Block::map(len + 2 * page)?;
        let base = outer.ptr as *mut u8;
        // `outer` is forgotten: only the middle is unmapped again, by the Block made of it.
        std::mem::forget(outer);
        // SAFETY: one page and `len + page` bytes into a mapping of `len + 2 * page` bytes.
        let (ptr, after) = unsafe { (base.add(page), base.add(page + len)) };
        // SAFETY: unmapping the first and the last page of the mapping, which nothing uses.
        unsafe { rustix::mm::munmap(base as *mut c_void, page) }?;
        // SAFETY: as above.
        unsafe { rustix::mm::munmap(after as *mut c_void, page) }?;
        let mut b = Block {
            ptr: ptr as *mut c_void,
            len,
        };
        b.touch(0, len);
        Ok(b)
    }

    /// A memfd named `name` of `len` bytes, mapped shared and every page written: it shows as
    /// `/memfd:NAME (deleted)` in /proc/PID/maps, its pages as RssShmem.
    pub fn memfd_touched(name: &str, len: usize) -> std::io::Result<Block> {
        let fd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        Block::fd_touched(&std::fs::File::from(fd), len)
    }

    /// Maps the first `len` bytes of the file at `path` shared (read and write) and writes every
    /// page: as a driver's device file is mapped (the tests' stand-in for `/dev/nvidia0`).
    pub fn file_touched(path: &std::path::Path, len: usize) -> std::io::Result<Block> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        Block::fd_touched(&f, len)
    }

    /// Maps the first `len` bytes of the open file `f` shared and writes every page.
    fn fd_touched(f: &std::fs::File, len: usize) -> std::io::Result<Block> {
        let len = len.max(1);
        // SAFETY: a new shared mapping of a file we opened for reading and writing, with no
        // address hint, overlaps no memory in use; only this process writes through it.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                f,
                0,
            )
        }?;
        let mut b = Block { ptr, len };
        b.touch(0, len);
        Ok(b)
    }

    /// Writes a file of `len` bytes at `path`, syncs it, drops its pages from the page cache
    /// (`posix_fadvise` DONTNEED: only this file's, unlike `drop_caches`), maps it read-only
    /// with no read-ahead (`MADV_RANDOM`) and reads one byte of every page: each page is read
    /// back from disk by a major fault of its own, `len / page` of them (a page the kernel
    /// could not drop reads as a minor fault).
    pub fn cold_read(path: &std::path::Path, len: usize) -> std::io::Result<Block> {
        use std::io::Write;
        let len = len.max(1);
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let chunk = vec![7u8; 1 << 20];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len());
            f.write_all(&chunk[..n])?;
            left -= n;
        }
        f.sync_all()?;
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)?;
        // SAFETY: a new private read-only mapping of a file we opened, with no address hint,
        // overlaps no memory in use.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ,
                MapFlags::PRIVATE,
                &f,
                0,
            )
        }?;
        let b = Block { ptr, len };
        // SAFETY: advice on exactly the mapping just made.
        unsafe { rustix::mm::madvise(ptr, len, rustix::mm::Advice::Random) }?;
        let page = page_size();
        let base = ptr as *const u8;
        let mut sum = 0u8;
        for off in (0..len).step_by(page) {
            // SAFETY: off < len, inside the mapping, which is readable.
            sum = sum.wrapping_add(unsafe { base.add(off).read_volatile() });
        }
        std::hint::black_box(sum);
        Ok(b)
    }

    /// Reads every page of the mapping again and again for `dur`: under a memory limit below
    /// its size, each pass reads back from disk the pages the last one pushed out (major faults,
    /// and reclaim and refaults the kernel counts as memory stall).
    pub fn reread_for(&self, dur: Duration) {
        let page = page_size();
        let base = self.ptr as *const u8;
        let until = std::time::Instant::now() + dur;
        let mut sum = 0u8;
        while std::time::Instant::now() < until {
            for off in (0..self.len).step_by(page) {
                // SAFETY: off < len, inside the mapping, which is readable.
                sum = sum.wrapping_add(unsafe { base.add(off).read_volatile() });
            }
        }
        std::hint::black_box(sum);
    }

    /// Maps `len` bytes and writes every page: `len` bytes resident (in whole pages).
    pub fn touched(len: usize) -> std::io::Result<Block> {
        let mut b = Block::map(len)?;
        b.touch(0, len);
        Ok(b)
    }

    /// Maps `len` bytes (rounded up to 2 MiB) on a 2 MiB boundary, asks for transparent huge
    /// pages (`MADV_HUGEPAGE`: THP's `madvise` mode gives them only where asked) and writes
    /// every page. How many the kernel gave depends on the free memory it could compact:
    /// `anon_huge_bytes` tells.
    pub fn huge_touched(len: usize) -> std::io::Result<Block> {
        const HUGE: usize = 2 << 20;
        let len = len.max(1).div_ceil(HUGE) * HUGE;
        let mut b = Block::map(len + HUGE)?;
        let start = (b.ptr as usize).next_multiple_of(HUGE) - b.ptr as usize;
        // SAFETY: `start + len` is within the `len + HUGE` bytes mapped.
        let at = unsafe { (b.ptr as *mut u8).add(start) } as *mut c_void;
        // SAFETY: advice on pages of our own mapping; it changes no memory's contents.
        unsafe { rustix::mm::madvise(at, len, rustix::mm::Advice::LinuxHugepage) }?;
        b.touch(start, start + len);
        Ok(b)
    }

    /// Writes one byte in every page of `[from, to)`.
    pub fn touch(&mut self, from: usize, to: usize) {
        let page = page_size();
        let base = self.ptr as *mut u8;
        let mut off = from - from % page;
        while off < to.min(self.len) {
            // SAFETY: off < len, inside our mapping.
            unsafe { base.add(off).write_volatile(1) };
            off += page;
        }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what we mapped; nothing points into it after `self`.
        // Unmapping a range we mapped fails only with EINVAL, for a range we did not map.
        unsafe { rustix::mm::munmap(self.ptr, self.len) }.expect("munmap of our own mapping");
    }
}

fn page_size() -> usize {
    crate::probe::ProcFs::page_size() as usize
}

/// Why a workload's step could not be run; each names its step.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// `what`: `a size`, `a duration`, `a count`, `a name`, `a path`, `a code`...
    #[error("step '{step}' needs {what}")]
    Needs { step: String, what: &'static str },
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error("unknown workload step '{0}' (alloc, mlock, partitions, memfd, heap, vecs, threads, thp, ramp, spike, hold, map-file, cold-read, thrash, wait-file, say, mark, free, free-all, children, forks, reset-hwm, undumpable, wait-children, exit)")]
    Unknown(String),
    #[error("cannot map memory: {0}")]
    Map(io::Error),
    #[error("step '{step}': mlock failed: {error} (RLIMIT_MEMLOCK too low? `ulimit -l`)")]
    Mlock { step: String, error: io::Error },
    /// A step's own system call failed (a memfd, a file, `undumpable`).
    #[error("step '{step}': {error}")]
    Step { step: String, error: io::Error },
    #[error("step '{step}': cannot start a thread: {error}")]
    Thread { step: String, error: io::Error },
    #[error("step '{step}': /proc/self/smaps_rollup: {error}")]
    Rollup { step: String, error: io::Error },
    #[error("step '{0}': no AnonHugePages in smaps_rollup")]
    NoHugePages(String),
    #[error("{0}")]
    OwnPath(io::Error),
    #[error("cannot start a child: {0}")]
    Child(io::Error),
    #[error("cannot wait for a child: {0}")]
    Wait(io::Error),
    #[error("cannot fork: {0}")]
    Fork(io::Error),
    #[error("step 'mark' needs MEMMON_SOCKET (set by memmon record -- COMMAND)")]
    NoSocket,
    #[error("step 'mark:{label}': {error}")]
    Mark { label: String, error: io::Error },
    #[error("step 'mark:{label}': the recorder answered {answer}")]
    MarkRefused { label: String, answer: String },
}

impl crate::error::Classified for WorkloadError {
    /// A step written wrong is bad input; one that could not be carried out, a failure.
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            WorkloadError::Needs { .. } | WorkloadError::Unit(_) | WorkloadError::Unknown(_) => {
                Class::Usage
            }
            _ => Class::Failure,
        }
    }
}

/// `step` needs `what` (`a size`...).
fn needs(step: &str, what: &'static str) -> WorkloadError {
    WorkloadError::Needs {
        step: step.to_string(),
        what,
    }
}

/// Runs the steps in order; returns the exit code asked for (0 by default).
pub fn run(steps: &[String]) -> Result<i32, WorkloadError> {
    let mut blocks: Vec<Block> = Vec::new();
    let mut heap: Vec<Vec<Box<[u8]>>> = Vec::new();
    let mut vecs: Vec<Vec<u8>> = Vec::new();
    let mut kids: Vec<std::process::Child> = Vec::new();
    for step in steps {
        let parts: Vec<&str> = step.split(':').collect();
        let size = |i: usize| step_size(step, &parts, i);
        let dur = |i: usize| step_duration(step, &parts, i);
        let step_failed = |error| WorkloadError::Step {
            step: step.to_string(),
            error,
        };
        match parts[0] {
            "alloc" => {
                blocks.push(Block::touched(size(1)?).map_err(map_error)?);
            }
            // Allocate, touch and mlock: the block shows in VmLck (`locked_bytes`), page-locked
            // as CUDA's pinned host buffers are (docs/FORMAT.md, "Pinned host memory").
            "mlock" => {
                let b = Block::touched(size(1)?).map_err(map_error)?;
                if let Err(error) = b.lock() {
                    return Err(WorkloadError::Mlock {
                        step: step.to_string(),
                        error,
                    });
                }
                blocks.push(b);
            }
            // COUNT anonymous mappings of SIZE, each written and kept apart from its
            // neighbours (`Block::apart_touched`): `partitions:10:60MiB`.
            "partitions" => {
                let n: usize = parts
                    .get(1)
                    .and_then(|c| c.parse().ok())
                    .ok_or_else(|| needs(step, "a count"))?;
                let len = size(2)?;
                for _ in 0..n {
                    blocks.push(Block::apart_touched(len).map_err(map_error)?);
                }
            }
            // A memfd of SIZE named NAME, mapped and written: `memfd:params:128MiB`.
            "memfd" => {
                let name = parts
                    .get(1)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| needs(step, "a name"))?;
                blocks.push(Block::memfd_touched(name, size(2)?).map_err(step_failed)?);
            }
            // SIZE of the brk heap in small allocations (see `grow_heap`): `heap:64MiB`.
            "heap" => heap.push(grow_heap(size(1)?)),
            // COUNT vectors of SIZE bytes from Rust's allocator, each written (`vec_partitions`):
            // `vecs:3:8MiB`.
            "vecs" => {
                let n: usize = parts
                    .get(1)
                    .and_then(|c| c.parse().ok())
                    .ok_or_else(|| needs(step, "a count"))?;
                vecs.extend(vec_partitions(n, size(2)?));
            }
            // COUNT threads that wait until the workload ends: `threads:4`.
            "threads" => {
                let n: usize = parts
                    .get(1)
                    .and_then(|c| c.parse().ok())
                    .ok_or_else(|| needs(step, "a count"))?;
                for _ in 0..n {
                    std::thread::Builder::new()
                        .spawn(|| loop {
                            std::thread::park();
                        })
                        .map_err(|error| WorkloadError::Thread {
                            step: step.to_string(),
                            error,
                        })?;
                }
            }
            "ramp" => {
                let (n, d) = (size(1)?, dur(2)?);
                let mut b = Block::map(n).map_err(map_error)?;
                let steps = 50usize;
                let start = Instant::now();
                for i in 0..steps {
                    b.touch(n * i / steps, n * (i + 1) / steps);
                    sleep_until(start + d * (i as u32 + 1) / steps as u32);
                }
                blocks.push(b);
            }
            "spike" => {
                let (n, d) = (size(1)?, dur(2)?);
                let b = Block::touched(n).map_err(map_error)?;
                std::thread::sleep(d);
                drop(b);
            }
            "hold" => std::thread::sleep(dur(1)?),
            // A file mapped (`map-file`), read back from disk (`cold-read`), or read back over
            // and over (`thrash`): see `file_step`.
            "map-file" | "cold-read" | "thrash" => blocks.push(file_step(step, &parts)?),
            // Reads a whole file once through read() into a 1 MiB buffer, keeping nothing: its
            // pages go to the page cache, not to the process (`read:/var/tmp/params`); with
            // `read-cold` its cached pages are dropped first (a first read after a reboot).
            "read" | "read-cold" => {
                let path = &step[parts[0].len() + 1..];
                read_file_once(std::path::Path::new(path), parts[0] == "read-cold").map_err(
                    |error| WorkloadError::Step {
                        step: step.to_string(),
                        error,
                    },
                )?;
            }
            // Waits until a file exists (a test's go-ahead): `wait-file:/tmp/go`.
            "wait-file" => {
                let path = std::path::Path::new(&step[10..]);
                while !path.exists() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            // A marker through the recorder's socket ($MEMMON_SOCKET), waiting for its row:
            // `mark:synthesis`.
            "mark" => mark_and_wait(&step[5..])?,
            // A line on stdout (flushed), e.g. for --mark-stdout: `say:phase spike`.
            "say" => println!("{}", &step[4..]),
            // SIZE asked for as transparent huge pages (`Block::huge_touched`); says the
            // process's AnonHugePages then (smaps_rollup), as `thp BYTES`: `thp:32MiB`.
            "thp" => {
                blocks.push(Block::huge_touched(size(1)?).map_err(map_error)?);
                let rollup = std::fs::read("/proc/self/smaps_rollup").map_err(|error| {
                    WorkloadError::Rollup {
                        step: step.to_string(),
                        error,
                    }
                })?;
                let huge = crate::probe::proc::status_bytes(&rollup, b"AnonHugePages:")
                    .ok_or_else(|| WorkloadError::NoHugePages(step.to_string()))?;
                println!("thp {huge}");
            }
            "free" => {
                blocks.pop();
            }
            "free-all" => {
                blocks.clear();
                heap.clear();
                vecs.clear();
            }
            "children" => kids.extend(children_step(step, &parts)?),
            // `forks:N:LIFE:BATCH`: see `forks_step`.
            "forks" => forks_step(step, &parts)?,
            // Its own high-water mark reset, as a harness that measures each proof does.
            "reset-hwm" => {
                std::fs::write("/proc/self/clear_refs", "5").map_err(step_failed)?;
            }
            "undumpable" => {
                use rustix::process::{set_dumpable_behavior, DumpableBehavior};
                if let Err(e) = set_dumpable_behavior(DumpableBehavior::NotDumpable) {
                    return Err(step_failed(e.into()));
                }
            }
            "wait-children" => {
                for mut k in kids.drain(..) {
                    let _ = k.wait();
                }
            }
            "exit" => {
                for mut k in kids.drain(..) {
                    let _ = k.wait();
                }
                return parts
                    .get(1)
                    .and_then(|c| c.parse().ok())
                    .ok_or_else(|| needs(step, "a code"));
            }
            other => return Err(WorkloadError::Unknown(other.to_string())),
        }
    }
    for mut k in kids {
        let _ = k.wait();
    }
    Ok(0)
}

/// The size in argument `i` of a step.
fn step_size(step: &str, parts: &[&str], i: usize) -> Result<usize, WorkloadError> {
    let text = parts.get(i).ok_or_else(|| needs(step, "a size"))?;
    Ok(parse_size(text)? as usize)
}

/// The duration in argument `i` of a step.
fn step_duration(step: &str, parts: &[&str], i: usize) -> Result<Duration, WorkloadError> {
    let text = parts.get(i).ok_or_else(|| needs(step, "a duration"))?;
    Ok(parse_duration(text)?)
}

/// Reads the file at `path` once, a MiB at a time into one buffer; with `cold`, its pages are
/// written back and dropped from the page cache first (`POSIX_FADV_DONTNEED`), so every one is
/// read from disk.
fn read_file_once(path: &std::path::Path, cold: bool) -> std::io::Result<()> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    if cold {
        // Dirty pages (a file just written) are not dropped: written back first.
        rustix::fs::fdatasync(&f)?;
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)?;
    }
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf)? > 0 {}
    Ok(())
}

/// The file steps: `map-file:/dev/nvidia0:8MiB` maps a file shared and writes every page;
/// `cold-read:/var/tmp/f:32MiB` writes a file, drops it from the page cache and reads it back
/// through a mapping, a major fault per page (`Block::cold_read`); `thrash:/var/tmp/f:64MiB:3s`
/// is a cold read, then reads the mapping over and over for a while (thrashing under a memory
/// limit below its size).
fn file_step(step: &str, parts: &[&str]) -> Result<Block, WorkloadError> {
    let path = std::path::Path::new(parts.get(1).ok_or_else(|| needs(step, "a path"))?);
    let size = step_size(step, parts, 2)?;
    let failed = |error| WorkloadError::Step {
        step: step.to_string(),
        error,
    };
    match parts[0] {
        "map-file" => Block::file_touched(path, size).map_err(failed),
        "cold-read" => Block::cold_read(path, size).map_err(failed),
        _ => {
            let b = Block::cold_read(path, size).map_err(failed)?;
            b.reread_for(step_duration(step, parts, 3)?);
            Ok(b)
        }
    }
}

/// `children:COUNT:SIZE:LIFE`: COUNT children, each this same program on the same entry
/// (`workload`, or the demo's) that allocates SIZE and holds it for LIFE.
fn children_step(step: &str, parts: &[&str]) -> Result<Vec<std::process::Child>, WorkloadError> {
    let count: usize = parts
        .get(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| needs(step, "a count"))?;
    let exe = std::env::current_exe().map_err(WorkloadError::OwnPath)?;
    let entry = std::env::args_os()
        .nth(1)
        .unwrap_or_else(|| "workload".into());
    let alloc = format!("alloc:{}", parts.get(2).unwrap_or(&"0"));
    let hold = format!("hold:{}", parts.get(3).unwrap_or(&"1s"));
    (0..count)
        .map(|_| {
            std::process::Command::new(&exe)
                .arg(&entry)
                .args([&alloc, &hold])
                .spawn()
                .map_err(WorkloadError::Child)
        })
        .collect()
}

/// `forks:N:LIFE:BATCH`: forks N children (no exec) that each sleep LIFE and exit, BATCH at a
/// time; each batch is reaped once its children have waited as zombies for LIFE more (at once
/// when LIFE is 0). Exactly N processes come and go.
fn forks_step(step: &str, parts: &[&str]) -> Result<(), WorkloadError> {
    let count: usize = parts
        .get(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| needs(step, "a count"))?;
    let life = step_duration(step, parts, 2)?;
    let batch: usize = parts
        .get(3)
        .and_then(|c| c.parse().ok())
        .filter(|&b| b > 0)
        .ok_or_else(|| needs(step, "a batch size over 0"))?;
    let mut forked = 0;
    while forked < count {
        let n = batch.min(count - forked);
        let mut pids = Vec::with_capacity(n);
        for _ in 0..n {
            pids.push(fork_child(life)?);
        }
        forked += n;
        std::thread::sleep(life * 2);
        for pid in pids {
            crate::sys::wait_child(pid).map_err(WorkloadError::Wait)?;
        }
    }
    Ok(())
}

/// `n` vectors of `len` bytes, each from `alloc_vec_partition`: the tests' known allocation site
/// in Rust (glibc's malloc maps each of 128 KiB and more apart: a mapping the ledger names by
/// this function and its caller).
#[inline(never)]
fn vec_partitions(n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| alloc_vec_partition(len)).collect()
}

/// One vector of `len` bytes, every byte written (not zeroes: `calloc` would leave the pages
/// unwritten).
#[inline(never)]
fn alloc_vec_partition(len: usize) -> Vec<u8> {
    std::hint::black_box(vec![1u8; len])
}

/// The size of each of `grow_heap`'s allocations: with malloc's 8-byte header, a chunk of
/// exactly 1 KiB (glibc on 64 bits).
pub const HEAP_PIECE_BYTES: usize = 1024 - 8;

/// Allocates `len` bytes of heap in `len / 1 KiB` allocations of `HEAP_PIECE_BYTES`, each
/// written: small requests that glibc's malloc serves on the main thread from the brk heap
/// (`[heap]`), which grows by about `len` (chunks of exactly 1 KiB; less by what was free in it
/// before, more by malloc's top pad, 128 KiB). The list that holds them is allocated first, at
/// its full size (malloc maps a list this large apart from the heap).
fn grow_heap(len: usize) -> Vec<Box<[u8]>> {
    let n = len / 1024;
    let mut pieces = Vec::with_capacity(n);
    for _ in 0..n {
        pieces.push(vec![1u8; HEAP_PIECE_BYTES].into_boxed_slice());
    }
    pieces
}

/// Forks a child that sleeps `life` and exits; returns its PID.
fn fork_child(life: Duration) -> Result<i32, WorkloadError> {
    // SAFETY: the child only sleeps (`thread::sleep` is nanosleep, which neither allocates nor
    // locks) and ends with _exit: async-signal-safe calls only.
    match unsafe { raw::fork() } {
        Err(e) => Err(WorkloadError::Fork(e)),
        Ok(Forked::Child) => {
            if life > Duration::ZERO {
                std::thread::sleep(life);
            }
            raw::exit_now(0)
        }
        Ok(Forked::Parent { child }) => Ok(child),
    }
}

/// Sends the marker `label` to the recorder whose socket is in `MEMMON_SOCKET` and waits for its
/// answer (docs/FORMAT.md, "Markers"): the marker's row is taken before the next step.
fn mark_and_wait(label: &str) -> Result<(), WorkloadError> {
    use std::io::{BufRead, Write};
    let path = std::env::var_os("MEMMON_SOCKET").ok_or(WorkloadError::NoSocket)?;
    let fail = |error| WorkloadError::Mark {
        label: label.to_string(),
        error,
    };
    let mut sock = std::os::unix::net::UnixStream::connect(&path).map_err(fail)?;
    let label = label.replace('\\', "\\\\").replace('"', "\\\"");
    sock.write_all(format!("{{\"mark\":\"{label}\"}}\n").as_bytes())
        .map_err(fail)?;
    let mut answer = String::new();
    std::io::BufReader::new(&sock)
        .read_line(&mut answer)
        .map_err(fail)?;
    if answer.contains("\"ok\":true") {
        Ok(())
    } else {
        Err(WorkloadError::MarkRefused {
            label,
            answer: answer.trim().to_string(),
        })
    }
}

fn map_error(e: io::Error) -> WorkloadError {
    WorkloadError::Map(e)
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// The demo's workload, shaped like a proving pipeline: parameters loaded and held, a
/// synthesis ramp, a short proving spike, release, idle. Peak under 1 GiB, about 8 s.
pub const DEMO_STEPS: &[&str] = &[
    "ramp:300MiB:400ms",  // load parameters
    "hold:1500ms",        // idle with parameters resident
    "ramp:450MiB:2500ms", // synthesis
    "spike:200MiB:300ms", // proving
    "free",               // release the synthesis buffers
    "hold:2500ms",        // idle
];
