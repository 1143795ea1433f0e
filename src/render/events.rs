//! The events a plot or a report draws (markers, restarts, benchmark runs): at most
//! [`MAX_EVENTS`] per recording, spread evenly over it when it holds more, with the count of
//! those left out for the caller to say. With labels cut when read
//! (`model::sample::MAX_LABEL_CHARS`), what is kept stays bounded whatever the file holds.

use crate::model::sample::Event;

/// Events kept per recording.
pub const MAX_EVENTS: usize = 1000;

/// Events kept while a recording is read: every one while there are at most [`MAX_EVENTS`];
/// past that, every second one, then every fourth..., so those kept (between half of
/// `MAX_EVENTS` and all of it) are spread over the whole recording, not its beginning.
#[derive(Debug, Clone)]
pub struct Events {
    /// Each kept event's number, x, the event and its session (from 1).
    kept: Vec<(u64, f64, Event, u32)>,
    seen: u64,
    /// One event in `stride` is kept: those whose number is a multiple of it.
    stride: u64,
    /// The session of the first bench run event, and whether another session had one too.
    run_sessions: Option<(u32, bool)>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            kept: Vec::new(),
            seen: 0,
            stride: 1,
            run_sessions: None,
        }
    }
}

impl Events {
    /// Adds the next event, at `x` on the recording's timeline, in `session` (from 1).
    pub fn push(&mut self, x: f64, event: &Event, session: u32) {
        // The clients of a bench with runs in flight together start and end by the hundred:
        // drawn as lines they would hide the memory; the window's start and end are drawn.
        if matches!(event, Event::ClientStart(_) | Event::ClientEnd(_)) {
            return;
        }
        if matches!(event, Event::RunStart(_) | Event::RunEnd(_)) {
            self.run_sessions = match self.run_sessions {
                None => Some((session, false)),
                Some((first, several)) => Some((first, several || first != session)),
            };
        }
        let n = self.seen;
        self.seen += 1;
        if n % self.stride != 0 {
            return;
        }
        self.kept.push((n, x, event.clone(), session));
        if self.kept.len() > MAX_EVENTS {
            self.stride *= 2;
            let stride = self.stride;
            self.kept.retain(|(n, ..)| n % stride == 0);
        }
    }

    /// The events kept, in order: their x, the event, and, for a bench run's event in a
    /// recording whose runs come from several sessions, its session (the runs' labels say it:
    /// `analysis::phases::run_label`).
    pub fn iter(&self) -> impl Iterator<Item = (f64, &Event, Option<u32>)> {
        let several = self.run_sessions.is_some_and(|(_, s)| s);
        self.kept.iter().map(move |(_, x, e, k)| {
            let run = matches!(e, Event::RunStart(_) | Event::RunEnd(_));
            (*x, e, (several && run).then_some(*k))
        })
    }

    /// An event as a plot or a report labels it: a bench run's with its session where the
    /// recording's runs come from several (`s2 run-start:1`), else as the file writes it.
    pub fn text(event: &Event, session: Option<u32>) -> String {
        match session {
            Some(k) => format!("s{k} {event}"),
            None => event.to_string(),
        }
    }

    /// How many events the recording holds (what was pushed).
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// One event in how many is kept (1 while all are).
    pub fn stride(&self) -> u64 {
        self.stride
    }

    /// How many were left out.
    pub fn dropped(&self) -> u64 {
        self.seen - self.kept.len() as u64
    }

    /// A sentence for the user when some were left out: `run.csv: 1000 of its 300000 events
    /// are drawn ...`; `None` when every event is drawn.
    pub fn note(&self, name: &str) -> Option<String> {
        (self.dropped() > 0).then(|| {
            format!(
                "{name}: {} of its {} events are drawn (one in {}, spread over the recording; at most {MAX_EVENTS} per recording)",
                self.kept.len(),
                self.seen,
                self.stride,
            )
        })
    }
}

/// The most changes of the count of runs in flight kept per recording (two per client).
pub const MAX_IN_FLIGHT_STEPS: usize = 20_000;

/// How many clients of a bench's window were in flight over time (`client-start:N`,
/// `client-end:N` rows), as steps: the count after each change, at its x. Past
/// [`MAX_IN_FLIGHT_STEPS`] changes no more are kept (`cut`).
#[derive(Debug, Clone, Default)]
pub struct InFlight {
    now: u32,
    most: u32,
    steps: Vec<(f64, u32)>,
    /// True once changes were left out.
    pub cut: bool,
}

impl InFlight {
    /// Counts `event` at `x` if it is a client's start or end; a new session starts from none.
    pub fn push(&mut self, x: f64, event: &Event) {
        self.now = match event {
            Event::ClientStart(_) => self.now + 1,
            Event::ClientEnd(_) => self.now.saturating_sub(1),
            Event::Start => 0,
            _ => return,
        };
        self.most = self.most.max(self.now);
        if self.steps.len() < MAX_IN_FLIGHT_STEPS {
            self.steps.push((x, self.now));
        } else {
            self.cut = true;
        }
    }

    /// The most in flight at once; 0 when the recording has no client rows.
    pub fn most(&self) -> u32 {
        self.most
    }

    /// The count after each change, at its x.
    pub fn steps(&self) -> &[(f64, u32)] {
        &self.steps
    }

    /// The step line's corners: each change drawn as a rise or fall at its x.
    pub fn corners(&self) -> Vec<(f64, f64)> {
        let mut out = Vec::with_capacity(self.steps.len() * 2);
        let mut last = 0.0;
        for &(x, n) in &self.steps {
            out.push((x, last));
            last = f64::from(n);
            out.push((x, last));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_in_flight_are_counted_as_steps() {
        let mut f = InFlight::default();
        f.push(1.0, &Event::Mark("x".into()));
        f.push(1.0, &Event::ClientStart(1));
        f.push(1.5, &Event::ClientStart(2));
        f.push(2.0, &Event::ClientEnd(1));
        assert_eq!(f.most(), 2);
        assert_eq!(
            f.corners(),
            [
                (1.0, 0.0),
                (1.0, 1.0),
                (1.5, 1.0),
                (1.5, 2.0),
                (2.0, 2.0),
                (2.0, 1.0)
            ]
        );
    }

    #[test]
    fn run_events_name_their_session_only_when_runs_come_from_several() {
        let mut one = Events::default();
        one.push(0.0, &Event::RunStart(1), 1);
        one.push(1.0, &Event::Mark("m".into()), 2);
        let got: Vec<_> = one.iter().map(|(_, e, k)| Events::text(e, k)).collect();
        assert_eq!(got, ["run-start:1", "mark:m"]);
        let mut two = Events::default();
        two.push(0.0, &Event::RunStart(1), 1);
        two.push(1.0, &Event::RunEnd(1), 1);
        two.push(2.0, &Event::Mark("m".into()), 2);
        two.push(3.0, &Event::RunStart(1), 2);
        let got: Vec<_> = two.iter().map(|(_, e, k)| Events::text(e, k)).collect();
        assert_eq!(
            got,
            ["s1 run-start:1", "s1 run-end:1", "mark:m", "s2 run-start:1"]
        );
    }

    #[test]
    fn few_events_are_all_kept() {
        let mut ev = Events::default();
        for i in 0..MAX_EVENTS {
            ev.push(i as f64, &Event::Mark(format!("m{i}")), 1);
        }
        assert_eq!(ev.iter().count(), MAX_EVENTS);
        assert_eq!(ev.dropped(), 0);
        assert_eq!(ev.note("r.csv"), None);
    }

    #[test]
    fn many_events_are_thinned_evenly_over_the_recording_and_counted() {
        let mut ev = Events::default();
        let n = 300_000u64;
        for i in 0..n {
            ev.push(i as f64, &Event::Mark(format!("m{i}")), 1);
        }
        let kept: Vec<f64> = ev.iter().map(|(x, ..)| x).collect();
        assert!(kept.len() <= MAX_EVENTS && kept.len() >= MAX_EVENTS / 2);
        assert_eq!(ev.dropped(), n - kept.len() as u64);
        // Evenly spread: the last one kept is near the end, the gaps all equal.
        assert!(*kept.last().unwrap() > 0.99 * n as f64);
        let gap = kept[1] - kept[0];
        assert!(kept.windows(2).all(|w| w[1] - w[0] == gap));
        let note = ev.note("r.csv").unwrap();
        assert!(
            note.starts_with(&format!(
                "r.csv: {} of its 300000 events are drawn",
                kept.len()
            )),
            "{note}"
        );
    }
}
