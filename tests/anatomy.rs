//! `record --anatomy`: what the memory is made of, recorded into a side table and read back by
//! `summary`, against workloads whose mappings are known.

use crate::util::*;
use predicates::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn side(out: &Path) -> PathBuf {
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
    let run = |flags: &[&str]| {
        let mut f = vec!["--anatomy", "-i", "50ms"];
        f.extend_from_slice(flags);
        record_workload(&out, &f, &["alloc:8MiB", "hold:300ms"])
    };
    run(&[]).assert().success();
    let m = meta(&out);
    assert_eq!(m["anatomy"]["file"], "r.csv.anatomy.jsonl");
    assert_eq!(m["anatomy"]["rise"], 0.1);
    assert_eq!(m["anatomy"]["gap_s"], 5.0);
    assert_eq!(m["anatomy"]["smaps"], false);
    let first = anatomies(&out);
    assert_eq!(first[0]["trigger"], "start");
    // Without --pss: virtual sizes only, and why is said.
    assert_eq!(first[0]["smaps_processes"], 0);
    assert!(first[0]["unread"][0]["why"]
        .as_str()
        .unwrap()
        .contains("only with --pss"));
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
