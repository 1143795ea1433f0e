//! Rendering recordings for people: plots (`plot.rs`, with the peak-preserving decimation in
//! `decimate.rs`).

pub mod compare_table;
pub mod decimate;
pub mod html;
pub mod plot;
