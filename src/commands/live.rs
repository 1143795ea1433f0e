//! The live status line of `record`: elapsed time, current RSS, the sampled peak so far (the
//! largest RSS read; the summary at the end gives the peak), samples and missed ticks, redrawn
//! in place on stderr at most 4 times a second — only when stderr is a
//! terminal, `--quiet` is off, and the data is not going to that same terminal (stdout, no
//! `-o`: the line would be drawn into the rows). Nothing of it reaches the recording.

use memmon::units::{count, fmt_bytes, fmt_seconds};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

const REFRESH: Duration = Duration::from_millis(250);

pub struct LiveLine {
    enabled: bool,
    last_draw: Option<Instant>,
    peak: u64,
}

impl LiveLine {
    /// `data_on_stdout`: the recording goes to stdout (no `-o`).
    pub fn new(quiet: bool, data_on_stdout: bool) -> LiveLine {
        LiveLine {
            enabled: !quiet
                && std::io::stderr().is_terminal()
                && !(data_on_stdout && stdout_is_stderrs_terminal()),
            last_draw: None,
            peak: 0,
        }
    }

    /// Notes a sample; redraws when the last redraw is at least 250 ms old.
    pub fn update(&mut self, now: Instant, elapsed_s: f64, rss: u64, samples: u64, missed: u64) {
        self.peak = self.peak.max(rss);
        if !self.enabled
            || self
                .last_draw
                .is_some_and(|t| now.duration_since(t) < REFRESH)
        {
            return;
        }
        self.last_draw = Some(now);
        let line = format!(
            "\r\x1b[Kmemmon: {}  RSS {}  sampled peak {}  {}  {} missed",
            fmt_seconds(elapsed_s),
            fmt_bytes(rss),
            fmt_bytes(self.peak),
            count(samples, "sample"),
            missed
        );
        super::stderr::write_live(line.as_bytes());
    }

    /// Erases the line, so the next message starts on a clean line (every message through
    /// `stderr` erases it first too).
    pub fn clear(&mut self) {
        super::stderr::clear_live();
    }
}

/// Whether stdout is the terminal stderr is (the same device).
fn stdout_is_stderrs_terminal() -> bool {
    let (out, err) = (std::io::stdout(), std::io::stderr());
    if !out.is_terminal() {
        return false;
    }
    match (rustix::fs::fstat(&out), rustix::fs::fstat(&err)) {
        (Ok(o), Ok(e)) => o.st_rdev == e.st_rdev,
        // Not known: the data is on a terminal, so no line.
        _ => true,
    }
}
