//! A daemon memmon starts for a configuration of a sweep (`bench --daemon CMD`): run by `sh -c`
//! in a process group of its own and, where memmon may make one, a memory cgroup of its own (so
//! its peak and idle floor are its tree's, exactly); ready once its pidfile names a live
//! process, its socket accepts a connection, or its output has printed a matching line; stopped
//! with SIGTERM to its group, its pidfile's process and its cgroup, then SIGKILL after
//! `--stop-timeout`.

use crate::bench::sweep::DaemonLife;
use crate::probe::cgroup::manage::OwnCgroup;
use crate::probe::cgroup::CgroupFs;
use crate::probe::ProcFs;
use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// When the started daemon is ready for its clients.
#[derive(Debug, Clone)]
pub enum Ready {
    /// The file holds the PID of a live process (the daemon's, which the bench then watches).
    Pidfile(PathBuf),
    /// A Unix socket accepts a connection.
    Socket(PathBuf),
    /// A line of its output (stdout or stderr) matches.
    Log(regex::Regex),
}

/// `--daemon` and how to start and stop it (its command and paths before `{NAME}` is
/// replaced).
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub command: String,
    pub ready: Ready,
    pub ready_timeout: Duration,
    pub stop_timeout: Duration,
}

/// How often the start looks whether the daemon is ready.
const LOOK: Duration = Duration::from_millis(20);

/// A daemon memmon started, until it is stopped (dropping it stops it too).
pub struct Started {
    child: Child,
    /// The process the bench watches: the pidfile's, or the shell memmon started.
    pub pid: i32,
    cgroup: Option<OwnCgroup>,
    pub life: DaemonLife,
    stop_timeout: Duration,
    stopped: bool,
}

impl Started {
    /// Starts the daemon (its command and ready paths with their `{NAME}`s already replaced)
    /// and waits until it is ready. `cgroup_name`: the name of the cgroup to make for it (none where memmon may not
    /// make one: a note says so through `said`). An error says why it never became ready, with
    /// the stop signal that ended the wait, if one did.
    pub fn start(
        daemon: &DaemonOptions,
        cgroup_name: &str,
        cgroupfs: &CgroupFs,
        procfs: &ProcFs,
        said: &mut Vec<String>,
    ) -> Result<Started, (String, Option<i32>)> {
        let (command, ready) = (daemon.command.as_str(), &daemon.ready);
        let (ready_timeout, stop_timeout) = (daemon.ready_timeout, daemon.stop_timeout);
        let mine = cgroupfs.of_pid(procfs.root(), std::process::id() as i32);
        let cgroup = match cgroupfs.create_own(cgroup_name, mine.as_ref()) {
            Ok(c) => Some(c),
            Err(e) => {
                said.push(format!(
                    "the daemon runs without a memory cgroup of its own ({e}): its peak is its largest process's"
                ));
                None
            }
        };
        if let Ready::Pidfile(p) = ready {
            // A pidfile left by an earlier daemon would be taken for this one's.
            let _ = std::fs::remove_file(p);
        }
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(command).stdin(Stdio::null());
        // Its output goes to memmon's stderr (stdout carries the table), through memmon where
        // a log line says it is ready.
        let (lines_tx, lines) = mpsc::channel::<()>();
        let log = matches!(ready, Ready::Log(_));
        if log {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        } else {
            cmd.stdout(super::stderr_stdio());
        }
        crate::sys::oom::restore_in_child(&mut cmd);
        cmd.process_group(0);
        let join = cgroup
            .as_ref()
            .and_then(|c| c.procs_fd())
            .and_then(|fd| fd.try_clone_to_owned().ok());
        // SAFETY: runs in the child between fork and exec: one write(2) through rustix, which
        // neither allocates nor takes a lock; errors are built from codes.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(fd) = &join {
                    if rustix::io::write(fd, b"0\n")? != 2 {
                        return Err(std::io::Error::from_raw_os_error(libc::EIO));
                    }
                }
                Ok(())
            });
        }
        let t0 = Instant::now();
        let mut child = cmd.spawn().map_err(|e| {
            (
                format!("cannot start the daemon (sh -c '{command}'): {e}"),
                None,
            )
        })?;
        if let (Ready::Log(re), Some(out), Some(err)) =
            (ready, child.stdout.take(), child.stderr.take())
        {
            for stream in [
                Box::new(out) as Box<dyn std::io::Read + Send>,
                Box::new(err),
            ] {
                let (re, tx) = (re.clone(), lines_tx.clone());
                let to = std::io::stderr();
                let _ = std::thread::Builder::new()
                    .name("memmon-daemon-log".into())
                    .spawn(move || relay(stream, to, &re, &tx));
            }
        }
        drop(lines_tx);
        let pid = child.id() as i32;
        let mut started = Started {
            child,
            pid,
            cgroup,
            life: DaemonLife {
                pid,
                ..DaemonLife::default()
            },
            stop_timeout,
            stopped: false,
        };
        started.life.cgroup = started.cgroup.as_ref().map(|c| c.cgroup().path.clone());
        let until = t0 + ready_timeout;
        loop {
            if let Ok(Some(status)) = started.child.try_wait() {
                return Err((
                    format!(
                        "the daemon exited ({status}) before it was ready ({})",
                        describe(ready)
                    ),
                    None,
                ));
            }
            if let Some(a) = crate::sys::signals::take().first() {
                return Err((
                    format!(
                        "interrupted by {} while the daemon was starting",
                        crate::model::signal::name(a.sig)
                    ),
                    Some(a.sig),
                ));
            }
            let is_ready = match ready {
                Ready::Pidfile(p) => crate::sampler::target::read_pidfile(p)
                    .ok()
                    .filter(|&pid| crate::sys::process_exists(pid))
                    .map(|pid| started.pid = pid)
                    .is_some(),
                Ready::Socket(p) => std::os::unix::net::UnixStream::connect(p).is_ok(),
                Ready::Log(_) => lines.try_recv().is_ok(),
            };
            if is_ready {
                started.life.pid = started.pid;
                started.life.ready_s = Some(t0.elapsed().as_secs_f64());
                return Ok(started);
            }
            if Instant::now() >= until {
                return Err((
                    format!(
                        "the daemon was not ready within {} ({}); --ready-timeout gives it longer",
                        crate::units::fmt_interval(ready_timeout),
                        describe(ready)
                    ),
                    None,
                ));
            }
            crate::sys::signals::sleep(LOOK);
        }
    }

    /// The directory of the cgroup memmon made for it.
    pub fn cgroup_dir(&self) -> Option<&std::path::Path> {
        self.cgroup.as_ref().map(|c| c.cgroup().dir.as_path())
    }

    /// True while the daemon's shell (or what it exec'd) runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops the daemon: SIGTERM to its process group, its pidfile's process and everything in
    /// its cgroup; SIGKILL to all of them once `stop_timeout` has passed; its cgroup removed.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let t0 = Instant::now();
        if !self.running() && self.members().is_empty() {
            self.life.stopped_by = Some("exited");
        } else {
            self.signal(libc::SIGTERM);
            self.life.stopped_by = Some("SIGTERM");
            while !self.gone() {
                if t0.elapsed() >= self.stop_timeout {
                    self.signal(libc::SIGKILL);
                    self.life.stopped_by = Some("SIGKILL");
                    let killed = Instant::now();
                    while !self.gone() && killed.elapsed() < Duration::from_secs(5) {
                        std::thread::sleep(LOOK);
                    }
                    break;
                }
                std::thread::sleep(LOOK);
            }
            self.life.stop_s = Some(t0.elapsed().as_secs_f64());
        }
        let _ = self.child.wait();
        if let Some(mut c) = self.cgroup.take() {
            let _ = c.remove();
        }
    }

    /// The processes in its cgroup (none without one).
    fn members(&self) -> Vec<i32> {
        self.cgroup
            .as_ref()
            .and_then(|c| c.cgroup().procs().ok())
            .unwrap_or_default()
    }

    fn signal(&self, sig: i32) {
        let group = self.child.id() as i32;
        // The group (negative PID): the shell and what it started.
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_raw(group).expect("a child's PID is positive"),
            rustix::process::Signal::from_named_raw(sig).expect("SIGTERM and SIGKILL are signals"),
        );
        for pid in std::iter::once(self.pid).chain(self.members()) {
            let _ = crate::sys::kill(pid, sig);
        }
    }

    /// Its shell has exited (reaped here) and nothing is left of it: its pidfile's process
    /// and its cgroup's.
    fn gone(&mut self) -> bool {
        let shell_done = !self.running();
        shell_done
            && (self.pid == self.child.id() as i32 || !crate::sys::process_exists(self.pid))
            && self.members().is_empty()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Copies the daemon's output to `to` (memmon's stderr: the daemon's own words, passed on as a
/// launched command's stdout is) line by line, and says (once) when a line matches `re`.
fn relay(
    stream: Box<dyn std::io::Read + Send>,
    mut to: impl std::io::Write,
    re: &regex::Regex,
    ready: &mpsc::Sender<()>,
) {
    let mut said = false;
    for line in std::io::BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(to, "{line}");
        if !said && re.is_match(&line) {
            said = true;
            let _ = ready.send(());
        }
    }
}

fn describe(ready: &Ready) -> String {
    match ready {
        Ready::Pidfile(p) => format!("--ready-pidfile {}", p.display()),
        Ready::Socket(p) => format!("--ready-socket {}", p.display()),
        Ready::Log(re) => format!("--ready-log {re}"),
    }
}
