//! Quiet between samples: how often an idle `memmon record` wakes up, and what one sample costs
//! at 1 Hz against 1 kHz, end to end (the built binary attached to an idle `sleep`).
//! Wake-ups: voluntary + non-voluntary context switches summed over every thread of memmon
//! (/proc/PID/task/*/status) over 10 s of a `-i 1s` recording with the marker socket (default)
//! and a followed log. CPU per sample: the difference in CPU time (wait4's rusage) between a
//! long and a short recording at the same interval, over the difference in samples taken, so
//! start-up and the end's summary cancel out; the median of 3 pairs. Beside it, the floor any
//! sampler pays on this machine: a thread that sleeps to the next deadline and then reads
//! /proc/PID/status and writes one 100-byte line, at 1 Hz and at 1 kHz (its own CPU time).
//! Run: `cargo bench --bench wakeups`. Results go in BENCHMARKS.md.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const MEMMON: &str = env!("CARGO_BIN_EXE_memmon");

fn idle_target() -> Child {
    Command::new("sleep").arg("100000").spawn().unwrap()
}

/// Context switches summed over every thread of `pid`.
fn context_switches(pid: u32) -> u64 {
    let mut total = 0;
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    for task in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// Rows of a CSV recording (its header and `#` lines not counted).
fn rows(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count() as u64
}

/// Waits for `child` with wait4; its CPU time (user + system).
fn wait_cpu(child: Child) -> Duration {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid out-pointers.
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Records the idle target at `interval` for `duration`; (CPU time, samples, wake-ups per
/// second over the middle of the run when `count_wakeups`).
fn record(
    dir: &Path,
    target: u32,
    interval: &str,
    duration: Duration,
    count_wakeups: bool,
    extra: &[&str],
) -> (Duration, u64, Option<f64>) {
    let out = dir.join("r.csv");
    let log = dir.join("app.log");
    std::fs::write(&log, "").unwrap();
    // The marker socket in a directory of its own: `memmon mark` clients elsewhere on the
    // machine probe the sockets of the shared default one, and each probe wakes the recorder.
    let child = Command::new(MEMMON)
        .args(["record", "-q", "--force", "-i", interval, "--socket"])
        .arg(dir.join("m.sock"))
        .arg("--pid")
        .arg(target.to_string())
        .arg("--duration")
        .arg(format!("{}ms", duration.as_millis()))
        .arg("--mark-log")
        .arg(&log)
        .args(extra)
        .args(["--mark-regex", "phase", "-o"])
        .arg(&out)
        .spawn()
        .unwrap();
    let mut wakeups = None;
    if count_wakeups {
        std::thread::sleep(Duration::from_secs(2));
        let (a, t0) = (context_switches(child.id()), Instant::now());
        std::thread::sleep(duration - Duration::from_secs(3));
        let b = context_switches(child.id());
        wakeups = Some((b - a) as f64 / t0.elapsed().as_secs_f64());
    }
    let cpu = wait_cpu(child);
    (cpu, rows(&out), wakeups)
}

/// CPU per sample at `interval`: (long - short) CPU over (long - short) samples; median of 3.
fn per_sample(
    dir: &Path,
    target: u32,
    interval: &str,
    short: Duration,
    long: Duration,
    extra: &[&str],
) -> f64 {
    let mut v: Vec<f64> = (0..3)
        .map(|_| {
            let (c1, n1, _) = record(dir, target, interval, short, false, extra);
            let (c2, n2, _) = record(dir, target, interval, long, false, extra);
            (c2.as_secs_f64() - c1.as_secs_f64()) / (n2 as f64 - n1 as f64) * 1e6
        })
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v[1]
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
/// write a line; CPU µs per tick over `ticks` ticks `every` apart.
fn bare_paced(dir: &Path, target: u32, every: Duration, ticks: u32) -> f64 {
    use std::io::Write;
    let mut status = std::fs::File::open(format!("/proc/{target}/status")).unwrap();
    let mut out = std::fs::File::create(dir.join("bare.csv")).unwrap();
    let mut buf = vec![0u8; 4096];
    let t0 = thread_cpu();
    let mut next = Instant::now();
    for _ in 0..ticks {
        next += every;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        // SAFETY: reading into a valid buffer.
        unsafe {
            libc::pread(
                std::os::fd::AsRawFd::as_raw_fd(&status),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
            )
        };
        out.write_all(&[b'x'; 100]).unwrap();
    }
    let _ = &mut status;
    (thread_cpu() - t0).as_secs_f64() * 1e6 / ticks as f64
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut target = idle_target();
    let id = target.id();

    let (_, _, w) = record(dir.path(), id, "1s", Duration::from_secs(13), true, &[]);
    println!(
        "| idle `record -i 1s`, marker socket + `--mark-log`, all threads | {:.2} wake-ups/s |",
        w.unwrap()
    );
    let s = Duration::from_secs;
    // Exit records (taskstats, as root) are drained at each tick: their cost grows with the
    // machine's process exits per tick, so 1 Hz is measured with and without them.
    for (what, extra) in [
        ("", &[][..]),
        (" `--no-taskstats`", &["--no-taskstats"][..]),
    ] {
        let hz1 = per_sample(dir.path(), id, "1s", s(2), s(12), extra);
        let khz = per_sample(dir.path(), id, "1ms", s(1), s(3), extra);
        println!("| CPU per sample at 1 Hz (`-i 1s`){what} | {hz1:.1} µs |");
        println!("| CPU per sample at 1 kHz (`-i 1ms`){what} | {khz:.1} µs |");
        println!("| ratio 1 Hz / 1 kHz{what} | {:.2}x |", hz1 / khz);
    }
    let bare1 = bare_paced(dir.path(), id, Duration::from_secs(1), 10);
    let bare1k = bare_paced(dir.path(), id, Duration::from_millis(1), 3000);
    println!("| bare floor: sleep, read status, write a line, at 1 Hz | {bare1:.1} µs |");
    println!("| bare floor: the same at 1 kHz | {bare1k:.1} µs |");
    println!("| bare ratio 1 Hz / 1 kHz | {:.2}x |", bare1 / bare1k);
    let _ = target.kill();
    let _ = target.wait();
}
