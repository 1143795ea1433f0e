//! Runs the benchmark. Against a daemon: one `Recorder` on its own thread for the whole bench;
//! before each run the kernel's high-water marks (VmHWM, the daemon's own cgroup peak) are reset,
//! after it they are read back, so each run's peak is exact whatever the interval. Without a
//! daemon: each run is recorded in launch mode and its peak is wait4's ru_maxrss of that child.

use super::{BenchOptions, BenchReport, DaemonInfo, Leftovers, PeakScope, PeakSource, RunResult};
use crate::analysis::summary::PssTrack;
use crate::exit::{CodedError, ExitCode};
use crate::format::meta::{EndInfo, EndReason};
use crate::format::{Format, InputFormat, InputSpec, Output};
use crate::model::sample::{Event, Sample};
use crate::probe::cgroup::{MemCgroup, PeakWatch};
use crate::probe::proc::clock_ticks_per_s;
use crate::probe::ProcHandle;
use crate::sampler::record::{
    unix_ms_now, Control, ControlHandle, Outcome, RecordObserver, RecordOptions, RecordStart,
    Recorder,
};
use crate::sampler::target::{self, shell_words, TargetSpec};
use crate::units::{fmt_bytes_signed, fmt_interval};
use anyhow::Context;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a bench's recordings show: only what was done to an `--append`ed output (the bench
/// prints its own progress and table, not the recorder's banner or summary).
struct BenchRecording;

impl RecordObserver for BenchRecording {
    fn on_start(&mut self, start: &RecordStart) {
        for note in start.notes {
            eprintln!("memmon: {note}");
        }
    }

    fn on_note(&mut self, note: &str) {
        eprintln!("memmon: {note}");
    }
}

/// Why the bench ended before all its runs.
#[derive(Debug)]
pub enum Stop {
    /// memmon was asked to stop (Ctrl-C, SIGTERM, SIGHUP).
    Signal(i32),
    /// The client failed, or the daemon died or restarted: exit 1 with this message.
    Failed(String),
    /// memmon itself failed (the recording could not be written).
    Error(anyhow::Error),
}

/// The runs measured, and why the bench stopped early if it did.
pub struct Done {
    pub report: BenchReport,
    pub stop: Option<Stop>,
}

/// How a client run ended.
struct ClientEnd {
    wall_s: f64,
    code: Option<i32>,
    signal: Option<i32>,
}

impl ClientEnd {
    fn ok(&self) -> bool {
        self.code == Some(0)
    }

    fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("killed by {}", crate::sampler::signals::name(s)),
            _ => "an unknown status".into(),
        }
    }
}

/// Runs the whole benchmark. An error here is one before any run (no daemon, a bad output).
pub fn run(opts: &BenchOptions) -> anyhow::Result<Done> {
    let mut report = BenchReport {
        memmon_version: env!("CARGO_PKG_VERSION").into(),
        mode: if opts.target.is_some() {
            "daemon"
        } else {
            "command"
        },
        daemon: None,
        client: shell_words(&opts.client),
        interval: fmt_interval(opts.interval),
        warmup_runs: opts.warmup,
        runs_requested: opts.runs,
        recording: None,
        runs: Vec::new(),
        stats: None,
        leak: None,
        notes: Vec::new(),
        complete: false,
        stopped: None,
    };
    let stop = match &opts.target {
        Some(spec) => Daemon::start(opts, spec, &mut report)?.bench(opts, &mut report),
        None => bench_command(opts, &mut report)?,
    };
    report.complete = stop.is_none() && report.runs.len() == opts.runs as usize;
    report.stopped = stop.as_ref().map(|s| match s {
        Stop::Signal(sig) => format!("interrupted by {}", crate::sampler::signals::name(*sig)),
        Stop::Failed(m) => m.clone(),
        Stop::Error(e) => format!("{e:#}"),
    });
    Ok(Done { report, stop })
}

fn say(opts: &BenchOptions, msg: impl AsRef<str>) {
    if !opts.quiet {
        eprintln!("memmon: {}", msg.as_ref());
    }
}

/// A directory for recordings nobody asked to keep; removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("memmon-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `--prepare` through `sh -c`; a failure stops the bench.
fn prepare(opts: &BenchOptions, run_env: &[(&str, String)]) -> Result<(), Stop> {
    let Some(cmd) = &opts.prepare else {
        return Ok(());
    };
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .envs(run_env.iter().map(|(k, v)| (*k, v.as_str())));
    if opts.stdout_is_data {
        c.stdout(stderr_stdio());
    }
    match c.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(Stop::Failed(format!(
            "--prepare '{cmd}' failed ({s}); the bench stopped"
        ))),
        Err(e) => Err(Stop::Failed(format!("cannot run --prepare '{cmd}': {e}"))),
    }
}

fn stderr_stdio() -> std::process::Stdio {
    match std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
        Ok(fd) => std::process::Stdio::from(fd),
        Err(_) => std::process::Stdio::null(),
    }
}

/// The environment a client run sees: MEMMON_BENCH_RUN=N (0 for a warmup run, which also gets
/// MEMMON_BENCH_WARMUP=K).
fn run_env(run: u32, warmup: Option<u32>) -> Vec<(&'static str, String)> {
    let mut v = vec![("MEMMON_BENCH_RUN", run.to_string())];
    if let Some(k) = warmup {
        v.push(("MEMMON_BENCH_WARMUP", k.to_string()));
    }
    v
}

/// The recorder's end, told to the bench's waits: set once when the recorder thread returns
/// (the daemon died, a signal), it wakes whatever waits on it through an eventfd.
pub struct Quit {
    flag: AtomicBool,
    wake: Option<OwnedFd>,
}

impl Quit {
    pub fn new() -> Quit {
        // SAFETY: eventfd has no memory-safety preconditions.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        Quit {
            flag: AtomicBool::new(false),
            // SAFETY: a fresh descriptor owned by nobody else.
            wake: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }),
        }
    }

    pub fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(fd) = &self.wake {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes from a valid u64 to our eventfd.
            unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Sleeps until `fd` is readable (when given), this is set (unless `set_seen`: it was, and
    /// the caller acted on it; the eventfd stays readable) or `timeout` passes; true when `fd`
    /// became readable. A stop signal reaches the recorder, which then ends and sets this.
    fn wait(&self, fd: Option<RawFd>, set_seen: bool, timeout: Option<Duration>) -> bool {
        let mut fds = [
            libc::pollfd {
                fd: fd.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: match (&self.wake, set_seen) {
                    (Some(f), false) => f.as_raw_fd(),
                    _ => -1,
                },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let tp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: fds and the timeout are valid for the call; negative fds are ignored.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, tp, std::ptr::null()) };
        r > 0 && fds[0].revents != 0
    }
}

impl Default for Quit {
    fn default() -> Self {
        Quit::new()
    }
}

/// Runs the client once and waits for it (on its pidfd: no wake-up until it exits, the
/// recorder ends or a stop signal comes); gives up waiting (and sends it SIGTERM) when `quit`
/// is set: the recorder ended (the daemon died, a signal). The bool is true then.
fn run_client(
    opts: &BenchOptions,
    env: &[(&str, String)],
    quit: &Quit,
) -> Result<(ClientEnd, bool), Stop> {
    let mut c = std::process::Command::new(&opts.client[0]);
    c.args(&opts.client[1..])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    if opts.stdout_is_data {
        c.stdout(stderr_stdio());
    }
    let t0 = Instant::now();
    let mut child = c
        .spawn()
        .map_err(|e| Stop::Failed(format!("cannot run the client '{}': {e}", opts.client[0])))?;
    let pid = child.id() as i32;
    // SAFETY: pidfd_open takes a pid and flags, no pointers.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    // SAFETY: a fresh descriptor owned by nobody else.
    let pidfd = (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw) });
    let mut quitted = false;
    let end = loop {
        match &pidfd {
            Some(fd) => {
                if quit.wait(Some(fd.as_raw_fd()), quitted, None) {
                    break Instant::now();
                }
            }
            None => match child.try_wait() {
                Ok(Some(_)) => break Instant::now(),
                // No pidfd (before Linux 5.3): look every millisecond.
                Ok(None) => {
                    quit.wait(None, quitted, Some(Duration::from_millis(1)));
                }
                Err(e) => {
                    return Err(Stop::Error(
                        anyhow::Error::new(e).context("cannot wait for the client"),
                    ))
                }
            },
        }
        if !quitted && quit.is_set() {
            quitted = true;
            // SAFETY: signalling our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    };
    let status = child
        .wait()
        .map_err(|e| Stop::Error(anyhow::Error::new(e).context("cannot wait for the client")))?;
    use std::os::unix::process::ExitStatusExt;
    let ce = ClientEnd {
        wall_s: (end - t0).as_secs_f64(),
        code: status.code(),
        signal: status.signal(),
    };
    Ok((ce, quitted))
}

/// Sleeps for the cooldown, waking early when `quit` is set.
fn cooldown(opts: &BenchOptions, quit: &Quit) {
    let Some(d) = opts.cooldown else { return };
    let until = Instant::now() + d;
    while Instant::now() < until && !quit.is_set() {
        quit.wait(None, false, Some(until - Instant::now()));
    }
}

fn progress(opts: &BenchOptions, r: &RunResult) {
    let over = r
        .peak_over_floor_bytes
        .map(|o| format!(", {} over the floor", fmt_bytes_signed(o as i64)))
        .unwrap_or_default();
    let exit = match (r.exit_code, r.exit_signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => crate::sampler::signals::name(s),
        _ => "exit ?".into(),
    };
    say(
        opts,
        format!(
            "run {}/{}: {}, {exit}, peak {} ({}){over}",
            r.run,
            opts.runs,
            super::table::fmt_wall(r.wall_s),
            super::table::peak_cell(r),
            r.peak_source.key()
        ),
    );
}

/// The peak to report for a run: the kernel's when it is known for the run and not below the
/// sampled one by more than the counters' batching (a tree's sampled sum can exceed its largest
/// process's exact peak), else sampled.
fn choose_peak(kernel: Option<u64>, source: PeakSource, sampled: u64) -> (u64, PeakSource) {
    crate::model::peak::choose_peak(
        kernel.map(|k| (k, source)),
        sampled,
        crate::model::peak::local_batching_bound_bytes(),
    )
}

/// A bench against a running daemon.
struct Daemon {
    handle: ProcHandle,
    control: ControlHandle,
    samples: mpsc::Receiver<Sample>,
    /// True once the recorder has returned.
    quit: Arc<Quit>,
    thread: Option<JoinHandle<anyhow::Result<Outcome>>>,
    cgroup: Option<MemCgroup>,
    spec: TargetSpec,
    hwm_reset_ok: bool,
    /// The recorder reads the kernel's exit records: a process that leaves the daemon's tree
    /// keeps its peak in the run it left in.
    exit_records: bool,
    /// The marker sources (socket, followed log); dropped at the end of the bench.
    _marks: crate::marks::MarkSources,
    _scratch: Option<Scratch>,
}

impl Daemon {
    fn start(
        opts: &BenchOptions,
        spec: &TargetSpec,
        report: &mut BenchReport,
    ) -> anyhow::Result<Daemon> {
        let (output, format, scratch) = match &opts.output {
            Some(p) if p.as_os_str() == "-" => (None, opts.format, None),
            Some(p) => (Some(p.clone()), opts.format, None),
            None => {
                let s = Scratch::new()?;
                (Some(s.0.join("series.jsonl")), Some(Format::Jsonl), Some(s))
            }
        };
        let ropts = RecordOptions {
            target: spec.clone(),
            interval: opts.interval,
            children: opts.children,
            output,
            format,
            force: opts.force,
            append: opts.append,
            pss: opts.pss.clone(),
            gpu: opts.gpu.clone(),
            wait: false,
            exit_with_target: true,
            duration: None,
            quiet: true,
            procfs: opts.procfs.clone(),
            phase_peaks: opts.phase_peaks,
            reset_peak: false,
            exit_records: opts.exit_records,
            capture_stdout: false,
            env: Vec::new(),
            cgroup: None,
            own_cgroup: Some(false),
            cgroupfs: opts.cgroupfs.clone(),
        };
        let marks = crate::marks::MarkSetup::prepare(&opts.marks)?;
        let mut rec = Recorder::start(ropts, Box::new(BenchRecording))?;
        let marks = marks.start(&mut rec, opts.stdout_is_data);
        let pid = rec.root_pid();
        let exit_records = rec.reads_exit_records();
        let handle = opts
            .procfs
            .open(pid)
            .with_context(|| format!("cannot read the daemon (PID {pid})"))?;
        let control = rec.control();
        let (tx, samples) = mpsc::channel();
        control.send(Control::Watch(tx));
        let quit = Arc::new(Quit::new());
        let q = quit.clone();
        let thread = std::thread::Builder::new()
            .name("memmon-recorder".into())
            .spawn(move || {
                let r = rec.run();
                q.set();
                r
            })
            .context("cannot start the recorder thread")?;

        let recording = match (&opts.output, scratch.is_some()) {
            (_, true) => None,
            (Some(p), _) if p.as_os_str() == "-" => Some("stdout".to_string()),
            (Some(p), _) => Some(crate::format::absolute(p).display().to_string()),
            (None, _) => None,
        };
        let children = if opts.children {
            " and its descendants"
        } else {
            " alone"
        };
        match &recording {
            Some(r) => say(
                opts,
                format!(
                    "bench: recording to {r} (run boundaries as run-start:N, run-end:N events)"
                ),
            ),
            None => say(
                opts,
                "bench: not keeping the time series (-o FILE keeps it)",
            ),
        }
        say(
            opts,
            format!(
                "bench: daemon {} {}: PID {} ({}){children}; interval {}; {} runs{} of: {}",
                spec.mode(),
                spec.spec(),
                pid,
                handle.comm,
                fmt_interval(opts.interval),
                opts.runs,
                if opts.warmup > 0 {
                    format!(" after {} warmup", opts.warmup)
                } else {
                    String::new()
                },
                report.client
            ),
        );
        let cgroup = match own_cgroup(opts, &handle) {
            Ok(cg) => {
                say(
                    opts,
                    format!(
                        "bench: the daemon has its own cgroup {} ({}): its peak is read per run",
                        cg.path,
                        cg.version.name()
                    ),
                );
                Some(cg)
            }
            Err(why) => {
                report.notes.push(format!("no cgroup peak: {why}"));
                say(opts, format!("bench: no cgroup peak: {why}"));
                None
            }
        };
        report.recording = recording;
        report.daemon = Some(DaemonInfo {
            pid,
            comm: handle.comm.clone(),
            spec: format!("{} {}", spec.mode(), spec.spec()),
            children: opts.children,
            cgroup: cgroup.as_ref().map(|c| c.path.clone()),
        });
        Ok(Daemon {
            handle,
            control,
            samples,
            quit,
            thread: Some(thread),
            cgroup,
            spec: spec.clone(),
            hwm_reset_ok: true,
            exit_records,
            _marks: marks,
            _scratch: scratch,
        })
    }

    fn bench(mut self, opts: &BenchOptions, report: &mut BenchReport) -> Option<Stop> {
        let stop = self.runs(opts, report);
        // End the recorder; its own verdict only matters if the runs went well.
        self.control.send(Control::Stop);
        let ended = self.join();
        match (stop, ended) {
            (Some(s), _) => Some(s),
            (None, Err(e)) => Some(Stop::Error(e)),
            (None, Ok(_)) => None,
        }
    }

    fn runs(&mut self, opts: &BenchOptions, report: &mut BenchReport) -> Option<Stop> {
        for k in 1..=opts.warmup {
            if let Err(s) = prepare(opts, &run_env(0, Some(k))) {
                return Some(s);
            }
            self.control
                .send(Control::Event(Event::Mark(format!("warmup:{k}"))));
            let (end, quitted) = match run_client(opts, &run_env(0, Some(k)), &self.quit) {
                Ok(r) => r,
                Err(s) => return Some(s),
            };
            if quitted || !self.alive() {
                return Some(self.ended(&format!("warmup run {k}")));
            }
            if !end.ok() && !opts.ignore_failure {
                return Some(Stop::Failed(format!(
                    "warmup run {k}: the client failed with {} ({}); --ignore-failure to go on",
                    end.describe(),
                    report.client
                )));
            }
            cooldown(opts, &self.quit);
        }
        if opts.warmup > 0 {
            // The warmup phase ends where the measured runs begin: a marker opens the phase
            // `runs`, so the last `warmup:K` phase does not run on over the measured runs.
            self.control
                .send(Control::Event(Event::Mark("runs".into())));
        }
        for n in 1..=opts.runs {
            let env = run_env(n, None);
            if let Err(s) = prepare(opts, &env) {
                return Some(s);
            }
            match self.one_run(opts, n, &env) {
                Ok((r, end)) => {
                    progress(opts, &r);
                    report.runs.push(r);
                    if !end.ok() && !opts.ignore_failure {
                        return Some(Stop::Failed(format!(
                            "run {n}: the client failed with {} ({}); the bench stopped after {n} of {} runs (--ignore-failure to go on)",
                            end.describe(),
                            report.client,
                            opts.runs
                        )));
                    }
                }
                Err(s) => return Some(s),
            }
            if !self.hwm_reset_ok && !report.notes.iter().any(|n| n.contains("VmHWM")) {
                report.notes.push(
                    "the daemon's VmHWM could not be reset (writing 5 to /proc/PID/clear_refs needs its owner or root): peaks are sampled, and can miss short spikes"
                        .into(),
                );
            }
            if n < opts.runs {
                cooldown(opts, &self.quit);
            }
        }
        None
    }

    /// One measured run: reset, run the client, read back.
    fn one_run(
        &mut self,
        opts: &BenchOptions,
        n: u32,
        env: &[(&str, String)],
    ) -> Result<(RunResult, ClientEnd), Stop> {
        let label = format!("run {n}");
        // The cgroup first, so the reset sample of VmHWM is taken after both.
        let mut watch: Option<PeakWatch> = None;
        if let Some(cg) = &self.cgroup {
            match cg.reset_peak() {
                Ok(w) => watch = Some(w),
                Err(e) => {
                    say(opts, format!("bench: no cgroup peak from now on: {e}"));
                    self.cgroup = None;
                }
            }
        }
        let (tx, rx) = mpsc::channel();
        let started_unix_ms = unix_ms_now();
        if !self
            .control
            .send(Control::ResetPeaks(Event::RunStart(n), tx))
        {
            return Err(self.ended(&label));
        }
        let failed = match rx.recv() {
            Ok(f) => f,
            Err(_) => return Err(self.ended(&label)),
        };
        if !failed.is_empty() {
            if self.hwm_reset_ok {
                say(
                    opts,
                    format!(
                        "bench: cannot reset VmHWM ({}); reporting sampled peaks",
                        failed.join("; ")
                    ),
                );
            }
            self.hwm_reset_ok = false;
        }
        let cpu_before = self.tree_cpu_ticks();
        let (end, quitted) = run_client(opts, env, &self.quit)?;
        if quitted {
            return Err(self.ended(&label));
        }
        let hz = clock_ticks_per_s();
        let cpu = cpu_before
            .zip(self.tree_cpu_ticks())
            .map(|((u0, s0), (u1, s1))| {
                (
                    u1.saturating_sub(u0) as f64 / hz,
                    s1.saturating_sub(s0) as f64 / hz,
                )
            });
        let (tx, rx) = mpsc::channel();
        if !self.control.send(Control::Probe(Event::RunEnd(n), tx)) {
            return Err(self.ended(&label));
        }
        let last = match rx.recv() {
            Ok(Some(s)) => s,
            Ok(None) | Err(_) => return Err(self.ended(&label)),
        };
        if !self.alive() {
            return Err(self.ended(&label));
        }
        let cgroup_peak = watch.as_mut().and_then(|w| w.read().ok());
        let samples = self.run_samples(n);
        let first = samples.first().cloned().unwrap_or_else(|| last.clone());
        let sampled = samples
            .iter()
            .map(|s| s.rss_bytes)
            .max()
            .unwrap_or(last.rss_bytes);
        let processes = samples
            .iter()
            .map(|s| s.processes)
            .max()
            .unwrap_or(last.processes);
        // Departures after the run-start row: those before it left before the reset.
        let departed = samples.iter().skip(1).map(|s| s.departed as u64).sum();
        // The largest VmHWM over the run's rows: with --phase-peaks the marks are reset at each
        // marker inside the run too, so the last row alone holds only the last phase's peak.
        let kernel = self.hwm_reset_ok.then(|| {
            samples
                .iter()
                .map(|s| s.hwm_bytes)
                .max()
                .unwrap_or(0)
                .max(last.hwm_bytes)
        });
        let (peak, source) = choose_peak(kernel, PeakSource::Vmhwm, sampled);
        let r = RunResult {
            run: n,
            started_unix_ms,
            wall_s: end.wall_s,
            exit_code: end.code,
            exit_signal: end.signal,
            peak_rss_bytes: peak,
            peak_source: source,
            kernel_peak_bytes: kernel,
            kernel_peak_scope: PeakScope::of_kernel_counter(processes, departed, self.exit_records),
            sampled_peak_bytes: sampled,
            samples: samples.len() as u64,
            cgroup_peak_bytes: cgroup_peak,
            rss_before_bytes: Some(first.rss_bytes),
            rss_after_bytes: Some(last.rss_bytes),
            peak_over_floor_bytes: Some(peak.saturating_sub(first.rss_bytes)),
            processes,
            departed,
            pss: {
                let mut t = PssTrack::default();
                samples.iter().for_each(|s| t.push(s));
                t.reads(first.elapsed_s, last.elapsed_s)
            },
            peak_gpu_bytes: samples.iter().filter_map(|s| s.gpu.bytes).max(),
            processes_after: Some(last.processes),
            leftovers: None,
            daemon_user_s: cpu.map(|c| c.0),
            daemon_system_s: cpu.map(|c| c.1),
            command_user_s: None,
            command_system_s: None,
        };
        Ok((r, end))
    }

    /// The samples of run `n`, from its `run-start:N` to its `run-end:N`, both included. Every
    /// sample up to the run-end one is already in the channel: the recorder sends it before it
    /// replies to the probe.
    fn run_samples(&self, n: u32) -> Vec<Sample> {
        let mut out = Vec::new();
        let mut inside = false;
        while let Ok(s) = self.samples.try_recv() {
            match &s.event {
                Some(Event::RunStart(m)) if *m == n => {
                    inside = true;
                    out.clear();
                }
                _ => {}
            }
            let is_end = matches!(&s.event, Some(Event::RunEnd(m)) if *m == n);
            if inside {
                out.push(s);
            }
            if is_end {
                break;
            }
        }
        out
    }

    /// The CPU time of the daemon's tree so far, in clock ticks, as the recorder's tree reads it
    /// (`Tree::cpu_ticks`); `None` when the recorder has ended.
    fn tree_cpu_ticks(&self) -> Option<(u64, u64)> {
        let (tx, rx) = mpsc::channel();
        if !self.control.send(Control::CpuTicks(tx)) {
            return None;
        }
        rx.recv().ok()
    }

    /// True while the daemon runs: the same process (PID and start time), and not a zombie.
    fn alive(&self) -> bool {
        let mut buf = Vec::new();
        self.handle.is_alive() && self.handle.read_status(&mut buf).is_ok_and(|m| m.has_mm)
    }

    fn join(&mut self) -> anyhow::Result<Outcome> {
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the recorder thread panicked"))),
            None => Err(anyhow::anyhow!("the recorder has already ended")),
        }
    }

    /// The recorder has ended (or the daemon is gone) during `what`: says why.
    fn ended(&mut self, what: &str) -> Stop {
        let mut gone = !self.alive();
        self.control.send(Control::Stop);
        let outcome = self.join();
        if let Ok(o) = &outcome {
            if let ExitCode::Signal(sig) = o.exit {
                return Stop::Signal(sig);
            }
            gone |= o
                .summary
                .end
                .as_ref()
                .is_some_and(|e| e.reason == EndReason::TargetExited);
        }
        if gone {
            let pid = self.handle.pid;
            let mut msg = format!(
                "the daemon (PID {pid}, {}) exited during {what}",
                self.handle.comm
            );
            let now = match &self.spec {
                TargetSpec::Pidfile(p) => target::read_pidfile(p).ok(),
                TargetSpec::Name(re) => target::find_by_name(&crate::probe::ProcFs::default(), re)
                    .ok()
                    .flatten()
                    .map(|r| r.handle.pid),
                _ => None,
            };
            if let Some(new) = now.filter(|&p| p != pid) {
                msg.push_str(&format!(
                    " and restarted as PID {new}: a restarted daemon is a new process"
                ));
            }
            msg.push_str("; the bench stopped, the runs measured before are kept");
            return Stop::Failed(msg);
        }
        match outcome {
            Err(e) => Stop::Error(e.context(format!("the recording stopped during {what}"))),
            Ok(_) => Stop::Failed(format!("the recording stopped during {what}")),
        }
    }
}

/// The daemon's memory cgroup, if it is its own: not the root, and every process in it (and in
/// the cgroups below) is the daemon or one of its descendants.
fn own_cgroup(opts: &BenchOptions, daemon: &ProcHandle) -> Result<MemCgroup, String> {
    let cg = opts
        .cgroupfs
        .of_pid(opts.procfs.root(), daemon.pid)
        .ok_or_else(|| "the daemon's memory cgroup was not found".to_string())?;
    if cg.is_root() {
        return Err("the daemon is in the root cgroup".into());
    }
    if let Some(other) = cg
        .foreign_process(&opts.procfs, daemon.pid)
        .map_err(|e| e.to_string())?
    {
        return Err(format!(
            "the daemon's cgroup {} also holds PID {other}, which is not the daemon's (give the daemon a cgroup of its own, e.g. systemd-run --scope, to get its cgroup peak)",
            cg.path
        ));
    }
    if !cg.peak_file().exists() {
        return Err(format!(
            "{} does not exist (cgroup v2 memory.peak needs Linux 5.19)",
            cg.peak_file().display()
        ));
    }
    Ok(cg)
}

fn descends_from(opts: &BenchOptions, mut pid: i32, root: i32) -> bool {
    for _ in 0..64 {
        if pid == root {
            return true;
        }
        match opts.procfs.open(pid).ok().and_then(|h| h.ppid()) {
            Some(pp) if pp > 0 => pid = pp,
            _ => return false,
        }
    }
    false
}

/// How long a run's leftovers get between SIGTERM and SIGKILL.
const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

/// memmon's live descendants other than itself, with their RSS: in a command bench, once the
/// client has been reaped, these are what the run left behind (memmon is their subreaper).
fn descendants(opts: &BenchOptions) -> Vec<(i32, String, u64)> {
    let me = std::process::id() as i32;
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for pid in opts.procfs.all_pids().unwrap_or_default() {
        if pid == me || !descends_from(opts, pid, me) {
            continue;
        }
        let Ok(h) = opts.procfs.open(pid) else {
            continue;
        };
        // A zombie has no memory and only waits to be reaped.
        if let Some(m) = h.read_status(&mut buf).ok().filter(|m| m.has_mm) {
            out.push((pid, h.comm.clone(), m.rss));
        }
    }
    out
}

/// Reaps every exited child of memmon without blocking.
fn reap_exited() {
    loop {
        let mut status = 0;
        // SAFETY: reaping any exited child; WNOHANG never blocks.
        if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } <= 0 {
            return;
        }
    }
}

/// Ends what a run left behind, so that the next run owns only what it starts: the processes
/// still alive below memmon once the client has exited get SIGTERM, and SIGKILL after
/// `LEFTOVER_GRACE`; all are reaped. Returns what was found, or `None` when nothing was left.
fn end_leftovers(opts: &BenchOptions) -> Option<Leftovers> {
    reap_exited();
    let found = descendants(opts);
    if found.is_empty() {
        return None;
    }
    let signal_all = |sig: i32| {
        for (pid, _, _) in descendants(opts) {
            // SAFETY: signalling memmon's own descendant.
            unsafe { libc::kill(pid, sig) };
        }
    };
    signal_all(libc::SIGTERM);
    let mut deadline = Instant::now() + LEFTOVER_GRACE;
    let mut killed = false;
    loop {
        reap_exited();
        if descendants(opts).is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            if killed {
                break; // unkillable (in D state): reported, not waited on forever
            }
            signal_all(libc::SIGKILL);
            killed = true;
            deadline = Instant::now() + LEFTOVER_GRACE;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let still = descendants(opts).len() as u32;
    Some(Leftovers {
        processes: found.len() as u32,
        rss_bytes: found.iter().map(|f| f.2).sum(),
        pids: found.iter().map(|f| f.0).collect(),
        commands: found.iter().map(|f| f.1.clone()).collect(),
        needed_sigkill: killed,
        still_alive: still,
    })
}

/// A bench of a command: each run is launched and recorded on its own; its exact peak is
/// wait4's ru_maxrss of that very child. With `-o`, the runs' samples go into one recording,
/// each run between its `run-start:N` and `run-end:N` rows.
fn bench_command(opts: &BenchOptions, report: &mut BenchReport) -> anyhow::Result<Option<Stop>> {
    let scratch = Scratch::new()?;
    let mut merged = match &opts.output {
        None => None,
        Some(p) => {
            let path = (p.as_os_str() != "-").then_some(p.as_path());
            let format = opts
                .format
                .or(path.map(Format::from_path))
                .unwrap_or(Format::Csv);
            let out =
                Output::create(path, format, opts.force, opts.append).map_err(|e| match e {
                    crate::format::OutputError::Exists(_)
                    | crate::format::OutputError::CannotAppend(..) => {
                        CodedError::new(ExitCode::Usage, e.to_string())
                    }
                    other => anyhow::Error::new(other),
                })?;
            report.recording = Some(out.describe());
            Some(Merged {
                out,
                meta_written: false,
                offset_s: 0.0,
                missed: 0,
                t0: Instant::now(),
                samples: 0,
            })
        }
    };
    match &report.recording {
        Some(r) => say(
            opts,
            format!("bench: recording to {r} (run boundaries as run-start:N, run-end:N events)"),
        ),
        None => say(
            opts,
            "bench: not keeping the time series (-o FILE keeps it)",
        ),
    }
    say(
        opts,
        format!(
            "bench: {} runs{} of: {}; each run's peak from wait4 (ru_maxrss of the command), sampled every {}",
            opts.runs,
            if opts.warmup > 0 { format!(" after {} warmup", opts.warmup) } else { String::new() },
            report.client,
            fmt_interval(opts.interval)
        ),
    );
    crate::sampler::signals::install();
    let total = opts.warmup + opts.runs;
    let mut stop = None;
    for i in 1..=total {
        let warm = (i <= opts.warmup).then_some(i);
        let n = i.saturating_sub(opts.warmup);
        if let Some(a) = crate::sampler::signals::take().first() {
            stop = Some(Stop::Signal(a.sig));
            break;
        }
        let env = run_env(n, warm);
        if let Err(s) = prepare(opts, &env) {
            stop = Some(s);
            break;
        }
        let file = scratch.0.join(format!("run-{i}.csv"));
        let ropts = RecordOptions {
            target: TargetSpec::Command(opts.client.clone()),
            interval: opts.interval,
            children: opts.children,
            output: Some(file.clone()),
            format: Some(Format::Csv),
            force: true,
            append: false,
            pss: opts.pss.clone(),
            gpu: opts.gpu.clone(),
            wait: false,
            exit_with_target: false,
            duration: None,
            quiet: true,
            procfs: opts.procfs.clone(),
            phase_peaks: false,
            reset_peak: false,
            exit_records: opts.exit_records,
            // When stdout carries data, the command's output goes to stderr instead.
            capture_stdout: opts.stdout_is_data,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            cgroup: None,
            own_cgroup: opts.own_cgroup,
            cgroupfs: opts.cgroupfs.clone(),
        };
        let started_unix_ms = unix_ms_now();
        let t0 = Instant::now();
        let outcome = match Recorder::start(ropts, Box::new(BenchRecording)).and_then(|mut r| {
            let copier = r.take_command_stdout().map(|mut out| {
                std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::stderr()))
            });
            let outcome = r.run();
            if let Some(c) = copier {
                let _ = c.join();
            }
            outcome
        }) {
            Ok(o) => o,
            Err(e) => {
                stop = Some(
                    match e.chain().find_map(|c| c.downcast_ref::<CodedError>()) {
                        Some(c) => Stop::Failed(format!("cannot run the client: {}", c.message)),
                        None => Stop::Error(e),
                    },
                );
                break;
            }
        };
        let wall_s = t0.elapsed().as_secs_f64();
        let what = match warm {
            Some(k) => format!("warmup run {k}"),
            None => format!("run {n}"),
        };
        // What the run left behind is ended now, before the next run starts.
        let leftovers = end_leftovers(opts);
        if let Some(l) = &leftovers {
            let msg = format!("{what} {}", l.describe());
            say(opts, format!("bench: {msg}"));
            report.notes.push(msg);
        }
        let end = outcome.summary.end.clone().unwrap_or_default();
        let ce = ClientEnd {
            wall_s,
            code: end.exit_code,
            signal: end.exit_signal,
        };
        if let Some(sig) = ce
            .signal
            .filter(|s| [libc::SIGINT, libc::SIGTERM, libc::SIGHUP].contains(s))
        {
            stop = Some(Stop::Signal(sig));
            break;
        }
        if warm.is_none() {
            let sampled = outcome.summary.peak_rss_bytes;
            // In a cgroup of memmon's own, the run's tree had it alone from before its first
            // instruction: its peak is the tree's exact peak (each page once, page cache in).
            let own_cgroup_peak = end
                .cgroup
                .as_ref()
                .filter(|c| c.own)
                .and_then(|c| c.peak_bytes);
            // Else the kernel's peak of the largest process: wait4's ru_maxrss, or a VmHWM
            // above it (an orphan memmon adopted, a child whose exit record was read).
            let summary = &outcome.summary;
            let (kernel, (peak, source), scope) = match own_cgroup_peak {
                Some(p) => (Some(p), (p, PeakSource::Cgroup), PeakScope::Tree),
                None => (
                    summary.kernel_peak_rss_bytes,
                    choose_peak(
                        summary.kernel_peak_rss_bytes,
                        summary.kernel_peak_source.unwrap_or(PeakSource::RuMaxrss),
                        sampled,
                    ),
                    summary.kernel_peak_scope,
                ),
            };
            let r = RunResult {
                run: n,
                started_unix_ms,
                wall_s,
                exit_code: ce.code,
                exit_signal: ce.signal,
                peak_rss_bytes: peak,
                peak_source: source,
                kernel_peak_bytes: kernel,
                kernel_peak_scope: scope,
                sampled_peak_bytes: sampled,
                samples: outcome.summary.samples,
                cgroup_peak_bytes: own_cgroup_peak,
                rss_before_bytes: None,
                rss_after_bytes: None,
                peak_over_floor_bytes: None,
                processes: outcome.summary.max_processes,
                departed: outcome.summary.departed,
                pss: outcome.summary.pss,
                peak_gpu_bytes: outcome.summary.gpu.as_ref().map(|g| g.peak_gpu_bytes),
                processes_after: None,
                leftovers,
                daemon_user_s: None,
                daemon_system_s: None,
                command_user_s: end.rusage_user_s,
                command_system_s: end.rusage_system_s,
            };
            progress(opts, &r);
            report.runs.push(r);
            if let Some(m) = merged.as_mut() {
                if let Err(e) = m.add_run(&file, n, t0) {
                    stop = Some(Stop::Error(e));
                    break;
                }
            }
        }
        if !ce.ok() && !opts.ignore_failure {
            stop = Some(Stop::Failed(format!(
                "{what}: the command failed with {} ({}); the bench stopped (--ignore-failure to go on)",
                ce.describe(),
                report.client
            )));
            break;
        }
        if i < total {
            cooldown(opts, &Quit::new());
        }
    }
    if let Some(m) = merged {
        let reason = match &stop {
            None => EndReason::Stopped,
            Some(Stop::Signal(_)) => EndReason::Signal,
            Some(_) => EndReason::Error,
        };
        if let Err(e) = m.finish(reason) {
            return Ok(Some(stop.unwrap_or(Stop::Error(e))));
        }
    }
    Ok(stop)
}

/// The one recording of a command bench: each run's samples, moved onto one time line.
struct Merged {
    out: Output,
    meta_written: bool,
    /// Seconds from the bench's start to the current run's.
    offset_s: f64,
    missed: u64,
    t0: Instant,
    samples: u64,
}

impl Merged {
    fn add_run(&mut self, file: &Path, n: u32, run_t0: Instant) -> anyhow::Result<()> {
        self.offset_s = run_t0.duration_since(self.t0).as_secs_f64();
        let mut rows: Vec<Sample> = Vec::new();
        let spec = InputSpec {
            format: InputFormat::Auto,
            columns: None,
        };
        let info = crate::format::read_input(file, &spec, |s| rows.push(s.clone()))
            .with_context(|| format!("cannot read back run {n}'s samples"))?;
        if !self.meta_written {
            if let Some(mut meta) = info.meta.clone() {
                meta.sources.push(format!("memmon bench: one process tree per run; rows between run-start:N and run-end:N; target PID of run {n}"));
                self.out.write_meta(&meta)?;
            }
            self.meta_written = true;
        }
        let run_missed = rows.last().map_or(0, |s| s.missed_ticks);
        let count = rows.len();
        for (i, mut s) in rows.into_iter().enumerate() {
            s.elapsed_s += self.offset_s;
            s.missed_ticks += self.missed;
            if i == 0 {
                if n == 1 && self.samples == 0 {
                    s.event = Some(Event::Start);
                    self.write(&s)?;
                }
                s.event = Some(Event::RunStart(n));
            } else if matches!(s.event, Some(Event::Start)) {
                s.event = None;
            }
            self.write(&s)?;
            if i + 1 == count {
                s.event = Some(Event::RunEnd(n));
                self.write(&s)?;
            }
        }
        self.missed += run_missed;
        self.out.flush()?;
        Ok(())
    }

    fn write(&mut self, s: &Sample) -> anyhow::Result<()> {
        self.out.write_sample(s)?;
        self.samples += 1;
        Ok(())
    }

    fn finish(mut self, reason: EndReason) -> anyhow::Result<()> {
        let end = EndInfo {
            ended_unix_ms: unix_ms_now(),
            reason,
            samples: self.samples,
            missed_ticks: self.missed,
            ..EndInfo::default()
        };
        self.out.finish(&end)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_peak_is_reported_when_it_is_known() {
        assert_eq!(
            choose_peak(Some(300), PeakSource::Vmhwm, 100),
            (300, PeakSource::Vmhwm)
        );
    }

    #[test]
    fn without_a_reset_the_peak_is_sampled_and_says_so() {
        assert_eq!(
            choose_peak(None, PeakSource::Vmhwm, 100),
            (100, PeakSource::Sampled)
        );
    }

    #[test]
    fn a_kernel_peak_one_page_below_a_sample_stays_the_kernel_peak() {
        // VmHWM and VmRSS are read from per-CPU batched counters: a page apart is not a miss.
        let page = crate::probe::proc::ProcFs::page_size();
        assert_eq!(
            choose_peak(Some(100 * page), PeakSource::Vmhwm, 101 * page),
            (100 * page, PeakSource::Vmhwm)
        );
    }

    #[test]
    fn a_tree_whose_sampled_sum_exceeds_its_largest_process_reports_the_sum() {
        let over = crate::model::peak::local_batching_bound_bytes() + 1;
        assert_eq!(
            choose_peak(Some(80), PeakSource::RuMaxrss, 80 + over),
            (80 + over, PeakSource::Sampled)
        );
    }

    #[test]
    fn each_run_gets_its_number_and_warmups_theirs() {
        assert_eq!(
            run_env(2, None),
            vec![("MEMMON_BENCH_RUN", "2".to_string())]
        );
        let w = run_env(0, Some(1));
        assert!(w.contains(&("MEMMON_BENCH_WARMUP", "1".to_string())));
    }
}
