//! Time to plot a long recording: synthetic CSV recordings of 1M and 10M samples (10 Hz, a
//! proving daemon's shape: 45 GiB idle, proofs to ~200 GiB, one 1-sample spike) drawn to SVG.
//! Run: `cargo bench --bench plot` (add `-- 1000000` for one size). Results go in BENCHMARKS.md.

use memmon::format::{Format, Output};
use memmon::model::sample::{Event, Sample};
use memmon::render::plot::{self, ImageFormat, PlotOptions};
use memmon::units::fmt_bytes;
use std::path::Path;
use std::time::Instant;

const GIB: u64 = 1 << 30;

/// Writes `n` samples at 10 Hz; returns the injected spike's size.
fn write_recording(path: &Path, n: u64) -> u64 {
    let mut out = Output::create(Some(path), Format::Csv, true, false).unwrap();
    let spike_at = n * 2 / 3 + 7;
    let spike = 231 * GIB + 12345 * 4096;
    for i in 0..n {
        let t = i as f64 * 0.1;
        let phase = t % 120.0;
        // 90 s proofs: a ramp to ~200 GiB, then 30 s idle.
        let rss = if phase < 90.0 {
            45 * GIB + (phase / 90.0 * 155.0 * GIB as f64) as u64
        } else {
            45 * GIB
        };
        let rss = if i == spike_at {
            spike
        } else {
            rss + (i % 7) * 4096
        };
        let event = match (i, phase) {
            (0, _) => Some(Event::Start),
            (_, p) if p == 0.0 && i % 12_000 == 0 => {
                Some(Event::Mark(format!("proof {}", i / 1200)))
            }
            _ => None,
        };
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
            hwm_bytes: if i >= spike_at { spike } else { 200 * GIB },
            hwm_sum_bytes: rss,
            event,
            ..Sample::default()
        };
        out.write_sample(&s).unwrap();
    }
    out.flush().unwrap();
    spike
}

fn main() {
    let sizes: Vec<u64> = match std::env::args().skip(1).find(|a| a.parse::<u64>().is_ok()) {
        Some(n) => vec![n.parse().unwrap()],
        None => vec![1_000_000, 10_000_000],
    };
    let dir = tempfile::tempdir().unwrap();
    for n in sizes {
        let rec = dir.path().join(format!("synthetic-{n}.csv"));
        let spike = write_recording(&rec, n);
        let bytes = std::fs::metadata(&rec).unwrap().len();
        let rounds = if n <= 1_000_000 { 5 } else { 2 };
        let mut best_read = f64::MAX;
        let mut best_total = f64::MAX;
        for _ in 0..rounds {
            let t0 = Instant::now();
            let trace = plot::load(&rec, &Default::default(), &PlotOptions::default()).unwrap();
            let read = t0.elapsed().as_secs_f64();
            let svg = dir.path().join("plot.svg");
            plot::draw(&[trace], &PlotOptions::default(), &svg, ImageFormat::Svg).unwrap();
            let total = t0.elapsed().as_secs_f64();
            best_read = best_read.min(read);
            best_total = best_total.min(total);
            let text = std::fs::read_to_string(&svg).unwrap();
            assert!(
                text.contains(&format!("peak {}", fmt_bytes(spike))),
                "the 1-sample spike is drawn and labelled"
            );
            // plot never replaces a file unasked: the next round draws a new one.
            std::fs::remove_file(&svg).unwrap();
        }
        let png = dir.path().join("plot.png");
        let t0 = Instant::now();
        plot::plot_files(
            std::slice::from_ref(&rec),
            &Default::default(),
            &PlotOptions::default(),
            &png,
            ImageFormat::Png,
        )
        .unwrap();
        let png_total = t0.elapsed().as_secs_f64();
        println!(
            "{n:>10} samples ({:.0} MiB CSV): SVG {best_total:.3} s (reading {best_read:.3} s, decimating and drawing {:.3} s), PNG {png_total:.3} s",
            bytes as f64 / (1 << 20) as f64,
            best_total - best_read,
        );
        std::fs::remove_file(&rec).unwrap();
    }
}
