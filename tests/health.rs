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
    assert!(s["major_faults"].as_u64().unwrap() >= cold, "{s:#}");
    // The summary says it, and the phases table has the column, the quiet phase a dash.
    let text = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains(&format!("memory health {cold} major faults")),
        "{text}"
    );
    assert!(text.contains("major faults"), "{text}");
    let quiet_row = text
        .lines()
        .find(|l| l.trim_start().starts_with("quiet"))
        .unwrap_or_else(|| panic!("no quiet row: {text}"));
    assert!(!quiet_row.contains(&cold.to_string()), "{quiet_row}");
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
