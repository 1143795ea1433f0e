//! `memmon demo`: records the built-in workload and plots it (`memmon::demo`).

use super::exit::ExitCode;
use super::stderr::errln;
use super::usage;
use crate::cli::DemoArgs;
use memmon::output::Dest;

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let output = match args.output {
        Some(Dest::Stdout) => {
            return Err(usage(
                "the demo writes a recording and its plot beside it: give -o FILE, not -o -",
            ))
        }
        Some(Dest::File(p)) => Some(p),
        None => None,
    };
    let done = memmon::demo::run(
        output,
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
    Ok(done.outcome.exit.into())
}
