//! Readers of the kernel's own numbers. Each reader is built over a root path (`/proc`,
//! `/sys/fs/cgroup`) so tests point it at a fake tree in a temp dir.

pub mod cgroup;
#[cfg(test)]
pub(crate) mod fake;
pub mod forks;
pub mod gpu;
pub mod limits;
pub mod mapcalls;
pub mod maps;
pub mod numa;
pub mod pidns;
pub mod proc;
pub mod psi;
pub mod taskstats;
pub mod tracefs;
pub mod unwind;
pub mod vmstat;

pub use proc::{ProcError, ProcFs, ProcHandle, StatusMem};
