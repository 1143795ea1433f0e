//! `bench` against a running daemon: one recorder thread follows the daemon for the whole
//! bench; each run resets the kernel's marks (`Control::ResetPeaks`), runs the client, and reads
//! the marks and the tree's CPU time back (`Control::Probe`, `Control::CpuTicks`).

use super::{
    choose_peak, cooldown, prepare, progress, run_env, say, say_recording, stderr_stdio,
    BenchRecording, ClientEnd, Quit, Scratch, Stop,
};
use crate::analysis::summary::PssTrack;
use crate::bench::{BenchOptions, BenchReport, DaemonInfo, PeakScope, PeakSource, RunResult};
use crate::exit::ExitCode;
use crate::format::meta::EndReason;
use crate::format::Format;
use crate::model::sample::{Event, Sample};
use crate::probe::cgroup::{MemCgroup, PeakWatch};
use crate::probe::proc::clock_ticks_per_s;
use crate::probe::ProcHandle;
use crate::sampler::record::{
    unix_ms_now, Control, ControlHandle, Outcome, RecordOptions, Recorder,
};
use crate::sampler::target::{self, TargetSpec};
use crate::units::fmt_interval;
use anyhow::Context;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A bench against a running daemon.
pub(super) struct Daemon {
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
    pub(super) fn start(
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
        let mut rec = Recorder::start(ropts, BenchRecording::of(opts))?;
        let marks = marks.start(&mut rec, opts.stdout_is_data);
        for note in &marks.notes {
            (opts.say.0)(note);
        }
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
        say_recording(opts, recording.as_deref());
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

    pub(super) fn bench(mut self, opts: &BenchOptions, report: &mut BenchReport) -> Option<Stop> {
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
