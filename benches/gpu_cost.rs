//! What GPU memory costs a recording, with the fake GPU source (no GPU is needed): one reading
//! of 8 GPUs and 64 processes (the reading thread's work; a real reading is driver calls), and
//! the GPU part of a tick (take the latest reading, sum it over a tree of 10 PIDs).
//! `cargo bench --bench gpu_cost`; numbers in BENCHMARKS.md.

use memmon::probe::gpu::{FakeGpu, FakeState, GpuDevice, GpuProcess, GpuSource};
use memmon::sampler::gpu::{GpuPoller, GpuTracker};
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
            })
            .collect(),
        processes: (0..64)
            .map(|pid| GpuProcess {
                pid,
                device: pid % 8,
                used_bytes: Some(GIB),
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
    let poller = GpuPoller::start(Box::new(fake()), Duration::from_secs(3600)).unwrap();
    let mut tracker = GpuTracker::new(poller);
    let pids: Vec<i32> = (0..10).collect();
    let tick = per_call_us(n, || {
        black_box(tracker.tick(pids.iter().copied(), Instant::now()));
    });
    println!("tick's GPU part (latest reading, summed over 10 PIDs): {tick:.2} µs");
}
