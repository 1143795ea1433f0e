//! Tests of `memmon compare` on real recordings of workloads with known memory: verdicts,
//! gates and exit codes, JSON, bad input, and `bench -o` recordings counted run by run.

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
                // No cgroup of its own, root or not: the peak compared is the process's VmHWM.
                std::process::Command::new(memmon_path())
                    .args(["record", "-q", "--no-own-cgroup", "-i", "50ms", "-o"])
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
    assert!(stdout.contains("peak rose"), "{stdout}");
    assert!(
        stdout.contains("a regression (above the noise band; the run-to-run spread"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAILED: --max-peak-increase 10%"),
        "{stdout}"
    );
    assert!(
        stderr.contains("gate failed: --max-peak-increase 10%: peak changed by +"),
        "{stderr}"
    );
    assert!(stderr.contains("limit +10%"), "{stderr}");
}

/// A budget is a gate of CI too: a failed `--max-peak` is in the `gates:` section of stdout
/// (beside the `--max-*-increase` gates) and in `--json` (`budgets`, `passed: false`), not only
/// on stderr.
#[test]
fn a_failed_max_peak_is_in_the_gates_section_and_the_json() {
    let f = fixture();
    let args = ["--max-peak-increase", "1GiB", "--max-peak", "60MiB"];
    let out = compare(&args, &f.small[..1], &f.large[..1]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let gates = stdout.split("\ngates:\n").nth(1).unwrap_or_default();
    assert!(
        gates.contains("  passed: --max-peak-increase 1.00 GiB"),
        "{stdout}"
    );
    assert!(
        gates.contains("  FAILED: --max-peak 60.00 MiB exceeded by ")
            && gates.contains("judged the peak of "),
        "{stdout}"
    );
    assert!(
        stderr.contains("budget exceeded: --max-peak 60.00 MiB"),
        "{stderr}"
    );
    // A budget alone makes the section too.
    let out = compare(&["--max-peak", "1GiB"], &f.small[..1], &f.large[..1]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("gates:\n  passed: --max-peak 1.00 GiB kept: judged"),
        "{}",
        text(&out.stdout)
    );
    let out = compare(
        &["--json", "--max-peak", "60MiB"],
        &f.small[..1],
        &f.large[..1],
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["passed"], false, "{v:#}");
    let b = &v["budgets"][0];
    assert_eq!(
        (&b["flag"], &b["passed"]),
        (&"--max-peak".into(), &false.into()),
        "{v:#}"
    );
    assert_eq!(b["budget_bytes"], 60 << 20);
    assert!(b["over_by_bytes"].as_u64().unwrap() > 0, "{v:#}");
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
        .find(|l| l.starts_with("peak ") && !l.starts_with("peak is") && l.contains(':'))
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
    assert!(stdout.contains("peak fell"), "{stdout}");
    assert!(
        stdout.contains("an improvement (below the noise band;"),
        "{stdout}"
    );
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
        stdout.contains("baseline: 1 run from ") && stdout.contains("small1.csv (whole file)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("candidate: 1 run from "), "{stdout}");
    assert!(stdout.contains("one run per side"), "{stdout}");
}

#[test]
fn the_peak_compared_is_the_kernels_for_a_single_process() {
    let f = fixture();
    let out = compare(&[], &f.small[..2], &f.large);
    assert!(
        text(&out.stdout).contains("peak is the kernel's peak of the process"),
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
        assert_eq!(v["peak_basis"], "kernel");
        for key in [
            "peak_bytes",
            "idle_rss_bytes",
            "mean_rss_bytes",
            "duration_s",
            "time_above_s",
        ] {
            for stat in ["count", "mean", "stddev", "min", "max"] {
                assert!(
                    !v[side]["stats"][key][stat].is_null(),
                    "{side}.{key}.{stat}"
                );
            }
            // The same names as bench's stats (analysis/stats.rs); the spread is null for a
            // mean of 0 (no percentage of nothing).
            let stats = v[side]["stats"][key].as_object().unwrap();
            assert!(stats.contains_key("spread_pct"), "{side}.{key}");
            assert!(!stats.contains_key("n"), "{side}.{key}");
        }
    }
    let peak = &v["deltas"][0];
    assert_eq!(peak["metric"], "peak_bytes");
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
fn json_runs_give_the_peak_their_stats_take_and_their_own_peak_apart() {
    let f = fixture();
    // Another tool's log holds no kernel peak: both sides are held on the sampled peak,
    // below the baseline runs' own exact peaks.
    let dir = tempdir();
    let log = dir.path().join("psrecord.txt");
    std::fs::write(
        &log,
        "# Elapsed time   CPU (%)     Real (MB)   Virtual (MB)\n       0.000        0.000       10.000       90.000\n       0.500        0.000       30.000       90.000\n",
    )
    .unwrap();
    let out = compare(&["--json"], &f.small[..2], std::slice::from_ref(&log));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["peak_basis"], "sampled", "{v}");
    for side in ["base", "new"] {
        let runs = v[side]["runs"].as_array().unwrap();
        let peaks: Vec<f64> = runs
            .iter()
            .map(|r| r["peak"]["bytes"].as_f64().unwrap())
            .collect();
        let stats = &v[side]["stats"]["peak_bytes"];
        let mean = peaks.iter().sum::<f64>() / peaks.len() as f64;
        let (min, max) = (
            peaks.iter().copied().fold(f64::MAX, f64::min),
            peaks.iter().copied().fold(0.0, f64::max),
        );
        assert_eq!(stats["min"].as_f64(), Some(min), "{side}: {v}");
        assert_eq!(stats["max"].as_f64(), Some(max), "{side}: {v}");
        assert!(
            (stats["mean"].as_f64().unwrap() - mean).abs() < 1.0,
            "{side}: {v}"
        );
        for r in runs {
            assert_eq!(r["peak"]["source"], "sampled", "{r}");
            assert_eq!(r["peak"]["bytes"], r["sampled_peak_rss_bytes"], "{r}");
        }
    }
    // The baseline's runs had the kernel's exact peak: their own, under its own name.
    for r in v["base"]["runs"].as_array().unwrap() {
        assert_ne!(r["own_peak"]["source"], "sampled", "{r}");
        assert_eq!(r["own_peak"]["exact"], true, "{r}");
        assert!(r["own_peak"]["bytes"].as_u64() >= Some(50 * MIB), "{r}");
    }
    let new = &v["new"]["runs"][0];
    assert_eq!(new["own_peak"], new["peak"], "{new}");
}

/// `memmon bench -n 2 -o OUT [--append] -- memmon-test workload alloc:SIZE hold:150ms`.
fn bench_into(out: &Path, size: &str, append: bool) {
    let mut c = memmon();
    c.args(["bench", "-q", "-n", "2", "-i", "50ms", "-o"])
        .arg(out);
    if append {
        c.arg("--append");
    }
    c.arg("--")
        .args(workload(&[&format!("alloc:{size}"), "hold:150ms"]))
        .assert()
        .success();
}

#[test]
fn a_bench_appended_to_a_plain_recording_leaves_no_session_out_of_its_budget() {
    // A 150 MiB record, then a bench of 30 MiB runs appended: the peak line is the record's,
    // and --max-peak judges it (it judged the runs alone, and passed under the peak line).
    let dir = tempdir();
    let mixed = dir.path().join("mixed.csv");
    record_workload(
        &mixed,
        &["-q", "-i", "50ms"],
        &["alloc:150MiB", "hold:150ms"],
    )
    .assert()
    .success();
    bench_into(&mixed, "30MiB", true);
    let out = memmon()
        .args(["summary", "--max-peak", "100MiB"])
        .arg(&mixed)
        .output()
        .unwrap();
    let said = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let whole = format!("judged the peak of {}, ", mixed.display());
    assert!(
        said.contains("budget exceeded") && said.contains(&whole),
        "{said}"
    );
    assert!(said.contains("#run 1, "), "the runs are judged too: {said}");
    // compare takes the runs and names the session it left out.
    let out = memmon()
        .arg("compare")
        .arg(&mixed)
        .arg(&mixed)
        .output()
        .unwrap();
    let table = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        table.contains("2 runs from ") && table.contains(": session 1 (no bench run in it"),
        "{table}"
    );
}

#[test]
fn appended_benches_keep_their_runs_apart_in_summary_compare_plot_and_report() {
    let dir = tempdir();
    let (one, two) = (dir.path().join("one.csv"), dir.path().join("two.csv"));
    bench_into(&one, "30MiB", false);
    bench_into(&two, "30MiB", false);
    bench_into(&two, "60MiB", true);
    let want = ["s1 run 1", "s1 run 2", "s2 run 1", "s2 run 2"];
    // summary: each run named by its session, in the table and in --json.
    let s = summary_json(&two);
    let labels: Vec<&str> = s["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, want, "{s}");
    assert_eq!(s["runs"][2]["session"], 2, "{s}");
    assert_eq!(s["runs"][2]["run"], 1, "{s}");
    let table = text(&memmon().arg("summary").arg(&two).output().unwrap().stdout);
    assert!(
        table.contains("  s2 run 1 ") && table.contains("sK run N: run N of session K"),
        "{table}"
    );
    // A one-session bench keeps `run N`.
    assert_eq!(summary_json(&one)["runs"][0]["label"], "run 1");
    // compare: four candidate runs, none merged, each named; budgets judge each.
    let out = memmon()
        .args(["compare", "--json", "--max-peak", "45MiB"])
        .arg(&one)
        .arg(&two)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files: Vec<String> = v["new"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["file"].as_str().unwrap().to_string())
        .collect();
    let two_name = two.display().to_string();
    assert_eq!(
        files,
        want.map(|l| format!("{two_name}#{l}")),
        "{}",
        v["new"]["runs"]
    );
    assert_eq!(v["new"]["stats"]["peak_bytes"]["count"], 4);
    assert_eq!(v["new"]["recordings"][0]["runs"], 4);
    let stderr = text(&out.stderr);
    for l in want {
        let judged = format!("judged the peak of {two_name}#{l},");
        assert_eq!(stderr.matches(&judged).count(), 1, "{l}: {stderr}");
    }
    let rows = text(
        &memmon()
            .arg("compare")
            .arg(&one)
            .arg(&two)
            .output()
            .unwrap()
            .stdout,
    );
    assert!(rows.contains("two.csv#s2 run 2"), "{rows}");
    // plot and report name the runs the same way.
    let svg = dir.path().join("two.svg");
    memmon()
        .args(["plot", "-o"])
        .arg(&svg)
        .arg(&two)
        .assert()
        .success();
    let image = std::fs::read_to_string(&svg).unwrap();
    assert!(image.contains("s2 run 1 start") && image.contains("s1 run 2 end"));
    let html = dir.path().join("two.html");
    let page = report_html(&two, &html);
    assert!(page.contains("s2 run-start:1") && page.contains("s2 run 1"));
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

/// Two `memmon bench -o` recordings against the test daemon, 3 runs each, sampled every second
/// (so each run is its run-start and run-end rows): the baseline's client asks for 40 MiB, the
/// candidate's for 80 MiB.
struct BenchFixture {
    base: PathBuf,
    new: PathBuf,
}

const BENCH_BASE_SIZE: u64 = 40 * MIB;

fn bench_fixture() -> &'static BenchFixture {
    static F: OnceLock<BenchFixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("compare-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (socket, pidfile) = (dir.join("d.sock"), dir.join("d.pid"));
        let mut daemon = std::process::Command::new(memmon_test_path())
            .arg("test-daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--pidfile")
            .arg(&pidfile)
            .spawn()
            .unwrap();
        assert!(
            wait_for(5.0, || pidfile.exists()),
            "the test daemon did not start"
        );
        let bench = |out: &Path, size: &str| {
            memmon()
                .args(["bench", "-q", "-n", "3", "-i", "1s", "--pidfile"])
                .arg(&pidfile)
                .arg("-o")
                .arg(out)
                .arg("--")
                .arg(memmon_test_path())
                .args(["test-client", "--socket"])
                .arg(&socket)
                .args(["--size", size])
                .output()
                .unwrap()
        };
        let (base, new) = (dir.join("bench-base.csv"), dir.join("bench-new.csv"));
        let outs = [bench(&base, "40MiB"), bench(&new, "80MiB")];
        let _ = daemon.kill();
        let _ = daemon.wait();
        for out in outs {
            assert!(out.status.success(), "bench failed: {}", text(&out.stderr));
        }
        BenchFixture { base, new }
    })
}

/// As in tests/bench.rs: the daemon's own small allocations while serving, plus the kernel's
/// per-CPU batching of RSS counters (up to max(32, 2 × CPUs) pages per CPU).
fn bench_tolerance() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    MIB + cpus * 32.max(2 * cpus) * 4096
}

fn compare_json(args: &[&str], base: &Path, new: &Path) -> serde_json::Value {
    let out = memmon()
        .arg("compare")
        .arg("--json")
        .args(args)
        .arg(base)
        .arg(new)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_bench_recording_counts_as_one_run_per_bench_run_with_its_own_kernel_peak() {
    let f = bench_fixture();
    let v = compare_json(&[], &f.base, &f.new);
    for (side, path, size) in [
        ("base", &f.base, BENCH_BASE_SIZE),
        ("new", &f.new, 2 * BENCH_BASE_SIZE),
    ] {
        let runs = v[side]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3, "{side}: {runs:?}");
        assert_eq!(v[side]["recordings"][0]["split"], "bench-runs");
        assert_eq!(v[side]["recordings"][0]["runs"], 3);
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(r["run"], i as u64 + 1);
            assert_eq!(
                r["file"].as_str().unwrap(),
                format!("{}#run {}", path.display(), i + 1)
            );
            assert_eq!(r["peak"]["source"], "vmhwm", "{r}");
            // The idle floor of a bench run is the daemon's RSS at its start.
            let (peak, floor) = (
                r["peak"]["bytes"].as_u64().unwrap(),
                r["idle_rss_bytes"].as_u64().unwrap(),
            );
            assert!(
                peak.abs_diff(floor + size) <= bench_tolerance(),
                "{side} run {}: peak {peak}, floor {floor} + {size}",
                i + 1
            );
        }
    }
}

#[test]
fn a_bench_recording_header_says_how_many_runs_came_from_it() {
    let f = bench_fixture();
    let out = memmon()
        .arg("compare")
        .arg(&f.base)
        .arg(&f.new)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let head: Vec<&str> = stdout.lines().take(2).collect();
    assert!(
        head[0].starts_with("baseline: 3 runs from ")
            && head[0].ends_with("bench-base.csv (bench runs)"),
        "{stdout}"
    );
    assert!(
        head[1].starts_with("candidate: 3 runs from ")
            && head[1].ends_with("bench-new.csv (bench runs)"),
        "{stdout}"
    );
    assert!(stdout.contains("bench-new.csv#run 3"), "{stdout}");
}

#[test]
fn bench_runs_of_twice_the_memory_are_a_regression_that_fails_the_gate() {
    let f = bench_fixture();
    let out = memmon()
        .args(["compare", "--max-peak-increase", "10%"])
        .arg(&f.base)
        .arg(&f.new)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let peak = stdout
        .lines()
        .find(|l| l.starts_with("peak rose"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        peak.contains("a regression (above the noise band; the run-to-run spread"),
        "{peak}"
    );
    assert!(
        stdout.contains("FAILED: --max-peak-increase 10%"),
        "{stdout}"
    );
    // The change of the means is the 40 MiB more each run asked for.
    let v = compare_json(&[], &f.base, &f.new);
    let change = v["deltas"][0]["change"].as_f64().unwrap();
    assert!(
        (change - BENCH_BASE_SIZE as f64).abs() <= 2.0 * bench_tolerance() as f64,
        "peak change {change} bytes, expected ~40 MiB"
    );
}

#[test]
fn whole_files_counts_each_bench_recording_as_one_run() {
    let f = bench_fixture();
    let v = compare_json(&["--whole-files"], &f.base, &f.new);
    for side in ["base", "new"] {
        assert_eq!(v[side]["runs"].as_array().unwrap().len(), 1, "{side}");
        assert_eq!(v[side]["recordings"][0]["split"], "whole-file");
        assert!(v[side]["runs"][0]["run"].is_null());
    }
    let out = memmon()
        .args(["compare", "--whole-files"])
        .arg(&f.base)
        .arg(&f.new)
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("bench-base.csv (whole file)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn two_idle_attached_recordings_of_a_daemon_whose_old_peak_grew_pass_a_2pct_gate() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "100MiB");
    let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
    d.record(&a, "1s", &[]);
    // A bigger spike between the recordings: neither recording saw it.
    d.spike("200MiB");
    d.record(&b, "1s", &[]);
    let out = memmon()
        .args(["compare", "--json", "--max-peak-increase", "2%"])
        .arg(&a)
        .arg("--")
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for side in ["base", "new"] {
        assert_eq!(v["peak_basis"], "sampled", "{v}");
        assert_eq!(
            v[side]["runs"][0]["kernel_peak_rss_bytes"],
            serde_json::Value::Null
        );
    }
}

#[test]
fn one_file_without_a_separator_is_one_file_not_one_files() {
    let f = fixture();
    memmon()
        .arg("compare")
        .arg(&f.small[0])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "1 file and nothing to compare it with: give BASE NEW",
        ));
}

#[test]
fn a_budget_judges_the_candidates_own_peak_whatever_the_baselines_kind() {
    // A tree with its own cgroup: its peak is the cgroup's exact one, below the sampled sum of
    // RSS (shared pages counted in each process). Against another tool's log the comparison's
    // basis is the sampled peak, but --max-peak judges what `summary --max-peak` judges.
    let dir = tempdir();
    let (cand, log) = (dir.path().join("tree.csv"), dir.path().join("ps.txt"));
    record_workload(
        &cand,
        &["-q", "-i", "50ms"],
        &[
            "alloc:30MiB",
            "children:2:40MiB:300ms",
            "wait-children",
            "hold:100ms",
        ],
    )
    .assert()
    .success();
    std::fs::write(
        &log,
        "# Elapsed time   CPU (%)     Real (MB)   Virtual (MB)\n       0.000        0.000       10.000       90.000\n       0.500        0.000       30.000       90.000\n",
    )
    .unwrap();
    let peak = summary_json(&cand)["peak"]["bytes"].as_u64().unwrap();
    for (budget, code) in [(peak, 0), (peak - 1, 1)] {
        let flag = format!("{budget}B");
        memmon()
            .args(["summary", "--max-peak", &flag])
            .arg(&cand)
            .assert()
            .code(code);
        let out = compare(
            &["--max-peak", &flag],
            std::slice::from_ref(&log),
            std::slice::from_ref(&cand),
        );
        assert_eq!(
            out.status.code(),
            Some(code),
            "--max-peak {flag}: {}",
            text(&out.stderr)
        );
    }
}
