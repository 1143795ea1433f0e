//! What every error type of memmon's says besides its message: the kind of failure it is (an
//! `exit::Class`), through the one trait [`Classified`]. The command line walks an error's chain
//! of causes and takes the class of the outermost error that has one (`commands/classes.rs`
//! lists the types it looks for). [`chain`] says an error with its causes, as `{:#}` says an
//! `anyhow::Error`; [`caused_by`] finds an `io::Error` of a kind among them.

use crate::exit::Class;
use std::error::Error;

/// An error type of memmon's: each of its values says which kind of failure it is. A wrapper
/// whose variant holds another classified error usually gives that one's class.
pub trait Classified: Error + Send + Sync + 'static {
    fn class(&self) -> Class;
}

/// `e` and each of its causes, outermost first, joined by `: ` (what `{:#}` prints of an
/// `anyhow::Error`).
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// Whether `e` or one of its causes is an `io::Error` of `kind`.
pub fn caused_by(e: &(dyn Error + 'static), kind: std::io::ErrorKind) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == kind)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::error::RecordError;
    use std::io::{Error as IoError, ErrorKind};

    #[test]
    fn the_chain_says_each_cause_once_and_finds_an_io_kind_anywhere_in_it() {
        let pipe = || IoError::from(ErrorKind::BrokenPipe);
        let inner = RecordError::system("cannot create an eventfd")(pipe());
        let e = RecordError::Stopped {
            kept: "the 3 samples taken are in out.csv".into(),
            source: Box::new(inner),
        };
        assert_eq!(
            chain(&e),
            format!(
                "the 3 samples taken are in out.csv: cannot create an eventfd: {}",
                pipe()
            )
        );
        assert!(caused_by(&e, ErrorKind::BrokenPipe));
        assert!(!caused_by(&e, ErrorKind::NotFound));
    }
}
