//! When ticks are due: an absolute schedule (start, start + interval, start + 2 × interval...),
//! so the samples never drift, and the count of ticks that could not be taken on time. `record`
//! (with its markers and restarts) and `export` (every target on one thread) both keep time
//! with it, so `missed_ticks` in a recording and `memmon_missed_ticks_total` count alike.
//!
//! A tick is missed when its deadline passed before the tick before it was done: it is not
//! taken late (a late sample would sit off the grid, and the next one would follow it closer
//! than the interval); the schedule goes on at the next deadline still ahead.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Schedule {
    interval: Duration,
    next: Instant,
    missed: u64,
}

impl Schedule {
    /// The first tick due at `start`, then one every `interval`.
    pub fn new(start: Instant, interval: Duration) -> Schedule {
        Schedule {
            interval,
            next: start,
            missed: 0,
        }
    }

    /// When the next tick is due.
    pub fn due(&self) -> Instant {
        self.next
    }

    /// Ticks missed so far.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// The tick due was taken and done at `now`: the next deadline is set, past the deadlines
    /// that `now` has passed, each counted as missed. Returns how many were missed now.
    pub fn taken(&mut self, now: Instant) -> u64 {
        self.next += self.interval;
        if now <= self.next {
            return 0;
        }
        let behind = ((now - self.next).as_nanos() / self.interval.as_nanos().max(1)) as u64 + 1;
        self.missed += behind;
        self.next += self.interval * behind as u32;
        behind
    }

    /// The next tick is due at once (`now`), and the schedule goes on from there (a restarted
    /// target's first sample).
    pub fn restart_at(&mut self, now: Instant) {
        self.next = now;
    }

    /// No deadline later than `limit` (the end of `--duration`: its last sample is taken there).
    pub fn cap(&mut self, limit: Instant) {
        self.next = self.next.min(limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_keep_absolute_deadlines_and_a_deadline_passed_is_missed_not_taken_late() {
        let t0 = Instant::now();
        let i = Duration::from_millis(100);
        let mut s = Schedule::new(t0, i);
        assert_eq!(s.due(), t0);
        // Done a little late: the next deadline is the next multiple, nothing missed.
        assert_eq!(s.taken(t0 + Duration::from_millis(3)), 0);
        assert_eq!(s.due(), t0 + i);
        assert_eq!(s.taken(t0 + Duration::from_millis(180)), 0);
        assert_eq!(s.due(), t0 + 2 * i);
        // Done just after the next deadline: that tick could not be taken on time.
        assert_eq!(s.taken(t0 + Duration::from_millis(301)), 1);
        assert_eq!(s.due(), t0 + 4 * i);
        // Stalled 1 s (a stopped machine, a swap storm): the deadlines at 500..=1400 ms passed,
        // and the schedule goes on on its grid.
        assert_eq!(s.taken(t0 + Duration::from_millis(1450)), 10);
        assert_eq!(s.due(), t0 + 15 * i);
        assert_eq!(s.missed(), 11);
    }

    #[test]
    fn a_restart_is_sampled_at_once_and_the_duration_caps_the_last_deadline() {
        let t0 = Instant::now();
        let i = Duration::from_secs(1);
        let mut s = Schedule::new(t0, i);
        s.taken(t0);
        let back = t0 + Duration::from_millis(2500);
        s.restart_at(back);
        assert_eq!(s.due(), back);
        s.taken(back);
        assert_eq!(s.due(), back + i);
        s.cap(t0 + Duration::from_millis(3000));
        assert_eq!(s.due(), t0 + Duration::from_millis(3000));
    }
}
