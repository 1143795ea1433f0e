//! Throughput of `memmon compare`: two synthetic memmon CSV recordings of about 1 GiB each
//! (10 Hz, a proving daemon's shape) compared with `--above 150GiB`, in GB/s (10^9 bytes/s);
//! both files are read at once, as the command does.
//! Run: `cargo bench --bench compare` (add `-- 4` for 4 GiB files). Results go in BENCHMARKS.md.

use memmon::analysis::compare::{Comparison, Metric};
use memmon::format::many::read_parallel;
use memmon::format::{Format, InputSpec, Output};
use memmon::model::sample::{Event, Sample};
use memmon::render::compare_table::measure_file;
use memmon::render::compare_table::verdict_sentence;
use memmon::units::fmt_bytes;
use std::path::{Path, PathBuf};
use std::time::Instant;

const GIB: u64 = 1 << 30;

/// Writes samples at 10 Hz until the file holds `bytes`: 90 s proofs ramping from 45 GiB to
/// `peak`, then 30 s idle. Kept between runs (same name, same size, and this memmon's header:
/// one written by another version would be read by the general path, not the fast one).
fn write_recording(path: &Path, bytes: u64, peak: u64) {
    let ours = || {
        use std::io::BufRead;
        let mut first = String::new();
        std::fs::File::open(path)
            .map(std::io::BufReader::new)
            .and_then(|mut r| r.read_line(&mut first))
            .is_ok_and(|_| first.trim_end() == memmon::format::csv::header().trim_end())
    };
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= bytes) && ours() {
        return;
    }
    let mut out = Output::create(Some(path), Format::Csv, true, false).unwrap();
    let mut i: u64 = 0;
    loop {
        for _ in 0..1_000_000 {
            let t = i as f64 * 0.1;
            let phase = t % 120.0;
            let rss = if phase < 90.0 {
                45 * GIB + (phase / 90.0 * (peak - 45 * GIB) as f64) as u64
            } else {
                45 * GIB
            } + (i % 7) * 4096;
            let s = Sample {
                unix_ms: 1_771_372_328_313 + i * 100,
                elapsed_s: t,
                rss_bytes: rss,
                anon_bytes: rss - 2 * GIB,
                file_bytes: GIB,
                shmem_bytes: GIB,
                processes: 1,
                top_pid: 4242,
                top_rss_bytes: rss,
                hwm_bytes: peak,
                hwm_sum_bytes: peak,
                event: (i == 0).then_some(Event::Start),
                ..Sample::default()
            };
            out.write_sample(&s).unwrap();
            i += 1;
        }
        out.flush().unwrap();
        if std::fs::metadata(path).unwrap().len() >= bytes {
            return;
        }
    }
}

fn max_rss_bytes() -> u64 {
    // SAFETY: all zeroes is a valid rusage (plain integers).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid rusage for the kernel to fill.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(r, 0, "getrusage: {}", std::io::Error::last_os_error());
    ru.ru_maxrss as u64 * 1024
}

fn main() {
    let gib: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1.0);
    let bytes = (gib * GIB as f64) as u64;
    let dir = PathBuf::from("/tmp/memmon-bench-compare");
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join(format!("base-{gib}GiB.csv"));
    let new = dir.join(format!("new-{gib}GiB.csv"));
    let t0 = Instant::now();
    write_recording(&base, bytes, 200 * GIB);
    write_recording(&new, bytes, 205 * GIB);
    eprintln!(
        "recordings ready in {:.1} s: {} and {}",
        t0.elapsed().as_secs_f64(),
        base.display(),
        new.display()
    );
    let total = std::fs::metadata(&base).unwrap().len() + std::fs::metadata(&new).unwrap().len();

    let spec = InputSpec::default();
    let mut times = Vec::new();
    let mut last = None;
    for round in 0..3 {
        let t = Instant::now();
        // As `memmon compare` does: both files read at once, one per CPU.
        let mut runs = read_parallel(&[base.clone(), new.clone()], |p| {
            measure_file(p, &spec, Some(150 * GIB), true, |_| {}).map(|m| m.runs)
        });
        let n = runs.pop().unwrap().unwrap().remove(0);
        let b = runs.pop().unwrap().unwrap().remove(0);
        let c = Comparison::new(vec![b], vec![n], Some(150 * GIB), 1.0, &[]);
        let s = t.elapsed().as_secs_f64();
        println!(
            "round {round}: {:.2} s, {:.2} GB/s",
            s,
            total as f64 / s / 1e9
        );
        times.push(s);
        last = Some(c);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let c = last.unwrap();
    println!(
        "compare of {} + {} ({} samples each): median {:.2} s = {:.2} GB/s, best {:.2} GB/s; max RSS of this process {}",
        fmt_bytes(std::fs::metadata(&base).unwrap().len()),
        fmt_bytes(std::fs::metadata(&new).unwrap().len()),
        c.base.runs[0].samples,
        times[1],
        total as f64 / times[1] / 1e9,
        total as f64 / times[0] / 1e9,
        fmt_bytes(max_rss_bytes())
    );
    for m in [Metric::Peak, Metric::TimeAbove] {
        println!("  {}", verdict_sentence(&c, c.delta(m).unwrap()));
    }
}
