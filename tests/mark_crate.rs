//! Phases from a program's own code, against the real recorder: the memmon-mark crate
//! (crates/memmon-mark) from a test daemon's `tracing` spans under `memmon bench`, a burst of
//! markers from a launched program, and the protocol's Python example in docs/FORMAT.md.

use crate::export::Guard;
use crate::util::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// memmon's default socket places for one test ($XDG_RUNTIME_DIR, $TMPDIR), private (0700) and
/// its own, so no other test's recorder is found there.
struct Places {
    runtime: PathBuf,
    tmp: PathBuf,
}

impl Places {
    fn new(dir: &Path) -> Places {
        let (runtime, tmp) = (dir.join("run"), dir.join("tmp"));
        for d in [&runtime, &tmp] {
            std::fs::create_dir(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        Places { runtime, tmp }
    }

    fn apply<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("XDG_RUNTIME_DIR", &self.runtime)
            .env("TMPDIR", &self.tmp)
            .env_remove("MEMMON_SOCKET")
    }
}

/// The non-empty cells of the event column, in order.
fn events(path: &Path) -> Vec<String> {
    let (h, rows) = read_csv(path);
    let i = h.iter().position(|c| c == "event").unwrap();
    rows.into_iter()
        .map(|r| r[i].clone())
        .filter(|e| !e.is_empty())
        .collect()
}

fn by_label<'a>(summary: &'a serde_json::Value, label: &str) -> &'a serde_json::Value {
    summary["by_label"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["label"] == label)
        .unwrap_or_else(|| panic!("no phases labelled {label}: {summary:#}"))
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn a_rust_daemon_marks_its_phases_through_tracing_and_bench_gives_each_phase_its_peak() {
    let dir = tempdir();
    let places = Places::new(dir.path());
    let (socket, pidfile) = (dir.path().join("d.sock"), dir.path().join("d.pid"));
    // Each request: `proof` { `synthesis`: 80 MiB held 300 ms; `gpu`: 40 MiB held 300 ms },
    // every boundary waiting for its row (exact phases).
    let daemon = Guard(
        places
            .apply(&mut Command::new(memmon_test_path()))
            .args(["test-daemon", "--phases", "--phases-wait", "--socket"])
            .arg(&socket)
            .arg("--pidfile")
            .arg(&pidfile)
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_for(30.0, || pidfile.exists()),
        "the daemon did not start"
    );
    let rec = dir.path().join("bench.csv");
    let out = places
        .apply(&mut Command::new(memmon_path()))
        .args([
            "bench",
            "-q",
            "-n",
            "3",
            "-i",
            "1s",
            "--phase-peaks",
            "--pidfile",
        ])
        .arg(&pidfile)
        .arg("-o")
        .arg(&rec)
        .arg("--")
        .arg(memmon_test_path())
        .args(["test-client", "--socket"])
        .arg(&socket)
        .args(["--size", "80MiB", "--hold", "300ms"])
        .output()
        .unwrap();
    drop(daemon);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The spans' markers, inside each run, in the order the code ran them.
    let ev = events(&rec);
    let mut expected = vec!["start".to_string()];
    for run in 1..=3 {
        expected.push(format!("run-start:{run}"));
        for m in ["proof", "synthesis", "proof", "gpu", "proof", "idle"] {
            expected.push(format!("mark:{m}"));
        }
        expected.push(format!("run-end:{run}"));
    }
    assert_eq!(ev, expected);

    // Each phase's own exact peak: the daemon's floor and what the phase held.
    let s = summary_json(&rec);
    let idle = by_label(&s, "idle");
    let floor = f(&idle["peak_bytes"]["max"]);
    assert!(floor < (30 * MIB) as f64, "{idle:#}");
    for (label, held) in [("synthesis", 80 * MIB), ("gpu", 40 * MIB)] {
        let p = by_label(&s, label);
        assert_eq!(p["count"], 3, "{p:#}");
        assert_eq!(p["exact"], 3, "every {label} peak is the kernel's: {p:#}");
        let (min, max) = (f(&p["peak_bytes"]["min"]), f(&p["peak_bytes"]["max"]));
        assert!(
            min >= held as f64 && max <= floor + (held + 2 * MIB) as f64,
            "{label}: peaks [{min}, {max}] are not {held} B over the floor {floor}: {p:#}"
        );
        // The phase lasts its 300 ms hold, not the request.
        let d = f(&p["duration_s"]["mean"]);
        assert!((0.29..5.0).contains(&d), "{p:#}");
    }
}

#[test]
fn markers_from_a_launched_programs_code_reach_its_own_recorder_in_order_none_lost() {
    let dir = tempdir();
    let places = Places::new(dir.path());
    // Another recorder in the same places: the program's markers must go to the one that
    // launched it, not to this one.
    let idle = Guard(spawn_workload(&["hold:60s"]));
    let other_out = dir.path().join("other.csv");
    let other = Guard(
        places
            .apply(&mut Command::new(memmon_path()))
            .args([
                "record",
                "-q",
                "-i",
                "1s",
                "--pid",
                &idle.0.id().to_string(),
                "-o",
            ])
            .arg(&other_out)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_for(30.0, || std::fs::read_dir(&places.runtime).unwrap().any(
            |e| e.unwrap().file_name().to_string_lossy().ends_with(".sock")
        )),
        "the other recorder made no socket"
    );

    let out = dir.path().join("burst.csv");
    let run = places
        .apply(&mut Command::new(memmon_path()))
        .args(["record", "-q", "-i", "1s", "-o"])
        .arg(&out)
        .arg("--")
        .arg(memmon_test_path())
        .args(["mark-burst", "--count", "500"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(said.trim(), "queued 500 sent 501 lost 0 end taken");

    let (h, rows) = read_csv(&out);
    let (ev, lag) = (
        h.iter().position(|c| c == "event").unwrap(),
        h.iter().position(|c| c == "event_lag_us").unwrap(),
    );
    let marks: Vec<&Vec<String>> = rows.iter().filter(|r| r[ev].starts_with("mark:")).collect();
    let labels: Vec<&str> = marks.iter().map(|r| r[ev].as_str()).collect();
    let mut expected: Vec<String> = (0..500).map(|i| format!("mark:b{i}")).collect();
    expected.push("mark:end".into());
    assert_eq!(labels, expected);
    // The queued markers say how late their rows came; the one that waited for its row, none.
    assert!(marks[..500].iter().all(|r| r[lag].parse::<u64>().is_ok()));
    assert_eq!(marks[500][lag], "");
    drop(other);
    assert!(!events(&other_out).iter().any(|e| e.starts_with("mark:")));
}

/// The five-line Python example of docs/FORMAT.md ("Markers from other languages").
fn python_example() -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/FORMAT.md"))
        .unwrap();
    let section = &doc[doc
        .find("### Markers from other languages")
        .expect("FORMAT.md has the section")..];
    let start = section.find("```python\n").expect("a Python example") + 10;
    let code = &section[start..start + section[start..].find("```").unwrap()];
    assert_eq!(
        code.lines().count(),
        5,
        "the example is five lines:\n{code}"
    );
    code.to_string()
}

#[test]
fn the_python_example_in_format_md_puts_its_marker_in_the_recording() {
    let dir = tempdir();
    let target = Guard(spawn_workload(&["alloc:10MiB", "hold:60s"]));
    let socket = dir.path().join("rec.sock");
    let out = dir.path().join("rec.csv");
    let mut rec = Guard(
        Command::new(memmon_path())
            .args([
                "record",
                "-q",
                "-i",
                "1s",
                "--pid",
                &target.0.id().to_string(),
            ])
            .arg("--socket")
            .arg(&socket)
            .arg("-o")
            .arg(&out)
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_for(30.0, || socket.exists() && out.exists()),
        "the recorder did not start"
    );
    let py = Command::new(outside_program("python3"))
        .arg("-c")
        .arg(python_example())
        .env("MEMMON_SOCKET", &socket)
        .output()
        .unwrap();
    let reply = String::from_utf8_lossy(&py.stdout);
    assert!(
        py.status.success(),
        "{reply}{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let reply: serde_json::Value = serde_json::from_str(reply.trim()).unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["label"], "synthesis", "{reply}");
    // SAFETY: signalling the recorder this test started.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGTERM) };
    rec.0.wait().unwrap();
    let ev = events(&out);
    assert_eq!(
        ev.iter()
            .filter(|e| e.starts_with("mark:"))
            .collect::<Vec<_>>(),
        ["mark:synthesis"]
    );
    // The reply's time is the marker row's.
    let (h, rows) = read_csv(&out);
    let (e, t) = (
        h.iter().position(|c| c == "event").unwrap(),
        h.iter().position(|c| c == "elapsed_s").unwrap(),
    );
    let row = rows.iter().find(|r| r[e] == "mark:synthesis").unwrap();
    let elapsed: f64 = row[t].parse().unwrap();
    assert!((elapsed - reply["elapsed_s"].as_f64().unwrap()).abs() < 1e-5);
}

#[test]
fn a_queued_marker_is_answered_at_once_and_a_time_not_yet_come_counts_from_its_arrival() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempdir();
    let target = Guard(spawn_workload(&["hold:60s"]));
    let socket = dir.path().join("rec.sock");
    let out = dir.path().join("rec.csv");
    let mut rec = Guard(
        Command::new(memmon_path())
            .args([
                "record",
                "-q",
                "-i",
                "1s",
                "--pid",
                &target.0.id().to_string(),
            ])
            .arg("--socket")
            .arg(&socket)
            .arg("-o")
            .arg(&out)
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_for(30.0, || socket.exists() && out.exists()),
        "the recorder did not start"
    );
    let ask = |request: &str| -> String {
        let s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        (&s).write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        BufReader::new(&s).read_line(&mut reply).unwrap();
        reply
    };
    // The largest time there is: out of any clock's range.
    assert_eq!(
        ask("{\"mark\":\"future\",\"at_unix_us\":18446744073709551615}\n"),
        "{\"ok\":true,\"label\":\"future\",\"queued\":true}\n"
    );
    assert!(ask("{\"mark\":\" \",\"at_unix_us\":1}\n").contains("\"error\":\"the label is empty\""));
    // SAFETY: signalling the recorder this test started.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGTERM) };
    rec.0.wait().unwrap();
    let (h, rows) = read_csv(&out);
    let (e, lag) = (
        h.iter().position(|c| c == "event").unwrap(),
        h.iter().position(|c| c == "event_lag_us").unwrap(),
    );
    let marks: Vec<&Vec<String>> = rows.iter().filter(|r| r[e].starts_with("mark:")).collect();
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert_eq!(marks[0][e], "mark:future");
    let lag: u64 = marks[0][lag].parse().unwrap();
    assert!(
        lag < 10_000_000,
        "lag {lag} µs: not counted from the arrival"
    );
}

#[test]
fn a_launched_command_is_told_its_recorders_socket_and_the_python_example_needs_no_flag() {
    // `record -- python3 -c EXAMPLE`, nothing set by hand: the command finds its recorder in
    // MEMMON_SOCKET, whatever other recorders listen.
    let dir = tempdir();
    let out = dir.path().join("py.csv");
    let o = memmon()
        .args(["record", "-q", "-i", "100ms", "-o"])
        .arg(&out)
        .arg("--")
        .arg(outside_program("python3"))
        .arg("-c")
        .arg(python_example())
        .env("XDG_RUNTIME_DIR", dir.path())
        .env_remove("MEMMON_SOCKET")
        .output()
        .unwrap();
    let reply = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{reply}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let reply: serde_json::Value = serde_json::from_str(reply.trim()).unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(
        events(&out).iter().any(|e| e == "mark:synthesis"),
        "{:?}",
        events(&out)
    );
}
