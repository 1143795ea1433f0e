//! Peak-preserving decimation: a series of any length reduced to at most four points per pixel
//! column (its first, last, lowest and highest), so a long recording draws fast and no spike is lost.
//! [`Stream`] does the same while a file is read, before its length is known, in memory that
//! does not grow with it. A series can be cut ([`Stream::cut`]: an `--append`ed recording's
//! next session begins), and the points then come in segments ([`Points::cuts`]) that are drawn
//! apart, so the time between sessions shows as a gap, not as a line.

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

/// The points kept of a series, in order, and where each segment after the first begins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Points {
    pub xs: Vec<f64>,
    pub ys: Vec<u64>,
    /// Indices into `xs` where a new segment begins (none is 0, all are increasing): a line
    /// is drawn through the points of each segment, not from one segment to the next.
    pub cuts: Vec<usize>,
}

impl Points {
    /// The highest value (0 when none).
    pub fn max(&self) -> u64 {
        self.ys.iter().copied().max().unwrap_or(0)
    }

    /// The segments, each as the range of its indices.
    pub fn segments(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let starts = std::iter::once(0).chain(self.cuts.iter().copied());
        let ends = self
            .cuts
            .iter()
            .copied()
            .chain(std::iter::once(self.xs.len()));
        starts.zip(ends).filter(|(a, b)| a < b).map(|(a, b)| a..b)
    }

    /// The points to draw over `width` pixel columns of `[x0, x1]` ([`keep_indices`]), with
    /// the cuts moved to the kept points: a segment begins at its first kept point.
    pub fn keep(&self, x0: f64, x1: f64, width: usize) -> Points {
        let keep = keep_indices(&self.xs, &self.ys, x0, x1, width);
        let mut cuts = Vec::with_capacity(self.cuts.len());
        for &c in &self.cuts {
            let at = keep.partition_point(|&i| i < c);
            if at > 0 && at < keep.len() && cuts.last() != Some(&at) {
                cuts.push(at);
            }
        }
        Points {
            xs: keep.iter().map(|&i| self.xs[i]).collect(),
            ys: keep.iter().map(|&i| self.ys[i]).collect(),
            cuts,
        }
    }
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

/// Time buckets a [`Stream`] keeps: at most four points each, so at most 65,536 points (24
/// bytes each: 1.5 MiB) per series, whatever its length.
pub const STREAM_BUCKETS: usize = 16384;

/// Cuts a [`Stream`] remembers; later ones are not drawn apart (an `--append`ed recording
/// with more sessions than this is joined after its 4096th).
pub const MAX_CUTS: usize = 4096;

/// One point of a series: its index (the sample's place in the file), x and value.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    i: u64,
    x: f64,
    y: u64,
}

/// The first, lowest, highest and last points that fell in one bucket (the lowest and highest
/// are the first of their value).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    first: Point,
    lo: Point,
    hi: Point,
    last: Point,
}

impl Bucket {
    fn new(p: Point) -> Bucket {
        Bucket {
            first: p,
            lo: p,
            hi: p,
            last: p,
        }
    }

    fn add(&mut self, p: Point) {
        if p.y < self.lo.y {
            self.lo = p;
        }
        if p.y > self.hi.y {
            self.hi = p;
        }
        self.last = p;
    }

    /// The bucket of both `a`'s points and `b`'s, `a`'s coming first.
    fn merge(a: Bucket, b: Bucket) -> Bucket {
        Bucket {
            first: a.first,
            lo: if b.lo.y < a.lo.y { b.lo } else { a.lo },
            hi: if b.hi.y > a.hi.y { b.hi } else { a.hi },
            last: b.last,
        }
    }
}

/// A series decimated while it is read: points in non-decreasing x go into time buckets of
/// equal width from the first point's x, each keeping its first, lowest, highest and last
/// point. When a point falls past the last of [`STREAM_BUCKETS`] buckets, neighbouring buckets
/// are merged in pairs and the width doubles; so at the end the buckets are at most
/// `2 * span / STREAM_BUCKETS` wide, and the memory held is at most `STREAM_BUCKETS` buckets
/// whatever the series' length. Every bucket's extremes are kept, and with them the series'
/// first and last points and its highest and lowest (the first of each value).
/// [`keep_indices`] then reduces the points to the pixel columns of a drawing.
#[derive(Debug, Clone)]
pub struct Stream {
    buckets: Vec<Option<Bucket>>,
    origin: f64,
    /// A power of two (so doubling it keeps each point's bucket the half of its old one).
    width: f64,
    seen: u64,
    /// The index of each point that begins a new segment.
    cuts: Vec<u64>,
}

impl Default for Stream {
    fn default() -> Self {
        Stream::new()
    }
}

impl Stream {
    pub fn new() -> Stream {
        Stream {
            buckets: Vec::new(),
            origin: 0.0,
            // 2^-30 s, about a nanosecond: finer than any recording's interval.
            width: 1.0 / (1u64 << 30) as f64,
            seen: 0,
            cuts: Vec::new(),
        }
    }

    /// The next point begins a new segment: it is not joined to the one before.
    pub fn cut(&mut self) {
        if self.seen > 0 && self.cuts.last() != Some(&self.seen) && self.cuts.len() < MAX_CUTS {
            self.cuts.push(self.seen);
        }
    }

    /// Adds the next point. Points whose x goes back go to the bucket of their x (or the first).
    pub fn push(&mut self, x: f64, y: u64) {
        if self.seen == 0 {
            self.origin = x;
        }
        let p = Point { i: self.seen, x, y };
        self.seen += 1;
        let mut b = self.bucket_of(x);
        while b >= STREAM_BUCKETS {
            self.halve();
            b = self.bucket_of(x);
        }
        if b >= self.buckets.len() {
            self.buckets.resize(b + 1, None);
        }
        match &mut self.buckets[b] {
            Some(bucket) => bucket.add(p),
            slot => *slot = Some(Bucket::new(p)),
        }
    }

    /// The bucket of `x` (as a float: it may be far past the last).
    fn bucket_of(&self, x: f64) -> usize {
        let b = ((x - self.origin) / self.width).floor();
        if b.is_nan() || b < 0.0 {
            0
        } else if b >= usize::MAX as f64 {
            usize::MAX
        } else {
            b as usize
        }
    }

    /// Doubles the width: buckets 2k and 2k+1 become bucket k.
    fn halve(&mut self) {
        let n = self.buckets.len().div_ceil(2);
        for k in 0..n {
            let a = self.buckets[2 * k];
            let b = self.buckets.get(2 * k + 1).copied().flatten();
            self.buckets[k] = match (a, b) {
                (Some(a), Some(b)) => Some(Bucket::merge(a, b)),
                (a, b) => a.or(b),
            };
        }
        self.buckets.truncate(n);
        self.width *= 2.0;
    }

    /// How many points were pushed.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The width of a bucket now, in x.
    pub fn bucket_width(&self) -> f64 {
        self.width
    }

    /// The highest value pushed (0 when none).
    pub fn max(&self) -> u64 {
        self.buckets
            .iter()
            .flatten()
            .map(|b| b.hi.y)
            .max()
            .unwrap_or(0)
    }

    /// The points kept, in the order they were pushed, and where each segment begins: a
    /// bucket that holds the end of one segment and the start of the next is split there.
    pub fn points(&self) -> Points {
        let mut out = Points {
            xs: Vec::with_capacity(4 * self.buckets.len()),
            ys: Vec::with_capacity(4 * self.buckets.len()),
            cuts: Vec::new(),
        };
        let mut next_cut = self.cuts.iter().peekable();
        for b in self.buckets.iter().flatten() {
            let mut four = [b.first, b.lo, b.hi, b.last];
            four.sort_by_key(|p| p.i);
            let mut prev = None;
            for p in four {
                if prev == Some(p.i) {
                    continue;
                }
                let mut cut = false;
                while next_cut.next_if(|&&c| c <= p.i).is_some() {
                    cut = true;
                }
                if cut && !out.xs.is_empty() {
                    out.cuts.push(out.xs.len());
                }
                out.xs.push(p.x);
                out.ys.push(p.y);
                prev = Some(p.i);
            }
        }
        out
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

    #[test]
    fn a_streamed_series_keeps_its_spike_in_bounded_memory() {
        let mut st = Stream::new();
        let n = 1_000_000u64;
        for i in 0..n {
            let y = if i == 765_432 { 200 << 30 } else { 45 << 30 };
            st.push(i as f64 * 0.001, y);
        }
        assert_eq!(st.seen(), n);
        assert!(st.buckets.len() <= STREAM_BUCKETS);
        let Points { xs, ys, cuts } = st.points();
        assert!(cuts.is_empty());
        assert!(xs.len() <= 4 * STREAM_BUCKETS, "{}", xs.len());
        assert_eq!(st.max(), 200 << 30);
        let at = ys.iter().position(|&y| y == 200 << 30).unwrap();
        assert_eq!(xs[at], 765_432.0 * 0.001);
        assert_eq!(xs[0], 0.0);
        assert_eq!(*xs.last().unwrap(), (n - 1) as f64 * 0.001);
        // The buckets are at most 2 * span / STREAM_BUCKETS wide.
        assert!(st.bucket_width() <= 2.0 * 1000.0 / STREAM_BUCKETS as f64);
    }

    #[test]
    fn a_cut_series_comes_in_segments_split_where_the_cut_was() {
        // Two sessions of 200,000 points each, an hour apart: buckets merge, and the one
        // holding the end of the first and the start of the second is split between them.
        let mut st = Stream::new();
        for i in 0..200_000u64 {
            st.push(i as f64 * 0.01, 10 + i % 7);
        }
        st.cut();
        for i in 0..200_000u64 {
            st.push(5600.0 + i as f64 * 0.01, 20 + i % 5);
        }
        let p = st.points();
        assert_eq!(p.cuts.len(), 1);
        let c = p.cuts[0];
        assert!(
            p.xs[..c].iter().all(|&x| x < 2000.0),
            "first segment: first session"
        );
        assert!(
            p.xs[c..].iter().all(|&x| x >= 5600.0),
            "second segment: second session"
        );
        assert_eq!(p.xs[c], 5600.0);
        let segs: Vec<_> = p.segments().collect();
        assert_eq!(segs, vec![0..c, c..p.xs.len()]);

        // Reduced to pixel columns, the cut moves with the points.
        let k = p.keep(0.0, 7600.0, 500);
        assert_eq!(k.cuts.len(), 1);
        let c = k.cuts[0];
        assert!(
            k.xs[c - 1] < 2000.0 && k.xs[c] >= 5600.0,
            "{:?}",
            &k.xs[c - 1..=c]
        );
    }

    #[test]
    fn cuts_before_any_point_or_repeated_make_no_empty_segment() {
        let mut st = Stream::new();
        st.cut();
        st.push(0.0, 1);
        st.cut();
        st.cut();
        st.push(1.0, 2);
        let p = st.points();
        assert_eq!(p.cuts, vec![1]);
        assert_eq!(p.segments().count(), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the series, every bucket of the stream's final width keeps its lowest and
        /// highest value, its first and last point, and the points come in their order.
        #[test]
        fn a_stream_keeps_every_buckets_extremes(
            steps in prop::collection::vec((0.0f64..50.0, 0u64..1_000_000), 1..5000),
            scale in prop::sample::select(vec![1e-6, 1e-3, 1.0, 1e4]),
        ) {
            let mut st = Stream::new();
            let mut x = 0.0;
            let mut pts = Vec::with_capacity(steps.len());
            for (dx, y) in &steps {
                x += dx * scale;
                st.push(x, *y);
                pts.push((x, *y));
            }
            let Points { xs, ys, .. } = st.points();
            prop_assert!(xs.len() <= 4 * STREAM_BUCKETS);
            prop_assert!(xs.windows(2).all(|w| w[0] <= w[1]), "in order");
            prop_assert_eq!((xs[0], ys[0]), pts[0]);
            prop_assert_eq!((*xs.last().unwrap(), *ys.last().unwrap()), *pts.last().unwrap());
            let bucket = |x: f64| ((x - pts[0].0) / st.bucket_width()).floor() as usize;
            let mut want = std::collections::BTreeMap::new();
            for &(x, y) in &pts {
                let e = want.entry(bucket(x)).or_insert((y, y));
                e.0 = e.0.min(y);
                e.1 = e.1.max(y);
            }
            let all: std::collections::HashSet<(u64, u64)> =
                pts.iter().map(|&(x, y)| (x.to_bits(), y)).collect();
            let mut got = std::collections::BTreeMap::new();
            for (&x, &y) in xs.iter().zip(&ys) {
                prop_assert!(all.contains(&(x.to_bits(), y)), "a kept point is a point of the series");
                let e = got.entry(bucket(x)).or_insert((y, y));
                e.0 = e.0.min(y);
                e.1 = e.1.max(y);
            }
            prop_assert_eq!(got, want);
        }
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
