//! Anatomy reads of a recording (`record --anatomy`), off the recorder's thread: the tree's
//! mappings read from /proc/PID/maps (no page-table walk) and, under a guard, /proc/PID/smaps
//! (a walk of every page table under the process's memory-map lock), grouped by
//! `analysis::anatomy` on a thread of its own, so a tick is never late because of a read.
//!
//! When: at the first row; at each span boundary (a marker's row ends a phase, a bench run's
//! `run-end` row its run: `phase-end`, `run-end`); at the end of the recording while the target
//! lives (read on the recorder's thread: it is ending); and at the highest point of each
//! *stretch*, the rows between two boundaries (markers, a bench run's start and end, a restart).
//! Within a stretch an anatomy is read at each new high of the tree's RSS at least
//! `--anatomy-rise` above the last one read in it (`PeakSchedule`), and, when the tree stops
//! rising below the rise (a row no higher than the stretch's top), at that row if it is nearer
//! the unread top than the last read: at most one every `--anatomy-gap`, while no other read
//! is under way. The highest is kept and written, as `peak`, when the stretch ends, and the
//! lower ones are dropped. So a ramp of any length gets its top read: exactly when the top is
//! held for two rows, else within the rise (or within one read's time when the reads come back
//! to back); and every span's highest anatomy is one of its stretches' `peak`s.
//!
//! smaps is read for each process as PSS would be, under a guard (`--anatomy-smaps-max`: not
//! over that RSS; smaps costs about 20 ms per GiB resident, BENCHMARKS.md); a process read
//! without it is named in the anatomy's `unread`, its groups without resident numbers.

use crate::analysis::anatomy::group;
use crate::model::anatomy::{Anatomy, AnatomyUnread, GroupKind, ProcessMaps, Trigger};
use crate::model::sample::Sample;
use crate::probe::proc::PssSource;
use crate::probe::{maps, ProcError, ProcHandle, StatusMem};
use crate::sampler::ledger::{LedgerHandle, LedgerThread};
use crate::sampler::pss::PssGuard;
use crate::units::fmt_bytes;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// When anatomies are taken (`--anatomy-rise`, `--anatomy-gap`) and whether smaps is read.
#[derive(Debug, Clone)]
pub struct AnatomyOptions {
    /// Within a stretch, a new high must be at least this fraction above the RSS of the last
    /// anatomy read in it (0.01: 1%).
    pub rise: f64,
    /// At most one read at a new high every this long.
    pub gap: Duration,
    /// The guard smaps is read under (`--anatomy-smaps-max`); `None`: maps only.
    pub smaps: Option<PssGuard>,
    /// The ledger of mappings, where perf may be used (`sampler/ledger.rs`); `None`: off
    /// (`--no-ledger`).
    pub ledger: Option<crate::probe::mapcalls::Options>,
}

/// When the next read at a new high of the stretch is due (module docs).
#[derive(Debug, Clone)]
pub struct PeakSchedule {
    rise: f64,
    gap: Duration,
    /// The tree RSS of the row the stretch's last read was asked at (or of its first row).
    high: Option<u64>,
    /// The highest tree RSS of the stretch's rows, read or not, and whether the last row seen
    /// raised it.
    top: Option<u64>,
    rose: bool,
    /// When the last read at a high was asked for.
    last_at: Option<Instant>,
    /// No read before this: the reads at new highs take at most a tenth of the wall time
    /// (`read_took`).
    not_before: Option<Instant>,
}

/// The reads at new highs take at most this share of the wall time: after a read that took
/// `d`, the next waits `(1 / share - 1) × d` (a read of 20 ms, 180 ms).
pub const PEAK_READ_SHARE: f64 = 0.10;

impl PeakSchedule {
    pub fn new(rise: f64, gap: Duration) -> PeakSchedule {
        PeakSchedule {
            rise,
            gap,
            high: None,
            top: None,
            rose: false,
            last_at: None,
            not_before: None,
        }
    }

    /// Every row of the stretch, read or not (before `due`): its tree RSS `rss`.
    pub fn seen(&mut self, rss: u64) {
        self.rose = self.top.is_none_or(|top| rss > top);
        self.top = self.top.max(Some(rss));
    }

    /// A read is due at a row whose tree RSS is `rss`, at least `gap` after the last read: the
    /// stretch's first; one above the last read's RSS by at least `rise`; or, once the tree
    /// stopped rising (the row is no new top), one nearer the unread top than the last read
    /// is, so that a top held for two rows is read whatever the rise.
    pub fn due(&self, now: Instant, rss: u64) -> bool {
        let risen = match self.high {
            None => true,
            // The rise in whole bytes (10% of 100 is 10, not 10.000000000000002).
            Some(high) => rss > high && rss >= high + (high as f64 * self.rise).round() as u64,
        };
        let settled = match (self.high, self.top) {
            (Some(high), Some(top)) => {
                !self.rose && top > high && rss > high && top - rss <= (top - high) / 2
            }
            _ => false,
        };
        (risen || settled)
            && self
                .last_at
                .is_none_or(|at| now.duration_since(at) >= self.gap)
            && self.not_before.is_none_or(|t| now >= t)
    }

    /// A read that ended at `now` took `read`: the next waits long enough to keep the reads
    /// within `PEAK_READ_SHARE` of the time.
    pub fn read_took(&mut self, now: Instant, read: Duration) {
        self.not_before = Some(now + read.mul_f64(1.0 / PEAK_READ_SHARE - 1.0));
    }

    /// A read was asked for now, at a row whose tree RSS is `rss`.
    pub fn asked(&mut self, now: Instant, rss: u64) {
        self.high = Some(rss);
        self.last_at = Some(now);
    }

    /// A new stretch begins at a boundary row whose tree RSS is `rss`: its first read is due at
    /// a rise above that row (an anatomy at the row itself is the boundary's).
    pub fn new_stretch(&mut self, rss: u64) {
        self.high = Some(rss);
        self.top = Some(rss);
        self.rose = false;
    }
}

/// One process of a read: its source and whether its smaps is read, or why nothing of it is.
enum Item {
    Read(PssSource, Option<String>),
    Skipped(AnatomyUnread),
}

/// At most this many start reads are dropped for having caught a launched program in its
/// loader (`in_loader`): 20 rows, a second at the default interval.
const START_LOADING_READS: u32 = 20;

/// The anatomy caught a program in glibc's dynamic loader before it mapped the libraries: the
/// loader (`ld-linux*`, which the kernel maps with the program) is its only library.
fn in_loader(a: &Anatomy) -> bool {
    let mut libraries = a
        .groups
        .iter()
        .filter(|g| g.key.kind == GroupKind::Library)
        .peekable();
    libraries.peek().is_some()
        && libraries.all(|g| {
            !g.key.rest
                && std::path::Path::new(&g.key.name)
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("ld-linux"))
        })
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
    /// The phase or run it closes (`phase-end`, `run-end`), or a `peak`'s phase or run.
    span: Option<String>,
    /// The stretch it was asked in (`Anatomies`: a `peak` is kept for its stretch).
    stretch: u64,
    items: Vec<Item>,
    /// The processes read.
    pids: Vec<i32>,
    /// The ledger, and the moment (wall clock, ms) whose live mappings it is asked for.
    ledger: Option<(Arc<LedgerHandle>, u64)>,
    /// A span begins after it (the recording's start, a span's end): the ledger clears the
    /// tree's soft-dirty bits once it has weighed its samples (`LedgerHandle::snapshot`).
    rearm: bool,
}

/// The read of the members now: each one's smaps read only under `smaps`' guard (else its maps,
/// and why not its smaps).
pub fn job<'a>(
    members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
    smaps: Option<&PssGuard>,
    asked: Asked,
) -> Job {
    let mut pids = Vec::new();
    let items = members
        .map(|(h, st)| {
            pids.push(h.pid);
            let no_smaps = match smaps {
                None => Some("smaps is not read (--anatomy-smaps-max 0)".into()),
                Some(g) if st.rss > g.max_rss && !g.force => Some(format!(
                    "its RSS {} is over --anatomy-smaps-max {}; reading smaps would stall it (about 20 ms per GiB)",
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
    // The spans of the ledger: from the recording's start, and from each span's end.
    let rearm = matches!(
        asked.trigger,
        Trigger::Start | Trigger::RunEnd | Trigger::PhaseEnd
    );
    Job {
        asked,
        span: None,
        stretch: 0,
        items,
        pids,
        ledger: None,
        rearm,
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
    if let Some((l, at)) = job.ledger {
        a.ledger = l.snapshot(at, resident_maps(&procs), job.rearm);
        a.ledger_unanswered = a.ledger.is_none();
    }
    a
}

/// The mappings of the processes read with smaps, with their Rss, for the ledger to weigh its
/// stacks by; `None` where no process was.
fn resident_maps(procs: &[ProcessMaps]) -> Option<Vec<crate::analysis::ledger::ResidentMaps>> {
    let out: Vec<_> = procs
        .iter()
        .filter(|p| p.smaps)
        .map(|p| {
            let kinds = crate::analysis::anatomy::classify(&p.mappings, p.exe.as_deref());
            let mut maps: Vec<crate::analysis::ledger::ResidentMap> = p
                .mappings
                .iter()
                .zip(kinds)
                .map(|(m, k)| crate::analysis::ledger::ResidentMap {
                    start: m.start,
                    end: m.end,
                    rss: m.usage.as_ref().map_or(0, |u| u.rss_bytes),
                    data: !m.perms.exec,
                    kind: k.kind,
                    all_soft_dirty: m.all_soft_dirty,
                    anon_huge: m.usage.as_ref().map_or(0, |u| u.anon_huge_bytes),
                })
                .collect();
            maps.sort_unstable_by_key(|m| m.start);
            crate::analysis::ledger::ResidentMaps { pid: p.pid, maps }
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

/// The thread that reads anatomies: one read at a time, asked by the recorder; `done` is called
/// on it after each read (the recorder sends itself a control message and takes the result).
pub struct AnatomyThread {
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<(u64, Anatomy)>,
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
                    let stretch = job.stretch;
                    if done_tx.send((stretch, read(job))).is_err() {
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

    /// The read that ended since the last call, if any, with the stretch it was asked in.
    pub fn arrived(&mut self) -> Option<(u64, Anatomy)> {
        let a = self.done.try_recv().ok()?;
        self.busy = false;
        Some(a)
    }

    /// Waits for the read under way (at the end of a recording), at most `limit`.
    pub fn wait(&mut self, limit: Duration) -> Option<(u64, Anatomy)> {
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

/// A recording's anatomies: the schedule, the thread, the stretch's highest read so far, and
/// what they cost.
pub struct Anatomies {
    pub opts: AnatomyOptions,
    schedule: PeakSchedule,
    thread: AnatomyThread,
    /// The stretch the rows are in now (module docs), counted from 0.
    stretch: u64,
    /// The run or phase the stretch is in (a `peak`'s `span`).
    stretch_span: Option<String>,
    /// The highest anatomy read in the current stretch, written when it ends.
    held: Option<Anatomy>,
    /// Span ends (phases, runs) that got no anatomy: a read was under way at their row.
    pub skipped_span_ends: u64,
    /// The start's anatomy was asked for.
    started: bool,
    /// Start reads that caught the launched program in its loader (`in_loader`), the last one
    /// held until the start is read again (and written in its place if a boundary or the end
    /// comes first), and whether the start's anatomy was written.
    loading_reads: u32,
    loading_start: Option<Anatomy>,
    start_written: bool,
    /// Every read that ended, and what they took.
    pub cost: crate::format::meta::AnatomyReads,
    /// The ledger of mappings, and the tree's processes last named to it.
    ledger: Option<LedgerThread>,
    ledger_members: Vec<i32>,
}

impl Anatomies {
    /// Starts the reading thread; `wake` is called on it after each read. `ledger`: the ledger
    /// of mappings, started before the target was launched (`start.rs`), if it runs.
    pub fn start(
        opts: AnatomyOptions,
        wake: impl Fn() + Send + 'static,
        ledger: Option<LedgerThread>,
    ) -> std::io::Result<Anatomies> {
        Ok(Anatomies {
            schedule: PeakSchedule::new(opts.rise, opts.gap),
            thread: AnatomyThread::start(wake)?,
            opts,
            stretch: 0,
            stretch_span: None,
            held: None,
            skipped_span_ends: 0,
            started: false,
            loading_reads: 0,
            loading_start: None,
            start_written: false,
            cost: Default::default(),
            ledger,
            ledger_members: Vec::new(),
        })
    }

    /// Fills in the job's ledger: the tree's processes named to it where they changed, and the
    /// moment asked for, the row's (`s`), or a late marker's own (its `event_lag_us` before).
    fn with_ledger(&mut self, mut j: Job, s: &Sample) -> Job {
        let Some(l) = &self.ledger else {
            return j;
        };
        let mut pids = j.pids.clone();
        pids.sort_unstable();
        if pids != self.ledger_members {
            l.handle().members(pids.clone());
            self.ledger_members = pids;
        }
        let lag_ms = s.event_lag_us.unwrap_or(0) / 1000;
        j.ledger = Some((l.handle(), s.unix_ms.saturating_sub(lag_ms)));
        j
    }

    /// Stops the ledger (at the recording's end, after its last read): what it did.
    pub fn stop_ledger(&mut self) -> Option<crate::format::meta::LedgerEnd> {
        self.ledger.take().map(LedgerThread::stop)
    }

    /// At a boundary row `s` (a marker's, a bench run's start or end, a restart): the stretch
    /// before it ends, and its highest read, if any, is returned to be written (after a start
    /// still held, `held_start`); the next one, in the run or phase `span`, begins at this row.
    pub fn boundary(&mut self, s: &Sample, span: Option<String>) -> Vec<Anatomy> {
        self.stretch += 1;
        self.stretch_span = span;
        self.schedule.new_stretch(s.rss_bytes);
        self.held_start()
            .into_iter()
            .chain(self.held.take())
            .collect()
    }

    /// At the row `s` that ends a span (a marker's row ends the phase before it, a bench run's
    /// `run-end` row its run): an anatomy with `trigger` (`phase-end`, `run-end`) for the span
    /// `label`, asked now, one per boundary; none when a read is under way (counted in
    /// `skipped_span_ends`: a late one would hold the next span's memory). True when one was
    /// asked.
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
        j.stretch = self.stretch;
        let j = self.with_ledger(j, s);
        self.thread.ask(j);
        self.thread.busy()
    }

    /// After the row `s`: asks the thread for a read when the row is a new high of the stretch
    /// (`PeakSchedule::due`) and none is under way.
    pub fn after_row<'a>(
        &mut self,
        members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
        s: &Sample,
    ) {
        self.schedule.seen(s.rss_bytes);
        if self.thread.busy() {
            return;
        }
        let now = Instant::now();
        // The recording's first row is its start's anatomy; the stretch's reads at new highs
        // begin above it.
        let trigger = if !self.started {
            Trigger::Start
        } else if self.schedule.due(now, s.rss_bytes) {
            Trigger::Peak
        } else {
            return;
        };
        self.started = true;
        self.schedule.asked(now, s.rss_bytes);
        let mut j = job(members, self.opts.smaps.as_ref(), asked_at(trigger, s));
        if trigger == Trigger::Peak {
            j.span = self.stretch_span.clone();
        }
        j.stretch = self.stretch;
        let j = self.with_ledger(j, s);
        self.thread.ask(j);
    }

    /// What a read that ended becomes: a `peak` of the current stretch is held (above the one
    /// held, which is dropped); any other, and a `peak` of a stretch that has ended (its read
    /// was under way at the boundary), is returned to be written.
    fn sort(&mut self, stretch: u64, a: Anatomy) -> Option<Anatomy> {
        self.cost.reads += 1;
        self.cost.read_us += a.read_us;
        self.cost.longest_read_us = self.cost.longest_read_us.max(a.read_us);
        if a.trigger == Trigger::Start {
            return self.sort_start(a);
        }
        if a.trigger != Trigger::Peak || stretch != self.stretch {
            return Some(a);
        }
        if let Some(old) = &self.held {
            self.cost.dropped += 1;
            if old.rss_bytes > a.rss_bytes {
                return None;
            }
        }
        self.held = Some(a);
        None
    }

    /// A start read: one of a launched program still in its loader has no libraries mapped
    /// yet, which would count as grown in the first phase, so it is held and the start read
    /// again at the next row (at most `START_LOADING_READS` times: a program may load slowly
    /// on a busy machine). A read again that a boundary overtook is dropped: the held one was
    /// written there.
    fn sort_start(&mut self, a: Anatomy) -> Option<Anatomy> {
        if self.start_written {
            self.cost.dropped += 1;
            return None;
        }
        if self.loading_start.take().is_some() {
            self.cost.dropped += 1;
        }
        if in_loader(&a) && self.loading_reads < START_LOADING_READS {
            self.loading_reads += 1;
            self.loading_start = Some(a);
            self.started = false;
            return None;
        }
        self.start_written = true;
        Some(a)
    }

    /// The start read held while the program was in its loader, to be written now (a boundary
    /// or the end came before it was read again).
    fn held_start(&mut self) -> Option<Anatomy> {
        let a = self.loading_start.take()?;
        self.start_written = true;
        self.started = true;
        Some(a)
    }

    /// The anatomy read since the last call that is to be written now, if any.
    pub fn arrived(&mut self) -> Option<Anatomy> {
        let (stretch, a) = self.thread.arrived()?;
        self.schedule
            .read_took(Instant::now(), Duration::from_micros(a.read_us));
        self.sort(stretch, a)
    }

    /// A read is under way.
    pub fn busy(&self) -> bool {
        self.thread.busy()
    }

    /// The last stretch's highest, after the read under way (at the end of a recording whose
    /// target is gone), in the order they are to be written.
    pub fn wait(&mut self) -> Vec<Anatomy> {
        let got = self
            .thread
            .wait(Duration::from_secs(60))
            .and_then(|(stretch, a)| self.sort(stretch, a));
        let mut out: Vec<Anatomy> = self.held_start().into_iter().chain(got).collect();
        out.extend(self.held.take());
        out
    }

    /// The recording's last anatomies: the read under way, the last stretch's highest, and one
    /// read now on the caller's thread (`end`).
    pub fn read_now<'a>(
        &mut self,
        members: impl Iterator<Item = (&'a ProcHandle, &'a StatusMem)>,
        s: &Sample,
    ) -> Vec<Anatomy> {
        let mut out = self.wait();
        let j = job(members, self.opts.smaps.as_ref(), asked_at(Trigger::End, s));
        let end = read(self.with_ledger(j, s));
        out.extend(self.sort(self.stretch, end));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::anatomy::GroupKind;

    #[test]
    fn a_read_is_due_at_each_high_of_the_stretch_far_enough_above_the_last_and_spaced_out() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut s = PeakSchedule::new(0.10, Duration::from_secs(5));
        assert!(s.due(t0, 100), "the first row");
        s.asked(t0, 100);
        assert!(!s.due(at(6000), 109), "less than 10% above");
        assert!(!s.due(at(1000), 200), "a high, but within 5 s");
        assert!(s.due(at(5000), 110));
        s.asked(at(5000), 110);
        assert!(!s.due(at(20_000), 100), "a drop is no high");
        // A new stretch starts from its boundary row's RSS, lower or higher than the last.
        s.new_stretch(50);
        assert!(!s.due(at(20_000), 54));
        assert!(s.due(at(20_000), 55));
        // A read of 100 ms: none for the next 900 ms.
        s.read_took(at(20_000), Duration::from_millis(100));
        assert!(!s.due(at(20_899), 60));
        assert!(s.due(at(20_900), 60));
        // With no rise and no gap asked for, any RSS above the last one's is a high (a ramp
        // read at each row); an equal one is not.
        let mut s = PeakSchedule::new(0.0, Duration::ZERO);
        s.asked(t0, 100);
        assert!(!s.due(at(1), 100));
        assert!(s.due(at(1), 101));
    }

    /// The rows' RSS one by one, each seen before it is asked about: which were due (and
    /// then read).
    fn reads(s: &mut PeakSchedule, rows: &[u64]) -> Vec<u64> {
        let t0 = Instant::now();
        let mut read = Vec::new();
        for &rss in rows {
            s.seen(rss);
            if s.due(t0, rss) {
                s.asked(t0, rss);
                read.push(rss);
            }
        }
        read
    }

    #[test]
    fn a_top_below_the_rise_is_read_once_the_tree_stops_rising_there() {
        // 10%: 1000 is read, 1050 is a new top within the rise; the next row holds it.
        let mut s = PeakSchedule::new(0.10, Duration::ZERO);
        assert_eq!(
            reads(&mut s, &[100, 1000, 1050, 1050, 1050]),
            [100, 1000, 1050]
        );
        // A row that falls back nearer the last read than the top is not worth a read; one
        // nearer the top is (the top is then read as nearly as it can be).
        let mut s = PeakSchedule::new(0.10, Duration::ZERO);
        assert_eq!(reads(&mut s, &[1000, 1060, 1020, 1050, 1050]), [1000, 1050]);
        // A creep below the rise at every row is read only at the rise: each row is a new top.
        let mut s = PeakSchedule::new(0.10, Duration::ZERO);
        assert_eq!(reads(&mut s, &[1000, 1030, 1060, 1090, 1120]), [1000, 1120]);
        // A plateau jittering under its top reads nothing more once its top is read.
        let mut s = PeakSchedule::new(0.10, Duration::ZERO);
        assert_eq!(
            reads(&mut s, &[1000, 1040, 1040, 1039, 1040, 1038]),
            [1000, 1040]
        );
        // The time share still holds a settled top back; it is read when the share allows.
        let t0 = Instant::now();
        let mut s = PeakSchedule::new(0.10, Duration::ZERO);
        s.seen(1000);
        s.asked(t0, 1000);
        s.read_took(t0, Duration::from_millis(100));
        s.seen(1050);
        s.seen(1050);
        assert!(!s.due(t0 + Duration::from_millis(500), 1050));
        assert!(s.due(t0 + Duration::from_millis(900), 1050));
        // A new stretch forgets the last one's top.
        s.new_stretch(500);
        s.seen(510);
        s.seen(504);
        assert!(
            !s.due(t0 + Duration::from_secs(2), 504),
            "nearer 500 than 510: no read"
        );
        s.seen(510);
        assert!(s.due(t0 + Duration::from_secs(2), 510), "510 held: read");
    }

    fn bare(trigger: Trigger, rss: u64) -> Anatomy {
        Anatomy::new(
            Asked {
                trigger,
                unix_ms: 0,
                elapsed_s: 0.0,
                tree_rss: rss,
            },
            (0, 0),
            0,
            Vec::new(),
            Vec::new(),
        )
    }

    /// An anatomy with a library group for each path.
    fn with_libraries(trigger: Trigger, paths: &[&str]) -> Anatomy {
        let mut a = bare(trigger, 1);
        a.groups = paths
            .iter()
            .map(|p| crate::model::anatomy::Group {
                key: crate::model::anatomy::GroupKey {
                    kind: GroupKind::Library,
                    name: p.to_string(),
                    size_class: None,
                    rest: false,
                },
                processes: 1,
                mappings: 1,
                virtual_bytes: 4096,
                min_mapping_bytes: 4096,
                max_mapping_bytes: 4096,
                resident: None,
            })
            .collect();
        a
    }

    #[test]
    fn a_start_read_in_the_programs_loader_is_read_again_at_the_next_row() {
        let loader = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
        let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
        assert!(in_loader(&with_libraries(Trigger::Start, &[loader])));
        assert!(!in_loader(&with_libraries(Trigger::Start, &[loader, libc])));
        // A static program has no library; musl's loader is its libc.
        assert!(!in_loader(&with_libraries(Trigger::Start, &[])));
        assert!(!in_loader(&with_libraries(
            Trigger::Start,
            &["/lib/ld-musl-x86_64.so.1"]
        )));
        let opts = AnatomyOptions {
            rise: 0.0,
            gap: Duration::ZERO,
            smaps: None,
            ledger: None,
        };
        let fresh = || Anatomies::start(opts.clone(), || {}, None).unwrap();
        let in_it = with_libraries(Trigger::Start, &[loader]);
        let loaded = with_libraries(Trigger::Start, &[loader, libc]);
        // Held, and asked for again; the read again replaces it.
        let mut a = fresh();
        a.started = true;
        assert_eq!(a.sort(0, in_it.clone()), None);
        assert!(!a.started, "the start is asked for again");
        a.started = true;
        assert_eq!(a.sort(0, loaded.clone()), Some(loaded.clone()));
        assert_eq!(a.cost.dropped, 1);
        // Only the start is held: an end read in the loader is written as it is.
        let end = with_libraries(Trigger::End, &[loader]);
        assert_eq!(a.sort(0, end.clone()), Some(end));
        // A boundary before the read again writes the held start first, and the read again,
        // arriving after it, is dropped.
        let mut a = fresh();
        a.started = true;
        assert_eq!(a.sort(0, in_it.clone()), None);
        a.held = Some(bare(Trigger::Peak, 9));
        let row = crate::model::sample::Sample::default();
        let written = a.boundary(&row, None);
        let triggers: Vec<Trigger> = written.iter().map(|x| x.trigger).collect();
        assert_eq!(triggers, [Trigger::Start, Trigger::Peak]);
        assert!(a.started);
        assert_eq!(a.sort(0, loaded.clone()), None);
        // So does the end.
        let mut a = fresh();
        assert_eq!(a.sort(0, in_it.clone()), None);
        assert_eq!(a.wait(), std::slice::from_ref(&in_it));
        // A program that stays in its loader gets its start written all the same, in the end.
        let mut a = fresh();
        a.loading_reads = START_LOADING_READS;
        assert_eq!(a.sort(0, in_it.clone()), Some(in_it));
    }

    #[test]
    fn a_stretch_keeps_its_highest_read_and_gives_it_up_at_its_boundary() {
        let opts = AnatomyOptions {
            rise: 0.0,
            gap: Duration::ZERO,
            smaps: None,
            ledger: None,
        };
        let mut a = Anatomies::start(opts, || {}, None).unwrap();
        // Reads of the stretch arrive: each higher one replaces the one held.
        assert_eq!(a.sort(0, bare(Trigger::Peak, 10)), None);
        assert_eq!(a.sort(0, bare(Trigger::Peak, 30)), None);
        assert_eq!(a.sort(0, bare(Trigger::Peak, 20)), None, "lower: dropped");
        assert_eq!((a.cost.reads, a.cost.dropped), (3, 2));
        // Others are written at once.
        assert_eq!(
            a.sort(0, bare(Trigger::PhaseEnd, 5)).map(|x| x.rss_bytes),
            Some(5)
        );
        let row = crate::model::sample::Sample {
            rss_bytes: 7,
            ..Default::default()
        };
        let held = a.boundary(&row, Some("synthesis".into()));
        assert_eq!(held.len(), 1);
        assert_eq!((held[0].trigger, held[0].rss_bytes), (Trigger::Peak, 30));
        // A read of the stretch that has ended, arriving late: written as it is.
        assert_eq!(
            a.sort(0, bare(Trigger::Peak, 40)).map(|x| x.rss_bytes),
            Some(40)
        );
        assert_eq!(a.sort(1, bare(Trigger::Peak, 8)), None);
        assert_eq!(a.wait().len(), 1, "the last stretch's highest, at the end");
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
    fn smaps_is_read_only_under_its_guard_and_its_absence_is_said() {
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
            (Some(guard(256 << 10)), "over --anatomy-smaps-max"),
            (None, "--anatomy-smaps-max 0"),
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
