//! Tests of markers and phases against real processes: `memmon mark` over the recorder's
//! socket, `--mark-log` across rotation and truncation, `--mark-stdout`, `--phase-peaks`.

use crate::export::Guard;
use crate::util::*;
use predicates::prelude::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Output, Stdio};
use std::time::Duration;

const PHASE_RE: &str = r"phase (?P<label>\w+)";

/// A recorder attached to an idle workload, with its own private socket directories (so
/// recorders of other tests are never found), stopped and reaped on `stop` or drop.
struct Recording {
    target: Child,
    rec: Option<Child>,
    rec_pid: u32,
    /// $XDG_RUNTIME_DIR and $TMPDIR of the recorder.
    runtime: PathBuf,
    tmp: PathBuf,
    out: PathBuf,
}

impl Recording {
    fn start(dir: &Path, name: &str, extra: &[&str]) -> Recording {
        let runtime = dir.join(format!("{name}-run"));
        let tmp = dir.join(format!("{name}-tmp"));
        for d in [&runtime, &tmp] {
            std::fs::create_dir(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let argv = workload(&["alloc:10MiB", "hold:30s"]);
        let target = StdCommand::new(&argv[0]).args(&argv[1..]).spawn().unwrap();
        let out = dir.join(format!("{name}.csv"));
        let rec = StdCommand::new(memmon_path())
            .args([
                "record",
                "--pid",
                &target.id().to_string(),
                "-i",
                "100ms",
                "-o",
                out.to_str().unwrap(),
            ])
            .args(extra)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("TMPDIR", &tmp)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let r = Recording {
            target,
            rec_pid: rec.id(),
            rec: Some(rec),
            runtime,
            tmp,
            out,
        };
        // The output file appears once the socket is bound and the log is opened.
        assert!(
            wait_for(30.0, || r.out.exists()),
            "the recorder did not start"
        );
        r
    }

    /// The socket the recorder made in its default place.
    fn default_socket(&self) -> PathBuf {
        self.runtime.join(format!("memmon-{}.sock", self.rec_pid))
    }

    /// `memmon mark` run with the same socket directories as the recorder.
    fn mark(&self, args: &[&str]) -> assert_cmd::Command {
        let mut cmd = memmon();
        cmd.arg("mark")
            .args(args)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("TMPDIR", &self.tmp);
        cmd
    }

    /// Ends the recording with SIGTERM; returns the recorder's output.
    fn stop(&mut self) -> Output {
        let rec = self.rec.take().unwrap();
        // SAFETY: kill takes plain integers and touches no memory.
        unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
        rec.wait_with_output().unwrap()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if let Some(mut rec) = self.rec.take() {
            let _ = rec.kill();
            let _ = rec.wait();
        }
        let _ = self.target.kill();
        let _ = self.target.wait();
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

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

/// Waits until the recording holds `n` markers (rows are flushed at least every second): the
/// follower has read the log up to them, however busy the machine.
fn wait_for_marks(out: &Path, n: usize) {
    let marks = || {
        std::fs::read_to_string(out)
            .map_or(0, |t| t.lines().filter(|l| l.contains(",mark:")).count())
    };
    assert!(
        wait_for(30.0, || marks() >= n),
        "{} of {n} markers came",
        marks()
    );
}

#[test]
fn a_followed_log_gives_markers_in_order_across_rotation_and_truncation() {
    let dir = tempdir();
    let log = dir.path().join("daemon.log");
    append(
        &log,
        "phase old: written before the recording, not a marker\n",
    );
    let mut r = Recording::start(
        dir.path(),
        "log",
        &[
            "--mark-log",
            log.to_str().unwrap(),
            "--mark-regex",
            PHASE_RE,
        ],
    );
    append(&log, "INFO nothing to see\nINFO phase one started\n");
    wait_for_marks(&r.out, 1);
    // Rotation: the log is renamed and a new one created.
    std::fs::rename(&log, dir.path().join("daemon.log.1")).unwrap();
    append(&log, "INFO phase two started\n");
    wait_for_marks(&r.out, 2);
    append(&log, "INFO phase three started, a longer line\n");
    wait_for_marks(&r.out, 3);
    // Truncation in place (copytruncate).
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&log)
        .unwrap();
    append(&log, "phase four\n");
    wait_for_marks(&r.out, 4);
    let out = r.stop();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("following"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        events(&r.out),
        ["start", "mark:one", "mark:two", "mark:three", "mark:four"]
    );
}

#[test]
fn memmon_mark_adds_a_marker_through_a_socket_only_its_owner_can_use() {
    let dir = tempdir();
    let sock = dir.path().join("rec.sock");
    let mut r = Recording::start(dir.path(), "sock", &["--socket", sock.to_str().unwrap()]);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    r.mark(&["synthesis start", "--socket", sock.to_str().unwrap()])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "marker 'synthesis start' taken at +",
        ));
    let out = r.stop();
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains(&format!("memmon mark LABEL --socket {}", sock.display())));
    assert!(!sock.exists(), "the socket outlived the recording");
    assert_eq!(events(&r.out), ["start", "mark:synthesis start"]);
}

#[test]
fn memmon_mark_finds_the_one_running_recorder_by_itself() {
    let dir = tempdir();
    let mut r = Recording::start(dir.path(), "one", &[]);
    assert!(r.default_socket().exists());
    r.mark(&["gpu prove done"]).assert().success();
    r.stop();
    assert!(!r.default_socket().exists());
    assert_eq!(events(&r.out), ["start", "mark:gpu prove done"]);
}

#[test]
fn two_memmon_marks_in_quick_succession_both_appear_in_the_file() {
    let dir = tempdir();
    let mut r = Recording::start(dir.path(), "two", &[]);
    // Both sent at once: the second arrives while the first waits for its sample.
    let send = |label: &str| {
        StdCommand::new(memmon_path())
            .args(["mark", label])
            .env("XDG_RUNTIME_DIR", &r.runtime)
            .env("TMPDIR", &r.tmp)
            .output()
            .unwrap()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| send("first"));
        let b = s.spawn(|| send("second"));
        (a.join().unwrap(), b.join().unwrap())
    });
    for out in [&a, &b] {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    r.stop();
    let mut marks = events(&r.out);
    assert_eq!(marks.remove(0), "start");
    marks.sort();
    assert_eq!(marks, ["mark:first", "mark:second"]);
}

#[test]
fn memmon_mark_with_several_recorders_asks_which_one() {
    let dir = tempdir();
    let a = Recording::start(dir.path(), "a", &[]);
    // The second recorder shares the first one's socket directories.
    let argv = workload(&["hold:30s"]);
    let mut target = StdCommand::new(&argv[0]).args(&argv[1..]).spawn().unwrap();
    let b_out = dir.path().join("b.csv");
    let mut b = StdCommand::new(memmon_path())
        .args([
            "record",
            "-q",
            "--pid",
            &target.id().to_string(),
            "-o",
            b_out.to_str().unwrap(),
        ])
        .env("XDG_RUNTIME_DIR", &a.runtime)
        .env("TMPDIR", &a.tmp)
        .spawn()
        .unwrap();
    let b_sock = a.runtime.join(format!("memmon-{}.sock", b.id()));
    assert!(wait_for(10.0, || b_sock.exists()));
    a.mark(&["x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("several recorders are running"))
        .stderr(predicate::str::contains(
            a.default_socket().to_str().unwrap(),
        ))
        .stderr(predicate::str::contains(b_sock.to_str().unwrap()))
        .stderr(predicate::str::contains("--socket"));
    let _ = b.kill();
    let _ = b.wait();
    let _ = target.kill();
    let _ = target.wait();
}

#[test]
fn memmon_mark_without_a_recorder_exits_3() {
    let dir = tempdir();
    memmon()
        .args(["mark", "x"])
        .env("XDG_RUNTIME_DIR", dir.path())
        .env("TMPDIR", dir.path())
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no running recorder found"));
    memmon()
        .args([
            "mark",
            "x",
            "--socket",
            dir.path().join("none.sock").to_str().unwrap(),
        ])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no recorder is listening on"));
    // A path no socket can have (longer than sun_path) is bad input, as `record` says of it.
    let long = dir.path().join("x".repeat(120));
    memmon()
        .args(["mark", "x", "--socket", long.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be a socket's path"));
}

#[test]
fn stdout_markers_leave_the_commands_output_unchanged() {
    let dir = tempdir();
    let out = dir.path().join("stdout.csv");
    let script = "printf 'hello\\nphase one\\n'; sleep 0.3; printf 'phase two\\n'; sleep 0.3; printf 'no newline'";
    let o = memmon()
        .args([
            "record",
            "-q",
            "-i",
            "50ms",
            "-o",
            out.to_str().unwrap(),
            "--mark-stdout",
            PHASE_RE,
        ])
        .args(["--", "sh", "-c", script])
        .env("XDG_RUNTIME_DIR", dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hello\nphase one\nphase two\nno newline"
    );
    assert_eq!(events(&out), ["start", "mark:one", "mark:two"]);
}

#[test]
fn a_marker_printed_as_the_command_exits_is_on_a_row_or_named_as_not_taken() {
    // The recorder often sees the exit before the relay has read the last line: the marker is
    // then named as not taken, never dropped without a word. Five commands whose last act is
    // to print a marker, one of them before the recorder's first row.
    let dir = tempdir();
    for (i, script) in [
        "printf 'phase last\\n'",
        "sleep 0.2; printf 'phase last\\n'",
        "sleep 0.2; printf 'phase last\\n'",
        "sleep 0.3; printf 'phase last\\n'",
        "sleep 0.3; printf 'phase last\\n'",
    ]
    .into_iter()
    .enumerate()
    {
        let out = dir.path().join(format!("last{i}.csv"));
        let o = memmon()
            .args(["record", "-i", "100ms", "-o", out.to_str().unwrap()])
            .args(["--mark-stdout", PHASE_RE, "--", "sh", "-c", script])
            .env("XDG_RUNTIME_DIR", dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{stderr}");
        let on_row = events(&out).iter().any(|e| e == "mark:last");
        let named = stderr.contains("1 marker not taken") && stderr.contains("'mark:last'");
        assert!(
            on_row != named,
            "{script}: on a row {on_row}, named {named}\n{stderr}"
        );
    }
}

#[test]
fn a_marker_source_whose_thread_cannot_start_is_named_never_silently_gone() {
    // In a container at its `pids.max`, memmon may not get the threads its marker sources run
    // on. The relay's thread carries the command's stdout: without it that output and its
    // markers are gone, and the user must be told. memmon runs here in a pids cgroup limited
    // to n tasks, for n from too few for anything to enough for everything.
    let Some(base) = crate::cgroup::controller_hierarchy("pids") else {
        return;
    };
    let cg = crate::cgroup::TestCgroup::new(&base, "threads");
    let dir = tempdir();
    let mut relay_refused = 0;
    for n in (3..=10).chain([64]) {
        std::fs::write(cg.0.join("pids.max"), n.to_string()).unwrap();
        let out = dir.path().join(format!("n{n}.csv"));
        // The shell moves itself into the cgroup, then becomes memmon.
        let o = StdCommand::new("sh")
            .args([
                "-c",
                r#"echo $$ > "$1/cgroup.procs" && shift && exec "$@""#,
                "sh",
            ])
            .arg(&cg.0)
            .arg(memmon_path())
            .args(["record", "-i", "100ms", "-o", out.to_str().unwrap()])
            .args(["--mark-stdout", PHASE_RE, "--", "sh", "-c"])
            .arg("echo phase one; read x < /dev/null; echo phase two")
            .env("XDG_RUNTIME_DIR", dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        let refused = stderr.contains("--mark-stdout: cannot start the thread that relays");
        relay_refused += usize::from(refused);
        if !stdout.contains("phase one") || !stdout.contains("phase two") {
            assert!(
                refused || stderr.contains("memmon: error"),
                "pids.max {n}: the command's output was lost without a word\nstdout: {stdout}\nstderr: {stderr}"
            );
        }
        if n == 64 {
            assert!(o.status.success(), "{stderr}");
            assert_eq!(stdout, "phase one\nphase two\n", "{stderr}");
            assert!(!stderr.contains("cannot start"), "{stderr}");
        }
    }
    assert!(
        relay_refused > 0,
        "no limit from 3 to 10 tasks left the relay without its thread: the test did not test it"
    );
}

#[test]
fn a_directory_given_as_the_marker_log_is_refused() {
    // It was followed ("following DIR for markers") and never gave a line.
    let dir = tempdir();
    memmon()
        .args(["record", "-o", "/dev/null", "--mark-log"])
        .arg(dir.path())
        .args(["--mark-regex", PHASE_RE, "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "--mark-log {}: it is a directory, not a log file",
            dir.path().display()
        )));
}

#[test]
fn mark_stdout_needs_a_launched_command() {
    memmon()
        .args(["record", "--pid", "1", "--mark-stdout", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--mark-stdout applies to a launched command",
        ));
}

#[test]
fn phase_peaks_give_a_spike_between_1s_ticks_its_exact_peak_in_its_phase() {
    let dir = tempdir();
    let out = dir.path().join("phases.csv");
    let steps = [
        "alloc:50MiB",
        "say:phase spike",
        "hold:400ms",
        "spike:150MiB:20ms",
        "hold:400ms",
        "say:phase after",
        "hold:400ms",
    ];
    memmon()
        .args([
            "record",
            "-q",
            "--no-own-cgroup",
            "-i",
            "1s",
            "--phase-peaks",
            "--mark-stdout",
            PHASE_RE,
            "-o",
            out.to_str().unwrap(),
        ])
        .arg("--")
        .args(workload(&steps))
        .env("XDG_RUNTIME_DIR", dir.path())
        .assert()
        .success();
    let s = summary_json(&out);
    let phases = s["phases"].as_array().unwrap();
    let labels: Vec<&str> = phases
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["spike", "after"]);
    let (spike, after) = (&phases[0], &phases[1]);
    let base = spike["start_rss_bytes"].as_u64().unwrap();
    let peak = spike["peak"]["bytes"].as_u64().unwrap();
    assert!(base >= 50 * MIB, "base {base}");
    assert!(
        peak.abs_diff(base + 150 * MIB) <= MIB,
        "peak {peak} is not base {base} + 150 MiB"
    );
    assert_eq!(spike["kernel_peak_rss_bytes"].as_u64(), Some(peak));
    assert!(spike["duration_s"].as_f64().unwrap() > 0.5);
    // The reset at the second marker: the spike is not carried into the phase after it.
    assert!(
        after["peak"]["bytes"].as_u64().unwrap() < base + 10 * MIB,
        "{after}"
    );
}

#[test]
fn phase_peaks_on_a_target_whose_mark_predates_the_recording_give_a_lower_bound_headline() {
    // A process that reached 300 MiB before the recording; with --phase-peaks its marks are
    // reset at the marker, and its 200 MiB after it is the phase's exact peak. What came
    // before the marker is not known (the mark of 300 MiB may be older than the recording):
    // the recording's peak is at least the phase's, never the smaller sampled line.
    let dir = tempdir();
    let (out, sock, go) = (
        dir.path().join("p.csv"),
        dir.path().join("rec.sock"),
        dir.path().join("go"),
    );
    let argv = workload(&[
        "spike:300MiB:50ms",
        &format!("wait-file:{}", go.display()),
        "mark:work",
        "spike:200MiB:300ms",
        "hold:300ms",
    ]);
    let mut target = StdCommand::new(&argv[0])
        .args(&argv[1..])
        .env("MEMMON_SOCKET", &sock)
        .spawn()
        .unwrap();
    let status = |key: &str| {
        std::fs::read_to_string(format!("/proc/{}/status", target.id()))
            .ok()
            .and_then(|s| {
                let v = s.lines().find_map(|l| l.strip_prefix(key))?;
                v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()
            })
            .map(|kb| kb * 1024)
    };
    assert!(
        wait_for(30.0, || status("VmHWM:").unwrap_or(0) >= 300 * MIB),
        "the spike never came"
    );
    // And gone before the recording starts (on a busy machine the 50 ms spike lasts longer:
    // a first row that saw it would see the mark set during the recording).
    assert!(
        wait_for(30.0, || status("VmRSS:").is_some_and(|r| r < 100 * MIB)),
        "the spike never ended"
    );
    let rec = spawn_memmon(&[
        "record",
        "-q",
        "--no-own-cgroup",
        "--phase-peaks",
        "-i",
        "50ms",
        "--pid",
        &target.id().to_string(),
        "--socket",
        sock.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    // The go-ahead once the recorder listens: the marker comes after the recording began.
    assert!(
        wait_for(30.0, || sock.exists()),
        "the recorder did not start"
    );
    std::fs::write(&go, "").unwrap();
    assert!(target.wait().unwrap().success());
    let done = rec.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );

    let s = summary_json(&out);
    let work = &s["phases"][0];
    assert_eq!(work["label"], "work", "{s}");
    let phase = work["peak"]["bytes"].as_u64().unwrap();
    assert_eq!(work["peak"]["exact"], true, "{work}");
    assert!((200 * MIB..300 * MIB).contains(&phase), "{work}");
    let peak = &s["peak"];
    assert_eq!(peak["exact"], false, "{s}");
    assert_eq!(peak["scope"], "largest-process-seen", "{s}");
    assert_eq!(s["reset_peak_unknown"], true, "{s}");
    assert!(peak["bytes"].as_u64().unwrap() >= phase, "{s}");
    // A budget under the phase's peak fails on the recording's lower bound.
    memmon()
        .args(["summary", "--max-peak", "150MiB"])
        .arg(&out)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("≥"));
}

/// `record -q -i INTERVAL --phase-peaks --mark-stdout PHASE_RE -o OUT -- sh -c SCRIPT
/// memmon-test`, which must succeed: the script's "phase X" lines are the markers.
fn record_script_phases(dir: &Path, out: &Path, interval: &str, script: &str) {
    memmon()
        .args([
            "record",
            "-q",
            // VmHWM per phase: no cgroup of memmon's own, root or not.
            "--no-own-cgroup",
            "-i",
            interval,
            "--phase-peaks",
            "--mark-stdout",
            PHASE_RE,
            "-o",
        ])
        .arg(out)
        .args(["--", "sh", "-c", script])
        .arg(memmon_test_path())
        .env("XDG_RUNTIME_DIR", dir)
        .assert()
        .success();
}

#[test]
fn after_a_phase_reset_an_idle_child_does_not_carry_the_last_phases_peak() {
    // The launched shell stays small; its child spikes to 300 MiB in phase `load`, then idles
    // in phase `idle` with a statm that does not move: only a status read after the reset at
    // the `idle` marker shows its reset VmHWM.
    let dir = tempdir();
    let out = dir.path().join("child-phases.csv");
    let script = r#""$0" workload "say:phase load" spike:300MiB:500ms hold:200ms "say:phase idle" hold:1500ms; exit 0"#;
    record_script_phases(dir.path(), &out, "50ms", script);
    let (h, rows) = read_csv(&out);
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let (event, hwm, procs) = (col("event"), col("hwm_bytes"), col("processes"));
    let at = |label: &str| {
        rows.iter()
            .position(|r| r[event] == label)
            .unwrap_or_else(|| panic!("no {label} row"))
    };
    let (load, idle) = (at("mark:load"), at("mark:idle"));
    let num = |r: &Vec<String>, i: usize| r[i].parse::<u64>().unwrap();
    let load_peak = rows[load..=idle].iter().map(|r| num(r, hwm)).max().unwrap();
    assert!(load_peak >= 300 * MIB, "phase load's peak {load_peak}");
    // Every row after the reset, while the child idles at a few MiB.
    let after: Vec<&Vec<String>> = rows[idle + 1..]
        .iter()
        .filter(|r| num(r, procs) == 2)
        .collect();
    assert!(after.len() >= 5, "{} rows of the idle child", after.len());
    for r in after {
        assert!(
            num(r, hwm) < 100 * MIB,
            "a row of phase idle carries VmHWM {} read before the reset: {r:?}",
            num(r, hwm)
        );
    }
}

#[test]
fn each_phase_holds_the_peak_of_a_short_lived_child_that_samples_never_saw() {
    // At 1 s ticks, the shell's children live a fraction of a tick: their peaks reach the phases
    // only through their exit records. Phase `a`'s child leaves before the marker that closes
    // the phase (its record is in that marker's row); phase `b`'s leaves with the shell, after
    // the last row (its record goes to the phase still open at the end).
    let dir = tempdir();
    let out = dir.path().join("forks.csv");
    // (A pause after each marker line: its sample, and the reset, come first.)
    let script = r#"echo "phase a"; sleep 0.2; "$0" workload spike:200MiB:30ms; sleep 0.3; echo "phase b"; sleep 0.2; exec "$0" workload spike:100MiB:30ms"#;
    record_script_phases(dir.path(), &out, "1s", script);
    let s = summary_json(&out);
    let phases = s["phases"].as_array().unwrap();
    let kernel = |i: usize| phases[i]["kernel_peak_rss_bytes"].as_u64().unwrap();
    assert!(
        (200 * MIB..230 * MIB).contains(&kernel(0)),
        "phase a: {}",
        phases[0]
    );
    assert_eq!(phases[0]["peak"]["scope"], "largest-process");
    assert!(
        (100 * MIB..130 * MIB).contains(&kernel(1)),
        "phase b, not a's peak: {}",
        phases[1]
    );
    assert!(!warns(&s, "exit record"), "{}", s["warnings"]);
}

#[test]
fn with_pss_a_log_marker_is_read_on_time_and_no_phase_is_exact_with_the_next_ones_memory() {
    // PSS is read every 20 ms, on its own thread: the marker of phase `next`, written 30 ms
    // before its 60 MiB, must close phase `idle` on time. A boundary read late (over 5 ms after
    // the log line was written) is allowed, but then `idle` is not called exact.
    let dir = tempdir();
    let out = dir.path().join("log-phases.csv");
    let log = dir.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    let script = format!(
        r#"echo "phase load" >> {log}; sleep 0.2; "$0" workload alloc:100MiB hold:300ms; echo "phase idle" >> {log}; sleep 0.4; echo "phase next" >> {log}; sleep 0.03; exec "$0" workload alloc:60MiB hold:300ms"#,
        log = log.display()
    );
    memmon()
        .args([
            "record",
            "-q",
            "--no-own-cgroup",
            "-i",
            "1s",
            "--phase-peaks",
        ])
        .args(["--pss", "--pss-every", "20ms", "--mark-log"])
        .arg(&log)
        .args(["--mark-regex", PHASE_RE])
        .args(["-o", out.to_str().unwrap(), "--", "sh", "-c", &script])
        .arg(memmon_test_path())
        .env("XDG_RUNTIME_DIR", dir.path())
        .assert()
        .success();
    let s = summary_json(&out);
    let phases = s["phases"].as_array().unwrap();
    let labels: Vec<&str> = phases
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["load", "idle", "next"], "{s}");
    // Every marker's row says how late it was read.
    let (head, rows) = read_csv(&out);
    let lag = head.iter().position(|h| h == "event_lag_us").unwrap();
    let event = head.iter().position(|h| h == "event").unwrap();
    let marks: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r[event].starts_with("mark:"))
        .collect();
    assert_eq!(marks.len(), 3);
    assert!(
        marks.iter().all(|r| r[lag].parse::<u64>().is_ok()),
        "{marks:?}"
    );
    let idle = &phases[1];
    let peak = idle["peak"]["bytes"].as_u64().unwrap();
    assert!(
        idle["peak"]["exact"] == false || peak < 20 * MIB,
        "phase idle is called exact with the next phase's memory: {idle}"
    );
    assert!(
        phases[0]["peak"]["bytes"].as_u64().unwrap() >= 100 * MIB,
        "{}",
        phases[0]
    );
}

#[test]
fn a_client_dripping_its_request_delays_no_other_marker_and_is_closed_at_its_deadline() {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    let dir = tempdir();
    let sock = dir.path().join("drip.sock");
    let mut r = Recording::start(dir.path(), "drip", &["--socket", sock.to_str().unwrap()]);
    // A client that sends its request a byte every 300 ms: a per-read timeout never ends it.
    let drip_sock = sock.clone();
    let dripper = std::thread::spawn(move || {
        let mut s = UnixStream::connect(&drip_sock).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let req = br#"{"mark":"dripped aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#;
        for b in req {
            if s.write_all(&[*b]).is_err() {
                return true;
            }
            let mut buf = [0u8; 64];
            if matches!(s.read(&mut buf), Ok(0)) {
                return true; // closed by the recorder, at its deadline
            }
        }
        false
    });
    std::thread::sleep(Duration::from_millis(500));
    // Meanwhile a marker is taken and answered (it waited 15 s behind the dripper, then failed).
    r.mark(&["while dripping", "--socket", sock.to_str().unwrap()])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "marker 'while dripping' taken at +",
        ));
    // The dripper's 120 bytes would take 36 s: it is closed long before they are sent.
    assert!(
        dripper.join().unwrap(),
        "the dripping client was never closed"
    );
    r.stop();
    assert_eq!(events(&r.out), ["start", "mark:while dripping"]);
}

#[test]
fn a_marker_the_recorder_cannot_take_in_time_fails_and_never_lands_later() {
    use std::io::BufRead;
    let dir = tempdir();
    let pidfile = dir.path().join("d.pid");
    let out = dir.path().join("away.csv");
    let sock = dir.path().join("away.sock");
    let mut first = Guard(spawn_workload(&["hold:60s"]));
    std::fs::write(&pidfile, format!("{}\n", first.0.id())).unwrap();
    let mut rec = spawn_memmon(&[
        "record",
        "-i",
        "100ms",
        "--pidfile",
        pidfile.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--socket",
        sock.to_str().unwrap(),
    ]);
    // The recorder's notes, line by line.
    let (tx, notes) = std::sync::mpsc::channel();
    let stderr = rec.stderr.take().unwrap();
    // Killed if the test fails half-way.
    let mut rec = Guard(rec);
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let said = |what: &str| {
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while let Ok(line) =
            notes.recv_timeout(until.saturating_duration_since(std::time::Instant::now()))
        {
            if line.contains(what) {
                return;
            }
        }
        panic!("the recorder did not say '{what}' within 30 s");
    };
    assert!(wait_for(10.0, || sock.exists()));
    // The first row, before the target goes (on a busy machine the socket comes well before it).
    assert!(wait_for(30.0, || std::fs::read_to_string(&out).is_ok_and(
        |t| t.lines().any(|l| l.split(',').any(|f| f == "start"))
    )));
    first.0.kill().unwrap();
    let _ = first.0.wait();
    said("waiting for it to restart");
    // The recorder waits for the target: the marker is not taken in time, and says so.
    memmon()
        .args(["mark", "late", "--socket", sock.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("the marker was not taken"));
    let second = Guard(spawn_workload(&["hold:60s"]));
    let second_pid = second.0.id();
    let tmp = dir.path().join("d.pid.new");
    std::fs::write(&tmp, format!("{second_pid}\n")).unwrap();
    std::fs::rename(&tmp, &pidfile).unwrap();
    said("the target restarted");
    memmon()
        .args(["mark", "after", "--socket", sock.to_str().unwrap()])
        .assert()
        .success();
    // SAFETY: kill takes plain integers and touches no memory.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGTERM) };
    let _ = rec.0.wait();
    drop(second);
    // The withdrawn marker did not land after the restart.
    assert_eq!(
        events(&out),
        [
            "start".to_string(),
            format!("restart:{second_pid}"),
            "mark:after".into()
        ]
    );
}

#[test]
fn a_user_refused_by_the_socket_is_told_permission_denied_not_that_no_recorder_listens() {
    // SAFETY: geteuid has no preconditions.
    if !Path::new("/usr/bin/setpriv").exists() || unsafe { libc::geteuid() } != 0 {
        skip(
            Need::RunAsNobody,
            "needs root and setpriv to run memmon mark as nobody",
        );
        return;
    }
    let dir = tempdir();
    let sock = dir.path().join("rec.sock");
    let r = Recording::start(dir.path(), "deny", &["--socket", sock.to_str().unwrap()]);
    // The directory is open to all, the socket (0600) only to its owner.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = StdCommand::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(memmon_path())
        .args(["mark", "x", "--socket", sock.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot connect to {}: permission denied",
            sock.display()
        )),
        "{err}"
    );
    assert!(!err.contains("no recorder is listening"), "{err}");
    drop(r);
}

#[test]
fn five_proofs_read_as_one_line_by_label_in_summary_json_and_report() {
    // Five "proofs" of 40 MiB each between idle phases: the time and peak per proof are one
    // line of the summary's phases by label, and the report shows the same table.
    let dir = tempdir();
    let out = dir.path().join("proofs.csv");
    let mut steps = vec!["alloc:8MiB"];
    for _ in 0..5 {
        steps.extend(["say:phase prove", "alloc:40MiB", "hold:150ms", "free"]);
        steps.extend(["say:phase idle", "hold:150ms"]);
    }
    memmon()
        .args([
            "record",
            "-q",
            "--no-own-cgroup",
            "-i",
            "50ms",
            "--phase-peaks",
        ])
        .args(["--mark-stdout", PHASE_RE, "-o", out.to_str().unwrap()])
        .arg("--")
        .args(workload(&steps))
        .env("XDG_RUNTIME_DIR", dir.path())
        .assert()
        .success();

    let s = summary_json(&out);
    let by_label = s["by_label"].as_array().unwrap();
    let prove = by_label
        .iter()
        .find(|l| l["label"] == "prove")
        .expect("prove by label");
    assert_eq!(prove["count"], 5, "{prove:#}");
    // Each proof's peak is the kernel's; one whose marker came late (a loaded machine) is not
    // starred exact, and the count by label says how many were.
    let exact = s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["label"] == "prove" && p["peak"]["exact"] == true)
        .count();
    assert_eq!(prove["exact"], exact, "{prove:#}");
    let (min, max) = (
        prove["peak_bytes"]["min"].as_f64().unwrap(),
        prove["peak_bytes"]["max"].as_f64().unwrap(),
    );
    assert!(
        min >= (48 * MIB) as f64 && max < (60 * MIB) as f64,
        "{prove:#}"
    );
    let d = prove["duration_s"]["mean"].as_f64().unwrap();
    // A proof holds 150 ms; its markers may each come a few ms late.
    assert!(d >= 0.12, "{prove:#}");
    let idle = by_label
        .iter()
        .find(|l| l["label"] == "idle")
        .expect("idle by label");
    assert!(
        idle["peak_bytes"]["max"].as_f64().unwrap() < min,
        "{idle:#}"
    );

    // The summary's text and the report hold the same row.
    let text = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let row = text
        .lines()
        .skip_while(|l| !l.contains("phases by label"))
        .find(|l| l.trim_start().starts_with("prove "))
        .unwrap_or_else(|| panic!("no prove row by label:\n{text}"))
        .to_string();
    let cells: Vec<&str> = row
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let html = dir.path().join("proofs.html");
    let html = report_html(&out, &html);
    assert!(
        html.contains("<h3>phases by label"),
        "no table by label in the report"
    );
    let cell_html: String = cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let class = if i == 0 { "" } else { " class=\"num\"" };
            format!("<td{class}>{c}</td>")
        })
        .collect();
    assert!(html.contains(&cell_html), "the report lacks {cell_html}");
    assert!(
        html.contains("<h3>phases ("),
        "no phases table in the report"
    );
}
