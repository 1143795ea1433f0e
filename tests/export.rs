//! Tests of `memmon export` with the real thing: the exporter follows a real test daemon and a
//! real Prometheus (Debian's `prometheus`) scrapes it every second; what Prometheus stored is
//! read back through its HTTP API.

use crate::util::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` over HTTP/1.0 with an optional Accept header: (status, body).
pub fn http_get(port: u16, path: &str, accept: Option<&str>) -> Option<(u16, String)> {
    http(port, "GET", path, accept, &[])
}

/// One HTTP/1.0 request: (status, body).
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    accept: Option<&str>,
    body: &[u8],
) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n");
    if let Some(a) = accept {
        req.push_str(&format!("Accept: {a}\r\n"));
    }
    if !body.is_empty() || method != "GET" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// Percent-encodes a query parameter.
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A killed-when-dropped child process.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `memmon export` on a free port, killed when dropped.
pub struct Exporter {
    pub port: u16,
    _child: Guard,
}

impl Exporter {
    pub fn start(args: &[&str]) -> Exporter {
        let port = free_port();
        let child = Command::new(memmon_path())
            .arg("export")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let e = Exporter {
            port,
            _child: Guard(child),
        };
        assert!(
            wait_for(30.0, || http_get(port, "/metrics", None)
                .is_some_and(|r| r.0 == 200)),
            "memmon export did not serve /metrics on port {port}"
        );
        e
    }

    pub fn metrics(&self) -> String {
        http_get(self.port, "/metrics", None).unwrap().1
    }
}

/// A real Prometheus scraping `targets` every second, with a temp data dir; killed when dropped.
pub struct Prometheus {
    pub port: u16,
    pub dir: tempfile::TempDir,
    _child: Guard,
}

impl Prometheus {
    pub fn start(jobs: &[(&str, u16)], extra_config: &str) -> Prometheus {
        let bin = outside_program("prometheus");
        let dir = tempdir();
        let mut cfg = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n",
        );
        cfg.push_str(extra_config);
        cfg.push_str("scrape_configs:\n");
        for (job, port) in jobs {
            cfg.push_str(&format!(
                "  - job_name: {job}\n    honor_labels: true\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
            ));
        }
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, cfg).unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let p = Prometheus {
            port,
            dir,
            _child: Guard(child),
        };
        assert!(
            wait_for(60.0, || http_get(port, "/-/ready", None)
                .is_some_and(|r| r.0 == 200)),
            "Prometheus did not get ready: {}",
            p.log()
        );
        p
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// GET an API path; the parsed JSON's `data`.
    pub fn api(&self, path: &str) -> serde_json::Value {
        let (status, body) = http_get(self.port, path, None)
            .unwrap_or_else(|| panic!("Prometheus did not answer {path}"));
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert_eq!(status, 200, "{path}: {body}");
        v["data"].clone()
    }

    /// An instant query's result vector.
    pub fn query(&self, q: &str) -> Vec<serde_json::Value> {
        let d = self.api(&format!("/api/v1/query?query={}", urlencode(q)));
        d["result"].as_array().cloned().unwrap_or_default()
    }

    /// The value of an instant query that returns one series, if it does.
    pub fn value(&self, q: &str) -> Option<f64> {
        let r = self.query(q);
        if r.len() != 1 {
            return None;
        }
        r[0]["value"][1].as_str()?.parse().ok()
    }

    /// Polls `q` until `cond` holds for its single value; that value.
    pub fn wait_value(&self, secs: f64, q: &str, cond: impl Fn(f64) -> bool) -> f64 {
        let mut last = None;
        let ok = wait_for(secs, || {
            last = self.value(q);
            last.is_some_and(&cond)
        });
        assert!(
            ok,
            "{q} stayed at {last:?} for {secs} s\nPrometheus log:\n{}",
            self.log()
        );
        last.unwrap()
    }
}

/// A test daemon (`memmon-test test-daemon`) that writes its pidfile; killed when dropped.
pub struct TestDaemon {
    pub child: Guard,
    pub socket: PathBuf,
    pub pidfile: PathBuf,
}

impl TestDaemon {
    pub fn start(dir: &Path) -> TestDaemon {
        TestDaemon::start_with(dir, &[])
    }

    /// With more flags of `memmon-test test-daemon` (`--fork`: a worker process per request).
    pub fn start_with(dir: &Path, extra: &[&str]) -> TestDaemon {
        let socket = dir.join("d.sock");
        let pidfile = dir.join("d.pid");
        let _ = std::fs::remove_file(&pidfile);
        let child = Command::new(memmon_test_path())
            .arg("test-daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--pidfile")
            .arg(&pidfile)
            .args(extra)
            .spawn()
            .unwrap();
        assert!(
            wait_for(20.0, || std::fs::read_to_string(&pidfile)
                .is_ok_and(|t| t.trim().parse::<i32>().is_ok())),
            "the test daemon did not start"
        );
        TestDaemon {
            child: Guard(child),
            socket,
            pidfile,
        }
    }

    /// Has the daemon touch `size` bytes, hold them `hold`, free them.
    pub fn spike(&self, size: &str, hold: &str) {
        let st = Command::new(memmon_test_path())
            .arg("test-client")
            .arg("--socket")
            .arg(&self.socket)
            .args(["--size", size, "--hold", hold])
            .status()
            .unwrap();
        assert!(st.success());
    }

    pub fn rss_bytes(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.child.0.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    }
}

/// Waits for the next scrape of `job` by Prometheus (its `up` sample gets a new timestamp).
fn wait_for_next_scrape(prom: &Prometheus, job: &str) {
    let q = format!("timestamp(up{{job=\"{job}\"}})");
    let first = prom.wait_value(30.0, &q, |_| true);
    prom.wait_value(30.0, &q, |t| t > first);
}

#[test]
fn a_50ms_300mib_spike_between_two_scrapes_shows_in_the_window_peak_within_3_percent_not_in_the_current_rss(
) {
    let dir = tempdir();
    let daemon = TestDaemon::start(dir.path());
    let exporter = Exporter::start(&[
        "--target",
        &format!("d={}", format_args!("pidfile:{}", daemon.pidfile.display())),
        "-i",
        "100ms",
        "--window",
        "4s",
        "--reset-peaks",
    ]);
    let prom = Prometheus::start(&[("memmon", exporter.port)], "");
    prom.wait_value(40.0, "memmon_target_up{target=\"d\"}", |v| v == 1.0);
    let spike = 300 * MIB;
    // On a busy machine a scrape may land on the one 100 ms tick that saw the spike: try again
    // (after the window has forgotten the last one) up to three times.
    let mut misses_current = false;
    for attempt in 1..=3 {
        prom.wait_value(30.0, "memmon_window_peak_rss_bytes{target=\"d\"}", |v| {
            v < (150 * MIB) as f64
        });
        let idle = daemon.rss_bytes();
        wait_for_next_scrape(&prom, "memmon");
        let t0 = Instant::now();
        daemon.spike("300MiB", "50ms");
        let expected = (idle + spike) as f64;
        let peak = prom.wait_value(
            30.0,
            "max_over_time(memmon_window_peak_rss_bytes{target=\"d\"}[20s])",
            |v| v > (150 * MIB) as f64,
        );
        assert!(
            (peak - expected).abs() <= 0.03 * expected,
            "attempt {attempt}: window peak {peak} B, expected {expected} B (idle {idle} B + 300 MiB) within 3%"
        );
        let range = t0.elapsed().as_secs() + 3;
        let current = prom
            .value(&format!(
                "max_over_time(memmon_rss_bytes{{target=\"d\"}}[{range}s])"
            ))
            .unwrap();
        if current < (150 * MIB) as f64 {
            misses_current = true;
            break;
        }
        eprintln!(
            "attempt {attempt}: a scrape caught the spike in the current RSS ({current} B); again"
        );
    }
    assert!(misses_current, "every scrape's current RSS showed the 50 ms spike: the test cannot tell the window peak from it");
}

#[test]
fn a_restarted_daemon_keeps_its_series_and_a_target_that_never_appears_is_reported_down() {
    let dir = tempdir();
    let daemon = TestDaemon::start(dir.path());
    let pidfile = daemon.pidfile.clone();
    let exporter = Exporter::start(&[
        "--target",
        &format!("d=pidfile:{}", pidfile.display()),
        "--target",
        &format!("never=pidfile:{}", dir.path().join("never.pid").display()),
        "-i",
        "100ms",
        "--window",
        "3s",
    ]);
    let prom = Prometheus::start(&[("memmon", exporter.port)], "");
    prom.wait_value(40.0, "memmon_target_up{target=\"d\"}", |v| v == 1.0);
    prom.wait_value(10.0, "memmon_target_up{target=\"never\"}", |v| v == 0.0);
    prom.wait_value(10.0, "memmon_rss_bytes{target=\"d\"}", |v| v > 0.0);
    let series = |prom: &Prometheus| -> Vec<String> {
        let d = prom.api(&format!(
            "/api/v1/series?match[]={}",
            urlencode("{__name__=~\"memmon_.+\",target=\"d\"}")
        ));
        let mut v: Vec<String> = d
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.sort();
        v
    };
    let before = series(&prom);
    assert!(before.len() >= 8, "{before:?}");
    drop(daemon);
    prom.wait_value(20.0, "memmon_target_up{target=\"d\"}", |v| v == 0.0);
    let daemon2 = TestDaemon::start(dir.path());
    prom.wait_value(30.0, "memmon_restarts_total{target=\"d\"}", |v| v == 1.0);
    prom.wait_value(10.0, "memmon_target_up{target=\"d\"}", |v| v == 1.0);
    // Wait a scrape more so every series of the new process has been stored.
    wait_for_next_scrape(&prom, "memmon");
    let after = series(&prom);
    assert_eq!(before, after, "a restart must not create series");
    assert!(
        after.iter().all(|s| !s.contains("\"pid\":")),
        "no series is labelled by PID: {after:?}"
    );
    // The exporter kept serving throughout and says the missing target is missing.
    let m = exporter.metrics();
    assert!(
        m.contains("memmon_target_up{target=\"never\",kind=\"pidfile\"} 0"),
        "{m}"
    );
    drop(daemon2);
}

#[test]
fn bad_targets_and_addresses_are_usage_errors_naming_the_flag() {
    for (args, says) in [
        (vec!["--target", "svc=port:80"], "unknown kind 'port'"),
        (vec!["--target", "nokind"], "--target"),
        (vec![], "--config"),
        (
            vec!["--target", "a=pid:1", "--listen", "localhost"],
            "--listen",
        ),
        (vec!["--target", "a=pid:1", "--target", "a=pid:2"], "'a'"),
        (
            vec!["--target", "a=pid:1", "-i", "1s", "--window", "500ms"],
            "--window",
        ),
    ] {
        memmon()
            .arg("export")
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(says));
    }
}

/// A real Pushgateway on a free port, killed when dropped.
pub struct Pushgateway {
    pub port: u16,
    _dir: tempfile::TempDir,
    _child: Guard,
}

impl Pushgateway {
    pub fn start() -> Pushgateway {
        let bin = outside_program("pushgateway");
        let dir = tempdir();
        let port = free_port();
        let child = Command::new(bin)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            wait_for(60.0, || http_get(port, "/-/ready", None)
                .is_some_and(|r| r.0 == 200)),
            "the Pushgateway did not get ready"
        );
        Pushgateway {
            port,
            _dir: dir,
            _child: Guard(child),
        }
    }
}

/// `memmon bench --pidfile D -n 3 --push URL -- test-client --size 40MiB,80MiB,120MiB`.
fn bench_push(daemon: &TestDaemon, gw: u16, name: &str) {
    memmon()
        .args(["bench", "-q", "-n", "3", "-i", "50ms", "--pidfile"])
        .arg(&daemon.pidfile)
        .args([
            "--push",
            &format!("http://127.0.0.1:{gw}"),
            "--push-name",
            name,
            "--",
        ])
        .arg(memmon_test_path())
        .args(["test-client", "--socket"])
        .arg(&daemon.socket)
        .args(["--size", "40MiB,80MiB,120MiB"])
        .assert()
        .success();
}

#[test]
fn bench_push_lands_each_run_in_the_pushgateway_and_in_prometheus() {
    let dir = tempdir();
    let daemon = TestDaemon::start(dir.path());
    let gw = Pushgateway::start();
    let prom = Prometheus::start(&[("pushgateway", gw.port)], "");
    bench_push(&daemon, gw.port, "single \"quoted\"/x");
    // The Pushgateway holds one group per run, each with its peak.
    let (_, text) = http_get(gw.port, "/metrics", None).unwrap();
    for run in 1..=3 {
        let line = text
            .lines()
            .find(|l| {
                l.starts_with("memmon_bench_run_peak_bytes{")
                    && l.contains(&format!("run=\"{run}\""))
            })
            .unwrap_or_else(|| panic!("no run {run} in the Pushgateway:\n{text}"));
        assert!(
            line.contains("job=\"memmon_bench\"")
                && line.contains("bench=\"single \\\"quoted\\\"/x\""),
            "{line}"
        );
    }
    // Prometheus scraped them: each run's peak is its size above the idle floor, exactly
    // (vmhwm) within 3%.
    for (run, mib) in [(1, 40u64), (2, 80), (3, 120)] {
        let q =
            format!("memmon_bench_run_peak_over_floor_bytes{{job=\"memmon_bench\",run=\"{run}\"}}");
        let v = prom.wait_value(40.0, &q, |_| true);
        let want = (mib * MIB) as f64;
        assert!(
            (v - want).abs() <= 0.03 * want,
            "run {run}: {v} B over the floor, want {want} B"
        );
    }
    assert_eq!(
        prom.query("memmon_bench_run_peak_bytes{job=\"memmon_bench\",peak_source=\"vmhwm\"}")
            .len(),
        3
    );
}

#[test]
fn bench_push_to_nothing_fails_naming_the_flag_after_writing_the_results() {
    let dir = tempdir();
    let daemon = TestDaemon::start(dir.path());
    let port = free_port();
    let json = dir.path().join("runs.json");
    memmon()
        .args(["bench", "-q", "-n", "1", "--pidfile"])
        .arg(&daemon.pidfile)
        .arg("--export-json")
        .arg(&json)
        .args(["--push", &format!("http://127.0.0.1:{port}"), "--"])
        .arg(memmon_test_path())
        .args(["test-client", "--socket"])
        .arg(&daemon.socket)
        .args(["--size", "1MiB"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("--push http://127.0.0.1"));
    assert!(json.exists(), "the results are written before the push");
    memmon()
        .args([
            "bench",
            "--pid",
            "1",
            "--push",
            "ftp://gw:9091",
            "--",
            "true",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "give the Pushgateway's http:// or https:// URL",
        ));
}

/// HTTPS for `--push` is the `push-https` feature (rustls and ring): a build without it refuses
/// an https:// URL before the bench starts, naming the feature; a build with it tries the push
/// (here to a port where nothing listens: exit 1 after the runs, naming the flag).
#[test]
fn an_https_push_needs_the_push_https_feature_and_says_so() {
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let out = memmon()
        .args(["bench", "-q", "-n", "1", "--push", &url, "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if cfg!(feature = "push-https") {
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&format!("--push {url}")), "{stderr}");
    } else {
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("built without HTTPS for --push (the cargo feature `push-https`)")
                && stderr.contains("--features push-https")
                && stderr.contains("over http://"),
            "{stderr}"
        );
        assert!(
            !stderr.contains("run 1/1"),
            "refused before any run: {stderr}"
        );
    }
}

/// The docs' dashboard, scrape config and alert rules, run for real: every panel query of
/// docs/grafana/memmon.json returns data from a Prometheus scraping memmon export and a
/// Pushgateway fed by `memmon bench --push`, and the alert of docs/prometheus/memmon-rules.yml
/// fires when a spike comes within 10% of the limit. As root, a real memory cgroup with a
/// 105 MiB limit and a 100 MiB workload in it is a cgroup target too: the cgroup panels return
/// data and its alert (within 10% of the cgroup's own limit) fires; without root the cgroup
/// panels are skipped, saying so.
#[test]
fn every_dashboard_query_returns_data_and_the_peak_alert_fires_near_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempdir();
    let daemon = TestDaemon::start(dir.path());
    let cgroup = crate::cgroup::memory_hierarchy().map(|base| {
        let cg = crate::cgroup::TestCgroup::new(&base, "dash");
        let limit = if base.ends_with("memory") {
            "memory.limit_in_bytes"
        } else {
            "memory.max"
        };
        std::fs::write(cg.0.join(limit), format!("{}", 105 * MIB)).unwrap();
        cg
    });
    let mut args = vec![
        "--target".to_string(),
        format!("d=pidfile:{}", daemon.pidfile.display()),
        "-i".into(),
        "100ms".into(),
        "--window".into(),
        "4s".into(),
    ];
    if let Some(cg) = &cgroup {
        args.extend(["--target".into(), format!("svc=cgroup:{}", cg.0.display())]);
    }
    let exporter = Exporter::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let _workload = cgroup.as_ref().map(|cg| {
        Guard(crate::cgroup::workload_in(
            &cg.0,
            &["alloc:100MiB", "hold:300s"],
        ))
    });
    let gw = Pushgateway::start();
    // The rules as documented, with the example's target and limit set to the test daemon's:
    // a limit of 320 MiB, so a 300 MiB spike is within 10% of it.
    let rules = std::fs::read_to_string(root.join("docs/prometheus/memmon-rules.yml")).unwrap();
    let example = "label_replace(vector(400 * 2^30), \"target\", \"cuzk\", \"\", \"\")";
    assert!(
        rules.contains(example),
        "the rules' example limit changed: update this test"
    );
    let rules = rules.replace(
        example,
        "label_replace(vector(320 * 2^20), \"target\", \"d\", \"\", \"\")",
    );
    let rules_path = dir.path().join("memmon-rules.yml");
    std::fs::write(&rules_path, rules).unwrap();
    let prom = Prometheus::start(
        &[("memmon", exporter.port), ("pushgateway", gw.port)],
        &format!("rule_files:\n  - {}\n", rules_path.display()),
    );
    prom.wait_value(40.0, "memmon_target_up{target=\"d\"}", |v| v == 1.0);
    bench_push(&daemon, gw.port, "dash");

    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("docs/grafana/memmon.json")).unwrap(),
    )
    .unwrap();
    // The target variable's query: label_values(memmon_target_up, target).
    let var = &dash["templating"]["list"][1];
    assert_eq!(var["definition"], "label_values(memmon_target_up, target)");
    let series = prom.api(&format!(
        "/api/v1/series?match[]={}",
        urlencode("memmon_target_up")
    ));
    assert!(series
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["target"] == "d"));
    let mut queries = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap().replace("$target", ".+");
            let title = panel["title"].as_str().unwrap();
            if cgroup.is_none() && expr.contains("memmon_cgroup_") {
                skip(
                    Need::MemoryCgroup,
                    &format!("without a cgroup target: panel '{title}': {expr}"),
                );
                continue;
            }
            let ok = wait_for(40.0, || !prom.query(&expr).is_empty());
            assert!(ok, "panel '{title}': {expr} returns no data");
            queries += 1;
        }
    }
    assert!(queries >= 12, "{queries} queries");

    // No alert while idle; a 300 MiB spike against a 320 MiB limit fires it.
    let alerts = "ALERTS{alertname=\"MemmonPeakNearLimit\",target=\"d\",alertstate=\"firing\"}";
    assert!(prom.query(alerts).is_empty());
    daemon.spike("300MiB", "50ms");
    assert!(
        wait_for(40.0, || !prom.query(alerts).is_empty()),
        "the peak alert did not fire:\n{}",
        prom.log()
    );
    let rules = prom.api("/api/v1/rules");
    assert!(rules.to_string().contains("MemmonTargetDown"), "{rules}");
    // The cgroup's 100 MiB against its own 105 MiB limit: no limit written in the rules.
    if cgroup.is_some() {
        let alert =
            "ALERTS{alertname=\"MemmonCgroupPeakNearLimit\",target=\"svc\",alertstate=\"firing\"}";
        assert!(
            wait_for(40.0, || !prom.query(alert).is_empty()),
            "the cgroup peak alert did not fire:\n{}",
            prom.log()
        );
        let d_alert = "ALERTS{alertname=\"MemmonCgroupPeakNearLimit\",target=\"d\"}";
        assert!(
            prom.query(d_alert).is_empty(),
            "a process target has no cgroup limit"
        );
    }
}

/// The value of `name{target="T",kind="cgroup"}` in a /metrics body, if there.
fn cgroup_sample(body: &str, name: &str, target: &str) -> Option<f64> {
    let prefix = format!("{name}{{target=\"{target}\",kind=\"cgroup\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().parse().unwrap())
}

fn read_bytes(f: &Path) -> u64 {
    std::fs::read_to_string(f).unwrap().trim().parse().unwrap()
}

/// A real memory cgroup (v1 here, or v2) with a 400 MiB limit and a workload of 100 MiB, then a
/// 50 ms spike of 200 MiB: /metrics shows the cgroup's usage and parts within a few % of the
/// kernel's files, the limit exactly, and the spike in the window peak (through the peak file,
/// reset every tick with --reset-peaks) but not in the usage. A cgroup target that does not
/// exist yet is up 0 until it is made, and the exporter serves all along.
#[test]
fn a_cgroup_target_exports_its_usage_limit_and_a_50ms_spike_in_the_window_peak() {
    let Some(base) = crate::cgroup::memory_hierarchy() else {
        return;
    };
    let v1 = base.ends_with("memory");
    let file = |v1_name: &'static str, v2_name: &'static str| if v1 { v1_name } else { v2_name };
    let cg = crate::cgroup::TestCgroup::new(&base, "export");
    std::fs::write(
        cg.0.join(file("memory.limit_in_bytes", "memory.max")),
        format!("{}", 400 * MIB),
    )
    .unwrap();
    let later_dir = cg.0.join("later");
    let exporter = Exporter::start(&[
        "--target",
        &format!("svc=cgroup:{}", cg.0.display()),
        "--target",
        &format!("later=cgroup:{}", later_dir.display()),
        "-i",
        "100ms",
        "--window",
        "30s",
        "--reset-peaks",
    ]);
    let body = exporter.metrics();
    assert!(
        body.contains("memmon_target_up{target=\"later\",kind=\"cgroup\"} 0"),
        "{body}"
    );
    let go = tempdir();
    let go_file = go.path().join("spike");
    let _w = Guard(crate::cgroup::workload_in(
        &cg.0,
        &[
            "alloc:100MiB",
            &format!("wait-file:{}", go_file.display()),
            "spike:200MiB:50ms",
            "hold:120s",
        ],
    ));
    // The later cgroup is made (inside the first: a child of a cgroup is a cgroup).
    std::fs::create_dir(&later_dir).unwrap();
    let later = crate::cgroup::TestCgroup(later_dir);
    let mut body = String::new();
    let up = wait_for(30.0, || {
        body = exporter.metrics();
        cgroup_sample(&body, "memmon_cgroup_anon_bytes", "svc")
            .is_some_and(|v| v >= (100 * MIB) as f64)
            && cgroup_sample(&body, "memmon_target_up", "later") == Some(1.0)
    });
    assert!(
        up,
        "the cgroup's 100 MiB or the later cgroup did not show:\n{body}"
    );
    let usage = read_bytes(&cg.0.join(file("memory.usage_in_bytes", "memory.current")));
    let get =
        |name| cgroup_sample(&body, name, "svc").unwrap_or_else(|| panic!("no {name}:\n{body}"));
    let bytes = get("memmon_cgroup_bytes");
    assert!(
        (bytes - usage as f64).abs() <= 0.03 * usage as f64,
        "memmon_cgroup_bytes {bytes} B, the kernel's usage {usage} B: not within 3%"
    );
    let anon = get("memmon_cgroup_anon_bytes");
    assert!(
        anon >= (100 * MIB) as f64 && anon <= 1.05 * (100 * MIB) as f64,
        "anon {anon} B for a 100 MiB workload"
    );
    assert!(get("memmon_cgroup_working_set_bytes") <= bytes);
    assert!(get("memmon_cgroup_file_bytes") <= bytes);
    assert_eq!(get("memmon_cgroup_limit_bytes"), (400 * MIB) as f64);
    assert_eq!(get("memmon_cgroup_oom_kills_total"), 0.0);
    assert!(
        !body.contains("memmon_rss_bytes{target=\"svc\""),
        "a cgroup target has no RSS:\n{body}"
    );
    // The spike: 100 + 200 MiB for 50 ms, between two 100 ms ticks or not.
    let idle = bytes;
    std::fs::write(&go_file, "").unwrap();
    let expected = idle + (200 * MIB) as f64;
    let seen = wait_for(30.0, || {
        body = exporter.metrics();
        cgroup_sample(&body, "memmon_cgroup_window_peak_bytes", "svc")
            .is_some_and(|v| v >= 0.97 * expected)
    });
    let peak = cgroup_sample(&body, "memmon_cgroup_window_peak_bytes", "svc").unwrap();
    assert!(
        seen && peak <= 1.03 * expected,
        "window peak {peak} B, expected {expected} B (usage {idle} B + 200 MiB) within 3%:\n{body}"
    );
    // The spike is over: the usage is back, the window still holds it, and the peak file was
    // reset since (--reset-peaks), so it no longer holds the spike.
    let back = wait_for(30.0, || {
        body = exporter.metrics();
        cgroup_sample(&body, "memmon_cgroup_bytes", "svc").is_some_and(|v| v < 0.8 * expected)
    });
    assert!(back, "the usage did not fall back after the spike:\n{body}");
    assert!(
        cgroup_sample(&body, "memmon_cgroup_window_peak_bytes", "svc").unwrap() >= 0.97 * expected
    );
    eprintln!(
        "cgroup: usage {bytes} B (kernel {usage} B), anon {anon} B, window peak {peak} B against {expected} B expected"
    );
    let peak_file = read_bytes(&cg.0.join(file("memory.max_usage_in_bytes", "memory.peak")));
    if v1 {
        assert!(
            (peak_file as f64) < 0.8 * expected,
            "memory.max_usage_in_bytes {peak_file} B still holds the spike: not reset"
        );
    }
    drop(later);
}

/// The value of an unlabelled sample of a /metrics body.
fn sample(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in\n{body}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_worker_that_peaks_and_exits_between_two_samples_is_in_the_window_peak() {
    // A worker process per request, gone within milliseconds: at 1 s samples only its exit
    // record tells the exporter of its 300 MiB.
    let dir = tempdir();
    let daemon = TestDaemon::start_with(dir.path(), &["--fork"]);
    let target = format!("d=pidfile:{}", daemon.pidfile.display());
    let exporter = Exporter::start(&["--target", &target, "-i", "1s", "--window", "60s"]);
    assert!(wait_for(20.0, || sample_of(
        &exporter.metrics(),
        "memmon_target_up"
    ) == Some(1.0)));
    daemon.spike("300MiB", "5ms");
    assert!(
        wait_for(10.0, || sample_of(
            &exporter.metrics(),
            "memmon_window_peak_rss_bytes"
        )
        .is_some_and(|v| v >= (300 * MIB) as f64)),
        "{}",
        exporter.metrics()
    );
    let body = exporter.metrics();
    let rss = sample_of(&body, "memmon_rss_bytes").unwrap();
    assert!(
        rss < (100 * MIB) as f64,
        "the daemon itself stays small: {rss}"
    );
    assert!(body.contains("\nmemmon_exit_records 1\n"), "{body}");
}

#[test]
fn a_child_born_after_the_exporter_began_counts_its_whole_mark_while_it_lives_on() {
    // A new child that spikes to 200 MiB before its first sample and stays: its VmHWM at that
    // sample was set since the previous one (it began after the exporter did), as `record`
    // counts it. The exporter once counted only a mark it had seen rise.
    let dir = tempdir();
    let go = dir.path().join("go");
    let t = memmon_test_path().display().to_string();
    // The child lives on until the test has its answer (`done`), however slowly a busy
    // machine starts it.
    let done = dir.path().join("done");
    let script = format!(
        "{t} workload wait-file:{go} hold:10ms; {t} workload spike:200MiB:20ms wait-file:{done}",
        go = go.display(),
        done = done.display()
    );
    let mut sh = std::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    let target = format!("w=pid:{}", sh.id());
    let exporter = Exporter::start(&["--target", &target, "-i", "1s", "--window", "60s"]);
    let up = wait_for(20.0, || {
        sample_of(&exporter.metrics(), "memmon_target_up") == Some(1.0)
    });
    std::fs::write(&go, "").unwrap();
    let seen = up
        && wait_for(60.0, || {
            sample_of(&exporter.metrics(), "memmon_window_peak_rss_bytes")
                .is_some_and(|v| v >= (200 * MIB) as f64)
        });
    let body = exporter.metrics();
    // The child ends once it sees `done`, and the shell with it: waited for, so that no child
    // outlives the test (its directory, `done` with it, goes when the test returns).
    std::fs::write(&done, "").unwrap();
    let _ = sh.wait();
    assert!(up, "the target never came up: {body}");
    assert!(seen, "{body}");
}

/// The value of the sample `name{...}` of a /metrics body with one target.
fn sample_of(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// `n` slow clients that each send a byte of a request every 300 ms (reconnecting when the
/// exporter closes them, as a slowloris tool does), until dropped.
struct Drippers {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    reconnects: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drippers {
    fn start(port: u16, n: usize) -> Drippers {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reconnects = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let connect = move || {
            let s = TcpStream::connect(("127.0.0.1", port)).ok()?;
            s.set_nonblocking(true).ok()?;
            Some(s)
        };
        let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| connect()).collect();
        let (st, rc) = (stop.clone(), reconnects.clone());
        let thread = std::thread::spawn(move || {
            let req = b"GET /metrics HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
            let mut at = 0;
            while !st.load(Ordering::SeqCst) {
                for c in conns.iter_mut() {
                    let mut drain = [0u8; 256];
                    let alive = c.as_mut().is_some_and(|s| {
                        s.read(&mut drain).is_err() && s.write(&req[at % req.len()..][..1]).is_ok()
                    });
                    if !alive {
                        rc.fetch_add(1, Ordering::SeqCst);
                        *c = connect();
                    }
                }
                at += 1;
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        Drippers {
            stop,
            reconnects,
            thread: Some(thread),
        }
    }
}

impl Drop for Drippers {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn slow_clients_dripping_a_byte_at_a_time_never_get_a_scrape_refused_nor_stop_the_sampling() {
    let dir = tempdir();
    let daemon = TestDaemon::start(dir.path());
    let exporter = Exporter::start(&[
        "--target",
        &format!("d=pidfile:{}", daemon.pidfile.display()),
        "-i",
        "100ms",
    ]);
    let ticks_before = sample(&exporter.metrics(), "memmon_sampler_ticks_total");
    let t0 = Instant::now();
    // 16 slow clients (the old bound: they made 33 of 40 scrapes get 503), then 200 (over the
    // bound of 64: each new client closes the one that has waited longest for its head).
    for n in [16, 200] {
        let drippers = Drippers::start(exporter.port, n);
        std::thread::sleep(Duration::from_secs(1));
        let mut statuses = Vec::new();
        for _ in 0..40 {
            statuses.push(http_get(exporter.port, "/metrics", None).map(|r| r.0));
            std::thread::sleep(Duration::from_millis(50));
        }
        let ok = statuses.iter().filter(|s| **s == Some(200)).count();
        assert_eq!(ok, 40, "{n} slow clients: {statuses:?}");
        if n == 200 {
            // The slow clients were there: those over the bound were closed (and came back).
            assert!(
                drippers
                    .reconnects
                    .load(std::sync::atomic::Ordering::SeqCst)
                    > 0
            );
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let body = exporter.metrics();
    let ticks = sample(&body, "memmon_sampler_ticks_total") - ticks_before;
    let missed = body
        .lines()
        .find_map(|l| l.strip_prefix("memmon_missed_ticks_total{target=\"d\",kind=\"pidfile\"} "))
        .unwrap()
        .parse::<f64>()
        .unwrap();
    assert!(
        ticks + missed >= elapsed / 0.1 * 0.8 && ticks >= 20.0,
        "{ticks} ticks and {missed} missed in {elapsed:.1} s of slow clients"
    );
}

/// The lines of `stderr` up to the first that `last` accepts (at most 30 s of them).
fn lines_until(stderr: std::process::ChildStderr, last: impl Fn(&str) -> bool) -> String {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let until = Instant::now() + Duration::from_secs(30);
    let mut said = Vec::new();
    while let Ok(line) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
        let done = last(&line);
        said.push(line);
        if done {
            break;
        }
    }
    said.join("\n")
}

#[test]
fn listening_beyond_loopback_warns_that_metrics_are_unauthenticated_and_wait_is_not_suggested() {
    let export = |listen: &str| {
        let mut child = Command::new(memmon_path())
            .args(["export", "--listen", listen])
            .args(["--target", "gone=name:^no-such-process-anywhere$"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let guard = Guard(child);
        // Up to the target's first report (the warning comes before, at the start).
        (lines_until(stderr, |l| l.contains("target gone:")), guard)
    };
    let port = free_port();
    let (said, _exporter) = export(&format!("0.0.0.0:{port}"));
    assert!(
        said.contains(&format!(
            "memmon export: warning: listening on 0.0.0.0:{port}, beyond loopback"
        )) && said.contains("no authentication"),
        "{said}"
    );
    assert!(
        said.contains(
            "target gone: not found yet: no process matches name:^no-such-process-anywhere$;"
        ),
        "{said}"
    );
    assert!(!said.contains("--wait"), "{said}");
    // On loopback: no warning.
    let (said, _exporter) = export(&format!("127.0.0.1:{}", free_port()));
    assert!(
        said.contains("memmon export: serving http://127.0.0.1:") && said.contains("target gone:"),
        "{said}"
    );
    assert!(!said.contains("warning"), "{said}");
}

#[test]
fn promtool_finds_nothing_to_lint_in_the_metrics_of_a_live_and_a_missing_target() {
    let dir = tempdir();
    let daemon = TestDaemon::start(dir.path());
    let exporter = Exporter::start(&[
        "--target",
        &format!("d=pidfile:{}", daemon.pidfile.display()),
        "--target",
        "gone=name:^no-such-process-anywhere$",
        "--target",
        "gone-cg=cgroup:/no-such-memmon-cgroup",
        // The root memory cgroup: readable without root where v1's holds the usage files.
        "--target",
        "all=cgroup:/",
        "--pss",
    ]);
    let v1 = Path::new("/sys/fs/cgroup/memory/memory.usage_in_bytes").exists();
    assert!(wait_for(20.0, || exporter
        .metrics()
        .contains("memmon_pss_bytes{target=\"d\"")));
    let body = exporter.metrics();
    let mut lint = Command::new(outside_program("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = lint.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}\n{body}"
    );
    assert!(
        body.contains("memmon_target_up{target=\"gone\",kind=\"name\"} 0"),
        "{body}"
    );
    assert!(
        body.contains("memmon_target_up{target=\"gone-cg\",kind=\"cgroup\"} 0"),
        "{body}"
    );
    if v1 {
        assert!(
            body.contains("memmon_cgroup_bytes{target=\"all\",kind=\"cgroup\"} "),
            "{body}"
        );
    }
}
