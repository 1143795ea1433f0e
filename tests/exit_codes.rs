//! The exit codes of docs/guide/exit-codes.md, each pinned through the real binary where no other test pins it: a
//! command that cannot be run (126), a signal while waiting for the target and during a bench
//! (128+N), and an output refused exiting 2 from every subcommand that writes a recording.
//! (Elsewhere: 0 throughout; 1 in output.rs, compare.rs, bench.rs; 2 in bad_input.rs; 3 in
//! record.rs, bench.rs, marks.rs; 7, 137, 127 in record.rs; 143 in record.rs and output.rs.)

use crate::util::*;
use predicates::prelude::*;

#[test]
fn a_command_that_cannot_be_run_exits_126_naming_it_and_leaves_no_recording() {
    let dir = tempdir();
    let script = dir.path().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap(); // mode 0644: no x bit
    let out = dir.path().join("r.csv");
    memmon()
        .args(["record", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&script)
        .assert()
        .code(126)
        .stderr(
            predicate::str::contains("cannot run")
                .and(predicate::str::contains("not-executable.sh"))
                .and(predicate::str::contains("Permission denied")),
        );
    assert!(!out.exists(), "no empty recording is left behind");
}

#[test]
fn a_signal_while_waiting_for_the_target_exits_128_plus_it_and_creates_nothing() {
    let dir = tempdir();
    let out = dir.path().join("w.csv");
    let rec = Running::spawn(&[
        "record",
        "--wait",
        "--name",
        "^no-such-program-for-memmon-xyz$",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        rec.wait_for_stderr("waiting for the target", 30.0),
        "{}",
        rec.stderr()
    );
    rec.signal(libc::SIGINT);
    let (status, stderr) = rec.finish();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("stopped while waiting for the target"),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn ctrl_c_stops_a_daemon_bench_with_130_and_still_writes_its_export() {
    let dir = tempdir();
    let mut daemon = spawn_workload(&["alloc:8MiB", "hold:120s"]);
    wait_for_rss(daemon.id(), 8 * MIB);
    let json = dir.path().join("bench.json");
    let pid = daemon.id().to_string();
    let bench = Running::spawn(&[
        "bench",
        "--pid",
        &pid,
        "-n",
        "3",
        "--export-json",
        json.to_str().unwrap(),
        "--",
        "sleep",
        "60",
    ]);
    // The bench says what it runs once its recorder (and its signal handling) is up.
    assert!(
        bench.wait_for_stderr("3 runs of: sleep 60", 30.0),
        "{}",
        bench.stderr()
    );
    assert!(wait_for(10.0, || catches(bench.id(), libc::SIGINT)));
    bench.signal(libc::SIGINT);
    let (status, stderr) = bench.finish();
    daemon.kill().unwrap();
    let _ = daemon.wait();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("bench interrupted by SIGINT"), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(report["runs"].is_array(), "{report}");
}

/// `-o -` onto a regular file whose metadata sidecar is already there: refused (exit 2) alike by
/// `record` and by `bench` (whose command runs once exited 1 for it).
#[test]
fn an_output_refused_is_exit_2_from_record_and_bench_alike() {
    let dir = tempdir();
    for sub in ["record", "bench"] {
        let out = dir.path().join(format!("{sub}.csv"));
        std::fs::write(&out, "").unwrap();
        std::fs::write(dir.path().join(format!("{sub}.csv.meta.json")), "{}\n").unwrap();
        let mut cmd = std::process::Command::new(memmon_path());
        cmd.arg(sub);
        if sub == "bench" {
            cmd.args(["-n", "1"]);
        }
        let o = cmd
            .args(["-q", "-o", "-", "--", "true"])
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{sub}: {err}");
        assert!(
            err.contains("the metadata sidecar of stdout's file"),
            "{sub}: {err}"
        );
    }
}

#[test]
fn gpu_required_and_unreadable_is_exit_2_from_record_and_a_command_bench_alike() {
    for args in [
        &["record", "--gpu", "-q", "--", "true"][..],
        &["bench", "--gpu", "-q", "-n", "1", "--", "true"][..],
    ] {
        let o = memmon().args(args).output().unwrap();
        if o.status.code() == Some(0) {
            eprintln!("NVML loaded on this machine: nothing to check");
            return;
        }
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--gpu: "), "{args:?}: {err}");
    }
}

#[test]
fn an_unknown_flag_exits_2_on_stderr_and_help_and_version_exit_0_on_stdout() {
    // memmon prints clap's messages itself (in one write): the streams and codes must stay
    // clap's.
    let o = memmon()
        .args(["record", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: unexpected argument '--no-such-flag' found\n")
            && err.contains("Usage: memmon record")
            && err.ends_with("For more information, try '--help'.\n")
            && !err.contains('\x1b'),
        "{err}"
    );
    for (args, first) in [
        (&["--help"][..], "Measure the memory"),
        (&["record", "--help"][..], "Record a process tree"),
        (&["--version"][..], "memmon "),
    ] {
        let o = memmon().args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(o.stderr.is_empty(), "{args:?}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.starts_with(first) && out.ends_with('\n') && !out.contains('\x1b'),
            "{args:?}: {out}"
        );
    }
}
