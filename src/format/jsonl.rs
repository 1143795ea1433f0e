//! The JSON Lines recording: a `meta` record first, one `sample` record per line, and an `end`
//! record when the recording ends cleanly. Writer and reader side by side.

use super::{RowError, RowSink};
use crate::format::meta::{EndInfo, Meta};
use crate::model::sample::{Event, Sample};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};

#[derive(Serialize, Deserialize)]
struct SampleRecord {
    unix_ms: u64,
    elapsed_s: f64,
    rss_bytes: u64,
    anon_bytes: u64,
    file_bytes: u64,
    shmem_bytes: u64,
    swap_bytes: u64,
    locked_bytes: u64,
    pinned_bytes: u64,
    processes: u32,
    top_pid: i32,
    top_rss_bytes: u64,
    hwm_bytes: u64,
    hwm_sum_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pss_bytes: Option<u64>,
    missed_ticks: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    event: Option<String>,
}

/// One line of a JSON Lines recording.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Record {
    Meta(Box<Meta>),
    Sample(SampleRecord),
    End(Box<EndInfo>),
}

/// What a parsed line holds.
pub enum Line {
    Meta(Box<Meta>),
    Sample(Sample),
    End(Box<EndInfo>),
}

pub struct JsonlWriter<W: Write> {
    out: W,
    line: Vec<u8>,
}

impl<W: Write> JsonlWriter<W> {
    pub fn new(out: W) -> Self {
        JsonlWriter {
            out,
            line: Vec::with_capacity(512),
        }
    }
}

/// The `meta` record line (with its newline).
pub fn meta_line(meta: &Meta) -> Vec<u8> {
    let mut v = serde_json::to_vec(&Record::Meta(Box::new(meta.clone()))).expect("serializes");
    v.push(b'\n');
    v
}

/// The `end` record line (with its newline).
pub fn end_line(end: &EndInfo) -> Vec<u8> {
    let mut v = serde_json::to_vec(&Record::End(Box::new(end.clone()))).expect("serializes");
    v.push(b'\n');
    v
}

impl<W: Write> RowSink for JsonlWriter<W> {
    fn write_sample(&mut self, s: &Sample) -> io::Result<()> {
        let rec = Record::Sample(SampleRecord {
            unix_ms: s.unix_ms,
            elapsed_s: (s.elapsed_s * 1e6).round() / 1e6,
            rss_bytes: s.rss_bytes,
            anon_bytes: s.anon_bytes,
            file_bytes: s.file_bytes,
            shmem_bytes: s.shmem_bytes,
            swap_bytes: s.swap_bytes,
            locked_bytes: s.locked_bytes,
            pinned_bytes: s.pinned_bytes,
            processes: s.processes,
            top_pid: s.top_pid,
            top_rss_bytes: s.top_rss_bytes,
            hwm_bytes: s.hwm_bytes,
            hwm_sum_bytes: s.hwm_sum_bytes,
            pss_bytes: s.pss_bytes,
            missed_ticks: s.missed_ticks,
            event: s.event.as_ref().map(|e| e.to_string()),
        });
        self.line.clear();
        serde_json::to_writer(&mut self.line, &rec)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn get_mut(&mut self) -> &mut dyn Write {
        &mut self.out
    }
}

/// Parses one line of a JSON Lines recording.
pub fn parse_line(line: &[u8]) -> Result<Line, RowError> {
    let rec: Record = serde_json::from_slice(line).map_err(|e| RowError(e.to_string()))?;
    Ok(match rec {
        Record::Meta(m) => Line::Meta(m),
        Record::End(e) => Line::End(e),
        Record::Sample(r) => Line::Sample({
            super::check_times(r.unix_ms, r.elapsed_s).map_err(RowError)?;
            Sample {
                unix_ms: r.unix_ms,
                elapsed_s: r.elapsed_s,
                rss_bytes: r.rss_bytes,
                anon_bytes: r.anon_bytes,
                file_bytes: r.file_bytes,
                shmem_bytes: r.shmem_bytes,
                swap_bytes: r.swap_bytes,
                locked_bytes: r.locked_bytes,
                pinned_bytes: r.pinned_bytes,
                processes: r.processes,
                top_pid: r.top_pid,
                top_rss_bytes: r.top_rss_bytes,
                hwm_bytes: r.hwm_bytes,
                hwm_sum_bytes: r.hwm_sum_bytes,
                pss_bytes: r.pss_bytes,
                missed_ticks: r.missed_ticks,
                gpu: Default::default(),
                event: match r.event {
                    Some(t) => Some(Event::parse(&t).map_err(RowError)?),
                    None => None,
                },
            }
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_reads_back_as_written() {
        let s = Sample {
            unix_ms: 5,
            elapsed_s: 0.25,
            rss_bytes: 1 << 30,
            processes: 1,
            top_pid: 7,
            event: Some(Event::Restart(9)),
            ..Sample::default()
        };
        let mut buf = Vec::new();
        JsonlWriter::new(&mut buf).write_sample(&s).unwrap();
        assert!(buf.ends_with(b"\n"));
        match parse_line(&buf[..buf.len() - 1]).unwrap() {
            Line::Sample(back) => assert_eq!(back, s),
            _ => panic!("not a sample"),
        }
    }

    #[test]
    fn a_malformed_line_is_an_error() {
        assert!(parse_line(b"{\"type\":\"sample\",\"unix_ms\":").is_err());
        assert!(parse_line(b"{\"type\":\"weather\"}").is_err());
    }
}
