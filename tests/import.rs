//! Reading the files people have today: real psrecord and mprof output and a hand-rolled
//! monitor's CSV (tests/data, see its README), through `memmon summary`.

use crate::util::{memmon, summary_json, tempdir};
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// `summary --json` with extra flags.
fn summary_with(args: &[&str], file: &str) -> serde_json::Value {
    let out = memmon()
        .arg("summary")
        .arg("--json")
        .args(args)
        .arg(data(file))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "summary failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_psrecord_plain_log_gives_its_peak_rounded_to_whole_pages() {
    let s = summary_json(&data("psrecord_plain.txt"));
    // The largest "Real (MB)" is 63.211 MiB = 66281717.76 bytes: 16182 pages of 4 KiB.
    assert_eq!(s["sampled_peak_rss_bytes"], 16182 * 4096);
    assert_eq!(s["sampled_peak_elapsed_s"], 0.402);
    assert_eq!(s["samples"], 18);
    // No kernel peak in the file: null, and the window says why.
    assert_eq!(s["kernel_peak_rss_bytes"], serde_json::Value::Null);
    assert_eq!(s["kernel_peak_window"], "not-recorded");
    assert_eq!(s["sampled_peak_unix_ms"], 0);
}

#[test]
fn a_psrecord_plain_log_with_children_gives_the_tree_peak() {
    let s = summary_json(&data("psrecord_children.txt"));
    // 98.578 MiB = 103366737.9 bytes: 25236 pages.
    assert_eq!(s["sampled_peak_rss_bytes"], 25236 * 4096);
}

#[test]
fn a_psrecord_csv_log_gives_its_exact_peak_and_process_count() {
    let s = summary_json(&data("psrecord_children.csv"));
    // mem_real 98.59375 MiB is exactly 103383040 bytes; nproc 3.
    assert_eq!(s["sampled_peak_rss_bytes"], 103_383_040u64);
    assert_eq!(s["sampled_peak_processes"], 3);
    assert_eq!(s["peak"]["tree_high_bytes"], serde_json::Value::Null);
}

#[test]
fn an_mprof_file_gives_its_peak_and_wall_clock_time() {
    let s = summary_json(&data("mprof_alloc.dat"));
    // MEM 63.257812 MiB: 63.2578125 MiB printed with 6 decimals = 66330624 bytes.
    assert_eq!(s["sampled_peak_rss_bytes"], 66_330_624u64);
    // Its timestamp 1795980241.5771 s.
    assert_eq!(s["sampled_peak_unix_ms"], 1_795_980_241_577u64);
    assert_eq!(s["first_unix_ms"], 1_795_980_241_174u64);
}

#[test]
fn an_mprof_file_with_include_children_gives_the_summed_peak() {
    let s = summary_json(&data("mprof_children.dat"));
    // MEM 96.929688 MiB (already the tree's sum with -C) = 101638144 bytes.
    assert_eq!(s["sampled_peak_rss_bytes"], 101_638_144u64);
}

#[test]
fn an_mprof_multiprocess_file_keeps_the_main_process_and_reports_children() {
    let s = summary_json(&data("mprof_multiprocess.dat"));
    // MEM 43.726562 MiB = 45850624 bytes; the child's CHLD 53.183594 MiB = 55767040 bytes.
    assert_eq!(s["sampled_peak_rss_bytes"], 45_850_624u64);
    // MEM is one number (the main process, or the tree with --include-children), not a sum
    // over it and its CHLD lines: not called a tree's RSS sum over 2 processes.
    assert_eq!(s["sampled_peak_processes"], 0);
    assert_eq!(s["peak"]["scope"], "process", "{s}");
    memmon()
        .arg("summary")
        .arg(data("mprof_multiprocess.dat"))
        .assert()
        .success()
        .stdout(
            contains("sampled RSS of the process")
                .and(contains("RSS sum over").not())
                .and(contains("tree peak").not()),
        );
    let notes = s["warnings"].to_string();
    assert!(notes.contains("PID 12619"), "{notes}");
    assert!(
        notes.contains(&format!("{} bytes", 45_850_624u64 + 55_767_040)),
        "{notes}"
    );
}

#[test]
fn a_hand_rolled_csv_reads_with_declared_columns() {
    let s = summary_with(&["--columns", "unix_ms,rss_kb,-"], "monitor.csv");
    // VmRSS 64932 kB (KiB) at 1795980270688 ms.
    assert_eq!(s["sampled_peak_rss_bytes"], 64932 * 1024);
    assert_eq!(s["sampled_peak_unix_ms"], 1_795_980_270_688u64);
    assert_eq!(s["samples"], 17);
}

#[test]
fn the_input_format_can_be_forced() {
    let s = summary_with(&["--input-format", "psrecord"], "psrecord_children.csv");
    assert_eq!(s["sampled_peak_rss_bytes"], 103_383_040u64);
    let s = summary_with(
        &[
            "--input-format",
            "columns",
            "--columns",
            "unix_ms,-,rss_gib",
        ],
        "monitor.csv",
    );
    // The third column, 0.06 GiB, read as declared: 64424509.44 bytes.
    assert_eq!(s["sampled_peak_rss_bytes"], 64_424_509u64);
}

#[test]
fn a_forced_format_that_does_not_match_names_the_line() {
    memmon()
        .args(["summary", "--input-format", "mprof"])
        .arg(data("psrecord_plain.txt"))
        .assert()
        .code(2)
        .stderr(contains("psrecord_plain.txt:1: unknown line kind '#'"));
}

#[test]
fn a_headerless_csv_without_columns_fails_and_asks_for_them() {
    memmon()
        .arg("summary")
        .arg(data("monitor.csv"))
        .assert()
        .code(2)
        .stderr(contains("this file has no header; declare its columns with --columns, e.g. --columns unix_ms,rss_kb"));
}

#[test]
fn a_csv_with_another_tools_header_fails_and_asks_for_columns() {
    let dir = tempdir();
    let p = dir.path().join("other.csv");
    std::fs::write(&p, "time,rss\n1,2\n").unwrap();
    memmon()
        .arg("summary")
        .arg(&p)
        .assert()
        .code(2)
        .stderr(contains("its header 'time,rss' is not memmon's").and(contains("--columns")));
}

#[test]
fn a_column_without_a_unit_fails_naming_the_column() {
    memmon()
        .args(["summary", "--columns", "unix_ms,rss,-"])
        .arg(data("monitor.csv"))
        .assert()
        .code(2)
        .stderr(contains(
            "column 'rss' has no unit: declare rss_bytes, rss_kb",
        ));
}

#[test]
fn a_malformed_psrecord_line_names_file_and_line() {
    let dir = tempdir();
    let p = dir.path().join("bad.txt");
    let mut text = std::fs::read_to_string(data("psrecord_plain.txt")).unwrap();
    text.push_str("       1.811        0.000       13.2O7       16.172\n");
    std::fs::write(&p, text).unwrap();
    memmon()
        .arg("summary")
        .arg(&p)
        .assert()
        .code(2)
        .stderr(contains(format!(
            "{}:20: Real (MB): '13.2O7' is not a number",
            p.display()
        )));
}

#[test]
fn the_summary_of_an_import_claims_no_kernel_peak_and_no_clock() {
    let out = memmon()
        .arg("summary")
        .arg(data("psrecord_plain.txt"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("a lower bound: a spike between two samples is missed (no kernel high-water mark in this recording)"),
        "{text}"
    );
    assert!(text.contains("at +402 ms (elapsed)"), "{text}");
    assert!(!text.contains("1970"), "{text}");
    assert!(!text.contains("PID 0"), "{text}");
    assert!(text.contains("rounded to the nearest 4 KiB"), "{text}");
}

#[test]
fn an_imported_file_is_not_warned_of_a_killed_recorder_or_of_processes_that_left() {
    // No file of another tool has memmon's end record or VmHWM: neither is missing from it.
    for args in [
        vec!["psrecord_plain.txt"],
        vec!["psrecord_children.csv"],
        vec!["mprof_multiprocess.dat"],
        vec!["--columns", "unix_ms,rss_kb,-", "monitor.csv"],
    ] {
        let (flags, file) = args.split_at(args.len() - 1);
        for sub in ["summary", "report"] {
            let dir = tempdir();
            let mut cmd = memmon();
            cmd.arg(sub).args(flags).arg(data(file[0]));
            if sub == "report" {
                cmd.arg("-o").arg(dir.path().join("r.html"));
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{sub} {args:?}");
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
                + &std::fs::read_to_string(dir.path().join("r.html")).unwrap_or_default();
            assert!(!text.contains("no end record"), "{sub} {args:?}: {text}");
            assert!(!text.contains("killed"), "{sub} {args:?}: {text}");
            assert!(
                !text.contains("processes left with no exit record"),
                "{sub} {args:?}: {text}"
            );
        }
    }
    let s = summary_json(&data("psrecord_children.csv"));
    assert_eq!(s["peak_exact_up_to"], serde_json::Value::Null, "{s}");
    memmon()
        .arg("summary")
        .arg(data("psrecord_children.csv"))
        .assert()
        .success()
        .stdout(contains("unknown, the recording has no high-water marks"));
}
