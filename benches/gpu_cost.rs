//! What GPU memory costs a recording, with the in-process fake GPU source (no GPU is needed): one
//! reading of 8 GPUs and 64 processes with accounting on (the reading thread's work; a real
//! reading is driver calls), and the GPU part of a tick (take the latest reading, sum it and the
//! accounting maxima over a tree of 10 PIDs).
//! `cargo bench --bench gpu_cost`; numbers in BENCHMARKS.md.

use memmon::probe::gpu::{FakeGpu, FakeState, GpuAccounting, GpuDevice, GpuProcess, GpuSource};
use memmon::probe::pidns::PidView;
use memmon::sampler::gpu::{GpuOptions, GpuPoller, GpuTracker};
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;

fn fake() -> FakeGpu {
    let state = FakeState {
        devices: (0..8)
            .map(|index| GpuDevice {
                index,
                uuid: format!("GPU-{index}"),
                name: "Fake H200".into(),
                used_bytes: GIB,
                total_bytes: 141 * GIB,
                accounting: Some(true),
            })
            .collect(),
        processes: (0..64)
            .map(|pid| GpuProcess {
                pid,
                device: pid % 8,
                used_bytes: Some(GIB),
                mig: None,
            })
            .collect(),
        accounting: (0..64)
            .map(|pid| {
                let record = GpuAccounting {
                    max_bytes: Some(2 * GIB),
                    running: true,
                    start_unix_us: 0,
                };
                (pid % 8, pid, record)
            })
            .collect(),
        ..Default::default()
    };
    FakeGpu::new(Arc::new(Mutex::new(state)))
}

fn per_call_us(n: u32, mut f: impl FnMut()) -> f64 {
    let t0 = Instant::now();
    for _ in 0..n {
        f();
    }
    t0.elapsed().as_secs_f64() * 1e6 / n as f64
}

fn main() {
    let n = 100_000;
    let mut source = fake();
    let reading = per_call_us(n, || {
        black_box(source.devices().unwrap());
        black_box(source.processes().unwrap());
    });
    println!("fake GPU reading (8 GPUs, 64 processes): {reading:.2} µs");
    let opts = GpuOptions {
        every: Duration::from_secs(3600),
        ..GpuOptions::default()
    };
    let poller = GpuPoller::start(
        || Ok(Box::new(fake()) as Box<dyn GpuSource>),
        &opts,
        PidView::Host,
    )
    .unwrap();
    let mut tracker = GpuTracker::new(poller);
    let pids: Vec<i32> = (0..10).collect();
    let tick = per_call_us(n, || {
        black_box(tracker.tick(pids.iter().copied(), Instant::now()));
    });
    println!("tick's GPU part (latest reading, summed with accounting over 10 PIDs): {tick:.2} µs");
}
