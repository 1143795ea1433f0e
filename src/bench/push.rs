//! `memmon bench --push URL`: each measured run's results to a Prometheus Pushgateway, so the
//! benchmark history lands in the Prometheus that scrapes it. One group per run, replaced by a
//! PUT: job `memmon_bench`, grouping labels `instance` (this host's name), `bench` (the
//! bench's name, `--push-name`, by default the client program's file name) and `run` (1..N).
//! The HTTP client is `ureq` (timeouts, IPv6 hosts), built in with the `push` feature (a
//! default) for http://, and with `push-https` for https:// (rustls and ring, left out of a
//! default build): `PushUrl::check_built` refuses what this build cannot send, naming the feature.

use super::{BenchReport, RunResult};
use crate::export::metrics::escape_label_value;
use base64::Engine as _;
use std::fmt::Write as _;

/// The Pushgateway job of every bench push.
pub const JOB: &str = "memmon_bench";

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("--push '{0}': give the Pushgateway's http:// or https:// URL, HOST[:PORT][/PATH], without user info")]
    BadUrl(String),
    #[error("--push {url}: {err}")]
    Http { url: String, err: String },
    #[error("--push {url}: the Pushgateway answered {status}: {body}")]
    Refused {
        url: String,
        status: String,
        body: String,
    },
    /// This memmon was built without the feature the URL needs (`push`, or `push-https` for an
    /// https:// URL).
    #[error("--push {url}: this memmon was built without {what} (the cargo feature `{feature}`); install it with `cargo install --locked --features {feature} ...`{alternative}")]
    NotBuilt {
        url: String,
        what: &'static str,
        feature: &'static str,
        alternative: &'static str,
    },
}

impl crate::error::Classified for PushError {
    fn class(&self) -> crate::exit::Class {
        match self {
            PushError::BadUrl(_) | PushError::NotBuilt { .. } => crate::exit::Class::Usage,
            PushError::Http { .. } | PushError::Refused { .. } => crate::exit::Class::Failure,
        }
    }
}

/// A parsed `--push` URL: `http://host:port/prefix` (`https://` too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushUrl {
    /// `http` or `https`.
    pub scheme: String,
    /// The host and port as written in a URL (an IPv6 address in brackets); port 9091 when
    /// none was given.
    pub authority: String,
    pub prefix: String,
}

impl PushUrl {
    pub fn parse(url: &str) -> Result<PushUrl, PushError> {
        let bad = || PushError::BadUrl(url.to_string());
        let uri: http::Uri = url.parse().map_err(|_| bad())?;
        let scheme = match uri.scheme_str() {
            Some(s @ ("http" | "https")) => s.to_string(),
            _ => return Err(bad()),
        };
        let auth = uri.authority().ok_or_else(bad)?;
        let text = auth.as_str();
        // After the host (an IPv6 address in brackets), at most `:PORT` with a numeric port.
        let after_host = match text.strip_prefix('[') {
            Some(v6) => v6.split_once(']').map(|(_, rest)| rest).ok_or_else(bad)?,
            None => text.find(':').map_or("", |i| &text[i..]),
        };
        let port = match after_host.strip_prefix(':') {
            Some(p) => Some(p.parse::<u16>().map_err(|_| bad())?),
            None if after_host.is_empty() => None,
            None => return Err(bad()),
        };
        if text.contains('@') || auth.host().is_empty() {
            return Err(bad());
        }
        // A port left out is the Pushgateway's own, 9091.
        let authority = match port {
            Some(_) => text.to_string(),
            None => format!("{text}:9091"),
        };
        if uri.query().is_some() {
            return Err(bad());
        }
        Ok(PushUrl {
            scheme,
            authority,
            prefix: uri.path().trim_end_matches('/').to_string(),
        })
    }

    /// Refuses a URL this build cannot push to: any without the `push` feature, an https:// one
    /// without `push-https`.
    pub fn check_built(&self, url: &str) -> Result<(), PushError> {
        let not_built = |what, feature, alternative| PushError::NotBuilt {
            url: url.to_string(),
            what,
            feature,
            alternative,
        };
        if !cfg!(feature = "push") {
            return Err(not_built("an HTTP client for --push", "push", ""));
        }
        if self.scheme == "https" && !cfg!(feature = "push-https") {
            return Err(not_built(
                "HTTPS for --push",
                "push-https",
                ", or push to the Pushgateway over http://",
            ));
        }
        Ok(())
    }

    /// The URL of one group's path below the prefix.
    #[cfg_attr(not(feature = "push"), allow(dead_code))]
    fn at(&self, path: &str) -> String {
        format!("{}://{}{}{path}", self.scheme, self.authority, self.prefix)
    }
}

/// URL-safe base64 (RFC 4648 §5) with padding, as the Pushgateway's `label@base64` takes it.
pub fn base64url(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE.encode(data)
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
    u.check_built(url)?;
    send(&u, url, bench, instance, report)
}

#[cfg(feature = "push")]
fn send(
    u: &PushUrl,
    url: &str,
    bench: &str,
    instance: &str,
    report: &BenchReport,
) -> Result<usize, PushError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(std::time::Duration::from_secs(10)))
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .http_status_as_error(false)
        .build()
        .into();
    for r in &report.runs {
        let to = u.at(&group_path(instance, bench, r.run));
        put(&agent, url, &to, run_metrics(report, r))?;
    }
    Ok(report.runs.len())
}

/// Without the `push` feature, `check_built` has refused every URL before this.
#[cfg(not(feature = "push"))]
fn send(u: &PushUrl, url: &str, _: &str, _: &str, _: &BenchReport) -> Result<usize, PushError> {
    u.check_built(url).map(|()| 0)
}

#[cfg(feature = "push")]
fn put(agent: &ureq::Agent, url: &str, to: &str, body: String) -> Result<(), PushError> {
    let http = |err: ureq::Error| PushError::Http {
        url: url.to_string(),
        err: err.to_string(),
    };
    let mut reply = agent
        .put(to)
        .header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        .send(body)
        .map_err(http)?;
    let status = reply.status();
    if status.is_success() {
        return Ok(());
    }
    let body = reply
        .body_mut()
        .with_config()
        .limit(64 * 1024)
        .read_to_string()
        .unwrap_or_default();
    Err(PushError::Refused {
        url: url.to_string(),
        status: status.to_string(),
        body: body.trim().chars().take(300).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_to_scheme_authority_and_prefix() {
        let url = |scheme: &str, authority: &str, prefix: &str| PushUrl {
            scheme: scheme.into(),
            authority: authority.into(),
            prefix: prefix.into(),
        };
        assert_eq!(
            PushUrl::parse("http://127.0.0.1:9091").unwrap(),
            url("http", "127.0.0.1:9091", "")
        );
        assert_eq!(
            PushUrl::parse("http://gw/base/").unwrap(),
            url("http", "gw:9091", "/base")
        );
        assert_eq!(
            PushUrl::parse("https://gw.example:443/x").unwrap(),
            url("https", "gw.example:443", "/x")
        );
        // An IPv6 address keeps its brackets, in the URL and in the Host header.
        let v6 = PushUrl::parse("http://[::1]/").unwrap();
        assert_eq!(v6, url("http", "[::1]:9091", ""));
        assert_eq!(v6.at("/metrics/job/j"), "http://[::1]:9091/metrics/job/j");
        for bad in [
            "ftp://gw:9091",
            "gw:9091",
            "http://",
            "http://gw:port",
            "http://u@gw",
            "http://gw/?a=1",
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
