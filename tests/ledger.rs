//! The ledger of mappings (`--anatomy` where perf may be used): the code that made each live
//! mapping, unwound without frame pointers, against programs whose allocation sites are known:
//! tests/known-sites.c (C, -O2 -fomit-frame-pointer: a prover-shaped daemon whose worker
//! threads map partitions, with locked parameters and a helper process), launched and attached,
//! and the Rust workload (`vecs:`, `partitions:`). Without the privilege the recording says so
//! and goes on without it.

use crate::util::*;
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// tests/known-sites.c built into `dir` as C is released: -O2, no frame pointers.
fn build_known_sites(dir: &Path) -> PathBuf {
    build_c_program("known-sites", dir, &["-pthread"])
}

/// The lines a child prints, as they come.
fn lines_of(out: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for the line `want` (the program's next step), at most a minute.
fn expect_line(rx: &mpsc::Receiver<String>, want: &str) {
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l == want => return,
            Ok(_) => {}
            Err(e) => panic!("no line '{want}': {e}"),
        }
    }
}

fn anatomies(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(crate::anatomy::side(out))
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

/// The ledger's group whose allocating code includes the function `f`.
fn stack_with<'a>(ledger: &'a Value, f: &str) -> &'a Value {
    ledger["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .any(|fr| fr["function"].as_str().is_some_and(|n| n.ends_with(f)))
        })
        .unwrap_or_else(|| panic!("no stack through {f} in {ledger:#}"))
}

fn functions(stack: &Value) -> Vec<String> {
    stack["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap().to_string())
        .collect()
}

/// `memmon mark LABEL` on the recorder's socket: returns once its row, and the anatomy of the
/// phase it ends, are read.
fn mark(socket: &Path, label: &str) {
    memmon()
        .args(["mark", "--socket"])
        .arg(socket)
        .arg(label)
        .assert()
        .success();
}

/// Steps known-sites through its phases under a recording: marker `a` before it maps, marker
/// `b` once all is mapped (answered after phase a's end anatomy, read with everything alive),
/// then lets it free and end. `rx` has the program's lines.
fn drive(rx: &mpsc::Receiver<String>, prefix: &Path, socket: &Path) {
    let go = |n: u32| std::fs::write(format!("{}.{n}", prefix.display()), "").unwrap();
    assert!(
        wait_for(60.0, || socket.exists()),
        "the recorder's socket never came"
    );
    mark(socket, "a");
    go(0);
    expect_line(rx, "mapped");
    mark(socket, "b");
    go(1);
    expect_line(rx, "freed");
    go(2);
}

/// The ledger at the end of phase `a` of known-sites, with everything mapped: the four
/// partitions one line with the functions that made them, though the kernel merged them into
/// fewer mappings; the locked parameters and the helper's buffer each their own.
fn check_known_sites(out: &Path) {
    let all = anatomies(out);
    let a = all
        .iter()
        .find(|x| x["trigger"] == "phase-end" && x["span"] == "a")
        .expect("phase a's end anatomy");
    let ledger = &a["ledger"];
    let parts = stack_with(ledger, "alloc_partition");
    assert_eq!(
        (
            parts["mappings"].as_u64(),
            parts["bytes"].as_u64(),
            parts["min_mapping_bytes"].as_u64(),
            parts["max_mapping_bytes"].as_u64()
        ),
        (Some(4), Some(96 * MIB), Some(24 * MIB), Some(24 * MIB)),
        "{parts:#}"
    );
    let f = functions(parts);
    let at = f.iter().position(|n| n == "alloc_partition").unwrap();
    assert_eq!(f[at + 1], "synthesize_partition", "{f:?}");
    let params = stack_with(ledger, "load_params");
    assert_eq!(
        (params["mappings"].as_u64(), params["bytes"].as_u64()),
        (Some(1), Some(32 * MIB))
    );
    assert!(functions(params).contains(&"main".to_string()));
    let helper = stack_with(ledger, "helper_buffer");
    assert_eq!(
        (helper["bytes"].as_u64(), helper["processes"].as_u64()),
        (Some(16 * MIB), Some(1))
    );
    // Where maps shows the partitions the kernel merged, the ledger keeps each call. Merged
    // with what: 6.x kernels put them beside one another, Debian's 5.10 (in scripts/vm) beside a
    // thread's stack, whose mapping maps then shows as a thread stack of 32 MiB.
    let anon_24: u64 = a["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| {
            (g["kind"] == "anon" || g["kind"] == "thread-stacks")
                && g["max_mapping_bytes"].as_u64() >= Some(24 * MIB)
        })
        .map(|g| g["virtual_bytes"].as_u64().unwrap())
        .sum();
    assert!(anon_24 >= 96 * MIB, "{a:#}");

    let text = summary_text(out);
    for line in [
        "  by stack      at the highest anatomy, ",
        "alloc_partition <- synthesize_partition via mmap",
        ": 4 mappings of 24.00 MiB (new)",
        "load_params <- main via mmap",
        "helper_buffer <- helper_main <- main via mmap",
        "                by stack (the ledger's mappings, resident bytes where smaps was read at both ends, else mapped):",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
}

/// Where the ledger is off (no privilege), says so and returns true: the test is skipped.
fn ledger_off(out: &Path) -> bool {
    match meta(out)["anatomy"]["ledger_off"].as_str() {
        Some(why) => {
            skip(Need::Perf, &format!("the ledger is off: {why}"));
            true
        }
        None => false,
    }
}

#[test]
fn a_launched_c_program_without_frame_pointers_names_each_allocation_site() {
    let dir = tempdir();
    let exe = build_known_sites(dir.path());
    let out = dir.path().join("launched.csv");
    let socket = dir.path().join("rec.sock");
    let prefix = dir.path().join("go");
    let mut rec = std::process::Command::new(memmon_path())
        .args(["record", "-q", "-i", "50ms", "--anatomy", "--socket"])
        .arg(&socket)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .arg(&prefix)
        .args(["4", "24"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(rec.stdout.take().unwrap());
    expect_line(&rx, "ready");
    drive(&rx, &prefix, &socket);
    assert!(rec.wait().unwrap().success());
    if ledger_off(&out) {
        return;
    }
    let how = meta(&out)["anatomy"]["ledger"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        how.contains("mmap, munmap, mremap of at least 1.00 MiB"),
        "{how}"
    );
    check_known_sites(&out);

    // The folded stacks of the highest anatomy, and its flame graph in the report.
    let folded = memmon()
        .args(["summary", "--folded", "-"])
        .arg(&out)
        .output()
        .unwrap();
    let folded = String::from_utf8(folded.stdout).unwrap();
    // Only the stacks on stdout: each line a stack and its bytes.
    assert!(
        folded.lines().all(|l| l
            .rsplit_once(' ')
            .is_some_and(|(_, n)| n.parse::<u64>().is_ok())),
        "{folded}"
    );
    let line = folded
        .lines()
        .find(|l| l.contains(";synthesize_partition;alloc_partition"))
        .unwrap_or_else(|| panic!("{folded}"));
    assert!(line.ends_with(&format!(" {}", 96 * MIB)), "{line}");
    let file = dir.path().join("peak.folded");
    memmon()
        .args(["summary", "--folded"])
        .arg(&file)
        .arg(&out)
        .assert()
        .success();
    assert!(std::fs::read_to_string(&file).unwrap().contains(line));
    memmon()
        .args(["summary", "--folded"])
        .arg(&file)
        .arg(&out)
        .assert()
        .code(predicates::ord::ne(0))
        .stderr(predicates::str::contains("peak.folded"));
    let html = dir.path().join("r.html");
    let html = report_html(&out, &html);
    assert!(
        html.contains("the live mappings by the code that made them"),
        "no table"
    );
    let svg = report_flame_graph(&html);
    assert!(svg.contains("alloc_partition") && svg.contains("load_params"));
}

#[test]
fn an_attached_c_daemon_is_followed_into_the_helper_it_forks() {
    let dir = tempdir();
    let exe = build_known_sites(dir.path());
    let prefix = dir.path().join("go");
    let mut daemon = std::process::Command::new(&exe)
        .arg(&prefix)
        .args(["4", "24"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(daemon.stdout.take().unwrap());
    expect_line(&rx, "ready");
    let out = dir.path().join("attached.csv");
    let socket = dir.path().join("rec.sock");
    let pid = daemon.id().to_string();
    let mut rec = std::process::Command::new(memmon_path())
        .args([
            "record",
            "-q",
            "--pid",
            &pid,
            "-i",
            "50ms",
            "--anatomy",
            "--socket",
        ])
        .arg(&socket)
        .arg("-o")
        .arg(&out)
        .spawn()
        .unwrap();
    drive(&rx, &prefix, &socket);
    assert!(daemon.wait().unwrap().success());
    assert!(rec.wait().unwrap().success());
    if ledger_off(&out) {
        return;
    }
    check_known_sites(&out);
}

/// The Rust workload (a debug build: no frame pointers asked for): its vectors from the global
/// allocator, named by the function that made them past malloc and Rust's `alloc`, and its
/// partitions mapped through rustix, each their own line.
#[test]
fn a_rust_workloads_vectors_and_partitions_are_named_past_the_allocator() {
    let dir = tempdir();
    let out = dir.path().join("rust.csv");
    record_workload(
        &out,
        &["-q", "-i", "50ms", "--anatomy"],
        &[
            "mark:a",
            "partitions:2:24MiB",
            "vecs:3:8MiB",
            "mark:b",
            "free-all",
            "hold:100ms",
        ],
    )
    .assert()
    .success();
    if ledger_off(&out) {
        return;
    }
    let all = anatomies(&out);
    let a = all
        .iter()
        .find(|x| x["trigger"] == "phase-end" && x["span"] == "a")
        .expect("phase a's end anatomy");
    let vecs = stack_with(&a["ledger"], "alloc_vec_partition");
    // malloc's mapped chunk: the 8 MiB asked, its header, rounded up to a page.
    let each = vecs["max_mapping_bytes"].as_u64().unwrap();
    assert_eq!(vecs["mappings"], 3, "{vecs:#}");
    assert!((8 * MIB + 1..=8 * MIB + 8192).contains(&each), "{vecs:#}");
    assert!(functions(vecs)
        .iter()
        .any(|f| f.ends_with("vec_partitions")));
    // Block::apart_touched maps a page more on each side and unmaps them: calls under the
    // ledger's threshold it does not see, so each partition is up to 8 KiB larger in it (less
    // where a later mapping the ledger saw was placed over such a page).
    let parts = stack_with(&a["ledger"], "Block::apart_touched");
    assert_eq!(parts["mappings"], 2, "{parts:#}");
    for k in ["min_mapping_bytes", "max_mapping_bytes"] {
        let b = parts[k].as_u64().unwrap();
        assert!((24 * MIB..=24 * MIB + 8192).contains(&b), "{parts:#}");
    }
    let text = summary_text(&out);
    assert!(
        text.contains("memmon::workload::alloc_vec_partition <- memmon::workload::vec_partitions"),
        "{text}"
    );
    assert!(text.contains(": 3 mappings of 8.00 MiB (new)"), "{text}");
}

/// The credit of the touch table at an anatomy to the stacks through function `f`: bytes and
/// samples.
fn touched_by(ledger: &Value, f: &str) -> (u64, u64) {
    ledger["touch"]["stacks"]
        .as_array()
        .unwrap_or_else(|| panic!("no touch in {ledger:#}"))
        .iter()
        .filter(|s| {
            s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .any(|fr| fr["function"].as_str() == Some(f))
        })
        .fold((0, 0), |(b, n), s| {
            (
                b + s["resident_bytes"].as_u64().unwrap(),
                n + s["samples"].as_u64().unwrap(),
            )
        })
}

/// memmon recording a test's C program (`exe ARGS`) into `out`, a row every `interval`, with
/// anatomies and one page fault in `every` (up to a prime) sampled, markers taken on `socket`;
/// and the lines the program prints, as they come.
fn record_c_program(
    exe: &Path,
    args: &[&std::ffi::OsStr],
    out: &Path,
    socket: &Path,
    interval: &str,
    every: &str,
) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut rec = std::process::Command::new(memmon_path())
        .args([
            "record",
            "-q",
            "-i",
            interval,
            "--anatomy",
            "--touch-every",
            every,
        ])
        .arg("--socket")
        .arg(socket)
        .arg("-o")
        .arg(out)
        .arg("--")
        .arg(exe)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(rec.stdout.take().unwrap());
    (rec, rx)
}

/// Marks phase `held` and its end (`done`) in the recording on `socket`, waits until the
/// phase's end anatomy is in `out`'s table (everything written and held), then lets the program
/// free it all and exit (the file `PREFIX.0`).
fn hold_then_release(out: &Path, socket: &Path, prefix: &Path) {
    mark(socket, "held");
    mark(socket, "done");
    let held_read = || {
        std::fs::read_to_string(crate::anatomy::side(out)).is_ok_and(|t| {
            t.lines()
                .any(|l| l.contains("\"phase-end\"") && l.contains("\"span\":\"held\""))
        })
    };
    assert!(
        wait_for(60.0, held_read),
        "phase held's end anatomy never came"
    );
    std::fs::write(format!("{}.0", prefix.display()), "").unwrap();
}

/// The anatomy read at the end of phase `held` (`hold_then_release`).
fn held_anatomy(out: &Path) -> Value {
    anatomies(out)
        .into_iter()
        .find(|x| x["trigger"] == "phase-end" && x["span"] == "held")
        .expect("the phase's end anatomy")
}

/// Records the test's C program `name` (tests/NAME.c, as `NAME PREFIX ARGS...`) as
/// `record_c_program` does, waits for its line `line` (everything written), holds it through
/// phase `held` (`hold_then_release`), and returns the recording and the anatomy read at that
/// phase's end; `None` where the ledger is off.
fn held_c_program(
    dir: &Path,
    name: &str,
    args: &[&std::ffi::OsStr],
    interval: &str,
    every: &str,
    line: &str,
) -> Option<(PathBuf, Value)> {
    let exe = build_c_program(name, dir, &[]);
    let prefix = dir.join("go");
    let out = dir.join(format!("{name}.csv"));
    let socket = dir.join(format!("{name}.sock"));
    let all: Vec<&std::ffi::OsStr> = std::iter::once(prefix.as_os_str())
        .chain(args.iter().copied())
        .collect();
    let (mut rec, rx) = record_c_program(&exe, &all, &out, &socket, interval, every);
    expect_line(&rx, line);
    hold_then_release(&out, &socket, &prefix);
    assert!(rec.wait().unwrap().success());
    if ledger_off(&out) {
        return None;
    }
    let a = held_anatomy(&out);
    Some((out, a))
}

/// Each anatomy's sampled faults (applied so far, present in its stacks, found gone, given up
/// to a rewrite) and the ledger's end record: where samples went, for a failure's message.
fn touch_history(out: &Path) -> String {
    let mut said: Vec<String> =
        anatomies(out)
            .iter()
            .filter_map(|x| {
                let t = &x["ledger"]["touch"];
                let present: u64 = t["stacks"]
                    .as_array()?
                    .iter()
                    .filter_map(|s| s["samples"].as_u64())
                    .sum();
                Some(format!(
                "{} {:?} at {:.1} s: applied {}, present {present}, gone {}, rewritten {}, huge {}",
                x["trigger"], x["span"], x["elapsed_s"].as_f64().unwrap_or(0.0), t["samples"],
                t["samples_gone"], t["samples_rewritten"], t["huge_samples"]
            ))
            })
            .collect();
    said.push(format!("ledger end: {}", meta(out)["end"]["ledger"]));
    said.join("\n")
}

/// Records tests/touch-sites.c (64 MiB from fill_heap, 48 MiB from fill_arena, a 64 KiB block
/// every 2 ms at most: a pace an emulated machine's recorder keeps up with, its rings never
/// full) with sampled page faults (one in 64), its allocator `preload`ed where given, and
/// returns the recording and the anatomy read at the end of phase `held`, everything written
/// and held; `None` where the ledger is off.
fn touch_sites_held(dir: &Path, exe: &Path, preload: Option<&Path>) -> Option<(PathBuf, Value)> {
    let tag = preload
        .and_then(|p| p.file_name())
        .map_or("glibc".into(), |n| n.to_string_lossy().into_owned());
    let out = dir.join(format!("touch-{tag}.csv"));
    let socket = dir.join(format!("{tag}.sock"));
    let prefix = dir.join(format!("go-{tag}"));
    let mut cmd = std::process::Command::new(memmon_path());
    cmd.args([
        "record",
        "-q",
        "-i",
        "50ms",
        "--anatomy",
        "--touch-every",
        "64",
    ])
    .arg("--socket")
    .arg(&socket)
    .arg("-o")
    .arg(&out)
    .arg("--");
    if let Some(lib) = preload {
        cmd.arg("env").arg(format!("LD_PRELOAD={}", lib.display()));
    }
    let mut rec = cmd
        .arg(exe)
        .arg(&prefix)
        .args(["64", "48", "2000"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(rec.stdout.take().unwrap());
    expect_line(&rx, "filled");
    // Phase `held`'s end anatomy, read at the second marker with everything written and held:
    // the program frees it all once that anatomy is in the table.
    hold_then_release(&out, &socket, &prefix);
    assert!(rec.wait().unwrap().success());
    if ledger_off(&out) {
        return None;
    }
    let a = held_anatomy(&out);
    Some((out, a))
}

#[test]
fn memory_from_the_brk_heap_and_a_glibc_arena_is_credited_to_the_code_that_touched_it() {
    // tests/touch-sites.c: 64 MiB of 64 KiB mallocs from the brk heap (fill_heap), 48 MiB from a
    // worker thread's arena (fill_arena): no mmap call of the program's own makes them, so the
    // mapping ledger sees brk raises and an arena's 64 MiB reservation; the sampled page faults
    // see the code that wrote each page.
    let dir = tempdir();
    let exe = build_c_program("touch-sites", dir.path(), &["-pthread"]);
    let Some((out, a)) = touch_sites_held(dir.path(), &exe, None) else {
        return;
    };
    let l = &a["ledger"];
    let touch = &l["touch"];
    // --touch-every 64, sampled one fault in 67: the next prime.
    assert_eq!(touch["every"], 67, "{touch:#}");
    assert_eq!(
        l["lost"].as_u64().unwrap_or(0),
        0,
        "the rings kept room: {l:#}"
    );
    let (heap, heap_n) = touched_by(l, "fill_heap");
    let (arena, arena_n) = touched_by(l, "fill_arena");
    // Each within 10% of what the anatomy read resident of the heap and of the arena (64 and
    // 48 MiB, less what a guest under memory pressure swapped out; 64 MiB is 256 samples), and
    // together at least 90% of the data mappings' resident bytes.
    let group = |kind: &str| -> u64 {
        a["groups"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["kind"] == kind)
            .map(|g| g["resident"]["rss_bytes"].as_u64().unwrap())
            .sum()
    };
    let (heap_rss, arena_rss) = (group("heap"), group("arenas"));
    assert!(
        heap_rss > 32 * MIB && arena_rss > 24 * MIB,
        "{heap_rss} {arena_rss}"
    );
    let near = |got: u64, want: u64| got.abs_diff(want) * 10 <= want;
    assert!(
        near(heap, heap_rss),
        "heap {heap} ({heap_n} samples) of {heap_rss}\n{touch:#}"
    );
    assert!(
        near(arena, arena_rss),
        "arena {arena} ({arena_n} samples) of {arena_rss}\n{touch:#}"
    );
    let resident = touch["resident_bytes"].as_u64().unwrap();
    assert!(
        (heap + arena) * 10 >= resident * 9,
        "{heap} + {arena} of {resident}"
    );
    // The mapping ledger's stacks weigh what is resident: the arena's reservation of 64 MiB
    // holds its 48 MiB, not 64. glibc maps twice that and unmaps what lies off its 64 MiB
    // alignment; a part under --ledger-min (1 MiB) is unmapped unseen, and the ledger keeps it
    // (472 KiB more in one run on 5.10).
    let reserved = stack_with(l, "fill_arena");
    let r = reserved["resident_bytes"].as_u64().unwrap();
    let bytes = reserved["bytes"].as_u64().unwrap();
    assert!(
        (64 * MIB..65 * MIB).contains(&bytes) && r < 56 * MIB && r > 40 * MIB,
        "{reserved:#}"
    );
    // The summary names both sites, past malloc and memset.
    let text = summary_text(&out);
    assert!(
        text.contains("  by touch      at the highest anatomy, "),
        "{text}"
    );
    assert!(text.contains("fill_blocks <- fill_heap <- main"), "{text}");
    assert!(text.contains("fill_blocks <- fill_arena"), "{text}");
    // The report: the table, and the flame graph of the memory by touch.
    let html = dir.path().join("r.html");
    let html = report_html(&out, &html);
    assert!(html.contains("memory by touch"), "no touch flame graph");
}

/// Attached, as `bench` always is: the page faults sampled are those of the target's threads,
/// each followed with what it starts (its arena's worker thread comes after memmon), not every
/// process's, and credited as for a launched program.
#[test]
fn an_attached_programs_faults_are_sampled_from_its_own_threads_and_credited() {
    let dir = tempdir();
    let exe = build_c_program("touch-sites", dir.path(), &["-pthread", "-DNO_THP"]);
    let prefix = dir.path().join("go");
    let mut prog = std::process::Command::new(&exe)
        .arg(&prefix)
        .args(["64", "48", "2000"])
        .env("TOUCH_SITES_GATE", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(prog.stdout.take().unwrap());
    expect_line(&rx, "ready");
    let out = dir.path().join("attached.csv");
    let socket = dir.path().join("rec.sock");
    let mut rec = std::process::Command::new(memmon_path())
        .args(["record", "-q", "--pid", &prog.id().to_string()])
        .args(["-i", "50ms", "--anatomy", "--touch-every", "64", "--socket"])
        .arg(&socket)
        .arg("-o")
        .arg(&out)
        .spawn()
        .unwrap();
    // The ledger takes the tree's processes before any snapshot: once an anatomy with the
    // ledger's stacks is written, the program's threads are followed.
    let followed = || {
        std::fs::read_to_string(crate::anatomy::side(&out))
            .is_ok_and(|t| t.lines().any(|l| l.contains("\"ledger\"")))
    };
    let ledger_ran = wait_for(60.0, || followed() || rec.try_wait().unwrap().is_some());
    assert!(ledger_ran);
    if !followed() {
        let _ = prog.kill();
        let _ = prog.wait();
        let _ = rec.wait();
        assert!(
            ledger_off(&out),
            "no anatomy with the ledger, and the ledger is not off"
        );
        return;
    }
    std::fs::write(format!("{}.1", prefix.display()), "").unwrap();
    expect_line(&rx, "filled");
    hold_then_release(&out, &socket, &prefix);
    assert!(prog.wait().unwrap().success());
    assert!(rec.wait().unwrap().success());
    let m = meta(&out).to_string();
    assert!(m.contains("of the tree's threads alone"), "{m}");
    let a = held_anatomy(&out);
    let l = &a["ledger"];
    assert_eq!(l["lost"].as_u64().unwrap_or(0), 0, "{l:#}");
    let (heap, heap_n) = touched_by(l, "fill_heap");
    let (arena, arena_n) = touched_by(l, "fill_arena");
    // Written after memmon attached: each site at least 85% of what it wrote (64 and 48 MiB),
    // the worker thread's through the event it inherited from the main thread's.
    assert!(
        heap * 100 >= 64 * MIB * 85 && arena * 100 >= 48 * MIB * 85,
        "heap {heap} ({heap_n} samples), arena {arena} ({arena_n} samples)\n{l:#}"
    );
}

/// Four vectors grown by mremap in turn while the first anatomies are read
/// (tests/grow-vectors.c), as a prover's constraint system grows them. With one fault in 64
/// sampled, every sample fell on the same vector, a multiple of four faults apart (8 or 16 of
/// their 32 MiB unsampled, in 2 runs of 2; now one in 67, a prime); and a snapshot that checked
/// pages in pagemap after a move the ledger had not applied yet forgot their samples. Each
/// site keeps the samples of its own pages wherever they move.
#[test]
fn vectors_that_grow_by_mremap_keep_their_samples_through_every_anatomy() {
    let dir = tempdir();
    let Some((_, a)) = held_c_program(
        dir.path(),
        "grow-vectors",
        &["8".as_ref()],
        "20ms",
        "64",
        "grown",
    ) else {
        return;
    };
    let l = &a["ledger"];
    let (enforce, enforce_n) = touched_by(l, "enforce");
    let (aux, aux_n) = touched_by(l, "alloc_aux");
    // 24 MiB written by enforce, 8 by alloc_aux (one sample for every 256 KiB): each at least
    // 85% of it, and next to nothing unsampled.
    let unsampled = l["touch"]["unsampled_bytes"].as_u64().unwrap();
    assert!(
        enforce * 100 >= 24 * MIB * 85 && aux * 100 >= 8 * MIB * 85 && unsampled < 4 * MIB,
        "enforce {enforce} ({enforce_n} samples), alloc_aux {aux} ({aux_n} samples), unsampled {unsampled}\n{l:#}"
    );
}

/// Memory an allocator hands out again (tests/reuse-sites.c: first_use writes 32 MiB of the brk
/// heap and frees it, glibc keeps it, second_use writes the same memory again, without a new
/// page), as a prover's second proof reuses its first's buffers. Where the kernel keeps
/// soft-dirty bits, the ledger clears them at each span's end, the rewrites fault and are
/// sampled, and the memory at the end of phase `second` is second_use's; where it does not, it
/// stays with first_use, and the anatomy says rewrites were not tracked.
#[test]
fn memory_handed_out_again_is_credited_to_the_code_that_wrote_it_again() {
    let dir = tempdir();
    let exe = build_c_program("reuse-sites", dir.path(), &[]);
    let prefix = dir.path().join("go");
    let out = dir.path().join("reuse.csv");
    let socket = dir.path().join("reuse.sock");
    let (mut rec, rx) = record_c_program(
        &exe,
        &[prefix.as_os_str(), "32".as_ref(), "2000".as_ref()],
        &out,
        &socket,
        "50ms",
        "64",
    );
    let gate = |n: u32| std::fs::write(format!("{}.{n}", prefix.display()), "").unwrap();
    let phase_end_read = |span: &str| {
        let want = format!("\"span\":\"{span}\"");
        wait_for(60.0, || {
            std::fs::read_to_string(crate::anatomy::side(&out)).is_ok_and(|t| {
                t.lines()
                    .any(|l| l.contains("\"phase-end\"") && l.contains(&want))
            })
        })
    };
    // Launched: memmon listens on its socket by now.
    expect_line(&rx, "ready");
    mark(&socket, "first");
    gate(2);
    expect_line(&rx, "first");
    // The end of phase `first`: its anatomy read, the bits cleared after it.
    mark(&socket, "second");
    assert!(
        phase_end_read("first"),
        "phase first's end anatomy never came"
    );
    gate(1);
    expect_line(&rx, "second");
    hold_then_release(&out, &socket, &prefix);
    assert!(rec.wait().unwrap().success());
    if ledger_off(&out) {
        return;
    }
    let a = anatomies(&out)
        .into_iter()
        .find(|x| x["trigger"] == "phase-end" && x["span"] == "second")
        .expect("phase second's end anatomy");
    let l = &a["ledger"];
    assert_eq!(l["lost"].as_u64().unwrap_or(0), 0, "{l:#}");
    let (first, first_n) = touched_by(l, "first_use");
    let (second, second_n) = touched_by(l, "second_use");
    let t = &l["touch"];
    let said = format!(
        "first_use {first} ({first_n} samples), second_use {second} ({second_n} samples)\n{t:#}"
    );
    if memmon::probe::proc::soft_dirty_tracked() {
        // Cleared at the start and at phase first's end (at least), and first_use's samples
        // of the pages written again given up.
        assert!(t["rearms"].as_u64().unwrap_or(0) >= 2, "{said}");
        assert!(t["samples_rewritten"].as_u64().unwrap_or(0) > 0, "{said}");
        assert!(
            second * 100 >= 32 * MIB * 85 && first * 100 <= 32 * MIB * 15,
            "{said}"
        );
        // Written in the span: none of it from before.
        let before: u64 = t["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s.to_string().contains("second_use"))
            .map(|s| s["before_bytes"].as_u64().unwrap_or(0))
            .sum();
        assert!(before * 100 <= second * 15, "{said}");
        let m = meta(&out).to_string();
        assert!(m.contains("\"rearms\""), "{m}");
    } else {
        // No bits to clear: the memory stays with the code that first touched it, and the
        // anatomy does not claim otherwise.
        assert!(t["rearms"].is_null(), "{said}");
        assert!(
            first * 100 >= 32 * MIB * 85 && second * 100 <= 32 * MIB * 15,
            "{said}"
        );
    }
}

/// The faults sampled are writes, where the kernel has x86's fault tracepoints: memory written
/// by the program and memory the kernel writes for it in a read() are credited to the code
/// that wrote or read() it; a file it maps and only reads (resident, its read faults) is no
/// one's (tests/fault-kinds.c). Every fault, reads too, where only the software event is.
#[test]
fn memory_written_or_read_into_is_credited_and_memory_only_read_is_not() {
    let dir = tempdir();
    let file = dir.path().join("data.bin");
    std::fs::write(&file, vec![7u8; 16 * MIB as usize]).unwrap();
    let args = ["16".as_ref(), file.as_os_str()];
    let Some((out, a)) = held_c_program(dir.path(), "fault-kinds", &args, "50ms", "16", "done")
    else {
        return;
    };
    let l = &a["ledger"];
    let (w, _) = touched_by(l, "write_pages");
    let (r, _) = touched_by(l, "read_into");
    let (f, f_n) = touched_by(l, "read_file");
    let how = meta(&out)["end"]["ledger"]["how"].to_string();
    let said = format!(
        "write_pages {w}, read_into {r}, read_file {f} ({f_n} samples); records the kernel dropped: {}; {how}\n{:#}",
        l["lost"], l["touch"]
    );
    assert!(
        w * 100 >= 16 * MIB * 85 && r * 100 >= 16 * MIB * 85,
        "{said}"
    );
    if how.contains("filtered to writes") {
        assert_eq!(f_n, 0, "{said}");
    } else {
        assert!(f * 100 >= 16 * MIB * 85, "{said}");
    }
}

/// Transparent huge pages: one fault brings 512 pages in, so one fault in N sampled leaves
/// them next to unsampled (at N = 64, one sample per 128 MiB), and in a mapping shared with
/// small pages their memory went to the small pages' code. tests/huge-sites.c writes 16 MiB of
/// one mapping in 4 KiB pages (fill_small), then 32 MiB of it in huge pages where the kernel
/// gives them (fill_huge, MADV_HUGEPAGE): every huge page faulted in is sampled and stands for
/// its 2 MiB, so each site gets what it wrote. Where the kernel gives no huge pages, the small
/// faults' samples credit both.
#[test]
fn memory_faulted_in_huge_pages_is_credited_by_its_bytes_not_its_faults() {
    let dir = tempdir();
    let Some((out, a)) = held_c_program(
        dir.path(),
        "huge-sites",
        &["16".as_ref(), "32".as_ref()],
        "50ms",
        "64",
        "done",
    ) else {
        return;
    };
    let l = &a["ledger"];
    let end = &meta(&out)["end"]["ledger"];
    let (small, small_n) = touched_by(l, "fill_small");
    let (huge, huge_n) = touched_by(l, "fill_huge");
    let anon_huge: u64 = a["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["resident"]["anon_huge_bytes"].as_u64())
        .sum();
    let said = format!(
        "fill_small {small} ({small_n} samples), fill_huge {huge} ({huge_n} samples), AnonHugePages {anon_huge}; ledger end {end}\n{:#}",
        l["touch"]
    );
    assert!(
        small * 100 >= 16 * MIB * 85
            && small * 100 <= 16 * MIB * 115
            && huge * 100 >= 32 * MIB * 90
            && huge * 100 <= 32 * MIB * 110,
        "{said}"
    );
    // Where the kernel gave fill_huge huge pages (not those it collapsed from small ones later),
    // each was sampled and placed.
    if anon_huge >= 32 * MIB && end["how"].to_string().contains("transparent huge page") {
        assert!(huge_n >= 14, "{said}");
    }
}

#[test]
fn a_stack_the_kernel_copies_short_is_read_on_from_the_process_memory() {
    // tests/stack-gap.c: the page of a thread's stack that holds the callers' frames is out of
    // its page table while write_under writes 16 MiB (as NUMA balancing leaves a page, or swap),
    // so the kernel's copy of the stack with each sampled fault stops a kilobyte above the stack
    // pointer; the ledger reads the rest from the process (still in write_under, its callers'
    // frames as they were) and names the whole chain. (A read of the page maps it again until
    // the next 64 KiB: most samples need the reading on, not every one.)
    let dir = tempdir();
    let Some((out, a)) = held_c_program(
        dir.path(),
        "stack-gap",
        &["16".as_ref()],
        "50ms",
        "16",
        "done",
    ) else {
        return;
    };
    let l = &a["ledger"];
    let end = &meta(&out)["end"]["ledger"];
    let (whole, n) = touched_by(l, "outer");
    let said = format!(
        "outer {whole} ({n} samples); records the kernel dropped: {}; ledger end {end}\n{:#}",
        l["lost"], l["touch"]
    );
    assert!(whole * 100 >= 16 * MIB * 90, "{said}");
    let cut = l["touch"]["stacks"].as_array().unwrap().iter().any(|s| {
        s["truncated"] == true
            && s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["function"] == "write_under")
    });
    assert!(!cut, "{said}");
    assert!(
        end["stacks_completed"].as_u64().unwrap_or(0) * 2 >= n,
        "{said}"
    );
}

/// As nobody (no CAP_PERFMON, perf_event_paranoid above -1) the ledger is off: the recording
/// says why, once, keeps its anatomies without stacks, and its metadata says why too.
#[test]
fn without_the_privilege_the_ledger_is_off_and_the_recording_says_why() {
    if !is_root() {
        skip(Need::RunAsNobody, "needs root to run memmon as nobody");
        return;
    }
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap();
    if paranoid.trim().parse::<i32>().unwrap_or(2) < 0 {
        skip(
            Need::PerfRestricted,
            &format!("perf_event_paranoid is {paranoid}: anyone may use perf here"),
        );
        return;
    }
    let dir = tempdir();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = dir.path().join("nobody.csv");
    let done = std::process::Command::new(outside_program("setpriv"))
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(memmon_path())
        .args(["record", "-i", "50ms", "--anatomy", "-o"])
        .arg(&out)
        .arg("--")
        .args(workload(&["alloc:8MiB", "hold:300ms"]))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert_eq!(
        err.matches("the ledger of mappings is off: ").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("CAP_PERFMON") && err.contains("perf_event_paranoid"),
        "{err}"
    );
    let m = meta(&out);
    assert!(m["anatomy"]["ledger_off"]
        .as_str()
        .unwrap()
        .contains("CAP_PERFMON"));
    let all = anatomies(&out);
    assert!(!all.is_empty());
    assert!(all.iter().all(|a| a.get("ledger").is_none()));
}

/// Where memmon may mount tracefs (root, as the tests run here), the syscalls' tracepoints are
/// read and the host's mounts are as they were.
#[test]
fn the_syscall_tracepoints_are_read_and_the_hosts_mounts_left_as_they_were() {
    let before = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    match memmon::probe::tracefs::read(&[
        ("syscalls", "sys_enter_mmap"),
        ("syscalls", "sys_exit_brk"),
    ]) {
        Ok((t, how)) => {
            assert_eq!(t.len(), 2, "{how}");
            assert_eq!(t[0].field("len").unwrap().size, 8);
            assert_eq!(t[1].field("ret").unwrap().offset, 16);
        }
        Err(e) => skip(Need::Perf, &e.to_string()),
    }
    assert_eq!(
        std::fs::read_to_string("/proc/self/mountinfo").unwrap(),
        before
    );
}

#[inline(never)]
fn map_a_partition_for_the_ledger_test(len: usize) -> memmon::workload::Block {
    let b = memmon::workload::Block::map(len).unwrap();
    std::hint::black_box(b)
}

/// This test process's calls as the kernel reports them, until `want` finds what it waits for
/// (at most 30 s).
fn my_calls<T>(
    calls: &mut memmon::probe::mapcalls::MapCalls,
    want: impl Fn(&[memmon::probe::mapcalls::Event]) -> Option<T>,
) -> T {
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        calls.drain(&mut got);
        if let Some(t) = want(&got) {
            return t;
        }
        assert!(std::time::Instant::now() < deadline, "not seen: {got:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Where memmon may open the events (root, as the tests run here): a 2 MiB mapping of this
/// process is seen with its length, address and stack, a 64 KiB one is filtered out in the
/// kernel, and the stack unwinds through the function that made it and this test.
#[test]
fn a_large_mapping_of_this_process_is_seen_with_its_address_and_unwound_to_its_maker() {
    use memmon::probe::mapcalls::{Faults, MapCalls, Options, What};
    let mut calls = match MapCalls::open(Options::default(), None, Faults::Everyone) {
        Ok(c) => c,
        Err(e) => {
            skip(Need::Perf, &e.to_string());
            return;
        }
    };
    let me = std::process::id() as i32;
    let big = map_a_partition_for_the_ledger_test(2 << 20);
    let small = memmon::workload::Block::map(64 << 10).unwrap();
    let at = big.addr() as i64;
    drop(small);
    drop(big);
    let mine = my_calls(&mut calls, |got| {
        let mine: Vec<_> = got.iter().filter(|e| e.pid == me).cloned().collect();
        mine.iter()
            .any(|e| matches!(e.what, What::Munmap { len, .. } if len == 2 << 20))
            .then_some(mine)
    });
    let mmap = mine
        .iter()
        .position(|e| matches!(&e.what, What::Mmap { len, stack: Some(s), .. } if *len == 2 << 20 && !s.bytes.is_empty()))
        .unwrap_or_else(|| panic!("no 2 MiB mmap in {mine:?}"));
    let tid = mine[mmap].tid;
    assert!(
        mine[mmap..]
            .iter()
            .any(|e| e.tid == tid && e.what == What::MmapDone { ret: at }),
        "no exit with the address {at:x}"
    );
    assert!(
        !mine
            .iter()
            .any(|e| matches!(e.what, What::Mmap { len, .. } if len == 64 << 10)),
        "the kernel's filter let a 64 KiB mmap through"
    );
    let What::Mmap {
        stack: Some(stack), ..
    } = &mine[mmap].what
    else {
        unreachable!()
    };
    let (frames, _) = memmon::probe::unwind::Unwinder::default().frames(me, stack);
    let names: Vec<&str> = frames.iter().map(|f| f.function.as_str()).collect();
    let at = names
        .iter()
        .position(|n| n.ends_with("map_a_partition_for_the_ledger_test"))
        .unwrap_or_else(|| panic!("{names:#?}"));
    assert!(
        names[at..].iter().any(|n| n.ends_with(
            "a_large_mapping_of_this_process_is_seen_with_its_address_and_unwound_to_its_maker"
        )),
        "{names:#?}"
    );
}

#[test]
fn memory_jemalloc_and_mimalloc_hand_out_is_credited_to_the_code_that_touched_it() {
    // The same program with each allocator preloaded: neither takes glibc's brk heap or arenas
    // but chunks of its own, mapped ahead and handed out without a call the ledger could name.
    // The sampled page faults name the code that wrote the pages all the same.
    // With transparent huge pages, an allocator's chunks fault 2 MiB at a time: one fault in 64
    // sampled is then one sample for 128 MiB, and the credit follows the code that faulted
    // 4 KiB pages (measured in the lane's 7.3 guest: 38.7 and 36.6 MiB of 135 MiB resident).
    // The sampling counts faults, not bytes; this test measures the allocators on 4 KiB pages,
    // the program run with THP turned off for it (prctl PR_SET_THP_DISABLE, kept across exec).
    let dir = tempdir();
    let exe = build_c_program("touch-sites", dir.path(), &["-pthread", "-DNO_THP"]);
    for allocator in ["libjemalloc", "libmimalloc"] {
        let lib = outside_program(allocator);
        let Some((out, a)) = touch_sites_held(dir.path(), &exe, Some(&lib)) else {
            return;
        };
        let l = &a["ledger"];
        let touch = &l["touch"];
        let (heap, _) = touched_by(l, "fill_heap");
        let (arena, _) = touched_by(l, "fill_arena");
        // Each site at least what it wrote, less the sampling's error (64 MiB is 256 samples at
        // 4 KiB pages; fewer where transparent huge pages fault 2 MiB at a time); more where the
        // allocator's own pages in its runs, or whole huge pages, are resident with it. Between
        // the two, the 64:48 of what each wrote, within 5 points.
        assert!(
            heap * 100 >= 64 * MIB * 85 && arena * 100 >= 48 * MIB * 85,
            "{allocator}: fill_heap {heap}, fill_arena {arena}\n{touch:#}"
        );
        let share = heap as f64 / (heap + arena) as f64;
        assert!(
            (share - 64.0 / 112.0).abs() <= 0.05,
            "{allocator}: fill_heap {heap} of {}; records the kernel dropped: {}\n{}\n{touch:#}",
            heap + arena,
            l["lost"],
            touch_history(&out)
        );
        let resident = touch["resident_bytes"].as_u64().unwrap();
        assert!(
            (heap + arena) * 10 >= resident * 9,
            "{allocator}: {heap} + {arena} of {resident}"
        );
    }
}
