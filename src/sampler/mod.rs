//! Watching a target over time: `target.rs` finds or launches it, `tree.rs` sums one tick of
//! its process tree into a `Sample` from the probes, `record.rs` schedules the ticks and hands
//! each sample to a format writer; `signals.rs` turns SIGINT/SIGTERM/SIGHUP into a clean end,
//! `live.rs` draws the status line on a terminal, `cgroup.rs` reads a memory cgroup per tick.

pub mod gpu;
pub mod cgroup;
pub mod live;
pub mod record;
pub mod signals;
pub mod target;
pub mod tree;
