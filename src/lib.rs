//! memmon: measure the memory of big, long-lived programs exactly.
//!
//! The data's way is short and one-directional: a *target* (`target.rs`) is watched; *probes*
//! (`probe/`) read the kernel's numbers; the *tree* (`tree.rs`) sums one tick into a *sample*
//! (`sample.rs`); `record.rs` schedules ticks and hands each sample to a *format* writer
//! (`format/`); the format's reader streams it back into the *analysis* (`analysis/`), which
//! `summary` renders.

pub mod analysis;
pub mod bench;
pub mod demo;
pub mod exit;
pub mod format;
pub mod marks;
pub mod model;
pub mod probe;
pub mod render;
pub mod sampler;
pub mod units;
pub mod workload;
