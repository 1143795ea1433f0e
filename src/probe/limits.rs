//! Every memory limit a cgroup's tasks run under, each with the cgroup that sets it: the
//! cgroup's own and those of every cgroup above it (a systemd slice's `MemoryHigh=`, a
//! container's `memory.max`). The kernel counts a limit's events where the limit is set: when a
//! task of `/a/b` is held at `/a`'s `memory.high`, `/a`'s `memory.events.local` counts `high`,
//! `/a/b`'s counters do not move. Read at a recording's start and end, so the summary can name
//! the limit that shaped the run and the one an OOM kill was at.
//!
//! v2: `memory.max`, `memory.high`, `memory.swap.max`, and `memory.events.local` (Linux ≥ 5.2;
//! else `memory.events`, which counts the cgroups below too). v1: `memory.limit_in_bytes`,
//! `memory.memsw.limit_in_bytes` (memory and swap together), `memory.failcnt` (times its own
//! limit was hit) and `memory.oom_control`'s `oom_kill`.

use crate::probe::cgroup::{key_value, CgroupEvents, CgroupVersion, MemCgroup, V1_UNLIMITED};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One cgroup's limits and its events, read once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitReading {
    /// The cgroup's path (`/system.slice/proverd.service`).
    pub path: String,
    /// `memory.max` (v1 `memory.limit_in_bytes`): past it the kernel reclaims, then OOM-kills.
    pub max_bytes: Option<u64>,
    /// `memory.high`: past it the tasks are throttled and reclaimed (swapped), never killed.
    pub high_bytes: Option<u64>,
    /// `memory.swap.max` (v1: `memory.memsw.limit_in_bytes` less `memory.limit_in_bytes`).
    pub swap_max_bytes: Option<u64>,
    /// The swap the cgroup's tasks hold now, and the most since it was made (or its peak reset):
    /// `memory.swap.current`, `memory.swap.peak` (Linux ≥ 6.5); v1 has neither.
    pub swap_current_bytes: Option<u64>,
    pub swap_peak_bytes: Option<u64>,
    /// The events counted at this cgroup's own thresholds (`memory.events.local`), or, where the
    /// kernel has no local file, at its own and those below it (`local_events` false).
    pub events: CgroupEvents,
    pub local_events: bool,
}

impl LimitReading {
    /// The cgroup sets a limit of its own.
    pub fn limits(&self) -> bool {
        self.max_bytes.is_some() || self.high_bytes.is_some() || self.swap_max_bytes.is_some()
    }
}

/// The limits of `cg` and of every cgroup above it, the cgroup first (the root, which sets
/// none, left out). A file that cannot be read counts as no limit: this is read twice per
/// recording, never on a tick.
pub fn read_chain(cg: &MemCgroup) -> Vec<LimitReading> {
    let parts: Vec<&str> = cg.path.split('/').filter(|c| !c.is_empty()).collect();
    cg.dir
        .ancestors()
        .take(parts.len())
        .enumerate()
        .map(|(up, dir)| {
            let path = format!("/{}", parts[..parts.len() - up].join("/"));
            match cg.version {
                CgroupVersion::V2 => read_v2(dir, path),
                CgroupVersion::V1 => read_v1(dir, path),
            }
        })
        .collect()
}

fn read_v2(dir: &Path, path: String) -> LimitReading {
    let (events, local_events) = match read(dir, "memory.events.local") {
        Some(t) => (CgroupEvents::parse(&t), true),
        None => (
            read(dir, "memory.events")
                .map(|t| CgroupEvents::parse(&t))
                .unwrap_or_default(),
            false,
        ),
    };
    LimitReading {
        path,
        max_bytes: number(dir, "memory.max"),
        high_bytes: number(dir, "memory.high"),
        swap_max_bytes: number(dir, "memory.swap.max"),
        swap_current_bytes: number(dir, "memory.swap.current"),
        swap_peak_bytes: number(dir, "memory.swap.peak"),
        events,
        local_events,
    }
}

fn read_v1(dir: &Path, path: String) -> LimitReading {
    let limited = |n: Option<u64>| n.filter(|&l| l < V1_UNLIMITED);
    let max = limited(number(dir, "memory.limit_in_bytes"));
    let memsw = limited(number(dir, "memory.memsw.limit_in_bytes"));
    LimitReading {
        path,
        max_bytes: max,
        high_bytes: None,
        swap_max_bytes: memsw.map(|m| m.saturating_sub(max.unwrap_or(m))),
        swap_current_bytes: None,
        swap_peak_bytes: None,
        events: CgroupEvents {
            max: number(dir, "memory.failcnt").unwrap_or(0),
            oom_kill: read(dir, "memory.oom_control")
                .and_then(|t| key_value(&t, "oom_kill"))
                .unwrap_or(0),
            ..CgroupEvents::default()
        },
        local_events: true,
    }
}

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

/// A file of one number; `None` for `max`, a missing file, or anything else.
fn number(dir: &Path, name: &str) -> Option<u64> {
    read(dir, name)?.trim().parse().ok()
}

/// A limit over the recorded cgroup as the recording ends: where it is set, its thresholds,
/// and the events its thresholds counted during the recording. Kept in the end record
/// (`CgroupEnd::limits`) for every cgroup of the chain that sets a limit or counted an event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitEnd {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_max_bytes: Option<u64>,
    /// The rise of its counters from the first reading to the last.
    pub events_during: CgroupEvents,
    /// Its counters are its own thresholds' only (`memory.events.local`, v1's failcnt); false:
    /// they count the cgroups below it too.
    pub local_events: bool,
}

/// The chain's limits over a recording, from its first and last readings (the same chain; a
/// cgroup missing from the first counts from 0): each cgroup that sets a limit or whose
/// counters rose, the recorded cgroup first.
pub fn over_recording(first: &[LimitReading], last: &[LimitReading]) -> Vec<LimitEnd> {
    last.iter()
        .filter_map(|l| {
            let f = first
                .iter()
                .find(|f| f.path == l.path)
                .map(|f| f.events)
                .unwrap_or_default();
            let during = l.events.since(f);
            (l.limits() || during != CgroupEvents::default()).then(|| LimitEnd {
                path: l.path.clone(),
                max_bytes: l.max_bytes,
                high_bytes: l.high_bytes,
                swap_max_bytes: l.swap_max_bytes,
                events_during: during,
                local_events: l.local_events,
            })
        })
        .collect()
}

impl LimitEnd {
    /// The cgroup sets a limit of its own.
    pub fn limits(&self) -> bool {
        self.max_bytes.is_some() || self.high_bytes.is_some() || self.swap_max_bytes.is_some()
    }

    /// `memory.max 150.0 MiB, memory.high 80.0 MiB`: its thresholds, by their files.
    pub fn thresholds(&self, version: CgroupVersion) -> String {
        let b = crate::units::fmt_bytes;
        let v1 = version == CgroupVersion::V1;
        let mut parts = Vec::new();
        if let Some(m) = self.max_bytes {
            let file = if v1 {
                "memory.limit_in_bytes"
            } else {
                "memory.max"
            };
            parts.push(format!("{file} {}", b(m)));
        }
        if let Some(h) = self.high_bytes {
            parts.push(format!("memory.high {}", b(h)));
        }
        if let Some(s) = self.swap_max_bytes {
            let file = if v1 {
                "swap (memory.memsw.limit_in_bytes less the memory limit)"
            } else {
                "memory.swap.max"
            };
            parts.push(format!("{file} {}", b(s)));
        }
        if parts.is_empty() {
            parts.push("no limit of its own".into());
        }
        parts.join(", ")
    }

    /// The limit held the tasks at it during the recording: reclaim at `max` or throttling at
    /// `high` was counted (v1: the limit was hit, failcnt).
    pub fn held_at(&self) -> bool {
        self.events_during.max > 0 || self.events_during.high > 0
    }
}

/// The cgroup whose limit an OOM kill was at, of the chain `limits` (the recorded cgroup
/// first). The kernel counts `oom` and `max` at the cgroup whose limit was hit, and each counter
/// rises in the cgroups above it too (never below), so the deepest cgroup whose `oom` rose is the
/// one; `oom_kill` is counted at the victim's own cgroup instead, and only says a kill was there.
/// v1 has no `oom` count: the deepest cgroup with a limit whose failcnt rose.
pub fn oom_at(limits: &[LimitEnd]) -> Option<&LimitEnd> {
    limits
        .iter()
        .find(|l| l.events_during.oom > 0)
        .or_else(|| {
            limits
                .iter()
                .find(|l| l.max_bytes.is_some() && l.events_during.max > 0)
        })
        .or_else(|| limits.iter().find(|l| l.events_during.oom_kill > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }

    fn events(oom: u64, oom_kill: u64, max: u64, high: u64) -> String {
        format!("low 0\nhigh {high}\nmax {max}\noom {oom}\noom_kill {oom_kill}\n")
    }

    #[test]
    fn a_v2_chain_names_each_limit_where_it_is_set_and_counts_its_local_events() {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().join("lim");
        let leaf = top.join("run");
        write(
            &top,
            &[
                ("memory.max", "max\n"),
                ("memory.high", "83886080\n"),
                ("memory.swap.max", "max\n"),
                ("memory.events.local", &events(0, 0, 0, 51)),
                ("memory.events", &events(0, 0, 0, 51)),
            ],
        );
        write(
            &leaf,
            &[
                ("memory.max", "157286400\n"),
                ("memory.high", "max\n"),
                ("memory.swap.current", "163577856\n"),
                ("memory.swap.peak", "164000000\n"),
                ("memory.events.local", &events(1, 1, 7, 0)),
            ],
        );
        let cg = MemCgroup {
            version: CgroupVersion::V2,
            path: "/lim/run".into(),
            dir: leaf.clone(),
        };
        let chain = read_chain(&cg);
        assert_eq!(
            chain.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
            ["/lim/run", "/lim"]
        );
        assert_eq!(chain[0].max_bytes, Some(150 << 20));
        assert_eq!(chain[0].high_bytes, None);
        assert_eq!(chain[0].swap_peak_bytes, Some(164_000_000));
        assert_eq!(chain[1].high_bytes, Some(80 << 20));
        assert!(chain[1].local_events);

        // Later: the high threshold of /lim counted 40 more, the leaf's max 3 more and an OOM kill.
        write(&top, &[("memory.events.local", &events(0, 0, 0, 91))]);
        write(&leaf, &[("memory.events.local", &events(2, 2, 10, 0))]);
        let ends = over_recording(&chain, &read_chain(&cg));
        assert_eq!(ends.len(), 2);
        assert_eq!(ends[1].events_during.high, 40);
        assert!(ends[1].held_at());
        assert_eq!(ends[0].events_during.max, 3);
        assert_eq!(oom_at(&ends).map(|l| l.path.as_str()), Some("/lim/run"));
        assert_eq!(
            ends[1].thresholds(CgroupVersion::V2),
            "memory.high 80.00 MiB"
        );
    }

    #[test]
    fn an_oom_at_an_ancestors_limit_names_the_ancestor_not_the_victims_cgroup() {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().join("c1-p200");
        let leaf = top.join("memmon-1-0");
        write(
            &top,
            &[
                ("memory.max", "209715200\n"),
                ("memory.events.local", &events(0, 0, 0, 0)),
            ],
        );
        write(
            &leaf,
            &[
                ("memory.max", "max\n"),
                ("memory.events.local", &events(0, 0, 0, 0)),
            ],
        );
        let quiet = t.path().join("c1-p200/memmon-1-0/quiet");
        write(
            &quiet,
            &[
                ("memory.max", "max\n"),
                ("memory.events.local", &events(0, 0, 0, 0)),
            ],
        );
        let quiet = MemCgroup {
            version: CgroupVersion::V2,
            path: "/c1-p200/memmon-1-0/quiet".into(),
            dir: quiet,
        };
        // A cgroup with no limit and no event is left out.
        let chain = read_chain(&quiet);
        assert_eq!(over_recording(&chain, &chain).len(), 1);
        let cg = MemCgroup {
            version: CgroupVersion::V2,
            path: "/c1-p200/memmon-1-0".into(),
            dir: leaf.clone(),
        };
        let first = read_chain(&cg);
        // The victim's cgroup counts the kill, the slice whose limit was hit the OOM.
        write(&top, &[("memory.events.local", &events(1, 0, 12, 0))]);
        write(&leaf, &[("memory.events.local", &events(0, 1, 0, 0))]);
        let ends = over_recording(&first, &read_chain(&cg));
        assert_eq!(ends.len(), 2, "{ends:?}");
        let at = oom_at(&ends).unwrap();
        assert_eq!(
            (at.path.as_str(), at.max_bytes),
            ("/c1-p200", Some(200 << 20))
        );
    }

    #[test]
    fn v1_reads_the_limit_memsw_and_failcnt_and_takes_no_limit_for_unlimited() {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().join("a");
        let leaf = top.join("b");
        write(
            &top,
            &[
                ("memory.limit_in_bytes", "104857600\n"),
                ("memory.memsw.limit_in_bytes", "157286400\n"),
                ("memory.failcnt", "4\n"),
                (
                    "memory.oom_control",
                    "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
                ),
            ],
        );
        write(
            &leaf,
            &[
                ("memory.limit_in_bytes", "9223372036854771712\n"),
                ("memory.failcnt", "0\n"),
            ],
        );
        let cg = MemCgroup {
            version: CgroupVersion::V1,
            path: "/a/b".into(),
            dir: leaf,
        };
        let chain = read_chain(&cg);
        assert_eq!(chain[0].max_bytes, None);
        assert_eq!(chain[1].max_bytes, Some(100 << 20));
        assert_eq!(chain[1].swap_max_bytes, Some(50 << 20));
        assert_eq!((chain[1].events.max, chain[1].events.oom_kill), (4, 1));
    }
}
