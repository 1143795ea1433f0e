//! GPU memory without a GPU: a stand-in `libnvidia-ml.so.1` (tests/fake-nvml.c), built by the
//! tests for each NVIDIA driver generation (`memmon::probe::gpu::fake_library`), which memmon
//! loads through the real `dlopen` path (LD_LIBRARY_PATH) and reads with its real NVML code. It
//! reports GPUs, per-PID memory and accounting records for real processes the tests start; its
//! configuration is read again at every call, so a test changes it while memmon records.

use crate::util::*;
use memmon::probe::gpu::fake_library::{self, Variant};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;

/// A stand-in driver of one generation, and the configuration file it reads.
struct FakeNvml {
    lib: PathBuf,
    conf: PathBuf,
}

impl FakeNvml {
    /// `variant`, built once for all tests, reading a configuration in `dir`.
    fn new(dir: &Path, variant: Variant) -> FakeNvml {
        let lib =
            fake_library::build(&outside_program("cc"), variant).unwrap_or_else(|e| panic!("{e}"));
        FakeNvml {
            lib,
            conf: dir.join(format!("nvml-{}.conf", variant.name())),
        }
    }

    /// The drivers of today: the versioned detail list.
    fn current(dir: &Path) -> FakeNvml {
        FakeNvml::new(dir, Variant::DetailList)
    }

    /// Replaces the configuration in one step (the library never reads half a file).
    fn set(&self, text: &str) {
        let tmp = self.conf.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.conf).unwrap();
    }

    /// memmon, finding this stand-in as its libnvidia-ml.so.1.
    fn memmon(&self) -> assert_cmd::Command {
        let mut c = memmon();
        c.env("LD_LIBRARY_PATH", &self.lib)
            .env("FAKE_NVML_CONFIG", &self.conf);
        c
    }

    fn command(&self) -> std::process::Command {
        let mut c = std::process::Command::new(memmon_path());
        c.env("LD_LIBRARY_PATH", &self.lib)
            .env("FAKE_NVML_CONFIG", &self.conf);
        c
    }
}

/// Two GPUs (accounting as `accounting` says on GPU 0, off on GPU 1): `pid` holds `bytes` on
/// GPU 0; PID 1 (not in any tree a test watches) holds 1 GiB on GPU 1, which must not be
/// counted. `extra`: more lines.
fn two_gpus(pid: &str, bytes: u64, accounting: &str, extra: &str) -> String {
    format!(
        "device {used0} {total} {accounting} GPU-fake-0 Fake H200
device {GIB} {total} off GPU-fake-1 Fake H200
process 0 {pid} {bytes}
process 1 1 {GIB}
{extra}",
        used0 = bytes + 2 * GIB,
        total = 141 * GIB,
    )
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

fn meta_of(csv: &Path) -> serde_json::Value {
    let mut p = csv.as_os_str().to_owned();
    p.push(".meta.json");
    serde_json::from_str(&std::fs::read_to_string(PathBuf::from(p)).unwrap()).unwrap()
}

#[test]
fn gpu_without_the_nvidia_driver_exits_2_naming_libnvidia_ml_and_leaves_no_file() {
    let dir = tempdir();
    let out = dir.path().join("r.csv");
    let o = record_workload(&out, &["--gpu", "-q"], &["hold:100ms"])
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

/// `memmon record --pid PID -i 100ms --duration DUR --gpu-every 100ms FLAGS -o OUT` on `nvml`.
fn record_pid(nvml: &FakeNvml, pid: &str, out: &Path, duration: &str, flags: &[&str]) {
    nvml.memmon()
        .args([
            "record",
            "--pid",
            pid,
            "-i",
            "100ms",
            "--duration",
            duration,
        ])
        .args(["--gpu-every", "100ms"])
        .args(flags)
        .arg("-o")
        .arg(out)
        .assert()
        .success();
}

#[test]
fn every_driver_generation_gives_each_of_two_processes_sharing_a_gpu_its_own_bytes() {
    // The bug of go-nvml #75, pynvml #48/#50, nvitop #79/#226: read with the wrong element
    // size, pid and bytes come back shuffled as soon as two processes share a GPU.
    let dir = tempdir();
    let a = SpikedDaemon::start(dir.path(), "1MiB");
    let mut b = spawn_workload(&["hold:60s"]);
    let b_pid = b.id().to_string();
    for v in Variant::ALL {
        let nvml = FakeNvml::new(dir.path(), v);
        nvml.set(&format!(
            "device {used} {total} off GPU-fake-0 Fake H200\nprocess 0 {a} {ab}\nprocess 0 {b} {bb}\n",
            used = 24 * GIB,
            total = 141 * GIB,
            a = a.pid(),
            ab = 20 * GIB,
            b = b_pid,
            bb = 3 * GIB + 4096,
        ));
        for (pid, bytes) in [(a.pid(), 20 * GIB), (b_pid.clone(), 3 * GIB + 4096)] {
            let out = dir.path().join(format!("{}-{pid}.csv", v.name()));
            record_pid(&nvml, &pid, &out, "500ms", &["--gpu"]);
            let gpu = column(&out, "gpu_bytes");
            assert!(!gpu.is_empty(), "{}", v.name());
            assert!(
                gpu.iter().all(|&g| g == bytes),
                "{}: PID {pid}: {gpu:?}",
                v.name()
            );
            let call = meta_of(&out)["gpu"]["process_call"]
                .as_str()
                .unwrap()
                .to_string();
            let want = match v {
                Variant::DetailList => "nvmlDeviceGetRunningProcessDetailList (versioned",
                Variant::V2Only => "nvmlDeviceGetComputeRunningProcesses_v2 (24-byte",
                Variant::V3Of24 => "nvmlDeviceGetComputeRunningProcesses_v3 (24-byte",
                Variant::V3Of32 | Variant::V3Of32Only => {
                    "nvmlDeviceGetComputeRunningProcesses_v3 (32-byte"
                }
            };
            assert!(call.starts_with(want), "{}: {call}", v.name());
        }
    }
    let _ = b.kill();
    let _ = b.wait();
}

#[test]
fn the_trees_gpu_memory_is_recorded_per_tick_with_its_gpus_device_memory() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&two_gpus(&d.pid(), 16 * GIB, "off", ""));
    let out = dir.path().join("r.csv");
    // No --gpu: a source that loads is used by default.
    nvml.memmon()
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
    // Accounting is off: no GPU high-water mark.
    let (h, rows) = read_csv(&out);
    let i = h.iter().position(|c| c == "gpu_hwm_bytes").unwrap();
    assert!(rows.iter().all(|r| r[i].is_empty()), "{rows:?}");
    let meta = meta_of(&out);
    assert_eq!(meta["gpu"]["source"], "nvml");
    assert_eq!(meta["gpu"]["driver_version"], "0.0.fake");
    let devices = meta["gpu"]["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[1]["uuid"], "GPU-fake-1");
    assert_eq!(devices[0]["name"], "Fake H200");
    assert_eq!(devices[0]["accounting"], false);
    assert!(
        meta["end"]["gpu"]["readings"].as_u64().unwrap() >= 2,
        "{meta}"
    );
}

#[test]
fn no_gpu_turns_gpu_memory_off_even_where_a_source_loads() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&two_gpus(&d.pid(), 4 * GIB, "on", ""));
    let out = dir.path().join("r.jsonl");
    record_pid(&nvml, &d.pid(), &out, "300ms", &["--no-gpu"]);
    let s = samples(&out);
    assert!(!s.is_empty());
    assert!(s.iter().all(|v| v.get("gpu_bytes").is_none()), "{s:?}");
    assert!(
        s.iter().all(|v| v.get("nvidia_mapped_bytes").is_none()),
        "{s:?}"
    );
}

#[test]
fn per_gpu_detail_names_each_gpu_the_tree_uses_in_json_lines() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let nvml = FakeNvml::current(dir.path());
    // The daemon on both GPUs: 3 GiB on GPU 0, 5 GiB on GPU 1.
    let extra = format!("process 1 {} {}\n", d.pid(), 5 * GIB);
    nvml.set(&two_gpus(&d.pid(), 3 * GIB, "off", &extra));
    let out = dir.path().join("r.jsonl");
    record_pid(&nvml, &d.pid(), &out, "300ms", &["--gpu"]);
    let s = &samples(&out)[0];
    assert_eq!(s["gpu_bytes"], 8 * GIB);
    let gpus = s["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0]["uuid"], "GPU-fake-0");
    assert_eq!(gpus[0]["tree_bytes"], 3 * GIB);
    assert_eq!(gpus[1]["tree_bytes"], 5 * GIB);
    assert_eq!(gpus[1]["used_bytes"], GIB);
}

/// Starts `memmon record --gpu --pid PID FLAGS -o OUT` of the daemon on `nvml`, JSON Lines.
fn spawn_record(nvml: &FakeNvml, pid: &str, out: &Path, flags: &[&str]) -> std::process::Child {
    nvml.command()
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
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&two_gpus(&d.pid(), 16 * GIB, "off", ""));
    let out = dir.path().join("r.jsonl");
    let child = spawn_record(
        &nvml,
        &d.pid(),
        &out,
        &["-i", "50ms", "--gpu-every", "50ms", "--duration", "60s"],
    );
    assert!(wait_for(30.0, || samples(&out)
        .iter()
        .any(|s| s["gpu_bytes"] == 16 * GIB)));
    nvml.set(&two_gpus(&d.pid(), 16 * GIB, "off", "error * 15\n"));
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
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&two_gpus(&d.pid(), GIB, "off", ""));
    let out = dir.path().join("r.jsonl");
    let started = Instant::now();
    let child = spawn_record(
        &nvml,
        &d.pid(),
        &out,
        &["-i", "50ms", "--gpu-every", "50ms", "--duration", "4s"],
    );
    assert!(wait_for(30.0, || !samples(&out).is_empty()));
    // From now on every call into the driver takes 60 s.
    nvml.set(&two_gpus(&d.pid(), GIB, "off", "hang_ms 60000\n"));
    let hung_at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // memmon ended at its --duration (its last reading waited a few seconds at most), not
    // after the hung call.
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
    let s = samples(&out);
    let last_ms = s.last().unwrap()["unix_ms"].as_u64().unwrap();
    assert!(
        last_ms > hung_at_ms + 1000,
        "the hang began too late to test: {} ms before the last row",
        last_ms.saturating_sub(hung_at_ms)
    );
    let after: Vec<_> = s
        .iter()
        .filter(|v| v["unix_ms"].as_u64().unwrap() > hung_at_ms + 200)
        .collect();
    // Over a second of 50 ms ticks after the driver hung: RSS rows kept coming (20 expected;
    // a tick waiting on the driver would give none).
    assert!(after.len() >= 5, "{} rows after the hang", after.len());
    assert!(after.iter().all(|v| v["rss_bytes"].as_u64().unwrap() > 0));
}

#[test]
fn a_driver_that_hangs_from_the_start_is_given_up_on_after_gpu_timeout() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&two_gpus(&d.pid(), GIB, "off", "hang_ms 60000\n"));
    let out = dir.path().join("r.csv");
    let t0 = Instant::now();
    let o = nvml
        .memmon()
        .args(["record", "--gpu", "--gpu-timeout", "1s", "--pid", &d.pid()])
        .args(["--duration", "300ms", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--gpu: NVML did not answer within 1s (--gpu-timeout)"),
        "{err}"
    );
    assert!(!out.exists(), "no file is made when --gpu cannot be read");
    // Without --gpu: recorded without GPU memory, saying why.
    let o = nvml
        .memmon()
        .args(["record", "--gpu-timeout", "1s", "--pid", &d.pid()])
        .args(["-i", "100ms", "--duration", "300ms", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("GPU memory not recorded: NVML did not answer within 1s"),
        "{err}"
    );
    assert!(!column(&out, "rss_bytes").is_empty());
    assert!(t0.elapsed() < Duration::from_secs(50), "{:?}", t0.elapsed());
}

#[test]
fn mig_sizes_the_driver_does_not_give_leave_gpu_bytes_empty_and_say_why() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&format!(
        "device {} {} unsupported GPU-mig A100\nprocess 0 {} na 1 0\nprocess 0 1 {} 2 0\n",
        10 * GIB,
        80 * GIB,
        d.pid(),
        2 * GIB
    ));
    let out = dir.path().join("r.csv");
    let o = nvml
        .memmon()
        .args(["record", "--gpu", "--pid", &d.pid(), "-i", "100ms"])
        .args(["--gpu-every", "100ms", "--duration", "500ms", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let (h, rows) = read_csv(&out);
    let i = h.iter().position(|c| c == "gpu_bytes").unwrap();
    assert!(rows.iter().all(|r| r[i].is_empty()), "{rows:?}");
    assert_eq!(
        err.matches(&format!("NVML gives no size for PID {} on GPU 0", d.pid()))
            .count(),
        1,
        "told once: {err}"
    );
    assert!(err.contains("a MIG instance"), "{err}");
    let end = &meta_of(&out)["end"]["gpu"];
    assert!(
        end["notes"][0].as_str().unwrap().contains("no size"),
        "{end}"
    );
}

/// A recording of the daemon while the stand-in says it holds `bytes` on GPU 0.
fn record_with_gpu(dir: &Path, d: &SpikedDaemon, name: &str, bytes: u64) -> PathBuf {
    let nvml = FakeNvml::current(dir);
    nvml.set(&two_gpus(&d.pid(), bytes, "off", ""));
    let out = dir.join(name);
    nvml.memmon()
        .args(["record", "-q", "--gpu", "--pid", &d.pid(), "-i", "100ms"])
        .args(["--duration", "300ms", "-o"])
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
    // Accounting off: the summary says the GPU peak is sampled, and how to make it exact.
    assert!(text.contains("GPU peak is sampled every 1s"), "{text}");
    assert!(text.contains("nvidia-smi -am 1"), "{text}");
    let j = summary_json(&rec);
    assert_eq!(j["gpu"]["peak_gpu_bytes"], 20 * GIB);
    assert_eq!(j["gpu"]["gpus"][0], "0 GPU-fake-0 Fake H200");
    assert_eq!(j["gpu"]["accounting"], "off");

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
    // The same words as every budget: the flag, the excess, the number judged and what it is.
    assert!(
        err.contains("budget exceeded: --max-gpu 16.00 GiB exceeded by 4.00 GiB (4294967296 bytes): judged the GPU peak of")
            && err.contains("20.00 GiB (21474836480 bytes): sampled GPU memory of the tree (NVML), a lower bound"),
        "{err}"
    );
}

/// Accounting records: the daemon's mark `max`, running.
fn marked(d: &SpikedDaemon, used: u64, max: u64) -> String {
    two_gpus(
        &d.pid(),
        used,
        "on",
        &format!("record 0 {} {max} 1 1771372328000000\n", d.pid()),
    )
}

#[test]
fn the_gpu_kernel_peak_holds_a_spike_the_samples_missed() {
    // An attached daemon whose GPU mark was 10 GiB before the recording; during it, a 24 GiB
    // spike comes and goes between two readings: sampled at 4 GiB throughout, the driver's
    // mark says 24 GiB.
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&marked(&d, 4 * GIB, 10 * GIB));
    let out = dir.path().join("r.jsonl");
    let child = spawn_record(
        &nvml,
        &d.pid(),
        &out,
        &["-i", "50ms", "--gpu-every", "50ms", "--duration", "60s"],
    );
    assert!(wait_for(30.0, || samples(&out)
        .iter()
        .any(|s| s["gpu_hwm_bytes"] == 10 * GIB)));
    nvml.set(&marked(&d, 4 * GIB, 24 * GIB));
    assert!(wait_for(30.0, || samples(&out)
        .iter()
        .any(|s| s["gpu_hwm_bytes"] == 24 * GIB)));
    // SAFETY: ending the memmon we started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success() || o.status.code() == Some(143), "{o:?}");
    let s = samples(&out);
    assert!(s.iter().all(|v| v["gpu_bytes"] == 4 * GIB), "{s:?}");
    let text = String::from_utf8_lossy(&memmon().arg("summary").arg(&out).output().unwrap().stdout)
        .to_string();
    assert!(
        text.contains("GPU kernel peak 24.00 GiB (25769803776 bytes) (NVML accounting maxMemoryUsage, the tree's exact GPU peak"),
        "{text}"
    );
    assert!(text.contains("reached during the recording"), "{text}");
    assert!(
        text.contains("20.00 GiB above the GPU sampled peak: a spike between two readings"),
        "{text}"
    );
    let j = summary_json(&out);
    assert_eq!(j["gpu"]["gpu_kernel_peak_bytes"], 24 * GIB);
    assert_eq!(j["gpu"]["gpu_kernel_peak_window"], "rose-during-span");
    assert_eq!(j["gpu"]["gpu_kernel_peak_scope"], "tree");
    assert_eq!(j["gpu"]["accounting"], "on");
    // The GPU peak is never the host peak.
    assert!(j["peak"]["bytes"].as_u64().unwrap() < GIB, "{}", j["peak"]);
    // A GPU budget judges the driver's exact peak, not the 4 GiB the samples saw: 10 GiB is
    // exceeded, 30 GiB kept, and the message says which number it judged.
    let o = memmon()
        .arg("summary")
        .arg(&out)
        .args(["--max-gpu", "10GiB"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--max-gpu 10.00 GiB exceeded by 14.00 GiB")
            && err.contains(
                "24.00 GiB (25769803776 bytes): NVML accounting maxMemoryUsage of the tree, exact"
            ),
        "{err}"
    );
    memmon()
        .arg("summary")
        .arg(&out)
        .args(["--max-gpu", "30GiB"])
        .assert()
        .success();
    // "GPU peak" is that number in every command, the samples' largest "GPU sampled peak".
    assert!(
        text.contains("GPU peak      24.00 GiB (25769803776 bytes): NVML accounting maxMemoryUsage of the tree, exact: the driver's own mark")
            && text.contains("GPU sampled peak 4.00 GiB (4294967296 bytes)"),
        "{text}"
    );
    assert_eq!(j["gpu"]["gpu_peak"]["bytes"], 24 * GIB);
    assert_eq!(j["gpu"]["gpu_peak"]["exact"], true);
    assert_eq!(j["gpu"]["peak_gpu_bytes"], 4 * GIB);
    let html = out.with_extension("html");
    memmon()
        .arg("report")
        .arg(&out)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<th>GPU peak</th><td>24.00 GiB <span class=\"exact\">(25769803776 bytes)</span> (NVML accounting maxMemoryUsage of the tree, exact: the driver&#39;s own mark)"),
        "no GPU peak row"
    );
    assert!(page.contains("<th>GPU sampled peak (NVML, tree's processes)</th><td>4.00 GiB"));
    let svg = out.with_extension("svg");
    memmon()
        .arg("plot")
        .arg(&out)
        .arg("-o")
        .arg(&svg)
        .assert()
        .success();
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawn.contains("GPU peak of the tree (maxMemoryUsage) 24.00 GiB")
            && drawn.contains("GPU sampled peak 4.00 GiB"),
        "the plot's GPU panel lacks its peak line"
    );
    // compare: each run carries the GPU peak its stats take, beside its own and the sampled.
    let o = memmon()
        .args(["compare", "--json"])
        .arg(&out)
        .arg(&out)
        .output()
        .unwrap();
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let run = &c["base"]["runs"][0];
    assert_eq!(c["gpu_peak_basis"], "nvml-accounting");
    assert_eq!(run["gpu_peak"]["bytes"], 24 * GIB, "{run}");
    assert_eq!(run["own_gpu_peak"]["bytes"], 24 * GIB, "{run}");
    assert_eq!(run["peak_gpu_bytes"], 4 * GIB, "{run}");
    assert_eq!(
        c["base"]["stats"]["peak_gpu_bytes"]["max"],
        (24 * GIB) as f64
    );
}

#[test]
fn a_gpu_mark_set_before_the_recording_is_not_taken_for_its_peak() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&marked(&d, 4 * GIB, 30 * GIB));
    let out = dir.path().join("r.csv");
    record_pid(&nvml, &d.pid(), &out, "500ms", &["--gpu"]);
    assert!(column(&out, "gpu_hwm_bytes").iter().all(|&h| h == 30 * GIB));
    let text = String::from_utf8_lossy(&memmon().arg("summary").arg(&out).output().unwrap().stdout)
        .to_string();
    assert!(
        text.contains("GPU kernel peak not known for the recording: the processes' maxMemoryUsage (30.00 GiB) was set before it began and did not rise"),
        "{text}"
    );
    let j = summary_json(&out);
    assert!(
        j["gpu"].get("gpu_kernel_peak_bytes").is_none(),
        "{}",
        j["gpu"]
    );
    assert_eq!(j["gpu"]["gpu_kernel_peak_window"], "set-before");
    assert_eq!(j["gpu"]["gpu_lifetime_peak_bytes"], 30 * GIB);
}

#[test]
fn a_launched_commands_gpu_kernel_peak_counts_a_child_that_ended_during_the_recording() {
    // The command's child holds 2 GiB (sampled), peaks at 9 GiB between two readings and ends;
    // its final accounting record (kept by the driver) carries the 9 GiB into the recording.
    let dir = tempdir();
    let nvml = FakeNvml::current(dir.path());
    nvml.set("device 0 150754820096 on GPU-fake-0 Fake H200\n");
    let out = dir.path().join("r.csv");
    let token = format!("gpu-launched-{}", std::process::id());
    let go = dir.path().join("go");
    let mut rec = nvml
        .command()
        .env("MEMMON_GPU_TEST", &token)
        .args([
            "record",
            "--gpu",
            "-q",
            "-i",
            "50ms",
            "--gpu-every",
            "50ms",
            "-o",
        ])
        .arg(&out)
        .arg("--")
        .args(workload(&[
            "children:1:1MiB:5s",
            &format!("wait-file:{}", go.display()),
            "wait-children",
            "hold:1s",
        ]))
        .spawn()
        .unwrap();
    let mut child = None;
    assert!(wait_for(30.0, || {
        child = processes_with_env("MEMMON_GPU_TEST", &token)
            .into_iter()
            .find(|p| cmdline(*p).contains("hold:5s"));
        child.is_some()
    }));
    let child = child.unwrap();
    nvml.set(&format!(
        "device {used} 150754820096 on GPU-fake-0 Fake H200\nprocess 0 {child} {two}\nrecord 0 {child} {two} 1 0\n",
        used = 3 * GIB,
        two = 2 * GIB
    ));
    std::fs::write(&go, "").unwrap();
    // It ends: the driver's final record says 9 GiB.
    assert!(wait_for(30.0, || !Path::new(&format!("/proc/{child}"))
        .exists()
        || std::fs::read_to_string(format!("/proc/{child}/stat"))
            .is_ok_and(|s| s.contains(") Z "))));
    nvml.set(&format!(
        "device {GIB} 150754820096 on GPU-fake-0 Fake H200\nrecord 0 {child} {nine} 0 0\n",
        nine = 9 * GIB
    ));
    assert!(rec.wait().unwrap().success());
    let sampled = column(&out, "gpu_bytes");
    assert!(sampled.iter().all(|&g| g <= 2 * GIB), "{sampled:?}");
    let j = summary_json(&out);
    assert_eq!(j["gpu"]["peak_gpu_bytes"], 2 * GIB, "{}", j["gpu"]);
    assert_eq!(j["gpu"]["gpu_kernel_peak_bytes"], 9 * GIB, "{}", j["gpu"]);
    assert_eq!(j["gpu"]["gpu_kernel_peak_window"], "launched");
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
    // No accounting on this GPU: both sides on the sampled numbers, and it says so.
    assert!(
        out.contains("GPU peak is the sampled GPU memory on both sides, a lower bound"),
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
fn bench_runs_carry_the_gpu_peak_in_the_table_and_the_exports() {
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let nvml = FakeNvml::current(dir.path());
    // Accounting on, the daemon's mark set before the bench: each run's GPU kernel peak is
    // "set before" (a running daemon's mark cannot be reset).
    nvml.set(&marked(&d, 6 * GIB, 30 * GIB));
    let (json, csv) = (dir.path().join("b.json"), dir.path().join("b.csv"));
    let o = nvml
        .memmon()
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
        out.contains("GPU sampled peak") && out.contains("6.00 GiB"),
        "{out}"
    );
    assert!(
        out.contains("GPU kernel peak") && out.contains("set before"),
        "{out}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for r in report["runs"].as_array().unwrap() {
        assert_eq!(r["peak_gpu_bytes"], 6 * GIB, "{r}");
        assert_eq!(r["gpu_kernel_peak_window"], "set-before", "{r}");
        assert!(r.get("gpu_kernel_peak_bytes").is_none(), "{r}");
    }
    assert_eq!(column(&csv, "peak_gpu_bytes"), vec![6 * GIB, 6 * GIB]);
}

#[test]
fn a_gpu_mark_raised_in_a_bench_run_shorter_than_gpu_every_is_that_runs_and_not_the_nexts() {
    // Run 1 (about 0.35 s, shorter than --gpu-every 1s) raises the daemon's accounting mark
    // from 1 to 6 GiB; run 2 (1.5 s) holds 1 GiB. The periodic reading after the rise comes
    // in run 2: only the boundary rows' own readings put the rise in run 1.
    let dir = tempdir();
    let d = SpikedDaemon::start(dir.path(), "1MiB");
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&marked(&d, GIB, GIB));
    let raised = dir.path().join("raised.conf");
    std::fs::write(&raised, marked(&d, GIB, 6 * GIB)).unwrap();
    let client = format!(
        "if [ \"$MEMMON_BENCH_RUN\" = 1 ]; then sleep 0.3; mv {} {}; sleep 0.05; else sleep 1.5; fi",
        raised.display(),
        nvml.conf.display()
    );
    let (json, csv) = (dir.path().join("b.json"), dir.path().join("b.csv"));
    let o = nvml
        .memmon()
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
        .args(["--gpu-every", "1s", "-o"])
        .arg(&csv)
        .arg("--export-json")
        .arg(&json)
        .args(["--", "sh", "-c", &client])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs[0]["gpu_kernel_peak_bytes"], 6 * GIB, "{}", runs[0]);
    assert_eq!(runs[0]["gpu_kernel_peak_window"], "rose-during-span");
    assert!(
        runs[1].get("gpu_kernel_peak_bytes").is_none(),
        "{}",
        runs[1]
    );
    assert_eq!(
        runs[1]["gpu_kernel_peak_window"], "set-before",
        "{}",
        runs[1]
    );
    // The budget blames run 1, on the driver's exact mark; run 2 is judged on its samples.
    let o = memmon()
        .arg("summary")
        .arg(&csv)
        .args(["--max-gpu", "5GiB"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let exceeded: Vec<&str> = err.lines().filter(|l| l.contains("exceeded")).collect();
    assert_eq!(exceeded.len(), 1, "{err}");
    assert!(
        exceeded[0].contains("#run 1, 6.00 GiB") && exceeded[0].contains("exact"),
        "{err}"
    );
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
        text.contains("<th>GPU sampled peak (NVML, tree's processes)</th>"),
        "no GPU sampled row"
    );
    // Accounting off: the GPU peak is the sampled one, and says so.
    assert!(
        text.contains("<th>GPU peak</th><td>12.00 GiB <span class=\"exact\">(12884901888 bytes)</span> (sampled GPU memory of the tree (NVML), a lower bound)"),
        "no GPU peak row"
    );
    assert!(text.contains("id=\"gpu-chart\""), "no GPU panel");
    assert!(
        text.contains("12.00 GiB <span class=\"exact\">(12884901888 bytes)</span>"),
        "no GPU value"
    );
}

#[test]
fn zero_gpu_intervals_are_refused_by_record_and_bench() {
    for (cmd, msg) in [
        (
            &["record", "--gpu-every", "0s", "--", "true"][..],
            "--gpu-every must be above 0",
        ),
        (
            &["bench", "--gpu-every", "0s", "-n", "1", "--", "true"][..],
            "--gpu-every must be above 0",
        ),
        (
            &["record", "--gpu-timeout", "0s", "--", "true"][..],
            "--gpu-timeout must be above 0",
        ),
    ] {
        let o = memmon().args(cmd).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(msg), "{cmd:?}");
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
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&two_gpus(&d.pid(), 6 * GIB, "off", ""));
    let bench = |budget: &str| {
        nvml.memmon()
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

#[test]
fn the_host_memory_a_gpu_process_maps_from_nvidia_device_files_is_its_own_column() {
    if !is_root() {
        skip(Need::Root, "a private /dev in a mount namespace needs root");
        return;
    }
    // A process maps 8 MiB of "/dev/nvidia0" (a tmpfs file in a /dev of its own mount
    // namespace, as a CUDA process maps the driver's device file for cudaHostAlloc).
    let dir = tempdir();
    let mut p = std::process::Command::new(outside_program("unshare"))
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs none /dev && truncate -s 8M /dev/nvidia0 && exec {} workload map-file:/dev/nvidia0:8MiB hold:60s",
            memmon_test_path().display()
        ))
        .spawn()
        .unwrap();
    let pid = p.id().to_string();
    assert!(wait_for(30.0, || std::fs::read_to_string(format!(
        "/proc/{pid}/maps"
    ))
    .is_ok_and(|m| m.contains("/dev/nvidia0"))));
    let nvml = FakeNvml::current(dir.path());
    nvml.set(&two_gpus(&pid, GIB, "off", ""));
    let out = dir.path().join("r.csv");
    record_pid(
        &nvml,
        &pid,
        &out,
        "3s",
        &["--gpu", "--pss", "--pss-every", "200ms"],
    );
    let _ = p.kill();
    let _ = p.wait();
    let mapped = column(&out, "nvidia_mapped_bytes");
    assert!(!mapped.is_empty());
    assert!(mapped.iter().all(|&m| m == 8 * MIB), "{mapped:?}");
    // Resident, read with PSS: every page was written.
    let rss = column(&out, "nvidia_mapped_rss_bytes");
    assert!(!rss.is_empty(), "no PSS tick");
    assert!(rss.iter().all(|&r| r == 8 * MIB), "{rss:?}");
    let text = String::from_utf8_lossy(&memmon().arg("summary").arg(&out).output().unwrap().stdout)
        .to_string();
    assert!(
        text.contains("NVIDIA maps   8.00 MiB (8388608 bytes) mapped from /dev/nvidia*"),
        "{text}"
    );
}

#[test]
fn memmon_in_a_container_maps_the_drivers_host_pids_through_the_hosts_proc() {
    if !is_root() {
        skip(Need::Root, "a PID namespace needs root");
        return;
    }
    // memmon and a workload in a PID namespace of their own, with the host's /proc bound at
    // HOST; the stand-in driver gives the workload's host PID, as NVIDIA's does.
    let dir = tempdir();
    let nvml = FakeNvml::current(dir.path());
    nvml.set("device 0 150754820096 off GPU-fake-0 Fake H200\n");
    let host = dir.path().join("host-proc");
    std::fs::create_dir(&host).unwrap();
    let run = |out: &Path, flags: &str| {
        let mut c = std::process::Command::new(outside_program("unshare"));
        c.env("LD_LIBRARY_PATH", &nvml.lib)
            .env("FAKE_NVML_CONFIG", &nvml.conf)
            .args(["--pid", "--fork", "--mount", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount --bind /proc {host} && mount -t proc proc /proc || exit 1; \
                 {w} workload hold:30s & \
                 exec {m} record --gpu --pid $! -i 100ms --gpu-every 100ms --duration 6s {flags} -o {out}",
                host = host.display(),
                w = memmon_test_path().display(),
                m = memmon_path().display(),
                out = out.display(),
            ))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    for (name, flags) in [
        ("mapped.csv", format!("--gpu-host-proc {}", host.display())),
        ("unmapped.csv", String::new()),
    ] {
        let out = dir.path().join(name);
        let child = run(&out, &flags);
        // The workload's host PID: a memmon-test whose NSpid has two entries, under this
        // unshare.
        let mut host_pid = None;
        assert!(wait_for(30.0, || {
            host_pid = descendants(child.id() as i32).into_iter().find(|&pid| {
                let nspid = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .unwrap_or_default()
                    .lines()
                    .find(|l| l.starts_with("NSpid:"))
                    .map(|l| l.split_whitespace().count());
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                nspid == Some(3) && comm.trim() == "memmon-test"
            });
            host_pid.is_some()
        }));
        let host_pid = host_pid.unwrap();
        nvml.set(&format!(
            "device {used} 150754820096 off GPU-fake-0 Fake H200\nprocess 0 {host_pid} {three}\nprocess 0 1 {GIB}\n",
            used = 5 * GIB,
            three = 3 * GIB
        ));
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {err}");
        let gpu = column(&out, "gpu_bytes");
        if name == "mapped.csv" {
            assert!(gpu.contains(&(3 * GIB)), "{name}: {gpu:?} {err}");
            let meta = meta_of(&out);
            assert!(
                meta["gpu"]["pid_namespace"]
                    .as_str()
                    .unwrap()
                    .contains("mapped through NSpid"),
                "{meta}"
            );
        } else {
            // Without the host's /proc: the host PIDs are not this namespace's, and memmon says
            // it cannot tell which GPU memory is the tree's.
            let (h, rows) = read_csv(&out);
            let i = h.iter().position(|c| c == "gpu_bytes").unwrap();
            assert!(
                rows.iter().rev().take(3).all(|r| r[i].is_empty()),
                "{rows:?}"
            );
            assert!(err.contains("--gpu-host-proc"), "{err}");
        }
    }
}

/// The descendants of `pid`, through the children files of its threads.
fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for k in kids.split_whitespace().filter_map(|k| k.parse().ok()) {
                out.push(k);
                next.push(k);
            }
        }
    }
    out
}

#[test]
fn max_gpu_on_a_recording_without_gpu_memory_fails_as_unchecked_not_a_pass() {
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
    // As compare and bench judge it (it exited 2 from summary alone).
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("budget failed: --max-gpu 1.00 GiB cannot be checked")
            && stderr.contains("has no GPU peak"),
        "{stderr}"
    );
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
