//! The recorder's cgroup source: a memory cgroup read at every tick (`record --cgroup`, or the
//! cgroup of memmon's own a launched command runs in), its peak reset at markers with
//! `--phase-peaks`, and at the end what the summary needs: the peak, the split at the largest
//! usage, the limit and the OOM kills seen, in the end record.

use crate::format::meta::CgroupEnd;
use crate::model::sample::Sample;
use crate::probe::cgroup::manage::{OwnCgroup, Swept};
use crate::probe::cgroup::{
    CgroupError, CgroupEvents, CgroupFs, CgroupReader, CgroupStats, CgroupVersion, MemCgroup,
    Membership, Outside, PeakWatch,
};
use crate::sampler::swap::SinceStart;

/// Which cgroup `record` reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupChoice {
    /// The target's own memory cgroup, when it holds only the target's tree (`--cgroup auto`).
    Auto,
    /// A cgroup named by its directory or its path (`--cgroup PATH`).
    Path(String),
    /// The target's own memory cgroup when it holds only the target's tree, else none (`bench`
    /// against a daemon, by default).
    AutoIfAlone,
}

impl CgroupChoice {
    /// `--cgroup auto` or `--cgroup PATH`.
    pub fn parse(text: &str) -> CgroupChoice {
        match text {
            "auto" => CgroupChoice::Auto,
            p => CgroupChoice::Path(p.to_string()),
        }
    }
}

/// A cgroup being read tick after tick.
pub struct CgroupSource {
    reader: CgroupReader,
    own: Option<OwnCgroup>,
    /// After a reset of a v2 peak: the descriptor the reset holds for.
    watch: Option<PeakWatch>,
    first: Option<CgroupStats>,
    last: Option<CgroupStats>,
    /// The reading with the largest `current`.
    largest: Option<CgroupStats>,
    /// The largest peak read, over every reset.
    peak_max: Option<u64>,
    /// The peak at the first reading (for a cgroup memmon did not make: it may predate the
    /// recording).
    peak_first: Option<u64>,
    resets: u64,
    reset_failures: u64,
    /// The first read error, kept for the end record; later ones are not repeated.
    pub error: Option<String>,
    /// It held the target's tree and nothing else when the recording began.
    holds_tree: bool,
    /// Why not, when memmon found out.
    not_the_tree: Option<String>,
    /// Its swap counts (v2 `pswpin`, `pswpout`) since the first reading.
    swap_in: Option<SinceStart>,
    swap_out: Option<SinceStart>,
    /// Where it holds the tree: which of the tree's processes are outside it, at each tick.
    membership: Option<Membership>,
    /// The tree's processes found outside it, each the first time (at most `LEFT_KEPT`), with
    /// the recording's clock then.
    left: Vec<(Outside, f64)>,
    /// The first membership check that failed, said once.
    membership_error: Option<String>,
    /// Every limit over the cgroup (its own and its ancestors'), read at the first tick: the
    /// events each counts during the recording are taken from here.
    limits_first: Vec<crate::probe::limits::LimitReading>,
}

/// How many of the processes found outside the cgroup the end record names.
const LEFT_KEPT: usize = 16;

impl CgroupSource {
    /// Reads an existing cgroup; `Ok`: it was checked to hold the target's tree alone, `Err`:
    /// why it does not.
    pub fn existing(cg: MemCgroup, holds_tree: Result<(), String>) -> CgroupSource {
        let mut s = CgroupSource::new(cg, None, holds_tree.is_ok());
        s.not_the_tree = holds_tree.err();
        s
    }

    /// Reads the cgroup memmon made for the command it launches; removes it at `finish`.
    pub fn own(own: OwnCgroup) -> CgroupSource {
        let cg = own.cgroup().clone();
        CgroupSource::new(cg, Some(own), true)
    }

    fn new(cg: MemCgroup, own: Option<OwnCgroup>, holds_tree: bool) -> CgroupSource {
        CgroupSource {
            reader: CgroupReader::new(cg),
            own,
            watch: None,
            first: None,
            last: None,
            largest: None,
            peak_max: None,
            peak_first: None,
            resets: 0,
            reset_failures: 0,
            error: None,
            holds_tree,
            not_the_tree: None,
            swap_in: None,
            swap_out: None,
            membership: None,
            left: Vec::new(),
            membership_error: None,
            limits_first: Vec::new(),
        }
    }

    /// Checks at every tick that the tree's processes are still in the cgroup (where it holds
    /// the tree: a process moved out takes its memory out of the cgroup's peak).
    pub fn watch_membership(&mut self, fs: CgroupFs) {
        if self.holds_tree {
            self.membership = Some(Membership::new(self.cgroup().clone(), fs));
        }
    }

    /// How many of `members` are outside the cgroup now (`None`: not checked, or the check
    /// failed); each found outside for the first time is returned, to be said.
    pub fn check_members<'a>(
        &mut self,
        members: impl Iterator<Item = &'a crate::probe::ProcHandle>,
        elapsed_s: f64,
    ) -> (Option<u64>, Vec<Outside>) {
        let Some(m) = &mut self.membership else {
            return (None, Vec::new());
        };
        let outside = match m.outside(members) {
            Ok(o) => o,
            Err(e) => {
                self.membership_error.get_or_insert_with(|| e.to_string());
                return (None, Vec::new());
            }
        };
        let mut new = Vec::new();
        for o in &outside {
            // One seen before, under a name it has since changed (an exec): its last.
            if let Some((l, _)) = self.left.iter_mut().find(|(l, _)| l.pid == o.pid) {
                l.comm.clone_from(&o.comm);
                continue;
            }
            if self.left.len() < LEFT_KEPT {
                self.left.push((o.clone(), elapsed_s));
                new.push(o.clone());
            }
        }
        (Some(outside.len() as u64), new)
    }

    pub fn cgroup(&self) -> &MemCgroup {
        self.reader.cgroup()
    }

    pub fn is_own(&self) -> bool {
        self.own.is_some()
    }

    /// Its peak is the tree's: memmon's own cgroup, or one checked to hold the tree alone.
    pub fn holds_tree(&self) -> bool {
        self.holds_tree
    }

    /// Why its peak is not the tree's, when memmon found out.
    pub fn not_the_tree(&self) -> Option<&str> {
        self.not_the_tree.as_deref()
    }

    /// The descriptor of the own cgroup's `cgroup.procs`, for the launched child to join.
    pub fn procs_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.own.as_ref().and_then(|o| o.procs_fd())
    }

    /// Reads the cgroup now; `None` (and the error kept) when it cannot be read.
    pub fn tick(&mut self) -> Option<CgroupStats> {
        let mut st = match self.reader.read() {
            Ok(st) => st,
            Err(e) => {
                self.error.get_or_insert_with(|| e.to_string());
                return None;
            }
        };
        if let Some(w) = &mut self.watch {
            match w.read() {
                Ok(p) => st.peak = Some(p),
                // The cgroup was removed and made again (a restarted service's): the reset's
                // descriptor reads nothing more; the new cgroup's peak file (read above) holds
                // all it has seen, every bit of it since the reset.
                Err(_) => self.watch = None,
            }
        }
        if self.first.is_none() {
            self.first = Some(st);
            self.peak_first = st.peak;
            self.limits_first = crate::probe::limits::read_chain(self.cgroup());
        }
        if let Some(p) = st.peak {
            self.peak_max = Some(self.peak_max.map_or(p, |m| m.max(p)));
        }
        if self.largest.is_none_or(|l| st.current > l.current) {
            self.largest = Some(st);
        }
        self.last = Some(st);
        Some(st)
    }

    /// Resets the cgroup's peak (v1: writes 0 to memory.max_usage_in_bytes; v2: writes to
    /// memory.peak through the descriptor kept here, Linux ≥ 6.12; no reset is private: another
    /// program's lowers this one's mark too).
    pub fn reset_peak(&mut self) -> Result<(), CgroupError> {
        match self.cgroup().reset_peak() {
            Ok(w) => {
                self.resets += 1;
                if self.cgroup().version == CgroupVersion::V2 {
                    self.watch = Some(w);
                }
                Ok(())
            }
            Err(e) => {
                self.reset_failures += 1;
                Err(e)
            }
        }
    }

    /// Resets the peak at the start of the recording (`--reset-peaks`): the peaks read before
    /// are not the recording's, and are forgotten.
    pub fn reset_peak_at_start(&mut self) -> Result<(), CgroupError> {
        self.reset_peak()?;
        self.peak_max = None;
        self.peak_first = None;
        Ok(())
    }

    /// The last reading (one more is taken), the cgroup removed if memmon made it, and what the
    /// summary needs.
    pub fn finish(&mut self, mem_total: Option<u64>) -> CgroupEnd {
        // The final peak and OOM kill count: a rise after the last tick is in them.
        let final_reading = self.tick();
        let final_peak = final_reading.and_then(|st| st.peak);
        // The limits and their events, read before memmon's own cgroup is removed.
        let limits_last = crate::probe::limits::read_chain(self.cgroup());
        let swap_peak = limits_last.first().and_then(|l| {
            let first = self.limits_first.first().and_then(|f| f.swap_current_bytes);
            // memory.swap.peak of a cgroup memmon did not make may predate the recording (memmon
            // resets memory.peak, never memory.swap.peak): the swap read at the start and end
            // then bound it from below.
            let peak = l.swap_peak_bytes.filter(|_| self.own.is_some());
            [peak, l.swap_current_bytes, first]
                .into_iter()
                .flatten()
                .max()
        });
        let limits = crate::probe::limits::over_recording(&self.limits_first, &limits_last);
        let mut moved_out = Vec::new();
        let mut remove_error = None;
        let mut inside = crate::probe::cgroup::manage::Inside::default();
        if let Some(own) = &mut self.own {
            match own.remove() {
                Ok(m) => moved_out = m,
                Err(e) => remove_error = Some(e.to_string()),
            }
            inside = own.inside();
        }
        let events = match (self.first, self.last) {
            (Some(f), Some(l)) => l.events.since(f.events),
            _ => CgroupEvents::default(),
        };
        let cg = self.cgroup();
        let largest = self.largest.unwrap_or_default();
        let peak_rose = self.own.is_some()
            || self.resets > 0
            || matches!((self.peak_first, self.peak_max), (Some(f), Some(m)) if m > f);
        CgroupEnd {
            path: cg.path.clone(),
            dir: cg.dir.display().to_string(),
            version: cg.version,
            own: self.own.is_some(),
            peak_bytes: self.peak_max,
            final_peak_bytes: final_peak,
            peak_counter: cg
                .peak_file()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            peak_during_recording: peak_rose,
            largest_current_bytes: largest.current,
            anon_at_largest_bytes: largest.anon,
            file_at_largest_bytes: largest.file,
            limit_bytes: self.last.and_then(|l| l.limit),
            limits,
            swap_peak_bytes: swap_peak,
            events_during: events,
            final_oom_kill_events: final_reading.map(|st| st.events.oom_kill),
            mem_total_bytes: mem_total,
            peak_resets: self.resets,
            peak_reset_failures: self.reset_failures,
            moved_out,
            inside_removed: inside.cgroups as u64,
            inside_killed: inside.killed as u64,
            left: self
                .left
                .iter()
                .map(|(o, at)| crate::format::meta::LeftCgroup {
                    pid: o.pid,
                    comm: o.comm.clone(),
                    to: o.cgroup.clone(),
                    elapsed_s: *at,
                })
                .collect(),
            error: self
                .error
                .clone()
                .or(remove_error)
                .or(self.membership_error.clone()),
        }
    }
}

impl CgroupSource {
    /// Its first reading counts its own swap (v2 memory.stat `pswpin`): the machine's need not
    /// be read.
    pub fn counts_swap(&self) -> bool {
        self.first.is_some_and(|f| f.swap_in_pages.is_some())
    }

    /// The cgroup columns of a sample from this tick's reading (left empty without one); its
    /// swap counts since the first reading.
    pub fn fill(&mut self, s: &mut Sample, st: Option<&CgroupStats>) {
        let Some(st) = st else {
            return;
        };
        fill(s, st);
        // Counted from the first reading (the recorder's baseline, taken before the first row).
        let first = self.first.unwrap_or(*st);
        let since = |c: &mut Option<SinceStart>, v: Option<u64>, base: Option<u64>| {
            let v = v?;
            Some(
                c.get_or_insert_with(|| SinceStart::new(base.unwrap_or(v).min(v)))
                    .at(v),
            )
        };
        s.cgroup_swap_in_pages = since(&mut self.swap_in, st.swap_in_pages, first.swap_in_pages);
        s.cgroup_swap_out_pages =
            since(&mut self.swap_out, st.swap_out_pages, first.swap_out_pages);
    }
}

/// The cgroup columns of a sample from one reading, but the counts since the start.
fn fill(s: &mut Sample, st: &CgroupStats) {
    s.cgroup_bytes = Some(st.current);
    s.cgroup_anon_bytes = Some(st.anon);
    s.cgroup_file_bytes = Some(st.file);
    s.cgroup_kernel_bytes = Some(st.kernel);
    s.cgroup_shmem_bytes = Some(st.shmem);
    s.cgroup_sock_bytes = Some(st.sock);
    s.cgroup_working_set_bytes = Some(st.working_set());
    s.cgroup_limit_bytes = st.limit;
    s.cgroup_peak_bytes = st.peak;
    s.cgroup_oom_events = Some(st.events.oom);
    s.cgroup_oom_kill_events = Some(st.events.oom_kill);
    s.cgroup_max_events = Some(st.events.max);
    s.cgroup_high_events = Some(st.events.high);
    s.cgroup_anon_thp_bytes = Some(st.anon_thp);
}

/// What a sweep of stale cgroups of memmon's own did, in one line for the user; `None` when
/// there was nothing to sweep.
pub fn swept_note(swept: &[Swept]) -> Option<String> {
    if swept.is_empty() {
        return None;
    }
    let each: Vec<String> = swept
        .iter()
        .map(|s| {
            let what = match (s.killed, &s.error) {
                (0, None) => "removed".to_string(),
                (1, None) => "1 process left in it killed, removed".to_string(),
                (k, None) => format!("{k} processes left in it killed, removed"),
                (k, Some(e)) => format!("{k} processes killed, not removed: {e}"),
            };
            format!("{} (memmon PID {}: {what})", s.dir.display(), s.pid)
        })
        .collect();
    Some(format!(
        "swept what killed memmons left: {} memory cgroup{} of memmon's own: {}",
        swept.len(),
        if swept.len() == 1 { "" } else { "s" },
        each.join("; ")
    ))
}

/// MemTotal of /proc/meminfo, in bytes.
pub fn mem_total_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_is_told_in_one_line_naming_each_cgroup_and_what_was_killed() {
        assert_eq!(swept_note(&[]), None);
        let swept = [
            Swept {
                dir: "/sys/fs/cgroup/memory/memmon-41-0".into(),
                pid: 41,
                killed: 2,
                error: None,
            },
            Swept {
                dir: "/sys/fs/cgroup/memory/memmon-43-1".into(),
                pid: 43,
                killed: 0,
                error: Some("busy".into()),
            },
        ];
        assert_eq!(
            swept_note(&swept).unwrap(),
            "swept what killed memmons left: 2 memory cgroups of memmon's own: \
             /sys/fs/cgroup/memory/memmon-41-0 (memmon PID 41: 2 processes left in it killed, removed); \
             /sys/fs/cgroup/memory/memmon-43-1 (memmon PID 43: 0 processes killed, not removed: busy)"
        );
    }
}
