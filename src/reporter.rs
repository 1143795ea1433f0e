//! What the core has to say to the user, as data: one `Reporter` every part of the core is
//! handed (the recorder, the exporter, the bench, the marker sources, the demo), each message
//! with its level. The core prints nothing and never decides what `-q` or `--verbose` keep: the
//! terminal reporter of `commands/` does (`commands/stderr.rs`), and a caller that wants fewer
//! messages from a part it drives says so with [`Reporter::at_least`] (a bench keeps its
//! recorders' notes to itself).

use std::sync::Arc;

/// How much a message matters, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// A detail only `--verbose` shows.
    Detail,
    /// What is happening (where markers come from, a target found or restarted, a run's
    /// result): silenced by `-q`.
    Note,
    /// A number will be less exact than asked (a reset refused, a source unavailable): silenced
    /// by `-q`; shown with a `warning: ` prefix.
    Warning,
    /// Said even with `-q`: what memmon did to the user's files or processes (a repaired
    /// `--append`, processes killed in a stale cgroup).
    Notice,
    /// A failure memmon goes on after (the recording stopped while a command runs on): said
    /// even with `-q`, with an `error: ` prefix.
    Error,
}

/// What a reporter hands each message to.
type Hear = dyn Fn(Level, &str) + Send + Sync;

/// The messages a [`Reporter::collect`] keeps, in order.
pub type Heard = Arc<std::sync::Mutex<Vec<(Level, String)>>>;

/// Where the core's messages go. Cheap to clone; every clone reaches the same place.
#[derive(Clone)]
pub struct Reporter(Arc<Hear>);

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reporter(..)")
    }
}

impl Default for Reporter {
    fn default() -> Self {
        Reporter::silent()
    }
}

impl Reporter {
    /// A reporter that hands each message, with its level, to `f`.
    pub fn new(f: impl Fn(Level, &str) + Send + Sync + 'static) -> Reporter {
        Reporter(Arc::new(f))
    }

    /// A reporter that drops everything.
    pub fn silent() -> Reporter {
        Reporter::new(|_, _| {})
    }

    /// A reporter that keeps every message in memory, and the list it keeps them in (tests).
    pub fn collect() -> (Reporter, Heard) {
        let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
        let k = kept.clone();
        let r = Reporter::new(move |level, text| {
            k.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((level, text.to_string()))
        });
        (r, kept)
    }

    pub fn say(&self, level: Level, text: &str) {
        (self.0)(level, text)
    }

    pub fn detail(&self, text: &str) {
        self.say(Level::Detail, text)
    }

    pub fn note(&self, text: &str) {
        self.say(Level::Note, text)
    }

    pub fn warning(&self, text: &str) {
        self.say(Level::Warning, text)
    }

    pub fn notice(&self, text: &str) {
        self.say(Level::Notice, text)
    }

    pub fn error(&self, text: &str) {
        self.say(Level::Error, text)
    }

    /// This reporter for messages of `min` and above only; the others are dropped.
    pub fn at_least(&self, min: Level) -> Reporter {
        let inner = self.clone();
        Reporter::new(move |level, text| {
            if level >= min {
                inner.say(level, text)
            }
        })
    }

    /// This reporter with `prefix` before every message (`target cuzk: `).
    pub fn prefixed(&self, prefix: impl Into<String>) -> Reporter {
        let inner = self.clone();
        let prefix = prefix.into();
        Reporter::new(move |level, text| inner.say(level, &format!("{prefix}{text}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filtered_and_prefixed_reporter_reaches_the_same_place() {
        let (r, kept) = Reporter::collect();
        let quiet = r.at_least(Level::Notice).prefixed("target d: ");
        quiet.note("found");
        quiet.warning("refused");
        quiet.notice("cut a line");
        r.note("said");
        let kept = kept.lock().unwrap().clone();
        assert_eq!(
            kept,
            vec![
                (Level::Notice, "target d: cut a line".to_string()),
                (Level::Note, "said".to_string())
            ]
        );
    }
}
