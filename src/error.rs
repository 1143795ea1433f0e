//! What every error type of memmon's says besides its message: the kind of failure it is (an
//! `exit::Class`), through the one trait [`Classified`]. The command line walks an error's chain
//! of causes and takes the class of the outermost error that has one ([`class_of`]); a type
//! missing from [`CLASSIFIED`] would exit 1 whatever it is, so tests/layout.rs fails when an
//! error type under src/ is not listed there (and the compiler when a listed one lacks the
//! trait). [`chain`] says an error with its causes, as `{:#}` says an `anyhow::Error`.

use crate::exit::Class;
use std::error::Error;

/// An error type of memmon's: each of its values says which kind of failure it is. A wrapper
/// whose variant holds another classified error usually gives that one's class.
pub trait Classified: Error + Send + Sync + 'static {
    fn class(&self) -> Class;
}

/// The error types of the core, each implementing [`Classified`], and the lookup over them.
macro_rules! classified {
    ($($t:path),* $(,)?) => {
        /// The class of `e` when its type is one of memmon's (`CLASSIFIED`), else `None`.
        pub fn class_of(e: &(dyn Error + 'static)) -> Option<Class> {
            $(if let Some(e) = e.downcast_ref::<$t>() {
                return Some(Classified::class(e));
            })*
            None
        }

        /// The path of each type [`class_of`] knows, as written here (`crate::probe::proc::ProcError`).
        pub const CLASSIFIED: &[&str] = &[$(stringify!($t)),*];
    };
}

classified!(
    crate::analysis::compare::LimitError,
    crate::analysis::compare::NoSamples,
    crate::bench::BenchError,
    crate::bench::export::ExportError,
    crate::bench::sweep::SweepError,
    crate::bench::sweep_compare::SweepReadError,
    crate::bench::push::PushError,
    crate::demo::DemoError,
    crate::export::TargetListError,
    crate::format::OutputError,
    crate::format::csv::HeaderError,
    crate::format::import::ImportError,
    crate::format::read::ReadError,
    crate::format::read::TimeError,
    crate::format::MetaError,
    crate::format::meta::SchemaError,
    crate::marks::MarkError,
    crate::marks::socket::SocketError,
    crate::model::sample::EventError,
    crate::output::OpenError,
    crate::output::OutputCheckError,
    crate::probe::cgroup::CgroupError,
    crate::probe::forks::ForkWatchError,
    crate::probe::mapcalls::MapCallsError,
    crate::probe::tracefs::FormatError,
    crate::probe::tracefs::TracefsError,
    crate::probe::gpu::GpuError,
    crate::probe::numa::NumaError,
    crate::probe::numa::NumaParseError,
    crate::probe::pidns::PidnsError,
    crate::probe::proc::ProcError,
    crate::probe::psi::PsiError,
    crate::probe::taskstats::TaskstatsError,
    crate::probe::vmstat::VmstatError,
    crate::probe::vmstat::VmstatParseError,
    crate::render::compare_table::CompareError,
    crate::render::compare_table::SidesError,
    crate::render::plot::PlotError,
    crate::sampler::error::RecordError,
    crate::sampler::target::TargetError,
    crate::units::UnitError,
    crate::workload::WorkloadError,
);

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

    #[test]
    fn the_outermost_class_is_found_through_wrappers_and_an_unlisted_type_has_none() {
        let gone = crate::probe::ProcError::NoSuchProcess(7);
        assert_eq!(class_of(&gone), Some(Class::NoTarget));
        // The recorder's wrapper decides: a tree unreadable at a tick is a failure.
        assert_eq!(class_of(&RecordError::Tree(gone)), Some(Class::Failure));
        let stopped = RecordError::Stopped {
            kept: "kept".into(),
            source: Box::new(RecordError::Interrupted(15)),
        };
        assert_eq!(class_of(&stopped), Some(Class::Signal(15)));
        assert_eq!(class_of(&IoError::from(ErrorKind::NotFound)), None);
        assert!(CLASSIFIED.iter().any(|t| t.ends_with("RecordError")));
    }
}
