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

/// `part` in percent of `whole`; `None` when `whole` is 0.
pub fn pct(part: f64, whole: f64) -> Option<f64> {
    (whole != 0.0).then(|| 100.0 * part / whole)
}

#[cfg(test)]
mod tests {
    use super::*;

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
