//! The JSON Lines recording: a `meta` record first, one `sample` record per line, and an `end`
//! record when the recording ends cleanly. Writer and reader side by side.

use super::{RowError, RowSink};
use crate::format::meta::{EndInfo, Meta};
use crate::model::sample::{Event, Field, Sample, COLUMNS, REQUIRED_COLUMNS};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};

/// A `sample` record: one key per column of `COLUMNS`, in its order; an optional column whose
/// value is `None`, and an empty event, are left out. Reading ignores keys it does not know (a
/// later schema may add some) and takes a missing column as 0, except the required ones.
struct SampleRecord {
    sample: Sample,
    /// The event's text, parsed by `parse_line` (so that its error reads as in CSV).
    event: Option<String>,
}

/// The sample as written: serialized from the `Sample` itself, column by column.
struct SampleRef<'a>(&'a Sample);

impl Serialize for SampleRef<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let s = self.0;
        let mut map = ser.serialize_map(None)?;
        for c in COLUMNS {
            match c.field {
                Field::U64(get, _) => map.serialize_entry(c.name, &get(s))?,
                Field::U32(get, _) => map.serialize_entry(c.name, &get(s))?,
                Field::I32(get, _) => map.serialize_entry(c.name, &get(s))?,
                // The CSV's 6 decimals.
                Field::Seconds(get, _) => {
                    map.serialize_entry(c.name, &((get(s) * 1e6).round() / 1e6))?
                }
                Field::OptU64(get, _) => {
                    if let Some(v) = get(s) {
                        map.serialize_entry(c.name, &v)?
                    }
                }
                Field::Event(get, _) => {
                    if let Some(e) = get(s) {
                        map.serialize_entry(c.name, &e.to_string())?
                    }
                }
            }
        }
        // Per-GPU detail (index, UUID, model, the tree's bytes there): not a column.
        if !s.gpu.gpus.is_empty() {
            map.serialize_entry(GPUS_KEY, &s.gpu.gpus)?
        }
        map.end()
    }
}

/// The key of a sample record's per-GPU detail.
const GPUS_KEY: &str = "gpus";

impl Serialize for SampleRecord {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        SampleRef(&self.sample).serialize(ser)
    }
}

impl<'de> Deserialize<'de> for SampleRecord {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_map(SampleVisitor)
    }
}

struct SampleVisitor;

impl<'de> Visitor<'de> for SampleVisitor {
    type Value = SampleRecord;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a sample record")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SampleRecord, A::Error> {
        let mut sample = Sample::default();
        let mut event = None;
        let mut seen = [false; COLUMNS.len()];
        while let Some(key) = map.next_key::<ColumnKey>()? {
            let col = match key {
                ColumnKey::Column(col) => col,
                ColumnKey::Gpus => {
                    sample.gpu.gpus = map.next_value()?;
                    continue;
                }
                ColumnKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let c = &COLUMNS[col];
            if std::mem::replace(&mut seen[col], true) {
                return Err(de::Error::duplicate_field(c.name));
            }
            match c.field {
                Field::U64(_, set) => set(&mut sample, map.next_value()?),
                Field::U32(_, set) => set(&mut sample, map.next_value()?),
                Field::I32(_, set) => set(&mut sample, map.next_value()?),
                Field::Seconds(_, set) => set(&mut sample, map.next_value()?),
                Field::OptU64(_, set) => set(&mut sample, map.next_value()?),
                Field::Event(..) => event = map.next_value()?,
            }
        }
        for name in REQUIRED_COLUMNS {
            let col = COLUMNS
                .iter()
                .position(|c| c.name == name)
                .expect("a column");
            if !seen[col] {
                return Err(de::Error::missing_field(name));
            }
        }
        Ok(SampleRecord { sample, event })
    }
}

/// A key of a sample record: the index of its column in `COLUMNS`, the per-GPU detail, or
/// another key.
enum ColumnKey {
    Column(usize),
    Gpus,
    Other,
}

impl<'de> Deserialize<'de> for ColumnKey {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = ColumnKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a column name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<ColumnKey, E> {
                Ok(match COLUMNS.iter().position(|c| c.name == key) {
                    Some(col) => ColumnKey::Column(col),
                    None if key == GPUS_KEY => ColumnKey::Gpus,
                    None => ColumnKey::Other,
                })
            }
        }
        de.deserialize_identifier(KeyVisitor)
    }
}

/// One line of a JSON Lines recording.
// Samples are most lines: kept inline (boxing would allocate per line); metadata is boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Record {
    Meta(Box<Meta>),
    Sample(SampleRecord),
    End(Box<EndInfo>),
}

/// A `sample` line as written: the same tag, borrowing the sample.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum RecordOut<'a> {
    Sample(SampleRef<'a>),
}

/// What a parsed line holds.
#[allow(clippy::large_enum_variant)]
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
        let rec = RecordOut::Sample(SampleRef(s));
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
            let mut s = r.sample;
            super::check_times(s.unix_ms, s.elapsed_s).map_err(|e| RowError(e.to_string()))?;
            if let Some(t) = r.event {
                s.event = Some(Event::parse(&t).map_err(|e| RowError(e.to_string()))?);
            }
            s
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_seconds_read_as_str_parse_and_the_csv_reader_read_them() {
        // Written as memmon writes them (six decimals), and as a computed double prints.
        for text in [
            "1.273929",
            "4.500178",
            "0.102966",
            "1.4831719999999997",
            "86399.999999",
        ] {
            let mut buf = Vec::new();
            let row = Sample {
                unix_ms: 1,
                elapsed_s: 0.5,
                ..Sample::default()
            };
            JsonlWriter::new(&mut buf).write_sample(&row).unwrap();
            let line = String::from_utf8(buf)
                .unwrap()
                .replace(r#""elapsed_s":0.5"#, &format!(r#""elapsed_s":{text}"#));
            let Line::Sample(s) = parse_line(line.trim_end().as_bytes()).unwrap() else {
                panic!("not a sample")
            };
            let want: f64 = text.parse().unwrap();
            assert_eq!(s.elapsed_s.to_bits(), want.to_bits(), "{text}");
            if let Some(csv) = crate::format::csv::parse_decimal(text.as_bytes()) {
                assert_eq!(csv.to_bits(), want.to_bits(), "{text} by the CSV reader");
            }
        }
    }

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
    fn a_sample_line_is_written_as_before_the_column_table_with_vm_size_threads_and_departed_added()
    {
        let s = Sample {
            unix_ms: 5,
            elapsed_s: 0.2500004,
            rss_bytes: 1 << 30,
            processes: 1,
            top_pid: 7,
            pss_bytes: Some(4096),
            event: Some(Event::Mark("a \"b\"".into())),
            ..Sample::default()
        };
        let mut buf = Vec::new();
        JsonlWriter::new(&mut buf).write_sample(&s).unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "{\"type\":\"sample\",\"unix_ms\":5,\"elapsed_s\":0.25,\"rss_bytes\":1073741824,\
             \"anon_bytes\":0,\"file_bytes\":0,\"shmem_bytes\":0,\"swap_bytes\":0,\"locked_bytes\":0,\
             \"pinned_bytes\":0,\"processes\":1,\"top_pid\":7,\"top_rss_bytes\":0,\"hwm_bytes\":0,\
             \"hwm_sum_bytes\":0,\"pss_bytes\":4096,\"missed_ticks\":0,\"vm_size_bytes\":0,\"threads\":0,\"departed\":0,\"major_faults\":0,\"event\":\"mark:a \\\"b\\\"\"}\n"
        );
    }

    #[test]
    fn unknown_keys_are_ignored_and_missing_columns_read_as_zero_or_empty() {
        let line = br#"{"type":"sample","unix_ms":5,"elapsed_s":1,"rss_bytes":9,"npu_bytes":3,"event":null}"#;
        match parse_line(line).unwrap() {
            Line::Sample(s) => assert_eq!(
                s,
                Sample {
                    unix_ms: 5,
                    elapsed_s: 1.0,
                    rss_bytes: 9,
                    ..Sample::default()
                }
            ),
            _ => panic!("not a sample"),
        }
        let err = |line: &[u8]| match parse_line(line) {
            Err(e) => e.0,
            Ok(_) => panic!("{} was read", String::from_utf8_lossy(line)),
        };
        let e = err(br#"{"type":"sample","unix_ms":5,"elapsed_s":1}"#);
        assert!(e.contains("missing field `rss_bytes`"), "{e}");
        let e = err(br#"{"type":"sample","unix_ms":5,"elapsed_s":1,"rss_bytes":1,"processes":-1}"#);
        assert!(e.contains("-1"), "{e}");
        let e =
            err(br#"{"type":"sample","unix_ms":5,"elapsed_s":1,"rss_bytes":1,"event":"explode"}"#);
        assert!(e.starts_with("unknown event 'explode'"), "{e}");
    }

    #[test]
    fn a_malformed_line_is_an_error() {
        assert!(parse_line(b"{\"type\":\"sample\",\"unix_ms\":").is_err());
        assert!(parse_line(b"{\"type\":\"weather\"}").is_err());
    }
}
