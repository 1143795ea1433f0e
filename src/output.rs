//! Every file memmon creates goes through here, under one rule: an existing path is refused
//! unless `--force`, checked before any work starts (`check_outputs`), and nothing is ever
//! written through a symlink planted at the final name. A new file is created with
//! `O_CREAT|O_EXCL|O_NOFOLLOW`; a whole file written at once (sidecar, plot, report, export)
//! goes to a randomly named temporary file created exclusively in the same directory, is
//! fsynced, then renamed over the path (a reader never sees half of it, and a symlink at the
//! path is replaced, not followed). `-` (stdout) and character devices (`/dev/null`) are
//! written as they are, never refused.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why an output cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputCheckError {
    #[error("{path} ({flag}) already exists: pass --force to overwrite it")]
    Exists { path: PathBuf, flag: String },
    #[error("{path} ({flag}) is a directory, not a file")]
    Directory { path: PathBuf, flag: String },
    #[error("{first} and {second} both write to {path}: give each its own file")]
    Same {
        path: PathBuf,
        first: String,
        second: String,
    },
}

/// `-`: stdout.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// An existing character device or FIFO (`/dev/null`, a named pipe): written as it is, with no
/// sidecar and no exclusive creation.
pub fn is_stream(path: &Path) -> bool {
    let device = std::fs::metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        t.is_char_device() || t.is_fifo()
    });
    device || is_descriptor_alias(path)
}

/// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: names of descriptors memmon
/// already has, written through as they are (never unlinked or replaced, even with --force).
fn is_descriptor_alias(path: &Path) -> bool {
    let abs = crate::format::absolute(path);
    ["/dev/stdout", "/dev/stderr"]
        .iter()
        .any(|p| abs == Path::new(p))
        || ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"]
            .iter()
            .any(|p| abs.starts_with(p))
}

/// Checks, before any work starts, that each `(path, flag)` may be written: a path that
/// exists is refused without `force` (a symlink counts as existing, dangling or not), a
/// directory always, and two outputs naming one file are an error. Stdout and streams pass.
pub fn check_outputs(outputs: &[(&Path, &str)], force: bool) -> Result<(), OutputCheckError> {
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    for &(path, flag) in outputs {
        if is_stdout(path) || is_stream(path) {
            continue;
        }
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if m.is_dir() {
                return Err(OutputCheckError::Directory {
                    path: path.to_path_buf(),
                    flag: flag.to_string(),
                });
            }
            if !force {
                return Err(OutputCheckError::Exists {
                    path: crate::format::absolute(path),
                    flag: flag.to_string(),
                });
            }
        }
        let key = identity(path);
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            return Err(OutputCheckError::Same {
                path: key,
                first: first.to_string(),
                second: flag.to_string(),
            });
        }
        seen.push((key, flag));
    }
    Ok(())
}

/// The canonical parent directory joined with the file name: two spellings of one output
/// (`./a.csv`, `dir/../a.csv`, via a symlinked directory) compare equal.
fn identity(path: &Path) -> PathBuf {
    let abs = crate::format::absolute(path);
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .unwrap_or_else(|_| parent.to_path_buf())
            .join(name),
        _ => abs,
    }
}

/// Opens `path` for a file written as it goes (a recording): a new file created with
/// `O_EXCL|O_NOFOLLOW` (mode 0644 less the umask). With `force` an existing entry (file or
/// symlink, never what a symlink points to) is unlinked first; a file planted in between makes
/// the exclusive open fail rather than be followed. A character device or FIFO is opened for
/// writing as it is.
pub fn create_streaming(path: &Path, force: bool) -> io::Result<File> {
    if is_stream(path) {
        return OpenOptions::new().write(true).open(path);
    }
    match open_exclusive(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && force => {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
                return Err(io::Error::other("it is a directory"));
            }
            std::fs::remove_file(path)?;
            open_exclusive(path)
        }
        other => other,
    }
}

fn open_exclusive(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o644)
        .open(path)
}

/// Writes `bytes` as the whole content of `path`: to a temporary file with a random name,
/// created exclusively in the same directory, fsynced, then renamed over `path` (so a symlink
/// at `path` is replaced, not followed, and a reader sees the old file or the new, never half).
/// An existing `path` is refused unless `force`. A character device or FIFO is written as it is.
pub fn write_whole(path: &Path, bytes: &[u8], force: bool) -> io::Result<()> {
    write_whole_synced(path, bytes, force, true)
}

/// `write_whole`, with the fsyncs only if `sync`: a file rewritten later with them (the
/// sidecar at a recording's start, before its first sample) skips their milliseconds.
pub fn write_whole_synced(path: &Path, bytes: &[u8], force: bool, sync: bool) -> io::Result<()> {
    if is_stream(path) {
        return OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(bytes));
    }
    write_via_synced(path, force, sync, |tmp| tmp.as_file_mut().write_all(bytes))
}

/// Like `write_whole`, for a writer that wants a path: `fill` writes the temporary file (a
/// fresh, empty file only we created) by its path or handle, which is then renamed over `path`.
pub fn write_via(
    path: &Path,
    force: bool,
    fill: impl FnOnce(&mut tempfile::NamedTempFile) -> io::Result<()>,
) -> io::Result<()> {
    write_via_synced(path, force, true, fill)
}

fn write_via_synced(
    path: &Path,
    force: bool,
    sync: bool,
    fill: impl FnOnce(&mut tempfile::NamedTempFile) -> io::Result<()>,
) -> io::Result<()> {
    if !force && std::fs::symlink_metadata(path).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "it already exists (pass --force to overwrite it)",
        ));
    }
    let abs = crate::format::absolute(path);
    let dir = abs.parent().unwrap_or(Path::new("/"));
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        // Ends in the path's own extension: writers that pick a format by it still can.
        .suffix(&match abs.extension() {
            Some(e) => format!(".tmp.{}", e.to_string_lossy()),
            None => ".tmp".to_string(),
        })
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(dir)?;
    fill(&mut tmp)?;
    if sync {
        tmp.as_file().sync_all()?;
    }
    if force {
        tmp.persist(&abs).map_err(|e| e.error)?;
    } else {
        // No replacing: a file that appeared since the check is not clobbered.
        tmp.persist_noclobber(&abs).map_err(|e| e.error)?;
    }
    // The rename itself reaches the disk with the directory.
    if let (true, Ok(d)) = (sync, File::open(dir)) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_symlink_at_the_path_is_replaced_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let out = dir.path().join("out.svg");
        symlink(&victim, &out).unwrap();
        assert!(write_whole(&out, b"new", false).is_err());
        assert!(create_streaming(&out, false).is_err());
        write_whole(&out, b"new", true).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        assert!(!std::fs::symlink_metadata(&out).unwrap().is_symlink());
    }

    #[test]
    fn a_forced_streaming_create_unlinks_a_symlink_not_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let out = dir.path().join("run.csv");
        symlink(&victim, &out).unwrap();
        let mut f = create_streaming(&out, true).unwrap();
        f.write_all(b"rows").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "rows");
    }

    #[test]
    fn no_temporary_file_is_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("a.json");
        write_whole(&out, b"1", false).unwrap();
        write_whole(&out, b"2", true).unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn existing_paths_and_duplicates_are_refused_before_work() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.csv");
        std::fs::write(&a, "x").unwrap();
        let b = dir.path().join("b.csv");
        let dangling = dir.path().join("d.csv");
        symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(matches!(
            check_outputs(&[(&a, "-o")], false),
            Err(OutputCheckError::Exists { .. })
        ));
        assert!(matches!(
            check_outputs(&[(&dangling, "-o")], false),
            Err(OutputCheckError::Exists { .. })
        ));
        check_outputs(&[(&a, "-o"), (&b, "--plot")], true).unwrap();
        let b2 = dir.path().join(".").join("b.csv");
        let err = check_outputs(&[(&b, "--export-csv"), (&b2, "--export-json")], false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--export-csv and --export-json both write to"),
            "{err}"
        );
        // Descriptor names are never refused (nor, with --force, unlinked).
        check_outputs(&[(Path::new("/dev/stdout"), "-o")], false).unwrap();
        assert!(is_stream(Path::new("/proc/self/fd/1")));
        let null = Path::new("/dev/null");
        check_outputs(
            &[(null, "-o"), (null, "--plot"), (Path::new("-"), "x")],
            false,
        )
        .unwrap();
    }
}
