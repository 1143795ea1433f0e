//! What an anatomy read costs: /proc/PID/maps (no page walk) against /proc/PID/smaps (a walk of
//! every page table) and smaps_rollup (PSS's read, the same walk), each read, parsed and grouped
//! as an anatomy is, on targets of about 100 and 10,000 mappings and on a large one (2 GiB
//! written in one mapping, and 2 GiB in 10,000 mappings). A target is a copy of this program
//! running memmon's workload steps.
//! Run: `cargo bench --bench anatomy_cost`. Results go in BENCHMARKS.md.

use memmon::analysis::anatomy;
use memmon::probe::maps;
use memmon::probe::proc::PssSource;
use memmon::probe::ProcFs;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The steps a copy of this program runs as a target (space-separated).
const TARGET_ENV: &str = "MEMMON_ANATOMY_TARGET";

/// CPU time (user + system) of this thread: what generating the file costs the kernel is
/// system time of the thread that reads it.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Starts a target running `steps`, and waits until it has done them.
fn target(steps: &str) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(TARGET_ENV, steps)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the target did not start");
    child
}

/// Wall and CPU microseconds per call of `f` (the mean over `n` calls, best of 3 rounds).
fn measure(n: u32, mut f: impl FnMut()) -> (f64, f64) {
    (0..3)
        .map(|_| {
            let (t0, c0) = (Instant::now(), thread_cpu());
            for _ in 0..n {
                f();
            }
            (
                t0.elapsed().as_secs_f64() * 1e6 / n as f64,
                (thread_cpu() - c0).as_secs_f64() * 1e6 / n as f64,
            )
        })
        .fold((f64::INFINITY, f64::INFINITY), |(w, c), (w2, c2)| {
            (w.min(w2), c.min(c2))
        })
}

/// One target's row: its mappings and RSS, then the cost of each read.
fn row(what: &str, steps: &str, n: u32) {
    let mut child = target(steps);
    let src: PssSource = ProcFs::default()
        .open(child.id() as i32)
        .unwrap()
        .pss_source()
        .unwrap();
    let mut buf = Vec::new();
    let p = maps::read(&src, true, &mut buf).unwrap();
    let rss: u64 = p.mappings.iter().map(|m| m.usage.unwrap().rss_bytes).sum();
    let groups = anatomy::group(std::slice::from_ref(&p)).len();
    let maps_bytes = {
        src.read_file("maps", &mut buf).unwrap();
        buf.len()
    };
    let smaps_bytes = {
        src.read_file("smaps", &mut buf).unwrap();
        buf.len()
    };
    let (maps_wall, maps_cpu) = measure(n, || {
        let p = maps::read(&src, false, &mut buf).unwrap();
        std::hint::black_box(anatomy::group(&[p]));
    });
    let (maps_read_wall, _) = measure(n, || src.read_file("maps", &mut buf).unwrap());
    let (smaps_wall, smaps_cpu) = measure(n, || {
        let p = maps::read(&src, true, &mut buf).unwrap();
        std::hint::black_box(anatomy::group(&[p]));
    });
    let (smaps_read_wall, _) = measure(n, || src.read_file("smaps", &mut buf).unwrap());
    let (rollup_wall, rollup_cpu) = measure(n, || {
        std::hint::black_box(src.read(&mut buf).unwrap());
    });
    child.kill().unwrap();
    let _ = child.wait();
    let ms = |us: f64| {
        if us >= 1000.0 {
            format!("{:.1} ms", us / 1000.0)
        } else {
            format!("{us:.0} µs")
        }
    };
    println!(
        "| {what} | {} mappings, {} groups, RSS {} MiB | maps {} KiB: **{}** ({} CPU; read alone {}) | smaps {} KiB: **{}** ({} CPU; read alone {}) | smaps_rollup: {} ({} CPU) |",
        p.mappings.len(),
        groups,
        rss >> 20,
        maps_bytes >> 10,
        ms(maps_wall),
        ms(maps_cpu),
        ms(maps_read_wall),
        smaps_bytes >> 10,
        ms(smaps_wall),
        ms(smaps_cpu),
        ms(smaps_read_wall),
        ms(rollup_wall),
        ms(rollup_cpu),
    );
}

fn main() {
    if let Ok(steps) = std::env::var(TARGET_ENV) {
        let mut steps: Vec<String> = steps.split(' ').map(String::from).collect();
        steps.extend(["say:ready".into(), "hold:1h".into()]);
        std::process::exit(memmon::workload::run(&steps).unwrap());
    }
    println!("| target | what it maps | maps, read + parsed + grouped | smaps, read + parsed + grouped | PSS's read |");
    println!("|---|---|---|---|---|");
    row("~100 mappings", "partitions:64:64KiB", 200);
    row("10,000 mappings", "partitions:10000:64KiB", 10);
    row("2 GiB in one mapping", "alloc:2GiB", 10);
    row("2 GiB in 10,000 mappings", "partitions:10000:208KiB", 10);
}
