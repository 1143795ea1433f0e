//! A small HTTP/1.x server on std for /metrics: GET (or HEAD) /metrics answers the snapshot,
//! any other path 404, any other method 405. One thread serves every connection from one
//! `poll` loop over non-blocking sockets, so a slow client holds a descriptor, never a thread
//! nor another client's turn. Each connection has a deadline from its accept for its whole
//! request head (408 after it: a client that sends a byte now and then gains nothing), a cap on
//! the head's size (431), and a deadline for its whole reply. At most
//! [`ServerLimits::max_connections`] are open at once; a new one over that closes the open one
//! that has waited longest for its head (a scraper sends its head at once, so what is given up
//! is a slow client, never the newcomer). One request per connection (`Connection: close`).
//! The sampler never waits on any of this: the body is built from a clone of the snapshot
//! taken under a short lock.

use super::metrics::{render, Snapshot, TextFormat};
use rustix::event::{PollFd, PollFlags};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one connection may take.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// The request line and headers together.
    pub max_head_bytes: usize,
    /// The whole head must arrive within this of the connection's accept.
    pub head_deadline: Duration,
    /// The whole reply must be taken by the client within this (a scraper that stops reading).
    pub write_timeout: Duration,
    /// Connections open at once; one more closes the one that has waited longest for its head.
    pub max_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> ServerLimits {
        ServerLimits {
            max_head_bytes: 8192,
            head_deadline: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            max_connections: 64,
        }
    }
}

/// At most this many connections are accepted before the open ones get their turn again.
const ACCEPTS_PER_ROUND: usize = 256;

/// Serves `listener` until the process ends. Returns only on an error of `poll` or `accept`
/// that is not transient.
pub fn serve(
    listener: TcpListener,
    shared: Arc<Mutex<Snapshot>>,
    limits: ServerLimits,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let mut conns: Vec<Conn> = Vec::new();
    // Which of the listener and the connections (in that order) had events at the last poll.
    let mut ready: Vec<bool> = Vec::new();
    loop {
        let now = Instant::now();
        // Sleeps until a connection is due, readable or writable, or a new one comes: an idle
        // exporter has no wake-up.
        let timeout = conns
            .iter()
            .map(|c| c.deadline)
            .min()
            .map(|d| Duration::from_millis(millis_until(d, now) as u64));
        let mut fds = Vec::with_capacity(conns.len() + 1);
        fds.push(PollFd::new(&listener, PollFlags::IN));
        fds.extend(conns.iter().map(|c| PollFd::new(&c.stream, c.events())));
        // Interrupted by a signal: no events, as after a timeout; the loop goes round.
        crate::sys::poll(&mut fds, timeout)?;
        ready.clear();
        ready.extend(fds.iter().map(|f| !f.revents().is_empty()));
        drop(fds);
        let now = Instant::now();
        for (c, &r) in conns.iter_mut().zip(&ready[1..]) {
            if r {
                c.progress(&shared, &limits, now);
            }
        }
        for c in &mut conns {
            if c.deadline <= now {
                c.expire();
            }
        }
        conns.retain(|c| !c.is_closed());
        if ready[0] {
            accept_all(&listener, &mut conns, &shared, &limits)?;
        }
    }
}

/// Milliseconds from `now` to `deadline`, rounded up (a poll never wakes just before it).
fn millis_until(deadline: Instant, now: Instant) -> libc::c_int {
    let left = deadline.saturating_duration_since(now);
    (left.as_micros().div_ceil(1000)).min(libc::c_int::MAX as u128) as libc::c_int
}

/// Accepts what is waiting; each new connection is read at once (a scraper's request is often
/// there already), and one over the bound closes the connection that has waited longest.
fn accept_all(
    listener: &TcpListener,
    conns: &mut Vec<Conn>,
    shared: &Mutex<Snapshot>,
    limits: &ServerLimits,
) -> std::io::Result<()> {
    for _ in 0..ACCEPTS_PER_ROUND {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if out_of_descriptors(&e) => {
                // The listener stays readable: free a descriptor, or the loop would spin.
                if !evict_one(conns, shared, limits) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return Ok(());
            }
            // A connection reset before accept, a signal: keep serving.
            Err(e) if transient(&e) => continue,
            Err(e) => return Err(e),
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        let now = Instant::now();
        let mut c = Conn::new(stream, now, limits);
        c.progress(shared, limits, now);
        if c.is_closed() {
            continue;
        }
        if conns.len() >= limits.max_connections {
            evict_one(conns, shared, limits);
        }
        conns.push(c);
    }
    Ok(())
}

/// Closes the connection that has waited longest for its head (a best-effort 408 first), or,
/// when every one is being answered, the oldest of those. False when there is none. A reader is
/// first given what arrived for it: a scraper whose whole head came since the last round (its
/// connect answered before it wrote, on a busy machine) is answered, not closed for having
/// waited.
fn evict_one(conns: &mut Vec<Conn>, shared: &Mutex<Snapshot>, limits: &ServerLimits) -> bool {
    let oldest = |conns: &[Conn], reading: bool| {
        conns
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.state, State::Reading(_)) == reading)
            .min_by_key(|(_, c)| c.accepted)
            .map(|(i, _)| i)
    };
    let now = Instant::now();
    while let Some(i) = oldest(conns, true) {
        conns[i].progress(shared, limits, now);
        if matches!(conns[i].state, State::Reading(_)) {
            conns.swap_remove(i).expire();
            return true;
        }
        if conns[i].is_closed() {
            conns.swap_remove(i);
            return true;
        }
    }
    let Some(i) = oldest(conns, false) else {
        return false;
    };
    conns.swap_remove(i).expire();
    true
}

fn transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted)
        || matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ENOMEM))
}

fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// One client's connection.
struct Conn {
    stream: TcpStream,
    accepted: Instant,
    /// While reading: the head's deadline; while writing: the reply's.
    deadline: Instant,
    state: State,
}

enum State {
    /// The head so far.
    Reading(Vec<u8>),
    /// The reply, and how much of it the client has taken.
    Writing(Vec<u8>, usize),
    Closed,
}

impl Conn {
    fn new(stream: TcpStream, now: Instant, limits: &ServerLimits) -> Conn {
        Conn {
            stream,
            accepted: now,
            deadline: now + limits.head_deadline,
            state: State::Reading(Vec::with_capacity(1024)),
        }
    }

    fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    fn events(&self) -> PollFlags {
        match self.state {
            State::Writing(..) => PollFlags::OUT,
            _ => PollFlags::IN,
        }
    }

    /// Reads what has arrived (answering once the head is whole), or writes what the client
    /// can take.
    fn progress(&mut self, shared: &Mutex<Snapshot>, limits: &ServerLimits, now: Instant) {
        if let State::Reading(buf) = &mut self.state {
            let reply = match read_more(&mut self.stream, buf, limits.max_head_bytes) {
                Progress::More => return,
                Progress::Closed => {
                    self.state = State::Closed;
                    return;
                }
                Progress::Head(end) => answer(parse_head(&buf[..end]), shared),
                Progress::TooLarge => error_reply(431, "request head over 8 KiB\n"),
            };
            self.state = State::Writing(reply, 0);
            self.deadline = now + limits.write_timeout;
        }
        if let State::Writing(out, sent) = &mut self.state {
            loop {
                if *sent == out.len() {
                    // Let the client read the reply before the close (no reset over unread
                    // request bytes).
                    let _ = self.stream.shutdown(std::net::Shutdown::Write);
                    self.state = State::Closed;
                    return;
                }
                match self.stream.write(&out[*sent..]) {
                    Ok(0) => break,
                    Ok(n) => *sent += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                    Err(_) => break,
                }
            }
            self.state = State::Closed;
        }
    }

    /// Its deadline has passed (or it is closed to make room): a client still sending its head
    /// is told 408, as far as its socket takes it at once; a reply not taken is given up.
    fn expire(&mut self) {
        if let State::Reading(_) = self.state {
            let reply = error_reply(408, "request head too slow\n");
            let _ = self.stream.write(&reply);
            let _ = self.stream.shutdown(std::net::Shutdown::Write);
        }
        self.state = State::Closed;
    }
}

enum Progress {
    More,
    Head(usize),
    TooLarge,
    Closed,
}

/// Reads what the socket holds into `buf`, up to just past the cap.
fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>, max: usize) -> Progress {
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = head_end(buf) {
            return Progress::Head(end);
        }
        if buf.len() >= max {
            return Progress::TooLarge;
        }
        let want = chunk.len().min(max + 4 - buf.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) => return Progress::Closed,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Progress::More,
            Err(_) => return Progress::Closed,
        }
    }
}

/// A request's head as far as /metrics needs it.
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub path: String,
    pub accept: Option<String>,
}

/// Why a head was refused (answered 400).
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    Malformed,
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

/// The whole reply to a head.
fn answer(head: Result<Head, HeadError>, shared: &Mutex<Snapshot>) -> Vec<u8> {
    let text = "text/plain; charset=utf-8";
    let head = match head {
        Ok(h) => h,
        Err(HeadError::Malformed) => return error_reply(400, "not an HTTP/1 request\n"),
    };
    let head_only = head.method == "HEAD";
    if head.method != "GET" && !head_only {
        return reply(
            405,
            text,
            &[("Allow", "GET, HEAD")],
            b"only GET /metrics\n",
            false,
        );
    }
    if head.path != "/metrics" {
        return reply(
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
    reply(200, format.content_type(), &[], body.as_bytes(), head_only)
}

fn error_reply(status: u16, body: &str) -> Vec<u8> {
    reply(
        status,
        "text/plain; charset=utf-8",
        &[],
        body.as_bytes(),
        false,
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
        _ => "",
    }
}

fn reply(
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    head_only: bool,
) -> Vec<u8> {
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
    all
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
                tree: Some(crate::model::sample::Sample {
                    rss_bytes: 4096,
                    ..Default::default()
                }),
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

    /// Over the bound, the reader that has waited longest is answered if its whole head came
    /// since it was last read (a scraper's connect answered before it wrote), and the next
    /// oldest that still waits is the one closed.
    #[test]
    fn a_scrapers_head_that_came_after_its_accept_is_answered_not_evicted() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = ServerLimits::default();
        let shared = Mutex::new(Snapshot::default());
        let accept = |t: Instant| Conn::new(listener.accept().unwrap().0, t, &limits);
        let t0 = Instant::now();
        let mut scraper = TcpStream::connect(addr).unwrap();
        let mut conns = vec![accept(t0)];
        let _dripper = TcpStream::connect(addr).unwrap();
        conns.push(accept(t0 + Duration::from_millis(1)));
        for c in &mut conns {
            c.stream.set_nonblocking(true).unwrap();
        }
        scraper.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(evict_one(&mut conns, &shared, &limits));
        scraper
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut reply = String::new();
        let _ = scraper.read_to_string(&mut reply);
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert_eq!(conns.len(), 1);
        assert!(
            matches!(conns[0].state, State::Reading(_)),
            "the dripper waits on"
        );
        // No reader with news: the oldest one is closed.
        assert!(evict_one(&mut conns, &shared, &limits));
        assert!(conns.is_empty());
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
    fn a_client_sending_a_byte_now_and_then_gets_408_at_the_deadline_from_its_accept() {
        let limits = ServerLimits {
            head_deadline: Duration::from_secs(1),
            ..Default::default()
        };
        let addr = start(limits);
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        // A byte every 200 ms would keep a per-read timeout of 1 s waiting for ever; the
        // deadline counts from the accept, so the 408 comes long before the 60 bytes are sent.
        let mut got = Vec::new();
        for b in b"GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".iter() {
            if slow.write_all(&[*b]).is_err() {
                break;
            }
            let mut buf = [0u8; 512];
            match slow.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
            if !got.is_empty() {
                break;
            }
        }
        let r = String::from_utf8_lossy(&got);
        assert!(r.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{r:?}");
    }

    #[test]
    fn over_the_bound_the_client_waiting_longest_is_closed_and_the_scraper_served() {
        let limits = ServerLimits {
            max_connections: 4,
            head_deadline: Duration::from_secs(60),
            ..Default::default()
        };
        let addr = start(limits);
        // Four stuck clients fill the bound; the server accepts in arrival order.
        let mut stuck: Vec<TcpStream> = (0..4)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(b"GET /").unwrap();
                s
            })
            .collect();
        for _ in 0..3 {
            let r = ask(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
            assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        }
        // (A scraper whose request came with its connection took no slot; one whose request
        // came a moment later closed the oldest stuck client.) One more stuck client closes
        // the oldest if no scraper did: the first is told 408 either way.
        stuck.push({
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /").unwrap();
            s
        });
        let first = &mut stuck[0];
        first
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut r = String::new();
        let _ = first.read_to_string(&mut r);
        assert!(r.starts_with("HTTP/1.1 408 "), "{r}");
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
