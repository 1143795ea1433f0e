//! Peak-preserving decimation: a series of any length reduced to at most four points per pixel
//! column (its first, last, lowest and highest), so a long recording draws fast and no spike is lost.

/// The indices of the points to draw when `xs` (with values `ys`) spans `width` pixel columns
/// over `[x0, x1]`. For every run of consecutive points that fall in one pixel column it keeps
/// the first, the last, the lowest and the highest, in their original order. So every column's
/// minimum and maximum are kept, and with them the global maximum and minimum, and the first
/// and last points of the whole series. For `xs` in increasing order a column is one run and
/// at most `4 * width` indices come back. Points outside `[x0, x1]` go to the edge columns.
pub fn keep_indices(xs: &[f64], ys: &[u64], x0: f64, x1: f64, width: usize) -> Vec<usize> {
    assert_eq!(xs.len(), ys.len(), "one value per x");
    let n = xs.len();
    let width = width.max(1);
    if n <= 4 * width {
        return (0..n).collect();
    }
    let columns = Columns::new(x0, x1, width);
    let column = |x: f64| columns.of(x);

    let mut keep = Vec::with_capacity(4 * width + 4);
    let mut run_col = column(xs[0]);
    let mut first = 0;
    let (mut lo, mut hi) = (0, 0);
    for i in 1..n {
        let c = column(xs[i]);
        if c != run_col {
            push_run(&mut keep, first, lo, hi, i - 1);
            run_col = c;
            first = i;
            lo = i;
            hi = i;
            continue;
        }
        if ys[i] < ys[lo] {
            lo = i;
        }
        if ys[i] > ys[hi] {
            hi = i;
        }
    }
    push_run(&mut keep, first, lo, hi, n - 1);
    keep
}

/// Which of `width` pixel columns over `[x0, x1]` an x falls in.
#[derive(Debug, Clone, Copy)]
pub struct Columns {
    x0: f64,
    scale: f64,
    width: usize,
}

impl Columns {
    pub fn new(x0: f64, x1: f64, width: usize) -> Columns {
        let width = width.max(1);
        let span = x1 - x0;
        let scale = if span > 0.0 { width as f64 / span } else { 0.0 };
        Columns { x0, scale, width }
    }

    /// The column of `x`, from 0 to `width - 1`; points outside the range go to the edges.
    pub fn of(&self, x: f64) -> usize {
        let c = (x - self.x0) * self.scale;
        if c.is_nan() || c < 0.0 {
            0
        } else {
            (c as usize).min(self.width - 1)
        }
    }
}

/// Appends one run's first, extremes and last, in index order, without repeats.
fn push_run(keep: &mut Vec<usize>, first: usize, lo: usize, hi: usize, last: usize) {
    let mut four = [first, lo.min(hi), lo.max(hi), last];
    four.sort_unstable();
    for i in four {
        if keep.last() != Some(&i) {
            keep.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_short_series_is_kept_whole() {
        let xs = [0.0, 1.0, 2.0];
        let ys = [5, 1, 9];
        assert_eq!(keep_indices(&xs, &ys, 0.0, 2.0, 10), vec![0, 1, 2]);
    }

    #[test]
    fn a_one_sample_spike_in_a_million_points_survives() {
        let n = 1_000_000;
        let xs: Vec<f64> = (0..n).map(|i| i as f64 * 0.1).collect();
        let mut ys = vec![45u64 << 30; n];
        ys[654_321] = 200 << 30;
        let keep = keep_indices(&xs, &ys, 0.0, xs[n - 1], 1000);
        assert!(keep.len() <= 4000);
        assert!(keep.contains(&654_321));
        assert_eq!(keep[0], 0);
        assert_eq!(*keep.last().unwrap(), n - 1);
    }

    #[test]
    fn equal_times_fall_in_one_column() {
        let xs = vec![3.0; 100];
        let ys: Vec<u64> = (0..100).map(|i| (i * 37) % 101).collect();
        let keep = keep_indices(&xs, &ys, 3.0, 3.0, 5);
        let max_i = (0..100).max_by_key(|&i| ys[i]).unwrap();
        let min_i = (0..100).min_by_key(|&i| ys[i]).unwrap();
        assert!(keep.contains(&max_i) && keep.contains(&min_i));
        assert!(keep.len() <= 4);
    }

    proptest! {
        #[test]
        fn every_pixel_columns_extremes_and_the_global_max_are_kept(
            steps in prop::collection::vec((0.0f64..3.0, 0u64..1_000_000), 1..3000),
            width in 1usize..400,
        ) {
            let mut x = 0.0;
            let mut xs = Vec::with_capacity(steps.len());
            let mut ys = Vec::with_capacity(steps.len());
            for (dx, y) in &steps {
                x += dx;
                xs.push(x);
                ys.push(*y);
            }
            let (x0, x1) = (xs[0], *xs.last().unwrap());
            let keep = keep_indices(&xs, &ys, x0, x1, width);

            prop_assert!(keep.windows(2).all(|w| w[0] < w[1]), "indices in order, no repeats");
            prop_assert!(keep.len() <= 4 * width || keep.len() == xs.len());
            prop_assert_eq!(keep[0], 0);
            prop_assert_eq!(*keep.last().unwrap(), xs.len() - 1);
            let global_max = *ys.iter().max().unwrap();
            prop_assert!(keep.iter().any(|&i| ys[i] == global_max), "global max kept");

            if x1 > x0 {
                let columns = Columns::new(x0, x1, width);
                let mut col_min = vec![u64::MAX; width];
                let mut col_max = vec![0u64; width];
                for (x, y) in xs.iter().zip(&ys) {
                    let c = columns.of(*x);
                    col_min[c] = col_min[c].min(*y);
                    col_max[c] = col_max[c].max(*y);
                }
                let mut kept_min = vec![u64::MAX; width];
                let mut kept_max = vec![0u64; width];
                for &i in &keep {
                    let c = columns.of(xs[i]);
                    kept_min[c] = kept_min[c].min(ys[i]);
                    kept_max[c] = kept_max[c].max(ys[i]);
                }
                prop_assert_eq!(kept_min, col_min, "every column's minimum kept");
                prop_assert_eq!(kept_max, col_max, "every column's maximum kept");
            }
        }
    }
}
