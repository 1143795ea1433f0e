//! GPU readings off the tick path: a thread of its own calls the `GpuSource` every
//! `--gpu-every` and publishes its latest reading; each /proc tick takes the latest reading
//! (a pointer swap under a lock held for nothing else) and sums it over the tree's PIDs. A slow
//! or hung driver call delays GPU readings, never an RSS sample.

use crate::format::meta::{GpuDeviceMeta, GpuEnd, GpuMeta};
use crate::model::gpu::{GpuTick, GpuUse};
use crate::probe::gpu::{GpuDevice, GpuError, GpuProcess, GpuSource};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether a recording reads GPU memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GpuMode {
    /// `--no-gpu` (and the demo).
    #[default]
    Off,
    /// The default of `record` and `bench`: when NVML loads; a machine without the driver
    /// records no GPU columns, silently.
    Auto,
    /// `--gpu`: a GPU source that cannot be read is an error.
    Required,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuOptions {
    pub mode: GpuMode,
    /// `--gpu-every`: how often the reading thread calls the driver.
    pub every: Duration,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            mode: GpuMode::Off,
            every: DEFAULT_GPU_EVERY,
        }
    }
}

/// `--gpu-every`'s default (BENCHMARKS.md, "GPU readings", says why).
pub const DEFAULT_GPU_EVERY: Duration = Duration::from_secs(1);

/// Opens the source and starts its thread as the mode says: `Ok(None)` when GPU memory is not
/// recorded; `Err` only for `Required`. The second value is a note for the user (why `Auto`
/// records no GPU although something was found).
pub fn open(opts: &GpuOptions) -> Result<(Option<GpuTracker>, Option<String>), GpuError> {
    if opts.mode == GpuMode::Off {
        return Ok((None, None));
    }
    let started = crate::probe::gpu::open().and_then(|src| GpuPoller::start(src, opts.every));
    match (started, opts.mode) {
        (Ok(p), _) => Ok((Some(GpuTracker::new(p)), None)),
        (Err(e), GpuMode::Required) => Err(e),
        // No driver: nothing to say. A driver that fails is worth a line.
        (Err(GpuError::LibraryNotFound(_)), _) => Ok((None, None)),
        (Err(e), _) => Ok((
            None,
            Some(format!(
                "GPU memory not recorded: {e} (--no-gpu silences this)"
            )),
        )),
    }
}

/// One reading of every GPU and every process on them.
#[derive(Debug, Clone)]
pub struct GpuSnapshot {
    pub devices: Vec<GpuDevice>,
    pub processes: Vec<GpuProcess>,
}

#[derive(Debug)]
pub struct GpuReading {
    /// When the reading finished.
    pub at: Instant,
    /// How long the driver calls took (devices + processes).
    pub cost: Duration,
    pub result: Result<GpuSnapshot, GpuError>,
}

/// What the poller did, for the end record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuStats {
    pub readings: u64,
    pub failed: u64,
    pub total_cost: Duration,
    pub max_cost: Duration,
}

#[derive(Default)]
struct Shared {
    latest: Mutex<Option<Arc<GpuReading>>>,
    stats: Mutex<GpuStats>,
    stop: AtomicBool,
}

fn read(source: &mut dyn GpuSource) -> GpuReading {
    let t0 = Instant::now();
    let result = source.devices().and_then(|devices| {
        Ok(GpuSnapshot {
            devices,
            processes: source.processes()?,
        })
    });
    let at = Instant::now();
    GpuReading {
        at,
        cost: at - t0,
        result,
    }
}

/// The thread reading the GPUs; stopped (after its current call) when dropped.
pub struct GpuPoller {
    shared: Arc<Shared>,
    thread: std::thread::Thread,
    every: Duration,
    /// `nvml` or `fake`.
    pub source: &'static str,
    /// The GPUs of the first reading.
    pub devices: Vec<GpuDevice>,
}

impl GpuPoller {
    /// Takes a first reading here (so the first tick has one, and a source that cannot read
    /// fails now, before the recording starts), then reads every `every` on a thread.
    pub fn start(mut source: Box<dyn GpuSource>, every: Duration) -> Result<GpuPoller, GpuError> {
        let name = source.name();
        let first = read(&mut *source);
        let devices = match &first.result {
            Ok(s) => s.devices.clone(),
            Err(e) => return Err(e.clone()),
        };
        let shared = Arc::new(Shared::default());
        publish(&shared, first);
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("memmon-gpu".into())
            .spawn(move || {
                let mut next = Instant::now() + every;
                loop {
                    let now = Instant::now();
                    if now < next {
                        std::thread::park_timeout(next - now);
                    }
                    if s.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if Instant::now() < next {
                        continue; // woken early (spuriously)
                    }
                    let r = read(&mut *source);
                    // A call slower than `every` is not caught up on: the next starts `every`
                    // after this one ended.
                    next = r.at + every;
                    publish(&s, r);
                }
            })
            .expect("cannot start the GPU reading thread");
        Ok(GpuPoller {
            shared,
            thread: handle.thread().clone(),
            every,
            source: name,
            devices,
        })
    }

    /// The latest reading (never waits for one in progress).
    pub fn latest(&self) -> Option<Arc<GpuReading>> {
        self.shared
            .latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn every(&self) -> Duration {
        self.every
    }

    pub fn stats(&self) -> GpuStats {
        self.shared
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A reading older than this is not used: a hung driver leaves the GPU columns empty
    /// rather than repeating an old value.
    pub fn stale_after(&self) -> Duration {
        self.every * 3 + Duration::from_secs(10)
    }
}

fn publish(shared: &Shared, r: GpuReading) {
    {
        let mut st = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
        st.readings += 1;
        st.failed += r.result.is_err() as u64;
        st.total_cost += r.cost;
        st.max_cost = st.max_cost.max(r.cost);
    }
    *shared.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(r));
}

impl Drop for GpuPoller {
    fn drop(&mut self) {
        // Not joined: a driver call in progress may take long; the thread ends after it.
        self.shared.stop.store(true, Ordering::Relaxed);
        self.thread.unpark();
    }
}

/// The tree's GPU memory in a snapshot: per-process bytes summed over the tree's PIDs, and the
/// used and total memory of the GPUs where a tree process holds memory.
pub fn tree_use(snapshot: &GpuSnapshot, pids: &HashSet<u32>) -> GpuTick {
    let mut gpus: Vec<GpuUse> = Vec::new();
    for p in snapshot.processes.iter().filter(|p| pids.contains(&p.pid)) {
        let slot = match gpus.iter().position(|g| g.index == p.device) {
            Some(i) => i,
            None => {
                let Some(d) = snapshot.devices.iter().find(|d| d.index == p.device) else {
                    continue; // a process on a GPU the device list did not have
                };
                gpus.push(GpuUse {
                    index: d.index,
                    uuid: d.uuid.clone(),
                    name: d.name.clone(),
                    tree_bytes: Some(0),
                    used_bytes: d.used_bytes,
                    total_bytes: d.total_bytes,
                });
                gpus.len() - 1
            }
        };
        let g = &mut gpus[slot];
        g.tree_bytes = match (g.tree_bytes, p.used_bytes) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            _ => None, // one unknown process makes the sum unknown, not smaller
        };
    }
    gpus.sort_by_key(|g| g.index);
    let bytes = gpus
        .iter()
        .try_fold(0u64, |acc, g| Some(acc.saturating_add(g.tree_bytes?)));
    let (used, total) = if gpus.is_empty() {
        (None, None)
    } else {
        (
            Some(gpus.iter().map(|g| g.used_bytes).sum()),
            Some(gpus.iter().map(|g| g.total_bytes).sum()),
        )
    };
    GpuTick {
        bytes,
        device_used_bytes: used,
        device_total_bytes: total,
        gpus,
    }
}

/// The recorder's side: the poller, and which failure was last told.
pub struct GpuTracker {
    pub poller: GpuPoller,
    told: Option<String>,
    /// Distinct failures seen, for the end record (at most 8).
    pub errors: Vec<String>,
    pids: HashSet<u32>,
    /// The last tick's PIDs (sorted), reading and result: most ticks see the same reading and
    /// the same tree, and reuse it.
    last_pids: Vec<u32>,
    next_pids: Vec<u32>,
    last: Option<(Arc<GpuReading>, GpuTick)>,
}

impl GpuTracker {
    pub fn new(poller: GpuPoller) -> GpuTracker {
        GpuTracker {
            poller,
            told: None,
            errors: Vec::new(),
            pids: HashSet::new(),
            last_pids: Vec::new(),
            next_pids: Vec::new(),
            last: None,
        }
    }

    /// For the metadata written at the start.
    pub fn meta(&self) -> GpuMeta {
        GpuMeta {
            source: self.poller.source.to_string(),
            every_s: self.poller.every.as_secs_f64(),
            every: crate::units::fmt_interval(self.poller.every),
            devices: self
                .poller
                .devices
                .iter()
                .map(|d| GpuDeviceMeta {
                    index: d.index,
                    uuid: d.uuid.clone(),
                    name: d.name.clone(),
                    total_bytes: d.total_bytes,
                })
                .collect(),
        }
    }

    /// For the end record.
    pub fn end(&self) -> GpuEnd {
        let st = self.poller.stats();
        GpuEnd {
            readings: st.readings,
            failed_readings: st.failed,
            mean_reading_ms: if st.readings == 0 {
                0.0
            } else {
                st.total_cost.as_secs_f64() * 1e3 / st.readings as f64
            },
            max_reading_ms: st.max_cost.as_secs_f64() * 1e3,
            errors: self.errors.clone(),
        }
    }

    /// The tick's GPU columns for these PIDs. The second value is a failure to tell the user,
    /// once per change (a failure, then a recovery).
    pub fn tick(
        &mut self,
        pids: impl Iterator<Item = i32>,
        now: Instant,
    ) -> (GpuTick, Option<String>) {
        let Some(r) = self.poller.latest() else {
            return (GpuTick::default(), None);
        };
        let (tick, state) = match &r.result {
            Err(e) => (GpuTick::default(), Some(e.to_string())),
            Ok(_) if now.saturating_duration_since(r.at) > self.poller.stale_after() => (
                GpuTick::default(),
                Some(format!(
                    "no GPU reading for {:.0} s (a driver call is hanging)",
                    now.saturating_duration_since(r.at).as_secs_f64()
                )),
            ),
            Ok(snap) => {
                self.next_pids.clear();
                self.next_pids
                    .extend(pids.filter(|p| *p > 0).map(|p| p as u32));
                self.next_pids.sort_unstable();
                let tick = match &self.last {
                    Some((lr, lt)) if Arc::ptr_eq(lr, &r) && self.next_pids == self.last_pids => {
                        lt.clone()
                    }
                    _ => {
                        self.pids.clear();
                        self.pids.extend(self.next_pids.iter().copied());
                        let t = tree_use(snap, &self.pids);
                        self.last = Some((r.clone(), t.clone()));
                        std::mem::swap(&mut self.last_pids, &mut self.next_pids);
                        t
                    }
                };
                (tick, None)
            }
        };
        let note = if state != self.told {
            let note = match &state {
                Some(e) => {
                    if self.errors.len() < 8 && !self.errors.contains(e) {
                        self.errors.push(e.clone());
                    }
                    format!("GPU reading failed: {e}; GPU columns are empty until it recovers")
                }
                None => "GPU readings recovered".to_string(),
            };
            self.told = state;
            Some(note)
        } else {
            None
        };
        (tick, note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::gpu::{FakeError, FakeGpu, FakeState, NVML_ERROR_GPU_IS_LOST};

    const GIB: u64 = 1 << 30;

    fn device(index: u32, used: u64) -> GpuDevice {
        GpuDevice {
            index,
            uuid: format!("GPU-{index}"),
            name: "Fake H200".into(),
            used_bytes: used,
            total_bytes: 141 * GIB,
        }
    }

    fn proc_(pid: u32, device: u32, used: Option<u64>) -> GpuProcess {
        GpuProcess {
            pid,
            device,
            used_bytes: used,
        }
    }

    fn pids(p: &[u32]) -> HashSet<u32> {
        p.iter().copied().collect()
    }

    #[test]
    fn tree_use_sums_the_trees_pids_and_only_their_gpus() {
        let snap = GpuSnapshot {
            devices: vec![device(0, 30 * GIB), device(1, 50 * GIB), device(2, 9 * GIB)],
            processes: vec![
                proc_(10, 0, Some(4 * GIB)),
                proc_(11, 0, Some(6 * GIB)),
                proc_(11, 1, Some(20 * GIB)),
                proc_(99, 2, Some(9 * GIB)), // not ours: GPU 2 is not counted
                proc_(98, 1, Some(30 * GIB)), // not ours, on our GPU 1
            ],
        };
        let t = tree_use(&snap, &pids(&[10, 11, 12]));
        assert_eq!(t.bytes, Some(30 * GIB));
        assert_eq!(t.device_used_bytes, Some(80 * GIB));
        assert_eq!(t.device_total_bytes, Some(282 * GIB));
        assert_eq!(t.gpus.len(), 2);
        assert_eq!(t.gpus[0].tree_bytes, Some(10 * GIB));
        assert_eq!(t.gpus[1].tree_bytes, Some(20 * GIB));
        assert_eq!(t.gpus[1].uuid, "GPU-1");
    }

    #[test]
    fn a_tree_on_no_gpu_holds_zero_and_names_no_device() {
        let snap = GpuSnapshot {
            devices: vec![device(0, 30 * GIB)],
            processes: vec![proc_(99, 0, Some(9 * GIB))],
        };
        let t = tree_use(&snap, &pids(&[10]));
        assert_eq!(t.bytes, Some(0));
        assert_eq!(t.device_used_bytes, None);
        assert!(t.gpus.is_empty());
    }

    #[test]
    fn an_unknown_per_process_size_makes_the_sum_unknown_not_smaller() {
        let snap = GpuSnapshot {
            devices: vec![device(0, 30 * GIB)],
            processes: vec![proc_(10, 0, Some(4 * GIB)), proc_(11, 0, None)],
        };
        let t = tree_use(&snap, &pids(&[10, 11]));
        assert_eq!(t.bytes, None);
        assert_eq!(t.device_used_bytes, Some(30 * GIB));
    }

    fn wait_for(mut f: impl FnMut() -> bool) {
        let until = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(Instant::now() < until, "condition not met in 30 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn tracker_follows_values_then_a_lost_gpu_then_recovery() {
        let state = Arc::new(Mutex::new(FakeState {
            devices: vec![device(0, 10 * GIB)],
            processes: vec![proc_(10, 0, Some(GIB))],
            ..Default::default()
        }));
        let poller = GpuPoller::start(
            Box::new(FakeGpu::new(state.clone())),
            Duration::from_millis(10),
        )
        .unwrap();
        let mut tr = GpuTracker::new(poller);
        let (t, note) = tr.tick([10].into_iter(), Instant::now());
        assert_eq!((t.bytes, note), (Some(GIB), None));

        state.lock().unwrap().processes[0].used_bytes = Some(3 * GIB);
        wait_for(|| tr.tick([10].into_iter(), Instant::now()).0.bytes == Some(3 * GIB));

        state.lock().unwrap().error = Some(FakeError {
            code: NVML_ERROR_GPU_IS_LOST,
            message: None,
        });
        let mut notes = Vec::new();
        wait_for(|| {
            let (t, n) = tr.tick([10].into_iter(), Instant::now());
            notes.extend(n);
            t.bytes.is_none()
        });
        assert!(
            notes[0].contains("GPU is lost (NVML error 15)"),
            "{notes:?}"
        );
        // Told once, not at every tick.
        let (_, again) = tr.tick([10].into_iter(), Instant::now());
        assert_eq!(again, None);

        state.lock().unwrap().error = None;
        wait_for(|| {
            let (t, n) = tr.tick([10].into_iter(), Instant::now());
            notes.extend(n);
            t.bytes.is_some()
        });
        assert_eq!(notes.last().unwrap(), "GPU readings recovered");
        assert_eq!(tr.errors.len(), 1);
        assert!(tr.poller.stats().failed >= 1);
    }

    #[test]
    fn a_source_failing_at_the_start_fails_the_start() {
        let state = Arc::new(Mutex::new(FakeState {
            error: Some(FakeError {
                code: 9,
                message: Some("Driver Not Loaded".into()),
            }),
            ..Default::default()
        }));
        let err = GpuPoller::start(Box::new(FakeGpu::new(state)), Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(err.to_string().contains("Driver Not Loaded"), "{err}");
    }

    #[test]
    fn a_slow_source_never_blocks_latest() {
        let state = Arc::new(Mutex::new(FakeState {
            devices: vec![device(0, 10 * GIB)],
            ..Default::default()
        }));
        let poller = GpuPoller::start(
            Box::new(FakeGpu::new(state.clone())),
            Duration::from_millis(1),
        )
        .unwrap();
        // Every call from now on takes 2 s; taking the latest reading must stay immediate.
        state.lock().unwrap().delay_ms = 2000;
        std::thread::sleep(Duration::from_millis(50));
        let t0 = Instant::now();
        for _ in 0..1000 {
            assert!(poller.latest().is_some());
        }
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
    }
}
