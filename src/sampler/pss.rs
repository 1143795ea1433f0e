//! PSS reads, off the recorder's thread. Reading /proc/PID/smaps_rollup walks a process's page
//! tables under its memory-map lock (one read of a 210 GB process took 4.5 s), so the recorder
//! hands each read of the tree to a thread of its own and goes on sampling: a marker is never
//! taken late because a read was under way. When a read ends, the recorder takes a row at once
//! with its sum (the RSS beside it read right after).
//!
//! When to read (`PssSchedule`): at the first row, every `--pss-every`, and at a new RSS high
//! of the tree (5% above the largest RSS a read was asked at, at most every tenth of
//! `--pss-every`), so the largest PSS read is the PSS at the peak and not at idle; never while
//! a read is under way. The guard (`--pss-max-rss`, `--pss-force`) decides per process.

use crate::format::meta::PssUnreadReason;
use crate::probe::proc::PssSource;
use crate::probe::{ProcError, ProcHandle, StatusMem};
use crate::units::fmt_bytes;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// PSS is read from smaps_rollup, which walks the page tables under the target's mmap lock.
#[derive(Debug, Clone)]
pub struct PssGuard {
    pub every: Duration,
    /// Processes with more RSS than this are skipped (their PSS read would stall them)...
    pub max_rss: u64,
    /// ...unless forced.
    pub force: bool,
}

/// A new RSS high this much above the largest RSS a read was asked at asks for another read.
pub const NEW_HIGH_RATIO: f64 = 1.05;

/// A process whose PSS was not read in one read of the tree, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Unread {
    pub pid: i32,
    pub comm: String,
    pub reason: PssUnreadReason,
    pub why: String,
}

/// What one read of the tree gave: the sum, or `None` when a process could not be read (a sum
/// missing a process would look like a drop).
#[derive(Debug, Clone, PartialEq)]
pub struct PssRead {
    pub total: Option<u64>,
    pub unread: Vec<Unread>,
    /// The resident bytes of the NVIDIA device-file mappings of the processes asked for
    /// (`ask`'s `nvidia`), read in the same walk; `None` when one of them was not read.
    pub nvidia_rss: Option<u64>,
    /// The transparent huge pages (AnonHugePages) of the same read, summed as `total` is.
    pub anon_huge: Option<u64>,
}

/// One process of a read: its source (and whether its NVIDIA mappings are read too), or why it
/// is skipped before reading.
enum Item {
    /// To read: the source, whether its NVIDIA mappings are summed too, and the guard's limit
    /// (`None` when forced).
    Read(PssSource, bool, Option<u64>),
    Skipped(Unread),
}

/// Why a process over `--pss-max-rss` is not read.
fn over_guard(pid: i32, comm: &str, rss: u64, max_rss: u64) -> Unread {
    Unread {
        pid,
        comm: comm.to_string(),
        reason: PssUnreadReason::OverMaxRss,
        why: format!(
            "its RSS {} is over --pss-max-rss {}; reading smaps_rollup would stall it (--pss-force to read anyway)",
            fmt_bytes(rss),
            fmt_bytes(max_rss)
        ),
    }
}

/// The read of the tree's members now, under `guard`: those over `--pss-max-rss` skipped (unless
/// forced), the others' sources taken to be read on any thread.
fn items<'a>(
    members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
    guard: &PssGuard,
    nvidia: &[i32],
) -> Vec<Item> {
    members
        .map(|(h, st)| {
            if st.rss > guard.max_rss && !guard.force {
                return Item::Skipped(over_guard(h.pid, &h.comm, st.rss, guard.max_rss));
            }
            let limit = (!guard.force).then_some(guard.max_rss);
            match h.pss_source() {
                Ok(src) => Item::Read(src, nvidia.contains(&h.pid), limit),
                Err(e) => Item::Skipped(Unread {
                    pid: h.pid,
                    comm: h.comm.clone(),
                    reason: PssUnreadReason::Failed,
                    why: e.to_string(),
                }),
            }
        })
        .collect()
}

/// Reads every item; a process gone since is not missing (its pages are gone too).
fn read(items: Vec<Item>) -> PssRead {
    let mut buf = Vec::new();
    let mut total = 0u64;
    let mut anon_huge = 0u64;
    let mut nvidia_rss = Some(0u64);
    let mut unread = Vec::new();
    for item in items {
        // The read comes after the tick that judged the RSS, on another thread: a process that
        // has grown past the guard since is not walked either.
        let item = match item {
            Item::Read(ref src, _, Some(max)) => match src.resident_bytes(&mut buf) {
                Ok(rss) if rss > max => Item::Skipped(over_guard(src.pid, &src.comm, rss, max)),
                _ => item,
            },
            item => item,
        };
        match item {
            Item::Skipped(u) => {
                nvidia_rss = None;
                unread.push(u)
            }
            Item::Read(src, with_nvidia, _) => match if with_nvidia {
                src.read_with_nvidia(&mut buf)
            } else {
                src.read(&mut buf)
            } {
                Ok(sums) => {
                    total += sums.pss;
                    anon_huge += sums.anon_huge;
                    nvidia_rss = nvidia_rss.map(|r| r + sums.nvidia_rss);
                }
                Err(ProcError::NoSuchProcess(_)) => {}
                Err(e) => unread.push(Unread {
                    pid: src.pid,
                    comm: src.comm.clone(),
                    reason: match &e {
                        ProcError::PermissionDenied(_) => PssUnreadReason::Refused,
                        _ => PssUnreadReason::Failed,
                    },
                    why: e.to_string(),
                }),
            },
        }
    }
    PssRead {
        total: unread.is_empty().then_some(total),
        nvidia_rss: nvidia_rss.filter(|_| unread.is_empty()),
        anon_huge: unread.is_empty().then_some(anon_huge),
        unread,
    }
}

/// Reads the tree's PSS now, on the calling thread (the recording's last read, at its end);
/// with the resident bytes of the NVIDIA device-file mappings of the processes `nvidia`.
pub fn read_now<'a>(
    members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
    guard: &PssGuard,
    nvidia: &[i32],
) -> PssRead {
    read(items(members, guard, nvidia))
}

/// The thread that reads PSS; `done` is called on it with each read's result (the recorder
/// sends it to itself as a control message).
pub struct PssThread {
    jobs: Option<mpsc::Sender<Vec<Item>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    busy: bool,
}

impl PssThread {
    pub fn start(done: impl Fn(PssRead) + Send + 'static) -> std::io::Result<PssThread> {
        let (tx, rx) = mpsc::channel::<Vec<Item>>();
        let thread = std::thread::Builder::new()
            .name("memmon-pss".into())
            .spawn(move || {
                for job in rx {
                    done(read(job));
                }
            })?;
        Ok(PssThread {
            jobs: Some(tx),
            thread: Some(thread),
            busy: false,
        })
    }

    /// A read is under way.
    pub fn busy(&self) -> bool {
        self.busy
    }

    /// Starts a read of the members on the thread; for the processes `nvidia` (those holding
    /// GPU memory), the resident bytes of their NVIDIA device-file mappings too.
    pub fn ask<'a>(
        &mut self,
        members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
        guard: &PssGuard,
        nvidia: &[i32],
    ) {
        if let Some(tx) = &self.jobs {
            self.busy = tx.send(items(members, guard, nvidia)).is_ok();
        }
    }

    /// The read under way has ended.
    pub fn done(&mut self) {
        self.busy = false;
    }
}

impl Drop for PssThread {
    fn drop(&mut self) {
        // Closing the queue ends the thread after the read under way, if any.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// When to ask for a read (module docs).
#[derive(Debug, Clone)]
pub struct PssSchedule {
    every: Duration,
    next: Option<Instant>,
    last_asked: Option<Instant>,
    /// The largest tree RSS a read was asked at.
    high: u64,
}

impl PssSchedule {
    pub fn new(every: Duration) -> PssSchedule {
        PssSchedule {
            every,
            next: None,
            last_asked: None,
            high: 0,
        }
    }

    /// Whether a read is due now at a row whose tree RSS is `rss`: the first, one every
    /// `--pss-every`, or one at a new high (at most every tenth of it).
    pub fn due(&self, now: Instant, rss: u64) -> bool {
        let Some(next) = self.next else {
            return true;
        };
        if now >= next {
            return true;
        }
        let spaced = self
            .last_asked
            .is_none_or(|t| now.duration_since(t) >= self.every / 10);
        spaced && rss as f64 >= NEW_HIGH_RATIO * self.high as f64
    }

    /// A read was asked for now, at a row whose tree RSS is `rss`.
    pub fn asked(&mut self, now: Instant, rss: u64) {
        self.next = Some(now + self.every);
        self.last_asked = Some(now);
        self.high = self.high.max(rss);
    }

    /// When the last read was asked for.
    pub fn last_asked(&self) -> Option<Instant> {
        self.last_asked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_due_first_then_every_interval_and_at_a_new_high_spaced_out() {
        let t0 = Instant::now();
        let mut s = PssSchedule::new(Duration::from_secs(10));
        assert!(s.due(t0, 100));
        s.asked(t0, 100);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(
            !s.due(at(500), 200),
            "a new high, but less than a tenth of 10 s later"
        );
        assert!(s.due(at(1000), 200), "a new high a second later");
        assert!(!s.due(at(1000), 104), "less than 5% above the last high");
        assert!(s.due(at(10_000), 50), "the interval");
        s.asked(at(1000), 200);
        assert!(!s.due(at(3000), 205));
        assert!(s.due(at(3000), 210));
    }

    #[test]
    fn a_process_over_the_guard_is_skipped_and_leaves_no_sum() {
        let dir = tempfile::tempdir().unwrap();
        crate::probe::fake::FakeProc::new(7)
            .name("big")
            .start(1234)
            .rss_kb(2048)
            .pss_kb(1024)
            .write(dir.path());
        let fs = crate::probe::ProcFs::new(dir.path());
        let h = fs.open(7).unwrap();
        let small = StatusMem {
            rss: 2 << 20,
            ..StatusMem::default()
        };
        let guard = |max_rss: u64| PssGuard {
            every: Duration::from_secs(1),
            max_rss,
            force: false,
        };
        let ok = read_now([(&h, &small)].into_iter(), &guard(4 << 20), &[]);
        assert_eq!(ok.total, Some(1 << 20));
        let over = read_now([(&h, &small)].into_iter(), &guard(1 << 20), &[]);
        assert_eq!(over.total, None);
        assert_eq!(over.unread[0].reason, PssUnreadReason::OverMaxRss);
        // Under the guard at the tick (512 KiB), over it when the read comes (statm: 2 MiB):
        // not walked, and said so with the RSS it had grown to.
        let then = StatusMem {
            rss: 512 << 10,
            ..StatusMem::default()
        };
        let grown = read_now([(&h, &then)].into_iter(), &guard(1 << 20), &[]);
        assert_eq!(grown.total, None);
        assert_eq!(grown.unread[0].reason, PssUnreadReason::OverMaxRss);
        assert!(
            grown.unread[0].why.contains("2.00 MiB"),
            "{:?}",
            grown.unread
        );
        // Forced: read whatever its size.
        let forced = PssGuard {
            force: true,
            ..guard(1 << 20)
        };
        assert_eq!(
            read_now([(&h, &then)].into_iter(), &forced, &[]).total,
            Some(1 << 20)
        );
    }
}
