//! `memmon man [SUBCOMMAND]`: a manual page in roff, generated from the clap structs of
//! `cli.rs` (clap_mangen), to stdout: memmon's own (`memmon man > memmon.1`), which lists the
//! subcommands, or one subcommand's with all its flags (`memmon man record > memmon-record.1`).

use super::exit::ExitCode;
use super::usage;
use crate::cli::{Cli, ManArgs};
use anyhow::Context;
use clap::CommandFactory;
use std::io::Write;

pub fn run(args: ManArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    // Every subcommand's flags are built on demand (`cli::Deferred`): a page needs them all.
    cmd.build();
    let page = match &args.subcommand {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                let names: Vec<&str> = cmd
                    .get_subcommands()
                    .map(|c| c.get_name())
                    .filter(|n| *n != "help")
                    .collect();
                return Err(usage(format!(
                    "no subcommand '{name}': give one of {}",
                    names.join(", ")
                )));
            }
        },
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .source(format!("memmon {}", env!("CARGO_PKG_VERSION")))
        .render(&mut roff)
        .context("cannot render the manual page")?;
    let mut out = std::io::stdout().lock();
    out.write_all(&roff)
        .and_then(|()| out.flush())
        .context("cannot write to stdout")?;
    Ok(ExitCode::Success)
}
