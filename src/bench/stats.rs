//! Statistics across benchmark runs (`analysis::stats::Stats`: mean, standard deviation,
//! minimum, maximum), for wall time and, in whole bytes, peak memory; and the leak check on the
//! RSS left after each run.

use crate::units::{fmt_bytes, fmt_bytes_signed};
use serde::Serialize;

/// Growth of the RSS left after the runs counts as a leak signal above this share of the floor...
pub const LEAK_FLOOR_SHARE: f64 = 0.01;
/// ...and above this many bytes (so a small daemon's allocator noise is not called a leak).
pub const LEAK_MIN_BYTES: u64 = 1 << 20;

pub use crate::analysis::stats::Stats;

/// [`Stats`] of sizes, in whole bytes: the count, mean, standard deviation, minimum, maximum
/// and spread, under the same names.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ByteStats {
    pub count: usize,
    pub mean: u64,
    pub stddev: u64,
    pub min: u64,
    pub max: u64,
    /// (max - min) in percent of the mean (of the sizes themselves, not rounded); `None` when
    /// the mean is 0.
    pub spread_pct: Option<f64>,
}

impl ByteStats {
    /// The statistics of sizes in bytes, rounded to whole bytes; `None` for no values.
    pub fn of(values: &[u64]) -> Option<ByteStats> {
        let v: Vec<f64> = values.iter().map(|&b| b as f64).collect();
        let s = Stats::of(&v)?;
        Some(ByteStats {
            count: s.count,
            mean: s.mean.round() as u64,
            stddev: s.stddev.round() as u64,
            min: s.min as u64,
            max: s.max as u64,
            spread_pct: s.spread_pct,
        })
    }
}

/// Whether the RSS left after each run grew run over run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakCheck {
    pub suspected: bool,
    /// RSS after the last run minus RSS after the first.
    pub growth_bytes: i64,
    /// The growth above which a steady rise is called a leak.
    pub threshold_bytes: u64,
    pub message: String,
}

/// Checks `(rss_before, rss_after, processes_after)` of each run, in order. A leak is suspected when the RSS
/// after each run is above the one after the run before, at every run, and the rise from the
/// first run's end to the last's is more than `LEAK_FLOOR_SHARE` of the idle floor (the RSS
/// before the first run) and more than `LEAK_MIN_BYTES`. The first run's own growth is left out:
/// a daemon may warm a cache once. When the number of processes after the runs changed (a
/// worker started or ended), the RSS after each run is not one set's and no leak is called.
/// `None` for fewer than two runs.
pub fn leak_check(runs: &[(u64, u64, u32)]) -> Option<LeakCheck> {
    if runs.len() < 2 {
        return None;
    }
    let (fewest, most) = runs
        .iter()
        .fold((u32::MAX, 0), |(lo, hi), r| (lo.min(r.2), hi.max(r.2)));
    let floor = runs[0].0;
    let first = runs[0].1;
    let last = runs[runs.len() - 1].1;
    let growth = last as i64 - first as i64;
    let threshold = ((floor as f64 * LEAK_FLOOR_SHARE) as u64).max(LEAK_MIN_BYTES);
    let rising = runs.windows(2).all(|w| w[1].1 > w[0].1);
    let same_set = fewest == most;
    let suspected = same_set && rising && growth > threshold as i64;
    let rule = format!(
        "1% of the {} idle floor, at least {}",
        fmt_bytes(floor),
        fmt_bytes(LEAK_MIN_BYTES)
    );
    let message = if !same_set {
        format!(
            "no leak call: the daemon's tree held between {fewest} and {most} processes after the runs, so its RSS after each run ({} from run 1 to run {}) is not one set of processes' and is not compared",
            fmt_bytes_signed(growth),
            runs.len()
        )
    } else if suspected {
        format!(
            "possible leak: the daemon's RSS after each run rose at every run, by {} from run 1 to run {} ({} per run; threshold {})",
            fmt_bytes_signed(growth),
            runs.len(),
            fmt_bytes_signed(growth / (runs.len() as i64 - 1)),
            rule
        )
    } else if rising {
        format!(
            "no leak signal: the RSS after each run rose, but only by {} in all (threshold {})",
            fmt_bytes_signed(growth),
            rule
        )
    } else {
        format!(
            "no leak signal: the RSS after the runs did not rise run over run ({} from run 1 to run {})",
            fmt_bytes_signed(growth),
            runs.len()
        )
    };
    Some(LeakCheck {
        suspected,
        growth_bytes: growth,
        threshold_bytes: threshold,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Runs of one process each.
    fn one(runs: &[(u64, u64)]) -> Vec<(u64, u64, u32)> {
        runs.iter().map(|&(b, a)| (b, a, 1)).collect()
    }

    #[test]
    fn a_steady_rise_above_the_threshold_is_a_suspected_leak() {
        let runs = [
            (100 * MIB, 110 * MIB),
            (110 * MIB, 120 * MIB),
            (120 * MIB, 130 * MIB),
        ];
        let l = leak_check(&one(&runs)).unwrap();
        assert!(l.suspected, "{}", l.message);
        assert_eq!(l.growth_bytes, 20 * MIB as i64);
        assert!(
            l.message.contains("possible leak") && l.message.contains("+10.00 MiB per run"),
            "{}",
            l.message
        );
    }

    #[test]
    fn a_flat_daemon_after_a_warm_first_run_is_not_a_leak() {
        let runs = [
            (100 * MIB, 150 * MIB),
            (150 * MIB, 150 * MIB),
            (150 * MIB, 150 * MIB),
        ];
        assert!(!leak_check(&one(&runs)).unwrap().suspected);
    }

    #[test]
    fn a_rise_within_the_threshold_is_not_a_leak() {
        // 1% of a 10 GiB floor is 102.4 MiB: a 60 MiB rise over the runs is below it.
        let floor = 10 << 30;
        let runs = [
            (floor, floor),
            (floor, floor + 30 * MIB),
            (floor, floor + 60 * MIB),
        ];
        let l = leak_check(&one(&runs)).unwrap();
        assert!(!l.suspected, "{}", l.message);
        assert_eq!(l.threshold_bytes, floor / 100);
    }

    #[test]
    fn one_fall_breaks_the_rise() {
        let runs = [(0, 10 * MIB), (0, 30 * MIB), (0, 20 * MIB), (0, 40 * MIB)];
        assert!(!leak_check(&one(&runs)).unwrap().suspected);
    }

    #[test]
    fn a_rise_that_comes_with_more_processes_is_not_called_a_leak() {
        // A worker started at run 2 holds 40 MiB: a steady rise, but not of one set of processes.
        let runs = [
            (100 * MIB, 110 * MIB, 1),
            (110 * MIB, 160 * MIB, 2),
            (160 * MIB, 170 * MIB, 2),
        ];
        let l = leak_check(&runs).unwrap();
        assert!(!l.suspected, "{}", l.message);
        assert!(
            l.message.contains("between 1 and 2 processes") && l.message.contains("not compared"),
            "{}",
            l.message
        );
        // The same rise in one unchanged set is called.
        let same: Vec<_> = runs.iter().map(|&(b, a, _)| (b, a, 2)).collect();
        assert!(leak_check(&same).unwrap().suspected);
    }

    #[test]
    fn one_run_says_nothing_about_leaks() {
        assert_eq!(leak_check(&[(MIB, 2 * MIB, 1)]), None);
    }

    #[test]
    fn byte_sizes_keep_their_value() {
        let s = ByteStats::of(&[40 << 20, 80 << 20, 120 << 20]).unwrap();
        assert_eq!(
            (s.mean, s.stddev, s.min, s.max),
            (80 << 20, 40 << 20, 40 << 20, 120 << 20)
        );
        assert_eq!(s.spread_pct, Some(100.0));
        assert_eq!(ByteStats::of(&[0, 0]).unwrap().spread_pct, None);
    }

    #[test]
    fn byte_stats_have_the_names_of_every_other_stat() {
        let keys = |v: serde_json::Value| {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        let bytes = serde_json::to_value(ByteStats::of(&[1, 3]).unwrap()).unwrap();
        let other = serde_json::to_value(Stats::of(&[1.0, 3.0]).unwrap()).unwrap();
        assert_eq!(keys(bytes.clone()), keys(other));
        assert_eq!(bytes["spread_pct"], 100.0);
    }
}
