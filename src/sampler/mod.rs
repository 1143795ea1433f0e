//! Watching a target over time: the engine. `target.rs` finds what is watched and `launch.rs`
//! launches it; `watch.rs` follows it (its tree, `tree.rs`; restarts; exit records; PSS,
//! `pss.rs`; GPU, `gpu.rs`; a memory cgroup, `cgroup.rs`) and reads it into a `Sample` at each
//! tick of `schedule.rs`; `record/` drives it for `record` and `bench`, handing each sample to a
//! sink (`sink.rs`); `signals.rs` turns SIGINT/SIGTERM/SIGHUP into a clean end. Nothing here
//! prints: notes go to a `Reporter`.

pub mod cgroup;
pub mod gpu;
pub mod launch;
pub mod pss;
pub mod reaps;
pub mod record;
pub mod schedule;
pub mod signals;
pub mod sink;
pub mod target;
pub mod tree;
pub mod watch;
