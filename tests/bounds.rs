//! Memory that does not grow with the input (docs/FORMAT.md, "Memory bounds"): the real binary
//! under an address-space limit (`prlimit --as`) on inputs that would need far more if memory
//! grew with them: long recordings for summary, plot and report; zstd files that declare huge
//! windows or expand one block into gigabytes; a live recorder given many markers. Each limit
//! is what the same command needs on a small input, measured in the same run (the least limit
//! it succeeds under), plus a fixed room: so the tests hold on any machine, loaded or not.

use crate::util::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Room above the small input's need: the parsing threads' chunks in flight (a few MiB, more
/// with more cores) and the allocator's slack. A reader that kept 16 bytes a row would need 32
/// to 48 MiB more for `LONG` rows (a vector doubles as it grows), so it cannot pass.
const ROOM: u64 = 24 * MIB;

/// Rows of the long recording, and of the short one whose need sets the limit.
const LONG: u64 = 2_000_000;
const SHORT: u64 = 100_000;

/// The long recording's spike: its row and RSS.
const SPIKE_ROW: u64 = 1_234_567;
const SPIKE: u64 = 200 << 30;

/// Writes a recording of `rows` rows at 100 Hz to `w`: RSS between 45 and 49 GiB, a marker
/// every 1000 rows, and at `SPIKE_ROW` (when there is one) a spike to `SPIKE`.
fn write_rows(w: impl Write, rows: u64) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::with_capacity(1 << 16, w);
    w.write_all(b"unix_ms,elapsed_s,rss_bytes,event\n")?;
    for i in 0..rows {
        let rss = if i == SPIKE_ROW {
            SPIKE
        } else {
            (45 << 30) + (i % 977) * 4 * MIB
        };
        let ms = 1_700_000_000_000 + i * 10;
        write!(w, "{ms},{}.{:02},{rss},", i / 100, i % 100)?;
        if i % 1000 == 0 {
            write!(w, "mark:proof {}", i / 1000)?;
        }
        w.write_all(b"\n")?;
    }
    w.flush()
}

/// Runs `memmon ARGS` under an address-space limit of `limit` bytes, with `rows` rows of a
/// recording (`write_rows`) on its stdin when `rows` is given.
fn run_limited(limit: u64, args: &[&str], rows: Option<u64>) -> Output {
    let mut child = Command::new(outside_program("prlimit"))
        .arg(format!("--as={limit}"))
        .arg("--")
        .arg(memmon_path())
        .args(args)
        .stdin(if rows.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A memmon that fails stops reading: the writer then gets a broken pipe, which is fine.
    let writer = rows.map(|n| {
        let stdin = child.stdin.take().unwrap();
        std::thread::spawn(move || drop(write_rows(stdin, n)))
    });
    let out = child.wait_with_output().unwrap();
    if let Some(w) = writer {
        w.join().unwrap();
    }
    out
}

/// The least address-space limit (to 1 MiB) under which `memmon ARGS` succeeds, with `rows`
/// rows on its stdin when given.
fn least_limit(args: &[&str], rows: Option<u64>) -> u64 {
    let ok = |mib: u64| run_limited(mib * MIB, args, rows).status.success();
    let (mut lo, mut hi) = (4u64, 2048u64);
    let top = run_limited(hi * MIB, args, rows);
    assert!(
        top.status.success(),
        "memmon {args:?} fails even under {hi} MiB: {}",
        String::from_utf8_lossy(&top.stderr)
    );
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi * MIB
}

/// `memmon ARGS` (reading `-`) on `LONG` rows, under the limit the same command needs on
/// `SHORT` rows plus `ROOM`: it succeeds, and its output is returned.
fn long_within_short_limit(args: &[&str]) -> Output {
    let limit = least_limit(args, Some(SHORT)) + ROOM;
    let out = run_limited(limit, args, Some(LONG));
    assert!(
        out.status.success(),
        "memmon {args:?} of {LONG} rows fails under {} MiB, what it needs for {SHORT} rows plus {} MiB: {}",
        limit / MIB,
        ROOM / MIB,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn summary_of_a_long_recording_needs_no_more_memory_than_of_a_short_one() {
    let out = long_within_short_limit(&["summary", "--json", "-"]);
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["samples"], LONG);
    assert!(
        s.to_string().contains(&SPIKE.to_string()),
        "the spike is the peak"
    );
}

#[test]
fn plot_of_a_long_recording_needs_no_more_memory_than_of_a_short_one() {
    let dir = tempdir();
    let svg = dir.path().join("long.svg");
    let out = long_within_short_limit(&["plot", "-", "--force", "-o", svg.to_str().unwrap()]);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("peak 200.0 GiB"), "the spike is drawn");
    // 2000 markers: the first 1000 would all be in the first half; one in two is drawn.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("-: 1000 of its 2000 events are drawn (one in 2, spread over the recording"),
        "{err}"
    );
    assert!(
        text.contains("1000 of 2000 events drawn"),
        "said on the image"
    );
}

#[test]
fn report_of_a_long_recording_needs_no_more_memory_than_of_a_short_one() {
    let dir = tempdir();
    let html = dir.path().join("long.html");
    let out = long_within_short_limit(&["report", "-", "--force", "-o", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    let open = "<script type=\"application/json\" id=\"memmon-data\">";
    let start = page.find(open).unwrap() + open.len();
    let len = page[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&page[start..start + len]).unwrap();
    let s = &data["series"][0];
    assert_eq!(s["samples"], LONG);
    assert!(s["kept"].as_u64().unwrap() <= 8000, "{}", s["kept"]);
    assert!(s["v"].as_array().unwrap().contains(&SPIKE.into()));
    assert_eq!(s["events"].as_array().unwrap().len(), 1000);
    assert_eq!(s["events_seen"], 2000);
    let note = "-: 1000 of its 2000 events are drawn";
    assert!(s["events_note"].as_str().unwrap().starts_with(note));
    assert!(String::from_utf8_lossy(&out.stderr).contains(note));
}

/// zstd frames made by hand, as a hostile or unusual file holds them.
mod zstd_frames {
    /// A frame header: magic, a descriptor with no checksum, no dictionary, no content size,
    /// and a window of 2^`window_log` bytes.
    pub fn header(window_log: u32) -> Vec<u8> {
        vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, ((window_log - 10) << 3) as u8]
    }

    fn block(kind: u32, size: usize, last: bool, content: &[u8]) -> Vec<u8> {
        let h = ((size as u32) << 3) | (kind << 1) | u32::from(last);
        let mut b = h.to_le_bytes()[..3].to_vec();
        b.extend_from_slice(content);
        b
    }

    /// Raw blocks holding `data` (at most 128 KiB each), the last one marked last when `last`.
    pub fn raw(data: &[u8], last: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let parts: Vec<&[u8]> = data.chunks(128 << 10).collect();
        for (i, part) in parts.iter().enumerate() {
            out.extend(block(0, part.len(), last && i + 1 == parts.len(), part));
        }
        out
    }

    /// An RLE block: `byte` repeated `n` (at most 128 KiB) times.
    pub fn rle(byte: u8, n: usize, last: bool) -> Vec<u8> {
        block(1, n, last, &[byte])
    }

    /// A compressed block of no literals and `sequences` sequences (at least 0x7F00), each a
    /// match of 65,539 bytes at the last repeat offset: a 2-bytes-a-sequence block that decodes
    /// to 64 KiB a sequence, far past the 128 KiB a block may decode to.
    pub fn expanding(sequences: usize) -> Vec<u8> {
        let mut body = vec![0x00]; // raw literals, none
        body.push(255);
        body.extend_from_slice(&((sequences - 0x7F00) as u16).to_le_bytes());
        // RLE modes for literal lengths, offsets and match lengths: codes 0, 0 and 52.
        body.extend_from_slice(&[0x54, 0, 0, 52]);
        // Each sequence reads 16 extra bits of match length (zero); then the end-mark bit.
        body.extend(std::iter::repeat_n(0u8, sequences * 2));
        body.push(1);
        block(2, body.len(), true, &body)
    }
}

#[test]
fn a_zstd_file_costs_at_most_its_window_and_a_larger_window_or_a_block_bomb_is_refused() {
    use zstd_frames::*;
    let dir = tempdir();
    let mut csv = Vec::new();
    write_rows(&mut csv, 1000).unwrap();
    let plain = dir.path().join("plain.csv");
    std::fs::write(&plain, &csv).unwrap();
    let base = least_limit(&["summary", plain.to_str().unwrap()], None);

    // The largest window read (128 MiB), holding the recording: read whole within its window.
    let at_cap = dir.path().join("window27.csv.zst");
    std::fs::write(&at_cap, [header(27), raw(&csv, true)].concat()).unwrap();
    let limit = base + (128 << 20) + ROOM;
    let out = run_limited(
        limit,
        &["summary", "--json", at_cap.to_str().unwrap()],
        None,
    );
    assert!(
        out.status.success(),
        "a 128 MiB window under {} MiB: {}",
        limit / MIB,
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["samples"], 1000);

    // Refused before anything is allocated for them, under what a plain file needs.
    let refused = |name: &str, data: Vec<u8>, message: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, data).unwrap();
        let out = run_limited(base + ROOM, &["summary", p.to_str().unwrap()], None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        let want = format!("cannot read {}: {message}", p.display());
        assert!(err.contains(&want), "{name}: expected '{want}' in: {err}");
    };
    refused(
        "window28.csv.zst",
        [header(28), raw(&csv, true)].concat(),
        "the zstd frame at compressed byte 0 declares a window of 256 MiB, more than the 128 MiB \
         memmon decompresses (the zstd tool's own default limit): decompress it first with `zstd -d --long=28",
    );
    // What `zstd --long=31` writes from a pipe: a 2 GiB window; here 88 KB that decode to
    // 2.5 GiB of newlines after the recording.
    let mut long31 = [header(31), raw(&csv, false)].concat();
    for _ in 0..20_000 {
        long31.extend(rle(b'\n', 128 << 10, false));
    }
    long31.extend(rle(b'\n', 1, true));
    refused(
        "window31.csv.zst",
        long31,
        "the zstd frame at compressed byte 0 declares a window of 2 GiB, more than the 128 MiB \
         memmon decompresses",
    );
    refused(
        "window40.csv.zst",
        [header(40), raw(&csv, true)].concat(),
        "the zstd frame at compressed byte 0 declares a window of 1 TiB, more than zstd decodes \
         at all (2 GiB): the file is damaged",
    );
    // An 8 MiB window, and one 130 KB block that would decode to 4.26 GB.
    refused(
        "block-bomb.csv.zst",
        [header(23), raw(&csv, false), expanding(65_000)].concat(),
        "the zstd frame at compressed byte 0 is damaged: it cannot be decompressed (zstd: ",
    );
}

/// The value of `key` (kB) in /proc/PID/status, in bytes.
fn status_bytes(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = text.lines().find(|l| l.starts_with(key)).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// Sends a marker over the recorder's socket (what `memmon mark` does) and waits for its reply.
fn mark(sock: &Path, label: &str) {
    // The socket's file comes at bind, a moment before its listen: refused until then.
    let mut s = None;
    assert!(wait_for(30.0, || {
        s = UnixStream::connect(sock).ok();
        s.is_some()
    }));
    let mut s = s.unwrap();
    writeln!(s, "{{\"mark\":\"{label}\"}}").unwrap();
    let mut reply = String::new();
    BufReader::new(&s).read_line(&mut reply).unwrap();
    assert!(reply.contains("\"ok\":true"), "{label}: {reply}");
}

#[test]
fn a_live_recorders_memory_stays_flat_over_many_markers() {
    let dir = tempdir();
    let sock = dir.path().join("rec.sock");
    let out = dir.path().join("marks.csv");
    let mut target = spawn_workload(&["alloc:1MiB", "hold:120s"]);
    let rec = Command::new(memmon_path())
        .args([
            "record",
            "-q",
            "-i",
            "1s",
            "--pid",
            &target.id().to_string(),
        ])
        .arg("--socket")
        .arg(&sock)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_for(20.0, || sock.exists()),
        "the recorder did not start"
    );
    // Past the warm-up the summary lists no more phases (it lists the first 1000 one by one and
    // sums the rest by label, at most 256 labels apart).
    let (warm, more) = (1_300u64, 5_000u64);
    for i in 0..warm {
        mark(&sock, &format!("phase {i}"));
    }
    // From here on the recorder may grow by 16 MiB of address space at most.
    let rss_before = status_bytes(rec.id(), "VmRSS:");
    let limit = status_bytes(rec.id(), "VmSize:") + 16 * MIB;
    let set = Command::new(outside_program("prlimit"))
        .arg(format!("--pid={}", rec.id()))
        .arg(format!("--as={limit}"))
        .status()
        .unwrap();
    assert!(set.success());
    for i in warm..warm + more {
        mark(&sock, &format!("phase {i}"));
    }
    let rss_after = status_bytes(rec.id(), "VmRSS:");
    // Every marker was answered under the limit; SIGTERM ends the recording (exit 143).
    // SAFETY: kill takes plain integers and touches no memory.
    unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
    let ended = rec.wait_with_output().unwrap();
    let _ = target.kill();
    let _ = target.wait();
    assert_eq!(
        ended.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&ended.stderr)
    );
    let grown = rss_after.saturating_sub(rss_before);
    // (A summary that kept each phase, ~290 bytes, would grow by 1.4 MiB.)
    assert!(
        grown <= MIB / 2,
        "the recorder grew by {grown} bytes over {more} markers ({} bytes a marker)",
        grown / more
    );
    let marks = read_csv(&out)
        .1
        .iter()
        .filter(|r| r.last().is_some_and(|e| e.starts_with("mark:")))
        .count();
    assert_eq!(marks as u64, warm + more);
}
