//! A recording's anatomy table (`record --anatomy`): a side file next to the recording,
//! `OUTPUT.anatomy.jsonl`, one JSON object per anatomy (`model::anatomy::Anatomy`), named in the
//! recording's metadata (`Meta::anatomy`). Created as the recording is: refused when it exists
//! unless `--force` (replaced) or `--append` (added to), never through a symlink, locked for the
//! session. Read back by `summary` (docs/FORMAT.md).

use super::{OutputError, ReadError};
use crate::model::anatomy::Anatomy;
use crate::output::absolute;
use crate::output::{At, FileId, Pending, Place};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The side file of the recording `recording`: its name with `.anatomy.jsonl` added.
pub fn side_path(recording: &Path) -> PathBuf {
    let mut s = recording.as_os_str().to_owned();
    s.push(".anatomy.jsonl");
    PathBuf::from(s)
}

/// The largest anatomy table read back (an anatomy is at most a few hundred groups).
pub const MAX_BYTES: u64 = 256 << 20;

/// The anatomy table being written.
pub struct AnatomyWriter {
    path: PathBuf,
    place: Place,
    file: File,
    /// The file memmon created (removed when the recording is discarded).
    created: Option<FileId>,
    /// With `--force` over an existing table: the new one, put in place by `commit` once the
    /// recording has started (`Output`'s rule).
    pending: Option<Pending>,
}

impl AnatomyWriter {
    /// Refuses an existing side file of `recording` unless `force` or `append`: asked before
    /// the recording itself is created, so a refusal leaves nothing behind.
    pub fn check(recording: &Path, force: bool, append: bool) -> Result<(), OutputError> {
        let path = absolute(&side_path(recording));
        let place =
            Place::resolve(&path).map_err(|e| OutputError::Open(path.clone(), "create", e))?;
        match place.at() {
            Ok(At::Nothing) => Ok(()),
            Ok(_) if force || append => Ok(()),
            Ok(_) => Err(OutputError::Exists(path)),
            Err(e) => Err(OutputError::Open(path, "create", e)),
        }
    }

    /// Creates (or with `append` opens at its end) the side file of `recording`.
    pub fn create(
        recording: &Path,
        force: bool,
        append: bool,
    ) -> Result<AnatomyWriter, OutputError> {
        let path = absolute(&side_path(recording));
        let cannot = |e| OutputError::Open(path.clone(), "append to", e);
        let (place, opened) = super::open_side_table(&path, force, append, "the anatomy table")?;
        if !opened.created {
            use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
            fcntl_getfl(&opened.file)
                .and_then(|fl| fcntl_setfl(&opened.file, fl | OFlags::APPEND))
                .map_err(|e| cannot(e.into()))?;
        }
        Ok(AnatomyWriter {
            created: opened.created.then_some(opened.id),
            pending: opened.pending,
            path,
            place,
            file: opened.file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one anatomy as a line (whole, in one write: a reader never sees half of one).
    pub fn write(&mut self, a: &Anatomy) -> Result<(), OutputError> {
        let mut line = serde_json::to_vec(a).expect("an anatomy serializes");
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(|e| OutputError::Write(self.path.display().to_string(), e))
    }

    /// The recording has started: a table `--force` is to replace is replaced now.
    pub fn commit(&mut self) -> Result<(), OutputError> {
        match self.pending.take() {
            Some(p) => p
                .commit()
                .map_err(|e| OutputError::Open(self.path.clone(), "replace", e)),
            None => Ok(()),
        }
    }

    /// Nothing was recorded: removes the file memmon created (a table `--force` was to
    /// replace is left as it was).
    pub fn discard(&mut self) {
        if self.pending.take().is_some() {
            self.created = None;
        }
        if let Some(id) = self.created.take() {
            self.place.remove_if(id);
        }
    }
}

/// Reads an anatomy table: every line an anatomy, in the order taken. A line that is not one
/// is an error naming the file and the line; a last line cut short (a recording killed while
/// writing it) is left out.
pub fn read(path: &Path) -> Result<Vec<Anatomy>, ReadError> {
    let bytes = super::input::read_beside(path, MAX_BYTES, "an anatomy table")?
        .ok_or_else(|| ReadError::Io(path.to_path_buf(), std::io::ErrorKind::NotFound.into()))?;
    let complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let n = lines.len();
    let mut out = Vec::new();
    for (i, line) in lines.into_iter().enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Anatomy>(line) {
            Ok(a) => out.push(a),
            // The last line, without its newline: cut short by a kill.
            Err(_) if i + 1 == n && !complete => {}
            Err(e) => {
                return Err(ReadError::Malformed {
                    path: path.to_path_buf(),
                    line: i as u64 + 1,
                    msg: format!("not an anatomy: {e}"),
                })
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::anatomy::Trigger;

    fn anatomy(rss: u64) -> Anatomy {
        Anatomy {
            unix_ms: 1,
            elapsed_s: 0.5,
            trigger: Trigger::Start,
            span: None,
            rss_bytes: rss,
            processes: 1,
            smaps_processes: 0,
            read_us: 10,
            unread: Vec::new(),
            groups: Vec::new(),
            ledger: None,
            ledger_unanswered: false,
        }
    }

    #[test]
    fn the_side_file_is_refused_when_there_replaced_with_force_and_added_to_with_append() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("r.csv");
        let side = side_path(&rec);
        assert_eq!(side, dir.path().join("r.csv.anatomy.jsonl"));
        let mut w = AnatomyWriter::create(&rec, false, false).unwrap();
        w.write(&anatomy(1)).unwrap();
        drop(w);
        assert!(matches!(
            AnatomyWriter::check(&rec, false, false),
            Err(OutputError::Exists(p)) if p == side
        ));
        assert!(matches!(
            AnatomyWriter::create(&rec, false, false),
            Err(OutputError::Exists(_))
        ));
        let mut w = AnatomyWriter::create(&rec, false, true).unwrap();
        w.write(&anatomy(2)).unwrap();
        drop(w);
        let rss: Vec<u64> = read(&side).unwrap().iter().map(|a| a.rss_bytes).collect();
        assert_eq!(rss, [1, 2]);
        AnatomyWriter::check(&rec, true, false).unwrap();
        // --force replaces it once the recording has started (committed), not before: a
        // recording discarded (its command could not be run) leaves the old table.
        let mut w = AnatomyWriter::create(&rec, true, false).unwrap();
        w.discard();
        drop(w);
        let rss: Vec<u64> = read(&side).unwrap().iter().map(|a| a.rss_bytes).collect();
        assert_eq!(rss, [1, 2]);
        let mut w = AnatomyWriter::create(&rec, true, false).unwrap();
        w.write(&anatomy(3)).unwrap();
        w.commit().unwrap();
        drop(w);
        let rss: Vec<u64> = read(&side).unwrap().iter().map(|a| a.rss_bytes).collect();
        assert_eq!(rss, [3]);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file"
        );
    }

    #[test]
    fn a_bad_line_is_named_and_a_last_line_cut_short_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.anatomy.jsonl");
        let good = serde_json::to_string(&anatomy(7)).unwrap();
        std::fs::write(&p, format!("{good}\n{}", &good[..20])).unwrap();
        assert_eq!(read(&p).unwrap().len(), 1);
        std::fs::write(&p, format!("{good}\nnot json\n{good}\n")).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("a.anatomy.jsonl:2:"), "{e}");
    }
}
