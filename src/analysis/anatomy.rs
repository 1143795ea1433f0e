//! What the memory is made of: a tree's mappings grouped ([`group`]: heap, stacks, malloc's
//! arenas, anonymous mappings by size class, files by path, shared memory by name, devices...),
//! and what changed between two such anatomies ([`diff`]: the idle floor and the peak, a
//! baseline and a candidate).
//!
//! How a mapping's group is told (`classify`), from /proc/PID/maps alone (so a group is the same
//! whether smaps was read or not):
//! - by its name: `[heap]`, `[stack]`, `[anon:NAME]` (glibc's `pthread stack` and `malloc
//!   arena` names go to their groups), `/memfd:NAME`, `/dev/shm/...`, `/SYSV<key>`,
//!   `/anon_hugepage`, `/dev/zero` (shared anonymous memory), other `/dev/...` files (devices:
//!   `/dev/nvidia*` is CUDA's pinned host memory), the program's own file (its /proc/PID/exe),
//!   libraries (`*.so`, `*.so.N`), other files by path, and other bracketed or non-path names;
//! - an anonymous mapping by its neighbours, as glibc lays them out. A thread's stack is a
//!   read-write private mapping that starts where a no-access (`---p`) mapping of at most
//!   [`GUARD_MAX_BYTES`] ends (its guard page, counted with it). A malloc arena (glibc's
//!   non-main arenas, one per thread or so) is a read-write private mapping that ends where a
//!   no-access mapping of more than `GUARD_MAX_BYTES` begins (the rest of its reserve, counted
//!   with it). Signal stacks laid out like thread stacks (Rust's runtime gives each thread a
//!   guarded alternate signal stack of a few pages) count as thread stacks. These are heuristics: a program may lay out its own memory the same way, an
//!   arena whose reserve is used up is an ordinary anonymous mapping, and a stack whose guard
//!   the kernel merged with a neighbouring no-access mapping is one too. Other anonymous
//!   mappings go by size class ([`size_class`]), no-access ones apart (`reserved`: address
//!   space a runtime or a driver holds, not memory).
//!
//! The kernel merges adjacent anonymous mappings of the same access: buffers allocated one
//! after another may show as one mapping of their total size. An anatomy shows the mappings as
//! the kernel keeps them.

use crate::model::anatomy::{
    Anatomy, Group, GroupKey, GroupKind, Mapping, ProcessMaps, Trigger, Usage, MAX_GROUPS,
};
use std::collections::HashMap;

/// The largest no-access mapping taken for a thread stack's guard (glibc's default guard is one
/// page; `pthread_attr_setguardsize` may ask for more).
pub const GUARD_MAX_BYTES: u64 = 1 << 20;

/// Anonymous mappings from this size up go by quarter-octave size classes (60 MiB and 64 MiB
/// apart); smaller ones by octaves (a thousand 64 KiB mappings are one class, 128 KiB ones the
/// next).
const FINE_CLASSES_FROM: u64 = 1 << 20;

/// The size class of an anonymous mapping of `bytes`: `floor(4 log2 bytes)` from 1 MiB up,
/// `4 floor(log2 bytes)` below. Classes grow with the size.
pub fn size_class(bytes: u64) -> u16 {
    let bytes = bytes.max(1);
    if bytes >= FINE_CLASSES_FROM {
        ((bytes as f64).log2() * 4.0).floor() as u16
    } else {
        4 * (63 - bytes.leading_zeros()) as u16
    }
}

/// The group of each mapping of one process (`mappings` in address order, as maps lists them;
/// `exe`: the path of its program). Module docs say how.
pub fn classify(mappings: &[Mapping], exe: Option<&str>) -> Vec<GroupKey> {
    let key = |kind, name: &str| GroupKey {
        kind,
        name: name.to_string(),
        size_class: None,
        rest: false,
    };
    let sized = |kind, m: &Mapping| GroupKey {
        kind,
        name: String::new(),
        size_class: Some(size_class(m.size())),
        rest: false,
    };
    let adjacent_anon = |a: Option<&Mapping>, b: Option<&Mapping>| match (a, b) {
        (Some(a), Some(b)) => a.anonymous() && b.anonymous() && a.end == b.start,
        _ => false,
    };
    let no_access = |m: &Mapping| m.perms.none();
    let exe = exe.map(|e| e.strip_suffix(" (deleted)").unwrap_or(e));

    // First the accessible anonymous mappings and the named ones...
    let mut keys: Vec<Option<GroupKey>> = mappings
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let prev = i.checked_sub(1).map(|p| &mappings[p]);
            let next = mappings.get(i + 1);
            if m.anonymous() {
                if no_access(m) {
                    return None;
                }
                if !m.perms.rw_private() {
                    return Some(if m.perms.shared {
                        key(GroupKind::SharedAnon, "")
                    } else {
                        sized(GroupKind::Anon, m)
                    });
                }
                if adjacent_anon(prev, Some(m))
                    && prev.is_some_and(|p| no_access(p) && p.size() <= GUARD_MAX_BYTES)
                {
                    return Some(key(GroupKind::ThreadStacks, ""));
                }
                if adjacent_anon(Some(m), next)
                    && next.is_some_and(|n| no_access(n) && n.size() > GUARD_MAX_BYTES)
                {
                    return Some(key(GroupKind::Arenas, ""));
                }
                return Some(sized(GroupKind::Anon, m));
            }
            Some(named(m, exe, &key, &sized))
        })
        .collect();
    // ...then the no-access ones, by what their neighbours turned out to be.
    for i in 0..mappings.len() {
        if keys[i].is_some() {
            continue;
        }
        let m = &mappings[i];
        let next_is = |kind| {
            adjacent_anon(Some(m), mappings.get(i + 1))
                && keys
                    .get(i + 1)
                    .and_then(|k| k.as_ref())
                    .is_some_and(|k| k.kind == kind)
        };
        let prev_is = |kind| {
            i > 0
                && adjacent_anon(Some(&mappings[i - 1]), Some(m))
                && keys[i - 1].as_ref().is_some_and(|k| k.kind == kind)
        };
        keys[i] = Some(
            if m.size() <= GUARD_MAX_BYTES && next_is(GroupKind::ThreadStacks) {
                key(GroupKind::ThreadStacks, "")
            } else if m.size() > GUARD_MAX_BYTES && prev_is(GroupKind::Arenas) {
                key(GroupKind::Arenas, "")
            } else {
                sized(GroupKind::Reserved, m)
            },
        );
    }
    keys.into_iter()
        .map(|k| k.expect("every mapping classified"))
        .collect()
}

/// The group of a mapping with a name (module docs).
fn named(
    m: &Mapping,
    exe: Option<&str>,
    key: &dyn Fn(GroupKind, &str) -> GroupKey,
    sized: &dyn Fn(GroupKind, &Mapping) -> GroupKey,
) -> GroupKey {
    let path = m.path.as_str();
    let undeleted = path.strip_suffix(" (deleted)").unwrap_or(path);
    match path {
        "[heap]" => return key(GroupKind::Heap, ""),
        "[stack]" => return key(GroupKind::Stack, ""),
        _ => {}
    }
    if let Some(name) = path
        .strip_prefix("[anon:")
        .or_else(|| path.strip_prefix("[anon_shmem:"))
        .and_then(|n| n.strip_suffix(']'))
    {
        return if name.starts_with("glibc: pthread stack") {
            key(GroupKind::ThreadStacks, "")
        } else if name.starts_with("glibc: malloc arena") {
            key(GroupKind::Arenas, "")
        } else {
            key(GroupKind::Named, name)
        };
    }
    if path.starts_with('[') || !path.starts_with('/') {
        return key(GroupKind::Special, path);
    }
    if let Some(name) = undeleted.strip_prefix("/memfd:") {
        return key(GroupKind::Memfd, name);
    }
    if undeleted == "/dev/zero" {
        return if m.perms.shared {
            key(GroupKind::SharedAnon, "")
        } else {
            sized(GroupKind::Anon, m)
        };
    }
    if path.starts_with("/dev/shm/") {
        return key(GroupKind::Shm, path);
    }
    if let Some(k) = undeleted.strip_prefix("/SYSV") {
        return key(GroupKind::Sysv, k);
    }
    if undeleted == "/anon_hugepage" {
        return key(GroupKind::HugePages, "");
    }
    if path.starts_with("/dev/") {
        return key(GroupKind::Device, path);
    }
    if exe == Some(undeleted) {
        return key(GroupKind::Binary, path);
    }
    let file = undeleted.rsplit('/').next().unwrap_or(undeleted);
    if file.ends_with(".so") || file.contains(".so.") {
        return key(GroupKind::Library, path);
    }
    key(GroupKind::File, path)
}

/// One group being summed.
struct Acc {
    pids: Vec<i32>,
    mappings: u64,
    virtual_bytes: u64,
    min: u64,
    max: u64,
    usage: Usage,
    /// Every process of the group had its smaps read.
    resident: bool,
}

impl Acc {
    fn new() -> Acc {
        Acc {
            pids: Vec::new(),
            mappings: 0,
            virtual_bytes: 0,
            min: u64::MAX,
            max: 0,
            usage: Usage::default(),
            resident: true,
        }
    }

    /// Adds a mapping of process `pid`; `usage`: its smaps numbers, `None` when not read.
    fn add_mapping(&mut self, pid: i32, m: &Mapping, usage: Option<&Usage>) {
        if self.pids.last() != Some(&pid) {
            self.pids.push(pid);
        }
        self.mappings += 1;
        self.virtual_bytes += m.size();
        self.min = self.min.min(m.size());
        self.max = self.max.max(m.size());
        match usage {
            Some(u) => self.usage.add(u),
            None => self.resident = false,
        }
    }

    fn merge(&mut self, o: Acc) {
        self.pids.extend(o.pids);
        self.mappings += o.mappings;
        self.virtual_bytes += o.virtual_bytes;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.usage.add(&o.usage);
        self.resident &= o.resident;
    }

    fn into_group(mut self, key: GroupKey) -> Group {
        self.pids.sort_unstable();
        self.pids.dedup();
        Group {
            key,
            processes: self.pids.len() as u32,
            mappings: self.mappings,
            virtual_bytes: self.virtual_bytes,
            min_mapping_bytes: if self.mappings == 0 { 0 } else { self.min },
            max_mapping_bytes: self.max,
            resident: self.resident.then_some(self.usage),
        }
    }

    /// What the group is ordered by: its resident bytes where known, else its virtual size.
    fn weight(&self) -> u64 {
        if self.resident {
            self.usage.resident_bytes()
        } else {
            self.virtual_bytes
        }
    }
}

/// The tree's processes' mappings, summed per group, largest first (by resident bytes where
/// known, else by virtual size). At most [`MAX_GROUPS`]: beyond them, the smallest groups of
/// each kind are gathered into one group of their kind (`rest`).
pub fn group(procs: &[ProcessMaps]) -> Vec<Group> {
    let mut accs: HashMap<GroupKey, Acc> = HashMap::new();
    for p in procs {
        let keys = classify(&p.mappings, p.exe.as_deref());
        for (m, k) in p.mappings.iter().zip(keys) {
            let usage = m.usage.as_ref().filter(|_| p.smaps);
            accs.entry(k)
                .or_insert_with(Acc::new)
                .add_mapping(p.pid, m, usage);
        }
    }
    let mut all: Vec<(GroupKey, Acc)> = accs.into_iter().collect();
    all.sort_by(|(ka, a), (kb, b)| b.weight().cmp(&a.weight()).then_with(|| ka.cmp(kb)));
    if all.len() > MAX_GROUPS {
        // Keep room for one gathered group per kind of those cut.
        let mut keep = MAX_GROUPS;
        loop {
            let mut kinds: Vec<GroupKind> = all[keep..].iter().map(|(k, _)| k.kind).collect();
            kinds.sort_unstable();
            kinds.dedup();
            if keep + kinds.len() <= MAX_GROUPS {
                break;
            }
            keep -= 1;
        }
        let cut = all.split_off(keep);
        let mut rest: Vec<(GroupKind, Acc)> = Vec::new();
        for (k, acc) in cut {
            match rest.iter_mut().find(|(kind, _)| *kind == k.kind) {
                Some((_, r)) => r.merge(acc),
                None => {
                    let mut r = Acc::new();
                    r.merge(acc);
                    rest.push((k.kind, r));
                }
            }
        }
        all.extend(rest.into_iter().map(|(kind, acc)| {
            let key = GroupKey {
                kind,
                name: String::new(),
                size_class: None,
                rest: true,
            };
            (key, acc)
        }));
        all.sort_by(|(ka, a), (kb, b)| b.weight().cmp(&a.weight()).then_with(|| ka.cmp(kb)));
    }
    all.into_iter().map(|(k, a)| a.into_group(k)).collect()
}

/// What a difference between two anatomies is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Measure {
    /// Resident bytes (smaps' `Rss` and hugetlbfs pages): both anatomies read every process's
    /// smaps.
    Resident,
    /// Virtual sizes (address space): one of them has no resident numbers.
    Virtual,
}

/// How one group changed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GroupChange {
    #[serde(flatten)]
    pub key: GroupKey,
    /// The group in each anatomy (`None`: it had none of it).
    pub from: Option<Group>,
    pub to: Option<Group>,
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub delta_bytes: i64,
    /// The group was not in the first anatomy at all (and no gathered rest of its kind was).
    pub new: bool,
    /// The group is not in the second anatomy (and no gathered rest of its kind is).
    pub gone: bool,
}

/// What changed between two anatomies, the largest change first.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AnatomyDiff {
    pub measure: Measure,
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub delta_bytes: i64,
    /// Every group that changed (groups of the same size in both are left out).
    pub changes: Vec<GroupChange>,
    /// Where both anatomies carry the ledger of mappings: how each stack's live mappings
    /// changed (mapped bytes), largest change first; empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<crate::analysis::ledger::StackChange>,
    /// Where both carry sampled page faults: how the resident memory credited to each stack
    /// that first touched it changed, largest change first; empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub touches: Vec<crate::analysis::ledger::TouchChange>,
}

/// What changed from `from` to `to`: resident bytes when both have them for every group, else
/// virtual sizes.
pub fn diff(from: &Anatomy, to: &Anatomy) -> AnatomyDiff {
    let measure = if from.resident_known() && to.resident_known() {
        Measure::Resident
    } else {
        Measure::Virtual
    };
    let bytes = |g: &Group| match measure {
        Measure::Resident => g.resident.map_or(0, |r| r.resident_bytes()),
        Measure::Virtual => g.virtual_bytes,
    };
    let has_rest = |a: &Anatomy, kind| a.groups.iter().any(|g| g.key.rest && g.key.kind == kind);
    let mut keys: Vec<&GroupKey> = from
        .groups
        .iter()
        .chain(&to.groups)
        .map(|g| &g.key)
        .collect();
    keys.sort();
    keys.dedup();
    let mut changes: Vec<GroupChange> = keys
        .into_iter()
        .filter_map(|key| {
            let f = from.groups.iter().find(|g| &g.key == key);
            let t = to.groups.iter().find(|g| &g.key == key);
            let (fb, tb) = (f.map_or(0, bytes), t.map_or(0, bytes));
            if fb == tb && f.is_some() == t.is_some() {
                return None;
            }
            Some(GroupChange {
                key: key.clone(),
                from_bytes: fb,
                to_bytes: tb,
                delta_bytes: tb as i64 - fb as i64,
                new: f.is_none() && !has_rest(from, key.kind),
                gone: t.is_none() && !has_rest(to, key.kind),
                from: f.cloned(),
                to: t.cloned(),
            })
        })
        .collect();
    changes.sort_by(|a, b| {
        b.delta_bytes
            .unsigned_abs()
            .cmp(&a.delta_bytes.unsigned_abs())
            .then_with(|| b.delta_bytes.cmp(&a.delta_bytes))
            .then_with(|| a.key.cmp(&b.key))
    });
    let total = |a: &Anatomy| a.groups.iter().map(bytes).sum::<u64>();
    let (fb, tb) = (total(from), total(to));
    let stacks = match (&from.ledger, &to.ledger) {
        (Some(f), Some(t)) => crate::analysis::ledger::stack_diff(f, t),
        _ => Vec::new(),
    };
    let touches = match (
        from.ledger.as_ref().and_then(|l| l.touch.as_ref()),
        to.ledger.as_ref().and_then(|l| l.touch.as_ref()),
    ) {
        (Some(f), Some(t)) => crate::analysis::ledger::touch_diff(f, t),
        _ => Vec::new(),
    };
    AnatomyDiff {
        measure,
        from_bytes: fb,
        to_bytes: tb,
        delta_bytes: tb as i64 - fb as i64,
        changes,
        stacks,
        touches,
    }
}

/// The anatomy taken at the highest tree RSS (the first of equals): the peak's.
pub fn at_peak(anatomies: &[Anatomy]) -> Option<usize> {
    anatomies
        .iter()
        .enumerate()
        .rev()
        .max_by_key(|(_, a)| a.rss_bytes)
        .map(|(i, _)| i)
}

/// The idle floor's anatomy: the one taken nearest the idle floor `idle_rss_bytes` (the first of
/// equals) among those at most a sixteenth above it, other than the peak's `peak` when there is
/// another. One taken higher than that was taken as the growth began, and would leave what had
/// grown by then out of what grew; only when every anatomy is that high is the nearest taken.
pub fn at_idle(anatomies: &[Anatomy], idle_rss_bytes: u64, peak: Option<usize>) -> Option<usize> {
    let near = idle_rss_bytes.saturating_add(idle_rss_bytes / 16);
    let nearest = |skip: Option<usize>, at_most: u64| {
        anatomies
            .iter()
            .enumerate()
            .filter(|(i, a)| Some(*i) != skip && a.rss_bytes <= at_most)
            .min_by_key(|(_, a)| a.rss_bytes.abs_diff(idle_rss_bytes))
            .map(|(i, _)| i)
    };
    nearest(peak, near)
        .or_else(|| nearest(peak, u64::MAX))
        .or_else(|| nearest(None, u64::MAX))
}

/// Where an anatomy of a growth was taken.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AnatomyAt {
    pub trigger: crate::model::anatomy::Trigger,
    pub elapsed_s: f64,
    pub unix_ms: u64,
    /// The tree's RSS at the row that asked for it.
    pub rss_bytes: u64,
    /// Every process's smaps was read (its groups have resident sizes).
    pub resident_known: bool,
    /// Processes whose maps were read (none: the anatomy holds nothing of the tree).
    pub processes: u32,
    /// The processes whose maps were not read, and why (`PID N (comm): why`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_read: Vec<String>,
    /// Records of the kernel's the ledger had lost by then (a ring buffer full): its stacks may
    /// miss mappings and sampled page faults.
    #[serde(skip_serializing_if = "is_zero")]
    pub ledger_lost: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl AnatomyAt {
    fn of(a: &Anatomy) -> AnatomyAt {
        AnatomyAt {
            trigger: a.trigger,
            elapsed_s: a.elapsed_s,
            unix_ms: a.unix_ms,
            rss_bytes: a.rss_bytes,
            ledger_lost: a.ledger.as_ref().map_or(0, |l| l.lost),
            resident_known: a.resident_known(),
            processes: a.processes,
            not_read: a.unread_words(),
        }
    }
}

/// What grew between the idle floor and the peak: the anatomy nearest the idle floor against
/// the one taken at the highest RSS (`summary`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Growth {
    /// How many anatomies the table holds, and the longest and total time their reads took
    /// (every read's, dropped ones included, where the end records say: `with_reads`).
    pub anatomies: usize,
    pub longest_read_us: u64,
    pub total_read_us: u64,
    /// Every read made, and those not written (`AnatomyReads::dropped`; from the end
    /// records; absent in recordings made before memmon kept each stretch's highest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads_dropped: Option<u64>,
    pub from: AnatomyAt,
    pub to: AnatomyAt,
    /// The groups that changed, largest change first; `measure` says in what.
    #[serde(flatten)]
    pub diff: AnatomyDiff,
}

impl Growth {
    /// The cost of every read the recorder made (its end records), not only of those written.
    pub fn with_reads(&mut self, r: crate::format::meta::AnatomyReads) {
        self.reads = Some(r.reads);
        self.reads_dropped = Some(r.dropped);
        self.total_read_us = self.total_read_us.max(r.read_us);
        self.longest_read_us = self.longest_read_us.max(r.longest_read_us);
    }
}

/// What grew from the anatomy nearest the idle floor (`idle_rss_bytes`) to the one at the
/// highest RSS; `None` without two anatomies to compare.
pub fn growth(anatomies: &[Anatomy], idle_rss_bytes: u64) -> Option<Growth> {
    let peak = at_peak(anatomies)?;
    let idle = at_idle(anatomies, idle_rss_bytes, Some(peak))?;
    if idle == peak {
        return None;
    }
    let (from, to) = (&anatomies[idle], &anatomies[peak]);
    Some(Growth {
        anatomies: anatomies.len(),
        longest_read_us: anatomies.iter().map(|a| a.read_us).max().unwrap_or(0),
        total_read_us: anatomies.iter().map(|a| a.read_us).sum(),
        reads: None,
        reads_dropped: None,
        from: AnatomyAt::of(from),
        to: AnatomyAt::of(to),
        diff: diff(from, to),
    })
}

/// Which groups differ between a baseline's peak and a candidate's (`compare`): the anatomy
/// taken at the highest RSS on each side.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PeakVsPeak {
    pub base: AnatomyAt,
    pub new: AnatomyAt,
    #[serde(flatten)]
    pub diff: AnatomyDiff,
}

/// The baseline's peak anatomy against the candidate's; `None` when a side has none.
pub fn peak_vs_peak(base: &[Anatomy], new: &[Anatomy]) -> Option<PeakVsPeak> {
    let (b, n) = (&base[at_peak(base)?], &new[at_peak(new)?]);
    Some(PeakVsPeak {
        base: AnatomyAt::of(b),
        new: AnatomyAt::of(n),
        diff: diff(b, n),
    })
}

/// What grew in one span (a phase, a bench run): from the anatomy taken at or before its start
/// to the one taken at its last row.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SpanGrowth {
    /// The phase's label (`summary`) or `run N` (`bench`).
    pub label: String,
    /// Its place among the listed phases or runs, from 1.
    pub index: usize,
    pub from: AnatomyAt,
    pub to: AnatomyAt,
    /// A boundary of the span was taken late (its marker's row came late): what the program did
    /// after the marker may be in the anatomy at its end.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub late: bool,
    /// The groups that moved, largest change first; `measure` says in what.
    #[serde(flatten)]
    pub diff: AnatomyDiff,
}

/// Two rows' `elapsed_s` are one row's: the recording keeps 6 decimals.
fn same_row(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-5
}

/// The anatomy taken at a span's last row (`end_elapsed_s`, within the span's wall-clock
/// start) that closes it: its `phase-end` or `run-end` for `label`, or the recording's `end`.
fn closes_span(a: &Anatomy, label: &str, start_unix_ms: u64, end_elapsed_s: f64) -> bool {
    let closes = match a.trigger {
        Trigger::PhaseEnd | Trigger::RunEnd => a.span.as_deref() == Some(label),
        Trigger::End => true,
        _ => false,
    };
    closes && a.unix_ms >= start_unix_ms && same_row(a.elapsed_s, end_elapsed_s)
}

/// An anatomy read at a high (`peak`, or `new-high` of older tables) at a row of the span.
fn high_in_span(a: &Anatomy, span: &crate::analysis::span::Span) -> bool {
    matches!(a.trigger, Trigger::Peak | Trigger::NewHigh)
        && a.unix_ms >= span.start_unix_ms
        && a.elapsed_s >= span.start_elapsed_s - 1e-5
        && a.elapsed_s <= span.end_elapsed_s + 1e-5
}

/// A span's highest anatomy: the highest tree RSS (the latest of equals) of those read at its
/// highs and the one that closes it.
fn highest_in_span<'a>(
    anatomies: &'a [Anatomy],
    span: &crate::analysis::span::Span,
) -> Option<&'a Anatomy> {
    anatomies
        .iter()
        .filter(|a| {
            high_in_span(a, span)
                || closes_span(a, &span.label, span.start_unix_ms, span.end_elapsed_s)
        })
        .max_by(|a, b| {
            a.rss_bytes
                .cmp(&b.rss_bytes)
                .then(a.elapsed_s.total_cmp(&b.elapsed_s))
        })
}

/// The anatomy of the state a span began from: the latest taken at or before its first row
/// (by time: a stretch's `peak` is written when the stretch ends, after the reads that follow
/// it).
fn at_span_start(
    anatomies: &[Anatomy],
    start_unix_ms: u64,
    start_elapsed_s: f64,
) -> Option<&Anatomy> {
    anatomies
        .iter()
        .filter(|a| a.unix_ms <= start_unix_ms && a.elapsed_s <= start_elapsed_s + 1e-5)
        .max_by(|a, b| a.elapsed_s.total_cmp(&b.elapsed_s))
}

/// What grew in each span of `spans` (phases): from the state it began from (the anatomy at
/// its first row, the previous span's end, or the last read before it) to its highest
/// (`highest_in_span`: a stretch's `peak`, or its closing `phase-end` or the recording's `end`).
/// Spans without both are left out.
pub fn span_growth(
    anatomies: &[Anatomy],
    spans: &[crate::analysis::span::Span],
) -> Vec<SpanGrowth> {
    spans
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let to = highest_in_span(anatomies, p)?;
            let from = at_span_start(anatomies, p.start_unix_ms, p.start_elapsed_s)
                .filter(|f| !std::ptr::eq(*f, to))?;
            Some(SpanGrowth {
                label: p.label.clone(),
                index: i + 1,
                from: AnatomyAt::of(from),
                to: AnatomyAt::of(to),
                late: p.facts.late_boundary,
                diff: diff(from, to),
            })
        })
        .collect()
}

/// What grew in each bench run (`bench --anatomy`): from the idle floor's anatomy (the last
/// taken at or before the first run's first row: the recording's start, the end of the warmup,
/// or the highest read of the stretch before it) to the run's highest (`highest_in_span`). Runs without one are left out.
pub fn run_growth(anatomies: &[Anatomy], runs: &[crate::analysis::span::Span]) -> Vec<SpanGrowth> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let Some(floor) = at_span_start(anatomies, first.start_unix_ms, first.start_elapsed_s) else {
        return Vec::new();
    };
    runs.iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let to = highest_in_span(anatomies, r)?;
            Some(SpanGrowth {
                label: r.label.clone(),
                index: r.run.map_or(i + 1, |n| n as usize),
                from: AnatomyAt::of(floor),
                to: AnatomyAt::of(to),
                late: r.facts.late_boundary,
                diff: diff(floor, to),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::anatomy::{Perms, Trigger};

    const KIB: u64 = 1024;
    const MIB: u64 = 1 << 20;

    fn perms(p: &str) -> Perms {
        let b = p.as_bytes();
        Perms {
            read: b[0] == b'r',
            write: b[1] == b'w',
            exec: b[2] == b'x',
            shared: b[3] == b's',
        }
    }

    /// Mappings laid out one after another from `base` (with `gap` bytes between when asked).
    struct Layout {
        at: u64,
        maps: Vec<Mapping>,
    }

    impl Layout {
        fn new() -> Layout {
            Layout {
                at: 0x7f00_0000_0000,
                maps: Vec::new(),
            }
        }
        fn map(&mut self, size: u64, p: &str, path: &str) -> &mut Layout {
            self.maps.push(Mapping {
                start: self.at,
                end: self.at + size,
                perms: perms(p),
                offset: 0,
                dev: (0, 0),
                inode: 0,
                path: path.into(),
                usage: None,
                all_soft_dirty: false,
            });
            self.at += size;
            self
        }
        fn gap(&mut self) -> &mut Layout {
            self.at += 4 * KIB;
            self
        }
        fn resident(&mut self, rss: u64) -> &mut Layout {
            self.maps.last_mut().unwrap().usage = Some(Usage {
                rss_bytes: rss,
                pss_bytes: rss / 2,
                ..Usage::default()
            });
            self
        }
    }

    fn kinds(l: &Layout, exe: Option<&str>) -> Vec<(GroupKind, String)> {
        classify(&l.maps, exe)
            .into_iter()
            .map(|k| (k.kind, k.name))
            .collect()
    }

    #[test]
    fn thread_stacks_and_arenas_are_told_by_their_no_access_neighbours() {
        use GroupKind::*;
        let mut l = Layout::new();
        l.map(4 * KIB, "---p", "") // a stack's guard
            .map(8 * MIB, "rw-p", "") // the stack
            .map(4 * KIB, "---p", "") // the next stack's guard, right after
            .map(2 * MIB, "rw-p", "")
            .gap()
            .map(132 * KIB, "rw-p", "") // an arena
            .map(64 * MIB - 132 * KIB, "---p", "") // its reserve
            .gap()
            .map(60 * MIB, "rw-p", "") // a large allocation
            .gap()
            .map(256 * MIB, "---p", "") // address space a driver reserves
            .gap()
            .map(4 * KIB, "---p", ""); // a no-access page with no stack after it
        let k: Vec<GroupKind> = kinds(&l, None).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            k,
            [
                ThreadStacks,
                ThreadStacks,
                ThreadStacks,
                ThreadStacks,
                Arenas,
                Arenas,
                Anon,
                Reserved,
                Reserved
            ]
        );
    }

    #[test]
    fn a_no_access_mapping_after_a_stack_is_no_arena_reserve() {
        let mut l = Layout::new();
        l.map(4 * KIB, "---p", "")
            .map(8 * MIB, "rw-p", "")
            .map(32 * MIB, "---p", "");
        let k: Vec<GroupKind> = kinds(&l, None).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            k,
            [
                GroupKind::ThreadStacks,
                GroupKind::ThreadStacks,
                GroupKind::Reserved
            ]
        );
    }

    #[test]
    fn named_mappings_go_by_their_names() {
        use GroupKind::*;
        let mut l = Layout::new();
        for (p, path) in [
            ("r--p", "/opt/daemon/bin/cuzk"),
            ("r-xp", "/opt/daemon/bin/cuzk"),
            ("rw-p", "[heap]"),
            ("r--p", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            (
                "r--p",
                "/usr/lib/python3.11/_struct.cpython-311-x86_64-linux-gnu.so",
            ),
            ("r--s", "/data/params/v28-stacked-proof.params"),
            ("rw-s", "/memfd:witness (deleted)"),
            ("rw-s", "/dev/shm/ring0"),
            ("rw-s", "/SYSV0000beef (deleted)"),
            ("rw-s", "/dev/zero (deleted)"),
            ("rw-s", "/dev/nvidiactl"),
            ("rw-s", "/anon_hugepage (deleted)"),
            ("rw-p", "[anon:glibc: pthread stack: 4242]"),
            ("rw-p", "[anon:glibc: malloc arena]"),
            ("rw-p", "[anon:jit code]"),
            ("r-xp", "[vdso]"),
            ("rw-p", "anon_inode:[perf_event]"),
            ("rw-p", "[stack]"),
        ] {
            l.map(MIB, p, path).gap();
        }
        assert_eq!(
            kinds(&l, Some("/opt/daemon/bin/cuzk")),
            [
                (Binary, "/opt/daemon/bin/cuzk".into()),
                (Binary, "/opt/daemon/bin/cuzk".into()),
                (Heap, String::new()),
                (Library, "/usr/lib/x86_64-linux-gnu/libc.so.6".into()),
                (
                    Library,
                    "/usr/lib/python3.11/_struct.cpython-311-x86_64-linux-gnu.so".into()
                ),
                (File, "/data/params/v28-stacked-proof.params".into()),
                (Memfd, "witness".into()),
                (Shm, "/dev/shm/ring0".into()),
                (Sysv, "0000beef".into()),
                (SharedAnon, String::new()),
                (Device, "/dev/nvidiactl".into()),
                (HugePages, String::new()),
                (ThreadStacks, String::new()),
                (Arenas, String::new()),
                (Named, "jit code".into()),
                (Special, "[vdso]".into()),
                (Special, "anon_inode:[perf_event]".into()),
                (Stack, String::new()),
            ]
        );
        // A program replaced on disk while it runs is still the program.
        let mut l = Layout::new();
        l.map(MIB, "r-xp", "/opt/daemon/bin/cuzk (deleted)");
        assert_eq!(
            kinds(&l, Some("/opt/daemon/bin/cuzk (deleted)"))[0].0,
            Binary
        );
    }

    #[test]
    fn size_classes_part_60_from_64_mib_and_keep_64_kib_together() {
        assert_eq!(size_class(60 * MIB), size_class(60 * MIB + 4 * KIB));
        assert_ne!(size_class(60 * MIB), size_class(64 * MIB));
        assert_eq!(size_class(64 * KIB), size_class(100 * KIB));
        assert_ne!(size_class(64 * KIB), size_class(128 * KIB));
        let mut last = 0;
        for shift in 12..50 {
            for q in [4u64, 5, 6, 7] {
                let c = size_class((1 << shift) / 4 * q);
                assert!(c >= last);
                last = c;
            }
        }
    }

    fn process(pid: i32, l: &Layout, smaps: bool) -> ProcessMaps {
        ProcessMaps {
            pid,
            comm: "daemon".into(),
            exe: Some("/usr/bin/daemon".into()),
            mappings: l.maps.clone(),
            smaps,
        }
    }

    fn find(groups: &[Group], kind: GroupKind) -> Vec<&Group> {
        groups.iter().filter(|g| g.key.kind == kind).collect()
    }

    #[test]
    fn ten_partitions_are_one_group_and_a_thousand_small_mappings_another() {
        let mut l = Layout::new();
        for _ in 0..10 {
            l.gap().map(60 * MIB, "rw-p", "").resident(60 * MIB);
        }
        for _ in 0..1000 {
            l.gap().map(64 * KIB, "rw-p", "").resident(16 * KIB);
        }
        l.gap().map(20 * MIB, "rw-p", "[heap]").resident(4 * MIB);
        let g = group(&[process(1, &l, true)]);
        let anon = find(&g, GroupKind::Anon);
        assert_eq!(anon.len(), 2);
        let (big, small) = (anon[0], anon[1]);
        assert_eq!(
            (
                big.mappings,
                big.virtual_bytes,
                big.min_mapping_bytes,
                big.max_mapping_bytes
            ),
            (10, 600 * MIB, 60 * MIB, 60 * MIB)
        );
        assert_eq!(big.resident.unwrap().rss_bytes, 600 * MIB);
        assert_eq!(big.resident.unwrap().pss_bytes, 300 * MIB);
        assert_eq!(
            (small.mappings, small.virtual_bytes),
            (1000, 1000 * 64 * KIB)
        );
        assert_eq!(small.resident.unwrap().rss_bytes, 1000 * 16 * KIB);
        assert_eq!(g[0].key, big.key, "the largest first");
        assert_eq!(find(&g, GroupKind::Heap)[0].virtual_bytes, 20 * MIB);
    }

    #[test]
    fn a_tree_sums_its_processes_per_group_and_counts_them() {
        let mut lib = Layout::new();
        lib.map(2 * MIB, "r-xp", "/usr/lib/libc.so.6")
            .resident(MIB)
            .gap()
            .map(8 * MIB, "rw-p", "[heap]")
            .resident(8 * MIB);
        let mut other = Layout::new();
        other
            .map(2 * MIB, "r-xp", "/usr/lib/libc.so.6")
            .resident(MIB)
            .gap()
            .map(128 * MIB, "rw-s", "/memfd:params (deleted)")
            .resident(128 * MIB);
        let g = group(&[
            process(1, &lib, true),
            process(2, &other, true),
            process(3, &lib, false),
        ]);
        let libc = find(&g, GroupKind::Library)[0];
        assert_eq!(
            (libc.processes, libc.mappings, libc.virtual_bytes),
            (3, 3, 6 * MIB)
        );
        assert_eq!(libc.resident, None, "process 3's smaps was not read");
        let memfd = find(&g, GroupKind::Memfd)[0];
        assert_eq!(memfd.processes, 1);
        assert_eq!(memfd.resident.unwrap().rss_bytes, 128 * MIB);
        let heap = find(&g, GroupKind::Heap)[0];
        assert_eq!((heap.processes, heap.virtual_bytes), (2, 16 * MIB));
        assert_eq!(heap.resident, None);
    }

    #[test]
    fn past_the_cap_the_smallest_groups_of_a_kind_are_gathered() {
        let mut l = Layout::new();
        for i in 0..(MAX_GROUPS as u64 + 50) {
            l.gap()
                .map((i + 1) * 4 * KIB, "r--p", &format!("/data/segment-{i}"));
        }
        l.gap().map(MIB, "rw-p", "[heap]");
        let g = group(&[process(1, &l, false)]);
        assert_eq!(g.len(), MAX_GROUPS);
        let rest: Vec<&Group> = g.iter().filter(|g| g.key.rest).collect();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].key.kind, GroupKind::File);
        let total: u64 = g.iter().map(|g| g.virtual_bytes).sum();
        assert_eq!(
            total,
            l.maps.iter().map(Mapping::size).sum::<u64>(),
            "nothing lost"
        );
        assert_eq!(
            g.iter().map(|g| g.mappings).sum::<u64>(),
            l.maps.len() as u64
        );
        assert!(
            find(&g, GroupKind::Heap).len() == 1,
            "the heap kept its own line"
        );
    }

    fn anatomy(rss: u64, groups: Vec<Group>) -> Anatomy {
        Anatomy {
            unix_ms: 0,
            elapsed_s: 0.0,
            trigger: Trigger::NewHigh,
            span: None,
            rss_bytes: rss,
            processes: 1,
            smaps_processes: 1,
            read_us: 0,
            unread: Vec::new(),
            groups,
            ledger: None,
            ledger_unanswered: false,
        }
    }

    #[test]
    fn a_diff_names_the_new_partitions_and_the_grown_heap_largest_first() {
        let mut idle = Layout::new();
        idle.map(20 * MIB, "rw-p", "[heap]")
            .resident(20 * MIB)
            .gap()
            .map(2 * MIB, "r-xp", "/usr/lib/libc.so.6")
            .resident(MIB);
        let mut peak = Layout::new();
        peak.map(24 * MIB, "rw-p", "[heap]")
            .resident(24 * MIB)
            .gap()
            .map(2 * MIB, "r-xp", "/usr/lib/libc.so.6")
            .resident(MIB);
        for _ in 0..10 {
            peak.gap().map(60 * MIB, "rw-p", "").resident(60 * MIB);
        }
        let a = anatomy(21 * MIB, group(&[process(1, &idle, true)]));
        let b = anatomy(625 * MIB, group(&[process(1, &peak, true)]));
        let d = diff(&a, &b);
        assert_eq!(d.measure, Measure::Resident);
        assert_eq!(d.delta_bytes, 604 * MIB as i64);
        assert_eq!(d.changes.len(), 2, "libc did not change");
        assert_eq!(d.changes[0].key.kind, GroupKind::Anon);
        assert!(d.changes[0].new && !d.changes[0].gone);
        assert_eq!(d.changes[0].delta_bytes, 600 * MIB as i64);
        assert_eq!(d.changes[1].key.kind, GroupKind::Heap);
        assert_eq!(d.changes[1].delta_bytes, 4 * MIB as i64);
        assert!(!d.changes[1].new);
        // Back: the partitions are gone.
        let back = diff(&b, &a);
        assert!(back.changes[0].gone);
        assert_eq!(back.delta_bytes, -(604 * MIB as i64));
        // Without smaps on one side, virtual sizes.
        let v = anatomy(21 * MIB, group(&[process(1, &idle, false)]));
        let d = diff(&v, &b);
        assert_eq!(d.measure, Measure::Virtual);
        assert_eq!(d.delta_bytes, 604 * MIB as i64);
    }

    #[test]
    fn anatomies_that_read_no_process_are_no_growth_of_nothing() {
        // A target memmon may not read: each anatomy names the process and why, holds no
        // group, and knows no resident size; the growth says it is unknown and names them.
        let refused = |rss| Anatomy {
            processes: 0,
            smaps_processes: 0,
            unread: vec![crate::model::anatomy::AnatomyUnread {
                pid: 7,
                comm: "prover".into(),
                maps_read: false,
                why: "permission denied on /proc/7/smaps".into(),
            }],
            ..anatomy(rss, Vec::new())
        };
        let list = [refused(10 * MIB), refused(90 * MIB)];
        assert!(!list[0].resident_known());
        let g = growth(&list, 10 * MIB).expect("two anatomies");
        assert_eq!((g.from.processes, g.to.processes), (0, 0));
        assert_eq!(
            crate::render::summary::grew_words(&g.diff, [&g.from, &g.to]),
            "unknown (no process's mappings could be read)"
        );
        let mut o = String::new();
        crate::render::summary::growth_lines(&mut o, [&g.from, &g.to], &g.diff.changes);
        assert_eq!(
            o,
            "                not read: PID 7 (prover): permission denied on /proc/7/smaps\n"
        );
    }

    #[test]
    fn the_peak_and_idle_anatomies_are_the_highest_and_the_nearest_the_floor() {
        let a = |rss| anatomy(rss, Vec::new());
        let list = [a(100), a(50), a(900), a(900), a(60)];
        assert_eq!(at_peak(&list), Some(2));
        assert_eq!(at_idle(&list, 58, Some(2)), Some(4));
        // The start, below the floor, rather than one taken as the growth began (the floor is
        // 4.3 MiB, the start's 3.9, a new high's 5.0): that one would hide part of the growth.
        let (mib, kib) = (1 << 20, 1 << 10);
        let start = [a(3994 * kib), a(5 * mib), a(300 * mib)];
        assert_eq!(at_idle(&start, 4420 * kib, Some(2)), Some(0));
        // Up to a sixteenth above the floor is near enough (60 for 58, not for 56); with none
        // that low, the nearest.
        assert_eq!(at_idle(&list, 56, Some(2)), Some(1));
        assert_eq!(at_idle(&[a(70), a(80), a(900)], 58, Some(2)), Some(0));
        assert_eq!(
            at_idle(&list[2..3], 58, Some(0)),
            Some(0),
            "only the peak's"
        );
        assert_eq!(at_peak(&[]), None);
    }

    #[test]
    fn growth_compares_the_anatomy_nearest_the_idle_floor_with_the_highest() {
        let mut idle = Layout::new();
        idle.map(20 * MIB, "rw-p", "[heap]").resident(20 * MIB);
        let mut peak = Layout::new();
        peak.map(24 * MIB, "rw-p", "[heap]").resident(24 * MIB);
        for _ in 0..10 {
            peak.gap().map(60 * MIB, "rw-p", "").resident(60 * MIB);
        }
        let mut list = vec![
            anatomy(30 * MIB, group(&[process(1, &idle, true)])),
            anatomy(21 * MIB, group(&[process(1, &idle, true)])),
            anatomy(625 * MIB, group(&[process(1, &peak, true)])),
            anatomy(300 * MIB, group(&[process(1, &idle, true)])),
        ];
        for (i, a) in list.iter_mut().enumerate() {
            a.read_us = 100 * (i as u64 + 1);
        }
        let g = growth(&list, 20 * MIB).unwrap();
        assert_eq!((g.from.rss_bytes, g.to.rss_bytes), (21 * MIB, 625 * MIB));
        assert_eq!(g.diff.measure, Measure::Resident);
        assert_eq!(g.diff.delta_bytes, 604 * MIB as i64);
        assert_eq!(
            (g.anatomies, g.longest_read_us, g.total_read_us),
            (4, 400, 1000)
        );
        // One anatomy: nothing to compare.
        assert_eq!(growth(&list[2..3], 20 * MIB), None);
    }

    /// An anatomy taken at the row of `t` s (unix ms 1000 × t), of one 1 MiB heap and `parts`
    /// anonymous partitions of 24 MiB.
    fn taken(t: u64, trigger: Trigger, span: Option<&str>, rss: u64, parts: usize) -> Anatomy {
        let mut l = Layout::new();
        l.map(MIB, "rw-p", "[heap]");
        for _ in 0..parts {
            l.gap().map(24 * MIB, "rw-p", "");
        }
        let mut a = anatomy(rss, group(&[process(1, &l, false)]));
        a.unix_ms = 1000 * t;
        a.elapsed_s = t as f64;
        a.trigger = trigger;
        a.span = span.map(String::from);
        a
    }

    /// The spans of rows at t = 0, 1, 2... (unix ms 1000 × t), each with its event.
    fn spans(events: &[Option<crate::model::sample::Event>]) -> crate::analysis::phases::Phases {
        let mut b = crate::analysis::phases::PhaseBuilder::new();
        for (t, e) in events.iter().enumerate() {
            b.push(&crate::model::sample::Sample {
                unix_ms: 1000 * t as u64,
                elapsed_s: t as f64,
                rss_bytes: MIB,
                event: e.clone(),
                ..Default::default()
            });
        }
        b.finish()
    }

    #[test]
    fn each_phase_grows_from_the_anatomy_at_its_start_to_the_one_at_its_end() {
        use crate::model::sample::Event::Mark;
        let p = spans(&[
            None,
            Some(Mark("a".into())),
            None,
            Some(Mark("b".into())),
            None,
        ]);
        let list = [
            taken(0, Trigger::Start, None, MIB, 0),
            taken(2, Trigger::NewHigh, None, 30 * MIB, 1),
            taken(3, Trigger::PhaseEnd, Some("a"), 50 * MIB, 2),
            taken(4, Trigger::End, None, 80 * MIB, 3),
        ];
        let g = span_growth(&list, &p.phases);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].label.as_str(), g[0].index), ("a", 1));
        assert_eq!((g[0].from.elapsed_s, g[0].to.elapsed_s), (0.0, 3.0));
        assert_eq!(g[0].diff.delta_bytes, 48 * MIB as i64);
        assert_eq!(g[0].diff.measure, Measure::Virtual);
        // Phase b from a's end to the recording's end, its only change the third partition.
        assert_eq!(
            (g[1].from.trigger, g[1].to.trigger),
            (Trigger::PhaseEnd, Trigger::End)
        );
        assert_eq!(g[1].diff.changes.len(), 1);
        assert_eq!(g[1].diff.delta_bytes, 24 * MIB as i64);
        // Phase a's end not taken (a read was under way): a grows to its highest read, and b
        // from that read, the last before it.
        let skipped = [list[0].clone(), list[1].clone(), list[3].clone()];
        let g = span_growth(&skipped, &p.phases);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].label.as_str(), g[0].to.elapsed_s), ("a", 2.0));
        assert_eq!((g[1].label.as_str(), g[1].from.elapsed_s), ("b", 2.0));
        // A phase's highest is its highest read, not its end: a stretch's peak above the
        // phase-end (the buffers freed before the marker).
        let mut peaked = list.to_vec();
        peaked.push(taken(2, Trigger::Peak, Some("a"), 90 * MIB, 4));
        let g = span_growth(&peaked, &p.phases);
        assert_eq!(
            (g[0].to.trigger, g[0].diff.delta_bytes),
            (Trigger::Peak, 96 * MIB as i64)
        );
        // A phase-end of another label at a's end is not a's.
        let other = [
            list[0].clone(),
            taken(3, Trigger::PhaseEnd, Some("x"), 50 * MIB, 2),
        ];
        assert!(span_growth(&other, &p.phases)
            .iter()
            .all(|g| g.label != "a"));
    }

    #[test]
    fn each_run_grows_from_the_idle_floor_to_its_highest_anatomy() {
        use crate::model::sample::Event::{RunEnd, RunStart};
        let p = spans(&[
            None,
            Some(RunStart(1)),
            None,
            Some(RunEnd(1)),
            Some(RunStart(2)),
            None,
            Some(RunEnd(2)),
        ]);
        let list = [
            taken(0, Trigger::Start, None, MIB, 0),
            taken(2, Trigger::NewHigh, None, 100 * MIB, 4),
            taken(3, Trigger::RunEnd, Some("run 1"), 20 * MIB, 1),
            taken(6, Trigger::RunEnd, Some("run 2"), 30 * MIB, 2),
        ];
        let g = run_growth(&list, &p.runs);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].label.as_str(), g[0].index), ("run 1", 1));
        assert_eq!(g[0].to.trigger, Trigger::NewHigh);
        assert_eq!(g[0].diff.delta_bytes, 96 * MIB as i64);
        assert_eq!((g[1].index, g[1].to.trigger), (2, Trigger::RunEnd));
        assert_eq!(g[1].from.trigger, Trigger::Start);
        assert_eq!(g[1].diff.delta_bytes, 48 * MIB as i64);
        // No anatomy before the first run: no floor, nothing said.
        assert!(run_growth(&list[1..], &p.runs).is_empty());
    }
}
