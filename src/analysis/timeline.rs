//! One recording's time axis. A recording made with `--append` holds several *sessions*, each
//! opened by a `start` event and each with its own monotonic clock (`elapsed_s` restarts near
//! 0). Every reader that needs time across sessions — the summary's duration, the time above a
//! level, the plot's x axis, the report's chart — goes through [`Timeline`], so they agree:
//!
//! - A session begins at a sample with a `start` event, except the recording's first sample
//!   (which opens the first session whatever its event).
//! - The x of a sample is seconds since the recording's first sample: within a session, its
//!   `elapsed_s` moved by the session's offset; a later session starts after the wall-clock
//!   gap from the first sample (`unix_ms`), or, when the wall clock is unknown (0) or earlier
//!   than the previous session's end, right where that one ended. x never goes back.
//! - The time recorded is the sum of each session's own span (first to last `elapsed_s`): the
//!   gaps between sessions are not in it.

use crate::model::sample::{Event, Sample};

/// Where a sample lies on its recording's time axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Place {
    /// Seconds since the recording's first sample, continuous across sessions.
    pub x: f64,
    /// The sample opens a session after the first (it ends the one before).
    pub new_session: bool,
    /// The session the sample is in, from 1.
    pub session: u32,
}

/// When a row was, by each clock a reader names it by: the wall clock, its session's own
/// (`elapsed_s`), and the recording's time axis (the x `plot` and `report` draw it at). In a
/// recording of one session the last two differ only by the first row's `elapsed_s`; in an
/// `--append`ed one, `elapsed_s` alone does not say which session, nor where the plot puts it.
/// `render/timeline.rs` says it in words.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct When {
    /// The row's wall clock, ms since 1970 (0: a file without one).
    pub unix_ms: u64,
    pub elapsed_s: f64,
    pub session: u32,
    /// Seconds on the recording's time axis ([`Place::x`]).
    pub x_s: f64,
}

impl When {
    pub fn of(s: &Sample, place: Place) -> When {
        When {
            unix_ms: s.unix_ms,
            elapsed_s: s.elapsed_s,
            session: place.session,
            x_s: place.x,
        }
    }
}

/// A recording's time axis, built sample by sample (module docs).
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    samples: u64,
    first_unix_ms: u64,
    offset: f64,
    last_x: f64,
    sessions: u32,
    /// The sum of the spans of the sessions before the current one.
    done_s: f64,
    session_first_s: f64,
    session_last_s: f64,
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline::default()
    }

    /// Places the recording's next sample.
    pub fn push(&mut self, s: &Sample) -> Place {
        let first = self.samples == 0;
        let new_session = !first && matches!(s.event, Some(Event::Start));
        if first {
            self.first_unix_ms = s.unix_ms;
            self.offset = -s.elapsed_s;
        } else if new_session {
            let wall = (self.first_unix_ms > 0 && s.unix_ms > 0)
                .then(|| s.unix_ms.saturating_sub(self.first_unix_ms) as f64 / 1e3);
            let start = wall.map_or(self.last_x, |w| w.max(self.last_x));
            self.offset = start - s.elapsed_s;
            self.done_s += self.session_last_s - self.session_first_s;
        }
        if first || new_session {
            self.sessions += 1;
            self.session_first_s = s.elapsed_s;
        }
        self.session_last_s = s.elapsed_s;
        self.samples += 1;
        let x = (s.elapsed_s + self.offset).max(self.last_x);
        self.last_x = x;
        Place {
            x,
            new_session,
            session: self.sessions,
        }
    }

    /// The x of the last sample placed (0 before any).
    pub fn last_x(&self) -> f64 {
        self.last_x
    }

    /// How many sessions the samples so far hold.
    pub fn sessions(&self) -> u32 {
        self.sessions
    }

    /// Seconds recorded: the sum of the sessions' spans, the gaps between them left out.
    pub fn recorded_s(&self) -> f64 {
        self.done_s + (self.session_last_s - self.session_first_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(unix_ms: u64, elapsed_s: f64, event: Option<Event>) -> Sample {
        Sample {
            unix_ms,
            elapsed_s,
            event,
            ..Sample::default()
        }
    }

    fn xs(t: &mut Timeline, samples: &[Sample]) -> Vec<f64> {
        samples.iter().map(|s| t.push(s).x).collect()
    }

    #[test]
    fn an_appended_session_continues_after_the_wall_clock_gap() {
        let mut t = Timeline::new();
        let got = xs(
            &mut t,
            &[
                sample(10_000, 0.5, Some(Event::Start)),
                sample(11_000, 1.5, None),
                // A second session 60 s later restarts its monotonic clock at 0.
                sample(70_000, 0.0, Some(Event::Start)),
                sample(71_000, 1.0, None),
            ],
        );
        assert_eq!(got, [0.0, 1.0, 60.0, 61.0]);
        assert_eq!(t.sessions(), 2);
        // 1 s in each session; the 59 s between them were not recorded.
        assert_eq!(t.recorded_s(), 2.0);
        assert_eq!(t.last_x(), 61.0);
    }

    #[test]
    fn without_a_wall_clock_a_session_follows_the_one_before() {
        let mut t = Timeline::new();
        let got = xs(
            &mut t,
            &[
                sample(0, 0.0, Some(Event::Start)),
                sample(0, 5.0, None),
                sample(0, 0.0, Some(Event::Start)),
                sample(0, 1.0, Some(Event::Mark("x".into()))),
            ],
        );
        assert_eq!(got, [0.0, 5.0, 5.0, 6.0]);
        assert_eq!(t.recorded_s(), 6.0);
    }

    #[test]
    fn a_wall_clock_that_went_back_does_not_overlap_the_sessions() {
        let mut t = Timeline::new();
        let got = xs(
            &mut t,
            &[
                sample(100_000, 0.0, None),
                sample(110_000, 10.0, None),
                sample(105_000, 0.0, Some(Event::Start)),
                sample(106_000, 1.0, None),
            ],
        );
        assert_eq!(got, [0.0, 10.0, 10.0, 11.0]);
    }

    #[test]
    fn only_a_start_after_the_first_sample_opens_a_session() {
        let mut t = Timeline::new();
        assert!(!t.push(&sample(1, 0.0, Some(Event::Start))).new_session);
        assert!(
            !t.push(&sample(2, 1.0, Some(Event::RunStart(1))))
                .new_session
        );
        assert!(t.push(&sample(3, 0.0, Some(Event::Start))).new_session);
        assert_eq!(t.sessions(), 2);
    }

    #[test]
    fn a_row_of_a_later_session_is_named_by_its_session_and_its_place_on_the_axis() {
        let mut t = Timeline::new();
        t.push(&sample(1_000, 0.5, None));
        let row = sample(5_000, 0.2, Some(Event::Start));
        let at = When::of(&row, t.push(&row));
        assert_eq!((at.session, at.x_s), (2, 4.0));
        assert_eq!(
            at.offset(2),
            "+200 ms into session 2; 4.00 s on the plot's time axis"
        );
        // One session: its own clock says it all.
        assert_eq!(at.offset(1), "+200 ms");
        let no_clock = When { unix_ms: 0, ..at };
        assert_eq!(
            no_clock.describe(2),
            "+200 ms into session 2; 4.00 s on the plot's time axis (elapsed)"
        );
        assert_eq!(no_clock.describe(1), "+200 ms (elapsed)");
    }
}
