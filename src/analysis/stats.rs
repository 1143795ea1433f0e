//! Statistics of one quantity over runs — the count, mean, standard deviation (of a sample,
//! n − 1), minimum, maximum and spread — for `memmon bench`'s runs and each side of
//! `memmon compare`. The JSON names are the fields' (`count`, `mean`, `stddev`, `min`, `max`,
//! `spread_pct`).

use serde::Serialize;

/// Statistics of some values, in their unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    pub count: usize,
    pub mean: f64,
    /// The sample standard deviation (divides by n − 1); 0 for a single value.
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
    /// (max - min) in percent of the mean; `None` when the mean is 0.
    pub spread_pct: Option<f64>,
}

impl Stats {
    /// `None` for no values.
    pub fn of(values: &[f64]) -> Option<Stats> {
        let count = values.len();
        if count == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / count as f64;
        let stddev = if count > 1 {
            let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
            (ss / (count - 1) as f64).sqrt()
        } else {
            0.0
        };
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Stats {
            count,
            mean,
            stddev,
            min,
            max,
            spread_pct: pct(max - min, mean),
        })
    }

    /// max - min.
    pub fn range(&self) -> f64 {
        self.max - self.min
    }
}

/// [`Stats`] of values fed one at a time, in constant memory (Welford's mean and variance).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunningStats {
    count: usize,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl RunningStats {
    pub fn push(&mut self, v: f64) {
        if self.count == 0 {
            self.min = v;
            self.max = v;
        }
        self.count += 1;
        let d = v - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (v - self.mean);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// These values and `other`'s together (Chan's pairwise update).
    pub fn merge(&mut self, other: &RunningStats) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let n = (self.count + other.count) as f64;
        let d = other.mean - self.mean;
        self.m2 += other.m2 + d * d * self.count as f64 * other.count as f64 / n;
        self.mean += d * other.count as f64 / n;
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// `None` for no values.
    pub fn finish(&self) -> Option<Stats> {
        (self.count > 0).then(|| Stats {
            count: self.count,
            mean: self.mean,
            stddev: if self.count > 1 {
                (self.m2 / (self.count - 1) as f64).sqrt()
            } else {
                0.0
            },
            min: self.min,
            max: self.max,
            spread_pct: pct(self.max - self.min, self.mean),
        })
    }
}

/// `part` in percent of `whole`; `None` when `whole` is 0.
pub fn pct(part: f64, whole: f64) -> Option<f64> {
    (whole != 0.0).then(|| 100.0 * part / whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_stats_agree_with_stats_of_the_same_values() {
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let mut r = RunningStats::default();
        v.iter().for_each(|&x| r.push(x));
        let (a, b) = (r.finish().unwrap(), Stats::of(&v).unwrap());
        assert_eq!((a.count, a.min, a.max), (b.count, b.min, b.max));
        assert!((a.mean - b.mean).abs() < 1e-12 && (a.stddev - b.stddev).abs() < 1e-12);
        assert_eq!(RunningStats::default().finish(), None);
        let (mut left, mut right) = (RunningStats::default(), RunningStats::default());
        v[..3].iter().for_each(|&x| left.push(x));
        v[3..].iter().for_each(|&x| right.push(x));
        left.merge(&right);
        let m = left.finish().unwrap();
        assert_eq!((m.count, m.min, m.max), (b.count, b.min, b.max));
        assert!((m.mean - b.mean).abs() < 1e-12 && (m.stddev - b.stddev).abs() < 1e-12);
    }

    #[test]
    fn stats_of_no_values_are_none() {
        assert_eq!(Stats::of(&[]), None);
    }

    #[test]
    fn one_value_has_no_spread() {
        let s = Stats::of(&[2.5]).unwrap();
        assert_eq!(
            (s.count, s.mean, s.stddev, s.min, s.max, s.spread_pct),
            (1, 2.5, 0.0, 2.5, 2.5, Some(0.0))
        );
    }

    #[test]
    fn stats_give_mean_min_max_and_spread() {
        let s = Stats::of(&[90.0, 100.0, 110.0]).unwrap();
        assert_eq!((s.count, s.mean, s.min, s.max), (3, 100.0, 90.0, 110.0));
        assert_eq!(
            (s.spread_pct, s.stddev, s.range()),
            (Some(20.0), 10.0, 20.0)
        );
        assert_eq!(Stats::of(&[0.0, 0.0]).unwrap().spread_pct, None);
    }

    #[test]
    fn the_standard_deviation_is_the_sample_one() {
        // Values 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, n − 1 = 7.
        let s = Stats::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.mean, 5.0);
        assert!(
            (s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12,
            "{}",
            s.stddev
        );
        assert_eq!((s.min, s.max), (2.0, 9.0));
    }

    #[test]
    fn the_json_names_are_the_fields() {
        let v = serde_json::to_value(Stats::of(&[1.0, 3.0]).unwrap()).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        let mut want = ["count", "mean", "stddev", "min", "max", "spread_pct"];
        want.sort();
        assert_eq!(keys, want);
        assert_eq!(v["count"], 2);
    }
}
