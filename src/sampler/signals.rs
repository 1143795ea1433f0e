//! Signals memmon reacts to (SIGINT, SIGTERM, SIGHUP): a handler that only records which
//! arrived and whether a process sent it (so a launched command is not sent twice the Ctrl-C
//! that the terminal already gave it). The sampling loop polls `take()` between ticks; a
//! signal also cuts its sleep short: the handler writes a byte to a pipe whose read end
//! (`wake_fd`) the sleep polls, so a signal wakes it whenever it arrives — also between `take()`
//! and the start of the sleep, and when it is delivered to a thread other than the sleeping one.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

static RECEIVED: AtomicU64 = AtomicU64::new(0);
static SENT_BY_PROCESS: AtomicU64 = AtomicU64::new(0);
/// The self-pipe: the handler writes to WAKE_WRITE, sleeps poll WAKE_READ; -1 before `install`.
static WAKE_READ: AtomicI32 = AtomicI32::new(-1);
static WAKE_WRITE: AtomicI32 = AtomicI32::new(-1);
/// Bytes the handler has written to the pipe (counted after each write), and how many of them
/// `take` has drained: equal means the pipe is empty, so `take` needs no system call.
static WRITTEN: AtomicU64 = AtomicU64::new(0);
static DRAINED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let bit = 1u64 << (sig as u64 & 63);
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = unsafe { (*info).si_code };
    if code != libc::SI_KERNEL {
        SENT_BY_PROCESS.fetch_or(bit, Ordering::SeqCst);
    }
    RECEIVED.fetch_or(bit, Ordering::SeqCst);
    let fd = WAKE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; errno is saved and restored around it so the
        // interrupted code sees its own. A full pipe (EAGAIN) already wakes every sleep.
        unsafe {
            let errno = *libc::__errno_location();
            libc::write(fd, [1u8].as_ptr().cast(), 1);
            *libc::__errno_location() = errno;
        }
        // After the write: a count `take` has seen is of bytes already in the pipe.
        WRITTEN.fetch_add(1, Ordering::SeqCst);
    }
}

/// Installs the handler for the stop signals (and, once, the pipe it wakes sleeps with).
pub fn install() {
    static PIPE: std::sync::Once = std::sync::Once::new();
    PIPE.call_once(|| {
        let mut fds: [libc::c_int; 2] = [-1; 2];
        // SAFETY: pipe2 fills two descriptors on success.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } == 0 {
            WAKE_READ.store(fds[0], Ordering::SeqCst);
            WAKE_WRITE.store(fds[1], Ordering::SeqCst);
        }
    });
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a valid handler and flags is a valid argument; the
        // handler only touches atomics, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// A signal that arrived, and whether a process (not the terminal) sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrived {
    pub sig: i32,
    pub sent_by_process: bool,
}

/// A descriptor that is readable from the moment a stop signal arrives until `take()` takes it:
/// add it to the poll set of a sleep that a signal must cut short. -1 (which poll ignores)
/// before `install()`.
pub fn wake_fd() -> RawFd {
    WAKE_READ.load(Ordering::SeqCst)
}

/// Takes the signals that arrived since the last call.
pub fn take() -> Vec<Arrived> {
    // Empty the pipe first: a signal arriving after this is still in the bits below, or wakes
    // the next sleep (at worst once for nothing). Every byte counted in `written` is in the pipe
    // already, so after draining it those are gone; a byte written but not yet counted makes the
    // next call drain again. When nothing was written since, there is nothing to read: no
    // system call on the tick's path.
    let fd = wake_fd();
    let written = WRITTEN.load(Ordering::SeqCst);
    if fd >= 0 && written != DRAINED.load(Ordering::SeqCst) {
        let mut buf = [0u8; 64];
        // SAFETY: reading into a valid buffer from our own non-blocking pipe.
        while unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
        DRAINED.store(written, Ordering::SeqCst);
    }
    let got = RECEIVED.swap(0, Ordering::SeqCst);
    if got == 0 {
        return Vec::new();
    }
    let sent = SENT_BY_PROCESS.swap(0, Ordering::SeqCst);
    (1..64i32)
        .filter(|s| got & (1 << s) != 0)
        .map(|s| Arrived {
            sig: s,
            sent_by_process: sent & (1 << s) != 0,
        })
        .collect()
}

/// Sleeps for `d`, or until a stop signal arrives (it stays to be taken by `take`).
pub fn sleep(d: std::time::Duration) {
    let ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    let mut fds = [libc::pollfd {
        fd: wake_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: fds and ts are valid for the call; a negative fd is ignored by ppoll.
    unsafe { libc::ppoll(fds.as_mut_ptr(), 1, &ts, std::ptr::null()) };
}

pub use crate::model::signal::name;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Polls `wake_fd()` for up to `limit`; whether it became readable, and how long that took.
    fn wait_for_wake(limit: Duration) -> (bool, Duration) {
        let start = Instant::now();
        let mut fds = [libc::pollfd {
            fd: wake_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ts = libc::timespec {
            tv_sec: limit.as_secs() as libc::time_t,
            tv_nsec: limit.subsec_nanos() as libc::c_long,
        };
        // SAFETY: fds and ts are valid for the call.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 1, &ts, std::ptr::null()) };
        (r == 1, start.elapsed())
    }

    #[test]
    fn a_signal_before_the_sleep_or_on_another_thread_still_wakes_it() {
        install();
        let _ = take();
        // The race of the sampling loop: the signal lands after `take()` and before the sleep
        // starts, and here on another thread than the sleeping one. The sleep must end at once,
        // not after its 30 s.
        // SAFETY: the handler for SIGHUP is installed; it only records the signal.
        unsafe { libc::raise(libc::SIGHUP) };
        let (woken, waited) = std::thread::spawn(|| wait_for_wake(Duration::from_secs(30)))
            .join()
            .unwrap();
        assert!(woken, "the sleep was not woken");
        assert!(waited < Duration::from_secs(10), "woken after {waited:?}");
        let got = take();
        assert!(
            got.iter()
                .any(|a| a.sig == libc::SIGHUP && a.sent_by_process),
            "{got:?}"
        );
        // Taken: the next sleep sleeps.
        let (woken, _) = wait_for_wake(Duration::from_millis(50));
        assert!(!woken, "the pipe was not emptied by take()");
    }
}
