//! `memmon completions SHELL`: the shell's completion script for memmon, generated from the
//! clap structs of `cli.rs` (clap_complete), to stdout.

use super::exit::ExitCode;
use crate::cli::{Cli, CompletionsArgs};
use anyhow::Context;
use clap::CommandFactory;
use std::io::Write;

pub fn run(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "memmon", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .context("cannot write to stdout")?;
    Ok(ExitCode::Success)
}
