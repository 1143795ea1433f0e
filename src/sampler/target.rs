//! What is watched, and how it is found: a PID, a pidfile, a name (regex over the command name
//! and command line), or a command memmon launches itself. Each resolves to one process pinned
//! by (pid, start time); a choice memmon makes among several matches is stated, never silent.

use crate::probe::{ProcError, ProcFs, ProcHandle};
use regex::Regex;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub enum TargetSpec {
    Pid(i32),
    Pidfile(PathBuf),
    Name(Regex),
    Command(Vec<String>),
}

impl TargetSpec {
    pub fn mode(&self) -> &'static str {
        match self {
            TargetSpec::Pid(_) => "pid",
            TargetSpec::Pidfile(_) => "pidfile",
            TargetSpec::Name(_) => "name",
            TargetSpec::Command(_) => "command",
        }
    }

    /// What the user gave, for messages and metadata.
    pub fn spec(&self) -> String {
        match self {
            TargetSpec::Pid(p) => p.to_string(),
            TargetSpec::Pidfile(p) => p.display().to_string(),
            TargetSpec::Name(r) => r.as_str().to_string(),
            TargetSpec::Command(c) => shell_words(c),
        }
    }

    /// True when a new process can take over after the target exits (pidfile, name).
    pub fn can_restart(&self) -> bool {
        matches!(self, TargetSpec::Pidfile(_) | TargetSpec::Name(_))
    }
}

impl TargetSpec {
    /// The running process named by `--pid`, `--pidfile` or `--name`; `None` when none is
    /// given. An error names the flag at fault.
    pub fn from_flags(
        pid: Option<i32>,
        pidfile: Option<&Path>,
        name: Option<&str>,
    ) -> Result<Option<TargetSpec>, String> {
        match (pid, pidfile, name) {
            (Some(pid), None, None) => Ok(Some(TargetSpec::Pid(pid))),
            (None, Some(f), None) => Ok(Some(TargetSpec::Pidfile(f.to_path_buf()))),
            (None, None, Some(re)) => Regex::new(re)
                .map(|r| Some(TargetSpec::Name(r)))
                .map_err(|e| format!("--name: not a valid regex: {e}")),
            (None, None, None) => Ok(None),
            _ => Err("give one of --pid, --pidfile and --name, not several".into()),
        }
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
    #[error("pidfile {0} holds '{1}', not a PID (--pidfile)")]
    PidfileGarbage(PathBuf, String),
    #[error("pidfile {0} names PID {1}, but no such process runs (a stale pidfile?) (--pidfile)")]
    PidfileStale(PathBuf, i32),
    #[error("no process matches --name '{0}' (add --wait to wait for one)")]
    NoMatch(String),
    #[error("--name '{regex}' matches {count} unrelated processes; choose one with --pid or a narrower regex:\n{list}")]
    Ambiguous {
        regex: String,
        count: usize,
        list: String,
    },
}

/// Resolves a PID, pidfile or name to one running process.
pub fn resolve(procfs: &ProcFs, spec: &TargetSpec) -> Result<Resolved, TargetError> {
    match spec {
        TargetSpec::Pid(pid) => procfs.open(*pid).map(Resolved::only).map_err(|e| match e {
            ProcError::NoSuchProcess(p) => TargetError::NoSuchPid(p),
            other => TargetError::Proc(other),
        }),
        TargetSpec::Pidfile(path) => {
            let pid = read_pidfile(path)?;
            procfs.open(pid).map(Resolved::only).map_err(|e| match e {
                ProcError::NoSuchProcess(p) => TargetError::PidfileStale(path.clone(), p),
                other => TargetError::Proc(other),
            })
        }
        TargetSpec::Name(re) => {
            find_by_name(procfs, re)?.ok_or_else(|| TargetError::NoMatch(re.as_str().into()))
        }
        TargetSpec::Command(_) => unreachable!("a command is launched, not resolved"),
    }
}

/// A resolved target, and the note to print when memmon chose among several matches.
pub struct Resolved {
    pub handle: ProcHandle,
    pub note: Option<String>,
}

impl Resolved {
    fn only(handle: ProcHandle) -> Resolved {
        Resolved { handle, note: None }
    }
}

/// Reads a pidfile: one positive integer, surrounding blanks allowed.
pub fn read_pidfile(path: &Path) -> Result<i32, TargetError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TargetError::PidfileUnreadable(path.to_path_buf(), e))?;
    let t = text.trim();
    match t.parse::<i32>() {
        Ok(p) if p > 0 => Ok(p),
        _ => {
            let shown: String = t.chars().take(40).collect();
            Err(TargetError::PidfileGarbage(path.to_path_buf(), shown))
        }
    }
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
            "--name matched {count} processes of one tree; watching its top, PID {} ({cmd}), with its descendants",
            h.pid
        );
        return Ok(Some(Resolved {
            handle: h,
            note: Some(note),
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

    #[test]
    fn pidfiles_hold_one_positive_number() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.pid");
        std::fs::write(&p, " 4242\n").unwrap();
        assert_eq!(read_pidfile(&p).unwrap(), 4242);
        std::fs::write(&p, "banana").unwrap();
        let e = read_pidfile(&p).unwrap_err().to_string();
        assert!(e.contains("banana") && e.contains("not a PID"), "{e}");
        std::fs::write(&p, "-3").unwrap();
        assert!(read_pidfile(&p).is_err());
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
