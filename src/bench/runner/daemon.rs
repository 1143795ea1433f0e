//! `bench` against a running daemon: one recorder thread follows the daemon for the whole
//! bench; each run resets the kernel's marks (`Control::ResetPeaks`), runs the client, and reads
//! the marks and the tree's CPU time back (`Control::Probe`, `Control::CpuTicks`).

use super::inflight::InFlight;
use super::{
    cooldown, prepare, progress, recorder_report, run_env, say, say_recording, ClientEnd, Quit,
    Stop,
};
use crate::bench::window::{ClientRun, Window};
use crate::bench::{BenchError, BenchOptions, BenchReport, DaemonInfo, RunResult};
use crate::exit::Ending;
use crate::format::meta::{ClientWall, EndInfo, EndReason, Meta, RunPeaks};
use crate::format::OutputError;
use crate::model::sample::{Event, Sample, WINDOW};
use crate::output::Dest;
use crate::probe::proc::clock_ticks_per_s;
use crate::probe::ProcHandle;
use crate::sampler::cgroup::CgroupChoice;
use crate::sampler::error::RecordError;
use crate::sampler::record::{
    file_sink, unix_ms_now, Control, ControlHandle, Outcome, RecordOptions, Recorder,
};
use crate::sampler::sink::{Nowhere, SampleSink};
use crate::sampler::target::shell_words;
use crate::sampler::target::{self, TargetSpec};
use crate::units::{count, fmt_interval};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Instant;

/// A bench against a running daemon.
pub(super) struct Daemon {
    handle: ProcHandle,
    control: ControlHandle,
    samples: mpsc::Receiver<Sample>,
    /// True once the recorder has returned.
    quit: Arc<Quit>,
    thread: Option<JoinHandle<Result<Outcome, RecordError>>>,
    /// The recording's metadata: how its runs' spans are closed (`analysis::phases::run_span`).
    meta: Meta,
    spec: TargetSpec,
    hwm_reset_ok: bool,
    /// No reset of the cgroup's peak was refused yet (said once).
    cgroup_reset_ok: bool,
    /// The anatomies taken (`--anatomy`), as the recorder hands them to its sink.
    anatomies: mpsc::Receiver<crate::model::anatomy::Anatomy>,
    /// Each measured run's span, for what grew in it.
    run_spans: Vec<crate::analysis::phases::Span>,
    /// The marker sources (socket, followed log); dropped at the end of the bench.
    _marks: crate::marks::MarkSources,
}

impl Daemon {
    /// Starts the bench's one recorder against the daemon, on a thread of its own, with the
    /// marker sources; says what is measured and how.
    pub(super) fn start(
        opts: &BenchOptions,
        spec: &TargetSpec,
        report: &mut BenchReport,
    ) -> Result<Daemon, BenchError> {
        let marks = crate::marks::MarkSetup::prepare(&opts.marks)?;
        // The samples of each run come back on `samples`; the time series is kept with -o.
        let (tx, samples) = mpsc::channel();
        let (anatomy_tx, anatomies) = mpsc::channel();
        let keep = opts.output.is_some();
        let make_sink = move |o: &RecordOptions| -> Result<Box<dyn SampleSink>, OutputError> {
            let inner = if keep {
                file_sink(o)?
            } else {
                Box::new(Nowhere)
            };
            Ok(Box::new(Runs {
                inner,
                tx,
                anatomies: anatomy_tx,
                inside: false,
            }))
        };
        let ropts = record_options(opts, spec);
        // The recorder's own note of the wait is not the bench's to show: say it here.
        if opts.wait && target::resolve(&opts.procfs, spec).is_err() {
            say(
                opts,
                format!(
                    "bench: waiting for the daemon ({} {}) to appear (--wait)",
                    spec.mode(),
                    spec.spec()
                ),
            );
        }
        let mut rec = Recorder::start_with(ropts, make_sink, recorder_report(opts), Box::new(()))
            .map_err(bench_cgroup_advice)?;
        let meta = rec.meta().clone();
        // Before the markers' socket is offered: a refused bench offers none.
        if let Err(e) = check_cgroup(opts, &meta) {
            rec.control().send(Control::Stop);
            let _ = rec.run();
            return Err(e);
        }
        let marks = marks.start(&mut rec, opts.stdout_is_data, &opts.report);
        let pid = rec.root_pid();
        let handle = opts
            .procfs
            .open(pid)
            .map_err(|source| BenchError::DaemonUnreadable { pid, source })?;
        let control = rec.control();
        let quit = Arc::new(Quit::new());
        let q = quit.clone();
        let thread = std::thread::Builder::new()
            .name("memmon-recorder".into())
            .spawn(move || {
                let r = rec.run();
                q.set();
                r
            })
            .map_err(BenchError::system("cannot start the recorder thread"))?;
        let daemon = Daemon {
            handle,
            control,
            samples,
            quit,
            thread: Some(thread),
            meta,
            spec: spec.clone(),
            hwm_reset_ok: true,
            cgroup_reset_ok: true,
            anatomies,
            run_spans: Vec::new(),
            _marks: marks,
        };
        daemon.introduce(opts, report);
        Ok(daemon)
    }

    /// Says where the time series goes, what is measured and how each run's peak is taken,
    /// and puts the daemon in the report.
    fn introduce(&self, opts: &BenchOptions, report: &mut BenchReport) {
        let (spec, pid, meta) = (&self.spec, self.handle.pid, &self.meta);
        let recording = match &opts.output {
            Some(Dest::Stdout) => Some("stdout".to_string()),
            Some(Dest::File(p)) => Some(crate::output::absolute(p).display().to_string()),
            None => None,
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
                "bench: daemon {} {}: PID {} ({}){children}; interval {}; {}{}{} of: {}",
                spec.mode(),
                spec.spec(),
                pid,
                self.handle.comm,
                fmt_interval(opts.interval),
                count(opts.runs, "run"),
                if opts.concurrency > 1 {
                    format!(", {} in flight together", opts.concurrency)
                } else {
                    String::new()
                },
                if opts.warmup > 0 {
                    format!(" after {}", count(opts.warmup, "warmup run"))
                } else {
                    String::new()
                },
                report.client
            ),
        );
        match meta.cgroup.as_ref().filter(|c| c.holds_tree) {
            Some(cg) => say(
                opts,
                format!(
                    "bench: the daemon's own cgroup {} ({}) holds its tree: {} peak is read from its peak file, reset as {} starts (a refused reset is said)",
                    cg.path,
                    cg.version.name(),
                    if opts.concurrency > 1 { "the window's" } else { "each run's" },
                    if opts.concurrency > 1 { "the window" } else { "each run" }
                ),
            ),
            None => {
                let why = rec_cgroup_note(meta);
                report.notes.push(format!("no cgroup peak: {why}"));
                say(opts, format!("bench: no cgroup peak: {why}"));
            }
        }
        report.recording = recording;
        report.daemon = Some(DaemonInfo {
            pid,
            comm: self.handle.comm.clone(),
            spec: format!("{} {}", spec.mode(), spec.spec()),
            children: opts.children,
            cgroup: meta
                .cgroup
                .as_ref()
                .filter(|c| c.holds_tree)
                .map(|c| c.path.clone()),
        });
    }

    pub(super) fn bench(mut self, opts: &BenchOptions, report: &mut BenchReport) -> Option<Stop> {
        let stop = if opts.concurrency > 1 {
            self.window(opts, report)
        } else {
            self.runs(opts, report)
        };
        // End the recorder; its own verdict only matters if the runs went well.
        self.control.send(Control::Stop);
        let ended = self.join();
        // The recorder has ended: every anatomy it took is in the channel (the last run's
        // `run-end` read waited for).
        let taken: Vec<_> = self.anatomies.try_iter().collect();
        report.anatomy = crate::analysis::anatomy::run_growth(&taken, &self.run_spans);
        // The ledger's count is over the whole bench: the last anatomy's is every run's. Said
        // in the notes every export carries.
        let lost = taken
            .iter()
            .filter_map(|a| a.ledger.as_ref())
            .map(|l| l.lost)
            .max()
            .unwrap_or(0);
        if lost > 0 {
            report.notes.push(format!(
                "the ledger's ring buffers were full at times: the kernel dropped {}, so the stacks of what grew may miss mappings and sampled page faults",
                crate::units::count(lost, "record")
            ));
        }
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
            if !self.mark(format!("warmup:{k}")) {
                return Some(self.ended(&format!("warmup run {k}")));
            }
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
            if !self.mark("runs".into()) {
                return Some(self.ended("run 1"));
            }
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
                            "run {n}: the client failed with {} ({}); the bench stopped after {n} of {} (--ignore-failure to go on)",
                            end.describe(),
                            report.client,
                            count(opts.runs, "run")
                        )));
                    }
                }
                Err(s) => return Some(s),
            }
            if !self.hwm_reset_ok && !report.notes.iter().any(|n| n.contains("VmHWM")) {
                report.notes.push(
                    "the daemon's VmHWM could not be reset (writing 5 to /proc/PID/clear_refs needs its owner or root): a run's kernel peak counts only where the mark rose above every earlier one (then exact); elsewhere its peak is sampled and can miss short spikes"
                        .into(),
                );
            }
            if n < opts.runs {
                cooldown(opts, &self.quit);
            }
        }
        None
    }

    /// `--concurrency` above 1: the warmup runs, then the measured window: the marks reset at
    /// its `window-start` row, `opts.runs` clients with `opts.concurrency` in flight (a new one
    /// starts as one ends; each start and end takes a row), its `window-end` row once the last
    /// has exited. The window's peak is exact as a run's is; no run's own is (they overlap).
    fn window(&mut self, opts: &BenchOptions, report: &mut BenchReport) -> Option<Stop> {
        if opts.warmup > 0 {
            if !self.mark("warmup".into()) {
                return Some(self.ended("the warmup runs"));
            }
            if let Err(s) = self.in_flight(opts, opts.warmup, None, &mut Vec::new()) {
                return Some(s);
            }
        }
        let (kernel_held, cgroup_held) = match self.reset(opts, WINDOW, "the window") {
            Ok(held) => held,
            Err(s) => return Some(s),
        };
        let t0 = Instant::now();
        let cpu_before = self.tree_cpu_ticks();
        let mut clients = Vec::new();
        let failure = match self.in_flight(opts, opts.runs, Some(t0), &mut clients) {
            Ok(f) => f,
            Err(s) => return Some(s),
        };
        let wall_s = t0.elapsed().as_secs_f64();
        let cpu = self.cpu_since(cpu_before);
        self.control.send(Control::ClientWall(ClientWall {
            run: WINDOW,
            wall_s,
        }));
        let (tx, rx) = mpsc::channel();
        if !self.control.send(Control::Probe(Event::RunEnd(WINDOW), tx))
            || !matches!(rx.recv(), Ok(Some(_)))
            || !self.alive()
        {
            return Some(self.ended("the window"));
        }
        let samples = self.run_samples(WINDOW);
        let Some(span) =
            crate::analysis::phases::run_span(&self.meta, &samples, kernel_held, cgroup_held)
        else {
            return Some(self.ended("the window"));
        };
        let mut w = Window::of(opts.concurrency, wall_s, &span, clients);
        w.daemon_user_s = cpu.map(|c| c.0);
        w.daemon_system_s = cpu.map(|c| c.1);
        self.run_spans.push(span);
        report.notes.push(format!(
            "{} in flight together: the window's peak is exact as a run's is, from the reset at its start to its end; no run's own peak can be told apart from the others'",
            opts.concurrency
        ));
        report.window = Some(w);
        failure.map(Stop::Failed)
    }

    /// Runs `count` clients with `opts.concurrency` in flight: a new one starts (after
    /// `--prepare`) as one ends. Measured (`t0`, the window's start): each client's start and
    /// end take a row (`client-start:N`, `client-end:N`) and it goes into `clients`; warmup
    /// (`None`): MEMMON_BENCH_WARMUP=K, no rows. A failed client (without `--ignore-failure`)
    /// starts no more: those in flight finish, and its message comes back.
    fn in_flight(
        &mut self,
        opts: &BenchOptions,
        count: u32,
        t0: Option<Instant>,
        clients: &mut Vec<ClientRun>,
    ) -> Result<Option<String>, Stop> {
        let what = if t0.is_some() {
            "the window"
        } else {
            "the warmup runs"
        };
        let mut flight = InFlight::default();
        let mut started = 0;
        let mut in_flight_at_start = Vec::new();
        let mut failure = None;
        loop {
            while failure.is_none() && started < count && flight.len() < opts.concurrency as usize {
                started += 1;
                let env = match t0 {
                    Some(_) => run_env(started, None),
                    None => run_env(0, Some(started)),
                };
                prepare(opts, &env)?;
                if t0.is_some() && !self.row(Event::ClientStart(started)) {
                    return Err(self.ended(what));
                }
                flight.start(opts, &env, started)?;
                in_flight_at_start.push(flight.len() as u32);
            }
            if flight.len() == 0 {
                return Ok(failure);
            }
            let (ended, quitted) = flight.wait(&self.quit)?;
            if quitted || !self.alive() {
                flight.end_all();
                return Err(self.ended(what));
            }
            for e in ended {
                if let Some(t0) = t0 {
                    self.row(Event::ClientEnd(e.run));
                    let c = ClientRun {
                        run: e.run,
                        started_unix_ms: e.started_unix_ms,
                        start_s: e.started.saturating_duration_since(t0).as_secs_f64(),
                        wall_s: e.end.wall_s,
                        exit_code: e.end.code,
                        exit_signal: e.end.signal,
                        in_flight: in_flight_at_start[e.run as usize - 1],
                    };
                    say(
                        opts,
                        format!(
                            "run {}/{}: {}, {} ({} in flight at its start)",
                            c.run,
                            count,
                            super::super::table::fmt_wall(c.wall_s),
                            e.end.describe(),
                            c.in_flight
                        ),
                    );
                    clients.push(c);
                }
                if !e.end.ok() && !opts.ignore_failure && failure.is_none() {
                    failure = Some(format!(
                        "{} {}: the client failed with {} ({}); no more runs were started, those in flight finished (--ignore-failure to go on)",
                        if t0.is_some() { "run" } else { "warmup run" },
                        e.run,
                        e.end.describe(),
                        shell_words(&opts.client)
                    ));
                }
            }
        }
    }

    /// The tree's CPU time, user and system in seconds, since `before` (`tree_cpu_ticks`).
    fn cpu_since(&self, before: Option<(u64, u64)>) -> Option<(f64, f64)> {
        let hz = clock_ticks_per_s();
        before
            .zip(self.tree_cpu_ticks())
            .map(|((u0, s0), (u1, s1))| {
                (
                    u1.saturating_sub(u0) as f64 / hz,
                    s1.saturating_sub(s0) as f64 / hz,
                )
            })
    }

    /// Takes a marker's row and waits for it, as a run's boundaries do: the client starts after
    /// the row, so nothing it does lands on the wrong side of the marker (no lag to tell: the
    /// phase is never late). False when the recorder has ended.
    fn mark(&self, label: String) -> bool {
        self.row(Event::Mark(label))
    }

    /// Takes a row with `event` and waits for it; false when the recorder has ended.
    fn row(&self, event: Event) -> bool {
        let (tx, rx) = mpsc::channel();
        self.control.send(Control::Probe(event, tx)) && matches!(rx.recv(), Ok(Some(_)))
    }

    /// One measured run: a row and a reset, the client, a row read back; the run's span
    /// closed as the summary of the recording closes it.
    fn one_run(
        &mut self,
        opts: &BenchOptions,
        n: u32,
        env: &[(&str, String)],
    ) -> Result<(RunResult, ClientEnd), Stop> {
        let label = format!("run {n}");
        let started_unix_ms = unix_ms_now();
        let (kernel_held, cgroup_held) = self.reset(opts, n, &label)?;
        let cpu_before = self.tree_cpu_ticks();
        let (end, quitted) = run_client(opts, env, &self.quit)?;
        if quitted {
            return Err(self.ended(&label));
        }
        let cpu = self.cpu_since(cpu_before);
        // The run's time in the recording is the client's, as the table's is.
        self.control.send(Control::ClientWall(ClientWall {
            run: n,
            wall_s: end.wall_s,
        }));
        // With --anatomy, answered once the run's `run-end` anatomy is read: none of the next
        // run's memory is in it.
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
        let samples = self.run_samples(n);
        let Some(span) =
            crate::analysis::phases::run_span(&self.meta, &samples, kernel_held, cgroup_held)
        else {
            return Err(self.ended(&label));
        };
        let mut r = RunResult::of_span(n, started_unix_ms, end.wall_s, &span);
        r.exit_code = end.code;
        r.exit_signal = end.signal;
        r.rss_before_bytes = Some(span.start_rss_bytes);
        r.cgroup_before_bytes = span.start_cgroup_bytes;
        r.rss_after_bytes = Some(last.rss_bytes);
        r.processes_after = Some(last.processes);
        r.daemon_user_s = cpu.map(|c| c.0);
        r.daemon_system_s = cpu.map(|c| c.1);
        self.run_spans.push(span);
        Ok((r, end))
    }

    /// Takes run `n`'s `run-start` row (the window's `window-start`, `n` 0) and resets the
    /// marks after it; a refused reset is said once. Whether the kernel's reset and the
    /// cgroup's held.
    fn reset(&mut self, opts: &BenchOptions, n: u32, what: &str) -> Result<(bool, bool), Stop> {
        let (tx, rx) = mpsc::channel();
        if !self
            .control
            .send(Control::ResetPeaks(Event::RunStart(n), tx))
        {
            return Err(self.ended(what));
        }
        let failed = match rx.recv() {
            Ok(f) => f,
            Err(_) => return Err(self.ended(what)),
        };
        let kernel_held = failed.kernel.is_empty();
        if !kernel_held {
            if self.hwm_reset_ok {
                say(
                    opts,
                    format!(
                        "bench: cannot reset the peaks ({}); a run's peak then counts only where it rose above what came before",
                        failed.kernel.join("; ")
                    ),
                );
            }
            self.hwm_reset_ok = false;
        }
        let cgroup_held = failed.cgroup.is_none();
        if let Some(why) = &failed.cgroup {
            if self.cgroup_reset_ok {
                say(
                    opts,
                    format!(
                        "bench: cannot reset {why}; a run's cgroup peak then counts only where it rose above what came before, else the run's peak is the kernel's of its largest process (reset at each run)"
                    ),
                );
            }
            self.cgroup_reset_ok = false;
        }
        Ok((kernel_held, cgroup_held))
    }

    /// The samples of run `n`, from its `run-start:N` to its `run-end:N`, both included. Every
    /// sample up to the run-end one is already in the channel: the recorder hands it to its
    /// sink before it replies to the probe.
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

    fn join(&mut self) -> Result<Outcome, BenchError> {
        match self.thread.take() {
            Some(t) => match t.join() {
                Ok(outcome) => Ok(outcome?),
                Err(_) => Err(BenchError::RecorderPanicked),
            },
            None => Err(BenchError::RecorderEnded),
        }
    }

    /// The recorder has ended (or the daemon is gone) during `what`: says why.
    fn ended(&mut self, what: &str) -> Stop {
        let mut gone = !self.alive();
        self.control.send(Control::Stop);
        let outcome = self.join();
        if let Ok(o) = &outcome {
            if let Ending::Signal(sig) = o.exit {
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
            Err(e) => Stop::Error(BenchError::StoppedDuring {
                what: what.to_string(),
                source: Box::new(e),
            }),
            Ok(_) => Stop::Failed(format!("the recording stopped during {what}")),
        }
    }
}

/// The recorder of a daemon bench: the daemon followed until it exits (a restart is a new
/// process: the bench stops), its marks reset at the start and at each run, its own cgroup
/// read where it holds its tree alone.
fn record_options(opts: &BenchOptions, spec: &TargetSpec) -> RecordOptions {
    RecordOptions {
        interval: opts.interval,
        children: opts.children,
        // Without -o the runs' samples go to no file (the sink is `Nowhere`).
        output: opts.output.clone().unwrap_or(Dest::Stdout),
        format: opts.format,
        force: opts.force,
        append: opts.append,
        pss: opts.pss.clone(),
        gpu: opts.gpu.clone(),
        // `--wait`: a daemon not there yet (its pidfile missing or empty, no process of its
        // name) is waited for, as `record --wait` waits.
        wait: opts.wait,
        exit_with_target: true,
        procfs: opts.procfs.clone(),
        phase_peaks: opts.phase_peaks,
        // The whole recording's peak is then exact from its start, whatever the daemon
        // reached before the bench.
        reset_peak: true,
        exit_records: opts.exit_records,
        // The daemon's own cgroup, when it holds its tree alone: its peak is the tree's exact
        // peak, reset with the marks at each run. Given (`--cgroup`), it must hold the tree.
        cgroup: Some(opts.cgroup.clone().unwrap_or(CgroupChoice::AutoIfAlone)),
        own_cgroup: Some(false),
        cgroupfs: opts.cgroupfs.clone(),
        run_peaks: Some(RunPeaks::ResetAfterStart),
        // Anatomies at each run's end (and new highs) come back through the sink.
        anatomy: opts.anatomy.clone(),
        ..RecordOptions::new(spec.clone())
    }
}

/// A cgroup given with `--cgroup` must hold the daemon's tree alone, or its peak is not the
/// tree's: a usage error.
fn check_cgroup(opts: &BenchOptions, meta: &Meta) -> Result<(), BenchError> {
    if let (Some(CgroupChoice::Path(p)), Some(c)) = (&opts.cgroup, &meta.cgroup) {
        if !c.holds_tree {
            return Err(BenchError::CgroupNotAlone {
                given: p.clone(),
                cgroup: c.path.clone(),
                why: c.not_the_tree.clone().unwrap_or_else(|| {
                    "a process in it is not the daemon's, or the daemon is not in it".into()
                }),
            });
        }
    }
    Ok(())
}

/// A `--cgroup auto` the recorder refused, with bench's advice: `record`'s (give the shared
/// cgroup's path) would be refused by `check_cgroup`.
fn bench_cgroup_advice(e: RecordError) -> BenchError {
    match e {
        RecordError::CgroupAuto { why, .. } => BenchError::CgroupAuto { why },
        e => e.into(),
    }
}

/// Why a daemon bench reads no cgroup peak, from the recording's metadata.
fn rec_cgroup_note(meta: &Meta) -> String {
    match &meta.cgroup {
        Some(c) => format!(
            "the cgroup {} does not hold the daemon's tree alone{} (start the daemon in a cgroup of its own, e.g. systemd-run --scope, to get its tree's exact peak)",
            c.path,
            c.not_the_tree
                .as_ref()
                .map(|why| format!(": {why}"))
                .unwrap_or_default()
        ),
        None => "the daemon's memory cgroup is the root, or holds processes outside its tree (give the daemon a cgroup of its own, e.g. systemd-run --scope, to get its tree's exact peak)".into(),
    }
}

/// Runs the client once and waits for it (`InFlight`: no wake-up until it exits, the recorder
/// ends or a stop signal comes); gives up waiting (and sends it SIGTERM) when `quit` is set: the
/// recorder ended (the daemon died, a signal). The bool is true then.
fn run_client(
    opts: &BenchOptions,
    env: &[(&str, String)],
    quit: &Quit,
) -> Result<(ClientEnd, bool), Stop> {
    let mut one = InFlight::default();
    one.start(opts, env, 0)?;
    let (mut ended, quitted) = one.wait(quit)?;
    let e = ended
        .pop()
        .expect("a wait with a client running returns when it exits");
    Ok((e.end, quitted))
}

/// The daemon recorder's sink: the time series (`-o`, or nowhere), and the samples of each
/// run, from its `run-start:N` row to its `run-end:N` row, sent to the bench as they are taken.
struct Runs {
    inner: Box<dyn SampleSink>,
    tx: mpsc::Sender<Sample>,
    /// Each anatomy (`--anatomy`), also written to the recording's table with -o.
    anatomies: mpsc::Sender<crate::model::anatomy::Anatomy>,
    inside: bool,
}

impl SampleSink for Runs {
    fn start(&mut self, meta: &Meta) -> Result<(), OutputError> {
        self.inner.start(meta)
    }

    fn sample(&mut self, s: &Sample) -> Result<(), OutputError> {
        self.inner.sample(s)?;
        match s.event {
            Some(Event::RunStart(_)) => self.inside = true,
            Some(Event::RunEnd(_)) => {
                let _ = self.tx.send(s.clone());
                self.inside = false;
                return Ok(());
            }
            _ => {}
        }
        if self.inside {
            let _ = self.tx.send(s.clone());
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), OutputError> {
        self.inner.flush()
    }

    fn anatomy(&mut self, a: &crate::model::anatomy::Anatomy) -> Result<(), OutputError> {
        self.inner.anatomy(a)?;
        let _ = self.anatomies.send(a.clone());
        Ok(())
    }

    fn anatomy_path(&self) -> Option<&std::path::Path> {
        self.inner.anatomy_path()
    }

    fn keeps_anatomies(&self) -> bool {
        true
    }

    fn finish(&mut self, end: &EndInfo) -> Result<(), OutputError> {
        self.inner.finish(end)
    }

    fn destination(&self) -> String {
        self.inner.destination()
    }

    fn path(&self) -> Option<&std::path::Path> {
        self.inner.path()
    }

    fn on_stdout(&self) -> bool {
        self.inner.on_stdout()
    }

    fn kept(&self, samples: u64, removed: bool) -> String {
        self.inner.kept(samples, removed)
    }

    fn discard(&mut self) {
        self.inner.discard()
    }

    fn take_notes(&mut self) -> Vec<String> {
        self.inner.take_notes()
    }
}
