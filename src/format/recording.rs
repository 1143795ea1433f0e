//! memmon's own recordings, read back: CSV (the header, then a body parsed on several threads:
//! `csv::read_body`) with its metadata sidecar, or JSON Lines (metadata, rows and end records
//! in one file). One reader among the importers (`read.rs` hands it the input it recognised);
//! memory use does not grow with the file.

use super::input;
use super::meta::{EndInfo, Meta, RowLoss};
use super::read::{for_each_line, is_sidecar_head, ReadError, ReadInfo, Sink};
use super::{csv, jsonl, Format};
use crate::model::sample::{Event, Sample};
use std::io::{self, Read};
use std::path::Path;

/// Streams a memmon recording (CSV or JSON Lines, told apart by content), calling `on_sample`
/// for each sample in order. Memory use does not grow with the file. For CSV, the sidecar
/// `FILE.meta.json` is read when present. `-` is stdin; gzip and zstd are decompressed.
pub fn read_recording(
    path: &Path,
    mut on_sample: impl FnMut(&Sample),
) -> Result<ReadInfo, ReadError> {
    read_from(input::open(path)?, &mut on_sample)
}

/// `read_recording` on an input already opened (and recognised by `read.rs`).
pub fn read_from(input: input::Input, sink: &mut impl Sink) -> Result<ReadInfo, ReadError> {
    let path = input.path.clone();
    // Blank lines before the first line that says what the file is.
    let head = &input.head;
    let (mut pos, mut blank_lines) = (0, 0u64);
    while let Some(k) = memchr::memchr(b'\n', &head[pos..]) {
        if !head[pos..pos + k].trim_ascii().is_empty() {
            break;
        }
        pos += k + 1;
        blank_lines += 1;
    }
    if input.head_is_all && head[pos..].trim_ascii().is_empty() {
        return Err(ReadError::empty(&path, head.len() as u64));
    }
    if pos >= head.len() {
        return Err(malformed(
            &path,
            blank_lines,
            format!(
                "the first {} KiB hold only blank lines",
                input::HEAD_BYTES >> 10
            ),
        ));
    }

    if head[pos] != b'{' {
        return read_csv(input, pos, blank_lines, sink);
    }
    if is_sidecar_head(&head[pos..]) {
        return Err(ReadError::sidecar(&path));
    }
    read_jsonl(input, sink)
}

fn malformed(path: &Path, line: u64, msg: String) -> ReadError {
    ReadError::Malformed {
        path: path.to_path_buf(),
        line,
        msg,
    }
}

/// A CSV recording whose header starts at `pos` of the input's head (after `blank_lines`
/// blank lines): the header, then a body (the bulk of most recordings) parsed on several
/// threads.
fn read_csv(
    input: input::Input,
    pos: usize,
    blank_lines: u64,
    sink: &mut impl Sink,
) -> Result<ReadInfo, ReadError> {
    let path = input.path.clone();
    let head = &input.head;
    let mut info = ReadInfo {
        path: path.clone(),
        ..ReadInfo::default()
    };
    info.format = Some(Format::Csv);
    let header_line = blank_lines + 1;
    let Some(k) = memchr::memchr(b'\n', &head[pos..]) else {
        // memmon writes its header and newline at once: a file that ends inside the header
        // was cut (its columns past the cut unknown), not a recording of no row.
        let why = if input.head_is_all {
            "the file ends inside its header line (no newline after it): the recording was cut"
                .to_string()
        } else {
            format!(
                "the first line is longer than {} KiB: not a recording's header",
                input::HEAD_BYTES >> 10
            )
        };
        return Err(malformed(&path, header_line, why));
    };
    let (header, body_at) = (&head[pos..pos + k], pos + k + 1);
    let layout = csv::CsvLayout::from_header(header.trim_ascii_end())
        .map_err(|e| malformed(&path, header_line, e.to_string()))?;
    let body_at_bytes = body_at as u64;
    // The sidecar first: its sessions' metadata goes to the sink before their rows.
    let side = input::sidecar_for(&input);
    if let Some(side) = &side {
        read_sidecar(side, &mut info)?;
    }
    let mut sessions = CsvSessions::new(info.meta.as_ref(), sink);
    let mut head = input.head;
    head.drain(..body_at);
    let mut body: Box<dyn Read + Send> = Box::new(io::Cursor::new(head).chain(input.rest));
    let end =
        csv::read_body(&mut body, &layout, header_line, &mut |s| sessions.row(s)).map_err(|e| {
            match e {
                csv::BodyError::Io(e) => ReadError::Io(path.clone(), e),
                csv::BodyError::Row(line, msg) => malformed(&path, line, msg),
            }
        })?;
    if let (Some(side), Some(meta), Some(rows)) = (&side, &info.meta, sessions.times) {
        check_sidecar_times(side, &path, meta, rows)?;
    }
    if let (Some(side), Some(meta)) = (&side, &info.meta) {
        check_sidecar_counts(side, &path, meta, sessions.rows)?;
    }
    if sessions.rows == 0 {
        let counted: u64 = sessions
            .sessions
            .iter()
            .filter_map(|(_, e)| e.as_ref())
            .map(|e| e.samples)
            .sum();
        if counted > 0 {
            return Err(malformed(
                &path,
                header_line + 1,
                format!(
                    "no row after the header, though its sidecar's end record counts {}: the file was cut (or the sidecar is another recording's)",
                    crate::units::count(counted, "sample")
                ),
            ));
        }
    }
    sessions.finish();
    info.bytes = body_at_bytes + end.bytes;
    info.truncated_line = end.truncated_line;
    Ok(info)
}

/// A JSON Lines recording: metadata, rows and end records in one file, read line by line.
fn read_jsonl(input: input::Input, sink: &mut impl Sink) -> Result<ReadInfo, ReadError> {
    let path = input.path.clone();
    let mut info = ReadInfo {
        path: path.clone(),
        ..ReadInfo::default()
    };
    info.format = Some(Format::Jsonl);
    let mut result: Result<(), ReadError> = Ok(());
    let mut any_row = false;
    // The rows of the session being read, for its end record's count.
    let mut session_rows = 0u64;
    let mut reader = input.into_reader();
    let lines = for_each_line(
        &mut reader,
        input::MAX_LINE_BYTES,
        |line_no, line, complete| {
            if !complete {
                if info.meta.is_none() && !any_row {
                    // Cut inside its first record: nothing of the recording is left.
                    result = Err(malformed(
                        &path,
                        line_no,
                        "the file ends inside its first line (its metadata): the recording was cut"
                            .into(),
                    ));
                    return false;
                }
                info.truncated_line = Some(line_no);
                return true;
            }
            if line.trim_ascii().is_empty() {
                return true;
            }
            match jsonl::parse_line(line) {
                Ok(jsonl::Line::Sample(s)) => {
                    any_row = true;
                    session_rows += 1;
                    sink.sample(&s)
                }
                Ok(jsonl::Line::Meta(m)) => {
                    if let Err(e) = super::meta::check_schema(&m) {
                        result = Err(malformed(&path, line_no, e.to_string()));
                        return false;
                    }
                    session_rows = 0;
                    sink.session(&m);
                    if info.meta.is_none() {
                        info.meta = Some(*m)
                    }
                }
                Ok(jsonl::Line::End(e)) => {
                    // Lines taken out of the file after the recording: its end still counts them.
                    if e.samples > session_rows {
                        sink.rows_lost(&RowLoss {
                            counted: e.samples,
                            read: session_rows,
                            in_session: true,
                            sidecar: false,
                            sessions: 1,
                            sessions_read: 1,
                        });
                    }
                    session_rows = 0;
                    sink.session_end(&e);
                    info.end = Some(*e)
                }
                Err(e) => {
                    result = Err(malformed(&path, line_no, e.0));
                    return false;
                }
            }
            true
        },
    );
    info.bytes = lines.map_err(|e| e.into_read_error(&path))?;
    result?;
    Ok(info)
}

/// Hands a CSV recording's sessions to a sink around its rows: the sidecar holds every
/// session's metadata (the earlier ones of an `--append`ed file, then the latest), each with
/// its end; a session begins at the first row and at each later `start` row.
struct CsvSessions<'a, S: Sink> {
    sink: &'a mut S,
    /// The sessions' metadata and ends, oldest first; `next` is the one the next session takes.
    sessions: Vec<(Meta, Option<EndInfo>)>,
    next: usize,
    rows: u64,
    /// The rows of the session being read.
    session_rows: u64,
    /// The first and the last row's `unix_ms`, over the rows that have one.
    times: Option<(u64, u64)>,
}

impl<'a, S: Sink> CsvSessions<'a, S> {
    fn new(meta: Option<&Meta>, sink: &'a mut S) -> Self {
        let sessions = meta.map_or_else(Vec::new, |m| {
            let mut all: Vec<(Meta, Option<EndInfo>)> = m
                .earlier_sessions
                .iter()
                .map(|e| (e.clone(), e.end.clone()))
                .collect();
            let latest = Meta {
                earlier_sessions: Vec::new(),
                ..m.clone()
            };
            all.push((latest, m.end.clone()));
            all
        });
        CsvSessions {
            sink,
            sessions,
            next: 0,
            rows: 0,
            session_rows: 0,
            times: None,
        }
    }

    fn row(&mut self, s: &Sample) {
        let begins = self.rows == 0 || matches!(s.event, Some(Event::Start));
        if begins {
            if self.rows > 0 {
                self.end_session();
            }
            if let Some((meta, _)) = self.sessions.get(self.next) {
                self.sink.session(meta);
            }
            self.next += 1;
            self.session_rows = 0;
        }
        self.rows += 1;
        self.session_rows += 1;
        if s.unix_ms > 0 {
            let (first, last) = self.times.get_or_insert((s.unix_ms, s.unix_ms));
            *first = (*first).min(s.unix_ms);
            *last = (*last).max(s.unix_ms);
        }
        self.sink.sample(s);
    }

    /// The end of the session the last rows belong to, when the sidecar has it.
    fn end_session(&mut self) {
        if let Some((_, Some(end))) = self.next.checked_sub(1).and_then(|i| self.sessions.get(i)) {
            self.sink.session_end(end);
        }
    }

    fn finish(mut self) {
        if self.rows == 0 {
            // A session with no row still has its metadata and end (a command that ended
            // before its first sample).
            if let Some((meta, _)) = self.sessions.first() {
                self.sink.session(meta);
                self.next = 1;
            }
        } else if let Some(loss) = self.loss() {
            self.sink.rows_lost(&loss);
        }
        self.end_session();
    }

    /// Rows the sidecar's end records count that the file does not hold: rows cut from its
    /// end after the recording (the sidecar kept). Judged on the whole file, since a session
    /// that ended before its first row holds no row to begin it here.
    fn loss(&self) -> Option<RowLoss> {
        let ends = || self.sessions.iter().filter_map(|(_, end)| end.as_ref());
        let counted: u64 = ends().map(|end| end.samples).sum();
        if self.rows >= counted {
            return None;
        }
        let last = self.next.checked_sub(1).and_then(|i| self.sessions.get(i));
        Some(RowLoss {
            counted,
            read: self.rows,
            in_session: last
                .and_then(|(_, end)| end.as_ref())
                .is_some_and(|end| self.session_rows < end.samples),
            sidecar: true,
            sessions: ends().count() as u32,
            sessions_read: self.next.min(self.sessions.len()) as u32,
        })
    }
}

/// How far the rows may lie outside the sidecar's sessions before the sidecar is taken for
/// another recording's: the wall clock may be stepped (NTP) while a recording runs.
const SIDECAR_CLOCK_SLACK_MS: u64 = 10_000;

/// Refuses a sidecar that describes another recording: the rows (`rows`, the first and last
/// `unix_ms`) lie entirely before its first session began, or entirely after its last one
/// ended, by more than [`SIDECAR_CLOCK_SLACK_MS`]. Only where that is unambiguous: rows
/// within the sessions' span pass whatever their gaps (a target waited for, `--append`ed
/// sessions); a last session with no end (a killed recorder) bounds nothing after its start;
/// a sidecar with no times (0) is not judged.
pub(super) fn check_sidecar_times(
    side: &Path,
    csv: &Path,
    meta: &Meta,
    (first, last): (u64, u64),
) -> Result<(), ReadError> {
    let started = meta
        .earlier_sessions
        .iter()
        .chain(std::iter::once(meta))
        .map(|m| m.started_unix_ms)
        .filter(|&t| t > 0)
        .min();
    let Some(started) = started else {
        return Ok(());
    };
    // Every session's rows come before the last session's end.
    let ended = meta
        .end
        .as_ref()
        .map(|e| e.ended_unix_ms)
        .filter(|&t| t >= started);
    let before = last.saturating_add(SIDECAR_CLOCK_SLACK_MS) < started;
    let after = ended.is_some_and(|e| first > e.saturating_add(SIDECAR_CLOCK_SLACK_MS));
    if !before && !after {
        return Ok(());
    }
    use crate::units::fmt_unix_ms;
    let ran = match ended {
        Some(e) => format!("from {} to {}", fmt_unix_ms(started), fmt_unix_ms(e)),
        None => format!("from {} (no end record)", fmt_unix_ms(started)),
    };
    Err(ReadError::ForeignSidecar {
        sidecar: side.to_path_buf(),
        msg: format!(
            "does not describe {}: its recording ran {ran}, the rows from {} to {}, {}; move the sidecar away to read the rows alone",
            csv.display(),
            fmt_unix_ms(first),
            fmt_unix_ms(last),
            if before {
                "all before it began"
            } else {
                "all after it ended"
            },
        ),
    })
}

/// Refuses a sidecar whose end records count fewer rows than the file holds (`rows`), every
/// session ended: a recorder writes each row it counts and no other, so these rows are not the
/// ones it describes (another recording's sidecar, copied or renamed beside them). Fewer rows
/// than counted is a file cut after the recording, said by `CsvSessions::loss`.
pub(super) fn check_sidecar_counts(
    side: &Path,
    csv: &Path,
    meta: &Meta,
    rows: u64,
) -> Result<(), ReadError> {
    let sessions = || meta.earlier_sessions.iter().chain(std::iter::once(meta));
    if sessions().any(|m| m.end.is_none()) {
        return Ok(());
    }
    let counted: u64 = sessions()
        .filter_map(|m| m.end.as_ref())
        .map(|e| e.samples)
        .sum();
    if rows <= counted {
        return Ok(());
    }
    Err(ReadError::ForeignSidecar {
        sidecar: side.to_path_buf(),
        msg: format!(
            "does not describe {}: its end records count {}, the file holds {}, more than its recorder wrote; move the sidecar away to read the rows alone",
            csv.display(),
            crate::units::count(counted, "row"),
            crate::units::count(rows, "row"),
        ),
    })
}

/// Reads a CSV recording's metadata sidecar, when there is one. A sidecar that is there but
/// cannot be read or parsed is always an error (never silently ignored).
fn read_sidecar(side: &Path, info: &mut ReadInfo) -> Result<(), ReadError> {
    let Some(text) = input::read_sidecar_text(side)? else {
        return Ok(());
    };
    match serde_json::from_str::<Meta>(&text) {
        Ok(m) => {
            super::meta::check_schema(&m).map_err(|e| ReadError::Malformed {
                path: side.to_path_buf(),
                line: 1,
                msg: e.to_string(),
            })?;
            info.end = m.end.clone();
            info.meta = Some(m);
            Ok(())
        }
        Err(e) => Err(ReadError::Malformed {
            path: side.to_path_buf(),
            line: e.line() as u64,
            msg: format!("damaged metadata sidecar: {e}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    fn big_csv(rows: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = csv::CsvWriter::new(&mut buf, true).unwrap();
        for i in 0..rows {
            let s = Sample {
                unix_ms: 1_700_000_000_000 + i as u64,
                elapsed_s: i as f64 / 1000.0,
                rss_bytes: (i as u64 % 977) << 20,
                processes: 1,
                ..Sample::default()
            };
            w.write_sample(&s).unwrap();
        }
        buf
    }

    #[test]
    fn a_large_csv_comes_back_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.csv");
        std::fs::write(&p, big_csv(60_000)).unwrap();
        let mut next = 0u64;
        let info = read_recording(&p, |s| {
            assert_eq!(s.unix_ms, 1_700_000_000_000 + next);
            next += 1;
        })
        .unwrap();
        assert_eq!(next, 60_000);
        assert_eq!(info.truncated_line, None);
        assert_eq!(info.bytes, std::fs::metadata(&p).unwrap().len());
    }

    #[test]
    fn a_bad_line_deep_in_a_large_csv_is_named_by_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.csv");
        let text = String::from_utf8(big_csv(60_000)).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[45_000] = "1,2,oops";
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        match read_recording(&p, |_| {}) {
            Err(ReadError::Malformed { line, .. }) => assert_eq!(line, 45_001),
            other => panic!("expected a malformed line, got {other:?}"),
        }
    }

    #[test]
    fn a_truncated_large_csv_names_its_incomplete_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cut.csv");
        let mut data = big_csv(60_000);
        data.truncate(data.len() - 7);
        std::fs::write(&p, &data).unwrap();
        let mut n = 0;
        let info = read_recording(&p, |_| n += 1).unwrap();
        assert_eq!(n, 59_999);
        assert_eq!(info.truncated_line, Some(60_001));
    }

    /// What a reader handed on: rows, losses said, end records.
    #[derive(Default)]
    struct Said {
        rows: u64,
        losses: Vec<RowLoss>,
        ends: u64,
    }

    impl Sink for Said {
        fn sample(&mut self, _: &Sample) {
            self.rows += 1;
        }

        fn rows_lost(&mut self, loss: &RowLoss) {
            assert_eq!(self.ends, 0, "said before the session's end");
            self.losses.push(*loss);
        }

        fn session_end(&mut self, _: &EndInfo) {
            self.ends += 1;
        }
    }

    fn said(path: &Path) -> Said {
        let mut said = Said::default();
        read_from(input::open(path).unwrap(), &mut said).unwrap();
        said
    }

    #[test]
    fn rows_cut_from_a_finished_recording_are_said_with_both_counts() {
        let dir = tempfile::tempdir().unwrap();
        let ended = |samples| Meta {
            end: Some(EndInfo {
                samples,
                ..EndInfo::default()
            }),
            ..Meta::example("pid")
        };
        // CSV: 10 rows, its sidecar's end record counting them; `head -n -3` of it.
        let p = dir.path().join("cut.csv");
        let text = String::from_utf8(big_csv(10)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        std::fs::write(&p, lines[..lines.len() - 3].join("\n") + "\n").unwrap();
        std::fs::write(sidecar_path(&p), serde_json::to_vec(&ended(10)).unwrap()).unwrap();
        let cut = said(&p);
        assert_eq!((cut.rows, cut.ends), (7, 1));
        let loss = RowLoss {
            counted: 10,
            read: 7,
            in_session: true,
            sidecar: true,
            sessions: 1,
            sessions_read: 1,
        };
        assert_eq!(cut.losses, [loss]);
        std::fs::write(&p, &text).unwrap();
        assert!(said(&p).losses.is_empty(), "the whole file");
        // JSON Lines: its end record inline, three row lines taken out before it.
        let j = dir.path().join("cut.jsonl");
        let mut rows = Vec::new();
        let mut w = jsonl::JsonlWriter::new(&mut rows);
        for i in 0..10 {
            let s = Sample {
                unix_ms: 1_700_000_000_000 + i,
                elapsed_s: i as f64,
                rss_bytes: 1 << 20,
                processes: 1,
                ..Sample::default()
            };
            super::super::RowSink::write_sample(&mut w, &s).unwrap();
        }
        let rows = String::from_utf8(rows).unwrap();
        let kept: Vec<&str> = rows
            .lines()
            .enumerate()
            .filter(|(i, _)| !(4..7).contains(i))
            .map(|(_, l)| l)
            .collect();
        let mut file = jsonl::meta_line(&Meta::example("pid"));
        file.extend((kept.join("\n") + "\n").bytes());
        file.extend(jsonl::end_line(&EndInfo {
            samples: 10,
            ..EndInfo::default()
        }));
        std::fs::write(&j, &file).unwrap();
        let cut = said(&j);
        assert_eq!((cut.rows, cut.ends), (7, 1));
        assert_eq!(
            cut.losses,
            [RowLoss {
                sidecar: false,
                ..loss
            }]
        );
    }

    #[test]
    fn a_sidecar_of_one_session_without_earlier_sessions_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.csv");
        std::fs::write(&p, csv::header() + "\n").unwrap();
        // A sidecar as memmon wrote it before `earlier_sessions` existed.
        let old = r#"{"format":"memmon-recording","schema_version":1,"memmon_version":"0.1.0",
            "host":"h","kernel":"6.1","page_size_bytes":4096,"started_unix_ms":1,
            "interval_s":0.1,"interval":"100ms","target":{"mode":"pid","spec":"7","pid":7,
            "start_time_ticks":1,"comm":"x","cmdline":"x"},"children":true,"sources":[],
            "columns":[]}"#;
        std::fs::write(sidecar_path(&p), old).unwrap();
        let info = read_recording(&p, |_| {}).unwrap();
        assert!(info.meta.unwrap().earlier_sessions.is_empty());
        // Appending turns it into the first of the earlier sessions.
        let sessions = parse_sessions(&std::fs::read(sidecar_path(&p)).unwrap()).unwrap();
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions[0].interval, "100ms");
    }

    #[test]
    fn a_sidecar_is_refused_only_where_the_rows_lie_wholly_outside_its_sessions() {
        let side = Path::new("w.csv.meta.json");
        let session = |started, ended: Option<u64>| Meta {
            started_unix_ms: started,
            end: ended.map(|e| EndInfo {
                ended_unix_ms: e,
                ..EndInfo::default()
            }),
            ..Meta::example("pid")
        };
        let check = |m: &Meta, rows| check_sidecar_times(side, Path::new("w.csv"), m, rows).is_ok();
        const MIN: u64 = 60_000;
        let t = 1_700_000_000_000;
        let m = session(t, Some(t + MIN));
        assert!(check(&m, (t + 100, t + MIN - 100)), "its own rows");
        // A target waited for: the first row long after the start, still within it.
        assert!(check(&m, (t + MIN - 1000, t + MIN - 500)));
        // Clock slack: a few seconds either side.
        assert!(check(&m, (t + MIN + 5000, t + MIN + 6000)));
        assert!(check(&m, (t - 9000, t - 8000)));
        // Another recording's rows, minutes after it ended or before it began.
        assert!(!check(&m, (t + 5 * MIN, t + 6 * MIN)));
        assert!(!check(&m, (t - 6 * MIN, t - 5 * MIN)));
        // A killed recorder (no end record): rows after its start may be its own.
        assert!(check(&session(t, None), (t + 60 * MIN, t + 61 * MIN)));
        assert!(!check(&session(t, None), (t - 6 * MIN, t - 5 * MIN)));
        // --append: the earlier sessions' start and the last one's end span the rows.
        let appended = Meta {
            earlier_sessions: vec![session(t, Some(t + MIN))],
            ..session(t + 30 * MIN, Some(t + 31 * MIN))
        };
        assert!(check(&appended, (t + 100, t + 31 * MIN - 100)));
        assert!(
            check(&appended, (t + 100, t + MIN - 100)),
            "the first session's rows"
        );
        assert!(!check(&appended, (t + 40 * MIN, t + 41 * MIN)));
        // A sidecar with no times (0) tells nothing.
        assert!(check(&session(0, None), (t, t + MIN)));
    }
}
