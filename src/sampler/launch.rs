//! A command memmon launches and records: started with memmon as its subreaper (its orphans
//! come back to memmon and stay in the watched tree), given SIGTERM if memmon dies, reaped by
//! memmon itself with `wait4` for its own `ru_maxrss`, with the orphans' peaks beside it.

use crate::format::meta::EndInfo;
use crate::probe::ProcHandle;
use crate::sampler::error::RecordError;
use crate::sys::{self, raw};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long the first sample of a launched command waits for exec to load its program.
const EXEC_WAIT: Duration = Duration::from_millis(200);

/// The launched command, until it is reaped.
pub struct Launched {
    pub pid: i32,
    stdout: Option<std::process::ChildStdout>,
    /// When it was started, and when it exited as a thread waiting on it saw (its wall time;
    /// the reap may come later).
    launched_at: Instant,
    exited_at: Arc<OnceLock<Instant>>,
    /// memmon's own RSS when it launched the command (`EndInfo::launcher_rss_bytes`).
    launcher_rss: Option<u64>,
    /// The largest `ru_maxrss` of the command's orphans that memmon reaped, and the command's
    /// own exit (status, rusage) when it was reaped with them.
    orphans_maxrss: u64,
    command_exit: Option<(libc::c_int, libc::rusage, Instant)>,
}

impl Launched {
    /// Launches `args` with stdin, stdout and stderr passed through (stdout to memmon's stderr
    /// when `data_on_stdout`), or its stdout to a pipe (`take_stdout`) when `pipe_stdout`; into
    /// the cgroup whose `cgroup.procs` is `join_cgroup`, when given.
    pub fn start(
        args: &[String],
        env: &[(String, String)],
        data_on_stdout: bool,
        pipe_stdout: bool,
        join_cgroup: Option<BorrowedFd<'_>>,
    ) -> Result<Launched, RecordError> {
        // memmon's own RSS as it forks the command: exec keeps the mark of the forked copy (its
        // anonymous pages, and what it touches before exec) in ru_maxrss.
        let launcher_rss = std::fs::read("/proc/self/status")
            .ok()
            .and_then(|s| crate::probe::proc::status_bytes(&s, b"VmRSS:"));
        let before = Instant::now();
        let (pid, stdout, exec_at) = launch(args, env, data_on_stdout, pipe_stdout, join_cgroup)?;
        // The command's time starts at its exec: the fork and the move into memmon's cgroup
        // before it (a cgroup move waits for an RCU grace period, up to 15 ms) are memmon's.
        let launched_at = exec_at.unwrap_or(before);
        let exited_at = Arc::new(OnceLock::new());
        watch_exit(pid, exited_at.clone());
        Ok(Launched {
            pid,
            stdout,
            launched_at,
            exited_at,
            launcher_rss,
            orphans_maxrss: 0,
            command_exit: None,
        })
    }

    /// When it was started: right before its exec, in its cgroup (`EndInfo::command_wall_s`
    /// counts from here).
    pub fn launched_at(&self) -> Instant {
        self.launched_at
    }

    /// Waits (a moment at most) until exec has loaded the program, so the first sample is of
    /// the command and not of a page of stack (spawn returns when exec has begun).
    pub fn wait_exec(&self, h: &ProcHandle) {
        let until = Instant::now() + EXEC_WAIT;
        while self.exited_at.get().is_none() && !h.exec_done() && Instant::now() < until {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Its stdout pipe, when `pipe_stdout` asked for one (taken once).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.stdout.take()
    }

    /// Sends it `sig` (memmon's own, not yet reaped child).
    pub fn signal(&self, sig: i32) {
        // Our own child, not yet reaped. Failing, it has ended (ESRCH): the next tick sees it
        // gone.
        let _ = sys::kill(self.pid, sig);
    }

    /// Reaps memmon's exited children: orphans of the command that were re-parented to memmon
    /// (its subreaper) and have ended, each with its `ru_maxrss` (the kernel's peak of that
    /// process, which the command's own rusage lacks: it never waited for them); and the
    /// command itself once it has exited, whose status and rusage are kept for `reap`.
    /// (Waiting for "any child" finds the command among the others: it is reaped then, not
    /// skipped, or the orphans after it would wait for a later tick that never comes.)
    pub fn reap_exited(&mut self) {
        loop {
            let Ok(Some(pid)) = raw::exited_child() else {
                return;
            };
            let Ok(Some(raw::Reaped { status, rusage: ru })) = raw::wait4(pid, true) else {
                return;
            };
            if pid == self.pid {
                self.command_exit = Some((status, ru, Instant::now()));
            } else {
                self.orphans_maxrss = self.orphans_maxrss.max(ru.ru_maxrss.max(0) as u64 * 1024);
            }
        }
    }

    /// Reaps the command (unless `reap_exited` did) and puts its exit status, wall time and
    /// ru_maxrss in `end` (its own, from wait4 on that very child: not RUSAGE_CHILDREN, which
    /// is the maximum over all children).
    pub fn reap(&mut self, end: &mut EndInfo) {
        let (status, ru, ended) = match self.command_exit.take() {
            Some(done) => done,
            None => loop {
                match raw::wait4(self.pid, false) {
                    Ok(Some(r)) => break (r.status, r.rusage, Instant::now()),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    _ => return,
                }
            },
        };
        let ended = self.exited_at.get().copied().unwrap_or(ended);
        end.launcher_rss_bytes = self.launcher_rss;
        end.command_wall_s = Some(ended.duration_since(self.launched_at).as_secs_f64());
        if libc::WIFEXITED(status) {
            end.exit_code = Some(libc::WEXITSTATUS(status));
        } else if libc::WIFSIGNALED(status) {
            end.exit_signal = Some(libc::WTERMSIG(status));
        }
        // With the orphans memmon reaped: every process of the tree that has ended is in it.
        let own = ru.ru_maxrss.max(0) as u64 * 1024;
        end.command_maxrss_bytes = Some(own);
        end.rusage_maxrss_bytes = Some(own.max(self.orphans_maxrss));
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        end.rusage_user_s = Some(secs(ru.ru_utime));
        end.rusage_system_s = Some(secs(ru.ru_stime));
    }
}

/// A command's PID, its stdout pipe (when asked for), and the instant right before its exec.
type Spawned = (i32, Option<std::process::ChildStdout>, Option<Instant>);

/// Launches the command with stdin, stdout and stderr passed through (stdout to memmon's stderr
/// when the data goes to stdout), or its stdout to a pipe returned here when `pipe_stdout`.
/// It gets SIGTERM if memmon dies (its descendants, in memmon's own cgroup, are killed by that
/// cgroup's watcher; see `probe::cgroup::manage::OwnCgroup`). The child sends the monotonic clock's
/// reading right before its exec, once it is in its cgroup, on a pipe: the command's start.
fn launch(
    args: &[String],
    env: &[(String, String)],
    data_on_stdout: bool,
    pipe_stdout: bool,
    join_cgroup: Option<BorrowedFd<'_>>,
) -> Result<Spawned, RecordError> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(&args[0]);
    cmd.args(&args[1..])
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if pipe_stdout {
        cmd.stdout(std::process::Stdio::piped());
    } else if data_on_stdout {
        let err = std::io::stderr();
        let fd = std::os::fd::AsFd::as_fd(&err)
            .try_clone_to_owned()
            .map_err(RecordError::system(
                "cannot duplicate stderr for the command's stdout",
            ))?;
        cmd.stdout(std::process::Stdio::from(fd));
    }
    // memmon becomes the subreaper of what it launches: a descendant whose parent exits is
    // re-parented to memmon instead of init, so it stays in the watched tree.
    // (rustix passes the PID as prctl's flag: any one sets it.)
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).map_err(|e| {
        RecordError::system("cannot become the subreaper of the launched command (prctl)")(e.into())
    })?;
    let memmon = rustix::process::getpid();
    // The child's own descriptor of `cgroup.procs` (close-on-exec), kept by `cmd` until spawned.
    let join_cgroup = join_cgroup
        .map(|fd| fd.try_clone_to_owned())
        .transpose()
        .map_err(RecordError::system(
            "cannot duplicate the descriptor of the cgroup's cgroup.procs",
        ))?;
    let (clock_rx, clock_tx) = rustix::pipe::pipe_with(
        rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
    )
    .map_err(|e| {
        RecordError::system("cannot make the pipe that times the command's start")(e.into())
    })?;
    // Killed as it would be without memmon (which lowered its own place in the OOM order).
    crate::sys::oom::restore_in_child(&mut cmd);
    // SAFETY: the closure runs in the child between fork and exec, where only async-signal-safe
    // calls may be made: it makes its system calls through rustix (prctl, getppid, write,
    // clock_gettime), which neither allocate nor take a lock, and builds errors from codes (no
    // allocation).
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))?;
            // memmon died before the prctl: no signal will come, so do not start.
            if rustix::process::getppid() != Some(memmon) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            // Into memmon's own cgroup before exec: "0" is the writing process itself.
            if let Some(fd) = &join_cgroup {
                if rustix::io::write(fd, b"0\n")? != 2 {
                    return Err(std::io::Error::from_raw_os_error(libc::EIO));
                }
            }
            // The start, sent last: nothing of memmon's runs after it but the exec. (A failed
            // write loses only the timing: the start is then taken before the fork.)
            let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
            let ns = (t.tv_sec as u64)
                .wrapping_mul(1_000_000_000)
                .wrapping_add(t.tv_nsec as u64);
            let _ = rustix::io::write(&clock_tx, &ns.to_ne_bytes());
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // The child's copy closed at its exec; the parent's goes with `cmd`.
    drop(cmd);
    match spawned {
        Ok(mut child) => {
            let pid = child.id() as i32;
            let stdout = child.stdout.take();
            // memmon reaps it itself (wait4, for its rusage); std must not.
            std::mem::forget(child);
            Ok((pid, stdout, exec_instant(&clock_rx)))
        }
        Err(source) => Err(RecordError::Launch {
            program: args[0].clone(),
            source,
        }),
    }
}

/// The instant the child read on the monotonic clock right before its exec (sent on `rx`),
/// when it came. spawn returns once the exec has happened, so it is in the pipe by then. std's
/// `Instant` reads the same clock (CLOCK_MONOTONIC); the reading is placed by its distance from
/// a reading taken now.
fn exec_instant(rx: &std::os::fd::OwnedFd) -> Option<Instant> {
    let mut buf = [0u8; 8];
    if rustix::io::read(rx, &mut buf).ok()? != buf.len() {
        return None;
    }
    let then = u64::from_ne_bytes(buf);
    let now_instant = Instant::now();
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let now = (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64);
    now_instant.checked_sub(Duration::from_nanos(now.checked_sub(then)?))
}

/// Notes when the launched command `pid` exits, on a thread that waits for it without reaping
/// it (`WNOWAIT`: the recorder reaps it, for its rusage); nothing is noted when the recorder
/// reaps it first.
fn watch_exit(pid: i32, at: Arc<OnceLock<Instant>>) {
    let _ = std::thread::Builder::new()
        .name("memmon-exit".into())
        .spawn(move || {
            use rustix::process::{waitid, WaitId, WaitIdOptions};
            let Some(p) = sys::pid(pid) else { return };
            loop {
                match waitid(
                    WaitId::Pid(p),
                    WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
                ) {
                    Ok(_) => {
                        let _ = at.set(Instant::now());
                        return;
                    }
                    Err(rustix::io::Errno::INTR) => continue,
                    // ECHILD: the recorder reaped it first.
                    Err(_) => return,
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launched_command_sends_its_start_from_right_before_its_exec() {
        let before = Instant::now();
        let (pid, _, exec_at) = launch(&["true".to_string()], &[], false, false, None).unwrap();
        let _ = raw::wait4(pid, false);
        let exec_at = exec_at.expect("the child's clock reading came");
        // After the fork began, and before spawn returned to us.
        assert!(exec_at >= before && exec_at <= Instant::now());
    }
}
