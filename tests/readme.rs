//! README.md and the guide (docs/guide/*.md) show today's memmon: each block marked
//! `<!-- checked: KIND -->` is paired with a run this file makes of the same kind, and fails when
//! a document drifts from what memmon prints now. Every kind paired with a run must be marked in
//! some document, and every marked kind must be one paired with a run. Numbers, PIDs, times and
//! paths never count; what does:
//!
//! - `summary X`: the summary's line labels (the left column: `peak`, `sampled peak`, ...; not
//!   `warning:` or `note:` lines, which depend on timing) in today's order for run X, all of
//!   them unless the block has a `...` line (then the block's are a subsequence of today's); and
//!   each table's header row (`label ...`, `process ...`) as today's;
//! - `bench X`, `compare`: the table's header row as today's (and compare's metric names);
//! - `stderr budget`: the budget message as today's, numbers aside;
//! - `csv-header`: the CSV header as today's column list;
//! - `json summary|bench|compare` (up to `<!-- /checked -->`): every backquoted key is in today's
//!   `--json` at the place the block gives it: a key right before `(` opens its object (or its
//!   list's objects) for the keys inside the parentheses; other parentheses change nothing;
//! - `push-metrics`: every metric named is in a real push, every label named is on one;
//! - `exit-codes`: the table's codes are those of src/commands/exit.rs.
//!
//! And every `--flag` (or `-f`) a document gives a memmon subcommand in a command line, or names
//! in prose, is in that subcommand's `--help` (flags of other programs are listed below); every
//! relative link points to a file that exists (and a `#anchor` to a heading that gives it); a
//! document whose commands run `memmon-test` says how to build it or links to where README does.
//! Every failure names the file and the line.
//!
//! The runs: a launched workload, an attached one, a tree, phases from a command's stdout, an
//! appended recording, a GPU through the stand-in NVML, the test prover benched with and without
//! a cgroup of its own and the two cgroup benches compared. Most are made as root (memmon's own
//! cgroup, exit records), as the documents' were; without root those checks say so and are
//! skipped.

use crate::peak::Prover;
use crate::util::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The documents whose examples are checked: README.md, then every docs/guide/*.md by name, each
/// as (its path from the repository's root, its text).
pub(crate) fn doc_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut guide: Vec<String> = std::fs::read_dir(root.join("docs/guide"))
        .expect("docs/guide")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/guide/{n}"))
        .collect();
    guide.sort();
    assert!(!guide.is_empty(), "docs/guide has no .md file");
    std::iter::once("README.md".to_string())
        .chain(guide)
        .map(|name| {
            let text =
                std::fs::read_to_string(root.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect()
}

/// The kinds of `<!-- checked: KIND -->` this file pairs with a run (see the top of the file).
const KINDS: &[&str] = &[
    "summary launched",
    "summary attached",
    "summary tree",
    "summary phases",
    "summary append",
    "summary gpu",
    "summary bench-recording",
    "bench prover",
    "bench cgroup",
    "bench window",
    "bench sweep",
    "compare",
    "stderr budget",
    "csv-header",
    "json summary",
    "json bench",
    "json compare",
    "push-metrics",
    "exit-codes",
];

/// A marked block of a document: its kind (`summary phases`), its text, its file and its first
/// line.
#[derive(Debug)]
struct Block {
    kind: String,
    text: String,
    file: String,
    line: usize,
}

/// Every `<!-- checked: KIND -->` of the document `file` with what it marks: the fenced block
/// after it, the table after it, or the text up to `<!-- /checked -->`.
fn checked_blocks(file: &str, doc: &str) -> Vec<Block> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        let Some(kind) = t
            .strip_prefix("<!-- checked:")
            .and_then(|k| k.strip_suffix("-->"))
        else {
            continue;
        };
        let next = lines[i + 1..]
            .iter()
            .position(|l| !l.trim().is_empty())
            .map(|k| i + 1 + k)
            .unwrap_or_else(|| panic!("{file} line {}: nothing after the marker", i + 1));
        let first = lines[next].trim_start();
        let body: Vec<&str> = if first.starts_with("```") {
            let indent = lines[next].len() - first.len();
            lines[next + 1..]
                .iter()
                .take_while(|l| l.trim() != "```")
                .map(|l| l.get(indent..).unwrap_or(""))
                .collect()
        } else if first.starts_with('|') {
            lines[next..]
                .iter()
                .take_while(|l| l.trim_start().starts_with('|'))
                .copied()
                .collect()
        } else {
            let end = lines[next..]
                .iter()
                .position(|l| l.trim() == "<!-- /checked -->")
                .unwrap_or_else(|| panic!("{file} line {}: no <!-- /checked --> after it", i + 1));
            lines[next..next + end].to_vec()
        };
        out.push(Block {
            kind: kind.trim().to_string(),
            text: body.join("\n"),
            file: file.to_string(),
            line: i + 1,
        });
    }
    out
}

/// Every document's marked blocks.
fn all_blocks() -> Vec<Block> {
    doc_files()
        .iter()
        .flat_map(|(file, doc)| checked_blocks(file, doc))
        .collect()
}

/// The marked blocks of kind `prefix` (or `prefix ...`) in every document; at least one.
fn blocks_of(prefix: &str) -> Vec<Block> {
    let found: Vec<Block> = all_blocks()
        .into_iter()
        .filter(|b| b.kind == prefix || b.kind.starts_with(&format!("{prefix} ")))
        .collect();
    assert!(
        !found.is_empty(),
        "no document (README.md, docs/guide/*.md) has a <!-- checked: {prefix} ... --> block"
    );
    found
}

/// Every kind paired with a run is marked in some document, and every marked kind is paired
/// with a run: a block moved, renamed or dropped never leaves its check with nothing to check.
#[test]
fn every_checked_kind_is_marked_in_some_document_and_every_marked_kind_is_checked() {
    let blocks = all_blocks();
    let mut bad = Vec::new();
    for kind in KINDS {
        if !blocks.iter().any(|b| b.kind == *kind) {
            bad.push(format!(
                "no document (README.md, docs/guide/*.md) marks a <!-- checked: {kind} --> block"
            ));
        }
    }
    for b in &blocks {
        if !KINDS.contains(&b.kind.as_str()) {
            bad.push(format!(
                "{} line {}: <!-- checked: {} --> is no kind tests/readme.rs pairs with a run",
                b.file, b.line, b.kind
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The label of a summary line indented by two spaces: its text up to two spaces, ` (`, `: ` or
/// a number (`lifetime peak 842.4 MiB`); `None` for other lines, `...` and warnings and notes,
/// and `memory health` (said only where a fault or a stall happened: a page of a program's
/// binary evicted by a busy machine, another program's stall, decide it as timing decides a
/// warning).
fn label(line: &str) -> Option<String> {
    let body = line.strip_prefix("  ")?;
    if body.starts_with(char::is_whitespace)
        || body.trim() == "..."
        || body.starts_with("warning:")
        || body.starts_with("note:")
        || body.starts_with("memory health")
    {
        return None;
    }
    let b = body.as_bytes();
    let mut end = body.len();
    for i in 0..b.len() {
        let next = b.get(i + 1).copied().unwrap_or(b' ');
        let two = (b[i], next);
        if two == (b' ', b' ')
            || two == (b' ', b'(')
            || two == (b':', b' ')
            || (b[i] == b' ' && (next.is_ascii_digit() || body[i + 1..].starts_with('≥')))
        {
            end = i;
            break;
        }
    }
    Some(body[..end].trim_end_matches(':').to_string())
}

fn labels(text: &str) -> Vec<String> {
    text.lines().filter_map(label).collect()
}

/// A table's header row, cells split at two spaces and numbers as `N` (`baseline (mean of N)`).
/// The memory health columns are left out: a table has them only where a span faulted or
/// stalled, which the machine decides (see `label`).
fn cells(line: &str) -> Vec<String> {
    line.trim()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .filter(|c| !["major faults", "memory stall", "Major faults", "Mem stall"].contains(c))
        .map(digits_as_n)
        .collect()
}

fn digits_as_n(s: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in s.chars() {
        if c.is_ascii_digit() || (in_number && c == '.') {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

/// The header rows of the tables in `text`, each with the table it belongs to: `(table,
/// cells)`, a summary's tables by their title (`phases`, `runs`, `phases by label`,
/// `processes`), bench's as `bench`, compare's as `compare`.
fn headers(text: &str) -> Vec<(String, Vec<String>)> {
    let mut title = String::new();
    let mut out = Vec::new();
    for l in text.lines() {
        if let Some(t) = label(l) {
            title = t;
        }
        let c = cells(l);
        let table = match c.first().map(String::as_str) {
            Some("label") | Some("process") => title.clone(),
            Some("Run") => "bench".into(),
            Some("Configuration") => "sweep".into(),
            Some("metric") => "compare".into(),
            _ => continue,
        };
        if c.len() >= 3 {
            out.push((table, c));
        }
    }
    out
}

/// The first cells of a compare table's rows: its metrics.
fn compare_metrics(text: &str) -> Vec<String> {
    let mut inside = false;
    let mut out = Vec::new();
    for l in text.lines() {
        let c = cells(l);
        if c.first().map(String::as_str) == Some("metric") {
            inside = true;
            continue;
        }
        if inside {
            if c.len() < 3 {
                break;
            }
            out.push(c[0].clone());
        }
    }
    out
}

fn is_subsequence(small: &[String], big: &[String]) -> bool {
    let mut it = big.iter();
    small.iter().all(|s| it.any(|b| b == s))
}

/// What a block of kind `kind` gets wrong against today's output `today`: the summary's
/// labels and every table's header.
fn drift(block: &Block, today: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let (ours, theirs) = (labels(&block.text), labels(today));
    let trimmed = block.text.lines().any(|l| l.trim() == "...");
    let kind = &block.kind;
    if kind.starts_with("summary ") || kind == "bench window" {
        let ok = if trimmed {
            is_subsequence(&ours, &theirs)
        } else {
            ours == theirs
        };
        if !ok {
            bad.push(format!(
                "{} line {} ({kind}): the summary's lines are {ours:?}; today's memmon prints {theirs:?}{}",
                block.file,
                block.line,
                if trimmed { " (the block's may leave some out, in order)" } else { " (the block has no '...': all of them)" }
            ));
        }
    }
    let today_headers = headers(today);
    for (table, cells) in headers(&block.text) {
        match today_headers.iter().find(|(t, _)| *t == table) {
            Some((_, now)) if *now == cells => {}
            Some((_, now)) => bad.push(format!(
                "{} line {} ({kind}): the {table} table's header is {cells:?}; today's is {now:?}",
                block.file, block.line
            )),
            None => bad.push(format!(
                "{} line {} ({kind}): today's output has no {table} table:\n{today}",
                block.file, block.line
            )),
        }
    }
    if kind == "compare" && compare_metrics(&block.text) != compare_metrics(today) {
        bad.push(format!(
            "{} line {} (compare): metrics {:?}; today's are {:?}",
            block.file,
            block.line,
            compare_metrics(&block.text),
            compare_metrics(today)
        ));
    }
    bad
}

// ---------------------------------------------------------------------------------------------
// Today's outputs: each run made once, by the first test that needs it.

/// One run's outputs: the text a block shows, and the JSON beside it.
struct Run {
    text: String,
    json: Vec<Value>,
}

fn stdout_of(c: &mut assert_cmd::Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn summary_text(path: &Path) -> String {
    stdout_of(memmon().arg("summary").arg(path))
}

/// A directory that lives as long as the test binary (the runs are shared by the tests).
fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(tempdir).path()
}

/// What a documented example was made with, and so what its check needs here.
#[derive(Clone, Copy)]
enum Needs {
    Nothing,
    /// Exit records (taskstats): root.
    Root,
    /// memmon's own cgroup for a launched command: root and a memory controller.
    OwnCgroup,
}

/// Whether a check that `needs` can run here; says why not on stderr.
fn can_run(what: &str, needs: Needs) -> bool {
    if matches!(needs, Needs::Nothing) {
        return true;
    }
    if !is_root() {
        skip(
            Need::Root,
            &format!("{what}: the documents' example was made as root (exit records, memmon's own cgroup), and so is its check"),
        );
        return false;
    }
    if matches!(needs, Needs::OwnCgroup) && crate::cgroup::memory_hierarchy().is_none() {
        skip(
            Need::MemoryCgroup,
            &format!("{what}: the documents' example was made in a memory cgroup of memmon's own"),
        );
        return false;
    }
    true
}

/// `summary launched` and `stderr budget`: a launched 64 MiB workload, and the CSV header.
fn launched() -> &'static (Run, String, PathBuf) {
    static R: OnceLock<(Run, String, PathBuf)> = OnceLock::new();
    R.get_or_init(|| {
        let out = scratch().join("budget.csv");
        record_workload(&out, &["-q", "-i", "100ms"], &["alloc:64MiB", "hold:500ms"])
            .assert()
            .success();
        let budget = memmon()
            .args(["summary", "--max-peak", "32MiB", "budget.csv"])
            .current_dir(scratch())
            .output()
            .unwrap();
        assert_eq!(budget.status.code(), Some(1));
        let run = Run {
            text: summary_text(&out),
            json: vec![summary_json(&out)],
        };
        (
            run,
            String::from_utf8_lossy(&budget.stderr).into_owned(),
            out,
        )
    })
}

/// `summary attached`: a process that peaked before memmon attached.
fn attached() -> &'static Run {
    static R: OnceLock<Run> = OnceLock::new();
    R.get_or_init(|| {
        let mut w = spawn_workload(&["alloc:20MiB", "spike:200MiB:20ms", "hold:120s"]);
        let pid = w.id();
        let status = |key: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with(key))
                        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                })
                .unwrap_or(0)
                * 1024
        };
        assert!(
            wait_for(60.0, || status("VmHWM:") >= 200 * MIB
                && status("VmRSS:") < 100 * MIB),
            "the workload did not spike and come back"
        );
        let out = scratch().join("attached.csv");
        memmon()
            .args(["record", "-q", "-i", "250ms", "--duration", "1s", "--pid"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
        let _ = w.kill();
        let _ = w.wait();
        Run {
            text: summary_text(&out),
            json: vec![summary_json(&out)],
        }
    })
}

/// `summary tree`: a parent whose two children peak one after the other.
fn tree() -> &'static Run {
    static R: OnceLock<Run> = OnceLock::new();
    R.get_or_init(|| {
        let out = scratch().join("tree.csv");
        record_workload(
            &out,
            &["-q", "-i", "1s"],
            &[
                "alloc:20MiB",
                "children:1:40MiB:300ms",
                "wait-children",
                "children:1:40MiB:300ms",
                "wait-children",
            ],
        )
        .assert()
        .success();
        Run {
            text: summary_text(&out),
            json: vec![summary_json(&out)],
        }
    })
}

/// `summary phases`: the documented command (docs/guide/phases.md), smaller: three proofs, phases from stdout, the last one
/// long enough for a sample after its marker.
fn phases() -> &'static Run {
    static R: OnceLock<Run> = OnceLock::new();
    R.get_or_init(|| {
        let out = scratch().join("phases.csv");
        let mut steps = vec!["alloc:20MiB", "say:phase load", "hold:300ms"];
        for _ in 0..3 {
            steps.extend([
                "say:phase prove",
                "spike:50MiB:20ms",
                "hold:300ms",
                "say:phase idle",
                "hold:200ms",
            ]);
        }
        steps.push("hold:2s");
        record_workload(
            &out,
            &[
                "-q",
                "-i",
                "1s",
                "--phase-peaks",
                "--mark-stdout",
                r"phase (?P<label>\w+)",
            ],
            &steps,
        )
        .assert()
        .success();
        Run {
            text: summary_text(&out),
            json: vec![summary_json(&out)],
        }
    })
}

/// `summary append`: two sessions of a launched workload, with PSS.
fn append() -> &'static Run {
    static R: OnceLock<Run> = OnceLock::new();
    R.get_or_init(|| {
        let out = scratch().join("app.csv");
        for (flags, size) in [
            (&["-q", "--pss"][..], "alloc:40MiB"),
            (&["-q", "--pss", "--append"][..], "alloc:10MiB"),
        ] {
            record_workload(&out, flags, &[size, "hold:500ms"])
                .assert()
                .success();
        }
        Run {
            text: summary_text(&out),
            json: vec![summary_json(&out)],
        }
    })
}

/// `summary gpu`: an attached process on a GPU of the stand-in NVML, its accounting mark rising
/// above what the readings saw.
fn gpu() -> &'static Run {
    use memmon::probe::gpu::fake_library::{self, Variant};
    static R: OnceLock<Run> = OnceLock::new();
    R.get_or_init(|| {
        const GIB: u64 = 1 << 30;
        let lib = fake_library::build(&outside_program("cc"), Variant::DetailList)
            .unwrap_or_else(|e| panic!("{e}"));
        let conf = scratch().join("nvml.conf");
        let mut w = spawn_workload(&["alloc:10MiB", "hold:120s"]);
        let pid = w.id();
        let set = |mark: u64| {
            let text = format!(
                "device {} 150754820096 on GPU-fake-0 Fake H200\nprocess 0 {pid} {}\nrecord 0 {pid} {mark} 1 1771372328000000\n",
                6 * GIB,
                4 * GIB
            );
            let tmp = conf.with_extension("tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, &conf).unwrap();
        };
        set(4 * GIB);
        let out = scratch().join("gpu.jsonl");
        let child = Command::new(memmon_path())
            .env("LD_LIBRARY_PATH", &lib)
            .env("FAKE_NVML_CONFIG", &conf)
            .args(["record", "-q", "--gpu", "-i", "100ms", "--gpu-every", "100ms"])
            .args(["--duration", "120s", "--pid", &pid.to_string(), "-o"])
            .arg(&out)
            .spawn()
            .unwrap();
        let rows_with = |key: &str, v: u64| {
            std::fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|r| r[key] == v)
        };
        assert!(wait_for(60.0, || rows_with("gpu_hwm_bytes", 4 * GIB)));
        set(20 * GIB);
        assert!(wait_for(60.0, || rows_with("gpu_hwm_bytes", 20 * GIB)));
        // SAFETY: ending the memmon this test started, by its PID.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success() || o.status.code() == Some(143), "{o:?}");
        let _ = w.kill();
        let _ = w.wait();
        Run {
            text: summary_text(&out),
            json: vec![summary_json(&out)],
        }
    })
}

/// The documents' prover: tests/peak.rs's, smaller (16 MiB locked, 8 MiB shared, a 20 MiB helper).
const PROVER: [&str; 3] = ["16MiB", "8MiB", "20MiB"];

/// `memmon bench --pidfile P -n 2 --warmup 1 -i 1s FLAGS -- test-client --size SIZE` against
/// the prover `p`: its table (stdout).
fn bench_prover(p: &Prover, flags: &[&str], size: &str) -> String {
    stdout_of(
        memmon()
            .args(["bench", "-q", "--pidfile"])
            .arg(&p.pidfile)
            .args(["-n", "2", "--warmup", "1", "-i", "1s"])
            .args(flags)
            .arg("--")
            .arg(memmon_test_path())
            .args(["test-client", "--socket"])
            .arg(&p.socket)
            .args(["--size", size, "--hold", "150ms"]),
    )
}

/// A Pushgateway stand-in on 127.0.0.1: answers every request 200 and keeps the bodies.
fn push_listener() -> (String, std::sync::mpsc::Receiver<String>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(conn) = conn else { continue };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
            let mut r = BufReader::new(conn);
            let (mut length, mut chunked) = (0usize, false);
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
            }
            let mut body = Vec::new();
            if chunked {
                loop {
                    let mut size = String::new();
                    r.read_line(&mut size).unwrap();
                    let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                    let mut chunk = vec![0; n + 2];
                    r.read_exact(&mut chunk).unwrap();
                    if n == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..n]);
                }
            } else {
                body.resize(length, 0);
                r.read_exact(&mut body).unwrap();
            }
            let _ = r
                .get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
        }
    });
    (url, rx)
}

/// `bench prover`, `summary bench-recording`, `push-metrics`: the prover without a cgroup of its
/// own, benched with a recording, a JSON export and a push.
struct ProverBench {
    table: String,
    recording: Run,
    export: Value,
    pushed: String,
}

fn prover_bench() -> &'static ProverBench {
    static R: OnceLock<ProverBench> = OnceLock::new();
    R.get_or_init(|| {
        let dir = scratch().join("prover");
        let p = Prover::start(&dir, None, PROVER);
        let (url, bodies) = push_listener();
        let rec = dir.join("prover.csv");
        let json = dir.join("prover.json");
        let table = bench_prover(
            &p,
            &[
                "-o",
                rec.to_str().unwrap(),
                "--export-json",
                json.to_str().unwrap(),
                "--push",
                &url,
            ],
            "40MiB",
        );
        drop(p);
        let pushed: Vec<String> = bodies.try_iter().collect();
        assert!(!pushed.is_empty(), "nothing was pushed");
        ProverBench {
            table,
            recording: Run {
                text: summary_text(&rec),
                json: vec![summary_json(&rec)],
            },
            export: serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap(),
            pushed: pushed.join("\n"),
        }
    })
}

/// `bench window`: the test daemon serving 2 requests at once, benched with 2 in flight.
fn window_bench() -> &'static String {
    static R: OnceLock<String> = OnceLock::new();
    R.get_or_init(|| {
        let dir = scratch().join("window");
        std::fs::create_dir_all(&dir).unwrap();
        let (socket, pidfile) = (dir.join("d.sock"), dir.join("d.pid"));
        let mut d = std::process::Command::new(memmon_test_path())
            .arg("test-daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--pidfile")
            .arg(&pidfile)
            .args(["--workers", "2"])
            .spawn()
            .unwrap();
        assert!(wait_for(10.0, || pidfile.exists()));
        let out = memmon()
            .args(["bench", "-q", "--pidfile"])
            .arg(&pidfile)
            .args(["--concurrency", "2", "-n", "4", "-i", "100ms", "--"])
            .arg(memmon_test_path())
            .arg("test-client")
            .arg("--socket")
            .arg(&socket)
            .args(["--size", "20MiB", "--hold", "200ms"])
            .output()
            .unwrap();
        let _ = d.kill();
        let _ = d.wait();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
}

/// `bench sweep`: the test daemon started by memmon for 1 and 2 workers, 2 clients in flight.
fn sweep_bench() -> &'static String {
    static R: OnceLock<String> = OnceLock::new();
    R.get_or_init(|| {
        let dir = scratch().join("sweep");
        std::fs::create_dir_all(&dir).unwrap();
        let socket = format!("{}/d{{workers}}.sock", dir.display());
        let daemon = format!(
            "exec {} test-daemon --socket {socket} --workers {{workers}}",
            memmon_test_path().display()
        );
        let out = memmon()
            .args([
                "bench",
                "-q",
                "--daemon",
                &daemon,
                "--ready-socket",
                &socket,
            ])
            .args(["--parameter-list", "workers", "1,2", "--concurrency", "2"])
            .args(["-n", "2", "-i", "100ms", "--"])
            .arg(memmon_test_path())
            .args([
                "test-client",
                "--socket",
                &socket,
                "--size",
                "8MiB",
                "--hold",
                "100ms",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
}

/// `bench cgroup` and `compare`: the prover in a cgroup of its own, benched twice (partitions of
/// 40 then 48 MiB) and compared with a 2% gate. `None` without a memory controller.
struct CgroupBench {
    table: String,
    export: Value,
    compare: String,
    compare_json: Value,
}

fn cgroup_bench() -> Option<&'static CgroupBench> {
    static R: OnceLock<Option<CgroupBench>> = OnceLock::new();
    R.get_or_init(|| {
        let base = crate::cgroup::memory_hierarchy()?;
        let cg = crate::cgroup::TestCgroup::new(&base, "readme");
        let dir = scratch().join("cgroup-prover");
        let p = Prover::start(&dir, Some(&cg.0), PROVER);
        let (base_csv, new_csv) = (dir.join("base.csv"), dir.join("new.csv"));
        let json = dir.join("base.json");
        let table = bench_prover(
            &p,
            &[
                "--cgroup",
                "auto",
                "-o",
                base_csv.to_str().unwrap(),
                "--export-json",
                json.to_str().unwrap(),
            ],
            "40MiB",
        );
        bench_prover(
            &p,
            &["--cgroup", "auto", "-o", new_csv.to_str().unwrap()],
            "48MiB",
        );
        drop(p);
        let compare = memmon()
            .args(["compare", "--max-peak-increase", "2%"])
            .arg(&base_csv)
            .arg(&new_csv)
            .output()
            .unwrap();
        assert_eq!(
            compare.status.code(),
            Some(1),
            "a 20% bigger proof passed a 2% gate: {}",
            String::from_utf8_lossy(&compare.stdout)
        );
        let compare_json = memmon()
            .args(["compare", "--json", "--max-peak-increase", "2%"])
            .arg(&base_csv)
            .arg(&new_csv)
            .output()
            .unwrap();
        assert_eq!(compare_json.status.code(), Some(1));
        Some(CgroupBench {
            table,
            export: serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap(),
            compare: String::from_utf8_lossy(&compare.stdout).into_owned(),
            compare_json: serde_json::from_slice(&compare_json.stdout).unwrap(),
        })
    })
    .as_ref()
}

/// Today's output for a block kind; `None` when it cannot be made here (skipped).
fn today(kind: &str) -> Option<String> {
    let needs = match kind {
        "summary attached" | "summary gpu" | "bench window" | "bench sweep" => Needs::Nothing,
        "summary bench-recording" | "bench prover" => Needs::Root,
        _ => Needs::OwnCgroup,
    };
    if !can_run(kind, needs) {
        return None;
    }
    Some(match kind {
        "summary launched" => launched().0.text.clone(),
        "summary attached" => attached().text.clone(),
        "summary tree" => tree().text.clone(),
        "summary phases" => phases().text.clone(),
        "summary append" => append().text.clone(),
        "summary gpu" => gpu().text.clone(),
        "summary bench-recording" => prover_bench().recording.text.clone(),
        "bench prover" => prover_bench().table.clone(),
        "bench cgroup" => cgroup_bench()?.table.clone(),
        "bench window" => window_bench().clone(),
        "bench sweep" => sweep_bench().clone(),
        "compare" => cgroup_bench()?.compare.clone(),
        other => panic!("a document marks a block '{other}', which tests/readme.rs does not know"),
    })
}

fn check_outputs(prefix: &str) {
    let mut bad = Vec::new();
    for b in blocks_of(prefix) {
        if let Some(now) = today(&b.kind) {
            bad.extend(drift(&b, &now));
        }
    }
    assert!(
        bad.is_empty(),
        "the documents drifted:\n{}",
        bad.join("\n\n")
    );
}

#[test]
fn readmes_summaries_show_todays_lines_in_todays_order_and_todays_tables() {
    check_outputs("summary");
}

#[test]
fn readmes_bench_tables_and_comparison_have_todays_columns() {
    check_outputs("bench");
    check_outputs("compare");
}

#[test]
fn readmes_csv_header_is_todays_column_list() {
    let out = scratch().join("header.csv");
    record_workload(&out, &["-q", "-i", "100ms"], &["hold:200ms"])
        .assert()
        .success();
    let header = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    for b in blocks_of("csv-header") {
        assert_eq!(
            b.text.lines().next().unwrap_or(""),
            header,
            "{} line {}: the CSV header is not today's",
            b.file,
            b.line
        );
    }
}

/// A message with its numbers as `N`, v2's peak file named as v1's (the documents' was made on v1),
/// and a process's kernel mark named one way: wait4's ru_maxrss and the exit record's VmHWM are
/// the same number, and which one the end record gives first depends on whether a row saw the
/// top (a tie goes to ru_maxrss), which a busy machine decides.
fn message_shape(s: &str) -> String {
    digits_as_n(
        &s.replace("memory.peak", "memory.max_usage_in_bytes")
            .replace(
                "wait4 ru_maxrss of the process",
                "kernel VmHWM of the process",
            ),
    )
}

#[test]
fn readmes_budget_message_is_todays() {
    if !can_run("stderr budget", Needs::OwnCgroup) {
        return;
    }
    let now: Vec<String> = launched()
        .1
        .lines()
        .filter(|l| l.starts_with("memmon: budget exceeded"))
        .map(message_shape)
        .collect();
    for b in blocks_of("stderr budget") {
        let ours: Vec<String> = b
            .text
            .lines()
            .filter(|l| l.starts_with("memmon: budget exceeded"))
            .map(message_shape)
            .collect();
        assert!(
            !ours.is_empty(),
            "{} line {}: no budget message",
            b.file,
            b.line
        );
        assert_eq!(
            ours, now,
            "{} line {}: not today's budget message",
            b.file, b.line
        );
    }
}

// ---------------------------------------------------------------------------------------------
// JSON keys.

/// The keys a checked paragraph names, each as its path: `[peak, bytes]` for `bytes` inside the
/// parentheses after `peak`.
fn key_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // The parent of each open parenthesis; the path the current key is under.
    let mut stack: Vec<Vec<String>> = vec![Vec::new()];
    let mut last_key: Option<Vec<String>> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                let key: String = chars.by_ref().take_while(|&c| c != '`').collect();
                if !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                {
                    let mut path = stack.last().unwrap().clone();
                    path.push(key);
                    out.push(path.clone());
                    last_key = Some(path);
                } else {
                    last_key = None;
                }
            }
            '(' => {
                let parent = last_key
                    .take()
                    .unwrap_or_else(|| stack.last().unwrap().clone());
                stack.push(parent);
            }
            ')' => {
                if stack.len() > 1 {
                    stack.pop();
                }
                last_key = None;
            }
            c if c.is_whitespace() => {}
            _ => last_key = None,
        }
    }
    out
}

/// The values at `path` below each root (a list stands for its elements).
fn values_at<'a>(roots: &[&'a Value], path: &[String]) -> Vec<&'a Value> {
    let mut cur: Vec<&Value> = Vec::new();
    for r in roots {
        match r {
            Value::Array(a) => cur.extend(a.iter()),
            v => cur.push(v),
        }
    }
    for step in path {
        let mut next = Vec::new();
        for v in cur {
            match v.get(step) {
                Some(Value::Array(a)) => next.extend(a.iter()),
                Some(x) => next.push(x),
                None => {}
            }
        }
        cur = next;
    }
    cur
}

fn json_drift(kind: &str, roots: &[&Value]) -> Vec<String> {
    let mut bad = Vec::new();
    for b in blocks_of(kind) {
        let paths = key_paths(&b.text);
        assert!(
            !paths.is_empty(),
            "{} line {}: names no key",
            b.file,
            b.line
        );
        for p in paths {
            let (key, parent) = p.split_last().unwrap();
            let has = values_at(roots, parent)
                .iter()
                .any(|v| v.as_object().is_some_and(|o| o.contains_key(key)));
            if !has {
                bad.push(format!(
                    "{} line {} ({kind}): `{}` is not in today's JSON{}",
                    b.file,
                    b.line,
                    key,
                    if parent.is_empty() {
                        String::new()
                    } else {
                        format!(" under `{}`", parent.join("."))
                    }
                ));
            }
        }
    }
    bad
}

#[test]
fn every_json_key_readme_names_is_in_todays_json_where_readme_says() {
    if !can_run("json", Needs::OwnCgroup) {
        return;
    }
    let prover = prover_bench();
    let summaries: Vec<&Value> = [
        &launched().0,
        attached(),
        tree(),
        phases(),
        append(),
        gpu(),
        &prover.recording,
    ]
    .iter()
    .flat_map(|r| r.json.iter())
    .collect();
    let mut bad = json_drift("json summary", &summaries);
    let mut exports = vec![&prover.export];
    let cg = cgroup_bench();
    if let Some(c) = cg {
        exports.push(&c.export);
    }
    bad.extend(json_drift("json bench", &exports));
    match cg {
        Some(c) => bad.extend(json_drift("json compare", &[&c.compare_json])),
        None => skip(Need::MemoryCgroup, "json compare: no memory cgroup here"),
    }
    assert!(bad.is_empty(), "the documents drifted:\n{}", bad.join("\n"));
}

#[test]
fn every_pushed_metric_readme_names_is_in_a_real_push() {
    if !can_run("push-metrics", Needs::Root) {
        return;
    }
    let pushed = &prover_bench().pushed;
    let metrics: BTreeSet<&str> = pushed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap())
        .collect();
    let mut bad = Vec::new();
    for b in blocks_of("push-metrics") {
        for name in b.text.split('`').skip(1).step_by(2) {
            if name.starts_with("memmon_") {
                if !metrics.contains(name) {
                    bad.push(format!(
                        "{} line {}: metric {name} was not pushed (pushed: {metrics:?})",
                        b.file, b.line
                    ));
                }
            } else if name.contains('_')
                && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                && !pushed.contains(&format!("{name}=\""))
            {
                bad.push(format!(
                    "{} line {}: no pushed metric has the label {name}",
                    b.file, b.line
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}\n{pushed}", bad.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Exit codes and flags.

#[test]
fn readmes_exit_codes_are_those_of_src_commands_exit_rs() {
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands/exit.rs"))
            .unwrap();
    let body = &src[src
        .find("pub fn code(self)")
        .expect("ExitCode::code in src/commands/exit.rs")..];
    let body = &body[..body.find("\n    }\n").unwrap()];
    let ours_of = |expr: &str| match expr {
        "128 + sig" => "128+N".to_string(),
        "c" => "the command's".to_string(),
        n => n.to_string(),
    };
    let now: BTreeSet<String> = body
        .lines()
        .filter_map(|l| l.split_once("=>"))
        .map(|(_, e)| ours_of(e.trim().trim_end_matches(',')))
        .collect();
    assert!(now.len() >= 5, "cannot read src/exit.rs: {now:?}");
    for b in blocks_of("exit-codes") {
        let ours: BTreeSet<String> = b
            .text
            .lines()
            .skip(2)
            .filter_map(|l| l.split('|').nth(1))
            .map(|c| c.trim().to_string())
            .collect();
        assert_eq!(ours, now, "{} line {}: exit codes", b.file, b.line);
    }
}

/// Flags of other programs the documents mention.
const OTHER_PROGRAMS_FLAGS: &[&str] = &[
    "--multiprocess",     // mprof run
    "--include-children", // mprof run
    "--log",              // psrecord
    "--log-format",       // psrecord
    "--scope",            // systemd-run
    "--features",         // cargo
    "--path",             // cargo install
    "--release",          // cargo run
];

const SUBCOMMANDS: &[&str] = &[
    "record",
    "summary",
    "demo",
    "compare",
    "report",
    "plot",
    "mark",
    "bench",
    "export",
    "completions",
    "man",
];
const TEST_SUBCOMMANDS: &[&str] = &["workload", "test-daemon", "test-client"];

/// The flags `--help` lists, long and short.
fn help_flags(program: &Path, sub: &str) -> BTreeSet<String> {
    let o = Command::new(program)
        .args([sub, "--help"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{} {sub} --help failed",
        program.display()
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut out = BTreeSet::new();
    for l in text.lines() {
        let t = l.trim_start();
        if !t.starts_with('-') {
            continue;
        }
        for word in t.split([' ', ',']) {
            let word = word.split(['=', '[', '<']).next().unwrap();
            if word.starts_with('-') && word.len() > 1 && word != "--" {
                out.insert(word.to_string());
            }
        }
    }
    out
}

/// Shell-like words of a command line: quotes kept together, `#` comments dropped, `|`, `;`,
/// `&&` and `&` ending a command.
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut cmds = vec![Vec::new()];
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let end_word = |word: &mut String, in_word: &mut bool, cmds: &mut Vec<Vec<String>>| {
        if *in_word {
            cmds.last_mut().unwrap().push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, '|' | ';' | '&') => {
                end_word(&mut word, &mut in_word, &mut cmds);
                while chars.peek().is_some_and(|&n| n == '&' || n == '|') {
                    chars.next();
                }
                cmds.push(Vec::new());
            }
            (None, c) if c.is_whitespace() => end_word(&mut word, &mut in_word, &mut cmds),
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut cmds);
    cmds.into_iter().filter(|c| !c.is_empty()).collect()
}

/// A document's text outside its fenced blocks, joined, with the line each offset of it is on.
struct Prose {
    text: String,
    /// Each prose line's offset in `text`, and its line in the document.
    starts: Vec<(usize, usize)>,
}

impl Prose {
    fn of(doc: &str) -> Prose {
        let mut p = Prose {
            text: String::new(),
            starts: Vec::new(),
        };
        let mut fenced = false;
        for (i, l) in doc.lines().enumerate() {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
            } else if !fenced {
                p.starts.push((p.text.len(), i + 1));
                p.text.push_str(l);
                p.text.push('\n');
            }
        }
        p
    }

    /// The document's line of an offset into `text`.
    fn line_at(&self, offset: usize) -> usize {
        let k = self.starts.partition_point(|&(s, _)| s <= offset);
        k.checked_sub(1).map_or(0, |k| self.starts[k].1)
    }

    /// The text cut at backquotes: each piece with its offset and whether it is inline code (an
    /// odd piece). Inline code may wrap across lines.
    fn pieces(&self) -> Vec<(usize, &str, bool)> {
        let mut out = Vec::new();
        let mut offset = 0;
        for (k, part) in self.text.split('`').enumerate() {
            out.push((offset, part, k % 2 == 1));
            offset += part.len() + 1;
        }
        out
    }
}

/// A text with the line of the document it is on.
type Numbered = (usize, String);

/// A document's command lines, each with its line: `sh` blocks' lines (joined at a trailing
/// `\`), `$ ` lines of other blocks, and inline code that starts with `memmon`, `memmon-test` or a
/// subcommand and a flag; and the prose left around them, a line at a time.
fn doc_commands(doc: &str) -> (Vec<Numbered>, Vec<Numbered>) {
    let mut cmds = Vec::new();
    let mut fence: Option<String> = None;
    let mut pending = String::new();
    for (i, l) in doc.lines().enumerate() {
        let t = l.trim_start();
        if let Some(lang) = t.strip_prefix("```") {
            fence = match fence {
                None => Some(lang.to_string()),
                Some(_) => None,
            };
            continue;
        }
        match fence.as_deref() {
            Some("sh") => {
                pending.push_str(t.trim_end_matches('\\'));
                pending.push(' ');
                if !t.ends_with('\\') {
                    cmds.push((i + 1, std::mem::take(&mut pending)));
                }
            }
            Some(_) => {
                if let Some(c) = t.strip_prefix("$ ") {
                    cmds.push((i + 1, c.to_string()));
                }
            }
            None => {}
        }
    }
    let prose = Prose::of(doc);
    let mut rest = Vec::new();
    for (offset, part, code) in prose.pieces() {
        if code {
            let words: Vec<&str> = part.split_whitespace().collect();
            let is_cmd = match words.as_slice() {
                [p, ..] if *p == "memmon" || *p == "memmon-test" || *p == "sudo" => true,
                [s, f, ..] => SUBCOMMANDS.contains(s) && f.starts_with('-'),
                _ => false,
            };
            if is_cmd {
                cmds.push((prose.line_at(offset), words.join(" ")));
                continue;
            }
        }
        let mut at = offset;
        for piece in part.split('\n') {
            rest.push((prose.line_at(at), piece.to_string()));
            at += piece.len() + 1;
        }
    }
    (cmds, rest)
}

/// A command's words from the program on: `sudo` and `VAR=value` before it left out.
fn program_and_args(words: &[String]) -> &[String] {
    let mut w = words;
    while w.first().is_some_and(|x| x == "sudo" || x.contains('=')) {
        w = &w[1..];
    }
    w
}

#[test]
fn every_flag_a_document_gives_memmon_is_in_the_subcommands_help() {
    let helps: Vec<(String, BTreeSet<String>)> = SUBCOMMANDS
        .iter()
        .map(|s| (s.to_string(), help_flags(&memmon_path(), s)))
        .collect();
    let test_helps: Vec<(String, BTreeSet<String>)> = TEST_SUBCOMMANDS
        .iter()
        .map(|s| (s.to_string(), help_flags(&memmon_test_path(), s)))
        .collect();
    // Flags named in prose: some subcommand's, or another program's.
    let all: BTreeSet<&String> = helps
        .iter()
        .chain(&test_helps)
        .flat_map(|(_, f)| f.iter())
        .collect();
    let mut bad = Vec::new();
    let mut checked = 0;
    for (file, doc) in doc_files() {
        let (cmds, prose) = doc_commands(&doc);
        for (line, text) in &cmds {
            for words in commands(text) {
                let (sub, flags) = match program_and_args(&words) {
                    [prog, sub, rest @ ..] if prog == "memmon" => {
                        (helps.iter().find(|(s, _)| s == sub), rest)
                    }
                    [prog, sub, rest @ ..] if prog == "memmon-test" => {
                        (test_helps.iter().find(|(s, _)| s == sub), rest)
                    }
                    [sub, rest @ ..] if SUBCOMMANDS.contains(&sub.as_str()) => {
                        (helps.iter().find(|(s, _)| s == sub), rest)
                    }
                    _ => continue,
                };
                let Some((name, known)) = sub else {
                    bad.push(format!("{file} line {line}: `{text}` names no subcommand"));
                    continue;
                };
                for f in flags.iter().take_while(|f| *f != "--") {
                    let f = f.split('=').next().unwrap();
                    if f.starts_with('-') && f.len() > 1 {
                        checked += 1;
                        if !known.contains(f) {
                            bad.push(format!(
                                "{file} line {line}: `{text}`: {name} has no {f} (its --help)"
                            ));
                        }
                    }
                }
            }
        }
        for (line, text) in &prose {
            for w in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
                if let Some(name) = w.strip_prefix("--") {
                    // `--export-*` stands for the flags it begins.
                    let known = match w.strip_suffix('-') {
                        Some(prefix) => all.iter().any(|f| f.starts_with(prefix)),
                        None => all.contains(&w.to_string()),
                    };
                    if name.starts_with(|c: char| c.is_ascii_lowercase())
                        && !known
                        && !OTHER_PROGRAMS_FLAGS.contains(&w)
                    {
                        bad.push(format!(
                            "{file} line {line}: names {w}, which no memmon subcommand has"
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} flags found in the documents' commands"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Links, and where to get memmon-test.

/// GitHub's anchor of a heading: lowercase, punctuation dropped (letters, digits, `-` and `_`
/// kept), each space a `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors a document's headings give (outside fenced blocks); a repeated one as GitHub
/// numbers it (`-1`, `-2`, ...).
fn anchors(doc: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for l in doc.lines() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = l.len() - l.trim_start_matches('#').len();
        if fenced || !(1..=6).contains(&hashes) || !l[hashes..].starts_with(' ') {
            continue;
        }
        let a = anchor(l[hashes..].trim().trim_end_matches('#'));
        let mut name = a.clone();
        let mut n = 0;
        while out.contains(&name) {
            n += 1;
            name = format!("{a}-{n}");
        }
        out.insert(name);
    }
    out
}

/// A document's Markdown links and images outside code, each with its line and target
/// (`](target)`; a title after the target left out).
fn links(doc: &str) -> Vec<(usize, String)> {
    let prose = Prose::of(doc);
    let mut out = Vec::new();
    for (offset, part, code) in prose.pieces() {
        if code {
            continue;
        }
        let mut from = 0;
        while let Some(k) = part[from..].find("](") {
            let start = from + k + 2;
            let Some(len) = part[start..].find(')') else {
                break;
            };
            let target = part[start..start + len]
                .split_whitespace()
                .next()
                .unwrap_or("");
            out.push((prose.line_at(offset + start), target.to_string()));
            from = start + len;
        }
    }
    out
}

/// `a/b/../c` as `a/c`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                assert!(out.pop(), "{} leaves the repository", path.display());
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_documents_points_to_a_file_and_heading_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut bad = Vec::new();
    let mut checked = 0;
    for (file, doc) in doc_files() {
        for (line, target) in links(&doc) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                PathBuf::from(&file)
            } else {
                normalize(&Path::new(&file).parent().unwrap().join(path))
            };
            if !root.join(&resolved).exists() {
                bad.push(format!(
                    "{file} line {line}: ({target}): {} does not exist",
                    resolved.display()
                ));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if resolved.extension().is_none_or(|e| e != "md") {
                bad.push(format!(
                    "{file} line {line}: ({target}): an anchor into a file that is not Markdown"
                ));
                continue;
            }
            let text = std::fs::read_to_string(root.join(&resolved)).unwrap();
            if !anchors(&text).contains(fragment) {
                bad.push(format!(
                    "{file} line {line}: ({target}): no heading of {} gives #{fragment}",
                    resolved.display()
                ));
            }
        }
    }
    assert!(checked > 20, "only {checked} relative links found");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The one place that says how to get `memmon-test`: README's section of this anchor.
const MEMMON_TEST_ANCHOR: &str = "memmon-test-the-tests-helper";
const MEMMON_TEST_BUILD: &str = "cargo build --release --features test-support";

/// A document whose commands run `memmon-test` (it is not installed with memmon) says how to
/// build it, or links to README's section that does.
#[test]
fn a_document_that_runs_memmon_test_says_how_to_build_it_or_links_there() {
    let docs = doc_files();
    let readme = &docs[0].1;
    let section = readme
        .split("\n### ")
        .find(|s| anchor(s.lines().next().unwrap_or("")) == MEMMON_TEST_ANCHOR)
        .unwrap_or_else(|| panic!("README.md has no heading that gives #{MEMMON_TEST_ANCHOR}"));
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat(section).contains(MEMMON_TEST_BUILD),
        "README.md's #{MEMMON_TEST_ANCHOR} does not say `{MEMMON_TEST_BUILD}`"
    );
    let mut bad = Vec::new();
    let mut runs = 0;
    for (file, doc) in &docs {
        let (cmds, _) = doc_commands(doc);
        let first = cmds.iter().find(|(_, text)| {
            commands(text)
                .iter()
                .any(|w| w.iter().any(|x| x == "memmon-test"))
        });
        let Some((line, text)) = first else { continue };
        runs += 1;
        let links_there = links(doc).iter().any(|(_, t)| {
            t.ends_with(&format!("README.md#{MEMMON_TEST_ANCHOR}"))
                || *file == "README.md" && t == &format!("#{MEMMON_TEST_ANCHOR}")
        });
        if !links_there && !flat(doc).contains(MEMMON_TEST_BUILD) {
            bad.push(format!(
                "{file} line {line}: `{text}` runs memmon-test, and the file neither says `{MEMMON_TEST_BUILD}` nor links to README.md#{MEMMON_TEST_ANCHOR}"
            ));
        }
    }
    assert!(runs >= 2, "only {runs} documents run memmon-test");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_block_parser_reads_labels_tables_and_keys_as_readme_writes_them() {
    // The rules the documents' checks rest on, on lines of today's outputs.
    assert_eq!(
        label("  sampled peak  1.00 MiB (1048576 bytes)").as_deref(),
        Some("sampled peak")
    );
    assert_eq!(
        label("  lifetime peak 842.4 MiB").as_deref(),
        Some("lifetime peak")
    );
    assert_eq!(
        label("  GPU kernel peak 20.00 GiB (1 bytes)").as_deref(),
        Some("GPU kernel peak")
    );
    assert_eq!(
        label("  phases by label (complete phases").as_deref(),
        Some("phases by label")
    );
    assert_eq!(
        label("  processes: the 5 largest").as_deref(),
        Some("processes")
    );
    assert_eq!(
        label("  kernel peak   ≥ 3.08 MiB").as_deref(),
        Some("kernel peak")
    );
    assert_eq!(label("    label  start"), None);
    assert_eq!(label("  warning: the sampled peak"), None);
    assert_eq!(
        cells("  metric      baseline (mean of 3)         baseline range"),
        ["metric", "baseline (mean of N)", "baseline range"]
    );
    assert_eq!(
        key_paths("`peak` (`bytes`, `tree_low_bytes`), the facts (`departed`), `runs` (the same, and `run`)"),
        [
            vec!["peak".to_string()],
            vec!["peak".into(), "bytes".into()],
            vec!["peak".into(), "tree_low_bytes".into()],
            vec!["departed".into()],
            vec!["runs".into()],
            vec!["runs".into(), "run".into()],
        ]
    );
    assert_eq!(
        commands("memmon bench -n 3 --warmup 1 -- client 'a b' # note | x"),
        [vec![
            "memmon", "bench", "-n", "3", "--warmup", "1", "--", "client", "a b"
        ]]
    );
    assert_eq!(
        anchor("What the peak is made of: `--anatomy`"),
        "what-the-peak-is-made-of---anatomy"
    );
    assert_eq!(
        anchor("A tree's exact peak: a cgroup of its own"),
        "a-trees-exact-peak-a-cgroup-of-its-own"
    );
    assert_eq!(
        anchors("# T\n\n```sh\n# not a heading\n```\n## T\n"),
        BTreeSet::from(["t".to_string(), "t-1".to_string()])
    );
    assert_eq!(
        links("a [b](c.md#d), `[e](f)`\n```\n[g](h)\n```\n![i](../j.svg \"t\")"),
        [(1, "c.md#d".to_string()), (5, "../j.svg".to_string())]
    );
    assert_eq!(
        doc_commands("x `memmon record\n--pss` y\n--wait z").0,
        [(1, "memmon record --pss".to_string())]
    );
    assert!(is_subsequence(
        &["peak".to_string(), "cgroup".into()],
        &[
            "target".to_string(),
            "peak".into(),
            "sampled peak".into(),
            "cgroup".into()
        ]
    ));
}
