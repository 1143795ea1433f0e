//! Headerless CSVs from hand-rolled monitors, read with the columns the user declares
//! (`--columns unix_ms,rss_kb,-`): each column's name carries its unit, and none is guessed.
//!
//! Fields are separated by commas (or, in a file without commas, by tabs, semicolons or
//! spaces). A first line whose declared fields are not numbers is taken as a header and
//! skipped. Every line must have as many fields as declared.

use super::{each_line, scaled_field, Decimal, ImportError};
use crate::format::{ReadError, ReadInfo};
use crate::model::sample::Sample;
use std::path::Path;

pub(super) const TIME_UNITS: &str = "unix_ms, unix_s, unix_ns, elapsed_s or elapsed_ms";
pub(super) const RSS_UNITS: &str =
    "rss_bytes, rss_kb (KiB, as /proc prints), rss_kib, rss_mb (10^6 bytes), rss_mib, rss_gb (10^9 bytes) or rss_gib";

/// One declared column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// `-`: not read.
    Skip,
    /// Wall-clock time since the Unix epoch, in this many nanoseconds per unit.
    Unix { ns_per_unit: u128 },
    /// Time since the start, in this many nanoseconds per unit.
    Elapsed { ns_per_unit: u128 },
    /// Resident set size, in this many bytes per unit.
    Rss { bytes_per_unit: u128 },
}

/// The columns of a file, as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    pub columns: Vec<Column>,
    /// The declaration as given, for messages.
    pub text: String,
}

impl Columns {
    /// Parses `unix_ms,rss_kb,-`. The message of an error says what to declare instead.
    pub fn parse(text: &str) -> Result<Columns, ImportError> {
        let mut columns = Vec::new();
        for (i, raw) in text.split(',').enumerate() {
            let name = raw.trim().to_ascii_lowercase();
            let col = match name.as_str() {
                "" => return Err(ImportError::NoName(i + 1)),
                "-" => Column::Skip,
                "unix_ms" => Column::Unix {
                    ns_per_unit: 1_000_000,
                },
                "unix_s" => Column::Unix {
                    ns_per_unit: 1_000_000_000,
                },
                "unix_ns" => Column::Unix { ns_per_unit: 1 },
                "elapsed_s" => Column::Elapsed {
                    ns_per_unit: 1_000_000_000,
                },
                "elapsed_ms" => Column::Elapsed {
                    ns_per_unit: 1_000_000,
                },
                "rss_bytes" | "rss_b" => Column::Rss { bytes_per_unit: 1 },
                "rss_kb" | "rss_kib" => Column::Rss {
                    bytes_per_unit: 1 << 10,
                },
                "rss_mib" => Column::Rss {
                    bytes_per_unit: 1 << 20,
                },
                "rss_gib" => Column::Rss {
                    bytes_per_unit: 1 << 30,
                },
                "rss_mb" => Column::Rss {
                    bytes_per_unit: 1_000_000,
                },
                "rss_gb" => Column::Rss {
                    bytes_per_unit: 1_000_000_000,
                },
                "rss" => {
                    return Err(ImportError::NoUnit {
                        name: name.clone(),
                        units: RSS_UNITS,
                    })
                }
                "time" | "timestamp" | "ts" | "unix" | "elapsed" | "t" => {
                    return Err(ImportError::NoUnit {
                        name: name.clone(),
                        units: TIME_UNITS,
                    })
                }
                other => {
                    let unit = other.split_once('_').map(|(_, u)| u).unwrap_or("");
                    let unknown_unit = |units| ImportError::UnknownUnit {
                        name: other.to_string(),
                        unit: unit.to_string(),
                        units,
                    };
                    return Err(if other.starts_with("rss_") {
                        unknown_unit(RSS_UNITS)
                    } else if other.starts_with("unix_") || other.starts_with("elapsed_") {
                        unknown_unit(TIME_UNITS)
                    } else {
                        ImportError::UnknownColumn(other.to_string())
                    });
                }
            };
            columns.push(col);
        }
        let count = |f: fn(&Column) -> bool| columns.iter().filter(|c| f(c)).count();
        let rss = count(|c| matches!(c, Column::Rss { .. }));
        let unix = count(|c| matches!(c, Column::Unix { .. }));
        let elapsed = count(|c| matches!(c, Column::Elapsed { .. }));
        if rss != 1 {
            return Err(ImportError::RssColumns {
                text: text.to_string(),
                count: rss,
            });
        }
        if unix > 1 || elapsed > 1 || unix + elapsed == 0 {
            return Err(ImportError::TimeColumns {
                text: text.to_string(),
                count: unix + elapsed,
            });
        }
        Ok(Columns {
            columns,
            text: text.trim().to_string(),
        })
    }

    /// The declared columns in words, for the note in `ReadInfo`.
    pub fn describe(&self) -> String {
        self.text
            .split(',')
            .map(|n| match n.trim().to_ascii_lowercase().as_str() {
                "-" => "- (skipped)".to_string(),
                "rss_kb" => "rss_kb (KiB: 1024 bytes)".to_string(),
                "rss_mb" => "rss_mb (10^6 bytes)".to_string(),
                "rss_gb" => "rss_gb (10^9 bytes)".to_string(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The fields read from one line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub unix_ns: Option<u64>,
    pub elapsed_ns: Option<u64>,
    pub rss_bytes: u64,
    /// Digits after the point in the RSS field (its resolution).
    pub rss_decimals: u32,
}

/// Splits a line into fields: by commas, or in a line without commas by tabs, semicolons or
/// runs of spaces.
pub fn split_fields(line: &str) -> Vec<&str> {
    let sep = [',', '\t', ';'].into_iter().find(|c| line.contains(*c));
    match sep {
        Some(c) => line.split(c).map(str::trim).collect(),
        None => line.split_whitespace().collect(),
    }
}

/// Reads one line's declared fields.
pub fn parse_row(cols: &Columns, line: &str) -> Result<Row, ImportError> {
    let fields = split_fields(line);
    if fields.len() != cols.columns.len() {
        return Err(ImportError::ColumnsFields {
            found: fields.len(),
            declared: cols.text.clone(),
            expected: cols.columns.len(),
        });
    }
    let names: Vec<&str> = cols.text.split(',').map(str::trim).collect();
    let mut row = Row {
        unix_ns: None,
        elapsed_ns: None,
        rss_bytes: 0,
        rss_decimals: 0,
    };
    for ((col, field), name) in cols.columns.iter().zip(&fields).zip(&names) {
        match *col {
            Column::Skip => {}
            Column::Unix { ns_per_unit } => {
                row.unix_ns = Some(scaled_field(field, name, ns_per_unit, 1, 1)?.0)
            }
            Column::Elapsed { ns_per_unit } => {
                row.elapsed_ns = Some(scaled_field(field, name, ns_per_unit, 1, 1)?.0)
            }
            Column::Rss { bytes_per_unit } => {
                let (b, d) = scaled_field(field, name, bytes_per_unit, 1, 1)?;
                row.rss_bytes = b;
                row.rss_decimals = d.decimals();
            }
        }
    }
    Ok(row)
}

/// Streams a headerless CSV read with the declared `columns`.
pub fn read(
    path: &Path,
    columns: &str,
    on_sample: impl FnMut(&Sample),
) -> Result<ReadInfo, ReadError> {
    read_from(crate::format::input::open(path)?, columns, on_sample)
}

/// `read` on an input already opened.
pub fn read_from(
    input: crate::format::input::Input,
    columns: &str,
    mut on_sample: impl FnMut(&Sample),
) -> Result<ReadInfo, ReadError> {
    let path = &input.path.clone();
    let cols =
        Columns::parse(columns).map_err(|e| ReadError::Columns(format!("{columns}: {e}")))?;
    let rss_unit = cols
        .columns
        .iter()
        .find_map(|c| match c {
            Column::Rss { bytes_per_unit } => Some(*bytes_per_unit),
            _ => None,
        })
        .expect("one RSS column");
    let mut info = ReadInfo {
        path: path.to_path_buf(),
        ..ReadInfo::default()
    };
    let mut first_unix_ns: Option<u64> = None;
    let mut seen_data = false;
    let mut header_line = None;
    let mut max_decimals = 0;
    each_line(input, &mut info, |line_no, line| {
        let row = match parse_row(&cols, line) {
            Ok(r) => r,
            // A first line of names (not numbers) is a header: skip it.
            Err(_) if !seen_data && header_line.is_none() && is_header(&cols, line) => {
                header_line = Some(line_no);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        seen_data = true;
        max_decimals = max_decimals.max(row.rss_decimals);
        let elapsed_s = match (row.elapsed_ns, row.unix_ns) {
            (Some(e), _) => e as f64 / 1e9,
            (None, Some(u)) => {
                let first = *first_unix_ns.get_or_insert(u);
                (u as f64 - first as f64) / 1e9
            }
            (None, None) => unreachable!("Columns::parse requires a time column"),
        };
        let unix_ms = row
            .unix_ns
            .map(|u| u / 1_000_000 + u64::from(u % 1_000_000 >= 500_000));
        let unix_ms = unix_ms.unwrap_or(0);
        crate::format::check_times(unix_ms, elapsed_s)?;
        on_sample(&Sample {
            unix_ms,
            elapsed_s,
            rss_bytes: row.rss_bytes,
            ..Sample::default()
        });
        Ok(())
    })?;
    if !seen_data && header_line.is_none() && info.truncated_line.is_none() {
        return Err(ReadError::empty(path, info.bytes));
    }
    info.source = Some("a CSV read with --columns".into());
    info.notes.push(format!(
        "read with --columns as declared: {}",
        cols.describe()
    ));
    if let Some(l) = header_line {
        info.notes.push(format!(
            "line {l} holds names, not numbers: it was taken as a header and skipped"
        ));
    }
    if max_decimals > 0 {
        let step = rss_unit as f64 / 10f64.powi(max_decimals as i32);
        info.notes.push(format!(
            "the RSS column has {}: each value is within ±{} of the RSS it was printed from",
            crate::units::count(max_decimals, "decimal"),
            crate::units::fmt_bytes((step / 2.0).round() as u64)
        ));
    }
    if !cols
        .columns
        .iter()
        .any(|c| matches!(c, Column::Unix { .. }))
    {
        info.notes
            .push("no wall-clock column was declared: times are elapsed only".into());
    }
    info.notes
        .push("no kernel peak (VmHWM) is in the file: the peak is the largest sample".into());
    Ok(info)
}

/// True when none of the line's declared time and RSS fields is a number.
fn is_header(cols: &Columns, line: &str) -> bool {
    let fields = split_fields(line);
    cols.columns
        .iter()
        .zip(&fields)
        .filter(|(c, _)| **c != Column::Skip)
        .all(|(_, f)| Decimal::parse(f.trim_matches('"')).is_err())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_context_example_reads_as_ms_and_kib() {
        let cols = Columns::parse("unix_ms,rss_kb,-").unwrap();
        let row = parse_row(&cols, "1771372328313,46578280,44.42").unwrap();
        assert_eq!(row.unix_ns, Some(1_771_372_328_313_000_000));
        // 46578280 KiB is 44.42 GiB, not 44 MiB.
        assert_eq!(row.rss_bytes, 46_578_280 * 1024);
    }

    #[test]
    fn a_column_without_a_unit_says_what_to_declare() {
        let err = Columns::parse("unix_ms,rss").unwrap_err().to_string();
        assert!(
            err.starts_with("column 'rss' has no unit: declare rss_bytes, rss_kb"),
            "{err}"
        );
        let err = Columns::parse("time,rss_kb").unwrap_err().to_string();
        assert!(
            err.starts_with("column 'time' has no unit: declare unix_ms"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_unit_is_named() {
        let err = Columns::parse("unix_ms,rss_kbytes")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'rss_kbytes' has an unknown unit 'kbytes'"),
            "{err}"
        );
        let err = Columns::parse("unix_min,rss_kb").unwrap_err().to_string();
        assert!(err.contains("unknown unit 'min'"), "{err}");
        let err = Columns::parse("unix_ms,vsz_kb").unwrap_err().to_string();
        assert!(err.contains("'vsz_kb' is not one memmon reads"), "{err}");
    }

    #[test]
    fn exactly_one_rss_and_a_time_are_required() {
        assert!(Columns::parse("unix_ms,-")
            .unwrap_err()
            .to_string()
            .contains("exactly one RSS column"));
        assert!(Columns::parse("unix_ms,rss_kb,rss_mib")
            .unwrap_err()
            .to_string()
            .contains("has 2"));
        assert!(Columns::parse("rss_kb")
            .unwrap_err()
            .to_string()
            .contains("declare one time column"));
        assert!(Columns::parse("unix_ms,unix_s,rss_kb").is_err());
        assert!(Columns::parse("unix_ms,elapsed_s,rss_kb").is_ok());
        assert!(Columns::parse("unix_ms,,rss_kb")
            .unwrap_err()
            .to_string()
            .contains("column 2 has no name"));
    }

    #[test]
    fn decimal_and_binary_units_differ() {
        let row = |c: &str, l: &str| parse_row(&Columns::parse(c).unwrap(), l).unwrap();
        assert_eq!(row("elapsed_s,rss_mb", "0,1.5").rss_bytes, 1_500_000);
        assert_eq!(row("elapsed_s,rss_mib", "0,1.5").rss_bytes, 1_572_864);
        assert_eq!(row("elapsed_s,rss_gb", "0,2").rss_bytes, 2_000_000_000);
        assert_eq!(row("elapsed_s,rss_gib", "0,2").rss_bytes, 2 << 30);
        assert_eq!(
            row("elapsed_ms,rss_bytes", "1500\t7").elapsed_ns,
            Some(1_500_000_000)
        );
        assert_eq!(
            row("unix_s,rss_bytes", "1795980241.1737 7").unix_ns,
            Some(1_795_980_241_173_700_000)
        );
    }

    #[test]
    fn a_line_with_the_wrong_number_of_fields_is_refused() {
        let err = parse_row(&Columns::parse("unix_ms,rss_kb,-").unwrap(), "1,2")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has 2 fields but --columns unix_ms,rss_kb,- declares 3"),
            "{err}"
        );
    }

    #[test]
    fn a_header_line_is_skipped_and_times_are_derived() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("mon.csv");
        std::fs::write(&p, "time,rss,gib\n1000,10,0\n3500,30,0\n").unwrap();
        let mut v = vec![];
        let info = read(&p, "unix_ms,rss_kb,-", |s| v.push(s.clone())).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].unix_ms, 3500);
        assert_eq!(v[1].elapsed_s, 2.5);
        assert_eq!(v[1].rss_bytes, 30 * 1024);
        assert!(info
            .notes
            .iter()
            .any(|n| n.starts_with("line 1 holds names")));
    }

    #[test]
    fn a_bad_value_names_its_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("mon.csv");
        std::fs::write(&p, "1000,10\n2000,x\n").unwrap();
        let err = read(&p, "unix_ms,rss_kb", |_| {}).unwrap_err().to_string();
        assert!(
            err.ends_with("mon.csv:2: rss_kb: 'x' is not a number"),
            "{err}"
        );
    }

    proptest! {
        #[test]
        fn parsing_any_line_never_panics(line in "\\PC{0,80}", decl in "[a-z_,-]{0,30}") {
            let _ = split_fields(&line);
            if let Ok(cols) = Columns::parse(&decl) {
                let _ = parse_row(&cols, &line);
            }
            let cols = Columns::parse("unix_ms,rss_kb,-").unwrap();
            let _ = parse_row(&cols, &line);
        }

        #[test]
        fn generated_rows_read_back_exactly(
            unix_ms in 0u64..4_000_000_000_000,
            kib in 0u64..1 << 40,
            skipped in "[a-z0-9.]{0,12}",
            sep in prop::sample::select(vec![",", "\t", ";", " "]),
        ) {
            let cols = Columns::parse("unix_ms,rss_kb,-").unwrap();
            let skipped = if sep == " " && skipped.is_empty() { "x".to_string() } else { skipped };
            let line = format!("{unix_ms}{sep}{kib}{sep}{skipped}");
            let row = parse_row(&cols, &line).unwrap();
            prop_assert_eq!(row.unix_ns, Some(unix_ms * 1_000_000));
            prop_assert_eq!(row.rss_bytes, kib * 1024);
        }

        #[test]
        fn generated_decimal_mib_rows_read_back_to_the_byte(
            bytes in 0u64..1 << 50,
            elapsed_ms in 0u64..100_000_000,
        ) {
            // Any byte count divided by 2^20 has at most 20 decimals: printed in full it is exact.
            let mib = format!("{}.{:020}", bytes >> 20, ((bytes & ((1 << 20) - 1)) as u128) * 10u128.pow(20) / (1 << 20));
            let cols = Columns::parse("elapsed_ms,rss_mib").unwrap();
            let row = parse_row(&cols, &format!("{elapsed_ms},{mib}")).unwrap();
            prop_assert_eq!(row.rss_bytes, bytes);
            prop_assert_eq!(row.elapsed_ns, Some(elapsed_ms * 1_000_000));
        }
    }
}
