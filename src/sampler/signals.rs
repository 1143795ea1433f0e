//! Signals memmon reacts to (SIGINT, SIGTERM, SIGHUP): a handler that only records which
//! arrived and whether a process sent it (so a launched command is not sent twice the Ctrl-C
//! that the terminal already gave it). The sampling loop polls `take()` between ticks; a
//! signal also cuts its sleep short.

use std::sync::atomic::{AtomicU64, Ordering};

static RECEIVED: AtomicU64 = AtomicU64::new(0);
static SENT_BY_PROCESS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let bit = 1u64 << (sig as u64 & 63);
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = unsafe { (*info).si_code };
    if code != libc::SI_KERNEL {
        SENT_BY_PROCESS.fetch_or(bit, Ordering::SeqCst);
    }
    RECEIVED.fetch_or(bit, Ordering::SeqCst);
}

/// Installs the handler for the stop signals.
pub fn install() {
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

/// Takes the signals that arrived since the last call.
pub fn take() -> Vec<Arrived> {
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

pub use crate::model::signal::name;
