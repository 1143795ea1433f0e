//! The marker against a stand-in recorder (a thread of the test that answers as memmon's
//! recorder does): order, bursts, loss counted, a recorder that comes and goes, a fork, and
//! the tracing layer's labels. The real recorder is tested in memmon's own suite
//! (tests/mark_crate.rs at the repository's root).

use memmon_mark::{MarkError, MarkLayer, Marker};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Answers each request line as the recorder does: queued markers at once, others too (there
/// is no row to wait for here); every request is kept, in arrival order.
struct StandIn {
    path: PathBuf,
    lines: Arc<Mutex<Vec<String>>>,
}

impl StandIn {
    /// `delay`: how long each answer takes; `refuse`: answer every request with this error.
    fn start(path: &Path, delay: Duration, refuse: Option<&'static str>) -> StandIn {
        let listener = UnixListener::bind(path).unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let mut line = String::new();
                if BufReader::new(&conn).read_line(&mut line).unwrap_or(0) == 0 {
                    continue; // a liveness check
                }
                std::thread::sleep(delay);
                kept.lock().unwrap().push(line.trim_end().to_string());
                let reply = match refuse {
                    Some(why) => format!("{{\"ok\":false,\"label\":\"\",\"error\":\"{why}\"}}\n"),
                    None => "{\"ok\":true,\"label\":\"x\",\"queued\":true}\n".to_string(),
                };
                let _ = (&conn).write_all(reply.as_bytes());
            }
        });
        StandIn {
            path: path.to_path_buf(),
            lines,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The labels received, in order.
    fn labels(&self) -> Vec<String> {
        self.lines()
            .iter()
            .map(|l| {
                let start = l.find("\"mark\":\"").unwrap() + 8;
                let end = start + l[start..].find('"').unwrap();
                l[start..end].to_string()
            })
            .collect()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        // The listener's thread stays blocked in accept; the file's removal makes the socket
        // unreachable, as a recorder's end does.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn a_burst_below_the_queues_capacity_arrives_whole_and_in_order_with_its_times() {
    let dir = tempfile::tempdir().unwrap();
    let r = StandIn::start(&dir.path().join("r.sock"), Duration::ZERO, None);
    let m = Marker::to_socket(&r.path);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let n = 3000;
    for i in 0..n {
        assert!(m.mark(&format!("m{i}")), "marker {i} was not queued");
    }
    assert!(m.flush(Duration::from_secs(120)), "not sent in time");
    let expected: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    assert_eq!(r.labels(), expected);
    let s = m.stats();
    assert_eq!((s.sent, s.lost()), (n as u64, 0), "{s:?}");
    // Each says when it was made: no earlier than the burst's start, in order.
    let times: Vec<u64> = r
        .lines()
        .iter()
        .map(|l| {
            let t = &l[l.find("\"at_unix_us\":").unwrap() + 13..];
            t.trim_end_matches('}').parse().unwrap()
        })
        .collect();
    assert!(times[0] >= before, "{} < {before}", times[0]);
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn a_burst_past_the_queues_capacity_drops_and_counts_the_excess_and_keeps_order() {
    let dir = tempfile::tempdir().unwrap();
    // 200 µs per answer: the sender falls far behind a burst of 3 × the capacity.
    let r = StandIn::start(&dir.path().join("r.sock"), Duration::from_micros(200), None);
    let m = Marker::to_socket(&r.path);
    let n = 3 * memmon_mark::QUEUE_CAPACITY;
    let queued = (0..n).filter(|i| m.mark(&format!("{i}"))).count();
    assert!(queued < n, "the queue never filled");
    assert!(m.flush(Duration::from_secs(300)), "not sent in time");
    let s = m.stats();
    assert_eq!(s.sent as usize, queued, "{s:?}");
    assert_eq!((s.sent + s.queue_full) as usize, n, "{s:?}");
    let got: Vec<usize> = r.labels().iter().map(|l| l.parse().unwrap()).collect();
    assert_eq!(got.len(), queued);
    assert!(got.windows(2).all(|w| w[0] < w[1]), "out of order");
    assert_eq!(got[0], 0);
}

#[test]
fn with_no_listener_markers_are_dropped_until_one_appears_then_reach_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("later.sock");
    let m = Marker::to_socket(&path);
    assert!(m.mark("early"), "the first marker is queued for a look");
    assert!(m.flush(Duration::from_secs(10)));
    assert_eq!(m.stats().no_recorder, 1);
    assert!(!m.mark("dropped"), "no look again so soon");
    let r = StandIn::start(&path, Duration::ZERO, None);
    std::thread::sleep(memmon_mark::RETRY_AFTER + Duration::from_millis(50));
    assert!(m.mark("found"));
    assert!(m.flush(Duration::from_secs(10)));
    assert_eq!(r.labels(), ["found"]);
}

#[test]
fn a_recorder_that_ends_is_looked_for_again_and_its_successor_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sock");
    let first = StandIn::start(&path, Duration::ZERO, None);
    let m = Marker::to_socket(&path);
    assert!(m.mark("one"));
    assert!(m.flush(Duration::from_secs(10)));
    assert_eq!(first.labels(), ["one"]);
    drop(first);
    let second = StandIn::start(&path, Duration::ZERO, None);
    assert!(m.mark("two"));
    assert!(m.flush(Duration::from_secs(10)));
    assert_eq!(second.labels(), ["two"]);
    assert_eq!(m.stats().sent, 2);
}

#[test]
fn mark_and_wait_asks_for_the_row_and_returns_the_recorders_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let ok = StandIn::start(&dir.path().join("ok.sock"), Duration::ZERO, None);
    let m = Marker::to_socket(&ok.path);
    assert_eq!(m.mark_and_wait("exact"), Ok(()));
    // Without a time: the recorder takes its row before it answers.
    assert_eq!(ok.lines(), ["{\"mark\":\"exact\"}"]);

    let no = StandIn::start(
        &dir.path().join("no.sock"),
        Duration::ZERO,
        Some("the recording has ended"),
    );
    let m = Marker::to_socket(&no.path);
    assert_eq!(
        m.mark_and_wait("late"),
        Err(MarkError::Refused("the recording has ended".into()))
    );
    assert_eq!(m.stats().refused, 1);

    let m = Marker::to_socket(dir.path().join("nobody.sock"));
    assert_eq!(m.mark_and_wait("x"), Err(MarkError::NoRecorder));
    // Right after a look found nothing: no new look (so no wait), as with `mark`.
    assert_eq!(m.mark_and_wait("y"), Err(MarkError::NoRecorder));
    assert_eq!(m.stats().no_recorder, 1, "{:?}", m.stats());
}

#[test]
fn a_forked_child_sends_nothing_and_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let r = StandIn::start(&dir.path().join("r.sock"), Duration::ZERO, None);
    let m = Marker::to_socket(&r.path);
    assert!(m.mark("parent"));
    assert!(m.flush(Duration::from_secs(10)));
    // SAFETY: the child only calls `mark` (getpid and atomics on this path) and `_exit`.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match (m.mark("child"), m.stats().forked) {
            (false, 1) => 0,
            _ => 1,
        };
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    assert!(m.mark("parent again"));
    assert!(m.flush(Duration::from_secs(10)));
    assert_eq!(r.labels(), ["parent", "parent again"]);
}

#[test]
fn the_layer_marks_a_spans_first_entry_and_its_close_resuming_the_enclosing_phase() {
    use tracing_subscriber::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let r = StandIn::start(&dir.path().join("r.sock"), Duration::ZERO, None);
    let m = Marker::to_socket(&r.path);
    let layer = MarkLayer::new()
        .span("prove")
        .span("synthesis")
        .target("phases::gpu")
        .outside_label("waiting")
        .marker(m.clone());
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let prove = tracing::info_span!("prove");
        let _p = prove.enter();
        {
            let synthesis = tracing::info_span!("synthesis");
            // Entered three times, as an async span at each poll: one phase.
            for _ in 0..3 {
                let _s = synthesis.enter();
            }
            // Not chosen: no marker.
            let _other = tracing::info_span!("serialize").entered();
        }
        tracing::info_span!(target: "phases::gpu::kernel", "msm").in_scope(|| {});
        // Made but never entered: no phase.
        drop(tracing::info_span!("synthesis"));
        tracing::info_span!(target: "phases::gpuish", "not chosen").in_scope(|| {});
    });
    assert!(m.flush(Duration::from_secs(10)));
    assert_eq!(
        r.labels(),
        ["prove", "synthesis", "prove", "msm", "prove", "waiting"]
    );
}

#[test]
fn the_layer_lets_only_the_newest_open_span_name_the_phase() {
    use tracing_subscriber::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let r = StandIn::start(&dir.path().join("r.sock"), Duration::ZERO, None);
    let m = Marker::to_socket(&r.path);
    let layer = MarkLayer::new().span("a").span("b").marker(m.clone());
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        // Two spans with overlapping lives (as on two threads): `a` closes first.
        let a = tracing::info_span!("a");
        a.in_scope(|| {});
        let b = tracing::info_span!("b");
        b.in_scope(|| {});
        drop(a); // `b` still names the phase: no marker
        drop(b); // the last one: outside
    });
    assert!(m.flush(Duration::from_secs(10)));
    assert_eq!(r.labels(), ["a", "b", "idle"]);
}
