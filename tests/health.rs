//! Memory health: the tree's major page faults and the memory pressure stall (PSI), per
//! recording, phase and run, against workloads made to fault and ones that do not.

use crate::util::*;
use std::path::{Path, PathBuf};

/// A file read back from disk must be on a disk: /tmp may be a tmpfs, whose pages are never
/// dropped nor read back. Cargo's scratch directory is where the build is.
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn page() -> u64 {
    // SAFETY: sysconf has no memory effects.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

/// Whether this kernel gives memory pressure (PSI).
fn has_psi() -> bool {
    std::fs::read_to_string("/proc/pressure/memory").is_ok_and(|t| t.contains("total="))
}

/// Every value of column `name`, empty cells as `None`.
fn cells(path: &Path, name: &str) -> Vec<Option<u64>> {
    let (h, rows) = read_csv(path);
    let i = h.iter().position(|c| c == name).expect(name);
    rows.iter().map(|r| r[i].parse().ok()).collect()
}

fn never_falls(v: &[u64]) -> bool {
    v.windows(2).all(|w| w[0] <= w[1])
}

#[test]
fn a_file_read_back_from_disk_makes_a_major_fault_per_page_in_its_phase_and_none_in_a_quiet_one() {
    let d = tempdir();
    let disk = disk_dir();
    let file: PathBuf = disk.path().join("cold.bin");
    let out = d.path().join("faults.csv");
    let size = 16 * MIB;
    let pages = size / page();
    let o = memmon()
        .args(["record", "-q", "-i", "50ms"])
        .args(["--mark-stdout", r"^phase (?P<label>\w+)$", "-o"])
        .arg(&out)
        .arg("--")
        .args(workload(&[
            "hold:200ms",
            "say:phase cold",
            "hold:200ms",
            &format!("cold-read:{}:16MiB", file.display()),
            "hold:300ms",
            "say:phase quiet",
            "alloc:8MiB",
            "hold:600ms",
        ]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let faults = column(&out, "major_faults");
    assert!(never_falls(&faults), "{faults:?}");
    let s = summary_json(&out);
    let phases = s["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "{s:#}");
    let cold = phases[0]["major_faults"].as_u64().unwrap();
    let quiet = phases[1]["major_faults"].as_u64().unwrap();
    // No read-ahead: a fault per page read back; a page the kernel kept in its cache (or a
    // fault of the program's own start) moves it by a little, never by half.
    assert!(
        (pages / 2..=pages + 256).contains(&cold),
        "{cold} major faults reading {pages} pages"
    );
    assert_eq!(quiet, 0, "anonymous memory written: no page read back");
    let total = s["major_faults"].as_u64().unwrap();
    assert!(total >= cold, "{s:#}");
    // The summary says it (the recording's, which has the program's start too: a page of
    // its code read back there counts), and the phases table has the column, the quiet phase
    // a dash.
    let text = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains(&format!("memory health {total} major faults")),
        "{text}"
    );
    assert!(text.contains("major faults"), "{text}");
    let quiet_row = text
        .lines()
        .find(|l| l.trim_start().starts_with("quiet"))
        .unwrap_or_else(|| panic!("no quiet row: {text}"));
    assert!(!quiet_row.contains(&cold.to_string()), "{quiet_row}");
}

/// A workload that reads a 48 MiB file over and over in a memory cgroup limited to 16 MiB
/// thrashes: each pass reads back from disk what the last one pushed out. Its phase has a major
/// fault for every page of every pass after the first few, and the kernel's memory stall (PSI)
/// moves by no more than the phase lasted; the phases around it have no fault.
#[test]
fn a_workload_thrashing_under_a_memory_limit_shows_its_faults_and_its_stall() {
    let Some(base) = crate::cgroup::memory_hierarchy() else {
        return;
    };
    // No swap to escape to: only the file's pages are pushed out (with swap, the workload's
    // own pages would be too, and read back in the phase after).
    let cg = crate::cgroup::TestCgroup::limited(&base, "thrash", 16 * MIB);
    let d = tempdir();
    let disk = disk_dir();
    let file = disk.path().join("thrash.bin");
    let out = d.path().join("thrash.csv");
    let size = 48 * MIB;
    // The workload runs from a copy of memmon-test, made by the shell before it enters the
    // cgroup: pages of the shared binary that the workload read first would be charged to the
    // limited cgroup and pushed out, and the other tests running memmon-test would read them
    // back (major faults that are not theirs). (`cp` writes it, not this test process, whose
    // other threads' children could hold a written file open: "text file busy".)
    let enter = format!(
        "cp \"$1\" \"$2\" && echo $$ > {}/cgroup.procs && shift && exec \"$@\"",
        cg.0.display()
    );
    let copy = disk.path().join("memmon-test");
    let mut steps = workload(&[
        "hold:200ms",
        "say:phase thrash",
        &format!("thrash:{}:48MiB:2s", file.display()),
        "say:phase after",
        "hold:300ms",
    ]);
    steps[0] = copy.display().to_string();
    steps.insert(0, memmon_test_path().display().to_string());
    steps.insert(0, "sh".to_string());
    let o = memmon()
        .args(["record", "-q", "-i", "50ms", "--no-own-cgroup"])
        .args(["--mark-stdout", r"^phase (?P<label>\w+)$", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &enter])
        .args(&steps)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary_json(&out);
    let phases = s["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "{s:#}");
    let (thrash, after) = (&phases[0], &phases[1]);
    let faults = thrash["major_faults"].as_u64().unwrap();
    // Three times the limit read in a loop: at least one pass and a half of pages read back
    // (the first pass alone is a fault per page), however slow the disk.
    let pages = size / page();
    assert!(
        faults >= pages * 3 / 2,
        "{faults} major faults over {pages} pages: {s:#}"
    );
    assert_eq!(after["major_faults"].as_u64(), Some(0), "{s:#}");
    if has_psi() {
        let some = thrash["psi_memory_some_us"].as_u64().unwrap_or(0);
        let full = thrash["psi_memory_full_us"].as_u64().unwrap_or(0);
        let lasted_us = (thrash["duration_s"].as_f64().unwrap() * 1e6) as u64;
        // Machine-wide, yet our stall alone makes it move; a stall is at most the phase's time
        // (rows 50 ms apart: a row's margin), and every task stalled at once (full) is less.
        assert!(
            some > 0,
            "reclaim and refaults under the limit stall: {s:#}"
        );
        assert!(
            some <= lasted_us + 100_000,
            "{some} µs of stall in {lasted_us} µs"
        );
        assert!(full <= some, "{full} > {some}");
    }
}

#[test]
fn an_idle_attached_process_shows_no_major_faults_and_the_stall_only_where_it_moved() {
    let d = tempdir();
    let out = d.path().join("idle.csv");
    let mut child = spawn_workload(&["alloc:8MiB", "hold:30s"]);
    wait_for_rss(child.id(), 8 * MIB);
    let o = memmon()
        .args(["record", "-q", "-i", "20ms", "--duration", "1s", "--pid"])
        .arg(child.id().to_string())
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let faults = column(&out, "major_faults");
    assert!(faults.len() > 5, "{faults:?}");
    assert!(faults.iter().all(|&f| f == 0), "{faults:?}");
    let some = cells(&out, "psi_memory_some_us");
    let full = cells(&out, "psi_memory_full_us");
    let text = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    if has_psi() {
        // Read at every row, from 0 at the first, and never falling.
        let some: Vec<u64> = some.iter().map(|v| v.expect("a PSI cell")).collect();
        let full: Vec<u64> = full.iter().map(|v| v.expect("a PSI cell")).collect();
        assert_eq!(some[0], 0);
        assert!(
            never_falls(&some) && never_falls(&full),
            "{some:?} {full:?}"
        );
        // Machine-wide: another program's stall may fall in the second. Said when it
        // moved, and only then.
        let stalled = *some.last().unwrap() > 0;
        assert_eq!(text.contains("memory health"), stalled, "{text}");
        if stalled {
            assert!(
                text.contains("memory stall") && !text.contains("major fault"),
                "{text}"
            );
        }
    } else {
        assert!(some.iter().chain(&full).all(Option::is_none));
        assert!(!text.contains("memory health"), "{text}");
        let meta = std::fs::read_to_string(d.path().join("idle.csv.meta.json")).unwrap();
        assert!(meta.contains("memory pressure (PSI) not read"), "{meta}");
    }
}

#[test]
fn bench_shows_major_faults_per_run_only_when_a_run_made_some() {
    let d = tempdir();
    let disk = disk_dir();
    let file = disk.path().join("bench-cold.bin");
    let json_out = d.path().join("bench.json");
    let o = memmon()
        .args(["bench", "-n", "2", "--export-json"])
        .arg(&json_out)
        .arg("--")
        .args(workload(&[
            &format!("cold-read:{}:8MiB", file.display()),
            "hold:100ms",
        ]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    let pages = 8 * MIB / page();
    for r in report["runs"].as_array().unwrap() {
        let f = r["major_faults"].as_u64().unwrap();
        assert!(
            (pages / 2..=pages + 256).contains(&f),
            "{f} of {pages}: {r}"
        );
    }
    let table =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(table.contains("Major faults"), "{table}");

    // Runs that write anonymous memory only: no column of zeros.
    let o = memmon()
        .args(["bench", "-n", "2", "--"])
        .args(workload(&["alloc:8MiB", "hold:100ms"]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let faults_said = table.contains("Major faults");
    // A launched program's start may read a page of its binary back from disk (a busy
    // machine evicts it): the column then has a cause; it is never a column of zeros.
    if faults_said {
        assert!(
            table
                .lines()
                .skip_while(|l| !l.contains("Major faults"))
                .skip(1)
                .take(2)
                .any(|l| l
                    .split_whitespace()
                    .any(|w| w.parse::<u64>().is_ok_and(|n| n > 0))),
            "{table}"
        );
    }
}

/// What the workload's `thp:` step said it got: its AnonHugePages, bytes.
fn thp_said(stdout: &[u8]) -> u64 {
    String::from_utf8_lossy(stdout)
        .lines()
        .find_map(|l| l.strip_prefix("thp ")?.parse().ok())
        .unwrap_or_else(|| panic!("no thp line: {}", String::from_utf8_lossy(stdout)))
}

#[test]
fn swap_and_huge_page_columns_are_there_never_fall_and_the_tree_s_huge_pages_are_exact() {
    let d = tempdir();
    let out = d.path().join("thp.csv");
    let o = memmon()
        .args([
            "record",
            "-q",
            "-i",
            "50ms",
            "--pss",
            "--pss-every",
            "100ms",
        ])
        .arg("-o")
        .arg(&out)
        .arg("--")
        .args(workload(&["hold:300ms", "thp:32MiB", "hold:1500ms"]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = thp_said(&o.stdout);
    let (head, rows) = read_csv(&out);
    for name in [
        "swap_in_pages",
        "swap_out_pages",
        "cgroup_swap_in_pages",
        "cgroup_swap_out_pages",
        "cgroup_anon_thp_bytes",
        "anon_huge_bytes",
    ] {
        assert!(head.iter().any(|h| h == name), "{name}: {head:?}");
    }
    assert!(rows.len() > 10, "{}", rows.len());
    // Exactly one of the two swap sources is read: the cgroup's own (a v2 cgroup whose
    // kernel counts it), else the machine's, on every row, from 0 and never falling.
    let machine_in = cells(&out, "swap_in_pages");
    let cgroup_in = cells(&out, "cgroup_swap_in_pages");
    let (read, other) = if cgroup_in[0].is_some() {
        (cgroup_in, machine_in)
    } else {
        (machine_in, cgroup_in)
    };
    assert!(other.iter().all(Option::is_none), "{other:?}");
    let read: Vec<u64> = read.iter().map(|v| v.expect("a swap cell")).collect();
    assert_eq!(read[0], 0, "{read:?}");
    assert!(never_falls(&read), "{read:?}");
    for name in ["swap_out_pages", "cgroup_swap_out_pages"] {
        let v: Vec<u64> = cells(&out, name).into_iter().flatten().collect();
        assert!(never_falls(&v), "{name}: {v:?}");
    }
    // The tree's huge pages come with PSS reads only, and the largest is what the workload
    // had (a number of 2 MiB pages the kernel could give, the same while it holds them).
    let thp = cells(&out, "anon_huge_bytes");
    let pss = cells(&out, "pss_bytes");
    assert!(
        thp.iter()
            .zip(&pss)
            .all(|(t, p)| t.is_some() == p.is_some()),
        "{thp:?} {pss:?}"
    );
    let largest = thp.iter().flatten().max().copied();
    assert_eq!(largest, Some(got), "{thp:?}");
    assert_eq!(got % (2 * MIB), 0, "{got}");
    let s = summary_json(&out);
    if got > 0 {
        assert_eq!(s["anon_huge_bytes"].as_u64(), Some(got), "{s:#}");
        let text = memmon().arg("summary").arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&text.stdout).into_owned();
        assert!(
            text.contains("transparent huge pages up to")
                && text.contains("(the tree's AnonHugePages)"),
            "{text}"
        );
    }
}

/// Sets column `name` of every row of a CSV recording to `value(row)` (empty for `None`).
fn set_column(path: &Path, name: &str, value: impl Fn(usize) -> Option<u64>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let head = lines.next().unwrap();
    let i = head.split(',').position(|c| c == name).expect(name);
    let mut out = format!("{head}\n");
    for (n, line) in lines.enumerate() {
        // The event is last and alone may hold a comma (quoted): split before it.
        let mut cells: Vec<String> = line
            .splitn(head.split(',').count(), ',')
            .map(String::from)
            .collect();
        cells[i] = value(n).map(|v| v.to_string()).unwrap_or_default();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn the_summary_and_its_phases_say_swap_and_huge_pages_only_where_they_moved() {
    let d = tempdir();
    let out = d.path().join("fixture.csv");
    let o = memmon()
        .args(["record", "-q", "-i", "50ms"])
        .args(["--mark-stdout", r"^phase (?P<label>\w+)$", "-o"])
        .arg(&out)
        .arg("--")
        .args(workload(&[
            "hold:300ms",
            "say:phase swapping",
            "hold:600ms",
            "say:phase quiet",
            "hold:600ms",
        ]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The recording made fixture: known swap and huge pages row by row. The rows of the phase
    // `swapping` (from its marker row to the next marker's) swap 7 pages in and 300 out; the
    // quiet phase none; huge pages rise to 6 MiB in the first phase and stay.
    let (head, rows) = read_csv(&out);
    let ev = head.iter().position(|h| h == "event").unwrap();
    let at = |label: &str| {
        rows.iter()
            .position(|r| r[ev] == format!("mark:{label}"))
            .unwrap_or_else(|| panic!("no {label} marker"))
    };
    let (swapping, quiet) = (at("swapping"), at("quiet"));
    assert!(quiet > swapping + 2, "{swapping} {quiet}");
    let mid = swapping + 1;
    set_column(&out, "swap_in_pages", |n| Some(if n > mid { 7 } else { 0 }));
    set_column(&out, "swap_out_pages", |n| {
        Some(if n > mid { 300 } else { 0 })
    });
    set_column(&out, "cgroup_anon_thp_bytes", |n| {
        Some(if n > mid { 6 * MIB } else { 0 })
    });
    set_column(&out, "cgroup_swap_in_pages", |_| None);
    set_column(&out, "cgroup_swap_out_pages", |_| None);
    set_column(&out, "anon_huge_bytes", |_| None);
    let s = summary_json(&out);
    assert_eq!(s["swap_in_pages"].as_u64(), Some(7), "{s:#}");
    assert_eq!(s["swap_out_pages"].as_u64(), Some(300), "{s:#}");
    assert_eq!(s["cgroup_anon_thp_bytes"].as_u64(), Some(6 * MIB), "{s:#}");
    assert!(s["cgroup_swap_in_pages"].is_null(), "not read: absent");
    let phases = s["phases"].as_array().unwrap();
    let phase = |label: &str| {
        phases
            .iter()
            .find(|p| p["label"] == label)
            .unwrap_or_else(|| panic!("{label}: {s:#}"))
    };
    assert_eq!(phase("swapping")["swap_in_pages"].as_u64(), Some(7));
    assert_eq!(phase("swapping")["swap_out_pages"].as_u64(), Some(300));
    assert_eq!(phase("quiet")["swap_in_pages"].as_u64(), Some(0));
    assert_eq!(
        phase("quiet")["cgroup_anon_thp_bytes"].as_u64(),
        Some(6 * MIB)
    );

    let text = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("swap 7 in, 300 out pages (machine-wide, /proc/vmstat)")
            && text.contains("the cgroup's huge pages up to 6.00 MiB"),
        "{text}"
    );
    // The phases table has a swap column, the quiet phase a dash, and says what it counts.
    let row = |label: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row: {text}"))
            .to_string()
    };
    assert!(row("swapping").contains("7 in, 300 out"), "{text}");
    assert!(!row("quiet").contains(" in, "), "{text}");
    assert!(row("quiet").contains("6.00 MiB"), "{text}");
    assert!(
        text.contains("machine-wide, other programs' swap counts too"),
        "{text}"
    );

    // Nothing moved: no swap or huge pages said, no column of zeros.
    set_column(&out, "swap_in_pages", |_| Some(0));
    set_column(&out, "swap_out_pages", |_| Some(0));
    set_column(&out, "cgroup_anon_thp_bytes", |_| Some(0));
    // (and no fault or stall: a busy machine's may fall in these seconds)
    for other in ["major_faults", "psi_memory_some_us", "psi_memory_full_us"] {
        set_column(&out, other, |_| Some(0));
    }
    let text = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        !text.contains("memory health") && !text.contains(" in, ") && !text.contains("huge pages"),
        "{text}"
    );
}

#[test]
fn bench_shows_huge_pages_and_swap_per_run_only_when_a_run_had_some() {
    let d = tempdir();
    let json_out = d.path().join("bench.json");
    let csv_out = d.path().join("bench.csv");
    let o = memmon()
        .args(["bench", "-n", "2", "--export-json"])
        .arg(&json_out)
        .arg("--export-csv")
        .arg(&csv_out)
        .arg("--")
        .args(workload(&["thp:8MiB", "hold:300ms"]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    let table =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let (head, rows) = read_csv(&csv_out);
    // Each run's figure, the same in the JSON, the CSV export and the table; a column only
    // when some run had one. Huge pages: the cgroup's (the command's own cgroup) where the
    // kernel gave some (THP in madvise mode, asked for).
    let thp: Vec<u64> = runs
        .iter()
        .map(|r| r["cgroup_anon_thp_bytes"].as_u64().unwrap_or(0))
        .collect();
    let had_thp = thp.iter().any(|&b| b > 0);
    assert_eq!(table.contains("Huge pages"), had_thp, "{thp:?}\n{table}");
    assert_eq!(
        head.iter().any(|h| h == "cgroup_anon_thp_bytes"),
        had_thp,
        "{head:?}"
    );
    if had_thp {
        let i = head
            .iter()
            .position(|h| h == "cgroup_anon_thp_bytes")
            .unwrap();
        let csv: Vec<u64> = rows.iter().map(|r| r[i].parse().unwrap()).collect();
        assert_eq!(csv, thp);
        assert!(thp.iter().all(|&b| b <= 8 * MIB + 2 * MIB), "{thp:?}");
    }
    // Swap: the machine's (a v1 or no cgroup) or the cgroup's; this workload swaps nothing,
    // another program may. Said exactly when a run's count moved.
    let swapped = runs.iter().any(|r| {
        [
            "swap_in_pages",
            "swap_out_pages",
            "cgroup_swap_in_pages",
            "cgroup_swap_out_pages",
        ]
        .iter()
        .any(|k| r[k].as_u64().unwrap_or(0) > 0)
    });
    assert_eq!(table.contains("Swap pages"), swapped, "{table}");

    // Plain anonymous memory: no huge pages where THP is given only when asked (madvise, as
    // here); a machine with THP always on may give some, and then the column says them.
    let o = memmon()
        .args(["bench", "-n", "2", "--export-json"])
        .arg(&json_out)
        .arg("--force")
        .arg("--")
        .args(workload(&["alloc:8MiB", "hold:100ms"]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    let had_thp = report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["cgroup_anon_thp_bytes"].as_u64().unwrap_or(0) > 0);
    let always = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|t| t.contains("[always]"));
    assert!(always || !had_thp, "{report:#}");
    let table =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(table.contains("Huge pages"), had_thp, "{table}");
}

#[test]
fn the_summary_says_each_numa_node_s_memory_per_phase_from_the_numa_table() {
    // This machine has one NUMA node, where memmon writes no NUMA table: the fixture is a real
    // recording with phases given a table of two nodes, as a two-node machine writes it.
    let d = tempdir();
    let out = d.path().join("numa.csv");
    let o = memmon()
        .args(["record", "-q", "-i", "50ms"])
        .args(["--mark-stdout", r"^phase (?P<label>\w+)$", "-o"])
        .arg(&out)
        .arg("--")
        .args(workload(&[
            "hold:200ms",
            "say:phase load",
            "hold:500ms",
            "say:phase prove",
            "hold:800ms",
        ]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // memmon writes a table on a machine with several nodes (the VM lane's has two), none on
    // one with one; either way the fixture's replaces it.
    let nodes = numa_nodes();
    assert_eq!(
        d.path().join("numa.csv.numa.csv").exists(),
        nodes > 1,
        "a NUMA table where the machine has several nodes ({nodes}), and only there"
    );
    let (head, rows) = read_csv(&out);
    let col = |n: &str| head.iter().position(|h| h == n).unwrap();
    let (t, e, ev) = (col("unix_ms"), col("elapsed_s"), col("event"));
    let prove = rows
        .iter()
        .position(|r| r[ev] == "mark:prove")
        .expect("a prove marker");
    // Node 0 holds 1 GiB throughout; node 1 rises to 3 GiB in `load` and 5 GiB in `prove`.
    // A phase spans the milliseconds from its marker's row to the next marker's, ends included,
    // so the values change by time, not by row: on a loaded machine a tick's row may share the
    // prove marker's millisecond.
    let ms = |r: &Vec<String>| r[t].parse::<u64>().unwrap();
    let prove_ms = ms(&rows[prove]);
    assert!(
        rows.iter().any(|r| ms(r) > prove_ms),
        "no row after the prove marker's millisecond: {rows:?}"
    );
    let mut table = String::from("unix_ms,elapsed_s,node0_bytes,node1_bytes\n");
    for (i, r) in rows.iter().enumerate() {
        let node1 = if ms(r) <= prove_ms {
            3 << 30
        } else {
            5u64 << 30
        };
        let node1 = if i == 0 { 0 } else { node1 };
        table.push_str(&format!("{},{},{},{node1}\n", r[t], r[e], 1u64 << 30));
    }
    std::fs::write(d.path().join("numa.csv.numa.csv"), table).unwrap();
    let side = d.path().join("numa.csv.meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&side).unwrap()).unwrap();
    meta["numa"] = serde_json::json!({
        "file": "numa.csv.numa.csv",
        "nodes": [0, 1],
        "source": "/sys/fs/cgroup/prover/memory.numa_stat: v2 anon + file"
    });
    std::fs::write(&side, serde_json::to_string(&meta).unwrap()).unwrap();

    let s = summary_json(&out);
    let node = |v: &serde_json::Value, n: usize| v["numa_nodes"][n]["peak_bytes"].as_u64();
    assert_eq!(node(&s, 0), Some(1 << 30), "{s:#}");
    assert_eq!(node(&s, 1), Some(5 << 30), "{s:#}");
    let phases = s["phases"].as_array().unwrap();
    let phase = |label: &str| phases.iter().find(|p| p["label"] == label).unwrap();
    // A phase's rows run from its marker's row to the next marker's.
    assert_eq!(node(phase("load"), 1), Some(3 << 30), "{s:#}");
    assert_eq!(node(phase("prove"), 1), Some(5 << 30));
    assert_eq!(node(phase("prove"), 0), Some(1 << 30));
    let text = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("NUMA nodes    node 0 1.00 GiB, node 1 5.00 GiB (the cgroup's most memory on each, memory.numa_stat)"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("prove"))
        .unwrap_or_else(|| panic!("no prove row: {text}"));
    assert!(row.contains("node 0 1.00 GiB, node 1 5.00 GiB"), "{text}");

    // A table with a bad row is an error naming it; one the metadata names that is gone, a note.
    let bad = d.path().join("numa.csv.numa.csv");
    std::fs::write(
        &bad,
        "unix_ms,elapsed_s,node0_bytes,node1_bytes\n1,0.0,5,lots\n",
    )
    .unwrap();
    let o = memmon().arg("summary").arg(&out).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("numa.csv.numa.csv:2:") && err.contains("lots"),
        "{err}"
    );
    std::fs::remove_file(&bad).unwrap();
    let s = summary_json(&out);
    assert!(warns(&s, "NUMA table"), "{s:#}");
    assert!(s["numa_nodes"].is_null(), "{s:#}");
}
