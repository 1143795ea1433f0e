//! Tests of how `memmon record` finds and keeps its target as real daemons make them: pidfiles
//! (PostgreSQL's, empty ones, FIFOs, devices), kernel threads and thread IDs, PID reuse behind
//! a stale pidfile, and the interval and duration flags.

use crate::util::*;
use predicates::prelude::*;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

/// Waits up to `secs` for `child` to exit; its status, or `None` if it is still running.
fn exited_within(child: &mut Child, secs: f64) -> Option<std::process::ExitStatus> {
    let mut status = None;
    wait_for(secs, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status
}

fn stderr_of(child: Child) -> String {
    String::from_utf8_lossy(&child.wait_with_output().unwrap().stderr).into_owned()
}

#[test]
fn a_postmaster_pid_file_names_the_daemon_on_its_first_line() {
    let dir = tempdir();
    let mut daemon = spawn_workload(&["alloc:12MiB", "hold:30s"]);
    wait_for_rss(daemon.id(), 12 * MIB);
    let pidfile = dir.path().join("postmaster.pid");
    std::fs::write(
        &pidfile,
        format!(
            "{}\n/var/lib/postgresql/15/main\n1764460000\n5432\n/var/run/postgresql\nlocalhost\n  5432001         0\nready   \n",
            daemon.id()
        ),
    )
    .unwrap();
    let out = dir.path().join("pg.csv");
    memmon()
        .args([
            "record",
            "-q",
            "-i",
            "50ms",
            "--duration",
            "300ms",
            "--pidfile",
        ])
        .arg(&pidfile)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    daemon.kill().unwrap();
    let _ = daemon.wait();
    assert!(column(&out, "rss_bytes").iter().all(|&r| r >= 12 * MIB));
}

#[test]
fn an_empty_pidfile_or_one_holding_no_pid_is_waited_on_with_wait() {
    // Empty: being written. Holding no PID: left behind or overwritten, as a stale one is
    // (exit 3 without --wait): both waited on until the daemon writes its PID.
    for held in ["", "starting\n"] {
        pidfile_waited_on(held);
    }
}

fn pidfile_waited_on(held: &str) {
    let dir = tempdir();
    let pidfile = dir.path().join("d.pid");
    std::fs::write(&pidfile, held).unwrap();
    let out = dir.path().join("w.csv");
    let rec = Running::spawn(&[
        "record",
        "--wait",
        "-i",
        "50ms",
        "--duration",
        "300ms",
        "--pidfile",
        pidfile.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        rec.wait_for_stderr("waiting for the target", 30.0),
        "{}",
        rec.stderr()
    );
    let mut daemon = spawn_workload(&["alloc:12MiB", "hold:30s"]);
    wait_for_rss(daemon.id(), 12 * MIB);
    std::fs::write(&pidfile, format!("{}\n", daemon.id())).unwrap();
    let (status, stderr) = rec.finish();
    daemon.kill().unwrap();
    let _ = daemon.wait();
    assert!(status.success(), "{stderr}");
    assert!(column(&out, "rss_bytes").iter().all(|&r| r >= 12 * MIB));
}

#[test]
fn an_empty_pidfile_without_wait_says_so() {
    let dir = tempdir();
    let pidfile = dir.path().join("d.pid");
    std::fs::write(&pidfile, "\n").unwrap();
    memmon()
        .args(["record", "--pidfile", pidfile.to_str().unwrap()])
        .assert()
        .failure()
        .stderr(predicate::str::contains("d.pid is empty").and(predicate::str::contains("--wait")));
}

#[test]
fn a_fifo_as_pidfile_is_refused_and_memmon_does_not_hang_on_it() {
    let dir = tempdir();
    let fifo = dir.path().join("fifo.pid");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut rec = spawn_memmon(&["record", "--wait", "--pidfile", fifo.to_str().unwrap()]);
    let status = match exited_within(&mut rec, 10.0) {
        Some(s) => s,
        None => {
            // Still blocked: it must at least stop on SIGTERM.
            // SAFETY: kill takes plain integers and touches no memory.
            unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
            let s = exited_within(&mut rec, 5.0);
            let _ = rec.kill();
            panic!("memmon hung on a FIFO pidfile (after SIGTERM: {s:?})");
        }
    };
    assert_eq!(status.code(), Some(2));
    let stderr = stderr_of(rec);
    assert!(
        stderr.contains("fifo.pid is a FIFO, not a regular file"),
        "{stderr}"
    );
}

#[test]
fn dev_zero_as_pidfile_is_a_clear_error_not_endless_reading() {
    memmon()
        .args(["record", "--pidfile", "/dev/zero"])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "pidfile /dev/zero is a character device, not a regular file (--pidfile)",
        ));
}

#[test]
fn a_kernel_thread_is_not_a_target() {
    // PID 2 is kthreadd, the parent of every kernel thread.
    memmon()
        .args(["record", "--pid", "2"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("PID 2 (kthreadd) is a kernel thread")
                .and(predicate::str::contains("(--pid)")),
        );
}

#[test]
fn a_thread_id_is_refused_naming_its_process() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() }).unwrap();
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().unwrap();
    let me = std::process::id();
    assert_ne!(tid as u32, me);
    memmon()
        .args(["record", "--pid", &tid.to_string()])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains(format!("PID {tid} is a thread of process {me}"))
                .and(predicate::str::contains(format!("give --pid {me}"))),
        );
    // A pidfile naming the thread: the advice is a command line that works, not
    // "--pidfile PID".
    let dir = tempdir();
    let pidfile = dir.path().join("t.pid");
    std::fs::write(&pidfile, format!("{tid}\n")).unwrap();
    memmon()
        .args(["record", "--pidfile"])
        .arg(&pidfile)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "give --pid {me}, its thread group leader (given by --pidfile)"
        )));
    stop_tx.send(()).unwrap();
    t.join().unwrap();
}

#[test]
fn an_interval_below_100us_is_refused_naming_the_flag() {
    memmon()
        .args(["record", "-i", "100ns", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--interval 100ns is below the shortest interval, 100us",
        ));
}

#[test]
fn a_duration_of_2s_at_1s_samples_until_2s() {
    let dir = tempdir();
    let out = dir.path().join("d.csv");
    let mut target = spawn_workload(&["alloc:4MiB", "hold:30s"]);
    memmon()
        .args(["record", "-q", "-i", "1s", "--duration", "2s", "--pid"])
        .arg(target.id().to_string())
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    target.kill().unwrap();
    let _ = target.wait();
    let (h, rows) = read_csv(&out);
    let i = h.iter().position(|c| c == "elapsed_s").unwrap();
    let last: f64 = rows.last().unwrap()[i].parse().unwrap();
    assert!(
        last >= 1.99,
        "last sample at {last} s of a 2 s duration: {rows:?}"
    );
    assert!(last < 2.5, "{rows:?}");
}

/// Starts `argv` as a process whose PID is exactly `pid` (clone3 with set_tid, as root).
/// `None` when the kernel refuses (not root, or the PID is taken).
fn spawn_with_pid(pid: i32, argv: &[String]) -> Option<i32> {
    use std::ffi::CString;
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_str()).unwrap())
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }
    let tid: libc::pid_t = pid;
    let args = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        set_tid: &tid as *const libc::pid_t as u64,
        set_tid_size: 1,
        ..CloneArgs::default()
    };
    // SAFETY: a fork-like clone3 (no CLONE_VM); the child only calls execv and _exit.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if r == 0 {
        // SAFETY: in the clone3 child, which only execs (argv built before the clone) or _exits.
        unsafe {
            libc::execv(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    (r > 0).then_some(r as i32)
}

fn reap(pid: i32) {
    // SAFETY: signalling and reaping our own child: plain integers and a null status pointer.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
}

fn contains_restart(out: &Path) -> bool {
    std::fs::read_to_string(out).unwrap().contains(",restart:")
}

#[test]
fn an_unrelated_process_that_reuses_a_stale_pidfile_s_pid_is_not_a_restart() {
    let dir = tempdir();
    let pidfile = dir.path().join("d.pid");
    let out = dir.path().join("reuse.csv");
    let mut daemon = spawn_workload(&["alloc:6MiB", "hold:60s"]);
    let pid = daemon.id() as i32;
    std::fs::write(&pidfile, format!("{pid}\n")).unwrap();
    let rec = spawn_memmon(&[
        "record",
        "-i",
        "50ms",
        "--duration",
        "4s",
        "--pidfile",
        pidfile.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(wait_for(5.0, || out.exists() && read_csv(&out).1.len() >= 3));
    // The daemon dies and leaves its pidfile; an unrelated 40 MiB process gets its PID.
    daemon.kill().unwrap();
    let _ = daemon.wait();
    let Some(intruder) = spawn_with_pid(pid, &workload(&["alloc:40MiB", "hold:60s"])) else {
        let _ = rec.wait_with_output();
        panic!("cannot start a process with PID {pid} (clone3 set_tid needs root)");
    };
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        !contains_restart(&out),
        "the PID's new owner was taken for a restart"
    );
    // The daemon comes back as that PID and rewrites its pidfile: now it is a restart.
    let tmp = dir.path().join("d.pid.new");
    std::fs::write(&tmp, format!("{pid}\n")).unwrap();
    std::fs::rename(&tmp, &pidfile).unwrap();
    let done = rec.wait_with_output().unwrap();
    reap(intruder);
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains(&format!(",restart:{pid}\n")), "{stderr}");
    assert_eq!(summary_json(&out)["restarts"], 1);
}

#[test]
fn a_pidfile_linked_to_a_secret_file_never_echoes_its_content() {
    let dir = tempdir();
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, "root:$6$s3cr3tSalt$hash:19000:0:99999:7:::\n").unwrap();
    let pidfile = dir.path().join("d.pid");
    std::os::unix::fs::symlink(&secret, &pidfile).unwrap();
    let no_secret = || {
        predicate::str::contains("s3cr3t")
            .not()
            .and(predicate::str::contains("root:").not())
    };
    memmon()
        .args(["record", "--pidfile"])
        .arg(&pidfile)
        .assert()
        .code(3)
        .stderr(
            predicate::str::contains("d.pid does not start with a PID")
                .and(predicate::str::contains(
                    "not shown: the pidfile is a symlink",
                ))
                .and(no_secret()),
        );
    // export's log says the same, as plainly.
    let mut export = std::process::Command::new(memmon_path())
        .args(["export", "--listen", "127.0.0.1:0", "--target"])
        .arg(format!("d=pidfile:{}", pidfile.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = export.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut seen = String::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let line = line.unwrap();
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("not found yet") {
                break;
            }
        }
        seen
    });
    assert!(
        wait_for(30.0, || reader.is_finished()),
        "export logged nothing about the target"
    );
    export.kill().unwrap();
    let _ = export.wait();
    let log = reader.join().unwrap();
    assert!(log.contains("does not start with a PID"), "{log}");
    assert!(no_secret().eval(log.as_str()), "{log}");
    // A pidfile whose first line is a number that is not a PID is named as it is.
    std::fs::remove_file(&pidfile).unwrap();
    std::fs::write(&pidfile, "-3\n").unwrap();
    memmon()
        .args(["record", "--pidfile"])
        .arg(&pidfile)
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "its first line is -3, not a PID above 0",
        ));
}

#[test]
fn a_pidfile_that_names_no_pid_exits_3_in_record_and_bench_as_a_stale_one_does() {
    let dir = tempdir();
    let garbage = dir.path().join("p.pid");
    std::fs::write(&garbage, "hello\n").unwrap();
    let stale = dir.path().join("s.pid");
    std::fs::write(&stale, "999999999\n").unwrap();
    let said = "p.pid does not start with a PID: its first line is \"hello\", not a number";
    for pidfile in [&garbage, &stale] {
        for args in [
            vec!["record", "--pidfile"],
            vec!["bench", "-n", "1", "--pidfile"],
        ] {
            let mut c = memmon();
            c.args(&args).arg(pidfile);
            if args[0] == "bench" {
                c.args(["--", "true"]);
            }
            let out = c.timeout(Duration::from_secs(20)).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(3),
                "{args:?} {}: {stderr}",
                pidfile.display()
            );
            assert!(
                stderr.contains(if pidfile == &garbage {
                    said
                } else {
                    "a stale pidfile?"
                }),
                "{stderr}"
            );
        }
    }
}

#[test]
fn a_zero_duration_or_pss_interval_is_refused_naming_the_flag() {
    // --duration 0 stopped a command after 82 us; --pss-every 0 read PSS every tick, the stall
    // --pss warns of.
    for (flag, extra) in [("--duration", &[][..]), ("--pss-every", &["--pss"][..])] {
        memmon()
            .args(["record", "-o", "/dev/null", flag, "0s"])
            .args(extra)
            .args(["--", "true"])
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains(flag)
                    .and(predicate::str::contains("'0s' must be above 0")),
            );
    }
    // A PSS setting without --pss was silently ignored.
    for flag in [
        &["--pss-every", "5s"][..],
        &["--pss-max-rss", "1GiB"],
        &["--pss-force"],
    ] {
        memmon()
            .args(["record", "-o", "/dev/null"])
            .args(flag)
            .args(["--", "true"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--pss"));
    }
}
