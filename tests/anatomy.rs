//! `record --anatomy`: what the memory is made of, recorded into a side table and read back by
//! `summary`, against workloads whose mappings are known.

use crate::util::*;
use predicates::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The anatomy table beside recording `out`.
pub(crate) fn side(out: &Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".anatomy.jsonl");
    PathBuf::from(s)
}

fn anatomies(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(side(out))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn meta(out: &Path) -> Value {
    let mut m = out.as_os_str().to_owned();
    m.push(".meta.json");
    serde_json::from_str(&std::fs::read_to_string(m).unwrap()).unwrap()
}

#[test]
fn anatomy_needs_a_recording_file_and_its_flags_need_anatomy() {
    memmon()
        .args(["record", "--anatomy", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--anatomy needs -o FILE"));
    let dir = tempdir();
    let out = dir.path().join("r.csv");
    record_workload(&out, &["--anatomy-gap", "1s"], &["hold:10ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--anatomy"));
    assert!(!out.exists());
}

#[test]
fn the_anatomy_table_is_named_in_the_metadata_and_never_clobbered_without_force_or_append() {
    let dir = tempdir();
    let out = dir.path().join("r.csv");
    // No read at a new high for an hour: the table holds the start's anatomy alone (a launched
    // command is gone at its end); maps alone.
    let run = |flags: &[&str]| {
        let mut f = vec![
            "--anatomy",
            "-i",
            "50ms",
            "--anatomy-gap",
            "1h",
            "--anatomy-smaps-max",
            "0",
        ];
        f.extend_from_slice(flags);
        record_workload(&out, &f, &["alloc:8MiB", "hold:300ms"])
    };
    run(&[]).assert().success();
    let m = meta(&out);
    assert_eq!(m["anatomy"]["file"], "r.csv.anatomy.jsonl");
    assert_eq!(m["anatomy"]["gap_s"], 3600.0);
    assert_eq!(m["anatomy"]["smaps"], false);
    memmon()
        .arg("summary")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "note: the anatomy table holds 1 anatomy: nothing to compare the peak with",
        ));
    let first = anatomies(&out);
    assert_eq!(first[0]["trigger"], "start");
    // Without smaps: virtual sizes only, and why is said.
    assert_eq!(first[0]["smaps_processes"], 0);
    assert!(first[0]["unread"][0]["why"]
        .as_str()
        .unwrap()
        .contains("--anatomy-smaps-max 0"));
    assert!(first[0]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g.get("resident").is_none()));

    // The recording is gone but its table is there: refused, and nothing is created.
    std::fs::remove_file(&out).unwrap();
    std::fs::remove_file(dir.path().join("r.csv.meta.json")).unwrap();
    run(&[]).assert().code(2).stderr(predicate::str::contains(
        "r.csv.anatomy.jsonl already exists",
    ));
    assert!(!out.exists());
    assert_eq!(anatomies(&out), first);

    run(&["--append"]).assert().success();
    let appended = anatomies(&out);
    assert!(appended.len() > first.len());
    assert_eq!(appended[..first.len()], first[..]);
    run(&["--force"]).assert().success();
    let forced = anatomies(&out);
    assert_eq!(forced[0]["trigger"], "start");
    assert!(forced.len() < appended.len());
}

/// The group of `kind` in an anatomy whose mappings are each `size` bytes (`name` for the kinds
/// told by a name).
fn find<'a>(a: &'a Value, kind: &str, name: Option<&str>, size: Option<u64>) -> &'a Value {
    a["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| {
            g["kind"] == kind
                && name.is_none_or(|n| g["name"] == n)
                && size.is_none_or(|s| g["max_mapping_bytes"] == s && g["min_mapping_bytes"] == s)
        })
        .unwrap_or_else(|| panic!("no {kind} {name:?} {size:?} group in {a:#}"))
}

/// The kernel's batching bound of this machine (docs/FORMAT.md, "How exact 'exact' is").
fn bound() -> u64 {
    memmon::model::peak::batching_bound_bytes(
        memmon::probe::proc::online_cpus(),
        memmon::probe::ProcFs::page_size(),
    )
}

/// The workload of known mappings, scaled down to keep a 2-core, 24 GiB CI machine
/// comfortable when tests run side by side: 10 anonymous partitions of 24 MiB (60 MiB in the
/// issue), a 32 MiB memfd (128 MiB), 32 MiB mlocked (512 MiB), an 8 MiB mapped file (50 MiB) and
/// 16 MiB of brk heap: 328 MiB in all.
#[test]
fn the_anatomy_at_the_peak_names_each_known_mapping_and_summary_says_what_grew() {
    let dir = tempdir();
    let out = dir.path().join("known.csv");
    let file = dir.path().join("params.bin");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(8 * MIB)
        .unwrap();
    let file = std::fs::canonicalize(&file).unwrap();
    let map_file = format!("map-file:{}:8MiB", file.display());
    record_workload(
        &out,
        &["-i", "50ms", "--anatomy"],
        &[
            // A quarter of the rows at the idle floor, so that its percentile (the 10th) is
            // idle even when the first rows come late on a busy machine.
            "hold:600ms",
            "partitions:10:24MiB",
            "memfd:params:32MiB",
            "mlock:32MiB",
            &map_file,
            "heap:16MiB",
            "hold:1500ms",
        ],
    )
    .assert()
    .success();
    // By default: each stretch's highest read kept, smaps read of processes up to 1 GiB.
    let m = meta(&out);
    assert_eq!(m["anatomy"]["rise"], 0.01);
    assert_eq!(m["anatomy"]["gap_s"], 0.0);
    assert_eq!(m["anatomy"]["smaps"], true);
    assert_eq!(m["anatomy"]["smaps_max_rss_bytes"], 1u64 << 30);
    let all = anatomies(&out);
    assert_eq!(all[0]["trigger"], "start");
    let peak = all
        .iter()
        .max_by_key(|a| a["rss_bytes"].as_u64().unwrap())
        .unwrap();
    assert_eq!(peak["trigger"], "peak");
    assert_eq!(peak["smaps_processes"], 1, "{peak:#}");
    let bound = bound();
    // Virtual sizes exactly; resident ones (smaps: every page written) within the bound.
    let check = |g: &Value, mappings: u64, bytes: u64| {
        assert_eq!(g["mappings"], mappings, "{g:#}");
        assert_eq!(g["virtual_bytes"], bytes, "{g:#}");
        let rss = g["resident"]["rss_bytes"].as_u64().unwrap();
        assert!(rss.abs_diff(bytes) <= bound, "{g:#}");
    };
    check(find(peak, "anon", None, Some(24 * MIB)), 10, 240 * MIB);
    check(find(peak, "memfd", Some("params"), None), 1, 32 * MIB);
    let locked = find(peak, "anon", None, Some(32 * MIB));
    check(locked, 1, 32 * MIB);
    assert_eq!(locked["resident"]["locked_bytes"], 32 * MIB);
    check(
        find(peak, "file", Some(file.to_str().unwrap()), None),
        1,
        8 * MIB,
    );
    // The heap grows by the 16 MiB asked, in 1 KiB chunks, plus malloc's top pad (128 KiB)
    // and what it held before.
    let heap = find(peak, "heap", None, None);
    let heap_bytes = heap["virtual_bytes"].as_u64().unwrap();
    assert!((16 * MIB..16 * MIB + MIB).contains(&heap_bytes), "{heap:#}");
    assert!(heap["resident"]["rss_bytes"].as_u64().unwrap() >= 16 * MIB - bound);

    let text = memmon()
        .arg("summary")
        .arg(&out)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(text).unwrap();
    for line in [
        "resident (smaps), from the anatomy nearest the idle floor",
        "+240.0 MiB  10 anonymous mappings of 24.00 MiB (new)",
        "+32.00 MiB  memfd 'params' (1 mapping of 32.00 MiB) (new)",
        "+32.00 MiB  1 anonymous mapping of 32.00 MiB (new)",
        &format!(
            "+8.00 MiB  file {} (1 mapping of 8.00 MiB) (new)",
            file.display()
        ),
        "heap ([heap])",
        "anatomy reads",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
    let s = summary_json(&out);
    assert_eq!(s["anatomy_table"], "known.csv.anatomy.jsonl");
    assert_eq!(s["anatomy"]["measure"], "resident");
    // What grew is the sum of its groups: the workload's 328 MiB, and beside it only the
    // program's code and libraries (the start's anatomy is read at the first row, which on a
    // busy machine comes while the loader still maps libc: CI saw +3.5 MiB of them) and small
    // anonymous mappings.
    let changes = s["anatomy"]["changes"].as_array().unwrap();
    let delta = |c: &Value| c["delta_bytes"].as_i64().unwrap();
    let grew = s["anatomy"]["delta_bytes"].as_i64().unwrap();
    assert_eq!(grew, changes.iter().map(delta).sum::<i64>());
    assert_eq!(delta(&changes[0]), 240 * MIB as i64);
    let (known, other): (Vec<&Value>, Vec<&Value>) = changes.iter().partition(|c| {
        matches!(c["kind"].as_str(), Some("memfd" | "file" | "heap"))
            || (c["kind"] == "anon" && c["to"]["min_mapping_bytes"].as_u64() >= Some(24 * MIB))
    });
    let known_bytes = known.iter().map(|c| delta(c)).sum::<i64>() as u64;
    assert!(
        known_bytes.abs_diff(328 * MIB) <= bound + MIB,
        "{known_bytes}"
    );
    for c in other {
        let code = matches!(c["kind"].as_str(), Some("binary" | "library"));
        assert!(code || delta(c).unsigned_abs() < MIB, "{c:#}");
    }
    // The report shows it as a table.
    let html = dir.path().join("known.html");
    let html = report_html(&out, &html);
    for text in [
        "what grew between the idle floor and the peak: +",
        "10 anonymous mappings of 24.00 MiB (new)",
        "memfd &#39;params&#39; (1 mapping of 32.00 MiB) (new)",
    ] {
        assert!(html.contains(text), "{text:?} not in the report");
    }
}

#[test]
fn an_attached_target_gets_an_end_anatomy_and_without_smaps_the_growth_is_virtual() {
    let dir = tempdir();
    let out = dir.path().join("attached.csv");
    let go = dir.path().join("go");
    let wait = format!("wait-file:{}", go.display());
    let mut child = spawn_workload(&[&wait, "partitions:4:24MiB", "hold:60s"]);
    let pid = child.id().to_string();
    let out_s = out.display().to_string();
    let flags = [
        "record",
        "--pid",
        &pid,
        "-i",
        "50ms",
        "--anatomy",
        "--anatomy-smaps-max",
        "0",
        "-o",
        &out_s,
    ];
    let mut rec = spawn_memmon(&flags);
    let lines =
        |n: usize| std::fs::read_to_string(side(&out)).is_ok_and(|t| t.lines().count() >= n);
    assert!(wait_for(30.0, || lines(1)), "no start anatomy");
    std::fs::write(&go, "").unwrap();
    wait_for_rss(child.id(), 96 * MIB);
    // SAFETY: kill takes plain integers and touches no memory.
    unsafe { libc::kill(rec.id() as i32, libc::SIGINT) };
    rec.wait().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let all = anatomies(&out);
    assert_eq!(all[0]["trigger"], "start");
    let end = all.last().unwrap();
    assert_eq!(end["trigger"], "end");
    let part = find(end, "anon", None, Some(24 * MIB));
    assert_eq!(
        (part["mappings"].as_u64(), part["virtual_bytes"].as_u64()),
        (Some(4), Some(96 * MIB))
    );
    assert!(part.get("resident").is_none());
    memmon()
        .arg("summary")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "virtual size (maps; a process's smaps was not read), from the anatomy nearest the idle floor",
        ))
        .stdout(predicate::str::contains(
            "+96.00 MiB  4 anonymous mappings of 24.00 MiB (new)",
        ));
}

#[test]
fn compare_shows_which_group_grew_between_the_baseline_and_the_candidate_peaks() {
    let dir = tempdir();
    let rec = |n: &str| {
        let out = dir.path().join(format!("p{n}.csv"));
        let parts = format!("partitions:{n}:24MiB");
        record_workload(
            &out,
            &[
                "-i",
                "50ms",
                "--pss",
                "--anatomy",
                "--anatomy-rise",
                "0%",
                "--anatomy-gap",
                "50ms",
            ],
            &["hold:200ms", &parts, "hold:800ms"],
        )
        .assert()
        .success();
        out
    };
    let (base, new) = (rec("4"), rec("6"));
    memmon()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .assert()
        .stdout(predicate::str::contains("highest anatomies: +4"))
        .stdout(predicate::str::contains(
            "resident (smaps), from the baseline's (+",
        ))
        .stdout(predicate::str::contains(
            "6 anonymous mappings of 24.00 MiB",
        ));
    let out = memmon()
        .args(["compare", "--json"])
        .arg(&base)
        .arg(&new)
        .output()
        .unwrap();
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = &c["anatomy"];
    assert_eq!(a["measure"], "resident");
    let part = &a["changes"][0];
    assert_eq!(part["kind"], "anon");
    assert_eq!(
        (
            part["from"]["mappings"].as_u64(),
            part["to"]["mappings"].as_u64()
        ),
        (Some(4), Some(6))
    );
    // Two more partitions (the kernel may merge a small neighbour into one: within 1 MiB).
    let grew = part["delta_bytes"].as_i64().unwrap() as u64;
    assert!((48 * MIB - bound()..49 * MIB).contains(&grew), "{a:#}");
    // With the ledger (where memmon may use perf): by the code that mapped them, 4 then 6.
    if let Some(stacks) = a["stacks"].as_array() {
        let parts = stacks
            .iter()
            .find(|c| {
                c["frames"].as_array().unwrap().iter().any(|f| {
                    f["function"]
                        .as_str()
                        .is_some_and(|n| n.ends_with("Block::apart_touched"))
                })
            })
            .unwrap_or_else(|| panic!("no stack through apart_touched: {a:#}"));
        assert_eq!(
            (
                parts["from_mappings"].as_u64(),
                parts["to_mappings"].as_u64()
            ),
            (Some(4), Some(6)),
            "{parts:#}"
        );
        memmon()
            .arg("compare")
            .arg(&base)
            .arg(&new)
            .assert()
            .stdout(predicate::str::contains("by stack: +"))
            .stdout(predicate::str::contains(
                "memmon::workload::Block::apart_touched",
            ));
    }
}

/// The ramp: six partitions mapped one after another, held, then freed before the
/// workload ends (a launched command has no anatomy at its end). The stretch's reads follow
/// the ramp up and the highest, at its top, is kept: what grew names all six, where reads at
/// the first rise only (the old schedule) saw one or two. The top is held 2 s: the read asked
/// at its first row has that long to begin, however busy the machine.
#[test]
fn a_ramp_gets_its_top_read_and_what_grew_names_all_of_it_though_freed_before_the_end() {
    let dir = tempdir();
    let out = dir.path().join("ramp.csv");
    let mut steps = vec!["hold:300ms"];
    for _ in 0..6 {
        steps.extend(["partitions:1:16MiB", "hold:150ms"]);
    }
    steps.extend(["hold:2s", "free-all", "hold:500ms"]);
    record_workload(&out, &["-i", "50ms", "--anatomy"], &steps)
        .assert()
        .success();
    let all = anatomies(&out);
    let peak = all
        .iter()
        .max_by_key(|a| a["rss_bytes"].as_u64().unwrap())
        .unwrap();
    assert_eq!(peak["trigger"], "peak", "{all:#?}");
    let parts = find(peak, "anon", None, Some(16 * MIB));
    assert_eq!(parts["mappings"], 6, "{peak:#}");
    assert_eq!(parts["virtual_bytes"], 96 * MIB);
    // Only the stretch's highest is written: one peak for the whole recording (no markers).
    assert_eq!(all.iter().filter(|a| a["trigger"] == "peak").count(), 1);
    let s = summary_json(&out);
    assert_eq!(s["anatomy"]["to"]["trigger"], "peak");
    let c = &s["anatomy"]["changes"][0];
    assert_eq!(
        (c["kind"].as_str(), c["new"].as_bool()),
        (Some("anon"), Some(true))
    );
    assert_eq!(c["to"]["mappings"], 6);
    // The cost said: every read (the dropped ones too), from the end record.
    let reads = s["anatomy"]["reads"].as_u64().unwrap();
    assert!(reads >= 3, "{:#}", s["anatomy"]);
    assert!(s["anatomy"]["reads_dropped"].as_u64().unwrap() >= 1);
    memmon()
        .arg("summary")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "  anatomy reads {reads} taken, "
        )))
        .stdout(predicate::str::contains(
            "dropped: lower than another of their stretch, or at the start in the program's loader",
        ));
}

/// An anatomy the ledger did not answer for within its 10 s (its thread busy unwinding a flood
/// of stacks) says so in the table (`ledger_unanswered`), and summary and `--folded` say why its
/// stacks are missing rather than that the ledger was off.
#[test]
fn an_anatomy_the_ledger_did_not_answer_for_says_why_it_has_no_stacks() {
    let dir = tempdir();
    let out = dir.path().join("r.csv");
    record_workload(
        &out,
        &["-q", "-i", "50ms", "--anatomy"],
        &["alloc:16MiB", "hold:200ms"],
    )
    .assert()
    .success();
    // The table as a recorder whose ledger did not answer writes it.
    let lines: Vec<String> = anatomies(&out)
        .into_iter()
        .map(|mut a| {
            let o = a.as_object_mut().unwrap();
            o.remove("ledger");
            o.insert("ledger_unanswered".into(), Value::Bool(true));
            a.to_string()
        })
        .collect();
    std::fs::write(side(&out), lines.join("\n") + "\n").unwrap();
    memmon()
        .arg("summary")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "by stack      at the highest anatomy, none: the ledger's thread did not answer within 10 s",
        ));
    memmon()
        .args(["summary", "--folded", "-"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "has no stacks at its highest anatomy: the ledger's thread did not answer within 10 s",
        ));
}
