//! What only a real host shows: cgroup v2 services and slices as systemd lays them out, memory
//! pressure (PSI), swap, NUMA nodes, threaded cgroups, a service removed and made again, a tree
//! that leaves its cgroup. The VM lane (scripts/vm) runs these on Debian's 5.10, 6.1 and 6.12
//! kernels with a real v2 memory controller, two NUMA nodes and a swap device, and there a test
//! that would skip for want of what the kernel promised fails (`host_has`). On this machine
//! (cgroup v1's memory controller) those that need v2 skip, saying so.

use crate::cgroup::{memory_hierarchy, peak_file, PeakFile, TestCgroup};
use crate::export::Guard;
use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A v2 hierarchy with the memory controller for the cgroups below its root; `None` (the test
/// skips, or fails where the host promised cgroup v2) elsewhere.
fn v2_hierarchy() -> Option<PathBuf> {
    let base = memory_hierarchy()?;
    let v2 = !base.ends_with("memory");
    host_has(
        "cgroup2",
        v2,
        "the memory controller is cgroup v1's here (memory.high, memory.pressure, pswpin, threaded cgroups are v2's)",
    )
    .then_some(base)
}

/// A slice and a service in it, as systemd lays them out (`/memmon-test-PID.slice/NAME.service`),
/// memory and pids handed down to the service; every process in them killed and both removed
/// when dropped.
struct Service {
    slice: PathBuf,
    dir: PathBuf,
}

impl Service {
    fn new(base: &Path, name: &str) -> Service {
        let slice = base.join(format!("memmon-test-{name}-{}.slice", std::process::id()));
        std::fs::create_dir(&slice).unwrap();
        if !base.ends_with("memory") {
            std::fs::write(slice.join("cgroup.subtree_control"), "+memory +pids").unwrap();
        }
        let dir = slice.join(format!("{name}.service"));
        std::fs::create_dir(&dir).unwrap();
        Service { slice, dir }
    }

    /// Sets a file of the service's cgroup (`memory.high`, `memory.max`).
    fn set(&self, file: &str, value: &str) {
        std::fs::write(self.dir.join(file), value)
            .unwrap_or_else(|e| panic!("cannot write {value} to {file}: {e}"));
    }

    /// The cgroup path of the service, as /proc/PID/cgroup writes it.
    fn path(&self) -> String {
        let base = self.slice.parent().unwrap();
        format!("/{}", self.dir.strip_prefix(base).unwrap().display())
    }

    /// `program`, to be run in the service: a shell that joins it, then execs the program.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > {} && exec \"$@\"",
                self.dir.join("cgroup.procs").display()
            ))
            .arg("sh")
            .arg(program);
        c
    }

    /// Starts `program args` in the service (it joins before exec), and waits until the
    /// service lists it.
    fn start(&self, program: &Path, args: &[&str]) -> Guard {
        let procs = self.dir.join("cgroup.procs");
        let child = Guard(self.command(program).args(args).spawn().unwrap());
        let pid = child.0.id().to_string();
        assert!(
            wait_for(30.0, || std::fs::read_to_string(&procs)
                .is_ok_and(|t| t.lines().any(|l| l == pid))),
            "{program:?} did not join {}",
            self.dir.display()
        );
        child
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        for dir in [&self.dir, &self.slice] {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            for _ in 0..100 {
                let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                for pid in procs
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                {
                    // SAFETY: kill has no memory preconditions; the PID is one the test put here.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

/// Waits until the recording `out` has its first row: the recorder's first readings (of the
/// cgroup's peak file too) are taken, so what the test does next falls in the recording.
fn wait_for_first_row(out: &Path) {
    assert!(
        wait_for(60.0, || std::fs::read_to_string(out)
            .is_ok_and(|t| t.lines().count() >= 2)),
        "no row in {}",
        out.display()
    );
}

/// Records the daemon `pid` through `--cgroup auto` every `interval` (`quiet`: `-q`) into
/// `out`, lets it go (writes `go`) once the first row is in, and waits for the recorder: its
/// exit status and stderr.
fn record_until_go(
    pid: u32,
    interval: &str,
    quiet: bool,
    go: &Path,
    out: &Path,
) -> (std::process::ExitStatus, String) {
    let mut cmd = std::process::Command::new(memmon_path());
    cmd.arg("record");
    if quiet {
        cmd.arg("-q");
    }
    let mut rec = cmd
        .args(["-i", interval, "--cgroup", "auto", "--pid"])
        .arg(pid.to_string())
        .arg("-o")
        .arg(out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_first_row(out);
    std::fs::write(go, "").unwrap();
    let st = rec.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(rec.stderr.as_mut().unwrap(), &mut err).unwrap();
    (st, err)
}

/// The source of a recording's peak where the cgroup's peak file rose during it: the
/// cgroup's, where the kernel keeps one (v1, v2 from 5.19), else the process's VmHWM.
fn rose_source(base: &Path) -> &'static str {
    if peak_file(base) == PeakFile::Missing {
        "vmhwm"
    } else {
        "cgroup"
    }
}

/// A workload that waits for `go` (a file) before its `steps`, started in `service`.
fn waiting_workload(service: &Service, go: &Path, steps: &[&str]) -> Guard {
    let wait = format!("wait-file:{}", go.display());
    let mut all = vec![wait.as_str()];
    all.extend_from_slice(steps);
    let w = workload(&all);
    service.start(
        Path::new(&w[0]),
        &w[1..].iter().map(String::as_str).collect::<Vec<_>>(),
    )
}

#[test]
fn each_bench_run_of_a_daemon_in_a_service_gets_its_own_peak_as_far_as_the_kernel_allows() {
    // Run 1 asks for 120 MiB, run 2 for 40 MiB. Where the cgroup's peak can be reset (v1, v2
    // from 6.12) each run's is its own, exact; where it cannot (6.1) or there is none (5.10),
    // run 2 must not inherit run 1's 120 MiB: its peak is the daemon's own high-water mark,
    // reset per run through /proc/PID/clear_refs.
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let svc = Service::new(&base, "prover");
    let d = tempdir();
    let (socket, pidfile) = (d.path().join("d.sock"), d.path().join("d.pid"));
    let _daemon = svc.start(
        &memmon_test_path(),
        &[
            "test-daemon",
            "--socket",
            socket.to_str().unwrap(),
            "--pidfile",
            pidfile.to_str().unwrap(),
        ],
    );
    assert!(wait_for(30.0, || std::fs::read_to_string(&pidfile)
        .is_ok_and(|t| t.trim().parse::<i32>().is_ok())));
    let json = d.path().join("bench.json");
    let o = memmon()
        .args(["bench", "-q", "-n", "2", "-i", "100ms", "--pidfile"])
        .arg(&pidfile)
        .arg("--export-json")
        .arg(&json)
        .arg("--")
        .arg(memmon_test_path())
        .args(["test-client", "--size", "120MiB,40MiB", "--hold", "200ms"])
        .arg("--socket")
        .arg(&socket)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let run = |i: usize| &v["runs"][i];
    let peak = |i: usize| run(i)["peak"]["bytes"].as_u64().unwrap();
    let source = |i: usize| run(i)["peak"]["source"].as_str().unwrap().to_string();
    assert!(
        (120 * MIB..140 * MIB).contains(&peak(0)),
        "run 1: {:#}",
        run(0)
    );
    assert!(
        (40 * MIB..60 * MIB).contains(&peak(1)),
        "run 2 took run 1's peak or lost its own: {:#}\n{err}",
        run(1)
    );
    assert_eq!(run(1)["peak"]["exact"], true, "{:#}", run(1));
    // One process: its own mark, reset at the run's start, is what it needed, whatever the
    // kernel's cgroup peak file allows; the service's charge is beside it where the file can be
    // reset per run.
    assert_eq!(source(1), "vmhwm", "run 2: {:#}\n{err}", run(1));
    if peak_file(&base) == PeakFile::Resettable {
        let charged = run(1)["cgroup_peak_bytes"].as_u64().unwrap_or(0);
        assert!(
            (40 * MIB..60 * MIB).contains(&charged),
            "run 2's cgroup peak: {:#}",
            run(1)
        );
    }
}

#[test]
fn cgroup_auto_reads_a_daemon_s_service_with_the_limit_its_slice_sets() {
    // systemd's MemoryMax= on a slice binds every service in it: the service's own memory.max
    // says `max`, its parent's says the limit.
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let v1 = base.ends_with("memory");
    let svc = Service::new(&base, "limited");
    let limit = 512 * MIB;
    let file = if v1 {
        "memory.limit_in_bytes"
    } else {
        "memory.max"
    };
    std::fs::write(svc.slice.join(file), limit.to_string()).unwrap();
    let d = tempdir();
    let go = d.path().join("go");
    let w = waiting_workload(&svc, &go, &["alloc:64MiB", "hold:600ms"]);
    let out = d.path().join("svc.csv");
    let (st, err) = record_until_go(w.0.id(), "100ms", true, &go, &out);
    assert!(st.success(), "{err}");
    let s = summary_json(&out);
    let cg = &s["cgroup"];
    assert_eq!(cg["path"], svc.path(), "{s:#}");
    assert_eq!(cg["limit_bytes"].as_u64(), Some(limit), "{s:#}");
    assert_eq!(cg["holds_tree"], true, "{s:#}");
    // The workload's 64 MiB: one process, its own mark is the headline; the service's peak,
    // which rose during the recording, is beside it (where the kernel keeps a peak file).
    assert_eq!(s["peak"]["source"], "vmhwm", "{s:#}");
    assert_eq!(s["peak"]["exact"], true, "{s:#}");
    assert!(s["peak"]["bytes"].as_u64().unwrap() >= 64 * MIB, "{s:#}");
    if rose_source(&base) == "cgroup" {
        assert!(cg["peak_bytes"].as_u64().unwrap_or(0) >= 64 * MIB, "{s:#}");
    }
}

#[test]
fn memory_high_pressure_shows_in_the_service_s_stall_and_its_high_events() {
    let Some(base) = v2_hierarchy() else {
        return;
    };
    if !host_has(
        "psi",
        Path::new("/proc/pressure/memory").exists(),
        "no PSI (/proc/pressure/memory): a kernel without CONFIG_PSI, or booted without psi=1",
    ) {
        return;
    }
    let svc = Service::new(&base, "throttled");
    // 48 MiB asked of a service held to 16 MiB by memory.high: the kernel reclaims (to swap where
    // there is some) and throttles the workload, which stalls on memory.
    svc.set("memory.high", &(16 * MIB).to_string());
    let d = tempdir();
    let go = d.path().join("go");
    let w = waiting_workload(&svc, &go, &["alloc:48MiB", "hold:200ms"]);
    let out = d.path().join("high.csv");
    let (st, err) = record_until_go(w.0.id(), "50ms", true, &go, &out);
    assert!(st.success(), "{err}");
    let stall = column(&out, "cgroup_psi_memory_some_us");
    let high = column(&out, "cgroup_high_events");
    assert!(
        stall.last().is_some_and(|&s| s > 0),
        "the service's stall never moved: {stall:?}"
    );
    assert!(
        high.last().is_some_and(|&h| h > 0),
        "no memory.events high: {high:?}"
    );
    let text = summary_text(&out);
    assert!(text.contains("the cgroup's"), "{text}");
}

#[test]
fn a_service_over_its_memory_max_swaps_and_its_own_swap_columns_say_so() {
    let Some(base) = v2_hierarchy() else {
        return;
    };
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    if !host_has(
        "swap",
        swaps.lines().count() > 1,
        "no swap device (/proc/swaps)",
    ) {
        return;
    }
    let svc = Service::new(&base, "swapping");
    svc.set("memory.max", &(32 * MIB).to_string());
    let d = tempdir();
    let go = d.path().join("go");
    let w = waiting_workload(&svc, &go, &["alloc:64MiB", "hold:300ms"]);
    let out = d.path().join("swap.csv");
    let (st, err) = record_until_go(w.0.id(), "50ms", true, &go, &out);
    assert!(st.success(), "{err}");
    // 64 MiB in 32: pages went out, as the cgroup itself counts them where its kernel does
    // (memory.stat pswpout: not Debian's 5.10, 6.1 or 6.12), else as the machine does. Fewer
    // than the 32 MiB over the limit reach the device where zswap keeps them (same-filled pages
    // never do); the process's own count of what it has swapped (VmSwap) holds them all.
    let own = column(&out, "cgroup_swap_out_pages");
    let machine = column(&out, "swap_out_pages");
    let (counted, other) = if own.is_empty() {
        (&machine, &own)
    } else {
        (&own, &machine)
    };
    assert!(
        counted.last().is_some_and(|&p| p > 0),
        "swap out pages: cgroup's {own:?}, machine's {machine:?}"
    );
    // Never both: the machine's is read only where the cgroup does not count its own.
    assert!(other.is_empty(), "cgroup's {own:?}, machine's {machine:?}");
    let swapped = column(&out, "swap_bytes");
    assert!(
        swapped.iter().any(|&b| b >= 24 * MIB),
        "the process's VmSwap never showed the 32 MiB over the limit: {swapped:?}"
    );
    let text = summary_text(&out);
    assert!(
        text.contains("needed: RAM and swap together, between"),
        "{text}"
    );
    // What it needed is RAM and swap together: the 64 MiB, not the 32 the limit held in RAM;
    // a budget below it fails.
    let s = summary_json(&out);
    let peak = &s["peak"];
    assert!(peak["bytes"].as_u64().unwrap() >= 56 * MIB, "{peak:#}");
    assert!(peak["ram_bytes"].as_u64().unwrap() <= 40 * MIB, "{peak:#}");
    assert_eq!(peak["exact"], false, "{peak:#}");
    let gate = memmon()
        .args(["summary", "--max-peak", "48MiB"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        gate.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&gate.stdout)
    );
    // The limit is named with the cgroup that sets it.
    let limits = s["cgroup"]["limits"].as_array().unwrap();
    assert!(
        limits.iter().any(|l| l["path"] == svc.path().as_str()
            && l["max_bytes"] == 32 * MIB
            && l["events_during"]["max"].as_u64() > Some(0)),
        "{limits:#?}"
    );
}

/// memmon, started in the cgroup whose `cgroup.procs` is `procs` and kept from the kernel's OOM
/// killer (`oom_score_adj` -1000, where the machine lets root lower it), where it shares a limit
/// with the command it launches: the test is of what memmon says of the kill, so memmon must
/// outlive it (a second OOM while the first victim's memory is reaped may otherwise take the
/// recorder: seen on 5.10 and 7.3). The command, `workload(steps)` after `--`, runs at 0 again.
fn memmon_kept_from_oom(procs: &Path, memmon_args: &[&str], steps: &[&str]) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "echo $$ > {} && {{ echo -1000 > /proc/self/oom_score_adj; }} 2>/dev/null; exec \"$@\"",
            procs.display()
        ))
        .arg("sh")
        .arg(memmon_path())
        .args(memmon_args)
        .args([
            "--",
            "sh",
            "-c",
            "{ echo 0 > /proc/self/oom_score_adj; } 2>/dev/null; exec \"$@\"",
            "sh",
        ])
        .args(workload(steps));
    c
}

/// The path of a service's slice, as /proc/PID/cgroup writes it.
fn slice_path(svc: &Service) -> String {
    format!("/{}", svc.slice.file_name().unwrap().to_string_lossy())
}

#[test]
fn memory_high_on_the_slice_above_a_service_is_named_there_and_the_need_is_not_capped_by_it() {
    let Some(base) = v2_hierarchy() else {
        return;
    };
    let svc = Service::new(&base, "high-above");
    // memory.high on the slice, not on the service: the slice's own counters take its events.
    std::fs::write(svc.slice.join("memory.high"), (16 * MIB).to_string()).unwrap();
    let d = tempdir();
    let go = d.path().join("go");
    let w = waiting_workload(&svc, &go, &["alloc:48MiB", "hold:200ms"]);
    let out = d.path().join("high-above.csv");
    let (st, err) = record_until_go(w.0.id(), "50ms", true, &go, &out);
    assert!(st.success(), "{err}");
    let s = summary_json(&out);
    let limits = s["cgroup"]["limits"].as_array().unwrap();
    let slice = slice_path(&svc);
    assert!(
        limits.iter().any(|l| l["path"] == slice.as_str()
            && l["high_bytes"] == 16 * MIB
            && l["events_during"]["high"].as_u64() > Some(0)),
        "{limits:#?}"
    );
    let text = summary_text(&out);
    assert!(
        text.contains(&format!(
            "held at the limit of {slice} (memory.high 16.00 MiB)"
        )),
        "{text}"
    );
    // Held at 16 MiB in RAM (the rest swapped, or over the soft limit where it could not be),
    // it needed the 48: a budget of 32 fails.
    assert!(
        s["peak"]["bytes"].as_u64().unwrap() >= 44 * MIB,
        "{:#}",
        s["peak"]
    );
    let gate = memmon()
        .args(["summary", "--max-peak", "32MiB"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(gate.status.code(), Some(1));
}

#[test]
fn an_oom_kill_at_the_slice_s_limit_names_the_slice_not_memmon_s_cgroup() {
    let Some(base) = v2_hierarchy() else {
        return;
    };
    let svc = Service::new(&base, "oom-above");
    std::fs::write(svc.slice.join("memory.max"), (64 * MIB).to_string()).unwrap();
    // No swap to escape to: over the limit the kernel must kill.
    let _ = std::fs::write(svc.slice.join("memory.swap.max"), "0");
    let d = tempdir();
    let out = d.path().join("oom.csv");
    // memmon in the service (no limit of its own): its cgroup for the command goes beside it,
    // under the slice and its limit.
    let o = memmon_kept_from_oom(
        &svc.dir.join("cgroup.procs"),
        &["record", "-q", "-i", "50ms", "-o", out.to_str().unwrap()],
        &["alloc:200MiB", "hold:300ms"],
    )
    .output()
    .unwrap();
    assert_ne!(o.status.code(), Some(0));
    let text = summary_text(&out);
    let slice = slice_path(&svc);
    assert!(
        text.contains(&format!("at the limit of {slice} (memory.max 64.00 MiB")),
        "{text}"
    );
}

#[test]
fn a_command_launched_by_memmon_in_a_cpuset_stays_on_its_cpus_and_node() {
    let Some(base) = v2_hierarchy() else {
        return;
    };
    let nodes = numa_nodes();
    if !host_has("numa", nodes >= 2, &format!("{nodes} NUMA node(s), not 2")) {
        return;
    }
    let svc = Service::new(&base, "cpuset");
    std::fs::write(svc.slice.join("cgroup.subtree_control"), "+cpuset").unwrap();
    svc.set("cpuset.cpus", "1");
    svc.set("cpuset.mems", "1");
    let d = tempdir();
    let out = d.path().join("cpuset.csv");
    // memmon in the service: a cgroup of its own beside the service would leave the cpuset, so
    // the command runs in the service, and memmon says why.
    let o = svc
        .command(&memmon_path())
        .args(["record", "-i", "50ms", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c"])
        .arg("grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("Mems_allowed_list:\t1\n"), "{stdout}");
    assert!(stdout.contains("Cpus_allowed_list:\t1\n"), "{stdout}");
    assert!(stderr.contains("cpuset.cpus is 1"), "{stderr}");
}

/// The NUMA table's largest bytes on `node` (its `nodeN_bytes` column).
fn numa_peak(recording: &Path, node: u32) -> u64 {
    let table = PathBuf::from(format!("{}.numa.csv", recording.display()));
    column(&table, &format!("node{node}_bytes"))
        .into_iter()
        .max()
        .unwrap_or_else(|| panic!("no node{node} rows in {}", table.display()))
}

#[test]
fn memory_bound_to_node_1_shows_there_for_a_launched_command_and_a_daemon() {
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let nodes = numa_nodes();
    if !host_has("numa", nodes >= 2, &format!("{nodes} NUMA node(s), not 2")) {
        return;
    }
    let numactl = outside_program("numactl");
    let d = tempdir();
    // A launched command: memmon's own cgroup, read per node.
    let launched = d.path().join("launched.csv");
    let o = memmon()
        .args(["record", "-q", "-i", "100ms", "-o"])
        .arg(&launched)
        .arg("--")
        .arg(&numactl)
        .arg("--membind=1")
        .args(workload(&["alloc:64MiB", "hold:500ms"]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(numa_peak(&launched, 1) >= 60 * MIB, "node 1");
    assert!(numa_peak(&launched, 0) < 16 * MIB, "node 0");
    // A daemon in its service: --cgroup auto reads the service per node.
    let svc = Service::new(&base, "numa");
    let go = d.path().join("go");
    let mut args = vec!["--membind=1".to_string()];
    args.extend(workload(&[
        &format!("wait-file:{}", go.display()),
        "alloc:64MiB",
        "hold:500ms",
    ]));
    let w = svc.start(
        &numactl,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let daemon = d.path().join("daemon.csv");
    let mut rec = std::process::Command::new(memmon_path())
        .args(["record", "-q", "-i", "100ms", "--cgroup", "auto", "--pid"])
        .arg(w.0.id().to_string())
        .arg("-o")
        .arg(&daemon)
        .spawn()
        .unwrap();
    wait_for_first_row(&daemon);
    std::fs::write(&go, "").unwrap();
    assert!(rec.wait().unwrap().success());
    assert!(numa_peak(&daemon, 1) >= 60 * MIB, "node 1");
    assert!(numa_peak(&daemon, 0) < 16 * MIB, "node 0");
    let s = summary_json(&daemon);
    let node1 = s["numa_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == 1)
        .unwrap();
    assert!(node1["peak_bytes"].as_u64().unwrap() >= 60 * MIB, "{s:#}");
    // Attached with no cgroup given: the summary says why there is no memory per node, not
    // stderr alone.
    // It lives until memmon has its first row (a guest under emulation takes seconds to attach).
    let go2 = d.path().join("go2");
    let mut w = spawn_workload(&[&format!("wait-file:{}", go2.display())]);
    let plain = d.path().join("plain.csv");
    let mut rec = std::process::Command::new(memmon_path())
        .args(["record", "-q", "-i", "100ms", "--pid"])
        .arg(w.id().to_string())
        .arg("-o")
        .arg(&plain)
        .spawn()
        .unwrap();
    wait_for_first_row(&plain);
    std::fs::write(&go2, "").unwrap();
    let _ = w.wait();
    assert!(rec.wait().unwrap().success());
    let text = summary_text(&plain);
    let read = summary_json(&plain)["numa_nodes"]
        .as_array()
        .is_some_and(|n| !n.is_empty());
    assert!(
        read || text.contains("NUMA nodes    not read: 2 NUMA nodes, but"),
        "{text}"
    );
}

#[test]
fn a_daemon_whose_main_thread_sits_in_a_threaded_cgroup_is_read_through_its_domain() {
    // A daemon that puts its threads in threaded cgroups (cpu limits per thread pool): memory
    // is a domain controller, so its memory is its threaded domain's, the service.
    let Some(base) = v2_hierarchy() else {
        return;
    };
    let svc = Service::new(&base, "threaded");
    let pool = svc.dir.join("pool");
    std::fs::create_dir(&pool).unwrap();
    std::fs::write(pool.join("cgroup.type"), "threaded").unwrap();
    let d = tempdir();
    let go = d.path().join("go");
    // Its threads first, then the go-ahead: they are there to be moved.
    let steps = workload(&[
        "threads:2",
        &format!("wait-file:{}", go.display()),
        "alloc:32MiB",
        "hold:600ms",
    ]);
    let w = svc.start(
        Path::new(&steps[0]),
        &steps[1..].iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let pid = w.0.id();
    // The main thread (and with it what /proc/PID/cgroup says) goes into the threaded part.
    assert!(wait_for(30.0, || std::fs::read_dir(format!(
        "/proc/{pid}/task"
    ))
    .is_ok_and(|t| t.count() >= 3)));
    std::fs::write(pool.join("cgroup.threads"), pid.to_string()).unwrap();
    let said = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(said.contains("/pool"), "{said}");
    let out = d.path().join("threaded.csv");
    let (st, err) = record_until_go(pid, "100ms", false, &go, &out);
    assert!(st.success(), "{err}");
    let s = summary_json(&out);
    assert_eq!(s["cgroup"]["path"], svc.path(), "{s:#}");
    assert_eq!(s["cgroup"]["holds_tree"], true, "{s:#}\n{err}");
    // One process: its own mark is the headline; the domain's peak is beside it where the
    // kernel keeps one.
    assert_eq!(s["peak"]["source"], "vmhwm", "{s:#}");
    assert!(s["peak"]["bytes"].as_u64().unwrap() >= 32 * MIB, "{s:#}");
    if rose_source(&base) == "cgroup" {
        assert!(
            s["cgroup"]["peak_bytes"].as_u64().unwrap_or(0) >= 32 * MIB,
            "{s:#}"
        );
    }
}

#[test]
fn a_service_removed_and_made_again_while_recorded_keeps_each_phase_s_peak_and_its_pressure() {
    // A daemon followed by its pidfile, its service's cgroup given (`--cgroup`), peaks per phase
    // (`--phase-peaks`). Between phase one and phase two the service restarts as systemd
    // restarts one: the daemon stopped, its cgroup removed and made again under the same name, a
    // new daemon in it. memmon follows the pidfile to the new daemon and reads the new cgroup's
    // files: phase two's peak is the new cgroup's, its pressure goes on from phase one's.
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let v2 = !base.ends_with("memory");
    let svc = Service::new(&base, "restarted");
    let d = tempdir();
    let (socket, pidfile) = (d.path().join("d.sock"), d.path().join("d.pid"));
    let daemon_args = [
        "test-daemon",
        "--socket",
        socket.to_str().unwrap(),
        "--pidfile",
        pidfile.to_str().unwrap(),
    ];
    let first = svc.start(&memmon_test_path(), &daemon_args);
    let pid_in_file = || {
        std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
    };
    assert!(wait_for(30.0, || pid_in_file() == Some(first.0.id())));
    let high = 24 * MIB;
    if v2 {
        // Pressure in each phase: each request of 40 MiB goes over memory.high.
        svc.set("memory.high", &high.to_string());
    }
    let out = d.path().join("restart.csv");
    let sock = d.path().join("m.sock");
    let mut rec = std::process::Command::new(memmon_path())
        .args(["record", "-i", "100ms", "--phase-peaks", "--cgroup"])
        .arg(&svc.dir)
        .arg("--pidfile")
        .arg(&pidfile)
        .arg("--socket")
        .arg(&sock)
        .arg("-o")
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for(30.0, || sock.exists()));
    let mark = |label: &str| {
        memmon()
            .args(["mark", label, "--socket"])
            .arg(&sock)
            .assert()
            .success();
    };
    let request = || {
        let st = Command::new(memmon_test_path())
            .args([
                "test-client",
                "--size",
                "40MiB",
                "--hold",
                "300ms",
                "--socket",
            ])
            .arg(&socket)
            .status()
            .unwrap();
        assert!(st.success());
    };
    mark("one");
    request();
    // The restart: stop, remove, make again, start.
    drop(first);
    let _ = std::fs::remove_file(&pidfile);
    assert!(
        wait_for(30.0, || std::fs::remove_dir(&svc.dir).is_ok()),
        "the service's cgroup could not be removed"
    );
    std::fs::create_dir(&svc.dir).unwrap();
    if v2 {
        svc.set("memory.high", &high.to_string());
    }
    let second = svc.start(&memmon_test_path(), &daemon_args);
    assert!(wait_for(30.0, || pid_in_file() == Some(second.0.id())));
    // memmon has found the new daemon once a restart row is in the recording.
    assert!(
        wait_for(30.0, || std::fs::read_to_string(&out)
            .is_ok_and(|t| t.contains(&format!("restart:{}", second.0.id())))),
        "memmon did not follow the restart"
    );
    mark("two");
    request();
    mark("idle");
    // SAFETY: kill has no memory preconditions; the PID is this test's child.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    let st = rec.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(rec.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(st.code() == Some(130) || st.success(), "{st:?}\n{err}");
    let s = summary_json(&out);
    let phases = s["phases"].as_array().unwrap();
    let phase = |label: &str| {
        phases
            .iter()
            .find(|p| p["label"] == label)
            .unwrap_or_else(|| panic!("no phase {label}: {s:#}"))
    };
    // Under memory.high the kernel may hold the daemon's RAM a little under its 40 MiB, the rest
    // swapped: then the headline is what it needed, RAM and swap together, never exact.
    let low = if v2 { 20 * MIB } else { 40 * MIB };
    for label in ["one", "two"] {
        let p = phase(label);
        let bytes = p["peak"]["bytes"].as_u64().unwrap();
        let ram = p["peak"]["ram_bytes"].as_u64().unwrap_or(bytes);
        assert!(
            (low..64 * MIB).contains(&ram),
            "phase {label}: {p:#}\n{err}"
        );
        if p["peak"]["ram_bytes"].is_null() {
            assert_eq!(p["peak"]["exact"], true, "phase {label}: {p:#}\n{err}");
        } else {
            assert!(
                (40 * MIB..80 * MIB).contains(&bytes),
                "phase {label}: {p:#}\n{err}"
            );
            assert_eq!(p["peak"]["exact"], false, "phase {label}: {p:#}\n{err}");
        }
    }
    // Phase two is the new daemon's alone: its own mark; the new cgroup's peak file, read since
    // the restart, is beside it.
    assert_eq!(
        phase("two")["peak"]["source"],
        "vmhwm",
        "{:#}",
        phase("two")
    );
    if peak_file(&base) != PeakFile::Missing {
        assert!(
            phase("two")["cgroup_peak_bytes"].as_u64().is_some(),
            "{:#}",
            phase("two")
        );
    }
    if v2 {
        // The new cgroup's memory.pressure counts on from the old one's.
        let some = |label: &str| {
            phase(label)["cgroup_psi_memory_some_us"]
                .as_u64()
                .unwrap_or(0)
        };
        assert!(some("one") > 0, "{:#}", phase("one"));
        assert!(
            some("two") > 0,
            "phase two, in the new cgroup: {:#}",
            phase("two")
        );
        let stall = column(&out, "cgroup_psi_memory_some_us");
        assert!(stall.windows(2).all(|w| w[0] <= w[1]), "{stall:?}");
    }
}

#[test]
fn a_tree_that_leaves_its_cgroup_is_said_and_never_given_the_cgroup_s_stale_peak() {
    // systemd, cgexec or a job scheduler moves a process out of memmon's cgroup: from then on
    // its memory is charged where it went, and the cgroup's peak (256 KiB here) is not the tree's.
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let elsewhere = TestCgroup::new(&base, "elsewhere");
    let procs = elsewhere.0.join("cgroup.procs");
    // The command: a shell that moves itself into `elsewhere` after `sleep` (at once: "")
    // and becomes the workload, which allocates 200 MiB and holds it.
    let moving = |sleep: &str, hold: &str| -> Vec<String> {
        let script = format!("{sleep}echo $$ > {}; exec \"$@\"", procs.display());
        let mut v = ["sh", "-c", &script, "sh"].map(String::from).to_vec();
        v.extend(workload(&["alloc:200MiB", hold]));
        v
    };
    let d = tempdir();
    // Moved after a few rows: the rows after say so, and the warning names where it went.
    let out = d.path().join("moved.csv");
    let o = memmon()
        .args(["record", "-i", "50ms", "-o"])
        .arg(&out)
        .arg("--")
        .args(moving("sleep 0.3; ", "hold:500ms"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("of the tree left the cgroup") && err.contains("/memmon-test-elsewhere-"),
        "{err}"
    );
    assert!(column(&out, "cgroup_outside_processes").contains(&1));
    // Named by what it runs, not by the shell it was when it moved (rows saw it after its exec).
    let side: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{}.meta.json", out.display())).unwrap())
            .unwrap();
    assert_eq!(
        side["end"]["cgroup"]["left"][0]["comm"], "memmon-test",
        "{side:#}"
    );
    let s = summary_json(&out);
    assert_ne!(s["peak"]["source"], "cgroup", "{s:#}");
    assert!(s["peak"]["bytes"].as_u64().unwrap() >= 200 * MIB, "{s:#}");
    assert_eq!(s["cgroup"]["holds_tree"], false, "{s:#}");
    // Moved before any row saw it, and gone before the next: the bench of the issue. Its runs'
    // peaks are the kernel's of the process, and the budget fails.
    // `bench -n RUNS -i INTERVAL --max-peak 100MiB` of the moving command: its exit code,
    // stdout and stderr.
    let bench = |runs: &str, interval: &str, sleep: &str| {
        let o = memmon()
            .args([
                "bench",
                "-n",
                runs,
                "-i",
                interval,
                "--max-peak",
                "100MiB",
                "--",
            ])
            .args(moving(sleep, "hold:300ms"))
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (o.status.code(), text(&o.stdout), text(&o.stderr))
    };
    let (code, out, err) = bench("1", "100ms", "");
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains("budget exceeded"), "{err}");
    assert!(!err.contains("budget kept"), "{err}");
    // Seen in the cgroup by the run's first row, then moved and gone before the next (a row
    // every 10 s): no process was seen outside, so the basis stays the cgroup's, but wait4's
    // ru_maxrss of the command, far above the cgroup's peak, is the tree's lower bound: each
    // run's peak is at least it (not the cgroup's 512-768 KiB, which kept the budget once), and
    // the budget fails.
    let (code, out, err) = bench("2", "10s", "sleep 0.2; ");
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert_eq!(err.matches("budget exceeded").count(), 2, "{err}");
    let has_peak = peak_file(&base) != PeakFile::Missing;
    // (On a slow machine a row may see the shell outside: that run's basis is the kernel's.)
    for run in ["run 1/2:", "run 2/2:"] {
        let line = err.lines().find(|l| l.contains(run)).unwrap();
        assert!(
            (has_peak && line.contains("peak ≥ 2"))
                || line.contains("(ru_maxrss of the largest process)"),
            "{err}"
        );
    }
    // Where the kernel gives a cgroup's peak (not 5.10's v2), the table says why it is not
    // exact.
    let all = format!("{out}{err}");
    assert_eq!(
        all.contains("stood above the cgroup's by more than its page cache explains during run")
            || all.contains("was found outside its cgroup during run"),
        has_peak,
        "{out}\n{err}"
    );
    // The same as a recording: at least the process's peak.
    let out = d.path().join("unseen.csv");
    let o = memmon()
        .args(["record", "-i", "10s", "-o"])
        .arg(&out)
        .arg("--")
        .args(moving("sleep 0.2; ", "hold:300ms"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary_json(&out);
    assert!(s["peak"]["bytes"].as_u64().unwrap() >= 200 * MIB, "{s:#}");
    if s["cgroup_left_tree"] == true {
        // A row came while the shell was outside (a slow machine): the basis is the kernel's.
        assert_eq!(s["peak"]["source"], "ru-maxrss", "{s:#}");
    } else if has_peak {
        assert_eq!(s["peak"]["exact"], false, "{s:#}");
        assert_eq!(s["peak"]["source"], "cgroup", "{s:#}");
        assert_eq!(s["cgroup_below_process"], true, "{s:#}");
    } else {
        assert_eq!(s["peak"]["source"], "ru-maxrss", "{s:#}");
    }
}

#[test]
fn a_bench_run_killed_at_the_limit_memmon_runs_under_names_the_oom_kill() {
    // memmon itself in a service limited to 64 MiB: a command it launches is bound by that
    // limit (v2 gives it no cgroup of its own there), and its OOM kill is the service's.
    let Some(base) = memory_hierarchy() else {
        return;
    };
    let cg = TestCgroup::limited(&base, "bench-limit", 64 * MIB);
    let o = memmon_kept_from_oom(
        &cg.0.join("cgroup.procs"),
        &["bench", "-n", "1", "-i", "100ms"],
        &["alloc:200MiB", "hold:300ms"],
    )
    .output()
    .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("OOM killer killed processes of the cgroup during run 1"),
        "{out}\n{err}"
    );
}
