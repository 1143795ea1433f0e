//! Watching a target over time: `target.rs` finds or launches it, `tree.rs` sums one tick of
//! its process tree into a `Sample` from the probes, `record.rs` schedules the ticks and hands
//! each sample to a format writer and its `RecordObserver` (which shows what it is told: the
//! recorder prints nothing itself); `signals.rs` turns SIGINT/SIGTERM/SIGHUP into a clean end,
//! `cgroup.rs` reads a memory cgroup per tick; `pss.rs` reads PSS on a thread of its own.

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
