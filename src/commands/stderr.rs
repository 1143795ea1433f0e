//! Every message memmon prints goes to stderr through here (`errln!`, `errprint!`). A stderr
//! that is closed (`2>&-`) or whose reader has gone (`memmon demo 2>&1 | head -3`) is not an
//! error: the message is dropped and the work goes on to write its recording, sidecar and plot.
//! (`eprintln!` panics there: exit 101 and nothing written.)

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write found stderr closed: later messages are not even tried.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stderr whole, or drops it when stderr cannot take it: EPIPE and EBADF mean
/// no one will read stderr again; any other failure (a full disk under `2>file`) has nowhere
/// to be told either.
pub fn write(args: std::fmt::Arguments) {
    write_bytes(std::fmt::format(args).as_bytes());
}

/// [`write`] for bytes already formatted (the live status line).
pub fn write_bytes(bytes: &[u8]) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut err = std::io::stderr().lock();
    if let Err(e) = err.write_all(bytes).and_then(|()| err.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe || e.raw_os_error() == Some(libc::EBADF) {
            CLOSED.store(true, Ordering::Relaxed);
        }
    }
}

/// `eprintln!` that a closed stderr does not turn into a panic.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::commands::stderr::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that a closed stderr does not turn into a panic.
macro_rules! errprint {
    ($($arg:tt)*) => {
        $crate::commands::stderr::write(format_args!($($arg)*))
    };
}

pub(crate) use {errln, errprint};
