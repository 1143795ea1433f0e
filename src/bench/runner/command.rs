//! `bench -- COMMAND`: each run is launched and recorded on its own (in a memory cgroup of
//! memmon's own where it may make one); what a run leaves running is ended before the next.

use super::{
    cooldown, prepare, progress, recorder_report, run_env, say, say_recording, ClientEnd, Quit,
    Stop,
};
use crate::bench::{BenchError, BenchOptions, BenchReport, Leftovers, RunResult};
use crate::format::meta::{EndInfo, EndReason, Meta, RunEnd};
use crate::format::{Format, Output, OutputError};
use crate::model::sample::{Event, Sample};
use crate::sampler::error::RecordError;
use crate::sampler::record::{unix_ms_now, Outcome, RecordOptions, Recorder};
use crate::sampler::sink::{Nowhere, SampleSink};
use crate::sampler::target::TargetSpec;
use crate::units::{count, fmt_interval};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Copies the command's stdout to `to` until it ends; once `to` fails (a closed stderr), keeps
/// reading without writing, so the command never blocks on a full pipe nor dies of EPIPE.
fn copy_draining(from: &mut impl std::io::Read, to: &mut impl std::io::Write) {
    let mut buf = [0u8; 8192];
    let mut writing = true;
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => writing = writing && to.write_all(&buf[..n]).is_ok(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
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
    use rustix::process::{waitpid, WaitOptions};
    // Ends when none has exited (`None`) or there is no child left (ECHILD).
    while let Ok(Some(_)) = waitpid(None, WaitOptions::NOHANG) {}
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
            // One that has exited since it was listed is gone (ESRCH): nothing to end.
            let _ = crate::sys::kill(pid, sig);
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
/// wait4's ru_maxrss of that very child. With `-o`, the runs' samples go into one recording as
/// they are taken, each run between its `run-start:N` and `run-end:N` rows.
pub(super) fn bench_command(
    opts: &BenchOptions,
    report: &mut BenchReport,
) -> Result<Option<Stop>, BenchError> {
    let merged = open_merged(opts)?;
    if let Some(m) = &merged {
        report.recording = Some(m.lock().unwrap_or_else(|p| p.into_inner()).out.describe());
    }
    say_recording(opts, report.recording.as_deref());
    say(
        opts,
        format!(
            "bench: {}{} of: {}; each run's peak {}, sampled every {}",
            count(opts.runs, "run"),
            if opts.warmup > 0 { format!(" after {}", count(opts.warmup, "warmup run")) } else { String::new() },
            report.client,
            match opts.own_cgroup {
                Some(false) => "the kernel's of its largest process (exit records, wait4's ru_maxrss)",
                Some(true) => "its tree's, from a memory cgroup memmon makes for the run",
                None => "its tree's from a memory cgroup memmon makes for the run where it may, else the kernel's of its largest process",
            },
            fmt_interval(opts.interval)
        ),
    );
    crate::sys::signals::install().map_err(BenchError::system(
        "cannot install the handlers of the stop signals",
    ))?;
    let total = opts.warmup + opts.runs;
    let mut stop = None;
    for i in 1..=total {
        if let Some(s) = one_run(opts, report, i, merged.as_ref()) {
            stop = Some(s);
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
        let m = Arc::try_unwrap(m)
            .map_err(|_| BenchError::RecordingHeld)?
            .into_inner()
            .unwrap_or_else(|p| p.into_inner());
        if let Err(e) = m.finish(reason) {
            return Ok(Some(stop.unwrap_or(Stop::Error(e.into()))));
        }
    }
    Ok(stop)
}

/// The bench's one recording (`-o`), checked before any run.
fn open_merged(opts: &BenchOptions) -> Result<Option<Arc<Mutex<Merged>>>, OutputError> {
    let Some(dest) = &opts.output else {
        return Ok(None);
    };
    let path = dest.file();
    let format = opts
        .format
        .or(path.map(Format::from_path))
        .unwrap_or(Format::Csv);
    // An existing or refused output is a usage error (`OutputError::class`), as from record.
    let out = Output::create(path, format, opts.force, opts.append)?;
    Ok(Some(Arc::new(Mutex::new(Merged {
        out,
        meta_written: false,
        missed: 0,
        t0: Instant::now(),
        samples: 0,
        clock: None,
        runs: Vec::new(),
    }))))
}

/// Run `i` of the bench (the warmup runs first): prepared, recorded, what it left behind ended,
/// its result kept; the reason to stop, when there is one.
fn one_run(
    opts: &BenchOptions,
    report: &mut BenchReport,
    i: u32,
    merged: Option<&Arc<Mutex<Merged>>>,
) -> Option<Stop> {
    let warm = (i <= opts.warmup).then_some(i);
    let n = i.saturating_sub(opts.warmup);
    if let Some(a) = crate::sys::signals::take().first() {
        return Some(Stop::Signal(a.sig));
    }
    let env = run_env(n, warm);
    if let Err(s) = prepare(opts, &env) {
        return Some(s);
    }
    let started_unix_ms = unix_ms_now();
    let t0 = Instant::now();
    // A measured run's samples go into the bench's recording; a warmup's are not kept.
    let merged = merged.filter(|_| warm.is_none());
    let sink: Box<dyn SampleSink> = match merged {
        Some(m) => Box::new(RunSink::new(m.clone(), n, t0)),
        None => Box::new(Nowhere),
    };
    let outcome = match record_run(opts, &env, sink, merged) {
        Ok(o) => o,
        Err(e) => {
            // A client that cannot be run fails the bench as a failing client does; any other
            // error keeps its class.
            return Some(match e {
                RecordError::Launch { .. } => Stop::Failed(format!(
                    "cannot run the client: {}",
                    crate::error::chain(&e)
                )),
                e => Stop::Error(e.into()),
            });
        }
    };
    let end = outcome.summary.end.clone().unwrap_or_default();
    // The command's own wall time, from its start to its exit, as `record` of it gives it:
    // memmon's setup before the start (its cgroup, its sockets) and its end after the exit
    // (the cgroup removed, the end record) are not the command's.
    let wall_s = end
        .command_wall_s
        .unwrap_or_else(|| t0.elapsed().as_secs_f64());
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
    let ce = ClientEnd {
        wall_s,
        code: end.exit_code,
        signal: end.exit_signal,
    };
    if let Some(sig) = ce
        .signal
        .filter(|s| [libc::SIGINT, libc::SIGTERM, libc::SIGHUP].contains(s))
    {
        return Some(Stop::Signal(sig));
    }
    if warm.is_none() {
        let r = run_result(n, started_unix_ms, &ce, &outcome, leftovers);
        progress(opts, &r);
        report.runs.push(r);
    }
    if !ce.ok() && !opts.ignore_failure {
        return Some(Stop::Failed(format!(
            "{what}: the command failed with {} ({}); the bench stopped (--ignore-failure to go on)",
            ce.describe(),
            report.client
        )));
    }
    None
}

/// Launches and records one run of the command into `sink`, its stdout copied to stderr when
/// stdout carries data; with `merged` (a measured run's rows go into the bench's recording),
/// tells it where the run lies on the bench's time line.
fn record_run(
    opts: &BenchOptions,
    env: &[(&str, String)],
    sink: Box<dyn SampleSink>,
    merged: Option<&Arc<Mutex<Merged>>>,
) -> Result<Outcome, RecordError> {
    let ropts = RecordOptions {
        interval: opts.interval,
        children: opts.children,
        pss: opts.pss.clone(),
        gpu: opts.gpu.clone(),
        procfs: opts.procfs.clone(),
        exit_records: opts.exit_records,
        // When stdout carries data, the command's output goes to stderr instead.
        capture_stdout: opts.stdout_is_data,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        own_cgroup: opts.own_cgroup,
        cgroupfs: opts.cgroupfs.clone(),
        ..RecordOptions::new(TargetSpec::Command(opts.client.clone()))
    };
    let mut r = Recorder::start_with(ropts, |_| Ok(sink), recorder_report(opts), Box::new(()))?;
    if let Some(m) = merged {
        // Before the first sample: the recorder samples only once it runs.
        let (origin, launched) = r.clock();
        let mut m = m.lock().unwrap_or_else(|p| p.into_inner());
        let t0 = m.t0;
        let since = |i: Instant| i.saturating_duration_since(t0).as_secs_f64();
        m.clock = Some(RunClock {
            origin_s: since(origin),
            launched_s: launched.map(since),
        });
    }
    let copier = r
        .take_command_stdout()
        .map(|mut out| std::thread::spawn(move || copy_draining(&mut out, &mut std::io::stderr())));
    let outcome = r.run();
    if let Some(c) = copier {
        let _ = c.join();
    }
    outcome
}

/// A measured run's result, from its recording's summary: its peak as that summary decided it
/// (the tree's exact peak in a cgroup memmon made for the run, which had the tree alone from
/// before its first instruction, else the kernel's peak of its largest process: wait4's
/// ru_maxrss, or a VmHWM above it: an orphan memmon adopted, a child whose exit record was
/// read).
fn run_result(
    n: u32,
    started_unix_ms: u64,
    ce: &ClientEnd,
    outcome: &Outcome,
    leftovers: Option<Leftovers>,
) -> RunResult {
    let summary = &outcome.summary;
    let end = summary.end.clone().unwrap_or_default();
    RunResult {
        run: n,
        started_unix_ms,
        wall_s: ce.wall_s,
        exit_code: ce.code,
        exit_signal: ce.signal,
        peak: summary.peak,
        facts: summary.facts,
        samples: summary.samples,
        cgroup_sampled_peak_bytes: summary.cgroup.as_ref().map(|c| c.largest_current_bytes),
        rss_before_bytes: None,
        cgroup_before_bytes: None,
        rss_after_bytes: None,
        peak_over_floor_bytes: None,
        daemon_user_s: None,
        daemon_system_s: None,
        command_user_s: end.rusage_user_s,
        command_system_s: end.rusage_system_s,
        held: summary.held,
        health: summary.health,
        pss: summary.pss,
        peak_gpu_bytes: summary.gpu.as_ref().map(|g| g.peak_gpu_bytes),
        gpu_kernel: summary.gpu.as_ref().map(|g| g.kernel).unwrap_or_default(),
        processes_after: None,
        leftovers,
    }
}

/// The one recording of a command bench: each run's samples, moved onto one time line, and
/// each run's end record in the bench's (`EndInfo::runs`).
struct Merged {
    out: Output,
    meta_written: bool,
    /// Ticks missed by the runs before the current one.
    missed: u64,
    /// The bench's start: a run's rows are moved by its start from here.
    t0: Instant,
    samples: u64,
    /// Where the run being recorded lies on the bench's time line.
    clock: Option<RunClock>,
    /// The end record of each measured run recorded so far.
    runs: Vec<RunEnd>,
}

/// Where a run lies on a command bench's time line, in seconds from the bench's start.
#[derive(Debug, Clone, Copy)]
struct RunClock {
    /// The instant its recorder's `elapsed_s` counts from.
    origin_s: f64,
    /// Its command's start (`command_wall_s` counts from here).
    launched_s: Option<f64>,
}

impl Merged {
    fn write(&mut self, s: &Sample) -> Result<(), OutputError> {
        self.out.write_sample(s)?;
        self.samples += 1;
        Ok(())
    }

    /// Ends the bench's recording. Its end record holds each run's (`runs`), and says of the
    /// exit records what the runs' say: read by every run (`taskstats`) or not, and how many
    /// the kernel dropped in all.
    fn finish(mut self, reason: EndReason) -> Result<(), OutputError> {
        let ends = || self.runs.iter().map(|r| &r.end);
        let exit_records = ends()
            .map(|e| e.exit_records.clone())
            .find(|e| e.as_deref() != Some(crate::format::meta::EXIT_RECORDS_READ))
            .unwrap_or_else(|| ends().next().and_then(|e| e.exit_records.clone()));
        let end = EndInfo {
            ended_unix_ms: unix_ms_now(),
            reason,
            samples: self.samples,
            missed_ticks: self.missed,
            exit_records,
            exit_records_lost: ends().map(|e| e.exit_records_lost).sum(),
            processes_departed: ends().map(|e| e.processes_departed).sum(),
            target_exit_read: !self.runs.is_empty() && ends().all(|e| e.target_exit_read),
            runs: std::mem::take(&mut self.runs),
            ..EndInfo::default()
        };
        self.out.finish(&end)?;
        Ok(())
    }
}

/// A measured run's sink: its rows go into the bench's recording as they are taken, moved to
/// the bench's time line (seconds and missed ticks from the bench's start), the first labelled
/// `run-start:N` (after the recording's `start` row, for the first run). At the run's end, a
/// `run-end:N` row at its command's exit, repeating the run's last sample's sizes (the tree is
/// gone: nothing more was read), and the run's end record, kept for the bench's: what the
/// kernel gave after the last row (wait4's ru_maxrss, the exit records, the cgroup's peak
/// file read at the exit) is there, and summary, compare and the budgets take it as the run's.
struct RunSink {
    merged: Arc<Mutex<Merged>>,
    n: u32,
    /// Seconds from the bench's start to the run's, while the recorder's own clock is not
    /// known (`Merged::clock`).
    offset_s: f64,
    /// The run's last row, repeated at its end.
    last: Option<Sample>,
}

impl RunSink {
    fn new(merged: Arc<Mutex<Merged>>, n: u32, run_t0: Instant) -> RunSink {
        let offset_s = {
            let mut m = merged.lock().unwrap_or_else(|p| p.into_inner());
            m.clock = None;
            run_t0.duration_since(m.t0).as_secs_f64()
        };
        RunSink {
            merged,
            n,
            offset_s,
            last: None,
        }
    }

    fn merged(&self) -> std::sync::MutexGuard<'_, Merged> {
        self.merged.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl SampleSink for RunSink {
    fn start(&mut self, meta: &Meta) -> Result<(), OutputError> {
        let n = self.n;
        let mut m = self.merged();
        if !m.meta_written {
            let mut meta = meta.clone();
            meta.run_peaks = Some(crate::format::meta::RunPeaks::Launched);
            meta.sources.push(format!("memmon bench: one process tree per run; rows between run-start:N and run-end:N; target PID of run {n}"));
            m.out.write_meta(&meta)?;
            m.meta_written = true;
        }
        Ok(())
    }

    fn sample(&mut self, s: &Sample) -> Result<(), OutputError> {
        let first = self.last.is_none();
        let n = self.n;
        let mut m = self.merged();
        let offset_s = m.clock.map_or(self.offset_s, |c| c.origin_s);
        let mut s = s.clone();
        s.elapsed_s += offset_s;
        s.missed_ticks += m.missed;
        if first {
            if n == 1 && m.samples == 0 {
                s.event = Some(Event::Start);
                m.write(&s)?;
            }
            s.event = Some(Event::RunStart(n));
        } else if matches!(s.event, Some(Event::Start)) {
            s.event = None;
        }
        m.write(&s)?;
        drop(m);
        self.last = Some(s);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), OutputError> {
        self.merged().out.flush()
    }

    fn finish(&mut self, end: &EndInfo) -> Result<(), OutputError> {
        let n = self.n;
        let last = self.last.take();
        let mut m = self.merged();
        // Its command's start on the bench's time line (its recorder's, without a launch time).
        let started_elapsed_s = m
            .clock
            .map_or(self.offset_s, |c| c.launched_s.unwrap_or(c.origin_s));
        if let Some(mut s) = last {
            // Its count already holds the runs' before it.
            m.missed = s.missed_ticks;
            // At the command's exit (a row is never before the one it follows).
            let launched = m.clock.and_then(|c| c.launched_s);
            if let Some(exit_s) = launched.zip(end.command_wall_s).map(|(l, w)| l + w) {
                let later_s = (exit_s - s.elapsed_s).max(0.0);
                s.unix_ms += (later_s * 1000.0).round() as u64;
                s.elapsed_s += later_s;
            }
            // Read with that sample, not at the exit.
            s.pss_bytes = None;
            s.anon_huge_bytes = None;
            s.nvidia_mapped_rss_bytes = None;
            s.event = Some(Event::RunEnd(n));
            m.write(&s)?;
        }
        // A run that ended before its first sample has no row: its end record alone holds its
        // peaks, and says where it lies.
        m.runs.push(RunEnd {
            run: n,
            started_elapsed_s: Some(started_elapsed_s),
            end: EndInfo {
                processes: Vec::new(),
                ..end.clone()
            },
        });
        m.out.flush()
    }

    fn destination(&self) -> String {
        self.merged().out.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::meta::Meta;

    /// A run's row at `elapsed_s` on its own recorder's clock.
    fn row(elapsed_s: f64, rss: u64, missed: u64, event: Option<Event>) -> Sample {
        Sample {
            unix_ms: 1_000_000 + (elapsed_s * 1000.0) as u64,
            elapsed_s,
            rss_bytes: rss,
            missed_ticks: missed,
            pss_bytes: Some(rss / 2),
            processes: 1,
            event,
            ..Sample::default()
        }
    }

    /// Records one run through its sink as the recorder would: its clock (the recorder's start
    /// and its command's, in seconds from the bench's), its rows, its end.
    fn one_run(m: &Arc<Mutex<Merged>>, n: u32, clock: RunClock, rows: &[Sample], wall_s: f64) {
        let t0 = m.lock().unwrap().t0;
        let mut sink = RunSink::new(m.clone(), n, t0);
        sink.start(&Meta::example("command")).unwrap();
        m.lock().unwrap().clock = Some(clock);
        for r in rows {
            sink.sample(r).unwrap();
        }
        sink.finish(&EndInfo {
            command_wall_s: Some(wall_s),
            exit_code: Some(0),
            rusage_maxrss_bytes: Some(rows.iter().map(|r| r.rss_bytes).max().unwrap_or(0)),
            samples: rows.len() as u64,
            ..EndInfo::default()
        })
        .unwrap();
    }

    #[test]
    fn a_command_benchs_runs_go_into_one_recording_on_one_time_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.csv");
        let out = Output::create(Some(&path), Format::Csv, false, false).unwrap();
        let m = Arc::new(Mutex::new(Merged {
            out,
            meta_written: false,
            missed: 0,
            t0: Instant::now(),
            samples: 0,
            clock: None,
            runs: Vec::new(),
        }));
        // Run 1: its recorder started 0.5 s into the bench, its command 10 ms later, for 0.2 s.
        let run1 = [
            row(0.0, 10 << 20, 0, Some(Event::Start)),
            row(0.1, 30 << 20, 0, None),
        ];
        let clock1 = RunClock {
            origin_s: 0.5,
            launched_s: Some(0.51),
        };
        one_run(&m, 1, clock1, &run1, 0.2);
        // Run 2, 1.0 s in: it missed a tick, and its count goes on from run 1's.
        let run2 = [
            row(0.0, 12 << 20, 0, Some(Event::Start)),
            row(0.2, 50 << 20, 1, None),
        ];
        let clock2 = RunClock {
            origin_s: 1.0,
            launched_s: Some(1.01),
        };
        one_run(&m, 2, clock2, &run2, 0.3);
        let m = Arc::try_unwrap(m).ok().unwrap().into_inner().unwrap();
        m.finish(EndReason::Stopped).unwrap();

        let mut rows = Vec::new();
        let info = crate::format::read_recording(&path, |s: &Sample| rows.push(s.clone())).unwrap();
        let seen: Vec<(String, f64, u64, u64)> = rows
            .iter()
            .map(|s| {
                let e = s.event.as_ref().map(|e| e.to_string()).unwrap_or_default();
                (
                    (e),
                    (s.elapsed_s * 1000.0).round() / 1000.0,
                    s.rss_bytes >> 20,
                    s.missed_ticks,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("start".into(), 0.5, 10, 0),
                ("run-start:1".into(), 0.5, 10, 0),
                (String::new(), 0.6, 30, 0),
                // At its command's exit (0.51 + 0.2 s), with its last row's sizes.
                ("run-end:1".into(), 0.71, 30, 0),
                ("run-start:2".into(), 1.0, 12, 0),
                (String::new(), 1.2, 50, 1),
                ("run-end:2".into(), 1.31, 50, 1),
            ]
        );
        // A run-end row repeats the last row's sizes, not what was read with it alone.
        assert_eq!(rows[3].pss_bytes, None);
        assert_eq!(rows[2].pss_bytes, Some(15 << 20));
        let end = info.end.unwrap();
        assert_eq!(
            (end.reason, end.samples, end.missed_ticks),
            (EndReason::Stopped, 7, 1)
        );
        let runs: Vec<_> = end
            .runs
            .iter()
            .map(|r| (r.run, r.started_elapsed_s))
            .collect();
        assert_eq!(runs, [(1, Some(0.51)), (2, Some(1.01))]);
        let kernel: Vec<_> = end
            .runs
            .iter()
            .map(|r| (r.end.exit_code, r.end.rusage_maxrss_bytes))
            .collect();
        assert_eq!(
            kernel,
            [(Some(0), Some(30 << 20)), (Some(0), Some(50 << 20))]
        );
        assert_eq!(
            info.meta.unwrap().run_peaks,
            Some(crate::format::meta::RunPeaks::Launched)
        );
    }
}
