//! A process's mappings: /proc/PID/maps (each mapping's range, access, file: the kernel lists
//! its VMAs and walks no page table, so it is cheap at any size) and /proc/PID/smaps (the same
//! with each mapping's resident, proportional, swapped, transparent-huge-page and locked bytes:
//! the kernel walks every page table of the process under its memory-map lock, as for
//! smaps_rollup, so it is read only under the PSS guard's rules: `sampler/pss.rs`).
//!
//! Both are parsed from bytes with memchr, a line at a time, keeping only the fields the anatomy
//! (analysis::anatomy) and the unwinder (`unwind.rs`: which files a process maps, where) need; a
//! line that is not what the kernel writes is an error naming the file and the line.

use crate::model::anatomy::{Mapping, Perms, ProcessMaps, Usage};
use crate::probe::proc::{ProcError, PssSource};

/// Reads a process's mappings: /proc/PID/smaps when `smaps` (its numbers on each mapping),
/// else /proc/PID/maps; with the path of its program. `buf` is reused between calls.
pub fn read(src: &PssSource, smaps: bool, buf: &mut Vec<u8>) -> Result<ProcessMaps, ProcError> {
    let rel = if smaps { "smaps" } else { "maps" };
    src.read_file(rel, buf)?;
    let parsed = if smaps {
        parse_smaps(buf)
    } else {
        parse_maps(buf)
    };
    let mappings = parsed.map_err(|e| {
        ProcError::Parse(
            src.dir_path().join(rel),
            format!("line {}: {}", e.line, e.why),
        )
    })?;
    Ok(ProcessMaps {
        pid: src.pid,
        comm: src.comm.clone(),
        exe: src.exe(),
        mappings,
        smaps,
    })
}

/// A line of maps or smaps that is not what the kernel writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// From 1.
    pub line: usize,
    pub why: String,
}

/// Parses /proc/PID/maps: one mapping a line.
pub fn parse_maps(text: &[u8]) -> Result<Vec<Mapping>, ParseError> {
    let mut out = Vec::with_capacity(text.len() / 80 + 1);
    for (n, line) in lines(text) {
        if line.is_empty() {
            continue;
        }
        out.push(parse_header(line).map_err(|why| ParseError {
            line: n,
            why: why.into(),
        })?);
    }
    Ok(out)
}

/// Parses /proc/PID/smaps: each mapping's line as in maps, then its `Key: value kB` lines.
pub fn parse_smaps(text: &[u8]) -> Result<Vec<Mapping>, ParseError> {
    let mut out: Vec<Mapping> = Vec::with_capacity(text.len() / 1000 + 1);
    for (n, line) in lines(text) {
        let err = |why: &str| ParseError {
            line: n,
            why: why.into(),
        };
        let Some(&first) = line.first() else {
            continue;
        };
        // A mapping's line begins with its start address in lower-case hex; a field's with a
        // capital letter.
        if first.is_ascii_digit() || (b'a'..=b'f').contains(&first) {
            let mut m = parse_header(line).map_err(err)?;
            m.usage = Some(Usage::default());
            out.push(m);
            continue;
        }
        let Some(colon) = memchr::memchr(b':', line) else {
            return Err(err("neither a mapping nor a 'Key: value' line"));
        };
        if &line[..colon] == b"VmFlags" {
            if let Some(m) = out.last_mut() {
                m.all_soft_dirty = line[colon + 1..].split(|&b| b == b' ').any(|f| f == b"sd");
            }
            continue;
        }
        let field: fn(&mut Usage) -> &mut u64 = match &line[..colon] {
            b"Rss" => |u| &mut u.rss_bytes,
            b"Pss" => |u| &mut u.pss_bytes,
            b"Swap" => |u| &mut u.swap_bytes,
            b"AnonHugePages" => |u| &mut u.anon_huge_bytes,
            b"Locked" => |u| &mut u.locked_bytes,
            b"Shared_Hugetlb" | b"Private_Hugetlb" => |u| &mut u.hugetlb_bytes,
            _ => continue,
        };
        let Some(usage) = out.last_mut().and_then(|m| m.usage.as_mut()) else {
            return Err(err("a field before any mapping"));
        };
        let kb = parse_kb(&line[colon + 1..]).ok_or_else(|| err("a size that is not 'N kB'"))?;
        *field(usage) += kb * 1024;
    }
    Ok(out)
}

/// The lines of `text` with their numbers (from 1), without their newline.
fn lines(text: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut start = 0;
    let mut n = 0;
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
        let line = &text[start..end];
        start = end + 1;
        n += 1;
        Some((n, line))
    })
}

/// `  1234 kB` to 1234.
fn parse_kb(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii_start();
    let end = v
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(v.len());
    if end == 0 || v[end..].trim_ascii() != b"kB" {
        return None;
    }
    parse_dec(&v[..end])
}

/// `start-end perms offset dev inode path`: `7f3f5941a000-7f3f5941b000 ---p 00000000 00:00 0`.
fn parse_header(line: &[u8]) -> Result<Mapping, &'static str> {
    let mut rest = line;
    let mut word = || -> Option<&[u8]> {
        let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        let w = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or(&[]);
        Some(w).filter(|w| !w.is_empty())
    };
    let range = word().ok_or("no address range")?;
    let perms = word().ok_or("no permissions")?;
    let offset = word().ok_or("no offset")?;
    let dev = word().ok_or("no device")?;
    let inode = word().ok_or("no inode")?;
    let dash = memchr::memchr(b'-', range).ok_or("an address range without '-'")?;
    let start = parse_hex(&range[..dash]).ok_or("a start address that is not hex")?;
    let end = parse_hex(&range[dash + 1..]).ok_or("an end address that is not hex")?;
    if end < start {
        return Err("an address range that ends before it starts");
    }
    let perms = match perms {
        [r, w, x, s] if matches!(s, b'p' | b's') => Perms {
            read: *r == b'r',
            write: *w == b'w',
            exec: *x == b'x',
            shared: *s == b's',
        },
        _ => return Err("permissions that are not like 'rw-p'"),
    };
    let offset = parse_hex(offset).ok_or("an offset that is not hex")?;
    let dev = memchr::memchr(b':', dev)
        .and_then(|colon| {
            let half = |h: &[u8]| parse_hex(h).and_then(|v| u32::try_from(v).ok());
            Some((half(&dev[..colon])?, half(&dev[colon + 1..])?))
        })
        .ok_or("a device that is not 'major:minor'")?;
    let inode = parse_dec(inode).ok_or("an inode that is not a number")?;
    // The path follows the spaces that pad it to a column; it may hold spaces itself.
    let path = rest.trim_ascii_start();
    Ok(Mapping {
        start,
        end,
        perms,
        offset,
        dev,
        inode,
        path: String::from_utf8_lossy(path).into_owned(),
        usage: None,
        all_soft_dirty: false,
    })
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &b in s {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        v = v << 4 | u64::from(d);
    }
    Some(v)
}

fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v = 0u64;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    const MIB: u64 = 1 << 20;

    const MAPS: &str = "\
56119ff9d000-56119ff9e000 r--p 00000000 fe:00 18504                      /usr/bin/daemon
5611b7cf3000-5611b7e82000 rw-p 00000000 00:00 0                          [heap]
7f3f4c000000-7f3f4c021000 rw-p 00000000 00:00 0 
7f3f4c021000-7f3f50000000 ---p 00000000 00:00 0 
7f3f5921a000-7f3f5931a000 rw-s 00000000 00:01 28079                      /memfd:params (deleted)
7f3f5a93e000-7f3f5a94e000 r--p 00000000 fe:00 326603                     /usr/lib/my dir/libm.so.6
7fffb67c4000-7fffb67e5000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn maps_gives_each_mapping_its_range_access_and_path() {
        let m = parse_maps(MAPS.as_bytes()).unwrap();
        assert_eq!(m.len(), 7);
        assert_eq!(m[0].path, "/usr/bin/daemon");
        assert_eq!(m[0].inode, 18504);
        assert_eq!(m[0].dev, (0xfe, 0));
        assert_eq!(m[1].path, "[heap]");
        assert_eq!(m[1].size(), 0x5611b7e82000 - 0x5611b7cf3000);
        assert!(m[2].anonymous() && m[2].perms.rw_private());
        assert!(m[3].perms.none() && !m[3].perms.shared);
        assert!(m[4].perms.shared && m[4].perms.write);
        assert_eq!(m[4].path, "/memfd:params (deleted)");
        assert_eq!(m[4].size(), MIB);
        assert_eq!(
            m[5].path, "/usr/lib/my dir/libm.so.6",
            "a path with a space"
        );
        assert!(m.iter().all(|m| m.usage.is_none()));
    }

    #[test]
    fn smaps_gives_each_mapping_its_resident_numbers() {
        let smaps = "\
7f3f5921a000-7f3f5931a000 rw-s 00000000 00:01 28079                      /memfd:params (deleted)
Size:               1024 kB
KernelPageSize:        4 kB
Rss:                 512 kB
Pss:                 256 kB
Pss_Dirty:           256 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                 12 kB
SwapPss:               6 kB
Locked:              100 kB
THPeligible:           0
VmFlags: rd wr sh mr mw me ms sd 
7f0000000000-7f0000400000 rw-p 00000000 00:00 0 
Size:               4096 kB
Rss:                4096 kB
Pss:                4096 kB
AnonHugePages:      2048 kB
Private_Hugetlb:       0 kB
Locked:                0 kB
VmFlags: rd wr mr mw me ac 
7e0000000000-7e0000400000 rw-s 00000000 00:10 77                         /anon_hugepage (deleted)
Rss:                   0 kB
Shared_Hugetlb:     2048 kB
Private_Hugetlb:    2048 kB
";
        let m = parse_smaps(smaps.as_bytes()).unwrap();
        assert_eq!(m.len(), 3);
        let u = m[0].usage.unwrap();
        assert_eq!(
            u,
            Usage {
                rss_bytes: 512 * 1024,
                pss_bytes: 256 * 1024,
                swap_bytes: 12 * 1024,
                anon_huge_bytes: 0,
                locked_bytes: 100 * 1024,
                hugetlb_bytes: 0,
            },
            "Pss_Dirty and SwapPss are not Pss and Swap"
        );
        assert_eq!(m[1].usage.unwrap().anon_huge_bytes, 2 * MIB);
        assert_eq!(m[2].usage.unwrap().hugetlb_bytes, 4 * MIB);
        assert_eq!(m[2].usage.unwrap().resident_bytes(), 4 * MIB);
        // `sd` among the flags: every page of the mapping reads soft-dirty.
        let flagged: Vec<bool> = m.iter().map(|m| m.all_soft_dirty).collect();
        assert_eq!(flagged, [true, false, false]);
    }

    #[test]
    fn a_line_that_is_not_the_kernels_is_an_error_naming_its_number() {
        let bad = "7f00-7f10 rw-p 0 00:00 0\n7f10-7f00 rw-p 0 00:00 0\n";
        assert_eq!(
            parse_maps(bad.as_bytes()).unwrap_err(),
            ParseError {
                line: 2,
                why: "an address range that ends before it starts".into()
            }
        );
        for (text, why) in [
            ("zz-7f10 rw-p 0 00:00 0", "a start address that is not hex"),
            (
                "7f00-7f10 rwp 0 00:00 0",
                "permissions that are not like 'rw-p'",
            ),
            ("7f00-7f10 rw-p 0 00:00", "no inode"),
            (
                "7f00-7f10 rw-p 0 0000 0",
                "a device that is not 'major:minor'",
            ),
        ] {
            assert_eq!(parse_maps(text.as_bytes()).unwrap_err().why, why, "{text}");
        }
        assert_eq!(
            parse_smaps(b"Rss: 4 kB\n").unwrap_err().why,
            "a field before any mapping"
        );
        assert_eq!(
            parse_smaps(b"7f00-7f10 rw-p 0 00:00 0\nRss: four kB\n")
                .unwrap_err()
                .line,
            2
        );
    }

    /// A fake /proc with one process whose maps and smaps are `maps` and `smaps`.
    fn fake_proc(maps: &str, smaps: &str) -> (tempfile::TempDir, PssSource) {
        let dir = tempfile::tempdir().unwrap();
        crate::probe::fake::FakeProc::new(42)
            .name("daemon")
            .start(1234)
            .rss_kb(1024)
            .mappings(maps, smaps)
            .exe("/usr/bin/daemon")
            .write(dir.path());
        let fs = crate::probe::ProcFs::new(dir.path());
        let src = fs.open(42).unwrap().pss_source().unwrap();
        (dir, src)
    }

    /// `n` anonymous 64 KiB mappings one page apart, as maps and as smaps (each half resident).
    fn many(n: u64) -> (String, String) {
        let (mut maps, mut smaps) = (String::new(), String::new());
        for i in 0..n {
            let start = 0x7f00_0000_0000 + i * 0x11000;
            let line = format!("{start:x}-{:x} rw-p 00000000 00:00 0 \n", start + 0x10000);
            maps.push_str(&line);
            smaps.push_str(&line);
            write!(
                smaps,
                "Size:                 64 kB\nRss:                  32 kB\nPss:                  32 kB\nSwap:                  0 kB\nLocked:                0 kB\nVmFlags: rd wr mr mw me ac \n"
            )
            .unwrap();
        }
        (maps, smaps)
    }

    #[test]
    fn ten_thousand_mappings_are_read_from_a_fake_proc_with_and_without_smaps() {
        let (maps, smaps) = many(10_000);
        let (_dir, src) = fake_proc(&maps, &smaps);
        let mut buf = Vec::new();
        let p = read(&src, false, &mut buf).unwrap();
        assert_eq!((p.pid, p.comm.as_str()), (42, "daemon"));
        assert_eq!(p.exe.as_deref(), Some("/usr/bin/daemon"));
        assert!(!p.smaps);
        assert_eq!(p.mappings.len(), 10_000);
        assert_eq!(
            p.mappings.iter().map(Mapping::size).sum::<u64>(),
            10_000 * 64 * 1024
        );
        assert!(p.mappings.iter().all(|m| m.usage.is_none()));
        let p = read(&src, true, &mut buf).unwrap();
        assert!(p.smaps);
        assert_eq!(p.mappings.len(), 10_000);
        let rss: u64 = p.mappings.iter().map(|m| m.usage.unwrap().rss_bytes).sum();
        assert_eq!(rss, 10_000 * 32 * 1024);
    }

    #[test]
    fn a_bad_line_in_a_fake_proc_names_the_file_and_the_line() {
        let (_dir, src) = fake_proc(
            "7f00-7f10 rw-p 0 00:00 0\n7f10-7f20 rw-p 0 00:00 x\n",
            "7f00-7f10 rw-p 0 00:00 0\nLocked: lots\n",
        );
        let mut buf = Vec::new();
        let e = read(&src, false, &mut buf).unwrap_err().to_string();
        assert!(
            e.ends_with("/42/maps: line 2: an inode that is not a number"),
            "{e}"
        );
        let e = read(&src, true, &mut buf).unwrap_err().to_string();
        assert!(
            e.ends_with("/42/smaps: line 2: a size that is not 'N kB'"),
            "{e}"
        );
    }

    #[test]
    fn an_ended_process_is_no_such_process() {
        let (dir, src) = fake_proc("", "");
        std::fs::remove_file(dir.path().join("42/maps")).unwrap();
        let mut buf = Vec::new();
        assert!(matches!(
            read(&src, false, &mut buf),
            Err(ProcError::NoSuchProcess(42))
        ));
    }

    #[test]
    fn a_live_threads_stack_is_told_as_one() {
        use crate::model::anatomy::GroupKind;
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .stack_size(3 << 20)
            .spawn(move || {
                let here = 0u8;
                tx.send(std::ptr::addr_of!(here) as u64).unwrap();
                let _ = done_rx.recv();
            })
            .unwrap();
        let at = rx.recv().unwrap();
        let me = crate::probe::ProcFs::default()
            .open(std::process::id() as i32)
            .unwrap()
            .pss_source()
            .unwrap();
        let p = read(&me, false, &mut Vec::new()).unwrap();
        done_tx.send(()).unwrap();
        t.join().unwrap();
        let keys = crate::analysis::anatomy::classify(&p.mappings, p.exe.as_deref());
        let i = p
            .mappings
            .iter()
            .position(|m| m.start <= at && at < m.end)
            .unwrap();
        assert_eq!(keys[i].kind, GroupKind::ThreadStacks, "{:?}", p.mappings[i]);
        assert!(p.mappings[i].size() >= 3 << 20);
        assert_eq!(keys[i - 1].kind, GroupKind::ThreadStacks, "its guard");
        let stack = p.mappings.iter().position(|m| m.path == "[stack]").unwrap();
        assert_eq!(keys[stack].kind, GroupKind::Stack);
    }

    #[test]
    fn the_live_process_maps_match_its_smaps() {
        let me = crate::probe::ProcFs::default()
            .open(std::process::id() as i32)
            .unwrap()
            .pss_source()
            .unwrap();
        let mut buf = Vec::new();
        let maps = read(&me, false, &mut buf).unwrap();
        let smaps = read(&me, true, &mut buf).unwrap();
        assert!(maps.mappings.iter().any(|m| m.path == "[stack]"));
        assert!(maps.exe.is_some_and(|e| e.starts_with('/')));
        // Threads of the test harness may map between the two reads: compare what both have.
        let shared = maps
            .mappings
            .iter()
            .filter(|m| {
                smaps
                    .mappings
                    .iter()
                    .any(|s| s.start == m.start && s.end == m.end)
            })
            .count();
        assert!(shared * 10 >= maps.mappings.len() * 9, "{shared}");
        assert!(smaps.mappings.iter().all(|m| m.usage.is_some()));
    }
}
