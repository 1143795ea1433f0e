//! The recorder run for real over a fake /proc (`probe::fake::FakeProc`), its rows kept by the
//! memory sink (`sink::Memory`): the recorder's loop, its control messages and its ends, as
//! hyperfine tests its runner with a mock executor. The test plays the kernel: it rewrites the
//! fake process's files between rows, and asks for rows through the recorder's control channel
//! (as a marker, a bench's run boundaries and a stop do). With an interval of an hour no row is
//! taken on the schedule but the first, so every row is one the test asked for. (A launched
//! command is left to tests/record.rs: its recorder reaps any child of its process that exits, and
//! here that would be other tests' children.)

use super::*;
use crate::format::meta::EndReason;
use crate::format::OutputError;
use crate::probe::fake::FakeProc;
use crate::reporter::Heard;
use crate::sampler::sink::{Memory, Recorded};
use std::path::Path;
use std::thread::JoinHandle;

const KIB: u64 = 1024;
const HOUR: Duration = Duration::from_secs(3600);

/// A PID no real process has (above the kernel's largest, 2^22): the recorder's pidfd of it
/// cannot be opened, so only the fake /proc says whether it lives.
const PID: i32 = 9_000_001;

/// A recording of `spec` over the fake /proc at `root`, its rows every `interval`.
fn options(root: &Path, spec: TargetSpec, interval: Duration) -> RecordOptions {
    RecordOptions {
        interval,
        procfs: ProcFs::new(root),
        exit_records: false,
        own_cgroup: Some(false),
        ..RecordOptions::new(spec)
    }
}

/// A recorder started over the fake /proc into a memory sink, running on a thread.
struct Running {
    control: ControlHandle,
    sink: Memory,
    heard: Heard,
    thread: JoinHandle<Result<Outcome, RecordError>>,
}

impl Running {
    fn start(opts: RecordOptions) -> Running {
        let sink = Memory::new();
        let (report, heard) = Reporter::collect();
        let s = sink.clone();
        let rec = Recorder::start_with(opts, move |_| Ok(Box::new(s)), report, Box::new(()))
            .unwrap_or_else(|e| panic!("the recorder did not start: {}", crate::error::chain(&e)));
        let control = rec.control();
        let thread = std::thread::spawn(move || rec.run());
        let r = Running {
            control,
            sink,
            heard,
            thread,
        };
        // The first row is taken at the start, on the schedule.
        r.wait_for_rows(1);
        r
    }

    /// A row of its own for `event`, answered once taken (`None`: the target has ended).
    fn probe(&self, event: Event) -> Option<Sample> {
        let (tx, rx) = mpsc::channel();
        assert!(self.control.send(Control::Probe(event, tx)));
        rx.recv().expect("the recorder answers a probe")
    }

    /// A bench run's boundary: a row, then the marks reset; the resets that failed.
    fn reset(&self, event: Event) -> super::ResetRefusals {
        let (tx, rx) = mpsc::channel();
        assert!(self.control.send(Control::ResetPeaks(event, tx)));
        rx.recv().expect("the recorder answers a reset")
    }

    fn recorded(&self) -> Recorded {
        self.sink.recorded()
    }

    /// Waits (a loaded machine: up to 30 s) until the sink holds `n` rows.
    fn wait_for_rows(&self, n: usize) {
        let until = Instant::now() + Duration::from_secs(30);
        while self.recorded().samples.len() < n {
            assert!(Instant::now() < until, "{n} rows never came");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits for the recorder's end, however it came.
    fn join(self) -> (Result<Outcome, RecordError>, Recorded, Vec<String>) {
        let outcome = self.thread.join().expect("the recorder does not panic");
        let heard = self
            .heard
            .lock()
            .unwrap()
            .iter()
            .map(|(_, t)| t.clone())
            .collect();
        (outcome, self.sink.recorded(), heard)
    }

    /// Stops it as a bench stops its daemon's recorder.
    fn stop(self) -> (Outcome, Recorded, Vec<String>) {
        assert!(self.control.send(Control::Stop));
        let (outcome, recorded, heard) = self.join();
        let outcome = outcome.unwrap_or_else(|e| panic!("{}", crate::error::chain(&e)));
        (outcome, recorded, heard)
    }
}

/// Makes writing the fake clear_refs fail (EISDIR), as the kernel refuses a reset to one who is
/// not the process's owner (a missing file is a process gone, which is no refusal).
fn refuse_resets(clear_refs: &Path) {
    std::fs::remove_file(clear_refs).unwrap();
    std::fs::create_dir(clear_refs).unwrap();
}

fn events(r: &Recorded) -> Vec<Option<String>> {
    r.samples
        .iter()
        .map(|s| s.event.as_ref().map(|e| e.to_string()))
        .collect()
}

#[test]
fn a_recorder_can_run_on_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<Recorder>();
    assert_send::<ControlHandle>();
}

#[test]
fn an_attached_process_is_recorded_row_by_row_with_its_metadata_end_record_and_summary() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    FakeProc::new(PID).rss_kb(1000).hwm_kb(1500).write(root);
    let r = Running::start(options(root, TargetSpec::Pid(PID), HOUR));
    // The process grows and its high-water mark with it; a marker takes a row of it.
    FakeProc::new(PID).rss_kb(4000).hwm_kb(5000).write(root);
    let row = r.probe(Event::Mark("load".into())).unwrap();
    assert_eq!((row.rss_bytes, row.hwm_bytes), (4000 * KIB, 5000 * KIB));
    FakeProc::new(PID).rss_kb(2000).hwm_kb(5000).write(root);
    r.probe(Event::Mark("idle".into())).unwrap();
    let (outcome, rec, _) = r.stop();

    let meta = rec.meta.clone().unwrap();
    assert_eq!((meta.target.mode.as_str(), meta.target.pid), ("pid", PID));
    assert_eq!(meta.target.comm, format!("fake{PID}"));
    assert_eq!(meta.interval_s, 3600.0);
    assert_eq!(
        events(&rec),
        [
            Some("start".into()),
            Some("mark:load".into()),
            Some("mark:idle".into())
        ]
    );
    let rss: Vec<u64> = rec.samples.iter().map(|s| s.rss_bytes / KIB).collect();
    assert_eq!(rss, [1000, 4000, 2000]);
    assert!(rec
        .samples
        .windows(2)
        .all(|w| w[0].elapsed_s <= w[1].elapsed_s));
    let end = rec.end.unwrap();
    assert_eq!((end.reason, end.samples), (EndReason::Stopped, 3));
    assert_eq!(
        end.processes.iter().map(|p| p.pid).collect::<Vec<_>>(),
        [PID]
    );
    // The summary the caller gets is the recording's, as `summary` reads it: the sampled peak
    // at the marker's row; the kernel's mark (1500 kB at the first row, above its RSS: set
    // before the recording) rose during it, to 5000 kB.
    let s = &outcome.summary;
    assert_eq!(outcome.exit, Ending::Done);
    assert_eq!(s.samples, 3);
    assert_eq!(s.facts.sampled_peak_rss_bytes, 4000 * KIB);
    assert_eq!(s.facts.kernel_peak_rss_bytes, Some(5000 * KIB));
    assert_eq!(s.peak.bytes, 5000 * KIB);
}

#[test]
fn a_target_that_exits_ends_the_recording_and_a_marker_after_it_is_said_untaken() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    FakeProc::new(PID).rss_kb(3000).write(root);
    let r = Running::start(options(root, TargetSpec::Pid(PID), HOUR));
    // The process is gone (its held files fail, as the kernel's do with ESRCH): the marker's row
    // cannot be taken, and a target given by PID does not come back.
    std::fs::remove_dir_all(root.join(PID.to_string())).unwrap();
    assert!(r.control.send(Control::Event(Event::Mark("late".into()))));
    let (outcome, rec, heard) = r.join();
    let outcome = outcome.unwrap();
    assert_eq!(outcome.exit, Ending::Done);
    assert_eq!(events(&rec), [Some("start".into())]);
    assert_eq!(rec.end.unwrap().reason, EndReason::TargetExited);
    assert!(
        heard.iter().any(|h| h.contains("1 marker not taken")
            && h.contains("the target had ended before its sample: 'mark:late'")),
        "{heard:?}"
    );
}

#[test]
fn a_pidfile_target_that_restarts_is_followed_and_the_restart_row_counts_the_old_process() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proc");
    let pidfile = dir.path().join("d.pid");
    FakeProc::new(PID).start(700).rss_kb(8000).write(&root);
    std::fs::write(&pidfile, format!("{PID}\n")).unwrap();
    let r = Running::start(options(&root, TargetSpec::Pidfile(pidfile.clone()), HOUR));
    // The daemon restarts as another process, and rewrites its pidfile.
    std::fs::remove_dir_all(root.join(PID.to_string())).unwrap();
    FakeProc::new(PID + 1).start(900).rss_kb(2000).write(&root);
    std::fs::write(&pidfile, format!("{}\n", PID + 1)).unwrap();
    // The marker finds the old one gone: the recorder waits for the restart, takes its row, then
    // the marker's, which waited first in line.
    assert!(r.control.send(Control::Event(Event::Mark("after".into()))));
    r.wait_for_rows(3);
    FakeProc::new(PID + 1).start(900).rss_kb(3000).write(&root);
    r.probe(Event::Mark("later".into())).unwrap();
    let (_, rec, heard) = r.stop();
    assert_eq!(
        events(&rec),
        [
            Some("start".into()),
            Some(format!("restart:{}", PID + 1)),
            Some("mark:after".into()),
            Some("mark:later".into())
        ]
    );
    let restart = &rec.samples[1];
    assert_eq!((restart.rss_bytes, restart.departed), (2000 * KIB, 1));
    let end = rec.end.unwrap();
    assert_eq!(end.restarts, 1);
    let pids: Vec<i32> = end.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, [PID, PID + 1]);
    assert!(
        heard
            .iter()
            .any(|h| h.contains(&format!("restarted as PID {}", PID + 1))),
        "{heard:?}"
    );
}

#[test]
fn a_bench_runs_reset_writes_clear_refs_after_its_row_and_answers_with_what_was_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    FakeProc::new(PID)
        .rss_kb(1000)
        .hwm_kb(9000)
        .clear_refs()
        .write(root);
    let clear_refs = root.join(format!("{PID}/clear_refs"));
    let r = Running::start(options(root, TargetSpec::Pid(PID), HOUR));
    let refused = r.reset(Event::RunStart(1));
    assert!(refused.kernel.is_empty(), "{refused:?}");
    // No cgroup is recorded, so none was asked to reset.
    assert_eq!(refused.cgroup, None);
    assert_eq!(std::fs::read_to_string(&clear_refs).unwrap(), "5");
    // The reset came after the run-start row: that row holds the mark from before the run.
    assert_eq!(r.recorded().samples[1].hwm_bytes, 9000 * KIB);
    // A process whose clear_refs cannot be written: the reset is refused, and the asker is told
    // which.
    refuse_resets(&clear_refs);
    let refused = r.reset(Event::RunStart(2)).kernel;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with(&format!("PID {PID}: ")),
        "{refused:?}"
    );
    let (_, rec, _) = r.stop();
    assert_eq!(
        events(&rec),
        [
            Some("start".into()),
            Some("run-start:1".into()),
            Some("run-start:2".into())
        ]
    );
    assert_eq!(rec.end.unwrap().peak_reset_failures, 1);
}

#[test]
fn with_phase_peaks_each_markers_row_is_followed_by_a_reset_and_a_refused_one_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    FakeProc::new(PID).rss_kb(1000).clear_refs().write(root);
    let clear_refs = root.join(format!("{PID}/clear_refs"));
    let opts = RecordOptions {
        phase_peaks: true,
        ..options(root, TargetSpec::Pid(PID), HOUR)
    };
    let r = Running::start(opts);
    assert_eq!(
        std::fs::read_to_string(&clear_refs).unwrap(),
        "",
        "none at the start"
    );
    r.probe(Event::Mark("load".into())).unwrap();
    assert_eq!(std::fs::read_to_string(&clear_refs).unwrap(), "5");
    refuse_resets(&clear_refs);
    r.probe(Event::Mark("prove".into())).unwrap();
    r.probe(Event::Mark("idle".into())).unwrap();
    let (_, rec, heard) = r.stop();
    assert!(rec.meta.unwrap().phase_peaks);
    assert_eq!(rec.end.unwrap().peak_reset_failures, 2);
    let said: Vec<&String> = heard
        .iter()
        .filter(|h| h.contains("cannot reset the peak (clear_refs)"))
        .collect();
    assert_eq!(said.len(), 1, "{heard:?}");
    assert!(said[0].contains("per-phase kernel peaks are not exact"));
}

#[test]
fn the_duration_ends_the_recording_with_its_last_row_at_its_end_and_every_deadline_counted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    FakeProc::new(PID).rss_kb(1000).write(root);
    let opts = RecordOptions {
        duration: Some(Duration::from_millis(100)),
        ..options(root, TargetSpec::Pid(PID), Duration::from_millis(20))
    };
    let r = Running::start(opts);
    let (outcome, rec, _) = r.join();
    assert_eq!(outcome.unwrap().exit, Ending::Done);
    let end = rec.end.unwrap();
    assert_eq!(end.reason, EndReason::Duration);
    // Deadlines at 0, 20, ..., 100 ms: each a row, or a tick missed on a loaded machine, never
    // lost; the last one at the duration's end.
    assert_eq!(end.samples + end.missed_ticks, 6, "{end:?}");
    let last = rec.samples.last().unwrap();
    assert!(last.elapsed_s >= 0.1, "{}", last.elapsed_s);
    assert_eq!(last.missed_ticks, end.missed_ticks);
}

/// A sink that takes `ok` rows, then fails as a recording whose file was deleted does.
struct Failing {
    inner: Memory,
    ok: usize,
}

impl SampleSink for Failing {
    fn start(&mut self, meta: &Meta) -> Result<(), OutputError> {
        self.inner.start(meta)
    }

    fn sample(&mut self, s: &Sample) -> Result<(), OutputError> {
        if self.inner.recorded().samples.len() == self.ok {
            return Err(OutputError::Removed(PathBuf::from("/tmp/run.csv")));
        }
        self.inner.sample(s)
    }

    fn finish(&mut self, end: &EndInfo) -> Result<(), OutputError> {
        self.inner.finish(end)
    }

    fn destination(&self) -> String {
        "/tmp/run.csv".into()
    }
}

#[test]
fn an_output_that_fails_stops_the_recording_saying_what_is_kept_with_the_outputs_class() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    FakeProc::new(PID).rss_kb(1000).write(root);
    let sink = Memory::new();
    let s = sink.clone();
    let make = move |_: &RecordOptions| -> Result<Box<dyn SampleSink>, OutputError> {
        Ok(Box::new(Failing { inner: s, ok: 2 }))
    };
    let rec = Recorder::start_with(
        options(root, TargetSpec::Pid(PID), HOUR),
        make,
        Reporter::silent(),
        Box::new(()),
    )
    .unwrap();
    let control = rec.control();
    let thread = std::thread::spawn(move || rec.run());
    let (tx, rx) = mpsc::channel();
    control.send(Control::Probe(Event::Mark("a".into()), tx));
    assert!(rx.recv().unwrap().is_some());
    let (tx, rx) = mpsc::channel();
    control.send(Control::Probe(Event::Mark("b".into()), tx));
    assert_eq!(rx.recv().unwrap(), None, "the row was not taken");
    let err = thread.join().unwrap().err().expect("the recording failed");
    // The file was deleted: what was taken is lost, and the end record is not written there.
    assert_eq!(
        crate::error::chain(&err),
        format!(
            "recording stopped; the 2 samples taken are lost: {}",
            OutputError::Removed(PathBuf::from("/tmp/run.csv"))
        )
    );
    assert_eq!(
        crate::error::Classified::class(&err),
        crate::error::Classified::class(&OutputError::Removed(PathBuf::new()))
    );
    let rec = sink.recorded();
    assert_eq!(rec.samples.len(), 2);
    assert!(rec.end.is_none());
}
