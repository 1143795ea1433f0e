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
    kept: Vec<(u64, f64, Event)>,
    seen: u64,
    /// One event in `stride` is kept: those whose number is a multiple of it.
    stride: u64,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            kept: Vec::new(),
            seen: 0,
            stride: 1,
        }
    }
}

impl Events {
    /// Adds the next event, at `x` on the recording's timeline.
    pub fn push(&mut self, x: f64, event: &Event) {
        let n = self.seen;
        self.seen += 1;
        if n % self.stride != 0 {
            return;
        }
        self.kept.push((n, x, event.clone()));
        if self.kept.len() > MAX_EVENTS {
            self.stride *= 2;
            let stride = self.stride;
            self.kept.retain(|(n, ..)| n % stride == 0);
        }
    }

    /// The events kept, in order: their x and the event.
    pub fn iter(&self) -> impl Iterator<Item = (f64, &Event)> {
        self.kept.iter().map(|(_, x, e)| (*x, e))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_events_are_all_kept() {
        let mut ev = Events::default();
        for i in 0..MAX_EVENTS {
            ev.push(i as f64, &Event::Mark(format!("m{i}")));
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
            ev.push(i as f64, &Event::Mark(format!("m{i}")));
        }
        let kept: Vec<f64> = ev.iter().map(|(x, _)| x).collect();
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
