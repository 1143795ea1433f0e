//! The recorder's NUMA source: on a machine with more than one NUMA node, the recorded memory
//! cgroup's memory per node (`memory.numa_stat`, `probe::numa`) at every row, written to the
//! recording's NUMA table (`format::numa`) beside it. A one-node machine, a recording without a
//! cgroup or not to a file, writes none: the recording has no column for it.

use crate::format::meta::NumaMeta;
use crate::format::numa::NumaWriter;
use crate::format::OutputError;
use crate::model::sample::Sample;
use crate::probe::cgroup::{CgroupVersion, MemCgroup};
use crate::probe::numa::{NumaFormat, NumaStat};
use std::path::Path;

/// A cgroup's `memory.numa_stat` read at each row into the NUMA table.
pub struct NumaSource {
    stat: NumaStat,
    nodes: Vec<u32>,
    writer: NumaWriter,
    /// The first read or write error (later rows are not written after a write error).
    pub error: Option<String>,
    broken: bool,
}

/// Why no NUMA table is written, when the machine has more than one node (said once).
type NotRead = String;

impl NumaSource {
    /// Starts reading `cg`'s memory per node into the NUMA table of `recording`, when the
    /// machine (under `sys_root`) has more than one node. `Ok(None)`: one node or none, nothing
    /// to say; `Err`: why not, on a machine with several.
    pub fn start(
        sys_root: &Path,
        cg: Option<&MemCgroup>,
        recording: Option<&Path>,
        force: bool,
        append: bool,
    ) -> Result<Option<NumaSource>, NotRead> {
        let nodes = crate::probe::numa::nodes(sys_root);
        if nodes.len() < 2 {
            return Ok(None);
        }
        let n = nodes.len();
        let Some(cg) = cg else {
            return Err(format!(
                "{n} NUMA nodes, but no memory cgroup is recorded (--cgroup): the tree's memory per node is not read"
            ));
        };
        let Some(recording) = recording else {
            return Err(format!(
                "{n} NUMA nodes, but the recording is not a file: no NUMA table beside it"
            ));
        };
        let format = match cg.version {
            CgroupVersion::V1 => NumaFormat::V1,
            CgroupVersion::V2 => NumaFormat::V2,
        };
        let stat = NumaStat::open(&cg.dir, format, crate::probe::ProcFs::page_size())
            .map_err(|e| format!("{n} NUMA nodes, but {e}"))?;
        let writer = NumaWriter::create(recording, &nodes, force, append)
            .map_err(|e| format!("{n} NUMA nodes, but {e:#}"))?;
        Ok(Some(NumaSource {
            stat,
            nodes,
            writer,
            error: None,
            broken: false,
        }))
    }

    /// The NUMA table's path.
    pub fn path(&self) -> &Path {
        self.writer.path()
    }

    /// The metadata's entry for the table.
    pub fn meta(&self) -> NumaMeta {
        let format = match self.stat.format() {
            NumaFormat::V1 => "v1 hierarchical_total (pages times the page size)",
            NumaFormat::V2 => "v2 anon + file",
        };
        NumaMeta {
            file: self
                .writer
                .path()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            nodes: self.nodes.clone(),
            source: format!("{}: {format}", self.stat.path().display()),
        }
    }

    /// Reads the cgroup's memory per node now and writes the row of `s` (a node the file does
    /// not name has 0). A failed read leaves the row out of the table; a failed write ends
    /// the table. The first error is returned, to be said once.
    pub fn tick(&mut self, s: &Sample) -> Option<String> {
        if self.broken {
            return None;
        }
        let failed = match self.stat.read() {
            Ok(per_node) => {
                let bytes: Vec<u64> = self
                    .nodes
                    .iter()
                    .map(|n| per_node.iter().find(|(m, _)| m == n).map_or(0, |(_, b)| *b))
                    .collect();
                let written: Result<(), OutputError> =
                    self.writer.write(s.unix_ms, s.elapsed_s, &bytes);
                self.broken = written.is_err();
                written
                    .err()
                    .map(|e| format!("{e}; no more NUMA rows are written"))
            }
            Err(e) => Some(format!(
                "{e}; rows whose read failed are left out of the NUMA table"
            )),
        }?;
        if self.error.is_some() {
            return None;
        }
        self.error = Some(failed.clone());
        Some(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_nodes(sys: &Path) {
        for n in ["node0", "node1"] {
            std::fs::create_dir_all(sys.join("devices/system/node").join(n)).unwrap();
        }
    }

    #[test]
    fn two_nodes_and_a_cgroup_make_a_table_with_a_row_per_tick() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        two_nodes(&sys);
        let cg_dir = dir.path().join("cg");
        std::fs::create_dir_all(&cg_dir).unwrap();
        std::fs::write(
            cg_dir.join("memory.numa_stat"),
            "anon N0=4096 N1=8192\nfile N0=0 N1=4096\n",
        )
        .unwrap();
        let cg = MemCgroup {
            version: CgroupVersion::V2,
            path: "/prover".into(),
            dir: cg_dir.clone(),
        };
        let rec = dir.path().join("r.csv");
        let mut src = NumaSource::start(&sys, Some(&cg), Some(&rec), false, false)
            .unwrap()
            .unwrap();
        let meta = src.meta();
        assert_eq!(
            (meta.file.as_str(), meta.nodes.as_slice()),
            ("r.csv.numa.csv", &[0, 1][..])
        );
        assert!(meta.source.contains("v2 anon + file"), "{}", meta.source);
        assert_eq!(
            src.tick(&Sample {
                unix_ms: 1000,
                elapsed_s: 0.0,
                ..Sample::default()
            }),
            None
        );
        std::fs::write(
            cg_dir.join("memory.numa_stat"),
            "anon N0=4096 N1=16384\nfile N0=0 N1=4096\n",
        )
        .unwrap();
        src.tick(&Sample {
            unix_ms: 1100,
            elapsed_s: 0.1,
            ..Sample::default()
        });
        // A file that cannot be parsed a moment: said once, the row left out.
        std::fs::write(cg_dir.join("memory.numa_stat"), "anon N0=x\n").unwrap();
        let said = src.tick(&Sample::default()).unwrap();
        assert!(said.contains("memory.numa_stat"), "{said}");
        assert_eq!(src.tick(&Sample::default()), None);
        let t = crate::format::numa::read(&crate::format::numa::side_path(&rec)).unwrap();
        assert_eq!(
            t.rows,
            [(1000, vec![4096, 12288]), (1100, vec![4096, 20480])]
        );
        assert!(src.error.is_some(), "the failed read is kept");
    }

    #[test]
    fn one_node_writes_nothing_and_two_without_a_cgroup_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        std::fs::create_dir_all(sys.join("devices/system/node/node0")).unwrap();
        let rec = dir.path().join("r.csv");
        assert!(NumaSource::start(&sys, None, Some(&rec), false, false)
            .unwrap()
            .is_none());
        two_nodes(&sys);
        let why = NumaSource::start(&sys, None, Some(&rec), false, false)
            .err()
            .unwrap();
        assert!(
            why.contains("2 NUMA nodes") && why.contains("--cgroup"),
            "{why}"
        );
        // A cgroup without memory.numa_stat: named.
        let cg = MemCgroup {
            version: CgroupVersion::V1,
            path: "/x".into(),
            dir: dir.path().join("nocg"),
        };
        let why = NumaSource::start(&sys, Some(&cg), Some(&rec), false, false)
            .err()
            .unwrap();
        assert!(why.contains("memory.numa_stat"), "{why}");
        assert!(!crate::format::numa::side_path(&rec).exists());
    }
}
