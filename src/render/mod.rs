//! Rendering recordings for people: plots (`plot.rs`, with the peak-preserving decimation in
//! `decimate.rs`).

pub mod decimate;
pub mod plot;
