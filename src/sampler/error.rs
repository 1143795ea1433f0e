//! Why a recording could not start or go on, each reason with its class (`exit::Class`): the
//! recorder's errors beside those of its target (`TargetError`) and its output (`OutputError`).

use crate::exit::Class;
use crate::format::OutputError;
use crate::probe::cgroup::CgroupError;
use crate::probe::gpu::GpuError;
use crate::probe::ProcError;
use crate::sampler::target::TargetError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// `--gpu` was given and NVML cannot be read.
    #[error("--gpu")]
    Gpu(#[source] GpuError),
    #[error(transparent)]
    Target(#[from] TargetError),
    /// A signal arrived while memmon waited for the target to appear (`--wait`).
    #[error("stopped while waiting for the target")]
    Interrupted(i32),
    /// The target's /proc files cannot be read (another user's process).
    #[error("permission denied reading {} (run memmon as the target's owner or root)", .0.display())]
    Unreadable(PathBuf),
    /// The command to launch could not be started.
    #[error("cannot run '{program}'")]
    Launch {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// `--cgroup PATH` names no memory cgroup, or its processes cannot be read.
    #[error(transparent)]
    Cgroup(CgroupError),
    /// `--cgroup auto` cannot be honoured: what is wrong with the target's cgroup (`why`), and
    /// what `record` can be given instead (a caller that cannot take that advice, `bench`,
    /// gives its own).
    #[error("--cgroup auto: {why}{}", .advice.as_ref().map(|a| format!(" ({a})")).unwrap_or_default())]
    CgroupAuto { why: String, advice: Option<String> },
    /// `--own-cgroup` was given and memmon cannot make the cgroup.
    #[error("--own-cgroup: cannot make a memory cgroup for the command")]
    OwnCgroup(#[source] CgroupError),
    /// The recording's output (its file, stdout, a side table) could not be made or written.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The tree's /proc files could not be read at a tick.
    #[error(transparent)]
    Tree(ProcError),
    /// The launched command's /proc files could not be opened.
    #[error("cannot read the launched command (PID {pid})")]
    LaunchedUnreadable {
        pid: i32,
        #[source]
        source: ProcError,
    },
    /// What the recorder needs of the system (`what`: a signal handler, an eventfd, a thread, a
    /// pipe) could not be had.
    #[error("{what}")]
    System {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The recording stopped on `source`; `kept` says what of it is kept.
    #[error("{kept}")]
    Stopped {
        kept: String,
        #[source]
        source: Box<RecordError>,
    },
}

impl RecordError {
    /// `source` for `what` the recorder needed of the system.
    pub fn system(what: &'static str) -> impl FnOnce(std::io::Error) -> RecordError {
        move |source| RecordError::System { what, source }
    }
}

impl crate::error::Classified for RecordError {
    fn class(&self) -> Class {
        match self {
            RecordError::Gpu(_) | RecordError::Cgroup(_) | RecordError::CgroupAuto { .. } => {
                Class::Usage
            }
            RecordError::Target(e) => e.class(),
            RecordError::Interrupted(sig) => Class::Signal(*sig),
            RecordError::Unreadable(_) => Class::NoTarget,
            RecordError::Launch { source, .. } => Class::CannotRun {
                found: source.kind() != std::io::ErrorKind::NotFound,
            },
            RecordError::OwnCgroup(_)
            | RecordError::Tree(_)
            | RecordError::LaunchedUnreadable { .. }
            | RecordError::System { .. } => Class::Failure,
            RecordError::Output(e) => e.class(),
            RecordError::Stopped { source, .. } => source.class(),
        }
    }
}

/// A cgroup's own errors, beside the recorder's that wrap them (`Cgroup`, `OwnCgroup`), which
/// decide their class there: on its own, a cgroup not found is bad input (`--cgroup PATH`), any
/// other a failure.
impl crate::error::Classified for CgroupError {
    fn class(&self) -> Class {
        match self {
            CgroupError::NotFound(..) => Class::Usage,
            _ => Class::Failure,
        }
    }
}
