//! What `memmon_mark::mark` costs its caller, in CPU time of the calling thread:
//! - with no recorder listening (the common case in production): `mark` through the process's
//!   own `Marker` (looking for a recorder in memmon's default places, here private empty
//!   directories) and through a `Marker` of a socket nobody listens on;
//! - with a listener that answers at once (a stand-in thread of this program): the caller's cost
//!   per queued marker, in bursts of 1,000 (below the queue's capacity), the queue drained
//!   between bursts;
//! - with a real recorder (`memmon record --socket S -- sleep 600`, when the memmon binary is
//!   found: `$MEMMON_BIN`, else target/release/memmon of this workspace): markers per second
//!   it takes in a burst of 2,000, whether all landed in order, and their rows' lag.
//!
//! Run: `cargo build --release && cargo bench -p memmon-mark`. Results go in BENCHMARKS.md.

use memmon_mark::Marker;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// CPU time (user + system) of this thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f` `n` times, `rounds` times; CPU nanoseconds per call of the best round.
fn best_of(rounds: u32, n: u32, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let t0 = thread_cpu();
            for _ in 0..n {
                f();
            }
            (thread_cpu() - t0).as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// A listener that answers every request as memmon's recorder answers a queued marker.
fn stand_in(path: &Path) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let mut line = String::new();
            if BufReader::new(&conn).read_line(&mut line).unwrap_or(0) == 0 {
                continue;
            }
            let _ = (&conn).write_all(b"{\"ok\":true,\"label\":\"x\",\"queued\":true}\n");
        }
    })
}

fn memmon_binary() -> Option<PathBuf> {
    let path = std::env::var_os("MEMMON_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/memmon")
        });
    path.is_file().then_some(path)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    // memmon's default places, empty: the process's own `Marker` finds no recorder.
    std::env::set_var("XDG_RUNTIME_DIR", dir.path());
    std::env::set_var("TMPDIR", dir.path());
    std::env::remove_var("MEMMON_SOCKET");

    println!("no recorder listening:");
    memmon_mark::mark("first"); // looks, finds none
    assert!(memmon_mark::flush(Duration::from_secs(5)));
    let own = best_of(5, 1_000_000, || {
        std::hint::black_box(memmon_mark::mark(std::hint::black_box("synthesis")));
    });
    println!("  memmon_mark::mark (the process's Marker, looking in the default places): {own:.1} ns per call");
    let nobody = Marker::to_socket(dir.path().join("nobody.sock"));
    nobody.mark("first");
    assert!(nobody.flush(Duration::from_secs(5)));
    let gone = best_of(5, 1_000_000, || {
        std::hint::black_box(nobody.mark(std::hint::black_box("synthesis")));
    });
    println!("  Marker::mark (a socket nobody listens on): {gone:.1} ns per call");
    let s = memmon_mark::stats();
    println!(
        "  (looks for a recorder at most every {} ms: {} markers were queued for a look that found none)",
        memmon_mark::RETRY_AFTER.as_millis(),
        s.no_recorder + nobody.stats().no_recorder
    );

    println!("a listener that answers at once (a thread of this program):");
    let sock = dir.path().join("stand-in.sock");
    let _server = stand_in(&sock);
    let m = Marker::to_socket(&sock);
    m.mark("first");
    assert!(m.flush(Duration::from_secs(5)));
    let mut per_call = f64::INFINITY;
    let mut made = 0u64;
    for _ in 0..20 {
        per_call = per_call.min(best_of(1, 1_000, || {
            std::hint::black_box(m.mark(std::hint::black_box("synthesis")));
        }));
        made += 1_000;
        assert!(m.flush(Duration::from_secs(60)), "the burst was not sent");
    }
    let st = m.stats();
    println!("  Marker::mark, queued: {per_call:.1} ns per call (best burst of 1,000)");
    println!("  sent {} of {} ({} lost)", st.sent, made + 1, st.lost());
    let t0 = Instant::now();
    for _ in 0..2_000 {
        m.mark("burst");
    }
    assert!(m.flush(Duration::from_secs(60)));
    println!(
        "  sender: 2,000 markers sent in {:.0} ms ({:.0} per second)",
        t0.elapsed().as_secs_f64() * 1e3,
        2_000.0 / t0.elapsed().as_secs_f64()
    );

    match memmon_binary() {
        Some(bin) => real_recorder(&bin, dir.path()),
        None => println!(
            "a real recorder: skipped (build it with `cargo build --release`, or set MEMMON_BIN)"
        ),
    }
}

/// A burst of 2,000 markers to `memmon record`: how fast it takes them, and the recording.
fn real_recorder(bin: &Path, dir: &Path) {
    println!("a real recorder ({}):", bin.display());
    let sock = dir.join("rec.sock");
    let out = dir.join("rec.csv");
    let mut rec = std::process::Command::new(bin)
        .args(["record", "-q", "-i", "1s", "--socket"])
        .arg(&sock)
        .arg("-o")
        .arg(&out)
        .args(["--", "sleep", "600"])
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !(sock.exists() && out.exists()) {
        assert!(start.elapsed() < Duration::from_secs(30), "no recorder");
        std::thread::sleep(Duration::from_millis(20));
    }
    let m = Marker::to_socket(&sock);
    m.mark("warm");
    assert!(m.flush(Duration::from_secs(30)));
    let n = 2_000;
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    for i in 0..n {
        m.mark(&format!("b{i}"));
    }
    let caller = (thread_cpu() - cpu0).as_nanos() as f64 / n as f64;
    assert!(m.flush(Duration::from_secs(120)));
    let wall = t0.elapsed().as_secs_f64();
    println!("  Marker::mark, queued (label formatted per call): {caller:.0} ns per call");
    println!(
        "  {n} markers taken in {:.0} ms ({:.0} per second); stats {:?}",
        wall * 1e3,
        n as f64 / wall,
        m.stats()
    );
    // Markers one at a time on an otherwise idle recorder: each one's lag alone.
    for i in 0..50 {
        m.mark(&format!("s{i}"));
        assert!(m.flush(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to the recorder this program started.
    unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
    rec.wait().unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let event = header.iter().position(|c| *c == "event").unwrap();
    let lag = header.iter().position(|c| *c == "event_lag_us").unwrap();
    let (mut burst, mut burst_lags, mut single_lags) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        if let Some(l) = cells[event].strip_prefix("mark:b") {
            burst.push(l.parse::<u32>().unwrap());
            burst_lags.push(cells[lag].parse::<u64>().unwrap());
        } else if cells[event].starts_with("mark:s") {
            single_lags.push(cells[lag].parse::<u64>().unwrap());
        }
    }
    let in_order = burst.iter().copied().eq(0..n);
    println!(
        "  in the recording: {} of {n} burst markers, in order: {in_order}; their rows' lag {}",
        burst.len(),
        spread(&mut burst_lags)
    );
    println!(
        "  {} markers one at a time, 20 ms apart: their rows' lag {}",
        single_lags.len(),
        spread(&mut single_lags)
    );
}

/// "median A µs, 99th percentile B µs, max C µs".
fn spread(v: &mut [u64]) -> String {
    if v.is_empty() {
        return "(none)".into();
    }
    v.sort_unstable();
    format!(
        "median {} µs, 99th percentile {} µs, max {} µs",
        v[v.len() / 2],
        v[v.len() * 99 / 100],
        v[v.len() - 1]
    )
}
