//! Runs a sweep: the bench once per configuration (`bench::sweep`), each with its `{NAME}`s
//! replaced, against a daemon memmon starts for it (`--daemon`, `started.rs`) or the one given.
//! A configuration whose daemon never becomes ready, dies, or whose client fails is given its
//! reason and the sweep goes on; a stop signal ends it.

use super::started::{DaemonOptions, Ready, Started};
use super::{run, say, Stop};
use crate::bench::sweep::{Configuration, DaemonLife};
use crate::bench::{BenchOptions, BenchReport};
use crate::sampler::target::TargetSpec;

/// One configuration as it ran.
pub struct ConfigRun {
    pub configuration: Configuration,
    /// Its bench, finished (`BenchReport::finish`); `None` where none ran (its daemon never
    /// became ready, or memmon could not start the bench).
    pub report: Option<BenchReport>,
    /// Why it failed, if it did (its report, if any, holds the runs measured before).
    pub failed: Option<String>,
    pub daemon: Option<DaemonLife>,
}

/// Every configuration's run, and the signal that stopped the sweep early, if one did.
pub struct SweepDone {
    pub runs: Vec<ConfigRun>,
    pub signal: Option<i32>,
}

/// Runs `configurations` in order; `each` is told of each as it ends (to print its table).
pub fn sweep(
    opts: &BenchOptions,
    configurations: &[Configuration],
    daemon: Option<&DaemonOptions>,
    mut each: impl FnMut(&ConfigRun),
) -> SweepDone {
    let mut runs = Vec::new();
    // A stop signal during a daemon's start or between two benches ends the sweep too.
    let _ = crate::sys::signals::install();
    for (i, c) in configurations.iter().enumerate() {
        if let Some(a) = crate::sys::signals::take().first() {
            return SweepDone {
                runs,
                signal: Some(a.sig),
            };
        }
        say(
            opts,
            format!(
                "bench: configuration {}/{}: {}",
                i + 1,
                configurations.len(),
                c.label()
            ),
        );
        let (r, signal) = one(opts, c, daemon);
        each(&r);
        runs.push(r);
        if signal.is_some() {
            return SweepDone { runs, signal };
        }
    }
    SweepDone { runs, signal: None }
}

/// The bench of configuration `c`, its daemon started and stopped around it.
fn one(
    opts: &BenchOptions,
    c: &Configuration,
    daemon: Option<&DaemonOptions>,
) -> (ConfigRun, Option<i32>) {
    let mut o = opts.clone();
    o.client = opts.client.iter().map(|a| c.substitute(a)).collect();
    o.prepare = opts.prepare.as_deref().map(|p| c.substitute(p));
    o.output = opts.output.as_ref().map(|d| c.output(d));
    let run_of = |report, failed, daemon| ConfigRun {
        configuration: c.clone(),
        report,
        failed,
        daemon,
    };
    let mut started = None;
    if let Some(d) = daemon {
        let ready = match &d.ready {
            Ready::Pidfile(p) => Ready::Pidfile(c.substitute(&p.to_string_lossy()).into()),
            Ready::Socket(p) => Ready::Socket(c.substitute(&p.to_string_lossy()).into()),
            Ready::Log(re) => Ready::Log(re.clone()),
        };
        let mut notes = Vec::new();
        let this = DaemonOptions {
            command: c.substitute(&d.command),
            ready,
            ..d.clone()
        };
        match Started::start(
            &this,
            &crate::probe::cgroup::manage::own_cgroup_name(),
            &opts.cgroupfs,
            &opts.procfs,
            &mut notes,
        ) {
            Ok(s) => {
                notes.iter().for_each(|n| say(opts, format!("bench: {n}")));
                say(
                    opts,
                    format!(
                        "bench: the daemon (PID {}) was ready after {}{}",
                        s.pid,
                        crate::units::fmt_seconds(s.life.ready_s.unwrap_or(0.0)),
                        s.life
                            .cgroup
                            .as_ref()
                            .map(|g| format!(", in the cgroup {g}"))
                            .unwrap_or_default()
                    ),
                );
                o.target = Some(TargetSpec::Pid(s.pid));
                o.wait = false;
                o.cgroup =
                    s.life.cgroup.as_ref().and(s.cgroup_dir()).map(|d| {
                        crate::sampler::cgroup::CgroupChoice::Path(d.display().to_string())
                    });
                started = Some(s);
            }
            Err((why, signal)) => return (run_of(None, Some(why), None), signal),
        }
    }
    let done = run(&o);
    let life = started.as_mut().map(|s| {
        s.stop();
        say(
            opts,
            format!(
                "bench: the daemon was stopped{}",
                match (s.life.stopped_by, s.life.stop_s) {
                    (Some("exited"), _) => " (it had exited)".to_string(),
                    (Some(by), Some(t)) => format!(" by {by} in {}", crate::units::fmt_seconds(t)),
                    _ => String::new(),
                }
            ),
        );
        s.life.clone()
    });
    match done {
        Ok(mut d) => {
            d.report.finish();
            let (failed, signal) = match d.stop {
                None => (None, None),
                Some(Stop::Signal(sig)) => (
                    Some(format!(
                        "interrupted by {}",
                        crate::model::signal::name(sig)
                    )),
                    Some(sig),
                ),
                Some(Stop::Failed(m)) => (Some(m), None),
                Some(Stop::Error(e)) => (Some(crate::error::chain(&e)), None),
            };
            (run_of(Some(d.report), failed, life), signal)
        }
        Err(e) => (run_of(None, Some(crate::error::chain(&e)), life), None),
    }
}
