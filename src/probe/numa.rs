//! A memory cgroup's memory per NUMA node (`memory.numa_stat`), and the machine's nodes
//! (`/sys/devices/system/node/nodeN`). Read only where the machine has more than one node: on
//! one, every page is on node 0 and the figure says nothing.
//!
//! The two hierarchies write the file differently:
//!
//! ```text
//! v1 (pages):  total=300 N0=100 N1=200          v2 (bytes):  anon 4096 N0=4096 N1=0
//!              file=...  anon=...  unevictable=...           file N0=8192 N1=0
//!              hierarchical_total=300 N0=100 N1=200          kernel_stack N0=... (and more)
//! ```
//!
//! A node's memory here is the cgroup's user memory on it: v1's `hierarchical_total` (the
//! cgroups below counted, as `memory.usage_in_bytes` does; `total` where the kernel has no
//! hierarchical line), pages times the page size; v2's `anon` plus `file` (page cache, shmem
//! included). Kernel memory is not split by node here.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The NUMA nodes of the machine under a /sys root (`/sys/devices/system/node/nodeN`), sorted;
/// empty where the directory does not exist (a kernel without NUMA).
pub fn nodes(sys_root: &Path) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(sys_root.join("devices/system/node")) else {
        return Vec::new();
    };
    let mut nodes: Vec<u32> = dir
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            let n = name.to_str()?.strip_prefix("node")?;
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| n.parse().ok())
                .flatten()
        })
        .collect();
    nodes.sort_unstable();
    nodes
}

/// Which format a `memory.numa_stat` is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaFormat {
    /// v1: `key=PAGES N0=PAGES ...`.
    V1,
    /// v2: `key N0=BYTES ...`.
    V2,
}

/// Why a `memory.numa_stat` gives nothing.
#[derive(Debug, thiserror::Error)]
pub enum NumaError {
    #[error("{0} does not exist")]
    Missing(PathBuf),
    #[error("cannot read {0}: {1}")]
    Io(PathBuf, io::Error),
    #[error("cannot parse {0}: {1}")]
    Parse(PathBuf, NumaParseError),
}

impl crate::error::Classified for NumaError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// A cgroup's `memory.numa_stat` held open, read into bytes per node.
#[derive(Debug)]
pub struct NumaStat {
    path: PathBuf,
    file: File,
    format: NumaFormat,
    page_size: u64,
    buf: Vec<u8>,
}

impl NumaStat {
    /// Opens `dir`'s `memory.numa_stat`, written in `format`, and reads it once.
    pub fn open(dir: &Path, format: NumaFormat, page_size: u64) -> Result<NumaStat, NumaError> {
        let path = dir.join("memory.numa_stat");
        let file = File::open(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => NumaError::Missing(path.clone()),
            _ => NumaError::Io(path.clone(), e),
        })?;
        let mut n = NumaStat {
            path,
            file,
            format,
            page_size,
            buf: vec![0; 8192],
        };
        n.read()?;
        Ok(n)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn format(&self) -> NumaFormat {
        self.format
    }

    /// Bytes per node now: `(node, bytes)`, in the file's order. A read that fails (the
    /// cgroup removed and made again, as a restarted service's is) opens the file anew, once.
    pub fn read(&mut self) -> Result<Vec<(u32, u64)>, NumaError> {
        match self.read_held() {
            Err(NumaError::Io(..)) => {
                self.file =
                    File::open(&self.path).map_err(|e| NumaError::Io(self.path.clone(), e))?;
                self.read_held()
            }
            other => other,
        }
    }

    fn read_held(&mut self) -> Result<Vec<(u32, u64)>, NumaError> {
        let mut len = 0;
        loop {
            if self.buf.len() - len < 1024 {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match self.file.read_at(&mut self.buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(NumaError::Io(self.path.clone(), e)),
            }
        }
        let text = String::from_utf8_lossy(&self.buf[..len]);
        let parsed = match self.format {
            NumaFormat::V1 => parse_v1(&text, self.page_size),
            NumaFormat::V2 => parse_v2(&text),
        };
        parsed.map_err(|why| NumaError::Parse(self.path.clone(), why))
    }
}

/// `N0=123 N1=456` into `(node, value)`s; the line is named when a word is not `N<node>=<n>`.
fn per_node<'a>(
    words: impl Iterator<Item = &'a str>,
    line: &str,
) -> Result<Vec<(u32, u64)>, NumaParseError> {
    words
        .map(|w| {
            w.strip_prefix('N')
                .and_then(|w| w.split_once('='))
                .and_then(|(n, v)| Some((n.parse().ok()?, v.parse().ok()?)))
                .ok_or_else(|| NumaParseError::PerNode(line.to_string()))
        })
        .collect()
}

/// What in a `memory.numa_stat` is not as the kernel writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumaParseError {
    #[error("the line '{0}' is not 'KEY N0=n N1=n ...'")]
    PerNode(String),
    #[error("the line '{0}' is not 'KEY=n N0=n ...'")]
    KeyValue(String),
    #[error("no 'total=' line")]
    NoTotal,
    #[error("no 'anon N0=...' and 'file N0=...' lines")]
    NoAnonFile,
}

impl crate::error::Classified for NumaParseError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// v1: the `hierarchical_total=` line's nodes (else `total=`'s), pages into bytes.
pub fn parse_v1(text: &str, page_size: u64) -> Result<Vec<(u32, u64)>, NumaParseError> {
    let (mut total, mut hierarchical) = (None, None);
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        let Some((key, value)) = words.next().and_then(|w| w.split_once('=')) else {
            if line.trim().is_empty() {
                continue;
            }
            return Err(NumaParseError::KeyValue(line.to_string()));
        };
        if value.parse::<u64>().is_err() {
            return Err(NumaParseError::KeyValue(line.to_string()));
        }
        let slot = match key {
            "total" => &mut total,
            "hierarchical_total" => &mut hierarchical,
            _ => continue,
        };
        *slot = Some(per_node(words, line)?);
    }
    let nodes = hierarchical.or(total).ok_or(NumaParseError::NoTotal)?;
    Ok(nodes
        .into_iter()
        .map(|(n, pages)| (n, pages.saturating_mul(page_size)))
        .collect())
}

/// v2: `anon` plus `file` per node, bytes.
pub fn parse_v2(text: &str) -> Result<Vec<(u32, u64)>, NumaParseError> {
    let (mut anon, mut file) = (None, None);
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        let slot = match words.next() {
            Some("anon") => &mut anon,
            Some("file") => &mut file,
            Some(_) => continue,
            None => continue,
        };
        *slot = Some(per_node(words, line)?);
    }
    let (Some(anon), Some(file)) = (anon, file) else {
        return Err(NumaParseError::NoAnonFile);
    };
    let mut nodes = anon;
    for (n, b) in file {
        match nodes.iter_mut().find(|(m, _)| *m == n) {
            Some((_, a)) => *a = a.saturating_add(b),
            None => nodes.push((n, b)),
        }
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "total=300 N0=100 N1=200\nfile=60 N0=20 N1=40\nanon=240 N0=80 N1=160\n\
                      unevictable=0 N0=0 N1=0\nhierarchical_total=310 N0=105 N1=205\n\
                      hierarchical_file=60 N0=20 N1=40\n";
    const V2: &str = "anon N0=2097152 N1=4194304\nfile N0=1048576 N1=0\n\
                      kernel_stack N0=16384 N1=16384\nshmem N0=0 N1=0\n";

    #[test]
    fn v1_gives_the_hierarchical_total_per_node_in_bytes() {
        assert_eq!(
            parse_v1(V1, 4096),
            Ok(vec![(0, 105 * 4096), (1, 205 * 4096)])
        );
        // A kernel with no hierarchical lines: total.
        let flat: String = V1.lines().take(4).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            parse_v1(&flat, 4096),
            Ok(vec![(0, 100 * 4096), (1, 200 * 4096)])
        );
    }

    #[test]
    fn v2_gives_anon_and_file_per_node_in_bytes() {
        assert_eq!(parse_v2(V2), Ok(vec![(0, 3 << 20), (1, 4 << 20)]));
    }

    #[test]
    fn a_malformed_line_is_named_and_a_missing_file_is_said() {
        let e = parse_v1("total=3 N0=1 N1=x\n", 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'total=3 N0=1 N1=x'"), "{e}");
        let e = parse_v1("nothing\n", 4096).unwrap_err().to_string();
        assert!(e.contains("'nothing'"), "{e}");
        assert_eq!(
            parse_v1("file=1 N0=1\n", 4096),
            Err(NumaParseError::NoTotal)
        );
        let e = parse_v2("anon N0=1 N1=2\nfile N0=1 node1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'file N0=1 node1'"), "{e}");
        assert!(parse_v2("anon N0=1\n").is_err());

        let dir = tempfile::tempdir().unwrap();
        let e = NumaStat::open(dir.path(), NumaFormat::V2, 4096).unwrap_err();
        assert!(matches!(e, NumaError::Missing(_)), "{e}");
        std::fs::write(
            dir.path().join("memory.numa_stat"),
            "anon N0=1 N1=oops\nfile N0=0\n",
        )
        .unwrap();
        let e = NumaStat::open(dir.path(), NumaFormat::V2, 4096)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("memory.numa_stat") && e.contains("N1=oops"),
            "{e}"
        );
    }

    #[test]
    fn a_held_file_reads_each_format_over_two_nodes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("memory.numa_stat");
        std::fs::write(&f, V1).unwrap();
        let mut n = NumaStat::open(dir.path(), NumaFormat::V1, 4096).unwrap();
        assert_eq!(n.read().unwrap(), vec![(0, 105 * 4096), (1, 205 * 4096)]);
        std::fs::write(&f, "hierarchical_total=2 N0=1 N1=1\n").unwrap();
        assert_eq!(n.read().unwrap(), vec![(0, 4096), (1, 4096)]);
        std::fs::write(&f, "anon N0=10 N1=20\nfile N0=1 N1=2\n").unwrap();
        let mut n = NumaStat::open(dir.path(), NumaFormat::V2, 4096).unwrap();
        assert_eq!(n.read().unwrap(), vec![(0, 11), (1, 22)]);
    }

    #[test]
    fn nodes_are_the_node_directories_under_sys() {
        let dir = tempfile::tempdir().unwrap();
        assert!(nodes(dir.path()).is_empty());
        let base = dir.path().join("devices/system/node");
        for d in ["node1", "node0", "node10", "possible", "nodex", "power"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        assert_eq!(nodes(dir.path()), vec![0, 1, 10]);
        // This machine has at least one node where the kernel has NUMA.
        let here = nodes(Path::new("/sys"));
        assert!(here.is_empty() || here[0] == 0, "{here:?}");
    }
}
