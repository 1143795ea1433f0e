//! Helpers shared by the integration tests: the memmon binary, temp dirs, workloads.

#![allow(dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

pub const MIB: u64 = 1 << 20;

/// The memmon binary under test.
pub fn memmon() -> Command {
    Command::cargo_bin("memmon").unwrap()
}

/// The path of the memmon binary, for spawning it with std::process.
pub fn memmon_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("memmon")
}

/// The path of `memmon-test` (src/bin/memmon-test/): the workload, test daemon and test client.
pub fn memmon_test_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("memmon-test")
}

/// The arguments that run a workload of known memory (see src/workload.rs).
pub fn workload(steps: &[&str]) -> Vec<String> {
    let mut v = vec![memmon_test_path().display().to_string(), "workload".to_string()];
    v.extend(steps.iter().map(|s| s.to_string()));
    v
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Reads `summary --json` of a recording.
pub fn summary_json(path: &Path) -> serde_json::Value {
    let out = memmon()
        .arg("summary")
        .arg("--json")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "summary failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Reads a CSV recording with the csv crate (no options): header and rows.
pub fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let headers = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    (headers, rows)
}

/// Column `name` of every row, as integers.
pub fn column(path: &Path, name: &str) -> Vec<u64> {
    let (h, rows) = read_csv(path);
    let i = h
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    rows.iter().filter_map(|r| r[i].parse().ok()).collect()
}

/// Waits up to `secs` for `cond`.
pub fn wait_for(secs: f64, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    while std::time::Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// `memmon record FLAGS -o OUT -- memmon-test workload STEPS`, ready to run and assert on.
pub fn record_workload(out: &Path, flags: &[&str], steps: &[&str]) -> Command {
    let mut c = memmon();
    c.arg("record")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg("--")
        .args(workload(steps));
    c
}
