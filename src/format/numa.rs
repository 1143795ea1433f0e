//! A recording's NUMA table: a side file next to the recording, `OUTPUT.numa.csv`, written only
//! where the machine has more than one NUMA node and a memory cgroup is recorded: the
//! cgroup's memory per node at each row (`probe::numa`), so a one-node machine's recording has
//! no column for it. Its header names the nodes (`unix_ms,elapsed_s,node0_bytes,node1_bytes`),
//! each row the row of the recording with the same `unix_ms`. Named in the recording's
//! metadata (`Meta::numa`); read back by `summary` (docs/FORMAT.md).

use super::{OutputError, ReadError};
use crate::output::absolute;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The side file of the recording `recording`: its name with `.numa.csv` added.
pub fn side_path(recording: &Path) -> PathBuf {
    let mut s = recording.as_os_str().to_owned();
    s.push(".numa.csv");
    PathBuf::from(s)
}

/// The header of a table of `nodes`.
pub fn header(nodes: &[u32]) -> String {
    let mut h = String::from("unix_ms,elapsed_s");
    for n in nodes {
        h.push_str(&format!(",node{n}_bytes"));
    }
    h
}

/// The largest NUMA table read back.
pub const MAX_BYTES: u64 = 1 << 30;

/// The NUMA table being written.
pub struct NumaWriter {
    path: PathBuf,
    file: File,
    line: Vec<u8>,
}

impl NumaWriter {
    /// Creates the side file of `recording` for `nodes` (refused when it exists, unless
    /// `force`: replaced); with `append`, adds to one whose header names the same nodes.
    pub fn create(
        recording: &Path,
        nodes: &[u32],
        force: bool,
        append: bool,
    ) -> Result<NumaWriter, OutputError> {
        let path = absolute(&side_path(recording));
        let cannot = |e| OutputError::Open(path.clone(), "append to", e);
        let (_, opened) = super::open_side_table(&path, force, append, "the NUMA table")?;
        // Made once the recording has started: a table `--force` replaces is replaced now.
        if let Some(p) = opened.pending {
            p.commit()
                .map_err(|e| OutputError::Open(path.clone(), "replace", e))?;
        }
        let mut file = opened.file;
        let head = header(nodes);
        // The existing header, when appending (its first line only: a table may be long).
        let mut existing = String::new();
        if let Ok(f) = File::open(&path) {
            use std::io::BufRead;
            let _ = std::io::BufReader::new(f).read_line(&mut existing);
        }
        if existing.is_empty() {
            file.write_all(format!("{head}\n").as_bytes())
                .map_err(|e| OutputError::Write(path.display().to_string(), e))?;
        } else if existing.trim_end_matches('\n') != head {
            return Err(OutputError::CannotAppend(
                path.clone(),
                format!("its header is not '{head}' (other NUMA nodes)"),
            ));
        } else {
            use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
            fcntl_getfl(&file)
                .and_then(|fl| fcntl_setfl(&file, fl | OFlags::APPEND))
                .map_err(|e| cannot(e.into()))?;
        }
        Ok(NumaWriter {
            path,
            file,
            line: Vec::with_capacity(128),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the row of `unix_ms` (whole, in one write).
    pub fn write(
        &mut self,
        unix_ms: u64,
        elapsed_s: f64,
        bytes: &[u64],
    ) -> Result<(), OutputError> {
        self.line.clear();
        self.line
            .extend_from_slice(format!("{unix_ms},{elapsed_s:.6}").as_bytes());
        for b in bytes {
            self.line.extend_from_slice(format!(",{b}").as_bytes());
        }
        self.line.push(b'\n');
        self.file
            .write_all(&self.line)
            .map_err(|e| OutputError::Write(self.path.display().to_string(), e))
    }
}

/// A NUMA table read back: its nodes, and each row's time and bytes per node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NumaTable {
    pub nodes: Vec<u32>,
    pub rows: Vec<(u64, Vec<u64>)>,
}

/// Reads a NUMA table. A line that is not a row of its header's columns is an error naming the
/// file and the line; a last line cut short (a recording killed while writing it) is left out.
pub fn read(path: &Path) -> Result<NumaTable, ReadError> {
    let bytes = super::input::read_beside(path, MAX_BYTES, "a NUMA table")?
        .ok_or_else(|| ReadError::Io(path.to_path_buf(), std::io::ErrorKind::NotFound.into()))?;
    let bad = |line: usize, msg: String| ReadError::Malformed {
        path: path.to_path_buf(),
        line: line as u64,
        msg,
    };
    let text = String::from_utf8_lossy(&bytes);
    let complete = text.ends_with('\n');
    let mut lines = text.lines().enumerate();
    let head = lines.next().map(|(_, l)| l).unwrap_or_default();
    let mut cols = head.split(',');
    if (cols.next(), cols.next()) != (Some("unix_ms"), Some("elapsed_s")) {
        return Err(bad(
            1,
            format!("'{head}' is not 'unix_ms,elapsed_s,node0_bytes,...'"),
        ));
    }
    let nodes = cols
        .map(|c| {
            c.strip_prefix("node")
                .and_then(|c| c.strip_suffix("_bytes"))
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| bad(1, format!("'{c}' is not a column nodeN_bytes")))
        })
        .collect::<Result<Vec<u32>, _>>()?;
    let n = text.lines().count();
    let mut rows = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Option<Vec<u64>> = line
            .split(',')
            .enumerate()
            .map(|(k, f)| {
                // elapsed_s is a decimal; the others integers.
                if k == 1 {
                    f.parse::<f64>().ok().filter(|v| v.is_finite()).map(|_| 0)
                } else {
                    f.parse().ok()
                }
            })
            .collect();
        match parsed.filter(|p| p.len() == nodes.len() + 2) {
            Some(p) => rows.push((p[0], p[2..].to_vec())),
            None if i + 1 == n && !complete => {}
            None => {
                return Err(bad(
                    i + 1,
                    format!("not a row of {} numbers: '{line}'", nodes.len() + 2),
                ))
            }
        }
    }
    Ok(NumaTable { nodes, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_reads_back_as_written_and_an_existing_one_is_refused_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("r.csv");
        let side = side_path(&rec);
        assert_eq!(side, dir.path().join("r.csv.numa.csv"));
        let mut w = NumaWriter::create(&rec, &[0, 1], false, false).unwrap();
        w.write(1000, 0.5, &[4096, 8192]).unwrap();
        w.write(1100, 0.6, &[4096, 12288]).unwrap();
        drop(w);
        let t = read(&side).unwrap();
        assert_eq!(t.nodes, [0, 1]);
        assert_eq!(
            t.rows,
            [(1000, vec![4096, 8192]), (1100, vec![4096, 12288])]
        );
        assert!(matches!(
            NumaWriter::create(&rec, &[0, 1], false, false),
            Err(OutputError::Exists(_))
        ));
        // Appended to with the same nodes; refused for other ones.
        let mut w = NumaWriter::create(&rec, &[0, 1], false, true).unwrap();
        w.write(1200, 0.1, &[1, 2]).unwrap();
        drop(w);
        assert_eq!(read(&side).unwrap().rows.len(), 3);
        assert!(NumaWriter::create(&rec, &[0, 1, 2], false, true).is_err());
        NumaWriter::create(&rec, &[0, 2], true, false).unwrap();
        assert_eq!(read(&side).unwrap().nodes, [0, 2]);
    }

    #[test]
    fn a_bad_line_is_named_and_a_last_line_cut_short_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv.numa.csv");
        std::fs::write(
            &p,
            "unix_ms,elapsed_s,node0_bytes,node1_bytes\n1,0.1,2,3\n2,0.2,4",
        )
        .unwrap();
        assert_eq!(read(&p).unwrap().rows, [(1, vec![2, 3])]);
        std::fs::write(
            &p,
            "unix_ms,elapsed_s,node0_bytes,node1_bytes\n1,0.1,2,x\n2,0.2,4,5\n",
        )
        .unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(
            e.contains("r.csv.numa.csv:2:") && e.contains("1,0.1,2,x"),
            "{e}"
        );
        std::fs::write(&p, "unix_ms,elapsed_s,socket0\n").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains(":1:") && e.contains("socket0"), "{e}");
    }
}
