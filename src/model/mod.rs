//! What one tick of a recording is: the `Sample` every probe reading is summed into, and the
//! columns it is written as. Everything downstream (format, analysis, render) speaks this model.

pub mod sample;
pub mod signal;
