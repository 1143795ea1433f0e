//! Tests of `memmon compare` on real recordings of workloads with known memory: verdicts,
//! gates and exit codes, JSON, and bad input.

use crate::util::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Recordings made once for all tests here: four runs holding 50 MiB, two holding 120 MiB.
struct Fixture {
    small: Vec<PathBuf>,
    large: Vec<PathBuf>,
    dir: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("compare-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let jobs: Vec<(PathBuf, &str)> = (1..=4)
            .map(|i| (dir.join(format!("small{i}.csv")), "alloc:50MiB"))
            .chain((1..=2).map(|i| (dir.join(format!("large{i}.csv")), "alloc:120MiB")))
            .collect();
        // All six at once: each takes about 0.7 s.
        let children: Vec<_> = jobs
            .iter()
            .map(|(path, alloc)| {
                std::process::Command::new(memmon_path())
                    .args(["record", "-q", "-i", "50ms", "-o"])
                    .arg(path)
                    .arg("--")
                    .args(workload(&[alloc, "hold:600ms"]))
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success(), "a recording failed");
        }
        let (small, large) = jobs.into_iter().map(|(p, _)| p).partition(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("small")
        });
        Fixture { small, large, dir }
    })
}

fn compare(args: &[&str], base: &[PathBuf], new: &[PathBuf]) -> std::process::Output {
    memmon()
        .arg("compare")
        .args(args)
        .args(base)
        .arg("--")
        .args(new)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_peak_regression_beyond_its_gate_exits_1_and_names_the_limit() {
    let f = fixture();
    let out = compare(&["--max-peak-increase", "10%"], &f.small[..2], &f.large);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("peak RSS rose"), "{stdout}");
    assert!(
        stdout.contains("a regression beyond the run-to-run spread"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAILED: --max-peak-increase 10%"),
        "{stdout}"
    );
    assert!(
        stderr.contains("gate failed: --max-peak-increase 10%: peak RSS changed by +"),
        "{stderr}"
    );
    assert!(stderr.contains("limit +10%"), "{stderr}");
}

#[test]
fn an_absolute_size_gate_fails_when_the_peak_rises_more_than_it() {
    let f = fixture();
    let out = compare(
        &["--max-peak-increase", "32MiB"],
        &f.small[..1],
        &f.large[..1],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("limit +32.00 MiB"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_same_workload_on_both_sides_is_within_noise_and_passes_its_gate() {
    let f = fixture();
    let out = compare(
        &["--max-peak-increase", "10%"],
        &f.small[..2],
        &f.small[2..],
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let peak = stdout
        .lines()
        .find(|l| l.starts_with("peak RSS ") && l.contains(':'))
        .unwrap();
    assert!(peak.contains("within noise"), "{peak}");
    assert!(
        stdout.contains("passed: --max-peak-increase 10%"),
        "{stdout}"
    );
}

#[test]
fn a_lower_peak_is_called_an_improvement() {
    let f = fixture();
    let out = compare(&[], &f.large, &f.small[..2]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("peak RSS fell"), "{stdout}");
    assert!(stdout.contains("an improvement beyond"), "{stdout}");
}

#[test]
fn two_files_without_a_separator_compare_one_run_each() {
    let f = fixture();
    let out = memmon()
        .arg("compare")
        .arg(&f.small[0])
        .arg(&f.large[0])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("baseline: 1 run; candidate: 1 run"),
        "{stdout}"
    );
    assert!(stdout.contains("one run per side"), "{stdout}");
}

#[test]
fn the_peak_compared_is_the_kernels_for_a_single_process() {
    let f = fixture();
    let out = compare(&[], &f.small[..2], &f.large);
    assert!(
        text(&out.stdout).contains("kernel's exact peak (VmHWM)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn json_has_per_side_stats_deltas_verdicts_and_gates() {
    let f = fixture();
    let out = compare(
        &["--json", "--max-idle-increase", "1GiB", "--above", "100MiB"],
        &f.small[..2],
        &f.large,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for side in ["base", "new"] {
        assert_eq!(v[side]["runs"].as_array().unwrap().len(), 2);
        assert_eq!(v[side]["peak_source"], "kernel");
        for key in [
            "peak_rss_bytes",
            "idle_rss_bytes",
            "mean_rss_bytes",
            "duration_s",
            "time_above_s",
        ] {
            for stat in ["n", "mean", "min", "max"] {
                assert!(
                    !v[side]["stats"][key][stat].is_null(),
                    "{side}.{key}.{stat}"
                );
            }
        }
    }
    let peak = &v["deltas"][0];
    assert_eq!(peak["metric"], "peak_rss_bytes");
    assert_eq!(peak["verdict"], "regression");
    let change = peak["change"].as_f64().unwrap();
    assert!(
        (60.0..80.0).contains(&(change / MIB as f64)),
        "peak change {change} bytes, expected ~70 MiB"
    );
    assert_eq!(v["gates"][0]["flag"], "--max-idle-increase");
    assert_eq!(v["gates"][0]["passed"], true);
    assert_eq!(v["passed"], true);
    // The 120 MiB runs held above 100 MiB for most of their 0.6 s; the 50 MiB runs never.
    let above = v["deltas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metric"] == "time_above_s")
        .unwrap();
    assert_eq!(above["base"]["max"], 0.0);
    assert!(above["new"]["mean"].as_f64().unwrap() > 0.4, "{above}");
}

#[test]
fn a_malformed_recording_exits_2_naming_the_file_and_line() {
    let f = fixture();
    let bad = f.dir.join("bad.csv");
    let text_in = std::fs::read_to_string(&f.small[0]).unwrap();
    let mut lines: Vec<&str> = text_in.lines().collect();
    lines[2] = "1771372328313,not-a-number";
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let out = compare(&[], &f.small[..1], std::slice::from_ref(&bad));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:3:", bad.display())),
        "{stderr}"
    );
}

#[test]
fn a_missing_file_is_bad_input_not_a_regression() {
    let f = fixture();
    let out = compare(&[], &f.small[..1], &[f.dir.join("no-such.csv")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no-such.csv"));
}

#[test]
fn a_gate_that_is_neither_percent_nor_size_is_refused() {
    let f = fixture();
    let out = compare(
        &["--max-peak-increase", "lots"],
        &f.small[..1],
        &f.large[..1],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("give a percentage (2%) or a size (512MiB)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn flags_after_the_separator_are_named_as_a_mistake() {
    let f = fixture();
    let out = memmon()
        .arg("compare")
        .arg(&f.small[0])
        .arg("--")
        .arg(&f.large[0])
        .args(["--max-peak-increase", "10%"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("put flags before `--`"),
        "{}",
        text(&out.stderr)
    );
}
