//! Every message memmon prints goes to stderr through here (`errln!`, `errprint!`). A stderr
//! that is closed (`2>&-`) or whose reader has gone (`memmon demo 2>&1 | head -3`) is not an
//! error: the message is dropped and the work goes on to write its recording, sidecar and plot.
//! (`eprintln!` panics there: exit 101 and nothing written.)

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write found stderr closed: later messages are not even tried.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Set while `record`'s live status line is drawn (`live.rs`): the next message erases it first,
/// so it starts on a clean line.
static LIVE_DRAWN: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stderr whole, or drops it when stderr cannot take it: EPIPE and EBADF mean
/// no one will read stderr again; any other failure (a full disk under `2>file`) has nowhere
/// to be told either.
pub fn write(args: std::fmt::Arguments) {
    clear_live();
    // A message may carry a name a recorded program chose: no control character of it (ESC,
    // BEL, CR) reaches the terminal raw (`render::outside`).
    let text = std::fmt::format(args);
    write_bytes(memmon::outside::guard(&text).as_bytes());
}

/// Draws the live status line (bytes that end without a newline); the next message erases it.
pub fn write_live(bytes: &[u8]) {
    write_bytes(bytes);
    LIVE_DRAWN.store(true, Ordering::Relaxed);
}

/// Erases the live status line when it is drawn.
pub fn clear_live() {
    if LIVE_DRAWN.swap(false, Ordering::Relaxed) {
        write_bytes(b"\r\x1b[K");
    }
}

/// The terminal's reporter: the core's messages (`memmon::reporter`) as lines on stderr, each
/// after `prefix` (`memmon`, `memmon export`), warnings and errors saying so. This is where `-q`
/// and `--verbose` are decided: `quiet` keeps only what is said even with `-q` (notices and
/// errors), and details are shown only when `verbose`.
pub fn reporter(prefix: &'static str, quiet: bool, verbose: bool) -> memmon::reporter::Reporter {
    use memmon::reporter::Level;
    memmon::reporter::Reporter::new(move |level, text| {
        let shown = match level {
            Level::Detail => verbose && !quiet,
            Level::Note | Level::Warning => !quiet,
            Level::Notice | Level::Error => true,
        };
        if !shown {
            return;
        }
        let kind = match level {
            Level::Warning => "warning: ",
            Level::Error => "error: ",
            _ => "",
        };
        write(format_args!("{prefix}: {kind}{text}\n"));
    })
}

/// Writes bytes already formatted.
fn write_bytes(bytes: &[u8]) {
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

/// Prints clap's own message, a usage error or `--help`/`--version`, in one write, and returns its
/// exit code (2 for a usage error, 0 for help). clap's `exit` writes it a styled span at a time
/// (some 30 writes for one usage error), which another writer to the same terminal or log can
/// split. Colour follows the stream as clap's does: a terminal, unless `NO_COLOR` is set or
/// `TERM` is `dumb`; `CLICOLOR_FORCE` forces it.
pub fn clap_message(e: &clap::Error) -> i32 {
    use std::io::IsTerminal;
    let to_stdout = !e.use_stderr();
    let terminal = if to_stdout {
        std::io::stdout().is_terminal()
    } else {
        std::io::stderr().is_terminal()
    };
    let set = |name| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    let colour = set("CLICOLOR_FORCE")
        || (terminal && !set("NO_COLOR") && std::env::var_os("TERM").is_none_or(|t| t != "dumb"));
    let styled = e.render();
    let text = if colour {
        styled.ansi().to_string()
    } else {
        styled.to_string()
    };
    if to_stdout {
        // A reader that has gone (`memmon --help | head -1`) is not an error.
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    } else {
        write_bytes(text.as_bytes());
    }
    e.exit_code()
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
