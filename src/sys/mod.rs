//! The system layer: the system calls std does not wrap go through `rustix` (typed flags,
//! `io::Result`s, no `unsafe`), stop signals through `signal-hook` (`signals.rs`), and what no
//! crate reaches through `raw.rs`, the one file of hand-written `libc` calls. `Waker` is the
//! one eventfd a sleeping thread is woken with; `wait_ready` the one `poll` over a few of them;
//! `WaitSet` the sampling loops' sleep, an epoll set kept from tick to tick.

pub mod oom;
pub mod perf;
pub mod raw;
pub mod signals;
mod waitset;
mod waker;

pub use waitset::{WaitSet, WatchFd, Watched};
pub use waker::Waker;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::process::{Pid, Signal};
use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// Sleeps in `poll` until one of `fds` is ready to read (or hung up, or in error) or `timeout`
/// passes (`None`: no limit); which of them are. A slot that is `None` is left out. A signal
/// that interrupts the sleep (EINTR) ends it with none ready, as a timeout does.
pub fn wait_ready<const N: usize>(
    fds: [Option<BorrowedFd<'_>>; N],
    timeout: Option<Duration>,
) -> io::Result<[bool; N]> {
    let mut ready = [false; N];
    wait_ready_into(&fds, timeout, &mut ready)?;
    Ok(ready)
}

/// [`wait_ready`] over any number of descriptors: `ready[i]` tells of `fds[i]`.
pub fn wait_ready_into(
    fds: &[Option<BorrowedFd<'_>>],
    timeout: Option<Duration>,
    ready: &mut [bool],
) -> io::Result<()> {
    let mut polled = Vec::with_capacity(fds.len());
    let mut slot_of = Vec::with_capacity(fds.len());
    for (i, fd) in fds.iter().enumerate() {
        if let Some(fd) = fd {
            polled.push(PollFd::from_borrowed_fd(*fd, PollFlags::IN));
            slot_of.push(i);
        }
    }
    ready.iter_mut().for_each(|r| *r = false);
    if poll(&mut polled, timeout)? > 0 {
        for (p, &i) in polled.iter().zip(&slot_of) {
            ready[i] = !p.revents().is_empty();
        }
    }
    Ok(())
}

/// `poll(2)` with a `Duration` (`None`: no limit; one too long for the kernel waits without
/// one); the number of descriptors with events, 0 after the timeout or a signal (EINTR).
pub fn poll(fds: &mut [PollFd<'_>], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.and_then(|d| Timespec::try_from(d).ok());
    match rustix::event::poll(fds, ts.as_ref()) {
        Ok(n) => Ok(n),
        Err(Errno::INTR) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// A PID as the kernel takes it: `None` for 0 and negative numbers (a process group, or every
/// process, to `kill`), which memmon never means.
pub fn pid(pid: i32) -> Option<Pid> {
    (pid > 0).then(|| Pid::from_raw(pid)).flatten()
}

/// Sends `sig` (a signal number) to the process `pid`.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    let p = self::pid(pid).ok_or_else(|| invalid(format!("no process has PID {pid}")))?;
    let s = Signal::from_named_raw(sig).ok_or_else(|| invalid(format!("no signal {sig}")))?;
    rustix::process::kill_process(p, s).map_err(io::Error::from)
}

/// True while a process `pid` exists, ours or not (`kill(pid, 0)`: EPERM means it exists
/// under another user).
pub fn process_exists(pid: i32) -> bool {
    let Some(p) = self::pid(pid) else {
        return false;
    };
    match rustix::process::test_kill_process(p) {
        Ok(()) | Err(Errno::PERM) => true,
        Err(_) => false,
    }
}

/// `pidfd_open(2)`: a descriptor that becomes readable when the process `pid` exits.
pub fn pidfd_open(pid: i32) -> io::Result<std::os::fd::OwnedFd> {
    let p = self::pid(pid).ok_or_else(|| invalid(format!("no process has PID {pid}")))?;
    rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).map_err(io::Error::from)
}

/// Waits for the child `pid` to end and reaps it (again when a signal interrupts the wait).
pub fn wait_child(pid: i32) -> io::Result<rustix::process::WaitStatus> {
    use rustix::process::{waitpid, WaitOptions};
    let p = self::pid(pid).ok_or_else(|| invalid(format!("no process has PID {pid}")))?;
    loop {
        match waitpid(Some(p), WaitOptions::empty()) {
            Ok(Some((_, status))) => return Ok(status),
            // waitpid returns no child only with WNOHANG.
            Ok(None) => unreachable!("a blocking waitpid returned no child"),
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// The effective user ID of memmon.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn wait_ready_tells_which_slot_is_ready_and_skips_absent_ones() {
        let a = Waker::new().unwrap();
        let b = Waker::new().unwrap();
        b.wake();
        let got = wait_ready(
            [Some(a.as_fd()), None, Some(b.as_fd())],
            Some(Duration::from_secs(60)),
        )
        .unwrap();
        assert_eq!(got, [false, false, true]);
        // Nothing ready: the timeout ends it, all false.
        b.reset();
        let got = wait_ready([Some(a.as_fd()), None], Some(Duration::from_millis(10))).unwrap();
        assert_eq!(got, [false, false]);
    }

    #[test]
    fn no_pid_for_zero_or_negative_numbers() {
        assert!(pid(0).is_none());
        assert!(pid(-1).is_none());
        assert_eq!(pid(42).map(Pid::as_raw_nonzero).map(|p| p.get()), Some(42));
        assert!(
            kill(0, 15).is_err(),
            "kill(0) would signal the process group"
        );
        assert!(kill(-1, 15).is_err(), "kill(-1) would signal every process");
    }

    #[test]
    fn process_exists_for_this_one_and_not_for_a_reaped_child() {
        assert!(process_exists(std::process::id() as i32));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        // Reaped: gone (unless the PID was reused at once, which the kernel avoids).
        assert!(!process_exists(pid));
        assert!(!process_exists(0));
    }

    #[test]
    fn wait_child_gives_the_exit_status() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let status = wait_child(child.id() as i32).unwrap();
        assert_eq!(status.exit_status(), Some(3));
        // Reaped: there is nothing left to wait for.
        assert!(child.wait().is_err());
    }

    #[test]
    fn a_pidfd_becomes_readable_when_the_process_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let fd = pidfd_open(child.id() as i32).unwrap();
        let [ready] = wait_ready([Some(fd.as_fd())], Some(Duration::ZERO)).unwrap();
        assert!(!ready, "readable while the process runs");
        kill(child.id() as i32, libc::SIGKILL).unwrap();
        let [ready] = wait_ready([Some(fd.as_fd())], Some(Duration::from_secs(60))).unwrap();
        assert!(ready, "not readable once the process ended");
        child.wait().unwrap();
    }
}
