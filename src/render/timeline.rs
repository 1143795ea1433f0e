//! When a row was, in words (`analysis::timeline::When`): on its session's clock, and in an
//! `--append`ed recording which session and where the plot draws it. The summary, the GPU lines
//! and the report name a row's time by these.

use crate::analysis::timeline::When;
use crate::units::{fmt_seconds, fmt_unix_ms};

impl When {
    /// `+201 ms` on its session's clock; in a recording of `sessions` sessions (more than one),
    /// which, and where the plot draws it: `+201 ms into session 2; 4.13 s on the plot's time
    /// axis`.
    pub fn offset(&self, sessions: usize) -> String {
        if sessions > 1 {
            format!(
                "+{} into session {}; {} on the plot's time axis",
                fmt_seconds(self.elapsed_s),
                self.session,
                fmt_seconds(self.x_s)
            )
        } else {
            format!("+{}", fmt_seconds(self.elapsed_s))
        }
    }

    /// `2026-12-02 10:42:01.050 UTC (+201 ms)` (with [`When::offset`] in the parentheses);
    /// `+201 ms (elapsed)` for a file without a wall clock.
    pub fn describe(&self, sessions: usize) -> String {
        if self.unix_ms > 0 {
            format!("{} ({})", fmt_unix_ms(self.unix_ms), self.offset(sessions))
        } else if sessions > 1 {
            format!("{} (elapsed)", self.offset(sessions))
        } else {
            format!("+{} (elapsed)", fmt_seconds(self.elapsed_s))
        }
    }
}
