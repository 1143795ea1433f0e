//! Reader of a process's memory cgroup: where it is (v2 `memory.peak`, or v1
//! `memory.max_usage_in_bytes`), whether it holds only the watched tree, and its peak reset per run.
//!
//! Built over a root path (default /sys/fs/cgroup) so tests point it at a fake tree. Layouts:
//! pure v2 (`ROOT/cgroup.controllers`), and hybrid v1 with the memory controller at
//! `ROOT/memory` and v2 at `ROOT/unified`. On a hybrid host the memory controller is v1's.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Why a cgroup file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot read {0}: {1}")]
    Io(PathBuf, io::Error),
    #[error("cannot parse {0}: '{1}'")]
    Parse(PathBuf, String),
    #[error("resetting {0} is not permitted (run as root or the cgroup's owner)")]
    NotPermitted(PathBuf),
    #[error("resetting {0} is not supported (cgroup v2 memory.peak can be reset from Linux 6.12)")]
    NotSupported(PathBuf),
}

/// Which cgroup hierarchy holds the memory controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    pub fn name(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "cgroup v1",
            CgroupVersion::V2 => "cgroup v2",
        }
    }
}

/// A cgroup file system, real or fake.
#[derive(Debug, Clone)]
pub struct CgroupFs {
    root: PathBuf,
}

impl Default for CgroupFs {
    fn default() -> Self {
        CgroupFs::new("/sys/fs/cgroup")
    }
}

/// One process's memory cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemCgroup {
    pub version: CgroupVersion,
    /// The cgroup's path as /proc/PID/cgroup gives it (`/system.slice/proverd.service`).
    pub path: String,
    /// Its directory on this file system.
    pub dir: PathBuf,
}

impl CgroupFs {
    pub fn new(root: impl Into<PathBuf>) -> CgroupFs {
        CgroupFs { root: root.into() }
    }

    /// Finds the memory cgroup named by the text of /proc/PID/cgroup: the v1 line whose
    /// controllers include `memory` (`4:memory:/path`) if there is one, else the v2 line
    /// (`0::/path`). `None` when neither is there or its directory does not exist.
    pub fn locate(&self, proc_cgroup: &str) -> Option<MemCgroup> {
        let mut v1 = None;
        let mut v2 = None;
        for line in proc_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if id == "0" && ctrls.is_empty() {
                v2 = Some(path.to_string());
            } else if ctrls.split(',').any(|c| c == "memory") {
                v1 = Some(path.to_string());
            }
        }
        let (version, path, base) = if let Some(p) = v1 {
            (CgroupVersion::V1, p, self.root.join("memory"))
        } else {
            let p = v2?;
            let base = if self.root.join("cgroup.controllers").exists() {
                self.root.clone()
            } else {
                self.root.join("unified")
            };
            (CgroupVersion::V2, p, base)
        };
        let dir = base.join(path.trim_start_matches('/'));
        dir.is_dir().then_some(MemCgroup { version, path, dir })
    }

    /// The memory cgroup of a process, from `PROCROOT/PID/cgroup`.
    pub fn of_pid(&self, proc_root: &Path, pid: i32) -> Option<MemCgroup> {
        let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
        self.locate(&text)
    }
}

impl MemCgroup {
    /// True for the root cgroup, which holds the whole machine.
    pub fn is_root(&self) -> bool {
        self.path.trim_matches('/').is_empty()
    }

    /// The file that holds the peak: `memory.peak` (v2) or `memory.max_usage_in_bytes` (v1).
    pub fn peak_file(&self) -> PathBuf {
        self.dir.join(match self.version {
            CgroupVersion::V2 => "memory.peak",
            CgroupVersion::V1 => "memory.max_usage_in_bytes",
        })
    }

    /// Every PID in this cgroup and the cgroups below it (`cgroup.procs` of each).
    pub fn procs(&self) -> Result<Vec<i32>, CgroupError> {
        let mut out = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(d) = dirs.pop() {
            let f = d.join("cgroup.procs");
            let text = std::fs::read_to_string(&f).map_err(|e| CgroupError::Io(f.clone(), e))?;
            for w in text.split_ascii_whitespace() {
                out.push(
                    w.parse()
                        .map_err(|_| CgroupError::Parse(f.clone(), w.to_string()))?,
                );
            }
            let entries = std::fs::read_dir(&d).map_err(|e| CgroupError::Io(d.clone(), e))?;
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        Ok(out)
    }

    /// Resets the peak and returns the open file through which to read the peak of what
    /// follows. v2: writes to `memory.peak` (the reset holds for this file descriptor only,
    /// Linux ≥ 6.12). v1: writes `0` to `memory.max_usage_in_bytes`.
    pub fn reset_peak(&self) -> Result<PeakWatch, CgroupError> {
        let path = self.peak_file();
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| self.reset_error(&path, e))?;
        f.write_all(b"0\n")
            .map_err(|e| self.reset_error(&path, e))?;
        Ok(PeakWatch { file: f, path })
    }

    fn reset_error(&self, path: &Path, e: io::Error) -> CgroupError {
        match (e.kind(), e.raw_os_error()) {
            (io::ErrorKind::PermissionDenied, _)
                if self.version == CgroupVersion::V2 && is_read_only(path) =>
            {
                CgroupError::NotSupported(path.to_path_buf())
            }
            (io::ErrorKind::PermissionDenied, _) => CgroupError::NotPermitted(path.to_path_buf()),
            (_, Some(libc::EPERM)) => CgroupError::NotPermitted(path.to_path_buf()),
            (io::ErrorKind::NotFound, _)
            | (_, Some(libc::EINVAL))
            | (_, Some(libc::EOPNOTSUPP)) => CgroupError::NotSupported(path.to_path_buf()),
            _ => CgroupError::Io(path.to_path_buf(), e),
        }
    }
}

/// A memory-peak file kept open from its reset to its reading.
#[derive(Debug)]
pub struct PeakWatch {
    file: File,
    path: PathBuf,
}

impl PeakWatch {
    /// The cgroup's peak since the reset, in bytes, read through the descriptor that reset it.
    pub fn read(&mut self) -> Result<u64, CgroupError> {
        let mut text = String::new();
        self.file
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.file.read_to_string(&mut text))
            .map_err(|e| CgroupError::Io(self.path.clone(), e))?;
        text.trim()
            .parse()
            .map_err(|_| CgroupError::Parse(self.path.clone(), text.trim().to_string()))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Kernels 5.19 to 6.11 make memory.peak read-only (mode 0444).
fn is_read_only(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o222 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkdir(p: &Path) {
        std::fs::create_dir_all(p).unwrap();
    }

    /// A pure v2 host: ROOT/cgroup.controllers, the daemon in /system.slice/proverd.service.
    fn fake_v2() -> (tempfile::TempDir, CgroupFs) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        std::fs::write(root.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        let d = root.join("system.slice/proverd.service");
        mkdir(&d);
        std::fs::write(d.join("memory.peak"), "48318382080\n").unwrap();
        std::fs::write(d.join("cgroup.procs"), "100\n101\n").unwrap();
        mkdir(&d.join("workers"));
        std::fs::write(d.join("workers/cgroup.procs"), "102\n").unwrap();
        (t, CgroupFs::new(root))
    }

    /// A hybrid host like the development machine: v1 memory at ROOT/memory, v2 at ROOT/unified.
    fn fake_hybrid() -> (tempfile::TempDir, CgroupFs) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().to_path_buf();
        let d = root.join("memory/bench/proverd");
        mkdir(&d);
        std::fs::write(d.join("memory.max_usage_in_bytes"), "5242880\n").unwrap();
        std::fs::write(d.join("cgroup.procs"), "200\n").unwrap();
        mkdir(&root.join("unified/user.slice"));
        std::fs::write(root.join("unified/cgroup.controllers"), "").unwrap();
        (t, CgroupFs::new(root))
    }

    #[test]
    fn a_v2_line_locates_the_cgroup_under_the_root() {
        let (t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service\n").unwrap();
        assert_eq!(cg.version, CgroupVersion::V2);
        assert_eq!(cg.dir, t.path().join("system.slice/proverd.service"));
        assert_eq!(cg.peak_file(), cg.dir.join("memory.peak"));
        assert!(!cg.is_root());
    }

    #[test]
    fn on_a_hybrid_host_the_v1_memory_line_wins() {
        let (t, fs) = fake_hybrid();
        let text = "9:name=systemd:/\n4:memory:/bench/proverd\n2:cpu,cpuacct:/\n0::/user.slice\n";
        let cg = fs.locate(text).unwrap();
        assert_eq!(cg.version, CgroupVersion::V1);
        assert_eq!(cg.dir, t.path().join("memory/bench/proverd"));
        assert_eq!(cg.peak_file(), cg.dir.join("memory.max_usage_in_bytes"));
    }

    #[test]
    fn a_v2_only_process_on_a_hybrid_host_is_found_under_unified() {
        let (t, fs) = fake_hybrid();
        let cg = fs.locate("0::/user.slice\n").unwrap();
        assert_eq!(cg.version, CgroupVersion::V2);
        assert_eq!(cg.dir, t.path().join("unified/user.slice"));
    }

    #[test]
    fn the_root_cgroup_is_recognised_and_a_missing_directory_is_none() {
        let (_t, fs) = fake_v2();
        assert!(fs.locate("0::/\n").unwrap().is_root());
        assert_eq!(fs.locate("0::/no/such/group\n"), None);
        assert_eq!(fs.locate("garbage"), None);
    }

    #[test]
    fn procs_include_the_cgroups_below() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        let mut p = cg.procs().unwrap();
        p.sort();
        assert_eq!(p, vec![100, 101, 102]);
    }

    #[test]
    fn a_v2_reset_writes_to_memory_peak_and_reads_through_the_same_file() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        let mut w = cg.reset_peak().unwrap();
        // A regular file stands in for the kernel's: the write replaced the first bytes.
        let written = std::fs::read_to_string(cg.dir.join("memory.peak")).unwrap();
        assert!(written.starts_with("0\n"), "{written:?}");
        std::fs::write(cg.dir.join("memory.peak"), "1073741824\n").unwrap();
        assert_eq!(w.read().unwrap(), 1 << 30);
    }

    #[test]
    fn a_v1_reset_writes_zero_to_max_usage_in_bytes() {
        let (_t, fs) = fake_hybrid();
        let cg = fs.locate("4:memory:/bench/proverd").unwrap();
        std::fs::write(cg.peak_file(), "").unwrap();
        let mut w = cg.reset_peak().unwrap();
        assert_eq!(std::fs::read_to_string(cg.peak_file()).unwrap(), "0\n");
        assert_eq!(w.read().unwrap(), 0);
        assert!(
            cg.dir.join("memory.peak").metadata().is_err(),
            "v1 must not touch memory.peak"
        );
    }

    #[test]
    fn a_refused_write_to_a_read_only_memory_peak_is_not_supported() {
        use std::os::unix::fs::PermissionsExt;
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        std::fs::set_permissions(cg.peak_file(), std::fs::Permissions::from_mode(0o444)).unwrap();
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        let e = cg.reset_error(&cg.peak_file(), denied);
        assert!(matches!(e, CgroupError::NotSupported(_)), "{e}");
        assert!(e.to_string().contains("6.12"), "{e}");
    }

    #[test]
    fn a_refused_write_to_a_writable_file_is_not_permitted() {
        let (_t, fs) = fake_hybrid();
        let cg = fs.locate("4:memory:/bench/proverd").unwrap();
        let e = cg.reset_error(&cg.peak_file(), io::Error::from_raw_os_error(libc::EACCES));
        assert!(matches!(e, CgroupError::NotPermitted(_)), "{e}");
    }

    #[test]
    fn a_garbage_peak_is_an_error_naming_the_file() {
        let (_t, fs) = fake_v2();
        let cg = fs.locate("0::/system.slice/proverd.service").unwrap();
        let mut w = cg.reset_peak().unwrap();
        std::fs::write(cg.peak_file(), "lots\n").unwrap();
        let e = w.read().unwrap_err().to_string();
        assert!(e.contains("memory.peak") && e.contains("lots"), "{e}");
    }
}
