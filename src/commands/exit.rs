//! memmon's exit codes (docs/guide/exit-codes.md), chosen here and nowhere else: from how a
//! subcommand ended (the recorder's `Ending`, a gate's or a budget's verdict) or, for an error,
//! from its class (`memmon::exit::Class`), which each area's error type gives.

use memmon::exit::{Class, Ending};

/// What memmon exits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything worked.
    Success,
    /// A run-time failure: the output could not be written, a regression gate or a budget
    /// failed, a client failed (`bench`).
    Failure,
    /// Bad input: a flag, a value, an output refused, a malformed recording.
    Usage,
    /// The target could not be found or read (no such PID, permission denied, no match).
    NoTarget,
    /// memmon was stopped by a signal: 128 + the signal.
    Signal(i32),
    /// A launched command's own exit code, passed through (127, 126 when it could not run).
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

impl From<Class> for ExitCode {
    fn from(class: Class) -> ExitCode {
        match class {
            Class::Usage => ExitCode::Usage,
            Class::NoTarget => ExitCode::NoTarget,
            Class::Failure => ExitCode::Failure,
            Class::Signal(sig) => ExitCode::Signal(sig),
            // As a shell says it: 127 command not found, 126 found but not run.
            Class::CannotRun { found: false } => ExitCode::Passthrough(127),
            Class::CannotRun { found: true } => ExitCode::Passthrough(126),
        }
    }
}

impl From<Ending> for ExitCode {
    fn from(ending: Ending) -> ExitCode {
        match ending {
            Ending::Done => ExitCode::Success,
            Ending::Signal(sig) | Ending::CommandKilled(sig) => ExitCode::Signal(sig),
            Ending::CommandExited(code) => ExitCode::Passthrough(code),
        }
    }
}

/// Bad input the command line finds itself (a flag that does not go with another): `Usage`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl memmon::error::Classified for UsageError {
    fn class(&self) -> Class {
        Class::Usage
    }
}

/// The class of an error: that of the outermost error in its chain whose type has one (every
/// error type of memmon's, listed in `classes.rs`, and the command line's own `UsageError`;
/// contexts added on the way have none); `Failure` when none has.
pub fn class_of(err: &anyhow::Error) -> Class {
    err.chain().find_map(class).unwrap_or(Class::Failure)
}

/// The class of one error of the chain, when its type has one.
fn class(e: &(dyn std::error::Error + 'static)) -> Option<Class> {
    use memmon::error::Classified;
    match e.downcast_ref::<UsageError>() {
        Some(u) => Some(u.class()),
        None => super::classes::class_of(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outermost_classified_error_decides_and_contexts_do_not_hide_it() {
        let refused = memmon::format::OutputError::Exists("a.csv".into());
        let e = anyhow::Error::new(refused).context("cannot start");
        assert_eq!(class_of(&e), Class::Usage);
        let e = anyhow::Error::new(UsageError("x".into()));
        assert_eq!(ExitCode::from(class_of(&e)).code(), 2);
        assert_eq!(class_of(&anyhow::anyhow!("plain")), Class::Failure);
        let launch = memmon::sampler::error::RecordError::Launch {
            program: "x".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let e = anyhow::Error::new(launch).context("bench");
        assert_eq!(ExitCode::from(class_of(&e)).code(), 127);
    }

    #[test]
    fn every_class_and_ending_has_its_documented_code() {
        let codes = [
            (Class::Usage.into(), 2),
            (Class::NoTarget.into(), 3),
            (Class::Failure.into(), 1),
            (Class::Signal(2).into(), 130),
            (Class::CannotRun { found: false }.into(), 127),
            (Class::CannotRun { found: true }.into(), 126),
            (Ending::Done.into(), 0),
            (Ending::Signal(15).into(), 143),
            (Ending::CommandExited(7).into(), 7),
            (Ending::CommandKilled(9).into(), 137),
        ];
        for (code, want) in codes {
            let code: ExitCode = code;
            assert_eq!(code.code(), want, "{code:?}");
        }
    }
}
