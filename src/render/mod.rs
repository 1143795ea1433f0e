//! Rendering recordings for people: plots (`plot.rs`, with the peak-preserving decimation in
//! `decimate.rs`), the comparison table (`compare_table.rs`) and the HTML report (`html.rs`).

pub mod compare_table;
pub mod decimate;
pub mod html;
pub mod plot;
