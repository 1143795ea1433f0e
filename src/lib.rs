//! memmon: measure the memory of big, long-lived programs exactly.
//!
//! The library is the core; the command line (`src/main.rs`, `src/cli.rs`, `src/commands/`) is
//! in the binary and the core never sees it. The data's way is short and one-directional: a
//! *target* (`sampler/target.rs`) is watched; *probes* (`probe/`) read the kernel's numbers; the
//! *tree* (`sampler/tree.rs`) sums one tick into a *sample* (`model/sample.rs`);
//! `sampler/record.rs` schedules ticks and hands each sample to a *format* writer (`format/`);
//! the format's reader (or an importer, `format/import/`) streams it back into the *analysis*
//! (`analysis/`), which `render/` prints, plots and reports. `bench/` drives a recorder per run,
//! `marks/` feeds it markers. docs/ARCHITECTURE.md has the module map and where to add a column,
//! a subcommand or an importer.

pub mod analysis;
pub mod bench;
pub mod demo;
pub mod exit;
pub mod export;
pub mod format;
pub mod marks;
pub mod model;
pub mod output;
pub mod probe;
pub mod render;
pub mod reporter;
pub mod sampler;
pub mod units;
pub mod workload;
