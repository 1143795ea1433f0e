//! The one way a thread wakes another that sleeps in `poll`: an eventfd (`Waker`), for the
//! recorder's control messages, the markers' worker threads and the bench's waits.

use super::waitset::{WatchFd, Watched};
use rustix::event::{eventfd, EventfdFlags};
use rustix::io::Errno;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

/// An eventfd that is readable from a `wake` until the next `reset`: a sleeper polls it beside
/// its own descriptors, and any thread wakes it. A wake before the sleep starts is not lost (the
/// descriptor stays readable), and many wakes before a `reset` are one.
#[derive(Debug)]
pub struct Waker {
    fd: WatchFd,
}

impl Waker {
    /// A fresh, unwoken eventfd (close-on-exec, non-blocking).
    pub fn new() -> io::Result<Waker> {
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Waker {
            fd: WatchFd::new(fd),
        })
    }

    /// Makes the descriptor readable, from any thread.
    pub fn wake(&self) {
        match rustix::io::write(&self.fd, &1u64.to_ne_bytes()) {
            // EAGAIN: the counter is at its maximum, so the descriptor is readable already.
            Ok(_) | Err(Errno::AGAIN) => {}
            // eventfd(2): the only other failure, EINVAL, is a write shorter than 8 bytes or of
            // the value 2^64-1; neither is this one.
            Err(e) => unreachable!("writing 1 to an eventfd failed: {e}"),
        }
    }

    /// Empties the counter: the descriptor is no longer readable until the next `wake`. True
    /// when it had been woken since the last reset.
    pub fn reset(&self) -> bool {
        let mut v = [0u8; 8];
        match rustix::io::read(&self.fd, &mut v) {
            Ok(_) => true,
            // EAGAIN: the counter is 0 (not woken).
            Err(Errno::AGAIN) => false,
            // eventfd(2): the only other failure, EINVAL, is a read shorter than 8 bytes.
            Err(e) => unreachable!("reading an eventfd failed: {e}"),
        }
    }

    /// This eventfd in a sleep's slot (see `WaitSet`).
    pub fn watched(&self) -> Watched<'_> {
        self.fd.watched(true)
    }

    /// Sleeps until woken or `timeout` passes (`None`: no limit); true when woken. The wake is
    /// not taken (see `reset`).
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let [woken] = super::wait_ready([Some(self.as_fd())], timeout)?;
        Ok(woken)
    }
}

impl AsFd for Waker {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    /// Long enough that a wake that is lost shows as a failure, not as a slow machine.
    const LIMIT: Duration = Duration::from_secs(60);

    #[test]
    fn a_wake_from_another_thread_ends_the_wait() {
        let w = Arc::new(Waker::new().unwrap());
        let theirs = w.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            theirs.wake();
        });
        let start = Instant::now();
        assert!(w.wait(Some(LIMIT)).unwrap(), "the wait timed out");
        assert!(start.elapsed() < LIMIT);
        t.join().unwrap();
        assert!(w.reset());
    }

    #[test]
    fn a_wake_before_the_wait_is_not_lost() {
        let w = Waker::new().unwrap();
        w.wake();
        assert!(w.wait(Some(LIMIT)).unwrap());
        // Waiting does not take the wake: it is still there until reset.
        assert!(w.wait(Some(Duration::ZERO)).unwrap());
        assert!(w.reset());
    }

    #[test]
    fn many_wakes_are_one_and_reset_takes_them() {
        let w = Waker::new().unwrap();
        assert!(!w.reset(), "a new waker is not woken");
        for _ in 0..5 {
            w.wake();
        }
        assert!(w.reset());
        assert!(!w.reset());
        assert!(!w.wait(Some(Duration::from_millis(10))).unwrap());
    }
}
