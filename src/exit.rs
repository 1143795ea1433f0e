//! What the command line chooses memmon's exit code from, and nothing more: the core says what
//! kind of failure an error is ([`Class`], given by each area's error type: `class()`) and how a
//! recording ended ([`Ending`]); `commands::exit` turns those into the codes that
//! docs/guide/exit-codes.md documents. No core file names an exit code (tests/layout.rs checks).

/// The kind of failure an error is. Each area's error type says which of its variants is which
/// (`TargetError::class`, `OutputError::class`, `RecordError::class`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Bad input: a flag, a value, an output refused, a malformed or unreadable recording.
    Usage,
    /// The target could not be found or read (no such PID, permission denied, no match, no
    /// recorder for `memmon mark`).
    NoTarget,
    /// A run-time failure: a file could not be written, a client failed, a daemon went away.
    Failure,
    /// This signal arrived while memmon waited (for a target, for a FIFO's reader).
    Signal(i32),
    /// The command to launch could not be run: `found` is false when there is no such program.
    CannotRun { found: bool },
}

/// How a recording ended, when it ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// As asked (`--duration`, a stop) or as the target ended.
    Done,
    /// memmon was stopped by this signal, after ending the recording cleanly.
    Signal(i32),
    /// The launched command exited with this code.
    CommandExited(i32),
    /// The launched command was killed by this signal.
    CommandKilled(i32),
}
