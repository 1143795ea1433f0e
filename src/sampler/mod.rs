//! Watching a target over time: `target.rs` finds or launches it, `tree.rs` sums one tick of
//! its process tree into a `Sample` from the probes, `record.rs` schedules the ticks and hands
//! each sample to a format writer and its `RecordObserver` (which shows what it is told: the
//! recorder prints nothing itself; the stop signals come from `sys::signals`), `cgroup.rs`
//! reads a memory cgroup per tick; `pss.rs` reads PSS on a thread of its own; `error.rs` says
//! why a recording could not start or go on.

pub mod cgroup;
pub mod error;
pub mod gpu;
pub mod pss;
pub mod reaps;
pub mod record;
pub mod target;
pub mod tree;
