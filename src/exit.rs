//! memmon's exit codes, documented in README.md ("Exit codes").

/// What memmon exits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything worked.
    Success,
    /// A run-time failure: the output could not be written, a regression gate failed
    /// (`compare`), a client failed (`bench`).
    Failure,
    /// Bad input: a flag, a value, a malformed recording.
    Usage,
    /// The target could not be found or read (no such PID, permission denied, no match).
    NoTarget,
    /// memmon was stopped by a signal after ending its recording cleanly: 128 + the signal.
    Signal(i32),
    /// A launched command's own exit code, passed through.
    Passthrough(i32),
}

impl ExitCode {
    pub fn code(self) -> i32 {
        match self {
            ExitCode::Success => 0,
            ExitCode::Failure => 1,
            ExitCode::Usage => 2,
            ExitCode::NoTarget => 3,
            ExitCode::Signal(sig) => 128 + sig,
            ExitCode::Passthrough(c) => c,
        }
    }
}

/// An error that carries the exit code memmon should end with.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CodedError {
    pub code: ExitCode,
    pub message: String,
}

impl CodedError {
    /// The error, already wrapped for `?` in functions returning `anyhow::Result`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(code: ExitCode, message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(CodedError {
            code,
            message: message.into(),
        })
    }
}
