//! Importers of the files people have today: psrecord logs, mprof `.dat` files and headerless
//! CSVs whose columns the user declares, each a reader of its own beside memmon's
//! (`format/read.rs` recognises a file and hands it to one); what they share: exact decimals
//! and the line reader that names the line at fault.
//!
//! Every importer gives `Sample`s with the fields its source has and 0 in the others: no
//! importer invents a kernel peak (`hwm_bytes` stays 0), a PID or a wall-clock time it does not
//! have. Sizes are converted to integer bytes with exact decimal arithmetic, never through a
//! float, and each importer states in `ReadInfo::notes` how far its source's resolution goes.

pub mod columns;
pub mod mprof;
pub mod psrecord;

use super::input::{Input, MAX_LINE_BYTES};
use super::read::{ReadError, ReadInfo};

/// An example of `--columns` for messages.
pub const COLUMNS_EXAMPLE: &str = "--columns unix_ms,rss_kb";

/// Why a line of another tool's file, or a `--columns` declaration, could not be read; the
/// reader names the file and line (`each_line`), or the flag (`ReadError::Columns`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error("the line is not UTF-8 text")]
    NotUtf8,
    #[error("'{0}' is negative")]
    Negative(String),
    #[error("'{0}' is not a number")]
    NotANumber(String),
    #[error("'{0}' is not a count")]
    NotACount(String),
    #[error("'{0}' is out of range")]
    OutOfRange(String),
    /// What is wrong with one field, named by its column (`Real (MB)`, `timestamp`, `pid`).
    #[error("{column}: {why}")]
    Field {
        column: String,
        why: Box<ImportError>,
    },
    #[error(transparent)]
    Time(#[from] super::read::TimeError),
    #[error("not a psrecord log: its first line should be psrecord's header, '# Elapsed time   CPU (%)     Real (MB)   Virtual (MB)' (plain) or 'elapsed_time,nproc,cpu,mem_real,mem_virtual' (--log-format csv), not '{0}'")]
    NotPsrecord(String),
    #[error("expected 4 numbers (elapsed time, CPU %, real MB, virtual MB), or 8 with --include-io; found {0}")]
    PsrecordFields(usize),
    #[error("expected {expected} fields as in the header, found {found}")]
    FieldsAsHeader { expected: usize, found: usize },
    /// An mprof line whose tag wants other fields: `form` is what it should hold.
    #[error("expected {form}, found {} after the tag", crate::units::count(*.found, "field"))]
    MprofFields { form: &'static str, found: usize },
    #[error("unknown line kind '{0}': an mprof file has CMDLINE, MEM, CHLD and FUNC lines")]
    MprofKind(String),
    #[error("column {0} has no name: use '-' to skip a column")]
    NoName(usize),
    #[error("column '{name}' has no unit: declare {units}")]
    NoUnit { name: String, units: &'static str },
    #[error("column '{name}' has an unknown unit '{unit}': declare {units}")]
    UnknownUnit {
        name: String,
        unit: String,
        units: &'static str,
    },
    #[error("column '{0}' is not one memmon reads: declare a time ({time}), the RSS ({rss}), or '-' to skip it", time = columns::TIME_UNITS, rss = columns::RSS_UNITS)]
    UnknownColumn(String),
    #[error("declare exactly one RSS column ({rss}); '{text}' has {count}", rss = columns::RSS_UNITS)]
    RssColumns { text: String, count: usize },
    #[error("declare one time column ({time}), or one unix and one elapsed; '{text}' has {count}", time = columns::TIME_UNITS)]
    TimeColumns { text: String, count: usize },
    #[error("the line has {found} fields but --columns {declared} declares {expected}")]
    ColumnsFields {
        found: usize,
        declared: String,
        expected: usize,
    },
}

impl ImportError {
    /// `why`, said of the field of `column`.
    pub fn of(column: &str, why: ImportError) -> ImportError {
        ImportError::Field {
            column: column.to_string(),
            why: Box::new(why),
        }
    }
}

impl crate::error::Classified for ImportError {
    /// A malformed file or declaration: bad input.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// `text` cut to `max` characters, ending in `...` when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    crate::units::printable(text, max)
}

/// Calls `f(line_number, line)` for each non-empty line of `path`, in constant memory. An error
/// from `f` names the file and line, except on an incomplete last line (no newline: the writer
/// was stopped mid-line), which is skipped and reported in `truncated_line`.
pub(crate) fn each_line(
    input: Input,
    info: &mut ReadInfo,
    mut f: impl FnMut(u64, &str) -> Result<(), ImportError>,
) -> Result<(), ReadError> {
    let path = input.path.clone();
    let mut reader = input.into_reader();
    let mut result = Ok(());
    let bytes =
        super::read::for_each_line(&mut reader, MAX_LINE_BYTES, |line_no, raw, complete| {
            let outcome = match std::str::from_utf8(raw) {
                Ok(line) if line.trim().is_empty() => return true,
                Ok(line) => f(line_no, line.trim_start_matches('\u{feff}')),
                Err(_) => Err(ImportError::NotUtf8),
            };
            match outcome {
                Ok(()) => true,
                Err(_) if !complete => {
                    info.truncated_line = Some(line_no);
                    true
                }
                Err(e) => {
                    result = Err(ReadError::Malformed {
                        path: path.clone(),
                        line: line_no,
                        msg: e.to_string(),
                    });
                    false
                }
            }
        })
        .map_err(|e| e.into_read_error(&path))?;
    info.bytes = bytes;
    result
}

/// A non-negative decimal number held exactly: `mantissa × 10^exp10`. Parses the forms tools
/// print: `44`, `63.211`, `98.59375`, `6.604194641113281e-05`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal {
    pub mantissa: u128,
    pub exp10: i32,
}

impl Decimal {
    /// Digits kept; further fractional digits are dropped (they are far below any unit here).
    const MAX_DIGITS: u32 = 24;

    pub fn parse(text: &str) -> Result<Decimal, ImportError> {
        let t = text.trim();
        let t = t.strip_prefix('+').unwrap_or(t);
        if t.starts_with('-') {
            return Err(ImportError::Negative(text.to_string()));
        }
        let (num, exp) = match t.find(['e', 'E']) {
            Some(i) => {
                let e: i32 = t[i + 1..]
                    .parse()
                    .map_err(|_| ImportError::NotANumber(text.to_string()))?;
                (&t[..i], e)
            }
            None => (t, 0),
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if int.is_empty() && frac.is_empty()
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        {
            return Err(ImportError::NotANumber(text.to_string()));
        }
        let mut mantissa: u128 = 0;
        let mut digits = 0u32;
        let mut exp10 = exp;
        for b in int.bytes() {
            if digits >= Self::MAX_DIGITS {
                return Err(ImportError::OutOfRange(text.to_string()));
            }
            mantissa = mantissa * 10 + u128::from(b - b'0');
            if mantissa > 0 {
                digits += 1;
            }
        }
        for b in frac.bytes() {
            if digits >= Self::MAX_DIGITS {
                break;
            }
            mantissa = mantissa * 10 + u128::from(b - b'0');
            if mantissa > 0 {
                digits += 1;
            }
            exp10 = exp10.saturating_sub(1);
        }
        Ok(Decimal { mantissa, exp10 })
    }

    /// Digits after the decimal point, as written (0 for an integer).
    pub fn decimals(&self) -> u32 {
        if self.exp10 < 0 {
            self.exp10.unsigned_abs()
        } else {
            0
        }
    }

    /// `value × num / den`, rounded (half up) to the nearest multiple of `quantum`; `None` when it
    /// does not fit in a u64.
    pub fn scaled(&self, num: u128, den: u128, quantum: u128) -> Option<u64> {
        let (mut top, mut bottom) = (self.mantissa.checked_mul(num)?, den.checked_mul(quantum)?);
        if self.exp10 >= 0 {
            top = top.checked_mul(10u128.checked_pow(self.exp10 as u32)?)?;
        } else {
            match 10u128
                .checked_pow(self.exp10.unsigned_abs())
                .and_then(|p| bottom.checked_mul(p))
            {
                Some(b) => bottom = b,
                // Smaller than any quantum here by many orders of magnitude.
                None => return Some(0),
            }
        }
        let units = top.checked_add(bottom / 2)? / bottom;
        u64::try_from(units.checked_mul(quantum)?).ok()
    }

    /// The value as a float (for times, where a float is what `Sample` holds).
    pub fn to_f64(self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exp10)
    }
}

/// Parses a field as a `Decimal` and scales it to integer units, with a message naming the
/// column when it is not a number or out of range.
pub(crate) fn scaled_field(
    field: &str,
    column: &str,
    num: u128,
    den: u128,
    quantum: u128,
) -> Result<(u64, Decimal), ImportError> {
    let d =
        Decimal::parse(field.trim().trim_matches('"')).map_err(|e| ImportError::of(column, e))?;
    let v = d
        .scaled(num, den, quantum)
        .ok_or_else(|| ImportError::of(column, ImportError::OutOfRange(field.to_string())))?;
    Ok((v, d))
}

pub const MIB: u128 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_parse_exactly_in_every_form_tools_print() {
        assert_eq!(
            Decimal::parse("63.211").unwrap(),
            Decimal {
                mantissa: 63211,
                exp10: -3
            }
        );
        assert_eq!(
            Decimal::parse("44").unwrap(),
            Decimal {
                mantissa: 44,
                exp10: 0
            }
        );
        assert_eq!(
            Decimal::parse(".5").unwrap(),
            Decimal {
                mantissa: 5,
                exp10: -1
            }
        );
        assert_eq!(
            Decimal::parse("6.604194641113281e-05").unwrap(),
            Decimal {
                mantissa: 6604194641113281,
                exp10: -20
            }
        );
        assert_eq!(
            Decimal::parse("1E3").unwrap(),
            Decimal {
                mantissa: 1,
                exp10: 3
            }
        );
        for bad in ["", ".", "-1", "1.2.3", "abc", "1e", "0x10", "nan", "inf"] {
            assert!(Decimal::parse(bad).is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn scaling_rounds_half_up_to_the_quantum() {
        // 98.59375 MiB is exactly 103383040 bytes.
        assert_eq!(
            Decimal::parse("98.59375").unwrap().scaled(MIB, 1, 1),
            Some(103_383_040)
        );
        // 63.211 MiB printed with 3 decimals: 66281717.76 bytes, nearest 4 KiB page 66281472.
        assert_eq!(
            Decimal::parse("63.211").unwrap().scaled(MIB, 1, 4096),
            Some(66_281_472)
        );
        // 44.42 GiB to the byte.
        assert_eq!(
            Decimal::parse("44.42").unwrap().scaled(1 << 30, 1, 1),
            Some(47_695_611_822)
        );
        assert_eq!(Decimal::parse("0.5").unwrap().scaled(1, 1, 1), Some(1));
        assert_eq!(Decimal::parse("1e-300").unwrap().scaled(MIB, 1, 1), Some(0));
        assert_eq!(Decimal::parse("1e30").unwrap().scaled(MIB, 1, 1), None);
    }

    proptest::proptest! {
        #[test]
        fn any_number_text_scales_or_is_refused_without_panic(line in "\\PC{0,120}") {
            if let Ok(d) = Decimal::parse(&line) {
                let _ = d.scaled(MIB, 1, 4096);
                let _ = d.scaled(1_000_000_000, 1, 1);
            }
        }

        #[test]
        fn integers_scale_exactly(v in 0u64..1 << 40, unit in 1u128..1 << 20) {
            let d = Decimal::parse(&v.to_string()).unwrap();
            proptest::prop_assert_eq!(d.scaled(unit, 1, 1), Some((v as u128 * unit) as u64));
        }
    }
}
