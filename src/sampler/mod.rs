//! Watching a target over time: the engine. `target.rs` finds what is watched and `launch.rs`
//! launches it; `watch.rs` follows it (its tree, `tree.rs`; restarts; exit records; PSS,
//! `pss.rs`; GPU, `gpu.rs`; a memory cgroup, `cgroup.rs`; memory pressure, `psi.rs`; the machine's swap, `swap.rs`) and reads it into a `Sample` at each
//! tick of `schedule.rs`; `record/` drives it for `record` and `bench`, handing each sample to a
//! sink (`sink.rs`); the stop signals come from `sys::signals`; `error.rs` says why a recording
//! could not start or go on. Nothing here prints: notes go to a `Reporter`.

pub mod anatomy;
pub mod cgroup;
pub mod error;
pub mod gpu;
pub mod launch;
pub mod ledger;
pub mod numa;
pub mod psi;
pub mod pss;
pub mod reaps;
pub mod record;
pub mod schedule;
pub mod sink;
pub mod swap;
pub mod target;
pub mod tree;
pub mod watch;
