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
    assert!(wait_for(30.0, || std::fs::metadata(out).is_ok_and(|m| m.len() > 400)));
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
        record_workload(&out, &["-q", "-i", "50ms"], &["hold:200ms"])
            .assert()
            .success();
        let first = summary_json(&out)["samples"].as_u64().unwrap();
        // What a SIGKILL in the middle of a write leaves.
        let mut f = std::fs::OpenOptions::new().append(true).open(&out).unwrap();
        std::io::Write::write_all(&mut f, b"1764460000000,0.25").unwrap();
        drop(f);
        let done = record_workload(&out, &["-i", "50ms", "--append"], &["hold:200ms"])
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
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
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
    assert!(
        claimed <= in_file,
        "claims {claimed}, the file holds {in_file}"
    );
}
