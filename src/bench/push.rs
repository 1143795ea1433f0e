//! `memmon bench --push URL`: each measured run's results to a Prometheus Pushgateway, so the
//! benchmark history lands in the Prometheus that scrapes it. One group per run, replaced by a
//! PUT: job `memmon_bench`, grouping labels `instance` (this host's name), `bench` (the
//! bench's name, `--push-name`, by default the client program's file name) and `run` (1..N).
//! A plain HTTP/1.0 client on std (the Pushgateway is an `http://` URL, usually on the LAN).

use super::{BenchReport, RunResult};
use crate::export::metrics::escape_label_value;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The Pushgateway job of every bench push.
pub const JOB: &str = "memmon_bench";

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("--push '{0}': only http://HOST:PORT[/PATH] URLs are supported")]
    BadUrl(String),
    #[error("--push {url}: {err}")]
    Io { url: String, err: std::io::Error },
    #[error("--push {url}: the Pushgateway answered {status}: {body}")]
    Refused {
        url: String,
        status: String,
        body: String,
    },
}

/// A parsed `http://host:port/prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushUrl {
    pub host: String,
    pub port: u16,
    pub prefix: String,
}

impl PushUrl {
    pub fn parse(url: &str) -> Result<PushUrl, PushError> {
        let bad = || PushError::BadUrl(url.to_string());
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad());
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h, p.parse().map_err(|_| bad())?)
            }
            _ => (authority, 9091),
        };
        Ok(PushUrl {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            prefix: path.trim_end_matches('/').to_string(),
        })
    }
}

/// URL-safe base64 (RFC 4648 §5) with padding, as the Pushgateway's `label@base64` takes it.
pub fn base64url(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// The group path of one run: `/metrics/job/memmon_bench/instance@base64/../bench@base64/../run/N`.
pub fn group_path(instance: &str, bench: &str, run: u32) -> String {
    // An empty value must be written as `=` in base64 form.
    let b64 = |v: &str| {
        if v.is_empty() {
            "=".to_string()
        } else {
            base64url(v.as_bytes())
        }
    };
    format!(
        "/metrics/job/{JOB}/instance@base64/{}/bench@base64/{}/run/{run}",
        b64(instance),
        b64(bench)
    )
}

/// One run's metrics in the Prometheus text format.
pub fn run_metrics(report: &BenchReport, r: &RunResult) -> String {
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, labels: &str, v: Option<f64>| {
        if let Some(v) = v {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{labels} {v}"
            );
        }
    };
    let p = r.peak_on(report.peak_basis);
    let labels = format!(
        "{{peak_source=\"{}\",peak_scope=\"{}\"}}",
        escape_label_value(p.source.key()),
        escape_label_value(p.scope.key())
    );
    gauge(
        "memmon_bench_run_peak_bytes",
        "The run's peak, on the bench's one basis: the tree's exact peak from its cgroup (peak_source cgroup), else the kernel's exact peak of the largest process (vmhwm, ru-maxrss; peak_scope says of what), else the largest sample (sampled).",
        &labels,
        Some(p.bytes as f64),
    );
    gauge(
        "memmon_bench_run_peak_exact",
        "1 when the run's peak is exact for its scope; 0 for a lower bound (sampled, or processes left the tree with no exit record read).",
        "",
        Some(f64::from(u8::from(p.exact))),
    );
    gauge(
        "memmon_bench_run_tree_peak_low_bytes",
        "For a tree whose peak is its largest process's: the tree's peak is at least this much.",
        "",
        p.tree_low_bytes.map(|v| v as f64),
    );
    gauge(
        "memmon_bench_run_tree_peak_high_bytes",
        "For a tree whose peak is its largest process's: the tree's peak is at most this much (the sum of its processes' VmHWM).",
        "",
        p.tree_high_bytes.map(|v| v as f64),
    );
    gauge(
        "memmon_bench_run_sampled_peak_bytes",
        "The largest RSS among the run's samples.",
        "",
        Some(r.facts.sampled_peak_rss_bytes as f64),
    );
    gauge(
        "memmon_bench_run_peak_over_floor_bytes",
        "The run's peak minus the daemon's RSS just before the run: what the run needed above the idle floor.",
        "",
        r.peak_over_floor_bytes.map(|v| v as f64),
    );
    gauge(
        "memmon_bench_run_wall_seconds",
        "Wall time of the run's client, in seconds.",
        "",
        Some(r.wall_s),
    );
    gauge(
        "memmon_bench_run_cpu_user_seconds",
        "User CPU time of the run: the daemon's tree, each process's own and its reaped children's (clock ticks of /proc/PID/stat), or without a daemon the command and the descendants it waited for (wait4).",
        "",
        r.daemon_user_s.or(r.command_user_s),
    );
    gauge(
        "memmon_bench_run_cpu_system_seconds",
        "System CPU time of the run, as memmon_bench_run_cpu_user_seconds.",
        "",
        r.daemon_system_s.or(r.command_system_s),
    );
    gauge(
        "memmon_bench_run_exit_code",
        "The client's exit code (-1 when a signal ended it).",
        "",
        Some(r.exit_code.unwrap_or(-1) as f64),
    );
    gauge(
        "memmon_bench_run_start_timestamp_seconds",
        "When the run started, in seconds since the Unix epoch.",
        "",
        Some(r.started_unix_ms as f64 / 1000.0),
    );
    gauge(
        "memmon_bench_runs_requested",
        "Measured runs the bench was asked for (-n).",
        "",
        Some(report.runs_requested as f64),
    );
    out
}

/// Pushes every measured run of `report`, each into its own group (PUT replaces the group).
/// Returns how many groups were pushed.
pub fn push(
    url: &str,
    bench: &str,
    instance: &str,
    report: &BenchReport,
) -> Result<usize, PushError> {
    let u = PushUrl::parse(url)?;
    for r in &report.runs {
        let path = format!("{}{}", u.prefix, group_path(instance, bench, r.run));
        put(&u, url, &path, run_metrics(report, r).as_bytes())?;
    }
    Ok(report.runs.len())
}

fn put(u: &PushUrl, url: &str, path: &str, body: &[u8]) -> Result<(), PushError> {
    let io = |err| PushError::Io {
        url: url.to_string(),
        err,
    };
    let addr = (u.host.as_str(), u.port)
        .to_socket_addrs()
        .map_err(io)?
        .next()
        .ok_or_else(|| io(std::io::Error::other("no address for the host")))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(io)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(io)?;
    s.set_write_timeout(Some(Duration::from_secs(30)))
        .map_err(io)?;
    let head = format!(
        "PUT {path} HTTP/1.0\r\nHost: {}:{}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\n\r\n",
        u.host,
        u.port,
        body.len()
    );
    s.write_all(head.as_bytes()).map_err(io)?;
    s.write_all(body).map_err(io)?;
    let mut reply = Vec::new();
    s.take(64 * 1024).read_to_end(&mut reply).map_err(io)?;
    let text = String::from_utf8_lossy(&reply);
    let status = text.split(' ').nth(1).unwrap_or("").to_string();
    if status.starts_with('2') {
        return Ok(());
    }
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).trim();
    Err(PushError::Refused {
        url: url.to_string(),
        status: if status.is_empty() {
            "nothing".into()
        } else {
            status
        },
        body: body.chars().take(300).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_to_host_port_and_prefix() {
        assert_eq!(
            PushUrl::parse("http://127.0.0.1:9091").unwrap(),
            PushUrl {
                host: "127.0.0.1".into(),
                port: 9091,
                prefix: String::new()
            }
        );
        assert_eq!(
            PushUrl::parse("http://gw/base/").unwrap(),
            PushUrl {
                host: "gw".into(),
                port: 9091,
                prefix: "/base".into()
            }
        );
        assert_eq!(PushUrl::parse("http://[::1]:9092").unwrap().host, "::1");
        for bad in [
            "https://gw:9091",
            "gw:9091",
            "http://",
            "http://gw:port",
            "http://u@gw",
        ] {
            let e = PushUrl::parse(bad).unwrap_err().to_string();
            assert!(e.contains("--push") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn base64url_matches_rfc4648_vectors_and_paths_carry_it() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64url(i.as_bytes()), o);
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8=");
        assert_eq!(
            group_path("gpu-01", "bench/single", 3),
            "/metrics/job/memmon_bench/instance@base64/Z3B1LTAx/bench@base64/YmVuY2gvc2luZ2xl/run/3"
        );
        assert!(group_path("", "x", 1).contains("instance@base64/=/"));
    }
}
