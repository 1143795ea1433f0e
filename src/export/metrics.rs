//! /metrics: a snapshot of every target, written in the Prometheus text format 0.0.4 or in
//! OpenMetrics 1.0. Each metric is declared once in [`FAMILIES`] (name, type, unit, HELP text,
//! how it is read from a target's snapshot); both formats follow from that table. Series are
//! labelled by the target's name only (no PID: a restart must not start a new series), so
//! their number is bounded by the number of targets times the number of families.

use crate::model::sample::Sample;
use std::fmt::Write;
use std::time::Duration;

/// What one target looked like at the sampler's last tick. Sizes in bytes.
#[derive(Debug, Clone, Default)]
pub struct TargetSnapshot {
    pub name: String,
    /// `pid`, `pidfile`, `name` or `cgroup`.
    pub kind: &'static str,
    /// A process of the target is being watched.
    pub up: bool,
    /// The last sample of the target's process tree, as a recording's row holds it (only while
    /// up): the families below read its columns.
    pub tree: Option<Sample>,
    /// The tree's PSS at its last read (with `--pss`, while up).
    pub pss: Option<u64>,
    /// The largest RSS over the window (kept after the target exits, until it ages out).
    pub window_peak: Option<u64>,
    pub restarts: u64,
    pub missed_ticks: u64,
    /// A `cgroup:` target's last reading (while up).
    pub cgroup: Option<crate::probe::cgroup::CgroupStats>,
    /// A `cgroup:` target's largest usage over the window (kept while the cgroup is gone,
    /// until it ages out).
    pub cgroup_window_peak: Option<u64>,
}

/// Everything /metrics shows, taken under a short lock from the sampler.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub targets: Vec<TargetSnapshot>,
    pub interval: Duration,
    pub window: Duration,
    pub reset_peaks: bool,
    pub pss_enabled: bool,
    /// The kernel's exit records are read (asked for, and not refused for any target).
    pub exit_records: bool,
    pub ticks: u64,
    /// Wall time the sampler spent in its ticks, in seconds.
    pub busy_seconds: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// One metric family of a target.
pub struct Family {
    /// The full sample name (counters end in `_total`).
    pub name: &'static str,
    pub kind: Kind,
    /// OpenMetrics unit (the name's last word before `_total`), if any.
    pub unit: Option<&'static str>,
    pub help: &'static str,
    pub value: fn(&TargetSnapshot) -> Option<f64>,
}

/// A column of the process tree's last sample: only while up, never for a `cgroup:` target
/// (which has no tree).
fn up_only(t: &TargetSnapshot, column: fn(&Sample) -> u64) -> Option<f64> {
    t.tree
        .as_ref()
        .filter(|_| t.up && t.kind != "cgroup")
        .map(|s| column(s) as f64)
}

/// A cgroup's figure from its last reading (while up).
fn cgroup_only(
    t: &TargetSnapshot,
    f: fn(&crate::probe::cgroup::CgroupStats) -> Option<u64>,
) -> Option<f64> {
    t.cgroup
        .as_ref()
        .filter(|_| t.up)
        .and_then(f)
        .map(|v| v as f64)
}

/// Every per-target metric.
pub const FAMILIES: &[Family] = &[
    Family {
        name: "memmon_target_up",
        kind: Kind::Gauge,
        unit: None,
        help: "1 when a process of the target is found and watched (for a cgroup target: the cgroup exists and is read), 0 when none is (not started, exited, pidfile stale, name matching nothing or several unrelated processes, no such cgroup).",
        value: |t| Some(if t.up { 1.0 } else { 0.0 }),
    },
    Family {
        name: "memmon_rss_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Resident set size of the target's process tree at the last sample: VmRSS summed over the processes, so pages shared between processes count once per process.",
        value: |t| up_only(t, |s| s.rss_bytes),
    },
    Family {
        name: "memmon_rss_anon_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Anonymous part of the RSS (RssAnon: heap, stacks, private mappings), summed over the tree. Read with memmon_rss_bytes when it moved, else up to a second before, so the parts need not add up to it in one scrape.",
        value: |t| up_only(t, |s| s.anon_bytes),
    },
    Family {
        name: "memmon_rss_file_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "File-backed part of the RSS (RssFile: mapped files and binaries), summed over the tree. Read with memmon_rss_bytes when it moved, else up to a second before, so the parts need not add up to it in one scrape.",
        value: |t| up_only(t, |s| s.file_bytes),
    },
    Family {
        name: "memmon_rss_shmem_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Shared-memory part of the RSS (RssShmem: shmem, tmpfs, shared anonymous), summed over the tree. Read with memmon_rss_bytes when it moved, else up to a second before, so the parts need not add up to it in one scrape.",
        value: |t| up_only(t, |s| s.shmem_bytes),
    },
    Family {
        name: "memmon_swap_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Swapped-out anonymous memory (VmSwap), summed over the tree.",
        value: |t| up_only(t, |s| s.swap_bytes),
    },
    Family {
        name: "memmon_processes",
        kind: Kind::Gauge,
        unit: None,
        help: "Processes in the target's tree (the target and its descendants) at the last sample.",
        value: |t| up_only(t, |s| s.processes as u64),
    },
    Family {
        name: "memmon_pss_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Proportional set size of the tree (smaps_rollup Pss summed: shared pages divided among their users), at its last read: every --pss-every, and at a new RSS high at most every tenth of it, so it may be a spike's.",
        value: |t| t.up.then_some(t.pss).flatten().map(|v| v as f64),
    },
    Family {
        name: "memmon_cgroup_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Memory charged to the target's cgroup at the last sample (memory.current, v1 memory.usage_in_bytes): every page counted once, whichever process maps it, page cache and kernel memory included.",
        value: |t| cgroup_only(t, |c| Some(c.current)),
    },
    Family {
        name: "memmon_cgroup_working_set_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Working set of the target's cgroup as Kubernetes computes it: memory.current minus inactive_file (page cache the kernel reclaims first); every page counted once, active page cache included.",
        value: |t| cgroup_only(t, |c| Some(c.working_set())),
    },
    Family {
        name: "memmon_cgroup_anon_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Anonymous part of the cgroup's memory (memory.stat anon, v1 total_rss: heap, stacks, private mappings), every page counted once.",
        value: |t| cgroup_only(t, |c| Some(c.anon)),
    },
    Family {
        name: "memmon_cgroup_file_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "File part of the cgroup's memory (memory.stat file, v1 total_cache): page cache, mapped or not, and shmem/tmpfs, every page counted once.",
        value: |t| cgroup_only(t, |c| Some(c.file)),
    },
    Family {
        name: "memmon_cgroup_limit_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "The cgroup's memory limit (memory.max, v1 memory.limit_in_bytes), against memmon_cgroup_bytes, which counts every page once, page cache included; absent when the cgroup has no limit.",
        value: |t| cgroup_only(t, |c| c.limit),
    },
    Family {
        name: "memmon_cgroup_window_peak_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Largest memory charged to the cgroup over the last memmon_window_seconds (every page counted once, page cache included), from samples of memory.current every memmon_sample_interval_seconds and raised to the cgroup's peak file (memory.peak, v1 memory.max_usage_in_bytes) where it rose or was reset (--reset-peaks) since the previous sample. The same for every scraper.",
        value: |t| t.cgroup_window_peak.map(|v| v as f64),
    },
    Family {
        name: "memmon_cgroup_oom_kills_total",
        kind: Kind::Counter,
        unit: None,
        help: "Processes of the cgroup killed by the OOM killer since the cgroup was made (memory.events oom_kill, v1 memory.oom_control oom_kill); it starts again from 0 when the cgroup is made again.",
        value: |t| cgroup_only(t, |c| Some(c.events.oom_kill)),
    },
    Family {
        name: "memmon_window_peak_rss_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Largest RSS of the tree over the last memmon_window_seconds, from samples every memmon_sample_interval_seconds and raised to the kernel's high-water mark (VmHWM) where that mark rose or was reset (--reset-peaks) since the previous sample, and to the mark a process of the tree had as it exited since then (exit records, memmon_exit_records 1); a process that began since counts its whole mark. A lower bound: exact for one process where its mark rose, began or was reset since the previous sample; for a tree each process's mark counts alone, and the sampled sum only at the samples. The same for every scraper.",
        value: |t| t.window_peak.map(|v| v as f64),
    },
    Family {
        name: "memmon_restarts_total",
        kind: Kind::Counter,
        unit: None,
        help: "Times a new process took over the target (pidfile rewritten, or a new match of the name) after the watched one exited; for a cgroup target, times the cgroup was found again after it was gone.",
        value: |t| Some(t.restarts as f64),
    },
    Family {
        name: "memmon_missed_ticks_total",
        kind: Kind::Counter,
        unit: None,
        help: "Samples the exporter could not take on time (their deadline passed before the sample before was done; they are skipped, not taken late, as a recording's missed_ticks counts them), so spikes in that gap were only seen through the kernel's high-water mark.",
        value: |t| Some(t.missed_ticks as f64),
    },
];

/// The text format a scraper asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    Prometheus004,
    OpenMetrics100,
}

impl TextFormat {
    /// OpenMetrics when the Accept header lists `application/openmetrics-text`, else the
    /// Prometheus text format.
    pub fn from_accept(accept: Option<&str>) -> TextFormat {
        match accept {
            Some(a)
                if a.to_ascii_lowercase()
                    .contains("application/openmetrics-text") =>
            {
                TextFormat::OpenMetrics100
            }
            _ => TextFormat::Prometheus004,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            TextFormat::Prometheus004 => "text/plain; version=0.0.4; charset=utf-8",
            TextFormat::OpenMetrics100 => {
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
            }
        }
    }
}

/// A label value with backslash, double quote and newline escaped, as both formats want.
pub fn escape_label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text escaped: backslash and newline (and, in OpenMetrics, double quote).
fn escape_help(v: &str, f: TextFormat) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if f == TextFormat::OpenMetrics100 => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

/// A number as both formats write it: integers without a fraction.
fn number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn header(out: &mut String, name: &str, kind: Kind, unit: Option<&str>, help: &str, f: TextFormat) {
    let kind_word = match kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter",
    };
    let family = match (f, kind) {
        (TextFormat::OpenMetrics100, Kind::Counter) => name.strip_suffix("_total").unwrap_or(name),
        _ => name,
    };
    let help = escape_help(help, f);
    match f {
        TextFormat::Prometheus004 => {
            let _ = writeln!(out, "# HELP {family} {help}");
            let _ = writeln!(out, "# TYPE {family} {kind_word}");
        }
        TextFormat::OpenMetrics100 => {
            let _ = writeln!(out, "# TYPE {family} {kind_word}");
            if let Some(u) = unit {
                let _ = writeln!(out, "# UNIT {family} {u}");
            }
            let _ = writeln!(out, "# HELP {family} {help}");
        }
    }
}

/// The whole /metrics body.
pub fn render(s: &Snapshot, f: TextFormat) -> String {
    let mut out = String::with_capacity(1024 + s.targets.len() * 1024);
    for fam in FAMILIES {
        let values: Vec<(&TargetSnapshot, f64)> = s
            .targets
            .iter()
            .filter_map(|t| (fam.value)(t).map(|v| (t, v)))
            .collect();
        if values.is_empty() {
            continue;
        }
        header(&mut out, fam.name, fam.kind, fam.unit, fam.help, f);
        for (t, v) in values {
            let _ = writeln!(
                out,
                "{}{{target=\"{}\",kind=\"{}\"}} {}",
                fam.name,
                escape_label_value(&t.name),
                t.kind,
                number(v)
            );
        }
    }
    let globals: [(&str, Kind, Option<&str>, &str, f64); 6] = [
        (
            "memmon_sample_interval_seconds",
            Kind::Gauge,
            Some("seconds"),
            "Time between two samples of the targets (-i).",
            s.interval.as_secs_f64(),
        ),
        (
            "memmon_window_seconds",
            Kind::Gauge,
            Some("seconds"),
            "Length of the sliding window of memmon_window_peak_rss_bytes (--window).",
            s.window.as_secs_f64(),
        ),
        (
            "memmon_reset_peaks",
            Kind::Gauge,
            None,
            "1 when the exporter resets the kernel's high-water marks (VmHWM) after each sample (--reset-peaks), which changes what other tools read from VmHWM; 0 when it does not.",
            if s.reset_peaks { 1.0 } else { 0.0 },
        ),
        (
            "memmon_exit_records",
            Kind::Gauge,
            None,
            "1 when the exporter reads the kernel's exit records (taskstats: root or CAP_NET_ADMIN), so a process that peaks and exits between two samples is in memmon_window_peak_rss_bytes; 0 when it does not (--no-taskstats, or refused).",
            if s.exit_records { 1.0 } else { 0.0 },
        ),
        (
            "memmon_sampler_ticks_total",
            Kind::Counter,
            None,
            "Samples the exporter has taken (one tick samples every target).",
            s.ticks as f64,
        ),
        (
            "memmon_sampler_busy_seconds_total",
            Kind::Counter,
            Some("seconds"),
            "Wall time the sampler spent sampling (reading /proc), in seconds.",
            s.busy_seconds,
        ),
    ];
    for (name, kind, unit, help, v) in globals {
        header(&mut out, name, kind, unit, help, f);
        let _ = writeln!(out, "{name} {}", number(v));
    }
    if f == TextFormat::OpenMetrics100 {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap() -> Snapshot {
        Snapshot {
            targets: vec![
                TargetSnapshot {
                    name: "cuzk".into(),
                    kind: "pidfile",
                    up: true,
                    tree: Some(Sample {
                        rss_bytes: 45 << 30,
                        anon_bytes: 44 << 30,
                        file_bytes: 1 << 30,
                        processes: 3,
                        ..Default::default()
                    }),
                    window_peak: Some(200 << 30),
                    restarts: 2,
                    ..Default::default()
                },
                TargetSnapshot {
                    name: "svc".into(),
                    kind: "cgroup",
                    up: true,
                    cgroup: Some(crate::probe::cgroup::CgroupStats {
                        current: 3 << 30,
                        anon: 2 << 30,
                        file: 1 << 30,
                        limit: Some(4 << 30),
                        ..Default::default()
                    }),
                    cgroup_window_peak: Some(5 << 30),
                    ..Default::default()
                },
                TargetSnapshot {
                    name: "we\"ird\\na\nme".into(),
                    kind: "name",
                    up: false,
                    window_peak: None,
                    ..Default::default()
                },
            ],
            interval: Duration::from_millis(100),
            window: Duration::from_secs(15),
            ..Default::default()
        }
    }

    #[test]
    fn label_values_escape_quote_backslash_and_newline() {
        assert_eq!(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let text = render(&snap(), TextFormat::Prometheus004);
        assert!(
            text.contains("memmon_target_up{target=\"we\\\"ird\\\\na\\nme\",kind=\"name\"} 0\n"),
            "{text}"
        );
        // No line is broken by the name: every line is a comment or `name{...} value`.
        for line in text.lines() {
            assert!(
                line.starts_with("# ") || line.starts_with("memmon_"),
                "broken line: {line:?}"
            );
        }
    }

    #[test]
    fn a_target_that_is_down_shows_up_0_and_no_current_sizes() {
        let text = render(&snap(), TextFormat::Prometheus004);
        assert!(text.contains("memmon_target_up{target=\"cuzk\",kind=\"pidfile\"} 1\n"));
        assert!(text.contains("memmon_rss_bytes{target=\"cuzk\",kind=\"pidfile\"} 48318382080\n"));
        assert_eq!(text.matches("memmon_rss_bytes{").count(), 1, "{text}");
        // Its counters are still there.
        assert_eq!(text.matches("memmon_restarts_total{").count(), 3);
        // PSS is off: no family at all.
        assert!(!text.contains("memmon_pss_bytes"));
        assert!(text.contains(
            "memmon_window_peak_rss_bytes{target=\"cuzk\",kind=\"pidfile\"} 214748364800\n"
        ));
        assert!(text.contains("memmon_sample_interval_seconds 0.1\n"));
    }

    #[test]
    fn prometheus_text_has_help_and_type_per_family_and_counters_end_in_total() {
        let text = render(&snap(), TextFormat::Prometheus004);
        for fam in FAMILIES.iter().filter(|f| f.name != "memmon_pss_bytes") {
            assert!(
                text.contains(&format!("# HELP {} ", fam.name)),
                "{}",
                fam.name
            );
            assert!(
                text.contains(&format!("# TYPE {} ", fam.name)),
                "{}",
                fam.name
            );
            if fam.kind == Kind::Counter {
                assert!(fam.name.ends_with("_total"));
            }
            if let Some(u) = fam.unit {
                assert!(
                    fam.name.trim_end_matches("_total").ends_with(u),
                    "{}",
                    fam.name
                );
            }
        }
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn openmetrics_names_counter_families_without_total_gives_units_and_ends_with_eof() {
        let text = render(&snap(), TextFormat::OpenMetrics100);
        assert!(text.contains("# TYPE memmon_restarts counter\n"));
        assert!(text.contains("memmon_restarts_total{target=\"cuzk\",kind=\"pidfile\"} 2\n"));
        assert!(text.contains("# UNIT memmon_rss_bytes bytes\n"));
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(text.matches("# EOF").count(), 1);
    }

    #[test]
    fn the_accept_header_chooses_the_format() {
        assert_eq!(TextFormat::from_accept(None), TextFormat::Prometheus004);
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(
            TextFormat::from_accept(Some(prom)),
            TextFormat::OpenMetrics100
        );
        assert_eq!(
            TextFormat::from_accept(Some("text/plain")),
            TextFormat::Prometheus004
        );
    }
}
