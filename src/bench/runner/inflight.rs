//! The clients of a daemon bench while they run: one at a time, or several in flight together
//! (`--concurrency`). Each is waited for on its pidfd, all of them and the recorder's end in one
//! `poll`: no wake-up until one exits, the recorder ends (the daemon died) or a stop signal
//! comes.

use super::{stderr_stdio, BenchOptions, ClientEnd, Quit, Stop};
use crate::bench::BenchError;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::Child;
use std::time::{Duration, Instant};

/// How often a wait looks where the kernel gives no pidfd (before Linux 5.3).
const LOOK_WITHOUT_PIDFD: Duration = Duration::from_millis(1);

/// The clients running now.
#[derive(Default)]
pub(super) struct InFlight {
    running: Vec<Running>,
}

struct Running {
    run: u32,
    child: Child,
    /// `None` before Linux 5.3 (ENOSYS): the wait then looks every millisecond.
    pidfd: Option<OwnedFd>,
    started: Instant,
    started_unix_ms: u64,
}

/// A client that exited.
pub(super) struct Ended {
    pub run: u32,
    pub started: Instant,
    pub started_unix_ms: u64,
    pub end: ClientEnd,
}

impl InFlight {
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Starts the client as run `run` (0 for a warmup run), with `env` added to its
    /// environment; its stdout goes to stderr where memmon's stdout carries data.
    pub fn start(
        &mut self,
        opts: &BenchOptions,
        env: &[(&str, String)],
        run: u32,
    ) -> Result<(), Stop> {
        let mut c = std::process::Command::new(&opts.client[0]);
        c.args(&opts.client[1..])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        if opts.stdout_is_data {
            c.stdout(stderr_stdio());
        }
        crate::sys::oom::restore_in_child(&mut c);
        let started_unix_ms = crate::sampler::record::unix_ms_now();
        let started = Instant::now();
        let child = c.spawn().map_err(|e| {
            Stop::Failed(format!("cannot run the client '{}': {e}", opts.client[0]))
        })?;
        let pidfd = crate::sys::pidfd_open(child.id() as i32).ok();
        self.running.push(Running {
            run,
            child,
            pidfd,
            started,
            started_unix_ms,
        });
        Ok(())
    }

    /// Sleeps until one client or more exit, and reaps them. When `quit` is set (the recorder
    /// ended: the daemon died, a signal), every client is sent SIGTERM and waited for: the bool
    /// is then true. An empty list when none runs.
    pub fn wait(&mut self, quit: &Quit) -> Result<(Vec<Ended>, bool), Stop> {
        let mut quitted = false;
        loop {
            let now = Instant::now();
            let ended = self.reap(now)?;
            if !ended.is_empty() || self.running.is_empty() {
                return Ok((ended, quitted));
            }
            if !quitted && quit.is_set() {
                quitted = true;
                self.signal_all();
            }
            let quit_fd = match (&quit.wake, quitted) {
                (Some(w), false) => Some(w.as_fd()),
                _ => None,
            };
            let mut fds: Vec<Option<BorrowedFd<'_>>> = self
                .running
                .iter()
                .map(|r| r.pidfd.as_ref().map(|f| f.as_fd()))
                .collect();
            let timeout = if fds.iter().any(Option::is_none) {
                Some(LOOK_WITHOUT_PIDFD)
            } else if quit_fd.is_none() && !quitted {
                // No eventfd to be woken by: the recorder's end is looked at now and then.
                Some(super::WAIT_WITHOUT_WAKER)
            } else {
                None
            };
            fds.push(quit_fd);
            let mut ready = vec![false; fds.len()];
            if crate::sys::wait_ready_into(&fds, timeout, &mut ready).is_err() {
                // `poll` on valid descriptors fails only without memory for its table.
                std::thread::sleep(LOOK_WITHOUT_PIDFD);
            }
        }
    }

    /// Sends SIGTERM to every client still running and waits for them all (a bench that stops
    /// leaves none behind).
    pub fn end_all(&mut self) {
        self.signal_all();
        for mut r in self.running.drain(..) {
            let _ = r.child.wait();
        }
    }

    fn signal_all(&self) {
        for r in &self.running {
            // Our own children, not yet reaped: the signal cannot miss them (a zombie takes
            // it too).
            let _ = crate::sys::kill(r.child.id() as i32, libc::SIGTERM);
        }
    }

    /// The clients that have exited by now, reaped; `at`: when the wait that saw them woke.
    fn reap(&mut self, at: Instant) -> Result<Vec<Ended>, Stop> {
        use std::os::unix::process::ExitStatusExt;
        let mut ended = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            let status = self.running[i]
                .child
                .try_wait()
                .map_err(|e| Stop::Error(BenchError::system("cannot wait for the client")(e)))?;
            match status {
                Some(status) => {
                    let r = self.running.remove(i);
                    ended.push(Ended {
                        run: r.run,
                        started: r.started,
                        started_unix_ms: r.started_unix_ms,
                        end: ClientEnd {
                            wall_s: at.saturating_duration_since(r.started).as_secs_f64(),
                            code: status.code(),
                            signal: status.signal(),
                        },
                    });
                }
                None => i += 1,
            }
        }
        Ok(ended)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.end_all();
    }
}
