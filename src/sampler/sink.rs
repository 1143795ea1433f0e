//! Where a recorder's samples go: a recording on disk or on stdout (`format::Output`, the sink
//! of `record`), nowhere (a bench that keeps no time series), memory (tests), or whatever a
//! caller builds on them (a bench's runs, written into one recording: `bench/runner/`). The
//! recorder hands each one the metadata, every sample as it is taken, and the end record.

use crate::format::anatomy::AnatomyWriter;
use crate::format::meta::{EndInfo, Meta};
use crate::format::{Format, Output, OutputError};
use crate::model::anatomy::Anatomy;
use crate::model::sample::Sample;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub trait SampleSink: Send {
    /// The recording's metadata, before its first sample.
    fn start(&mut self, meta: &Meta) -> Result<(), OutputError>;
    fn sample(&mut self, s: &Sample) -> Result<(), OutputError>;
    /// Makes what was handed over so far durable (every 500 ms, and at the end).
    fn flush(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
    /// An anatomy of the tree (`record --anatomy`); sinks without an anatomy table drop it.
    fn anatomy(&mut self, _a: &Anatomy) -> Result<(), OutputError> {
        Ok(())
    }
    /// The anatomy table anatomies are written to, if any.
    fn anatomy_path(&self) -> Option<&Path> {
        None
    }
    /// Anatomies handed to it are kept (in a table, or by a bench's runs): the recorder takes
    /// them only then.
    fn keeps_anatomies(&self) -> bool {
        self.anatomy_path().is_some()
    }
    /// The recording has ended: its end record.
    fn finish(&mut self, end: &EndInfo) -> Result<(), OutputError>;
    /// Where the samples go, for the user: `out.csv (CSV; metadata in out.csv.meta.json)`.
    fn destination(&self) -> String;
    /// The file the samples are written to; `None` for stdout or no file.
    fn path(&self) -> Option<&Path> {
        None
    }
    /// The samples go to memmon's stdout (a launched command's stdout goes to stderr then).
    fn on_stdout(&self) -> bool {
        false
    }
    /// What is left of `samples` taken after the sink failed (`removed`: its file was deleted).
    fn kept(&self, samples: u64, removed: bool) -> String {
        let taken = crate::units::count(samples, "sample");
        if removed {
            format!("the {taken} taken are lost")
        } else {
            format!("the {taken} taken are in {}", self.destination())
        }
    }
    /// Nothing was recorded (the command could not be launched): removes what the sink made.
    fn discard(&mut self) {}
    /// What the user should know about how the sink was opened (a repaired `--append`), once.
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }
}

impl SampleSink for Output {
    fn start(&mut self, meta: &Meta) -> Result<(), OutputError> {
        self.write_meta(meta)
    }

    fn sample(&mut self, s: &Sample) -> Result<(), OutputError> {
        self.write_sample(s)
    }

    fn flush(&mut self) -> Result<(), OutputError> {
        Output::flush(self)
    }

    fn finish(&mut self, end: &EndInfo) -> Result<(), OutputError> {
        Output::finish(self, end)
    }

    fn destination(&self) -> String {
        let kind = |f: Format| {
            if f == Format::Csv {
                "CSV"
            } else {
                "JSON Lines"
            }
        };
        match (self.path(), self.meta_path()) {
            (Some(p), Some(m)) => format!("{} (CSV; metadata in {})", p.display(), m.display()),
            (Some(p), None) if self.format() == Format::Csv => {
                format!("{} (CSV; no metadata sidecar for a device)", p.display())
            }
            (Some(p), None) => format!("{} (JSON Lines)", p.display()),
            (None, Some(m)) => format!("stdout (CSV; metadata in {})", m.display()),
            (None, _) => format!("stdout ({}; no metadata sidecar)", kind(self.format())),
        }
    }

    fn path(&self) -> Option<&Path> {
        Output::path(self)
    }

    fn on_stdout(&self) -> bool {
        Output::path(self).is_none()
    }

    /// Only the rows whose every byte reached the file are counted as kept: those of the last
    /// successful flush, and those the buffer wrote out after it.
    fn kept(&self, samples: u64, removed: bool) -> String {
        let place = self.describe();
        let taken = crate::units::count(samples, "sample");
        if removed {
            return format!("the {taken} taken are lost");
        }
        let kept = self.flushed_samples();
        if kept == samples {
            format!(
                "the {} taken are in {place}",
                crate::units::count(kept, "sample")
            )
        } else {
            format!(
                "at least {kept} of the {taken} taken reached {place} (the rows written whole before the error); later ones may be lost"
            )
        }
    }

    fn discard(&mut self) {
        Output::discard(self);
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}

/// A recording's file with its anatomy table beside it (`record --anatomy`).
pub struct WithAnatomy {
    pub inner: Box<dyn SampleSink>,
    pub table: AnatomyWriter,
}

impl SampleSink for WithAnatomy {
    fn start(&mut self, meta: &Meta) -> Result<(), OutputError> {
        self.inner.start(meta)?;
        self.table.commit()
    }

    fn sample(&mut self, s: &Sample) -> Result<(), OutputError> {
        self.inner.sample(s)
    }

    fn flush(&mut self) -> Result<(), OutputError> {
        self.inner.flush()
    }

    fn anatomy(&mut self, a: &Anatomy) -> Result<(), OutputError> {
        self.table.write(a)
    }

    fn anatomy_path(&self) -> Option<&Path> {
        Some(self.table.path())
    }

    fn finish(&mut self, end: &EndInfo) -> Result<(), OutputError> {
        self.inner.finish(end)
    }

    fn destination(&self) -> String {
        format!(
            "{}; anatomies in {}",
            self.inner.destination(),
            self.table.path().display()
        )
    }

    fn path(&self) -> Option<&Path> {
        self.inner.path()
    }

    fn on_stdout(&self) -> bool {
        self.inner.on_stdout()
    }

    fn kept(&self, samples: u64, removed: bool) -> String {
        self.inner.kept(samples, removed)
    }

    fn discard(&mut self) {
        self.inner.discard();
        self.table.discard();
    }

    fn take_notes(&mut self) -> Vec<String> {
        self.inner.take_notes()
    }
}

/// A sink that keeps nothing (a bench without `-o`: its runs' numbers come from the
/// recorder's summary and the bench's own spans).
pub struct Nowhere;

impl SampleSink for Nowhere {
    fn start(&mut self, _meta: &Meta) -> Result<(), OutputError> {
        Ok(())
    }

    fn sample(&mut self, _s: &Sample) -> Result<(), OutputError> {
        Ok(())
    }

    fn finish(&mut self, _end: &EndInfo) -> Result<(), OutputError> {
        Ok(())
    }

    fn destination(&self) -> String {
        "nowhere (not kept)".into()
    }
}

/// What a [`Memory`] sink holds.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub meta: Option<Meta>,
    pub samples: Vec<Sample>,
    pub anatomies: Vec<Anatomy>,
    pub end: Option<EndInfo>,
}

/// A sink that keeps the recording in memory, shared with whoever holds a clone (tests).
#[derive(Clone, Default)]
pub struct Memory(pub Arc<Mutex<Recorded>>);

impl Memory {
    pub fn new() -> Memory {
        Memory::default()
    }

    /// What was recorded so far.
    pub fn recorded(&self) -> Recorded {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Recorded) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl SampleSink for Memory {
    fn start(&mut self, meta: &Meta) -> Result<(), OutputError> {
        self.with(|r| r.meta = Some(meta.clone()));
        Ok(())
    }

    fn sample(&mut self, s: &Sample) -> Result<(), OutputError> {
        self.with(|r| r.samples.push(s.clone()));
        Ok(())
    }

    fn anatomy(&mut self, a: &Anatomy) -> Result<(), OutputError> {
        self.with(|r| r.anatomies.push(a.clone()));
        Ok(())
    }

    fn finish(&mut self, end: &EndInfo) -> Result<(), OutputError> {
        self.with(|r| r.end = Some(end.clone()));
        Ok(())
    }

    fn destination(&self) -> String {
        "memory".into()
    }
}
