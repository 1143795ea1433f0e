//! psrecord 1.4 logs: the plain `--log FILE` text and `--log FILE --log-format csv` (the log
//! format is chosen by that flag, not by the file name). Both hold elapsed seconds, no clock.
//!
//! Facts from psrecord 1.4's source (`psrecord/main.py`): memory is psutil's `rss / 1024.0**2`,
//! so its "MB" is MiB (2^20 bytes); with `--include-children` the children's RSS is added.
//! Time is `time.time() - start`, seconds since psrecord started (wall clock). The plain log
//! prints `{:12.3f}` for elapsed time, CPU %, real and virtual MB (plus four I/O counters with
//! `--include-io`); the CSV log writes `elapsed_time,nproc,cpu,mem_real,mem_virtual` with each
//! float in full (Python's shortest exact form), `nproc` counting the processes summed.

use super::{each_line, scaled_field, Decimal, ImportError, MIB};
use crate::format::{ReadError, ReadInfo};
use crate::model::sample::Sample;
use std::path::Path;

/// RSS is a whole number of pages, and pages are multiples of 4 KiB on every platform psutil
/// reads; the plain log's 3 decimals of MiB (±524 bytes) therefore round back to exact bytes.
const PAGE: u128 = 4096;

/// `# Elapsed time   CPU (%)     Real (MB)   Virtual (MB)`.
pub fn is_plain_header(line: &str) -> bool {
    line.starts_with('#') && line.contains("Elapsed time") && line.contains("Real (MB)")
}

/// `elapsed_time,nproc,cpu,mem_real,mem_virtual[,read_count,...]`.
pub fn is_csv_header(line: &str) -> bool {
    let mut names = line.split(',').map(str::trim);
    names.next() == Some("elapsed_time") && line.split(',').any(|n| n.trim() == "mem_real")
}

enum Layout {
    Plain,
    Csv {
        elapsed: usize,
        nproc: Option<usize>,
        real: usize,
        fields: usize,
    },
}

/// Streams a psrecord log (plain or CSV, told apart by its header line).
pub fn read(path: &Path, on_sample: impl FnMut(&Sample)) -> Result<ReadInfo, ReadError> {
    read_from(crate::format::input::open(path)?, on_sample)
}

/// `read` on an input already opened.
pub fn read_from(
    input: crate::format::input::Input,
    mut on_sample: impl FnMut(&Sample),
) -> Result<ReadInfo, ReadError> {
    let path = &input.path.clone();
    let mut info = ReadInfo {
        path: path.to_path_buf(),
        ..ReadInfo::default()
    };
    let mut layout: Option<Layout> = None;
    each_line(input, &mut info, |_, line| {
        let Some(l) = &layout else {
            layout = Some(parse_header(line)?);
            return Ok(());
        };
        let s = parse_row(l, line)?;
        crate::format::check_times(s.unix_ms, s.elapsed_s)?;
        on_sample(&s);
        Ok(())
    })?;
    match layout {
        None => return Err(ReadError::empty(path, info.bytes)),
        Some(Layout::Plain) => {
            info.source = Some("a psrecord log".into());
            info.notes.push(
                "read as a psrecord plain log: RSS in psrecord's 'MB', which is MiB (rss / 1024**2), printed with 3 decimals (±524 bytes); \
                 RSS is a whole number of pages, so each value was rounded to the nearest 4 KiB, which gives back the exact bytes"
                    .into(),
            );
        }
        Some(Layout::Csv { nproc, .. }) => {
            info.source = Some("a psrecord log".into());
            info.notes.push(format!(
                "read as a psrecord CSV log: RSS in psrecord's 'MB', which is MiB (rss / 1024**2), written in full, so the bytes are exact{}",
                if nproc.is_some() { "; nproc gives the processes summed (more than 1 with --include-children)" } else { "" }
            ));
        }
    }
    info.notes.push(
        "psrecord logs hold elapsed time only (no wall-clock time), no PID and no kernel peak (VmHWM): \
         the peak is the largest sample, and a spike between samples is not in the file"
            .into(),
    );
    Ok(info)
}

fn parse_header(line: &str) -> Result<Layout, ImportError> {
    if is_plain_header(line) {
        return Ok(Layout::Plain);
    }
    if is_csv_header(line) {
        let names: Vec<&str> = line.split(',').map(str::trim).collect();
        let find = |n: &str| names.iter().position(|c| *c == n);
        return Ok(Layout::Csv {
            elapsed: 0,
            nproc: find("nproc"),
            real: find("mem_real").expect("checked by is_csv_header"),
            fields: names.len(),
        });
    }
    Err(ImportError::NotPsrecord(line.trim().to_string()))
}

fn parse_row(layout: &Layout, line: &str) -> Result<Sample, ImportError> {
    let mut s = Sample::default();
    match layout {
        Layout::Plain => {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() != 4 && fields.len() != 8 {
                return Err(ImportError::PsrecordFields(fields.len()));
            }
            s.elapsed_s = elapsed(fields[0])?;
            s.rss_bytes = scaled_field(fields[2], "Real (MB)", MIB, 1, PAGE)?.0;
        }
        Layout::Csv {
            elapsed: e,
            nproc,
            real,
            fields,
        } => {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() != *fields {
                return Err(ImportError::FieldsAsHeader {
                    expected: *fields,
                    found: f.len(),
                });
            }
            s.elapsed_s = elapsed(f[*e])?;
            s.rss_bytes = scaled_field(f[*real], "mem_real", MIB, 1, 1)?.0;
            if let Some(i) = nproc {
                s.processes = f[*i]
                    .trim()
                    .parse()
                    .map_err(|_| ImportError::of("nproc", ImportError::NotACount(f[*i].into())))?;
            }
        }
    }
    s.top_rss_bytes = if s.processes == 1 { s.rss_bytes } else { 0 };
    Ok(s)
}

fn elapsed(field: &str) -> Result<f64, ImportError> {
    Decimal::parse(field)
        .map(Decimal::to_f64)
        .map_err(|e| ImportError::of("elapsed time", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: &str = "# Elapsed time   CPU (%)     Real (MB)   Virtual (MB)\n\
       0.000        0.000       10.477       13.680\n\
       0.402       29.800       63.211       66.176\n";

    fn read_text(text: &str) -> Result<(Vec<Sample>, ReadInfo), ReadError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.txt");
        std::fs::write(&p, text).unwrap();
        let mut v = vec![];
        let info = read(&p, |s| v.push(s.clone()))?;
        Ok((v, info))
    }

    #[test]
    fn plain_log_values_round_to_whole_pages() {
        let (v, info) = read_text(PLAIN).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].rss_bytes, 16182 * 4096);
        assert_eq!(v[1].elapsed_s, 0.402);
        assert_eq!(v[1].unix_ms, 0);
        assert_eq!(v[1].hwm_bytes, 0);
        assert!(info.notes[0].contains("3 decimals"));
    }

    #[test]
    fn plain_log_with_io_counters_is_read() {
        let text = "# Elapsed time   CPU (%)     Real (MB)   Virtual (MB)  Read count  Write count  Read bytes  Write bytes\n\
                    0.000 0.000 1.000 2.000 10 20 4096 8192\n";
        assert_eq!(read_text(text).unwrap().0[0].rss_bytes, 1 << 20);
    }

    #[test]
    fn csv_log_is_exact_and_counts_processes() {
        let text = "elapsed_time,nproc,cpu,mem_real,mem_virtual\n\
                    6.604194641113281e-05,2,0.0,11.07421875,14.96875\n\
                    0.10554862022399902,3,29.3,98.59375,105.140625\n";
        let (v, _) = read_text(text).unwrap();
        assert_eq!(v[0].rss_bytes, 11_612_160);
        assert_eq!(v[1].rss_bytes, 103_383_040);
        assert_eq!(v[1].processes, 3);
        assert!((v[0].elapsed_s - 6.604194641113281e-05).abs() < 1e-18);
    }

    #[test]
    fn a_malformed_line_names_its_line() {
        let text = format!("{PLAIN}       0.503        0.000       oops       66.176\n");
        match read_text(&text) {
            Err(ReadError::Malformed { line, msg, .. }) => {
                assert_eq!(line, 4);
                assert!(msg.contains("Real (MB)"), "{msg}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_incomplete_last_line_is_skipped() {
        let text = format!("{PLAIN}       0.503        0.0");
        let (v, info) = read_text(&text).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(info.truncated_line, Some(4));
    }

    #[test]
    fn a_file_without_psrecord_header_is_refused() {
        let err = read_text("1,2,3\n").unwrap_err().to_string();
        assert!(err.contains("not a psrecord log"), "{err}");
    }
}
