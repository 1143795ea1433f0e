//! Phase markers for memmon (this repository's recorder of memory) from a program's own code.
//!
//! `memmon_mark::mark("synthesis")` tells the memmon recorder watching this process that the
//! phase `synthesis` begins now: the recording gets a `mark:synthesis` row, and the phase lasts
//! until the next marker (`memmon summary` gives each phase its peak). It never blocks and never
//! fails: when no recorder listens it costs a load and a read of the coarse clock (about 6 ns;
//! BENCHMARKS.md), and looks for one again at most every [`RETRY_AFTER`]; when one listens, the
//! label is queued (about 0.2 µs) and a thread of its own sends it, in order, over memmon's
//! marker socket (the protocol: docs/FORMAT.md, "The marker socket").
//!
//! ```no_run
//! memmon_mark::mark("synthesis");
//! // ... the phase's work ...
//! memmon_mark::mark("idle");
//! ```
//!
//! With the `tracing` feature, [`MarkLayer`] turns chosen `tracing` spans into markers.
//!
//! **Which recorder.** `$MEMMON_SOCKET` when set; else, of the recorders listening in memmon's
//! default places, the one that launched this process (`memmon record -- daemon`), else the
//! only one running (`memmon record --pid`, `memmon bench --pidfile`). With several recorders,
//! none of which launched this process, markers go nowhere: set `MEMMON_SOCKET`.
//!
//! **When a marker lands.** Its row is taken when the recorder gets to it, a little after the
//! call (a median of 0.4 ms on a loaded 2-core machine, sometimes over 5 ms); the row's
//! `event_lag_us` says how long after the call, and a phase whose boundary came more than 5 ms
//! late is not called exact. For a boundary the program waits for, use [`mark_and_wait`] (it
//! returns once the row is taken). A program about to exit should end with `mark_and_wait`,
//! whose row is taken after every marker before it: a marker the recorder has queued but not
//! taken when its target exits is lost ([`flush`] only waits until markers reach the recorder).
//!
//! **What can be lost.** At most [`QUEUE_CAPACITY`] markers wait to be sent; more in a burst
//! are dropped and counted ([`Stats::queue_full`]). Markers made while no recorder listens are
//! dropped (nothing records them). A process forked from the one that made the first marker
//! sends none ([`Stats::forked`]): the recorder watches the whole tree, mark from the parent.

#![deny(clippy::undocumented_unsafe_blocks)]

mod discover;
#[cfg(feature = "tracing")]
mod layer;
mod wire;

#[cfg(feature = "tracing")]
pub use layer::MarkLayer;

use discover::Target;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, Once, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// How long after finding no recorder the next marker looks again.
pub const RETRY_AFTER: Duration = Duration::from_millis(250);
/// The most markers waiting to be sent; a marker made when the queue is full is dropped.
pub const QUEUE_CAPACITY: usize = 4096;

/// The state of a `Marker`, read by every call.
const UNKNOWN: u8 = 0; // no marker yet: the first one looks for a recorder
const SEARCHING: u8 = 1; // the sender is looking; markers queue
const LISTENING: u8 = 2; // a recorder was found; markers queue
const ABSENT: u8 = 3; // none found: markers are dropped until `retry_at_ms`
const OFF: u8 = 4; // no sender thread could be started

/// Sends markers to a memmon recorder. [`mark`] uses the process's own (looking for the
/// recorder as the crate's documentation says); make one with [`Marker::to_socket`] to send to a
/// given socket. Clones share the queue and the sender thread.
#[derive(Clone)]
pub struct Marker {
    inner: Arc<Inner>,
}

/// How many markers went where, since the `Marker` was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Taken by a recorder (queued there, or their row taken for [`mark_and_wait`]).
    pub sent: u64,
    /// Refused by the recorder (its reason went to `mark_and_wait`'s caller): the recording has
    /// ended, an empty label, too many clients at once.
    pub refused: u64,
    /// Lost on the way: the recorder did not answer in time, or the connection broke.
    pub failed: u64,
    /// Dropped because [`QUEUE_CAPACITY`] markers were already waiting.
    pub queue_full: u64,
    /// Queued while the sender looked for a recorder, and none was found. (Markers made while no
    /// recorder is known, between two looks, are dropped without being counted.)
    pub no_recorder: u64,
    /// Made in a process forked from the one that made this `Marker`: not sent.
    pub forked: u64,
}

impl Stats {
    /// Markers made while a recorder listened (or was looked for) that did not reach it.
    pub fn lost(&self) -> u64 {
        self.refused + self.failed + self.queue_full + self.no_recorder + self.forked
    }
}

/// Why [`mark_and_wait`] did not get its row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkError {
    /// No recorder listens (see the crate's documentation for where it looks).
    NoRecorder,
    /// The recorder refused it, for this reason.
    Refused(String),
    /// The recorder did not answer, or the connection broke.
    Failed(String),
    /// [`QUEUE_CAPACITY`] markers were already waiting.
    QueueFull,
    /// Called in a process forked from the one that made the `Marker`.
    Forked,
    /// No sender thread could be started.
    Off,
}

impl std::fmt::Display for MarkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MarkError::NoRecorder => write!(f, "no memmon recorder is listening"),
            MarkError::Refused(why) => write!(f, "the recorder did not take the marker: {why}"),
            MarkError::Failed(why) => write!(f, "the marker did not reach the recorder: {why}"),
            MarkError::QueueFull => {
                write!(f, "{QUEUE_CAPACITY} markers are already waiting to be sent")
            }
            MarkError::Forked => write!(
                f,
                "markers are sent from the process that made the first one, not a forked child"
            ),
            MarkError::Off => write!(f, "the marker's sender thread could not be started"),
        }
    }
}

impl std::error::Error for MarkError {}

/// Marks the start of phase `label` in the recording of the memmon recorder watching this
/// process: never blocks, never fails. True when the marker was queued for a recorder (false:
/// none listens, or the marker was dropped; see [`stats`]). Labels are one line of at most 200
/// characters (the recorder makes control characters spaces and trims them).
pub fn mark(label: &str) -> bool {
    process_marker().mark(label)
}

/// Marks the start of phase `label` and returns once the recorder has taken its row, so nothing
/// this thread does after it can fall in the phase before (at the cost of a sample's time,
/// typically under a millisecond; at most about 30 s). Sent in order with [`mark`]'s markers.
/// With no recorder known it returns at once, as cheaply as `mark` (`Err(NoRecorder)`); the
/// first call, and one after [`RETRY_AFTER`], waits for a look for a recorder.
pub fn mark_and_wait(label: &str) -> Result<(), MarkError> {
    process_marker().mark_and_wait(label)
}

/// Waits until every marker made so far has been answered by the recorder (or dropped), at most
/// `timeout`; true when they have. The recorder may not have taken their rows yet: a program
/// about to exit ends with [`mark_and_wait`] for that.
pub fn flush(timeout: Duration) -> bool {
    process_marker().flush(timeout)
}

/// What became of the markers of [`mark`] and [`mark_and_wait`] so far.
pub fn stats() -> Stats {
    process_marker().stats()
}

/// The process's own `Marker`, made by the first call.
fn process_marker() -> &'static Marker {
    static MARKER: OnceLock<Marker> = OnceLock::new();
    MARKER.get_or_init(|| Marker::new(Target::Discover))
}

struct Inner {
    state: AtomicU8,
    /// With `ABSENT`: when to look again, in ms of `ms_now`.
    retry_at_ms: AtomicU64,
    /// The process that made this `Marker`, where its sender thread runs.
    pid: u32,
    target: Target,
    queue: Mutex<Queue>,
    /// The sender waits on it for markers.
    wake: Condvar,
    /// `flush` waits on it for the queue to empty.
    idle: Condvar,
    sender: Once,
    counts: Counts,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Pending>,
    /// The sender holds a marker it took from `items`.
    busy: bool,
    /// The sender is waiting on `wake`.
    waiting: bool,
    /// Every `Marker` sharing this queue is gone: the sender ends once it has sent the rest.
    closing: bool,
}

struct Pending {
    label: Box<str>,
    /// When `mark` was called, in µs since the Unix epoch (the recorder counts the lag from it).
    at_unix_us: u64,
    /// `mark_and_wait`'s caller, waiting for the outcome (the marker then waits for its row).
    waiter: Option<mpsc::SyncSender<Result<(), MarkError>>>,
    /// Already sent once to a recorder that turned out gone.
    resent: bool,
}

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
    queue_full: AtomicU64,
    no_recorder: AtomicU64,
    forked: AtomicU64,
}

impl Marker {
    /// A `Marker` that sends to the recorder listening on `socket` (`memmon record --socket
    /// PATH`) and nowhere else.
    pub fn to_socket(socket: impl Into<PathBuf>) -> Marker {
        Marker::new(Target::Path(socket.into()))
    }

    /// A `Marker` of its own that finds the recorder as [`mark`] does.
    pub fn discovering() -> Marker {
        Marker::new(Target::Discover)
    }

    fn new(target: Target) -> Marker {
        Marker {
            inner: Arc::new(Inner {
                state: AtomicU8::new(UNKNOWN),
                retry_at_ms: AtomicU64::new(0),
                pid: std::process::id(),
                target,
                queue: Mutex::new(Queue::default()),
                wake: Condvar::new(),
                idle: Condvar::new(),
                sender: Once::new(),
                counts: Counts::default(),
            }),
        }
    }

    /// [`mark`] through this `Marker`.
    pub fn mark(&self, label: &str) -> bool {
        let inner = &*self.inner;
        match inner.state.load(Ordering::Acquire) {
            // The common case without a recorder: a load and a clock read.
            ABSENT if inner.ms_now() < inner.retry_at_ms.load(Ordering::Relaxed) => false,
            OFF => false,
            _ => self.enqueue(label, None).is_ok(),
        }
    }

    /// [`mark_and_wait`] through this `Marker`.
    pub fn mark_and_wait(&self, label: &str) -> Result<(), MarkError> {
        let inner = &*self.inner;
        match inner.state.load(Ordering::Acquire) {
            // No recorder, as cheap as `mark`: no look before its time.
            ABSENT if inner.ms_now() < inner.retry_at_ms.load(Ordering::Relaxed) => {
                return Err(MarkError::NoRecorder)
            }
            OFF => return Err(MarkError::Off),
            _ => {}
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.enqueue(label, Some(tx))?;
        rx.recv_timeout(wire::ROW_REPLY_TIMEOUT + Duration::from_secs(10))
            .unwrap_or_else(|_| {
                Err(MarkError::Failed(
                    "the sender gave no outcome in time".into(),
                ))
            })
    }

    /// [`flush`] through this `Marker`.
    pub fn flush(&self, timeout: Duration) -> bool {
        if std::process::id() != self.inner.pid || !self.inner.sender.is_completed() {
            return true; // nothing was ever queued here
        }
        let end = Instant::now() + timeout;
        let mut q = self.inner.lock();
        while !q.items.is_empty() || q.busy {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            q = self
                .inner
                .idle
                .wait_timeout(q, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// [`stats`] of this `Marker`.
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counts;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            sent: get(&c.sent),
            refused: get(&c.refused),
            failed: get(&c.failed),
            queue_full: get(&c.queue_full),
            no_recorder: get(&c.no_recorder),
            forked: get(&c.forked),
        }
    }

    /// Queues the marker for the sender thread (started by the first one).
    fn enqueue(
        &self,
        label: &str,
        waiter: Option<mpsc::SyncSender<Result<(), MarkError>>>,
    ) -> Result<(), MarkError> {
        let inner = &*self.inner;
        if std::process::id() != inner.pid {
            // The sender thread and the queue's lock belong to the parent: not ours to touch.
            inner.counts.forked.fetch_add(1, Ordering::Relaxed);
            return Err(MarkError::Forked);
        }
        inner.sender.call_once(|| {
            let theirs = self.inner.clone();
            let started = std::thread::Builder::new()
                .name("memmon-mark".into())
                .spawn(move || send_all(&theirs));
            if started.is_err() {
                inner.state.store(OFF, Ordering::Release);
            }
        });
        if inner.state.load(Ordering::Acquire) == OFF {
            return Err(MarkError::Off);
        }
        let at_unix_us = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut q = inner.lock();
        if q.items.len() >= QUEUE_CAPACITY {
            inner.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            return Err(MarkError::QueueFull);
        }
        q.items.push_back(Pending {
            label: wire::cut(label).into(),
            at_unix_us,
            waiter,
            resent: false,
        });
        if q.waiting {
            inner.wake.notify_one();
        }
        Ok(())
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        // The last `Marker` (the sender thread holds one more reference when started).
        let others = Arc::strong_count(&self.inner) - 1;
        let sender = usize::from(self.inner.sender.is_completed());
        if others == sender && std::process::id() == self.inner.pid {
            self.inner.lock().closing = true;
            self.inner.wake.notify_one();
        }
    }
}

impl Inner {
    /// Milliseconds on the coarse monotonic clock (updated at each timer interrupt, a few ms
    /// apart: fine for `RETRY_AFTER`), which the vDSO reads without the time counter: the
    /// cheapest clock there is, read by every `mark` while no recorder listens.
    fn ms_now(&self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer; CLOCK_MONOTONIC_COARSE exists on every Linux since 2.6.32.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next marker to send; `None` once closing and empty.
    fn next(&self) -> Option<Pending> {
        let mut q = self.lock();
        q.busy = false;
        loop {
            if let Some(p) = q.items.pop_front() {
                q.busy = true;
                return Some(p);
            }
            self.idle.notify_all();
            if q.closing {
                return None;
            }
            q.waiting = true;
            q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
            q.waiting = false;
        }
    }

    /// No recorder: drops `p` and everything queued, and sets when to look again.
    fn none_found(&self, p: Pending) {
        let mut q = self.lock();
        let dropped: Vec<Pending> = std::iter::once(p).chain(q.items.drain(..)).collect();
        self.retry_at_ms.store(
            self.ms_now() + RETRY_AFTER.as_millis() as u64,
            Ordering::Relaxed,
        );
        self.state.store(ABSENT, Ordering::Release);
        drop(q);
        for p in dropped {
            self.counts.no_recorder.fetch_add(1, Ordering::Relaxed);
            outcome(p, Err(MarkError::NoRecorder));
        }
    }
}

/// Tells `mark_and_wait`'s caller, if any.
fn outcome(p: Pending, result: Result<(), MarkError>) {
    if let Some(w) = p.waiter {
        let _ = w.try_send(result);
    }
}

/// The sender thread: sends the queued markers one at a time, each answered before the next is
/// sent, so they land in the order they were made.
fn send_all(inner: &Inner) {
    let mut socket: Option<PathBuf> = None;
    while let Some(mut p) = inner.next() {
        let path = match &socket {
            Some(path) => path.clone(),
            None => {
                let absent = inner.state.load(Ordering::Acquire) == ABSENT;
                let too_soon = inner.ms_now() < inner.retry_at_ms.load(Ordering::Relaxed);
                // A marker made just as the last look found nothing: no new look for it.
                if absent && too_soon {
                    inner.counts.no_recorder.fetch_add(1, Ordering::Relaxed);
                    outcome(p, Err(MarkError::NoRecorder));
                    continue;
                }
                inner.state.store(SEARCHING, Ordering::Release);
                match inner.target.find() {
                    Some(found) => {
                        inner.state.store(LISTENING, Ordering::Release);
                        socket = Some(found.clone());
                        found
                    }
                    None => {
                        inner.none_found(p);
                        continue;
                    }
                }
            }
        };
        let (line, timeout) = match p.waiter {
            Some(_) => (wire::request(&p.label, None), wire::ROW_REPLY_TIMEOUT),
            None => (
                wire::request(&p.label, Some(p.at_unix_us)),
                wire::QUEUED_REPLY_TIMEOUT,
            ),
        };
        match wire::send(&path, &line, timeout) {
            Ok(wire::Reply::Ok) => {
                inner.counts.sent.fetch_add(1, Ordering::Relaxed);
                outcome(p, Ok(()));
            }
            Ok(wire::Reply::Refused(why)) => {
                inner.counts.refused.fetch_add(1, Ordering::Relaxed);
                outcome(p, Err(MarkError::Refused(why)));
            }
            // The recorder has ended: look again for this marker (once), first in the queue.
            Err(wire::SendError::Gone(_)) if !p.resent => {
                socket = None;
                inner.state.store(SEARCHING, Ordering::Release);
                p.resent = true;
                inner.lock().items.push_front(p);
            }
            Err(wire::SendError::Gone(e)) => {
                socket = None;
                inner.counts.failed.fetch_add(1, Ordering::Relaxed);
                outcome(p, Err(MarkError::Failed(e.to_string())));
            }
            Err(wire::SendError::NoReply(why)) => {
                inner.counts.failed.fetch_add(1, Ordering::Relaxed);
                outcome(p, Err(MarkError::Failed(why)));
            }
        }
    }
}
