//! The CSV recording: one header line naming each column with its unit, then one line per
//! sample; integer bytes; the `event` column last (quoted when it holds a comma or a quote).
//! Writer and streaming reader side by side.

use super::{RowError, RowSink};
use crate::model::sample::{for_columns, Event, Field, Sample, COLUMNS, REQUIRED_COLUMNS};
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
        Ok(CsvWriter {
            out,
            line: Vec::with_capacity(256),
        })
    }
}

impl<W: Write> RowSink for CsvWriter<W> {
    fn write_sample(&mut self, s: &Sample) -> io::Result<()> {
        self.line.clear();
        write_row(&mut self.line, s);
        self.out.write_all(&self.line)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn get_mut(&mut self) -> &mut dyn Write {
        &mut self.out
    }
}

/// One field of a row, by its column's kind, and its comma.
macro_rules! write_field_of {
    (U64, $l:ident, $ib:ident, $v:expr) => {
        $l.extend_from_slice($ib.format($v).as_bytes())
    };
    (U32, $l:ident, $ib:ident, $v:expr) => {
        $l.extend_from_slice($ib.format($v).as_bytes())
    };
    (I32, $l:ident, $ib:ident, $v:expr) => {
        $l.extend_from_slice($ib.format($v).as_bytes())
    };
    (OptU64, $l:ident, $ib:ident, $v:expr) => {
        if let Some(v) = $v {
            $l.extend_from_slice($ib.format(v).as_bytes())
        }
    };
    (Seconds, $l:ident, $ib:ident, $v:expr) => {
        write_seconds($l, $v)
    };
    (Event, $l:ident, $ib:ident, $v:expr) => {
        if let Some(e) = &$v {
            write_field($l, &e.to_string())
        }
    };
}

/// `write_row`: every column of `for_columns!` in order, straight-line (no call through the
/// column table per field: a recorder writes a row at every tick).
macro_rules! row_writer {
    ($(($name:ident, $($f:ident).+, $kind:ident, $unit:expr, $meaning:expr, $src:ident $(($from:ident))?),)*) => {
        /// Appends the row of `s`, with its newline, to `l`.
        fn write_row(l: &mut Vec<u8>, s: &Sample) {
            let mut ib = itoa::Buffer::new();
            $(
                write_field_of!($kind, l, ib, s.$($f).+);
                l.push(b',');
            )*
            // The comma after the last field becomes the line's end.
            l.pop();
            l.push(b'\n');
        }
    };
}
for_columns!(row_writer);

/// Writes seconds with six decimals, as `format!("{v:.6}")` does (the exact binary value
/// rounded half to even), without the formatting machinery: a recorder writes one per row.
fn write_seconds(l: &mut Vec<u8>, v: f64) {
    // Up to 2^52 / 10^6 the microseconds fit in 53 bits; beyond, or negative, or not finite:
    // the general formatter (never for a recording's elapsed time).
    if !(v.is_finite() && (0.0..4.0e9).contains(&v)) {
        let _ = write!(l, "{v:.6}");
        return;
    }
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    // v = mantissa * 2^exp, exactly; below 2^52, exp < 0.
    let (mantissa, exp) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    let scaled = mantissa as u128 * 1_000_000;
    let shift = (-exp) as u32;
    let micros = if shift >= 128 {
        0 // under 2^-54: rounds to 0
    } else {
        let q = scaled >> shift;
        let r = scaled & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        if r > half || (r == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    } as u64;
    let mut ib = itoa::Buffer::new();
    l.extend_from_slice(ib.format(micros / 1_000_000).as_bytes());
    l.push(b'.');
    let frac = micros % 1_000_000;
    let digits = ib.format(frac).as_bytes();
    l.extend(std::iter::repeat_n(b'0', 6 - digits.len()));
    l.extend_from_slice(digits);
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
    /// The header is exactly this memmon's: rows take the one-pass fast path.
    canonical: bool,
}

const COLUMN_COUNT: usize = COLUMNS.len();

/// A CSV header that is not a memmon recording's; its reader names the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("header is not UTF-8")]
    NotUtf8,
    #[error("header names '{column}' twice (columns {first} and {second})")]
    Twice {
        column: &'static str,
        first: usize,
        second: usize,
    },
    #[error("header has no '{0}' column (is this a memmon recording? other formats: see --input-format)")]
    Missing(&'static str),
}

impl crate::error::Classified for HeaderError {
    /// A malformed recording: bad input.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

impl CsvLayout {
    pub fn from_header(line: &[u8]) -> Result<CsvLayout, HeaderError> {
        let text = std::str::from_utf8(line).map_err(|_| HeaderError::NotUtf8)?;
        let names: Vec<&str> = text.trim_end_matches('\r').split(',').collect();
        let mut idx = [None; COLUMN_COUNT];
        for (i, c) in COLUMNS.iter().enumerate() {
            let mut at = names.iter().enumerate().filter(|(_, n)| n.trim() == c.name);
            idx[i] = at.next().map(|(k, _)| k);
            if let Some((again, _)) = at.next() {
                // Which of the two holds the column cannot be told: neither is guessed.
                return Err(HeaderError::Twice {
                    column: c.name,
                    first: idx[i].unwrap_or(0) + 1,
                    second: again + 1,
                });
            }
        }
        for required in REQUIRED_COLUMNS {
            let i = COLUMNS.iter().position(|c| c.name == required).unwrap();
            if idx[i].is_none() {
                return Err(HeaderError::Missing(required));
            }
        }
        let canonical =
            names.len() == COLUMN_COUNT && names.iter().zip(COLUMNS).all(|(n, c)| *n == c.name);
        Ok(CsvLayout {
            idx,
            fields: names.len(),
            canonical,
        })
    }

    /// Parses one data line (without its newline).
    pub fn parse(&self, line: &[u8], fields: &mut Vec<(usize, usize)>) -> Result<Sample, RowError> {
        let mut s = Sample::default();
        self.parse_into(line, fields, &mut s)?;
        Ok(s)
    }

    /// [`CsvLayout::parse`] into `s`, which must be `Sample::default()`: a row of this memmon's
    /// own layout is parsed in place (a `Sample` is some 450 bytes; moving it out of each call
    /// was a seventh of reading a recording). On an error `s` holds part of the row.
    pub fn parse_into(
        &self,
        line: &[u8],
        fields: &mut Vec<(usize, usize)>,
        s: &mut Sample,
    ) -> Result<(), RowError> {
        if !(self.canonical && parse_canonical(line, s).is_some()) {
            // Anything unusual (an error, a quoted event, a sign) takes the general path, which
            // also words the error.
            *s = self.parse_unchecked(line, fields)?;
        }
        super::check_times(s.unix_ms, s.elapsed_s).map_err(|e| RowError(e.to_string()))
    }

    /// The general path: columns found by name, any order, errors worded.
    fn parse_unchecked(
        &self,
        line: &[u8],
        fields: &mut Vec<(usize, usize)>,
    ) -> Result<Sample, RowError> {
        split_fields(line, fields)?;
        if fields.len() != self.fields {
            return Err(RowError(format!(
                "expected {} fields, found {}",
                self.fields,
                fields.len()
            )));
        }
        let get = |col: usize| self.idx[col].map(|i| &line[fields[i].0..fields[i].1]);
        let text = |col: usize| String::from_utf8_lossy(get(col).unwrap_or_default()).into_owned();
        let int = |col: usize| -> Result<u64, RowError> {
            match get(col) {
                None => Ok(0),
                Some(f) => parse_int(f).ok_or_else(|| {
                    RowError(format!(
                        "column '{}' holds '{}', not a whole number",
                        COLUMNS[col].name,
                        text(col)
                    ))
                }),
            }
        };
        let out_of_range = |col: usize| {
            RowError(format!(
                "column '{}' holds '{}', out of range",
                COLUMNS[col].name,
                text(col)
            ))
        };
        let mut s = Sample::default();
        for (col, c) in COLUMNS.iter().enumerate() {
            match c.field {
                Field::U64(_, set) => set(&mut s, int(col)?),
                Field::U32(_, set) => set(
                    &mut s,
                    u32::try_from(int(col)?).map_err(|_| out_of_range(col))?,
                ),
                Field::I32(_, set) => set(
                    &mut s,
                    match get(col) {
                        Some(f) if f.first() == Some(&b'-') => parse_int(&f[1..])
                            .and_then(|v| i32::try_from(v).ok())
                            .map(|v| -v)
                            .ok_or_else(|| out_of_range(col))?,
                        _ => i32::try_from(int(col)?).map_err(|_| out_of_range(col))?,
                    },
                ),
                Field::Seconds(_, set) => {
                    let f = get(col).unwrap_or(b"0");
                    set(
                        &mut s,
                        parse_decimal(f).ok_or_else(|| {
                            RowError(format!(
                                "column '{}' holds '{}', not a number",
                                c.name,
                                String::from_utf8_lossy(f)
                            ))
                        })?,
                    )
                }
                Field::OptU64(_, set) => match get(col) {
                    Some(f) if !f.is_empty() => set(&mut s, Some(int(col)?)),
                    _ => {}
                },
                Field::Event(_, set) => match get(col) {
                    Some(f) if !f.is_empty() => set(
                        &mut s,
                        Some(Event::parse(&unquote(f)).map_err(|e| RowError(e.to_string()))?),
                    ),
                    _ => {}
                },
            }
        }
        Ok(s)
    }
}

/// Parses a row in this memmon's own column order (`COLUMNS`) in one pass over its bytes, into
/// `s`; `None` when the row is anything but plain (then the general parser decides, and `s`
/// holds part of the row).
fn parse_canonical(line: &[u8], s: &mut Sample) -> Option<()> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut p = 0;
    parse_fields(line, &mut p, s)
}

/// The next field as an unsigned integer, and its comma; `Some(None)` when empty.
#[inline(always)]
fn next_int(line: &[u8], p: &mut usize) -> Option<Option<u64>> {
    let start = *p;
    let v = digits(line, p)?;
    if *p < line.len() && line[*p] != b',' {
        return None;
    }
    let empty = *p == start;
    if *p < line.len() {
        *p += 1; // the comma
    } else if start == line.len() {
        return None; // too few fields
    }
    Some((!empty).then_some(v))
}

/// One field of the fast path, by its column's kind.
macro_rules! fast_field {
    (U64, $line:ident, $p:ident, $dst:expr) => {
        $dst = next_int($line, $p)??
    };
    (U32, $line:ident, $p:ident, $dst:expr) => {
        $dst = u32::try_from(next_int($line, $p)??).ok()?
    };
    (I32, $line:ident, $p:ident, $dst:expr) => {
        $dst = i32::try_from(next_int($line, $p)??).ok()?
    };
    (OptU64, $line:ident, $p:ident, $dst:expr) => {
        $dst = next_int($line, $p)?
    };
    (Seconds, $line:ident, $p:ident, $dst:expr) => {
        $dst = seconds($line, $p)?
    };
    // The event is last: plain text with no comma and no quote here, else the general path.
    (Event, $line:ident, $p:ident, $dst:expr) => {{
        let p = *$p;
        let rest = &$line[p.min($line.len())..];
        if p > $line.len() || $line[p - 1] != b',' || memchr::memchr2(b',', b'"', rest).is_some() {
            return None;
        }
        if !rest.is_empty() {
            $dst = Some(Event::parse(std::str::from_utf8(rest).ok()?).ok()?);
        }
        *$p = $line.len() + 1;
    }};
}

/// `parse_fields`: every column of `for_columns!` in order, straight-line.
macro_rules! fast_parser {
    ($(($name:ident, $($f:ident).+, $kind:ident, $unit:expr, $meaning:expr, $src:ident $(($from:ident))?),)*) => {
        #[inline(always)]
        fn parse_fields(line: &[u8], p: &mut usize, s: &mut Sample) -> Option<()> {
            $(fast_field!($kind, line, p, s.$($f).+);)*
            // Every field taken, none left (`event`, last, ends the line).
            (*p > line.len()).then_some(())
        }
    };
}
for_columns!(fast_parser);

/// Reads `digits[.digits]` (up to 9 decimals) and its comma at `*p`.
#[inline(always)]
fn seconds(line: &[u8], p: &mut usize) -> Option<f64> {
    let start = *p;
    let mut v: u64 = 0;
    while *p < line.len() && line[*p].is_ascii_digit() && *p - start < 19 {
        v = v * 10 + (line[*p] - b'0') as u64;
        *p += 1;
    }
    if *p == start {
        return None;
    }
    let mut secs = v as f64;
    if line.get(*p) == Some(&b'.') {
        *p += 1;
        let start = *p;
        let mut frac: u64 = 0;
        while *p < line.len() && line[*p].is_ascii_digit() && *p - start < 9 {
            frac = frac * 10 + (line[*p] - b'0') as u64;
            *p += 1;
        }
        let digits = *p - start;
        secs = decimal(v, frac, digits).unwrap_or(secs + frac as f64 / POW10[digits]);
    }
    if line.get(*p) != Some(&b',') {
        return None;
    }
    *p += 1;
    Some(secs)
}

const POW10: [f64; 10] = [1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];
const POW10_U64: [u64; 10] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

/// `int.frac` with `digits` decimals (at most 9) as the f64 `str::parse` gives: one division of
/// two numbers a double holds exactly is rounded once (`4.500178`, where adding a divided
/// fraction to the integer part gave `4.500178000000001`), so a CSV recording reads as its JSON
/// Lines copy does. `None` for an integer part of 9,007,198 or more, where the digits together
/// may be more than a double holds exactly (2^53).
#[inline(always)]
fn decimal(int: u64, frac: u64, digits: usize) -> Option<f64> {
    (int < 9_007_198).then(|| (int * POW10_U64[digits] + frac) as f64 / POW10[digits])
}

/// Reads the run of decimal digits at `*p` (at most 19, so no overflow); leaves `*p` on the
/// first byte that is not a digit. `None` past 19 digits. (A byte loop: measured faster here
/// than reading eight digits at a time, whose multiplications form one long dependency chain.)
#[inline(always)]
fn digits(line: &[u8], p: &mut usize) -> Option<u64> {
    let start = *p;
    let mut v: u64 = 0;
    while let Some(&b) = line.get(*p) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        if *p - start >= 19 {
            return None;
        }
        v = v * 10 + d as u64;
        *p += 1;
    }
    Some(v)
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
                if let Some(v) = decimal(i, fr, frac.len()) {
                    return Some(v);
                }
            }
        }
    } else if let Some(i) = parse_int(f) {
        return Some(i as f64);
    }
    std::str::from_utf8(f).ok()?.trim().parse().ok()
}

/// How reading a CSV body ended.
pub struct BodyEnd {
    pub bytes: u64,
    /// The line number of an incomplete last line (skipped).
    pub truncated_line: Option<u64>,
}

/// Why reading a CSV body stopped.
pub enum BodyError {
    Io(io::Error),
    Row(u64, String),
}

/// A run of whole lines, and maybe an incomplete last line after them.
struct Chunk {
    data: Vec<u8>,
    tail_incomplete: bool,
    /// `data` is the start of one line longer than the cap, and the reading stops here.
    overlong: bool,
}

/// A chunk's rows, parsed.
struct Parsed {
    samples: Vec<Sample>,
    /// Lines in the chunk (the incomplete tail not counted).
    lines: u64,
    /// The first bad line (1-based within the chunk) and why.
    error: Option<(u64, String)>,
    tail_incomplete: bool,
}

/// The sizes the body reader works with: chunks handed to the parsing threads (bytes read at a
/// time, and the most lines in one chunk), and the longest line accepted.
#[derive(Clone, Copy)]
struct Sizes {
    chunk: usize,
    max_lines: usize,
    max_line: usize,
}

/// Chunks of 256 KiB read at a time, of at most 2048 lines: a parsed chunk holds a `Sample` (448
/// bytes) per line, so however short the rows (`1,0,5` is a row) a parsed chunk holds under
/// 1 MiB. Each parsing thread (at most four) has at most three chunks queued or in hand as text
/// and three parsed, so what is in flight stays under 8 MiB a thread (a line of up to the 1 MiB
/// cap makes a chunk longer), whatever the file's length. memmon's own rows (100 to 300 bytes)
/// fill a chunk with fewer lines.
const SIZES: Sizes = Sizes {
    chunk: 256 << 10,
    max_lines: 2048,
    max_line: super::input::MAX_LINE_BYTES,
};

/// `chunk` as it is when it holds at most `max_lines` lines, else cut into pieces of
/// `max_lines` lines (the last piece keeps the chunk's incomplete tail).
fn split_lines(chunk: Chunk, max_lines: usize) -> Vec<Chunk> {
    if chunk.overlong {
        return vec![chunk];
    }
    let mut cuts = Vec::new();
    for (n, i) in memchr::memchr_iter(b'\n', &chunk.data).enumerate() {
        if (n + 1) % max_lines == 0 {
            cuts.push(i + 1);
        }
    }
    // A cut at the very end (after the chunk's last newline) would leave an empty last piece.
    if cuts.last() == Some(&chunk.data.len()) {
        cuts.pop();
    }
    if cuts.is_empty() {
        return vec![chunk];
    }
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for cut in cuts {
        pieces.push(Chunk {
            data: chunk.data[start..cut].to_vec(),
            tail_incomplete: false,
            overlong: false,
        });
        start = cut;
    }
    pieces.push(Chunk {
        data: chunk.data[start..].to_vec(),
        tail_incomplete: chunk.tail_incomplete,
        overlong: false,
    });
    pieces
}

/// Reads the rows of a CSV recording after its header, in order, calling `on_sample` for each.
/// Parsing is most of the work, so chunks of whole lines are parsed on a few threads while this
/// one hands the samples over in order; memory stays bounded (a few chunks in flight, and no
/// line longer than `input::MAX_LINE_BYTES`). `lines_before` is the header's line number.
pub fn read_body(
    file: &mut (dyn io::Read + Send),
    layout: &CsvLayout,
    lines_before: u64,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<BodyEnd, BodyError> {
    read_body_sized(file, layout, lines_before, SIZES, on_sample)
}

fn read_body_sized(
    file: &mut (dyn io::Read + Send),
    layout: &CsvLayout,
    lines_before: u64,
    sizes: Sizes,
    on_sample: &mut dyn FnMut(&Sample),
) -> Result<BodyEnd, BodyError> {
    use std::sync::mpsc::sync_channel;
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    std::thread::scope(|scope| {
        let mut jobs = Vec::with_capacity(workers);
        let mut results = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (job_tx, job_rx) = sync_channel::<Chunk>(2);
            let (res_tx, res_rx) = sync_channel::<Parsed>(2);
            scope.spawn(move || {
                for chunk in job_rx {
                    if res_tx
                        .send(parse_chunk(layout, chunk, sizes.max_line))
                        .is_err()
                    {
                        return;
                    }
                }
            });
            jobs.push(job_tx);
            results.push(res_rx);
        }
        let reader = scope.spawn(move || -> io::Result<u64> {
            let mut total = 0u64;
            let mut carry: Vec<u8> = Vec::new();
            // Chunks sent so far: the n-th goes to worker n % workers, whose results are taken
            // in the same order (a count of reads would skip a worker after a long line).
            let mut sent = 0usize;
            loop {
                let mut buf = std::mem::take(&mut carry);
                let start = buf.len();
                buf.resize(start.max(sizes.chunk / 2) + sizes.chunk, 0);
                let mut filled = start;
                let mut eof = false;
                while filled < buf.len() {
                    match file.read(&mut buf[filled..]) {
                        Ok(0) => {
                            eof = true;
                            break;
                        }
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                total += (filled - start) as u64;
                buf.truncate(filled);
                let mut last = eof;
                let chunk = if eof {
                    let tail_incomplete = buf.last().is_some_and(|&b| b != b'\n');
                    Chunk {
                        data: buf,
                        tail_incomplete,
                        overlong: false,
                    }
                } else {
                    match memchr::memrchr(b'\n', &buf) {
                        Some(last) => {
                            carry = buf[last + 1..].to_vec();
                            buf.truncate(last + 1);
                            Chunk {
                                data: buf,
                                tail_incomplete: false,
                                overlong: false,
                            }
                        }
                        None if buf.len() > sizes.max_line => {
                            // One line longer than the cap: stop, and say which.
                            last = true;
                            buf.truncate(sizes.max_line + 1);
                            Chunk {
                                data: buf,
                                tail_incomplete: false,
                                overlong: true,
                            }
                        }
                        None => {
                            // A line longer than the buffer (but under the cap): read on.
                            carry = buf;
                            continue;
                        }
                    }
                };
                // A chunk of many short lines becomes pieces of at most `max_lines` lines:
                // each parsed piece holds a `Sample` per line, far larger than its text.
                let mut pieces = split_lines(chunk, sizes.max_lines).into_iter().peekable();
                let mut stopped = false;
                while let Some(piece) = pieces.next() {
                    if jobs[sent % workers].send(piece).is_err() {
                        stopped = true;
                        break;
                    }
                    sent += 1;
                    if pieces.peek().is_none() && last {
                        stopped = true;
                    }
                }
                if stopped {
                    break;
                }
            }
            Ok(total)
        });
        let mut line_base = lines_before;
        let mut truncated_line = None;
        for i in 0.. {
            let Ok(parsed) = results[i % workers].recv() else {
                break;
            };
            parsed.samples.iter().for_each(&mut *on_sample);
            if let Some((at, msg)) = parsed.error {
                return Err(BodyError::Row(line_base + at, msg));
            }
            if parsed.tail_incomplete {
                truncated_line = Some(line_base + parsed.lines + 1);
            }
            line_base += parsed.lines;
        }
        let bytes = reader
            .join()
            .expect("the reader thread does not panic")
            .map_err(BodyError::Io)?;
        Ok(BodyEnd {
            bytes,
            truncated_line,
        })
    })
}

fn parse_chunk(layout: &CsvLayout, chunk: Chunk, max_line: usize) -> Parsed {
    if chunk.overlong {
        return Parsed {
            samples: Vec::new(),
            lines: 0,
            error: Some((1, super::too_long(max_line))),
            tail_incomplete: false,
        };
    }
    let mut samples = Vec::with_capacity(chunk.data.len() / 100);
    let mut fields = Vec::with_capacity(32);
    let mut lines = 0;
    let mut start = 0;
    let data = &chunk.data;
    let error = |lines, msg| Parsed {
        samples: Vec::new(),
        lines,
        error: Some((lines, msg)),
        tail_incomplete: false,
    };
    while let Some(k) = memchr::memchr(b'\n', &data[start..]) {
        lines += 1;
        if k > max_line {
            return Parsed {
                samples,
                ..error(lines, super::too_long(max_line))
            };
        }
        let line = &data[start..start + k];
        start += k + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        // Built in its slot: `push(Sample::default())` built the row on the stack and copied
        // it in, about 100 instructions of a row's 3,700 (cachegrind).
        samples.resize_with(samples.len() + 1, Sample::default);
        let slot = samples.last_mut().expect("just pushed");
        if let Err(e) = layout.parse_into(line, &mut fields, slot) {
            samples.pop();
            return Parsed {
                samples,
                ..error(lines, e.0)
            };
        }
    }
    if data.len() - start > max_line {
        return Parsed {
            samples,
            ..error(lines + 1, super::too_long(max_line))
        };
    }
    Parsed {
        samples,
        lines,
        error: None,
        tail_incomplete: chunk.tail_incomplete && start < data.len(),
    }
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
            gpu: Default::default(),
            vm_size_bytes: 50_000_000_000,
            threads: 12,
            departed: 2,
            major_faults: 12_345,
            psi_memory_some_us: Some(987_654),
            psi_memory_full_us: Some(0),
            cgroup_bytes: Some(50_000_000_000),
            cgroup_file_bytes: Some(3_000_000_000),
            cgroup_limit_bytes: None,
            cgroup_peak_bytes: Some(51_000_000_000),
            cgroup_oom_kill_events: Some(1),
            event: Some(Event::Mark("synthesis, \"phase\" 1".into())),
            ..Sample::default()
        }
    }

    fn seconds_text(v: f64) -> String {
        let mut l = Vec::new();
        write_seconds(&mut l, v);
        String::from_utf8(l).unwrap()
    }

    #[test]
    fn a_decimal_reads_as_the_f64_str_parse_gives() {
        for text in [
            "4.500178",
            "0.1",
            "0.3",
            "1796227301.081",
            "123.456789012",
            "7",
            "0.000001",
        ] {
            assert_eq!(
                parse_decimal(text.as_bytes()),
                Some(text.parse::<f64>().unwrap()),
                "{text}"
            );
            // The row parser's fast path reads `elapsed_s` alike.
            let field = format!("{text},");
            assert_eq!(
                seconds(field.as_bytes(), &mut 0),
                Some(text.parse::<f64>().unwrap()),
                "{text}"
            );
        }
    }

    #[test]
    fn seconds_are_written_as_the_formatter_writes_them_ties_to_even() {
        // 0.0078125 s is 7812.5 µs exactly: a tie, to the even 7812.
        for v in [
            0.0,
            5e-324,
            2.5e-7,
            5e-7,
            0.0078125,
            0.0234375,
            1.0078125,
            0.1,
            1.000_000_5,
            86_399.999_999_5,
            3_999_999_999.999_999,
            4.0e9,
            1e15,
            -0.5,
            f64::NAN,
            f64::INFINITY,
        ] {
            assert_eq!(seconds_text(v), format!("{v:.6}"), "{v:e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_seconds_are_written_as_the_formatter_writes_them(
            v in 0.0f64..4.1e9,
            k in 0u64..1u64 << 40,
            e in 0i32..60,
        ) {
            // Arbitrary values, exact binary fractions (ties among them), and small values.
            for x in [v, k as f64 / (1u64 << (e % 40)) as f64, v * 2f64.powi(-e)] {
                proptest::prop_assert_eq!(seconds_text(x), format!("{x:.6}"));
            }
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
        assert_eq!(
            layout
                .parse(lines.next().unwrap().as_bytes(), &mut f)
                .unwrap(),
            sample()
        );
        let second = layout
            .parse(lines.next().unwrap().as_bytes(), &mut f)
            .unwrap();
        assert_eq!(second.pss_bytes, Some(123));
        assert_eq!(second.event, None);
    }

    #[test]
    fn a_row_is_written_as_before_the_column_table_with_vm_size_threads_and_departed_added() {
        let mut buf = Vec::new();
        let mut w = CsvWriter::new(&mut buf, true).unwrap();
        w.write_sample(&sample()).unwrap();
        w.write_sample(&Sample {
            top_pid: -1,
            pss_bytes: Some(7),
            ..Sample::default()
        })
        .unwrap();
        drop(w);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "unix_ms,elapsed_s,rss_bytes,anon_bytes,file_bytes,shmem_bytes,swap_bytes,locked_bytes,\
             pinned_bytes,processes,top_pid,top_rss_bytes,hwm_bytes,hwm_sum_bytes,pss_bytes,\
             missed_ticks,gpu_bytes,gpu_device_used_bytes,gpu_device_total_bytes,gpu_hwm_bytes,gpu_hwm_sum_bytes,\
             nvidia_mapped_bytes,nvidia_mapped_rss_bytes,anon_huge_bytes,vm_size_bytes,threads,departed,major_faults,psi_memory_some_us,psi_memory_full_us,\
             swap_in_pages,swap_out_pages,cgroup_bytes,cgroup_anon_bytes,\
             cgroup_file_bytes,cgroup_kernel_bytes,cgroup_shmem_bytes,cgroup_sock_bytes,\
             cgroup_working_set_bytes,cgroup_limit_bytes,cgroup_peak_bytes,cgroup_oom_events,\
             cgroup_oom_kill_events,cgroup_max_events,cgroup_high_events,cgroup_psi_memory_some_us,cgroup_psi_memory_full_us,\
             cgroup_swap_in_pages,cgroup_swap_out_pages,cgroup_anon_thp_bytes,cgroup_outside_processes,event_lag_us,event\n\
             1771372328313,12.500000,47696158720,47000000000,600000000,96158720,0,4096,8192,3,4242,\
             47000000000,48000000000,49000000000,,2,,,,,,,,,50000000000,12,2,12345,987654,0,,,50000000000,,3000000000,,,,,,51000000000,,1,,,,,,,,,,\"mark:synthesis, \"\"phase\"\" 1\"\n\
             0,0.000000,0,0,0,0,0,0,0,0,-1,0,0,0,7,0,,,,,,,,,0,0,0,0,,,,,,,,,,,,,,,,,,,,,,,,,\n"
        );
    }

    #[test]
    fn an_unknown_column_is_ignored_and_a_missing_one_reads_as_zero() {
        // Another schema's file: columns reordered, one unknown, pss_bytes and others absent.
        let layout =
            CsvLayout::from_header(b"rss_bytes,npu_bytes,elapsed_s,unix_ms,processes,event")
                .unwrap();
        let mut f = vec![];
        let s = layout.parse(b"12,99,1.5,1000,2,start", &mut f).unwrap();
        assert_eq!(
            s,
            Sample {
                unix_ms: 1000,
                elapsed_s: 1.5,
                rss_bytes: 12,
                processes: 2,
                event: Some(Event::Start),
                ..Sample::default()
            }
        );
        assert!(CsvLayout::from_header(b"unix_ms,elapsed_s").is_err());
        assert_eq!(
            CsvLayout::from_header(b"unix_ms,elapsed_s,rss_bytes,rss_bytes")
                .err()
                .map(|e| e.to_string()),
            Some("header names 'rss_bytes' twice (columns 3 and 4)".into())
        );
    }

    #[test]
    fn the_csv_crate_reads_it_with_no_options() {
        let mut buf = Vec::new();
        CsvWriter::new(&mut buf, true)
            .unwrap()
            .write_sample(&sample())
            .unwrap();
        let mut r = csv::Reader::from_reader(&buf[..]);
        let headers = r.headers().unwrap().clone();
        let row = r.records().next().unwrap().unwrap();
        let rss = headers.iter().position(|h| h == "rss_bytes").unwrap();
        assert_eq!(&row[rss], "47696158720");
        assert_eq!(&row[COLUMNS.len() - 1], "mark:synthesis, \"phase\" 1");
    }

    proptest::proptest! {
        #[test]
        fn the_fast_path_reads_what_the_general_path_reads(
            unix_ms in 0u64..=crate::format::MAX_UNIX_MS,
            micros in 0u64..10_000_000_000u64,
            sizes in proptest::collection::vec(0u64..(1u64 << 50), 9),
            processes in 0u32..100_000,
            top_pid in 0i32..i32::MAX,
            pss in proptest::option::of(0u64..(1u64 << 50)),
            missed in 0u64..1_000_000,
            event in proptest::option::of(0usize..5),
        ) {
            let event = event.map(|k| match k {
                0 => Event::Start,
                1 => Event::Restart(top_pid),
                2 => Event::Mark("phase, \"x\"".into()),
                3 => Event::Mark("synthesis".into()),
                _ => Event::RunEnd(processes),
            });
            let s = Sample {
                unix_ms,
                elapsed_s: micros as f64 / 1e6,
                rss_bytes: sizes[0], anon_bytes: sizes[1], file_bytes: sizes[2],
                shmem_bytes: sizes[3], swap_bytes: sizes[4], locked_bytes: sizes[5],
                pinned_bytes: sizes[6], processes, top_pid, top_rss_bytes: sizes[7],
                hwm_bytes: sizes[8], hwm_sum_bytes: sizes[0], pss_bytes: pss,
                missed_ticks: missed, gpu: Default::default(),
                vm_size_bytes: sizes[1], threads: processes, departed: processes / 2, event,
                cgroup_bytes: pss.map(|p| p + 1), cgroup_limit_bytes: pss.map(|p| p + 2),
                ..Sample::default()
            };
            let mut buf = Vec::new();
            CsvWriter::new(&mut buf, false).unwrap().write_sample(&s).unwrap();
            let line = &buf[..buf.len() - 1];
            let layout = CsvLayout::from_header(header().as_bytes()).unwrap();
            let general = CsvLayout { canonical: false, ..layout };
            let mut f = vec![];
            let slow = general.parse(line, &mut f).unwrap();
            let fast = CsvLayout::from_header(header().as_bytes()).unwrap().parse(line, &mut f).unwrap();
            proptest::prop_assert_eq!(&fast, &slow);
            proptest::prop_assert_eq!(fast.rss_bytes, s.rss_bytes);
            proptest::prop_assert!((fast.elapsed_s - s.elapsed_s).abs() < 1e-6);
        }
    }

    /// The samples read, then the incomplete last line or the first error (line, message).
    type Outcome = (Vec<Sample>, Result<Option<u64>, (u64, String)>);

    /// The reference reader: one line at a time (`for_each_line`), parsed in order. Gives the
    /// samples, then the incomplete last line or the first error (line number, message).
    fn read_sequential(data: &[u8], layout: &CsvLayout, max_line: usize) -> Outcome {
        let mut samples = vec![];
        let mut fields = vec![];
        let (mut truncated, mut error) = (None, None);
        let r = crate::format::for_each_line(&mut &data[..], max_line, |no, line, complete| {
            if !complete {
                truncated = Some(no + 1);
                return true;
            }
            if line.is_empty() {
                return true;
            }
            match layout.parse(line, &mut fields) {
                Ok(s) => samples.push(s),
                Err(e) => {
                    error = Some((no + 1, e.0));
                    return false;
                }
            }
            true
        });
        let end = match (r, error) {
            (Err(crate::format::LinesError::TooLong(no, max)), _) => {
                Err((no + 1, crate::format::too_long(max)))
            }
            (Err(crate::format::LinesError::Io(e)), _) => panic!("{e}"),
            (Ok(_), Some(e)) => Err(e),
            (Ok(_), None) => Ok(truncated),
        };
        (samples, end)
    }

    fn read_parallel(data: &[u8], layout: &CsvLayout, sizes: Sizes) -> Outcome {
        let mut samples = vec![];
        let mut r: &[u8] = data;
        let end = read_body_sized(&mut r, layout, 1, sizes, &mut |s| samples.push(s.clone()));
        let end = match end {
            Ok(e) => {
                assert_eq!(e.bytes, data.len() as u64);
                Ok(e.truncated_line)
            }
            Err(BodyError::Row(line, msg)) => Err((line, msg)),
            Err(BodyError::Io(e)) => panic!("{e}"),
        };
        (samples, end)
    }

    /// A body of rows with marker labels of the given lengths (some past the cap), blank and
    /// CRLF lines, maybe a bad row, maybe cut short.
    fn body(labels: &[(usize, u8)], cut: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = CsvWriter::new(&mut buf, false).unwrap();
        for (i, &(len, kind)) in labels.iter().enumerate() {
            let s = Sample {
                unix_ms: 1_700_000_000_000 + i as u64,
                elapsed_s: i as f64,
                rss_bytes: i as u64 * 4096,
                processes: 1,
                event: (len > 0).then(|| Event::Mark("x".repeat(len))),
                ..Sample::default()
            };
            w.write_sample(&s).unwrap();
            match kind {
                0 => w.get_mut().write_all(b"\n").unwrap(),
                1 => w.get_mut().write_all(b"1,2,3\r\n").unwrap(),
                _ => {}
            }
        }
        drop(w);
        buf.truncate(buf.len().saturating_sub(cut));
        buf
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Whatever the chunk size and the line lengths, the parallel reader gives what reading
        /// line by line gives: every row below the cap, the same error at the same line.
        #[test]
        fn the_parallel_reader_reads_what_the_sequential_one_reads(
            labels in proptest::collection::vec((0usize..700, 0u8..40), 0..60),
            chunk in 1usize..300,
            max_lines in 1usize..20,
            max_line in 60usize..500,
            cut in proptest::prop_oneof![proptest::strategy::Just(0usize), 0usize..50],
        ) {
            let data = body(&labels, cut);
            let layout = CsvLayout::from_header(header().as_bytes()).unwrap();
            let seq = read_sequential(&data, &layout, max_line);
            let par = read_parallel(&data, &layout, Sizes { chunk, max_lines, max_line });
            proptest::prop_assert_eq!(&par.1, &seq.1);
            proptest::prop_assert_eq!(par.0.len(), seq.0.len());
            proptest::prop_assert!(par.0 == seq.0);
        }
    }

    #[test]
    fn rows_after_a_line_longer_than_the_read_buffer_are_all_read() {
        // Chunks of 100 bytes, a 400-byte row (under the 1000-byte cap): the reader reads on
        // several times; every row after it must still come, in order.
        let labels: Vec<(usize, u8)> = (0..300)
            .map(|i| (if i == 5 { 400 } else { 0 }, 9))
            .collect();
        let data = body(&labels, 0);
        let layout = CsvLayout::from_header(header().as_bytes()).unwrap();
        let sizes = Sizes {
            chunk: 100,
            max_lines: 8192,
            max_line: 1000,
        };
        let (samples, end) = read_parallel(&data, &layout, sizes);
        assert_eq!(end, Ok(None));
        assert_eq!(samples.len(), 300);
        assert!(samples
            .iter()
            .enumerate()
            .all(|(i, s)| s.elapsed_s == i as f64));
    }

    #[test]
    fn a_line_past_the_cap_is_an_error_at_its_own_line() {
        let labels: Vec<(usize, u8)> = (0..50)
            .map(|i| (if i == 30 { 5000 } else { 0 }, 9))
            .collect();
        let data = body(&labels, 0);
        let layout = CsvLayout::from_header(header().as_bytes()).unwrap();
        let (samples, end) = read_parallel(
            &data,
            &layout,
            Sizes {
                chunk: 64,
                max_lines: 8192,
                max_line: 1000,
            },
        );
        assert_eq!(samples.len(), 30);
        let (line, msg) = end.unwrap_err();
        assert_eq!(line, 32, "the header is line 1, the 31st row line 32");
        assert!(msg.contains("longer than 1000 bytes"), "{msg}");
    }

    #[test]
    fn counts_and_pids_that_do_not_fit_are_refused_not_wrapped() {
        let layout = CsvLayout::from_header(header().as_bytes()).unwrap();
        let mut f = vec![];
        let err = layout
            .parse(
                b"1,2.0,12,0,0,0,0,0,0,4294967297,1,0,0,0,,0,,,,,,,,,0,0,0,0,,,,,,,,,,,,,,,,,,,,,,,,,",
                &mut f,
            )
            .unwrap_err();
        assert!(
            err.0.contains("processes") && err.0.contains("out of range"),
            "{}",
            err.0
        );
        let err = layout
            .parse(
                b"1,2.0,12,0,0,0,0,0,0,1,-4294967297,0,0,0,,0,,,,,,,,,0,0,0,0,,,,,,,,,,,,,,,,,,,,,,,,,",
                &mut f,
            )
            .unwrap_err();
        assert!(err.0.contains("top_pid"), "{}", err.0);
        let err = layout
            .parse(
                b"1,2.0,12,0,0,0,0,0,0,1,1,0,0,0,,0,,,,,,,,,0,0,0,0,,,,,,,,,,,,,,,,,,,,,,,,,restart:99999999999",
                &mut f,
            )
            .unwrap_err();
        assert!(err.0.contains("restart:99999999999"), "{}", err.0);
    }

    #[test]
    fn non_finite_negative_and_absurd_times_are_refused() {
        let layout = CsvLayout::from_header(header().as_bytes()).unwrap();
        let mut f = vec![];
        for (elapsed, unix) in [
            ("NaN", "1"),
            ("inf", "1"),
            ("-1.5", "1"),
            ("1e300", "1"),
            ("1.0", "18000000000000000000"),
        ] {
            let line = format!(
                "{unix},{elapsed},12,0,0,0,0,0,0,1,1,0,0,0,,0,,,,,,,,,0,0,0,0,,,,,,,,,,,,,,,,,,,,,,,,,"
            );
            let err = layout.parse(line.as_bytes(), &mut f).unwrap_err();
            assert!(
                err.0.contains("elapsed_s") || err.0.contains("unix_ms"),
                "{line}: {}",
                err.0
            );
        }
    }

    #[test]
    fn digits_are_read_exactly_up_to_19() {
        for text in [
            "0",
            "7",
            "12345678",
            "123456789",
            "47696158720",
            "9999999999999999999",
            "1,2",
            "42x",
        ] {
            let mut p = 0;
            let v = digits(text.as_bytes(), &mut p).unwrap();
            let expect: String = text.chars().take_while(|c| c.is_ascii_digit()).collect();
            assert_eq!(v, expect.parse::<u64>().unwrap(), "{text}");
            assert_eq!(p, expect.len());
        }
        let mut p = 0;
        assert_eq!(digits(b"123456789012345678901", &mut p), None);
    }

    #[test]
    fn a_bad_number_names_its_column() {
        let layout = CsvLayout::from_header(header().as_bytes()).unwrap();
        let mut f = vec![];
        let err = layout
            .parse(
                b"1,2.0,12x,0,0,0,0,0,0,1,1,0,0,0,,0,,,,,,,,,0,0,0,0,,,,,,,,,,,,,,,,,,,,,,,,,",
                &mut f,
            )
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
