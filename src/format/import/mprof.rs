//! memory_profiler 0.61 `mprof run` files (`.dat`): `CMDLINE <command>`, `MEM <MiB> <unix s>`,
//! `CHLD <pid> <MiB> <unix s>` (with `--multiprocess`) and `FUNC ...` (decorated functions).
//!
//! Facts from memory_profiler 0.61's source: sizes are psutil's `rss / 2**20` (MiB) written
//! `{:.6f}`, timestamps `time.time()` written `{:.4f}`. With `--include-children` (`-C`) the
//! MEM value is already the sum over the tree; with `--multiprocess` (`-M`) one CHLD line per
//! child follows each MEM line. Nothing in the file says whether `-C` was used, so CHLD values
//! may or may not be inside MEM: memmon's RSS is the MEM line alone, the number `mprof peak`
//! reports, and the children are reported in a note, never added nor counted as processes of
//! the row (the summary would call MEM a sum over them).

use super::{each_line, scaled_field, Decimal, ImportError, MIB};
use crate::format::{ReadError, ReadInfo};
use crate::model::sample::Sample;
use crate::units::fmt_bytes;
use std::collections::BTreeMap;
use std::path::Path;

/// Every backend but tracemalloc counts in pages or KiB, so the 6 decimals of MiB (±0.53 bytes)
/// round back to exact bytes at the nearest KiB.
const KIB: u128 = 1024;

/// A line of an mprof file, recognised by its first word.
pub fn is_mprof_line(line: &str) -> bool {
    ["CMDLINE ", "MEM ", "CHLD ", "FUNC "]
        .iter()
        .any(|p| line.starts_with(p))
}

/// What the reader gathers besides the samples.
#[derive(Default)]
struct State {
    first_ts: Option<u64>,
    pending: Option<Sample>,
    cmdline: Option<String>,
    /// Memory of the CHLD lines since the last MEM line.
    children_now: u64,
    child_peaks: BTreeMap<i64, u64>,
    max_with_children: u64,
    funcs: u64,
}

impl State {
    fn flush_pending(&mut self, on_sample: &mut impl FnMut(&Sample)) {
        if let Some(s) = self.pending.take() {
            self.max_with_children = self
                .max_with_children
                .max(s.rss_bytes.saturating_add(self.children_now));
            on_sample(&s);
        }
        self.children_now = 0;
    }
}

/// Streams an mprof `.dat` file.
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
    let mut st = State::default();
    let mut any_line = false;
    each_line(input, &mut info, |_, line| {
        any_line = true;
        let (tag, rest) = line.split_once(' ').unwrap_or((line, ""));
        match tag {
            "CMDLINE" => {
                st.cmdline.get_or_insert_with(|| rest.trim().to_string());
            }
            "MEM" => {
                let f = fields::<2>(rest, "MEM <MiB> <unix time s>")?;
                let (rss, _) = scaled_field(f[0], "memory (MiB)", MIB, 1, KIB)?;
                let ts = timestamp(f[1])?;
                st.flush_pending(&mut on_sample);
                let first = *st.first_ts.get_or_insert(ts);
                let (unix_ms, elapsed_s) = (
                    ts / 10 + u64::from(ts % 10 >= 5),
                    (ts as f64 - first as f64) / 10_000.0,
                );
                crate::format::check_times(unix_ms, elapsed_s)?;
                st.pending = Some(Sample {
                    unix_ms,
                    elapsed_s,
                    rss_bytes: rss,
                    ..Sample::default()
                });
            }
            "CHLD" => {
                let f = fields::<3>(rest, "CHLD <pid> <MiB> <unix time s>")?;
                let pid: i64 = f[0]
                    .parse()
                    .map_err(|_| ImportError::of("pid", ImportError::NotANumber(f[0].into())))?;
                let (rss, _) = scaled_field(f[1], "memory (MiB)", MIB, 1, KIB)?;
                timestamp(f[2])?;
                let peak = st.child_peaks.entry(pid).or_default();
                *peak = (*peak).max(rss);
                // Not a process of the row: its RSS is the MEM line alone (the main process, or
                // the tree it already sums), so the row's process count stays unknown (0), as
                // in a file without CHLD lines; a count of 2 would call MEM a sum over them.
                st.children_now = st.children_now.saturating_add(rss);
            }
            "FUNC" => st.funcs += 1,
            other => return Err(ImportError::MprofKind(other.to_string())),
        }
        Ok(())
    })?;
    st.flush_pending(&mut on_sample);
    if !any_line {
        return Err(ReadError::empty(path, info.bytes));
    }
    info.source = Some("an mprof file".into());
    let mut note = "read as an mprof file: RSS in MiB (2^20 bytes) with 6 decimals (±0.53 bytes), rounded to whole KiB, \
                    which gives back the exact bytes for mprof's psutil and posix backends; times from its unix timestamps (0.1 ms)"
        .to_string();
    if let Some(c) = &st.cmdline {
        note.push_str(&format!("; command: {c}"));
    }
    info.notes.push(note);
    info.notes.push(
        "RSS is the MEM lines: the main process, or the whole tree if mprof ran with --include-children (the file does not say which); \
         no PID and no kernel peak (VmHWM) are in the file"
            .into(),
    );
    if !st.child_peaks.is_empty() {
        let peaks: Vec<String> = st
            .child_peaks
            .iter()
            .map(|(pid, b)| format!("PID {pid} {} ({b} bytes)", fmt_bytes(*b)))
            .collect();
        info.notes.push(format!(
            "CHLD lines for {} (mprof run --multiprocess), not added to RSS since MEM may already include them; \
             their peaks: {}; the largest MEM plus CHLD at one tick was {} ({} bytes): the tree's peak if mprof ran without --include-children",
            crate::units::count(st.child_peaks.len(), "child process"),
            peaks.join(", "),
            fmt_bytes(st.max_with_children),
            st.max_with_children
        ));
    }
    if st.funcs > 0 {
        info.notes.push(format!(
            "{} (function timings) skipped",
            crate::units::count(st.funcs, "FUNC line")
        ));
    }
    Ok(info)
}

/// Splits exactly `N` space-separated fields, or says what the line should hold.
fn fields<'a, const N: usize>(
    rest: &'a str,
    form: &'static str,
) -> Result<[&'a str; N], ImportError> {
    let v: Vec<&str> = rest.split_whitespace().collect();
    v.try_into()
        .map_err(|v: Vec<&str>| ImportError::MprofFields {
            form,
            found: v.len(),
        })
}

/// A unix timestamp in seconds, to ten-thousandths of a second (mprof's resolution).
fn timestamp(field: &str) -> Result<u64, ImportError> {
    let d = Decimal::parse(field).map_err(|e| ImportError::of("timestamp", e))?;
    d.scaled(10_000, 1, 1)
        .ok_or_else(|| ImportError::of("timestamp", ImportError::OutOfRange(field.into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<(Vec<Sample>, ReadInfo), ReadError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("mprofile.dat");
        std::fs::write(&p, text).unwrap();
        let mut v = vec![];
        let info = read(&p, |s| v.push(s.clone()))?;
        Ok((v, info))
    }

    #[test]
    fn mem_lines_become_samples_with_exact_bytes_and_times() {
        let (v, info) =
            read_text("CMDLINE python3 alloc.py\nMEM 0.199219 1795980241.1737\nMEM 63.257812 1795980241.5771\n").unwrap();
        assert_eq!(v.len(), 2);
        // 63.2578125 MiB, printed as 63.257812: 16194 pages.
        assert_eq!(v[1].rss_bytes, 16194 * 4096);
        assert_eq!(v[0].rss_bytes, 51 * 4096);
        assert_eq!(v[1].unix_ms, 1_795_980_241_577);
        assert!((v[1].elapsed_s - 0.4034).abs() < 1e-9);
        assert!(info.notes[0].contains("command: python3 alloc.py"));
    }

    #[test]
    fn children_are_counted_but_not_added() {
        let text = "CMDLINE python3 tree.py\nMEM 43.726562 1795980245.6186\nCHLD 12619 53.183594 1795980245.6201\n\
                    MEM 43.726562 1795980245.7206\nCHLD 12619 0.000000 1795980245.7220\n";
        let (v, info) = read_text(text).unwrap();
        assert_eq!(v[0].rss_bytes, 45_850_624);
        // MEM is one number, not a sum over the main process and its children.
        assert_eq!((v[0].processes, v[1].processes), (0, 0));
        let note = info.notes.iter().find(|n| n.contains("CHLD")).unwrap();
        assert!(
            note.contains(&format!("{} bytes", 45_850_624u64 + 55_767_040)),
            "{note}"
        );
    }

    #[test]
    fn func_lines_are_skipped_and_counted() {
        let (v, info) = read_text("MEM 1.0 10.0\nFUNC __main__.f 1.0 10.0 2.0 11.0 1\n").unwrap();
        assert_eq!(v.len(), 1);
        assert!(info
            .notes
            .iter()
            .any(|n| n.starts_with("1 FUNC line (function timings) skipped")));
    }

    #[test]
    fn an_unknown_line_names_its_line() {
        match read_text("MEM 1.0 10.0\nMEMORY 1.0 11.0\n") {
            Err(ReadError::Malformed { line: 2, msg, .. }) => {
                assert!(msg.contains("MEMORY"), "{msg}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_mem_line_with_a_missing_field_is_refused() {
        let err = read_text("MEM 1.0\nMEM 2.0 3.0\n").unwrap_err().to_string();
        assert!(
            err.contains(":1: expected MEM <MiB> <unix time s>"),
            "{err}"
        );
    }
}
