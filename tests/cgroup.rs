//! Memory cgroups: a launched tree in a cgroup of memmon's own (its exact peak), a whole cgroup
//! recorded with `--cgroup PATH`, `--cgroup auto`, and budgets (`--max-peak`, `--max-cgroup`).
//! Tests that make a real cgroup need root and a memory controller; where there is none they
//! say so and return (this development machine has v1's: they run here).

use crate::export::Guard;
use crate::util::*;
use std::path::{Path, PathBuf};

/// The directory under which a test may make a memory cgroup: v1's memory hierarchy, or a v2
/// hierarchy with the memory controller. `None`, with a message, where the test cannot.
pub(crate) fn memory_hierarchy() -> Option<PathBuf> {
    controller_hierarchy("memory")
}

/// The directory under which a test may make a cgroup with `controller` (`memory`, `pids`):
/// v1's hierarchy of that name, or a v2 hierarchy that enables it. `None`, with a message,
/// where the test cannot.
pub(crate) fn controller_hierarchy(controller: &str) -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        host_has("cgroup2", false, "making a cgroup needs root");
        return None;
    }
    let v1 = Path::new("/sys/fs/cgroup").join(controller);
    if v1.join("cgroup.procs").exists() {
        return Some(v1);
    }
    let v2 = Path::new("/sys/fs/cgroup");
    if std::fs::read_to_string(v2.join("cgroup.subtree_control"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == controller))
    {
        return Some(v2.to_path_buf());
    }
    host_has(
        "cgroup2",
        false,
        &format!(
            "no {controller} controller is mounted (neither v1 {controller}/ nor v2 with {controller})"
        ),
    );
    None
}

/// Where a memmon started by this test makes its own cgroup, under the memory hierarchy
/// `base`: beneath the test's own memory cgroup in v1, beside it in v2 (at the top where the
/// test runs in the root).
pub(crate) fn own_cgroup_parent(base: &Path) -> PathBuf {
    let text = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let v1 = text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls.split(',').any(|c| c == "memory").then_some(path)
    });
    let (path, v2) = match v1 {
        Some(p) => (p, false),
        None => (
            text.lines()
                .find_map(|l| l.strip_prefix("0::"))
                .unwrap_or("/"),
            true,
        ),
    };
    let mine = base.join(path.trim_start_matches('/'));
    if v2 && mine != base {
        mine.parent().unwrap().to_path_buf()
    } else {
        mine
    }
}

/// A cgroup made by a test, removed (after its processes are gone) when dropped.
pub(crate) struct TestCgroup(pub(crate) PathBuf);

impl TestCgroup {
    pub(crate) fn new(base: &Path, tag: &str) -> TestCgroup {
        let d = base.join(format!("memmon-test-{tag}-{}", std::process::id()));
        std::fs::create_dir(&d).unwrap();
        TestCgroup(d)
    }

    /// One limited to `bytes`, with no swap to escape to: over the limit the kernel must kill.
    pub(crate) fn limited(base: &Path, tag: &str, bytes: u64) -> TestCgroup {
        let cg = TestCgroup::new(base, tag);
        let (limit, swap) = if base.ends_with("memory") {
            ("memory.limit_in_bytes", "memory.swappiness")
        } else {
            ("memory.max", "memory.swap.max")
        };
        std::fs::write(cg.0.join(limit), bytes.to_string()).unwrap();
        let _ = std::fs::write(cg.0.join(swap), "0");
        cg
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// What the kernel's peak file of a memory cgroup offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeakFile {
    /// None (v2 before Linux 5.19): a cgroup's peak is not known, only its sampled usage.
    Missing,
    /// `memory.peak` that cannot be reset (5.19 to 6.11: read-only).
    ReadOnly,
    /// Resettable: v1 `memory.max_usage_in_bytes`, v2 `memory.peak` from 6.12.
    Resettable,
}

/// The peak file of the memory cgroups made under `base` (found on one made for the purpose),
/// checked against what the VM lane promised of the kernel it booted.
pub(crate) fn peak_file(base: &Path) -> PeakFile {
    use std::os::unix::fs::PermissionsExt;
    let probe = TestCgroup::new(base, "peak-file");
    let found = if probe.0.join("memory.max_usage_in_bytes").exists() {
        PeakFile::Resettable
    } else {
        match std::fs::metadata(probe.0.join("memory.peak")) {
            Err(_) => PeakFile::Missing,
            Ok(m) if m.permissions().mode() & 0o200 == 0 => PeakFile::ReadOnly,
            Ok(_) => PeakFile::Resettable,
        }
    };
    if host_promises("memory.peak-reset") {
        assert_eq!(
            found,
            PeakFile::Resettable,
            "promised a resettable memory.peak"
        );
    } else if host_promises("memory.peak") {
        assert_eq!(
            found,
            PeakFile::ReadOnly,
            "promised a read-only memory.peak"
        );
    } else if host_promises("cgroup2") {
        assert_eq!(found, PeakFile::Missing, "promised no memory.peak");
    }
    found
}

const PARENT: u64 = 100 * MIB;
const CHILD: u64 = 200 * MIB;

#[test]
fn a_launched_tree_in_its_own_cgroup_peaks_at_its_largest_simultaneous_sum() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    // The parent holds 100 MiB throughout; two children of 200 MiB each peak one after the
    // other. The tree's true peak is 300 MiB; the sum of the high-water marks is 500 MiB.
    let d = tempdir();
    let out = d.path().join("tree.csv");
    record_workload(
        &out,
        &["-i", "1s", "-q", "--own-cgroup"],
        &[
            "alloc:100MiB",
            "children:1:200MiB:300ms",
            "wait-children",
            "children:1:200MiB:300ms",
            "wait-children",
        ],
    )
    .assert()
    .success();
    let s = summary_json(&out);
    let cg = &s["cgroup"];
    assert_eq!(cg["own"], true, "{s:#}");
    if peak_file(&base) == PeakFile::Missing {
        // Before Linux 5.19 a v2 cgroup keeps no peak: the tree's peak is bounded, never the
        // cgroup's largest sampled usage called exact.
        assert!(cg["peak_bytes"].is_null(), "{s:#}");
        assert_eq!(s["peak"]["source"], "ru-maxrss", "{s:#}");
        assert!(s["peak"]["bytes"].as_u64().unwrap() >= CHILD, "{s:#}");
        let text = summary_text(&out);
        assert!(
            text.contains("cgroup peak   unknown: memory.peak was not read over the whole recording (no peak file before Linux 5.19"),
            "{text}"
        );
        return;
    }
    let peak = cg["peak_bytes"].as_u64().unwrap();
    // Each page once: the parent's and one child's, plus the program's own pages and the
    // kernel's (page tables, stacks) charged to the cgroup.
    assert!(
        (PARENT + CHILD..PARENT + CHILD + 48 * MIB).contains(&peak),
        "cgroup peak {peak} is not the largest simultaneous sum (300 MiB)"
    );
    assert!(
        peak < PARENT + 2 * CHILD,
        "cgroup peak {peak} is not below the sum of HWMs"
    );
    assert_eq!(s["peak"]["source"], "cgroup");
    assert_eq!(s["peak"]["scope"], "tree");
    assert_eq!(s["peak"]["bytes"].as_u64(), Some(peak));
    // The cgroup memmon made is gone.
    let dir = s["end"]["cgroup"]["dir"].as_str().unwrap();
    assert!(!Path::new(dir).exists(), "{dir} was left behind");
    let text = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("  peak          ")
            && text.contains("of the tree, exact: each page once, page cache included (memmon's own cgroup, holding the tree alone since the launch)"),
        "{text}"
    );
}

#[test]
fn without_its_own_cgroup_a_launched_tree_has_no_cgroup_peak() {
    let d = tempdir();
    let out = d.path().join("plain.csv");
    record_workload(
        &out,
        &["-i", "100ms", "-q", "--no-own-cgroup"],
        &["alloc:10MiB"],
    )
    .assert()
    .success();
    let s = summary_json(&out);
    assert!(s["cgroup"].is_null(), "{s:#}");
    assert_ne!(s["peak"]["source"], "cgroup");
}

/// Starts `memmon-test workload STEPS` inside the cgroup `dir` (it joins before exec, so every
/// page it touches is charged there); returns the child.
pub(crate) fn workload_in(dir: &Path, steps: &[&str]) -> std::process::Child {
    let procs = dir.join("cgroup.procs");
    let w = workload(steps);
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("echo $$ > {} && exec \"$@\"", procs.display()))
        .arg("sh")
        .args(&w)
        .spawn()
        .unwrap()
}

#[test]
fn record_cgroup_alone_records_a_whole_cgroup_and_warns_near_its_limit() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let cg = TestCgroup::new(&base, "whole");
    let v1 = base.ends_with("memory");
    let limit_file = if v1 {
        "memory.limit_in_bytes"
    } else {
        "memory.max"
    };
    std::fs::write(cg.0.join(limit_file), format!("{}", 110 * MIB)).unwrap();
    let mut w = workload_in(&cg.0, &["alloc:100MiB", "hold:3s"]);
    // Wait for the allocation to be charged.
    let usage = cg.0.join(if v1 {
        "memory.usage_in_bytes"
    } else {
        "memory.current"
    });
    assert!(wait_for(30.0, || std::fs::read_to_string(&usage)
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .is_some_and(|u| u >= 100 * MIB)));
    let d = tempdir();
    let out = d.path().join("whole.csv");
    let r = memmon()
        .args(["record", "-i", "200ms", "--duration", "1s", "--cgroup"])
        .arg(&cg.0)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("recording the cgroup"), "{err}");
    let _ = w.kill();
    let _ = w.wait();
    let s = summary_json(&out);
    assert_eq!(s["end"]["cgroup"]["own"], false);
    let largest = s["cgroup"]["largest_current_bytes"].as_u64().unwrap();
    assert!((100 * MIB..=110 * MIB).contains(&largest), "{s:#}");
    assert!(s["cgroup"]["anon_at_largest_bytes"].as_u64().unwrap() >= 100 * MIB);
    assert_eq!(s["cgroup"]["limit_bytes"].as_u64(), Some(110 * MIB));
    let warned = s["warnings"].as_array().unwrap().iter().any(|w| {
        w.as_str()
            .unwrap()
            .contains("came within 10% of its limit 110.0 MiB")
    });
    assert!(warned, "{:#}", s["warnings"]);
}

#[test]
fn cgroup_auto_refuses_a_cgroup_shared_with_other_processes() {
    if memory_hierarchy().is_none() {
        return;
    }
    // The test runner's own cgroup holds more than the workload's tree.
    let mut w = std::process::Command::new(memmon_test_path())
        .args(["workload", "alloc:1MiB", "hold:20s"])
        .spawn()
        .unwrap();
    let r = memmon()
        .args([
            "record",
            "-q",
            "--duration",
            "1s",
            "--cgroup",
            "auto",
            "--pid",
        ])
        .arg(w.id().to_string())
        .output()
        .unwrap();
    let _ = w.kill();
    let _ = w.wait();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--cgroup auto")
            && (err.contains("also holds PID") || err.contains("root cgroup")),
        "{err}"
    );
}

#[test]
fn cgroup_auto_reads_a_cgroup_that_holds_only_the_target() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let cg = TestCgroup::new(&base, "auto");
    let mut w = workload_in(&cg.0, &["alloc:50MiB", "hold:20s"]);
    let d = tempdir();
    let out = d.path().join("auto.csv");
    let pid = w.id();
    // The shell execs the workload: wait until it has allocated.
    assert!(wait_for(30.0, || std::fs::read_to_string(format!(
        "/proc/{pid}/status"
    ))
    .is_ok_and(|s| s.contains("VmHWM")
        && s.lines().any(|l| l.starts_with("VmRSS:")
            && l.split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<u64>().ok())
                .is_some_and(|k| k * 1024 >= 50 * MIB)))));
    let r = memmon()
        .args([
            "record",
            "-q",
            "-i",
            "200ms",
            "--duration",
            "1s",
            "--cgroup",
            "auto",
            "--pid",
        ])
        .arg(pid.to_string())
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let _ = w.kill();
    let _ = w.wait();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let s = summary_json(&out);
    assert!(
        s["end"]["cgroup"]["path"]
            .as_str()
            .unwrap()
            .contains("memmon-test-auto"),
        "{s:#}"
    );
    assert!(s["cgroup"]["largest_current_bytes"].as_u64().unwrap() >= 50 * MIB);
}

/// Waits until PID's VmRSS is at least `bytes`.
fn wait_rss(pid: u32, bytes: u64) -> bool {
    wait_for(30.0, || {
        std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
            s.lines().any(|l| {
                l.starts_with("VmRSS:")
                    && l.split_whitespace()
                        .nth(1)
                        .and_then(|k| k.parse::<u64>().ok())
                        .is_some_and(|k| k * 1024 >= bytes)
            })
        })
    })
}

#[test]
fn a_cgroup_a_target_moved_into_after_it_allocated_is_not_taken_for_its_tree() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    // 50 MiB touched in the test's own cgroup, then the process moved into a new one: the pages
    // stay charged where they were touched, and the new cgroup's peak never sees them.
    let mut w = std::process::Command::new(memmon_test_path())
        .args(["workload", "alloc:50MiB", "hold:30s"])
        .spawn()
        .unwrap();
    let pid = w.id();
    assert!(wait_rss(pid, 50 * MIB));
    let cg = TestCgroup::new(&base, "moved");
    std::fs::write(cg.0.join("cgroup.procs"), pid.to_string()).unwrap();
    let record = |cgroup: &str, out: &Path| {
        memmon()
            .args(["record", "-q", "-i", "100ms", "--duration", "500ms"])
            .args(["--cgroup", cgroup, "--pid", &pid.to_string(), "-o"])
            .arg(out)
            .output()
            .unwrap()
    };
    let d = tempdir();
    let auto = record("auto", &d.path().join("auto.csv"));
    let given = d.path().join("given.csv");
    let path = cg.0.to_str().unwrap().to_string();
    let r = record(&path, &given);
    let _ = w.kill();
    let _ = w.wait();
    let err = String::from_utf8_lossy(&auto.stderr);
    assert_eq!(auto.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--cgroup auto") && err.contains("charged to another cgroup"),
        "{err}"
    );
    // Given by path, it is read, but its peak is not called the tree's, and the summary says why.
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let s = summary_json(&given);
    assert_eq!(s["cgroup"]["holds_tree"], false, "{s:#}");
    assert!(
        s["cgroup"]["not_the_tree"]
            .as_str()
            .is_some_and(|w| w.contains("anonymous memory is charged to another cgroup")),
        "{s:#}"
    );
    assert_ne!(s["peak"]["source"], "cgroup", "{s:#}");
    let text = memmon().arg("summary").arg(&given).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("not the tree's peak: "), "{text}");
}

#[test]
fn a_missing_cgroup_path_is_not_found_naming_it() {
    let r = memmon()
        .args(["record", "--cgroup", "/no/such/memmon-cgroup"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    // Exit 3, as for a PID that does not exist.
    assert_eq!(r.status.code(), Some(3), "{err}");
    assert!(
        err.contains("/no/such/memmon-cgroup") && err.contains("--cgroup"),
        "{err}"
    );
}

#[test]
fn summary_max_peak_fails_naming_the_number_its_source_and_the_excess() {
    let d = tempdir();
    let out = d.path().join("budget.csv");
    record_workload(
        &out,
        &["-i", "100ms", "-q", "--no-own-cgroup"],
        &["alloc:64MiB", "hold:200ms"],
    )
    .assert()
    .success();
    let r = memmon()
        .args(["summary", "--max-peak", "32MiB"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("budget exceeded: --max-peak 32.00 MiB exceeded by")
            && err.contains("of the process")
            && err.contains("budget.csv"),
        "{err}"
    );
    memmon()
        .args(["summary", "--max-peak", "1GiB"])
        .arg(&out)
        .assert()
        .success();
    // No cgroup in the recording: a cgroup budget cannot pass.
    let r = memmon()
        .args(["summary", "--max-cgroup", "1GiB"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("memmon: budget failed: --max-cgroup 1.00 GiB cannot be checked:")
            && err.contains("has no cgroup peak"),
        "{err}"
    );
}

#[test]
fn compare_max_peak_checks_the_candidate() {
    let d = tempdir();
    let (a, b) = (d.path().join("a.csv"), d.path().join("b.csv"));
    for (f, size) in [(&a, "16MiB"), (&b, "64MiB")] {
        record_workload(
            f,
            &["-i", "100ms", "-q", "--no-own-cgroup"],
            &[&format!("alloc:{size}"), "hold:200ms"],
        )
        .assert()
        .success();
    }
    let r = memmon()
        .args(["compare", "--max-peak", "32MiB"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--max-peak 32.00 MiB exceeded") && err.contains("b.csv"),
        "{err}"
    );
}

#[test]
fn a_command_bench_in_its_own_cgroup_reports_each_runs_tree_peak_and_its_budget() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let peak_file = peak_file(&base);
    let d = tempdir();
    let json = d.path().join("bench.json");
    let mut c = memmon();
    c.args([
        "bench",
        "-n",
        "2",
        "-q",
        "-i",
        "1s",
        "--own-cgroup",
        "--max-cgroup",
        "200MiB",
        "--export-json",
    ])
    .arg(&json)
    .arg("--")
    // Both children hold their 100 MiB for 1.5 s: on a loaded machine they still overlap.
    .args(workload(&[
        "alloc:50MiB",
        "children:2:100MiB:1500ms",
        "wait-children",
    ]));
    let r = c.output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    // 50 MiB + 2 x 100 MiB at once: over the 200 MiB budget.
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--max-cgroup 200.0 MiB exceeded by") && err.contains("of run 1"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for run in v["runs"].as_array().unwrap() {
        if peak_file == PeakFile::Missing {
            // No peak file (v2 before 5.19): the budget judged the largest sampled usage, and
            // each run's peak is the kernel's of its largest process.
            assert!(run["cgroup_peak_bytes"].is_null(), "{run:#}");
            assert_eq!(run["peak"]["source"], "ru-maxrss", "{run:#}");
            continue;
        }
        assert_eq!(run["peak"]["source"], "cgroup", "{run:#}");
        assert_eq!(run["peak"]["scope"], "tree", "{run:#}");
        let p = run["cgroup_peak_bytes"].as_u64().unwrap();
        assert!((250 * MIB..250 * MIB + 48 * MIB).contains(&p), "{run:#}");
    }
}

#[test]
fn phase_peaks_reset_the_cgroup_peak_at_each_marker() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    // Phase one spikes to 300 MiB for 50 ms, between two samples a second apart; phase two
    // holds 50 MiB. The reset at marker two keeps phase one's spike out of phase two's peak.
    let d = tempdir();
    let out = d.path().join("phases.csv");
    let o = memmon()
        .args(["record", "-q", "-i", "1s", "--own-cgroup", "--phase-peaks"])
        .args(["--mark-stdout", r"^phase (?P<label>\w+)$", "-o"])
        .arg(&out)
        .arg("--")
        .args(workload(&[
            "say:phase one",
            "hold:300ms",
            "spike:300MiB:50ms",
            "hold:300ms",
            "say:phase two",
            "hold:300ms",
            "alloc:50MiB",
            // A sample falls in this hold: a phase's peak is read at its rows, and the read
            // at the end goes to the recording's peak only.
            "hold:1500ms",
        ]))
        .env("XDG_RUNTIME_DIR", d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary_json(&out);
    let phases = s["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "{s:#}");
    let cgroup = |i: usize| phases[i]["cgroup_peak_bytes"].as_u64();
    let peak = |i: usize| phases[i]["peak"]["bytes"].as_u64().unwrap();
    match peak_file(&base) {
        PeakFile::Resettable => {
            let (one, two) = (cgroup(0).unwrap(), cgroup(1).unwrap());
            assert!(one >= 300 * MIB, "phase one's cgroup peak {one}");
            assert!(
                (50 * MIB..150 * MIB).contains(&two),
                "phase two's cgroup peak {two}"
            );
            assert_eq!(s["end"]["cgroup"]["peak_resets"].as_u64(), Some(2), "{s:#}");
        }
        PeakFile::ReadOnly => {
            // memory.peak cannot be reset (5.19 to 6.11): phase one's spike rose the peak in
            // phase one; phase two's never rose above it, so phase two has no cgroup peak and
            // takes the kernel's of its process (whose VmHWM was reset at the marker).
            assert!(cgroup(0).unwrap() >= 300 * MIB, "{s:#}");
            assert_eq!(cgroup(1), None, "{s:#}");
            assert!((50 * MIB..150 * MIB).contains(&peak(1)), "{s:#}");
            assert!(
                s["end"]["cgroup"]["peak_reset_failures"].as_u64() >= Some(1),
                "{s:#}"
            );
        }
        PeakFile::Missing => {
            assert_eq!((cgroup(0), cgroup(1)), (None, None), "{s:#}");
            assert!(peak(0) >= 300 * MIB, "{s:#}");
            assert!((50 * MIB..150 * MIB).contains(&peak(1)), "{s:#}");
        }
    }
}

#[test]
fn a_user_who_may_not_make_a_cgroup_records_without_one_and_own_cgroup_fails_saying_why() {
    if memory_hierarchy().is_none() || !Path::new("/usr/bin/setpriv").exists() {
        skip(
            Need::RunAsNobody,
            "needs a memory cgroup, root and setpriv to run memmon as nobody",
        );
        return;
    }
    let d = tempdir();
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let as_nobody = |flags: &[&str], out: &str| {
        std::process::Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(memmon_path())
            .args(["record", "-i", "100ms"])
            .args(flags)
            .arg("-o")
            .arg(d.path().join(out))
            .args(["--", "true"])
            .output()
            .unwrap()
    };
    let o = as_nobody(&[], "default.csv");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("no cgroup of its own for the command (cannot make")
            && err.contains("the tree's peak is bounded, not exact"),
        "{err}"
    );
    let o = as_nobody(&["--own-cgroup"], "own.csv");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--own-cgroup: cannot make a memory cgroup for the command"),
        "{err}"
    );
}

#[test]
fn an_attached_cgroup_s_older_peak_is_its_lifetime_peak_unless_reset_at_the_start() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    if !host_has(
        "memory.peak",
        peak_file(&base) != PeakFile::Missing,
        "no cgroup peak file (v2 before Linux 5.19)",
    ) {
        return;
    }
    let cg = TestCgroup::new(&base, "reset");
    let v1 = base.ends_with("memory");
    let (usage, peak) = if v1 {
        ("memory.usage_in_bytes", "memory.max_usage_in_bytes")
    } else {
        ("memory.current", "memory.peak")
    };
    let mut w = workload_in(&cg.0, &["alloc:100MiB", "free", "alloc:10MiB", "hold:30s"]);
    let read = |f: &str| {
        std::fs::read_to_string(cg.0.join(f))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    // The 100 MiB came and went before the recording.
    assert!(wait_for(30.0, || read(peak) >= 100 * MIB
        && read(usage) < 50 * MIB
        && read(usage) >= 10 * MIB));
    let d = tempdir();
    let record = |flags: &[&str], out: &Path| {
        let o = memmon()
            .args([
                "record",
                "-q",
                "-i",
                "200ms",
                "--duration",
                "1s",
                "--cgroup",
            ])
            .arg(&cg.0)
            .args(["--pid", &w.id().to_string()])
            .args(flags)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        summary_json(out)
    };
    let plain = record(&[], &d.path().join("plain.csv"));
    let reset = record(&["--reset-peaks"], &d.path().join("reset.csv"));
    let _ = w.kill();
    let _ = w.wait();
    assert!(
        plain["cgroup"]["peak_bytes"].is_null(),
        "{:#}",
        plain["cgroup"]
    );
    assert!(plain["cgroup"]["lifetime_peak_bytes"].as_u64().unwrap() >= 100 * MIB);
    if peak_file(&base) == PeakFile::ReadOnly {
        // The reset was refused: still the lifetime peak, never called the recording's.
        assert!(
            reset["cgroup"]["peak_bytes"].is_null(),
            "{:#}",
            reset["cgroup"]
        );
        return;
    }
    let p = reset["cgroup"]["peak_bytes"].as_u64().unwrap();
    assert!((10 * MIB..50 * MIB).contains(&p), "{:#}", reset["cgroup"]);
}

/// `memmon record -- sh -c 'sleep 300 & sleep 300'` with `MEMMON_TEST_TOKEN=token` (which every
/// process it starts inherits), once the shell and both sleeps are in memmon's own cgroup. The
/// third value holds the recording's directory: were it removed, memmon would stop on its own
/// ("deleted while recording") and move the sleeps out of its cgroup, as at any normal end.
fn record_a_shell_with_two_children(
    base: &Path,
    token: &str,
) -> (Guard, PathBuf, tempfile::TempDir) {
    let d = tempdir();
    let rec = std::process::Command::new(memmon_path())
        .args(["record", "-q", "-i", "100ms", "-o"])
        .arg(d.path().join("killed.csv"))
        .args(["--", "sh", "-c", "sleep 300 & sleep 300"])
        .env("MEMMON_TEST_TOKEN", token)
        .spawn()
        .unwrap();
    // Killed if the test fails half-way.
    let rec = Guard(rec);
    // Its name holds memmon's start time, read once the child runs memmon (right after the
    // spawn it may still be the test binary: a slow guest's exec took that long).
    let mut cg = PathBuf::new();
    assert!(
        wait_for(30.0, || {
            cg = own_cgroup_dir(&own_cgroup_parent(base), rec.0.id(), 0);
            std::fs::read_to_string(cg.join("cgroup.procs")).is_ok_and(|p| p.lines().count() == 3)
        }),
        "the shell and its two children never were in {}",
        cg.display()
    );
    (rec, cg, d)
}

/// The cgroup memmon PID made as its Nth for itself, `memmon-PID-N-START` (START: its start
/// time in clock ticks): named from /proc/PID/stat while that memmon runs, else found by its
/// prefix, else a path that does not exist (the memmon and its cgroup are gone).
pub(crate) fn own_cgroup_dir(parent: &Path, pid: impl std::fmt::Display, n: u32) -> PathBuf {
    let prefix = format!("memmon-{pid}-{n}-");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let memmon =
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "memmon");
    // Field 22 of stat, the 20th after the name's closing parenthesis.
    let start = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19).map(String::from));
    if let (true, Some(start)) = (memmon, start) {
        return parent.join(format!("{prefix}{start}"));
    }
    std::fs::read_dir(parent)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(&prefix))
        })
        .unwrap_or_else(|| parent.join(format!("{prefix}gone")))
}

fn left_behind(cg: &Path, token: &str) -> String {
    let procs: Vec<String> = processes_with_env("MEMMON_TEST_TOKEN", token)
        .into_iter()
        .map(|p| format!("{p} ({})", cmdline(p)))
        .collect();
    format!(
        "cgroup {} exists: {}; processes: {procs:?}",
        cg.display(),
        cg.exists()
    )
}

#[test]
fn a_recorder_killed_with_sigkill_leaves_neither_its_cgroup_nor_a_process_of_its_command() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let token = format!("sigkill-{}", std::process::id());
    let (mut rec, cg, _dir) = record_a_shell_with_two_children(&base, &token);
    rec.0.kill().unwrap();
    let _ = rec.0.wait();
    // Its watcher kills what is in the cgroup and removes it; the shell's orphans go with it.
    let clean = wait_for(30.0, || {
        !cg.exists() && processes_with_env("MEMMON_TEST_TOKEN", &token).is_empty()
    });
    assert!(clean, "{}", left_behind(&cg, &token));
}

#[test]
fn a_cgroup_left_when_memmon_and_its_watcher_die_is_swept_by_the_next_memmon() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let token = format!("sweep-{}", std::process::id());
    let (mut rec, cg, _dir) = record_a_shell_with_two_children(&base, &token);
    // Its watcher killed first, then memmon: nothing is left to clean up.
    let watcher = processes_with_env("MEMMON_TEST_TOKEN", &token)
        .into_iter()
        .find(|&p| cmdline(p).contains("memmon-cgroup-reaper"))
        .expect("no watcher of memmon's cgroup");
    // SAFETY: signalling a process this test started (through memmon).
    unsafe { libc::kill(watcher, libc::SIGKILL) };
    rec.0.kill().unwrap();
    let _ = rec.0.wait();
    // The next memmon that makes a cgroup of its own sweeps the stale one (this one, or any
    // test's running meanwhile), killing the sleeps left in it.
    let d = tempdir();
    memmon()
        .args(["record", "-q", "-i", "100ms", "--own-cgroup", "-o"])
        .arg(d.path().join("next.csv"))
        .args(["--", "true"])
        .assert()
        .success();
    let clean = wait_for(30.0, || {
        !cg.exists() && processes_with_env("MEMMON_TEST_TOKEN", &token).is_empty()
    });
    assert!(clean, "{}", left_behind(&cg, &token));
}

#[test]
fn a_bench_run_whose_worker_the_oom_killer_took_says_so_in_its_row_and_a_warning() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let cg = TestCgroup::limited(&base, "oom", 60 * MIB);
    let d = tempdir();
    let (socket, pidfile) = (d.path().join("d.sock"), d.path().join("d.pid"));
    // A daemon that forks a worker per request, in the cgroup.
    let daemon = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {} && exec \"$@\"",
            cg.0.join("cgroup.procs").display()
        ))
        .arg("sh")
        .arg(memmon_test_path())
        .args(["test-daemon", "--fork", "--socket"])
        .arg(&socket)
        .arg("--pidfile")
        .arg(&pidfile)
        .spawn()
        .unwrap();
    let _daemon = Guard(daemon);
    assert!(wait_for(20.0, || std::fs::read_to_string(&pidfile)
        .is_ok_and(|t| t.trim().parse::<i32>().is_ok())));
    let json = d.path().join("bench.json");
    let r = memmon()
        .args([
            "bench",
            "-n",
            "1",
            "-i",
            "100ms",
            "--ignore-failure",
            "--cgroup",
            "auto",
        ])
        .arg("--pidfile")
        .arg(&pidfile)
        .arg("--export-json")
        .arg(&json)
        .arg("--")
        .arg(memmon_test_path())
        .args([
            "test-client",
            "--size",
            "100MiB",
            "--hold",
            "100ms",
            "--socket",
        ])
        .arg(&socket)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr),
    );
    // The worker asked for 100 MiB under a 60 MiB limit: killed, the daemon lives on.
    assert!(
        out.contains("OOM kills")
            && out.contains("warning: the kernel's OOM killer killed processes of the cgroup during run 1: the peak is where the limit stopped the tree"),
        "{out}\n{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(
        v["runs"][0]["cgroup_oom_kills"].as_u64() >= Some(1),
        "{:#}",
        v["runs"][0]
    );
}

#[test]
fn a_launched_command_stays_under_the_memory_limit_memmon_runs_under() {
    // Without memmon the workload is OOM-killed at the limit of the cgroup it runs in. Its
    // cgroup of memmon's own once sat at the top of the hierarchy, outside that limit: there it
    // allocated 200 MiB, exited 0, and the summary said "limit none".
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let cg = TestCgroup::limited(&base, "limit", 64 * MIB);
    let v1 = base.ends_with("memory");
    let d = tempdir();
    let out = d.path().join("limited.csv");
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {} && exec \"$@\"",
            cg.0.join("cgroup.procs").display()
        ))
        .arg("sh")
        .arg(memmon_path())
        .args(["record", "-i", "100ms", "-o"])
        .arg(&out)
        .arg("--")
        .args(workload(&["alloc:200MiB", "hold:300ms"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(137),
        "the workload was not killed at the limit\n{stderr}"
    );
    if v1 {
        // Beneath the limited cgroup: its limit is the command's, and the kill is counted.
        assert!(stderr.contains("limit 64.00 MiB"), "{stderr}");
        assert!(stderr.contains("1 OOM kill"), "{stderr}");
    } else {
        // v2 allows no cgroup beside the limited one without escaping it: none is made.
        assert!(
            stderr.contains("no cgroup of its own for the command")
                && stderr.contains("memory.max is 67108864"),
            "{stderr}"
        );
    }
}

/// A shell that makes a cgroup `inner` inside the memory cgroup it runs in (v1's memory
/// hierarchy or v2's), moves a `sleep 300` into it, prints `made` and then runs `then`.
fn make_inner_cgroup_then(then: &str) -> String {
    format!(
        r#"p=$(sed -n 's/^[0-9]*:[^:]*memory[^:]*:\(.*\)/\1/p' /proc/self/cgroup)
if [ -n "$p" ]; then cg=/sys/fs/cgroup/memory$p; else cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); fi
mkdir "$cg/inner" && mkdir "$cg/inner/deeper" || exit 9
sleep 300 &
echo $! > "$cg/inner/deeper/cgroup.procs" || exit 8
echo made
{then}"#
    )
}

#[test]
fn cgroups_the_command_made_inside_memmons_own_go_with_it_deepest_first_their_processes_killed() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let token = format!("inner-{}", std::process::id());
    let d = tempdir();
    let out = d.path().join("inner.csv");
    let rec = std::process::Command::new(memmon_path())
        .args(["record", "-i", "50ms", "--own-cgroup", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &make_inner_cgroup_then("exit 0")])
        .env("MEMMON_TEST_TOKEN", &token)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{err}");
    // Before: "Device or resource busy", the cgroup left, and every later memmon warned of it.
    assert!(
        !err.contains("resource busy") && !err.contains("warning: cgroup"),
        "{err}"
    );
    let cg = own_cgroup_dir(&own_cgroup_parent(&base), rec_pid(&out), 0);
    assert!(!cg.exists(), "{} is still there: {err}", cg.display());
    assert!(
        wait_for(10.0, || processes_with_env("MEMMON_TEST_TOKEN", &token)
            .is_empty()),
        "{}",
        left_behind(&cg, &token)
    );
    let text = summary_text(&out);
    assert!(
        text.contains("the command made 2 cgroups inside memmon's own: removed with it, deepest first, killing 1 process left in them"),
        "{text}"
    );
    let next = memmon()
        .args(["record", "-q", "-i", "100ms", "--own-cgroup", "-o"])
        .arg(d.path().join("next.csv"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&next.stderr);
    assert!(!err.contains(&cg.display().to_string()), "{err}");

    // memmon killed: its watcher removes the cgroups inside too, then its own.
    let token = format!("inner-kill-{}", std::process::id());
    let mut rec = Guard(
        std::process::Command::new(memmon_path())
            .args(["record", "-q", "-i", "100ms", "--own-cgroup", "-o"])
            .arg(d.path().join("killed.csv"))
            .args(["--", "sh", "-c", &make_inner_cgroup_then("sleep 300")])
            .env("MEMMON_TEST_TOKEN", &token)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut made = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(rec.0.stdout.take().unwrap()),
        &mut made,
    )
    .unwrap();
    assert_eq!(made, "made\n");
    let cg = own_cgroup_dir(&own_cgroup_parent(&base), rec.0.id(), 0);
    assert!(cg.join("inner/deeper").exists());
    rec.0.kill().unwrap();
    let _ = rec.0.wait();
    let clean = wait_for(30.0, || {
        !cg.exists() && processes_with_env("MEMMON_TEST_TOKEN", &token).is_empty()
    });
    assert!(clean, "{}", left_behind(&cg, &token));
}

/// The PID of the memmon that wrote the recording `out`, from its sidecar.
fn rec_pid(out: &Path) -> u64 {
    let side = format!("{}.meta.json", out.display());
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(side).unwrap()).unwrap();
    m["end"]["cgroup"]["path"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .and_then(|n| n.strip_prefix("memmon-"))
        .and_then(|n| n.split('-').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no memmon cgroup in {m:#}"))
}
