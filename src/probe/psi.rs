//! Pressure stall information (PSI): how long tasks waited on memory. `/proc/pressure/memory`
//! (the machine) and a v2 cgroup's `memory.pressure` (its tasks) have two lines,
//!
//! ```text
//! some avg10=0.00 avg60=0.00 avg300=0.00 total=5356181
//! full avg10=0.00 avg60=0.00 avg300=0.00 total=2385019
//! ```
//!
//! where `total=` is the stall time in microseconds since boot (or since the cgroup was made):
//! `some`, while at least one task waited on memory (reclaim, a refault, swap-in); `full`,
//! while every non-idle task did at once. A kernel built without PSI has no such file; one
//! built with it off by default (`CONFIG_PSI_DEFAULT_DISABLED`, turned on by `psi=1` on the
//! command line) has the file and answers a read with EOPNOTSUPP. The file is opened once and
//! re-read with `pread`.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The machine's memory pressure file, under a /proc root.
pub fn system_memory(proc_root: &Path) -> PathBuf {
    proc_root.join("pressure/memory")
}

/// The `some` and `full` stall totals of a pressure file, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stall {
    pub some_us: u64,
    pub full_us: u64,
}

/// Why a pressure file gives nothing.
#[derive(Debug, thiserror::Error)]
pub enum PsiError {
    #[error("{0} does not exist: the kernel has no PSI (CONFIG_PSI)")]
    Missing(PathBuf),
    #[error("the kernel has PSI turned off (reading {0} is not supported; boot with psi=1)")]
    Disabled(PathBuf),
    #[error("cannot read {0}: {1}")]
    Io(PathBuf, io::Error),
    #[error("cannot parse {0}: no 'some ... total=' and 'full ... total=' lines")]
    Parse(PathBuf),
}

impl crate::error::Classified for PsiError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// A pressure file held open.
#[derive(Debug)]
pub struct Pressure {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
}

impl Pressure {
    /// Opens `path` and reads it once: an error says why it gives nothing (no PSI in the
    /// kernel, PSI turned off, not readable, not a pressure file).
    pub fn open(path: &Path) -> Result<Pressure, PsiError> {
        let file = File::open(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => PsiError::Missing(path.to_path_buf()),
            _ => PsiError::Io(path.to_path_buf(), e),
        })?;
        let mut p = Pressure {
            path: path.to_path_buf(),
            file,
            buf: vec![0; 256],
        };
        p.read()?;
        Ok(p)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The totals now.
    pub fn read(&mut self) -> Result<Stall, PsiError> {
        let n = loop {
            match self.file.read_at(&mut self.buf, 0) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    return Err(PsiError::Disabled(self.path.clone()))
                }
                Err(e) => return Err(PsiError::Io(self.path.clone(), e)),
            }
        };
        parse(&self.buf[..n]).ok_or_else(|| PsiError::Parse(self.path.clone()))
    }
}

/// The `total=` of the `some` and `full` lines; `None` without both.
pub fn parse(text: &[u8]) -> Option<Stall> {
    let text = std::str::from_utf8(text).ok()?;
    let (mut some, mut full) = (None, None);
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        let slot = match words.next() {
            Some("some") => &mut some,
            Some("full") => &mut full,
            _ => continue,
        };
        *slot = words
            .find_map(|w| w.strip_prefix("total="))
            .and_then(|t| t.parse::<u64>().ok());
    }
    Some(Stall {
        some_us: some?,
        full_us: full?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMORY: &str = "some avg10=1.50 avg60=0.20 avg300=0.00 total=5356181\n\
                          full avg10=0.00 avg60=0.00 avg300=0.00 total=2385019\n";

    #[test]
    fn the_totals_of_both_lines_are_read() {
        assert_eq!(
            parse(MEMORY.as_bytes()),
            Some(Stall {
                some_us: 5_356_181,
                full_us: 2_385_019
            })
        );
        // A file with only `some` (the cpu file of kernels before 5.13) gives nothing here.
        assert_eq!(parse(MEMORY.lines().next().unwrap().as_bytes()), None);
        assert_eq!(parse(b"some total=x\nfull total=1\n"), None);
        assert_eq!(parse(b""), None);
    }

    #[test]
    fn a_held_file_reads_its_new_totals() {
        let dir = tempfile::tempdir().unwrap();
        let path = system_memory(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, MEMORY).unwrap();
        let mut p = Pressure::open(&path).unwrap();
        assert_eq!(p.read().unwrap().some_us, 5_356_181);
        std::fs::write(
            &path,
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=5400000\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=2400000\n",
        )
        .unwrap();
        assert_eq!(
            p.read().unwrap(),
            Stall {
                some_us: 5_400_000,
                full_us: 2_400_000
            }
        );
    }

    #[test]
    fn a_missing_or_malformed_file_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = system_memory(dir.path());
        let e = Pressure::open(&path).unwrap_err();
        assert!(matches!(e, PsiError::Missing(_)), "{e}");
        assert!(e.to_string().contains("no PSI"), "{e}");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "nothing here\n").unwrap();
        let e = Pressure::open(&path).unwrap_err();
        assert!(matches!(e, PsiError::Parse(_)), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }

    #[test]
    fn this_kernels_file_parses_when_it_has_psi() {
        // This machine boots with psi=1; a kernel without it gives one of the errors above.
        match Pressure::open(Path::new("/proc/pressure/memory")) {
            Ok(mut p) => {
                let a = p.read().unwrap();
                let b = p.read().unwrap();
                assert!(b.some_us >= a.some_us && b.full_us >= a.full_us);
                assert!(a.some_us >= a.full_us);
            }
            Err(e) => assert!(
                matches!(e, PsiError::Missing(_) | PsiError::Disabled(_)),
                "{e}"
            ),
        }
    }
}
