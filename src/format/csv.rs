//! The CSV recording: one header line naming each column with its unit, then one line per
//! sample; integer bytes; the `event` column last (quoted when it holds a comma or a quote).
//! Writer and streaming reader side by side.

use super::{RowError, RowSink};
use crate::sample::{Event, Sample, COLUMNS};
use std::io::{self, Write};

/// The header line, without its newline.
pub fn header() -> String {
    COLUMNS.iter().map(|c| c.name).collect::<Vec<_>>().join(",")
}

pub struct CsvWriter<W: Write> {
    out: W,
    line: Vec<u8>,
}

impl<W: Write> CsvWriter<W> {
    /// `write_header` is false when appending to a recording that already has one.
    pub fn new(mut out: W, write_header: bool) -> io::Result<Self> {
        if write_header {
            out.write_all(header().as_bytes())?;
            out.write_all(b"\n")?;
        }
        Ok(CsvWriter { out, line: Vec::with_capacity(256) })
    }
}

impl<W: Write> RowSink for CsvWriter<W> {
    fn write_sample(&mut self, s: &Sample) -> io::Result<()> {
        let mut ib = itoa::Buffer::new();
        let l = &mut self.line;
        l.clear();
        let mut num = |l: &mut Vec<u8>, v: u64| {
            l.extend_from_slice(ib.format(v).as_bytes());
            l.push(b',');
        };
        num(l, s.unix_ms);
        write!(l, "{:.6},", s.elapsed_s)?;
        for v in [
            s.rss_bytes,
            s.anon_bytes,
            s.file_bytes,
            s.shmem_bytes,
            s.swap_bytes,
            s.locked_bytes,
            s.pinned_bytes,
            s.processes as u64,
        ] {
            num(l, v);
        }
        l.extend_from_slice(itoa::Buffer::new().format(s.top_pid).as_bytes());
        l.push(b',');
        for v in [s.top_rss_bytes, s.hwm_bytes, s.hwm_sum_bytes] {
            num(l, v);
        }
        if let Some(p) = s.pss_bytes {
            num(l, p);
        } else {
            l.push(b',');
        }
        num(l, s.missed_ticks);
        if let Some(e) = &s.event {
            write_field(l, &e.to_string());
        }
        l.push(b'\n');
        self.out.write_all(l)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn get_mut(&mut self) -> &mut dyn Write {
        &mut self.out
    }
}

/// Writes a text field, quoted only when it must be; line breaks become spaces.
fn write_field(l: &mut Vec<u8>, text: &str) {
    let clean = text.replace(['\n', '\r'], " ");
    if clean.contains([',', '"']) || clean.starts_with(' ') || clean.ends_with(' ') {
        l.push(b'"');
        l.extend_from_slice(clean.replace('"', "\"\"").as_bytes());
        l.push(b'"');
    } else {
        l.extend_from_slice(clean.as_bytes());
    }
}

/// Column positions found in a header line; the reader accepts any column order and ignores
/// columns it does not know (a later schema may add some).
pub struct CsvLayout {
    idx: [Option<usize>; COLUMN_COUNT],
    fields: usize,
}

const COLUMN_COUNT: usize = 17;

impl CsvLayout {
    pub fn from_header(line: &[u8]) -> Result<CsvLayout, String> {
        debug_assert_eq!(COLUMNS.len(), COLUMN_COUNT);
        let text = std::str::from_utf8(line).map_err(|_| "header is not UTF-8".to_string())?;
        let names: Vec<&str> = text.trim_end_matches('\r').split(',').collect();
        let mut idx = [None; COLUMN_COUNT];
        for (i, c) in COLUMNS.iter().enumerate() {
            idx[i] = names.iter().position(|n| n.trim() == c.name);
        }
        for required in ["unix_ms", "elapsed_s", "rss_bytes"] {
            let i = COLUMNS.iter().position(|c| c.name == required).unwrap();
            if idx[i].is_none() {
                return Err(format!(
                    "header has no '{required}' column (is this a memmon recording? other formats: see --input-format)"
                ));
            }
        }
        Ok(CsvLayout { idx, fields: names.len() })
    }

    /// Parses one data line (without its newline).
    pub fn parse(&self, line: &[u8], fields: &mut Vec<(usize, usize)>) -> Result<Sample, RowError> {
        split_fields(line, fields)?;
        if fields.len() != self.fields {
            return Err(RowError(format!(
                "expected {} fields, found {}",
                self.fields,
                fields.len()
            )));
        }
        let get = |col: usize| self.idx[col].map(|i| &line[fields[i].0..fields[i].1]);
        let int = |col: usize| -> Result<u64, RowError> {
            match get(col) {
                None => Ok(0),
                Some(f) => parse_int(f).ok_or_else(|| {
                    RowError(format!(
                        "column '{}' holds '{}', not a whole number",
                        COLUMNS[col].name,
                        String::from_utf8_lossy(f)
                    ))
                }),
            }
        };
        let elapsed = get(1).unwrap_or(b"0");
        let elapsed_s = parse_decimal(elapsed).ok_or_else(|| {
            RowError(format!(
                "column 'elapsed_s' holds '{}', not a number",
                String::from_utf8_lossy(elapsed)
            ))
        })?;
        let pss_bytes = match get(14) {
            Some(f) if !f.is_empty() => Some(int(14)?),
            _ => None,
        };
        let event = match get(16) {
            Some(f) if !f.is_empty() => {
                let text = unquote(f);
                Some(Event::parse(&text).map_err(RowError)?)
            }
            _ => None,
        };
        let top_pid = match get(10) {
            Some(f) if f.first() == Some(&b'-') => -(parse_int(&f[1..]).unwrap_or(0) as i64) as i32,
            _ => int(10)? as i32,
        };
        Ok(Sample {
            unix_ms: int(0)?,
            elapsed_s,
            rss_bytes: int(2)?,
            anon_bytes: int(3)?,
            file_bytes: int(4)?,
            shmem_bytes: int(5)?,
            swap_bytes: int(6)?,
            locked_bytes: int(7)?,
            pinned_bytes: int(8)?,
            processes: int(9)? as u32,
            top_pid,
            top_rss_bytes: int(11)?,
            hwm_bytes: int(12)?,
            hwm_sum_bytes: int(13)?,
            pss_bytes,
            missed_ticks: int(15)?,
            event,
        })
    }
}

/// Splits a CSV line into (start, end) byte ranges, honouring double quotes.
fn split_fields(line: &[u8], out: &mut Vec<(usize, usize)>) -> Result<(), RowError> {
    out.clear();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut start = 0;
    let mut i = 0;
    while i <= line.len() {
        if i < line.len() && line[i] == b'"' && i == start {
            // Quoted field: find the closing quote (a doubled quote is an escaped one).
            let mut j = i + 1;
            loop {
                match memchr::memchr(b'"', &line[j..]) {
                    None => return Err(RowError("unterminated quoted field".into())),
                    Some(k) => {
                        j += k + 1;
                        if line.get(j) == Some(&b'"') {
                            j += 1;
                            continue;
                        }
                        break;
                    }
                }
            }
            out.push((start, j));
            if j < line.len() && line[j] != b',' {
                return Err(RowError("text after a closing quote".into()));
            }
            start = j + 1;
            i = start;
            if j == line.len() {
                return Ok(());
            }
            continue;
        }
        match memchr::memchr(b',', &line[i..]) {
            Some(k) => {
                out.push((start, i + k));
                start = i + k + 1;
                i = start;
            }
            None => {
                out.push((start, line.len()));
                return Ok(());
            }
        }
    }
    Ok(())
}

fn unquote(f: &[u8]) -> String {
    let s = String::from_utf8_lossy(f);
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        s[1..s.len() - 1].replace("\"\"", "\"")
    } else {
        s.into_owned()
    }
}

/// Parses an unsigned decimal integer; `None` for anything else (including empty).
pub fn parse_int(f: &[u8]) -> Option<u64> {
    if f.is_empty() || f.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in f {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Parses a decimal number like `12.345678` fast; other forms go through the standard parser.
pub fn parse_decimal(f: &[u8]) -> Option<f64> {
    if let Some(dot) = memchr::memchr(b'.', f) {
        let frac = &f[dot + 1..];
        if dot > 0 && !frac.is_empty() && frac.len() <= 9 {
            if let (Some(i), Some(fr)) = (parse_int(&f[..dot]), parse_int(frac)) {
                return Some(i as f64 + fr as f64 / 10f64.powi(frac.len() as i32));
            }
        }
    } else if let Some(i) = parse_int(f) {
        return Some(i as f64);
    }
    std::str::from_utf8(f).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Sample {
        Sample {
            unix_ms: 1_771_372_328_313,
            elapsed_s: 12.5,
            rss_bytes: 47_696_158_720,
            anon_bytes: 47_000_000_000,
            file_bytes: 600_000_000,
            shmem_bytes: 96_158_720,
            swap_bytes: 0,
            locked_bytes: 4096,
            pinned_bytes: 8192,
            processes: 3,
            top_pid: 4242,
            top_rss_bytes: 47_000_000_000,
            hwm_bytes: 48_000_000_000,
            hwm_sum_bytes: 49_000_000_000,
            pss_bytes: None,
            missed_ticks: 2,
            event: Some(Event::Mark("synthesis, \"phase\" 1".into())),
        }
    }

    #[test]
    fn a_row_reads_back_as_written() {
        let mut buf = Vec::new();
        {
            let mut w = CsvWriter::new(&mut buf, true).unwrap();
            w.write_sample(&sample()).unwrap();
            let mut s2 = sample();
            s2.event = None;
            s2.pss_bytes = Some(123);
            w.write_sample(&s2).unwrap();
        }
        let text = String::from_utf8(buf).unwrap();
        let mut lines = text.lines();
        let layout = CsvLayout::from_header(lines.next().unwrap().as_bytes()).unwrap();
        let mut f = vec![];
        assert_eq!(layout.parse(lines.next().unwrap().as_bytes(), &mut f).unwrap(), sample());
        let second = layout.parse(lines.next().unwrap().as_bytes(), &mut f).unwrap();
        assert_eq!(second.pss_bytes, Some(123));
        assert_eq!(second.event, None);
    }

    #[test]
    fn the_csv_crate_reads_it_with_no_options() {
        let mut buf = Vec::new();
        CsvWriter::new(&mut buf, true).unwrap().write_sample(&sample()).unwrap();
        let mut r = csv::Reader::from_reader(&buf[..]);
        let headers = r.headers().unwrap().clone();
        let row = r.records().next().unwrap().unwrap();
        let rss = headers.iter().position(|h| h == "rss_bytes").unwrap();
        assert_eq!(&row[rss], "47696158720");
        assert_eq!(&row[16], "mark:synthesis, \"phase\" 1");
    }

    #[test]
    fn a_bad_number_names_its_column() {
        let layout = CsvLayout::from_header(header().as_bytes()).unwrap();
        let mut f = vec![];
        let err = layout
            .parse(b"1,2.0,12x,0,0,0,0,0,0,1,1,0,0,0,,0,", &mut f)
            .unwrap_err();
        assert!(err.0.contains("rss_bytes"), "{}", err.0);
    }

    #[test]
    fn decimals_parse_exactly_enough() {
        assert_eq!(parse_decimal(b"12.500000"), Some(12.5));
        assert_eq!(parse_decimal(b"3"), Some(3.0));
        assert_eq!(parse_decimal(b"1e3"), Some(1000.0));
        assert_eq!(parse_decimal(b"x"), None);
    }
}
