//! The recorder: the engine (`watch.rs`) on an absolute schedule (`schedule.rs`), its samples
//! handed to a sink (`sink.rs`: a file for `record`, a bench's runs, memory for tests) and to
//! the running summary (`analysis/`). It sleeps until the next deadline or until the target
//! exits, a signal arrives or a control message (a marker, a bench's reset) comes in. Signals
//! end it cleanly; the target ending ends it (or, for a pidfile or a name, it waits for the
//! restart). `start.rs` sets a recording up (the target, its sources, the sink, the metadata);
//! `end.rs` ends it (the end record, the summary, what a failure leaves).

mod end;
mod start;

pub use start::file_sink;

use crate::analysis::{Summary, SummaryBuilder};
use crate::exit::Ending;
use crate::format::meta::{EndInfo, Meta};
use crate::model::sample::{Event, Sample};
use crate::probe::cgroup::CgroupFs;
use crate::probe::{ProcError, ProcFs};
use crate::reporter::Reporter;
use crate::sampler::cgroup::CgroupChoice;
use crate::sampler::error::RecordError;
use crate::sampler::launch::Launched;
use crate::sampler::schedule::Schedule;
use crate::sampler::sink::SampleSink;
use crate::sampler::target::{self, TargetSpec};
use crate::sampler::tree::Quiet;
use crate::sampler::watch::{Found, Watch};
use crate::sys::{self, signals, WaitSet, Waker, WatchFd};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub use crate::sampler::pss::PssGuard;
pub use crate::sampler::watch::unix_ms_now;

#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub target: TargetSpec,
    pub interval: Duration,
    pub children: bool,
    /// Where the file sink `Recorder::start` makes writes (a file, or stdout).
    pub output: crate::output::Dest,
    pub format: Option<crate::format::Format>,
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
    pub procfs: ProcFs,
    /// Reset the kernel's high-water marks right after each marker's sample, so each phase's
    /// rows carry that phase's exact peak (`--phase-peaks`; recorded in the metadata).
    pub phase_peaks: bool,
    /// Reset the high-water marks of an attached target right after the first sample, so its
    /// kernel peak is the recording's from the start (`--reset-peaks`; recorded in the metadata).
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
    /// Anatomies of the tree into a side file (`--anatomy`): when, and whether smaps is read.
    pub anatomy: Option<crate::sampler::anatomy::AnatomyOptions>,
}

impl RecordOptions {
    /// A recording of `target` as `memmon record` makes it when given no other flag: every
    /// second, its descendants too, to stdout, with exit records where memmon may read them;
    /// no GPU, no PSS, no cgroup but one of memmon's own for a launched command where it may.
    /// Callers set what differs: `RecordOptions { interval, ..RecordOptions::new(target) }`.
    pub fn new(target: TargetSpec) -> RecordOptions {
        RecordOptions {
            target,
            interval: Duration::from_secs(1),
            children: true,
            output: crate::output::Dest::Stdout,
            format: None,
            force: false,
            append: false,
            pss: None,
            gpu: crate::sampler::gpu::GpuOptions::default(),
            wait: false,
            exit_with_target: false,
            duration: None,
            procfs: ProcFs::default(),
            phase_peaks: false,
            reset_peak: false,
            exit_records: true,
            capture_stdout: false,
            env: Vec::new(),
            cgroup: None,
            run_peaks: None,
            own_cgroup: None,
            cgroupfs: CgroupFs::default(),
            anatomy: None,
        }
    }
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
    ResetPeaks(Event, mpsc::Sender<ResetRefusals>),
    /// Read every process's VmHWM now; the reply is the sample taken (with the event).
    Probe(Event, mpsc::Sender<Option<Sample>>),
    /// A `Probe` for an asker that waits a bounded time (`memmon mark`): taken only if the
    /// recorder clears `wanted` first; an asker that gives up clears it, so a marker is either
    /// taken and answered or never taken (not taken late, after its asker has said it failed).
    ProbeIfWanted(Event, Arc<AtomicBool>, mpsc::Sender<Option<Sample>>),
    /// Reply with the tree's CPU time so far (`Tree::cpu_ticks`), in clock ticks; no sample.
    CpuTicks(mpsc::Sender<(u64, u64)>),
    /// A daemon bench's client of run N has exited after this many seconds: kept for the end
    /// record's `client_walls` (the run's time in the recording is the table's); no sample.
    ClientWall(crate::format::meta::ClientWall),
    /// A read of the tree's PSS ended (`sampler/pss.rs`): a row takes its sum now.
    PssDone,
    /// An anatomy read ended (`sampler/anatomy.rs`): it goes to the sink now, not at the next
    /// row.
    AnatomyDone,
    /// End the recording as if a signal had arrived (reason `stopped`).
    Stop,
    /// The launched command's stdout has ended (`--mark-stdout`'s relay): every marker found in
    /// it was sent before this. A command that prints its last marker and exits is seen to exit
    /// before that marker arrives; the recorder waits for this before it says which markers it
    /// could not take.
    OutputEnded,
}

/// What a reset of the peaks at a bench run (`Control::ResetPeaks`) could not reset: the
/// processes' high-water marks (one line per process), and the cgroup's peak file. Either may
/// fail alone: a kernel from 5.19 to 6.11 gives a cgroup peak that cannot be reset, while every
/// process's VmHWM can.
#[derive(Debug, Default)]
pub struct ResetRefusals {
    pub kernel: Vec<String>,
    pub cgroup: Option<String>,
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
    wake: Arc<Waker>,
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
        self.wake.wake();
        true
    }
}

/// What a recording shows whoever runs it, as data: the recorder itself prints none of it
/// (`commands/record.rs` draws it on the terminal; a benchmark shows none of it). Its notes and
/// warnings go to the `Reporter` it is given.
pub trait RecordObserver {
    /// The recording has started: the metadata is written.
    fn on_start(&mut self, _start: &RecordStart) {}
    /// A sample was taken and handed to the sink.
    fn on_sample(&mut self, _sample: &Sample) {}
    /// The recording has ended and its end record is written.
    fn on_end(&mut self, _summary: &Summary) {}
}

/// An observer that shows nothing.
impl RecordObserver for () {}

/// What the start of a recording is: where the data goes and what is watched.
pub struct RecordStart<'a> {
    /// Where the samples go, e.g. `out.csv (CSV; metadata in out.csv.meta.json)`.
    pub destination: String,
    /// The metadata written (target, interval, sources).
    pub meta: &'a Meta,
}

/// How the recording went.
pub struct Outcome {
    pub summary: Summary,
    /// How it ended: what memmon's exit code is chosen from (`commands::exit`).
    pub exit: Ending,
    pub output: Option<PathBuf>,
    /// The signal that stopped the recording, for the caller to act on (for an attached
    /// target `exit` is already `Ending::Signal` of it); never re-raised by the recorder.
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
    Failed(RecordError),
}

/// What `Recorder::run` carries from one step to the next.
struct RunState {
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

pub struct Recorder {
    opts: RecordOptions,
    sink: Box<dyn SampleSink>,
    /// The target followed, and its sources.
    watch: Watch,
    /// The target's pidfd: the sleep ends when it exits.
    pidfd: Option<WatchFd>,
    /// What the sleep between ticks waits on, kept from one sleep to the next.
    sleep: WaitSet,
    /// The command memmon launched (`None` for a process it attached to).
    launched: Option<Launched>,
    control_rx: mpsc::Receiver<Stamped>,
    control: ControlHandle,
    summary: SummaryBuilder,
    schedule: Schedule,
    samples: u64,
    /// Peak resets refused at markers with `phase_peaks` (then phase peaks are not exact).
    reset_failures: u64,
    /// Cgroup peak resets refused at markers (said once, at the first).
    cgroup_reset_failures: u64,
    /// A daemon bench's client times (`Control::ClientWall`), for the end record.
    client_walls: Vec<crate::format::meta::ClientWall>,
    /// The launched command's stdout goes to `--mark-stdout`'s relay, which has not yet said
    /// that it ended (`Control::OutputEnded`).
    stdout_relayed: bool,
    /// The metadata written at the start: the summary at the end reads it as `summary` would.
    meta: Meta,
    /// Told of the start, each sample and the end.
    observer: Box<dyn RecordObserver + Send>,
    report: Reporter,
    /// Anatomies of the tree (`--anatomy`), read on a thread of their own.
    anatomy: Option<crate::sampler::anatomy::Anatomies>,
    /// The anatomies written, for the summary at the end (each at least `--anatomy-rise` above
    /// the last: a few dozen at most).
    anatomies: Vec<crate::model::anatomy::Anatomy>,
    /// The label of the phase open now (the last marker's): a marker's row ends it.
    open_phase: Option<String>,
    /// The last row taken asked for the anatomy of the span it ends (`--anatomy`).
    span_end_asked: bool,
    /// The row being taken is answered to an asker who waits for it (a probe).
    row_waited: bool,
    /// When the last `restart` row was taken: a marker asked before it waited while the target
    /// was away, and its row comes late.
    restart_row_at: Option<SystemTime>,
    /// The anatomy of a span whose end a waited-for row found while another read was under way:
    /// read right after that one, its reply held until then.
    deferred_span_end: Option<(crate::model::anatomy::Trigger, String, Sample)>,
    /// Replies to markers and probes held until the anatomy reads asked up to their rows (the
    /// span's end theirs asked for, or one under way) are read: whoever waits for its row goes
    /// on only then, so none of what it does next is in those anatomies.
    held_replies: Vec<Box<dyn FnOnce() + Send>>,
    /// The cgroup's memory per NUMA node, into the NUMA table (a machine with several nodes).
    numa: Option<crate::sampler::numa::NumaSource>,
}

impl Recorder {
    /// A handle other threads use to send markers and benchmark requests.
    pub fn control(&self) -> ControlHandle {
        self.control.clone()
    }

    /// The launched command's stdout pipe, when `capture_stdout` asked for one (taken once).
    pub fn take_command_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.launched.as_mut().and_then(Launched::take_stdout)
    }

    /// `take_command_stdout` for `--mark-stdout`'s relay, which sends `Control::OutputEnded`
    /// once it has read the output to its end: at the command's exit the recorder waits for it.
    pub fn take_command_stdout_for_markers(&mut self) -> Option<std::process::ChildStdout> {
        let pipe = self.take_command_stdout();
        self.stdout_relayed = pipe.is_some();
        pipe
    }

    /// True when the kernel's exit records are read (taskstats).
    pub fn reads_exit_records(&self) -> bool {
        self.watch.tree().is_some_and(|t| t.watches_exits())
    }

    /// The metadata written at the start.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The instant `elapsed_s` counts from, and when the launched command (if any) was
    /// started: a caller that puts the rows on a time line of its own (a command bench's runs)
    /// places them, and the command's exit (`EndInfo::command_wall_s` after its start), by
    /// these.
    pub fn clock(&self) -> (Instant, Option<Instant>) {
        (
            self.watch.start(),
            self.launched.as_ref().map(Launched::launched_at),
        )
    }

    /// The PID of the watched process (the root of the tree).
    pub fn root_pid(&self) -> i32 {
        self.watch.root_pid()
    }

    /// Tells the observer where the data goes and what is watched.
    fn announce(&mut self) {
        self.observer.on_start(&RecordStart {
            destination: self.sink.destination(),
            meta: &self.meta,
        });
    }

    /// Runs until the target ends, a signal arrives, the duration is reached or the output
    /// fails. The summary goes to the observer (`on_end`) and is returned.
    ///
    /// The loop is a small state machine: each `Step` says what happens next, and each has a
    /// method that does it and returns the step after.
    pub fn run(mut self) -> Result<Outcome, RecordError> {
        if let Err(e) = set_timer_slack(self.opts.interval) {
            self.report.note(&format!(
                "cannot set a finer timer slack (prctl: {e}): ticks may come up to 50 µs late"
            ));
        }
        let start = self.watch.start();
        self.schedule = Schedule::new(start, self.opts.interval);
        let mut run = RunState {
            next_flush: start + Duration::from_millis(500),
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
                Step::Sleep => {
                    let due = self.schedule.due();
                    Step::Wake {
                        early: self.sleep_until(due),
                    }
                }
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
            match &self.launched {
                Some(l) => {
                    if a.sent_by_process {
                        l.signal(a.sig);
                    }
                    // The terminal's Ctrl-C already reached the command; wait for it.
                }
                None => return Step::Stop(Stop::Signal(a.sig)),
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
        if early && Instant::now() < self.schedule.due() {
            return Step::Sleep;
        }
        Step::Tick
    }

    /// The step after a sample taken for a control message: `Ok(Some)` goes on, `Ok(None)`
    /// (the target has ended) or an error end or suspend the recording.
    fn after(
        &mut self,
        run: &mut RunState,
        taken: Result<Option<Sample>, RecordError>,
    ) -> Option<Step> {
        match taken {
            Ok(Some(_)) => None,
            Ok(None) => Some(self.target_ended(run)),
            Err(err) => Some(Step::Stop(Stop::Failed(err))),
        }
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
                let mut failed = ResetRefusals::default();
                if let Some(Err(err)) = self.watch.cgroup_mut().map(|c| c.reset_peak()) {
                    // Counted by the cgroup source (its end record's `peak_reset_failures`).
                    failed.cgroup = Some(format!("the cgroup's peak: {err}"));
                }
                failed.kernel = self.reset_peaks();
                if !failed.kernel.is_empty() {
                    self.reset_failures += 1;
                }
                // A bench's run starts after this answer: after the reads asked before too
                // (its floor's anatomy holds none of the run).
                self.answer(matches!(taken, Ok(Some(_))), move || {
                    let _ = reply.send(failed);
                });
                // The target has ended: its row is not taken; the caller sees it gone.
                if let Some(step) = self.after(run, taken) {
                    return step;
                }
            }
            Control::Probe(e, reply) => {
                let mark = matches!(e, Event::Mark(_));
                // Asked while the target was away (it exited and its successor's first row
                // came since): its row is the first after the restart, late by that long,
                // with the successor's start in the phase before. Else whoever asked waited
                // for the row: nothing it did falls on the wrong side of it (no lag to tell).
                let held = self
                    .restart_row_at
                    .is_some_and(|at| stamped.origin < at)
                    .then_some(stamped.origin);
                self.row_waited = true;
                let taken = self.tick_at(Some(e), held);
                self.row_waited = false;
                match taken {
                    Ok(s) => {
                        self.reset_after_mark(mark);
                        self.reply_after_anatomy(reply, s);
                    }
                    Err(err) => {
                        let _ = reply.send(None);
                        return Step::Stop(Stop::Failed(err));
                    }
                }
            }
            Control::PssDone => {
                if self.watch.pss_arrived() == Some(true) {
                    let taken = self.tick(None);
                    if let Some(step) = self.after(run, taken) {
                        return step;
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
            Control::AnatomyDone => {
                if let Err(e) = self.anatomy_arrived() {
                    return Step::Stop(Stop::Failed(e));
                }
            }
            Control::CpuTicks(reply) => {
                let _ = reply.send(self.watch.tree().map_or((0, 0), |t| t.cpu_ticks()));
            }
            Control::ClientWall(w) => self.client_walls.push(w),
            Control::OutputEnded => self.stdout_relayed = false,
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

        let now = Instant::now();
        if now >= run.next_flush || self.opts.interval >= Duration::from_millis(500) {
            if let Err(e) = self.sink.flush() {
                return Step::Stop(Stop::Failed(e.into()));
            }
            run.next_flush = now + Duration::from_millis(500);
        }
        // The next deadline on the absolute schedule; deadlines already past are missed.
        self.schedule.taken(now);
        if let Some(limit) = self.opts.duration {
            self.schedule.cap(self.watch.start() + limit);
        }
        // Markers that came while the target was away wait in the channel, their wake-up
        // spent: taken right after the restart's row, not at the next tick.
        run.queued.extend(self.control_rx.try_iter());
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
        match &mut self.launched {
            Some(l) => {
                l.reap(&mut run.end);
                Step::Stop(Stop::TargetExited)
            }
            None if self.opts.target.can_restart() && !self.opts.exit_with_target => {
                Step::WaitRestart
            }
            None => Step::Stop(Stop::TargetExited),
        }
    }

    /// Waits for the target to come back; its first sample is labelled `restart` and taken at
    /// once (the schedule starts again from there).
    fn wait_restart_step(&mut self, run: &mut RunState) -> Step {
        match self.wait_for_restart() {
            Restart::Found(pid) => {
                run.event = Some(Event::Restart(pid));
                Step::Tick
            }
            Restart::Signal(sig) => Step::Stop(Stop::Signal(sig)),
            Restart::DurationReached => Step::Stop(Stop::Duration),
        }
    }

    /// True once `--duration` has passed since the start.
    fn duration_reached(&self) -> bool {
        self.opts
            .duration
            .is_some_and(|limit| self.watch.start().elapsed() >= limit)
    }

    /// Takes one sample of the tree and hands it on. `Ok(None)` when the target has ended.
    fn tick(&mut self, event: Option<Event>) -> Result<Option<Sample>, RecordError> {
        self.tick_at(event, None)
    }

    /// `tick` for an event that happened at `origin`: the row says how long after it it was
    /// read (`event_lag_us`).
    fn tick_at(
        &mut self,
        event: Option<Event>,
        origin: Option<SystemTime>,
    ) -> Result<Option<Sample>, RecordError> {
        if let Some(l) = &mut self.launched {
            l.reap_exited();
        }
        if matches!(event, Some(Event::Restart(_))) {
            self.restart_row_at = Some(SystemTime::now());
        }
        let s = match self.watch.tick(event, origin, self.schedule.missed()) {
            Ok(Some(t)) => t.sample,
            Ok(None) => return Ok(None),
            Err(ProcError::PermissionDenied(p)) => return Err(RecordError::Unreadable(p)),
            Err(e) => return Err(RecordError::Tree(e)),
        };
        self.sink.sample(&s)?;
        if let Some(why) = self.numa.as_mut().and_then(|n| n.tick(&s)) {
            self.report.note(&format!("NUMA table: {why}"));
        }
        self.samples += 1;
        self.summary.push(&s);
        self.observer.on_sample(&s);
        let span_end = self.span_end(&s);
        // The read that ended goes to the table (if its control message is still to come); the
        // next is asked for when due: at a span's end, else at a new high.
        self.anatomy_arrived()?;
        self.stretch_boundary(&s)?;
        self.span_end_asked = false;
        if let Some(a) = &mut self.anatomy {
            match span_end {
                // Its asker waits: read after the read under way rather than not at all.
                Some((trigger, label)) if a.busy() && self.row_waited => {
                    self.deferred_span_end = Some((trigger, label, s.clone()));
                    self.span_end_asked = true;
                }
                Some((trigger, label)) => {
                    self.span_end_asked = a.at_span_end(self.watch.members(), &s, trigger, label);
                }
                None => a.after_row(self.watch.members(), &s),
            }
        }
        Ok(Some(s))
    }

    /// At a boundary row (a marker's, a bench run's start or end, a restart), the stretch
    /// before it ends: its highest anatomy goes to the sink (`sampler/anatomy.rs`).
    fn stretch_boundary(&mut self, s: &Sample) -> Result<(), crate::format::OutputError> {
        let span = match &s.event {
            Some(Event::RunStart(n)) => Some(crate::analysis::phases::run_label(*n, None)),
            Some(Event::Mark(_) | Event::RunEnd(_) | Event::Restart(_)) => self.open_phase.clone(),
            _ => return Ok(()),
        };
        let Some(a) = &mut self.anatomy else {
            return Ok(());
        };
        for done in a.boundary(s, span) {
            self.sink.anatomy(&done)?;
            self.anatomies.push(done);
        }
        Ok(())
    }

    /// Hands the anatomy read since the last call, if any, to the sink, and answers the
    /// replies held for it.
    fn anatomy_arrived(&mut self) -> Result<(), RecordError> {
        if let Some(got) = self.anatomy.as_mut().and_then(|a| a.arrived()) {
            self.sink.anatomy(&got)?;
            self.anatomies.push(got);
        }
        if let Some(a) = self.anatomy.as_mut().filter(|a| !a.busy()) {
            if let Some((trigger, label, row)) = self.deferred_span_end.take() {
                a.at_span_end(self.watch.members(), &row, trigger, label);
            }
        }
        if !self.anatomy.as_ref().is_some_and(|a| a.busy()) {
            self.release_replies();
        }
        Ok(())
    }

    /// Answers a marker or probe with its row: at once, or, when an anatomy read is under way
    /// (the one of the span its row ends, or one asked before), once it is read: the asker's
    /// next steps are in no anatomy asked up to its row.
    fn reply_after_anatomy(&mut self, reply: mpsc::Sender<Option<Sample>>, s: Option<Sample>) {
        let taken = s.is_some();
        self.answer(taken, move || {
            let _ = reply.send(s);
        });
    }

    /// Gives an answer to whoever waits for a row (`taken`: the row was taken): at once, or
    /// once the anatomy reads asked up to it are read (see `reply_after_anatomy`).
    fn answer(&mut self, taken: bool, send: impl FnOnce() + Send + 'static) {
        let asked = std::mem::take(&mut self.span_end_asked);
        let reading = self.anatomy.as_ref().is_some_and(|a| a.busy());
        if taken && (asked || reading) {
            self.held_replies.push(Box::new(send));
        } else {
            send();
        }
    }

    /// Answers the replies held for an anatomy read (it ended, or the recording does).
    pub(super) fn release_replies(&mut self) {
        for send in self.held_replies.drain(..) {
            send();
        }
    }

    /// The span the row `s` ends, if any: a marker's row ends the phase the last marker opened
    /// (`phase-end`), a `run-end:N` row run N (`run-end`).
    fn span_end(&mut self, s: &Sample) -> Option<(crate::model::anatomy::Trigger, String)> {
        use crate::model::anatomy::Trigger;
        match &s.event {
            Some(Event::Mark(label)) => self
                .open_phase
                .replace(label.clone())
                .map(|ended| (Trigger::PhaseEnd, ended)),
            Some(Event::RunEnd(n)) => Some((
                Trigger::RunEnd,
                crate::analysis::phases::run_label(*n, None),
            )),
            _ => None,
        }
    }

    /// With `phase_peaks`, resets the high-water marks right after a marker's sample (whose
    /// VmHWM closes the phase before), so the next phase's rows carry that phase's own peak.
    fn reset_after_mark(&mut self, mark: bool) {
        if !(mark && self.opts.phase_peaks) {
            return;
        }
        if let Some(Err(e)) = self.watch.cgroup_mut().map(|c| c.reset_peak()) {
            self.cgroup_reset_failures += 1;
            if self.cgroup_reset_failures == 1 {
                self.report.warning(&format!(
                    "cannot reset the cgroup's peak: {e}; per-phase cgroup peaks are not exact (said once)"
                ));
            }
        }
        let failed = self.reset_peaks();
        if failed.is_empty() {
            return;
        }
        self.reset_failures += 1;
        if self.reset_failures == 1 {
            self.report.warning(&format!(
                "cannot reset the peak (clear_refs) of {}; per-phase kernel peaks are not exact",
                failed.join(", ")
            ));
        }
    }

    /// With `reset_peak` and an attached target, resets the high-water marks right after the
    /// first sample: the later rows then carry peaks reached during the recording only.
    fn reset_at_start(&mut self) {
        if !self.opts.reset_peak || self.launched.is_some() {
            return;
        }
        if let Some(Err(e)) = self.watch.cgroup_mut().map(|c| c.reset_peak_at_start()) {
            self.report.warning(&format!("cannot reset the cgroup's peak (--reset-peaks): {e}; its peak counts only if it rises during the recording"));
        }
        let failed = self.reset_peaks();
        if failed.is_empty() {
            return;
        }
        self.reset_failures += 1;
        self.report.warning(&format!(
            "cannot reset the peak (clear_refs, --reset-peaks) of {}; the kernel peak counts only if it rises during the recording",
            failed.join(", ")
        ));
    }

    /// Resets VmHWM of every process in the tree (at a marker, at the start, at a bench run);
    /// returns a message per failure.
    fn reset_peaks(&mut self) -> Vec<String> {
        self.watch
            .reset_marks()
            .into_iter()
            .map(|(pid, e)| format!("PID {pid}: {e}"))
            .collect()
    }

    /// Waits for a new process behind the pidfile or name, or for a signal or the duration
    /// limit. The process found is watched from then on, its first sample due at once.
    fn wait_for_restart(&mut self) -> Restart {
        self.report
            .note("the target exited; waiting for it to restart (Ctrl-C to stop)");
        self.pidfd = None;
        let mut look = target::LookAgain::new();
        loop {
            if self.duration_reached() {
                return Restart::DurationReached;
            }
            if let Ok(Some(Found::Restart(pid, comm))) = self.watch.look() {
                self.report.note(&format!(
                    "the target restarted as PID {pid} ({comm}); recording goes on"
                ));
                self.pidfd = self
                    .watch
                    .tree()
                    .and_then(|t| t.root())
                    .and_then(open_pidfd);
                self.schedule.restart_at(Instant::now());
                return Restart::Found(pid);
            }
            let mut until = Instant::now() + look.pause();
            if let Some(limit) = self.opts.duration {
                until = until.min(self.watch.start() + limit);
            }
            self.sleep_until(until);
            if let Some(a) = signals::take().first() {
                return Restart::Signal(a.sig);
            }
        }
    }

    /// Sleeps until `deadline`, or until the target exits, a signal or a control message
    /// arrives. True when only a control message ended the sleep early. The tree's event
    /// sockets are watched too, each until something is queued on it; one still empty at the
    /// deadline is not drained at the tick (`Tree::heard_nothing`): a syscall saved per tick.
    fn sleep_until(&mut self, deadline: Instant) -> bool {
        // A socket the tree does not ask to be watched is not called quiet: it is drained.
        let mut quiet = self.watch.tree().map_or([false, false], |t| {
            t.event_fds().map(|w| w.is_some_and(|w| w.armed()))
        });
        let mut ready = [false; 5];
        loop {
            let now = Instant::now();
            if deadline <= now {
                break;
            }
            let [forks, exits] = self.watch.tree().map_or([None, None], |t| t.event_fds());
            let fds = [
                Some(self.control.wake.watched()),
                self.pidfd.as_ref().map(|f| f.watched(true)),
                // A stop signal ends the sleep whenever it came and whichever thread it hit.
                signals::wake_fd().map(sys::Watched::forever),
                forks.map(|w| w.armed_if(quiet[0])),
                exits.map(|w| w.armed_if(quiet[1])),
            ];
            match self.sleep.wait(&fds, Some(deadline - now), &mut ready) {
                Ok(()) => {
                    let [control, exited, signal, forked, ended] = ready;
                    if control && self.control.wake.reset() {
                        return !exited;
                    }
                    if control || exited || signal {
                        return false;
                    }
                    if !forked && !ended {
                        // The deadline, or a signal's EINTR (the loop then sleeps on).
                        continue;
                    }
                    quiet[0] &= !forked;
                    quiet[1] &= !ended;
                }
                // `poll` fails only without memory for its table: the sleep still lasts until
                // the deadline, deaf to messages until then.
                Err(_) => {
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                    return false;
                }
            }
        }
        if let Some(t) = self.watch.tree_mut() {
            t.heard_nothing(Quiet {
                forks: quiet[0],
                exits: quiet[1],
            });
        }
        false
    }
}

/// A pidfd of `h`'s process: readable when it exits.
fn open_pidfd(h: &crate::probe::ProcHandle) -> Option<WatchFd> {
    let fd = sys::pidfd_open(h.pid).ok()?;
    // The PID might have been reused between opening the handle and the pidfd.
    h.is_alive().then(|| WatchFd::new(fd))
}

/// Finer timer slack for short intervals, so a 100 µs schedule is kept.
fn set_timer_slack(interval: Duration) -> std::io::Result<()> {
    let slack_ns = (interval.as_nanos() / 20).clamp(1_000, 50_000) as u64;
    rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(slack_ns))?;
    Ok(())
}

#[cfg(test)]
mod tests;
