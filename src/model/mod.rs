//! What one tick of a recording is: the `Sample` every probe reading is summed into, and the
//! columns it is written as; and the one vocabulary of peaks (`peak`: which number, from which
//! source, over what scope). Everything downstream (format, analysis, render) speaks this model.

pub mod anatomy;
pub mod gpu;
pub mod kind;
pub mod ledger;
pub mod peak;
pub mod process;
pub mod sample;
pub mod signal;
