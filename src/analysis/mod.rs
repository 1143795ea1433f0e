//! What recordings mean: a streaming summary of one recording (peak, when, the kernel's own
//! peak beside it, idle floor), built sample by sample so it never holds the whole file.

pub mod anatomy;
pub mod budget;
pub mod compare;
pub mod gpu;
pub mod ledger;
pub mod numa;
pub mod phases;
pub mod span;
pub mod stats;
pub mod summary;
pub mod timeline;
pub mod warnings;

pub use summary::{Summary, SummaryBuilder};
