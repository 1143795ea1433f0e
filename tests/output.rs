//! Tests of how memmon writes its files: never through a planted symlink, never over an
//! existing file without --force (checked before any work), --append that repairs or refuses,
//! a deleted output noticed, the header on disk at once, stdout redirected to a file.

use crate::util::*;
use predicates::prelude::*;
use std::io::BufRead;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Stdio};

fn side(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".meta.json");
    PathBuf::from(s)
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_symlink_planted_at_the_sidecar_temp_name_is_not_followed() {
    let dir = tempdir();
    let victim = dir.path().join("etc-something");
    std::fs::write(&victim, "root's file\n").unwrap();
    let out = dir.path().join("run.csv");
    // The old predictable temporary name, and the sidecar itself.
    symlink(&victim, dir.path().join("run.csv.meta.json.tmp")).unwrap();
    record_workload(&out, &["-q", "-i", "50ms"], &["hold:200ms"])
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file\n");
    assert!(summary_json(&out)["samples"].as_u64().unwrap() >= 2);

    let out2 = dir.path().join("run2.csv");
    symlink(&victim, side(&out2)).unwrap();
    // Without --force the planted sidecar is refused; with it, replaced and not followed.
    record_workload(&out2, &["-q", "-i", "50ms"], &["hold:100ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("run2.csv.meta.json"));
    assert!(!out2.exists(), "refused before creating the recording");
    record_workload(&out2, &["-q", "-i", "50ms", "--force"], &["hold:100ms"])
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file\n");
    assert!(!std::fs::symlink_metadata(side(&out2)).unwrap().is_symlink());
}

#[test]
fn a_symlink_planted_at_the_output_itself_is_not_followed() {
    let dir = tempdir();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let out = dir.path().join("run.csv");
    symlink(&victim, &out).unwrap();
    record_workload(&out, &["-q", "-i", "50ms"], &["hold:100ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already exists"));
    record_workload(&out, &["-q", "-i", "50ms", "--force"], &["hold:100ms"])
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .starts_with("unix_ms,"));
    // A plot's path too.
    let svg = dir.path().join("p.svg");
    symlink(&victim, &svg).unwrap();
    memmon()
        .arg("plot")
        .arg(&out)
        .arg("-o")
        .arg(&svg)
        .arg("--force")
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

#[test]
fn plot_refuses_to_overwrite_without_force() {
    let dir = tempdir();
    let rec = dir.path().join("r.csv");
    record_workload(&rec, &["-q", "-i", "50ms"], &["hold:150ms"])
        .assert()
        .success();
    for name in ["p.svg", "p.png"] {
        let img = dir.path().join(name);
        std::fs::write(&img, "mine").unwrap();
        memmon()
            .arg("plot")
            .arg(&rec)
            .arg("-o")
            .arg(&img)
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains("already exists").and(predicate::str::contains("--force")),
            );
        assert_eq!(std::fs::read_to_string(&img).unwrap(), "mine");
        memmon()
            .arg("plot")
            .arg(&rec)
            .arg("-o")
            .arg(&img)
            .arg("--force")
            .assert()
            .success();
        assert_ne!(std::fs::read(&img).unwrap(), b"mine");
    }
    // Nothing but the files asked for is left in the directory (no temporary files).
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["p.png", "p.svg", "r.csv", "r.csv.meta.json"]);
}

#[test]
fn plot_and_report_into_a_missing_directory_fail_before_reading_their_input() {
    // The input is a pipe that stays open: a reader that checked its output only at the end
    // would wait on it forever; the directory is said missing at once, with exit 1.
    let dir = tempdir();
    for (cmd, out, flag) in [("plot", "x.svg", "--output"), ("report", "x.html", "-o")] {
        let target = dir.path().join("missing").join(out);
        let mut child = std::process::Command::new(memmon_path())
            .args([cmd, "-", "-o"])
            .arg(&target)
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let _open = child.stdin.take();
        let done = wait_for(20.0, || child.try_wait().unwrap().is_some());
        if !done {
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        assert!(done, "{cmd} waited on its input");
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(&format!("({flag}): ")) && stderr_of(&out).contains("missing"),
            "{}",
            stderr_of(&out)
        );
    }
}

#[test]
fn record_whose_plot_cannot_be_written_launches_nothing() {
    let dir = tempdir();
    let ran = dir.path().join("ran");
    let out = dir.path().join("r.csv");
    let plot = dir.path().join("missing").join("r.svg");
    memmon()
        .args(["record", "-q", "-o"])
        .arg(&out)
        .arg("--plot")
        .arg(&plot)
        .args(["--", "sh", "-c", &format!("touch {}", ran.display())])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("cannot write")
                .and(predicate::str::contains("missing/r.svg (--plot)")),
        );
    assert!(!ran.exists(), "the command was launched");
    assert!(!out.exists());
}

#[test]
fn record_refuses_an_existing_plot_or_sidecar_before_launching_anything() {
    let dir = tempdir();
    let ran = dir.path().join("ran");
    let cmd = format!("touch {}", ran.display());
    let out = dir.path().join("r.csv");
    let plot = dir.path().join("r.svg");
    std::fs::write(&plot, "mine").unwrap();
    memmon()
        .args(["record", "-q", "-o"])
        .arg(&out)
        .arg("--plot")
        .arg(&plot)
        .args(["--", "sh", "-c", &cmd])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("r.svg").and(predicate::str::contains("--plot")));
    assert!(!ran.exists(), "the command was launched");
    assert!(!out.exists());
    assert_eq!(std::fs::read_to_string(&plot).unwrap(), "mine");

    std::fs::remove_file(&plot).unwrap();
    std::fs::write(side(&out), "{}").unwrap();
    memmon()
        .args(["record", "-q", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &cmd])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("r.csv.meta.json"));
    assert!(!ran.exists());
    assert_eq!(std::fs::read_to_string(side(&out)).unwrap(), "{}");
}

#[test]
fn bench_refuses_an_existing_export_before_running_the_client() {
    let dir = tempdir();
    let ran = dir.path().join("ran");
    let cmd = format!("touch {}", ran.display());
    let json = dir.path().join("b.json");
    std::fs::write(&json, "earlier results").unwrap();
    for flag in ["--export-json", "--export-csv", "--export-markdown"] {
        memmon()
            .args(["bench", "-q", "-n", "1", flag])
            .arg(&json)
            .args(["--", "sh", "-c", &cmd])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("already exists").and(predicate::str::contains(flag)));
        assert!(!ran.exists(), "{flag}: the client ran");
        assert_eq!(std::fs::read_to_string(&json).unwrap(), "earlier results");
    }
    // Its recording (-o) too.
    memmon()
        .args(["bench", "-q", "-n", "1", "-o"])
        .arg(&json)
        .args(["--", "sh", "-c", &cmd])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already exists").and(predicate::str::contains("-o")));
    assert!(!ran.exists(), "-o: the client ran");
    memmon()
        .args(["bench", "-q", "-n", "1", "--force", "--export-json"])
        .arg(&json)
        .args(["--", "sh", "-c", &cmd])
        .assert()
        .success();
    assert!(ran.exists());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 1);
}

#[test]
fn two_outputs_on_one_path_are_refused() {
    let dir = tempdir();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let a = dir.path().join("a.out");
    let a2 = dir.path().join(".").join("a.out");
    memmon()
        .args(["bench", "-q", "-n", "1", "--export-json"])
        .arg(&a)
        .arg("--export-csv")
        .arg(&a2)
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--export-json and --export-csv both write to",
        ));
    let rec = dir.path().join("r.svg");
    memmon()
        .args(["record", "-q", "--format", "csv", "-o"])
        .arg(&rec)
        .arg("--plot")
        .arg(dir.path().join("sub/../r.svg"))
        .arg("--")
        .args(workload(&["hold:10ms"]))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("both write to"));
    assert!(!rec.exists());
}

/// Records the workload `target` by PID into `out`, deletes `doomed` once rows have reached
/// the file, and returns memmon's exit code and stderr.
fn record_then_delete(target: &Child, out: &Path, doomed: &Path) -> (i32, String) {
    let rec = StdCommand::new(memmon_path())
        .args([
            "record",
            "-q",
            "-i",
            "20ms",
            "--pid",
            &target.id().to_string(),
            "-o",
        ])
        .arg(out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Rows after the header (and, for CSV, its sidecar written): deleted mid-recording. The
    // header alone is over 400 bytes, and a deletion between it and the sidecar is another case.
    assert!(wait_for(30.0, || std::fs::read(out).is_ok_and(|t| t
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        >= 3)));
    if doomed.is_dir() {
        std::fs::remove_dir_all(doomed).unwrap();
    } else {
        std::fs::remove_file(doomed).unwrap();
    }
    let done = rec.wait_with_output().unwrap();
    (done.status.code().unwrap(), stderr_of(&done))
}

#[test]
fn a_deleted_output_stops_the_recording_with_exit_1_and_says_it_is_lost() {
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let dir = tempdir();
    for name in ["run.csv", "run.jsonl"] {
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let (code, err) = record_then_delete(&target, &sub.join(name), &sub);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(err.contains("was deleted while recording"), "{err}");
        assert!(err.contains("are lost"), "{err}");
        assert!(!err.contains("kept"), "{err}");
    }
    // The file alone removed (its directory kept).
    let out = dir.path().join("alone.csv");
    let (code, err) = record_then_delete(&target, &out, &out);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("alone.csv was deleted"), "{err}");
    target.kill().unwrap();
    let _ = target.wait();
}

#[test]
fn append_cuts_off_an_incomplete_last_line_and_says_so() {
    let dir = tempdir();
    for name in ["cut.csv", "cut.jsonl"] {
        let out = dir.path().join(name);
        // Each marker waits for its row: each session holds rows however busy the machine.
        record_workload(&out, &["-q", "-i", "50ms"], &["mark:a", "hold:50ms"])
            .assert()
            .success();
        let first = summary_json(&out)["samples"].as_u64().unwrap();
        // What a SIGKILL in the middle of a write leaves.
        let mut f = std::fs::OpenOptions::new().append(true).open(&out).unwrap();
        std::io::Write::write_all(&mut f, b"1764460000000,0.25").unwrap();
        drop(f);
        let done = record_workload(&out, &["-i", "50ms", "--append"], &["mark:b", "mark:c"])
            .output()
            .unwrap();
        assert!(done.status.success(), "{}", stderr_of(&done));
        let err = stderr_of(&done);
        assert!(err.contains("incomplete line (18 bytes"), "{err}");
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            !text.contains("1764460000000"),
            "the partial line was dropped"
        );
        let s = summary_json(&out);
        assert!(s["samples"].as_u64().unwrap() >= first + 2, "{s}");
    }
}

#[test]
fn append_onto_a_recording_of_the_other_format_is_refused() {
    let dir = tempdir();
    let j = dir.path().join("run.jsonl");
    record_workload(&j, &["-q", "-i", "50ms"], &["hold:100ms"])
        .assert()
        .success();
    let before = std::fs::read(&j).unwrap();
    record_workload(&j, &["-q", "--append", "--format", "csv"], &["hold:10ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "is a JSON Lines recording and this one is CSV",
        ));
    assert_eq!(std::fs::read(&j).unwrap(), before);

    let c = dir.path().join("run.csv");
    record_workload(&c, &["-q", "-i", "50ms"], &["hold:100ms"])
        .assert()
        .success();
    let before = std::fs::read(&c).unwrap();
    record_workload(&c, &["-q", "--append", "--format", "jsonl"], &["hold:10ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "is a CSV recording and this one is JSON Lines",
        ));
    assert_eq!(std::fs::read(&c).unwrap(), before);
}

#[test]
fn append_keeps_every_sessions_metadata() {
    let dir = tempdir();
    let out = dir.path().join("three.csv");
    for steps in [["hold:100ms"], ["hold:150ms"], ["hold:200ms"]] {
        record_workload(&out, &["-q", "-i", "50ms", "--append"], &steps)
            .assert()
            .success();
    }
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(side(&out)).unwrap()).unwrap();
    let earlier = m["earlier_sessions"].as_array().unwrap();
    assert_eq!(earlier.len(), 2);
    let specs: Vec<&str> = earlier
        .iter()
        .chain([&m])
        .map(|s| s["target"]["spec"].as_str().unwrap())
        .collect();
    for (spec, hold) in specs.iter().zip(["hold:100ms", "hold:150ms", "hold:200ms"]) {
        assert!(spec.ends_with(hold), "{spec}");
    }
    for s in earlier.iter().chain([&m]) {
        assert_eq!(s["end"]["reason"], "target-exited", "{s}");
    }
    assert!(earlier[0]["earlier_sessions"].is_null(), "not nested");
    // The latest session stays where readers have always found it.
    let ended = summary_json(&out)["ended"].as_str().unwrap().to_string();
    assert!(ended.starts_with("the target exited"), "{ended}");
}

#[test]
fn the_csv_header_is_on_disk_as_soon_as_recording_starts() {
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let dir = tempdir();
    let out = dir.path().join("early.csv");
    // 100 ms ticks: rows are flushed only after 500 ms, so the header must have been flushed
    // on its own.
    let mut rec = StdCommand::new(memmon_path())
        .args([
            "record",
            "-i",
            "100ms",
            "--pid",
            &target.id().to_string(),
            "-o",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(rec.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("recording to"), "{first}");
    rec.kill().unwrap();
    let _ = rec.wait();
    target.kill().unwrap();
    let _ = target.wait();
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("unix_ms,elapsed_s,rss_bytes,"), "{text:?}");
    // The sidecar written at the start is complete too.
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(side(&out)).unwrap()).unwrap();
    assert_eq!(m["interval"], "100ms");
}

#[test]
fn dev_null_is_a_valid_output() {
    for fmt in ["csv", "jsonl"] {
        memmon()
            .args([
                "record",
                "-i",
                "50ms",
                "--format",
                fmt,
                "-o",
                "/dev/null",
                "--",
            ])
            .args(workload(&["hold:200ms"]))
            .assert()
            .success()
            .stderr(predicate::str::contains("recording to /dev/null"));
    }
    assert!(!Path::new("/dev/null.meta.json").exists());
}

#[test]
fn a_sigkilled_recorders_socket_is_removed_by_the_next_recorder() {
    let runtime = tempdir();
    std::fs::set_permissions(
        runtime.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let dir = tempdir();
    let mut first = StdCommand::new(memmon_path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .args([
            "record",
            "-q",
            "-i",
            "50ms",
            "--pid",
            &target.id().to_string(),
            "-o",
        ])
        .arg(dir.path().join("a.csv"))
        .spawn()
        .unwrap();
    let stale = runtime.path().join(format!("memmon-{}.sock", first.id()));
    assert!(
        wait_for(30.0, || stale.exists()),
        "no socket at {}",
        stale.display()
    );
    first.kill().unwrap();
    let _ = first.wait();
    assert!(stale.exists(), "SIGKILL leaves the socket");
    memmon()
        .env("XDG_RUNTIME_DIR", runtime.path())
        .args(["record", "-q", "-i", "50ms", "--duration", "300ms"])
        .args(["--pid", &target.id().to_string(), "-o"])
        .arg(dir.path().join("b.csv"))
        .assert()
        .success();
    target.kill().unwrap();
    let _ = target.wait();
    assert!(!stale.exists(), "the stale socket is still there");
    assert_eq!(std::fs::read_dir(runtime.path()).unwrap().count(), 0);
}

#[test]
fn a_csv_recording_to_stdout_redirected_to_a_file_keeps_its_metadata() {
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let dir = tempdir();
    let out = dir.path().join("seed.csv");
    let done = StdCommand::new(memmon_path())
        .args(["record", "-i", "100ms", "--duration", "600ms"])
        .args(["--pid", &target.id().to_string()])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    target.kill().unwrap();
    let _ = target.wait();
    assert!(done.status.success(), "{}", stderr_of(&done));
    let err = stderr_of(&done);
    assert!(
        err.contains(&format!("metadata in {}", side(&out).display())),
        "{err}"
    );
    let s = summary_json(&out);
    assert_eq!(s["interval"], "100ms", "{s}");
    assert!(s["ended"].as_str().unwrap().starts_with("duration"), "{s}");

    // JSON Lines carries its metadata in-band: no sidecar needed.
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let j = dir.path().join("seed.jsonl");
    let done = StdCommand::new(memmon_path())
        .args([
            "record",
            "-q",
            "--format",
            "jsonl",
            "-i",
            "100ms",
            "--duration",
            "600ms",
        ])
        .args(["--pid", &target.id().to_string()])
        .stdout(std::fs::File::create(&j).unwrap())
        .status()
        .unwrap();
    target.kill().unwrap();
    let _ = target.wait();
    assert!(done.success());
    assert!(!side(&j).exists());
    let s = summary_json(&j);
    assert_eq!(s["interval"], "100ms", "{s}");
    assert!(s["ended"].as_str().unwrap().starts_with("duration"), "{s}");
}

#[test]
fn appending_with_a_shell_redirect_repairs_and_keeps_every_session() {
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let dir = tempdir();
    let out = dir.path().join("seed.csv");
    let run = |stdout: std::fs::File| {
        let done = StdCommand::new(memmon_path())
            .args(["record", "-q", "-i", "100ms", "--duration", "400ms"])
            .args(["--pid", &target.id().to_string()])
            .stdout(stdout)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(done.status.success(), "{}", stderr_of(&done));
        stderr_of(&done)
    };
    run(std::fs::File::create(&out).unwrap()); // `> seed.csv`
    let first = summary_json(&out)["samples"].as_u64().unwrap();
    let append = || std::fs::OpenOptions::new().append(true).open(&out).unwrap();
    std::io::Write::write_all(&mut append(), b"1764460000000,0.2").unwrap();
    let err = run(append()); // `>> seed.csv`
    target.kill().unwrap();
    let _ = target.wait();
    assert!(err.contains("incomplete line (17 bytes"), "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.matches("unix_ms,").count(), 1, "one header");
    assert!(!text.contains("1764460000000"));
    assert!(summary_json(&out)["samples"].as_u64().unwrap() > first);
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(side(&out)).unwrap()).unwrap();
    assert_eq!(m["earlier_sessions"].as_array().unwrap().len(), 1);
}

/// A 64 KiB tmpfs, unmounted when dropped; `None` where mounting is not allowed (not root).
struct TinyDisk(tempfile::TempDir);

impl TinyDisk {
    fn mount() -> Option<TinyDisk> {
        let dir = tempdir();
        let ok = StdCommand::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(TinyDisk(dir))
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = StdCommand::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_disk_that_fills_mid_recording_is_not_said_to_keep_more_than_it_holds() {
    let Some(disk) = TinyDisk::mount() else {
        skip(Need::Root, "cannot mount a tmpfs here (needs root)");
        return;
    };
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let out = disk.0.path().join("run.csv");
    let done = memmon()
        .args([
            "record",
            "-q",
            "-i",
            "1ms",
            "--pid",
            &target.id().to_string(),
            "-o",
        ])
        .arg(&out)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    target.kill().unwrap();
    let _ = target.wait();
    assert_eq!(done.status.code(), Some(1));
    let err = stderr_of(&done);
    assert!(err.contains("No space left on device"), "{err}");
    let re = regex::Regex::new(r"at least (\d+) of the (\d+) samples taken reached").unwrap();
    let caps = re.captures(&err).unwrap_or_else(|| panic!("{err}"));
    let claimed: u64 = caps[1].parse().unwrap();
    let taken: u64 = caps[2].parse().unwrap();
    assert!(claimed < taken, "{err}");
    let in_file = summary_json(&out)["samples"].as_u64().unwrap();
    // Every complete row counts, also those the buffer wrote out between flushes.
    assert_eq!(
        claimed, in_file,
        "claims {claimed}, the file holds {in_file}"
    );
}

// ---- The attacks of issue 18: someone else can write the output directory. ----

/// Flips the name `dir/name` between two files (hard links of `a` and of `b`, renamed over
/// it) until stopped: what a user who can write the directory does to race a `stat` before an
/// `open`.
struct Flipper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Flipper {
    fn start(dir: &Path, name: &str, a: &Path, b: &Path) -> Flipper {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (dir, name, a, b) = (
            dir.to_path_buf(),
            name.to_string(),
            a.to_path_buf(),
            b.to_path_buf(),
        );
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let target = dir.join(&name);
            let mut flips = 0u64;
            while !flag.load(Ordering::Relaxed) {
                for (i, src) in [&a, &b].into_iter().enumerate() {
                    let tmp = dir.join(format!(".flip-{name}-{i}"));
                    let _ = std::fs::remove_file(&tmp);
                    if std::fs::hard_link(src, &tmp).is_ok()
                        && std::fs::rename(&tmp, &target).is_ok()
                    {
                        flips += 1;
                    }
                }
            }
            flips
        });
        Flipper {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops flipping: how many flips there were.
    fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// A "device" for the flip: a character device like /dev/null (1:3) where mknod is allowed
/// (root), else a FIFO whose reader, on a thread of its own, throws away what comes (both are
/// what memmon writes as a stream). The reader stops when the returned flag is set.
fn stream_node(path: &Path) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if is_root() {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o666),
            rustix::fs::makedev(1, 3),
        )
        .unwrap();
    } else {
        mkfifo(path);
        let mut reader = FifoReader::open(path);
        let flag = stop.clone();
        std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if reader.drain().is_empty() {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        });
    }
    stop
}

/// The victim: a 0600 file with its content and modification time, to check it untouched.
struct Victim {
    path: PathBuf,
    mtime: std::time::SystemTime,
}

impl Victim {
    const TEXT: &'static str = "root:$6$precious:19000:0:99999:7:::\n";

    fn new(path: PathBuf) -> Victim {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&path, Victim::TEXT).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        Victim { path, mtime }
    }

    fn assert_untouched(&self, what: &str) {
        assert_eq!(
            std::fs::read_to_string(&self.path).unwrap(),
            Victim::TEXT,
            "{what}: the victim's content changed"
        );
        let m = std::fs::metadata(&self.path).unwrap();
        assert_eq!(
            m.modified().unwrap(),
            self.mtime,
            "{what}: the victim was written"
        );
    }
}

#[test]
fn a_name_flipped_between_a_device_and_a_private_file_never_gets_memmons_bytes() {
    let dir = tempdir();
    let d = dir.path();
    let victim = Victim::new(d.join("victim"));
    let node = d.join("null");
    let reader = stream_node(&node);
    let rec = d.join("rec.csv");
    record_workload(&rec, &["-q", "-i", "20ms"], &["alloc:4MiB", "hold:150ms"])
        .assert()
        .success();
    let mut target = spawn_workload(&["alloc:4MiB", "hold:300s"]);
    let pid = target.id().to_string();
    let out = d.join("out.svg");
    let side_rec = d.join("side.csv");
    let flip_out = Flipper::start(d, "out.svg", &victim.path, &node);
    let flip_side = Flipper::start(d, "side.csv.meta.json", &victim.path, &node);
    let runs: Vec<(&str, Vec<String>)> = {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let o = out.display().to_string();
        let r = rec.display().to_string();
        let sr = side_rec.display().to_string();
        let record = s(&[
            "record",
            "-q",
            "-i",
            "20ms",
            "--duration",
            "100ms",
            "--format",
            "csv",
            "--pid",
            &pid,
            "-o",
        ]);
        vec![
            ("record", [record.clone(), s(&[&o])].concat()),
            (
                "record --force",
                [record.clone(), s(&[&o, "--force"])].concat(),
            ),
            ("sidecar", [record.clone(), s(&[&sr])].concat()),
            ("sidecar --force", [record, s(&[&sr, "--force"])].concat()),
            ("plot", s(&["plot", &r, "-o", &o])),
            ("plot --force", s(&["plot", &r, "-o", &o, "--force"])),
            ("report", s(&["report", &r, "-o", &o])),
            ("report --force", s(&["report", &r, "-o", &o, "--force"])),
            (
                "bench export",
                s(&["bench", "-q", "-n", "1", "--export-json", &o, "--", "true"]),
            ),
            (
                "bench export --force",
                s(&[
                    "bench",
                    "-q",
                    "-n",
                    "1",
                    "--force",
                    "--export-json",
                    &o,
                    "--",
                    "true",
                ]),
            ),
        ]
    };
    let mut outcomes = std::collections::BTreeMap::new();
    for round in 0..3 {
        for (what, args) in &runs {
            let _ = std::fs::remove_file(&side_rec);
            let done = memmon()
                .args(args)
                .timeout(std::time::Duration::from_secs(120))
                .output()
                .unwrap();
            let code = done.status.code();
            assert!(
                matches!(code, Some(0..=2)),
                "{what} (round {round}): {code:?}: {}",
                stderr_of(&done)
            );
            *outcomes.entry((*what, code)).or_insert(0) += 1;
            victim.assert_untouched(what);
        }
    }
    let flips = flip_out.stop() + flip_side.stop();
    reader.store(true, std::sync::atomic::Ordering::Relaxed);
    target.kill().unwrap();
    let _ = target.wait();
    victim.assert_untouched("after all runs");
    assert!(flips > 100, "the names hardly flipped ({flips})");
    eprintln!("outcomes (what, exit code) -> runs: {outcomes:?}; {flips} flips");
}

#[test]
fn a_planted_symlink_to_a_fifo_or_device_is_never_written_through() {
    let dir = tempdir();
    let d = dir.path();
    let fifo = d.join("catch");
    mkfifo(&fifo);
    // The attacker reads: any byte that reaches the FIFO is theirs.
    let mut attacker = FifoReader::open(&fifo);
    let rec = d.join("rec.csv");
    record_workload(&rec, &["-q", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
    let plant = |name: &str, to: &Path| {
        let p = d.join(name);
        let _ = std::fs::remove_file(&p);
        symlink(to, &p).unwrap();
        p
    };
    let p = |p: &Path| p.display().to_string();
    // Without --force every planted link is refused as an existing file, at once.
    let cases: Vec<(PathBuf, Vec<String>)> = vec![
        (
            plant("run.csv", &fifo),
            vec![
                "record".into(),
                "-q".into(),
                "-o".into(),
                p(&d.join("run.csv")),
            ],
        ),
        (
            plant("p.svg", &fifo),
            vec!["plot".into(), p(&rec), "-o".into(), p(&d.join("p.svg"))],
        ),
        (
            plant("r.html", &fifo),
            vec!["report".into(), p(&rec), "-o".into(), p(&d.join("r.html"))],
        ),
        (
            plant("b.json", &fifo),
            vec![
                "bench".into(),
                "-q".into(),
                "-n".into(),
                "1".into(),
                "--export-json".into(),
                p(&d.join("b.json")),
            ],
        ),
    ];
    for (link, args) in &cases {
        let mut cmd = memmon();
        cmd.args(args);
        if args[0] == "record" {
            cmd.arg("--").args(workload(&["hold:10ms"]));
        } else if args[0] == "bench" {
            cmd.args(["--", "true"]);
        }
        let done = cmd
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(
            done.status.code(),
            Some(2),
            "{}: {}",
            args[0],
            stderr_of(&done)
        );
        assert!(
            stderr_of(&done).contains("already exists"),
            "{}",
            stderr_of(&done)
        );
        assert!(std::fs::symlink_metadata(link).unwrap().is_symlink());
    }
    // The sidecar's name, planted: refused too, before the recording is made.
    plant("s.csv.meta.json", &fifo);
    record_workload(&d.join("s.csv"), &["-q"], &["hold:10ms"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("s.csv.meta.json"));
    // With --force each link is replaced by a file of memmon's, never followed.
    for (link, args) in &cases {
        let mut cmd = memmon();
        cmd.args(args).arg("--force");
        if args[0] == "record" {
            cmd.arg("--").args(workload(&["hold:50ms"]));
        } else if args[0] == "bench" {
            cmd.args(["--", "true"]);
        }
        let done = cmd
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(done.status.success(), "{}: {}", args[0], stderr_of(&done));
        assert!(
            std::fs::symlink_metadata(link).unwrap().is_file(),
            "{}",
            link.display()
        );
    }
    record_workload(&d.join("s.csv"), &["-q", "--force"], &["hold:50ms"])
        .assert()
        .success();
    assert!(std::fs::symlink_metadata(side(&d.join("s.csv")))
        .unwrap()
        .is_file());
    assert_eq!(attacker.drain(), b"", "bytes reached the planted FIFO");
    // A link to a device: /dev/full would fail every write if it were followed.
    let full = plant("full.csv", Path::new("/dev/full"));
    record_workload(&full, &["-q"], &["hold:10ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already exists"));
    record_workload(&full, &["-q", "--force", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
    assert!(summary_json(&full)["samples"].as_u64().unwrap() >= 2);
}

#[test]
fn a_fifo_with_no_reader_is_an_error_after_a_bounded_wait_and_a_signal_ends_the_wait() {
    let dir = tempdir();
    let fifo = dir.path().join("out.fifo");
    mkfifo(&fifo);
    let ran = dir.path().join("ran");
    let cmd = format!("touch {}", ran.display());
    // No reader ever: an error after the wait, and the command is never launched.
    let done = memmon()
        .args(["record", "-q", "-o"])
        .arg(&fifo)
        .args(["--", "sh", "-c", &cmd])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(1), "{}", stderr_of(&done));
    assert!(
        stderr_of(&done).contains("no reader opened it within 10 s"),
        "{}",
        stderr_of(&done)
    );
    assert!(!ran.exists());
    // SIGTERM while it waits ends memmon with 128+15, not the end of the wait (exit 1).
    let mut rec = StdCommand::new(memmon_path())
        .args(["record", "-q", "-o"])
        .arg(&fifo)
        .args(["--", "sh", "-c", &cmd])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once memmon handles SIGTERM (its wait for a reader follows at once).
    assert!(wait_for(30.0, || catches(rec.id(), libc::SIGTERM)));
    // SAFETY: signalling a child we spawned.
    unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
    let status = {
        let mut status = None;
        wait_for(60.0, || {
            status = rec.try_wait().unwrap();
            status.is_some()
        });
        status.expect("memmon did not end after SIGTERM")
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut rec.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(
        err.contains("SIGTERM arrived while waiting for a reader"),
        "{err}"
    );
    assert!(!ran.exists());
    // With a reader, the recording goes through the FIFO.
    let mut reader = FifoReader::open(&fifo);
    record_workload(&fifo, &["-q", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
    let text = String::from_utf8(reader.drain()).unwrap();
    assert!(text.starts_with("unix_ms,"), "{text}");
    assert!(!side(&fifo).exists());
}

#[test]
fn append_locks_the_recording_and_a_second_writer_is_refused_naming_the_first() {
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let dir = tempdir();
    let out = dir.path().join("run.csv");
    let pid = target.id().to_string();
    let mut first = StdCommand::new(memmon_path())
        .args(["record", "-q", "-i", "20ms", "--pid", &pid, "-o"])
        .arg(&out)
        .spawn()
        .unwrap();
    assert!(wait_for(30.0, || std::fs::metadata(&out)
        .is_ok_and(|m| m.len() > 400)));
    let holder = format!("PID {} (memmon)", first.id());
    for extra in [&["--append"][..], &["--force"][..]] {
        let done = memmon()
            .args([
                "record",
                "-q",
                "-i",
                "20ms",
                "--duration",
                "200ms",
                "--pid",
                &pid,
                "-o",
            ])
            .arg(&out)
            .args(extra)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = stderr_of(&done);
        assert_eq!(done.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains("another process is writing it") && err.contains(&holder),
            "{err}"
        );
    }
    // SAFETY: signalling a child we spawned.
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    assert!(first.wait().unwrap().code() == Some(143));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        text.matches("unix_ms,").count(),
        1,
        "one header, one writer"
    );
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(side(&out)).unwrap()).unwrap();
    assert!(m["earlier_sessions"].is_null(), "{m}");
    // Once the first is done, appending works.
    memmon()
        .args([
            "record",
            "-q",
            "-i",
            "20ms",
            "--duration",
            "200ms",
            "--pid",
            &pid,
            "--append",
            "-o",
        ])
        .arg(&out)
        .assert()
        .success();
    target.kill().unwrap();
    let _ = target.wait();
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(side(&out)).unwrap()).unwrap();
    assert_eq!(m["earlier_sessions"].as_array().unwrap().len(), 1);
}

#[test]
fn append_onto_a_file_that_is_not_a_recording_changes_nothing() {
    let dir = tempdir();
    let cases: [(&str, &[u8]); 5] = [
        ("notes.csv", b"first line\nsecond line, cut"),
        ("one-line.csv", b"just one line with no newline"),
        ("one-line-nl.csv", b"a single line\n"),
        ("json.jsonl", b"{\"not\": \"memmon\"}\n{\"x\": 1"),
        (
            "old-header.csv",
            b"unix_ms,elapsed_s,rss_bytes\n1,0.0,5\n12",
        ),
    ];
    for (name, bytes) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let done = record_workload(&p, &["-q", "--append"], &["hold:10ms"])
            .output()
            .unwrap();
        let err = stderr_of(&done);
        assert_eq!(done.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains("cannot append to") && err.contains("left as it is"),
            "{name}: {err}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), bytes, "{name} was changed");
        assert!(!side(&p).exists(), "{name}: a sidecar was written");
    }
    // An empty file is a recording yet to start: it takes one.
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    record_workload(&empty, &["-q", "--append", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
    assert!(summary_json(&empty)["samples"].as_u64().unwrap() >= 2);
}

/// The names in `dir` and the bytes of each file: what a refused or failed run must not change.
fn snapshot(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    all.sort();
    all
}

#[test]
fn append_onto_rows_whose_sidecar_is_missing_is_refused_and_changes_nothing() {
    let dir = tempdir();
    let out = dir.path().join("piped.csv");
    // The marker waits for its row: the file holds rows however busy the machine (a command
    // that ended before its first sample would leave a header alone, which may be appended to).
    record_workload(&out, &["-q", "-i", "50ms"], &["mark:a", "hold:50ms"])
        .assert()
        .success();
    assert!(!read_csv(&out).1.is_empty());
    // As if recorded to a pipe (`memmon record | cat > piped.csv`), or the sidecar lost.
    std::fs::remove_file(side(&out)).unwrap();
    let before = snapshot(dir.path());
    let done = record_workload(&out, &["-q", "--append"], &["hold:10ms"])
        .output()
        .unwrap();
    let err = stderr_of(&done);
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("cannot append to {}", out.display()))
            && err.contains("holds rows but no metadata sidecar"),
        "{err}"
    );
    assert_eq!(snapshot(dir.path()), before, "changed by --append");
    // `>> piped.csv`: the shell's append is refused the same way, before a byte is written.
    let done = StdCommand::new(memmon_path())
        .args(["record", "-q", "--"])
        .args(workload(&["hold:10ms"]))
        .stdout(std::fs::OpenOptions::new().append(true).open(&out).unwrap())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = stderr_of(&done);
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(err.contains("holds rows but no metadata sidecar"), "{err}");
    assert_eq!(snapshot(dir.path()), before, "changed by >>");
}

#[test]
fn append_refuses_a_sidecar_of_another_recording_as_every_reader_does() {
    let dir = tempdir();
    let out = dir.path().join("st.csv");
    record_workload(&out, &["-q", "-i", "50ms"], &["hold:200ms"])
        .assert()
        .success();
    // Another recording's sidecar, made an hour later, copied beside these rows.
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(side(&out)).unwrap()).unwrap();
    let hour = 3_600_000;
    m["started_unix_ms"] = (m["started_unix_ms"].as_u64().unwrap() + hour).into();
    m["end"]["ended_unix_ms"] = (m["end"]["ended_unix_ms"].as_u64().unwrap() + hour).into();
    std::fs::write(side(&out), serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let summary = memmon().arg("summary").arg(&out).output().unwrap();
    assert_eq!(summary.status.code(), Some(2));
    assert!(stderr_of(&summary).contains("does not describe"));
    let before = snapshot(dir.path());
    let done = record_workload(&out, &["-q", "--append"], &["hold:10ms"])
        .output()
        .unwrap();
    let err = stderr_of(&done);
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: does not describe {}",
            side(&out).display(),
            out.display()
        )),
        "{err}"
    );
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn force_with_a_command_that_cannot_run_keeps_the_old_recording_as_it_was() {
    let dir = tempdir();
    let csv = dir.path().join("a.csv");
    record_workload(&csv, &["-q", "-i", "50ms", "--anatomy"], &["hold:200ms"])
        .assert()
        .success();
    let jsonl = dir.path().join("j.jsonl");
    record_workload(&jsonl, &["-q", "-i", "50ms"], &["hold:200ms"])
        .assert()
        .success();
    let before = snapshot(dir.path());
    assert_eq!(
        before.len(),
        4,
        "a.csv, its sidecar and anatomy table, j.jsonl"
    );
    let cases: [(&Path, &[&str], &str, i32); 3] = [
        (&csv, &["--anatomy"], "/nonexistent/cmd", 127),
        (&csv, &[], "/etc/passwd", 126),
        (&jsonl, &[], "/nonexistent/cmd", 127),
    ];
    for (out, extra, cmd, code) in cases {
        let done = memmon()
            .args(["record", "-q", "--force"])
            .args(extra)
            .arg("-o")
            .arg(out)
            .args(["--", cmd])
            .output()
            .unwrap();
        let err = stderr_of(&done);
        assert_eq!(done.status.code(), Some(code), "{cmd}: {err}");
        assert!(err.contains(&format!("cannot run '{cmd}'")), "{err}");
        assert_eq!(snapshot(dir.path()), before, "{cmd} onto {}", out.display());
    }
    // A command that starts: the old recording is replaced, no temporary file left.
    record_workload(&csv, &["-q", "--force", "-i", "50ms"], &["hold:100ms"])
        .assert()
        .success();
    let after = snapshot(dir.path());
    assert_eq!(after.len(), 4, "{after:?}");
    assert_ne!(after, before);
    assert!(summary_json(&csv)["samples"].as_u64().unwrap() >= 2);
}

#[test]
fn a_deleted_recordings_orphan_sidecar_does_not_need_force() {
    let dir = tempdir();
    let out = dir.path().join("run.csv");
    record_workload(&out, &["-q", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
    std::fs::remove_file(&out).unwrap();
    assert!(side(&out).exists());
    record_workload(&out, &["-i", "20ms"], &["hold:100ms"])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("replacing").and(predicate::str::contains(
                "the metadata of a recording that is no longer there",
            )),
        );
    assert!(summary_json(&out)["samples"].as_u64().unwrap() >= 2);
    // A file at the sidecar's name that is not memmon's metadata is still refused.
    std::fs::remove_file(&out).unwrap();
    std::fs::write(side(&out), "{\"mine\": true}\n").unwrap();
    record_workload(&out, &["-q"], &["hold:10ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("run.csv.meta.json"));
    assert_eq!(
        std::fs::read_to_string(side(&out)).unwrap(),
        "{\"mine\": true}\n"
    );
}

#[test]
fn a_recording_deleted_while_recording_takes_its_sidecar_with_it() {
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let dir = tempdir();
    let out = dir.path().join("gone.csv");
    let (code, err) = record_then_delete(&target, &out, &out);
    assert_eq!(code, 1, "{err}");
    assert!(!side(&out).exists(), "an orphan sidecar was left");
    // The next run with the same -o needs no --force.
    memmon()
        .args(["record", "-q", "-i", "20ms", "--duration", "200ms", "--pid"])
        .arg(target.id().to_string())
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    target.kill().unwrap();
    let _ = target.wait();
}

#[test]
fn a_full_disk_at_the_start_leaves_no_empty_recording() {
    let Some(disk) = TinyDisk::mount() else {
        skip(Need::Root, "cannot mount a tmpfs here (needs root)");
        return;
    };
    // Fill it to the last block.
    let filler = disk.0.path().join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    while std::io::Write::write_all(&mut f, &[0u8; 4096]).is_ok() {}
    drop(f);
    for name in ["run.csv", "run.jsonl"] {
        let out = disk.0.path().join(name);
        let done = record_workload(&out, &["-q"], &["hold:10ms"])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = stderr_of(&done);
        assert_eq!(done.status.code(), Some(1), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
        assert!(err.contains(&format!("removed {}", out.display())), "{err}");
        assert!(!out.exists(), "{name}: an empty recording was left");
        assert!(!side(&out).exists());
    }
    let left: Vec<_> = std::fs::read_dir(disk.0.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "only the filler is left: {left:?}");
}

/// A directory others can write, as /tmp is (1777), made in a temp dir.
fn shared_dir(parent: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let shared = parent.join("tmp");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    shared
}

/// The user `nobody` (65534): another user, for what root's tests plant.
const NOBODY: u32 = 65534;

#[test]
fn a_directory_link_planted_by_another_user_is_not_followed() {
    if !is_root() {
        skip(Need::Root, "planting as another user needs root");
        return;
    }
    let dir = tempdir();
    let shared = shared_dir(dir.path());
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let link = shared.join("dir");
    symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    let out = link.join("run.csv");
    for args in [&["-q"][..], &["-q", "--force"][..]] {
        record_workload(&out, args, &["hold:10ms"])
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains("is a symbolic link of user 65534")
                    .and(predicate::str::contains("does not follow it")),
            );
    }
    memmon()
        .args(["plot", "x.csv", "-o"])
        .arg(link.join("p.svg"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does not follow it"));
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    // The same link made by root (or by the user memmon runs as) is followed.
    std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
    record_workload(&out, &["-q", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
    assert!(victim.join("run.csv").exists());
}

#[test]
fn a_fifo_planted_by_another_user_in_a_shared_directory_is_refused_without_force() {
    if !is_root() {
        skip(Need::Root, "planting as another user needs root");
        return;
    }
    let dir = tempdir();
    let shared = shared_dir(dir.path());
    let fifo = shared.join("run.csv");
    mkfifo(&fifo);
    std::os::unix::fs::lchown(&fifo, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut attacker = FifoReader::open(&fifo);
    record_workload(&fifo, &["-q"], &["hold:10ms"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "is a FIFO owned by user 65534, in a directory others can write",
        ));
    assert_eq!(attacker.drain(), b"");
    // --force: the user says it is meant.
    record_workload(&fifo, &["-q", "--force", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
    assert!(String::from_utf8(attacker.drain())
        .unwrap()
        .starts_with("unix_ms,"));
}

#[test]
fn a_sidecar_given_as_a_recording_names_its_recording() {
    let dir = tempdir();
    let out = dir.path().join("run.csv");
    record_workload(&out, &["-q", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
    for cmd in ["summary", "plot"] {
        let mut c = memmon();
        c.arg(cmd).arg(side(&out));
        if cmd == "plot" {
            c.arg("-o").arg(dir.path().join("p.svg"));
        }
        c.assert().code(2).stderr(predicate::str::contains(format!(
            "{} is the metadata sidecar of the recording {}, not a recording: give {}",
            side(&out).display(),
            out.display(),
            out.display()
        )));
    }
    std::fs::remove_file(&out).unwrap();
    memmon()
        .arg("summary")
        .arg(side(&out))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not there"));
}

#[test]
fn a_sidecar_swapped_for_a_link_to_a_fifo_mid_recording_is_replaced_at_the_end_not_opened() {
    let mut target = spawn_workload(&["alloc:4MiB", "hold:120s"]);
    let dir = tempdir();
    let out = dir.path().join("run.csv");
    let fifo = dir.path().join("trap");
    mkfifo(&fifo);
    let mut rec = StdCommand::new(memmon_path())
        .args([
            "record",
            "-q",
            "-i",
            "20ms",
            "--pid",
            &target.id().to_string(),
            "-o",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for(30.0, || side(&out).exists()));
    // No reader: following the link at the end would block memmon in open() for good.
    std::fs::remove_file(side(&out)).unwrap();
    symlink(&fifo, side(&out)).unwrap();
    // SAFETY: signalling a child we spawned.
    unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
    let mut status = None;
    wait_for(60.0, || {
        status = rec.try_wait().unwrap();
        status.is_some()
    });
    let status = status.unwrap_or_else(|| {
        let _ = rec.kill();
        panic!("memmon hung writing its sidecar at the end")
    });
    target.kill().unwrap();
    let _ = target.wait();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut rec.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(std::fs::symlink_metadata(side(&out)).unwrap().is_file());
    let s = summary_json(&out);
    assert!(s["ended"].as_str().unwrap().contains("SIGTERM"), "{s}");
}

#[test]
fn append_refuses_another_users_recording_in_a_shared_directory() {
    if !is_root() {
        skip(Need::Root, "planting as another user needs root");
        return;
    }
    let dir = tempdir();
    let shared = shared_dir(dir.path());
    let out = shared.join("run.csv");
    record_workload(&out, &["-q", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
    std::os::unix::fs::lchown(&out, Some(NOBODY), Some(NOBODY)).unwrap();
    let before = std::fs::read(&out).unwrap();
    record_workload(&out, &["-q", "--append"], &["hold:10ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("it is a recording of user 65534"));
    assert_eq!(std::fs::read(&out).unwrap(), before);
    // Its own (root's) recording there is appended to.
    std::os::unix::fs::lchown(&out, Some(0), Some(0)).unwrap();
    record_workload(&out, &["-q", "--append", "-i", "20ms"], &["hold:100ms"])
        .assert()
        .success();
}

#[test]
fn a_compressed_files_name_is_refused_for_plain_text_output() {
    // memmon writes plain text: `-o run.csv.gz` held plain CSV under a gzip name (zcat failed
    // on it), and `-o run.jsonl.zst` plain CSV too, the format taken from `.zst`.
    let dir = tempdir();
    for name in ["run.csv.gz", "run.jsonl.zst"] {
        let out = dir.path().join(name);
        memmon()
            .args(["record", "-q", "-o"])
            .arg(&out)
            .arg("--")
            .args(workload(&["hold:10ms"]))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                "{name} (-o): memmon writes it uncompressed"
            )));
        assert!(!out.exists(), "{name}");
    }
    let json = dir.path().join("runs.json.gz");
    memmon()
        .args(["bench", "-q", "-n", "1", "--export-json"])
        .arg(&json)
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "(--export-json): memmon writes it uncompressed",
        ));
}

#[test]
fn the_demo_refusing_an_existing_plot_advises_what_it_takes() {
    // It said "pass --force", which demo does not take.
    let dir = tempdir();
    std::fs::write(dir.path().join("mine.svg"), "x").unwrap();
    memmon()
        .current_dir(dir.path())
        .args(["demo", "-q", "-o", "mine.csv"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains(
                "mine.svg (the demo's plot) already exists: give -o another name",
            )
            .and(predicate::str::contains("--force").not()),
        );
    assert_eq!(std::fs::read(dir.path().join("mine.svg")).unwrap(), b"x");
}

#[test]
fn files_about_another_users_process_are_readable_by_their_owner_alone() {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        skip(Need::Root, "needs root to start a process as another user");
        return;
    }
    let dir = tempdir();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    // A workload running as nobody (65534), attached by root's memmon.
    let mut target = std::process::Command::new(outside_program("setpriv"))
        .arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={NOBODY}"))
        .args(["--clear-groups", "--"])
        .args(workload(&["alloc:8MiB", "hold:30s"]))
        .spawn()
        .unwrap();
    wait_for_rss(target.id(), 8 << 20);
    let theirs = dir.path().join("theirs.csv");
    memmon()
        .args([
            "record",
            "-q",
            "-i",
            "20ms",
            "--anatomy",
            "--duration",
            "300ms",
            "--pid",
        ])
        .arg(target.id().to_string())
        .arg("-o")
        .arg(&theirs)
        .assert()
        .success();
    let _ = target.kill();
    let _ = target.wait();
    for f in [theirs.clone(), side(&theirs), crate::anatomy::side(&theirs)] {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
    // What is made from such a recording keeps its privacy.
    let report = dir.path().join("theirs.html");
    memmon()
        .args(["report", "-o"])
        .arg(&report)
        .arg(&theirs)
        .assert()
        .success();
    assert_eq!(mode(&report), 0o600);

    // memmon's own user's process: as before (0644 less the umask).
    let mine = dir.path().join("mine.csv");
    record_workload(&mine, &["-q", "-i", "20ms"], &["alloc:1MiB", "hold:50ms"])
        .assert()
        .success();
    assert_eq!(mode(&mine) & 0o044, 0o044 & !umask(), "{:o}", mode(&mine));
    let report = dir.path().join("mine.html");
    memmon()
        .args(["report", "-o"])
        .arg(&report)
        .arg(&mine)
        .assert()
        .success();
    assert_eq!(mode(&report) & 0o044, 0o044 & !umask());
}

/// This process's umask (read without changing it, from /proc/self/status).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|u| u32::from_str_radix(u.trim(), 8).ok())
        .unwrap_or(0o022)
}
