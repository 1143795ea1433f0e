//! `--mark-stdout REGEX`: a launched command's stdout comes to memmon through a pipe; a thread
//! passes every byte through unchanged (to memmon's stdout, or its stderr when the recording
//! goes to stdout) and sends a marker for each line that matches.

use super::{send_mark, MarkPattern};
use crate::sampler::record::{Control, ControlHandle};
use std::io::{BufRead, BufReader, Write};
use std::process::ChildStdout;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The relay thread and a signal that it reached the end of the command's output.
pub struct Relay {
    thread: Option<JoinHandle<()>>,
    done: mpsc::Receiver<()>,
}

/// Starts relaying `pipe`. Each line is written (and flushed) before its marker is sent, so
/// the output a user sees never waits on memmon. An error: the thread could not be started;
/// the recorder is then told at once that the output ended, so it waits for nothing.
pub fn spawn_relay(
    pipe: ChildStdout,
    pattern: MarkPattern,
    control: ControlHandle,
    to_stderr: bool,
) -> std::io::Result<Relay> {
    let (tx, done) = mpsc::channel();
    let ended = control.clone();
    let thread = std::thread::Builder::new()
        .name("memmon-mark-stdout".into())
        .spawn(move || {
            relay(pipe, &pattern, &control, to_stderr);
            control.send(Control::OutputEnded);
            let _ = tx.send(());
        });
    match thread {
        Ok(t) => Ok(Relay {
            thread: Some(t),
            done,
        }),
        Err(e) => {
            ended.send(Control::OutputEnded);
            Err(e)
        }
    }
}

fn relay(pipe: ChildStdout, pattern: &MarkPattern, control: &ControlHandle, to_stderr: bool) {
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    let mut out: Box<dyn Write> = if to_stderr {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    let mut writing = true;
    let mut recording = true;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        // A closed stdout stops the copying, not the reading: the command must never block on
        // a full pipe.
        if writing && (out.write_all(&line).is_err() || out.flush().is_err()) {
            writing = false;
        }
        if recording {
            let text = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line));
            if let Some(label) = pattern.label(text.strip_suffix('\r').unwrap_or(&text)) {
                recording = send_mark(control, label);
            }
        }
    }
}

impl Relay {
    /// Waits up to `limit` for the command's output to end (a daemonized descendant may hold
    /// the pipe open forever; then the thread is left to end with memmon).
    pub fn finish(mut self, limit: Duration) {
        if self.done.recv_timeout(limit).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}
