//! The bench runner against a daemon, run for real over a fake /proc (`probe::fake::FakeProc`):
//! the daemon is a fake process, the client a real one (`sh`) that plays the daemon's kernel,
//! copying the status file the test prepared for its run (by `MEMMON_BENCH_RUN`) over the
//! daemon's. What the runner makes of it is checked: each run's reset, its row before and after
//! the client, its peak, the client's exit, a daemon gone mid-run, warmups. (A command bench
//! launches and reaps real processes, which here would be other tests' children too: its runs'
//! time line is tested in command.rs, the runs themselves in tests/bench.rs.)

use super::*;
use crate::bench::{BenchOptions, PeakBasis, PeakSource};
use crate::format::meta::EndReason;
use crate::model::sample::Sample;
use crate::output::Dest;
use crate::probe::cgroup::CgroupFs;
use crate::probe::fake::FakeProc;
use crate::probe::ProcFs;
use crate::sampler::target::TargetSpec;
use std::path::PathBuf;

const KIB: u64 = 1024;

/// A PID no real process has (above the kernel's largest, 2^22).
const PID: i32 = 9_000_002;

/// A fake daemon under `dir/proc`, and for each run N the status it has after the client:
/// `dir/runs/N/PID/status` (RSS `rss_kb`, VmHWM `hwm_kb`).
struct Fake {
    _dir: tempfile::TempDir,
    root: PathBuf,
    runs: PathBuf,
}

impl Fake {
    fn new(after_runs: &[(u64, u64)]) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proc");
        let runs = dir.path().join("runs");
        FakeProc::new(PID)
            .rss_kb(1000)
            .hwm_kb(1000)
            .clear_refs()
            .write(&root);
        for (n, &(rss, hwm)) in after_runs.iter().enumerate() {
            FakeProc::new(PID)
                .rss_kb(rss)
                .hwm_kb(hwm)
                .write(&runs.join((n + 1).to_string()));
        }
        Fake {
            _dir: dir,
            root,
            runs,
        }
    }

    fn status(&self) -> PathBuf {
        self.root.join(format!("{PID}/status"))
    }

    /// A client that sets the daemon's status to its run's, then runs `then` (sh).
    fn client(&self, then: &str) -> Vec<String> {
        let script = format!(
            "cp \"{}/$MEMMON_BENCH_RUN/{PID}/status\" \"{}\"; {then}",
            self.runs.display(),
            self.status().display()
        );
        vec!["sh".into(), "-c".into(), script]
    }

    /// A bench of `runs` runs of `client` against the fake daemon, its notes kept.
    fn options(&self, client: Vec<String>, runs: u32) -> (BenchOptions, crate::reporter::Heard) {
        let (report, heard) = Reporter::collect();
        let opts = BenchOptions {
            target: Some(TargetSpec::Pid(PID)),
            wait: false,
            client,
            runs,
            warmup: 0,
            concurrency: 1,
            prepare: None,
            cooldown: None,
            ignore_failure: false,
            // No row on the schedule but the first: each run's rows are its own boundaries.
            interval: Duration::from_secs(3600),
            children: true,
            output: None,
            format: None,
            force: false,
            append: false,
            pss: None,
            gpu: Default::default(),
            exit_records: false,
            report,
            stdout_is_data: false,
            procfs: ProcFs::new(&self.root),
            cgroupfs: CgroupFs::default(),
            marks: crate::marks::MarkOptions {
                no_socket: true,
                ..Default::default()
            },
            phase_peaks: false,
            cgroup: None,
            own_cgroup: Some(false),
            budgets: Default::default(),
            anatomy: None,
        };
        (opts, heard)
    }
}

fn said(h: &crate::reporter::Heard) -> Vec<String> {
    h.lock().unwrap().iter().map(|(_, t)| t.clone()).collect()
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

#[test]
fn each_daemon_run_has_its_own_exact_peak_from_its_reset_to_its_end_and_its_floor_before() {
    // Run 1 raises the mark to 5000 kB; run 2 to 3000 kB only: its own peak, not run 1's.
    let f = Fake::new(&[(2000, 5000), (1500, 3000)]);
    let (opts, heard) = f.options(f.client("exit 0"), 2);
    let done = run(&opts).unwrap();
    assert!(done.stop.is_none(), "{:?}", done.stop);
    let report = done.report;
    assert!(report.complete);
    assert_eq!(report.mode, "daemon");
    assert_eq!(report.daemon.as_ref().unwrap().pid, PID);
    let peaks: Vec<(u64, PeakSource, bool)> = report
        .runs
        .iter()
        .map(|r| (r.peak.bytes / KIB, r.peak.source, r.peak.exact))
        .collect();
    assert_eq!(
        peaks,
        [
            (5000, PeakSource::Vmhwm, true),
            (3000, PeakSource::Vmhwm, true)
        ]
    );
    let floors: Vec<(Option<u64>, Option<u64>)> = report
        .runs
        .iter()
        .map(|r| {
            (
                r.rss_before_bytes.map(|b| b / KIB),
                r.rss_after_bytes.map(|b| b / KIB),
            )
        })
        .collect();
    assert_eq!(floors, [(Some(1000), Some(2000)), (Some(2000), Some(1500))]);
    assert!(report.runs.iter().all(|r| r.exit_code == Some(0)));
    assert_eq!(
        report.runs.iter().map(|r| r.run).collect::<Vec<_>>(),
        [1, 2]
    );
    // Each reset was written (the fake kernel keeps what was written to clear_refs).
    let clear_refs = f.root.join(format!("{PID}/clear_refs"));
    assert_eq!(std::fs::read_to_string(clear_refs).unwrap(), "5");
    let said = said(&heard);
    assert!(
        said.iter()
            .any(|s| s.starts_with("run 2/2: ") && s.contains("peak 2.93 MiB")),
        "{said:?}"
    );
}

#[test]
fn a_failing_client_stops_the_bench_after_its_run_unless_failures_are_ignored() {
    let f = Fake::new(&[(1000, 2000), (1000, 2000)]);
    let (opts, _) = f.options(f.client("exit 4"), 2);
    let done = run(&opts).unwrap();
    match &done.stop {
        Some(Stop::Failed(msg)) => assert!(
            msg.starts_with("run 1: the client failed with exit code 4")
                && msg.contains("the bench stopped after 1 of 2 runs (--ignore-failure to go on)"),
            "{msg}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(done.report.runs.len(), 1);
    assert!(!done.report.complete);
    assert_eq!(done.report.runs[0].exit_code, Some(4));
    let (opts, _) = f.options(f.client("exit 4"), 2);
    let done = run(&BenchOptions {
        ignore_failure: true,
        ..opts
    })
    .unwrap();
    assert!(done.stop.is_none());
    assert_eq!(done.report.runs.len(), 2);
    assert!(done.report.runs.iter().all(|r| r.exit_code == Some(4)));
}

#[test]
fn a_daemon_gone_during_a_run_stops_the_bench_and_keeps_the_runs_before() {
    let f = Fake::new(&[(1000, 2000), (1000, 2000), (1000, 2000)]);
    let gone = format!(
        "[ \"$MEMMON_BENCH_RUN\" = 2 ] && rm -rf \"{}\"; exit 0",
        f.root.join(PID.to_string()).display()
    );
    let (opts, _) = f.options(f.client(&gone), 3);
    let done = run(&opts).unwrap();
    match &done.stop {
        Some(Stop::Failed(msg)) => assert_eq!(
            msg,
            &format!("the daemon (PID {PID}, fake{PID}) exited during run 2; the bench stopped, the runs measured before are kept")
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(done.report.runs.len(), 1);
    assert_eq!(
        done.report.stopped.as_deref(),
        Some(format!("the daemon (PID {PID}, fake{PID}) exited during run 2; the bench stopped, the runs measured before are kept").as_str())
    );
}

#[test]
fn warmup_runs_are_marked_apart_from_the_runs_and_the_recording_holds_each_runs_span() {
    // The warmup run is run 0 for the client (MEMMON_BENCH_RUN=0, MEMMON_BENCH_WARMUP=1).
    let f = Fake::new(&[(1200, 4000)]);
    std::fs::create_dir_all(f.runs.join("0")).unwrap();
    FakeProc::new(PID)
        .rss_kb(1100)
        .hwm_kb(9000)
        .write(&f.runs.join("0"));
    let out = f.root.parent().unwrap().join("bench.csv");
    let (opts, _) = f.options(f.client("exit 0"), 1);
    let done = run(&BenchOptions {
        warmup: 1,
        output: Some(Dest::File(out.clone())),
        ..opts
    })
    .unwrap();
    assert!(done.stop.is_none(), "{:?}", done.stop);
    // The warmup's 9000 kB is not the run's: the run's peak is from its own reset.
    let mut report = done.report;
    report.finish();
    assert_eq!(report.runs.len(), 1);
    assert_eq!(report.runs[0].peak.bytes, 4000 * KIB);
    assert_eq!(report.peak_basis, PeakBasis::Kernel);
    let mut events = Vec::new();
    let info = crate::format::read_recording(&out, |s: &Sample| {
        events.push(s.event.as_ref().map(|e| e.to_string()));
    })
    .unwrap();
    assert_eq!(
        events,
        [
            Some("start".into()),
            Some("mark:warmup:1".into()),
            Some("mark:runs".into()),
            Some("run-start:1".into()),
            Some("run-end:1".into()),
        ]
    );
    let end = info.end.unwrap();
    assert_eq!(end.reason, EndReason::Stopped);
    assert_eq!(end.client_walls.len(), 1);
    assert_eq!(
        info.meta.unwrap().run_peaks,
        Some(crate::format::meta::RunPeaks::ResetAfterStart)
    );
}

#[test]
fn runs_in_flight_together_give_the_windows_exact_peak_its_clients_and_their_rows() {
    // Four runs, two in flight: run 1 waits until run 2 has written the daemon's status and
    // started, so they overlap by construction, and no row is read while a client writes the
    // status (this fake kernel's file is written in place). The warmup run
    // (MEMMON_BENCH_RUN=0) leaves the daemon at RSS 1500 kB; run 2 raises its mark to 5000 kB.
    let f = Fake::new(&[(1500, 1500), (2000, 5000), (1500, 1500), (1500, 1500)]);
    FakeProc::new(PID)
        .rss_kb(1500)
        .hwm_kb(1500)
        .write(&f.runs.join("0"));
    let go = f.root.parent().unwrap().join("go");
    let then = format!(
        "case $MEMMON_BENCH_RUN in 1) while [ ! -e \"{g}\" ]; do sleep 0.01; done;; 2) touch \"{g}\";; esac; exit 0",
        g = go.display()
    );
    let out = f.root.parent().unwrap().join("window.csv");
    let status = |n: u32| {
        format!(
            "cp \"{}/{n}/{PID}/status\" \"{}\"",
            f.runs.display(),
            f.status().display()
        )
    };
    let client = format!(
        "case $MEMMON_BENCH_RUN in 0) {};; 2) {};; esac; {then}",
        status(0),
        status(2)
    );
    let (opts, heard) = f.options(vec!["sh".into(), "-c".into(), client], 4);
    let done = run(&BenchOptions {
        concurrency: 2,
        warmup: 1,
        output: Some(Dest::File(out.clone())),
        ..opts
    })
    .unwrap();
    assert!(done.stop.is_none(), "{:?}", done.stop);
    let report = done.report;
    assert!(report.complete && report.runs.is_empty());
    let w = report.window.as_ref().expect("a window");
    assert_eq!((w.concurrency, w.runs, w.most_in_flight), (2, 4, 2));
    assert_eq!(
        (w.peak.bytes / KIB, w.peak.source, w.peak.exact),
        (5000, PeakSource::Vmhwm, true)
    );
    // The floor is the daemon's RSS at the window's start, as the warmup left it.
    assert_eq!(w.floor_bytes / KIB, 1500);
    assert_eq!(w.peak_over_floor_per_run_in_flight_bytes / KIB, 1750);
    let mut runs: Vec<u32> = w.clients.iter().map(|c| c.run).collect();
    runs.sort_unstable();
    assert_eq!(runs, [1, 2, 3, 4]);
    assert!(w.clients.iter().all(|c| c.exit_code == Some(0)));
    assert!(w.clients.iter().all(|c| (1..=2).contains(&c.in_flight)));
    assert!(w.throughput_per_hour > 0.0 && w.latency_s.is_some());
    // The recording: the warmup's marker, the window's rows around every client's own.
    let mut events = Vec::new();
    let info = crate::format::read_recording(&out, |s: &Sample| {
        events.extend(s.event.as_ref().map(|e| e.to_string()));
    })
    .unwrap();
    assert_eq!(&events[..3], ["start", "mark:warmup", "window-start"]);
    assert_eq!(events.last().map(String::as_str), Some("window-end"));
    for n in 1..=4 {
        let at = |e: String| events.iter().position(|x| *x == e).unwrap();
        assert!(at(format!("client-start:{n}")) < at(format!("client-end:{n}")));
    }
    assert_eq!(events.len(), 3 + 8 + 1);
    // The window's time is in the end record, as a run's client time is.
    let walls = info.end.unwrap().client_walls;
    assert_eq!(walls.len(), 1);
    assert_eq!(walls[0].run, crate::model::sample::WINDOW);
    // Its summary gives the window the bench's peak.
    let said = said(&heard);
    assert!(
        said.iter()
            .any(|s| s.contains("4 runs, 2 in flight together")),
        "{said:?}"
    );
}

#[test]
fn a_failed_client_in_a_window_starts_no_more_and_lets_those_in_flight_finish() {
    // Run 1 fails at once; run 2 ends only once run 1 is reaped (a zombie still takes
    // `kill -0`), so the bench has seen the failure before a place in flight opens.
    let f = Fake::new(&[]);
    let pid = f.root.parent().unwrap().join("run1.pid");
    let client = format!(
        "case $MEMMON_BENCH_RUN in 1) echo $$ > \"{p}\"; exit 3;; 2) while [ ! -s \"{p}\" ]; do sleep 0.01; done; while kill -0 $(cat \"{p}\") 2>/dev/null; do sleep 0.01; done;; esac; exit 0",
        p = pid.display()
    );
    let (opts, _) = f.options(vec!["sh".into(), "-c".into(), client], 4);
    let done = run(&BenchOptions {
        concurrency: 2,
        ..opts
    })
    .unwrap();
    match &done.stop {
        Some(Stop::Failed(msg)) => assert!(
            msg.starts_with("run 1: the client failed with exit code 3")
                && msg.contains("no more runs were started, those in flight finished"),
            "{msg}"
        ),
        other => panic!("{other:?}"),
    }
    // Run 2 had started with run 1: it finished and is in the window; 3 and 4 never ran, yet
    // the window is closed and its peak exact.
    let w = done.report.window.as_ref().expect("the window");
    assert!(!done.report.complete);
    let mut runs: Vec<(u32, Option<i32>)> =
        w.clients.iter().map(|c| (c.run, c.exit_code)).collect();
    runs.sort_unstable();
    assert_eq!(runs, [(1, Some(3)), (2, Some(0))]);
    assert!(w.peak.exact);
}
