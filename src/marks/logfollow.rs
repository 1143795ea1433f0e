//! `--mark-log FILE`: follows a log like `tail -F` (from its end; across rotation, when the file
//! is renamed and a new one created, and truncation, as by copytruncate) and turns each line
//! that matches `--mark-regex` into a marker. A thread sleeps on an inotify watch of the log
//! (woken by its writes, and by a new file created under its name), and looks once every
//! `FALLBACK` in case a change came unseen; every `POLL` where inotify cannot watch it, or
//! cannot be trusted to: a log on a network or FUSE file system, which another machine or a
//! user-space server may change without an event.

use super::{send_mark_at, MarkPattern, Worker};
use crate::sampler::record::ControlHandle;
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::io::Errno;
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the log is looked at without inotify: a marker's sample is then taken at most this
/// long after its line was written.
pub const POLL: Duration = Duration::from_millis(50);

/// With inotify, how often the log is looked at anyway, in case a change came without an event:
/// one wake-up every 30 s for an idle log (a recorder at `-i 1s` wakes once a second for its
/// samples; this adds 1/30 of a wake-up a second, not 1/2).
pub const FALLBACK: Duration = Duration::from_secs(30);

/// File systems whose changes inotify does not see whole (made elsewhere: on another NFS or SMB
/// client, by a FUSE server, on the host of a 9p share): a log on one is polled every `POLL`.
/// `statfs` magic numbers from the kernel's include/uapi/linux/magic.h and the file systems'.
const UNWATCHABLE_FS: [i64; 10] = [
    0x6969,                 // NFS
    0x517B,                 // SMB
    0xFF53_4D42_u32 as i64, // CIFS
    0xFE53_4D42_u32 as i64, // SMB2
    0x6573_5546,            // FUSE
    0x0102_1997,            // 9P
    0x00C3_6400,            // Ceph
    0x5346_414F,            // AFS
    0x0BD0_0BD0,            // Lustre
    0x4750_4653,            // GPFS
];

/// True when the directory is on a file system of [`UNWATCHABLE_FS`]. (One `statfs` cannot
/// read, a missing directory, is not: its inotify watch then fails, and the log is polled.)
fn on_unwatchable_fs(dir: &std::ffi::CStr) -> bool {
    rustix::fs::statfs(dir).is_ok_and(|st| UNWATCHABLE_FS.contains(&st.f_type))
}

/// A line longer than this without a newline is taken as it is (its first MiB).
const MAX_LINE_BYTES: usize = 1 << 20;

/// The most read from the log in one poll; the rest waits for the next. A file that never
/// ends (`--mark-log /dev/zero`) or grows faster than it can be read keeps memory bounded.
const MAX_READ_PER_POLL: u64 = 4 << 20;

/// The position in the followed file, and the file it is in.
pub struct LogFollower {
    path: PathBuf,
    file: Option<File>,
    /// (device, inode) of `file`: a different one at `path` means the log was rotated.
    id: (u64, u64),
    pos: u64,
    partial: Vec<u8>,
    /// The file's modification time when it was last read: when its newest lines were written.
    written: Option<std::time::SystemTime>,
}

impl LogFollower {
    /// Starts at the end of the file as it is now; a file that does not exist yet is read from
    /// its beginning once it appears.
    pub fn open_at_end(path: PathBuf) -> LogFollower {
        let mut f = LogFollower {
            path,
            file: None,
            id: (0, 0),
            pos: 0,
            partial: Vec::new(),
            written: None,
        };
        if f.open_current() {
            if let Some(file) = f.file.as_mut() {
                f.pos = file.seek(SeekFrom::End(0)).unwrap_or(0);
            }
        }
        f
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the file now at the path, from its beginning. False when there is none.
    fn open_current(&mut self) -> bool {
        let Ok(file) = File::open(&self.path) else {
            return false;
        };
        let Ok(m) = file.metadata() else { return false };
        self.id = (m.dev(), m.ino());
        self.file = Some(file);
        self.pos = 0;
        true
    }

    /// Reads what was written since the last call and appends the complete lines to `lines`.
    pub fn poll(&mut self, lines: &mut Vec<String>) {
        self.read_open_file(lines);
        let now_there = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let rotated = match (&self.file, now_there) {
            (None, Some(_)) => true,
            (Some(_), Some(id)) => id != self.id,
            (_, None) => false, // renamed away and not yet recreated: keep reading the old one
        };
        if rotated {
            // The old file was read to its end above; its last line may lack a newline.
            self.take_partial(lines);
            if self.open_current() {
                self.read_open_file(lines);
            }
        }
    }

    /// Reads the open file from `pos` to its end (from its beginning if it was truncated).
    fn read_open_file(&mut self, lines: &mut Vec<String>) {
        let Some(mut file) = self.file.take() else {
            return;
        };
        let meta = file.metadata().ok();
        let size = meta.as_ref().map_or(0, |m| m.len());
        // When the lines read now were written (the last of them): their markers' lag counts
        // from it.
        self.written = meta.and_then(|m| m.modified().ok());
        if size < self.pos {
            // Truncated in place (copytruncate): what follows is new.
            self.pos = 0;
            self.partial.clear();
        }
        if file.seek(SeekFrom::Start(self.pos)).is_err() {
            self.file = Some(file);
            return;
        }
        let mut buf = [0u8; 64 * 1024];
        let mut read_now = 0u64;
        while read_now < MAX_READ_PER_POLL {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.pos += n as u64;
                    read_now += n as u64;
                    self.partial.extend_from_slice(&buf[..n]);
                    self.split_lines(lines);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        self.file = Some(file);
    }

    fn split_lines(&mut self, lines: &mut Vec<String>) {
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &self.partial[start..]) {
            let line = &self.partial[start..start + i];
            lines.push(decode(&line[..line.len().min(MAX_LINE_BYTES)]));
            start += i + 1;
        }
        self.partial.drain(..start);
        if self.partial.len() > MAX_LINE_BYTES {
            self.partial.truncate(MAX_LINE_BYTES);
            self.take_partial(lines);
        }
    }

    fn take_partial(&mut self, lines: &mut Vec<String>) {
        if !self.partial.is_empty() {
            lines.push(decode(&self.partial));
            self.partial.clear();
        }
    }

    /// Follows the log on a thread, sending a marker for each matching line, until dropped or
    /// the recording ends. An error: the thread could not be started.
    pub fn spawn(
        mut self,
        pattern: MarkPattern,
        control: ControlHandle,
    ) -> std::io::Result<Following> {
        let worker = Worker::spawn("memmon-mark-log", move |stop| {
            let mut lines = Vec::new();
            let mut watch = Watch::new(&self.path);
            while !stop.is_set() {
                self.poll(&mut lines);
                for line in lines.drain(..) {
                    if let Some(label) = pattern.label(&line) {
                        let at = self.written.unwrap_or_else(std::time::SystemTime::now);
                        if !send_mark_at(&control, label, at) {
                            return;
                        }
                    }
                }
                let refused = match &watch {
                    Some(w) => {
                        // Woken by another file of the directory: sleep again, to the same end.
                        let until = Instant::now() + FALLBACK;
                        while stop.wait(Some(w.fd.as_fd()), Some(until - Instant::now().min(until)))
                            && !w.take_events()
                            && !stop.is_set()
                        {}
                        w.watch_file().is_err()
                    }
                    None => {
                        stop.wait(None, Some(POLL));
                        false
                    }
                };
                // The kernel refused the file's watch (out of watches, ENOSPC): poll instead.
                if refused {
                    watch = None;
                }
            }
        });
        Ok(Following { _worker: worker? })
    }
}

/// A log being followed; dropping it stops the thread.
pub struct Following {
    _worker: Worker,
}

/// An inotify watch of the log: of its file (writes, truncation, renames, also after a
/// rotation renamed it) and of its directory, for a new file created or moved in under its name.
/// Other files of the directory (a busy /tmp) wake the thread but are not read.
struct Watch {
    fd: OwnedFd,
    dir_wd: i32,
    name: Vec<u8>,
    path: CString,
}

impl Watch {
    /// `None` when inotify is unavailable, the directory does not exist (yet) or it is on a
    /// file system whose changes inotify may not see.
    fn new(path: &Path) -> Option<Watch> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir = CString::new(dir.as_os_str().as_bytes()).ok()?;
        if on_unwatchable_fs(&dir) {
            return None;
        }
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        let dir_wd = inotify::add_watch(
            &fd,
            dir.as_c_str(),
            WatchFlags::CREATE | WatchFlags::MOVED_TO,
        )
        .ok()?;
        let w = Watch {
            fd,
            dir_wd,
            name: path.file_name()?.as_bytes().to_vec(),
            path: CString::new(path.as_os_str().as_bytes()).ok()?,
        };
        w.watch_file().ok()?;
        Some(w)
    }

    /// Watches the file now at the path (again after a rotation; the kernel returns the same
    /// watch for the same file). A missing file is no error: it is watched once its creation is
    /// seen.
    fn watch_file(&self) -> std::io::Result<()> {
        let mask = WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::MOVE_SELF
            | WatchFlags::DELETE_SELF;
        match inotify::add_watch(&self.fd, self.path.as_c_str(), mask) {
            Ok(_) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads the queued events; true when one concerns the log (a file watch, or the directory
    /// event of an entry with the log's name).
    fn take_events(&self) -> bool {
        let mut buf = [0u8; 4096];
        let mut ours = false;
        loop {
            match rustix::io::read(&self.fd, &mut buf) {
                // EAGAIN: no more events queued.
                Ok(0) | Err(Errno::AGAIN) => return ours,
                Ok(n) => ours |= events_concern(&buf[..n], self.dir_wd, &self.name),
                Err(Errno::INTR) => {}
                // Events that could not be read may be the log's: read the log.
                Err(_) => return true,
            }
        }
    }
}

/// Walks a buffer of `struct inotify_event { int wd; u32 mask, cookie, len; char name[len]; }`
/// (16 bytes, then the NUL-padded name): true when an event is not the directory's, or is the
/// directory's for an entry named `name`.
fn events_concern(buf: &[u8], dir_wd: i32, name: &[u8]) -> bool {
    let mut at = 0;
    while at + 16 <= buf.len() {
        let wd = i32::from_ne_bytes(buf[at..at + 4].try_into().unwrap());
        let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap()) as usize;
        let end = (at + 16 + len).min(buf.len());
        let entry = &buf[at + 16..end];
        let entry = &entry[..entry.iter().position(|&b| b == 0).unwrap_or(entry.len())];
        if wd != dir_wd || entry == name {
            return true;
        }
        at += 16 + len;
    }
    false
}

fn decode(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8_lossy(line).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// One `struct inotify_event` as the kernel writes it: header, then the name padded with
    /// NULs to `len`.
    fn event(wd: i32, name: &str, len: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&wd.to_ne_bytes());
        v.extend_from_slice(&libc::IN_CREATE.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(&len.to_ne_bytes());
        let mut n = name.as_bytes().to_vec();
        n.resize(len as usize, 0);
        v.extend_from_slice(&n);
        v
    }

    #[test]
    fn only_events_of_the_log_or_its_name_in_the_directory_concern_it() {
        let other = event(1, "other.tmp", 16);
        assert!(!events_concern(&other, 1, b"app.log"));
        let mut both = other.clone();
        both.extend(event(1, "app.log", 16));
        assert!(events_concern(&both, 1, b"app.log"));
        // A file watch's event (no name) concerns the log whatever its watch number.
        assert!(events_concern(&event(2, "", 0), 1, b"app.log"));
        // A truncated buffer ends the walk without reading past it.
        assert!(!events_concern(&both[..20], 1, b"app.log"));
    }

    fn append(path: &Path, text: &str) {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    fn polled(f: &mut LogFollower) -> Vec<String> {
        let mut lines = Vec::new();
        f.poll(&mut lines);
        lines
    }

    #[test]
    fn a_log_that_never_ends_is_read_a_bounded_amount_per_poll() {
        // /dev/zero: no newline, no end. Each poll reads at most MAX_READ_PER_POLL and keeps
        // no line longer than MAX_LINE_BYTES.
        let mut f = LogFollower::open_at_end(PathBuf::from("/dev/zero"));
        for _ in 0..3 {
            let lines = polled(&mut f);
            let held: usize = lines.iter().map(String::len).sum::<usize>() + f.partial.len();
            assert!(held as u64 <= MAX_READ_PER_POLL, "{held} bytes held");
            assert!(lines.iter().all(|l| l.len() <= MAX_LINE_BYTES));
        }
    }

    #[test]
    fn it_starts_at_the_end_and_reads_only_new_complete_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("app.log");
        append(&log, "old line\n");
        let mut f = LogFollower::open_at_end(log.clone());
        assert!(polled(&mut f).is_empty());
        append(&log, "one\ntw");
        assert_eq!(polled(&mut f), ["one"]);
        append(&log, "o\r\n");
        assert_eq!(polled(&mut f), ["two"]);
    }

    #[test]
    fn a_rotated_log_is_drained_then_the_new_file_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("app.log");
        append(&log, "");
        let mut f = LogFollower::open_at_end(log.clone());
        append(&log, "before\nlast unterminated");
        std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
        append(&dir.path().join("app.log.1"), "\nlate in old\n");
        assert_eq!(
            polled(&mut f),
            ["before", "last unterminated", "late in old"]
        );
        append(&log, "first in new\n");
        assert_eq!(polled(&mut f), ["first in new"]);
    }

    #[test]
    fn a_truncated_log_is_read_again_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("app.log");
        append(&log, "a long line written before we started\n");
        let mut f = LogFollower::open_at_end(log.clone());
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&log)
            .unwrap();
        append(&log, "after\n");
        assert_eq!(polled(&mut f), ["after"]);
    }

    #[test]
    fn a_log_that_appears_later_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("later.log");
        let mut f = LogFollower::open_at_end(log.clone());
        assert!(polled(&mut f).is_empty());
        append(&log, "hello\n");
        assert_eq!(polled(&mut f), ["hello"]);
    }
}
