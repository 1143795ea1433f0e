//! Anatomy reads of a recording (`record --anatomy`), off the recorder's thread: the tree's
//! mappings read from /proc/PID/maps (no page-table walk) and, under the PSS guard's rules,
//! /proc/PID/smaps (a walk of every page table under the process's memory-map lock), grouped
//! by `analysis::anatomy` on a thread of its own, so a tick is never late because of a read.
//!
//! When (`AnatomySchedule`): at the first row; at a new high of the tree's RSS at least
//! `--anatomy-rise` above the RSS of the last one taken, at most one every `--anatomy-gap`; and
//! at the end of the recording while the target lives (read on the recorder's thread: it is
//! ending). smaps is read only with `--pss` on, and for each process as PSS would be: not over
//! `--pss-max-rss` unless `--pss-force`; a process read without it is named in the anatomy's
//! `unread`, its groups without resident numbers.

use crate::analysis::anatomy::group;
use crate::model::anatomy::{Anatomy, AnatomyUnread, ProcessMaps, Trigger};
use crate::model::sample::Sample;
use crate::probe::proc::PssSource;
use crate::probe::{maps, ProcError, ProcHandle, StatusMem};
use crate::sampler::pss::PssGuard;
use crate::units::fmt_bytes;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// When anatomies are taken (`--anatomy-rise`, `--anatomy-gap`) and whether smaps is read.
#[derive(Debug, Clone)]
pub struct AnatomyOptions {
    /// A new high must be at least this fraction above the RSS of the last anatomy (0.10: 10%).
    pub rise: f64,
    /// At most one anatomy at a new high every this long.
    pub gap: Duration,
    /// The PSS guard (`--pss`): smaps is read under it; `None`: maps only.
    pub smaps: Option<PssGuard>,
}

/// When the next anatomy is due (module docs).
#[derive(Debug, Clone)]
pub struct AnatomySchedule {
    rise: f64,
    gap: Duration,
    /// When the last one was asked for, and the tree RSS of its row.
    last: Option<(Instant, u64)>,
}

impl AnatomySchedule {
    pub fn new(rise: f64, gap: Duration) -> AnatomySchedule {
        AnatomySchedule {
            rise,
            gap,
            last: None,
        }
    }

    /// The trigger of an anatomy due now at a row whose tree RSS is `rss`: the first row's
    /// (`start`), or a new high (above the last one's RSS, at least `rise` above it, at least
    /// `gap` after it); `None` when none is due.
    pub fn due(&self, now: Instant, rss: u64) -> Option<Trigger> {
        let Some((at, high)) = self.last else {
            return Some(Trigger::Start);
        };
        // The rise in whole bytes (10% of 100 is 10, not 10.000000000000002).
        let risen = rss > high && rss >= high + (high as f64 * self.rise).round() as u64;
        (risen && now.duration_since(at) >= self.gap).then_some(Trigger::NewHigh)
    }

    /// An anatomy was asked for now, at a row whose tree RSS is `rss`.
    pub fn asked(&mut self, now: Instant, rss: u64) {
        self.last = Some((now, rss));
    }
}

/// One process of a read: its source and whether its smaps is read, or why nothing of it is.
enum Item {
    Read(PssSource, Option<String>),
    Skipped(AnatomyUnread),
}

/// The row an anatomy is asked at.
pub use crate::model::anatomy::Taken as Asked;

/// At the row `s`.
pub fn asked_at(trigger: Trigger, s: &Sample) -> Asked {
    Asked {
        trigger,
        unix_ms: s.unix_ms,
        elapsed_s: s.elapsed_s,
        tree_rss: s.rss_bytes,
    }
}

/// A read of the tree, its processes taken on the recorder's thread.
pub struct Job {
    asked: Asked,
    /// The phase or run it closes (`phase-end`, `run-end`).
    span: Option<String>,
    items: Vec<Item>,
}

/// The read of the members now: each one's smaps read only under `smaps`' guard (else its maps,
/// and why not its smaps).
pub fn job<'a>(
    members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
    smaps: Option<&PssGuard>,
    asked: Asked,
) -> Job {
    let items = members
        .map(|(h, st)| {
            let no_smaps = match smaps {
                None => Some("smaps is read only with --pss (a walk of every page table)".into()),
                Some(g) if st.rss > g.max_rss && !g.force => Some(format!(
                    "its RSS {} is over --pss-max-rss {}; reading smaps would stall it (--pss-force to read anyway)",
                    fmt_bytes(st.rss),
                    fmt_bytes(g.max_rss)
                )),
                Some(_) => None,
            };
            match h.pss_source() {
                Ok(src) => Item::Read(src, no_smaps),
                Err(e) => Item::Skipped(AnatomyUnread {
                    pid: h.pid,
                    comm: h.comm.clone(),
                    maps_read: false,
                    why: e.to_string(),
                }),
            }
        })
        .collect();
    Job {
        asked,
        span: None,
        items,
    }
}

/// Reads every process of the job and groups their mappings; a process gone since is left out
/// (its mappings are gone too).
pub fn read(job: Job) -> Anatomy {
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let mut procs: Vec<ProcessMaps> = Vec::new();
    let mut unread = Vec::new();
    for item in job.items {
        let (src, no_smaps) = match item {
            Item::Skipped(u) => {
                unread.push(u);
                continue;
            }
            Item::Read(src, no_smaps) => (src, no_smaps),
        };
        match maps::read(&src, no_smaps.is_none(), &mut buf) {
            Ok(p) => {
                if let Some(why) = no_smaps {
                    unread.push(AnatomyUnread {
                        pid: src.pid,
                        comm: src.comm.clone(),
                        maps_read: true,
                        why,
                    });
                }
                procs.push(p);
            }
            Err(ProcError::NoSuchProcess(_)) => {}
            Err(e) => unread.push(AnatomyUnread {
                pid: src.pid,
                comm: src.comm.clone(),
                maps_read: false,
                why: e.to_string(),
            }),
        }
    }
    let groups = group(&procs);
    let counts = (
        procs.len() as u32,
        procs.iter().filter(|p| p.smaps).count() as u32,
    );
    let mut a = Anatomy::new(
        job.asked,
        counts,
        t0.elapsed().as_micros() as u64,
        unread,
        groups,
    );
    a.span = job.span;
    a
}

/// The thread that reads anatomies: one read at a time, asked by the recorder; `done` is called
/// on it after each read (the recorder sends itself a control message and takes the result).
pub struct AnatomyThread {
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<Anatomy>,
    thread: Option<std::thread::JoinHandle<()>>,
    busy: bool,
}

impl AnatomyThread {
    pub fn start(wake: impl Fn() + Send + 'static) -> std::io::Result<AnatomyThread> {
        let (tx, rx) = mpsc::channel::<Job>();
        let (done_tx, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("memmon-anatomy".into())
            .spawn(move || {
                for job in rx {
                    if done_tx.send(read(job)).is_err() {
                        break;
                    }
                    wake();
                }
            })?;
        Ok(AnatomyThread {
            jobs: Some(tx),
            done,
            thread: Some(thread),
            busy: false,
        })
    }

    /// A read is under way.
    pub fn busy(&self) -> bool {
        self.busy
    }

    pub fn ask(&mut self, job: Job) {
        if let Some(tx) = &self.jobs {
            self.busy = tx.send(job).is_ok();
        }
    }

    /// The read that ended since the last call, if any.
    pub fn arrived(&mut self) -> Option<Anatomy> {
        let a = self.done.try_recv().ok()?;
        self.busy = false;
        Some(a)
    }

    /// Waits for the read under way (at the end of a recording), at most `limit`.
    pub fn wait(&mut self, limit: Duration) -> Option<Anatomy> {
        if !self.busy {
            return None;
        }
        let a = self.done.recv_timeout(limit).ok()?;
        self.busy = false;
        Some(a)
    }
}

impl Drop for AnatomyThread {
    fn drop(&mut self) {
        // Closing the queue ends the thread after the read under way, if any.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A recording's anatomies: the schedule, the thread, and what they cost.
pub struct Anatomies {
    pub opts: AnatomyOptions,
    schedule: AnatomySchedule,
    thread: AnatomyThread,
    /// Span ends (phases, runs) that got no anatomy: a read was under way at their row.
    pub skipped_span_ends: u64,
}

impl Anatomies {
    /// Starts the reading thread; `wake` is called on it after each read.
    pub fn start(
        opts: AnatomyOptions,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Anatomies> {
        Ok(Anatomies {
            schedule: AnatomySchedule::new(opts.rise, opts.gap),
            thread: AnatomyThread::start(wake)?,
            opts,
            skipped_span_ends: 0,
        })
    }

    /// At the row `s` that ends a span (a marker's row ends the phase before it, a bench run's
    /// `run-end` row its run): an anatomy with `trigger` (`phase-end`, `run-end`) for the span
    /// `label`, asked now, one per boundary; none when a read is under way (counted in
    /// `skipped_span_ends`: a late one would hold the next span's memory). The new-high
    /// schedule is left as it was: a span's end is no high. True when one was asked.
    pub fn at_span_end<'a>(
        &mut self,
        members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
        s: &Sample,
        trigger: Trigger,
        label: String,
    ) -> bool {
        if self.thread.busy() {
            self.skipped_span_ends += 1;
            return false;
        }
        let mut j = job(members, self.opts.smaps.as_ref(), asked_at(trigger, s));
        j.span = Some(label);
        self.thread.ask(j);
        self.thread.busy()
    }

    /// After the row `s`: asks the thread for an anatomy when one is due and none is under way.
    pub fn after_row<'a>(
        &mut self,
        members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
        s: &Sample,
    ) {
        if self.thread.busy() {
            return;
        }
        let now = Instant::now();
        let Some(trigger) = self.schedule.due(now, s.rss_bytes) else {
            return;
        };
        self.schedule.asked(now, s.rss_bytes);
        let asked = asked_at(trigger, s);
        self.thread
            .ask(job(members, self.opts.smaps.as_ref(), asked));
    }

    /// The anatomy read since the last call, if any.
    pub fn arrived(&mut self) -> Option<Anatomy> {
        self.thread.arrived()
    }

    /// A read is under way.
    pub fn busy(&self) -> bool {
        self.thread.busy()
    }

    /// The read under way, waited for (at the end of a recording whose target is gone).
    pub fn wait(&mut self) -> Vec<Anatomy> {
        self.thread
            .wait(Duration::from_secs(60))
            .into_iter()
            .collect()
    }

    /// The recording's last anatomy, read now on the caller's thread (after the read under way,
    /// if any, which is returned first).
    pub fn read_now<'a>(
        &mut self,
        members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
        asked: Asked,
    ) -> Vec<Anatomy> {
        let mut out: Vec<Anatomy> = self
            .thread
            .wait(Duration::from_secs(60))
            .into_iter()
            .collect();
        out.push(read(job(members, self.opts.smaps.as_ref(), asked)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::anatomy::GroupKind;

    #[test]
    fn an_anatomy_is_due_first_then_at_a_high_far_enough_above_the_last_and_spaced_out() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut s = AnatomySchedule::new(0.10, Duration::from_secs(5));
        assert_eq!(s.due(t0, 100), Some(Trigger::Start));
        s.asked(t0, 100);
        assert_eq!(s.due(at(6000), 109), None, "less than 10% above");
        assert_eq!(s.due(at(1000), 200), None, "a high, but within 5 s");
        assert_eq!(s.due(at(5000), 110), Some(Trigger::NewHigh));
        s.asked(at(5000), 110);
        assert_eq!(s.due(at(20_000), 100), None, "a drop is no high");
        // With no rise asked for, any RSS above the last one's is a high; an equal one is not.
        let mut s = AnatomySchedule::new(0.0, Duration::ZERO);
        s.asked(t0, 100);
        assert_eq!(s.due(at(1), 100), None);
        assert_eq!(s.due(at(1), 101), Some(Trigger::NewHigh));
    }

    /// A fake /proc/PID with a maps and an smaps of one 8 KiB heap and a 1 MiB anonymous mapping.
    fn fake(root: &std::path::Path, pid: i32, rss_kb: u64) {
        let maps =
            "00600000-00602000 rw-p 00000000 00:00 0                                  [heap]\n\
                    7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n";
        let smaps = "00600000-00602000 rw-p 00000000 00:00 0                                  [heap]\n\
                     Size:                  8 kB\nRss:                   8 kB\nPss:                   8 kB\n\
                     7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n\
                     Size:               1024 kB\nRss:                 512 kB\nPss:                 512 kB\n";
        crate::probe::fake::FakeProc::new(pid)
            .name("fake")
            .start(700)
            .rss_kb(rss_kb)
            .mappings(maps, smaps)
            .write(root);
    }

    #[test]
    fn smaps_is_read_only_under_the_pss_guard_and_its_absence_is_said() {
        let dir = tempfile::tempdir().unwrap();
        fake(dir.path(), 42, 520);
        let fs = crate::probe::ProcFs::new(dir.path());
        let h = fs.open(42).unwrap();
        let st = StatusMem {
            rss: 520 << 10,
            ..StatusMem::default()
        };
        let asked = Asked {
            trigger: Trigger::Start,
            unix_ms: 1,
            elapsed_s: 0.0,
            tree_rss: 520 << 10,
        };
        let guard = |max_rss: u64| PssGuard {
            every: Duration::from_secs(1),
            max_rss,
            force: false,
        };
        let anon = |a: &Anatomy| {
            a.groups
                .iter()
                .find(|g| g.key.kind == GroupKind::Anon)
                .cloned()
                .unwrap()
        };
        // Under the guard: resident sizes from smaps.
        let a = read(job([(&h, &st)].into_iter(), Some(&guard(1 << 30)), asked));
        assert_eq!((a.processes, a.smaps_processes), (1, 1));
        assert!(a.unread.is_empty(), "{:?}", a.unread);
        assert_eq!(anon(&a).virtual_bytes, 1 << 20);
        assert_eq!(anon(&a).resident.unwrap().rss_bytes, 512 << 10);
        assert!(a.resident_known());
        // Over it, and without --pss: maps only, virtual sizes exact, the reason said.
        for (smaps, says) in [
            (Some(guard(256 << 10)), "over --pss-max-rss"),
            (None, "only with --pss"),
        ] {
            let a = read(job([(&h, &st)].into_iter(), smaps.as_ref(), asked));
            assert_eq!((a.processes, a.smaps_processes), (1, 0));
            assert_eq!(anon(&a).virtual_bytes, 1 << 20);
            assert_eq!(anon(&a).resident, None);
            assert!(!a.resident_known());
            assert!(
                a.unread[0].maps_read && a.unread[0].why.contains(says),
                "{:?}",
                a.unread
            );
        }
    }
}
