//! CPU time per sample of one idle process, measured in the same run as the bare cost of the
//! /proc reads a sample needs (open+read+close of status and of the children file) and of
//! statm: in a hot loop, and paced at 100 samples/s as a recorder runs (each tick then pays a
//! wake-up with cold caches, for the bare reads and memmon alike).
//! Run: `cargo bench --bench sample_cost`. Results go in BENCHMARKS.md.

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
fn measure(mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t0 = thread_cpu();
            for _ in 0..ITERATIONS {
                f();
            }
            (thread_cpu() - t0).as_nanos() as f64 / ITERATIONS as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Runs `f` at 100 calls per second for 3 s, sleeping to absolute deadlines in between; returns
/// CPU nanoseconds per call, the sleeps' own wake-ups included.
fn measure_paced(mut f: impl FnMut()) -> f64 {
    let calls = 300u32;
    let t0 = thread_cpu();
    let start = std::time::Instant::now();
    for i in 1..=calls {
        f();
        let deadline = start + Duration::from_millis(10) * i;
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

fn main() {
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
    let held_statm_ns = measure(|| {
        held.read_statm(&mut buf).unwrap();
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
}
