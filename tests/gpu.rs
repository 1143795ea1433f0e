//! GPU memory without a GPU: memmon's fake GPU source (`MEMMON_TEST_FAKE_GPU=FILE`, honoured
//! only in test builds) reports GPUs and per-PID memory for real processes the tests start;
//! the file is read again at every GPU reading, so a test changes it while memmon records.

use crate::util::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;
const FAKE: &str = "MEMMON_TEST_FAKE_GPU";

/// Two GPUs: `pid` holds `bytes` on GPU 0; PID 1 (not in any tree a test watches) holds 1 GiB
/// on GPU 1, which must not be counted.
fn fake_json(pid: &str, bytes: u64, extra: &str) -> String {
    format!(
        r#"{{"devices":[
  {{"index":0,"uuid":"GPU-fake-0","name":"Fake H200","used_bytes":{used0},"total_bytes":{total}}},
  {{"index":1,"uuid":"GPU-fake-1","name":"Fake H200","used_bytes":{GIB},"total_bytes":{total}}}],
 "processes":[{{"pid":{pid},"device":0,"used_bytes":{bytes}}},{{"pid":1,"device":1,"used_bytes":{GIB}}}]
 {extra}}}"#,
        used0 = bytes + 2 * GIB,
        total = 141 * GIB,
    )
}

/// Replaces the fake's file in one step (memmon never reads half a file).
fn write_fake(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn samples(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "sample")
        .collect()
}

fn end_record(path: &Path) -> serde_json::Value {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "end")
        .expect("an end record")
}

#[test]
fn gpu_without_the_nvidia_driver_exits_2_naming_libnvidia_ml_and_leaves_no_file() {
    let dir = tempdir();
    let out = dir.path().join("r.csv");
    let o = record_workload(&out, &["--gpu", "-q"], &["hold:100ms"])
        .env_remove(FAKE)
        .output()
        .unwrap();
    if o.status.code() == Some(0) {
        // A machine with the driver: then the GPU columns must be there.
        eprintln!("NVML loaded on this machine: checking the columns instead");
        let (h, _) = read_csv(&out);
        assert!(h.iter().any(|c| c == "gpu_bytes"));
        return;
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--gpu"), "{err}");
    assert!(err.contains("libnvidia-ml.so.1 not found"), "{err}");
    assert!(!out.exists(), "no file is made when --gpu cannot be read");
}

#[test]
fn without_gpu_flags_a_machine_without_the_driver_records_as_before_with_empty_gpu_cells() {
    let dir = tempdir();
    let out = dir.path().join("r.csv");
    let o = record_workload(&out, &["-i", "50ms"], &["alloc:20MiB", "hold:300ms"])
        .env_remove(FAKE)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return; // a GPU machine records GPU memory by default
    }
    let (h, rows) = read_csv(&out);
    let i = h.iter().position(|c| c == "gpu_bytes").unwrap();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r[i].is_empty()), "{rows:?}");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("GPU"));
}

#[test]
fn the_trees_gpu_memory_is_recorded_per_tick_with_its_gpus_device_memory() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let fake = dir.path().join("gpu.json");
    write_fake(&fake, &fake_json(&d.pid(), 16 * GIB, ""));
    let out = dir.path().join("r.csv");
    // No --gpu: a source that loads is used by default.
    memmon()
        .env(FAKE, &fake)
        .args([
            "record",
            "--pid",
            &d.pid(),
            "-i",
            "100ms",
            "--duration",
            "700ms",
        ])
        .args(["--gpu-every", "100ms", "-o"])
        .arg(&out)
        .assert()
        .success();
    let gpu = column(&out, "gpu_bytes");
    assert!(gpu.len() >= 3, "{gpu:?}");
    assert!(gpu.iter().all(|&b| b == 16 * GIB), "{gpu:?}");
    // Only GPU 0 is the tree's: GPU 1 (PID 1's) is in neither sum.
    assert!(column(&out, "gpu_device_used_bytes")
        .iter()
        .all(|&b| b == 18 * GIB));
    assert!(column(&out, "gpu_device_total_bytes")
        .iter()
        .all(|&b| b == 141 * GIB));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.csv.meta.json")).unwrap())
            .unwrap();
    let devices = meta["gpu"]["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[1]["uuid"], "GPU-fake-1");
    assert_eq!(devices[0]["name"], "Fake H200");
    assert!(
        meta["end"]["gpu"]["readings"].as_u64().unwrap() >= 2,
        "{meta}"
    );
}

#[test]
fn no_gpu_turns_gpu_memory_off_even_where_a_source_loads() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let fake = dir.path().join("gpu.json");
    write_fake(&fake, &fake_json(&d.pid(), 4 * GIB, ""));
    let out = dir.path().join("r.jsonl");
    d.record(&out, "300ms", &["--no-gpu"]);
    let s = samples(&out);
    assert!(!s.is_empty());
    assert!(s.iter().all(|v| v.get("gpu_bytes").is_none()), "{s:?}");
    let _ = fake;
}

#[test]
fn per_gpu_detail_names_each_gpu_the_tree_uses_in_json_lines() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let fake = dir.path().join("gpu.json");
    // The daemon on both GPUs: 3 GiB on GPU 0, 5 GiB on GPU 1.
    let text = fake_json(&d.pid(), 3 * GIB, "").replace(
        r#"{"pid":1,"device":1"#,
        &format!(
            r#"{{"pid":{},"device":1,"used_bytes":{}}},{{"pid":1,"device":1"#,
            d.pid(),
            5 * GIB
        ),
    );
    write_fake(&fake, &text);
    let out = dir.path().join("r.jsonl");
    memmon()
        .env(FAKE, &fake)
        .args([
            "record",
            "--gpu",
            "--pid",
            &d.pid(),
            "-i",
            "100ms",
            "--duration",
            "300ms",
            "-o",
        ])
        .arg(&out)
        .assert()
        .success();
    let s = &samples(&out)[0];
    assert_eq!(s["gpu_bytes"], 8 * GIB);
    let gpus = s["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0]["uuid"], "GPU-fake-0");
    assert_eq!(gpus[0]["tree_bytes"], 3 * GIB);
    assert_eq!(gpus[1]["tree_bytes"], 5 * GIB);
    assert_eq!(gpus[1]["used_bytes"], GIB);
}

/// Starts `memmon record` of the daemon on the fake, JSON Lines to `out`.
fn spawn_record(fake: &Path, pid: &str, out: &Path, flags: &[&str]) -> std::process::Child {
    std::process::Command::new(memmon_path())
        .env(FAKE, fake)
        .args(["record", "--gpu", "--pid", pid])
        .args(flags)
        .arg("-o")
        .arg(out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_lost_gpu_empties_the_gpu_columns_and_is_told_once() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let fake = dir.path().join("gpu.json");
    write_fake(&fake, &fake_json(&d.pid(), 16 * GIB, ""));
    let out = dir.path().join("r.jsonl");
    let child = spawn_record(
        &fake,
        &d.pid(),
        &out,
        &["-i", "50ms", "--gpu-every", "50ms", "--duration", "60s"],
    );
    assert!(wait_for(30.0, || samples(&out)
        .iter()
        .any(|s| s["gpu_bytes"] == 16 * GIB)));
    write_fake(
        &fake,
        &fake_json(&d.pid(), 16 * GIB, r#","error":{"code":15}"#),
    );
    // Wait for rows written after the loss (the file is flushed every 500 ms).
    assert!(wait_for(30.0, || {
        let s = samples(&out);
        s.len() > 3
            && s[s.len() - 3..]
                .iter()
                .all(|s| s.get("gpu_bytes").is_none())
    }));
    // SAFETY: ending the memmon we started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("GPU is lost (NVML error 15)").count(),
        1,
        "told once: {err}"
    );
    let end = end_record(&out);
    assert!(
        end["gpu"]["failed_readings"].as_u64().unwrap() >= 1,
        "{end}"
    );
    assert!(
        end["gpu"]["errors"][0]
            .as_str()
            .unwrap()
            .contains("GPU is lost"),
        "{end}"
    );
}

#[test]
fn a_hung_gpu_driver_call_never_delays_the_rss_ticks() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let fake = dir.path().join("gpu.json");
    write_fake(&fake, &fake_json(&d.pid(), GIB, ""));
    let out = dir.path().join("r.jsonl");
    let started = Instant::now();
    let child = spawn_record(
        &fake,
        &d.pid(),
        &out,
        &["-i", "50ms", "--gpu-every", "50ms", "--duration", "4s"],
    );
    assert!(wait_for(30.0, || !samples(&out).is_empty()));
    // From now on every GPU reading takes 60 s.
    write_fake(&fake, &fake_json(&d.pid(), GIB, r#","delay_ms":60000"#));
    let hung_from = Instant::now();
    let o = child.wait_with_output().unwrap();
    let hung_for = hung_from.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // memmon ended at its --duration, not after the hung call.
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
    let s = samples(&out);
    // The recording's time when the driver hung (its last row is at about its end).
    let t_hung = s.last().unwrap()["elapsed_s"].as_f64().unwrap() - hung_for;
    assert!(
        hung_for > 1.0,
        "the hang began too late to test: {hung_for} s before the end"
    );
    let after: Vec<_> = s
        .iter()
        .filter(|v| v["elapsed_s"].as_f64().unwrap() > t_hung + 0.2)
        .collect();
    // Over a second of 50 ms ticks after the driver hung: RSS rows kept coming (20 expected;
    // a tick waiting on the driver would give none).
    assert!(after.len() >= 5, "{} rows after the hang", after.len());
    assert!(after.iter().all(|v| v["rss_bytes"].as_u64().unwrap() > 0));
}

/// A recording of the daemon while the fake says it holds `bytes` on GPU 0.
fn record_with_gpu(dir: &Path, d: &SpikedDaemon, name: &str, bytes: u64) -> std::path::PathBuf {
    let fake = dir.join(format!("{name}.json"));
    write_fake(&fake, &fake_json(&d.pid(), bytes, ""));
    let out = dir.join(name);
    memmon()
        .env(FAKE, &fake)
        .args([
            "record",
            "-q",
            "--gpu",
            "--pid",
            &d.pid(),
            "-i",
            "100ms",
            "--duration",
            "300ms",
            "-o",
        ])
        .arg(&out)
        .assert()
        .success();
    out
}

#[test]
fn summary_shows_the_gpu_peak_beside_host_memory_and_max_gpu_is_a_budget() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let rec = record_with_gpu(dir.path(), &d, "r.csv", 20 * GIB);
    let o = memmon().arg("summary").arg(&rec).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        text.contains("GPU peak      20.00 GiB (21474836480 bytes)"),
        "{text}"
    );
    assert!(
        text.contains("22.00 GiB (23622320128 bytes) used of 141.0 GiB"),
        "{text}"
    );
    let j = summary_json(&rec);
    assert_eq!(j["gpu"]["peak_gpu_bytes"], 20 * GIB);
    assert_eq!(j["gpu"]["gpus"][0], "0 GPU-fake-0 Fake H200");

    memmon()
        .arg("summary")
        .arg(&rec)
        .args(["--max-gpu", "20GiB"])
        .assert()
        .success();
    let o = memmon()
        .arg("summary")
        .arg(&rec)
        .args(["--max-gpu", "16GiB"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("GPU peak 20.00 GiB")
            && err.contains("gpu_bytes")
            && err.contains("--max-gpu 16.00 GiB")
            && err.contains("by 4.00 GiB (4294967296 bytes)"),
        "{err}"
    );
}

#[test]
fn max_gpu_on_a_recording_without_gpu_memory_is_an_error_not_a_pass() {
    let dir = tempdir();
    let out = dir.path().join("r.csv");
    record_workload(&out, &["-q", "--no-gpu"], &["hold:100ms"])
        .assert()
        .success();
    let o = memmon()
        .arg("summary")
        .arg(&out)
        .args(["--max-gpu", "1GiB"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no GPU memory"));
    let o = memmon()
        .arg("compare")
        .arg(&out)
        .arg(&out)
        .args(["--max-gpu-increase", "5%"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--max-gpu-increase: no GPU peak"));
}

#[test]
fn compare_gates_the_gpu_peak() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let base = record_with_gpu(dir.path(), &d, "base.csv", 16 * GIB);
    let new = record_with_gpu(dir.path(), &d, "new.csv", 20 * GIB);
    let o = memmon()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .args(["--max-gpu-increase", "10%"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("GPU peak") && out.contains("+4.00 GiB"),
        "{out}"
    );
    memmon()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .args(["--max-gpu-increase", "5GiB"])
        .assert()
        .success();
}

#[test]
fn plot_draws_gpu_memory_in_a_panel_of_its_own_never_on_the_host_axis() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let rec = record_with_gpu(dir.path(), &d, "r.csv", 20 * GIB);
    let svg = dir.path().join("r.svg");
    memmon()
        .arg("plot")
        .arg(&rec)
        .arg("-o")
        .arg(&svg)
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("GPU memory (GiB, 2^30 bytes)"), "no GPU axis");
    assert!(text.contains("peak 20.00 GiB"), "no GPU peak in the legend");
    // The host axis stays in the host's unit (the daemon's few MiB), not stretched to 20 GiB.
    assert!(
        text.contains("RSS (MiB, 2^20 bytes)"),
        "host axis changed unit"
    );

    let plain = dir.path().join("plain.csv");
    d.record(&plain, "300ms", &["--no-gpu"]);
    let svg2 = dir.path().join("plain.svg");
    memmon()
        .arg("plot")
        .arg(&plain)
        .arg("-o")
        .arg(&svg2)
        .assert()
        .success();
    assert!(!std::fs::read_to_string(&svg2)
        .unwrap()
        .contains("GPU memory"));
}

#[test]
fn a_workload_step_that_mlocks_6_mib_shows_as_6_mib_locked() {
    let dir = tempdir();
    let out = dir.path().join("r.csv");
    let o = record_workload(
        &out,
        &["-q", "--no-gpu", "-i", "50ms"],
        &["mlock:6MiB", "hold:600ms"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let locked = column(&out, "locked_bytes");
    assert_eq!(
        locked.iter().max().copied(),
        Some(6 * MIB),
        "VmLck: {locked:?}"
    );
    // Locked pages are resident anonymous pages: they are in RSS too (not on top of it).
    let rss = column(&out, "anon_bytes");
    assert!(rss.iter().max().unwrap() >= &(6 * MIB), "{rss:?}");
}

#[test]
fn bench_runs_carry_the_gpu_peak_in_the_table_and_the_exports() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let fake = dir.path().join("gpu.json");
    write_fake(&fake, &fake_json(&d.pid(), 6 * GIB, ""));
    let (json, csv) = (dir.path().join("b.json"), dir.path().join("b.csv"));
    let o = memmon()
        .env(FAKE, &fake)
        .args([
            "bench",
            "--gpu",
            "--pid",
            &d.pid(),
            "-n",
            "2",
            "-i",
            "100ms",
        ])
        .args(["--gpu-every", "50ms", "--export-json"])
        .arg(&json)
        .arg("--export-csv")
        .arg(&csv)
        .arg("--")
        .arg(memmon_test_path())
        .args(["test-client", "--socket"])
        .arg(&d.socket)
        .args(["--size", "1MiB"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("GPU peak") && out.contains("6.00 GiB"),
        "{out}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for r in report["runs"].as_array().unwrap() {
        assert_eq!(r["peak_gpu_bytes"], 6 * GIB, "{r}");
    }
    assert_eq!(column(&csv, "peak_gpu_bytes"), vec![6 * GIB, 6 * GIB]);
}

#[test]
fn the_html_report_shows_the_gpu_peak_beside_host_memory() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let rec = record_with_gpu(dir.path(), &d, "r.csv", 12 * GIB);
    let html = dir.path().join("r.html");
    memmon()
        .arg("report")
        .arg(&rec)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.contains("<th>GPU peak (NVML, tree's processes)</th>"),
        "no GPU row"
    );
    assert!(text.contains("id=\"gpu-chart\""), "no GPU panel");
    assert!(
        text.contains("12.00 GiB <span class=\"exact\">(12884901888 bytes)</span>"),
        "no GPU value"
    );
}

#[test]
fn a_zero_gpu_interval_is_refused_by_record_and_bench() {
    for cmd in [
        &["record", "--gpu-every", "0s", "--", "true"][..],
        &["bench", "--gpu-every", "0s", "-n", "1", "--", "true"][..],
    ] {
        let o = memmon().args(cmd).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--gpu-every must be above 0"),
            "{cmd:?}"
        );
    }
}

#[test]
fn the_html_reports_gpu_panel_draws_in_a_browser_without_errors() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let rec = record_with_gpu(dir.path(), &d, "r.csv", 12 * GIB);
    let html = dir.path().join("r.html");
    memmon()
        .arg("report")
        .arg(&rec)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    let out = crate::report::chromium(&html, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        crate::report::body_attr(&dom, "data-errors").as_deref(),
        Some("0"),
        "{:?}",
        crate::report::body_attr(&dom, "data-last-error")
    );
    assert_eq!(
        crate::report::body_attr(&dom, "data-gpu-series").as_deref(),
        Some("1")
    );
}

#[test]
fn bench_and_compare_hold_max_gpu_as_a_budget_naming_the_run_or_file() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let fake = dir.path().join("gpu.json");
    write_fake(&fake, &fake_json(&d.pid(), 6 * GIB, ""));
    let bench = |budget: &str| {
        memmon()
            .env(FAKE, &fake)
            .args(["bench", "-q", "--gpu", "--pid", &d.pid(), "-n", "1"])
            .args([
                "-i",
                "100ms",
                "--gpu-every",
                "50ms",
                "--max-gpu",
                budget,
                "--",
            ])
            .arg(memmon_test_path())
            .args(["test-client", "--socket"])
            .arg(&d.socket)
            .args(["--size", "1MiB"])
            .output()
            .unwrap()
    };
    assert!(bench("8GiB").status.success());
    let o = bench("4GiB");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--max-gpu 4.00 GiB exceeded by 2.00 GiB") && err.contains("run 1"),
        "{err}"
    );

    let base = record_with_gpu(dir.path(), &d, "base.csv", 5 * GIB);
    let new = record_with_gpu(dir.path(), &d, "new.csv", 6 * GIB);
    let compare = |budget: &str| {
        memmon()
            .arg("compare")
            .args(["--max-gpu", budget])
            .arg(&base)
            .arg("--")
            .arg(&new)
            .output()
            .unwrap()
    };
    let o = compare("6GiB");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = compare("5GiB");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--max-gpu 5.00 GiB exceeded by 1.00 GiB") && err.contains("new.csv"),
        "{err}"
    );
}
