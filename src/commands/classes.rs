//! The error types of the core the command line looks for in an error's chain, and the lookup
//! over them ([`class_of`]): each type gives its class (`memmon::error::Classified`), and the
//! outermost one found decides the exit code (`exit.rs`). A type missing here would exit 1
//! whatever it is, so tests/layout.rs fails when an error type under src/ is not listed in
//! `classified!` below (and the compiler when a listed one lacks the trait).

use memmon::error::Classified;
use memmon::exit::Class;
use std::error::Error;

/// The error types of the core, each implementing [`Classified`], and the lookup over them.
macro_rules! classified {
    ($($t:path),* $(,)?) => {
        /// The class of `e` when its type is one of those listed here, else `None`.
        pub fn class_of(e: &(dyn Error + 'static)) -> Option<Class> {
            $(if let Some(e) = e.downcast_ref::<$t>() {
                return Some(Classified::class(e));
            })*
            None
        }
    };
}

classified!(
    memmon::analysis::compare::LimitError,
    memmon::analysis::compare::NoSamples,
    memmon::bench::BenchError,
    memmon::bench::export::ExportError,
    memmon::bench::sweep::SweepError,
    memmon::bench::sweep_compare::SweepReadError,
    memmon::bench::push::PushError,
    memmon::demo::DemoError,
    memmon::export::TargetListError,
    memmon::format::OutputError,
    memmon::format::csv::HeaderError,
    memmon::format::import::ImportError,
    memmon::format::read::ReadError,
    memmon::format::read::TimeError,
    memmon::format::MetaError,
    memmon::format::meta::SchemaError,
    memmon::marks::MarkError,
    memmon::marks::socket::SocketError,
    memmon::model::sample::EventError,
    memmon::output::OpenError,
    memmon::output::OutputCheckError,
    memmon::probe::cgroup::CgroupError,
    memmon::probe::forks::ForkWatchError,
    memmon::probe::mapcalls::MapCallsError,
    memmon::probe::tracefs::FormatError,
    memmon::probe::tracefs::TracefsError,
    memmon::probe::gpu::GpuError,
    memmon::probe::numa::NumaError,
    memmon::probe::numa::NumaParseError,
    memmon::probe::pidns::PidnsError,
    memmon::probe::proc::ProcError,
    memmon::probe::psi::PsiError,
    memmon::probe::taskstats::TaskstatsError,
    memmon::probe::vmstat::VmstatError,
    memmon::probe::vmstat::VmstatParseError,
    memmon::render::compare_table::CompareError,
    memmon::render::compare_table::SidesError,
    memmon::render::plot::PlotError,
    memmon::sampler::error::RecordError,
    memmon::sampler::target::TargetError,
    memmon::units::UnitError,
    memmon::workload::WorkloadError,
);

#[cfg(test)]
mod tests {
    use super::*;
    use memmon::sampler::error::RecordError;
    use std::io::{Error as IoError, ErrorKind};

    #[test]
    fn the_outermost_class_is_found_through_wrappers_and_an_unlisted_type_has_none() {
        let gone = memmon::probe::ProcError::NoSuchProcess(7);
        assert_eq!(class_of(&gone), Some(Class::NoTarget));
        // The recorder's wrapper decides: a tree unreadable at a tick is a failure.
        assert_eq!(class_of(&RecordError::Tree(gone)), Some(Class::Failure));
        let stopped = RecordError::Stopped {
            kept: "kept".into(),
            source: Box::new(RecordError::Interrupted(15)),
        };
        assert_eq!(class_of(&stopped), Some(Class::Signal(15)));
        assert_eq!(class_of(&IoError::from(ErrorKind::NotFound)), None);
    }
}
