//! perf_event_open(2) as memmon uses it: tracepoint events (`Attr`), opened and steered through
//! `raw.rs`, their records read from the ring buffer the kernel writes into a shared mapping
//! (`Ring`: the `perf_event_mmap_page` header, then a power-of-two data area).
//!
//! The layouts are the kernel's ABI (include/uapi/linux/perf_event.h); the unit tests check the
//! sizes and offsets against it.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// `struct perf_event_attr` (`PERF_ATTR_SIZE_VER8`, 136 bytes). The bit fields of the kernel's
/// struct are `flags` (the `flag` constants).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Attr {
    pub type_: u32,
    pub size: u32,
    pub config: u64,
    /// `sample_period` (the union with `sample_freq`, without `flag::FREQ`).
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    /// `wakeup_events` (the union with `wakeup_watermark`, without `flag::WATERMARK`).
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved_2: u16,
    pub aux_sample_size: u32,
    pub reserved_3: u32,
    pub sig_data: u64,
    pub config3: u64,
}

impl Attr {
    /// A tracepoint (`PERF_TYPE_TRACEPOINT`) whose ID is `id` (tracefs `events/.../id`),
    /// sampled at each hit, disabled until enabled, its times on CLOCK_MONOTONIC (Rust's
    /// `Instant`), and `sample` (the `sample` bits) in each sample.
    pub fn tracepoint(id: u64, sample: u64) -> Attr {
        Attr {
            type_: TYPE_TRACEPOINT,
            size: std::mem::size_of::<Attr>() as u32,
            config: id,
            sample_period: 1,
            sample_type: sample,
            flags: flag::DISABLED | flag::USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            ..Attr::default()
        }
    }
}

/// `PERF_TYPE_TRACEPOINT`.
pub const TYPE_TRACEPOINT: u32 = 2;
/// `PERF_TYPE_SOFTWARE`, and its event that counts nothing (`PERF_COUNT_SW_DUMMY`).
pub const TYPE_SOFTWARE: u32 = 1;
pub const SW_DUMMY: u64 = 9;
/// `PERF_COUNT_SW_PAGE_FAULTS`: every page fault, minor and major.
pub const SW_PAGE_FAULTS: u64 = 2;

/// `perf_event_sample_format`: what a sample holds, in this order when present.
pub mod sample {
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const RAW: u64 = 1 << 10;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    /// The event's ID first in every sample (and last in every other record's `sample_id`).
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// The bit fields of `perf_event_attr` memmon sets (their place in the kernel's struct).
pub mod flag {
    pub const DISABLED: u64 = 1 << 0;
    /// `inherit`: a per-task event also counts the threads and processes the task starts
    /// afterwards; their samples go to the event's own ring buffer.
    pub const INHERIT: u64 = 1 << 1;
    /// `comm`: a `COMM` record when a task changes its name (at exec, with `COMM_EXEC`).
    pub const COMM: u64 = 1 << 9;
    /// `task`: `FORK` and `EXIT` records.
    pub const TASK: u64 = 1 << 13;
    /// `watermark`: readers are woken when this many bytes are waiting (`wakeup_watermark`,
    /// the union with `wakeup_events`).
    pub const WATERMARK: u64 = 1 << 14;
    /// `sample_id_all`: other records carry the sample's TID, time and ID too.
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    /// `comm_exec`: a `COMM` record made by an exec says so (`misc::COMM_EXEC`).
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
}

/// Record types (`perf_event_type`).
pub mod record {
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const FORK: u32 = 7;
    pub const SAMPLE: u32 = 9;
}

/// `misc` bits of a record header.
pub mod misc {
    /// A `COMM` record made by an exec.
    pub const COMM_EXEC: u16 = 1 << 13;
}

/// The registers memmon asks with each stack (`sample_regs_user`): those an unwinder needs, in
/// the kernel's numbering (arch/*/include/uapi/asm/perf_regs.h); a sample holds them in the
/// order of their bits.
#[cfg(target_arch = "x86_64")]
pub mod regs {
    /// BP, SP, IP.
    pub const MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8);
    pub const COUNT: usize = 3;
}
#[cfg(target_arch = "aarch64")]
pub mod regs {
    /// X29 (frame pointer), LR (X30), SP, PC.
    pub const MASK: u64 = (1 << 29) | (1 << 30) | (1 << 31) | (1 << 32);
    pub const COUNT: usize = 4;
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub mod regs {
    pub const MASK: u64 = 0;
    pub const COUNT: usize = 0;
}

/// Where `data_head`, `data_tail` sit in `perf_event_mmap_page` (after its 1 KiB of header).
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// An event's ring buffer, mapped: the kernel writes records at `data_head`, memmon reads them
/// up to it and gives the room back by moving `data_tail`.
pub struct Ring {
    base: NonNull<u8>,
    len: usize,
    page: usize,
    data_size: u64,
    /// The event the ring belongs to (others on its CPU write to it through SET_OUTPUT).
    event: OwnedFd,
}

// SAFETY: the mapping belongs to the `Ring` alone (no other reference to it is handed out), and
// the kernel's side of it is synchronized through `data_head` and `data_tail`.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps `event`'s ring buffer: a header page and `data_pages` pages of records (a power of
    /// two).
    pub fn map(event: OwnedFd, data_pages: usize) -> io::Result<Ring> {
        let page = rustix::param::page_size();
        let len = (data_pages + 1) * page;
        // SAFETY: a new shared mapping of the event's buffer, at an address the kernel picks;
        // no memory of ours is touched, and the mapping lives until `drop` unmaps it.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                &event,
                0,
            )
        }?;
        Ok(Ring {
            base: NonNull::new(base.cast()).ok_or(io::ErrorKind::Other)?,
            len,
            page,
            data_size: (data_pages * page) as u64,
            event,
        })
    }

    /// The event's descriptor: readable (for `poll`) when the kernel has woken readers.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.event.as_fd()
    }

    fn head_tail(&self) -> (&AtomicU64, &AtomicU64) {
        // SAFETY: both are 8-byte aligned u64 fields of the mapped header page (page-aligned),
        // which lives as long as `self`; the kernel updates them atomically.
        unsafe {
            (
                &*self.base.as_ptr().add(DATA_HEAD).cast::<AtomicU64>(),
                &*self.base.as_ptr().add(DATA_TAIL).cast::<AtomicU64>(),
            )
        }
    }

    /// Appends every record written since the last call to `out` (whole, in order: a record
    /// that wraps past the end of the area comes out in one piece) and gives their room back.
    /// The number of bytes appended.
    pub fn read_into(&mut self, out: &mut Vec<u8>) -> usize {
        let (head_at, tail_at) = self.head_tail();
        // Acquire: the records up to `head` are written before it is.
        let head = head_at.load(Ordering::Acquire);
        let tail = tail_at.load(Ordering::Relaxed);
        let n = head.wrapping_sub(tail).min(self.data_size) as usize;
        if n == 0 {
            return 0;
        }
        let start = (tail % self.data_size) as usize;
        let first = n.min(self.data_size as usize - start);
        out.reserve(n);
        // SAFETY: the data area is `data_size` bytes after the header page; `start + first`
        // and `n - first` stay within it. The kernel does not write the bytes from `tail` to
        // `head` until `tail` moves past them.
        unsafe {
            let data = self.base.as_ptr().add(self.page);
            let from = std::slice::from_raw_parts(data.add(start), first);
            out.extend_from_slice(from);
            let rest = std::slice::from_raw_parts(data, n - first);
            out.extend_from_slice(rest);
        }
        // Release: the reads above are done before the kernel may reuse the room.
        tail_at.store(tail.wrapping_add(n as u64), Ordering::Release);
        n
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of `len` bytes, not referenced after this.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// One record of a ring's bytes: its type, its header's `misc` bits and its body.
pub struct Record<'a> {
    pub kind: u32,
    pub misc: u16,
    pub body: &'a [u8],
}

/// The records of bytes read from a ring (`Ring::read_into`), in order; a record cut short (it
/// cannot be, but a bad size must not panic) ends the walk.
pub fn records(bytes: &[u8]) -> impl Iterator<Item = Record<'_>> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let header = bytes.get(at..at + 8)?;
        let kind = u32::from_ne_bytes(header[0..4].try_into().ok()?);
        let misc = u16::from_ne_bytes(header[4..6].try_into().ok()?);
        let size = u16::from_ne_bytes(header[6..8].try_into().ok()?) as usize;
        if size < 8 {
            return None;
        }
        let body = bytes.get(at + 8..at + size)?;
        at += size;
        Some(Record { kind, misc, body })
    })
}

/// Reads native-endian integers off a record's body, front to back; `None` past its end.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, at: 0 }
    }

    pub fn u64(&mut self) -> Option<u64> {
        let v = self.bytes.get(self.at..self.at + 8)?;
        self.at += 8;
        Some(u64::from_ne_bytes(v.try_into().ok()?))
    }

    pub fn u32(&mut self) -> Option<u32> {
        let v = self.bytes.get(self.at..self.at + 4)?;
        self.at += 4;
        Some(u32::from_ne_bytes(v.try_into().ok()?))
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let v = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attr_is_the_kernels_size_and_layout() {
        assert_eq!(std::mem::size_of::<Attr>(), 136, "PERF_ATTR_SIZE_VER8");
        let a = Attr::default();
        let base = std::ptr::addr_of!(a) as usize;
        let at = |p: *const u8| p as usize - base;
        assert_eq!(at(std::ptr::addr_of!(a.flags).cast()), 40);
        assert_eq!(at(std::ptr::addr_of!(a.wakeup_events).cast()), 48);
        assert_eq!(at(std::ptr::addr_of!(a.sample_regs_user).cast()), 80);
        assert_eq!(at(std::ptr::addr_of!(a.sample_stack_user).cast()), 88);
        assert_eq!(at(std::ptr::addr_of!(a.clockid).cast()), 92);
        assert_eq!(at(std::ptr::addr_of!(a.sample_max_stack).cast()), 108);
        assert_eq!(at(std::ptr::addr_of!(a.config3).cast()), 128);
    }

    #[test]
    fn records_are_walked_by_their_sizes_and_a_bad_size_ends_the_walk() {
        let mut b = Vec::new();
        for (kind, body) in [(9u32, vec![1u8; 8]), (2, vec![2; 16])] {
            b.extend_from_slice(&kind.to_ne_bytes());
            b.extend_from_slice(&0u16.to_ne_bytes());
            b.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
            b.extend_from_slice(&body);
        }
        let got: Vec<(u32, usize)> = records(&b).map(|r| (r.kind, r.body.len())).collect();
        assert_eq!(got, [(9, 8), (2, 16)]);
        // A size of 4: no progress is possible; the walk ends instead of looping.
        let mut bad = b.clone();
        bad[6..8].copy_from_slice(&4u16.to_ne_bytes());
        assert_eq!(records(&bad).count(), 0);
        // Cut short: the whole records before it only.
        assert_eq!(records(&b[..20]).count(), 1);
        let two: Vec<u8> = [1u32, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut c = Cursor::new(&two);
        assert_eq!((c.u32(), c.u32(), c.u32()), (Some(1), Some(2), None));
    }
}
