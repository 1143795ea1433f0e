//! Anatomies at the ends and highs of spans: `record --anatomy` at each phase's end (the next
//! marker), `bench --anatomy` at each run's end, and at each stretch's highest; what grew in
//! each, and the report's bar of the peak.

use crate::anatomy::side;
use crate::util::*;
use serde_json::Value;
use std::path::Path;

/// The anatomy table's lines so far (none when it is not there yet).
fn anatomies(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(side(out))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The change of `kind` among a diff's `changes` whose mappings are each `each` bytes (or named
/// `name`).
fn change<'a>(
    changes: &'a Value,
    kind: &str,
    each: Option<u64>,
    name: Option<&str>,
) -> Option<&'a Value> {
    changes.as_array().unwrap().iter().find(|c| {
        let g = if c["to"].is_null() {
            &c["from"]
        } else {
            &c["to"]
        };
        c["kind"] == kind
            && each.is_none_or(|e| g["min_mapping_bytes"] == e && g["max_mapping_bytes"] == e)
            && name.is_none_or(|n| c["name"] == n)
    })
}

/// A workload whose phases grow known mappings: phase `a` two anonymous partitions of 24 MiB,
/// phase `b` a 16 MiB memfd. Each phase's next step waits for the test's go-ahead, given once
/// the anatomy of the phase that ended is in the table: what one phase grows never lands in the
/// anatomy of the phase before, however slow the machine. No new highs (`--anatomy-gap 1h`):
/// no other read is under way at a marker, and each phase's highest is its end. Maps alone
/// (`--anatomy-smaps-max 0`): virtual sizes, exact.
#[test]
fn phase_end_anatomies_name_what_grew_in_each_phase_and_the_report_draws_the_peak() {
    let dir = tempdir();
    let out = dir.path().join("phases.csv");
    let go = |n: u32| dir.path().join(format!("go{n}"));
    let wait = |n: u32| format!("wait-file:{}", go(n).display());
    let steps = [
        wait(0),
        "say:phase a".into(),
        "partitions:2:24MiB".into(),
        "say:phase b".into(),
        wait(1),
        "memfd:m:16MiB".into(),
        "say:phase c".into(),
        wait(2),
        "hold:200ms".into(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let mut args: Vec<String> = [
        "record",
        "-q",
        "-i",
        "50ms",
        "--anatomy",
        "--anatomy-gap",
        "1h",
        "--anatomy-smaps-max",
        "0",
        "--mark-stdout",
        r"^phase (?P<label>\w+)$",
        "-o",
    ]
    .map(String::from)
    .to_vec();
    args.push(out.display().to_string());
    args.push("--".into());
    args.extend(workload(&steps));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut rec = spawn_memmon(&args);
    let has = |trigger: &str, span: Option<&str>| {
        anatomies(&out)
            .iter()
            .any(|a| a["trigger"] == trigger && span.is_none_or(|s| a["span"] == s))
    };
    assert!(wait_for(60.0, || has("start", None)), "no start anatomy");
    std::fs::write(go(0), "").unwrap();
    assert!(
        wait_for(60.0, || has("phase-end", Some("a"))),
        "no anatomy at phase a's end"
    );
    std::fs::write(go(1), "").unwrap();
    assert!(
        wait_for(60.0, || has("phase-end", Some("b"))),
        "no anatomy at phase b's end"
    );
    std::fs::write(go(2), "").unwrap();
    assert!(rec.wait().unwrap().success());

    let s = summary_json(&out);
    let phases = s["phase_anatomy"].as_array().unwrap();
    // Phase c is open when the workload exits: no anatomy at its end.
    assert_eq!(phases.len(), 2, "{phases:#?}");
    let (a, b) = (&phases[0], &phases[1]);
    assert_eq!(
        (a["label"].as_str(), a["index"].as_u64()),
        (Some("a"), Some(1))
    );
    assert_eq!(
        (a["from"]["trigger"].as_str(), a["to"]["trigger"].as_str()),
        (Some("start"), Some("phase-end"))
    );
    assert_eq!(a["measure"], "virtual");
    let parts = change(&a["changes"], "anon", Some(24 * MIB), None).expect("phase a's partitions");
    assert_eq!(parts["delta_bytes"], 48 * MIB);
    assert_eq!(parts["to"]["mappings"], 2);
    assert_eq!(parts["new"], true);
    assert!(
        change(&a["changes"], "memfd", None, Some("m")).is_none(),
        "{a:#}"
    );

    assert_eq!(b["label"], "b");
    assert_eq!(b["from"]["trigger"], "phase-end");
    assert_eq!(b["from"]["elapsed_s"], a["to"]["elapsed_s"]);
    let memfd = change(&b["changes"], "memfd", None, Some("m")).expect("phase b's memfd");
    assert_eq!(memfd["delta_bytes"], 16 * MIB);
    assert!(
        change(&b["changes"], "anon", Some(24 * MIB), None).is_none(),
        "{b:#}"
    );

    let text = memmon().arg("summary").arg(&out).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    for line in [
        "what grew by phase (from each phase's start to its highest anatomy):",
        "phase 1 'a': +48.",
        "+48.00 MiB  2 anonymous mappings of 24.00 MiB (new)",
        "phase 2 'b': +16.",
        "+16.00 MiB  memfd 'm' (1 mapping of 16.00 MiB) (new)",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }

    // The report: the peak's anatomy (phase b's end: both partitions and the memfd) as a bar.
    let html = dir.path().join("phases.html");
    let html = report_html(&out, &html);
    let bar = &html[html.find("<svg class=\"anatomy-bar\"").expect("no bar")..];
    let bar = &bar[..bar.find("</ul>").unwrap()];
    for text in [
        "2 anonymous mappings of 24.00 MiB: 48.00 MiB</title>",
        "memfd &#39;m&#39; (1 mapping of 16.00 MiB): 16.00 MiB</title>",
        "<span class=\"swatch\"",
    ] {
        assert!(bar.contains(text), "{text:?} not in the bar:\n{bar}");
    }
    assert!(
        html.contains("segments in virtual size (maps"),
        "the bar's measure is not said"
    );
    // And what grew in each phase, as tables with the summary's words.
    for text in [
        "what grew in phase 1 &#39;a&#39;: +48.",
        "what grew in phase 2 &#39;b&#39;: +16.",
        "from the start anatomy at +",
        "<th>at its start</th>",
        "memfd &#39;m&#39; (1 mapping of 16.00 MiB) (new)",
    ] {
        assert!(html.contains(text), "{text:?} not in the report");
    }
}

/// A test daemon that keeps 8 MiB after each request (`--leak`), killed when dropped.
struct LeakyDaemon(std::process::Child);

impl Drop for LeakyDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The sum of the `anon` groups' changes in a diff: the anonymous mappings' growth, whatever
/// the kernel merged (adjacent anonymous mappings of one access become one).
fn anon_growth(diff: &Value) -> i64 {
    diff["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "anon")
        .map(|c| c["delta_bytes"].as_i64().unwrap())
        .sum()
}

/// Each run maps 40 MiB for a moment and leaks 8 MiB. No new highs (`--anatomy-gap 1h`: a read
/// asked at a high may begin after the high on a loaded machine): each run's highest anatomy is
/// its `run-end` one, which holds the 8 MiB of that run and of each before it, exactly: the run
/// begins after the floor's anatomy is read, and ends after its own is.
#[test]
fn bench_anatomy_says_what_grew_in_each_run_from_the_idle_floor_and_keeps_the_table() {
    let dir = tempdir();
    let socket = dir.path().join("d.sock");
    let pidfile = dir.path().join("d.pid");
    let _daemon = LeakyDaemon(
        std::process::Command::new(memmon_test_path())
            .arg("test-daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--pidfile")
            .arg(&pidfile)
            .args(["--leak", "8MiB"])
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_for(30.0, || pidfile.exists()),
        "the test daemon did not start"
    );
    let rec = dir.path().join("bench.csv");
    let json = dir.path().join("bench.json");
    let done = memmon()
        .args(["bench", "--pidfile"])
        .arg(&pidfile)
        .args([
            "-n",
            "2",
            "-i",
            "50ms",
            "--anatomy",
            "--anatomy-gap",
            "1h",
            "--anatomy-smaps-max",
            "0",
            "-o",
        ])
        .arg(&rec)
        .arg("--export-json")
        .arg(&json)
        .arg("--")
        .arg(memmon_test_path())
        .arg("test-client")
        .arg("--socket")
        .arg(&socket)
        .args(["--size", "40MiB", "--hold", "100ms"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&done.stdout).into_owned();
    assert!(
        done.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = report["anatomy"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{report:#}");
    for (k, run) in runs.iter().enumerate() {
        assert_eq!(run["label"], format!("run {}", k + 1));
        assert_eq!(run["from"]["trigger"], "start", "{run:#}");
        assert_eq!(run["to"]["trigger"], "run-end", "{run:#}");
        assert_eq!(run["measure"], "virtual");
        let want = 8 * MIB * (k as u64 + 1);
        assert_eq!(anon_growth(run), want as i64, "{run:#}");
    }
    assert!(
        table.contains("what grew in each run, from the idle floor's anatomy (start at +"),
        "{table}"
    );
    assert!(table.contains("    run 1: +"), "{table}");
    assert!(table.contains("    run 2: +"), "{table}");
    // (The kernel may merge the leaks' mappings into one: the sums above are exact; the table
    // names the group.)
    assert!(table.contains(" anonymous mapping"), "{table}");
    // -o keeps the table beside the recording: each run's end, and the start before them.
    let all = anatomies(&rec);
    assert_eq!(all[0]["trigger"], "start");
    for n in ["run 1", "run 2"] {
        assert!(
            all.iter()
                .any(|a| a["trigger"] == "run-end" && a["span"] == n),
            "no run-end anatomy of {n}"
        );
    }
    let summary = summary_json(&rec);
    assert_eq!(summary["anatomy_table"], "bench.csv.anatomy.jsonl");
}

/// Markers the workload waits for (`mark:LABEL`, through the recorder's socket): each is
/// answered once the anatomy of the phase it ends is read, so the next phase's growth, made at
/// once, is never in it. No go-ahead from the test, default anatomy flags.
#[test]
fn a_marker_that_waits_for_its_row_is_answered_after_its_phase_end_anatomy() {
    let dir = tempdir();
    let out = dir.path().join("waited.csv");
    record_workload(
        &out,
        &["-q", "-i", "50ms", "--anatomy"],
        &[
            "mark:a",
            "partitions:2:24MiB",
            "mark:b",
            "memfd:m:16MiB",
            "mark:c",
            "partitions:1:8MiB",
            "mark:d",
        ],
    )
    .assert()
    .success();
    let s = summary_json(&out);
    let phases = s["phase_anatomy"].as_array().unwrap();
    let labels: Vec<&str> = phases
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["a", "b", "c"], "{phases:#?}");
    let (a, b, c) = (
        &phases[0]["changes"],
        &phases[1]["changes"],
        &phases[2]["changes"],
    );
    let parts = change(a, "anon", Some(24 * MIB), None).expect("phase a's partitions");
    assert_eq!(
        (
            parts["delta_bytes"].as_u64(),
            parts["to"]["mappings"].as_u64()
        ),
        (Some(48 * MIB), Some(2))
    );
    assert!(change(a, "memfd", None, Some("m")).is_none(), "{a:#}");
    let memfd = change(b, "memfd", None, Some("m")).expect("phase b's memfd");
    assert_eq!(memfd["delta_bytes"], 16 * MIB);
    assert!(change(b, "anon", Some(8 * MIB), None).is_none(), "{b:#}");
    assert!(change(b, "anon", Some(24 * MIB), None).is_none(), "{b:#}");
    let last = change(c, "anon", Some(8 * MIB), None).expect("phase c's partition");
    assert_eq!(last["delta_bytes"], 8 * MIB);
    assert!(change(c, "memfd", None, Some("m")).is_none(), "{c:#}");
}

/// The issue's bench: each run maps 40 MiB and frees it before the run ends, so its `run-end`
/// anatomy is back at the floor. The run's highest is read while the client holds the memory
/// (1.5 s: the read asked at its first row has that long to begin, however busy the machine),
/// and what grew in the run names it; the other run's highest is its own.
#[test]
fn bench_anatomy_reads_each_runs_highest_before_its_memory_is_freed() {
    let dir = tempdir();
    let socket = dir.path().join("d.sock");
    let pidfile = dir.path().join("d.pid");
    let _daemon = LeakyDaemon(
        std::process::Command::new(memmon_test_path())
            .arg("test-daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--pidfile")
            .arg(&pidfile)
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_for(30.0, || pidfile.exists()),
        "the test daemon did not start"
    );
    let json = dir.path().join("bench.json");
    let done = memmon()
        .args(["bench", "--pidfile"])
        .arg(&pidfile)
        .args(["-n", "2", "-i", "50ms", "--anatomy", "--export-json"])
        .arg(&json)
        .arg("--")
        .arg(memmon_test_path())
        .arg("test-client")
        .arg("--socket")
        .arg(&socket)
        .args(["--size", "40MiB", "--hold", "1500ms"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&done.stdout).into_owned();
    assert!(
        done.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = report["anatomy"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{report:#}");
    let mut seen = Vec::new();
    for run in runs {
        assert_eq!(run["to"]["trigger"], "peak", "{run:#}");
        assert_eq!(run["to"]["resident_known"], true, "{run:#}");
        // The 40 MiB request, resident at the run's highest (the kernel may merge it with a
        // neighbour, and the daemon's own buffers move a little: within 4 MiB).
        let grew = anon_growth(run);
        assert!(
            (40 * MIB as i64..44 * MIB as i64).contains(&grew),
            "{grew} {run:#}"
        );
        assert!(!seen.contains(&run["to"]["elapsed_s"]), "{runs:#?}");
        seen.push(run["to"]["elapsed_s"].clone());
        // With the ledger (where memmon may use perf): the 40 MiB by the code that mapped it,
        // the daemon's worker threads (`serve`'s closures), past the mapping's own calls.
        if let Some(stacks) = run["stacks"].as_array() {
            let served = stacks
                .iter()
                .filter(|c| {
                    c["frames"].as_array().unwrap().iter().any(|f| {
                        f["function"]
                            .as_str()
                            .is_some_and(|n| n.contains("testdaemon::serve"))
                    })
                })
                .max_by_key(|c| c["delta_bytes"].as_i64())
                .unwrap_or_else(|| panic!("no stack through serve: {run:#}"));
            assert!(
                served["delta_bytes"].as_i64() >= Some(40 * MIB as i64),
                "{served:#}"
            );
        }
    }
    assert!(table.contains("to the peak one at +"), "{table}");
}

#[test]
fn a_command_bench_refuses_anatomy_and_says_how_to_record_a_run() {
    memmon()
        .args(["bench", "-n", "1", "--anatomy", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--anatomy applies to a bench against a daemon",
        ))
        .stderr(predicates::str::contains("memmon record --anatomy"));
}
