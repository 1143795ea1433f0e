//! GPU readings off the tick path: a thread of its own opens NVML, calls the `GpuSource` every
//! `--gpu-every` and publishes its latest reading; each /proc tick takes the latest reading (a
//! pointer swap under a lock held for nothing else) and sums it over the tree's PIDs. A slow or
//! hung driver call delays GPU readings, never an RSS sample; NVML that does not answer within
//! `--gpu-timeout` at the start is given up on.
//!
//! A reading is: the GPUs, the processes on them (with the PIDs mapped into memmon's PID
//! namespace, `probe::pidns`), where accounting is on the accounting record of each of those
//! processes and the final record of each that ended since the reading before (NVML keeps
//! them), and the bytes the tree's GPU processes map from NVIDIA's device files.

use crate::format::meta::{GpuDeviceMeta, GpuEnd, GpuMeta};
use crate::model::gpu::{GpuTick, GpuUse};
use crate::probe::gpu::{GpuAccounting, GpuDevice, GpuError, GpuProcess, GpuSource};
use crate::probe::pidns::{Local, PidView};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
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
    /// `--gpu-timeout`: how long NVML may take to start and give a first reading.
    pub timeout: Duration,
    /// `--gpu-host-proc`: the host's /proc, seen from the container memmon runs in.
    pub host_proc: Option<PathBuf>,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            mode: GpuMode::Off,
            every: DEFAULT_GPU_EVERY,
            timeout: DEFAULT_GPU_TIMEOUT,
            host_proc: None,
        }
    }
}

/// `--gpu-every`'s default (BENCHMARKS.md, "GPU readings", says why).
pub const DEFAULT_GPU_EVERY: Duration = Duration::from_secs(1);

/// `--gpu-timeout`'s default: NVML's start on a machine whose GPUs are not kept initialised
/// (persistence mode off) takes seconds per GPU.
pub const DEFAULT_GPU_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the final record of an ended process stays in the readings (for the tick after
/// the one that saw it leave).
const ENDED_KEPT: Duration = Duration::from_secs(120);

/// How long a boundary row (a marker, a bench run's start or end) waits for its own GPU
/// reading, at most (and at most `--gpu-timeout`).
const BOUNDARY_WAIT: Duration = Duration::from_secs(2);

/// How long a process that left (NVML's list or the tree) while the driver still called its
/// accounting record running is asked again for its final record. The driver closes a record a
/// little after the process ends; a process that left the tree but lives on never closes it.
const FINISHING_KEPT: Duration = Duration::from_secs(30);

/// Opens the source and starts its thread as the mode says: `Ok(None)` when GPU memory is not
/// recorded; `Err` only for `Required`. The second value is a note for the user (why `Auto`
/// records no GPU although something was found).
pub fn open(opts: &GpuOptions) -> Result<(Option<GpuTracker>, Option<String>), GpuError> {
    if opts.mode == GpuMode::Off {
        return Ok((None, None));
    }
    let view = PidView::new(Path::new("/proc"), opts.host_proc.as_deref())
        .map_err(|e| GpuError::Namespace(e.to_string()))?;
    let started = GpuPoller::start(crate::probe::gpu::open, opts, view);
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

/// A process's accounting record on one GPU, with its PID in memmon's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuAccount {
    pub device: u32,
    pub pid: u32,
    pub record: GpuAccounting,
}

/// One reading of every GPU and every process on them.
#[derive(Debug, Clone, Default)]
pub struct GpuSnapshot {
    pub devices: Vec<GpuDevice>,
    /// The processes, with their PIDs in memmon's namespace (those of other namespaces left
    /// out).
    pub processes: Vec<GpuProcess>,
    /// Where accounting is on: the record of each running process, and the final record of
    /// each that ended lately.
    pub accounting: Vec<GpuAccount>,
    /// Processes whose PID memmon could not place in its namespace (`Local::Unknown`): then no
    /// process can be told to be the tree's or not.
    pub unplaced: u32,
    /// The bytes each of the tree's GPU processes maps from NVIDIA's device files (memmon's
    /// PIDs), read at this reading; `None` for one that could not be read.
    pub nvidia_maps: Vec<(u32, Option<u64>)>,
    /// How the processes were read (`GpuSource::process_call`).
    pub process_call: String,
}

#[derive(Debug)]
pub struct GpuReading {
    /// When the reading finished.
    pub at: Instant,
    /// How long the driver calls took (devices + processes + accounting).
    pub cost: Duration,
    pub result: Result<GpuSnapshot, GpuError>,
}

impl GpuReading {
    /// When the reading began: what it says is the driver's at that instant or later.
    pub fn started(&self) -> Instant {
        self.at - self.cost
    }
}

/// What the poller did, for the end record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuStats {
    pub readings: u64,
    pub failed: u64,
    pub total_cost: Duration,
    pub max_cost: Duration,
    /// How the last reading read the processes.
    pub process_call: String,
}

#[derive(Default)]
struct Shared {
    latest: Mutex<Option<Arc<GpuReading>>>,
    stats: Mutex<GpuStats>,
    stop: AtomicBool,
    /// A reading is wanted now (the recording's end).
    now: AtomicBool,
    /// The tree's PIDs (memmon's namespace), whose device-file mappings a reading reads.
    tree: Mutex<Vec<u32>>,
}

/// What the reading thread keeps from one reading to the next.
struct ReadState {
    view: PidView,
    proc_root: PathBuf,
    shared: Arc<Shared>,
    /// (device, NVML PID) of the processes running at the last reading on GPUs with
    /// accounting on, with their PID in memmon's namespace.
    running: HashMap<(u32, u32), u32>,
    /// Final records of processes that ended, and when they were read.
    ended: Vec<(GpuAccount, Instant)>,
    /// Processes gone since a reading whose record the driver still called running then:
    /// (device, NVML PID), memmon's PID, and when they were first missed. Asked again at each
    /// reading until the record closes (then in `ended`), or for `FINISHING_KEPT`.
    finishing: Vec<((u32, u32), u32, Instant)>,
}

impl ReadState {
    fn read(&mut self, source: &mut dyn GpuSource) -> GpuReading {
        let t0 = Instant::now();
        let result = self.snapshot(source);
        let at = Instant::now();
        GpuReading {
            at,
            cost: at - t0,
            result,
        }
    }

    fn snapshot(&mut self, source: &mut dyn GpuSource) -> Result<GpuSnapshot, GpuError> {
        let devices = source.devices()?;
        let listed = source.processes()?;
        let accounting_on: HashSet<u32> = devices
            .iter()
            .filter(|d| d.accounting == Some(true))
            .map(|d| d.index)
            .collect();
        let mut snap = GpuSnapshot {
            process_call: source.process_call(),
            ..GpuSnapshot::default()
        };
        // The tree's PIDs, for the accounting records and the mappings read: only the tree's
        // processes are asked about (a shared GPU server runs many others), but all of them
        // before the first tick has said which are the tree's.
        let tree: HashSet<u32> = self
            .shared
            .tree
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect();
        let mut running = HashMap::new();
        let places = self
            .view
            .place(&listed.iter().map(|p| p.pid).collect::<Vec<_>>());
        for (p, place) in listed.into_iter().zip(places) {
            let pid = match place {
                Local::Pid(pid) => pid,
                Local::NotOurs => continue,
                Local::Unknown => {
                    snap.unplaced += 1;
                    continue;
                }
            };
            if accounting_on.contains(&p.device) && (tree.is_empty() || tree.contains(&pid)) {
                running.insert((p.device, p.pid), pid);
                // An accounting call that fails leaves the process without a record: its GPU
                // peak is then unknown, not smaller.
                if let Ok(Some(record)) = source.accounting(p.device, p.pid) {
                    snap.accounting.push(GpuAccount {
                        device: p.device,
                        pid,
                        record,
                    });
                }
            }
            snap.processes.push(GpuProcess { pid, ..p });
        }
        // Processes gone since the last reading, and those gone earlier whose record was still
        // open: their final records (the accounting buffer keeps them), read once closed and
        // kept a while. A record still open goes in the reading as it stands (its maximum so
        // far), so that the rows keep the process until its final record comes.
        let now = Instant::now();
        let gone_now = self
            .running
            .iter()
            .filter(|(key, _)| !running.contains_key(*key))
            .map(|(&key, &pid)| (key, pid, now));
        // The two are disjoint: one still finishing is in no reading's running list.
        let mut asked: Vec<((u32, u32), u32, Instant)> = std::mem::take(&mut self.finishing)
            .into_iter()
            .chain(gone_now)
            .collect();
        asked.retain(|(key, _, _)| !running.contains_key(key) && accounting_on.contains(&key.0));
        for ((device, nvml_pid), pid, since) in asked {
            match source.accounting(device, nvml_pid) {
                Ok(Some(record)) if !record.running => self.ended.push((
                    GpuAccount {
                        device,
                        pid,
                        record,
                    },
                    now,
                )),
                Ok(None) => {} // no record: it used no GPU memory that the driver accounted
                still_open => {
                    if now.duration_since(since) < FINISHING_KEPT {
                        if let Ok(Some(record)) = still_open {
                            snap.accounting.push(GpuAccount {
                                device,
                                pid,
                                record,
                            });
                        }
                        self.finishing.push(((device, nvml_pid), pid, since));
                    }
                }
            }
        }
        self.running = running;
        self.ended
            .retain(|(_, at)| now.duration_since(*at) < ENDED_KEPT);
        // A PID that ended and runs again (reused) is the running one's.
        let ended: Vec<GpuAccount> = self
            .ended
            .iter()
            .map(|(a, _)| *a)
            .filter(|a| {
                !snap
                    .accounting
                    .iter()
                    .any(|r| r.pid == a.pid && r.device == a.device)
            })
            .collect();
        snap.accounting.extend(ended);
        let mut seen = HashSet::new();
        for p in &snap.processes {
            if tree.contains(&p.pid) && seen.insert(p.pid) {
                let maps = std::fs::read_to_string(self.proc_root.join(format!("{}/maps", p.pid)))
                    .ok()
                    .map(|m| crate::probe::gpu::nvidia_mapped_bytes(&m));
                snap.nvidia_maps.push((p.pid, maps));
            }
        }
        snap.devices = devices;
        Ok(snap)
    }
}

/// What the reading thread says when NVML has started (or not).
struct Started {
    name: &'static str,
    driver_version: Option<String>,
    devices: Vec<GpuDevice>,
    process_call: String,
}

/// The thread reading the GPUs; stopped (after its current call) when dropped.
pub struct GpuPoller {
    shared: Arc<Shared>,
    thread: std::thread::Thread,
    every: Duration,
    timeout: Duration,
    /// `nvml` or `fake`.
    pub source: &'static str,
    pub driver_version: Option<String>,
    /// The GPUs of the first reading.
    pub devices: Vec<GpuDevice>,
    /// How the first reading read the processes.
    pub process_call: String,
    /// How NVML's PIDs are matched with memmon's.
    pub pid_view: String,
}

impl GpuPoller {
    /// Starts the reading thread, which opens the source (`open`) and takes a first reading,
    /// and waits for both up to `opts.timeout`: the first tick has a reading, and a source that
    /// cannot read (or hangs) fails now, before the recording starts. Then the thread reads
    /// every `opts.every`.
    pub fn start<F>(open: F, opts: &GpuOptions, view: PidView) -> Result<GpuPoller, GpuError>
    where
        F: FnOnce() -> Result<Box<dyn GpuSource>, GpuError> + Send + 'static,
    {
        let shared = Arc::new(Shared::default());
        let every = opts.every;
        let pid_view = view.describe();
        let (tx, rx) = mpsc::channel::<Result<Started, GpuError>>();
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("memmon-gpu".into())
            .spawn(move || {
                let mut source = match open() {
                    Ok(src) => src,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let mut state = ReadState {
                    view,
                    proc_root: PathBuf::from("/proc"),
                    shared: s.clone(),
                    running: HashMap::new(),
                    ended: Vec::new(),
                    finishing: Vec::new(),
                };
                let first = state.read(&mut *source);
                let started = match &first.result {
                    Ok(snap) => Started {
                        name: source.name(),
                        driver_version: source.driver_version(),
                        devices: snap.devices.clone(),
                        process_call: snap.process_call.clone(),
                    },
                    Err(e) => {
                        let _ = tx.send(Err(e.clone()));
                        return;
                    }
                };
                publish(&s, first);
                if tx.send(Ok(started)).is_err() {
                    return; // given up on (it took longer than --gpu-timeout)
                }
                let mut next = Instant::now() + every;
                loop {
                    let now = Instant::now();
                    if now < next && !s.now.load(Ordering::Relaxed) {
                        std::thread::park_timeout(next - now);
                    }
                    if s.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if Instant::now() < next && !s.now.swap(false, Ordering::Relaxed) {
                        continue; // woken early (spuriously)
                    }
                    let r = state.read(&mut *source);
                    // A call slower than `every` is not caught up on: the next starts `every`
                    // after this one ended.
                    next = r.at + every;
                    publish(&s, r);
                }
            })
            .expect("cannot start the GPU reading thread");
        let started = match rx.recv_timeout(opts.timeout) {
            Ok(r) => r?,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                shared.stop.store(true, Ordering::Relaxed);
                return Err(GpuError::Timeout(crate::units::fmt_interval(opts.timeout)));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(GpuError::Layout {
                    call: "the GPU reading thread",
                    message: "ended before its first reading".into(),
                })
            }
        };
        Ok(GpuPoller {
            shared,
            thread: handle.thread().clone(),
            every,
            timeout: opts.timeout,
            source: started.name,
            driver_version: started.driver_version,
            devices: started.devices,
            process_call: started.process_call,
            pid_view,
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

    /// Tells the reading thread the tree's PIDs (whose device-file mappings it reads).
    fn set_tree(&self, pids: &[u32]) {
        let mut t = self.shared.tree.lock().unwrap_or_else(|e| e.into_inner());
        t.clear();
        t.extend_from_slice(pids);
    }

    /// Asks for a reading now and waits for it, at most `wait`: the reading after the
    /// recording's last row, or at a boundary row. Only a reading that began after the asking
    /// counts (one under way may have read the driver before). `None` when none came (a hung
    /// driver).
    pub fn read_now(&self, wait: Duration) -> Option<Arc<GpuReading>> {
        let asked = Instant::now();
        self.shared.now.store(true, Ordering::Relaxed);
        self.thread.unpark();
        let until = asked + wait;
        loop {
            if let Some(r) = self.latest().filter(|r| r.started() >= asked) {
                return Some(r);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn publish(shared: &Shared, r: GpuReading) {
    {
        let mut st = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
        st.readings += 1;
        st.failed += r.result.is_err() as u64;
        st.total_cost += r.cost;
        st.max_cost = st.max_cost.max(r.cost);
        if let Ok(s) = &r.result {
            if st.process_call != s.process_call {
                st.process_call = s.process_call.clone();
            }
        }
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

/// The tree's GPU memory in a snapshot: per-process bytes summed over the tree's PIDs (`pids`),
/// the used and total memory of the GPUs where a tree process holds memory, the tree's
/// accounting maxima (those of `departed`, processes that left the tree lately, included), and
/// the bytes its GPU processes map from NVIDIA's device files. The second value: what the user
/// should know of why a number is empty.
pub fn tree_use(
    snapshot: &GpuSnapshot,
    pids: &HashSet<u32>,
    departed: &HashSet<u32>,
) -> (GpuTick, Vec<String>) {
    let mut notes = Vec::new();
    let mut gpus: Vec<GpuUse> = Vec::new();
    let ours = || snapshot.processes.iter().filter(|p| pids.contains(&p.pid));
    for p in ours() {
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
            _ => {
                notes.push(format!(
                    "NVML gives no size for PID {} on GPU {} (NVML_VALUE_NOT_AVAILABLE{}): gpu_bytes is empty while it runs",
                    p.pid,
                    p.device,
                    if p.mig.is_some() {
                        "; a MIG instance, whose per-process sizes need root"
                    } else {
                        ""
                    }
                ));
                None // one unknown process makes the sum unknown, not smaller
            }
        };
    }
    gpus.sort_by_key(|g| g.index);
    let mut bytes = gpus
        .iter()
        .try_fold(0u64, |acc, g| Some(acc.saturating_add(g.tree_bytes?)));
    if snapshot.unplaced > 0 {
        notes.push(format!(
            "NVML lists {} GPU process(es) whose PIDs are not processes of memmon's PID namespace: the driver gives the host's PIDs, and memmon runs in a container; no GPU memory can be told to be the tree's (run memmon in the host's PID namespace, or give it the host's /proc with --gpu-host-proc)",
            snapshot.unplaced
        ));
        bytes = None;
    }
    let (used, total) = if gpus.is_empty() {
        (None, None)
    } else {
        (
            Some(gpus.iter().map(|g| g.used_bytes).sum()),
            Some(gpus.iter().map(|g| g.total_bytes).sum()),
        )
    };
    let (hwm_bytes, hwm_sum_bytes) = accounting_maxima(snapshot, pids, departed, &mut notes);
    let nvidia_mapped_bytes = ours()
        .map(|p| p.pid)
        .collect::<HashSet<_>>()
        .into_iter()
        .try_fold(0u64, |acc, pid| {
            let m = snapshot
                .nvidia_maps
                .iter()
                .find(|(p, _)| *p == pid)
                .and_then(|(_, b)| *b)?;
            Some(acc + m)
        });
    (
        GpuTick {
            bytes,
            device_used_bytes: used,
            device_total_bytes: total,
            gpus,
            hwm_bytes,
            hwm_sum_bytes,
            nvidia_mapped_bytes,
        },
        notes,
    )
}

/// The largest and the sum of the accounting maxima of the tree's processes in `snapshot`
/// (those running, and those of `departed` with a record): `None` when accounting is off on a
/// GPU a tree process uses, or one has no record (its peak would be missing, not zero).
fn accounting_maxima(
    snapshot: &GpuSnapshot,
    pids: &HashSet<u32>,
    departed: &HashSet<u32>,
    notes: &mut Vec<String>,
) -> (Option<u64>, Option<u64>) {
    if !snapshot.devices.iter().any(|d| d.accounting == Some(true)) {
        return (None, None);
    }
    let on = |device: u32| {
        snapshot
            .devices
            .iter()
            .any(|d| d.index == device && d.accounting == Some(true))
    };
    let (mut max, mut sum, mut known) = (0u64, 0u64, true);
    let mut counted: HashSet<(u32, u32)> = HashSet::new();
    for p in snapshot.processes.iter().filter(|p| pids.contains(&p.pid)) {
        if !counted.insert((p.device, p.pid)) {
            continue;
        }
        let record = snapshot
            .accounting
            .iter()
            .find(|a| a.device == p.device && a.pid == p.pid)
            .and_then(|a| a.record.max_bytes);
        match record {
            Some(m) if on(p.device) => {
                max = max.max(m);
                sum = sum.saturating_add(m);
            }
            _ if !on(p.device) => {
                notes.push(format!(
                    "NVML accounting is off on GPU {} (the tree's PID {} uses it): the GPU peak there is sampled only",
                    p.device, p.pid
                ));
                known = false;
            }
            _ => {
                notes.push(format!(
                    "NVML accounting has no record of PID {} on GPU {} (a process that started before accounting mode was turned on is not accounted): the tree's GPU high-water mark is empty while it runs",
                    p.pid, p.device
                ));
                known = false;
            }
        }
    }
    // The final records of processes that left, or of tree processes no longer listed (ended
    // after the tree was last read: the recording's end).
    for a in snapshot
        .accounting
        .iter()
        .filter(|a| departed.contains(&a.pid) || pids.contains(&a.pid))
    {
        if !counted.insert((a.device, a.pid)) {
            continue;
        }
        if let Some(m) = a.record.max_bytes {
            max = max.max(m);
            sum = sum.saturating_add(m);
        }
    }
    if known {
        (Some(max), Some(sum))
    } else {
        (None, None)
    }
}

/// The recorder's side: the poller, the tree's PIDs and those that left lately, and what was
/// told.
pub struct GpuTracker {
    pub poller: GpuPoller,
    /// The failure last told (`failure_kind`), `None` while readings succeed.
    told: Option<String>,
    /// Distinct failures seen, for the end record (at most 8).
    pub errors: Vec<String>,
    /// Notes told once each (a size NVML does not give, no accounting record...), at most 8.
    pub notes: Vec<String>,
    /// The last tick's PIDs, sorted.
    members: Vec<u32>,
    next: Vec<u32>,
    /// Processes that left the tree, since when: their final accounting record belongs in the
    /// rows until a reading after they left has given it.
    departed: Vec<(u32, Instant)>,
    pids: HashSet<u32>,
    gone: HashSet<u32>,
    /// The last tick's reading, PIDs and result: most ticks see the same reading and the same
    /// tree, and reuse it.
    last: Option<(Arc<GpuReading>, GpuTick)>,
    /// The largest accounting maximum of the tree read after the recording's last row.
    after_last_row: Option<u64>,
    /// The next row is a boundary whose own reading did not come: its marks are left empty.
    boundary_unread: bool,
    /// When a boundary's reading last failed to come: later boundaries do not wait again
    /// until some reading has come since (a hung driver stalls one row, not every one).
    boundary_missed: Option<Instant>,
    /// Whether a boundary without its reading was told.
    boundary_told: bool,
    /// The last tick's reading gave the tree an accounting mark.
    marked: bool,
}

impl GpuTracker {
    pub fn new(poller: GpuPoller) -> GpuTracker {
        GpuTracker {
            poller,
            told: None,
            errors: Vec::new(),
            notes: Vec::new(),
            members: Vec::new(),
            next: Vec::new(),
            departed: Vec::new(),
            pids: HashSet::new(),
            gone: HashSet::new(),
            last: None,
            after_last_row: None,
            boundary_unread: false,
            boundary_missed: None,
            boundary_told: false,
            marked: false,
        }
    }

    /// A boundary row (a marker, a bench run's start or end) of the tree `pids` is about to be
    /// taken: asks for a reading now and waits for it (at most `BOUNDARY_WAIT`), so that the
    /// row's accounting mark is the driver's at the boundary, not one up to `--gpu-every` old
    /// (a mark that rose in the span before would be seen first in the span after, and taken
    /// for its peak). Where no reading comes, the row's marks are left empty: neither span on
    /// its sides then has a GPU kernel peak known (`analysis::gpu`), rather than a wrong one.
    /// Without accounting marks (the last reading gave none) there is nothing to place: no
    /// reading is asked for.
    pub fn read_at_boundary(&mut self, pids: impl Iterator<Item = i32>) {
        if !self.marked {
            return;
        }
        let mut tree: Vec<u32> = pids.filter(|p| *p > 0).map(|p| p as u32).collect();
        tree.sort_unstable();
        tree.dedup();
        self.poller.set_tree(&tree);
        let hung = self
            .boundary_missed
            .is_some_and(|m| self.poller.latest().is_none_or(|r| r.started() < m));
        let wait = BOUNDARY_WAIT.min(self.poller.timeout);
        let came = !hung && self.poller.read_now(wait).is_some();
        if !came {
            self.boundary_missed.get_or_insert_with(Instant::now);
        } else {
            self.boundary_missed = None;
        }
        self.boundary_unread = !came;
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
                    accounting: d.accounting,
                })
                .collect(),
            driver_version: self.poller.driver_version.clone(),
            process_call: Some(self.poller.process_call.clone()),
            pid_namespace: Some(self.poller.pid_view.clone()),
        }
    }

    /// For the end record. Takes one more reading first (waiting at most a few seconds), for the
    /// accounting records of the tree's processes after its last row.
    pub fn end(&mut self) -> GpuEnd {
        let wait = self
            .poller
            .timeout
            .min(self.poller.every * 2 + Duration::from_secs(2));
        if let Some(r) = self.poller.read_now(wait) {
            if let Ok(snap) = &r.result {
                let members: HashSet<u32> = self.members.iter().copied().collect();
                let gone: HashSet<u32> = self.departed.iter().map(|d| d.0).collect();
                let (max, _) = accounting_maxima(snap, &members, &gone, &mut Vec::new());
                self.after_last_row = max;
            }
        }
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
            notes: self.notes.clone(),
            process_call: Some(st.process_call).filter(|c| !c.is_empty()),
            hwm_after_last_row_bytes: self.after_last_row,
        }
    }

    /// The tree's processes that mapped NVIDIA device files at the latest reading; `None`
    /// when that is not known of every one of the tree's GPU processes (no reading yet, or one
    /// not read yet).
    pub fn nvidia_pids(&self) -> Option<Vec<i32>> {
        let r = self.poller.latest()?;
        let snap = r.result.as_ref().ok()?;
        let mut out = Vec::new();
        for p in snap
            .processes
            .iter()
            .filter(|p| self.members.binary_search(&p.pid).is_ok())
        {
            match snap.nvidia_maps.iter().find(|(pid, _)| *pid == p.pid)?.1 {
                Some(b) if b > 0 && !out.contains(&(p.pid as i32)) => out.push(p.pid as i32),
                Some(_) => {}
                None => return None,
            }
        }
        Some(out)
    }

    /// The tick's GPU columns for the tree's PIDs (`pids`). The second value: what to tell the
    /// user, once per change (a failure, then a recovery) or once each (a note).
    pub fn tick(
        &mut self,
        pids: impl Iterator<Item = i32>,
        now: Instant,
    ) -> (GpuTick, Vec<String>) {
        self.next.clear();
        self.next.extend(pids.filter(|p| *p > 0).map(|p| p as u32));
        self.next.sort_unstable();
        self.next.dedup();
        if self.next != self.members {
            for &p in &self.members {
                if self.next.binary_search(&p).is_err() {
                    self.departed.push((p, now));
                }
            }
            std::mem::swap(&mut self.members, &mut self.next);
            self.poller.set_tree(&self.members);
            self.last = None;
        }
        let mut said = Vec::new();
        let unread = std::mem::take(&mut self.boundary_unread);
        if unread && !self.boundary_told {
            self.boundary_told = true;
            said.push(format!(
                "no GPU reading came within {} at a boundary row (a marker, a bench run's start or end): its GPU accounting mark is left empty, so the spans on its sides have no GPU kernel peak",
                crate::units::fmt_interval(BOUNDARY_WAIT.min(self.poller.timeout))
            ));
        }
        let Some(r) = self.poller.latest() else {
            return (GpuTick::default(), said);
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
                let tick = match &self.last {
                    Some((lr, lt)) if Arc::ptr_eq(lr, &r) && self.departed.is_empty() => lt.clone(),
                    _ => {
                        self.pids.clear();
                        self.pids.extend(self.members.iter().copied());
                        self.gone.clear();
                        self.gone.extend(self.departed.iter().map(|d| d.0));
                        let (t, notes) = tree_use(snap, &self.pids, &self.gone);
                        for n in notes {
                            if self.notes.len() < 8 && !self.notes.contains(&n) {
                                self.notes.push(n.clone());
                                said.push(n);
                            }
                        }
                        // A process that left is done with once a reading after it left has
                        // its final record, or has none of it (it used no GPU); the poller
                        // gives a record still open as it stands, for `FINISHING_KEPT` at most.
                        let stale = self.poller.stale_after().max(FINISHING_KEPT);
                        self.departed.retain(|&(pid, since)| {
                            let settled = r.at > since
                                && !snap
                                    .accounting
                                    .iter()
                                    .any(|a| a.pid == pid && a.record.running);
                            !settled && now.saturating_duration_since(since) < stale
                        });
                        self.last = Some((r.clone(), t.clone()));
                        t
                    }
                };
                let mut tick = tick;
                self.marked = tick.hwm_bytes.is_some();
                if unread {
                    tick.hwm_bytes = None;
                    tick.hwm_sum_bytes = None;
                }
                (tick, None)
            }
        };
        // One failure is told once, whichever driver call met it first: a GPU lost between
        // two calls of one reading fails the second call, and the first of the next.
        let key = match &r.result {
            Err(e) => Some(failure_kind(e)),
            Ok(_) => state.clone(),
        };
        if key != self.told {
            said.push(match &state {
                Some(e) => {
                    if self.errors.len() < 8 && !self.errors.contains(e) {
                        self.errors.push(e.clone());
                    }
                    format!("GPU reading failed: {e}; GPU columns are empty until it recovers")
                }
                None => "GPU readings recovered".to_string(),
            });
            self.told = key;
        }
        (tick, said)
    }
}

/// An NVML failure by its error code, not the call that met it (`GPU is lost (NVML error 15)`).
fn failure_kind(e: &crate::probe::gpu::GpuError) -> String {
    match e {
        crate::probe::gpu::GpuError::Nvml { code, message, .. } => {
            format!("{message} (NVML error {code})")
        }
        e => e.to_string(),
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
            accounting: Some(false),
        }
    }

    fn proc_(pid: u32, device: u32, used: Option<u64>) -> GpuProcess {
        GpuProcess {
            pid,
            device,
            used_bytes: used,
            mig: None,
        }
    }

    fn account(device: u32, pid: u32, max: u64, running: bool) -> GpuAccount {
        GpuAccount {
            device,
            pid,
            record: GpuAccounting {
                max_bytes: Some(max),
                running,
                start_unix_us: 0,
            },
        }
    }

    fn pids(p: &[u32]) -> HashSet<u32> {
        p.iter().copied().collect()
    }

    fn use_of(snap: &GpuSnapshot, p: &[u32]) -> GpuTick {
        tree_use(snap, &pids(p), &HashSet::new()).0
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
            ..Default::default()
        };
        let t = use_of(&snap, &[10, 11, 12]);
        assert_eq!(t.bytes, Some(30 * GIB));
        assert_eq!(t.device_used_bytes, Some(80 * GIB));
        assert_eq!(t.device_total_bytes, Some(282 * GIB));
        assert_eq!(t.gpus.len(), 2);
        assert_eq!(t.gpus[0].tree_bytes, Some(10 * GIB));
        assert_eq!(t.gpus[1].tree_bytes, Some(20 * GIB));
        assert_eq!(t.gpus[1].uuid, "GPU-1");
        // Accounting is off everywhere: no GPU high-water mark.
        assert_eq!((t.hwm_bytes, t.hwm_sum_bytes), (None, None));
    }

    #[test]
    fn a_tree_on_no_gpu_holds_zero_and_names_no_device() {
        let snap = GpuSnapshot {
            devices: vec![device(0, 30 * GIB)],
            processes: vec![proc_(99, 0, Some(9 * GIB))],
            ..Default::default()
        };
        let t = use_of(&snap, &[10]);
        assert_eq!(t.bytes, Some(0));
        assert_eq!(t.device_used_bytes, None);
        assert_eq!(t.nvidia_mapped_bytes, Some(0));
        assert!(t.gpus.is_empty());
    }

    #[test]
    fn an_unknown_per_process_size_makes_the_sum_unknown_not_smaller() {
        let snap = GpuSnapshot {
            devices: vec![device(0, 30 * GIB)],
            processes: vec![proc_(10, 0, Some(4 * GIB)), proc_(11, 0, None)],
            ..Default::default()
        };
        let (t, notes) = tree_use(&snap, &pids(&[10, 11]), &HashSet::new());
        assert_eq!(t.bytes, None);
        assert_eq!(t.device_used_bytes, Some(30 * GIB));
        assert!(
            notes[0].contains("no size for PID 11 on GPU 0"),
            "{notes:?}"
        );
    }

    #[test]
    fn pids_memmon_cannot_place_make_the_trees_gpu_memory_unknown() {
        let snap = GpuSnapshot {
            devices: vec![device(0, 30 * GIB)],
            processes: vec![proc_(10, 0, Some(4 * GIB))],
            unplaced: 2,
            ..Default::default()
        };
        let (t, notes) = tree_use(&snap, &pids(&[10]), &HashSet::new());
        assert_eq!(t.bytes, None);
        assert!(notes[0].contains("--gpu-host-proc"), "{notes:?}");
    }

    #[test]
    fn accounting_gives_the_largest_and_the_sum_of_the_trees_maxima() {
        let mut on = device(0, 30 * GIB);
        on.accounting = Some(true);
        let snap = GpuSnapshot {
            devices: vec![on.clone()],
            processes: vec![
                proc_(10, 0, Some(4 * GIB)),
                proc_(11, 0, Some(2 * GIB)),
                proc_(99, 0, Some(9 * GIB)),
            ],
            accounting: vec![
                account(0, 10, 12 * GIB, true),
                account(0, 11, 3 * GIB, true),
                account(0, 99, 50 * GIB, true), // not ours
                account(0, 12, 7 * GIB, false), // ended: counted while it is departed
            ],
            ..Default::default()
        };
        let t = use_of(&snap, &[10, 11]);
        assert_eq!(t.hwm_bytes, Some(12 * GIB));
        assert_eq!(t.hwm_sum_bytes, Some(15 * GIB));
        let (t, _) = tree_use(&snap, &pids(&[10, 11]), &pids(&[12]));
        assert_eq!(t.hwm_sum_bytes, Some(22 * GIB));
        // A tree process without a record: unknown, said why.
        let mut missing = snap.clone();
        missing.accounting.remove(1);
        let (t, notes) = tree_use(&missing, &pids(&[10, 11]), &HashSet::new());
        assert_eq!(t.hwm_bytes, None);
        assert!(notes[0].contains("no record of PID 11"), "{notes:?}");
        // On a GPU without accounting, the tree's process leaves the mark unknown.
        let mut two = snap.clone();
        two.devices.push(device(1, GIB));
        two.processes.push(proc_(10, 1, Some(GIB)));
        assert_eq!(use_of(&two, &[10, 11]).hwm_bytes, None);
        // No tree process on any GPU: zero.
        assert_eq!(use_of(&snap, &[5]).hwm_bytes, Some(0));
    }

    fn wait_for(mut f: impl FnMut() -> bool) {
        let until = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(Instant::now() < until, "condition not met in 30 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn opts(every: Duration) -> GpuOptions {
        GpuOptions {
            mode: GpuMode::Required,
            every,
            ..GpuOptions::default()
        }
    }

    fn start(state: &Arc<Mutex<FakeState>>, every: Duration) -> Result<GpuPoller, GpuError> {
        let s = state.clone();
        GpuPoller::start(
            move || Ok(Box::new(FakeGpu::new(s)) as Box<dyn GpuSource>),
            &opts(every),
            PidView::Host,
        )
    }

    #[test]
    fn tracker_follows_values_then_a_lost_gpu_then_recovery() {
        let state = Arc::new(Mutex::new(FakeState {
            devices: vec![device(0, 10 * GIB)],
            processes: vec![proc_(10, 0, Some(GIB))],
            ..Default::default()
        }));
        let mut tr = GpuTracker::new(start(&state, Duration::from_millis(10)).unwrap());
        let (t, notes) = tr.tick([10].into_iter(), Instant::now());
        assert_eq!((t.bytes, notes), (Some(GIB), vec![]));

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
        assert!(again.is_empty());

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

    /// The tree's GPU high-water mark at each tick of PID 10 alone, until no process that left
    /// is kept for its final record.
    fn hwm_until_settled(tr: &mut GpuTracker) -> Vec<Option<u64>> {
        let mut seen = Vec::new();
        wait_for(|| {
            seen.push(tr.tick([10].into_iter(), Instant::now()).0.hwm_bytes);
            tr.departed.is_empty()
        });
        seen
    }

    #[test]
    fn a_process_that_left_keeps_its_final_record_in_the_rows_until_a_reading_has_it() {
        let mut on = device(0, 10 * GIB);
        on.accounting = Some(true);
        let running = |max| GpuAccounting {
            max_bytes: Some(max),
            running: true,
            start_unix_us: 0,
        };
        let state = Arc::new(Mutex::new(FakeState {
            devices: vec![on],
            processes: vec![proc_(10, 0, Some(GIB)), proc_(11, 0, Some(GIB))],
            accounting: vec![(0, 10, running(2 * GIB)), (0, 11, running(GIB))],
            ..Default::default()
        }));
        let mut tr = GpuTracker::new(start(&state, Duration::from_millis(10)).unwrap());
        let (t, _) = tr.tick([10, 11].into_iter(), Instant::now());
        assert_eq!(
            (t.hwm_bytes, t.hwm_sum_bytes),
            (Some(2 * GIB), Some(3 * GIB))
        );
        // PID 11 spikes to 9 GiB between two readings and ends: its final record holds it.
        {
            let mut s = state.lock().unwrap();
            s.processes.pop();
            s.accounting[1].2 = GpuAccounting {
                max_bytes: Some(9 * GIB),
                running: false,
                start_unix_us: 0,
            };
        }
        let seen = hwm_until_settled(&mut tr);
        assert!(seen.contains(&Some(9 * GIB)), "{seen:?}");
        // Then it is out of the rows.
        wait_for(|| tr.tick([10].into_iter(), Instant::now()).0.hwm_bytes == Some(2 * GIB));
        let end = tr.end();
        assert_eq!(end.hwm_after_last_row_bytes, Some(2 * GIB));
    }

    #[test]
    fn a_final_record_the_driver_closes_after_the_process_left_is_still_read() {
        let mut on = device(0, 10 * GIB);
        on.accounting = Some(true);
        let record = |max, running| GpuAccounting {
            max_bytes: Some(max),
            running,
            start_unix_us: 0,
        };
        let state = Arc::new(Mutex::new(FakeState {
            devices: vec![on],
            processes: vec![proc_(10, 0, Some(GIB)), proc_(11, 0, Some(GIB))],
            accounting: vec![(0, 10, record(2 * GIB, true)), (0, 11, record(GIB, true))],
            ..Default::default()
        }));
        let mut tr = GpuTracker::new(start(&state, Duration::from_millis(10)).unwrap());
        tr.tick([10, 11].into_iter(), Instant::now());
        // PID 11 leaves NVML's list and the tree, but the driver still calls its record
        // running, at 3 GiB so far, for many readings.
        {
            let mut s = state.lock().unwrap();
            s.processes.pop();
            s.accounting[1].2 = record(3 * GIB, true);
        }
        let readings = tr.poller.stats().readings;
        wait_for(|| tr.poller.stats().readings >= readings + 5);
        let (t, _) = tr.tick([10].into_iter(), Instant::now());
        assert_eq!(t.hwm_bytes, Some(3 * GIB), "the open record as it stands");
        assert_eq!(tr.departed.len(), 1, "kept until its record closes");
        // Then the driver closes it at 9 GiB: the rows have it, and then let the process go.
        state.lock().unwrap().accounting[1].2 = record(9 * GIB, false);
        let seen = hwm_until_settled(&mut tr);
        assert!(seen.contains(&Some(9 * GIB)), "{seen:?}");
        assert_eq!(tr.end().hwm_after_last_row_bytes, Some(2 * GIB));
    }

    #[test]
    fn a_boundary_row_has_its_own_reading_or_no_mark_at_all() {
        let mut on = device(0, 10 * GIB);
        on.accounting = Some(true);
        let record = |max| GpuAccounting {
            max_bytes: Some(max),
            running: true,
            start_unix_us: 0,
        };
        let state = Arc::new(Mutex::new(FakeState {
            devices: vec![on],
            processes: vec![proc_(10, 0, Some(GIB))],
            accounting: vec![(0, 10, record(GIB))],
            ..Default::default()
        }));
        // Readings every 60 s: without a reading of its own, a row sees the first one.
        let mut tr = GpuTracker::new(start(&state, Duration::from_secs(60)).unwrap());
        assert_eq!(
            tr.tick([10].into_iter(), Instant::now()).0.hwm_bytes,
            Some(GIB)
        );
        state.lock().unwrap().accounting[0].2 = record(6 * GIB);
        assert_eq!(
            tr.tick([10].into_iter(), Instant::now()).0.hwm_bytes,
            Some(GIB)
        );
        tr.read_at_boundary([10].into_iter());
        let (t, said) = tr.tick([10].into_iter(), Instant::now());
        assert_eq!((t.hwm_bytes, said), (Some(6 * GIB), vec![]));
        // A driver that does not answer: the boundary's mark is empty (not the old one), said
        // once; the next boundary does not wait again while no reading has come.
        state.lock().unwrap().delay_ms = 60_000;
        let t0 = Instant::now();
        tr.read_at_boundary([10].into_iter());
        let (t, said) = tr.tick([10].into_iter(), Instant::now());
        assert_eq!(t.hwm_bytes, None);
        assert!(
            said[0].contains("no GPU reading came within 2s"),
            "{said:?}"
        );
        assert_eq!(
            tr.tick([10].into_iter(), Instant::now()).0.hwm_bytes,
            Some(6 * GIB)
        );
        tr.read_at_boundary([10].into_iter());
        let (t, said) = tr.tick([10].into_iter(), Instant::now());
        assert_eq!((t.hwm_bytes, said), (None, vec![]));
        assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
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
        let err = start(&state, Duration::from_secs(1)).err().unwrap();
        assert!(err.to_string().contains("Driver Not Loaded"), "{err}");
    }

    #[test]
    fn a_source_that_hangs_at_the_start_is_given_up_on_after_the_timeout() {
        let state = Arc::new(Mutex::new(FakeState {
            delay_ms: 60_000,
            ..Default::default()
        }));
        let s = state.clone();
        let t0 = Instant::now();
        let err = GpuPoller::start(
            move || Ok(Box::new(FakeGpu::new(s)) as Box<dyn GpuSource>),
            &GpuOptions {
                timeout: Duration::from_millis(300),
                ..opts(Duration::from_secs(1))
            },
            PidView::Host,
        )
        .err()
        .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
        assert_eq!(
            err.to_string(),
            "NVML did not answer within 300ms (--gpu-timeout): a hung driver call"
        );
    }

    #[test]
    fn a_slow_source_never_blocks_latest() {
        let state = Arc::new(Mutex::new(FakeState {
            devices: vec![device(0, 10 * GIB)],
            ..Default::default()
        }));
        let poller = start(&state, Duration::from_millis(1)).unwrap();
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
