//! Tests of `memmon record` against real processes whose memory is known.

use crate::util::*;
use predicates::prelude::*;
use std::process::{Child, Command as StdCommand};
use std::time::Duration;

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill takes plain integers and touches no memory.
    unsafe { libc::kill(child.id() as i32, sig) };
}

fn rows_in(path: &std::path::Path) -> usize {
    read_csv(path).1.len()
}

fn meta(path: &std::path::Path) -> serde_json::Value {
    let mut side = path.as_os_str().to_owned();
    side.push(".meta.json");
    serde_json::from_str(&std::fs::read_to_string(side).unwrap()).unwrap()
}

#[test]
fn a_launched_workload_shows_the_memory_it_touched() {
    let dir = tempdir();
    let out = dir.path().join("run.csv");
    record_workload(&out, &["-i", "50ms"], &["alloc:100MiB", "hold:400ms"])
        .assert()
        .success()
        .stderr(predicate::str::contains("sampled peak"));
    let s = summary_json(&out);
    let peak = s["sampled_peak_rss_bytes"].as_u64().unwrap();
    assert!(
        (100 * MIB..100 * MIB + 32 * MIB).contains(&peak),
        "peak {peak}"
    );
    let kernel = s["kernel_peak_rss_bytes"].as_u64().unwrap();
    assert!(
        kernel >= peak && kernel < peak + 8 * MIB,
        "kernel {kernel} peak {peak}"
    );
    assert_eq!(s["end"]["exit_code"], 0);
    // Sizes are whole bytes, and every row has every column.
    let rss = column(&out, "rss_bytes");
    assert!(rss.iter().all(|v| v % 1024 == 0));
    assert!(rss.len() >= 5);
}

/// What `sh -c 'echo N > /proc/self/oom_score_adj'` leaves there: whether this machine lets
/// this process's children lower their place in the OOM killer's order.
fn may_lower_oom_score_adj() -> bool {
    StdCommand::new("sh")
        .args([
            "-c",
            "echo -999 > /proc/self/oom_score_adj && cat /proc/self/oom_score_adj",
        ])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "-999")
}

#[test]
fn memmon_is_killed_last_at_a_shared_limit_and_its_command_as_it_would_be_without_it() {
    let dir = tempdir();
    let out = dir.path().join("oom.csv");
    let ours = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap();
    // The command reads memmon's value (its parent's) and its own.
    let o = memmon()
        .args(["record", "-q", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c"])
        .arg("cat /proc/$PPID/oom_score_adj /proc/self/oom_score_adj")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let seen = String::from_utf8_lossy(&o.stdout);
    let seen: Vec<&str> = seen.lines().collect();
    let memmon_at = if may_lower_oom_score_adj() {
        "-999"
    } else {
        ours.trim()
    };
    assert_eq!(seen, [memmon_at, ours.trim()]);
}

#[test]
fn a_process_that_resets_its_own_high_water_mark_gets_a_lower_bound_and_a_warning() {
    let dir = tempdir();
    let out = dir.path().join("reset.csv");
    // A row reads the 100 MiB mark (the marker waits for its row); the workload frees it and
    // resets its own mark; the next marker's row reads the lower mark.
    record_workload(
        &out,
        &["-i", "50ms"],
        &[
            "alloc:100MiB",
            "mark:high",
            "free",
            "reset-hwm",
            "mark:after",
            "hold:100ms",
        ],
    )
    .assert()
    .success()
    .stderr(predicate::str::contains("clear_refs"));
    let resets = &meta(&out)["end"]["marks_reset_elsewhere"];
    assert_eq!(resets.as_array().map(Vec::len), Some(1), "{resets}");
    assert!(resets[0]["before_bytes"].as_u64().unwrap() >= 100 * MIB);
    // Launched, the command's memmon's own cgroup holds it: the cgroup's peak, which no
    // clear_refs touches, stays the exact headline; the process's mark is a lower bound.
    let s = summary_json(&out);
    assert_eq!(s["mark_reset_elsewhere"], true, "{s}");
    if s["peak"]["source"] == "cgroup" {
        assert_eq!(s["peak"]["exact"], true, "{s}");
        assert!(s["peak"]["bytes"].as_u64().unwrap() >= 100 * MIB, "{s}");
    }

    // Attached with no cgroup, the mark is all the kernel gives: a lower bound, said.
    let out = dir.path().join("attached.csv");
    let (high, after) = (dir.path().join("high"), dir.path().join("after"));
    let mut w = std::process::Command::new(memmon_test_path())
        .arg("workload")
        .args([
            "alloc:100MiB".to_string(),
            format!("wait-file:{}", high.display()),
            "free".into(),
            "reset-hwm".into(),
            "say:reset".into(),
            format!("wait-file:{}", after.display()),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_rss(w.id(), 100 * MIB);
    let pid = w.id().to_string();
    let rec = spawn_memmon(&[
        "record",
        "-q",
        "-i",
        "50ms",
        "--pid",
        &pid,
        "-o",
        out.to_str().unwrap(),
    ]);
    let rows = || std::fs::read(&out).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count());
    // A row read the 100 MiB mark (the header and two rows), then the reset, then two rows.
    assert!(wait_for(60.0, || rows() >= 3));
    std::fs::write(&high, "").unwrap();
    let mut said = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(w.stdout.take().unwrap()),
        &mut said,
    )
    .unwrap();
    assert_eq!(said.trim(), "reset");
    let n = rows();
    assert!(wait_for(60.0, || rows() >= n + 2));
    std::fs::write(&after, "").unwrap();
    let _ = w.wait();
    let o = rec.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let s = summary_json(&out);
    let peak = &s["peak"];
    assert_eq!(peak["exact"], false, "{peak}");
    assert_eq!(peak["scope"], "largest-process-seen", "{peak}");
    assert!(peak["bytes"].as_u64().unwrap() >= 100 * MIB, "{peak}");
    assert!(
        warns(&s, "reset it (a write to /proc/PID/clear_refs)"),
        "{s}"
    );
    // The human summary says so beside the peak it makes a lower bound.
    let text = summary_text(&out);
    assert!(
        text.contains("reset by itself or another program"),
        "{text}"
    );
}

#[test]
fn a_20ms_spike_between_10s_ticks_is_caught_by_the_kernel_peak_with_a_warning() {
    let dir = tempdir();
    let out = dir.path().join("spike.csv");
    // The marker waits for its row: the recorder has sampled (its first tick is due at the
    // start) before the spike, however late a busy machine lets it begin.
    record_workload(
        &out,
        &["-i", "10s"],
        &[
            "alloc:20MiB",
            "mark:started",
            "hold:300ms",
            "spike:200MiB:20ms",
            "hold:900ms",
        ],
    )
    .assert()
    .success();
    let s = summary_json(&out);
    let kernel = s["kernel_peak_rss_bytes"].as_u64().unwrap();
    let sampled = s["sampled_peak_rss_bytes"].as_u64().unwrap();
    assert!(
        (220 * MIB..240 * MIB).contains(&kernel),
        "kernel peak {kernel}"
    );
    assert!(
        sampled < 60 * MIB,
        "the 10 s ticks (one sample at the start) should not see the spike: {sampled}"
    );
    // The human summary says so with the word "warning".
    memmon().arg("summary").arg(&out).assert().success().stdout(
        predicate::str::contains("warning").and(predicate::str::contains("missed the peak")),
    );
}

#[test]
fn a_tree_of_children_is_summed_and_its_bound_is_not_called_exact() {
    let dir = tempdir();
    let out = dir.path().join("tree.csv");
    // Without a cgroup of its own (as root memmon would make one): the tree's peak is bounded.
    record_workload(
        &out,
        &["-i", "100ms", "--no-own-cgroup"],
        &["children:3:40MiB:1200ms", "wait-children"],
    )
    .assert()
    .success();
    let procs = column(&out, "processes");
    assert_eq!(procs.iter().max(), Some(&4));
    let s = summary_json(&out);
    assert!(s["sampled_peak_rss_bytes"].as_u64().unwrap() >= 120 * MIB);
    assert_eq!(s["peak"]["scope"], "largest-process");
    assert!(s["peak"]["tree_high_bytes"].as_u64().unwrap() >= 120 * MIB);
    memmon().arg("summary").arg(&out).assert().stdout(
        predicate::str::contains("tree peak     between").and(predicate::str::contains(
            "at most the sum of the processes' VmHWM",
        )),
    );
}

#[test]
fn without_children_only_the_process_itself_is_watched() {
    let dir = tempdir();
    let out = dir.path().join("alone.csv");
    record_workload(
        &out,
        &["--no-children", "-i", "100ms"],
        &["children:2:30MiB:700ms", "wait-children"],
    )
    .assert()
    .success();
    assert_eq!(column(&out, "processes").iter().max(), Some(&1));
}

#[test]
fn a_target_killed_mid_run_ends_the_recording() {
    let dir = tempdir();
    let out = dir.path().join("killed.csv");
    let mut target = spawn_workload(&["alloc:10MiB", "hold:30s"]);
    let pid = target.id().to_string();
    let rec = spawn_memmon(&[
        "record",
        "--pid",
        &pid,
        "-i",
        "50ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(wait_for(5.0, || out.exists() && rows_in(&out) >= 3));
    target.kill().unwrap();
    let done = rec.wait_with_output().unwrap();
    let _ = target.wait();
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(meta(&out)["end"]["reason"], "target-exited");
    assert!(String::from_utf8_lossy(&done.stderr).contains("the target exited"));
}

#[test]
fn sigterm_ends_the_recording_cleanly_with_exit_code_143() {
    let dir = tempdir();
    let out = dir.path().join("term.csv");
    let mut target = spawn_workload(&["alloc:10MiB", "hold:30s"]);
    let rec = spawn_memmon(&[
        "record",
        "--pid",
        &target.id().to_string(),
        "-i",
        "50ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(wait_for(5.0, || out.exists() && rows_in(&out) >= 3));
    signal(&rec, libc::SIGTERM);
    let done = rec.wait_with_output().unwrap();
    target.kill().unwrap();
    let _ = target.wait();
    assert_eq!(done.status.code(), Some(143));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.ends_with('\n'), "the last row is whole");
    let m = meta(&out);
    assert_eq!(m["end"]["reason"], "signal");
    assert_eq!(m["end"]["memmon_signal"], "SIGTERM");
    assert!(
        String::from_utf8_lossy(&done.stderr).contains("sampled peak"),
        "summary printed"
    );
}

#[test]
fn sigkill_loses_at_most_the_last_second() {
    let dir = tempdir();
    let out = dir.path().join("kill9.csv");
    let mut target = spawn_workload(&["alloc:10MiB", "hold:30s"]);
    let mut rec = spawn_memmon(&[
        "record",
        "--pid",
        &target.id().to_string(),
        "-i",
        "100ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    // Rows are flushed at least every second: the file fills while memmon runs.
    assert!(wait_for(30.0, || out.exists() && rows_in(&out) >= 12));
    std::thread::sleep(Duration::from_millis(1500));
    rec.kill().unwrap();
    let killed_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let _ = rec.wait();
    target.kill().unwrap();
    let _ = target.wait();
    let s = summary_json(&out);
    assert!(s["samples"].as_u64().unwrap() >= 12, "{s}");
    assert!(s["ended"].as_str().unwrap().starts_with("unknown"));
    // What was lost is the last second, give or take a busy machine's delays (2 s).
    let last = *column(&out, "unix_ms").last().unwrap();
    assert!(
        last + 3000 >= killed_ms,
        "the last row kept is {} ms older than the kill",
        killed_ms - last
    );
}

#[test]
fn a_killed_recorders_exact_peak_is_called_exact_up_to_its_last_row_by_every_reader() {
    let dir = tempdir();
    let out = dir.path().join("killed.csv");
    let mut target = spawn_workload(&["alloc:30MiB", "hold:30s"]);
    let mut rec = spawn_memmon(&[
        "record",
        "--pid",
        &target.id().to_string(),
        "--reset-peaks",
        "-i",
        "50ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(wait_for(30.0, || out.exists() && rows_in(&out) >= 3));
    rec.kill().unwrap();
    let _ = rec.wait();
    target.kill().unwrap();
    let _ = target.wait();
    let limit = "exact up to the last row, with no end record";
    let s = summary_json(&out);
    assert_eq!(s["peak"]["exact"], true, "{s}");
    assert_eq!(s["peak_exact_up_to"], limit, "{s}");
    let peak = s["peak"]["bytes"].as_u64().unwrap();
    // The text's headline, compare's line of the recording, a budget's verdict and the
    // report's peak cell all say it beside the peak.
    memmon()
        .arg("summary")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(" up to the last row"));
    memmon()
        .arg("compare")
        .arg(&out)
        .arg("--")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("; {limit})")));
    memmon()
        .args(["summary", "--max-peak", &(peak - 1).to_string()])
        .arg(&out)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!("; {limit}")))
        .stderr(predicate::str::contains(format!(
            "({} bytes) exceeded",
            peak - 1
        )));
    let html = dir.path().join("killed.html");
    memmon()
        .arg("report")
        .arg(&out)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    assert!(std::fs::read_to_string(&html).unwrap().contains(limit));
    // Ended by a signal, the same recording is exact as it stands.
    let ended = dir.path().join("ended.csv");
    let mut target = spawn_workload(&["alloc:30MiB", "hold:30s"]);
    memmon()
        .args(["record", "--pid", &target.id().to_string(), "--reset-peaks"])
        .args(["-i", "50ms", "--duration", "300ms", "-o"])
        .arg(&ended)
        .assert()
        .success();
    target.kill().unwrap();
    let _ = target.wait();
    let s = summary_json(&ended);
    assert_eq!(s["peak"]["exact"], true, "{s}");
    assert!(s.get("peak_exact_up_to").is_none(), "{s}");
}

#[test]
fn with_no_output_flag_every_row_goes_to_stdout_and_messages_to_stderr() {
    let mut target = spawn_workload(&["alloc:10MiB", "hold:30s"]);
    let out = memmon()
        .args([
            "record",
            "--pid",
            &target.id().to_string(),
            "-i",
            "100ms",
            "--duration",
            "600ms",
        ])
        .output()
        .unwrap();
    target.kill().unwrap();
    let _ = target.wait();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stdout.starts_with("unix_ms,elapsed_s,rss_bytes,"));
    assert!(stdout.lines().count() >= 5, "{stdout}");
    assert!(!stdout.contains("memmon:"), "no message in the data");
    assert!(stderr
        .lines()
        .next()
        .unwrap()
        .contains("recording to stdout"));
}

#[test]
fn the_first_message_names_the_absolute_output_path() {
    let dir = tempdir();
    let out = memmon()
        .current_dir(dir.path())
        .args(["record", "-i", "50ms", "-o", "rel.csv", "--"])
        .args(workload(&["hold:100ms"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let first = stderr.lines().next().unwrap();
    let abs = dir.path().join("rel.csv");
    assert!(first.contains(&abs.display().to_string()), "{first}");
}

#[test]
fn an_existing_file_is_refused_without_force_and_kept_intact() {
    let dir = tempdir();
    let out = dir.path().join("keep.csv");
    std::fs::write(&out, "precious data\n").unwrap();
    record_workload(&out, &[], &["hold:10ms"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("already exists").and(predicate::str::contains("--force")),
        );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "precious data\n");
    // --force replaces it.
    record_workload(&out, &["-q", "-i", "50ms", "--force"], &["hold:100ms"])
        .assert()
        .success();
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .starts_with("unix_ms,"));
}

#[test]
fn append_adds_a_session_under_the_same_header() {
    let dir = tempdir();
    let out = dir.path().join("twice.csv");
    for _ in 0..2 {
        record_workload(&out, &["-q", "-i", "50ms", "--append"], &["hold:200ms"])
            .assert()
            .success();
    }
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.matches("unix_ms,").count(), 1);
    assert_eq!(text.matches(",start\n").count(), 2);
}

#[test]
fn a_launched_commands_exit_code_and_signal_become_memmons() {
    let dir = tempdir();
    memmon()
        .args([
            "record",
            "-q",
            "-o",
            dir.path().join("a.csv").to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "exit 7",
        ])
        .assert()
        .code(7);
    memmon()
        .args([
            "record",
            "-q",
            "-o",
            dir.path().join("b.csv").to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "kill -9 $$",
        ])
        .assert()
        .code(128 + 9);
    memmon()
        .args([
            "record",
            "-q",
            "-o",
            dir.path().join("c.csv").to_str().unwrap(),
            "--",
            "no-such-program-xyz",
        ])
        .assert()
        .code(127)
        .stderr(predicate::str::contains("no-such-program-xyz"));
    assert!(
        !dir.path().join("c.csv").exists(),
        "no empty recording is left behind"
    );
}

#[test]
fn a_launched_command_keeps_its_stdin_and_stdout() {
    let dir = tempdir();
    memmon()
        .args([
            "record",
            "-q",
            "-o",
            dir.path().join("io.csv").to_str().unwrap(),
            "--",
            "tr",
            "a-z",
            "A-Z",
        ])
        .write_stdin("hello\n")
        .assert()
        .success()
        .stdout("HELLO\n");
}

#[test]
fn a_missing_pid_is_a_clear_error() {
    memmon()
        .args(["record", "--pid", "999999999"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no process with PID 999999999"));
}

#[test]
fn a_bad_pidfile_is_a_clear_error() {
    let dir = tempdir();
    let missing = dir.path().join("missing.pid");
    memmon()
        .args(["record", "--pidfile", missing.to_str().unwrap()])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("missing.pid"));
    // A pidfile that names no PID is a target not found, as a stale one is (exit 3), and says
    // what it holds.
    let garbage = dir.path().join("garbage.pid");
    std::fs::write(&garbage, "not-a-pid\n").unwrap();
    memmon()
        .args(["record", "--pidfile", garbage.to_str().unwrap()])
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "garbage.pid does not start with a PID: its first line is \"not-a-pid\", not a number (--pidfile)",
        ));
}

#[test]
fn a_pidfile_target_is_recorded() {
    let dir = tempdir();
    let mut target = spawn_workload(&["alloc:12MiB", "hold:30s"]);
    wait_for_rss(target.id(), 12 * MIB);
    let pidfile = dir.path().join("d.pid");
    std::fs::write(&pidfile, format!("{}\n", target.id())).unwrap();
    let out = dir.path().join("p.csv");
    memmon()
        .args([
            "record",
            "-q",
            "--pidfile",
            pidfile.to_str().unwrap(),
            "-i",
            "50ms",
            "--duration",
            "400ms",
            "-o",
            out.to_str().unwrap(),
        ])
        .assert()
        .success();
    target.kill().unwrap();
    let _ = target.wait();
    assert!(column(&out, "rss_bytes").iter().all(|&r| r >= 12 * MIB));
}

#[test]
fn a_name_target_survives_a_restart() {
    let dir = tempdir();
    let out = dir.path().join("restart.csv");
    // A size no other test uses, so the regex matches only these workloads.
    let mut first = spawn_workload(&["alloc:13MiB", "hold:60s"]);
    let rec = Running::spawn(&[
        "record",
        "--name",
        "alloc:13MiB",
        "-i",
        "50ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(wait_for(30.0, || out.exists() && rows_in(&out) >= 3));
    first.kill().unwrap();
    let _ = first.wait();
    assert!(
        rec.wait_for_stderr("waiting for it to restart", 30.0),
        "{}",
        rec.stderr()
    );
    let mut second = spawn_workload(&["alloc:13MiB", "hold:60s"]);
    let restart = format!(",restart:{}\n", second.id());
    let seen = wait_for(30.0, || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains(&restart))
    });
    rec.signal(libc::SIGINT);
    let (status, stderr) = rec.finish();
    second.kill().unwrap();
    let _ = second.wait();
    assert!(seen, "no restart event: {stderr}");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert_eq!(summary_json(&out)["restarts"], 1);
}

#[test]
fn a_name_matching_nothing_is_an_error_unless_waiting() {
    memmon()
        .args(["record", "--name", "no-such-process-[0-9]{9}"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no process matches --name"));
}

#[test]
fn sampling_every_100us_works_and_counts_missed_ticks() {
    let dir = tempdir();
    let out = dir.path().join("fast.csv");
    record_workload(
        &out,
        &["-q", "-i", "100us", "--duration", "1s"],
        &["hold:2s"],
    )
    .assert()
    .success();
    let s = summary_json(&out);
    let samples = s["samples"].as_u64().unwrap();
    let missed = s["missed_ticks"].as_u64().unwrap();
    // 10,000 deadlines in 1 s: each was either taken or counted as missed.
    // At least a few hundred taken even on a loaded machine (CI is busy): far above any
    // interval a slower sampler could keep; the rest must be counted as missed, not lost.
    assert!(samples >= 200, "samples {samples}");
    assert!(
        samples + missed >= 9_000 && samples + missed <= 10_100,
        "samples {samples} missed {missed}"
    );
}

#[test]
fn jsonl_recordings_carry_meta_first_and_end_last() {
    let dir = tempdir();
    let out = dir.path().join("run.jsonl");
    record_workload(&out, &["-q", "-i", "50ms"], &["alloc:30MiB", "hold:300ms"])
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "meta");
    assert_eq!(lines[0]["format"], "memmon-recording");
    assert_eq!(lines.last().unwrap()["type"], "end");
    assert!(lines[1]["rss_bytes"].as_u64().is_some());
    let s = summary_json(&out);
    assert!(s["sampled_peak_rss_bytes"].as_u64().unwrap() >= 30 * MIB);
}

#[test]
fn the_metadata_sidecar_describes_the_recording() {
    let dir = tempdir();
    let out = dir.path().join("m.csv");
    record_workload(&out, &["-q", "-i", "250ms"], &["hold:300ms"])
        .assert()
        .success();
    let m = meta(&out);
    assert_eq!(m["schema_version"], 2);
    assert_eq!(m["interval"], "250ms");
    assert_eq!(m["target"]["mode"], "command");
    assert!(m["page_size_bytes"].as_u64().unwrap() >= 4096);
    assert!(m["columns"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "rss_bytes" && c["unit"] == "bytes"));
    assert!(m["end"]["rusage_maxrss_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn a_full_disk_is_a_clear_error() {
    memmon()
        .args([
            "record",
            "-q",
            "--force",
            "-i",
            "10ms",
            "-o",
            "/dev/full",
            "--",
        ])
        .args(workload(&["hold:300ms"]))
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("/dev/full").and(predicate::str::contains("No space left")),
        );
}

#[test]
fn a_missing_directory_is_a_clear_error() {
    let dir = tempdir();
    let out = dir.path().join("no/such/dir/run.csv");
    record_workload(&out, &[], &["hold:10ms"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("cannot create").and(predicate::str::contains("no/such/dir")),
        );
}

#[test]
fn pss_is_opt_in_and_guarded_by_rss() {
    let dir = tempdir();
    let out = dir.path().join("pss.csv");
    record_workload(
        &out,
        &["-i", "50ms", "--pss", "--pss-every", "100ms"],
        &["alloc:20MiB", "hold:400ms"],
    )
    .assert()
    .success();
    let pss = column(&out, "pss_bytes");
    assert!(!pss.is_empty() && pss.len() < column(&out, "rss_bytes").len());
    assert!(pss.iter().max().unwrap() >= &(20 * MIB));
    // Over the guard: skipped, and said so.
    let out2 = dir.path().join("pss2.csv");
    record_workload(
        &out2,
        &[
            "-i",
            "50ms",
            "--pss",
            "--pss-max-rss",
            "1MiB",
            "--pss-every",
            "50ms",
        ],
        &["alloc:20MiB", "hold:300ms"],
    )
    .assert()
    .success()
    .stderr(predicate::str::contains("not reading PSS"));
    // PSS may be read in the first instants after exec, while the process is still small; never
    // once it is over the guard. A read's sum goes on the row after the one that asked for it
    // (the read runs beside the ticks), whose RSS may already be over: judge the sum itself,
    // which is at most the RSS at the read (under 1 MiB, plus the status counters' batching).
    let (h, rows) = read_csv(&out2);
    let pss = h.iter().position(|c| c == "pss_bytes").unwrap();
    let read: Vec<u64> = rows
        .iter()
        .filter(|r| !r[pss].is_empty())
        .map(|r| r[pss].parse().unwrap())
        .collect();
    assert!(read.iter().all(|&p| p < 4 * MIB), "{read:?}");
    assert!(rows.iter().any(|r| r[pss].is_empty()));
}

/// Runs memmon under a pseudo-terminal (util-linux `script`), so stderr is a terminal; returns
/// what the terminal showed.
fn on_a_terminal(args: &[String]) -> String {
    let line = std::iter::once(memmon_path().display().to_string())
        .chain(args.iter().cloned())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let out = StdCommand::new("script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .expect("script (util-linux) runs memmon under a pseudo-terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn on_a_terminal_a_status_line_refreshes_at_most_4_times_a_second_and_stays_out_of_the_data() {
    let dir = tempdir();
    let out = dir.path().join("live.csv");
    let mut args: Vec<String> = ["record", "-i", "20ms", "-o", out.to_str().unwrap(), "--"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(workload(&["alloc:20MiB", "hold:1s"]));
    let screen = on_a_terminal(&args);
    let redraws = screen.matches("\r\x1b[Kmemmon: ").count();
    assert!(redraws >= 2, "no live line: {screen:?}");
    // About 1 s at 20 ms per sample (50 samples), but at most one redraw per 250 ms.
    assert!(redraws <= 6, "{redraws} redraws in about 1 s");
    assert!(screen.contains("peak") && screen.contains("missed"));
    let data = std::fs::read_to_string(&out).unwrap();
    assert!(!data.contains("memmon") && !data.contains('\x1b'));

    let quiet = dir.path().join("quiet.csv");
    args[4] = quiet.display().to_string();
    args.insert(1, "--quiet".into());
    assert!(
        !on_a_terminal(&args).contains("\x1b[K"),
        "--quiet turns it off"
    );
}

#[test]
fn an_orphan_of_a_launched_command_stays_in_the_tree() {
    let dir = tempdir();
    let out = dir.path().join("orphan.csv");
    // The subshell starts the workload in the background and exits at once: the workload is
    // orphaned while the command runs on. memmon, its subreaper, keeps it in the tree.
    let script = format!(
        "({} workload alloc:30MiB hold:800ms &); sleep 1.2",
        memmon_test_path().display()
    );
    memmon()
        .args([
            "record",
            "-q",
            "-i",
            "50ms",
            "-o",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .assert()
        .success();
    assert!(column(&out, "processes").iter().max() >= Some(&2));
    assert!(column(&out, "rss_bytes").iter().max().unwrap() >= &(30 * MIB));
}

#[test]
fn an_attached_daemons_older_peak_is_its_lifetime_peak_not_the_recordings() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "200MiB");
    assert!(d.hwm_bytes() >= 200 * MIB);
    let out = dir.path().join("idle.csv");
    // The summary record prints at the end reads the recording's metadata, as `summary` does.
    d.record(&out, "1s", &[]).stderr(
        predicate::str::contains("lifetime peak")
            .and(predicate::str::contains("missed the peak").not())
            .and(predicate::str::contains("no metadata").not()),
    );
    let s = summary_json(&out);
    assert_eq!(s["kernel_peak_rss_bytes"], serde_json::Value::Null, "{s}");
    assert_eq!(s["kernel_peak_window"], "before-recording");
    assert!(
        s["lifetime_peak_rss_bytes"].as_u64().unwrap() >= 200 * MIB,
        "{s}"
    );
    assert!(
        s["sampled_peak_rss_bytes"].as_u64().unwrap() < 100 * MIB,
        "{s}"
    );
    assert!(
        !s["warnings"].to_string().contains("missed the peak"),
        "{s}"
    );
    // The end record keeps the lifetime mark apart from what the recording knows of its own
    // peak: at least the RSS sampled, not exact.
    let p = &meta(&out)["end"]["processes"][0];
    assert!(p["hwm_bytes"].as_u64().unwrap() >= 200 * MIB, "{p}");
    assert!(
        p["recording_peak_bytes"].as_u64().unwrap() < 100 * MIB,
        "{p}"
    );
    assert_eq!(p["recording_peak_exact"], false, "{p}");
    memmon().arg("summary").arg(&out).assert().success().stdout(
        predicate::str::contains("lifetime peak")
            .and(predicate::str::contains("--reset-peaks"))
            .and(predicate::str::contains("exact within").not())
            .and(predicate::str::contains("missed the peak").not()),
    );
}

#[test]
fn with_reset_peak_an_attached_daemons_kernel_peak_is_exact_from_the_start() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "200MiB");
    let out = dir.path().join("reset.csv");
    d.record(&out, "1s", &["--reset-peaks"])
        .stderr(predicate::str::contains(
            "since its reset at the start of the recording",
        ));
    assert_eq!(meta(&out)["peak_reset_at_start"], true);
    // The reset is real: the kernel's own mark dropped to the idle RSS.
    assert!(d.hwm_bytes() < 100 * MIB, "VmHWM {}", d.hwm_bytes());
    let s = summary_json(&out);
    assert_eq!(s["kernel_peak_window"], "reset-at-start", "{s}");
    assert_eq!(s["kernel_peak_source"], "vmhwm");
    let kernel = s["kernel_peak_rss_bytes"].as_u64().unwrap();
    let sampled = s["sampled_peak_rss_bytes"].as_u64().unwrap();
    let bound = s["exact_within_bytes"].as_u64().unwrap();
    assert!(
        kernel < 100 * MIB,
        "the spike before the recording is not its peak: {s}"
    );
    assert!(
        kernel + bound >= sampled,
        "kernel {kernel} sampled {sampled} bound {bound}"
    );
    assert_eq!(s["lifetime_peak_rss_bytes"], serde_json::Value::Null);
    let p = &meta(&out)["end"]["processes"][0];
    assert_eq!(p["recording_peak_exact"], true, "{p}");
    assert_eq!(p["recording_peak_bytes"], kernel, "{p}");
    memmon().arg("summary").arg(&out).assert().success().stdout(
        predicate::str::contains("exact within")
            .and(predicate::str::contains("since its reset at the start")),
    );
}

/// The table row of PID `pid` in a summary's processes table.
fn process_row(summary: &str, pid: u32) -> String {
    summary
        .lines()
        .find(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.contains(&pid.to_string().as_str())
                && words.last().is_some_and(|w| w.parse::<u64>().is_ok())
        })
        .unwrap_or_else(|| panic!("no row of PID {pid}: {summary}"))
        .to_string()
}

#[test]
fn an_attached_trees_processes_table_shows_no_mark_from_before_the_recording_as_its_peak() {
    let dir = tempdir();
    // An 80 MiB spike before any recording, then an idle child.
    let mut w = spawn_workload(&["spike:80MiB:100ms", "children:1:8MiB:30s", "wait-children"]);
    let pid = w.id();
    let children = format!("/proc/{pid}/task/{pid}/children");
    assert!(wait_for(10.0, || std::fs::read_to_string(&children)
        .is_ok_and(|c| !c.trim().is_empty())));
    // The child has touched its 8 MiB: the tree is idle from here on.
    let child: u32 = std::fs::read_to_string(&children)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    wait_for_rss(child, 8 * MIB);
    let summary = |flags: &[&str], name: &str| {
        let out = dir.path().join(name);
        memmon()
            .args(["record", "-q", "--pid", &pid.to_string(), "-i", "100ms"])
            .args(["--duration", "600ms"])
            .args(flags)
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
        let o = memmon().arg("summary").arg(&out).assert().success();
        String::from_utf8(o.get_output().stdout.clone()).unwrap()
    };
    // Attached with no reset: its mark predates the recording and did not rise, so its peak
    // there is at least the RSS sampled, and the 80 MiB mark is named as its lifetime peak.
    let idle = summary(&[], "idle.csv");
    let row = process_row(&idle, pid);
    assert!(row.contains("≥"), "{row}\n{idle}");
    let bytes: u64 = row.split_whitespace().last().unwrap().parse().unwrap();
    assert!(bytes < 40 * MIB, "{row}");
    assert!(idle.contains("≥ a lower bound"), "{idle}");
    assert!(
        idle.contains(&format!("set before the recording: PID {pid} 8")),
        "{idle}"
    );
    // Reset at the start: exact from the reset, and far below the spike.
    let reset = summary(&["--reset-peaks"], "reset.csv");
    let row = process_row(&reset, pid);
    assert!(!row.contains("≥"), "{row}\n{reset}");
    let bytes: u64 = row.split_whitespace().last().unwrap().parse().unwrap();
    assert!(bytes < 40 * MIB, "{row}");
    assert!(reset.contains("(VmHWM, exact per process)"), "{reset}");
    let _ = w.kill();
    w.wait().unwrap();
}

#[test]
fn a_spike_during_an_attached_recording_is_its_kernel_peak() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "50MiB");
    let out = dir.path().join("rose.csv");
    let rec = spawn_memmon(&[
        "record",
        "--pid",
        &d.pid(),
        "-i",
        "1s",
        "--duration",
        "3s",
        "-o",
        out.to_str().unwrap(),
    ]);
    // Once the first row is written, spike above the older mark, between two 1 s ticks.
    assert!(wait_for(20.0, || out.exists() && rows_in(&out) >= 1));
    d.spike("150MiB");
    let o = rec.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary_json(&out);
    assert_eq!(s["kernel_peak_window"], "rose-during-recording", "{s}");
    assert!(
        s["kernel_peak_rss_bytes"].as_u64().unwrap() >= 150 * MIB,
        "{s}"
    );
}

#[test]
fn a_child_that_execs_is_named_by_its_new_command_line_in_the_metadata() {
    // The inner shell is found as `sh`, then execs `sleep 3` (found as such within a second
    // of the exec, at the latest: its status is read again when its statm moves or a second
    // after its last read; 3 s leaves a loaded machine time for that).
    let dir = tempdir();
    let out = dir.path().join("exec.csv");
    memmon()
        .args(["record", "-q", "-i", "50ms", "-o"])
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            r#"sh -c "sleep 0.5; exec sleep 3"; exit 0"#,
        ])
        .assert()
        .success();
    let m = meta(&out);
    let procs = m["end"]["processes"].as_array().unwrap();
    let names: Vec<(&str, &str)> = procs
        .iter()
        .map(|p| (p["comm"].as_str().unwrap(), p["cmdline"].as_str().unwrap()))
        .collect();
    assert!(
        names.contains(&("sleep", "sleep 3")),
        "the exec'd child is not named by its command line: {names:?}"
    );
    assert!(
        !names.iter().any(|(_, c)| c.starts_with("sh -c sleep 0.5")),
        "a process is still named by its command line before the exec: {names:?}"
    );
    // The root keeps its own command line.
    assert!(
        names
            .iter()
            .any(|(c, l)| *c == "sh" && l.starts_with("sh -c sh -c")),
        "{names:?}"
    );
}

#[test]
fn a_child_forked_by_another_thread_of_a_threaded_root_is_in_the_tree() {
    // The main thread starts 8 threads and waits; one of them forks `sleep 1.5`, which is then
    // listed only in that thread's task/TID/children.
    let script = "import subprocess, threading, time\n\
def idle(): time.sleep(3)\n\
def fork(): time.sleep(0.3); subprocess.run(['sleep', '1.5'])\n\
ts = [threading.Thread(target=idle) for _ in range(7)] + [threading.Thread(target=fork)]\n\
[t.start() for t in ts]\n\
[t.join() for t in ts]\n";
    // The interpreter itself, not a wrapper (pyenv's shim forks helpers of its own).
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap();
    let dir = tempdir();
    let out = dir.path().join("threads.csv");
    memmon()
        .args(["record", "-q", "-i", "50ms", "-o"])
        .arg(&out)
        .args(["--", python.trim(), "-c", script])
        .assert()
        .success();
    let procs = column(&out, "processes");
    let with_child = procs.iter().filter(|&&p| p == 2).count();
    // The child lives 1.5 s: found within 100 ms, it is in most of its 30 ticks.
    assert!(
        with_child >= 15,
        "{with_child} ticks with the child: {procs:?}"
    );
    let m = meta(&out);
    let names: Vec<&str> = m["end"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cmdline"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"sleep 1.5"), "{names:?}");
}

/// Records a Python process of 64 threads whose 41st thread forks `sleep 2.5` after 0.5 s, at
/// `-i 200ms` (`prefix`: a command memmon runs under, as `unshare`); returns the ticks that
/// counted the child, the recording's `sources`, and whether the child is named at the end.
fn record_a_child_of_a_non_main_thread(prefix: &[&str]) -> (usize, Vec<String>, bool) {
    let script = "import subprocess, threading, time\n\
def idle(): time.sleep(4)\n\
def fork(): time.sleep(0.5); subprocess.run(['sleep', '2.5'])\n\
ts = [threading.Thread(target=idle) for _ in range(40)] + [threading.Thread(target=fork)]\n\
ts += [threading.Thread(target=idle) for _ in range(22)]\n\
[t.start() for t in ts]\n\
[t.join() for t in ts]\n";
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap();
    let dir = tempdir();
    let out = dir.path().join("threads.csv");
    let mut cmd = std::process::Command::new(prefix.first().copied().unwrap_or("env"));
    cmd.args(prefix.iter().skip(1))
        .arg(memmon_path())
        .args(["record", "-q", "-i", "200ms", "-o"])
        .arg(&out)
        .args(["--", python.trim(), "-c", script]);
    let st = cmd.status().unwrap();
    assert!(st.success(), "{st}");
    let procs = column(&out, "processes");
    let with_child = procs.iter().filter(|&&p| p == 2).count();
    let m = meta(&out);
    let sources = m["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let named = m["end"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["cmdline"] == "sleep 2.5");
    (with_child, sources, named)
}

#[test]
fn a_child_forked_by_a_non_main_thread_of_a_64_thread_process_is_in_the_tree_with_or_without_fork_events(
) {
    // Where memmon hears the kernel's fork events (root, or any user on recent kernels), the
    // child is found from its event; in a PID namespace of its own the kernel sends none, and
    // the 63 other threads' children files are read instead. The child lives 2.5 s: about 12
    // ticks; found late or not at all, it would be in few or none.
    let (ticks, sources, named) = record_a_child_of_a_non_main_thread(&[]);
    assert!(ticks >= 6, "{ticks} ticks with the child");
    assert!(named);
    if sources.iter().any(|s| s.contains("fork events")) {
        eprintln!("fork events heard");
    } else {
        assert!(
            sources
                .iter()
                .any(|s| s.contains("other threads' every 100 ms")),
            "{sources:?}"
        );
    }
    if !is_root() {
        skip(Need::Root, "the PID namespace: needs root");
        return;
    }
    let unshare = outside_program("unshare").display().to_string();
    let (ticks, sources, named) =
        record_a_child_of_a_non_main_thread(&[&unshare, "--pid", "--fork", "--mount-proc"]);
    assert!(
        ticks >= 6,
        "{ticks} ticks with the child, in a PID namespace"
    );
    assert!(named);
    assert!(
        sources
            .iter()
            .any(|s| s.contains("other threads' every 100 ms")),
        "in a PID namespace of its own memmon hears no fork events: {sources:?}"
    );
}

#[test]
fn an_idle_recording_at_1s_wakes_a_few_times_a_second_over_all_its_threads_not_every_50ms() {
    // The marker socket (on by default) and a followed log each have a thread: neither may
    // wake on a timer of its own between samples (they used to, every 100 and 50 ms).
    let dir = tempdir();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    let mut target = std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    // The marker socket in a directory of its own: `memmon mark` in other tests probes the
    // sockets of the shared default one, and each probe wakes the recorder.
    let mut rec = std::process::Command::new(memmon_path())
        .args([
            "record",
            "-q",
            "-i",
            "1s",
            "--pid",
            &target.id().to_string(),
        ])
        .arg("--socket")
        .arg(dir.path().join("m.sock"))
        .arg("--mark-log")
        .arg(&log)
        .args(["--mark-regex", "phase"])
        .arg("-o")
        .arg(dir.path().join("idle.csv"))
        .spawn()
        .unwrap();
    let pid = rec.id();
    // Past the start-up (the threads exist once the first rows are written).
    assert!(wait_for(20.0, || {
        std::fs::read_to_string(dir.path().join("idle.csv")).is_ok_and(|s| s.lines().count() >= 3)
    }));
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count();
    assert!(
        threads >= 3,
        "expected the recorder, socket and log threads, found {threads}"
    );
    let before = wake_ups(pid);
    let t0 = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_secs(6));
    let per_s = (wake_ups(pid) - before) as f64 / t0.elapsed().as_secs_f64();
    // SAFETY: signalling our own children.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let _ = rec.wait();
    let _ = target.kill();
    let _ = target.wait();
    // One wake-up per sample and one per 2 s for the log's fallback look: about 1.5 a second
    // (polling every 50 ms would be 20). Preemptions on a busy machine are not counted.
    assert!(
        per_s <= 5.0,
        "{per_s:.2} wake-ups/s at -i 1s (about 1.5 expected)"
    );
}

/// An attached workload (memmon did not start it) that holds 100 MiB, then, once memmon's first
/// sample is written, rises to 400 MiB and exits before the next sample (`-i 5s`: the 2 s of the
/// issue, with room for a busy machine; memmon ends as the target does). Returns the
/// summary JSON, memmon's stderr and the number of rows.
fn record_a_peak_just_before_exit(flags: &[&str]) -> (serde_json::Value, String, usize) {
    let dir = tempdir();
    let go = dir.path().join("go");
    let out = dir.path().join("exit.csv");
    let mut target = spawn_workload(&[
        "alloc:100MiB",
        &format!("wait-file:{}", go.display()),
        "alloc:300MiB",
        "exit:0",
    ]);
    let pid = target.id().to_string();
    assert!(wait_for(20.0, || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                let l = s.lines().find(|l| l.starts_with("VmRSS:"))?;
                l.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .is_some_and(|kib| kib * 1024 >= 100 * MIB)
    }));
    let mut args = vec![
        "record",
        "--pid",
        &pid,
        "-i",
        "5s",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let rec = spawn_memmon(&args);
    // The rise comes after the first sample.
    assert!(wait_for(20.0, || {
        std::fs::read_to_string(&out).is_ok_and(|s| s.lines().count() >= 2)
    }));
    std::fs::write(&go, "").unwrap();
    let _ = target.wait();
    let done = rec.wait_with_output().unwrap();
    assert!(done.status.success());
    let rows = read_csv(&out).1.len();
    (
        summary_json(&out),
        String::from_utf8_lossy(&done.stderr).into_owned(),
        rows,
    )
}

#[test]
fn an_attached_process_that_peaks_just_before_it_exits_keeps_its_peak_from_its_exit_record() {
    let (sum, stderr, rows) = record_a_peak_just_before_exit(&[]);
    assert_eq!(
        rows, 1,
        "the rise was sampled: the test proves nothing\n{stderr}"
    );
    let peak = sum["kernel_peak_rss_bytes"].as_u64().unwrap_or(0);
    assert!(peak >= 400 * MIB, "kernel peak {peak} bytes\n{stderr}");
    assert_eq!(sum["end"]["exit_records"], "taskstats");
    assert_eq!(sum["end"]["target_exit_read"], true);
    assert!(sum["kernel_peak_exact_until_s"].is_null());
    // The process's own record carries it too.
    let hwm = sum["end"]["processes"][0]["hwm_bytes"].as_u64().unwrap();
    assert!(hwm >= 400 * MIB, "process peak {hwm} bytes");
    assert!(!stderr.contains("exact up to the last sample"), "{stderr}");
}

#[test]
fn without_exit_records_the_summary_says_the_peak_is_exact_only_up_to_the_last_sample() {
    let (sum, stderr, rows) = record_a_peak_just_before_exit(&["--no-taskstats"]);
    assert_eq!(
        rows, 1,
        "the rise was sampled: the test proves nothing\n{stderr}"
    );
    assert_eq!(sum["end"]["exit_records"], "off (--no-taskstats)");
    let gap = sum["kernel_peak_exact_until_s"].as_f64().unwrap();
    assert!((0.0..5.5).contains(&gap), "{gap} s");
    assert!(
        stderr.contains("exact up to the last sample")
            && stderr.contains("before the target exited; a rise after it is not seen"),
        "{stderr}"
    );
    // Never called exact beyond that sample, and the 400 MiB was not seen.
    assert!(!stderr.contains("exact within"), "{stderr}");
    assert!(sum["kernel_peak_rss_bytes"].as_u64().unwrap_or(0) < 400 * MIB);
}

#[test]
fn without_exit_records_each_child_that_leaves_is_counted_once() {
    // 20 children live 500 ms each, then wait 500 ms as zombies before their parent reaps them
    // together: each is seen alive, then exited (a zombie its parent still lists), then reaped
    // (a rise of the parent's cminflt): three signs of one departure each. (The first second
    // lets a busy machine's memmon take its first samples.)
    let dir = tempdir();
    let out = dir.path().join("forks.csv");
    record_workload(
        &out,
        &["-q", "--no-taskstats", "-i", "10ms"],
        &["hold:1s", "forks:20:500ms:20", "hold:300ms"],
    )
    .assert()
    .success();
    let departed: u64 = column(&out, "departed").iter().sum();
    assert_eq!(departed, 20);
    assert_eq!(summary_json(&out)["end"]["processes_departed"], 20);
}

#[test]
fn without_exit_records_children_born_and_gone_between_ticks_are_never_overcounted() {
    // 300 children that exit at once, each reaped before the next is forked, most between two
    // ticks: counted from the reaps seen (a reaper that reaped several between two reads
    // rises once), so at least one and never more than there were.
    let dir = tempdir();
    let out = dir.path().join("forks.csv");
    record_workload(
        &out,
        &["-q", "--no-taskstats", "-i", "5ms"],
        &["hold:1s", "forks:300:0s:1", "forks:30:5ms:10", "hold:300ms"],
    )
    .assert()
    .success();
    let departed: u64 = column(&out, "departed").iter().sum();
    assert!(
        (1..=330).contains(&departed),
        "{departed} departures of 330 processes"
    );
    assert_eq!(summary_json(&out)["end"]["processes_departed"], departed);
}

#[test]
fn each_sample_has_the_trees_virtual_size_and_thread_count() {
    // Three single-threaded processes (the workload and two children) at some ticks.
    let dir = tempdir();
    let out = dir.path().join("vm.csv");
    record_workload(
        &out,
        &["-i", "50ms"],
        &["alloc:100MiB", "children:2:10MiB:1s", "wait-children"],
    )
    .assert()
    .success();
    let (vm, rss) = (column(&out, "vm_size_bytes"), column(&out, "rss_bytes"));
    let (threads, procs) = (column(&out, "threads"), column(&out, "processes"));
    assert!(vm.iter().zip(&rss).all(|(v, r)| v >= r), "VmSize below RSS");
    assert!(vm.iter().any(|&v| v >= 100 * MIB));
    assert!(
        procs.contains(&3),
        "the children were never seen: {procs:?}"
    );
    for (t, p) in threads.iter().zip(&procs) {
        assert_eq!(t, p, "each process has one thread");
    }
}

/// memmon without privileges: as root, run as nobody through setpriv (which drops every
/// capability); as another user, as that user. Its outputs need a directory anyone may write.
fn unprivileged_memmon() -> StdCommand {
    if is_root() {
        let mut c = StdCommand::new(outside_program("setpriv"));
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(memmon_path());
        c
    } else {
        StdCommand::new(memmon_path())
    }
}

/// A temporary directory anyone may write (for [`unprivileged_memmon`]'s outputs).
fn tempdir_for_anyone() -> tempfile::TempDir {
    let dir = tempdir();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    dir
}

#[test]
fn a_refused_reset_peak_says_why_and_what_would_make_it_work() {
    // A target whose clear_refs memmon may not write: undumpable, its /proc files are root's
    // (as a setuid program's are), and memmon runs without privileges.
    let dir = tempdir_for_anyone();
    let out = dir.path().join("r.csv");
    let mut w = spawn_workload(&["undumpable", "spike:100MiB:10ms", "hold:60s"]);
    let status = format!("/proc/{}/status", w.id());
    let kib = |key: &str| {
        std::fs::read_to_string(&status)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    // The spike over before memmon attaches: a mark still equal to the RSS memmon reads
    // first would be reached in the recording, and exact.
    assert!(
        wait_for(30.0, || kib("VmHWM:") >= 100 * 1024
            && kib("VmRSS:") < 50 * 1024),
        "the spike did not happen"
    );
    let done = unprivileged_memmon()
        .args([
            "record",
            "--reset-peaks",
            "--duration",
            "1s",
            "-i",
            "100ms",
            "--pid",
        ])
        .arg(w.id().to_string())
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let _ = w.kill();
    let _ = w.wait();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    assert!(
        stderr.contains("cannot reset the peak (clear_refs, --reset-peaks)")
            && stderr.contains("permission denied on /proc/"),
        "{stderr}"
    );
    assert!(
        stderr.contains("resetting it was refused")
            && stderr.contains("run memmon as the target's user or as root"),
        "{stderr}"
    );
    assert!(!stderr.contains("record with --reset-peaks"), "{stderr}");
    // What summary prints later says the same.
    let again = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&again.stdout).into_owned()
        + &String::from_utf8_lossy(&again.stderr);
    assert!(text.contains("resetting it was refused"), "{text}");
}

#[test]
fn an_unprivileged_recorder_is_refused_exit_records_and_says_so() {
    // Registering for exit records needs CAP_NET_ADMIN.
    let dir = tempdir_for_anyone();
    let out = dir.path().join("u.csv");
    let done = unprivileged_memmon()
        .args([
            "record",
            "-i",
            "100ms",
            "-o",
            out.to_str().unwrap(),
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    assert!(
        stderr.contains("not reading exit records: registering for exit records was refused")
            && stderr.contains("exact up to its last sample before it exits"),
        "{stderr}"
    );
    let records = summary_json(&out)["end"]["exit_records"].clone();
    assert!(
        records
            .as_str()
            .is_some_and(|r| r.starts_with("unavailable: registering for exit records was refused")),
        "{records}"
    );
}

/// A pidfile target that exits, and the recorder waiting for its restart (it said so).
fn record_a_pidfile_target_that_exits(
    dir: &std::path::Path,
    extra: &[&str],
) -> (Running, std::path::PathBuf, std::path::PathBuf) {
    let pidfile = dir.join("d.pid");
    let out = dir.join("away.csv");
    // A size no other test uses.
    let mut first = spawn_workload(&["alloc:7MiB", "hold:60s"]);
    std::fs::write(&pidfile, format!("{}\n", first.id())).unwrap();
    let mut args = vec![
        "record",
        "-i",
        "100ms",
        "--pidfile",
        pidfile.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let rec = Running::spawn(&args);
    assert!(wait_for(30.0, || out.exists() && rows_in(&out) >= 2));
    first.kill().unwrap();
    let _ = first.wait();
    assert!(
        rec.wait_for_stderr("waiting for it to restart", 30.0),
        "{}",
        rec.stderr()
    );
    (rec, pidfile, out)
}

#[test]
fn a_signal_while_waiting_for_a_restart_ends_the_recording_with_that_signal() {
    let dir = tempdir();
    let (rec, _pidfile, out) = record_a_pidfile_target_that_exits(dir.path(), &[]);
    rec.signal(libc::SIGTERM);
    let (status, stderr) = rec.finish();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let m = meta(&out);
    assert_eq!(m["end"]["reason"], "signal");
    assert_eq!(m["end"]["memmon_signal"], "SIGTERM");
}

#[test]
fn a_marker_sent_while_the_target_is_away_is_taken_after_its_restart() {
    use std::io::Write as _;
    let dir = tempdir();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    let (rec, pidfile, out) = record_a_pidfile_target_that_exits(
        dir.path(),
        &[
            "--mark-log",
            log.to_str().unwrap(),
            "--mark-regex",
            r"phase (?P<label>\w+)",
        ],
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(b"phase away\n")
        .unwrap();
    // Longer than a few polls of the log follower.
    std::thread::sleep(Duration::from_millis(500));
    let mut second = spawn_workload(&["alloc:7MiB", "hold:60s"]);
    let tmp = dir.path().join("d.pid.new");
    std::fs::write(&tmp, format!("{}\n", second.id())).unwrap();
    std::fs::rename(&tmp, &pidfile).unwrap();
    let events = || -> Vec<String> {
        let (h, rows) = read_csv(&out);
        let i = h.iter().position(|c| c == "event").unwrap();
        rows.into_iter()
            .map(|r| r[i].clone())
            .filter(|e| !e.is_empty())
            .collect()
    };
    let taken = wait_for(30.0, || events().iter().any(|e| e == "mark:away"));
    rec.signal(libc::SIGTERM);
    let (_, stderr) = rec.finish();
    second.kill().unwrap();
    let _ = second.wait();
    assert!(taken, "the marker never came: {stderr}");
    // Its sample is of the new process: after the restart row.
    assert_eq!(
        events(),
        [
            "start".to_string(),
            format!("restart:{}", second.id()),
            "mark:away".into()
        ],
        "{stderr}"
    );
}

#[test]
fn without_exit_records_a_launched_trees_kernel_peak_still_holds_children_and_orphans_that_ended() {
    // At 5 s ticks both children come and go unseen: one waited for by the shell (in the
    // shell's own rusage), one orphaned by a subshell and reaped by memmon (its subreaper),
    // whose rusage memmon takes at the reap. wait4's ru_maxrss then covers both. The shell
    // outlives the orphan by 2 s: a loaded machine may be slow to start it.
    let dir = tempdir();
    let out = dir.path().join("tree.csv");
    let script =
        r#""$0" workload spike:150MiB:20ms; ( "$0" workload spike:250MiB:20ms & ); sleep 2"#;
    memmon()
        .args([
            "record",
            "-q",
            "--no-taskstats",
            "--no-own-cgroup",
            "-i",
            "5s",
            "-o",
        ])
        .arg(&out)
        .args(["--", "sh", "-c", script])
        .arg(memmon_test_path())
        .assert()
        .success();
    let s = summary_json(&out);
    let kernel = s["kernel_peak_rss_bytes"].as_u64().unwrap();
    assert!(
        kernel >= 250 * MIB,
        "kernel peak {kernel}: the orphan is missing\n{s}"
    );
    assert_eq!(s["kernel_peak_source"], "ru-maxrss");
    assert_eq!(s["peak"]["scope"], "largest-process", "{s}");
    assert!(!warns(&s, "exit record"), "{s}");
}

#[test]
fn a_command_shorter_than_an_interval_still_has_its_duration_and_kernel_peak() {
    // `true` ends long before the first 5 s tick: no row may catch it, but wait4 has its peak
    // and memmon saw it start and end.
    let dir = tempdir();
    let out = dir.path().join("short.csv");
    memmon()
        .args(["record", "-q", "-i", "5s", "--no-own-cgroup", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success();
    let s = summary_json(&out);
    let duration = s["duration_s"].as_f64().unwrap();
    assert!(duration > 0.0 && duration < 5.0, "{s}");
    // Its peak: its exit record as root (taskstats, read from before the launch), else wait4's
    // ru_maxrss when that rises above memmon's own RSS at the fork (which exec keeps in it).
    let end = &s["end"];
    assert!(end["launcher_rss_bytes"].as_u64().unwrap() > 0, "{s}");
    if end["exit_records"] == "taskstats" {
        assert_eq!(s["peak"]["source"], "vmhwm", "{s}");
        assert!(s["peak"]["bytes"].as_u64().unwrap() > 100 * 1024, "{s}");
        let text = memmon().arg("summary").arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("  peak          "), "{text}");
        // Usually `true` is gone before the first read; a read right after its exec (16 KiB,
        // the loader not yet run) catches it on a quiet machine, and the kernel's peak still
        // stands above that row.
        if s["samples"] == 0 {
            assert!(
                text.contains("the command ended before its first sample"),
                "{text}"
            );
        } else {
            let sampled = s["sampled_peak_rss_bytes"].as_u64().unwrap();
            assert!(sampled <= s["peak"]["bytes"].as_u64().unwrap(), "{s}");
        }
    }
}

#[test]
fn a_launched_commands_first_row_is_not_its_idle_floor() {
    // The first row comes as the program has just loaded; its idle floor is the floor it then
    // holds (20 MiB touched and held), not that start-up row. The floor is the 10th percentile
    // of the rows: the program holds its 20 MiB ten times as long as it took to get there (and
    // at least 500 ms), so however slowly a busy machine starts it, nine rows in ten hold it.
    let dir = tempdir();
    let out = dir.path().join("floor.csv");
    let go = dir.path().join("go");
    let started = std::time::Instant::now();
    let mut rec = std::process::Command::new(memmon_path())
        .args(["record", "-q", "-i", "50ms", "--no-own-cgroup", "-o"])
        .arg(&out)
        .arg("--")
        .args(workload(&[
            "alloc:20MiB",
            "say:held",
            &format!("wait-file:{}", go.display()),
        ]))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(rec.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "held\n");
    std::thread::sleep((started.elapsed() * 10).max(Duration::from_millis(500)));
    std::fs::write(&go, "").unwrap();
    assert!(rec.wait().unwrap().success());
    let s = summary_json(&out);
    assert!(
        s["idle_rss_bytes"].as_u64().unwrap() >= 20 * MIB,
        "idle floor {} of {s}",
        s["idle_rss_bytes"]
    );
    let meta = std::fs::read_to_string(dir.path().join("floor.csv.meta.json")).unwrap();
    assert!(meta.contains("\"command_wall_s\""), "{meta}");
}

/// A stderr whose reader has gone: a pipe with its read end closed (`2>&1 | head -3` once
/// head has exited). Every write to it fails with EPIPE.
fn stderr_nobody_reads() -> std::process::Stdio {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors; both are ours to close or own.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        libc::close(fds[0]);
        std::process::Stdio::from(OwnedFd::from_raw_fd(fds[1]))
    }
}

#[test]
fn the_demo_with_no_one_reading_its_stderr_finishes_and_writes_its_plot() {
    let dir = tempdir();
    let out = dir.path().join("demo.csv");
    let status = StdCommand::new(memmon_path())
        .args(["demo", "-i", "100ms", "-o"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(stderr_nobody_reads())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "not a panic (101)");
    assert!(rows_in(&out) > 10);
    assert!(meta(&out)["end"]["reason"].is_string());
    let svg = std::fs::read_to_string(dir.path().join("demo.svg")).unwrap();
    assert!(svg.contains("<svg"));
}

#[test]
fn a_recording_with_stderr_closed_writes_its_data_sidecar_and_plot() {
    // `2>&-`: the shell closes stderr before memmon starts.
    let dir = tempdir();
    let out = dir.path().join("run.csv");
    let plot = dir.path().join("run.svg");
    let status = StdCommand::new("sh")
        .arg("-c")
        .arg(r#"exec "$0" record -i 20ms -o "$1" --plot "$2" -- "$3" workload alloc:20MiB hold:200ms 2>&-"#)
        .arg(memmon_path())
        .arg(&out)
        .arg(&plot)
        .arg(memmon_test_path())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(rows_in(&out) > 1);
    assert!(meta(&out)["end"]["reason"].is_string());
    assert!(std::fs::read_to_string(&plot).unwrap().contains("<svg"));
}

#[test]
fn rows_on_the_terminal_get_no_live_status_line_among_them() {
    // No -o: the rows go to stdout, the same terminal as stderr.
    let mut args: Vec<String> = ["record", "-i", "50ms", "--"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(workload(&["alloc:10MiB", "hold:1s"]));
    let screen = on_a_terminal(&args);
    assert!(screen.contains("unix_ms,elapsed_s,rss_bytes"), "{screen}");
    assert!(
        !screen.contains("\x1b[K"),
        "a live line among the rows:\n{screen:?}"
    );
    // Every row on a line of its own, whole.
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .collect();
    assert!(rows.len() > 5, "{screen}");
    let columns = screen
        .lines()
        .find(|l| l.starts_with("unix_ms,"))
        .unwrap()
        .trim_end()
        .split(',')
        .count();
    assert!(
        rows.iter()
            .all(|r| r.trim_end().split(',').count() == columns),
        "{screen}"
    );
}

#[test]
fn the_banner_says_where_what_and_how_often_and_verbose_adds_what_is_read() {
    let dir = tempdir();
    let out = dir.path().join("b.csv");
    let run = |flags: &[&str]| {
        let o = record_workload(&out, flags, &["hold:100ms"])
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let stderr = run(&["-i", "20ms"]);
    let line = |prefix: &str| {
        stderr
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in\n{stderr}"))
            .to_string()
    };
    assert!(line("memmon: recording to ").contains(out.to_str().unwrap()));
    let target = line("memmon: target command ");
    assert!(
        target.ends_with("and its descendants, every 20ms") && target.chars().count() < 250,
        "{target}"
    );
    assert!(!stderr.contains("/proc/PID/status"), "{stderr}");
    // The sources are in the sidecar, and -v says them, a line each.
    let verbose = run(&["-v", "--force", "-i", "20ms"]);
    let sources: Vec<String> = meta(&out)["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert!(sources
        .iter()
        .any(|s| s.starts_with("/proc/PID/status (VmRSS")));
    for s in &sources {
        assert!(
            verbose.contains(&format!("memmon: reading {s}\n")),
            "{s}\n{verbose}"
        );
    }
    // -q stays quiet, and says so when asked for both.
    assert!(run(&["-q", "--force"]).is_empty());
    record_workload(&out, &["-q", "-v", "--force"], &["hold:100ms"])
        .assert()
        .code(2);
}

/// The engine driven through the library: a recorder hands its samples to the sink it is given
/// (here memory: the sink tests use), not to a file. (In this binary, not the library's unit
/// tests: a recorder takes the process's signals, which a unit test there raises.)
#[test]
fn a_recorder_hands_the_metadata_each_sample_and_the_end_to_the_sink_it_is_given() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let opts = memmon::sampler::record::RecordOptions {
        interval: std::time::Duration::from_millis(50),
        gpu: memmon::sampler::gpu::GpuOptions {
            mode: memmon::sampler::gpu::GpuMode::Off,
            ..Default::default()
        },
        duration: Some(std::time::Duration::from_millis(300)),
        exit_records: false,
        own_cgroup: Some(false),
        ..memmon::sampler::record::RecordOptions::new(memmon::sampler::target::TargetSpec::Pid(
            child.id() as i32,
        ))
    };
    let memory = memmon::sampler::sink::Memory::new();
    let sink = memory.clone();
    let rec = memmon::sampler::record::Recorder::start_with(
        opts,
        |_| Ok(Box::new(sink)),
        memmon::reporter::Reporter::silent(),
        Box::new(()),
    );
    let outcome = rec.unwrap().run();
    let _ = child.kill();
    let _ = child.wait();
    let outcome = outcome.unwrap();
    let got = memory.recorded();
    assert_eq!(got.meta.unwrap().target.pid, child.id() as i32);
    // 0, 50, ..., 300 ms: the last on the duration's end; a loaded machine misses some.
    let n = got.samples.len();
    assert!((2..=7).contains(&n), "{n} samples");
    assert_eq!(
        got.samples[0].event,
        Some(memmon::model::sample::Event::Start)
    );
    assert!(got
        .samples
        .iter()
        .all(|s| s.rss_bytes > 0 && s.processes == 1));
    let end = got.end.unwrap();
    assert_eq!(end.reason, memmon::format::meta::EndReason::Duration);
    assert_eq!(end.samples, n as u64);
    assert_eq!(outcome.summary.samples, n as u64);
    assert_eq!(outcome.output, None, "no file");
}

#[test]
fn memmon_leaves_itself_out_of_the_tree_it_watches() {
    // `memmon record --pid $$` from a shell: memmon is the shell's child, in the tree it
    // watches. Counting its own memory (and what it runs) as the target's would be wrong.
    let dir = tempdir();
    let out = dir.path().join("self.csv");
    let script = format!(
        "'{}' record -q -i 50ms --duration 600ms -o '{}' --pid $$; true",
        memmon_path().display(),
        out.display()
    );
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    let sum = summary_json(&out);
    assert_eq!(sum["max_processes"], 1, "memmon counted itself: {sum}");
    let rows = column(&out, "processes");
    assert!(!rows.is_empty() && rows.iter().all(|&p| p == 1), "{rows:?}");
}

/// Restarts the target of `record_a_pidfile_target_that_exits` as a new workload (the pidfile
/// rewritten), waits for its `restart` row and stops the recorder; returns the new process's PID.
fn restart_and_stop(
    rec: Running,
    pidfile: &std::path::Path,
    out: &std::path::Path,
    before_stop: impl FnOnce(),
) -> (u32, String) {
    let mut second = spawn_workload(&["alloc:5MiB", "hold:60s"]);
    let pid = second.id();
    let tmp = pidfile.with_extension("new");
    std::fs::write(&tmp, format!("{pid}\n")).unwrap();
    std::fs::rename(&tmp, pidfile).unwrap();
    let restart = format!(",restart:{pid}");
    let seen = wait_for(30.0, || {
        std::fs::read_to_string(out).is_ok_and(|t| t.contains(&restart))
    });
    before_stop();
    rec.signal(libc::SIGTERM);
    let (_, stderr) = rec.finish();
    second.kill().unwrap();
    let _ = second.wait();
    assert!(seen, "no restart row: {stderr}");
    (pid, stderr)
}

#[test]
fn a_restart_without_exit_records_leaves_the_kernel_peak_a_lower_bound_and_lists_the_old_process() {
    // The old process left the tree with no exit record read: it may have peaked after its
    // last row, so the peak is not exact (it was called exact, of one process). The end
    // record lists it and counts it as departed.
    let dir = tempdir();
    let (rec, pidfile, out) = record_a_pidfile_target_that_exits(dir.path(), &["--no-taskstats"]);
    let first = meta(&out)["target"]["pid"].as_i64();
    let (_, stderr) = restart_and_stop(rec, &pidfile, &out, || {});
    let s = summary_json(&out);
    assert_eq!(s["restarts"], 1, "{stderr}");
    assert_eq!(s["peak"]["exact"], false, "{s}");
    assert_eq!(s["peak"]["scope"], "largest-process-seen", "{s}");
    assert!(s["departed"].as_u64() >= Some(1), "{s}");
    let end = &meta(&out)["end"];
    assert!(end["processes_departed"].as_u64() >= Some(1), "{end}");
    let pids: Vec<i64> = end["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["pid"].as_i64())
        .collect();
    assert_eq!(pids.len(), 2, "{end}");
    if let Some(first) = first {
        assert!(pids.contains(&first), "{end}");
    }
}

#[test]
fn a_memmon_mark_held_while_the_target_is_away_is_taken_late_after_the_restart() {
    let dir = tempdir();
    let sock = dir.path().join("m.sock");
    let (rec, pidfile, out) =
        record_a_pidfile_target_that_exits(dir.path(), &["--socket", sock.to_str().unwrap()]);
    // `memmon mark` waits for its row (up to 10 s): sent now, taken after the restart.
    let sock2 = sock.clone();
    let mark = std::thread::spawn(move || {
        memmon()
            .args(["mark", "gap", "--socket", sock2.to_str().unwrap()])
            .output()
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(500));
    let (_, stderr) = restart_and_stop(rec, &pidfile, &out, || {
        let _ = wait_for(20.0, || {
            std::fs::read_to_string(&out).is_ok_and(|t| t.contains(",mark:gap"))
        });
    });
    let answered = mark.join().unwrap();
    assert!(answered.status.success(), "{answered:?} {stderr}");
    let (h, rows) = read_csv(&out);
    let (ev, lag) = (
        h.iter().position(|c| c == "event").unwrap(),
        h.iter().position(|c| c == "event_lag_us").unwrap(),
    );
    let row = rows
        .iter()
        .find(|r| r[ev] == "mark:gap")
        .expect("the marker's row");
    // Held at least the 500 ms before the restart.
    let lag: u64 = row[lag].parse().expect("a lag on the held marker's row");
    assert!(lag >= 400_000, "{lag}");
    let s = summary_json(&out);
    assert_eq!(s["phases"][0]["label"], "gap", "{s}");
    assert_eq!(s["phases"][0]["late_boundary"], true, "{s}");
}
