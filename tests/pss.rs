//! `--pss`: what a recording says of its PSS reads — a peak only when the reads cover it, the
//! last read taken when the recording stops, and the processes whose PSS was not read.

use crate::util::*;
use std::os::unix::process::CommandExt;
use std::process::{Command as StdCommand, Stdio};
use std::time::Duration;

#[test]
fn one_pss_read_at_idle_is_not_called_a_peak() {
    let dir = tempdir();
    let out = dir.path().join("short.csv");
    // A new RSS high asks for a read at most every tenth of --pss-every: with an hour, a command
    // of a second gets one read, at its first sample, before its 40 MiB, however slowly a busy
    // machine runs it.
    record_workload(
        &out,
        &["-i", "50ms", "--pss", "--pss-every", "1h"],
        &["hold:400ms", "alloc:40MiB", "hold:300ms"],
    )
    .assert()
    .success();
    let text = summary_text(&out);
    assert!(text.contains("(1 read at +"), "{text}");
    assert!(text.contains("PSS at idle"), "{text}");
    assert!(!text.contains("peak PSS"), "{text}");
    let json = summary_json(&out);
    assert!(json["peak_pss_bytes"].is_null(), "{json}");
    assert_eq!(json["pss"]["reads"], 1);
    assert_eq!(json["pss"]["is_peak"], false);
}

#[test]
fn a_new_rss_high_is_read_so_the_largest_pss_is_the_peaks() {
    let dir = tempdir();
    let out = dir.path().join("high.csv");
    // A read at the first sample, then the 100 MiB: a new high, more than 5% above, 200 ms (a
    // tenth of --pss-every) after the first read: read at once, without waiting 2 s.
    record_workload(
        &out,
        &["-i", "50ms", "--pss", "--pss-every", "2s"],
        &["hold:300ms", "alloc:100MiB", "hold:1000ms"],
    )
    .assert()
    .success();
    let json = summary_json(&out);
    assert_eq!(json["pss"]["is_peak"], true, "{json}");
    assert!(
        json["peak_pss_bytes"].as_u64().unwrap() >= 100 * MIB,
        "{json}"
    );
    assert!(summary_text(&out).contains("peak PSS"));
}

#[test]
fn stopping_a_recording_reads_pss_once_more_so_the_reads_cover_it() {
    let dir = tempdir();
    let out = dir.path().join("stopped.csv");
    let argv = workload(&["alloc:30MiB", "hold:60s"]);
    let mut target = StdCommand::new(&argv[0]).args(&argv[1..]).spawn().unwrap();
    let pid = target.id().to_string();
    let rec = StdCommand::new(memmon_path())
        .args([
            "record",
            "--pid",
            &pid,
            "-i",
            "100ms",
            "--pss",
            "--pss-every",
            "1h",
            "-o",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A few rows (the 30 MiB is touched before the workload's first hold), then the stop.
    assert!(wait_for(20.0, || std::fs::read_to_string(&out)
        .is_ok_and(|t| t.matches('\n').count() >= 5)));
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill takes plain integers and touches no memory.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let printed = rec.wait_with_output().unwrap();
    let _ = target.kill();
    let _ = target.wait();
    let stderr = String::from_utf8_lossy(&printed.stderr);
    let pss = column(&out, "pss_bytes");
    // The read at the first sample (possibly before the 30 MiB) and the one at the stop.
    assert_eq!(pss.len(), 2, "{pss:?}");
    assert!(*pss.last().unwrap() > 30 * MIB, "{pss:?}");
    assert!(stderr.contains("peak PSS"), "{stderr}");
    let json = summary_json(&out);
    assert_eq!(json["pss"]["is_peak"], true, "{json}");
    assert!(json["peak_pss_bytes"].as_u64().unwrap() > 30 * MIB);
}

#[test]
fn processes_over_the_pss_guard_are_listed_as_unread() {
    let dir = tempdir();
    let out = dir.path().join("guard.csv");
    let run = record_workload(
        &out,
        &[
            "-i",
            "50ms",
            "--pss",
            "--pss-every",
            "100ms",
            "--pss-max-rss",
            "16MiB",
        ],
        &["children:2:40MiB:800ms"],
    )
    .assert()
    .success();
    let stderr = String::from_utf8_lossy(&run.get_output().stderr).to_string();
    assert!(stderr.contains("over --pss-max-rss 16.00 MiB"), "{stderr}");
    let json = summary_json(&out);
    let unread = json["end"]["pss_unread"].as_array().unwrap();
    assert!(!unread.is_empty(), "{json}");
    assert!(
        unread.iter().all(|u| u["reason"] == "over-max-rss"),
        "{json}"
    );
    let text = summary_text(&out);
    assert!(text.contains("skipped, RSS over --pss-max-rss"), "{text}");
}

#[test]
fn refused_pss_reads_are_said_in_the_summary() {
    // memmon as `nobody` may read a root process's status but not its smaps_rollup. Run by a
    // user other than root, memmon gets the same refusal from PID 1 (root's).
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let dir = tempdir();
    let out = dir.path().join("refused.csv");
    let mut target = StdCommand::new("sleep").arg("60").spawn().unwrap();
    let pid = if root {
        target.id().to_string()
    } else {
        "1".into()
    };
    // A copy nobody can run wherever the build is (a home directory may be closed to it).
    let exe = dir.path().join("memmon");
    std::fs::copy(memmon_path(), &exe).unwrap();
    let mut cmd = StdCommand::new(if root { exe } else { memmon_path() });
    cmd.args(["record", "--pid", &pid, "-i", "100ms"])
        .args(["--pss", "--pss-every", "100ms", "--duration", "600ms", "-o"])
        .arg(&out);
    if root {
        std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
        cmd.uid(65534).gid(65534);
    }
    // A test running beside this one may fork while the copy's write descriptor is open (until
    // its child execs): exec then fails with ETXTBSY for a moment. Try again.
    let run = (0..50)
        .find_map(|_| match cmd.output() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(100));
                None
            }
            r => Some(r.unwrap()),
        })
        .expect("the copy of memmon stayed busy (ETXTBSY) for 5 s");
    let _ = target.kill();
    let _ = target.wait();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("permission denied"), "{stderr}");
    let json = summary_json(&out);
    assert_eq!(json["end"]["pss_unread"][0]["reason"], "refused", "{json}");
    assert!(json["pss"].is_null(), "{json}");
    let text = summary_text(&out);
    assert!(
        text.contains("smaps_rollup refused (permission denied)"),
        "{text}"
    );
}

#[test]
fn bench_runs_of_a_tree_show_pss_beside_rss_sums_that_say_they_count_shared_pages_in_each() {
    let dir = tempdir();
    let json_out = dir.path().join("bench.json");
    let csv_out = dir.path().join("bench.csv");
    let md_out = dir.path().join("bench.md");
    let run = memmon()
        .args([
            "bench",
            "-n",
            "2",
            "-i",
            "20ms",
            "--pss",
            "--pss-every",
            "50ms",
        ])
        .arg("--export-json")
        .arg(&json_out)
        .arg("--export-csv")
        .arg(&csv_out)
        .arg("--export-markdown")
        .arg(&md_out)
        .arg("--")
        .args(workload(&["children:2:30MiB:600ms"]))
        .assert()
        .success();
    let table = String::from_utf8_lossy(&run.get_output().stdout).to_string();
    assert!(
        table.contains("processes, shared pages counted in each; counted once: PSS"),
        "{table}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    for r in report["runs"].as_array().unwrap() {
        assert!(r["max_processes"].as_u64().unwrap() >= 3, "{r}");
        assert!(r["pss"]["reads"].as_u64().unwrap() >= 2, "{r}");
        // Two children of 30 MiB each, their own pages: PSS sees both.
        assert!(
            r["pss"]["largest_bytes"].as_u64().unwrap() > 60 * MIB,
            "{r}"
        );
    }
    let (head, rows) = read_csv(&csv_out);
    let i = head.iter().position(|h| h == "pss_bytes").unwrap();
    assert!(rows.iter().all(|r| r[i].parse::<u64>().unwrap() > 60 * MIB));
    let md = std::fs::read_to_string(&md_out).unwrap();
    assert!(
        md.contains("shared pages counted in each") && md.contains(" PSS |"),
        "{md}"
    );
}
