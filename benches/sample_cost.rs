//! CPU time per sample of one idle process, measured in the same run as the bare cost of the
//! /proc reads a sample needs (open+read+close of status and of the children file) and of
//! statm: in a hot loop, and paced at 100 samples/s as a recorder runs (each tick then pays a
//! wake-up with cold caches, for the bare reads and memmon alike). Then the same sample of a
//! target with 1 and with 256 threads (a copy of this program that only starts threads), where
//! every thread has its own children file.
//! Run: `cargo bench --bench sample_cost`. Results go in BENCHMARKS.md.

use memmon::probe::numa::{NumaFormat, NumaStat};
use memmon::probe::psi::Pressure;
use memmon::probe::vmstat::Vmstat;
use memmon::probe::ProcFs;
use memmon::sampler::tree::Tree;
use std::fs::File;
use std::io::Read;
use std::time::Duration;

const ITERATIONS: u32 = 200_000;

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

/// Runs `f` ITERATIONS times; returns CPU nanoseconds per call (best of 5 rounds).
fn measure(f: impl FnMut()) -> f64 {
    measure_n(ITERATIONS, f)
}

/// Runs `f` `iterations` times; returns CPU nanoseconds per call (best of 5 rounds).
fn measure_n(iterations: u32, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t0 = thread_cpu();
            for _ in 0..iterations {
                f();
            }
            (thread_cpu() - t0).as_nanos() as f64 / iterations as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Runs `f` over and over for `wall` (wall-clock); returns CPU nanoseconds per call, the mean.
fn measure_for(wall: Duration, mut f: impl FnMut()) -> f64 {
    let t0 = thread_cpu();
    let start = std::time::Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < wall {
        f();
        calls += 1;
    }
    (thread_cpu() - t0).as_nanos() as f64 / calls as f64
}

/// Runs `f` at 100 calls per second for 3 s, sleeping to absolute deadlines in between; returns
/// CPU nanoseconds per call, the sleeps' own wake-ups included.
fn measure_paced(f: impl FnMut()) -> f64 {
    measure_paced_at(Duration::from_millis(10), 300, f)
}

/// Runs `f` `calls` times, one call every `every` (absolute deadlines); returns CPU nanoseconds
/// per call, the sleeps' own wake-ups included.
fn measure_paced_at(every: Duration, calls: u32, mut f: impl FnMut()) -> f64 {
    let t0 = thread_cpu();
    let start = std::time::Instant::now();
    for i in 1..=calls {
        f();
        let deadline = start + every * i;
        if let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(left);
        }
    }
    (thread_cpu() - t0).as_nanos() as f64 / calls as f64
}

fn bare_read(path: &str, buf: &mut Vec<u8>) {
    buf.clear();
    let mut f = File::open(path).unwrap();
    f.read_to_end(buf).unwrap();
}

/// Set in the environment of the copy of this program that serves as a threaded target.
const THREADS_ENV: &str = "MEMMON_SAMPLE_COST_THREADS";

/// The threaded target: starts threads until the process has `n`, then sleeps (until killed).
fn be_a_threaded_target(n: usize) -> ! {
    for _ in 1..n {
        std::thread::spawn(|| loop {
            std::thread::park();
        });
    }
    loop {
        std::thread::park();
    }
}

/// Starts a copy of this program with `n` threads and waits until /proc shows them all.
fn threaded_target(n: usize) -> std::process::Child {
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .env(THREADS_ENV, n.to_string())
        .spawn()
        .unwrap();
    let task = format!("/proc/{}/task", child.id());
    let start = std::time::Instant::now();
    while std::fs::read_dir(&task).unwrap().count() < n {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{n} threads did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// CPU per sample of a target with `n` threads (and no children): in a hot loop for 1 s, and
/// paced at 1,000 samples/s for 2 s.
fn threaded_cost(n: usize) -> (f64, f64) {
    let mut target = threaded_target(n);
    let fs = ProcFs::default();
    let mut tree = Tree::new(fs.clone(), fs.open(target.id() as i32).unwrap(), true);
    // A mean over 1 s, not a best round: a slower tick now and then (a rescan) must count.
    let hot = measure_for(Duration::from_secs(1), || {
        tree.sample().unwrap().unwrap();
    });
    let paced = measure_paced_at(Duration::from_millis(1), 2_000, || {
        tree.sample().unwrap().unwrap();
    });
    target.kill().unwrap();
    let _ = target.wait();
    (hot, paced)
}

fn main() {
    if let Some(n) = std::env::var(THREADS_ENV).ok().and_then(|v| v.parse().ok()) {
        be_a_threaded_target(n);
    }
    // `cargo bench --bench sample_cost -- threads`: the threaded targets only.
    let only_threads = std::env::args().skip(1).any(|a| a == "threads");
    if only_threads {
        print_threaded();
        return;
    }
    let mut target = std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    let pid = target.id() as i32;
    let statm = format!("/proc/{pid}/statm");
    let status = format!("/proc/{pid}/status");
    let children = format!("/proc/{pid}/task/{pid}/children");
    let mut buf = Vec::with_capacity(4096);

    let fs = ProcFs::default();
    let mut tree = Tree::new(fs.clone(), fs.open(pid).unwrap(), true);
    let mut tree_alone = Tree::new(fs.clone(), fs.open(pid).unwrap(), false);

    let held = fs.open(pid).unwrap();
    let held_status_ns = measure(|| {
        held.read_status(&mut buf).unwrap();
    });
    let held_stat_ns = measure(|| {
        held.read_stat_counts(&mut buf).unwrap();
    });
    let held_statm_ns = measure(|| {
        held.read_statm(&mut buf).unwrap();
    });
    // The machine's swap counts and memory pressure, from held files (`probe::vmstat`,
    // `probe::psi`): what a tick would pay to read them itself.
    let mut vmstat = Vmstat::open(std::path::Path::new("/proc/vmstat")).unwrap();
    let vmstat_ns = measure_n(ITERATIONS / 10, || {
        vmstat.read().unwrap();
    });
    let psi_ns = Pressure::open(std::path::Path::new("/proc/pressure/memory"))
        .ok()
        .map(|mut p| {
            measure(|| {
                p.read().unwrap();
            })
        });
    // A v1 memory cgroup's memory.numa_stat (the root's, here: every node of its tree), read
    // at each row where the machine has several NUMA nodes.
    let numa_ns = NumaStat::open(
        std::path::Path::new("/sys/fs/cgroup/memory"),
        NumaFormat::V1,
        ProcFs::page_size(),
    )
    .ok()
    .map(|mut n| {
        measure_n(ITERATIONS / 10, || {
            n.read().unwrap();
        })
    });
    let statm_ns = measure(|| bare_read(&statm, &mut buf));
    let status_ns = measure(|| bare_read(&status, &mut buf));
    let bare_ns = measure(|| {
        bare_read(&status, &mut buf);
        bare_read(&children, &mut buf);
    });
    let tree_ns = measure(|| {
        tree.sample().unwrap().unwrap();
    });
    let alone_ns = measure(|| {
        tree_alone.sample().unwrap().unwrap();
    });
    let paced_sleep_ns = measure_paced(|| {});
    let paced_bare_ns = measure_paced(|| {
        bare_read(&status, &mut buf);
        bare_read(&children, &mut buf);
    });
    let paced_tree_ns = measure_paced(|| {
        tree.sample().unwrap().unwrap();
    });
    target.kill().unwrap();
    let _ = target.wait();
    println!(
        "pread of a held /proc/vmstat, pswpin and pswpout parsed: {:.2} µs",
        vmstat_ns / 1e3
    );
    if let Some(ns) = numa_ns {
        println!(
            "pread of a held v1 memory.numa_stat (the root cgroup), parsed: {:.2} µs",
            ns / 1e3
        );
    }
    if let Some(ns) = psi_ns {
        println!(
            "pread of a held /proc/pressure/memory, parsed: {:.2} µs",
            ns / 1e3
        );
    }
    println!("CPU time per call, one idle process (`sleep`), best of 5 x {ITERATIONS}:");
    println!("| what | CPU per call | ratio to its bare reads |");
    println!("|---|---|---|");
    println!(
        "| bare open+read+close /proc/PID/statm | {:.2} µs | |",
        statm_ns / 1e3
    );
    println!(
        "| bare open+read+close /proc/PID/status | {:.2} µs | |",
        status_ns / 1e3
    );
    println!(
        "| bare status + task/PID/children | {:.2} µs | |",
        bare_ns / 1e3
    );
    println!(
        "| pread of a held /proc/PID/status | {:.2} µs | |",
        held_status_ns / 1e3
    );
    println!(
        "| pread of a held /proc/PID/stat, parsed (major faults) | {:.2} µs | |",
        held_stat_ns / 1e3
    );
    println!(
        "| pread of a held /proc/PID/statm | {:.2} µs | |",
        held_statm_ns / 1e3
    );
    println!(
        "| memmon sample, process alone (--no-children) | {:.2} µs | {:.2}x status |",
        alone_ns / 1e3,
        alone_ns / status_ns
    );
    println!(
        "| memmon sample, with children | {:.2} µs | {:.2}x status+children |",
        tree_ns / 1e3,
        tree_ns / bare_ns
    );
    println!();
    println!("Paced at 100 calls/s for 3 s (CPU per tick, the wake-up included):");
    println!("| what | CPU per tick | ratio |");
    println!("|---|---|---|");
    println!("| sleep and wake only | {:.2} µs | |", paced_sleep_ns / 1e3);
    println!(
        "| bare status + task/PID/children | {:.2} µs | |",
        paced_bare_ns / 1e3
    );
    println!(
        "| memmon sample, with children | {:.2} µs | {:.2}x the bare reads |",
        paced_tree_ns / 1e3,
        paced_tree_ns / paced_bare_ns
    );
    println!();
    print_threaded();
}

/// Measures and prints the cost of sampling a target of 1 and of 256 threads.
fn print_threaded() {
    let paced_1khz_sleep_ns = measure_paced_at(Duration::from_millis(1), 2_000, || {});
    let (hot_1, paced_1) = threaded_cost(1);
    let (hot_256, paced_256) = threaded_cost(256);
    println!("A target with many threads (each has its own task/TID/children file):");
    println!("| target | hot loop for 1 s, mean CPU per sample | paced at 1 kHz, CPU per tick | ratio to 1 thread (paced) |");
    println!("|---|---|---|---|");
    println!(
        "| sleep and wake only, 1 kHz | | {:.2} µs | |",
        paced_1khz_sleep_ns / 1e3
    );
    for (n, hot, paced) in [(1, hot_1, paced_1), (256, hot_256, paced_256)] {
        println!(
            "| {n} thread(s) | {:.2} µs | {:.2} µs | {:.2}x |",
            hot / 1e3,
            paced / 1e3,
            paced / paced_1
        );
    }
}
