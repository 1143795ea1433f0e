//! How a recording is set up, each decision in a function of its own: which process is watched
//! (found, waited for, or launched), which GPU and cgroup sources are read, where the samples
//! go, and the metadata that says all of it. Nothing is created before the target is known (a
//! wrong PID leaves no file), and nothing is left when the command cannot be launched.

use super::{Control, ControlHandle, RecordObserver, RecordOptions, Recorder};
use crate::analysis::SummaryBuilder;
use crate::format::anatomy::AnatomyWriter;
use crate::format::meta::{ColumnMeta, Meta, TargetMeta, SCHEMA_VERSION};
use crate::format::{Format, Output, OutputError};
use crate::model::sample::COLUMNS;
use crate::probe::cgroup::MemCgroup;
use crate::probe::taskstats::ExitWatch;
use crate::probe::{ProcFs, ProcHandle};
use crate::reporter::Reporter;
use crate::sampler::anatomy::Anatomies;
use crate::sampler::cgroup::{CgroupChoice, CgroupSource};
use crate::sampler::error::RecordError;
use crate::sampler::gpu::GpuTracker;
use crate::sampler::launch::Launched;
use crate::sampler::numa::NumaSource;
use crate::sampler::psi::PsiSource;
use crate::sampler::schedule::Schedule;
use crate::sampler::sink::{SampleSink, WithAnatomy};
use crate::sampler::swap::SwapSource;
use crate::sampler::target::{self, TargetError, TargetSpec};
use crate::sampler::watch::{ExitRecords, Watch, WatchOptions};
use crate::sys::{signals, WaitSet, Waker};
use crate::units::{fmt_bytes, fmt_interval};
use std::sync::{mpsc, Arc};
use std::time::Instant;

impl Recorder {
    /// Finds or launches the target, creates the output (`opts.output`, a file or stdout) and
    /// writes the metadata; then tells `observer` where the data goes and what is watched
    /// (`RecordStart`). Notes and warnings go to `report`.
    pub fn start(
        opts: RecordOptions,
        report: Reporter,
        observer: Box<dyn RecordObserver + Send>,
    ) -> Result<Recorder, RecordError> {
        Recorder::start_with(opts, file_sink, report, observer)
    }

    /// [`Recorder::start`] with the samples going to the sink `make_sink` makes, once the
    /// target is found (a sink that creates a file creates none for a wrong PID).
    pub fn start_with(
        opts: RecordOptions,
        make_sink: impl FnOnce(&RecordOptions) -> Result<Box<dyn SampleSink>, OutputError>,
        report: Reporter,
        observer: Box<dyn RecordObserver + Send>,
    ) -> Result<Recorder, RecordError> {
        signals::install().map_err(RecordError::system(
            "cannot install the handlers of the stop signals",
        ))?;
        // Attach: find the target before creating anything, so a wrong PID leaves no file.
        let attached = match &opts.target {
            TargetSpec::Command(_) => None,
            spec => Some(find_target(&opts, spec, &report)?),
        };
        if let Some(r) = &attached {
            keep_private_for(&opts, r.handle.pid, &report);
        }
        // The GPU source before the output: `--gpu` without a driver leaves no file.
        let gpu = open_gpu(&opts, &report)?;
        let mut sink = make_sink(&opts)?;
        let cgroup = match &attached {
            Some(r) => attached_cgroup(&opts, &r.handle),
            None => launched_cgroup(&opts, &report),
        }
        .inspect_err(|_| sink.discard())?;
        let exits = open_exit_records(&opts, attached.is_none(), &report);
        // The ledger before the command is launched: its first mapping is in it.
        let (ledger, ledger_off) = open_ledger(
            &opts,
            sink.as_ref(),
            attached.is_none(),
            cgroup
                .as_ref()
                .filter(|c| c.holds_tree())
                .map(|c| c.cgroup().dir.as_path()),
            &report,
        );
        let (control, control_rx) = control_channel()?;
        let back = control.clone();
        let wake: Box<dyn Fn() + Send> = Box::new(move || {
            back.send(Control::PssDone);
        });
        let wopts = WatchOptions {
            procfs: opts.procfs.clone(),
            children: opts.children,
            pss: opts.pss.clone(),
            root_by_statm: false,
        };
        let mut watch = Watch::new(
            opts.target.clone(),
            wopts,
            exits,
            Some(wake),
            report.clone(),
        )
        .map_err(RecordError::system("cannot start the PSS thread"))?;
        let launched = match attached {
            Some(r) => {
                watch.follow(r.handle, r.pidfile);
                None
            }
            None => {
                let l = launch(&opts, &mut watch, sink.as_mut(), cgroup.as_ref())?;
                Some(l)
            }
        };
        let tree = watch.tree().expect("a followed target has a tree");
        let root = tree.root().expect("a followed target has a root");
        if let Some(l) = &ledger {
            // The tree as found: the ledger follows its forks from here on.
            let pids = std::iter::once(root.pid).chain(watch.members().map(|(h, _)| h.pid));
            l.handle().members(pids.collect());
        }
        let pidfd = super::open_pidfd(root);
        let mut meta = build_meta(&opts, root, cgroup.as_ref());
        if opts.children {
            // How children are found, second: the tree knows whether fork events came.
            meta.sources.insert(1, tree.children_source().into());
        }
        if let Some(g) = &gpu {
            meta.sources.push(gpu_source(g));
            meta.gpu = Some(g.meta());
        }
        meta.exit_records = Some(watch.exit_records_status());
        // Anatomies only where the sink keeps them (a file's side table, a bench's runs).
        let anatomy = match (&opts.anatomy, sink.keeps_anatomies()) {
            (Some(a), true) => {
                meta.anatomy = sink
                    .anatomy_path()
                    .map(|path| crate::format::meta::AnatomyMeta {
                        file: path
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                        rise: a.rise,
                        gap_s: a.gap.as_secs_f64(),
                        smaps: a.smaps.is_some(),
                        smaps_max_rss_bytes: a.smaps.as_ref().map(|g| g.max_rss),
                        ledger: ledger.as_ref().map(|l| l.how.clone()),
                        ledger_off: ledger_off.clone(),
                    });
                meta.sources.push(anatomy_source(a));
                let back = control.clone();
                let wake = move || {
                    back.send(Control::AnatomyDone);
                };
                Some(
                    Anatomies::start(a.clone(), wake, ledger)
                        .map_err(RecordError::system("cannot start the anatomy thread"))?,
                )
            }
            _ => None,
        };
        let mut cgroup = cgroup;
        if let Some(c) = &mut cgroup {
            // The baseline of the counters (OOM kills during the recording are those after it).
            c.tick();
            c.watch_membership(opts.cgroupfs.clone());
        }
        let (psi, swap, numa) =
            health_sources(&opts, cgroup.as_ref(), sink.as_ref(), &mut meta, &report);
        let mut watch = watch
            .with_gpu(gpu)
            .with_cgroup(cgroup)
            .with_psi(Some(psi))
            .with_swap(swap);
        let mut summary = SummaryBuilder::new();
        summary.session(&meta);
        let start = Instant::now();
        watch.set_start(start);
        let mut rec = Recorder {
            schedule: Schedule::new(start, opts.interval),
            opts,
            sink,
            watch,
            pidfd,
            sleep: WaitSet::new()
                .map_err(RecordError::system("cannot make the sleep's epoll set"))?,
            launched,
            control_rx,
            control,
            summary,
            samples: 0,
            reset_failures: 0,
            cgroup_reset_failures: 0,
            client_walls: Vec::new(),
            stdout_relayed: false,
            meta,
            observer,
            report,
            anatomy,
            anatomies: Vec::new(),
            open_phase: None,
            span_end_asked: false,
            row_waited: false,
            restart_row_at: None,
            deferred_span_end: None,
            held_replies: Vec::new(),
            numa,
        };
        rec.sink.start(&rec.meta)?;
        // What was done to the output (a repaired `--append`, an orphan sidecar replaced), even
        // with -q.
        for note in &rec.sink.take_notes() {
            rec.report.notice(note);
        }
        rec.announce();
        Ok(rec)
    }
}

/// The channel other threads send control messages on, and the eventfd that wakes the
/// recorder for each.
/// The memory health sources beside the tree (`sampler/psi.rs`, `swap.rs`, `numa.rs`): the
/// machine's pressure stall and the cgroup's where it is a v2 one; swap, the cgroup's own where
/// it counts it, else the machine's; the cgroup's memory per NUMA node on a machine with more
/// than one. Each says in the metadata's sources what it reads, or why it reads nothing.
fn health_sources(
    opts: &RecordOptions,
    cgroup: Option<&CgroupSource>,
    sink: &dyn SampleSink,
    meta: &mut Meta,
    report: &Reporter,
) -> (PsiSource, Option<SwapSource>, Option<NumaSource>) {
    // Memory pressure: the machine's, and the cgroup's own where it is a v2 one.
    let cg_v2 = cgroup
        .as_ref()
        .map(|c| c.cgroup())
        .filter(|cg| cg.version == crate::probe::cgroup::CgroupVersion::V2)
        .map(|cg| cg.dir.clone());
    let psi = PsiSource::open(opts.procfs.root(), cg_v2.as_deref());
    if let Some(why) = &psi.system_unavailable {
        report.note(&format!(
            "not reading memory pressure: {why}; the psi_memory_* columns stay empty"
        ));
    }
    meta.sources.push(psi.source_line());
    // Swap: the cgroup's own where it counts it (v2 pswpin), else the machine's.
    let swap = if cgroup.is_some_and(|c| c.counts_swap()) {
        meta.sources
            .push("the cgroup's swap from its memory.stat (pswpin, pswpout)".into());
        None
    } else {
        match SwapSource::start(opts.procfs.root()) {
            Ok(w) => {
                meta.sources.push(w.source_line());
                Some(w)
            }
            Err(e) => {
                report.note(&format!(
                    "not reading swap: {e}; the swap_*_pages columns stay empty"
                ));
                meta.sources.push(format!("swap not read: {e}"));
                None
            }
        }
    };
    // The cgroup's memory per NUMA node, where the machine has more than one.
    let numa = match NumaSource::start(
        std::path::Path::new("/sys"),
        cgroup.map(|c| c.cgroup()),
        opts.output.file(),
        opts.force,
        opts.append,
    ) {
        Ok(Some(n)) => {
            meta.sources.push(format!(
                "the cgroup's memory per NUMA node from {} at every row, into {}",
                n.meta().source,
                n.meta().file
            ));
            meta.numa = Some(n.meta());
            Some(n)
        }
        Ok(None) => None,
        Err(why) => {
            // Said to a user who chose the output (`record`); a bench's recorders, whose
            // samples go to the bench, only keep it in the sources.
            if opts.output.file().is_some() || sink.on_stdout() {
                report.note(&format!("not recording memory per NUMA node: {why}"));
            }
            meta.sources
                .push(format!("memory per NUMA node not read: {why}"));
            meta.numa_not_read = Some(why);
            None
        }
    };
    (psi, swap, numa)
}

fn control_channel() -> Result<(ControlHandle, mpsc::Receiver<super::Stamped>), RecordError> {
    let (tx, control_rx) = mpsc::channel();
    let wake = Arc::new(Waker::new().map_err(RecordError::system("cannot create an eventfd"))?);
    Ok((ControlHandle { tx, wake }, control_rx))
}

/// The recording's file, or stdout (`-o`, `--format`, `--force`, `--append`): `record`'s sink.
pub fn file_sink(opts: &RecordOptions) -> Result<Box<dyn SampleSink>, OutputError> {
    let format = opts
        .format
        .or_else(|| opts.output.file().map(Format::from_path))
        .unwrap_or(Format::Csv);
    // The anatomy table's name is checked before the recording is created: a refusal leaves
    // nothing behind.
    let anatomy = opts.anatomy.as_ref().and(opts.output.file());
    if let Some(p) = anatomy {
        AnatomyWriter::check(p, opts.force, opts.append)?;
    }
    let mut out = Output::create(opts.output.file(), format, opts.force, opts.append)?;
    match anatomy {
        Some(p) => match AnatomyWriter::create(p, opts.force, opts.append) {
            Ok(table) => Ok(Box::new(WithAnatomy {
                inner: Box::new(out),
                table,
            })),
            Err(e) => {
                out.discard();
                Err(e)
            }
        },
        None => Ok(Box::new(out)),
    }
}

/// The ledger of mappings (`--anatomy`, unless `--no-ledger`), where the sink keeps anatomies:
/// started, or why not (said once, and written in the metadata). A launched command joins it
/// as memmon's child.
fn open_ledger(
    opts: &RecordOptions,
    sink: &dyn SampleSink,
    launching: bool,
    cgroup: Option<&std::path::Path>,
    report: &Reporter,
) -> (Option<crate::sampler::ledger::LedgerThread>, Option<String>) {
    let Some(calls) = opts.anatomy.as_ref().and_then(|a| a.ledger) else {
        return (None, None);
    };
    if !sink.keeps_anatomies() {
        return (None, None);
    }
    let launcher = launching.then(|| std::process::id() as i32);
    match crate::sampler::ledger::LedgerThread::start(calls, launcher, cgroup) {
        Ok(l) => (Some(l), None),
        Err(e) => {
            report.note(&format!(
                "the ledger of mappings is off: {e}; anatomies are read without the stacks that made the mappings"
            ));
            (None, Some(e.to_string()))
        }
    }
}

/// The metadata's line for the anatomies (`--anatomy`).
fn anatomy_source(a: &crate::sampler::anatomy::AnatomyOptions) -> String {
    format!(
        "/proc/PID/maps{} on a thread of its own: at the first row, at each phase's and run's end, at the end, and each stretch's highest (read at each new RSS high {}% above the last one read in it, at most every {})",
        match &a.smaps {
            Some(g) => format!(
                " and /proc/PID/smaps (resident sizes; not of processes over {})",
                fmt_bytes(g.max_rss),
            ),
            None => " (no smaps: virtual sizes)".into(),
        },
        (a.rise * 10_000.0).round() / 100.0,
        fmt_interval(a.gap)
    )
}

/// The GPU source (`--gpu`, `--no-gpu`): `None` where none is read; a usage error when `--gpu`
/// asks for one that is not there.
fn open_gpu(opts: &RecordOptions, report: &Reporter) -> Result<Option<GpuTracker>, RecordError> {
    match crate::sampler::gpu::open(&opts.gpu) {
        Ok((gpu, note)) => {
            if let Some(note) = note {
                report.note(&note);
            }
            Ok(gpu)
        }
        Err(e) => Err(RecordError::Gpu(e)),
    }
}

/// The metadata's line for the GPU source.
fn gpu_source(g: &GpuTracker) -> String {
    format!(
        "GPU memory through {} ({} GPU(s)) every {}, on its own thread",
        if g.poller.source == "nvml" {
            "NVML (libnvidia-ml.so.1)"
        } else {
            "the tests' fake GPU source"
        },
        g.poller.devices.len(),
        fmt_interval(g.poller.every())
    )
}

/// The kernel's exit records, opened from before a launch: a command that ends at once
/// (before its first row) still has its record. Until the tree is known they are kept for
/// memmon's children (the command, and the orphans memmon adopts).
fn open_exit_records(opts: &RecordOptions, launching: bool, report: &Reporter) -> ExitRecords {
    if !opts.exit_records {
        return ExitRecords::Off;
    }
    match ExitWatch::open_online() {
        Ok(mut w) => {
            if launching {
                // Refused, no filter is attached: every record comes and is sorted out at the
                // tick (the tree's own filter is tried once the tree is known).
                let _refused = w.keep_only(&[std::process::id()]);
            }
            ExitRecords::Open(w)
        }
        Err(e) => {
            report.note(&format!("note: not reading exit records: {e}; a process's peak is exact up to its last sample before it exits"));
            ExitRecords::Refused(e.to_string())
        }
    }
}

/// Launches the command (into memmon's own cgroup, when there is one) and has `watch` follow
/// it once exec has loaded its program; nothing is left of the output when it cannot start.
fn launch(
    opts: &RecordOptions,
    watch: &mut Watch,
    sink: &mut dyn SampleSink,
    cgroup: Option<&CgroupSource>,
) -> Result<Launched, RecordError> {
    let TargetSpec::Command(args) = &opts.target else {
        unreachable!("only a command is launched")
    };
    let join = cgroup.and_then(|c| c.procs_fd());
    let launched = Launched::start(args, &opts.env, sink.on_stdout(), opts.capture_stdout, join)
        .inspect_err(|_| {
            // Nothing was recorded: leave no empty file behind (unless appending).
            sink.discard();
        })?;
    let pid = launched.pid;
    let h = opts
        .procfs
        .open(pid)
        .map_err(|source| RecordError::LaunchedUnreadable { pid, source })?;
    launched.wait_exec(&h);
    watch.follow(h, None);
    // memmon is the command's subreaper (set in `launch`): its orphans come to memmon.
    if let (Ok(me), Some(tree)) = (
        opts.procfs.open(std::process::id() as i32),
        watch.tree_mut(),
    ) {
        tree.adopt_orphans_of(me);
    }
    Ok(launched)
}

/// Finds the process to attach to; with `--wait`, waits for it to appear (a stop signal ends
/// the wait). The error's exit code says whether the target was wrong (usage) or absent.
/// Makes memmon's files 0600 (`output::keep_private`) when the attached target `pid` runs as
/// another user than memmon: they will hold its mapping paths, function names and command line,
/// which the kernel shows that user and root alone.
fn keep_private_for(opts: &RecordOptions, pid: i32, report: &Reporter) {
    use std::os::unix::fs::MetadataExt;
    // /proc/PID belongs to the process's effective user (root where it is not dumpable).
    let Ok(owner) = std::fs::metadata(opts.procfs.root().join(pid.to_string())).map(|m| m.uid())
    else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    if owner != me {
        crate::output::keep_private();
        report.detail(&format!(
            "the target runs as user {owner}, not as memmon (user {me}): the files memmon writes are readable by their owner alone (0600)"
        ));
    }
}

fn find_target(
    opts: &RecordOptions,
    spec: &TargetSpec,
    report: &Reporter,
) -> Result<target::Resolved, RecordError> {
    let mut announced = false;
    let mut look = target::LookAgain::new();
    loop {
        match target::resolve(&opts.procfs, spec) {
            Ok(mut r) => {
                if let Some(note) = r.note.take() {
                    report.note(&note);
                }
                return Ok(r);
            }
            // An empty pidfile is one being written, and one holding no PID one left behind
            // or overwritten: waited on like a missing or stale one.
            Err(
                TargetError::NoMatch(_)
                | TargetError::PidfileStale(..)
                | TargetError::PidfileEmpty(..)
                | TargetError::PidfileGarbage(..)
                | TargetError::PidfileUnreadable(..),
            ) if opts.wait => {
                if !announced {
                    report.note(&format!(
                        "waiting for the target {} to appear (--wait)",
                        spec.spec()
                    ));
                    announced = true;
                }
                if let Some(a) = signals::take().first() {
                    return Err(RecordError::Interrupted(a.sig));
                }
                signals::sleep(look.pause());
            }
            Err(e) => return Err(RecordError::Target(e)),
        }
    }
}

fn build_meta(opts: &RecordOptions, h: &ProcHandle, cgroup: Option<&CgroupSource>) -> Meta {
    Meta {
        format: "memmon-recording".into(),
        schema_version: SCHEMA_VERSION,
        memmon_version: env!("CARGO_PKG_VERSION").into(),
        host: hostname(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        page_size_bytes: ProcFs::page_size(),
        started_unix_ms: super::unix_ms_now(),
        interval_s: opts.interval.as_secs_f64(),
        interval: fmt_interval(opts.interval),
        target: TargetMeta {
            mode: opts.target.mode().into(),
            spec: crate::format::meta::bounded_text(opts.target.spec()),
            pid: h.pid,
            start_time_ticks: h.start_time,
            comm: h.comm.clone(),
            cmdline: crate::format::meta::bounded_text(h.cmdline()),
        },
        children: opts.children,
        phase_peaks: opts.phase_peaks,
        peak_reset_at_start: opts.reset_peak && !matches!(opts.target, TargetSpec::Command(_)),
        run_peaks: opts.run_peaks,
        exit_records: None,
        cgroup: cgroup.map(|c| crate::format::meta::CgroupMeta {
            path: c.cgroup().path.clone(),
            version: c.cgroup().version,
            own: c.is_own(),
            holds_tree: c.holds_tree(),
            not_the_tree: c.not_the_tree().map(str::to_string),
        }),
        online_cpus: Some(crate::probe::proc::online_cpus()),
        mem_total_bytes: crate::sampler::cgroup::mem_total_bytes(),
        sources: sources(opts, cgroup),
        columns: COLUMNS
            .iter()
            .map(|c| ColumnMeta {
                name: c.name.into(),
                unit: c.unit.into(),
            })
            .collect(),
        gpu: None,
        anatomy: None,
        numa: None,
        numa_not_read: None,
        end: None,
        earlier_sessions: Vec::new(),
    }
}

/// What the recording reads, and how often: the metadata's `sources` (`--verbose` shows them).
fn sources(opts: &RecordOptions, cgroup: Option<&CgroupSource>) -> Vec<String> {
    let mut sources = vec!["/proc/PID/status (VmRSS, RssAnon, RssFile, RssShmem, VmSwap, VmLck, VmPin, VmHWM) every tick".to_string()];
    // How children are found comes second, once the tree says (`Recorder::start_with`).
    if let Some(p) = &opts.pss {
        sources.push(format!(
            "/proc/PID/smaps_rollup (Pss) every {}, skipping processes over {}{}",
            fmt_interval(p.every),
            fmt_bytes(p.max_rss),
            if p.force {
                " unless forced (forced)"
            } else {
                ""
            }
        ));
    }
    if matches!(opts.target, TargetSpec::Command(_)) {
        sources.push("wait4 ru_maxrss of the launched command at its exit".into());
    }
    if let Some(c) = cgroup {
        let cg = c.cgroup();
        let v1 = cg.version == crate::probe::cgroup::CgroupVersion::V1;
        sources.push(format!(
            "{} {} ({}{}): {} every tick and at the end",
            cg.version.name(),
            cg.path,
            cg.dir.display(),
            if c.is_own() {
                ", memmon's own, made for the launched command and removed after"
            } else {
                ""
            },
            if v1 {
                "memory.usage_in_bytes, memory.stat, memory.limit_in_bytes, memory.max_usage_in_bytes, memory.failcnt, memory.oom_control"
            } else {
                "memory.current, memory.stat, memory.max, memory.peak, memory.events"
            }
        ));
    }
    sources
}

/// The cgroup of an attached target to read: `--cgroup PATH`, or with `--cgroup auto` its own
/// memory cgroup when that holds only its tree (else a usage error saying why).
fn attached_cgroup(
    opts: &RecordOptions,
    h: &ProcHandle,
) -> Result<Option<CgroupSource>, RecordError> {
    let auto = |why: String, advice: Option<String>| RecordError::CgroupAuto { why, advice };
    match &opts.cgroup {
        None => Ok(None),
        Some(CgroupChoice::Path(p)) => {
            let cg = opts.cgroupfs.at(p).map_err(RecordError::Cgroup)?;
            // Its peak is the tree's when it holds the tree and nothing else (or when the
            // cgroup is itself the target: `record --cgroup PATH` alone).
            let alone = if matches!(opts.target, TargetSpec::Cgroup(_)) {
                Ok(())
            } else if cg.is_root() {
                Err("it is the root cgroup, which holds the whole machine".to_string())
            } else if !cg.procs().is_ok_and(|p| p.contains(&h.pid)) {
                Err(format!("PID {} is not in it", h.pid))
            } else {
                holds_alone(opts, h, &cg)
            };
            Ok(Some(CgroupSource::existing(cg, alone)))
        }
        Some(CgroupChoice::AutoIfAlone) => {
            let Some(cg) = opts
                .cgroupfs
                .of_pid(opts.procfs.root(), h.pid)
                .map(|cg| cg.memory_domain())
                .filter(|cg| !cg.is_root())
            else {
                return Ok(None);
            };
            match holds_alone(opts, h, &cg) {
                Ok(()) => Ok(Some(CgroupSource::existing(cg, Ok(())))),
                // Memory charged elsewhere is worth saying (the cgroup looks like the daemon's
                // own); other processes in it are the common case of no cgroup of its own.
                Err(why) if why.contains("charged") => {
                    Ok(Some(CgroupSource::existing(cg, Err(why))))
                }
                Err(_) => Ok(None),
            }
        }
        Some(CgroupChoice::Auto) => {
            let cg = opts
                .cgroupfs
                .of_pid(opts.procfs.root(), h.pid)
                .map(|cg| cg.memory_domain())
                .ok_or_else(|| {
                    auto(
                        format!("the memory cgroup of PID {} was not found", h.pid),
                        None,
                    )
                })?;
            if cg.is_root() {
                return Err(auto(
                    format!(
                        "PID {} is in the root cgroup, which holds the whole machine",
                        h.pid
                    ),
                    Some(
                        "give --cgroup PATH, or run the target in a cgroup of its own, e.g. systemd-run --scope"
                            .into(),
                    ),
                ));
            }
            if let Some(other) = cg
                .foreign_process(&opts.procfs, h.pid)
                .map_err(RecordError::Cgroup)?
            {
                return Err(auto(
                    format!(
                        "the cgroup {} of PID {} also holds PID {other}, which is not in its tree",
                        cg.path, h.pid
                    ),
                    Some(format!(
                        "give --cgroup {} to record the whole cgroup anyway",
                        cg.path
                    )),
                ));
            }
            if let Err(why) = holds_alone(opts, h, &cg) {
                return Err(auto(
                    format!("the cgroup {} of PID {}: {why}", cg.path, h.pid),
                    Some(format!(
                        "give --cgroup {} to record the cgroup anyway",
                        cg.path
                    )),
                ));
            }
            Ok(Some(CgroupSource::existing(cg, Ok(()))))
        }
    }
}

/// Whether an attached target's cgroup holds its tree alone, so that the cgroup's peak is the
/// tree's: no process in it outside the tree, and the target's anonymous memory charged to it
/// (memory touched before the target moved in stays charged to its old cgroup).
fn holds_alone(opts: &RecordOptions, h: &ProcHandle, cg: &MemCgroup) -> Result<(), String> {
    match cg.foreign_process(&opts.procfs, h.pid) {
        Ok(None) => {}
        Ok(Some(other)) => return Err(format!("it also holds PID {other}, outside the tree")),
        Err(e) => return Err(e.to_string()),
    }
    let anon = h
        .read_status(&mut Vec::new())
        .map_err(|e| e.to_string())?
        .anon;
    // Both counters move in per-CPU batches, and the target may allocate between the reads.
    match cg.uncharged_anon(anon, crate::probe::proc::local_batching_bound_bytes()) {
        Ok(None) => Ok(()),
        Ok(Some(missing)) => Err(format!(
            "{} of PID {}'s {} of anonymous memory is charged to another cgroup (touched before it moved in; cgroups do not move charges), so the cgroup's peak would miss it",
            fmt_bytes(missing),
            h.pid,
            fmt_bytes(anon),
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// The cgroup of a command memmon launches: `--cgroup PATH` (read, not joined), or a cgroup of
/// memmon's own (`--own-cgroup`, `--cgroup auto`, or by default where memmon may make one).
fn launched_cgroup(
    opts: &RecordOptions,
    report: &Reporter,
) -> Result<Option<CgroupSource>, RecordError> {
    if let Some(CgroupChoice::Path(p)) = &opts.cgroup {
        let cg = opts.cgroupfs.at(p).map_err(RecordError::Cgroup)?;
        // Read, not joined: the command's tree is not in it.
        return Ok(Some(CgroupSource::existing(
            cg,
            Err("it is read, not joined: the command runs outside it".into()),
        )));
    }
    let wanted = opts.own_cgroup.or(opts.cgroup.as_ref().map(|_| true));
    if wanted == Some(false) {
        return Ok(None);
    }
    static SWEPT: std::sync::Once = std::sync::Once::new();
    // memmon's own cgroup: the command's goes beneath it (or beside it, in v2), under every
    // limit memmon runs under.
    let mine = opts
        .cgroupfs
        .of_pid(opts.procfs.root(), std::process::id() as i32);
    let mut first = false;
    SWEPT.call_once(|| first = true);
    if first && crate::probe::cgroup::manage::in_initial_pid_namespace() {
        // Once a process, even with --quiet: it may have killed processes.
        let swept = opts.cgroupfs.sweep_stale_own(mine.as_ref());
        if let Some(note) = crate::sampler::cgroup::swept_note(&swept) {
            report.notice(&note);
        }
    }
    let name = crate::probe::cgroup::manage::own_cgroup_name();
    match opts.cgroupfs.create_own(&name, mine.as_ref()) {
        Ok(own) => Ok(Some(CgroupSource::own(own))),
        Err(e) if wanted == Some(true) => Err(RecordError::OwnCgroup(e)),
        Err(e) => {
            // The command runs in memmon's own cgroup: its limit, its OOM kills, its pressure
            // and its memory per NUMA node are the command's too, though its peak is not the
            // tree's alone (memmon is in it, and whatever else is).
            let shared = mine
                .map(|m| m.memory_domain())
                .filter(|m| !m.is_root() && m.dir.join(memory_file(m)).exists());
            match shared {
                Some(m) => {
                    report.note(&format!(
                        "no cgroup of its own for the command ({e}): the tree's peak is bounded, not exact; reading memmon's cgroup {} for its limit, OOM kills and pressure",
                        m.path
                    ));
                    let why = format!(
                        "it is memmon's own cgroup, which the command shares with memmon (no cgroup of the command's own: {e})"
                    );
                    Ok(Some(CgroupSource::existing(m, Err(why))))
                }
                None => {
                    report.note(&format!(
                        "no cgroup of its own for the command ({e}): the tree's peak is bounded, not exact"
                    ));
                    Ok(None)
                }
            }
        }
    }
}

/// The file every memory cgroup of `cg`'s version has (its usage).
fn memory_file(cg: &MemCgroup) -> &'static str {
    match cg.version {
        crate::probe::cgroup::CgroupVersion::V1 => "memory.usage_in_bytes",
        crate::probe::cgroup::CgroupVersion::V2 => "memory.current",
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
