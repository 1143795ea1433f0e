//! `MarkLayer` (the `tracing` feature): chosen `tracing` spans as memmon phases.
//!
//! The phase named by a chosen span begins when the span is first entered (marker: its name)
//! and ends when the span closes (when its last handle is dropped): then the phase of the
//! enclosing chosen span, if one is still open, goes on under its name again (a marker with its
//! name), else the outside phase begins (marker: `idle`, or the label given to
//! [`MarkLayer::outside_label`]). Entering and leaving a span again in between (an `async`
//! span is entered at each poll) marks nothing: a phase is the span's whole life.
//!
//! So `prove { synthesis { } gpu { } }` gives the markers `prove`, `synthesis`, `prove`, `gpu`,
//! `prove`, `idle`, and the recording's phases are those spans, the time of `prove` outside its
//! children being `prove` phases (summed by label in `memmon summary`).
//!
//! memmon's phases are one sequence: with chosen spans open on several threads at once, the
//! latest opened names the phase until it closes, then the one opened before it that is still
//! open.

use crate::Marker;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use tracing_core::span::{Attributes, Id};
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// A `tracing_subscriber` layer that sends the chosen spans' phases to memmon as markers:
///
/// ```no_run
/// use tracing_subscriber::prelude::*;
/// tracing_subscriber::registry()
///     .with(memmon_mark::MarkLayer::new().span("synthesis").span("prove"))
///     .init();
/// ```
///
/// A span is chosen by its name ([`span`](MarkLayer::span)) or its target, a module path and
/// the modules below it ([`target`](MarkLayer::target)); a layer that chooses none marks
/// nothing. The spans must be enabled: a filter of the whole subscriber that drops them drops
/// their markers too.
pub struct MarkLayer {
    names: Vec<String>,
    targets: Vec<String>,
    outside: String,
    marker: Option<Marker>,
    wait: bool,
    /// The chosen spans open now, in the order they were opened: their ID and label.
    open: Mutex<Vec<(u64, &'static str)>>,
}

/// Stored in a chosen span's extensions.
struct Chosen {
    /// Its phase has begun (it was entered once).
    opened: AtomicBool,
}

impl Default for MarkLayer {
    fn default() -> Self {
        MarkLayer::new()
    }
}

impl MarkLayer {
    /// A layer that chooses no span yet, sending through the process's own `Marker` (the one
    /// `memmon_mark::mark` uses).
    pub fn new() -> MarkLayer {
        MarkLayer {
            names: Vec::new(),
            targets: Vec::new(),
            outside: "idle".into(),
            marker: None,
            wait: false,
            open: Mutex::new(Vec::new()),
        }
    }

    /// Chooses the spans named `name`.
    pub fn span(mut self, name: impl Into<String>) -> MarkLayer {
        self.names.push(name.into());
        self
    }

    /// Chooses the spans whose target is `target` or a module below it (`prover::phases`
    /// chooses `prover::phases` and `prover::phases::gpu`, not `prover::phasesx`).
    pub fn target(mut self, target: impl Into<String>) -> MarkLayer {
        self.targets.push(target.into());
        self
    }

    /// The label of the phase after the last open chosen span closes (default `idle`).
    pub fn outside_label(mut self, label: impl Into<String>) -> MarkLayer {
        self.outside = label.into();
        self
    }

    /// Sends through `marker` instead of the process's own.
    pub fn marker(mut self, marker: Marker) -> MarkLayer {
        self.marker = Some(marker);
        self
    }

    /// Waits at each boundary until the recorder has taken its row (`mark_and_wait`), so
    /// nothing the thread does after it falls in the phase before: exact phases at the cost of
    /// a sample's time per boundary. Default: no wait (`mark`).
    pub fn wait_for_row(mut self, wait: bool) -> MarkLayer {
        self.wait = wait;
        self
    }

    fn chooses(&self, meta: &Metadata<'_>) -> bool {
        if self.names.iter().any(|n| n == meta.name()) {
            return true;
        }
        self.targets.iter().any(|t| in_module(meta.target(), t))
    }

    fn send(&self, label: &str) {
        let marker = self
            .marker
            .as_ref()
            .unwrap_or_else(|| crate::process_marker());
        if self.wait {
            let _ = marker.mark_and_wait(label);
        } else {
            marker.mark(label);
        }
    }

    fn opened(&self, id: u64, label: &'static str) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.push((id, label));
        // Sent with the list held: markers leave in the order of the list's changes.
        self.send(label);
    }

    fn closed(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = open.iter().rposition(|(o, _)| *o == id) else {
            return;
        };
        open.remove(i);
        // Only the newest span names the phase: closing an older one changes nothing.
        if i == open.len() {
            match open.last() {
                Some((_, label)) => self.send(label),
                None => self.send(&self.outside),
            }
        }
    }
}

/// `target` is the module `module` or one below it.
fn in_module(target: &str, module: &str) -> bool {
    target
        .strip_prefix(module)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

impl<S> Layer<S> for MarkLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !self.chooses(attrs.metadata()) {
            return;
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Chosen {
                opened: AtomicBool::new(false),
            });
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let first = span
            .extensions()
            .get::<Chosen>()
            .is_some_and(|c| !c.opened.swap(true, Ordering::AcqRel));
        if first {
            self.opened(id.into_u64(), span.metadata().name());
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let opened = span
            .extensions()
            .get::<Chosen>()
            .is_some_and(|c| c.opened.load(Ordering::Acquire));
        if opened {
            self.closed(id.into_u64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_chooses_its_module_and_those_below_only() {
        assert!(in_module("prover::phases", "prover::phases"));
        assert!(in_module("prover::phases::gpu", "prover::phases"));
        assert!(!in_module("prover::phasesx", "prover::phases"));
        assert!(!in_module("prover", "prover::phases"));
    }
}
