//! The largest value over a sliding window of time: a monotonic deque of (tick time, value),
//! so each push and each expiry is amortised O(1) and the deque never holds more entries than
//! ticks in the window. No state depends on who read it: every scraper sees every spike that
//! is younger than the window, however many scrapers there are and whenever they come.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct WindowMax {
    span: Duration,
    /// Values strictly decreasing from front to back; each with the tick that saw it.
    q: VecDeque<(Instant, u64)>,
}

impl WindowMax {
    pub fn new(span: Duration) -> WindowMax {
        WindowMax {
            span,
            q: VecDeque::new(),
        }
    }

    /// Adds the value of the tick at `at` (the largest seen since the previous tick).
    pub fn push(&mut self, at: Instant, value: u64) {
        while self.q.back().is_some_and(|&(_, v)| v <= value) {
            self.q.pop_back();
        }
        self.q.push_back((at, value));
        self.expire(at);
    }

    /// Drops the values older than the window as of `now`.
    pub fn expire(&mut self, now: Instant) {
        while self
            .q
            .front()
            .is_some_and(|&(at, _)| now.duration_since(at) > self.span)
        {
            self.q.pop_front();
        }
    }

    /// The largest value of the window; `None` when no tick of the window had a value.
    pub fn max(&self) -> Option<u64> {
        self.q.front().map(|&(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_spike_stays_for_the_whole_window_then_leaves() {
        let t0 = Instant::now();
        let mut w = WindowMax::new(ms(1000));
        w.push(t0, 10);
        w.push(t0 + ms(100), 300);
        w.push(t0 + ms(200), 10);
        // Every scraper during the next second sees the spike, whoever read before.
        for t in (200..=1100).step_by(100) {
            w.push(t0 + ms(t), 10);
            assert_eq!(w.max(), Some(300), "at {t} ms");
        }
        w.push(t0 + ms(1200), 10);
        assert_eq!(w.max(), Some(10));
    }

    #[test]
    fn the_deque_stays_small_under_a_falling_series_and_never_exceeds_the_ticks_in_the_window() {
        let t0 = Instant::now();
        let mut w = WindowMax::new(ms(1000));
        for i in 0..10_000u64 {
            w.push(t0 + ms(i * 10), 1_000_000 - i);
            assert!(w.len() <= 101, "{} entries at tick {i}", w.len());
        }
        assert_eq!(w.max(), Some(1_000_000 - 9_899));
        // A rising series keeps one entry.
        let mut w = WindowMax::new(ms(1000));
        for i in 0..1000u64 {
            w.push(t0 + ms(i * 10), i);
        }
        assert_eq!((w.len(), w.max()), (1, Some(999)));
    }

    #[test]
    fn the_max_equals_a_brute_force_max_over_random_series() {
        let t0 = Instant::now();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut w = WindowMax::new(ms(500));
        let mut all: Vec<(u64, u64)> = Vec::new();
        for i in 0..3000u64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let v = seed % 1000;
            let t = i * 37;
            w.push(t0 + ms(t), v);
            all.push((t, v));
            let want = all
                .iter()
                .filter(|&&(at, _)| t - at <= 500)
                .map(|&(_, v)| v)
                .max();
            assert_eq!(w.max(), want, "tick {i}");
        }
    }

    #[test]
    fn an_empty_window_has_no_max() {
        let t0 = Instant::now();
        let mut w = WindowMax::new(ms(100));
        assert_eq!(w.max(), None);
        w.push(t0, 5);
        w.expire(t0 + ms(101));
        assert!(w.is_empty());
    }
}
