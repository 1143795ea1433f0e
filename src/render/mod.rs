//! Rendering recordings for people: plots (`plot.rs`, with the peak-preserving decimation in
//! `decimate.rs`), the comparison table (`compare_table.rs`), the HTML report (`html.rs`) and
//! the summary's tables as data, written as text or HTML (`table.rs`). Text that came from
//! outside (a program's names, paths, labels) goes through `crate::outside` on its way here.
//! Plot and report hold a bounded amount per recording, whatever its length: its series
//! decimated as it is read (`decimate::Stream`) and at most `events::MAX_EVENTS` of its events.
//! The analysis decides values and says nothing; their words are here, a file per topic: a
//! row's time (`timeline.rs`), a span's PSS reads, memory health and memory per NUMA node
//! (`span.rs`), a budget's verdict (`budget.rs`), GPU memory (`gpu.rs`), a recording's warnings
//! and notes (`warnings.rs`), and how it ended and what it watched (`summary.rs`). Where the
//! JSON holds a sentence (`warnings`, `ended`), it is serialized as these words.

/// Serializes each of the analysis's types named as its words (its `Display`, here in
/// `render/`): where the JSON holds a sentence (`warnings`, `ended`), it holds what people read.
macro_rules! serialized_as_words {
    ($($t:ty),*) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}

pub mod anatomy_bar;
pub mod budget;
pub mod compare_table;
pub mod decimate;
pub mod events;
pub mod gpu;
pub mod html;
pub mod phases;
pub mod plot;
pub mod span;
pub mod stacks;
pub mod summary;
pub mod table;
pub mod timeline;
pub mod warnings;
