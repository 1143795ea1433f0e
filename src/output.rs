//! Every file memmon writes goes through here. A path is resolved once into a directory
//! descriptor and a name (`Place`); every later step (create, open, rename, remove) is relative
//! to that descriptor, and what is at the name is judged by `fstat` of what was opened, never by
//! a `stat` before the open:
//! - nothing: a new file, created with `O_CREAT|O_EXCL|O_NOFOLLOW`;
//! - a regular file or a symlink: refused unless `--force`, which replaces it by a rename (a
//!   symlink is replaced, never followed; a file another process holds the lock of is refused,
//!   naming that process);
//! - a FIFO or a character device at the name itself (never behind a symlink): written as it
//!   is, opened with `O_NONBLOCK` so that a FIFO with no reader is an error after
//!   [`READER_WAIT`] and a stop signal ends the wait; one that another user made in a directory
//!   others can write is refused unless `--force`;
//! - a directory, a block device, a socket: refused.
//!
//! The walk to the directory follows a symlink only where no one but root and this user could
//! have made it: a link owned by someone else, in a directory someone else can write, is
//! refused (`dir -> /victim` planted in /tmp). A whole file (sidecar, plot, report, export) is
//! written to a new temporary file in the same directory, fsynced, and renamed over the name.
//! A recording is locked (`flock`) for its whole session. Where an output goes is a [`Dest`]:
//! stdout (`-` on the command line, decided in `Dest::from` only) or a file; `/dev/stdout`,
//! `/dev/fd/N` and `/proc/self/fd/N` name descriptors memmon already has.

use rustix::fs::{self as rfs, AtFlags, FileType, FlockOperation, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a FIFO given as an output is waited on for a reader before that is an error.
pub const READER_WAIT: Duration = Duration::from_secs(10);

/// Symlinks followed in one walk to a directory before it is a loop (the kernel's own limit).
const MAX_LINKS: u32 = 40;

/// `path` made absolute (against the current directory), as messages and metadata name a file;
/// `path` itself if the current directory cannot be read.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Set once memmon writes about what another user may keep from this one: files it creates from
/// then on are 0600 (before the umask), not 0644. See [`keep_private`].
static PRIVATE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes every file memmon creates from now on readable by its owner alone (0600). Called where
/// what is written comes from another user's process (its mapping paths, function names and
/// command line, which /proc shows to that user and root only: `record` or `bench` attached to
/// it), and where what is read came from such a file (a recording others may not read): the
/// files made from it keep the same privacy.
pub fn keep_private() {
    PRIVATE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The mode new files are created with: 0600 after [`keep_private`], else 0644.
fn new_file_mode() -> Mode {
    if PRIVATE.load(std::sync::atomic::Ordering::Relaxed) {
        Mode::from_raw_mode(0o600)
    } else {
        Mode::from_raw_mode(0o644)
    }
}

/// How many times a name that changes kind while it is opened is looked at again.
const TRIES: u32 = 16;

/// Why an output was not opened (each says what is at the path; the caller names the path).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("it already exists: pass --force to overwrite it")]
    Exists,
    #[error("it is a directory, not a file")]
    Directory,
    #[error("it is a symbolic link, which memmon never writes through")]
    Symlink,
    #[error("it is a {0}: memmon writes regular files, FIFOs and character devices only")]
    Special(&'static str),
    #[error("it is a {kind} owned by user {owner}, in a directory others can write: it may have been put there to catch memmon's output (pass --force to write to it anyway)")]
    Planted { kind: &'static str, owner: u32 },
    #[error("it is a recording of user {owner}, in a directory others can write: memmon appends only to a recording of its own user or root's (chown it, or use another file)")]
    NotOwn { owner: u32 },
    #[error("{link} is a symbolic link of user {owner} (to {}) in a directory others can write: memmon does not follow it; give the real path", target.display())]
    Link {
        link: PathBuf,
        owner: u32,
        target: PathBuf,
    },
    #[error("{0}: {1}")]
    Dir(PathBuf, io::Error),
    #[error("it is a FIFO and no reader opened it within {} s: start its reader first", READER_WAIT.as_secs())]
    NoReader,
    #[error("{} arrived while waiting for a reader of the FIFO", crate::model::signal::name(*.0))]
    Interrupted(i32),
    #[error("{}", locked_text(.0))]
    Locked(Option<(i32, String)>),
    #[error("it kept changing (between a file and something else) while memmon opened it")]
    Unstable,
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl crate::error::Classified for OpenError {
    /// A refusal (what is there, or who owns it) is bad input; a signal while waiting for a
    /// FIFO's reader ends memmon with it; the rest are failures (`OutputError::class` decides
    /// the same of an `OutputError::Open`).
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self.signal() {
            Some(sig) => Class::Signal(sig),
            None if self.is_refusal() => Class::Usage,
            None => Class::Failure,
        }
    }
}

fn locked_text(holder: &Option<(i32, String)>) -> String {
    match holder {
        Some((pid, comm)) => format!(
            "another process is writing it: PID {pid} ({comm}) holds its lock; stop that one first or use another file"
        ),
        None => "another process is writing it (it holds its lock); stop that one first or use another file".into(),
    }
}

impl OpenError {
    /// Whether memmon refused what is at the path (bad input, exit 2) rather than failed to
    /// write (exit 1).
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            OpenError::Io(_)
                | OpenError::Dir(..)
                | OpenError::NoReader
                | OpenError::Interrupted(_)
                | OpenError::Unstable
        )
    }

    /// The signal that ended a wait for a FIFO's reader.
    pub fn signal(&self) -> Option<i32> {
        match self {
            OpenError::Interrupted(sig) => Some(*sig),
            _ => None,
        }
    }
}

impl From<Errno> for OpenError {
    fn from(e: Errno) -> OpenError {
        OpenError::Io(e.into())
    }
}

impl From<OpenError> for io::Error {
    fn from(e: OpenError) -> io::Error {
        match e {
            OpenError::Io(e) => e,
            e => {
                let kind = match &e {
                    OpenError::Exists => io::ErrorKind::AlreadyExists,
                    _ if e.is_refusal() => io::ErrorKind::PermissionDenied,
                    _ => io::ErrorKind::Other,
                };
                io::Error::new(kind, e)
            }
        }
    }
}

/// Why an output cannot be written, found before any work starts: each is a refusal of what
/// the user gave (class `Usage`).
#[derive(Debug, thiserror::Error)]
pub enum OutputCheckError {
    #[error("{path} ({flag}) already exists: pass --force to overwrite it")]
    Exists { path: PathBuf, flag: String },
    /// memmon writes plain text; a compressed file's name would mislead every other tool (and
    /// `.jsonl.zst` would be taken for CSV).
    #[error("{path} ({flag}): memmon writes it uncompressed, so a .{ext} name would mislead every other tool: give a name without .{ext} and compress the file after (memmon's readers take .gz and .zst)")]
    CompressedName {
        path: PathBuf,
        flag: String,
        ext: String,
    },
    /// An output of a command with no `--force` (demo): another name is the way out.
    #[error("{path} ({flag}) already exists: give -o another name, or move it away (nothing was overwritten)")]
    ExistsNoForce { path: PathBuf, flag: String },
    #[error("{path} ({flag}) is a directory, not a file")]
    Directory { path: PathBuf, flag: String },
    #[error("{first} and {second} both write to {path}: give each its own file")]
    Same {
        path: PathBuf,
        first: String,
        second: String,
    },
    #[error("{path} ({flag}): {why}")]
    Refused {
        path: PathBuf,
        flag: String,
        why: OpenError,
    },
    /// A file written only at the end (`check_writable`) could not be written now.
    #[error("cannot write {path} ({flag}): {why}")]
    Unwritable {
        path: PathBuf,
        flag: String,
        why: OpenError,
    },
}

impl crate::error::Classified for OutputCheckError {
    /// What is at a path, or two outputs naming one file: `Usage`; a file that cannot be
    /// written (its directory missing or read-only): `Failure`, as when a recording's file
    /// cannot be created.
    fn class(&self) -> crate::exit::Class {
        match self {
            OutputCheckError::Unwritable { why, .. } if !why.is_refusal() => {
                crate::exit::Class::Failure
            }
            _ => crate::exit::Class::Usage,
        }
    }
}

/// Checks, writing nothing that stays, that a whole file (`write_whole`) could be written at
/// each of `outputs` now, for files written only after a long run (bench's exports, record's
/// plot), so the run never ends in one that cannot be written. Each directory is opened as
/// `write_whole` opens it, and a file is made in it as `write_whole` makes its temporary file:
/// an unnamed one (`O_TMPFILE`: it never has a name, so nothing can stay behind), or where the
/// file system has none, a named one removed at once. A FIFO or device at the path is written
/// as it is, at the end: not opened now. What is at the path is `check_outputs`'s to judge.
pub fn check_writable(outputs: &[(&Path, &str)]) -> Result<(), OutputCheckError> {
    for &(path, flag) in outputs {
        if is_descriptor_alias(path) {
            continue;
        }
        let place = Place::resolve(path).and_then(|p| match p.at()? {
            At::Stream(_) => Ok(None),
            _ => Ok(Some(p)),
        });
        let made = match place {
            Ok(Some(p)) => p.can_create(),
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        made.map_err(|why| OutputCheckError::Unwritable {
            path: absolute(path),
            flag: flag.to_string(),
            why,
        })?;
    }
    Ok(())
}

/// Where an output goes: stdout or a file. The command line's `-` becomes `Stdout` here and
/// nowhere else (`From<PathBuf>`); the rest of memmon asks the `Dest`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Dest {
    #[default]
    Stdout,
    File(PathBuf),
}

impl Dest {
    /// The file, or `None` for stdout.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Dest::Stdout => None,
            Dest::File(p) => Some(p),
        }
    }

    pub fn is_stdout(&self) -> bool {
        matches!(self, Dest::Stdout)
    }
}

impl From<PathBuf> for Dest {
    /// `-` is stdout; any other path a file.
    fn from(path: PathBuf) -> Dest {
        if path.as_os_str() == "-" {
            Dest::Stdout
        } else {
            Dest::File(path)
        }
    }
}

impl std::fmt::Display for Dest {
    /// `stdout`, or the file's path as given.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dest::Stdout => f.write_str("stdout"),
            Dest::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A FIFO or character device at the name itself (a symlink to one is not), or a descriptor
/// memmon already has (`/dev/stdout`): written as it is, with no sidecar. A hint for choosing
/// what to check; the open decides again on what it opened.
pub fn is_stream(path: &Path) -> bool {
    let device = std::fs::symlink_metadata(path).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        t.is_char_device() || t.is_fifo()
    });
    device || is_descriptor_alias(path)
}

/// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: names of descriptors memmon
/// already has, written through as they are (never unlinked or replaced, even with --force).
pub fn is_descriptor_alias(path: &Path) -> bool {
    let abs = absolute(path);
    ["/dev/stdout", "/dev/stderr"]
        .iter()
        .any(|p| abs == Path::new(p))
        || ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"]
            .iter()
            .any(|p| abs.starts_with(p))
}

/// The compression a file name claims (`gz` for `run.csv.gz`), which memmon does not write.
fn compressed_extension(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    ["gz", "zst", "zstd", "xz", "bz2", "lz4", "br"]
        .contains(&ext.as_str())
        .then_some(ext)
}

/// Checks, before any work starts, that each `(path, flag)` may be written: a path that
/// exists is refused without `force` (a symlink counts as existing, dangling or not), a
/// directory, a block device or a socket always, a directory reached through a symlink
/// someone else could have planted always, and two outputs naming one file are an error.
/// Streams pass (they are judged when opened); so does a directory that cannot be opened
/// (creating the file then says why, exit 1). Stdout is no path: callers leave it out. A
/// compressed file's name is refused: memmon writes plain text.
pub fn check_outputs(outputs: &[(&Path, &str)], force: bool) -> Result<(), OutputCheckError> {
    let mut seen: Vec<((FileId, OsString), &str)> = Vec::new();
    for &(path, flag) in outputs {
        if is_descriptor_alias(path) {
            continue;
        }
        if let Some(ext) = compressed_extension(path) {
            return Err(OutputCheckError::CompressedName {
                path: path.to_path_buf(),
                flag: flag.to_string(),
                ext,
            });
        }
        let refused = |why: OpenError| OutputCheckError::Refused {
            path: absolute(path),
            flag: flag.to_string(),
            why,
        };
        let place = match Place::resolve(path) {
            Ok(p) => p,
            Err(OpenError::Directory) => {
                return Err(OutputCheckError::Directory {
                    path: path.to_path_buf(),
                    flag: flag.to_string(),
                })
            }
            Err(e) if e.is_refusal() => return Err(refused(e)),
            Err(_) => continue,
        };
        match place.at() {
            Ok(At::Stream(_)) => continue,
            Ok(At::Directory) => {
                return Err(OutputCheckError::Directory {
                    path: path.to_path_buf(),
                    flag: flag.to_string(),
                })
            }
            Ok(At::Other(kind)) => return Err(refused(OpenError::Special(kind))),
            Ok(At::Regular(_) | At::Link) if !force => {
                return Err(OutputCheckError::Exists {
                    path: place.abs.clone(),
                    flag: flag.to_string(),
                })
            }
            _ => {}
        }
        let key = (place.dir.id, place.name.clone());
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            return Err(OutputCheckError::Same {
                path: place.dir.path.join(&place.name),
                first: first.to_string(),
                second: flag.to_string(),
            });
        }
        seen.push((key, flag));
    }
    Ok(())
}

/// A file's identity: device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    fn of(st: &rfs::Stat) -> FileId {
        FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }

    /// The identity of an open file.
    pub fn of_file(f: &File) -> io::Result<FileId> {
        Ok(FileId::of(&rfs::fstat(f)?))
    }
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Root and the user memmon runs as: whoever else made a file may have planted it.
fn trusted(uid: u32) -> bool {
    uid == 0 || uid == euid()
}

/// Whether a user other than root and this one can add, rename or remove entries of the
/// directory `st` (the world, a group other than root's, or an owner other than these).
fn others_can_write(st: &rfs::Stat) -> bool {
    let mode = st.st_mode;
    mode & 0o002 != 0
        || (mode & 0o020 != 0 && st.st_gid != 0)
        || (mode & 0o200 != 0 && !trusted(st.st_uid))
}

/// A directory opened once by a safe walk; names in it are created, replaced and removed
/// relative to its descriptor, so a directory renamed or swapped for a link later does not
/// redirect them.
#[derive(Debug)]
struct Dir {
    fd: OwnedFd,
    /// The directory as the walk found it (symlinks followed), for messages.
    path: PathBuf,
    /// Whether others can write it (`others_can_write`).
    shared: bool,
    id: FileId,
}

fn path_flags() -> OFlags {
    OFlags::PATH | OFlags::CLOEXEC
}

fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

impl Dir {
    /// Walks to `path` one component at a time, never letting the kernel follow a symlink: a
    /// symlink is read and followed by the walk only when root or this user owns it, or no one
    /// else can write the directory it is in.
    fn open(path: &Path) -> Result<Dir, OpenError> {
        let root = || {
            rfs::openat(
                rfs::CWD,
                "/",
                path_flags() | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .map_err(|e| OpenError::Dir("/".into(), e.into()))
        };
        let (mut cur, mut shown) = if path.is_absolute() {
            (root()?, PathBuf::from("/"))
        } else {
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            let fd = rfs::openat(
                rfs::CWD,
                ".",
                path_flags() | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .map_err(|e| OpenError::Dir(cwd.clone(), e.into()))?;
            (fd, cwd)
        };
        let mut todo = components(path);
        let mut links = 0;
        while let Some(c) = todo.pop_front() {
            if c == ".." {
                cur = rfs::openat(&cur, "..", path_flags() | OFlags::DIRECTORY, Mode::empty())
                    .map_err(|e| OpenError::Dir(shown.clone(), e.into()))?;
                shown.pop();
                continue;
            }
            let here = shown.join(&c);
            let fd = rfs::openat(
                &cur,
                c.as_os_str(),
                path_flags() | OFlags::NOFOLLOW,
                Mode::empty(),
            )
            .map_err(|e| OpenError::Dir(here.clone(), e.into()))?;
            let st = rfs::fstat(&fd).map_err(|e| OpenError::Dir(here.clone(), e.into()))?;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    cur = fd;
                    shown = here;
                }
                FileType::Symlink => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(OpenError::Dir(here, Errno::LOOP.into()));
                    }
                    // Read through the descriptor: the link judged is the link followed.
                    let target = rfs::readlinkat(&fd, "", Vec::new())
                        .map_err(|e| OpenError::Dir(here.clone(), e.into()))?;
                    let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                    let holder =
                        rfs::fstat(&cur).map_err(|e| OpenError::Dir(shown.clone(), e.into()))?;
                    if !trusted(st.st_uid) && others_can_write(&holder) {
                        return Err(OpenError::Link {
                            link: here,
                            owner: st.st_uid,
                            target,
                        });
                    }
                    let mut next = components(&target);
                    next.extend(todo);
                    todo = next;
                    if target.is_absolute() {
                        cur = root()?;
                        shown = PathBuf::from("/");
                    }
                }
                _ => return Err(OpenError::Dir(here, Errno::NOTDIR.into())),
            }
        }
        // A readable descriptor where allowed, so that renames can be fsynced.
        let fd = match rfs::openat(
            &cur,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(_) => cur,
        };
        let st = rfs::fstat(&fd).map_err(|e| OpenError::Dir(shown.clone(), e.into()))?;
        Ok(Dir {
            fd,
            path: shown,
            shared: others_can_write(&st),
            id: FileId::of(&st),
        })
    }

    fn sync(&self) {
        let _ = rfs::fsync(&self.fd);
    }
}

/// What is at a name, as `lstat` sees it: a hint for which open to try.
#[derive(Debug)]
pub enum At {
    Nothing,
    Regular(FileId),
    Link,
    /// A FIFO or a character device.
    Stream(FileId),
    Directory,
    /// A block device or a socket.
    Other(&'static str),
}

/// An output path resolved: its directory, opened once, and its name in it.
#[derive(Debug, Clone)]
pub struct Place {
    dir: Arc<Dir>,
    name: OsString,
    abs: PathBuf,
}

/// A file opened for writing, and what it is.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    /// A FIFO or a character device (no sidecar, no lock, nothing to remove).
    pub stream: bool,
    /// Created (or put in place by `--force`) by this open; false for an existing recording
    /// opened for `--append`, and for a stream.
    pub created: bool,
    pub id: FileId,
    /// With `--force` over an existing file: the new file is still at a temporary name beside
    /// it, and replaces it only when [`Pending::commit`]ted (once the recording has started);
    /// dropped uncommitted, it is removed and the existing file is left as it was.
    pub pending: Option<Pending>,
}

/// A file that is to replace the name of a [`Place`], not yet put in place (`--force`).
#[derive(Debug)]
pub struct Pending {
    place: Place,
    tmp: Temp,
}

impl Pending {
    /// Renames the new file over the name (replacing whatever is there, never following a
    /// symlink); refused when the file there is now a recording another process is writing.
    pub fn commit(mut self) -> Result<(), OpenError> {
        if let At::Regular(id) = self.place.at()? {
            self.place.check_unlocked(id)?;
        }
        self.place.rename_into_place(&self.tmp.name, true)?;
        self.tmp.keep = true;
        Ok(())
    }
}

impl Place {
    /// Resolves `path`: its directory walked to and opened (see `Dir::open`), its last
    /// component kept as a name.
    pub fn resolve(path: &Path) -> Result<Place, OpenError> {
        let abs = absolute(path);
        let name = abs.file_name().ok_or(OpenError::Directory)?.to_os_string();
        let parent = abs.parent().unwrap_or(Path::new("/"));
        let dir = Dir::open(parent)?;
        Ok(Place {
            dir: Arc::new(dir),
            name,
            abs,
        })
    }

    /// The path as given (made absolute), for messages.
    pub fn path(&self) -> &Path {
        &self.abs
    }

    /// Another name in the same directory (a recording's sidecar).
    pub fn sibling(&self, name: &OsStr) -> Place {
        Place {
            dir: self.dir.clone(),
            name: name.to_os_string(),
            abs: self.abs.with_file_name(name),
        }
    }

    /// What is at the name now (`lstat`): a hint, never the decision to write.
    pub fn at(&self) -> Result<At, OpenError> {
        let st = match rfs::statat(
            &self.dir.fd,
            self.name.as_os_str(),
            AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => st,
            Err(Errno::NOENT) => return Ok(At::Nothing),
            Err(e) => return Err(e.into()),
        };
        Ok(match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => At::Regular(FileId::of(&st)),
            FileType::Symlink => At::Link,
            FileType::Fifo | FileType::CharacterDevice => At::Stream(FileId::of(&st)),
            FileType::Directory => At::Directory,
            FileType::BlockDevice => At::Other("block device"),
            FileType::Socket => At::Other("socket"),
            FileType::Unknown => At::Other("file of unknown kind"),
        })
    }

    /// Opens a recording's file, new: created exclusively; with `force` an existing file or
    /// symlink is to be replaced by a new file, made at a temporary name and renamed over it
    /// when the caller commits it (`Opened::pending`); a FIFO or character device is opened as
    /// it is (see `open_stream`). The new file is locked for the session.
    pub fn create_recording(&self, force: bool) -> Result<Opened, OpenError> {
        for _ in 0..TRIES {
            match self.at()? {
                At::Nothing => {
                    if let Some(file) = self.create_new()? {
                        return self.locked(file, true);
                    }
                }
                At::Stream(_) => {
                    if let Some(file) = self.open_stream(force)? {
                        return stream(file);
                    }
                }
                At::Regular(_) | At::Link if force => {
                    if let At::Regular(id) = self.at()? {
                        self.check_unlocked(id)?;
                    }
                    // Locked before it has the name: no one can take it in between.
                    let tmp = self.create_temp()?;
                    lock(&tmp.file)?;
                    let file = tmp.file.try_clone()?;
                    return Ok(Opened {
                        file,
                        stream: false,
                        created: true,
                        id: tmp.id,
                        pending: Some(Pending {
                            place: self.clone(),
                            tmp,
                        }),
                    });
                }
                At::Regular(_) | At::Link => return Err(OpenError::Exists),
                At::Directory => return Err(OpenError::Directory),
                At::Other(kind) => return Err(OpenError::Special(kind)),
            }
        }
        Err(OpenError::Unstable)
    }

    /// Opens a recording for `--append`: an existing regular file (never through a symlink)
    /// read-write and locked for the session, with its offset at 0 (the caller checks its
    /// header, then sets `O_APPEND`); none there: a new one; a FIFO or device: as it is.
    pub fn open_append(&self) -> Result<Opened, OpenError> {
        for _ in 0..TRIES {
            match self.at()? {
                At::Nothing => {
                    if let Some(file) = self.create_new()? {
                        return self.locked(file, true);
                    }
                }
                At::Stream(_) => {
                    if let Some(file) = self.open_stream(false)? {
                        return stream(file);
                    }
                }
                At::Regular(_) => {
                    let flags = OFlags::RDWR
                        | OFlags::NOFOLLOW
                        | OFlags::NONBLOCK
                        | OFlags::NOCTTY
                        | OFlags::CLOEXEC;
                    let fd = match rfs::openat(
                        &self.dir.fd,
                        self.name.as_os_str(),
                        flags,
                        Mode::empty(),
                    ) {
                        Ok(fd) => fd,
                        Err(Errno::NOENT | Errno::LOOP | Errno::NXIO) => continue,
                        Err(e) => return Err(e.into()),
                    };
                    let st = rfs::fstat(&fd)?;
                    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                        continue;
                    }
                    if self.dir.shared && !trusted(st.st_uid) {
                        return Err(OpenError::NotOwn { owner: st.st_uid });
                    }
                    rfs::fcntl_setfl(&fd, rfs::fcntl_getfl(&fd)? - OFlags::NONBLOCK)?;
                    return self.locked(File::from(fd), false);
                }
                At::Link => return Err(OpenError::Symlink),
                At::Directory => return Err(OpenError::Directory),
                At::Other(kind) => return Err(OpenError::Special(kind)),
            }
        }
        Err(OpenError::Unstable)
    }

    fn locked(&self, file: File, created: bool) -> Result<Opened, OpenError> {
        lock(&file)?;
        let id = FileId::of_file(&file)?;
        Ok(Opened {
            file,
            stream: false,
            created,
            id,
            pending: None,
        })
    }

    /// Writes a whole file: `fill` writes a new temporary file in the same directory, which is
    /// fsynced (with `sync`) and renamed over the name; an existing entry is refused unless
    /// `replace`. With `streams`, a FIFO or character device at the name is written as it is
    /// (`fill` then writes into memory first); without, it counts as an existing entry. Returns
    /// the identity of the file put in place (`None` for a stream).
    pub fn write_whole(
        &self,
        replace: bool,
        sync: bool,
        streams: bool,
        fill: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> Result<Option<FileId>, OpenError> {
        let mut fill = Some(fill);
        for _ in 0..TRIES {
            let at = self.at()?;
            match at {
                At::Stream(_) if streams => {
                    if let Some(file) = self.open_stream(replace)? {
                        let fill = fill.take().expect("filled once");
                        write_to_stream(file, fill)?;
                        return Ok(None);
                    }
                    continue;
                }
                At::Directory => return Err(OpenError::Directory),
                At::Other(kind) => return Err(OpenError::Special(kind)),
                At::Nothing => {}
                At::Regular(_) | At::Link | At::Stream(_) if !replace => {
                    return Err(OpenError::Exists)
                }
                At::Regular(id) => self.check_unlocked(id)?,
                At::Link | At::Stream(_) => {}
            }
            let mut tmp = self.create_temp()?;
            (fill.take().expect("filled once"))(&mut tmp.file)?;
            if sync {
                tmp.file.sync_all()?;
            }
            let id = FileId::of_file(&tmp.file)?;
            self.rename_into_place(&tmp.name, replace)?;
            tmp.kept();
            if sync {
                self.dir.sync();
            }
            return Ok(Some(id));
        }
        Err(OpenError::Unstable)
    }

    /// Reads the regular file at the name (never through a symlink, never blocking on a FIFO),
    /// up to `max` bytes; `None` when there is nothing there.
    pub fn read_regular(&self, max: u64) -> Result<Option<Vec<u8>>, OpenError> {
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = match rfs::openat(&self.dir.fd, self.name.as_os_str(), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => return Err(OpenError::Symlink),
            Err(e) => return Err(e.into()),
        };
        let st = rfs::fstat(&fd)?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(OpenError::Directory),
            FileType::Fifo => return Err(OpenError::Special("FIFO")),
            FileType::CharacterDevice => return Err(OpenError::Special("character device")),
            _ => return Err(OpenError::Special("special file")),
        }
        let mut bytes = Vec::new();
        File::from(fd)
            .take(max.saturating_add(1))
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(OpenError::Io(io::Error::other(format!(
                "it is larger than {max} bytes"
            ))));
        }
        Ok(Some(bytes))
    }

    /// Removes the name if it is still the file `id` (what memmon created), never another.
    pub fn remove_if(&self, id: FileId) -> bool {
        match rfs::statat(
            &self.dir.fd,
            self.name.as_os_str(),
            AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(st) if FileId::of(&st) == id => {
                rfs::unlinkat(&self.dir.fd, self.name.as_os_str(), AtFlags::empty()).is_ok()
            }
            _ => false,
        }
    }

    fn create_new(&self) -> Result<Option<File>, OpenError> {
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::NOCTTY
            | OFlags::CLOEXEC;
        match rfs::openat(&self.dir.fd, self.name.as_os_str(), flags, new_file_mode()) {
            Ok(fd) => Ok(Some(File::from(fd))),
            Err(Errno::EXIST) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether a file can be made in the directory now (`check_writable`): an unnamed one, or
    /// a temporary one removed at once where the file system makes no unnamed files.
    fn can_create(&self) -> Result<(), OpenError> {
        let flags = OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC;
        match rfs::openat(&self.dir.fd, ".", flags, Mode::from_raw_mode(0o600)) {
            // Closed here: an unnamed file goes with its last descriptor.
            Ok(_) => Ok(()),
            // No O_TMPFILE on this file system (or kernel: a directory opened for writing).
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => {
                // Removed when dropped (never kept).
                self.create_temp().map(drop)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A new file with a random name next to the name (`.NAME.RANDOM.tmp.EXT`: a writer that
    /// picks a format by the extension still can), created exclusively; removed when dropped
    /// unless kept.
    fn create_temp(&self) -> Result<Temp, OpenError> {
        let shown: String = self.name.to_string_lossy().chars().take(100).collect();
        let ext = Path::new(&self.name)
            .extension()
            .map(|e| {
                format!(
                    ".{}",
                    e.to_string_lossy().chars().take(16).collect::<String>()
                )
            })
            .unwrap_or_default();
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::NOCTTY
            | OFlags::CLOEXEC;
        for _ in 0..64 {
            let name = OsString::from(format!(".{shown}.{:016x}.tmp{ext}", random()));
            match rfs::openat(&self.dir.fd, name.as_os_str(), flags, new_file_mode()) {
                Ok(fd) => {
                    let file = File::from(fd);
                    let id = FileId::of_file(&file)?;
                    return Ok(Temp {
                        place: self.sibling(&name),
                        name,
                        file,
                        id,
                        keep: false,
                    });
                }
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(OpenError::Io(io::Error::other(
            "no free temporary name in its directory after 64 tries",
        )))
    }

    /// Renames `tmp` (a name in the same directory) to the name: over whatever is there with
    /// `replace` (a symlink is replaced, not followed), else only if nothing is.
    fn rename_into_place(&self, tmp: &OsStr, replace: bool) -> Result<(), OpenError> {
        let d = &self.dir.fd;
        let name = self.name.as_os_str();
        let r = if replace {
            rfs::renameat(d, tmp, d, name)
        } else {
            match rfs::renameat_with(d, tmp, d, name, RenameFlags::NOREPLACE) {
                // A filesystem without renameat2's flags: a link fails on an existing name too.
                Err(Errno::INVAL | Errno::NOSYS) => rfs::linkat(d, tmp, d, name, AtFlags::empty())
                    .and_then(|_| rfs::unlinkat(d, tmp, AtFlags::empty())),
                r => r,
            }
        };
        match r {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(OpenError::Exists),
            Err(Errno::ISDIR | Errno::NOTEMPTY) => Err(OpenError::Directory),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens the FIFO or character device at the name for writing, without following a
    /// symlink and without blocking: a FIFO with no reader is opened again every 100 ms until
    /// one comes, for at most `READER_WAIT`, and a stop signal ends the wait. What was opened
    /// decides (`fstat`): `None` when it is no longer a FIFO or device (the caller looks
    /// again). One that a user other than root and this one made, in a directory others can
    /// write, is refused unless `force`.
    fn open_stream(&self, force: bool) -> Result<Option<File>, OpenError> {
        let flags =
            OFlags::WRONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC;
        let started = Instant::now();
        loop {
            match rfs::openat(&self.dir.fd, self.name.as_os_str(), flags, Mode::empty()) {
                Ok(fd) => {
                    let st = rfs::fstat(&fd)?;
                    let Some(kind) = stream_kind(&st) else {
                        return Ok(None);
                    };
                    self.check_planted(&st, kind, force)?;
                    return Ok(Some(File::from(fd)));
                }
                // A FIFO with no reader (a device with no driver behind it says so too).
                Err(Errno::NXIO) => {
                    let st = match rfs::statat(
                        &self.dir.fd,
                        self.name.as_os_str(),
                        AtFlags::SYMLINK_NOFOLLOW,
                    ) {
                        Ok(st) => st,
                        Err(Errno::NOENT) => return Ok(None),
                        Err(e) => return Err(e.into()),
                    };
                    match stream_kind(&st) {
                        Some("FIFO") => self.check_planted(&st, "FIFO", force)?,
                        Some(_) => return Err(Errno::NXIO.into()),
                        None => return Ok(None),
                    }
                    if started.elapsed() >= READER_WAIT {
                        return Err(OpenError::NoReader);
                    }
                    if let Some(sig) = wait_for_signal(Duration::from_millis(100)) {
                        return Err(OpenError::Interrupted(sig));
                    }
                }
                Err(Errno::NOENT | Errno::LOOP | Errno::ISDIR) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn check_planted(
        &self,
        st: &rfs::Stat,
        kind: &'static str,
        force: bool,
    ) -> Result<(), OpenError> {
        if self.dir.shared && !trusted(st.st_uid) && !force {
            return Err(OpenError::Planted {
                kind,
                owner: st.st_uid,
            });
        }
        Ok(())
    }

    /// Refuses to replace a file whose lock another process holds (a recording in progress).
    fn check_unlocked(&self, id: FileId) -> Result<(), OpenError> {
        match lock_holder(id) {
            Some(holder) if holder.0 != std::process::id() as i32 => {
                Err(OpenError::Locked(Some(holder)))
            }
            _ => Ok(()),
        }
    }
}

fn stream(file: File) -> Result<Opened, OpenError> {
    let id = FileId::of_file(&file)?;
    Ok(Opened {
        file,
        stream: true,
        created: false,
        id,
        pending: None,
    })
}

fn stream_kind(st: &rfs::Stat) -> Option<&'static str> {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Fifo => Some("FIFO"),
        FileType::CharacterDevice => Some("character device"),
        _ => None,
    }
}

/// A temporary file of ours, removed when dropped unless kept.
#[derive(Debug)]
struct Temp {
    place: Place,
    name: OsString,
    file: File,
    id: FileId,
    keep: bool,
}

impl Temp {
    /// Keeps it (renamed into place): its file.
    fn kept(mut self) -> File {
        self.keep = true;
        self.file.try_clone().expect("a descriptor to spare")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.keep {
            self.place.remove_if(self.id);
        }
    }
}

/// A random number for temporary names (`O_EXCL` makes them safe; this makes them unlikely to
/// be taken).
fn random() -> u64 {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((nanos, std::process::id()))
}

/// Takes the exclusive lock of a recording (`flock`, for the session: it lives as long as the
/// file's descriptor). Held by another: refused, naming the holder. A filesystem without locks
/// is written without.
fn lock(file: &File) -> Result<(), OpenError> {
    match rfs::flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(Errno::WOULDBLOCK) => Err(OpenError::Locked(
            FileId::of_file(file).ok().and_then(lock_holder),
        )),
        Err(_) => Ok(()),
    }
}

/// Takes the lock of an existing recording (stdout redirected to a file).
pub fn lock_file(file: &File) -> Result<(), OpenError> {
    lock(file)
}

/// The process holding a `flock` write lock on the file `id`, and its command name, from
/// /proc/locks (`1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF`).
pub fn lock_holder(id: FileId) -> Option<(i32, String)> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    let dev = format!(
        "{:02x}:{:02x}:{}",
        rfs::major(id.dev),
        rfs::minor(id.dev),
        id.ino
    );
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[1] != "FLOCK" || f[3] != "WRITE" || f[5] != dev {
            return None;
        }
        let pid: i32 = f[4].parse().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim().to_string())
            .unwrap_or_else(|_| "gone".into());
        Some((pid, comm))
    })
}

/// The stop signals' socket (`sys::signals`), readable while a signal waits to be taken;
/// `None` before the handlers are installed (a signal then ends memmon by itself).
fn signal_fd() -> Option<BorrowedFd<'static>> {
    crate::sys::signals::wake_fd()
}

/// Sleeps for `d`, cut short by a stop signal: the signal (taken), if one came.
fn wait_for_signal(d: Duration) -> Option<i32> {
    let Some(sig_fd) = signal_fd() else {
        std::thread::sleep(d);
        return None;
    };
    match crate::sys::wait_ready([Some(sig_fd)], Some(d)) {
        Ok([true]) => crate::sys::signals::take().first().map(|a| a.sig),
        Ok(_) => None,
        // `poll` on a valid descriptor fails only without memory for its table: the wait still
        // lasts its time.
        Err(_) => {
            std::thread::sleep(d);
            None
        }
    }
}

/// A file memmon writes as it goes: a regular file, or a FIFO or device opened without
/// blocking, whose writes wait (in `poll`) while its reader is not reading, and give up when a
/// stop signal arrives: a stalled reader never makes memmon deaf to signals.
#[derive(Debug)]
pub struct OutFile {
    file: File,
}

impl OutFile {
    pub fn new(file: File) -> OutFile {
        OutFile { file }
    }

    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match (&self.file).write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(&self.file)?,
                r => return r,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Waits until `file` takes more bytes; an error when a stop signal comes first (the signal
/// is left for the recorder to take).
fn wait_writable(file: &File) -> io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags};
    let sig_fd = signal_fd();
    let mut fds = vec![PollFd::new(file, PollFlags::OUT)];
    if let Some(s) = &sig_fd {
        fds.push(PollFd::new(s, PollFlags::IN));
    }
    loop {
        match poll(&mut fds, None) {
            Ok(_) => break,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    if fds.get(1).is_some_and(|f| !f.revents().is_empty()) {
        return Err(io::Error::other(
            "a stop signal arrived while its reader was not reading",
        ));
    }
    Ok(())
}

/// Writes what `fill` makes to a FIFO or device, through memory (`fill` wants a file).
fn write_to_stream(file: File, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let mem = rfs::memfd_create("memmon-output", rfs::MemfdFlags::CLOEXEC)?;
    let mut mem = File::from(mem);
    fill(&mut mem)?;
    mem.rewind()?;
    let mut out = OutFile::new(file);
    io::copy(&mut mem, &mut out)?;
    Ok(())
}

/// Opens a descriptor alias (`/dev/stdout`, `/dev/fd/N`) for writing: what it names, at its
/// end, never blocking on a FIFO without a reader.
pub fn open_alias(path: &Path) -> io::Result<File> {
    let flags =
        OFlags::WRONLY | OFlags::APPEND | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    Ok(File::from(rfs::open(path, flags, Mode::empty())?))
}

/// Writes `bytes` as the whole content of `path` (see `Place::write_whole`): an existing path
/// is refused unless `force`; a FIFO or character device at the name is written as it is.
pub fn write_whole(path: &Path, bytes: &[u8], force: bool) -> io::Result<()> {
    write_via(path, force, |f| f.write_all(bytes))
}

/// Like `write_whole`, for a writer that wants a file: `fill` writes a fresh, empty file only
/// memmon created, which is then renamed over `path`.
pub fn write_via(
    path: &Path,
    force: bool,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    if is_descriptor_alias(path) {
        let file = open_alias(path)?;
        return write_to_stream(file, fill);
    }
    Place::resolve(path)?.write_whole(force, true, true, fill)?;
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
        let place = Place::resolve(&out).unwrap();
        assert!(matches!(
            place.create_recording(false),
            Err(OpenError::Exists)
        ));
        write_whole(&out, b"new", true).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        assert!(!std::fs::symlink_metadata(&out).unwrap().is_symlink());
    }

    #[test]
    fn a_forced_recording_replaces_a_symlink_not_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let out = dir.path().join("run.csv");
        symlink(&victim, &out).unwrap();
        let mut opened = Place::resolve(&out)
            .unwrap()
            .create_recording(true)
            .unwrap();
        opened.file.write_all(b"rows").unwrap();
        opened.pending.take().unwrap().commit().unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "rows");
        // And no temporary file is left.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_forced_recording_replaces_the_old_file_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run.csv");
        std::fs::write(&out, "old rows").unwrap();
        let mut opened = Place::resolve(&out)
            .unwrap()
            .create_recording(true)
            .unwrap();
        opened.file.write_all(b"new rows").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "old rows");
        // Given up (the command could not be run): the new file goes, the old one stays.
        drop(opened);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "old rows");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_symlink_to_a_fifo_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rfs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let out = dir.path().join("run.csv");
        symlink(&fifo, &out).unwrap();
        // Nothing reads the FIFO: following the link would block (or wait READER_WAIT).
        let t = Instant::now();
        let place = Place::resolve(&out).unwrap();
        assert!(matches!(
            place.create_recording(false),
            Err(OpenError::Exists)
        ));
        assert!(matches!(place.open_append(), Err(OpenError::Symlink)));
        assert!(matches!(
            place.write_whole(false, false, true, |f| f.write_all(b"x")),
            Err(OpenError::Exists)
        ));
        assert!(t.elapsed() < READER_WAIT);
    }

    #[test]
    fn no_temporary_file_is_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("a.json");
        write_whole(&out, b"1", false).unwrap();
        write_whole(&out, b"2", true).unwrap();
        let failed = write_via(&out, true, |_| Err(io::Error::other("disk full")));
        assert!(failed.is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "2");
    }

    #[test]
    fn a_directory_reached_through_a_trusted_symlink_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        symlink("real", dir.path().join("via")).unwrap();
        let out = dir.path().join("via/../via/x.csv");
        write_whole(&out, b"x", false).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("real/x.csv")).unwrap(),
            "x"
        );
    }

    #[test]
    fn the_lock_holder_is_found_in_proc_locks() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.csv");
        let first = Place::resolve(&out)
            .unwrap()
            .create_recording(false)
            .unwrap();
        let holder = lock_holder(first.id).unwrap();
        assert_eq!(holder.0, std::process::id() as i32);
        // A second open of the same file (another description) cannot take the lock.
        let again = File::open(&out).unwrap();
        assert!(matches!(lock(&again), Err(OpenError::Locked(Some(_)))));
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
        check_outputs(&[(null, "-o"), (null, "--plot")], false).unwrap();
    }

    #[test]
    fn a_file_written_at_the_end_is_checked_writable_leaving_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("b.json");
        check_writable(&[(&ok, "--export-json")]).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A file already there (with --force) is left as it is.
        std::fs::write(&ok, "mine").unwrap();
        check_writable(&[(&ok, "--export-json")]).unwrap();
        assert_eq!(std::fs::read_to_string(&ok).unwrap(), "mine");
        let missing = dir.path().join("no").join("b.csv");
        let err =
            check_writable(&[(&ok, "--export-json"), (&missing, "--export-csv")]).unwrap_err();
        assert_eq!(
            crate::error::Classified::class(&err),
            crate::exit::Class::Failure
        );
        assert!(err.to_string().contains("no/b.csv (--export-csv)"), "{err}");
        // Streams and descriptor names are written as they are, at the end.
        check_writable(&[
            (Path::new("/dev/null"), "-o"),
            (Path::new("/dev/stdout"), "-o"),
        ])
        .unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_dash_is_stdout_and_any_other_path_a_file() {
        assert_eq!(Dest::from(PathBuf::from("-")), Dest::Stdout);
        assert_eq!(Dest::Stdout.to_string(), "stdout");
        for p in ["./-", "-.csv", "--", "a/-"] {
            let d = Dest::from(PathBuf::from(p));
            assert_eq!(d.file(), Some(Path::new(p)), "{p}");
            assert_eq!(d.to_string(), p);
        }
    }
}
