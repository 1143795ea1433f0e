//! Tests of `memmon bench` against the real test daemon (`memmon-test test-daemon`, which maps and
//! touches exactly the size each request asks for) and against launched commands.

use crate::util::*;
use predicates::prelude::*;
use std::os::unix::process::CommandExt;
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

/// `memmon bench --pidfile D FLAGS --export-json F -- test-client CLIENT...`, which must
/// succeed: its stdout (the table) and the exported report.
fn bench_daemon(
    d: &Daemon,
    dir: &Path,
    flags: &[&str],
    client: &[&str],
) -> (String, serde_json::Value) {
    let out = dir.join("bench.json");
    let done = memmon()
        .args(["bench", "--pidfile"])
        .arg(&d.pidfile)
        .args(flags)
        .arg("--export-json")
        .arg(&out)
        .args(d.client(client))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    assert!(
        done.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    (stdout, json(&out))
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
        .stdout(predicate::str::contains("vmhwm").and(predicate::str::contains("* exact within")));
    let report = json(&out);
    assert_eq!(report["complete"], true);
    let runs = runs(&report);
    assert_eq!(runs.len(), 3);
    for (r, size) in runs.iter().zip([40 * MIB, 80 * MIB, 120 * MIB]) {
        assert_eq!(r["peak"]["source"], "vmhwm", "{r}");
        assert_eq!(r["exit_code"], 0);
        let (peak, before) = (u(&r["peak"]["bytes"]), u(&r["rss_before_bytes"]));
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
    assert_eq!(u(&stats["peak_bytes"]["min"]), u(&runs[0]["peak"]["bytes"]));
    assert_eq!(u(&stats["peak_bytes"]["max"]), u(&runs[2]["peak"]["bytes"]));
    assert!(stats["wall_s"]["stddev"].is_f64());
    // One Stats for bench and compare: the same names (analysis/stats.rs).
    assert_eq!(stats["wall_s"]["count"], 3);
    assert!(stats["wall_s"]["spread_pct"].is_f64());
    // 40 to 120 MiB over the floor: spread far from 0 in both byte stats.
    for stat in ["peak_bytes", "peak_over_floor_bytes"] {
        let spread = stats[stat]["spread_pct"].as_f64();
        assert!(spread.is_some_and(|s| s > 10.0), "{stat}: {}", stats[stat]);
    }
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

/// The regular files under `dir`, at any depth (a marker socket is not one).
fn regular_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => out.extend(regular_files(&p)),
            Ok(m) if m.is_file() => out.push(p),
            _ => {}
        }
    }
    out
}

#[test]
fn a_daemon_bench_without_o_writes_no_scratch_file() {
    let dir = tempdir();
    let tmp = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let mut bench = std::process::Command::new(memmon_path())
        .args(["bench", "-q", "-n", "2", "-i", "20ms", "--pidfile"])
        .arg(&d.pidfile)
        .args(d.client(&["--size", "8MiB", "--hold", "300ms"]))
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Looked at while the runs go on (a scratch file removed at the end would not be seen
    // after it).
    let mut seen = Vec::new();
    let status = loop {
        seen.extend(regular_files(tmp.path()));
        if let Some(status) = bench.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success());
    assert!(seen.is_empty(), "{seen:?}");
}

#[test]
fn a_command_bench_writes_its_runs_into_one_recording_on_one_time_line_as_they_are_taken() {
    let dir = tempdir();
    let rec = dir.path().join("runs.csv");
    memmon()
        .args([
            "bench", "-q", "-n", "2", "--warmup", "1", "-i", "20ms", "-o",
        ])
        .arg(&rec)
        .arg("--")
        .args(workload(&["alloc:8MiB", "hold:100ms"]))
        .assert()
        .success();
    let (h, rows) = read_csv(&rec);
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let (ev, el, missed) = (col("event"), col("elapsed_s"), col("missed_ticks"));
    let events: Vec<&str> = rows
        .iter()
        .map(|r| r[ev].as_str())
        .filter(|e| !e.is_empty())
        .collect();
    // The warmup run is not kept; each measured run opens on its first row and closes on its
    // last, the recording's start row before the first.
    assert_eq!(
        events,
        [
            "start",
            "run-start:1",
            "run-end:1",
            "run-start:2",
            "run-end:2"
        ]
    );
    let num = |r: &Vec<String>, i: usize| r[i].parse::<f64>().unwrap();
    assert!(
        rows.windows(2)
            .all(|w| num(&w[1], el) >= num(&w[0], el) && num(&w[1], missed) >= num(&w[0], missed)),
        "one time line"
    );
    // The first run started after the warmup run: its rows are moved by that much.
    assert!(num(&rows[0], el) >= 0.1, "{:?}", rows[0]);
    let s = summary_json(&rec);
    assert_eq!(s["runs"].as_array().unwrap().len(), 2, "{s}");
    assert!(s["peak"]["bytes"].as_u64().unwrap() >= 8 * MIB, "{s}");
}

/// `memmon bench -q -i 1s FLAGS -n RUNS -o REC --export-json OUT -- memmon-test workload STEPS`;
/// then `summary --json` of REC gives each run of the recording the peak the bench exported
/// for it (the same number, source, scope and exactness) and its wall time. The exported runs.
fn command_bench_recording_holds_its_runs(
    dir: &Path,
    rec: &Path,
    flags: &[&str],
    runs_n: usize,
    steps: &[&str],
) -> Vec<serde_json::Value> {
    let out = dir.join("bench.json");
    let interval = if flags.contains(&"-i") {
        &[][..]
    } else {
        &["-i", "1s"][..]
    };
    memmon()
        .args(["bench", "-q", "-n", &runs_n.to_string()])
        .args(interval)
        .args(flags)
        .arg("-o")
        .arg(rec)
        .arg("--export-json")
        .arg(&out)
        .arg("--")
        .args(workload(steps))
        .assert()
        .success();
    let exported = runs(&json(&out)).clone();
    let summary = summary_json(rec);
    let spans = summary["runs"].as_array().unwrap();
    assert_eq!((exported.len(), spans.len()), (runs_n, runs_n), "{summary}");
    for (e, s) in exported.iter().zip(spans) {
        assert_eq!(s["run"], e["run"], "{s}");
        assert_eq!(
            s["peak"], e["peak"],
            "run {}: recording {s}\nexported {e}",
            e["run"]
        );
        let (d, w) = (
            s["duration_s"].as_f64().unwrap(),
            e["wall_s"].as_f64().unwrap(),
        );
        assert!(
            (d - w).abs() < 0.005,
            "run {}: {d} s recorded, {w} s exported",
            e["run"]
        );
    }
    // The recording's own peak is its largest run's.
    let largest = exported.iter().map(|e| u(&e["peak"]["bytes"])).max();
    assert_eq!(summary["peak"]["bytes"].as_u64(), largest, "{summary}");
    exported
}

#[test]
fn a_command_bench_recording_gives_each_run_the_peak_and_time_its_table_showed() {
    let dir = tempdir();
    let rec = dir.path().join("runs.csv");
    // 64 MiB held for 200 ms, sampled every second: only the first row of each run is sampled,
    // at the command's start; its peak and end come after it.
    let exported = command_bench_recording_holds_its_runs(
        dir.path(),
        &rec,
        &[],
        2,
        &["alloc:64MiB", "hold:200ms"],
    );
    for e in &exported {
        assert!(u(&e["peak"]["bytes"]) >= 64 * MIB, "{e}");
        assert_eq!(e["peak"]["exact"], true, "{e}");
        assert!(e["wall_s"].as_f64().unwrap() >= 0.2, "{e}");
    }
    // The recording's run-end rows are at the runs' ends, not copies of their starts.
    let (h, rows) = read_csv(&rec);
    let (ev, el) = (
        h.iter().position(|c| c == "event").unwrap(),
        h.iter().position(|c| c == "elapsed_s").unwrap(),
    );
    let at = |event: &str| -> f64 {
        rows.iter().find(|r| r[ev] == event).unwrap()[el]
            .parse()
            .unwrap()
    };
    assert!(at("run-end:1") - at("run-start:1") >= 0.15, "{rows:?}");
    // Budgets judge each run's own peak...
    let budget = |size: u64| {
        memmon()
            .args(["summary", "--max-peak", &format!("{size}B")])
            .arg(&rec)
            .output()
            .unwrap()
    };
    let peak = u(&exported[0]["peak"]["bytes"]);
    let over = budget(peak - MIB);
    assert_eq!(
        over.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&over.stderr)
    );
    assert!(
        String::from_utf8_lossy(&over.stderr).contains("runs.csv#run 1"),
        "{}",
        String::from_utf8_lossy(&over.stderr)
    );
    let kept = budget(peak + 4 * MIB);
    assert!(
        kept.status.success(),
        "{}",
        String::from_utf8_lossy(&kept.stderr)
    );
    // ...and compare holds each run's own peak and duration.
    let compared = compared_runs(&rec);
    assert_eq!(compared.len(), 2, "{compared:?}");
    for (c, e) in compared.iter().zip(&exported) {
        assert_eq!(c["peak"], e["peak"], "{c}");
    }
}

#[test]
fn a_command_bench_of_runs_shorter_than_the_first_sample_lists_each_with_the_tables_peak() {
    // memmon-test with nothing to do exits within a few ms: usually before memmon's first
    // sample of it, so a run has no row and its end record alone holds its peaks. The
    // recording lists every run with the peak and time the bench gave it, whatever was sampled
    // (a run once lacked its row and its cgroup's peak, and put every run on a lesser basis).
    let dir = tempdir();
    let rec = dir.path().join("short.csv");
    let exported = command_bench_recording_holds_its_runs(dir.path(), &rec, &[], 3, &[]);
    let sources: Vec<_> = exported
        .iter()
        .map(|e| e["peak"]["source"].clone())
        .collect();
    assert!(sources.iter().all(|s| *s == sources[0]), "{sources:?}");
    // compare takes them, as summary does (it refused a recording without rows).
    let compared = compared_runs(&rec);
    assert_eq!(compared.len(), 3, "{compared:?}");
    for (c, e) in compared.iter().zip(&exported) {
        assert_eq!(c["peak"], e["peak"], "{c}");
    }
}

#[test]
fn a_command_bench_recording_without_its_own_cgroup_gives_each_run_its_tree_s_kernel_peak() {
    let dir = tempdir();
    let rec = dir.path().join("tree.jsonl");
    // Two 50 MiB children that live and die between the samples of every run.
    let exported = command_bench_recording_holds_its_runs(
        dir.path(),
        &rec,
        &["--no-own-cgroup"],
        2,
        &["alloc:30MiB", "children:2:50MiB:300ms", "wait-children"],
    );
    for e in &exported {
        assert_ne!(e["peak"]["source"], "cgroup", "{e}");
        assert!(u(&e["peak"]["bytes"]) >= 50 * MIB, "{e}");
    }
}

#[test]
fn a_command_bench_recording_keeps_a_spike_after_a_run_s_last_sample() {
    let dir = tempdir();
    let rec = dir.path().join("late.csv");
    // Sampled at its start only (the next tick, 30 s on, never comes: the run ends first,
    // however slow a busy machine makes it); its 150 MiB spike comes after that last sample,
    // just before it exits.
    let exported = command_bench_recording_holds_its_runs(
        dir.path(),
        &rec,
        &["-i", "30s"],
        1,
        &["alloc:10MiB", "hold:1200ms", "spike:150MiB:20ms"],
    );
    assert!(
        u(&exported[0]["peak"]["bytes"]) >= 160 * MIB,
        "{}",
        exported[0]
    );
    assert!(
        exported[0]["wall_s"].as_f64().unwrap() >= 1.2,
        "{}",
        exported[0]
    );
    // The largest RSS the rows hold is far below it: the peak is the kernel's, from the run's
    // end, not the rows'.
    let rows_peak = column(&rec, "rss_bytes").into_iter().max().unwrap();
    assert!(rows_peak < 100 * MIB, "{rows_peak}");
}

#[test]
fn benchs_warmup_markers_wait_for_their_rows_and_are_never_late() {
    // Sent without waiting, a warmup marker reached its row after the client had started (8 ms
    // on a busy machine), and summary called the warmup phase late, not exact. Taken like a
    // run's boundary, its row comes first: no lag is recorded, whatever the machine's load.
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let rec = dir.path().join("warm.csv");
    memmon()
        .args(["bench", "-q", "--pidfile"])
        .arg(&d.pidfile)
        .args(["-n", "1", "--warmup", "2", "-i", "1s", "-o"])
        .arg(&rec)
        .args(d.client(&["--size", "8MiB", "--hold", "20ms"]))
        .assert()
        .success();
    let (h, rows) = read_csv(&rec);
    let (ev, lag) = (
        h.iter().position(|c| c == "event").unwrap(),
        h.iter().position(|c| c == "event_lag_us").unwrap(),
    );
    let marks: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| r[ev].starts_with("mark:"))
        .map(|r| (r[ev].as_str(), r[lag].as_str()))
        .collect();
    assert_eq!(
        marks,
        [
            ("mark:warmup:1", ""),
            ("mark:warmup:2", ""),
            ("mark:runs", "")
        ]
    );
    let s = summary_json(&rec);
    assert!(
        s["phases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.get("late_boundary").is_none()),
        "{}",
        s["phases"]
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
fn an_empty_pidfile_names_the_wait_flag_bench_has() {
    let dir = tempdir();
    let pidfile = dir.path().join("empty.pid");
    std::fs::write(&pidfile, "").unwrap();
    let out = memmon()
        .args(["bench", "-n", "1", "--pidfile"])
        .arg(&pidfile)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("add --wait"), "{stderr}");
    // The flag it names is bench's: taken, not an unknown argument.
    memmon()
        .args(["bench", "--wait", "--help"])
        .assert()
        .success();
    // Without a daemon to wait for, it is refused.
    memmon()
        .args(["bench", "--wait", "-n", "1", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--wait applies to a daemon"));
}

#[test]
fn with_wait_a_bench_waits_for_its_daemon_s_pidfile() {
    let dir = tempdir();
    let pidfile = dir.path().join("d.pid");
    let out = dir.path().join("bench.json");
    let client = [
        memmon_test_path().display().to_string(),
        "test-client".into(),
        "--socket".into(),
        dir.path().join("d.sock").display().to_string(),
        "--size".into(),
        "20MiB".into(),
    ];
    let mut args = vec![
        "bench".to_string(),
        "--wait".into(),
        "--pidfile".into(),
        pidfile.display().to_string(),
        "-n".into(),
        "1".into(),
        "--export-json".into(),
        out.display().to_string(),
        "--".into(),
    ];
    args.extend(client);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bench = Running::spawn(&args);
    assert!(
        bench.wait_for_stderr("waiting for the daemon", 30.0),
        "{}",
        bench.stderr()
    );
    // Only now does the daemon start (and write its pidfile).
    let d = Daemon::start(dir.path(), &[]);
    let (status, stderr) = bench.finish();
    assert!(status.success(), "{stderr}");
    let report = json(&out);
    assert_eq!(u(&report["daemon"]["pid"]), d.pid() as u64, "{report}");
    assert!(
        u(&runs(&report)[0]["peak"]["bytes"]) >= 20 * MIB,
        "{report}"
    );
}

#[test]
fn without_a_daemon_each_run_peak_comes_from_wait4() {
    let dir = tempdir();
    let out = dir.path().join("bench.json");
    let md = dir.path().join("bench.md");
    // Not in a cgroup of memmon's own (the default as root), whose peak would be the run's.
    memmon()
        .args(["bench", "-n", "3", "--no-own-cgroup", "--export-json"])
        .arg(&out)
        .arg("--export-markdown")
        .arg(&md)
        .arg("--")
        .args(workload(&["alloc:64MiB", "hold:100ms"]))
        .assert()
        .success();
    let report = json(&out);
    assert_eq!(report["mode"], "command");
    // Each of `stats` is count, mean, stddev, min, max and spread_pct (docs/guide/bench.md).
    for stat in ["wall_s", "peak_bytes"] {
        let s = report["stats"][stat].as_object().unwrap();
        let mut keys: Vec<&str> = s.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            ["count", "max", "mean", "min", "spread_pct", "stddev"],
            "{stat}: {s:?}"
        );
    }
    let p = &report["stats"]["peak_bytes"];
    let spread = 100.0 * (u(&p["max"]) - u(&p["min"])) as f64 / u(&p["mean"]) as f64;
    assert!(
        (p["spread_pct"].as_f64().unwrap() - spread).abs() < 0.01,
        "{p}"
    );
    let runs = runs(&report);
    assert_eq!(runs.len(), 3);
    for r in runs {
        assert_eq!(r["peak"]["source"], "ru-maxrss", "{r}");
        assert!(u(&r["peak"]["bytes"]) >= 64 * MIB, "{r}");
        assert_eq!(r["peak"]["bytes"], r["kernel_peak_rss_bytes"]);
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
fn an_export_that_cannot_be_written_stops_the_bench_before_its_first_run() {
    let dir = tempdir();
    let ran = dir.path().join("ran");
    let ok = dir.path().join("ok");
    std::fs::create_dir(&ok).unwrap();
    let out = memmon()
        .args(["bench", "-n", "1", "--export-json"])
        .arg(ok.join("b.json"))
        .arg("--export-csv")
        .arg(dir.path().join("missing").join("b.csv"))
        .args(["--", "sh", "-c"])
        .arg(format!("touch '{}'", ran.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot write") && err.contains("missing/b.csv (--export-csv)"),
        "{err}"
    );
    assert!(
        !ran.exists() && !err.contains("run 1/1"),
        "a run started: {err}"
    );
    // The export that could be written was checked without leaving a file behind.
    let left: Vec<_> = std::fs::read_dir(&ok).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
    // A directory the user may not write, likewise (root's, as nobody).
    if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
        skip(
            Need::RunAsNobody,
            "the read-only directory: needs root and setpriv to run as nobody",
        );
        return;
    }
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap()
    };
    mode(dir.path(), 0o755);
    mode(&ok, 0o755);
    let out = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(memmon_path())
        .args(["bench", "-n", "1", "--export-markdown"])
        .arg(ok.join("b.md"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("b.md (--export-markdown): Permission denied") && !err.contains("run 1/1"),
        "{err}"
    );
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
    assert_eq!(run["peak"]["source"], "vmhwm");
    assert!(
        u(&run["peak"]["bytes"]).abs_diff(floor + 80 * MIB) <= tolerance(),
        "{run}"
    );
    let summary = summary_json(&series);
    let phases = summary["phases"].as_array().unwrap();
    let peak = |label: &str| {
        let p = phases
            .iter()
            .find(|p| p["label"] == label)
            .unwrap_or_else(|| panic!("no phase {label}: {phases:?}"));
        u(&p["peak"]["bytes"])
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

/// The runs `memmon compare --json` takes from `recording` (compared with itself).
fn compared_runs(recording: &Path) -> Vec<serde_json::Value> {
    let cmp = memmon()
        .args(["compare", "--json"])
        .arg(recording)
        .arg("--")
        .arg(recording)
        .output()
        .unwrap();
    assert!(
        cmp.status.success(),
        "{}",
        String::from_utf8_lossy(&cmp.stderr)
    );
    let cmp: serde_json::Value = serde_json::from_slice(&cmp.stdout).unwrap();
    cmp["base"]["runs"].as_array().unwrap().clone()
}

#[test]
fn bench_export_summary_and_compare_name_a_runs_peak_and_time_alike() {
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let (series, out) = (dir.path().join("series.jsonl"), dir.path().join("b.json"));
    memmon()
        .args(["bench", "-q", "--pidfile"])
        .arg(&d.pidfile)
        .args(["-n", "2", "-i", "1s", "-o"])
        .arg(&series)
        .arg("--export-json")
        .arg(&out)
        .args(d.client(&["--size", "60MiB"]))
        .assert()
        .success();
    let exported = runs(&json(&out)).clone();
    let summary = summary_json(&series);
    let spans = summary["runs"].as_array().unwrap();
    let compared = compared_runs(&series);
    assert_eq!((spans.len(), compared.len()), (2, 2));
    for i in 0..2 {
        // One word for one number: the kernel's VmHWM of the run, in all three.
        assert_eq!(exported[i]["peak"]["source"], "vmhwm", "{}", exported[i]);
        assert_eq!(
            spans[i]["peak"]["source"], exported[i]["peak"]["source"],
            "{}",
            spans[i]
        );
        assert_eq!(compared[i]["peak"]["source"], exported[i]["peak"]["source"]);
        assert_eq!(spans[i]["peak"]["scope"], exported[i]["peak"]["scope"]);
        assert_eq!(compared[i]["peak"]["scope"], exported[i]["peak"]["scope"]);
        // The run's time is its client's, as the table gives it: not its rows' span, which
        // starts before the client and ends after it.
        let wall = exported[i]["wall_s"].as_f64().unwrap();
        assert_eq!(spans[i]["duration_s"].as_f64(), Some(wall), "{}", spans[i]);
        assert_eq!(compared[i]["duration_s"].as_f64(), Some(wall));
        let rows = spans[i]["end_elapsed_s"].as_f64().unwrap()
            - spans[i]["start_elapsed_s"].as_f64().unwrap();
        assert!(rows >= wall, "rows {rows} s, client {wall} s");
    }
    // The summary's run table marks the kernel's peaks, and only those, with *.
    memmon()
        .arg("summary")
        .arg(&series)
        .assert()
        .success()
        .stdout(predicate::str::contains(" *"));
}

/// A client that, in run 1 only, leaves a process holding 60 MiB behind, then allocates 5 MiB
/// itself; in the other runs it allocates only the 5 MiB.
fn client_leaving_an_orphan_in_run_1() -> Vec<String> {
    let me = memmon_test_path().display().to_string();
    let script = format!(
        "if [ \"$MEMMON_BENCH_RUN\" = 1 ]; then '{me}' workload alloc:60MiB hold:120s & fi; \
         exec '{me}' workload alloc:5MiB hold:1s"
    );
    vec!["sh".into(), "-c".into(), script]
}

#[test]
fn a_run_s_orphan_is_ended_and_not_billed_to_the_next_run() {
    let dir = tempdir();
    let out = dir.path().join("bench.json");
    let assert = memmon()
        .args(["bench", "-n", "2", "-i", "50ms", "--export-json"])
        .arg(&out)
        .arg("--")
        .args(client_leaving_an_orphan_in_run_1())
        .assert()
        .success()
        .stderr(predicate::str::contains("run 1 left 1 process behind"));
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let report = json(&out);
    let runs = runs(&report);
    assert_eq!(runs.len(), 2, "{stderr}");
    // Run 1 owns its orphan: the tree's sampled peak holds its 60 MiB.
    assert!(u(&runs[0]["peak"]["bytes"]) >= 60 * MIB, "{}", runs[0]);
    let left = &runs[0]["leftovers"];
    assert_eq!(u(&left["processes"]), 1, "{left}");
    assert!(u(&left["rss_bytes"]) >= 60 * MIB, "{left}");
    let orphan = left["pids"][0].as_i64().unwrap() as i32;
    // Run 2 started nothing but its 5 MiB: its peak is not inflated by run 1's orphan.
    let peak2 = u(&runs[1]["peak"]["bytes"]);
    assert!(peak2 < 30 * MIB, "run 2's peak {peak2} B: {}", runs[1]);
    assert!(runs[1]["leftovers"].is_null(), "{}", runs[1]);
    // The orphan is gone (ended and reaped), not running on after the bench.
    assert!(
        !Path::new(&format!("/proc/{orphan}")).exists() || {
            let stat = std::fs::read_to_string(format!("/proc/{orphan}/stat")).unwrap_or_default();
            !stat.contains("(memmon)")
        }
    );
    assert!(
        report["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("run 1 left 1 process behind")),
        "{}",
        report["notes"]
    );
}

#[test]
fn each_client_run_gets_its_number_through_its_environment() {
    let dir = tempdir();
    let log = dir.path().join("env.log");
    let script = format!(
        "echo \"run=$MEMMON_BENCH_RUN warmup=${{MEMMON_BENCH_WARMUP:-none}}\" >> '{}'",
        log.display()
    );
    memmon()
        .args([
            "bench", "-q", "--warmup", "2", "-n", "2", "--", "sh", "-c", &script,
        ])
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "run=0 warmup=1\nrun=0 warmup=2\nrun=1 warmup=none\nrun=2 warmup=none\n"
    );
}

#[test]
fn a_daemon_whose_rss_rises_with_each_new_worker_is_not_called_a_leak() {
    let dir = tempdir();
    let fifo = dir.path().join("requests");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // A daemon (bash, its builtins fork nothing) that starts one more 8 MiB worker, which stays,
    // at each request: its RSS after each run rises, but so does its number of processes.
    let me = memmon_test_path().display().to_string();
    let script = format!(
        "exec 3<>'{}'; while :; do if read -t 0.05 -u 3 x; then '{me}' workload alloc:8MiB hold:600s & fi; done",
        fifo.display()
    );
    let mut daemon = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = daemon.id() as i32;
    // The daemon is up once it holds the FIFO open (its fd 3).
    let fd3 = format!("/proc/{}/fd/3", daemon.id());
    assert!(wait_for(10.0, || std::fs::read_link(&fd3).is_ok_and(|p| p == fifo)));
    let out = dir.path().join("bench.json");
    let client = format!("echo go > '{}'; sleep 1", fifo.display());
    let result = memmon()
        .args(["bench", "-n", "3", "-i", "100ms", "--pid"])
        .arg(daemon.id().to_string())
        .arg("--export-json")
        .arg(&out)
        .args(["--", "sh", "-c", &client])
        .output()
        .unwrap();
    // SAFETY: kill takes plain integers and touches no memory.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let _ = daemon.wait();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    let report = json(&out);
    let runs = runs(&report);
    let after: Vec<u64> = runs.iter().map(|r| u(&r["rss_after_bytes"])).collect();
    let procs: Vec<u64> = runs.iter().map(|r| u(&r["processes_after"])).collect();
    // The rise a leak check would call out is there...
    assert!(after.windows(2).all(|w| w[1] > w[0] + 4 * MIB), "{after:?}");
    assert_eq!(procs, vec![2, 3, 4], "{}", report["runs"]);
    // ...but it comes from new processes, not from a leak.
    assert_eq!(report["leak"]["suspected"], false, "{}", report["leak"]);
    let msg = report["leak"]["message"].as_str().unwrap();
    assert!(msg.contains("between 2 and 4 processes"), "{msg}");
}

#[test]
fn a_child_idle_in_the_next_run_does_not_give_it_the_last_runs_peak() {
    // The daemon is a shell; its child spikes to 300 MiB during run 1 (the client lets it go
    // and waits until it is done), then idles with a statm that does not move. Run 2 starts
    // with a reset of the marks: its peak must not be the one read before that reset.
    let dir = tempdir();
    let (go, done) = (dir.path().join("go"), dir.path().join("done"));
    let daemon_script = format!(
        r#"while [ ! -e {go} ]; do sleep 0.05; done; "$0" workload spike:300MiB:300ms say:done hold:60s > {done}"#,
        go = go.display(),
        done = done.display()
    );
    // In a process group of its own, so the child goes with it.
    let mut daemon = Command::new("sh")
        .args(["-c", &daemon_script])
        .arg(memmon_test_path())
        .process_group(0)
        .spawn()
        .unwrap();
    let client = format!(
        r#"if [ "$MEMMON_BENCH_RUN" = 1 ]; then touch {go}; while ! grep -q done {done}; do sleep 0.05; done; sleep 0.2; else sleep 0.6; fi"#,
        go = go.display(),
        done = done.display()
    );
    let out = dir.path().join("bench.json");
    let ok = memmon()
        .args([
            "bench",
            "-q",
            "--pid",
            &daemon.id().to_string(),
            "-n",
            "2",
            "-i",
            "50ms",
        ])
        .arg("--export-json")
        .arg(&out)
        .args(["--", "sh", "-c", &client])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    // SAFETY: signalling the process group of our own child.
    unsafe { libc::kill(-(daemon.id() as i32), libc::SIGKILL) };
    let _ = daemon.wait();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let report = json(&out);
    let runs = runs(&report);
    let kernel = |i: usize| u(&runs[i]["kernel_peak_rss_bytes"]);
    assert!(kernel(0) >= 300 * MIB, "run 1: {}", runs[0]);
    assert!(
        kernel(1) < 100 * MIB,
        "run 2 inherited run 1's peak: {}",
        runs[1]
    );
}

#[test]
fn each_run_reports_the_cpu_time_the_daemon_spent_on_it() {
    // Touching 400 MiB is ~100,000 page faults in the daemon: tenths of a second of system
    // time, against next to nothing for 4 MiB (/proc/PID/stat counts in 10 ms ticks).
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let (out, csv) = (dir.path().join("b.json"), dir.path().join("b.csv"));
    memmon()
        .args(["bench", "--pidfile"])
        .arg(&d.pidfile)
        .args(["-n", "2", "-i", "100ms", "--export-json"])
        .arg(&out)
        .arg("--export-csv")
        .arg(&csv)
        .args(d.client(&["--size", "4MiB,400MiB"]))
        .assert()
        .success()
        .stdout(predicate::str::contains("Daemon CPU u/s"));
    let report = json(&out);
    let runs = runs(&report);
    let sys = |r: &serde_json::Value| r["daemon_system_s"].as_f64().unwrap();
    let user = |r: &serde_json::Value| r["daemon_user_s"].as_f64().unwrap();
    assert!(sys(&runs[1]) >= 0.02, "{}", runs[1]);
    assert!(sys(&runs[1]) + user(&runs[1]) > sys(&runs[0]) + user(&runs[0]));
    let (header, rows) = read_csv(&csv);
    let i = header.iter().position(|c| c == "daemon_system_s").unwrap();
    assert!((rows[1][i].parse::<f64>().unwrap() - sys(&runs[1])).abs() < 0.006);
}

#[test]
fn a_forking_daemons_runs_each_hold_the_peak_of_the_worker_that_served_them() {
    // Each request is served by a child that maps the size, holds it 5 ms and exits: at -i 1s
    // the samples see the daemon alone, and only the exit records carry the workers' peaks.
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &["--fork"]);
    let (table, report) = bench_daemon(
        &d,
        dir.path(),
        &["-n", "3", "-i", "1s"],
        &["--size", "40MiB,80MiB,120MiB"],
    );
    assert!(!table.contains('≥'), "{table}");
    for (r, size) in runs(&report).iter().zip([40 * MIB, 80 * MIB, 120 * MIB]) {
        let kernel = u(&r["kernel_peak_rss_bytes"]);
        assert!(
            kernel >= size && kernel < size + 16 * MIB,
            "run {}: kernel peak {kernel} for a {size}-byte worker: {r}",
            r["run"]
        );
        assert_eq!(r["peak"]["source"], "vmhwm", "{r}");
        assert_eq!(r["peak"]["scope"], "largest-process", "{r}");
        assert!(u(&r["departed"]) >= 1, "{r}");
    }
}

#[test]
fn without_exit_records_a_forking_daemons_run_peaks_are_lower_bounds_and_say_so() {
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &["--fork"]);
    let (table, report) = bench_daemon(
        &d,
        dir.path(),
        &["--no-taskstats", "-n", "2", "-i", "1s"],
        &["--size", "60MiB"],
    );
    assert!(table.contains("≥ "), "{table}");
    assert!(
        table.contains("with no exit record read: the peak is the largest VmHWM the samples saw"),
        "{table}"
    );
    assert!(!table.contains("exact within"), "{table}");
    for r in runs(&report) {
        // The worker's reap is the only sign of it: the daemon's cminflt rose.
        assert_eq!(r["peak"]["scope"], "largest-process-seen", "{r}");
        assert!(u(&r["departed"]) >= 1, "{r}");
    }
}

#[test]
fn a_bench_waits_for_its_client_without_waking_between_samples() {
    // The client runs 4 s; the bench waits on its pidfd (and on the recorder's end), so over
    // the middle of the run only the recorder's 1 s ticks wake memmon (it used to look every
    // 50 ms).
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &[]);
    let mut bench = std::process::Command::new(memmon_path())
        .args(["bench", "-q", "-n", "1", "-i", "1s", "--socket"])
        .arg(dir.path().join("m.sock"))
        .arg("--pidfile")
        .arg(&d.pidfile)
        .args(["--", "sleep", "4"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (before, t0) = (wake_ups(bench.id()), std::time::Instant::now());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let per_s = (wake_ups(bench.id()) - before) as f64 / t0.elapsed().as_secs_f64();
    assert!(bench.wait().unwrap().success());
    // About 1 a second; looking every 50 ms was 20. Preemptions on a busy machine are not
    // counted (wake_ups), and a late tick on one does not add wake-ups.
    assert!(
        per_s <= 5.0,
        "{per_s:.1} wake-ups a second while the client ran"
    );
}

#[test]
fn without_a_daemon_each_run_reports_the_cpu_time_of_its_command() {
    // A shell counting to 300,000 spends its time in user space; sleep spends next to none.
    let dir = tempdir();
    let (out, csv) = (dir.path().join("b.json"), dir.path().join("b.csv"));
    let busy = r#"if [ "$MEMMON_BENCH_RUN" = 1 ]; then i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; else sleep 0.3; fi"#;
    memmon()
        .args(["bench", "-n", "2", "--no-own-cgroup", "--export-json"])
        .arg(&out)
        .arg("--export-csv")
        .arg(&csv)
        .args(["--", "sh", "-c", busy])
        .assert()
        .success()
        .stdout(predicate::str::contains("CPU u/s"));
    let report = json(&out);
    let runs = runs(&report);
    let cpu = |r: &serde_json::Value| {
        r["command_user_s"].as_f64().unwrap() + r["command_system_s"].as_f64().unwrap()
    };
    assert!(cpu(&runs[0]) >= 0.1, "{}", runs[0]);
    assert!(cpu(&runs[0]) <= 2.0 * runs[0]["wall_s"].as_f64().unwrap() + 0.01);
    assert!(cpu(&runs[1]) < 0.05, "sleep spent CPU: {}", runs[1]);
    let (header, rows) = read_csv(&csv);
    let i = header.iter().position(|c| c == "command_user_s").unwrap();
    let user: f64 = rows[0][i].parse().unwrap();
    assert!((user - runs[0]["command_user_s"].as_f64().unwrap()).abs() < 1e-5);
}

#[test]
fn a_forking_daemons_run_cpu_time_includes_the_worker_that_served_it() {
    // The worker touches 400 MiB (~100,000 page faults: tenths of a second of system time) and
    // exits; the daemon's own process does next to nothing. The run's CPU time is the tree's.
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &["--fork"]);
    let (_, report) = bench_daemon(
        &d,
        dir.path(),
        &["-n", "1", "-i", "1s"],
        &["--size", "400MiB"],
    );
    let r = &runs(&report)[0];
    let sys = r["daemon_system_s"].as_f64().unwrap();
    assert!(sys >= 0.02, "the worker's page faults are missing: {r}");
}

#[test]
fn a_bench_killed_with_sigkill_leaves_no_client_process_and_no_scratch_file() {
    let tmp = tempdir();
    let token = format!("bench-sigkill-{}", std::process::id());
    let bench = std::process::Command::new(memmon_path())
        .args(["bench", "-n", "3", "-q", "-i", "100ms", "--"])
        .args(["sh", "-c", "sleep 300 & sleep 300"])
        .env("TMPDIR", tmp.path())
        .env("MEMMON_TEST_TOKEN", &token)
        .spawn()
        .unwrap();
    // Killed if the test fails half-way.
    let mut bench = crate::export::Guard(bench);
    let sleeps = || {
        processes_with_env("MEMMON_TEST_TOKEN", &token)
            .into_iter()
            .filter(|&p| cmdline(p).starts_with("sleep 300"))
            .count()
    };
    assert!(wait_for(30.0, || sleeps() == 2), "run 1 never started");
    // The runs' samples go straight into their summaries (and -o's recording): nothing is
    // written to the temporary directory to be read back.
    let written: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(written.is_empty(), "{written:?}");
    let cg = crate::cgroup::memory_hierarchy().map(|b| {
        crate::cgroup::own_cgroup_dir(&crate::cgroup::own_cgroup_parent(&b), bench.0.id(), 0)
    });
    bench.0.kill().unwrap();
    let _ = bench.0.wait();
    if let Some(cg) = &cg {
        // Run 1's cgroup and the client's two children, killed and removed by its watcher.
        let clean = wait_for(30.0, || {
            !cg.exists() && processes_with_env("MEMMON_TEST_TOKEN", &token).is_empty()
        });
        assert!(
            clean,
            "cgroup {} exists: {}; processes: {:?}",
            cg.display(),
            cg.exists(),
            processes_with_env("MEMMON_TEST_TOKEN", &token)
        );
    }
}

#[test]
fn a_single_run_is_one_run_not_one_runs() {
    let out = memmon()
        .args(["bench", "-n", "1", "-i", "50ms", "--"])
        .args(workload(&["alloc:5MiB", "hold:100ms"]))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("bench: 1 run of:"), "{text}");
    assert!(text.contains("Benchmark: 1 of 1 run of"), "{text}");
    assert!(!text.contains("1 runs"), "{text}");
}

#[test]
fn two_requests_in_flight_double_the_throughput_and_the_windows_exact_peak_holds_both() {
    // A daemon that serves two requests at once, each holding 100 MiB for 1 s: two clients in
    // flight overlap for about a second each (the hold, by construction), one after another
    // never.
    let dir = tempdir();
    let d = Daemon::start(dir.path(), &["--workers", "2"]);
    let client = ["--size", "100MiB", "--hold", "1s"];
    let (_, one) = bench_daemon(&d, dir.path(), &["-n", "4", "-i", "1s"], &client);
    let rec = dir.path().join("window.csv");
    let (table, two) = bench_daemon(
        &d,
        dir.path(),
        &[
            "-n",
            "4",
            "-i",
            "1s",
            "--concurrency",
            "2",
            "--force",
            "-o",
            rec.to_str().unwrap(),
        ],
        &client,
    );
    assert_eq!(two["complete"], true, "{two:#}");
    assert!(runs(&two).is_empty(), "no run's own peak: {two:#}");
    let w = &two["window"];
    assert_eq!(
        (u(&w["concurrency"]), u(&w["runs"]), u(&w["most_in_flight"])),
        (2, 4, 2),
        "{w:#}"
    );
    // The window's peak is the kernel's, reset at its start: the floor and both requests.
    assert_eq!(
        (&w["peak"]["source"], &w["peak"]["exact"]),
        (&"vmhwm".into(), &true.into())
    );
    let (peak, floor) = (u(&w["peak"]["bytes"]), u(&w["floor_bytes"]));
    assert!(
        peak.abs_diff(floor + 200 * MIB) <= tolerance(),
        "peak {peak}, floor {floor} + 200 MiB"
    );
    let per_run = u(&w["peak_over_floor_per_run_in_flight_bytes"]);
    assert!(per_run.abs_diff(100 * MIB) <= tolerance(), "{per_run}");
    // Throughput: runs of about 1 s, two at a time, against one at a time.
    let alone = 3600.0 / one["stats"]["wall_s"]["mean"].as_f64().unwrap();
    let together = w["throughput_per_hour"].as_f64().unwrap();
    // About twice: two at a time cannot beat 2x but by the runs' own spread (a slow run alone
    // on a busy machine), nor fall far below it while each run is its 1 s hold.
    assert!(
        (1.5..=2.5).contains(&(together / alone)),
        "{together} runs/h against {alone} alone"
    );
    let p50 = w["latency_s"]["p50"].as_f64().unwrap();
    assert!(p50 >= 1.0, "{p50}");
    let clients = w["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 4);
    assert!(clients.iter().all(|c| c["exit_code"] == 0));
    for line in [
        "  window        4 runs in ",
        "  throughput    ",
        "  over floor    ",
    ] {
        assert!(table.contains(line), "{line}\n{table}");
    }
    assert!(table.contains("per run in flight"), "{table}");
    // The recording gives the window the bench's peak, and its plot draws the runs in flight.
    let summary = summary_json(&rec);
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{summary:#}");
    assert_eq!(runs[0]["label"], "window");
    assert_eq!(runs[0]["peak"]["bytes"], w["peak"]["bytes"]);
    let svg = dir.path().join("window.svg");
    memmon()
        .arg("plot")
        .arg(&rec)
        .arg("-o")
        .arg(&svg)
        .assert()
        .success();
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("Runs in flight") && svg.contains("window start"));
    // The report carries the steps its chart draws: two in flight at most.
    let html = report_html(&rec, &dir.path().join("window.html"));
    let steps = html
        .split("\"in_flight\":")
        .nth(1)
        .expect("the runs in flight");
    assert!(steps.starts_with("[[") && steps[..steps.find("]]").unwrap()].contains(",2]"));
}

#[test]
fn runs_in_flight_need_a_daemon_and_refuse_what_would_cut_the_window() {
    for (flags, says) in [
        (
            &["--concurrency", "2"][..],
            "--concurrency applies to a bench against a daemon",
        ),
        (
            &["--pid", "1", "--concurrency", "2", "--cooldown", "1s"][..],
            "--cooldown pauses between runs one after another",
        ),
        (
            &["--pid", "1", "--concurrency", "2", "--phase-peaks"][..],
            "--phase-peaks resets the peaks at each marker",
        ),
        (&["--concurrency", "0"][..], "--concurrency"),
    ] {
        memmon()
            .arg("bench")
            .args(flags)
            .args(["--", "true"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(says));
    }
}

/// `memmon bench` of a sweep with a daemon memmon starts per configuration (the test daemon,
/// serving `workers` requests at once), exported as JSON: its exit status, stdout and document.
fn sweep_daemon(
    dir: &Path,
    daemon_flags: &str,
    flags: &[&str],
    client: &[&str],
) -> (std::process::Output, serde_json::Value) {
    let out = dir.join("sweep.json");
    let daemon = format!(
        "exec {} test-daemon --socket {}/d{{size}}.sock {daemon_flags}",
        memmon_test_path().display(),
        dir.display()
    );
    let socket = format!("{}/d{{size}}.sock", dir.display());
    let done = memmon()
        .args(["bench", "--daemon", &daemon, "--ready-socket", &socket])
        .args(flags)
        .arg("--export-json")
        .arg(&out)
        .arg("--")
        .arg(memmon_test_path())
        .args(["test-client", "--socket", &socket])
        .args(client)
        .output()
        .unwrap();
    let doc = std::fs::read_to_string(&out)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(serde_json::Value::Null);
    (done, doc)
}

#[test]
fn a_sweep_with_a_daemon_per_configuration_gives_each_its_exact_peak_and_floor() {
    // Each configuration's daemon started afresh (in a cgroup of its own where memmon may),
    // ready once its socket accepts, two requests of SIZE in flight, stopped after its runs.
    // Each request holds its memory 1 s, so the two overlap however late the second starts on a
    // busy machine (a client's start takes milliseconds).
    let dir = tempdir();
    let (done, doc) = sweep_daemon(
        dir.path(),
        "--workers 2",
        &[
            "--parameter-list",
            "size",
            "20,40,80",
            "--concurrency",
            "2",
            "-n",
            "2",
            "-i",
            "1s",
            "--plot",
            dir.path().join("sweep.svg").to_str().unwrap(),
        ],
        &["--size", "{size}MiB", "--hold", "1s"],
    );
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(doc["format"], "memmon-sweep");
    assert_eq!(doc["complete"], true);
    let configs = doc["configurations"].as_array().unwrap();
    assert_eq!(configs.len(), 3);
    for (c, size) in configs.iter().zip([20, 40, 80]) {
        assert_eq!(c["parameters"]["size"], size.to_string());
        let row = &c["row"];
        assert_eq!(row["peak"]["exact"], true, "{c:#}");
        let (peak, floor) = (u(&row["peak"]["bytes"]), u(&row["floor_bytes"]));
        assert!(
            peak.abs_diff(floor + 2 * size * MIB) <= tolerance(),
            "size {size}: peak {peak}, floor {floor}"
        );
        // The floor is a fresh daemon's: a few MiB, none of the configuration before.
        assert!(floor < 16 * MIB, "{floor}");
        let daemon = &c["daemon"];
        assert!(daemon["ready_s"].as_f64().is_some(), "{daemon}");
        assert_eq!(daemon["stopped_by"], "SIGTERM", "{daemon}");
        assert!(c["failed"].is_null());
    }
    // The smallest peak is on the front whatever the throughputs.
    assert_eq!(configs[0]["on_front"], true);
    assert!(stdout.contains("Sweep of size: 3 configurations, 2 runs each, 2 in flight"));
    assert!(stdout.contains("  size=20 "), "{stdout}");
    // The picture: a point and a label per configuration, the front named.
    let svg = std::fs::read_to_string(dir.path().join("sweep.svg")).unwrap();
    for text in [
        "size=20",
        "size=40",
        "size=80",
        "Throughput (runs per hour)",
    ] {
        assert!(svg.contains(text), "{text}");
    }
    // Nothing of the daemons is left.
    assert!(
        !dir.path().join("d20.sock").exists() || {
            std::os::unix::net::UnixStream::connect(dir.path().join("d20.sock")).is_err()
        }
    );
}

#[test]
fn a_configuration_whose_daemon_dies_before_it_is_ready_fails_and_the_sweep_goes_on() {
    let dir = tempdir();
    let out = dir.path().join("sweep.json");
    let socket = format!("{}/d{{n}}.sock", dir.path().display());
    let daemon = format!(
        "[ {{n}} = 1 ] && exit 3; exec {} test-daemon --socket {socket}",
        memmon_test_path().display()
    );
    let done = memmon()
        .args([
            "bench",
            "-q",
            "--daemon",
            &daemon,
            "--ready-socket",
            &socket,
        ])
        .args([
            "--parameter-scan",
            "n",
            "1",
            "2",
            "-n",
            "1",
            "--export-json",
        ])
        .arg(&out)
        .arg("--")
        .arg(memmon_test_path())
        .args(["test-client", "--socket", &socket, "--size", "4MiB"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("configuration n=1 failed: the daemon exited (exit status: 3) before it was ready (--ready-socket"),
        "{stderr}"
    );
    let doc = json(&out);
    let configs = doc["configurations"].as_array().unwrap();
    assert!(configs[0]["row"].is_null() && configs[0]["failed"].is_string());
    assert_eq!(configs[1]["row"]["peak"]["exact"], true, "{:#}", configs[1]);
}

#[test]
fn a_sweep_refuses_a_shared_recording_and_a_daemon_it_cannot_tell_ready() {
    let dir = tempdir();
    memmon()
        .args(["bench", "--parameter-list", "n", "1,2", "-o"])
        .arg(dir.path().join("one.csv"))
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "configurations would share a recording; name it by the parameters, e.g. -o run-{n}.csv",
        ));
    memmon()
        .args([
            "bench",
            "--parameter-list",
            "n",
            "1,2",
            "-o",
            "-",
            "--",
            "true",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "several configurations would write their recordings one after another on stdout",
        ));
    memmon()
        .args(["bench", "--daemon", "sleep 9", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--daemon needs one of --ready-pidfile, --ready-socket or --ready-log",
        ));
    memmon()
        .args(["bench", "--plot", "x.svg", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--plot draws a sweep's configurations",
        ));
    memmon()
        .args(["bench", "--parameter-list", "n", "1,1", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the value \"1\" comes twice"));
}

#[test]
fn a_command_sweep_substitutes_each_value_into_the_command() {
    // No daemon: each configuration is a command bench of its own, `{kib}` in its arguments.
    let dir = tempdir();
    let csv = dir.path().join("sweep.csv");
    memmon()
        .args(["bench", "-q", "--parameter-list", "mib", "8,24", "-n", "1"])
        .arg("--export-csv")
        .arg(&csv)
        .arg("--")
        .arg(memmon_test_path())
        .args(["workload", "alloc:{mib}MiB", "hold:50ms"])
        .assert()
        .success();
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let head = r.headers().unwrap().clone();
    assert_eq!(&head[0], "mib");
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let peaks: Vec<u64> = rows
        .iter()
        .map(|x| x[col("peak_bytes")].parse().unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    // 16 MiB more in the second, within what the process adds of its own.
    assert!(
        (peaks[1] - peaks[0]).abs_diff(16 * MIB) <= tolerance(),
        "{peaks:?}"
    );
}

#[test]
fn two_sweeps_compare_configuration_by_configuration_and_gate_each_peak() {
    // A command sweep over 8 and 16 MiB, then the same with 4 MiB more in every configuration.
    let dir = tempdir();
    let sweep = |name: &str, extra: &str| {
        let out = dir.path().join(name);
        memmon()
            .args(["bench", "-q", "--parameter-list", "mib", "8,16", "-n", "1"])
            .arg("--export-json")
            .arg(&out)
            .arg("--")
            .arg(memmon_test_path())
            .args(["workload", "alloc:{mib}MiB", extra, "hold:50ms"])
            .assert()
            .success();
        out
    };
    let (base, new) = (
        sweep("base.json", "alloc:0"),
        sweep("new.json", "alloc:4MiB"),
    );
    let loose = memmon()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .args(["--max-peak-increase", "60%"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&loose.stdout);
    assert!(loose.status.success(), "{text}");
    assert!(
        text.contains("  mib=8 ") && text.contains("  mib=16 "),
        "{text}"
    );
    assert!(
        text.contains("gate --max-peak-increase 60%: mib=16 passed"),
        "{text}"
    );
    let strict = memmon()
        .args(["compare", "--json", "--max-peak-increase", "2%"])
        .arg(&base)
        .arg(&new)
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&strict.stdout).unwrap();
    assert_eq!(doc["format"], "memmon-sweep-comparison");
    for c in doc["configurations"].as_array().unwrap() {
        let grew = c["peak_change_bytes"].as_i64().unwrap();
        assert!((grew - 4 * MIB as i64).unsigned_abs() <= tolerance(), "{c}");
    }
    // A gate a sweep cannot take is refused.
    memmon()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .args(["--max-duration-increase", "5%"])
        .assert()
        .code(2);
}

#[test]
fn a_daemon_is_ready_at_the_log_line_its_output_prints_and_that_output_reaches_stderr() {
    let dir = tempdir();
    let socket = dir.path().join("d.sock");
    // "ready" once the server's socket is there, however long a busy machine takes.
    let daemon = format!(
        "echo warming up; {} test-daemon --socket {s} & while [ ! -S {s} ]; do sleep 0.05; done; echo ready to serve; wait",
        memmon_test_path().display(),
        s = socket.display()
    );
    let done = memmon()
        .args([
            "bench",
            "-q",
            "--daemon",
            &daemon,
            "--ready-log",
            "^ready to serve$",
        ])
        .args(["-n", "1", "--"])
        .arg(memmon_test_path())
        .arg("test-client")
        .arg("--socket")
        .arg(&socket)
        .args(["--size", "4MiB"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    assert!(
        stderr.contains("warming up\n") && stderr.contains("ready to serve\n"),
        "{stderr}"
    );
    // One configuration (no parameter): the daemon's tree, shell and server, is the target.
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        stdout.contains("Sweep: 1 configuration, 1 run each"),
        "{stdout}"
    );
}
