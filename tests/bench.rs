//! Tests of `memmon bench` against the real test daemon (`memmon-test test-daemon`, which maps and
//! touches exactly the size each request asks for) and against launched commands.

use crate::util::*;
use predicates::prelude::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// A running test daemon, killed when dropped.
struct Daemon {
    child: Child,
    socket: PathBuf,
    pidfile: PathBuf,
}

impl Daemon {
    fn start(dir: &Path, extra: &[&str]) -> Daemon {
        let socket = dir.join("d.sock");
        let pidfile = dir.join("d.pid");
        let child = Command::new(memmon_test_path())
            .arg("test-daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--pidfile")
            .arg(&pidfile)
            .args(extra)
            .spawn()
            .unwrap();
        assert!(
            wait_for(5.0, || pidfile.exists()),
            "the test daemon did not start"
        );
        Daemon {
            child,
            socket,
            pidfile,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `-- memmon-test test-client --socket S ARGS...`
    fn client(&self, args: &[&str]) -> Vec<String> {
        let mut v = vec![
            "--".to_string(),
            memmon_test_path().display().to_string(),
            "test-client".into(),
            "--socket".into(),
            self.socket.display().to_string(),
        ];
        v.extend(args.iter().map(|s| s.to_string()));
        v
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn runs(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    report["runs"].as_array().unwrap()
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// How far a measured peak may be from floor + size. The sizes are whole pages and the daemon
/// touches every page, so there is no rounding; what remains is (a) the daemon's own small
/// allocations while serving (a line buffer, stack: tens of KiB) and (b) the kernel's per-CPU
/// batching of RSS counters, which makes VmRSS and VmHWM approximate by up to
/// max(32, 2 × CPUs) pages per CPU (256 KiB on 2 CPUs). 1 MiB plus that bound covers both.
fn tolerance() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    MIB + cpus * 32.max(2 * cpus) * 4096
}

#[test]
fn each_run_peak_against_a_daemon_is_its_floor_plus_that_run_s_request() {
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let out = dir.path().join("bench.json");
    memmon()
        .args(["bench", "--pidfile"])
        .arg(&d.pidfile)
        .args(["-n", "3", "-i", "1s", "--export-json"])
        .arg(&out)
        .args(d.client(&["--size", "40MiB,80MiB,120MiB"]))
        .assert()
        .success()
        .stdout(predicate::str::contains("kernel"));
    let report = json(&out);
    assert_eq!(report["complete"], true);
    let runs = runs(&report);
    assert_eq!(runs.len(), 3);
    for (r, size) in runs.iter().zip([40 * MIB, 80 * MIB, 120 * MIB]) {
        assert_eq!(r["peak_source"], "kernel", "{r}");
        assert_eq!(r["exit_code"], 0);
        let (peak, before) = (u(&r["peak_rss_bytes"]), u(&r["rss_before_bytes"]));
        let want = before + size;
        assert!(
            peak.abs_diff(want) <= tolerance(),
            "run {}: peak {peak}, floor {before} + {size}",
            r["run"]
        );
        assert!(r["wall_s"].as_f64().unwrap() > 0.0);
        assert!(r["rss_after_bytes"].is_u64());
    }
    let stats = &report["stats"];
    assert_eq!(
        u(&stats["peak_rss_bytes"]["min"]),
        u(&runs[0]["peak_rss_bytes"])
    );
    assert_eq!(
        u(&stats["peak_rss_bytes"]["max"]),
        u(&runs[2]["peak_rss_bytes"])
    );
    assert!(stats["wall_s"]["stddev"].is_f64());
    assert_eq!(report["leak"]["suspected"], false);
}

#[test]
fn a_leaking_daemon_is_called_out() {
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &["--leak", "8MiB"]);
    let out = dir.path().join("bench.json");
    memmon()
        .args([
            "bench",
            "--pid",
            &d.pid().to_string(),
            "-n",
            "3",
            "--export-json",
        ])
        .arg(&out)
        .args(d.client(&["--size", "1MiB"]))
        .assert()
        .success()
        .stdout(
            predicate::str::contains("possible leak")
                .and(predicate::str::contains("+8.00 MiB per run")),
        );
    let report = json(&out);
    assert_eq!(report["leak"]["suspected"], true);
    assert!(u(&report["leak"]["growth_bytes"]) >= 16 * MIB - tolerance());
}

#[test]
fn a_failing_client_stops_the_bench_with_exit_1() {
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let out = dir.path().join("bench.json");
    memmon()
        .args(["bench", "--pidfile"])
        .arg(&d.pidfile)
        .args(["-n", "3", "--export-json"])
        .arg(&out)
        .args(d.client(&["--size", "1MiB", "--fail"]))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "run 1: the client failed with exit code 1",
        ));
    let report = json(&out);
    assert_eq!(runs(&report).len(), 1);
    assert_eq!(report["complete"], false);
}

#[test]
fn ignore_failure_runs_every_run_of_a_failing_client() {
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let out = dir.path().join("bench.csv");
    memmon()
        .args(["bench", "--pidfile"])
        .arg(&d.pidfile)
        .args(["-n", "3", "--ignore-failure", "--export-csv"])
        .arg(&out)
        .args(d.client(&["--size", "1MiB", "--fail"]))
        .assert()
        .success();
    assert_eq!(column(&out, "exit_code"), vec![1, 1, 1]);
}

#[test]
fn a_daemon_killed_mid_bench_stops_it_and_keeps_the_runs_measured() {
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let out = dir.path().join("bench.json");
    // Before run 2, --prepare kills the daemon.
    let prepare = format!("test \"$MEMMON_BENCH_RUN\" != 2 || kill -9 {}", d.pid());
    memmon()
        .args(["bench", "--pidfile"])
        .arg(&d.pidfile)
        .args(["-n", "4", "--prepare", &prepare, "--export-json"])
        .arg(&out)
        .args(d.client(&["--size", "4MiB"]))
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains(format!("the daemon (PID {}", d.pid()))
                .and(predicate::str::contains("exited during run 2")),
        );
    let report = json(&out);
    assert_eq!(runs(&report).len(), 1);
    assert!(report["stopped"]
        .as_str()
        .unwrap()
        .contains("exited during run 2"));
}

#[test]
fn the_recording_marks_where_each_run_starts_and_ends() {
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let rec = dir.path().join("series.csv");
    memmon()
        .args(["bench", "--pidfile"])
        .arg(&d.pidfile)
        .args(["-n", "2", "-i", "20ms", "-o"])
        .arg(&rec)
        .args(d.client(&["--size", "8MiB", "--hold", "50ms"]))
        .assert()
        .success()
        .stderr(predicate::str::contains(rec.display().to_string()));
    let (h, rows) = read_csv(&rec);
    let ev = h.iter().position(|c| c == "event").unwrap();
    let events: Vec<&str> = rows
        .iter()
        .map(|r| r[ev].as_str())
        .filter(|e| e.starts_with("run-"))
        .collect();
    assert_eq!(
        events,
        ["run-start:1", "run-end:1", "run-start:2", "run-end:2"]
    );
}

#[test]
fn a_daemon_that_is_not_there_is_exit_3() {
    let dir = tempdir();
    memmon()
        .args(["bench", "--pidfile"])
        .arg(dir.path().join("none.pid"))
        .args(["--", "true"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("none.pid"));
}

#[test]
fn without_a_daemon_each_run_peak_comes_from_wait4() {
    let dir = tempdir();
    let out = dir.path().join("bench.json");
    let md = dir.path().join("bench.md");
    memmon()
        .args(["bench", "-n", "3", "--export-json"])
        .arg(&out)
        .arg("--export-markdown")
        .arg(&md)
        .arg("--")
        .args(workload(&["alloc:64MiB", "hold:100ms"]))
        .assert()
        .success();
    let report = json(&out);
    assert_eq!(report["mode"], "command");
    let runs = runs(&report);
    assert_eq!(runs.len(), 3);
    for r in runs {
        assert_eq!(r["peak_source"], "kernel", "{r}");
        assert!(u(&r["peak_rss_bytes"]) >= 64 * MIB, "{r}");
        assert_eq!(r["peak_rss_bytes"], r["kernel_peak_bytes"]);
        assert!(r["rss_before_bytes"].is_null());
    }
    let md = std::fs::read_to_string(md).unwrap();
    assert!(
        md.starts_with("| Run | Time |") && md.contains("| Peak |"),
        "{md}"
    );
}

#[test]
fn a_failing_command_stops_the_bench_naming_the_run_and_status() {
    memmon()
        .args(["bench", "-n", "3", "--"])
        .args(workload(&["exit:7"]))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "run 1: the command failed with exit code 7",
        ));
}

#[test]
fn two_outputs_on_stdout_are_refused() {
    memmon()
        .args(["bench", "-o", "-", "--export-json", "-", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("both write to stdout"));
}

#[test]
fn phases_inside_a_run_get_exact_peaks_and_the_run_keeps_its_own() {
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let log = dir.path().join("daemon.log");
    std::fs::write(&log, "").unwrap();
    let series = dir.path().join("series.csv");
    let out = dir.path().join("bench.json");
    // One run: a phase asking for 80 MiB, then one asking for 20 MiB, each announced in the log
    // the way a daemon would log its phases. --phase-peaks resets the marks at each marker.
    let client = format!(
        "echo 'phase big' >> {log}; sleep 0.3; {m} test-client --socket {s} --size 80MiB; \
         echo 'phase small' >> {log}; sleep 0.3; {m} test-client --socket {s} --size 20MiB; sleep 0.3",
        log = log.display(),
        m = memmon_test_path().display(),
        s = d.socket.display()
    );
    memmon()
        .args(["bench", "-q", "--pidfile"])
        .arg(&d.pidfile)
        .args([
            "-n",
            "1",
            "-i",
            "1s",
            "--phase-peaks",
            "--mark-regex",
            "phase (?P<label>\\w+)",
        ])
        .arg("--mark-log")
        .arg(&log)
        .arg("-o")
        .arg(&series)
        .arg("--export-json")
        .arg(&out)
        .args(["--", "sh", "-c", &client])
        .assert()
        .success();
    let report = json(&out);
    let run = &runs(&report)[0];
    let floor = u(&run["rss_before_bytes"]);
    // The run's peak is the big phase's, although the marks were reset after it.
    assert_eq!(run["peak_source"], "kernel");
    assert!(
        u(&run["peak_rss_bytes"]).abs_diff(floor + 80 * MIB) <= tolerance(),
        "{run}"
    );
    let summary = summary_json(&series);
    let phases = summary["phases"].as_array().unwrap();
    let peak = |label: &str| {
        let p = phases
            .iter()
            .find(|p| p["label"] == label)
            .unwrap_or_else(|| panic!("no phase {label}: {phases:?}"));
        u(&p["peak_rss_bytes"])
    };
    assert!(peak("big").abs_diff(floor + 80 * MIB) <= tolerance());
    assert!(peak("small").abs_diff(floor + 20 * MIB) <= tolerance());
}

#[test]
fn marker_flags_without_a_daemon_are_refused() {
    memmon()
        .args(["bench", "-n", "1", "--phase-peaks", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("against a daemon"));
    memmon()
        .args(["bench", "-n", "1", "--mark-stdout", "x", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--mark-stdout"));
}
