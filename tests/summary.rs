//! Tests of `memmon summary` over recordings.

use crate::util::*;
use predicates::prelude::*;
use std::path::Path;

fn recording(dir: &std::path::Path) -> std::path::PathBuf {
    let out = dir.join("r.csv");
    record_workload(&out, &["-q", "-i", "50ms"], &["alloc:40MiB", "hold:300ms"])
        .assert()
        .success();
    out
}

#[test]
fn json_has_the_documented_keys() {
    let dir = tempdir();
    let s = summary_json(&recording(dir.path()));
    for key in [
        "peak",
        "sampled_peak_rss_bytes",
        "sampled_peak_unix_ms",
        "sampled_peak_elapsed_s",
        "kernel_peak_rss_bytes",
        "idle_rss_bytes",
        "samples",
        "duration_s",
        "missed_ticks",
    ] {
        assert!(!s[key].is_null(), "missing {key}: {s}");
    }
}

/// Every JSON document for scripts opens with its kind and schema version (docs/FORMAT.md, "JSON
/// outputs"): `summary --json` (each of several), `compare --json`, `bench --export-json`.
#[test]
fn each_json_output_opens_with_its_format_and_schema_version() {
    let dir = tempdir();
    let r = recording(dir.path());
    // The text as printed, without its whitespace, opens with `{"format":...,"schema_version":1,`
    // (or `[` and that): how many documents do.
    let opens = |b: &[u8], f: &str| {
        let t: String = String::from_utf8_lossy(b)
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let head = format!("{{\"format\":\"{f}\",\"schema_version\":1,");
        assert!(
            t.starts_with(&head) || t.starts_with(&format!("[{head}")),
            "{t}"
        );
        t.matches(&head).count()
    };
    let json = |args: &[&std::path::Path], sub: &str| {
        let out = memmon().args([sub, "--json"]).args(args).output().unwrap();
        out.stdout
    };
    assert_eq!(opens(&json(&[&r], "summary"), "memmon-summary"), 1);
    assert_eq!(
        opens(&json(&[&r, &r], "summary"), "memmon-summary"),
        2,
        "each of a list"
    );
    assert_eq!(opens(&json(&[&r, &r], "compare"), "memmon-comparison"), 1);
    let export = dir.path().join("bench.json");
    memmon()
        .args(["bench", "-q", "-n", "1", "--export-json"])
        .arg(&export)
        .args(["--", "true"])
        .assert()
        .success();
    assert_eq!(opens(&std::fs::read(&export).unwrap(), "memmon-bench"), 1);
}

#[test]
fn human_units_state_their_base() {
    let dir = tempdir();
    memmon()
        .arg("summary")
        .arg(recording(dir.path()))
        .assert()
        .success()
        .stdout(predicate::str::contains("MiB").and(predicate::str::contains("bytes)")));
}

#[test]
fn a_truncated_last_line_is_tolerated_and_mentioned() {
    let dir = tempdir();
    let out = recording(dir.path());
    let text = std::fs::read_to_string(&out).unwrap();
    let cut = &text[..text.len() - 9];
    std::fs::write(&out, cut).unwrap();
    let lines = cut.lines().count();
    memmon()
        .arg("summary")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "line {lines} is incomplete"
        )));
}

#[test]
fn a_malformed_line_names_the_file_and_line() {
    let dir = tempdir();
    let out = recording(dir.path());
    let mut lines: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines[2] = "12,oops,3".to_string();
    std::fs::write(&out, lines.join("\n") + "\n").unwrap();
    memmon()
        .arg("summary")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!("{}:3:", out.display())));
}

#[test]
fn a_missing_file_is_a_clear_error() {
    memmon()
        .args(["summary", "/nonexistent/run.csv"])
        .assert()
        .code(2) // as from compare, plot and report
        .stderr(predicate::str::contains("/nonexistent/run.csv"));
}

#[test]
fn an_empty_file_is_a_clear_error() {
    let dir = tempdir();
    let p = dir.path().join("empty.csv");
    std::fs::write(&p, "").unwrap();
    memmon()
        .arg("summary")
        .arg(&p)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is empty"));
}

#[test]
fn several_files_give_a_json_list() {
    let dir = tempdir();
    let a = recording(dir.path());
    let b = dir.path().join("b.csv");
    std::fs::copy(&a, &b).unwrap();
    let out = memmon()
        .args(["summary", "--json"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
}

#[test]
fn the_summary_of_a_file_matches_the_one_printed_when_recording() {
    let dir = tempdir();
    let out = dir.path().join("same.csv");
    let rec = record_workload(&out, &["-i", "50ms"], &["alloc:25MiB", "hold:300ms"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(rec.stderr).unwrap();
    let peak_line = stderr
        .lines()
        .find(|l| l.contains("sampled peak"))
        .unwrap()
        .trim()
        .to_string();
    let summary = memmon().arg("summary").arg(&out).output().unwrap();
    assert!(String::from_utf8(summary.stdout)
        .unwrap()
        .contains(&peak_line));
}

#[test]
fn a_recording_from_before_the_peak_window_keys_still_summarizes_and_says_what_it_lacks() {
    let dir = tempdir();
    let out = dir.path().join("old.csv");
    record_workload(&out, &["-q", "-i", "50ms"], &["alloc:30MiB", "hold:300ms"])
        .assert()
        .success();
    // An older memmon wrote neither `peak_reset_at_start` nor `online_cpus`.
    let side = dir.path().join("old.csv.meta.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&side).unwrap()).unwrap();
    let obj = m.as_object_mut().unwrap();
    assert!(obj.remove("peak_reset_at_start").is_some());
    assert!(obj.remove("online_cpus").is_some());
    std::fs::write(&side, serde_json::to_string(&m).unwrap()).unwrap();
    let s = summary_json(&out);
    assert!(
        s["kernel_peak_rss_bytes"].as_u64().unwrap() >= 30 * MIB,
        "{s}"
    );
    assert_eq!(s["kernel_peak_window"], "launched");
    assert_eq!(s["exact_within_bytes"], serde_json::Value::Null);
    memmon()
        .arg("summary")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "exact within the kernel's per-CPU batching",
        ));
}

#[test]
fn rows_cut_from_a_finished_recording_are_said_by_every_reader_and_its_peak_is_not_exact() {
    let dir = tempdir();
    // Attached, its marks reset at the start, stopped while the target still runs: the peak
    // is in the rows (their VmHWM), not in the end record.
    let mut target = spawn_workload(&["alloc:20MiB", "hold:1s", "alloc:60MiB", "hold:3s"]);
    let whole = dir.path().join("whole.csv");
    memmon()
        .args([
            "record",
            "-q",
            "--reset-peaks",
            "--duration",
            "2500ms",
            "-i",
            "100ms",
        ])
        .args(["--pid", &target.id().to_string(), "-o"])
        .arg(&whole)
        .assert()
        .success();
    let _ = target.kill();
    let _ = target.wait();
    let hwm = column(&whole, "hwm_bytes");
    let at_peak = hwm
        .iter()
        .position(|&h| h == *hwm.iter().max().unwrap())
        .unwrap();
    assert!(at_peak > 1, "the peak came at row {at_peak}: {hwm:?}");
    // The rows from the peak's on cut (as `head -n -K` does), the sidecar kept.
    let cut = dir.path().join("cut.csv");
    let text = std::fs::read_to_string(&whole).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&cut, lines[..1 + at_peak].join("\n") + "\n").unwrap();
    std::fs::copy(
        dir.path().join("whole.csv.meta.json"),
        dir.path().join("cut.csv.meta.json"),
    )
    .unwrap();
    let said = format!(
        "cut.csv holds {at_peak} rows, but its sidecar's end record counts {}: {} rows lost",
        hwm.len(),
        hwm.len() - at_peak
    );
    let s = summary_json(&cut);
    assert!(warns(&s, &said), "{}", s["warnings"]);
    assert_eq!(s["peak"]["exact"], false, "{}", s["peak"]);
    assert_eq!(s["rows_lost"], true);
    assert!(
        s["peak"]["bytes"].as_u64() < hwm.iter().max().copied(),
        "{}",
        s["peak"]
    );
    let w = summary_json(&whole);
    assert_eq!(w["peak"]["exact"], true, "{}", w["peak"]);
    assert!(w.get("rows_lost").is_none());
    let out = memmon().arg("summary").arg(&cut).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("exact only up to the last row left") && text.contains(&said),
        "{text}"
    );
    // compare (its text and each run's warnings), plot and report say it too.
    let out = memmon()
        .arg("compare")
        .arg(&whole)
        .arg(&cut)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&said));
    let out = memmon()
        .args(["compare", "--json"])
        .arg(&whole)
        .arg(&cut)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        warns(&v["new"]["runs"][0], &said),
        "{}",
        v["new"]["runs"][0]
    );
    assert_eq!(v["new"]["runs"][0]["own_peak"]["exact"], false);
    let svg = dir.path().join("cut.svg");
    let out = memmon()
        .args(["plot", "-o"])
        .arg(&svg)
        .arg(&cut)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&said));
    let html = dir.path().join("cut.html");
    let out = memmon()
        .args(["report", "-o"])
        .arg(&html)
        .arg(&cut)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&said));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(&said.replace('\'', "&#39;")));
}

#[test]
fn a_command_that_ended_before_its_first_sample_keeps_its_cgroups_part() {
    // tests/data/rowless_own_cgroup.csv: a real recording (`record -i 50ms --own-cgroup`, cgroup
    // v1) of a command that made two cgroups inside memmon's own, left a process in one and
    // exited before the first sample: a header, and its end record in the metadata. Its
    // cgroup's part (the peak, what was removed with it) comes from that end record alone.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rowless_own_cgroup.csv");
    let text = summary_text(&data);
    for line in [
        "  cgroup peak   1.15 MiB (1204224 bytes) (exact, memory.max_usage_in_bytes",
        "(the command ended before its first sample)",
        "note: the command made 2 cgroups inside memmon's own: removed with it, deepest first, killing 1 process left in them",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
}
