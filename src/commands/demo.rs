//! `memmon demo`: records the built-in workload and plots it (`memmon::demo`).

use super::stderr::errln;
use crate::cli::DemoArgs;
use memmon::exit::ExitCode;

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let done = memmon::demo::run(
        args.output,
        args.interval,
        Box::new(super::record::Terminal::new(args.quiet, false, false)),
        super::stderr::reporter("memmon", args.quiet, false),
    )?;
    if let (Some(p), Some(svg), false) = (&done.outcome.output, &done.plot, args.quiet) {
        errln!(
            "memmon: demo: the recording is in {}, its plot in {}; read it again with: memmon summary {}",
            p.display(),
            svg.display(),
            p.display()
        );
    }
    Ok(done.outcome.exit)
}
