//! `memmon demo`: records the built-in workload and plots it (`memmon::demo`).

use crate::cli::DemoArgs;
use memmon::exit::ExitCode;

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    Ok(memmon::demo::run(
        args.output,
        args.interval,
        Box::new(super::record::Terminal::new(args.quiet)),
        args.quiet,
    )?
    .exit)
}
