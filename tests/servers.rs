//! memmon against real servers from Debian packages, started on 127.0.0.1 by the tests and
//! stopped by them (a guard kills each server even when an assertion fails): Redis, whose
//! BGSAVE forks a child that shares every page with its parent, and PostgreSQL, whose
//! backends all map one shared_buffers segment. memmon's numbers are held against the
//! servers' own (`INFO memory`, `INFO persistence`) and against PSS sums read by the test.

use crate::util::*;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A server process, stopped (SIGTERM, then SIGKILL) and reaped when dropped.
struct Server {
    child: Child,
    name: &'static str,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill takes plain integers and touches no memory.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop on SIGTERM; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A memmon recorder started in the background, stopped with SIGINT (and reaped) when dropped.
struct Recorder {
    child: Option<Child>,
}

impl Recorder {
    fn start(args: &[&str]) -> Recorder {
        let child = Command::new(memmon_path())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Recorder { child: Some(child) }
    }

    /// Stops it with SIGINT and returns what it printed.
    fn stop(mut self) -> Output {
        let child = self.child.take().unwrap();
        // SAFETY: kill takes plain integers and touches no memory.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        child.wait_with_output().unwrap()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A TCP port free on 127.0.0.1 at this moment.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `field:value` lines of Redis's INFO, as a number.
fn info_field(info: &str, field: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO:\n{info}"))
        .trim()
        .parse()
        .unwrap()
}

/// The rows of a CSV recording as (elapsed_s, rss_bytes, processes, pss_bytes). While memmon
/// writes, the last line may be partial: a row that does not parse whole is left out.
fn rows(path: &Path) -> Vec<(f64, u64, u32, Option<u64>)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines = text.lines();
    let Some(head) = lines.next() else {
        return Vec::new();
    };
    let h: Vec<&str> = head.split(',').collect();
    let col = |n: &str| h.iter().position(|c| *c == n).unwrap();
    let (e, r, p, s) = (
        col("elapsed_s"),
        col("rss_bytes"),
        col("processes"),
        col("pss_bytes"),
    );
    lines
        .filter_map(|line| {
            let row: Vec<&str> = line.split(',').collect();
            if row.len() != h.len() {
                return None;
            }
            Some((
                row[e].parse().ok()?,
                row[r].parse().ok()?,
                row[p].parse().ok()?,
                row[s].parse().ok(),
            ))
        })
        .collect()
}

#[test]
fn redis_bgsave_fork_is_counted_twice_by_rss_and_once_by_pss() {
    let server_bin = outside_program("redis-server");
    let cli_bin = outside_program("redis-cli");
    let dir = tempdir();
    let port = free_port().to_string();
    let server = Server {
        child: Command::new(&server_bin)
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--daemonize", "no", "--dir"])
            .arg(dir.path())
            .args(["--enable-debug-command", "yes", "--rdbcompression", "no"])
            // A 1 µs sleep every 50 keys on average (a negative delay): 4,000 sleeps that keep
            // the BGSAVE child alive for a good second even on a fast disk, not minutes on a slow one.
            .args(["--rdb-key-save-delay", "-50", "--loglevel", "warning"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
        name: "redis-server",
    };
    let cli = |args: &[&str]| {
        run(Command::new(&cli_bin)
            .args(["-h", "127.0.0.1", "-p", &port])
            .args(args))
    };
    assert!(
        wait_for(20.0, || Command::new(&cli_bin)
            .args(["-h", "127.0.0.1", "-p", &port, "ping"])
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"PONG"))),
        "redis-server did not answer on 127.0.0.1:{port}"
    );
    // About 200 MiB of values.
    cli(&["DEBUG", "POPULATE", "200000", "key", "1000"]);
    let before = cli(&["INFO", "memory"]);
    let used = info_field(&before, "used_memory");
    let used_rss = info_field(&before, "used_memory_rss");
    assert!(used > 180 * MIB, "redis holds only {used} bytes");

    let out = dir.path().join("redis.csv");
    let pid = server.child.id().to_string();
    let rec = Recorder::start(&[
        "record",
        "--pid",
        &pid,
        "-i",
        "50ms",
        "--pss",
        "--pss-every",
        "100ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        wait_for(20.0, || out.exists()
            && rows(&out).iter().filter(|r| r.3.is_some()).count() >= 2),
        "memmon wrote no PSS rows"
    );
    let saves = info_field(&cli(&["INFO", "persistence"]), "rdb_saves");
    cli(&["BGSAVE"]);
    let mut persistence = String::new();
    assert!(
        wait_for(50.0, || {
            persistence = cli(&["INFO", "persistence"]);
            info_field(&persistence, "rdb_bgsave_in_progress") == 0
                && info_field(&persistence, "rdb_saves") > saves
        }),
        "BGSAVE did not finish:\n{persistence}"
    );
    assert!(
        persistence.contains("rdb_last_bgsave_status:ok"),
        "{persistence}"
    );
    // A few more rows after the child is gone.
    let rows_then = rows(&out).len();
    assert!(wait_for(20.0, || rows(&out).len() >= rows_then + 5));
    let printed = rec.stop();
    let stderr = String::from_utf8_lossy(&printed.stderr).to_string();
    let cow = info_field(&persistence, "rdb_last_cow_size");
    drop(server);

    let rows = rows(&out);
    let alone: Vec<_> = rows.iter().filter(|r| r.2 == 1).collect();
    let forked: Vec<_> = rows.iter().filter(|r| r.2 == 2).collect();
    assert!(
        !forked.is_empty(),
        "no row saw the BGSAVE child; rows: {rows:?}"
    );
    // Alone, memmon's RSS is Redis's own used_memory_rss (the same VmRSS, read moments apart).
    let rss_alone = alone[0].1;
    assert!(
        (rss_alone as f64 - used_rss as f64).abs() < 0.05 * used_rss as f64,
        "memmon RSS {rss_alone} vs INFO used_memory_rss {used_rss}"
    );
    assert!(
        rss_alone >= used,
        "RSS {rss_alone} below used_memory {used}"
    );
    // The fork's RSS sum counts every shared page twice: it climbs by about the whole heap...
    let rss_forked = forked.iter().map(|r| r.1).max().unwrap();
    assert!(
        rss_forked > rss_alone + used * 8 / 10,
        "RSS sum with the child {rss_forked} vs alone {rss_alone} (used_memory {used})"
    );
    // ...while PSS counts each page once: it rises by the copy-on-write cost Redis reports, plus
    // the child's own small buffers.
    let pss_alone = alone.iter().find_map(|r| r.3).unwrap();
    let pss_forked = forked
        .iter()
        .filter_map(|r| r.3)
        .max()
        .unwrap_or_else(|| panic!("no PSS read while the child lived; rows: {rows:?}"));
    assert!(
        pss_forked < pss_alone + cow + 64 * MIB,
        "PSS with the child {pss_forked} vs alone {pss_alone}, rdb_last_cow_size {cow}"
    );
    assert!(pss_forked < rss_forked * 6 / 10);
    eprintln!(
        "redis: used_memory {used}, used_memory_rss {used_rss}, rdb_last_cow_size {cow}; memmon: RSS alone {rss_alone}, RSS sum with the child {rss_forked}, PSS alone {pss_alone}, PSS sum with the child {pss_forked} (bytes)"
    );

    let text = summary_text(&out);
    assert!(
        text.contains("RSS sum over 2 processes, shared pages counted in each"),
        "{text}"
    );
    assert!(text.contains("peak PSS"), "{text}");
    assert!(text.contains("redis-server"), "{text}");
    // The summary printed at the end says the same.
    assert!(stderr.contains("shared pages counted in each"), "{stderr}");
}

/// The user id and group id of a system user (from /etc/passwd).
fn user_ids(name: &str) -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f[0] == name).then(|| (f[2].parse().unwrap(), f[3].parse().unwrap()))
        })
        .unwrap_or_else(|| panic!("no user {name}: install the Debian package postgresql"))
}

/// The sum of Pss over a process and its descendants, from smaps_rollup, in bytes.
fn pss_sum_of_tree(root: i32) -> (u64, u32) {
    let mut pids = vec![root];
    let mut i = 0;
    while i < pids.len() {
        let p = pids[i];
        for task in std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let kids = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            pids.extend(
                kids.split_whitespace()
                    .filter_map(|k| k.parse::<i32>().ok()),
            );
        }
        i += 1;
    }
    let mut sum = 0;
    let mut n = 0;
    for p in &pids {
        let Ok(rollup) = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")) else {
            continue;
        };
        if let Some(kb) = rollup.lines().find_map(|l| l.strip_prefix("Pss:")) {
            sum += kb
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap()
                * 1024;
            n += 1;
        }
    }
    (sum, n)
}

#[test]
fn postgres_backends_sharing_buffers_are_summed_once_by_pss() {
    let initdb = outside_program("initdb");
    let postgres = outside_program("postgres");
    let psql = outside_program("psql");
    let (uid, gid) = user_ids("postgres");
    let dir = tempdir();
    let chown = |p: &Path| std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
    chown(dir.path());
    let data = dir.path().join("data");
    let sock = dir.path().join("sock");
    std::fs::create_dir(&sock).unwrap();
    chown(&sock);
    let as_postgres = |exe: &Path| {
        let mut c = Command::new(exe);
        c.uid(uid)
            .gid(gid)
            .env("HOME", dir.path())
            .current_dir(dir.path());
        c
    };
    run(as_postgres(&initdb)
        .args([
            "-D",
            data.to_str().unwrap(),
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
        ])
        .stdout(Stdio::null()));
    let port = free_port().to_string();
    let server = Server {
        child: as_postgres(&postgres)
            .args([
                "-D",
                data.to_str().unwrap(),
                "-k",
                sock.to_str().unwrap(),
                "-p",
                &port,
            ])
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "shared_buffers=128MB",
            ])
            .args([
                "-c",
                "fsync=off",
                "-c",
                "huge_pages=off",
                "-c",
                "max_connections=20",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        name: "postgres",
    };
    let sql = |q: &str| {
        let mut c = as_postgres(&psql);
        c.args([
            "-h",
            sock.to_str().unwrap(),
            "-p",
            &port,
            "-U",
            "postgres",
            "-X",
            "-q",
            "-At",
        ])
        .args(["-d", "postgres", "-c", q]);
        c
    };
    assert!(
        wait_for(30.0, || sql("select 1")
            .output()
            .is_ok_and(|o| o.status.success())),
        "postgres did not accept connections on port {port}"
    );
    // Two tables of about 28 MiB: each under a quarter of shared_buffers, so a sequential scan
    // reads them into the shared buffers (not through a small ring), and every backend that
    // scans them maps those pages.
    run(&mut sql(
        "create table t1 as select g, repeat('x', 200) as pad from generate_series(1, 120000) g; \
         create table t2 as select * from t1;",
    ));

    let out = dir.path().join("postgres.csv");
    let pid = server.child.id().to_string();
    let rec = Recorder::start(&[
        "record",
        "--pid",
        &pid,
        "-i",
        "100ms",
        "--pss",
        "--pss-every",
        "300ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        wait_for(20.0, || out.exists() && !rows(&out).is_empty()),
        "memmon wrote no rows"
    );
    // Six sessions scan both tables, then hold their connection while they are measured.
    let sessions: Vec<Child> = (0..6)
        .map(|_| {
            sql("select count(*) from t1; select count(*) from t2; select count(*) from t1; select pg_sleep(8);")
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let postmaster = server.child.id() as i32;
    // While they sleep: the PSS sum of the server's processes, read by the test itself, the
    // largest of its reads with every session connected (11 processes or more), as memmon's
    // below is the largest of its rows with them all: on a busy machine the sessions connect
    // and scan at different times, so a single read may fall before the last one did.
    let mut own = (0, 0);
    assert!(
        wait_for(40.0, || {
            let read = pss_sum_of_tree(postmaster);
            if read.1 >= 11 && read.0 > own.0 {
                own = read;
            }
            let rows = rows(&out);
            own.1 >= 11
                && rows.iter().any(|r| r.2 >= 11 && r.3.is_some())
                && rows.last().is_some_and(|r| r.2 >= 11 && r.1 > 300 * MIB)
        }),
        "the sessions did not all connect and scan; rows: {:?}",
        rows(&out).last()
    );
    for mut s in sessions {
        assert!(s.wait().unwrap().success());
    }
    let printed = rec.stop();
    let stderr = String::from_utf8_lossy(&printed.stderr).to_string();
    drop(server);

    let rows = rows(&out);
    let busy: Vec<_> = rows.iter().filter(|r| r.2 >= 11 && r.3.is_some()).collect();
    assert!(!busy.is_empty(), "no PSS read with the sessions connected");
    let (rss, pss) = busy
        .iter()
        .map(|r| (r.1, r.3.unwrap()))
        .max_by_key(|r| r.0)
        .unwrap();
    // Each backend's RSS counts the shared buffers it touched (about 56 MiB); PSS divides them.
    assert!(
        pss * 2 < rss,
        "PSS sum {pss} not well below RSS sum {rss}: {busy:?}"
    );
    // memmon's PSS sum is the tree's own PSS sum, read by the test moments apart.
    let (own_sum, own_n) = own;
    assert!(own_n >= 11, "the test read PSS of {own_n} processes");
    let pss_max = busy.iter().map(|r| r.3.unwrap()).max().unwrap();
    assert!(
        (pss_max as f64) > 0.7 * own_sum as f64 && (pss_max as f64) < 1.4 * own_sum as f64,
        "memmon's PSS sum {pss_max} vs the test's {own_sum} over {own_n} processes"
    );

    eprintln!(
        "postgres: memmon RSS sum {rss} with PSS sum {pss} at the largest busy row; PSS sums: memmon {pss_max}, the test's {own_sum} over {own_n} processes (bytes)"
    );
    let text = summary_text(&out);
    assert!(
        text.contains("processes, shared pages counted in each;"),
        "{text}"
    );
    assert!(text.contains("(each page once)"), "{text}");
    // Whether a PSS read fell at the RSS peak is up to the scheduler; the summary names the
    // largest read "peak PSS" only when one did (within 5% of the peak's RSS).
    let peak_rss = rows.iter().map(|r| r.1).max().unwrap();
    let read_rss = rows
        .iter()
        .filter(|r| r.3.is_some())
        .map(|r| r.1)
        .max()
        .unwrap();
    if read_rss as f64 >= 0.95 * peak_rss as f64 {
        assert!(text.contains("peak PSS"), "{text}");
    } else {
        // Whether the largest read came at the idle floor ("PSS at idle") or above it ("PSS
        // read") is up to the scheduler too; either way none was at the peak.
        assert!(
            (text.contains("PSS read") || text.contains("PSS at idle"))
                && text.contains("none at the RSS peak"),
            "{text}"
        );
    }
    assert!(text.contains("postgres"), "{text}");
    assert!(stderr.contains("shared pages counted in each"), "{stderr}");
}
