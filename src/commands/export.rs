//! `memmon export`: the targets from --target and --config, the sampler on a thread of its
//! own, the HTTP server on this one.

use super::exit::ExitCode;
use super::stderr::errln;
use super::usage;
use crate::cli::ExportArgs;
use anyhow::Context;
use memmon::export::{self, server, ExportOptions, Sampler};
use memmon::probe::cgroup::CgroupFs;
use memmon::probe::ProcFs;
use std::net::TcpListener;

pub fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let mut targets = Vec::new();
    if let Some(path) = &args.config {
        targets.extend(export::read_config(path)?);
    }
    targets.extend(args.targets.iter().cloned());
    export::check_targets(&targets)?;
    if args.window < args.interval {
        return Err(usage(format!(
            "--window {} is shorter than -i {}: the window holds at least one sample",
            memmon::units::fmt_interval(args.window),
            memmon::units::fmt_interval(args.interval)
        )));
    }
    let addr = args.listen;
    let listener =
        TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr} (--listen)"))?;
    let bound = listener.local_addr()?;
    if !bound.ip().is_loopback() {
        // Said even with --quiet: it is about who can read the endpoint, not about targets.
        errln!(
            "memmon export: warning: listening on {bound}, beyond loopback: /metrics has no authentication and no encryption; whoever reaches this port reads the targets' names and memory. Use --listen 127.0.0.1:PORT, or put a firewall or an authenticating proxy in front"
        );
    }
    let opts = ExportOptions {
        targets,
        interval: args.interval,
        window: args.window,
        reset_peaks: args.reset_peaks,
        children: !args.no_children,
        pss: super::pss_guard(&args.pss_args),
        exit_records: !args.no_taskstats,
        procfs: ProcFs::default(),
        cgroupfs: CgroupFs::default(),
    };
    let quiet = args.quiet;
    if !quiet {
        errln!(
            "memmon export: serving http://{bound}/metrics: {}, a sample every {}, window peak over {}{}",
            memmon::units::count(opts.targets.len(), "target"),
            memmon::units::fmt_interval(opts.interval),
            memmon::units::fmt_interval(opts.window),
            if opts.reset_peaks {
                ", resetting VmHWM (and cgroup peak files) after each sample (--reset-peaks)"
            } else {
                ""
            }
        );
    }
    let sampler = Sampler::new(opts, super::stderr::reporter("memmon export", quiet, false));
    let shared = sampler.shared();
    std::thread::Builder::new()
        .name("memmon-sampler".into())
        .spawn(move || sampler.run())?;
    server::serve(listener, shared, server::ServerLimits::default())
        .map_err(|e| anyhow::anyhow!("serving {bound} stopped: {e}"))?;
    Ok(ExitCode::Success)
}
