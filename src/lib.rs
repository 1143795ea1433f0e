//! memmon: measure the memory of big, long-lived programs exactly.
//!
//! The library is the core; the command line (`src/main.rs`, `src/cli.rs`, `src/commands/`) is
//! in the binary and the core never sees it. The data's way is short and one-directional: a
//! *target* (`sampler/target.rs`) is watched; *probes* (`probe/`) read the kernel's numbers; the
//! *tree* (`sampler/tree.rs`) sums one tick into a *sample* (`model/sample.rs`); one engine
//! (`sampler/watch.rs`, on `sampler/schedule.rs`) reads it at each tick and hands it to its
//! sinks: the recorder's file (`sampler/record/`, a *format* writer of `format/`), a bench's runs
//! (`bench/`), the exporter's window (`export/`). `format/read.rs` streams a recording (or
//! another tool's file, `format/import/`) back into the *analysis* (`analysis/`), which
//! `render/` prints, plots and reports; `marks/` feeds the recorder markers; what the core has to
//! say goes to a `reporter::Reporter`; `sys/` is the system layer (rustix, signal-hook, the few raw
//! libc calls). docs/ARCHITECTURE.md has the module map and where to add
//! a column, a sink, a subcommand or an importer.

pub mod analysis;
pub mod bench;
pub mod demo;
pub mod error;
pub mod exit;
pub mod export;
pub mod format;
pub mod marks;
pub mod model;
pub mod output;
pub mod outside;
pub mod probe;
pub mod render;
pub mod reporter;
pub mod sampler;
pub mod sys;
pub mod units;
pub mod workload;
