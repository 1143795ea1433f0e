//! `memmon record`: the sampling loop. It finds or launches the target, writes the metadata,
//! then at each tick of an absolute schedule reads the tree (`tree.rs`), writes one row
//! (`format/`), feeds the running summary (`analysis/`), and sleeps until the next deadline
//! or until the target exits, a signal arrives or a control message (a marker) comes in.
//! Signals end it cleanly; the target ending ends it (or, for a pidfile or a name, memmon
//! waits for the restart).

use crate::analysis::{Summary, SummaryBuilder};
use crate::exit::{CodedError, ExitCode};
use crate::format::meta::{
    ColumnMeta, EndInfo, EndReason, Meta, PssUnread, TargetMeta, SCHEMA_VERSION,
};
use crate::format::{Format, Output, OutputError};
use crate::model::sample::{Event, Sample, COLUMNS};
use crate::probe::cgroup::CgroupFs;
use crate::probe::proc::clock_ticks_per_s;
use crate::probe::taskstats::ExitWatch;
use crate::probe::{ProcError, ProcFs, ProcHandle};
use crate::sampler::cgroup::{CgroupChoice, CgroupSource};
use crate::sampler::signals;
use crate::sampler::target::{self, TargetError, TargetSpec};
use crate::sampler::tree::Tree;
use crate::units::{fmt_bytes, fmt_interval};
use anyhow::Context;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the first sample of a launched command waits for exec to load its program.
const EXEC_WAIT: Duration = Duration::from_millis(200);

/// PSS is read from smaps_rollup, which walks the page tables under the target's mmap lock.
#[derive(Debug, Clone)]
pub struct PssGuard {
    pub every: Duration,
    /// Processes with more RSS than this are skipped (their PSS read would stall them)...
    pub max_rss: u64,
    /// ...unless forced.
    pub force: bool,
}

#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub target: TargetSpec,
    pub interval: Duration,
    pub children: bool,
    /// `None` means stdout.
    pub output: Option<PathBuf>,
    pub format: Option<Format>,
    pub force: bool,
    pub append: bool,
    pub pss: Option<PssGuard>,
    /// GPU memory through NVML (`--gpu`, `--no-gpu`, `--gpu-every`).
    pub gpu: crate::sampler::gpu::GpuOptions,
    /// For `--pidfile` and `--name`: wait for the target to appear at the start.
    pub wait: bool,
    /// For `--pidfile` and `--name`: stop when the target exits instead of waiting for a restart.
    pub exit_with_target: bool,
    /// Stop after this long.
    pub duration: Option<Duration>,
    pub quiet: bool,
    pub procfs: ProcFs,
    /// Reset the kernel's high-water marks right after each marker's sample, so each phase's
    /// rows carry that phase's exact peak (`--phase-peaks`; recorded in the metadata).
    pub phase_peaks: bool,
    /// Reset the high-water marks of an attached target right after the first sample, so its
    /// kernel peak is the recording's from the start (`--reset-peak`; recorded in the metadata).
    pub reset_peak: bool,
    /// Read the kernel's exit records (taskstats) where memmon may, so a process that leaves
    /// the tree between two samples keeps the peak it had at its exit.
    pub exit_records: bool,
    /// Give a launched command a pipe for its stdout, for `take_command_stdout` (`--mark-stdout`).
    pub capture_stdout: bool,
    /// Variables added to a launched command's environment (`bench` sets MEMMON_BENCH_RUN);
    /// given to that command alone, never set in memmon's own, threaded, process.
    pub env: Vec<(String, String)>,
    /// A memory cgroup to read at every tick (`--cgroup PATH|auto`).
    pub cgroup: Option<CgroupChoice>,
    /// How the caller begins each bench run's peaks (`bench` sets it; written in the metadata).
    pub run_peaks: Option<crate::format::meta::RunPeaks>,
    /// Launch the command in a memory cgroup of memmon's own (`--own-cgroup`): `None` where
    /// memmon may make one, `Some(true)` or an error, `Some(false)` never.
    pub own_cgroup: Option<bool>,
    pub cgroupfs: CgroupFs,
}

/// Messages other threads send to a running recorder (markers, benchmark runs).
#[derive(Debug)]
pub enum Control {
    /// Take a sample now, labelled with this event.
    Event(Event),
    /// Take a sample labelled with the event, then reset the high-water marks of every
    /// process of the tree (writes `5` to clear_refs) and the cgroup's peak: the rows after it
    /// hold what came after (as a marker's with `--phase-peaks`). The reply tells which resets
    /// failed.
    ResetPeaks(Event, mpsc::Sender<Vec<String>>),
    /// Read every process's VmHWM now; the reply is the sample taken (with the event).
    Probe(Event, mpsc::Sender<Option<Sample>>),
    /// A `Probe` for an asker that waits a bounded time (`memmon mark`): taken only if the
    /// recorder clears `wanted` first; an asker that gives up clears it, so a marker is either
    /// taken and answered or never taken (not taken late, after its asker has said it failed).
    ProbeIfWanted(Event, Arc<AtomicBool>, mpsc::Sender<Option<Sample>>),
    /// Reply with the tree's CPU time so far (`Tree::cpu_ticks`), in clock ticks; no sample.
    CpuTicks(mpsc::Sender<(u64, u64)>),
    /// A read of the tree's PSS ended (`sampler/pss.rs`): a row takes its sum now.
    PssDone(crate::sampler::pss::PssRead),
    /// End the recording as if a signal had arrived (reason `stopped`).
    Stop,
    /// From now on, send a copy of every sample taken to this channel (`bench` reads each
    /// run's samples this way).
    Watch(mpsc::Sender<Sample>),
}

/// A control message and when what it stands for happened (its `event_lag_us` counts from
/// there).
#[derive(Debug)]
pub struct Stamped {
    msg: Control,
    origin: SystemTime,
}

/// Sends control messages to a recorder, waking it from its sleep.
#[derive(Clone)]
pub struct ControlHandle {
    tx: mpsc::Sender<Stamped>,
    wake: Arc<OwnedFd>,
}

impl ControlHandle {
    /// Sends `msg`, which happened now.
    pub fn send(&self, msg: Control) -> bool {
        self.send_at(msg, SystemTime::now())
    }

    /// Sends `msg`, which happened at `origin` (a log line's write time).
    pub fn send_at(&self, msg: Control, origin: SystemTime) -> bool {
        if self.tx.send(Stamped { msg, origin }).is_err() {
            return false;
        }
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64 to an eventfd we own.
        unsafe { libc::write(self.wake.as_raw_fd(), &one as *const u64 as *const _, 8) };
        true
    }
}

/// What a recording tells whoever runs it, as data: the recorder itself prints none of it
/// (`commands/record.rs` prints it on the terminal; a benchmark keeps it quiet).
pub trait RecordObserver {
    /// The recording has started: the metadata is written.
    fn on_start(&mut self, _start: &RecordStart) {}
    /// A note, warning or error on the way, to show the user (without the `memmon: ` prefix);
    /// those that `--quiet` silences are not sent with it.
    fn on_note(&mut self, _note: &str) {}
    /// A sample was taken and written.
    fn on_sample(&mut self, _sample: &Sample) {}
    /// The recording has ended and its end record is written.
    fn on_end(&mut self, _summary: &Summary) {}
}

/// What the start of a recording is: where the data goes and what is watched.
pub struct RecordStart<'a> {
    /// What was done to the output before the start (a repaired `--append`), one line each;
    /// worth saying even with `--quiet`.
    pub notes: &'a [String],
    /// Where the samples go, e.g. `out.csv (CSV; metadata in out.csv.meta.json)`.
    pub destination: String,
    /// The metadata written (target, interval, sources).
    pub meta: &'a Meta,
}

/// How the recording went.
pub struct Outcome {
    pub summary: Summary,
    pub exit: ExitCode,
    pub output: Option<PathBuf>,
    /// The signal that stopped the recording of an attached target, for the caller to act on
    /// (`exit` is already `ExitCode::Signal` of it); never re-raised by the recorder.
    pub signal: Option<i32>,
}

/// What the recording loop does next (`Recorder::run`).
enum Step {
    /// Look at the signals and control messages that arrived; `early`: a control message ended
    /// the last sleep before its deadline.
    Wake { early: bool },
    /// Take the sample due on the schedule.
    Tick,
    /// Answer one control message (a marker, a benchmark's reset or probe) with a sample of
    /// its own, then wake again.
    Control(Stamped, bool),
    /// Sleep until the next deadline, a signal, a control message or the target's exit.
    Sleep,
    /// The target ended and may come back (a pidfile or a name): wait for it.
    WaitRestart,
    /// End the recording.
    Stop(Stop),
}

/// Why the recording ends.
enum Stop {
    /// A signal to memmon while it watched a process it did not start.
    Signal(i32),
    /// `Control::Stop` (a benchmark is done with its daemon).
    Stopped,
    Duration,
    TargetExited,
    /// The output failed, or the tree could not be read.
    Failed(anyhow::Error),
}

/// What `Recorder::run` carries from one step to the next.
struct RunState {
    /// The next sample's time on the absolute schedule.
    deadline: Instant,
    next_flush: Instant,
    /// The event of the next scheduled sample: the start, or a restart.
    event: Option<Event>,
    /// Control messages not yet answered, in the order they came: a marker that finds the
    /// target gone waits here, first, for the sample after the restart.
    queued: VecDeque<Stamped>,
    end: EndInfo,
}

/// How waiting for a restart ended.
enum Restart {
    Found(i32),
    Signal(i32),
    DurationReached,
}

/// A target being recorded.
enum Watched {
    /// A process memmon did not start.
    Attached,
    /// A command memmon launched: it is our child, so its PID cannot be reused until reaped.
    Launched { pid: i32 },
}

pub struct Recorder {
    opts: RecordOptions,
    out: Output,
    tree: Tree,
    pidfd: Option<OwnedFd>,
    watched: Watched,
    control_rx: mpsc::Receiver<Stamped>,
    control: ControlHandle,
    summary: SummaryBuilder,
    start: Instant,
    samples: u64,
    missed: u64,
    restarts: u64,
    /// The thread that reads PSS, and when to ask it (`--pss`).
    pss: Option<(
        crate::sampler::pss::PssThread,
        crate::sampler::pss::PssSchedule,
    )>,
    /// A PSS sum read and not yet on a row.
    pss_ready: Option<u64>,
    /// With GPU memory read: the resident bytes of the tree's NVIDIA device-file mappings, read
    /// with that PSS.
    nvidia_rss_ready: Option<u64>,
    /// The PSS read under way was asked knowing which of the tree's processes map NVIDIA
    /// device files.
    nvidia_asked_known: bool,
    /// Processes whose PSS was not read, and why (written in the end record).
    pss_unread: Vec<PssUnread>,
    command_stdout: Option<std::process::ChildStdout>,
    /// Peak resets refused at markers with `phase_peaks` (then phase peaks are not exact).
    reset_failures: u64,
    watch: Option<mpsc::Sender<Sample>>,
    /// The metadata written at the start: the summary at the end reads it as `summary` would.
    meta: Meta,
    /// `--pidfile`: the pidfile as it was when it named the current target; a restart needs a
    /// rewritten pidfile.
    pidfile_stamp: Option<target::PidfileStamp>,
    /// GPU memory, read on a thread of its own (`sampler/gpu.rs`).
    gpu: Option<crate::sampler::gpu::GpuTracker>,
    /// `taskstats` when exit records are read, else why not (written in the end record).
    exit_records: String,
    /// The largest peak from exit records of trees before a restart.
    exit_peak: Option<u64>,
    /// The largest `ru_maxrss` of the launched command's orphans that memmon reaped, and the
    /// command's own exit (status, rusage) when it was reaped with them.
    orphans_maxrss: u64,
    command_exit: Option<(libc::c_int, libc::rusage, Instant)>,
    /// When the launched command was started, and when it exited as a thread waiting on it
    /// saw (its wall time; the reap may come later).
    launched_at: Option<Instant>,
    exited_at: Arc<std::sync::OnceLock<Instant>>,
    /// memmon's own RSS when it launched the command (`EndInfo::launcher_rss_bytes`).
    launcher_rss: Option<u64>,
    /// The memory cgroup read at every tick, if any.
    cgroup: Option<CgroupSource>,
    /// Told of the start, each sample and the end.
    observer: Box<dyn RecordObserver + Send>,
}

impl Recorder {
    /// Finds or launches the target, opens the output and writes the metadata; then tells
    /// `observer` where the data goes and what is watched (`RecordStart`).
    pub fn start(
        opts: RecordOptions,
        observer: Box<dyn RecordObserver + Send>,
    ) -> anyhow::Result<Recorder> {
        let mut observer = observer;
        signals::install();
        let format = opts
            .format
            .or_else(|| opts.output.as_deref().map(Format::from_path))
            .unwrap_or(Format::Csv);

        // Attach: find the target before creating anything, so a wrong PID leaves no file.
        let (attached, pidfile_stamp) = match &opts.target {
            TargetSpec::Command(_) => (None, None),
            spec => {
                let r = find_target(&opts, spec, &mut *observer)?;
                (Some(r.handle), r.pidfile)
            }
        };
        // The GPU source before the output: `--gpu` without a driver leaves no file.
        let gpu = match crate::sampler::gpu::open(&opts.gpu) {
            Ok((gpu, note)) => {
                if let (Some(note), false) = (note, opts.quiet) {
                    observer.on_note(&note);
                }
                gpu
            }
            Err(e) => return Err(CodedError::new(ExitCode::Usage, format!("--gpu: {e}"))),
        };
        let mut out = Output::create(opts.output.as_deref(), format, opts.force, opts.append)
            .map_err(output_error)?;

        let mut command_stdout = None;
        let mut cgroup = match &attached {
            Some(h) => attached_cgroup(&opts, h).inspect_err(|_| {
                out.discard();
            })?,
            None => launched_cgroup(&opts, &mut *observer).inspect_err(|_| {
                out.discard();
            })?,
        };
        // The kernel's exit records are read from before a launch: a command that ends at once
        // (before its first row) still has its record. Until the tree is known they are kept
        // for memmon's children (the command, and the orphans memmon adopts).
        let exit_watch = opts.exit_records.then(|| {
            ExitWatch::open_online().map(|mut w| {
                if attached.is_none() {
                    w.keep_only(&[std::process::id()]);
                }
                w
            })
        });
        let mut launched_at = None;
        let exited_at = Arc::new(std::sync::OnceLock::new());
        // memmon's own RSS as it forks the command: exec keeps the mark of the forked copy (its
        // anonymous pages, and what it touches before exec) in ru_maxrss.
        let launcher_rss = std::fs::read("/proc/self/status")
            .ok()
            .and_then(|s| crate::probe::proc::status_bytes(&s, b"VmRSS:"));
        let launch_time = Instant::now();
        let (handle, watched) = match (attached, &opts.target) {
            (Some(h), _) => (h, Watched::Attached),
            (None, TargetSpec::Command(args)) => {
                let data_on_stdout = out.path().is_none();
                let join = cgroup.as_ref().and_then(|c| c.procs_fd());
                let (pid, stdout) =
                    match launch(args, &opts.env, data_on_stdout, opts.capture_stdout, join) {
                        Ok(launched) => launched,
                        Err(e) => {
                            // Nothing was recorded: leave no empty file behind (unless appending).
                            out.discard();
                            return Err(e);
                        }
                    };
                command_stdout = stdout;
                let h = opts
                    .procfs
                    .open(pid)
                    .with_context(|| format!("cannot read the launched command (PID {pid})"))?;
                // The first sample comes once exec has loaded the program (spawn returns when
                // exec has begun, while the new image may still be a page of stack).
                watch_exit(pid, exited_at.clone());
                let until = Instant::now() + EXEC_WAIT;
                while exited_at.get().is_none() && !h.exec_done() && Instant::now() < until {
                    std::thread::sleep(Duration::from_micros(200));
                }
                launched_at = Some(launch_time);
                (h, Watched::Launched { pid })
            }
            _ => unreachable!(),
        };

        let (tx, control_rx) = mpsc::channel();
        // SAFETY: eventfd has no memory-safety preconditions.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error()).context("cannot create an eventfd");
        }
        // SAFETY: efd is a fresh descriptor owned by nobody else.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(efd) });
        let control = ControlHandle { tx, wake };

        let pidfd = open_pidfd(&handle);
        let mut meta = build_meta(&opts, &handle, cgroup.as_ref());
        if let Some(g) = &gpu {
            meta.sources.push(format!(
                "GPU memory through {} ({} GPU(s)) every {}, on its own thread",
                if g.poller.source == "nvml" {
                    "NVML (libnvidia-ml.so.1)"
                } else {
                    "the tests' fake GPU source"
                },
                g.poller.devices.len(),
                fmt_interval(g.poller.every())
            ));
            meta.gpu = Some(g.meta());
        }
        if let Some(c) = &mut cgroup {
            // The baseline of the counters (OOM kills during the recording are those after it).
            c.tick();
        }
        let mut tree = Tree::new(opts.procfs.clone(), handle, opts.children);
        if opts.children {
            meta.sources.insert(1, tree.children_source().into());
        }
        let exit_records = match exit_watch {
            None => "off (--no-taskstats)".to_string(),
            Some(Ok(w)) => {
                tree.watch_exits(w);
                crate::format::meta::EXIT_RECORDS_READ.to_string()
            }
            Some(Err(e)) => {
                if !opts.quiet {
                    observer.on_note(&format!("note: not reading exit records: {e}; a process's peak is exact up to its last sample before it exits"));
                }
                format!("unavailable: {e}")
            }
        };
        if matches!(watched, Watched::Launched { .. }) {
            // memmon is the command's subreaper (set in `launch`): its orphans come to memmon.
            if let Ok(me) = opts.procfs.open(std::process::id() as i32) {
                tree.adopt_orphans_of(me);
            }
        }
        meta.exit_records = Some(exit_records.clone());
        let pss = match &opts.pss {
            Some(guard) => {
                let back = control.clone();
                let thread = crate::sampler::pss::PssThread::start(move |read| {
                    back.send(Control::PssDone(read));
                })
                .context("cannot start the PSS thread")?;
                Some((thread, crate::sampler::pss::PssSchedule::new(guard.every)))
            }
            None => None,
        };
        let mut summary = SummaryBuilder::new();
        summary.session(&meta);
        let mut rec = Recorder {
            opts,
            out,
            tree,
            pidfd,
            watched,
            control_rx,
            control,
            summary,
            start: Instant::now(),
            samples: 0,
            missed: 0,
            restarts: 0,
            pss,
            pss_ready: None,
            nvidia_rss_ready: None,
            nvidia_asked_known: false,
            pss_unread: Vec::new(),
            command_stdout,
            reset_failures: 0,
            watch: None,
            meta,
            pidfile_stamp,
            gpu,
            exit_records,
            exit_peak: None,
            orphans_maxrss: 0,
            command_exit: None,
            launched_at,
            exited_at,
            launcher_rss,
            cgroup,
            observer,
        };
        rec.out.write_meta(&rec.meta).map_err(output_error)?;
        rec.announce();
        Ok(rec)
    }

    /// Tells the observer a note, warning or error to show.
    fn note(&mut self, text: String) {
        self.observer.on_note(&text);
    }

    /// A handle other threads use to send markers and benchmark requests.
    pub fn control(&self) -> ControlHandle {
        self.control.clone()
    }

    /// The launched command's stdout pipe, when `capture_stdout` asked for one (taken once).
    pub fn take_command_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.command_stdout.take()
    }

    /// True when the kernel's exit records are read (taskstats).
    pub fn reads_exit_records(&self) -> bool {
        self.tree.watches_exits()
    }

    /// The metadata written at the start.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The PID of the watched process (the root of the tree).
    pub fn root_pid(&self) -> i32 {
        self.tree.root_pid()
    }

    /// Tells the observer where the data goes and what is watched.
    fn announce(&mut self) {
        let destination = match (self.out.path(), self.out.meta_path()) {
            (Some(p), Some(m)) => format!("{} (CSV; metadata in {})", p.display(), m.display()),
            (Some(p), None) if self.out.format() == Format::Csv => {
                format!("{} (CSV; no metadata sidecar for a device)", p.display())
            }
            (Some(p), None) => format!("{} (JSON Lines)", p.display()),
            (None, Some(m)) => format!("stdout (CSV; metadata in {})", m.display()),
            (None, _) => format!(
                "stdout ({}; no metadata sidecar)",
                if self.out.format() == Format::Csv {
                    "CSV"
                } else {
                    "JSON Lines"
                }
            ),
        };
        self.observer.on_start(&RecordStart {
            notes: &self.out.notes,
            destination,
            meta: &self.meta,
        });
    }

    /// Runs until the target ends, a signal arrives, the duration is reached or the output
    /// fails. The summary goes to the observer (`on_end`) and is returned.
    ///
    /// The loop is a small state machine: each `Step` says what happens next, and each has a
    /// method that does it and returns the step after.
    pub fn run(mut self) -> anyhow::Result<Outcome> {
        set_timer_slack(self.opts.interval);
        let mut run = RunState {
            deadline: self.start,
            next_flush: self.start + Duration::from_millis(500),
            event: Some(Event::Start),
            queued: VecDeque::new(),
            end: EndInfo::default(),
        };
        let mut step = Step::Wake { early: false };
        let stop = loop {
            step = match step {
                Step::Wake { early } => self.wake(&mut run, early),
                Step::Tick => self.scheduled_tick(&mut run),
                Step::Control(msg, early) => self.control_step(&mut run, msg, early),
                Step::Sleep => Step::Wake {
                    early: self.sleep_until(run.deadline),
                },
                Step::WaitRestart => self.wait_restart_step(&mut run),
                Step::Stop(stop) => break stop,
            };
        };
        self.stop(stop, run)
    }

    /// Looks at what arrived (signals, control messages) and decides what comes next. `early`:
    /// a control message ended the last sleep before its deadline.
    fn wake(&mut self, run: &mut RunState, early: bool) -> Step {
        // Signals first: forward to a launched command, or stop.
        for a in signals::take() {
            match self.watched {
                Watched::Launched { pid } => {
                    if a.sent_by_process {
                        // SAFETY: sending a signal to our own, not yet reaped child.
                        unsafe { libc::kill(pid, a.sig) };
                    }
                    // The terminal's Ctrl-C already reached the command; wait for it.
                }
                Watched::Attached => return Step::Stop(Stop::Signal(a.sig)),
            }
        }
        // Control messages: each takes a sample of its own, after the start row.
        if run.event != Some(Event::Start) {
            run.queued.extend(self.control_rx.try_iter());
            if let Some(msg) = run.queued.pop_front() {
                return Step::Control(msg, early);
            }
        }
        // Woken early by a control message (its sample is taken): keep the schedule.
        if early && Instant::now() < run.deadline {
            return Step::Sleep;
        }
        Step::Tick
    }

    /// Answers one control message, then goes back to `wake` for the next.
    fn control_step(&mut self, run: &mut RunState, stamped: Stamped, early: bool) -> Step {
        let origin = Some(stamped.origin);
        match stamped.msg {
            Control::Stop => return Step::Stop(Stop::Stopped),
            Control::Event(e) => {
                let mark = matches!(e, Event::Mark(_));
                match self.tick_at(Some(e.clone()), origin) {
                    Ok(Some(_)) => self.reset_after_mark(mark),
                    // The target has ended: the marker waits, first in the queue, for the
                    // first sample after a restart (or is reported at the end).
                    Ok(None) => {
                        run.queued.push_front(Stamped {
                            msg: Control::Event(e),
                            origin: stamped.origin,
                        });
                        return self.target_ended(run);
                    }
                    Err(err) => return Step::Stop(Stop::Failed(err)),
                }
            }
            // A reset or a probe is answered with its row: whoever asked waited for it, so
            // nothing it did could fall on the wrong side of it (no lag to tell).
            Control::ResetPeaks(e, reply) => {
                let taken = self.tick(Some(e.clone()));
                let mut failed = Vec::new();
                if let Some(Err(err)) = self.cgroup.as_mut().map(|c| c.reset_peak()) {
                    failed.push(format!("the cgroup's peak: {err}"));
                }
                failed.extend(self.reset_peaks());
                if !failed.is_empty() {
                    self.reset_failures += 1;
                }
                let _ = reply.send(failed);
                match taken {
                    Ok(Some(_)) => {}
                    // The target has ended: its row is not taken; the caller sees it gone.
                    Ok(None) => return self.target_ended(run),
                    Err(err) => return Step::Stop(Stop::Failed(err)),
                }
            }
            Control::Probe(e, reply) => {
                let mark = matches!(e, Event::Mark(_));
                match self.tick(Some(e)) {
                    Ok(s) => {
                        self.reset_after_mark(mark);
                        let _ = reply.send(s);
                    }
                    Err(err) => {
                        let _ = reply.send(None);
                        return Step::Stop(Stop::Failed(err));
                    }
                }
            }
            Control::PssDone(read) => {
                if let Some((thread, _)) = self.pss.as_mut() {
                    thread.done();
                }
                self.pss_read(read);
                if self.pss_ready.is_some() {
                    match self.tick(None) {
                        Ok(Some(_)) => {}
                        Ok(None) => return self.target_ended(run),
                        Err(err) => return Step::Stop(Stop::Failed(err)),
                    }
                }
            }
            Control::ProbeIfWanted(e, wanted, reply) => {
                if wanted.swap(false, Ordering::SeqCst) {
                    let probe = Stamped {
                        msg: Control::Probe(e, reply),
                        origin: stamped.origin,
                    };
                    return self.control_step(run, probe, early);
                }
            }
            Control::Watch(tx) => self.watch = Some(tx),
            Control::CpuTicks(reply) => {
                let _ = reply.send(self.tree.cpu_ticks());
            }
        }
        Step::Wake { early }
    }

    /// Takes the sample due on the schedule (with the pending start or restart event), flushes
    /// and sets the next deadline.
    fn scheduled_tick(&mut self, run: &mut RunState) -> Step {
        let first = run.event == Some(Event::Start);
        match self.tick(run.event.take()) {
            Ok(Some(_)) if first => self.reset_at_start(),
            // The duration's last sample is the one taken at its end (the schedule is cut
            // to land there): `--duration 3s -i 1s` samples at 0, 1, 2 and 3 s.
            Ok(Some(_)) if self.duration_reached() => return Step::Stop(Stop::Duration),
            Ok(Some(_)) => {}
            Ok(None) => return self.target_ended(run),
            Err(e) => return Step::Stop(Stop::Failed(e)),
        }

        let interval = self.opts.interval;
        let now = Instant::now();
        if now >= run.next_flush || interval >= Duration::from_millis(500) {
            if let Err(e) = self.out.flush() {
                return Step::Stop(Stop::Failed(output_error(e)));
            }
            run.next_flush = now + Duration::from_millis(500);
        }
        // The next deadline on the absolute schedule; deadlines already past are missed.
        run.deadline += interval;
        if now > run.deadline {
            let behind = ((now - run.deadline).as_nanos() / interval.as_nanos().max(1)) as u64 + 1;
            self.missed += behind;
            run.deadline += interval * behind as u32;
        }
        if let Some(limit) = self.opts.duration {
            run.deadline = run.deadline.min(self.start + limit);
        }
        if run.queued.is_empty() {
            Step::Sleep
        } else {
            // Markers held while the target was away: taken now, then the schedule goes on.
            Step::Wake { early: true }
        }
    }

    /// The target has ended: a launched command is reaped and ends the recording; a target
    /// found by pidfile or name is waited for, unless `--exit-with-target`.
    fn target_ended(&mut self, run: &mut RunState) -> Step {
        match self.watched {
            Watched::Launched { pid } => {
                self.reap(pid, &mut run.end);
                Step::Stop(Stop::TargetExited)
            }
            Watched::Attached if self.opts.target.can_restart() && !self.opts.exit_with_target => {
                Step::WaitRestart
            }
            Watched::Attached => Step::Stop(Stop::TargetExited),
        }
    }

    /// Waits for the target to come back; its first sample is labelled `restart` and taken at
    /// once (the schedule starts again from there).
    fn wait_restart_step(&mut self, run: &mut RunState) -> Step {
        match self.wait_for_restart() {
            Restart::Found(pid) => {
                self.restarts += 1;
                run.event = Some(Event::Restart(pid));
                run.deadline = Instant::now();
                Step::Tick
            }
            Restart::Signal(sig) => Step::Stop(Stop::Signal(sig)),
            Restart::DurationReached => Step::Stop(Stop::Duration),
        }
    }

    /// Ends the recording for `stop`: markers still waiting are taken while the target lives,
    /// the end record is written and the summary made.
    fn stop(mut self, stop: Stop, mut run: RunState) -> anyhow::Result<Outcome> {
        let target_lives = !matches!(stop, Stop::TargetExited | Stop::Failed(_));
        run.queued.extend(self.control_rx.try_iter());
        if matches!(stop, Stop::Failed(_)) {
            // The failure is what is reported; no more samples are taken.
            run.queued.clear();
        }
        let mut untaken = Vec::new();
        for stamped in run.queued.drain(..) {
            // Probes and resets not answered see their reply channel closed: "the recording
            // has ended". Markers sent without a reply are taken, or said to be lost.
            if let Control::Event(e) = stamped.msg {
                let taken = target_lives
                    && matches!(
                        self.tick_at(Some(e.clone()), Some(stamped.origin)),
                        Ok(Some(_))
                    );
                if !taken {
                    untaken.push(e);
                }
            }
        }
        if !untaken.is_empty() && !self.opts.quiet {
            let labels: Vec<String> = untaken.iter().map(|e| format!("'{e}'")).collect();
            self.note(format!(
                "{} not taken: the target had ended before {}: {}",
                if untaken.len() == 1 {
                    "1 marker"
                } else {
                    "markers"
                },
                if untaken.len() == 1 {
                    "its sample"
                } else {
                    "their samples"
                },
                labels.join(", ")
            ));
        }
        let mut end = run.end;
        let (reason, signal) = match stop {
            Stop::Failed(err) => return self.fail(err, end),
            Stop::Stopped => {
                end.reason = EndReason::Stopped;
                self.last_pss_read();
                return self.finish(end, None, None);
            }
            Stop::Signal(sig) => (EndReason::Signal, Some(sig)),
            Stop::Duration => (EndReason::Duration, None),
            Stop::TargetExited => (EndReason::TargetExited, None),
        };
        end.reason = reason;
        let exit = match (&self.watched, signal) {
            (Watched::Launched { .. }, _) => match (end.exit_code, end.exit_signal) {
                (Some(c), _) => ExitCode::Passthrough(c),
                (None, Some(s)) => ExitCode::Signal(s),
                _ => ExitCode::Success,
            },
            (Watched::Attached, Some(sig)) => ExitCode::Signal(sig),
            (Watched::Attached, None) => ExitCode::Success,
        };
        if let Some(sig) = signal {
            end.memmon_signal = Some(signals::name(sig));
        }
        if end.reason != EndReason::TargetExited {
            self.last_pss_read();
        }
        let mut outcome = self.finish(end, Some(exit), None)?;
        outcome.signal = signal;
        Ok(outcome)
    }

    /// True once `--duration` has passed since the start.
    fn duration_reached(&self) -> bool {
        self.opts
            .duration
            .is_some_and(|limit| self.start.elapsed() >= limit)
    }

    /// Takes one sample of the tree and writes it. `Ok(None)` when the target has ended.
    fn tick(&mut self, event: Option<Event>) -> anyhow::Result<Option<Sample>> {
        self.tick_at(event, None)
    }

    /// `tick` for an event that happened at `origin`: the row says how long after it it was
    /// read (`event_lag_us`).
    fn tick_at(
        &mut self,
        event: Option<Event>,
        origin: Option<SystemTime>,
    ) -> anyhow::Result<Option<Sample>> {
        if let Watched::Launched { pid } = self.watched {
            self.reap_exited(pid);
        }
        let ts = match self.tree.sample() {
            Ok(Some(ts)) => ts,
            Ok(None) => return Ok(None),
            Err(ProcError::PermissionDenied(p)) => {
                return Err(CodedError::new(
                    ExitCode::NoTarget,
                    format!(
                        "permission denied reading {} (run memmon as the target's owner or root)",
                        p.display()
                    ),
                ))
            }
            Err(e) => return Err(e.into()),
        };
        let now = Instant::now();
        let pss_bytes = self.pss_ready.take();
        let nvidia_mapped_rss_bytes = self.nvidia_rss_ready.take();
        let gpu = match &mut self.gpu {
            Some(g) => {
                let (tick, notes) = g.tick(self.tree.each_member().map(|(h, _)| h.pid), now);
                if !self.opts.quiet {
                    notes.into_iter().for_each(|n| self.note(n));
                }
                tick
            }
            None => Default::default(),
        };
        let cgroup = self.cgroup.as_mut().and_then(|c| c.tick());
        let mut s = Sample {
            unix_ms: unix_ms_now(),
            elapsed_s: now.duration_since(self.start).as_secs_f64(),
            rss_bytes: ts.rss,
            anon_bytes: ts.anon,
            file_bytes: ts.file,
            shmem_bytes: ts.shmem,
            swap_bytes: ts.swap,
            locked_bytes: ts.locked,
            pinned_bytes: ts.pinned,
            processes: ts.processes,
            top_pid: ts.top_pid,
            top_rss_bytes: ts.top_rss,
            hwm_bytes: ts.hwm_max,
            hwm_sum_bytes: ts.hwm_sum,
            pss_bytes,
            missed_ticks: self.missed,
            gpu,
            nvidia_mapped_rss_bytes,
            vm_size_bytes: ts.vm_size,
            threads: ts.threads,
            departed: ts.departed,
            event_lag_us: origin.filter(|_| event.is_some()).map(|o| {
                SystemTime::now()
                    .duration_since(o)
                    .map_or(0, |d| d.as_micros() as u64)
            }),
            event,
            ..Sample::default()
        };
        crate::sampler::cgroup::fill(&mut s, cgroup.as_ref());
        self.out.write_sample(&s).map_err(output_error)?;
        if let Some(w) = &self.watch {
            let _ = w.send(s.clone());
        }
        self.samples += 1;
        self.summary.push(&s);
        self.observer.on_sample(&s);
        self.maybe_ask_pss(now, s.rss_bytes);
        Ok(Some(s))
    }

    /// After a row whose tree RSS is `rss`: asks the PSS thread for a read when one is due
    /// (`sampler::pss::PssSchedule`) and none is under way.
    fn maybe_ask_pss(&mut self, now: Instant, rss: u64) {
        let (Some(guard), Some((thread, schedule))) = (self.opts.pss.as_ref(), self.pss.as_mut())
        else {
            return;
        };
        if thread.busy() || !schedule.due(now, rss) {
            return;
        }
        schedule.asked(now, rss);
        let known = self.gpu.as_ref().and_then(|g| g.nvidia_pids());
        self.nvidia_asked_known = known.is_some();
        thread.ask(self.tree.each_member(), guard, &known.unwrap_or_default());
    }

    /// A read of the tree's PSS has ended: the processes it could not read are noted (once
    /// each, then counted), and a complete sum goes on the next row.
    fn pss_read(&mut self, read: crate::sampler::pss::PssRead) {
        for u in read.unread {
            if let Some(known) = self
                .pss_unread
                .iter_mut()
                .find(|k| k.pid == u.pid && k.reason == u.reason)
            {
                known.reads += 1;
                continue;
            }
            if !self.opts.quiet {
                self.note(format!(
                    "not reading PSS of PID {} ({}): {}; ticks without it have no PSS",
                    u.pid, u.comm, u.why
                ));
            }
            self.pss_unread.push(PssUnread {
                pid: u.pid,
                comm: u.comm,
                reason: u.reason,
                reads: 1,
            });
        }
        self.pss_ready = read.total;
        // The NVIDIA mappings' resident bytes go on the same row, when GPU memory is read and
        // the read was asked knowing which processes map them.
        self.nvidia_rss_ready = read
            .nvidia_rss
            .filter(|_| self.gpu.is_some() && self.nvidia_asked_known);
    }

    /// The tree's processes that map NVIDIA device files (their PSS read also gives those
    /// mappings' resident bytes), noting whether they are known.
    fn nvidia_pids(&mut self) -> Vec<i32> {
        let known = self.gpu.as_ref().and_then(|g| g.nvidia_pids());
        self.nvidia_asked_known = known.is_some();
        known.unwrap_or_default()
    }

    /// With `--pss`, when the recording stops while the target lives: one more row with a PSS
    /// read (on this thread: the recording is ending), unless one was asked for within the last
    /// interval, so the PSS reads cover the end and not only the start of a recording shorter
    /// than `--pss-every`.
    fn last_pss_read(&mut self) {
        let Some(guard) = self.opts.pss.clone() else {
            return;
        };
        if self.samples == 0 {
            return;
        }
        let recent = self.pss.as_ref().and_then(|(_, s)| s.last_asked());
        if recent.is_some_and(|t| t.elapsed() < self.opts.interval) {
            return;
        }
        let nvidia = self.nvidia_pids();
        let read = crate::sampler::pss::read_now(self.tree.each_member(), &guard, &nvidia);
        self.pss_read(read);
        // Best effort: the target may have just gone, or the output failed (reported by finish).
        let _ = self.tick(None);
    }

    /// With `phase_peaks`, resets the high-water marks right after a marker's sample (whose
    /// VmHWM closes the phase before), so the next phase's rows carry that phase's own peak.
    fn reset_after_mark(&mut self, mark: bool) {
        if !(mark && self.opts.phase_peaks) {
            return;
        }
        if let Some(Err(e)) = self.cgroup.as_mut().map(|c| c.reset_peak()) {
            if !self.opts.quiet {
                self.note(format!("warning: cannot reset the cgroup's peak: {e}; per-phase cgroup peaks are not exact"));
            }
        }
        let failed = self.reset_peaks();
        if failed.is_empty() {
            return;
        }
        self.reset_failures += 1;
        if self.reset_failures == 1 && !self.opts.quiet {
            self.note(format!(
                "warning: cannot reset the peak (clear_refs) of {}; per-phase kernel peaks are not exact",
                failed.join(", ")
            ));
        }
    }

    /// With `reset_peak` and an attached target, resets the high-water marks right after the
    /// first sample: the later rows then carry peaks reached during the recording only.
    fn reset_at_start(&mut self) {
        if !self.opts.reset_peak || !matches!(self.watched, Watched::Attached) {
            return;
        }
        if let Some(Err(e)) = self.cgroup.as_mut().map(|c| c.reset_peak_at_start()) {
            if !self.opts.quiet {
                self.note(format!("warning: cannot reset the cgroup's peak (--reset-peak): {e}; its peak counts only if it rises during the recording"));
            }
        }
        let failed = self.reset_peaks();
        if failed.is_empty() {
            return;
        }
        self.reset_failures += 1;
        if !self.opts.quiet {
            self.note(format!(
                "warning: cannot reset the peak (clear_refs, --reset-peak) of {}; the kernel peak counts only if it rises during the recording",
                failed.join(", ")
            ));
        }
    }

    /// Resets VmHWM of every process in the tree (at a marker, at the start, at a bench run);
    /// returns a message per failure. Every status read and exit record queued before the
    /// reset is kept out of the samples after it (`Tree::reset_marks`).
    fn reset_peaks(&mut self) -> Vec<String> {
        self.tree
            .reset_marks()
            .into_iter()
            .map(|(pid, e)| format!("PID {pid}: {e}"))
            .collect()
    }

    /// Waits for a new process behind the pidfile or name, or for a signal or the duration
    /// limit.
    fn wait_for_restart(&mut self) -> Restart {
        let old = self.tree.root().map_or((0, 0), |h| (h.pid, h.start_time));
        // The old process was alive at the previous tick: a `--name` successor started after
        // that (one clock tick of slack), never before.
        let interval_ticks = (self.opts.interval.as_secs_f64() * clock_ticks_per_s()) as u64;
        let not_before = target::boot_ticks_now(&self.opts.procfs)
            .map_or(0, |now| now.saturating_sub(interval_ticks + 1));
        if !self.opts.quiet {
            self.note("the target exited; waiting for it to restart (Ctrl-C to stop)".into());
        }
        self.pidfd = None;
        let mut look = target::LookAgain::new();
        loop {
            if let Some(limit) = self.opts.duration {
                if self.start.elapsed() >= limit {
                    return Restart::DurationReached;
                }
            }
            let found = match &self.opts.target {
                TargetSpec::Pidfile(path) => {
                    target::pidfile_successor(&self.opts.procfs, path, old, self.pidfile_stamp).map(
                        |(h, stamp)| {
                            self.pidfile_stamp = Some(stamp);
                            h
                        },
                    )
                }
                TargetSpec::Name(re) => {
                    target::name_successor(&self.opts.procfs, re, old, not_before)
                }
                _ => None,
            };
            if let Some(h) = found {
                let pid = h.pid;
                if !self.opts.quiet {
                    self.note(format!(
                        "the target restarted as PID {pid} ({}); recording goes on",
                        h.comm
                    ));
                }
                self.pidfd = open_pidfd(&h);
                self.exit_peak = self.exit_peak.max(self.tree.exit_peak());
                let exits = self.tree.take_exits();
                self.tree = Tree::new(self.opts.procfs.clone(), h, self.opts.children);
                if let Some(w) = exits {
                    self.tree.watch_exits(w);
                }
                return Restart::Found(pid);
            }
            let mut until = Instant::now() + look.pause();
            if let Some(limit) = self.opts.duration {
                until = until.min(self.start + limit);
            }
            self.sleep_until(until);
            if let Some(a) = signals::take().first() {
                return Restart::Signal(a.sig);
            }
        }
    }

    /// Reaps memmon's exited children: orphans of the command that were re-parented to memmon
    /// (its subreaper) and have ended, each with its `ru_maxrss` (the kernel's peak of that
    /// process, which the command's own rusage lacks: it never waited for them); and the command
    /// itself once it has exited, whose status and rusage are kept for `reap`. (Waiting for
    /// "any child" finds the command among the others: it is reaped then, not skipped, or the
    /// orphans after it would wait for a later tick that never comes.)
    fn reap_exited(&mut self, command: i32) {
        loop {
            // SAFETY: a zeroed siginfo is a valid out-parameter for waitid.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: peeking (WNOWAIT) at any exited child, without blocking.
            let r = unsafe {
                libc::waitid(
                    libc::P_ALL,
                    0,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                )
            };
            // SAFETY: waitid filled `info` (si_pid is 0 when no child has exited).
            let pid = unsafe { info.si_pid() };
            if r != 0 || pid == 0 {
                return;
            }
            let mut status = 0;
            // SAFETY: zeroed rusage is a valid out-parameter.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: reaping that one exited child, with valid out-pointers.
            if unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) } != pid {
                return;
            }
            if pid == command {
                self.command_exit = Some((status, ru, Instant::now()));
            } else {
                self.orphans_maxrss = self.orphans_maxrss.max(ru.ru_maxrss.max(0) as u64 * 1024);
            }
        }
    }

    /// Reaps the launched command (unless `reap_exited` did) and reads its exit status and
    /// ru_maxrss (its own, from wait4 on that very child: not RUSAGE_CHILDREN, which is the
    /// maximum over all children).
    fn reap(&mut self, pid: i32, end: &mut EndInfo) {
        let (status, ru, ended) = match self.command_exit.take() {
            Some(done) => done,
            None => {
                let mut status: libc::c_int = 0;
                // SAFETY: zeroed rusage is a valid out-parameter.
                let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
                loop {
                    // SAFETY: waiting for our own child with valid out-pointers.
                    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
                    if r == pid {
                        break;
                    }
                    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
                    {
                        continue;
                    }
                    return;
                }
                (status, ru, Instant::now())
            }
        };
        let ended = self.exited_at.get().copied().unwrap_or(ended);
        end.launcher_rss_bytes = self.launcher_rss;
        end.command_wall_s = self
            .launched_at
            .map(|t| ended.duration_since(t).as_secs_f64());
        if libc::WIFEXITED(status) {
            end.exit_code = Some(libc::WEXITSTATUS(status));
        } else if libc::WIFSIGNALED(status) {
            end.exit_signal = Some(libc::WTERMSIG(status));
        }
        // With the orphans memmon reaped: every process of the tree that has ended is in it.
        end.rusage_maxrss_bytes =
            Some((ru.ru_maxrss.max(0) as u64 * 1024).max(self.orphans_maxrss));
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        end.rusage_user_s = Some(secs(ru.ru_utime));
        end.rusage_system_s = Some(secs(ru.ru_stime));
    }

    /// Sleeps until `deadline`, or until the target exits, a signal or a control message
    /// arrives. True when only a control message ended the sleep early.
    fn sleep_until(&self, deadline: Instant) -> bool {
        let now = Instant::now();
        if deadline <= now {
            return false;
        }
        let left = deadline - now;
        let ts = libc::timespec {
            tv_sec: left.as_secs() as libc::time_t,
            tv_nsec: left.subsec_nanos() as libc::c_long,
        };
        let mut fds = [
            libc::pollfd {
                fd: self.control.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.pidfd.as_ref().map_or(-1, |f| f.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
            // A stop signal ends the sleep whenever it came and whichever thread it hit.
            libc::pollfd {
                fd: signals::wake_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: fds and ts are valid for the call; a negative fd is ignored by ppoll.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 3, &ts, std::ptr::null()) };
        if r > 0 && fds[0].revents & libc::POLLIN != 0 {
            let mut v: u64 = 0;
            // SAFETY: reading 8 bytes into a valid u64 from our eventfd.
            unsafe { libc::read(fds[0].fd, &mut v as *mut u64 as *mut _, 8) };
            return fds[1].revents == 0;
        }
        false
    }

    fn end_info(&mut self, mut end: EndInfo) -> EndInfo {
        if end.cgroup.is_none() {
            let total = self.meta.mem_total_bytes;
            end.cgroup = self.cgroup.as_mut().map(|c| c.finish(total));
        }
        end.ended_unix_ms = unix_ms_now();
        end.samples = self.samples;
        end.missed_ticks = self.missed;
        end.restarts = self.restarts;
        end.processes = self.tree.processes();
        end.processes_departed = self.tree.departed_count();
        end.peak_reset_failures = self.reset_failures;
        end.pss_unread = self.pss_unread.clone();
        end.gpu = self.gpu.as_mut().map(|g| g.end());
        end.exit_records = Some(self.exit_records.clone());
        // The watch, and its count, go from tree to tree across restarts.
        end.exit_records_lost = self.tree.exit_records_lost();
        end.exit_peak_bytes = self.exit_peak.max(self.tree.exit_peak());
        end.exit_peak_after_last_sample_bytes = self
            .tree
            .departures_after_last_sample()
            .map(|d| d.departed_hwm)
            .filter(|&h| h > 0);
        end.target_exit_read = self.tree.root_exit_peak().is_some();
        end
    }

    fn finish(
        mut self,
        end: EndInfo,
        exit: Option<ExitCode>,
        err: Option<String>,
    ) -> anyhow::Result<Outcome> {
        let mut end = self.end_info(end);
        if err.is_some() {
            end.error = err;
        }
        let finished = self.out.finish(&end);
        self.summary.session_end(&end);
        let summary = self.summary.finish(
            self.out
                .path()
                .map(|p| p.display().to_string())
                .or(Some("stdout".into())),
            None,
        );
        if let Err(e) = finished {
            let kept = self.kept_text(matches!(e, OutputError::Removed(_)));
            return Err(output_error(e)).context(kept);
        }
        self.observer.on_end(&summary);
        Ok(Outcome {
            summary,
            exit: exit.unwrap_or(ExitCode::Success),
            output: self.out.path().map(|p| p.to_path_buf()),
            signal: None,
        })
    }

    /// Ends after a failure (a full disk, a vanished directory, a closed pipe): keeps what was
    /// written, and for a launched command waits for it to finish.
    fn fail(mut self, err: anyhow::Error, mut end: EndInfo) -> anyhow::Result<Outcome> {
        let broken_pipe = err.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
        });
        if broken_pipe {
            end.reason = EndReason::OutputClosed;
            if let Watched::Launched { pid } = self.watched {
                self.reap(pid, &mut end);
            }
            let outcome = self.finish(end, Some(ExitCode::Success), None);
            return outcome.or(Ok(Outcome {
                summary: SummaryBuilder::new().finish(None, None),
                exit: ExitCode::Success,
                output: None,
                signal: None,
            }));
        }
        end.reason = EndReason::Error;
        let msg = format!("{err:#}");
        if let Watched::Launched { pid } = self.watched {
            self.note(format!(
                "error: {msg}; recording stopped, waiting for the command to finish"
            ));
            self.reap(pid, &mut end);
        }
        // Best effort: record the end (this may fail too on a full disk).
        let end = self.end_info(end);
        let removed = err.chain().any(|c| {
            matches!(
                c.downcast_ref::<OutputError>(),
                Some(OutputError::Removed(_))
            )
        });
        let kept = if removed {
            format!(
                "recording stopped; the {} taken are lost",
                samples_text(self.samples)
            )
        } else {
            let _ = self.out.finish(&EndInfo {
                error: Some(msg.clone()),
                ..end
            });
            format!("recording stopped; {}", self.kept_text(false))
        };
        Err(err.context(kept))
    }

    /// What is left of the recording after the output failed (`removed`: its file was deleted):
    /// only what the last
    /// successful flush put in the file is counted as kept.
    fn kept_text(&self, removed: bool) -> String {
        let place = self.out.describe();
        if removed {
            return format!("the {} taken are lost", samples_text(self.samples));
        }
        let kept = self.out.flushed_samples();
        if kept == self.samples {
            format!("the {} taken are in {place}", samples_text(kept))
        } else {
            format!(
                "at least {} of the {} taken reached {place} (those of its last successful flush); later ones may be lost",
                kept,
                samples_text(self.samples)
            )
        }
    }
}

/// `1 sample`, `12 samples`.
fn samples_text(n: u64) -> String {
    crate::units::count(n, "sample")
}

fn find_target(
    opts: &RecordOptions,
    spec: &TargetSpec,
    observer: &mut dyn RecordObserver,
) -> anyhow::Result<target::Resolved> {
    let mut announced = false;
    let mut look = target::LookAgain::new();
    loop {
        match target::resolve(&opts.procfs, spec) {
            Ok(mut r) => {
                if let Some(note) = r.note.take() {
                    if !opts.quiet {
                        observer.on_note(&note);
                    }
                }
                return Ok(r);
            }
            // An empty pidfile is one being written: waited on like a missing one.
            Err(
                TargetError::NoMatch(_)
                | TargetError::PidfileStale(..)
                | TargetError::PidfileEmpty(..)
                | TargetError::PidfileUnreadable(..),
            ) if opts.wait => {
                if !announced && !opts.quiet {
                    observer.on_note(&format!(
                        "waiting for the target {} to appear (--wait)",
                        spec.spec()
                    ));
                    announced = true;
                }
                if let Some(a) = signals::take().first() {
                    return Err(CodedError::new(
                        ExitCode::Signal(a.sig),
                        "stopped while waiting for the target",
                    ));
                }
                signals::sleep(look.pause());
            }
            Err(e) => {
                let code = match e {
                    TargetError::PidfileGarbage(..)
                    | TargetError::PidfileNotRegular(..)
                    | TargetError::PidfileTooLarge(..)
                    | TargetError::KernelThread { .. }
                    | TargetError::Thread { .. } => ExitCode::Usage,
                    _ => ExitCode::NoTarget,
                };
                return Err(CodedError::new(code, e.to_string()));
            }
        }
    }
}

/// Launches the command with stdin, stdout and stderr passed through (stdout to memmon's stderr
/// when the data goes to stdout), or its stdout to a pipe returned here when `pipe_stdout`.
/// It gets SIGTERM if memmon dies (its descendants, in memmon's own cgroup, are killed by that
/// cgroup's watcher; see `probe::cgroup::OwnCgroup`).
fn launch(
    args: &[String],
    env: &[(String, String)],
    data_on_stdout: bool,
    pipe_stdout: bool,
    join_cgroup: Option<RawFd>,
) -> anyhow::Result<(i32, Option<std::process::ChildStdout>)> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(&args[0]);
    cmd.args(&args[1..])
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if pipe_stdout {
        cmd.stdout(std::process::Stdio::piped());
    } else if data_on_stdout {
        let err = std::io::stderr();
        let fd = std::os::fd::AsFd::as_fd(&err).try_clone_to_owned()?;
        cmd.stdout(std::process::Stdio::from(fd));
    }
    // memmon becomes the subreaper of what it launches: a descendant whose parent exits is
    // re-parented to memmon instead of init, so it stays in the watched tree.
    // SAFETY: PR_SET_CHILD_SUBREAPER takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
    let memmon = std::process::id() as libc::pid_t;
    // SAFETY: prctl, getppid and write are async-signal-safe and touch no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            // memmon died before the prctl: no signal will come, so do not start.
            if libc::getppid() != memmon {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            // Into memmon's own cgroup before exec: "0" is the writing process itself.
            if let Some(fd) = join_cgroup {
                if libc::write(fd, b"0\n".as_ptr() as *const _, 2) != 2 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    match cmd.spawn() {
        Ok(mut child) => {
            let pid = child.id() as i32;
            let stdout = child.stdout.take();
            // memmon reaps it itself (wait4, for its rusage); std must not.
            std::mem::forget(child);
            Ok((pid, stdout))
        }
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            Err(CodedError::new(
                ExitCode::Passthrough(code),
                format!("cannot run '{}': {e}", args[0]),
            ))
        }
    }
}

/// Notes when the launched command `pid` exits, on a thread that waits for it without reaping
/// it (`WNOWAIT`: the recorder reaps it, for its rusage); nothing is noted when the recorder
/// reaps it first.
fn watch_exit(pid: i32, at: Arc<std::sync::OnceLock<Instant>>) {
    let _ = std::thread::Builder::new()
        .name("memmon-exit".into())
        .spawn(move || loop {
            // SAFETY: a zeroed siginfo is a valid out-parameter for waitid.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waiting, without reaping, for our own child.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 {
                let _ = at.set(Instant::now());
                return;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return;
            }
        });
}

fn open_pidfd(h: &ProcHandle) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, no pointers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, h.pid, 0) } as RawFd;
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // The PID might have been reused between opening the handle and the pidfd.
    h.is_alive().then_some(fd)
}

/// Finer timer slack for short intervals, so a 100 µs schedule is kept.
fn set_timer_slack(interval: Duration) {
    let slack_ns = (interval.as_nanos() / 20).clamp(1_000, 50_000) as libc::c_ulong;
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns) };
}

pub fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn output_error(e: OutputError) -> anyhow::Error {
    match e.exit_code() {
        ExitCode::Failure => anyhow::Error::new(e),
        code => CodedError::new(code, e.to_string()),
    }
}

fn build_meta(opts: &RecordOptions, h: &ProcHandle, cgroup: Option<&CgroupSource>) -> Meta {
    // How children are found comes second, once the tree says (`start`).
    let mut sources = vec!["/proc/PID/status (VmRSS, RssAnon, RssFile, RssShmem, VmSwap, VmLck, VmPin, VmHWM) every tick".to_string()];
    if let Some(p) = &opts.pss {
        sources.push(format!(
            "/proc/PID/smaps_rollup (Pss) every {}, skipping processes over {}{}",
            fmt_interval(p.every),
            fmt_bytes(p.max_rss),
            if p.force {
                " unless forced (forced)"
            } else {
                ""
            }
        ));
    }
    if matches!(opts.target, TargetSpec::Command(_)) {
        sources.push("wait4 ru_maxrss of the launched command at its exit".into());
    }
    if let Some(c) = cgroup {
        let cg = c.cgroup();
        let v1 = cg.version == crate::probe::cgroup::CgroupVersion::V1;
        sources.push(format!(
            "{} {} ({}{}): {} every tick and at the end",
            cg.version.name(),
            cg.path,
            cg.dir.display(),
            if c.is_own() {
                ", memmon's own, made for the launched command and removed after"
            } else {
                ""
            },
            if v1 {
                "memory.usage_in_bytes, memory.stat, memory.limit_in_bytes, memory.max_usage_in_bytes, memory.failcnt, memory.oom_control"
            } else {
                "memory.current, memory.stat, memory.max, memory.peak, memory.events"
            }
        ));
    }
    Meta {
        format: "memmon-recording".into(),
        schema_version: SCHEMA_VERSION,
        memmon_version: env!("CARGO_PKG_VERSION").into(),
        host: hostname(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        page_size_bytes: ProcFs::page_size(),
        started_unix_ms: unix_ms_now(),
        interval_s: opts.interval.as_secs_f64(),
        interval: fmt_interval(opts.interval),
        target: TargetMeta {
            mode: opts.target.mode().into(),
            spec: crate::format::meta::bounded_text(opts.target.spec()),
            pid: h.pid,
            start_time_ticks: h.start_time,
            comm: h.comm.clone(),
            cmdline: crate::format::meta::bounded_text(h.cmdline()),
        },
        children: opts.children,
        phase_peaks: opts.phase_peaks,
        peak_reset_at_start: opts.reset_peak && !matches!(opts.target, TargetSpec::Command(_)),
        run_peaks: opts.run_peaks,
        exit_records: None,
        cgroup: cgroup.map(|c| crate::format::meta::CgroupMeta {
            path: c.cgroup().path.clone(),
            version: c.cgroup().version,
            own: c.is_own(),
            holds_tree: c.holds_tree(),
        }),
        online_cpus: Some(crate::model::peak::online_cpus()),
        mem_total_bytes: crate::sampler::cgroup::mem_total_bytes(),
        sources,
        columns: COLUMNS
            .iter()
            .map(|c| ColumnMeta {
                name: c.name.into(),
                unit: c.unit.into(),
            })
            .collect(),
        gpu: None,
        end: None,
        earlier_sessions: Vec::new(),
    }
}

/// The cgroup of an attached target to read: `--cgroup PATH`, or with `--cgroup auto` its own
/// memory cgroup when that holds only its tree (else a usage error saying why).
fn attached_cgroup(opts: &RecordOptions, h: &ProcHandle) -> anyhow::Result<Option<CgroupSource>> {
    let usage = |m: String| CodedError::new(ExitCode::Usage, m);
    match &opts.cgroup {
        None => Ok(None),
        Some(CgroupChoice::Path(p)) => {
            let cg = opts.cgroupfs.at(p).map_err(|e| usage(e.to_string()))?;
            // Its peak is the tree's when it holds the tree and nothing else (or when the
            // cgroup is itself the target: `record --cgroup PATH` alone).
            let alone = matches!(opts.target, TargetSpec::Cgroup(_))
                || !cg.is_root()
                    && cg
                        .foreign_process(&opts.procfs, h.pid)
                        .is_ok_and(|other| other.is_none())
                    && cg.procs().is_ok_and(|p| p.contains(&h.pid));
            Ok(Some(CgroupSource::existing(cg, alone)))
        }
        Some(CgroupChoice::AutoIfAlone) => {
            let alone = opts
                .cgroupfs
                .of_pid(opts.procfs.root(), h.pid)
                .filter(|cg| !cg.is_root())
                .filter(|cg| {
                    cg.foreign_process(&opts.procfs, h.pid)
                        .is_ok_and(|other| other.is_none())
                });
            Ok(alone.map(|cg| CgroupSource::existing(cg, true)))
        }
        Some(CgroupChoice::Auto) => {
            let cg = opts
                .cgroupfs
                .of_pid(opts.procfs.root(), h.pid)
                .ok_or_else(|| {
                    usage(format!(
                        "--cgroup auto: the memory cgroup of PID {} was not found",
                        h.pid
                    ))
                })?;
            if cg.is_root() {
                return Err(usage(format!(
                    "--cgroup auto: PID {} is in the root cgroup, which holds the whole machine (give --cgroup PATH, or run the target in a cgroup of its own, e.g. systemd-run --scope)",
                    h.pid
                )));
            }
            if let Some(other) = cg
                .foreign_process(&opts.procfs, h.pid)
                .map_err(|e| usage(e.to_string()))?
            {
                return Err(usage(format!(
                    "--cgroup auto: the cgroup {} of PID {} also holds PID {other}, which is not in its tree (give --cgroup {} to record the whole cgroup anyway)",
                    cg.path, h.pid, cg.path
                )));
            }
            Ok(Some(CgroupSource::existing(cg, true)))
        }
    }
}

/// The cgroup of a command memmon launches: `--cgroup PATH` (read, not joined), or a cgroup of
/// memmon's own (`--own-cgroup`, `--cgroup auto`, or by default where memmon may make one).
fn launched_cgroup(
    opts: &RecordOptions,
    observer: &mut dyn RecordObserver,
) -> anyhow::Result<Option<CgroupSource>> {
    if let Some(CgroupChoice::Path(p)) = &opts.cgroup {
        let cg = opts
            .cgroupfs
            .at(p)
            .map_err(|e| CodedError::new(ExitCode::Usage, e.to_string()))?;
        // Read, not joined: the command's tree is not in it.
        return Ok(Some(CgroupSource::existing(cg, false)));
    }
    let wanted = opts.own_cgroup.or(opts.cgroup.as_ref().map(|_| true));
    if wanted == Some(false) {
        return Ok(None);
    }
    static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if n == 0 {
        // Once a process, even with --quiet: it may have killed processes.
        if let Some(note) = crate::sampler::cgroup::swept_note(&opts.cgroupfs.sweep_stale_own()) {
            observer.on_note(&note);
        }
    }
    let name = format!("memmon-{}-{n}", std::process::id());
    match opts.cgroupfs.create_own(&name) {
        Ok(own) => Ok(Some(CgroupSource::own(own))),
        Err(e) if wanted == Some(true) => Err(CodedError::new(
            ExitCode::Failure,
            format!("--own-cgroup: cannot make a memory cgroup for the command: {e}"),
        )),
        Err(e) => {
            if !opts.quiet {
                observer.on_note(&format!("no cgroup of its own for the command ({e}): the tree's peak is bounded, not exact"));
            }
            Ok(None)
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}

    #[test]
    fn a_recorder_can_run_on_another_thread() {
        assert_send::<Recorder>();
        assert_send::<ControlHandle>();
    }
}
