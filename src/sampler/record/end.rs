//! How a recording ends: the markers still waiting, the last PSS read, the end record, the
//! summary; and after a failure, what is kept and what is lost.

use super::{Control, Outcome, Recorder, RunState, Stop};
use crate::analysis::SummaryBuilder;
use crate::exit::Ending;
use crate::format::meta::{EndInfo, EndReason};
use crate::format::OutputError;
use crate::sampler::error::RecordError;
use std::io::ErrorKind;

impl Recorder {
    /// Ends the recording for `stop`: markers still waiting are taken while the target lives,
    /// the end record is written and the summary made.
    pub(super) fn stop(mut self, stop: Stop, mut run: RunState) -> Result<Outcome, RecordError> {
        let target_lives = !matches!(stop, Stop::TargetExited | Stop::Failed(_));
        if matches!(stop, Stop::TargetExited) {
            self.wait_for_relayed_markers(&mut run);
        }
        run.queued.extend(self.control_rx.try_iter());
        if matches!(stop, Stop::Failed(_)) {
            // The failure is what is reported; no more samples are taken.
            run.queued.clear();
        }
        let mut untaken = Vec::new();
        for stamped in run.queued.drain(..) {
            // Probes and resets not answered see their reply channel closed: "the recording
            // has ended". Markers sent without a reply are taken, or said to be lost.
            match stamped.msg {
                Control::Event(e) => {
                    let taken = target_lives
                        && matches!(
                            self.tick_at(Some(e.clone()), Some(stamped.origin)),
                            Ok(Some(_))
                        );
                    if !taken {
                        untaken.push(e);
                    }
                }
                // A client that exited has its time, whatever ends the recording.
                Control::ClientWall(w) => self.client_walls.push(w),
                _ => {}
            }
        }
        if !untaken.is_empty() {
            let labels: Vec<String> = untaken.iter().map(|e| format!("'{e}'")).collect();
            let one = untaken.len() == 1;
            self.report.note(&format!(
                "{} not taken: the target had ended before {}: {}",
                if one { "1 marker" } else { "markers" },
                if one { "its sample" } else { "their samples" },
                labels.join(", ")
            ));
        }
        let mut end = run.end;
        if !matches!(stop, Stop::Failed(_)) {
            let last = self.last_anatomy(target_lives);
            self.release_replies();
            if let Err(e) = last {
                return self.fail(e.into(), end);
            }
        }
        // Replies held for an anatomy read that will not be waited for (a failure).
        self.release_replies();
        let (reason, signal) = match stop {
            Stop::Failed(err) => return self.fail(err, end),
            Stop::Stopped => {
                end.reason = EndReason::Stopped;
                self.last_pss_read();
                return self.finish(end, None, None);
            }
            Stop::Signal(sig) => (EndReason::Signal, Some(sig)),
            Stop::Duration => (EndReason::Duration, None),
            Stop::TargetExited => (EndReason::TargetExited, None),
        };
        end.reason = reason;
        let exit = match (&self.launched, signal) {
            (Some(_), _) => match (end.exit_code, end.exit_signal) {
                (Some(c), _) => Ending::CommandExited(c),
                (None, Some(s)) => Ending::CommandKilled(s),
                _ => Ending::Done,
            },
            (None, Some(sig)) => Ending::Signal(sig),
            (None, None) => Ending::Done,
        };
        if let Some(sig) = signal {
            end.memmon_signal = Some(crate::model::signal::name(sig));
        }
        if end.reason != EndReason::TargetExited {
            self.last_pss_read();
        }
        let mut outcome = self.finish(end, Some(exit), None)?;
        outcome.signal = signal;
        Ok(outcome)
    }

    /// A launched command's last lines reach `--mark-stdout`'s relay as the command exits, and
    /// the exit is often seen first: waits (at most 1 s: a daemonized descendant may hold the
    /// pipe open) until the relay has read the output to its end, so each marker it found is
    /// among those said to be untaken, never lost without a word.
    fn wait_for_relayed_markers(&mut self, run: &mut RunState) {
        if !self.stdout_relayed
            || run
                .queued
                .iter()
                .any(|s| matches!(s.msg, Control::OutputEnded))
        {
            return;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.control_rx.recv_timeout(left) {
                Ok(stamped) if matches!(stamped.msg, Control::OutputEnded) => break,
                Ok(stamped) => run.queued.push_back(stamped),
                Err(_) => break,
            }
        }
        self.stdout_relayed = false;
    }

    /// With `--pss`, when the recording stops while the target lives: one more row with a PSS
    /// read (on this thread: the recording is ending), unless one was asked for within the last
    /// interval, so the PSS reads cover the end and not only the start of a recording shorter
    /// than `--pss-every`.
    fn last_pss_read(&mut self) {
        if self.samples == 0 {
            return;
        }
        if self.watch.read_pss_now(self.opts.interval) {
            // Best effort: the target may have just gone, or the output failed (reported by
            // finish).
            let _ = self.tick(None);
        }
    }

    /// With `--anatomy`: the read under way is waited for, and while the target lives one more
    /// is read now (on this thread: the recording is ending), both into the table.
    fn last_anatomy(&mut self, target_lives: bool) -> Result<(), OutputError> {
        let Some(a) = &mut self.anatomy else {
            return Ok(());
        };
        // A span's end still waiting for the read under way: the recording ends first.
        if self.deferred_span_end.take().is_some() {
            a.skipped_span_ends += 1;
        }
        // While the target lives, the end anatomy has a row of its own (its RSS is now's).
        let row = if target_lives && self.samples > 0 && self.watch.is_up() {
            self.tick(None).ok().flatten()
        } else {
            None
        };
        let Some(a) = &mut self.anatomy else {
            return Ok(());
        };
        let got = match row {
            Some(s) => a.read_now(self.watch.members(), &s),
            None => a.wait(),
        };
        let skipped = a.skipped_span_ends;
        for anatomy in got {
            self.sink.anatomy(&anatomy)?;
            self.anatomies.push(anatomy);
        }
        if skipped > 0 {
            self.report.note(&format!(
                "{} got no anatomy: another read was under way at {}",
                crate::units::count(skipped, "phase or run end"),
                if skipped == 1 {
                    "its row"
                } else {
                    "their rows"
                }
            ));
        }
        Ok(())
    }

    fn end_info(&mut self, mut end: EndInfo) -> EndInfo {
        if end.cgroup.is_none() {
            let total = self.meta.mem_total_bytes;
            end.cgroup = self.watch.cgroup_mut().map(|c| c.finish(total));
        }
        end.ended_unix_ms = super::unix_ms_now();
        end.samples = self.samples;
        end.missed_ticks = self.schedule.missed();
        end.restarts = self.watch.restarts();
        end.peak_reset_failures = self.reset_failures;
        (end.marks_reset_elsewhere, end.marks_reset_elsewhere_count) =
            self.watch.take_marks_reset_elsewhere();
        end.client_walls = std::mem::take(&mut self.client_walls);
        end.pss_unread = self.watch.pss_unread();
        end.anatomy_reads = self.anatomy.as_ref().map(|a| a.cost);
        end.ledger = self.anatomy.as_mut().and_then(|a| a.stop_ledger());
        end.gpu = self.watch.gpu_mut().map(|g| g.end());
        end.exit_records = Some(self.watch.exit_records_status());
        end.exit_peak_bytes = self.watch.exit_peak();
        end.major_faults = Some(self.watch.major_faults());
        end.processes = self.watch.processes();
        end.processes_departed = self.watch.departed_count();
        if let Some(tree) = self.watch.tree() {
            // The watch, and its count, go from tree to tree across restarts.
            end.exit_records_lost = tree.exit_records_lost();
            let tail = tree.departures_after_last_sample();
            end.exit_peak_after_last_sample_bytes = tail.map(|d| d.departed_hwm).filter(|&h| h > 0);
            end.exit_hwm_sum_after_last_sample_bytes =
                tail.map(|d| d.sample.hwm_sum_bytes).filter(|&h| h > 0);
            end.target_exit_read = tree.root_exit_peak().is_some();
        }
        end
    }

    pub(super) fn finish(
        mut self,
        end: EndInfo,
        exit: Option<Ending>,
        err: Option<String>,
    ) -> Result<Outcome, RecordError> {
        let mut end = self.end_info(end);
        if err.is_some() {
            end.error = err;
        }
        let finished = self.sink.finish(&end);
        self.summary.session_end(&end);
        let mut summary = self.summary.finish(
            self.sink
                .path()
                .map(|p| p.display().to_string())
                .or(Some("stdout".into())),
            None,
        );
        if self.anatomy.is_some() {
            summary.with_anatomies(&self.anatomies);
        }
        // The NUMA table as `summary` reads it (a table that cannot be read back: none).
        if let Some(t) = self
            .numa
            .as_ref()
            .and_then(|n| crate::format::numa::read(n.path()).ok())
        {
            summary.with_numa(&t.nodes, &t.rows);
        }
        if let Err(e) = finished {
            let kept = self
                .sink
                .kept(self.samples, matches!(e, OutputError::Removed(_)));
            return Err(RecordError::Stopped {
                kept,
                source: Box::new(RecordError::Output(e)),
            });
        }
        self.observer.on_end(&summary);
        Ok(Outcome {
            summary,
            exit: exit.unwrap_or(Ending::Done),
            output: self.sink.path().map(|p| p.to_path_buf()),
            signal: None,
        })
    }

    /// Ends after a failure (a full disk, a vanished directory, a closed pipe): keeps what was
    /// written, and for a launched command waits for it to finish.
    fn fail(mut self, err: RecordError, mut end: EndInfo) -> Result<Outcome, RecordError> {
        let broken_pipe = crate::error::caused_by(&err, ErrorKind::BrokenPipe);
        if broken_pipe {
            end.reason = EndReason::OutputClosed;
            if let Some(l) = &mut self.launched {
                l.reap(&mut end);
            }
            let outcome = self.finish(end, Some(Ending::Done), None);
            return outcome.or(Ok(Outcome {
                summary: SummaryBuilder::new().finish(None, None),
                exit: Ending::Done,
                output: None,
                signal: None,
            }));
        }
        end.reason = EndReason::Error;
        let msg = crate::error::chain(&err);
        if let Some(l) = &mut self.launched {
            self.report.error(&format!(
                "{msg}; recording stopped, waiting for the command to finish"
            ));
            l.reap(&mut end);
        }
        // Best effort: record the end (this may fail too on a full disk).
        let end = self.end_info(end);
        let removed = matches!(err, RecordError::Output(OutputError::Removed(_)));
        let kept = if removed {
            self.sink.kept(self.samples, true)
        } else {
            let _ = self.sink.finish(&EndInfo {
                error: Some(msg.clone()),
                ..end
            });
            format!("recording stopped; {}", self.sink.kept(self.samples, false))
        };
        let kept = if removed {
            format!("recording stopped; {kept}")
        } else {
            kept
        };
        Err(RecordError::Stopped {
            kept,
            source: Box::new(err),
        })
    }
}
