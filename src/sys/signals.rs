//! The stop signals memmon reacts to (SIGINT, SIGTERM, SIGHUP), through signal-hook: which
//! arrived, and whether a process sent it (so a launched command is not sent twice the Ctrl-C
//! that the terminal already gave it). The sampling loop takes them (`take()`) between ticks;
//! a signal also cuts its sleep short: signal-hook's handler writes a byte to a socket whose
//! read end (`wake_fd`) the sleep polls, so a signal wakes it whenever it arrives — also between
//! `take()` and the start of the sleep, and when it is delivered to a thread other than the
//! sleeping one.

use signal_hook::iterator::backend::SignalDelivery;
use signal_hook::iterator::exfiltrator::WithRawSiginfo;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

const STOP_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

struct Installed {
    /// Each arrival's siginfo (its signal, and `si_code`: who sent it), and the socket pair the
    /// handler writes a byte to.
    delivery: Mutex<SignalDelivery<UnixStream, WithRawSiginfo>>,
    /// The read end of that pair again (a `dup`), for sleeps to poll without the lock.
    wake: UnixStream,
    /// Set by a second action on each signal, run after the delivery's: while it is false,
    /// nothing arrived since the last `take`, which then makes no system call (it runs at
    /// every tick).
    arrived: Arc<AtomicBool>,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Installs the handlers for the stop signals (once; later calls do nothing). From then on a
/// stop signal no longer ends memmon by itself: it waits to be taken.
pub fn install() -> io::Result<()> {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    if INSTALLED.get().is_some() {
        return Ok(());
    }
    let (read, write) = UnixStream::pair()?;
    let wake = read.try_clone()?;
    let delivery = SignalDelivery::with_pipe(read, write, WithRawSiginfo, STOP_SIGNALS)?;
    let arrived = Arc::new(AtomicBool::new(false));
    for sig in STOP_SIGNALS {
        // Registered after the delivery's: signal-hook runs a signal's actions in the order
        // they were registered, so once `arrived` is seen set, the siginfo is stored.
        signal_hook::flag::register(sig, arrived.clone())?;
    }
    let _ = INSTALLED.set(Installed {
        delivery: Mutex::new(delivery),
        wake,
        arrived,
    });
    Ok(())
}

/// A signal that arrived, and whether a process (not the terminal) sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrived {
    pub sig: i32,
    pub sent_by_process: bool,
}

/// A descriptor that is readable from the moment a stop signal arrives until `take()` takes it:
/// add it to the poll set of a sleep that a signal must cut short. `None` before `install()`
/// (a signal then ends memmon by itself). Never closed once made.
pub fn wake_fd() -> Option<BorrowedFd<'static>> {
    INSTALLED.get().map(|s| s.wake.as_fd())
}

/// Takes the signals that arrived since the last call, in the order of their numbers.
pub fn take() -> Vec<Arrived> {
    let Some(s) = INSTALLED.get() else {
        return Vec::new();
    };
    // Cleared before the pending ones are read: a signal arriving after this is read below or
    // sets it again for the next call (at worst a call that finds nothing). The socket is
    // emptied by `pending()`.
    if !s.arrived.swap(false, Ordering::SeqCst) {
        return Vec::new();
    }
    let mut got = 0u64;
    let mut sent = 0u64;
    let mut delivery = s.delivery.lock().unwrap_or_else(|e| e.into_inner());
    for info in delivery.pending() {
        let bit = 1u64 << (info.si_signo as u64 & 63);
        got |= bit;
        // The terminal's Ctrl-C (and other kernel-made signals) come with SI_KERNEL.
        if info.si_code != libc::SI_KERNEL {
            sent |= bit;
        }
    }
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
    let Some(fd) = wake_fd() else {
        std::thread::sleep(d);
        return;
    };
    let start = std::time::Instant::now();
    // `poll` on a valid descriptor fails only without memory for its table: then the sleep
    // still lasts its time, deaf to signals until the next tick looks.
    if super::wait_ready([Some(fd)], Some(d)).is_err() {
        std::thread::sleep(d.saturating_sub(start.elapsed()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Polls `wake_fd()` for up to `limit`; whether it became readable, and how long that took.
    fn wait_for_wake(limit: Duration) -> (bool, Duration) {
        let start = Instant::now();
        let [woken] = crate::sys::wait_ready([wake_fd()], Some(limit)).unwrap();
        (woken, start.elapsed())
    }

    #[test]
    fn a_signal_before_the_sleep_or_on_another_thread_still_wakes_it() {
        install().unwrap();
        let _ = take();
        // The race of the sampling loop: the signal lands after `take()` and before the sleep
        // starts, and here on another thread than the sleeping one. The sleep must end at once,
        // not after its 30 s.
        signal_hook::low_level::raise(libc::SIGHUP).unwrap();
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
        assert!(!woken, "the socket was not emptied by take()");
        assert!(take().is_empty());
    }
}
