//! Quiet between samples: how often an idle `memmon record` wakes up, and what one sample costs
//! at 1 Hz against 1 kHz, end to end (the built binary attached to an idle `sleep`), beside the
//! floor any sampler pays on this machine.
//!
//! Wake-ups: voluntary + non-voluntary context switches summed over every thread of memmon
//! (/proc/PID/task/*/status) over 10 s of a `-i 1s` recording with the marker socket (default)
//! and a followed log.
//!
//! CPU per sample: the CPU time of all memmon's threads (the scheduler's own count in
//! nanoseconds, the first field of /proc/PID/task/TID/schedstat) over a window in the middle of
//! a recording, divided by the rows written in that window: start-up and the end are outside
//! it, and what a recorder does between samples counts against its samples. The bare floor is a
//! thread of the bench itself that sleeps to the next absolute deadline, preads
//! /proc/PID/status and writes a 100-byte line (its own CPU time, CLOCK_THREAD_CPUTIME_ID, the
//! same nanosecond count). The four are measured in turn, `ROUNDS` times, and the medians
//! given: the machine's load moves between rounds, each round's numbers share it.
//! Run: `cargo bench --bench wakeups` (as root, exit records are read; the `--no-taskstats`
//! rows show their part). Results go in BENCHMARKS.md.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const MEMMON: &str = env!("CARGO_BIN_EXE_memmon");
const ROUNDS: usize = 3;

fn idle_target() -> Child {
    Command::new("sleep").arg("100000").spawn().unwrap()
}

/// Context switches summed over every thread of `pid`.
fn context_switches(pid: u32) -> u64 {
    per_thread(pid, "status", |text| {
        text.lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    })
}

/// CPU time of every thread of `pid` so far, in nanoseconds (schedstat's first field).
fn cpu_ns(pid: u32) -> u64 {
    per_thread(pid, "schedstat", |text| {
        text.split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

/// `f` of /proc/PID/task/*/FILE, summed over the threads.
fn per_thread(pid: u32, file: &str, f: impl Fn(&str) -> u64) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join(file)).ok())
        .map(|text| f(&text))
        .sum()
}

/// Rows of a CSV recording (its header and `#` lines not counted).
fn rows(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .count() as u64
}

/// A recording of the idle target at `interval`, with the marker socket and `--mark-log`.
fn start_recording(dir: &Path, target: u32, interval: &str, extra: &[&str]) -> Child {
    let log = dir.join("app.log");
    std::fs::write(&log, "").unwrap();
    // The marker socket in a directory of its own: `memmon mark` clients elsewhere on the
    // machine probe the sockets of the shared default one, and each probe wakes the recorder.
    Command::new(MEMMON)
        .args(["record", "-q", "--force", "-i", interval, "--socket"])
        .arg(dir.join("m.sock"))
        .arg("--pid")
        .arg(target.to_string())
        .arg("--mark-log")
        .arg(&log)
        .args(extra)
        .args(["--mark-regex", "phase", "-o"])
        .arg(dir.join("r.csv"))
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
}

/// Wake-ups per second of an idle `-i 1s` recording, over 10 s after 2 s of warm-up.
fn wakeups_per_s(dir: &Path, target: u32) -> f64 {
    let child = start_recording(dir, target, "1s", &[]);
    std::thread::sleep(Duration::from_secs(2));
    let (a, t0) = (context_switches(child.id()), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let b = context_switches(child.id());
    let rate = (b - a) as f64 / t0.elapsed().as_secs_f64();
    stop(child);
    rate
}

/// memmon's CPU µs per sample at `interval`, over `window` after `warm`.
fn memmon_per_sample(
    dir: &Path,
    target: u32,
    interval: &str,
    warm: Duration,
    window: Duration,
    extra: &[&str],
) -> f64 {
    let out = dir.join("r.csv");
    let child = start_recording(dir, target, interval, extra);
    std::thread::sleep(warm);
    let (c0, n0) = (cpu_ns(child.id()), rows(&out));
    std::thread::sleep(window);
    let (c1, n1) = (cpu_ns(child.id()), rows(&out));
    stop(child);
    (c1 - c0) as f64 / 1e3 / (n1 - n0).max(1) as f64
}

/// CPU time (user + system) of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The bare floor of a paced sampler: sleep to an absolute deadline, read the target's status,
/// write a line; CPU µs per tick over `ticks` ticks `every` apart (after two not counted).
fn bare_per_sample(dir: &Path, target: u32, every: Duration, ticks: u32) -> f64 {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let status = std::fs::File::open(format!("/proc/{target}/status")).unwrap();
    let mut out = std::fs::File::create(dir.join("bare.csv")).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut next = Instant::now();
    let mut t0 = thread_cpu();
    for i in 0..ticks + 2 {
        if i == 2 {
            t0 = thread_cpu();
        }
        next += every;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        let _ = status.read_at(&mut buf, 0);
        out.write_all(&[b'x'; 100]).unwrap();
    }
    (thread_cpu() - t0).as_secs_f64() * 1e6 / ticks as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut target = idle_target();
    let id = target.id();
    let d = dir.path();
    let s = Duration::from_secs;

    println!(
        "| idle `record -i 1s`, marker socket + `--mark-log`, all threads | {:.2} wake-ups/s |",
        wakeups_per_s(d, id)
    );
    // (1 Hz, 1 kHz) per round, for memmon with and without exit records, and the bare floor.
    let mut with = (Vec::new(), Vec::new());
    let mut without = (Vec::new(), Vec::new());
    let mut bare = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let no = &["--no-taskstats"][..];
        with.0
            .push(memmon_per_sample(d, id, "1s", s(3), s(20), &[]));
        with.1
            .push(memmon_per_sample(d, id, "1ms", s(1), s(3), &[]));
        without
            .0
            .push(memmon_per_sample(d, id, "1s", s(3), s(20), no));
        without
            .1
            .push(memmon_per_sample(d, id, "1ms", s(1), s(3), no));
        bare.0.push(bare_per_sample(d, id, s(1), 20));
        bare.1
            .push(bare_per_sample(d, id, Duration::from_millis(1), 3000));
        eprintln!(
            "round {round}: memmon {:.1} / {:.1} µs, --no-taskstats {:.1} / {:.1} µs, bare {:.1} / {:.1} µs (1 Hz / 1 kHz)",
            with.0[round - 1], with.1[round - 1], without.0[round - 1], without.1[round - 1],
            bare.0[round - 1], bare.1[round - 1]
        );
    }
    let (b1, bk) = (median(bare.0), median(bare.1));
    for (what, (hz1, khz)) in [("", with), (" `--no-taskstats`", without)] {
        let (m1, mk) = (median(hz1), median(khz));
        println!(
            "| CPU per sample at 1 Hz (`-i 1s`){what} | {m1:.1} µs ({:.2}x the bare floor) |",
            m1 / b1
        );
        println!(
            "| CPU per sample at 1 kHz (`-i 1ms`){what} | {mk:.1} µs ({:.2}x the bare floor) |",
            mk / bk
        );
        println!("| ratio 1 Hz / 1 kHz{what} | {:.2}x |", m1 / mk);
    }
    println!("| bare floor: sleep, read status, write a line, at 1 Hz | {b1:.1} µs |");
    println!("| bare floor: the same at 1 kHz | {bk:.1} µs |");
    println!("| bare ratio 1 Hz / 1 kHz | {:.2}x |", b1 / bk);
    let _ = target.kill();
    let _ = target.wait();
}
