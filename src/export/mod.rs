//! `memmon export`: targets followed by the engine `record` uses (`sampler/watch.rs`: the same
//! resolution, restarts, exit records and guarded PSS reads), every target ticked by one thread
//! on the one schedule (`sampler/schedule.rs`), served on /metrics for Prometheus. This module
//! is the exporter's sink: per target, the last sample and the largest RSS over a sliding
//! window (`window.rs`), published as a snapshot; `metrics.rs` writes
//! the snapshot in the Prometheus or OpenMetrics text format; `server.rs` is the small HTTP
//! server. The sampler and the server share only a snapshot behind a short lock, so a slow or
//! stuck scraper cannot delay a sample.
//!
//! A `cgroup:PATH` target is a memory cgroup, not a process tree: each tick reads its files
//! (held open, as [`CgroupReader`] does) and keeps the largest usage over the window, made exact
//! between samples by the cgroup's peak file (`memory.peak`, v1 `memory.max_usage_in_bytes`)
//! where it rose or was reset (`--reset-peaks`).

pub mod metrics;
pub mod server;
pub mod window;

use crate::model::sample::Sample;
use crate::probe::cgroup::{CgroupError, CgroupFs, CgroupReader, CgroupVersion, PeakWatch};
use crate::probe::ProcFs;
use crate::reporter::Reporter;
use crate::sampler::pss::PssGuard;
use crate::sampler::schedule::Schedule;
use crate::sampler::target::{self, TargetSpec};
use crate::sampler::tree::Quiet;
use crate::sampler::watch::{ExitRecords, Found, Tick, Watch, WatchOptions};
use crate::sys::WaitSet;
use metrics::{Snapshot, TargetSnapshot};
use regex::Regex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use window::WindowMax;

/// At most this many targets: the number of series stays bounded.
pub const MAX_TARGETS: usize = 256;

/// A target's name is at most this many bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// How a failed read of a cgroup target is told (and known again, to be told once).
const UNREADABLE: &str = "cannot read the cgroup: ";

/// A `--name` target that is not found is looked for at most this often (a lookup scans all
/// of /proc).
pub const NAME_LOOKUP_EVERY: Duration = Duration::from_secs(1);

/// One named target.
#[derive(Debug, Clone)]
pub struct ExportTarget {
    pub name: String,
    pub spec: TargetSpec,
}

/// Why a target (`--target`, a line of `--config`) or the list of them cannot be taken; each
/// names the text, the file and line, or the flag.
#[derive(Debug, thiserror::Error)]
pub enum TargetListError {
    #[error("'{0}': expected NAME=KIND:VALUE, e.g. cuzk=pidfile:/run/cuzk.pid")]
    NoName(String),
    #[error("'{0}': a target's name has 1 to {MAX_NAME_BYTES} bytes")]
    NameLength(String),
    #[error("'{0}': a target's name has no control characters")]
    NameControl(String),
    #[error("'{0}': expected KIND:VALUE after '=' (pid:, pidfile:, name:, cgroup:)")]
    NoKind(String),
    #[error("'{text}': {kind}: needs a value")]
    NoValue { text: String, kind: String },
    #[error("'{text}': '{value}' is not a PID")]
    NotAPid { text: String, value: String },
    #[error("'{text}': not a valid regex: {error}")]
    Regex { text: String, error: regex::Error },
    #[error("'{text}': unknown kind '{kind}' (pid:, pidfile:, name:, cgroup:)")]
    UnknownKind { text: String, kind: String },
    #[error("cannot read {}: {error} (--config)", .path.display())]
    Config {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A line of a config file, at fault for `why`.
    #[error("{}:{line}: {why} (--config)", .path.display())]
    ConfigLine {
        path: PathBuf,
        line: usize,
        why: Box<TargetListError>,
    },
    #[error("a target named '{name}' is on line {first} already: names must differ")]
    NameOnLine { name: String, first: usize },
    #[error("{} names no target (--config: one NAME=KIND:VALUE a line)", .0.display())]
    EmptyConfig(PathBuf),
    #[error("no target: give --target NAME=KIND:VALUE or --config FILE")]
    NoTarget,
    #[error("{0} targets: at most {MAX_TARGETS} (each is a set of series)")]
    TooMany(usize),
    #[error("two targets are named '{0}': names must differ")]
    NamedTwice(String),
}

impl crate::error::Classified for TargetListError {
    /// The targets as given: bad input.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// Parses `NAME=pid:PID`, `NAME=pidfile:PATH`, `NAME=name:REGEX` or `NAME=cgroup:PATH` (a
/// cgroup's directory, or its path as /proc/PID/cgroup writes it).
pub fn parse_target(text: &str) -> Result<ExportTarget, TargetListError> {
    let (name, what) = text
        .split_once('=')
        .ok_or_else(|| TargetListError::NoName(text.to_string()))?;
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(TargetListError::NameLength(text.to_string()));
    }
    if name.chars().any(|c| c.is_control() && c != '\n') {
        return Err(TargetListError::NameControl(text.to_string()));
    }
    let (kind, value) = what
        .split_once(':')
        .ok_or_else(|| TargetListError::NoKind(text.to_string()))?;
    if value.is_empty() {
        return Err(TargetListError::NoValue {
            text: text.to_string(),
            kind: kind.to_string(),
        });
    }
    let spec = match kind {
        "pid" => TargetSpec::Pid(value.parse().ok().filter(|&p: &i32| p > 0).ok_or_else(|| {
            TargetListError::NotAPid {
                text: text.to_string(),
                value: value.to_string(),
            }
        })?),
        "pidfile" => TargetSpec::Pidfile(PathBuf::from(value)),
        "name" => TargetSpec::Name(Regex::new(value).map_err(|error| TargetListError::Regex {
            text: text.to_string(),
            error,
        })?),
        "cgroup" => TargetSpec::Cgroup(value.to_string()),
        other => {
            return Err(TargetListError::UnknownKind {
                text: text.to_string(),
                kind: other.to_string(),
            })
        }
    };
    Ok(ExportTarget {
        name: name.to_string(),
        spec,
    })
}

/// Reads a config file: one target a line as `--target` takes it; blank lines and lines
/// starting with `#` are skipped. Errors name the file and line.
pub fn read_config(path: &Path) -> Result<Vec<ExportTarget>, TargetListError> {
    let text = std::fs::read_to_string(path).map_err(|error| TargetListError::Config {
        path: path.to_path_buf(),
        error,
    })?;
    let mut out: Vec<ExportTarget> = Vec::new();
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |why: TargetListError| TargetListError::ConfigLine {
            path: path.to_path_buf(),
            line: i + 1,
            why: Box::new(why),
        };
        let t = parse_target(line).map_err(at)?;
        if let Some(k) = out.iter().position(|o| o.name == t.name) {
            return Err(at(TargetListError::NameOnLine {
                name: t.name,
                first: lines[k],
            }));
        }
        out.push(t);
        lines.push(i + 1);
    }
    if out.is_empty() {
        return Err(TargetListError::EmptyConfig(path.to_path_buf()));
    }
    Ok(out)
}

/// Checks a list of targets: at least one, at most [`MAX_TARGETS`], names unique.
pub fn check_targets(targets: &[ExportTarget]) -> Result<(), TargetListError> {
    if targets.is_empty() {
        return Err(TargetListError::NoTarget);
    }
    if targets.len() > MAX_TARGETS {
        return Err(TargetListError::TooMany(targets.len()));
    }
    let mut seen = std::collections::HashSet::new();
    for t in targets {
        if !seen.insert(t.name.as_str()) {
            return Err(TargetListError::NamedTwice(t.name.clone()));
        }
    }
    Ok(())
}

/// What the exporter samples, and how.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub targets: Vec<ExportTarget>,
    pub interval: Duration,
    pub window: Duration,
    pub reset_peaks: bool,
    pub children: bool,
    pub pss: Option<PssGuard>,
    /// Read the kernel's exit records where memmon may (`--no-taskstats` turns it off): a
    /// process of a target's tree that peaks and exits between two samples keeps its peak in
    /// the window.
    pub exit_records: bool,
    pub procfs: ProcFs,
    /// Where `cgroup:` targets are looked up (/sys/fs/cgroup; a fake tree in tests).
    pub cgroupfs: CgroupFs,
}

/// One followed target.
struct Follower {
    name: String,
    spec: TargetSpec,
    /// A process target: the engine that finds and follows it (`sampler/watch.rs`); `None`
    /// for a `cgroup:` target.
    watch: Option<Watch>,
    next_lookup: Instant,
    /// The last reason it is not found, told once.
    told: Option<String>,
    window: WindowMax,
    /// The last sample of its tree (while up).
    current: Option<Sample>,
    /// Per process (pid, start time): its VmHWM at the last sample, and whether it was reset
    /// right after (so the next VmHWM is the peak since that sample).
    hwm: HashMap<(i32, u64), (u64, bool)>,
    /// The tree's PSS at its last complete read.
    pss: Option<u64>,
    /// A `cgroup:` target: the cgroup being read, its last reading and its window of usage.
    cg: Option<CgroupWatch>,
    cg_stats: Option<crate::probe::cgroup::CgroupStats>,
    cg_window: WindowMax,
    /// Times the cgroup was found again after it was gone.
    cg_restarts: u64,
    /// A failed reset of the cgroup's peak, told once.
    cg_reset_told: bool,
    /// The cgroup found was read at least once; one read before was lost since (so finding it
    /// again is a restart, while a cgroup found but never readable is not).
    cg_was_read: bool,
    cg_lost_after_read: bool,
    /// The cgroup was missing at a lookup (or gone after a read): the one found next was made
    /// since the exporter began, so its whole peak file is from after then.
    cg_missing_seen: bool,
    /// The marks of every member were reset at the last tick (`--reset-peaks`, none refused).
    reset_held: bool,
    /// What this target has to say, each line after `target NAME: `.
    report: Reporter,
}

/// A cgroup found and read tick after tick.
struct CgroupWatch {
    reader: CgroupReader,
    /// v2 after a reset: the descriptor of `memory.peak` the reset holds for.
    watch: Option<PeakWatch>,
    /// The peak file at the last reading, and whether it was reset right after.
    last_peak: Option<(u64, bool)>,
}

impl Follower {
    fn new(t: &ExportTarget, opts: &ExportOptions, now: Instant, report: &Reporter) -> Follower {
        let report = report.prefixed(format!("target {}: ", t.name));
        let watch = match &t.spec {
            TargetSpec::Cgroup(_) => None,
            spec => {
                let wopts = WatchOptions {
                    procfs: opts.procfs.clone(),
                    children: opts.children,
                    pss: opts.pss.clone(),
                    root_by_statm: true,
                };
                let exits = if opts.exit_records {
                    ExitRecords::Wanted
                } else {
                    ExitRecords::Off
                };
                match Watch::new(spec.clone(), wopts.clone(), exits, None, report.clone()) {
                    Ok(w) => Some(w),
                    // No thread for PSS: the target is watched without it.
                    Err(e) => {
                        report.warning(&format!("cannot start a thread to read PSS: {e}"));
                        let wopts = WatchOptions { pss: None, ..wopts };
                        let exits = if opts.exit_records {
                            ExitRecords::Wanted
                        } else {
                            ExitRecords::Off
                        };
                        Watch::new(spec.clone(), wopts, exits, None, report.clone()).ok()
                    }
                }
            }
        };
        Follower {
            name: t.name.clone(),
            spec: t.spec.clone(),
            watch,
            next_lookup: now,
            told: None,
            window: WindowMax::new(opts.window),
            current: None,
            hwm: HashMap::new(),
            pss: None,
            cg: None,
            cg_stats: None,
            cg_window: WindowMax::new(opts.window),
            cg_restarts: 0,
            cg_reset_told: false,
            cg_was_read: false,
            cg_lost_after_read: false,
            cg_missing_seen: false,
            reset_held: false,
            report,
        }
    }

    fn cgroup_lost(&mut self, now: Instant) {
        self.cg = None;
        self.cg_stats = None;
        self.cg_missing_seen = true;
        self.next_lookup = now;
        if self.cg_was_read {
            self.cg_lost_after_read = true;
        }
        self.cg_was_read = false;
    }

    /// One tick of a `cgroup:` target: looks the cgroup up while it is not there (at most
    /// every [`NAME_LOOKUP_EVERY`]), reads it, and feeds the window with its usage since the
    /// previous tick.
    fn tick_cgroup(&mut self, path: &str, opts: &ExportOptions, now: Instant, report: &Reporter) {
        // Once a second, a cgroup being read is checked to be still there (held files of a
        // removed cgroup fail on the kernel's file system, but need not elsewhere).
        if now >= self.next_lookup {
            if let Some(w) = &self.cg {
                self.next_lookup = now + NAME_LOOKUP_EVERY;
                if !w.reader.cgroup().dir.is_dir() {
                    report.note(&format!(
                        "the cgroup {} is gone; looking for it again",
                        w.reader.cgroup().dir.display()
                    ));
                    self.cgroup_lost(now);
                }
            }
        }
        if self.cg.is_none() && now >= self.next_lookup {
            self.next_lookup = now + NAME_LOOKUP_EVERY;
            match opts.cgroupfs.at(path) {
                Ok(cg) => {
                    let what = format!(
                        "{} at {} ({})",
                        cg.path,
                        cg.dir.display(),
                        cg.version.name()
                    );
                    if self.cg_lost_after_read {
                        self.cg_restarts += 1;
                        self.cg_lost_after_read = false;
                        report.note(&format!("the cgroup is back: {what}"));
                    } else if !self
                        .told
                        .as_deref()
                        .is_some_and(|t| t.starts_with(UNREADABLE))
                    {
                        // (Found again after a failed read: said once, not every second.)
                        report.note(&format!("watching the cgroup {what}"));
                    }
                    // A cgroup made since the exporter began looking: its peak file's value
                    // is from after then, and counts at the first reading as a rise would.
                    let last_peak = self.cg_missing_seen.then_some((0, false));
                    self.cg = Some(CgroupWatch {
                        reader: CgroupReader::new(cg),
                        watch: None,
                        last_peak,
                    });
                }
                Err(e) => {
                    // The reader's own message names record's --cgroup: this is a --target.
                    if matches!(e, CgroupError::NotFound(..)) {
                        self.cg_missing_seen = true;
                    }
                    let msg = match e {
                        CgroupError::NotFound(given, tried) => format!(
                            "no memory cgroup '{given}' (looked for its memory files in {tried})"
                        ),
                        e => e.to_string(),
                    };
                    if self.told.as_deref() != Some(msg.as_str()) {
                        report.note(&format!(
                            "not found yet: {msg}; /metrics reports memmon_target_up 0 until it appears"));
                        self.told = Some(msg);
                    }
                }
            }
        }
        let peak = self.cg.as_mut().map(|w| w.tick(opts.reset_peaks));
        match peak {
            Some(Ok((st, peak, reset_err))) => {
                if let Some(e) = reset_err {
                    if !self.cg_reset_told {
                        report.note(&format!(
                            "cannot reset the cgroup's peak ({e}); the window peak is the sampled usage, exact only where the peak rises above every earlier one"));
                        self.cg_reset_told = true;
                    }
                }
                self.cg_stats = Some(st);
                self.cg_was_read = true;
                self.told = None;
                self.cg_window.push(now, peak);
            }
            Some(Err(e)) => {
                let msg = format!("{UNREADABLE}{e}");
                if self.told.as_deref() != Some(msg.as_str()) {
                    report.note(&format!("{msg}; looking for it again every second"));
                    self.told = Some(msg);
                }
                self.cgroup_lost(now);
                self.cg_window.expire(now);
            }
            None => self.cg_window.expire(now),
        }
    }

    /// Looks for the target's process (`Watch::look`): the first time (or while never found)
    /// as `record` resolves it, after an exit as `record` waits for a restart. A `--name`
    /// target is looked for at most every [`NAME_LOOKUP_EVERY`].
    fn find(&mut self, now: Instant) {
        let Some(watch) = &mut self.watch else {
            return;
        };
        if now < self.next_lookup {
            return;
        }
        if matches!(self.spec, TargetSpec::Name(_)) {
            self.next_lookup = now + NAME_LOOKUP_EVERY;
        }
        let said = match watch.look() {
            Ok(Some(Found::First(pid, comm))) => format!("watching PID {pid} ({comm})"),
            Ok(Some(Found::Restart(pid, comm))) => format!("restarted as PID {pid} ({comm})"),
            Ok(None) => return,
            Err(e) => {
                let msg = not_found_yet(&e);
                if self.told.as_deref() != Some(msg.as_str()) {
                    self.report.note(&format!(
                        "not found yet: {msg}; /metrics reports memmon_target_up 0 until it appears"
                    ));
                    self.told = Some(msg);
                }
                return;
            }
        };
        self.report.note(&said);
        self.told = None;
        self.hwm.clear();
        self.pss = None;
    }

    /// One tick: samples the tree (finding it first if needed) and feeds the window.
    fn tick(&mut self, opts: &ExportOptions, now: Instant, missed: u64) {
        if let TargetSpec::Cgroup(path) = &self.spec {
            let (path, report) = (path.clone(), self.report.clone());
            return self.tick_cgroup(&path, opts, now, &report);
        }
        if !self.watch.as_ref().is_some_and(Watch::is_up) {
            self.find(now);
        }
        let Some(watch) = self.watch.as_mut().filter(|w| w.is_up()) else {
            return self.window.expire(now);
        };
        // A PSS read that ended since the last tick: its sum goes on this tick's sample, and
        // an incomplete one clears the last (a partial sum would look like a drop).
        if watch.pss_arrived() == Some(false) {
            self.pss = None;
        }
        let reset_held = self.reset_held;
        let peak = match watch.tick(None, None, missed) {
            Ok(Some(t)) => {
                if t.sample.pss_bytes.is_some() {
                    self.pss = t.sample.pss_bytes;
                }
                let peak = self.peak_of_tick(&t, opts.reset_peaks);
                self.current = Some(t.sample);
                Some(peak)
            }
            Ok(None) => {
                // Its peak at its exit (and its last children's), after the last sample.
                let peak = watch
                    .tree()
                    .and_then(|t| t.departures_after_last_sample())
                    .map(|d| departed_peak(d.departed_hwm, d.departed_risen_hwm, reset_held))
                    .filter(|&p| p > 0);
                self.report.note(&format!(
                    "PID {} exited{}",
                    watch.root_pid(),
                    if self.spec.can_restart() {
                        "; waiting for it to restart"
                    } else {
                        ""
                    }
                ));
                self.lost(now);
                peak
            }
            Err(e) => {
                self.report.note(&format!("cannot read it: {e}"));
                watch.lose();
                self.lost(now);
                None
            }
        };
        match peak {
            Some(v) => self.window.push(now, v),
            None => self.window.expire(now),
        }
    }

    fn lost(&mut self, now: Instant) {
        self.current = None;
        self.pss = None;
        self.hwm.clear();
        self.next_lookup = now;
    }

    /// The largest RSS of the tree since the previous tick, as far as it is known: the sum now,
    /// raised to a process's VmHWM where that mark is known to be from after the previous
    /// sample (it was reset then, or it rose since, or the process is new and started after
    /// the exporter did: a child, a restarted daemon), and to the peak a process that left
    /// since had at its exit (its exit record) when that is from after the previous sample
    /// too. A process's own mark is a lower bound of the tree's peak, exact for a single
    /// process.
    fn peak_of_tick(&mut self, t: &Tick, reset: bool) -> u64 {
        let watch = self.watch.as_mut().expect("sampled a tree");
        let departed = departed_peak(t.departed_hwm, t.departed_risen_hwm, self.reset_held);
        let mut peak = t.sample.rss_bytes.max(departed);
        let mut next = HashMap::with_capacity(self.hwm.len());
        for (h, st) in watch.members() {
            let key = (h.pid, h.start_time);
            match self.hwm.get(&key) {
                Some(&(prev, was_reset)) if was_reset || st.hwm > prev => peak = peak.max(st.hwm),
                Some(_) => {}
                // First seen: its whole mark counts where it began after the exporter did
                // (found since the previous tick, by fork events, a rescan or a restart).
                None if watch.born_since_made(h.start_time) => peak = peak.max(st.hwm),
                None => {}
            }
            next.insert(key, (st.hwm, reset));
        }
        let failed: Vec<i32> = if reset {
            let failed = watch
                .reset_marks()
                .into_iter()
                .map(|(pid, _)| pid)
                .collect();
            // What rose between this tick's read of status and the reset belongs to this tick
            // (under load that gap can outlast a short spike), where the mark counts at all.
            for &(pid, start, hwm) in watch.hwm_before_reset() {
                let counts = match self.hwm.get(&(pid, start)) {
                    Some(&(_, was_reset)) => was_reset,
                    None => watch.born_since_made(start),
                };
                if counts {
                    peak = peak.max(hwm);
                }
            }
            failed
        } else {
            Vec::new()
        };
        for ((pid, _), (_, was_reset)) in next.iter_mut() {
            *was_reset &= !failed.contains(pid);
        }
        self.reset_held = reset && failed.is_empty();
        self.hwm = next;
        peak
    }

    fn snapshot(&self, missed_ticks: u64) -> TargetSnapshot {
        let up = self.watch.as_ref().is_some_and(Watch::is_up) && self.current.is_some();
        TargetSnapshot {
            name: self.name.clone(),
            kind: self.spec.mode(),
            up: up || (self.cg.is_some() && self.cg_stats.is_some()),
            tree: self.current.clone().filter(|_| up),
            pss: self.pss,
            window_peak: self.window.max(),
            restarts: self.watch.as_ref().map_or(0, Watch::restarts) + self.cg_restarts,
            missed_ticks,
            cgroup: self.cg.as_ref().and(self.cg_stats),
            cgroup_window_peak: self.cg_window.max(),
        }
    }
}

impl CgroupWatch {
    /// Reads the cgroup; returns the reading, the largest usage since the previous reading as
    /// far as it is known, and why the peak could not be reset (with `reset`). The usage now,
    /// raised to the peak file where that file was reset after the previous reading or rose
    /// since (then its value was reached since the previous reading).
    fn tick(
        &mut self,
        reset: bool,
    ) -> Result<
        (
            crate::probe::cgroup::CgroupStats,
            u64,
            Option<crate::probe::cgroup::CgroupError>,
        ),
        crate::probe::cgroup::CgroupError,
    > {
        let mut st = self.reader.read()?;
        if let Some(w) = &mut self.watch {
            st.peak = w.read().ok();
        }
        let mut peak = st.current;
        if let (Some(p), Some((prev, was_reset))) = (st.peak, self.last_peak) {
            if was_reset || p > prev {
                peak = peak.max(p);
            }
        }
        let mut reset_err = None;
        let mut reset_ok = false;
        if reset {
            match self.reader.cgroup().reset_peak() {
                Ok(w) => {
                    reset_ok = true;
                    if self.reader.cgroup().version == CgroupVersion::V2 {
                        self.watch = Some(w);
                    }
                }
                Err(e) => reset_err = Some(e),
            }
        }
        self.last_peak = st.peak.map(|p| (if reset_ok { 0 } else { p }, reset_ok));
        Ok((st, peak, reset_err))
    }
}

/// The sampler: one thread ticks every target at each interval and publishes a snapshot.
pub struct Sampler {
    opts: ExportOptions,
    followers: Vec<Follower>,
    shared: Arc<Mutex<Snapshot>>,
    stop: Arc<AtomicBool>,
    /// The ticks' deadlines, and the ticks missed (for every target alike).
    schedule: Schedule,
    ticks: u64,
    busy: Duration,
    /// What the sleep between ticks waits on, kept from one sleep to the next; `None` where no
    /// epoll set could be made (each tick then drains the event sockets unasked).
    sleep: Option<WaitSet>,
}

impl Sampler {
    pub fn new(opts: ExportOptions, report: Reporter) -> Sampler {
        let now = Instant::now();
        let followers = opts
            .targets
            .iter()
            .map(|t| Follower::new(t, &opts, now, &report))
            .collect();
        let shared = Arc::new(Mutex::new(Snapshot::default()));
        let s = Sampler {
            schedule: Schedule::new(now, opts.interval),
            opts,
            followers,
            shared,
            stop: Arc::new(AtomicBool::new(false)),
            ticks: 0,
            busy: Duration::ZERO,
            sleep: WaitSet::new().ok(),
        };
        s.publish();
        s
    }

    /// The snapshot the server reads.
    pub fn shared(&self) -> Arc<Mutex<Snapshot>> {
        self.shared.clone()
    }

    /// Set it to stop the loop of [`Sampler::run`].
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// One tick of every target, then a new snapshot.
    pub fn tick(&mut self) {
        let started = Instant::now();
        let missed = self.schedule.missed();
        for f in &mut self.followers {
            f.tick(&self.opts, started, missed);
        }
        self.ticks += 1;
        self.busy += started.elapsed();
        self.publish();
    }

    fn publish(&self) {
        let missed = self.schedule.missed();
        let snap = Snapshot {
            targets: self.followers.iter().map(|f| f.snapshot(missed)).collect(),
            interval: self.opts.interval,
            window: self.opts.window,
            reset_peaks: self.opts.reset_peaks,
            pss_enabled: self.opts.pss.is_some(),
            // Refused for one target is refused for all: the same process asked.
            exit_records: self.opts.exit_records
                && !self
                    .followers
                    .iter()
                    .any(|f| f.watch.as_ref().is_some_and(Watch::exit_records_refused)),
            ticks: self.ticks,
            busy_seconds: self.busy.as_secs_f64(),
        };
        // The lock is held only to swap the snapshot in.
        let mut guard = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        *guard = snap;
    }

    /// Ticks on the absolute schedule (`sampler/schedule.rs`: a deadline passed while a tick
    /// ran is missed, for every target) until the stop flag is set.
    pub fn run(mut self) {
        self.schedule = Schedule::new(Instant::now(), self.opts.interval);
        while !self.stop.load(Ordering::Relaxed) {
            self.tick();
            self.schedule.taken(Instant::now());
            let due = self.schedule.due();
            self.sleep_until(due);
        }
    }

    /// Sleeps until `deadline`, watching every tree's event sockets (fork events, exit records)
    /// meanwhile, each until something is queued on it: one still empty at the deadline is not
    /// drained at the tick (`Tree::heard_nothing`), a syscall saved per socket and tick.
    fn sleep_until(&mut self, deadline: Instant) {
        let trees = || {
            self.followers
                .iter()
                .flat_map(|f| match f.watch.as_ref().and_then(Watch::tree) {
                    Some(t) => t.event_fds(),
                    None => [None, None],
                })
        };
        // A socket the tree does not ask to be watched is not called quiet: it is drained.
        let mut quiet: Vec<bool> = trees().map(|w| w.is_some_and(|w| w.armed())).collect();
        let mut ready = vec![false; quiet.len()];
        loop {
            let now = Instant::now();
            if deadline <= now {
                break;
            }
            let fds: Vec<_> = trees()
                .zip(&quiet)
                .map(|(w, &q)| w.map(|w| w.armed_if(q)))
                .collect();
            let Some(set) = self.sleep.as_mut().filter(|_| quiet.iter().any(|&q| q)) else {
                std::thread::sleep(deadline - now);
                break;
            };
            match set.wait(&fds, Some(deadline - now), &mut ready) {
                // The deadline, a signal's EINTR (the loop sleeps on), or a socket with news.
                Ok(()) => quiet.iter_mut().zip(&ready).for_each(|(q, r)| *q &= !r),
                // `poll` fails only without memory for its table: sleep on, drain at the tick.
                Err(_) => {
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                    return;
                }
            }
        }
        for (f, q) in self.followers.iter_mut().zip(quiet.chunks(2)) {
            if let Some(t) = f.watch.as_mut().and_then(Watch::tree_mut) {
                t.heard_nothing(Quiet {
                    forks: q[0],
                    exits: q[1],
                });
            }
        }
    }
}

/// Why a target is not found yet, in the exporter's words: `record`'s advice to add `--wait`
/// does not apply (the exporter keeps looking by itself).
fn not_found_yet(e: &target::TargetError) -> String {
    match e {
        target::TargetError::NoMatch(re) => format!("no process matches name:{re}"),
        target::TargetError::PidfileEmpty(p) => {
            format!("pidfile {} is empty (still being written?)", p.display())
        }
        // The flags `record` names are --target kinds here (`pid:`, `pidfile:`).
        other => {
            let msg = other.to_string();
            [" (--pid)", " (--pidfile)", " (--name)"]
                .iter()
                .find_map(|f| msg.strip_suffix(f))
                .map_or_else(|| msg.clone(), str::to_string)
        }
    }
}

/// The peak that the exit records of a tick's departures give the window: every mark when the
/// marks of all members were reset at the previous tick (each is then the peak since it), else
/// only the marks that rose after the process was last read (or of a child never read).
fn departed_peak(departed_hwm: u64, departed_risen_hwm: u64, reset_held: bool) -> u64 {
    if reset_held {
        departed_hwm
    } else {
        departed_risen_hwm
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::fake::FakeProc;

    #[test]
    fn targets_parse_from_name_kind_and_value() {
        let t = parse_target("cuzk=pidfile:/run/cuzk.pid").unwrap();
        assert_eq!(t.name, "cuzk");
        assert!(matches!(t.spec, TargetSpec::Pidfile(ref p) if p == Path::new("/run/cuzk.pid")));
        assert!(matches!(
            parse_target("a=pid:42").unwrap().spec,
            TargetSpec::Pid(42)
        ));
        // The regex may hold '=' and ':'.
        let t = parse_target("db=name:postgres: .*=x").unwrap();
        assert!(matches!(t.spec, TargetSpec::Name(ref r) if r.as_str() == "postgres: .*=x"));
        for (bad, says) in [
            ("cuzk", "NAME=KIND:VALUE"),
            ("=pid:3", "1 to 128 bytes"),
            ("a=pid", "KIND:VALUE"),
            ("a=pid:x", "not a PID"),
            ("a=pid:-3", "not a PID"),
            ("a=name:(", "not a valid regex"),
            ("a=port:80", "unknown kind 'port'"),
            ("a\u{7}b=pid:1", "control characters"),
        ] {
            let e = parse_target(bad).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn a_target_not_found_yet_is_told_without_record_s_flags() {
        let e = target::TargetError::NoMatch("^cuzk$".into());
        assert_eq!(not_found_yet(&e), "no process matches name:^cuzk$");
        let e = target::TargetError::PidfileEmpty("/run/c.pid".into());
        assert_eq!(
            not_found_yet(&e),
            "pidfile /run/c.pid is empty (still being written?)"
        );
        let e = target::TargetError::NoSuchPid(42);
        assert_eq!(not_found_yet(&e), "no process with PID 42");
    }

    #[test]
    fn a_config_file_names_its_line_at_fault_and_names_must_be_unique() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("targets.conf");
        std::fs::write(
            &p,
            "# fleet\n\ncuzk=pidfile:/run/cuzk.pid\n  db=name:postgres\n",
        )
        .unwrap();
        let t = read_config(&p).unwrap();
        assert_eq!(t.len(), 2);
        check_targets(&t).unwrap();
        std::fs::write(&p, "a=pid:1\nb=pod:2\n").unwrap();
        let e = read_config(&p).unwrap_err().to_string();
        assert!(
            e.contains("targets.conf:2:") && e.contains("--config"),
            "{e}"
        );
        let twice = vec![
            parse_target("a=pid:1").unwrap(),
            parse_target("a=pid:2").unwrap(),
        ];
        assert!(check_targets(&twice)
            .unwrap_err()
            .to_string()
            .contains("'a'"));
        assert!(check_targets(&[])
            .unwrap_err()
            .to_string()
            .contains("--target"));
        let e = read_config(&dir.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none") && e.contains("--config"), "{e}");
        // Two targets of one name: the second's line, and the first's.
        std::fs::write(&p, "a=pid:1\n# b\na=pid:2\n").unwrap();
        let e = read_config(&p).unwrap_err().to_string();
        assert!(
            e.contains("targets.conf:3: a target named 'a' is on line 1 already"),
            "{e}"
        );
        // A file of comments alone names no target: said of the file.
        std::fs::write(&p, "# nothing yet\n\n").unwrap();
        let e = read_config(&p).unwrap_err().to_string();
        assert!(e.contains("targets.conf names no target (--config"), "{e}");
    }

    fn options(root: &Path, targets: &[&str]) -> ExportOptions {
        ExportOptions {
            targets: targets.iter().map(|t| parse_target(t).unwrap()).collect(),
            interval: Duration::from_millis(100),
            window: Duration::from_secs(60),
            reset_peaks: false,
            children: false,
            pss: None,
            exit_records: false,
            procfs: ProcFs::new(root),
            cgroupfs: CgroupFs::new(root.join("no-cgroup-here")),
        }
    }

    fn target<'a>(s: &'a Snapshot, name: &str) -> &'a TargetSnapshot {
        s.targets.iter().find(|t| t.name == name).unwrap()
    }

    #[test]
    fn a_risen_high_water_mark_raises_the_window_peak_and_a_missing_target_is_reported_down() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        FakeProc::new(100)
            .start(700)
            .rss_kb(10_000)
            .hwm_kb(50_000)
            .write(root);
        let mut s = Sampler::new(
            options(root, &["d=pid:100", "gone=pid:999"]),
            Reporter::silent(),
        );
        let shared = s.shared();
        s.tick();
        {
            let snap = shared.lock().unwrap();
            let d = target(&snap, "d");
            // The mark from before the first sample is not this window's.
            assert!(d.up);
            assert_eq!(
                (d.tree.as_ref().unwrap().rss_bytes, d.window_peak),
                (10_000 << 10, Some(10_000 << 10))
            );
            let g = target(&snap, "gone");
            assert!(!g.up && g.window_peak.is_none());
        }
        // Between two ticks the process rose to 300,000 kB and fell back: VmHWM rose.
        FakeProc::new(100)
            .start(700)
            .rss_kb(12_000)
            .hwm_kb(300_000)
            .write(root);
        s.tick();
        let snap = shared.lock().unwrap().clone();
        let d = target(&snap, "d");
        assert_eq!(
            (d.tree.as_ref().unwrap().rss_bytes, d.window_peak),
            (12_000 << 10, Some(300_000 << 10))
        );
        let text = metrics::render(&snap, metrics::TextFormat::Prometheus004);
        assert!(
            text.contains("memmon_target_up{target=\"gone\",kind=\"pid\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn pss_is_read_off_the_sampler_under_records_guard_and_an_unread_process_is_told_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        FakeProc::new(100)
            .start(700)
            .rss_kb(10_000)
            .hwm_kb(10_000)
            .write(root);
        std::fs::write(
            root.join("100/smaps_rollup"),
            "Rss: 10000 kB\nPss: 6000 kB\n",
        )
        .unwrap();
        let mut o = options(root, &["d=pid:100"]);
        o.pss = Some(PssGuard {
            every: Duration::from_millis(1),
            max_rss: 20_000 << 10,
            force: false,
        });
        let (report, told) = Reporter::collect();
        let mut s = Sampler::new(o, report);
        let shared = s.shared();
        let pss = || target(&shared.lock().unwrap(), "d").pss;
        // The read is asked at a tick and read on its own thread; a later tick shows it.
        let until = Instant::now() + Duration::from_secs(30);
        while pss().is_none() {
            assert!(Instant::now() < until, "no PSS read");
            s.tick();
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(pss(), Some(6000 << 10));
        // Over --pss-max-rss: not read, told once with the target's name, and the last sum
        // goes (a sum without a process would look like a drop).
        FakeProc::new(100)
            .start(700)
            .rss_kb(30_000)
            .hwm_kb(30_000)
            .write(root);
        let until = Instant::now() + Duration::from_secs(30);
        while pss().is_some() {
            assert!(Instant::now() < until, "the PSS stayed");
            s.tick();
            std::thread::sleep(Duration::from_millis(5));
        }
        for _ in 0..20 {
            s.tick();
            std::thread::sleep(Duration::from_millis(2));
        }
        let told: Vec<String> = told.lock().unwrap().iter().map(|m| m.1.clone()).collect();
        let pss_told: Vec<&String> = told.iter().filter(|t| t.contains("PSS")).collect();
        assert_eq!(pss_told.len(), 1, "{told:?}");
        assert!(
            pss_told[0].starts_with("target d: not reading PSS of PID 100")
                && pss_told[0].contains("--pss-max-rss"),
            "{told:?}"
        );
    }

    #[test]
    fn a_pidfile_target_that_restarts_counts_one_restart_and_keeps_its_window() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proc");
        FakeProc::new(100)
            .start(700)
            .rss_kb(10_000)
            .hwm_kb(10_000)
            .write(&root);
        std::fs::write(root.join("uptime"), "100.0 100.0\n").unwrap();
        let pidfile = dir.path().join("d.pid");
        std::fs::write(&pidfile, "100\n").unwrap();
        let spec = format!("d=pidfile:{}", pidfile.display());
        let mut s = Sampler::new(options(&root, &[&spec]), Reporter::silent());
        let shared = s.shared();
        s.tick();
        FakeProc::new(100)
            .start(700)
            .rss_kb(80_000)
            .hwm_kb(80_000)
            .write(&root);
        s.tick();
        std::fs::remove_dir_all(root.join("100")).unwrap();
        s.tick();
        {
            let snap = shared.lock().unwrap();
            let d = target(&snap, "d");
            assert!(!d.up);
            assert_eq!(
                d.window_peak,
                Some(80_000 << 10),
                "the peak outlives the process"
            );
        }
        FakeProc::new(200)
            .start(990)
            .rss_kb(5_000)
            .hwm_kb(5_000)
            .write(&root);
        let tmp = dir.path().join("d.pid.tmp");
        std::fs::write(&tmp, "200\n").unwrap();
        std::fs::rename(&tmp, &pidfile).unwrap();
        s.tick();
        let snap = shared.lock().unwrap().clone();
        let d = target(&snap, "d");
        assert!(d.up);
        assert_eq!(
            (d.restarts, d.tree.as_ref().unwrap().rss_bytes),
            (1, 5_000 << 10)
        );
    }

    /// A fake v1 memory cgroup at ROOT/memory/svc with these readings, in bytes.
    fn fake_cgroup(root: &Path, usage: u64, max_usage: u64, limit: Option<u64>, oom_kills: u64) {
        let base = root.join("memory");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("memory.usage_in_bytes"), "1\n").unwrap();
        let d = base.join("svc");
        std::fs::create_dir_all(&d).unwrap();
        for (n, v) in [
            ("memory.usage_in_bytes", format!("{usage}\n")),
            (
                "memory.stat",
                format!(
                    "total_rss {}\ntotal_cache {}\ntotal_shmem 0\ntotal_inactive_file {}\n",
                    usage / 4 * 3,
                    usage / 4,
                    usage / 8
                ),
            ),
            ("memory.max_usage_in_bytes", format!("{max_usage}\n")),
            (
                "memory.limit_in_bytes",
                format!("{}\n", limit.unwrap_or(9223372036854771712)),
            ),
            (
                "memory.oom_control",
                format!("oom_kill_disable 0\nunder_oom 0\noom_kill {oom_kills}\n"),
            ),
        ] {
            std::fs::write(d.join(n), v).unwrap();
        }
    }

    fn cgroup_options(dir: &Path, reset: bool) -> ExportOptions {
        let mut o = options(&dir.join("proc"), &[]);
        o.targets = vec![parse_target(&format!(
            "svc=cgroup:{}",
            dir.join("cg/memory/svc").display()
        ))
        .unwrap()];
        o.cgroupfs = CgroupFs::new(dir.join("cg"));
        o.reset_peaks = reset;
        o
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_cgroup_target_is_down_until_made_then_exports_usage_parts_limit_and_a_risen_peak() {
        let dir = tempfile::tempdir().unwrap();
        let (report, told) = Reporter::collect();
        let mut s = Sampler::new(cgroup_options(dir.path(), false), report);
        let shared = s.shared();
        s.tick();
        let snap = shared.lock().unwrap().clone();
        let t = target(&snap, "svc");
        assert!(!t.up && t.cgroup.is_none() && t.cgroup_window_peak.is_none());
        let text = metrics::render(&snap, metrics::TextFormat::Prometheus004);
        assert!(
            text.contains("memmon_target_up{target=\"svc\",kind=\"cgroup\"} 0"),
            "{text}"
        );
        let first = told.lock().unwrap()[0].1.clone();
        assert!(
            first.contains("not found yet")
                && first.contains("memory/svc")
                && !first.contains("--cgroup"),
            "{first}"
        );

        // The cgroup appears (looked for again at most once a second: the next lookup is let
        // through by hand). It was made since the exporter began looking, so its peak file
        // (500 MiB, a spike before the first reading) is this window's.
        let root = dir.path().join("cg");
        fake_cgroup(&root, 100 * MIB, 500 * MIB, Some(1 << 30), 2);
        s.followers[0].next_lookup = Instant::now();
        s.tick();
        let t = target(&shared.lock().unwrap(), "svc").clone();
        assert!(t.up);
        let c = t.cgroup.unwrap();
        assert_eq!((c.current, c.anon, c.file), (100 * MIB, 75 * MIB, 25 * MIB));
        assert_eq!(t.cgroup_window_peak, Some(500 * MIB));
        // Between two ticks usage rose to 700 MiB and fell back: the peak file rose.
        fake_cgroup(&root, 120 * MIB, 700 * MIB, Some(1 << 30), 3);
        s.tick();
        let snap = shared.lock().unwrap().clone();
        assert_eq!(target(&snap, "svc").cgroup_window_peak, Some(700 * MIB));
        let text = metrics::render(&snap, metrics::TextFormat::Prometheus004);
        for (name, v) in [
            ("memmon_target_up", 1),
            ("memmon_cgroup_bytes", 120 * MIB),
            ("memmon_cgroup_working_set_bytes", 105 * MIB),
            ("memmon_cgroup_anon_bytes", 90 * MIB),
            ("memmon_cgroup_file_bytes", 30 * MIB),
            ("memmon_cgroup_limit_bytes", 1 << 30),
            ("memmon_cgroup_window_peak_bytes", 700 * MIB),
            ("memmon_cgroup_oom_kills_total", 3),
        ] {
            let line = format!("{name}{{target=\"svc\",kind=\"cgroup\"}} {v}\n");
            assert!(text.contains(&line), "no {line:?} in\n{text}");
        }
        // A cgroup has no process tree: no RSS figures.
        assert!(!text.contains("memmon_rss_bytes{"), "{text}");
        assert!(!text.contains("memmon_processes{"), "{text}");
        assert!(!text.contains("memmon_window_peak_rss_bytes{"), "{text}");

        // The limit lifted: its series goes.
        fake_cgroup(&root, 120 * MIB, 700 * MIB, None, 3);
        s.tick();
        let snap = shared.lock().unwrap().clone();
        let text = metrics::render(&snap, metrics::TextFormat::Prometheus004);
        assert!(!text.contains("memmon_cgroup_limit_bytes{"), "{text}");

        // The cgroup removed: down, the window keeps its peak; made again: one restart.
        std::fs::remove_dir_all(root.join("memory/svc")).unwrap();
        s.followers[0].next_lookup = Instant::now();
        s.tick();
        let t = target(&shared.lock().unwrap(), "svc").clone();
        assert!(!t.up && t.cgroup.is_none());
        assert_eq!(t.cgroup_window_peak, Some(700 * MIB));
        // Made again, it spiked to 800 MiB before the first reading: counted, as it was made
        // since.
        fake_cgroup(&root, 10 * MIB, 800 * MIB, None, 0);
        s.followers[0].next_lookup = Instant::now();
        s.tick();
        let t = target(&shared.lock().unwrap(), "svc").clone();
        assert!(t.up);
        assert_eq!((t.restarts, t.cgroup.unwrap().current), (1, 10 * MIB));
        assert_eq!(t.cgroup_window_peak, Some(800 * MIB));
    }

    #[test]
    fn a_cgroup_there_from_the_start_keeps_its_earlier_peak_out_of_the_window() {
        // Its peak file (500 MiB) may predate the exporter: only a rise counts.
        let dir = tempfile::tempdir().unwrap();
        fake_cgroup(&dir.path().join("cg"), 100 * MIB, 500 * MIB, None, 0);
        let (report, _) = Reporter::collect();
        let mut s = Sampler::new(cgroup_options(dir.path(), false), report);
        let shared = s.shared();
        s.tick();
        let t = target(&shared.lock().unwrap(), "svc").clone();
        assert_eq!(t.cgroup_window_peak, Some(100 * MIB));
    }

    #[test]
    fn a_cgroup_found_but_unreadable_is_told_once_and_counts_no_restart() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        fake_cgroup(&root, 100 * MIB, 100 * MIB, None, 0);
        std::fs::remove_file(root.join("memory/svc/memory.stat")).unwrap();
        let (report, told) = Reporter::collect();
        let mut s = Sampler::new(cgroup_options(dir.path(), false), report);
        let shared = s.shared();
        for _ in 0..5 {
            s.followers[0].next_lookup = Instant::now();
            s.tick();
        }
        let t = target(&shared.lock().unwrap(), "svc").clone();
        assert!(!t.up && t.restarts == 0);
        let told: Vec<String> = told.lock().unwrap().iter().map(|m| m.1.clone()).collect();
        assert_eq!(told.len(), 2, "{told:?}");
        assert!(told[0].contains("watching the cgroup"), "{told:?}");
        assert!(
            told[1].contains("cannot read the cgroup") && told[1].contains("memory.stat"),
            "{told:?}"
        );
    }

    #[test]
    fn with_reset_peaks_a_cgroup_s_peak_file_is_reset_each_tick_and_its_next_value_counts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        fake_cgroup(&root, 100 * MIB, 500 * MIB, None, 0);
        let mut s = Sampler::new(cgroup_options(dir.path(), true), Reporter::silent());
        let shared = s.shared();
        s.tick();
        let peak_file = root.join("memory/svc/memory.max_usage_in_bytes");
        // A regular file stands in for the kernel's: the reset's write replaced its first bytes.
        let reset = |f: &Path| std::fs::read_to_string(f).unwrap().starts_with("0\n");
        assert!(reset(&peak_file));
        assert_eq!(
            target(&shared.lock().unwrap(), "svc").cgroup_window_peak,
            Some(100 * MIB)
        );
        // Since the reset usage went to 300 MiB and back: below the old lifetime peak (500
        // MiB), so only the reset makes it seen.
        std::fs::write(&peak_file, format!("{}\n", 300 * MIB)).unwrap();
        s.tick();
        assert_eq!(
            target(&shared.lock().unwrap(), "svc").cgroup_window_peak,
            Some(300 * MIB)
        );
        assert!(reset(&peak_file));
    }

    #[test]
    fn without_reset_peaks_a_peak_below_the_lifetime_one_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        fake_cgroup(&root, 100 * MIB, 500 * MIB, None, 0);
        let mut s = Sampler::new(cgroup_options(dir.path(), false), Reporter::silent());
        let shared = s.shared();
        s.tick();
        fake_cgroup(&root, 110 * MIB, 500 * MIB, None, 0);
        s.tick();
        let peak_file = root.join("memory/svc/memory.max_usage_in_bytes");
        assert_eq!(
            std::fs::read_to_string(&peak_file).unwrap(),
            format!("{}\n", 500 * MIB),
            "no reset without --reset-peaks"
        );
        assert_eq!(
            target(&shared.lock().unwrap(), "svc").cgroup_window_peak,
            Some(110 * MIB)
        );
    }
}
