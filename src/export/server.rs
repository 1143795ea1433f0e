//! A small HTTP/1.x server on std for /metrics: GET (or HEAD) /metrics answers the snapshot,
//! any other path 404, any other method 405. Each connection is served on a thread of its own,
//! at most [`ServerLimits::max_connections`] at once (one more is answered 503 and closed); a
//! request's head is capped in size (431) and must arrive within a deadline (408), so neither a
//! huge nor a slow request holds a thread for long. One request per connection (the reply says
//! `Connection: close`). The sampler never waits on any of this: the body is built from a
//! clone of the snapshot taken under a short lock.

use super::metrics::{render, Snapshot, TextFormat};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one connection may take.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// The request line and headers together.
    pub max_head_bytes: usize,
    /// The whole head must arrive within this.
    pub head_deadline: Duration,
    /// Writing the reply may block this long (a scraper that stops reading).
    pub write_timeout: Duration,
    pub max_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> ServerLimits {
        ServerLimits {
            max_head_bytes: 8192,
            head_deadline: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            max_connections: 16,
        }
    }
}

/// Serves `listener` until the process ends. Returns only on an accept error that is not
/// transient.
pub fn serve(
    listener: TcpListener,
    shared: Arc<Mutex<Snapshot>>,
    limits: ServerLimits,
) -> std::io::Result<()> {
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let stream = match conn {
            Ok(s) => s,
            // Out of descriptors, a connection reset before accept: keep serving.
            Err(e) if transient(&e) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => return Err(e),
        };
        if active.fetch_add(1, Ordering::SeqCst) >= limits.max_connections {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
            let mut stream = stream;
            let _ = respond(
                &mut stream,
                503,
                "text/plain; charset=utf-8",
                &[("Retry-After", "1")],
                b"too many connections to memmon export\n",
                false,
            );
            continue;
        }
        let shared = shared.clone();
        let active2 = active.clone();
        let spawned = std::thread::Builder::new()
            .name("memmon-http".into())
            .spawn(move || {
                let _ = handle(stream, &shared, limits);
                active2.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
    Ok(())
}

fn transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    ) || matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// A request's head as far as /metrics needs it.
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub path: String,
    pub accept: Option<String>,
}

/// Why a head was refused, with the status to answer.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    TooLarge,
    Timeout,
    Malformed,
    Closed,
}

/// Reads a request head (up to the blank line) within the limits.
pub fn read_head(stream: &mut TcpStream, limits: &ServerLimits) -> Result<Head, HeadError> {
    let deadline = Instant::now() + limits.head_deadline;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = head_end(&buf) {
            buf.truncate(end);
            return parse_head(&buf);
        }
        if buf.len() >= limits.max_head_bytes {
            return Err(HeadError::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Timeout);
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|_| HeadError::Closed)?;
        let want = chunk.len().min(limits.max_head_bytes + 4 - buf.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::Timeout)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(HeadError::Closed),
        }
    }
}

/// Where the head ends (CRLF CRLF, or a bare LF LF).
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = memchr::memmem::find(buf, b"\r\n\r\n");
    let lf = memchr::memmem::find(buf, b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Parses `METHOD TARGET HTTP/1.x` and the headers; only Accept is kept.
pub fn parse_head(buf: &[u8]) -> Result<Head, HeadError> {
    let text = std::str::from_utf8(buf).map_err(|_| HeadError::Malformed)?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let first = lines.next().ok_or(HeadError::Malformed)?;
    let mut words = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(HeadError::Malformed);
    };
    if method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !target.starts_with('/')
        || !version.starts_with("HTTP/1.")
    {
        return Err(HeadError::Malformed);
    }
    let mut accept = None;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            return Err(HeadError::Malformed);
        };
        if k.eq_ignore_ascii_case("accept") {
            accept = Some(v.trim().to_string());
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or("").to_string();
    Ok(Head {
        method: method.to_string(),
        path,
        accept,
    })
}

fn handle(
    mut stream: TcpStream,
    shared: &Mutex<Snapshot>,
    limits: ServerLimits,
) -> std::io::Result<()> {
    stream.set_write_timeout(Some(limits.write_timeout))?;
    let text = "text/plain; charset=utf-8";
    let head = match read_head(&mut stream, &limits) {
        Ok(h) => h,
        Err(HeadError::TooLarge) => {
            return respond(
                &mut stream,
                431,
                text,
                &[],
                b"request head over 8 KiB\n",
                false,
            )
        }
        Err(HeadError::Timeout) => {
            return respond(
                &mut stream,
                408,
                text,
                &[],
                b"request head too slow\n",
                false,
            )
        }
        Err(HeadError::Malformed) => {
            return respond(
                &mut stream,
                400,
                text,
                &[],
                b"not an HTTP/1 request\n",
                false,
            )
        }
        Err(HeadError::Closed) => return Ok(()),
    };
    let head_only = head.method == "HEAD";
    if head.method != "GET" && !head_only {
        return respond(
            &mut stream,
            405,
            text,
            &[("Allow", "GET, HEAD")],
            b"only GET /metrics\n",
            false,
        );
    }
    if head.path != "/metrics" {
        return respond(
            &mut stream,
            404,
            text,
            &[],
            b"not found: memmon export serves /metrics\n",
            head_only,
        );
    }
    let format = TextFormat::from_accept(head.accept.as_deref());
    let snapshot = shared.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let body = render(&snapshot, format);
    respond(
        &mut stream,
        200,
        format.content_type(),
        &[],
        body.as_bytes(),
        head_only,
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(status),
        body.len()
    );
    for (k, v) in extra {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut all = out.into_bytes();
    if !head_only {
        all.extend_from_slice(body);
    }
    stream.write_all(&all)?;
    stream.flush()?;
    // Let the client read the reply before the close (no reset over unread request bytes).
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::metrics::TargetSnapshot;
    use std::net::SocketAddr;

    fn start(limits: ServerLimits) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let snap = Snapshot {
            targets: vec![TargetSnapshot {
                name: "d".into(),
                kind: "pid",
                up: true,
                rss: 4096,
                window_peak: Some(8192),
                ..Default::default()
            }],
            interval: Duration::from_millis(100),
            window: Duration::from_secs(15),
            ..Default::default()
        };
        let shared = Arc::new(Mutex::new(snap));
        std::thread::spawn(move || serve(listener, shared, limits));
        addr
    }

    /// Sends `req` and returns the whole reply.
    fn ask(addr: SocketAddr, req: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(req).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn get_metrics_answers_the_prometheus_text_and_openmetrics_when_accepted() {
        let addr = start(ServerLimits::default());
        let r = ask(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
        assert!(r.contains("memmon_window_peak_rss_bytes{target=\"d\",kind=\"pid\"} 8192\n"));
        let body = r.split("\r\n\r\n").nth(1).unwrap();
        let len: usize = r
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(body.len(), len);
        let r = ask(
            addr,
            b"GET /metrics?x=1 HTTP/1.1\r\naccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
        );
        assert!(
            r.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
            "{r}"
        );
        assert!(r.ends_with("# EOF\n"), "{r}");
        // HEAD: the headers alone.
        let r = ask(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\n"),
            "{r}"
        );
    }

    #[test]
    fn other_paths_are_404_and_other_methods_405() {
        let addr = start(ServerLimits::default());
        for path in ["/", "/metricsx", "/metrics/", "/../etc/passwd"] {
            let r = ask(addr, format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes());
            assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{path}: {r}");
        }
        for m in ["POST", "PUT", "DELETE", "OPTIONS"] {
            let r = ask(
                addr,
                format!("{m} /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").as_bytes(),
            );
            assert!(
                r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
                "{m}: {r}"
            );
            assert!(r.contains("Allow: GET, HEAD\r\n"));
        }
    }

    #[test]
    fn garbage_is_400_and_a_head_over_the_cap_is_431() {
        let addr = start(ServerLimits::default());
        for bad in [
            &b"hello\r\n\r\n"[..],
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics SPDY/3\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
        ] {
            let r = ask(addr, bad);
            assert!(
                r.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{:?}: {r}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
        for i in 0..2000 {
            huge.extend_from_slice(format!("X-Pad-{i}: {}\r\n", "a".repeat(40)).as_bytes());
        }
        huge.extend_from_slice(b"\r\n");
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // The server stops reading at the cap; our write may fail once it closes.
        let _ = s.write_all(&huge);
        let mut r = String::new();
        let _ = s.read_to_string(&mut r);
        assert!(r.starts_with("HTTP/1.1 431 "), "{r}");
    }

    #[test]
    fn a_slow_client_gets_408_and_does_not_hold_up_others() {
        let limits = ServerLimits {
            head_deadline: Duration::from_millis(500),
            ..Default::default()
        };
        let addr = start(limits);
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET /metr").unwrap();
        // Meanwhile another scraper is served at once.
        let r = ask(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        slow.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut r = String::new();
        let _ = slow.read_to_string(&mut r);
        assert!(r.starts_with("HTTP/1.1 408 "), "{r}");
    }

    #[test]
    fn connections_over_the_bound_are_refused_with_503_and_the_bound_frees_up() {
        let limits = ServerLimits {
            max_connections: 4,
            head_deadline: Duration::from_secs(20),
            ..Default::default()
        };
        let addr = start(limits);
        // Four stuck clients hold every slot.
        let stuck: Vec<TcpStream> = (0..4)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(b"GET /").unwrap();
                s
            })
            .collect();
        // Let the server accept them all (poll: a busy machine may be slow).
        let mut refused = String::new();
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            refused = ask(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
            if refused.starts_with("HTTP/1.1 503") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            refused.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{refused}"
        );
        drop(stuck);
        let mut ok = String::new();
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            ok = ask(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
            if ok.starts_with("HTTP/1.1 200") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    }

    #[test]
    fn heads_parse_the_path_without_query_and_the_accept_header() {
        let h =
            parse_head(b"GET /metrics?name[]=x HTTP/1.1\r\nHost: a\r\nACCEPT: text/plain").unwrap();
        assert_eq!(h.path, "/metrics");
        assert_eq!(h.accept.as_deref(), Some("text/plain"));
        assert_eq!(
            parse_head(b"get /metrics HTTP/1.1"),
            Err(HeadError::Malformed)
        );
        assert_eq!(
            parse_head(b"GET  /metrics HTTP/1.1"),
            Err(HeadError::Malformed)
        );
    }
}
