//! What is watched, and how it is found: a PID, a pidfile, a name (regex over the command name
//! and command line), or a command memmon launches itself. Each resolves to one process pinned
//! by (pid, start time); a choice memmon makes among several matches is stated, never silent.

use crate::probe::{ProcError, ProcFs, ProcHandle};
use regex::Regex;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub enum TargetSpec {
    Pid(i32),
    Pidfile(PathBuf),
    Name(Regex),
    Command(Vec<String>),
    /// A whole memory cgroup (`record --cgroup PATH` alone): its top process's tree is
    /// followed in /proc, the cgroup's own files hold all of it.
    Cgroup(String),
}

impl TargetSpec {
    pub fn mode(&self) -> &'static str {
        match self {
            TargetSpec::Pid(_) => "pid",
            TargetSpec::Pidfile(_) => "pidfile",
            TargetSpec::Name(_) => "name",
            TargetSpec::Command(_) => "command",
            TargetSpec::Cgroup(_) => "cgroup",
        }
    }

    /// What the user gave, for messages and metadata.
    pub fn spec(&self) -> String {
        match self {
            TargetSpec::Pid(p) => p.to_string(),
            TargetSpec::Pidfile(p) => p.display().to_string(),
            TargetSpec::Name(r) => r.as_str().to_string(),
            TargetSpec::Command(c) => shell_words(c),
            TargetSpec::Cgroup(p) => p.clone(),
        }
    }

    /// True when a new process can take over after the target exits (pidfile, name).
    pub fn can_restart(&self) -> bool {
        matches!(self, TargetSpec::Pidfile(_) | TargetSpec::Name(_))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("no process with PID {0} (--pid)")]
    NoSuchPid(i32),
    #[error(transparent)]
    Proc(#[from] ProcError),
    #[error("cannot read pidfile {0}: {1} (--pidfile)")]
    PidfileUnreadable(PathBuf, std::io::Error),
    /// What the first line holds is shown when it is a number (`-3`, `0`), or when the pidfile
    /// is no symlink and anyone may read it: a pidfile may be a link to a file memmon can read
    /// and its user cannot (`/etc/shadow`).
    #[error("pidfile {0} does not start with a PID: {1} (--pidfile)")]
    PidfileGarbage(PathBuf, String),
    #[error("pidfile {0} names PID {1}, but no such process runs (a stale pidfile?) (--pidfile)")]
    PidfileStale(PathBuf, i32),
    #[error("pidfile {0} is empty (still being written?) (--pidfile; add --wait to wait for it)")]
    PidfileEmpty(PathBuf),
    #[error("pidfile {0} is {1}, not a regular file (--pidfile)")]
    PidfileNotRegular(PathBuf, &'static str),
    #[error("pidfile {0} is larger than {max} bytes: not a pidfile (--pidfile)", max = PIDFILE_MAX_BYTES)]
    PidfileTooLarge(PathBuf),
    #[error("PID {pid} ({comm}) is a kernel thread: it has no user memory to record ({flag})")]
    KernelThread {
        pid: i32,
        comm: String,
        flag: &'static str,
    },
    #[error("PID {tid} is a thread of process {tgid} ({comm}), not a process: give --pid {tgid}, its thread group leader{}", if *.flag == "--pid" { String::new() } else { format!(" (given by {})", .flag) })]
    Thread {
        tid: i32,
        tgid: i32,
        comm: String,
        flag: &'static str,
    },
    #[error("{0}")]
    Cgroup(String),
    #[error("no process matches --name '{0}' (add --wait to wait for one)")]
    NoMatch(String),
    #[error("--name '{regex}' matches {count} unrelated processes; choose one with --pid or a narrower regex:\n{list}")]
    Ambiguous {
        regex: String,
        count: usize,
        list: String,
    },
}

impl crate::error::Classified for TargetError {
    /// A pidfile path that cannot be a pidfile (a FIFO, a device, a file too large) or a PID
    /// that is no process's (a kernel thread, a thread) is bad input: `Usage`. A target that is
    /// not there or cannot be read is `NoTarget`: no such PID, a pidfile missing, empty, stale,
    /// or holding no PID (left behind, or overwritten: what it holds is the daemon's doing, as
    /// a stale PID is, not the flag's).
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            TargetError::PidfileNotRegular(..)
            | TargetError::PidfileTooLarge(..)
            | TargetError::KernelThread { .. }
            | TargetError::Thread { .. } => Class::Usage,
            _ => Class::NoTarget,
        }
    }
}

/// Resolves a PID, pidfile or name to one running process.
pub fn resolve(procfs: &ProcFs, spec: &TargetSpec) -> Result<Resolved, TargetError> {
    match spec {
        TargetSpec::Pid(pid) => {
            let h = procfs.open(*pid).map_err(|e| match e {
                ProcError::NoSuchProcess(p) => TargetError::NoSuchPid(p),
                other => TargetError::Proc(other),
            })?;
            check_user_process(procfs, &h, "--pid")?;
            Ok(Resolved::only(h))
        }
        TargetSpec::Pidfile(path) => {
            let read = read_pidfile_stamped(path)?;
            let h = procfs.open(read.pid).map_err(|e| match e {
                ProcError::NoSuchProcess(p) => TargetError::PidfileStale(path.clone(), p),
                other => TargetError::Proc(other),
            })?;
            check_user_process(procfs, &h, "--pidfile")?;
            Ok(Resolved {
                handle: h,
                note: None,
                pidfile: Some(read.stamp),
            })
        }
        TargetSpec::Name(re) => {
            find_by_name(procfs, re)?.ok_or_else(|| TargetError::NoMatch(re.as_str().into()))
        }
        TargetSpec::Cgroup(path) => {
            cgroup_top(procfs, &crate::probe::cgroup::CgroupFs::default(), path)
        }
        TargetSpec::Command(_) => unreachable!("a command is launched, not resolved"),
    }
}

/// The top process of a cgroup's processes (the oldest whose parent is not in it): a container's
/// init or a service's main process. The note says what its tree leaves out.
pub fn cgroup_top(
    procfs: &ProcFs,
    cgroupfs: &crate::probe::cgroup::CgroupFs,
    path: &str,
) -> Result<Resolved, TargetError> {
    let cg = cgroupfs
        .at(path)
        .map_err(|e| TargetError::Cgroup(e.to_string()))?;
    let pids = cg.procs().map_err(|e| TargetError::Cgroup(e.to_string()))?;
    let mut handles: Vec<ProcHandle> = pids.iter().filter_map(|&p| procfs.open(p).ok()).collect();
    let count = handles.len();
    let top_at = handles
        .iter()
        .enumerate()
        .filter(|(_, h)| h.ppid().is_none_or(|pp| !pids.contains(&pp)))
        .min_by_key(|(_, h)| (h.start_time, h.pid))
        .map(|(i, _)| i)
        .ok_or_else(|| {
            TargetError::Cgroup(format!(
                "the cgroup {} holds no process (--cgroup)",
                cg.path
            ))
        })?;
    let top = handles.swap_remove(top_at);
    let outside = handles
        .iter()
        .filter(|h| !procfs.descends(h.pid, top.pid))
        .count();
    let note = format!(
        "recording the cgroup {} ({}): its files count all of them; the RSS columns follow PID {} ({}) and its descendants{}",
        cg.path,
        crate::units::count(count, "process"),
        top.pid,
        top.comm,
        if outside > 0 {
            format!(", which leave out {outside} of its processes")
        } else {
            String::new()
        }
    );
    Ok(Resolved {
        handle: top,
        note: Some(note),
        pidfile: None,
    })
}

/// A resolved target, and the note to print when memmon chose among several matches.
pub struct Resolved {
    pub handle: ProcHandle,
    pub note: Option<String>,
    /// The pidfile as it was when it named the target (`--pidfile` only).
    pub pidfile: Option<PidfileStamp>,
}

impl Resolved {
    fn only(handle: ProcHandle) -> Resolved {
        Resolved {
            handle,
            note: None,
            pidfile: None,
        }
    }
}

/// A kernel thread has no memory of its own, and a thread's /proc/TID (reachable though not
/// listed) shows its whole process's memory under another PID: both are refused, naming `flag`.
pub fn check_user_process(
    procfs: &ProcFs,
    h: &ProcHandle,
    flag: &'static str,
) -> Result<(), TargetError> {
    let dir = procfs.root().join(h.pid.to_string());
    let status = std::fs::read(dir.join("status")).unwrap_or_default();
    let stat = std::fs::read(dir.join("stat")).unwrap_or_default();
    let field = |key: &[u8]| -> Option<i64> {
        status
            .split(|&b| b == b'\n')
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.trim().parse().ok())
    };
    // Fields after the command name's `)`: state, ppid, pgrp, session, tty, tpgid, flags.
    let after = memchr::memrchr(b')', &stat).map_or(&stat[..0], |c| &stat[c + 1..]);
    let words: Vec<&str> = std::str::from_utf8(after)
        .unwrap_or("")
        .split_ascii_whitespace()
        .collect();
    let ppid: i64 = words.get(1).and_then(|w| w.parse().ok()).unwrap_or(-1);
    let flags: u64 = words.get(6).and_then(|w| w.parse().ok()).unwrap_or(0);
    const PF_KTHREAD: u64 = 0x0020_0000;
    let has_mm = status.windows(6).any(|w| w == b"VmRSS:");
    if flags & PF_KTHREAD != 0 || (!has_mm && (h.pid == 2 || ppid == 2)) {
        return Err(TargetError::KernelThread {
            pid: h.pid,
            comm: h.comm.clone(),
            flag,
        });
    }
    if let Some(tgid) = field(b"Tgid:").filter(|&t| t > 0 && t != h.pid as i64) {
        return Err(TargetError::Thread {
            tid: h.pid,
            tgid: tgid as i32,
            comm: h.comm.clone(),
            flag,
        });
    }
    Ok(())
}

/// The most a pidfile may hold: PostgreSQL's postmaster.pid, the longest usual one, is a few
/// hundred bytes. A larger file (or /dev/zero) is refused instead of read without end.
pub const PIDFILE_MAX_BYTES: u64 = 4096;

/// One writing of a pidfile: its file (device, inode) and its change and modification times.
/// A daemon that restarts rewrites its pidfile, so the stamp changes; a pidfile left behind by
/// a dead daemon keeps its stamp, whatever process later gets the PID it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidfileStamp {
    dev: u64,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// A PID read from a pidfile, and the pidfile's stamp when it was read.
#[derive(Debug, Clone, Copy)]
pub struct PidfileRead {
    pub pid: i32,
    pub stamp: PidfileStamp,
}

/// Reads a pidfile: the PID is the first line (surrounding blanks allowed); more lines may
/// follow, as in PostgreSQL's postmaster.pid. Only a regular file of at most
/// `PIDFILE_MAX_BYTES` is read; it is opened without blocking, so a FIFO cannot hang memmon.
pub fn read_pidfile_stamped(path: &Path) -> Result<PidfileRead, TargetError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    let unreadable = |e| TargetError::PidfileUnreadable(path.to_path_buf(), e);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let kind = if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_char_device() {
            "a character device"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_dir() {
            "a directory"
        } else {
            "a special file"
        };
        return Err(TargetError::PidfileNotRegular(path.to_path_buf(), kind));
    }
    let mut bytes = Vec::new();
    file.take(PIDFILE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > PIDFILE_MAX_BYTES {
        return Err(TargetError::PidfileTooLarge(path.to_path_buf()));
    }
    let stamp = PidfileStamp {
        dev: meta.dev(),
        ino: meta.ino(),
        mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
        ctime_ns: meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128,
    };
    let text = String::from_utf8_lossy(&bytes);
    if text.trim().is_empty() {
        return Err(TargetError::PidfileEmpty(path.to_path_buf()));
    }
    let first = text.lines().next().unwrap_or("").trim();
    match first.parse::<i32>() {
        Ok(pid) if pid > 0 => Ok(PidfileRead { pid, stamp }),
        _ => {
            let symlink = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            let shown = if symlink {
                Err("the pidfile is a symlink")
            } else if meta.mode() & 0o004 == 0 {
                Err("the file is not readable by everyone")
            } else {
                Ok(())
            };
            Err(TargetError::PidfileGarbage(
                path.to_path_buf(),
                not_a_pid(first, shown),
            ))
        }
    }
}

/// The most of a pidfile's first line an error shows.
const PIDFILE_SHOWN_CHARS: usize = 40;

/// What a pidfile's first line that is not a PID holds. A number is shown; text only when
/// `shown` is `Ok` (the pidfile is no symlink and anyone may read it), else the reason it is
/// not: the file may be one memmon's user can read and the daemon's user cannot (a pidfile
/// planted as a link to `/etc/shadow`), and the message goes to terminals and logs. Text shown
/// is escaped to printable ASCII and cut at `PIDFILE_SHOWN_CHARS` characters.
fn not_a_pid(first: &str, shown: Result<(), &str>) -> String {
    let number = first.strip_prefix(['-', '+']).unwrap_or(first);
    let chars = first.chars().count();
    if !number.is_empty() && number.len() <= 20 && number.bytes().all(|b| b.is_ascii_digit()) {
        format!("its first line is {first}, not a PID above 0")
    } else if first.is_empty() {
        "its first line is blank".to_string()
    } else if let Err(why) = shown {
        format!(
            "its first line is {} of text, not a number (not shown: {why})",
            crate::units::count(chars, "character")
        )
    } else {
        let text: String = first
            .chars()
            .take(PIDFILE_SHOWN_CHARS)
            .flat_map(char::escape_default)
            .collect();
        let cut = if chars > PIDFILE_SHOWN_CHARS {
            format!("... (the first {PIDFILE_SHOWN_CHARS} of {chars} characters)")
        } else {
            String::new()
        };
        format!("its first line is \"{text}\"{cut}, not a number")
    }
}

/// Reads the PID of a pidfile (see `read_pidfile_stamped`).
pub fn read_pidfile(path: &Path) -> Result<i32, TargetError> {
    read_pidfile_stamped(path).map(|r| r.pid)
}

/// The process that took over a pidfile target that ended, if one did. A restart is accepted
/// only when the pidfile was rewritten since it named the old process (its stamp changed) and
/// names a live user process other than the old one. The same PID with a new start time is
/// not enough by itself: a stale pidfile's PID is soon reused by unrelated processes.
pub fn pidfile_successor(
    procfs: &ProcFs,
    path: &Path,
    old: (i32, u64),
    old_stamp: Option<PidfileStamp>,
) -> Option<(ProcHandle, PidfileStamp)> {
    let read = read_pidfile_stamped(path).ok()?;
    if old_stamp == Some(read.stamp) {
        return None;
    }
    let h = procfs.open(read.pid).ok()?;
    if (h.pid, h.start_time) == old || check_user_process(procfs, &h, "--pidfile").is_err() {
        return None;
    }
    Some((h, read.stamp))
}

/// The process that took over a `--name` target that ended, if one did: a match that started
/// at or after `not_before` (clock ticks since boot: when the old process was last seen
/// alive). An older match is a leftover of the old tree or an unrelated process, never a
/// restart.
pub fn name_successor(
    procfs: &ProcFs,
    re: &Regex,
    old: (i32, u64),
    not_before: u64,
) -> Option<ProcHandle> {
    let h = find_by_name(procfs, re).ok().flatten()?.handle;
    ((h.pid, h.start_time) != old && h.start_time >= not_before).then_some(h)
}

/// The pauses between looks for a target that is not there (yet), at `--wait` and while waiting
/// for a restart: 100 ms at first, each twice the last, up to 1 s. A target that comes soon is
/// found soon; one that is long in coming costs a look a second (for `--name`, a scan of /proc),
/// not ten. Its VmHWM covers its whole life, so a later first sample loses no peak.
#[derive(Debug, Clone)]
pub struct LookAgain {
    next: std::time::Duration,
}

impl LookAgain {
    pub const FIRST: std::time::Duration = std::time::Duration::from_millis(100);
    pub const MAX: std::time::Duration = std::time::Duration::from_secs(1);

    pub fn new() -> LookAgain {
        LookAgain { next: Self::FIRST }
    }

    /// The pause before the next look.
    pub fn pause(&mut self) -> std::time::Duration {
        let p = self.next;
        self.next = (p * 2).min(Self::MAX);
        p
    }
}

impl Default for LookAgain {
    fn default() -> Self {
        LookAgain::new()
    }
}

/// Clock ticks since boot now (the unit of a process's start time): the boot-time clock that
/// /proc/uptime shows, or `uptime` under a fake /proc root; `None` when that cannot be read.
pub fn boot_ticks_now(procfs: &ProcFs) -> Option<u64> {
    let hz = crate::probe::proc::clock_ticks_per_s();
    if procfs.is_real() {
        // The clock /proc/uptime reads (CLOCK_BOOTTIME, a time namespace's offset included),
        // without opening it: the exporter asks at every tick.
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
        let secs = t.tv_sec as f64 + t.tv_nsec as f64 / 1e9;
        return Some((secs * hz) as u64);
    }
    let text = std::fs::read_to_string(procfs.root().join("uptime")).ok()?;
    let secs: f64 = text.split_ascii_whitespace().next()?.parse().ok()?;
    Some((secs * hz) as u64)
}

/// Finds the process whose command name or command line matches `re`. memmon itself and its
/// ancestors (the shell that started it, whose command line holds the regex) are skipped, and
/// so are kernel threads. Several matches that form one tree resolve to its top process;
/// unrelated matches are an error listing them.
pub fn find_by_name(procfs: &ProcFs, re: &Regex) -> Result<Option<Resolved>, TargetError> {
    let me = std::process::id() as i32;
    let mut excluded = vec![me];
    let mut p = me;
    while let Some(pp) = procfs.open(p).ok().and_then(|h| h.ppid()) {
        if pp <= 0 || excluded.contains(&pp) {
            break;
        }
        excluded.push(pp);
        p = pp;
    }
    let mut matches: Vec<(ProcHandle, String, i32)> = Vec::new();
    for pid in procfs.all_pids()? {
        if excluded.contains(&pid) {
            continue;
        }
        let Ok(h) = procfs.open(pid) else { continue };
        let cmdline = h.cmdline();
        if cmdline.is_empty() {
            continue; // a kernel thread or a zombie
        }
        if re.is_match(&h.comm) || re.is_match(&cmdline) {
            let ppid = h.ppid().unwrap_or(0);
            matches.push((h, cmdline, ppid));
        }
    }
    if matches.is_empty() {
        return Ok(None);
    }
    if matches.len() == 1 {
        let (h, _, _) = matches.pop().unwrap();
        return Ok(Some(Resolved::only(h)));
    }
    // Matches whose parent is not itself a match are tops; one top means one tree.
    let pids: Vec<i32> = matches.iter().map(|m| m.0.pid).collect();
    let tops: Vec<usize> = (0..matches.len())
        .filter(|&i| !is_below_any(procfs, matches[i].2, &pids))
        .collect();
    if tops.len() == 1 {
        let count = matches.len();
        let (h, cmd, _) = matches.swap_remove(tops[0]);
        let note = format!(
            "--name matched {} of one tree; watching its top, PID {} ({cmd}), with its descendants",
            crate::units::count(count, "process"),
            h.pid
        );
        return Ok(Some(Resolved {
            handle: h,
            note: Some(note),
            pidfile: None,
        }));
    }
    let list = matches
        .iter()
        .take(10)
        .map(|(h, cmd, _)| format!("  PID {:>7}  {}", h.pid, truncate(cmd, 100)))
        .collect::<Vec<_>>()
        .join("\n");
    Err(TargetError::Ambiguous {
        regex: re.as_str().into(),
        count: matches.len(),
        list,
    })
}

/// True if `ppid` or one of its ancestors is in `pids`.
fn is_below_any(procfs: &ProcFs, mut ppid: i32, pids: &[i32]) -> bool {
    for _ in 0..64 {
        if ppid <= 1 {
            return false;
        }
        if pids.contains(&ppid) {
            return true;
        }
        match procfs.open(ppid).ok().and_then(|h| h.ppid()) {
            Some(p) => ppid = p,
            None => return false,
        }
    }
    false
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n).collect::<String>() + "…"
    }
}

/// Joins a command line for display, quoting words that need it.
pub fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::fake::FakeProc;

    use std::fs;

    #[test]
    fn a_postmaster_pid_names_its_pid_on_line_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("postmaster.pid");
        fs::write(
            &p,
            "4242\n/var/lib/postgresql/15/main\n1764460000\n5432\n/var/run/postgresql\nlocalhost\n  5432001         0\nready   \n",
        )
        .unwrap();
        assert_eq!(read_pidfile(&p).unwrap(), 4242);
        fs::write(&p, "4242").unwrap(); // no newline, as `echo -n` writes it
        assert_eq!(read_pidfile(&p).unwrap(), 4242);
    }

    #[test]
    fn an_empty_pidfile_is_told_apart_from_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.pid");
        fs::write(&p, "").unwrap();
        assert!(matches!(
            read_pidfile(&p),
            Err(TargetError::PidfileEmpty(_))
        ));
        fs::write(&p, " \n").unwrap();
        let e = read_pidfile(&p).unwrap_err();
        assert!(matches!(e, TargetError::PidfileEmpty(_)));
        assert!(e.to_string().contains("--wait"), "{e}");
    }

    #[test]
    fn a_pidfile_that_names_no_pid_is_a_target_not_found_and_says_what_it_holds() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.pid");
        let garbage = |text: &str, mode: u32| {
            fs::write(&p, text).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
            let e = read_pidfile(&p).unwrap_err();
            assert!(matches!(e, TargetError::PidfileGarbage(..)), "{e}");
            // Like a stale pidfile: the target is not there (exit 3), not a bad flag (exit 2).
            assert_eq!(
                crate::error::Classified::class(&e),
                crate::exit::Class::NoTarget
            );
            e.to_string()
        };
        let e = garbage("hello\n", 0o644);
        assert!(
            e.contains(
                "d.pid does not start with a PID: its first line is \"hello\", not a number"
            ),
            "{e}"
        );
        // Shown as printable ASCII, and cut.
        let e = garbage(&format!("\x1b[31mred\u{202e}{}\n", "x".repeat(100)), 0o644);
        assert!(e.contains(r#""\u{1b}[31mred\u{202e}xxx"#), "{e}");
        assert!(e.contains("(the first 40 of 109 characters)"), "{e}");
        assert!(!e.contains('\x1b') && !e.contains('\u{202e}'), "{e}");
        // Not readable by everyone: its text is not for the terminal or the logs.
        let e = garbage("s3cr3t\n", 0o600);
        assert!(
            e.contains("6 characters of text, not a number (not shown: the file is not readable by everyone)")
                && !e.contains("s3cr3t"),
            "{e}"
        );
        let e = garbage("-3\n", 0o600);
        assert!(e.contains("its first line is -3, not a PID above 0"), "{e}");
    }

    #[test]
    fn a_pidfile_that_is_not_a_small_regular_file_is_refused_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_pidfile(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero") && e.contains("character device"),
            "{e}"
        );
        // A FIFO with no writer: opening it must not block.
        let fifo = dir.path().join("fifo.pid");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_pidfile(&fifo).unwrap_err().to_string();
        assert!(e.contains("fifo.pid") && e.contains("a FIFO"), "{e}");
        let big = dir.path().join("big.pid");
        fs::write(&big, format!("42\n{}", "x".repeat(5000))).unwrap();
        let e = read_pidfile(&big).unwrap_err().to_string();
        assert!(e.contains("big.pid") && e.contains("4096 bytes"), "{e}");
    }

    #[test]
    fn a_kernel_thread_or_a_thread_id_is_not_a_target() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        FakeProc::new(2)
            .ppid(0)
            .flags(0x208040)
            .tgid(2)
            .start(1)
            .memoryless()
            .write(root); // kthreadd
        FakeProc::new(57)
            .ppid(2)
            .flags(0x208040)
            .tgid(57)
            .start(5)
            .memoryless()
            .write(root); // a kworker
        FakeProc::new(100)
            .ppid(1)
            .flags(0x400100)
            .tgid(100)
            .start(700)
            .rss_kb(5000)
            .write(root);
        FakeProc::new(103)
            .ppid(1)
            .flags(0x400040)
            .tgid(100)
            .start(710)
            .rss_kb(5000)
            .write(root); // a thread of 100
        let procfs = ProcFs::new(root);
        for pid in [2, 57] {
            let e = resolve(&procfs, &TargetSpec::Pid(pid))
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("kernel thread") && e.contains("--pid"), "{e}");
        }
        let e = resolve(&procfs, &TargetSpec::Pid(103))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("thread of process 100") && e.contains("--pid 100"),
            "{e}"
        );
        assert_eq!(
            resolve(&procfs, &TargetSpec::Pid(100))
                .ok()
                .unwrap()
                .handle
                .pid,
            100
        );
    }

    #[test]
    fn a_stale_pidfile_s_reused_pid_is_not_a_restart_until_the_pidfile_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proc");
        FakeProc::new(100)
            .ppid(1)
            .flags(0x400100)
            .tgid(100)
            .start(700)
            .rss_kb(5000)
            .write(&root);
        let procfs = ProcFs::new(&root);
        let pidfile = dir.path().join("d.pid");
        fs::write(&pidfile, "100\n").unwrap();
        let r = resolve(&procfs, &TargetSpec::Pidfile(pidfile.clone()))
            .ok()
            .unwrap();
        let old = (100, 700);
        // The daemon dies leaving its pidfile; an unrelated process gets PID 100.
        fs::remove_dir_all(root.join("100")).unwrap();
        FakeProc::new(100)
            .ppid(1)
            .flags(0x400100)
            .tgid(100)
            .start(990)
            .rss_kb(300_000)
            .write(&root);
        assert!(pidfile_successor(&procfs, &pidfile, old, r.pidfile).is_none());
        // The daemon restarts as PID 100 again and rewrites its pidfile in place.
        let f = fs::OpenOptions::new().write(true).open(&pidfile).unwrap();
        f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(2))
            .unwrap();
        let (h, stamp) = pidfile_successor(&procfs, &pidfile, old, r.pidfile).unwrap();
        assert_eq!((h.pid, h.start_time), (100, 990));
        assert_ne!(Some(stamp), r.pidfile);
        // Or it restarts as PID 200, writing a new pidfile and renaming it over the old one.
        FakeProc::new(200)
            .ppid(1)
            .flags(0x400100)
            .tgid(200)
            .start(995)
            .rss_kb(5000)
            .write(&root);
        let tmp = dir.path().join("d.pid.tmp");
        fs::write(&tmp, "200\n").unwrap();
        fs::rename(&tmp, &pidfile).unwrap();
        let (h, _) = pidfile_successor(&procfs, &pidfile, old, Some(stamp)).unwrap();
        assert_eq!(h.pid, 200);
    }

    #[test]
    fn a_name_match_older_than_the_old_target_s_end_is_not_its_restart() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // PID 300 was a child of the old target (started at 700), re-parented when it died.
        FakeProc::new(300)
            .ppid(1)
            .flags(0x400100)
            .tgid(300)
            .start(800)
            .rss_kb(5000)
            .write(root);
        let procfs = ProcFs::new(root);
        let re = Regex::new("fake[0-9]+").unwrap();
        assert!(name_successor(&procfs, &re, (100, 700), 1000).is_none());
        fs::remove_dir_all(root.join("300")).unwrap();
        FakeProc::new(400)
            .ppid(1)
            .flags(0x400100)
            .tgid(400)
            .start(1005)
            .rss_kb(5000)
            .write(root);
        assert_eq!(
            name_successor(&procfs, &re, (100, 700), 1000).unwrap().pid,
            400
        );
    }

    #[test]
    fn pidfiles_hold_one_positive_number() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.pid");
        std::fs::write(&p, " 4242\n").unwrap();
        assert_eq!(read_pidfile(&p).unwrap(), 4242);
        std::fs::write(&p, "banana").unwrap();
        let e = read_pidfile(&p).unwrap_err().to_string();
        assert!(e.contains("first line is \"banana\", not a number"), "{e}");
        std::fs::write(&p, "-3").unwrap();
        let e = read_pidfile(&p).unwrap_err().to_string();
        assert!(e.contains("first line is -3, not a PID"), "{e}");
        // Nothing of a file not everyone may read is echoed (a link to /etc/shadow).
        let shadow = dir.path().join("shadow");
        std::fs::write(&shadow, "root:$6$salt$hash:19000:0:99999:7:::\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_pidfile(&shadow).unwrap_err().to_string();
        assert!(!e.contains("root") && !e.contains("$6$"), "{e}");
        let missing = dir.path().join("none.pid");
        assert!(read_pidfile(&missing)
            .unwrap_err()
            .to_string()
            .contains("none.pid"));
    }

    #[test]
    fn command_lines_are_quoted_for_display() {
        let w = vec!["sh".to_string(), "-c".into(), "echo 'hi'".into()];
        assert_eq!(shell_words(&w), "sh -c 'echo '\\''hi'\\'''");
    }
}
