//! The memmon binary: parse the command line and dispatch to `commands/`, which runs the
//! subcommand, prints any error once to stderr with its whole chain of causes, and chooses the
//! documented exit code (`commands/exit.rs`). Messages go to stderr through `commands::stderr`
//! only: a closed stderr is not an error.
#![deny(clippy::print_stderr)]

mod cli;
mod commands;

use clap::Parser;

fn main() {
    // The demo's workload runs as a child memmon (a real process for the recorder to watch) on
    // an entry point outside the command line: not in `--help`, not a subcommand.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv
        .get(1)
        .is_some_and(|a| a == memmon::demo::WORKLOAD_ENTRY)
    {
        let steps: Vec<String> = argv[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        std::process::exit(commands::workload(&steps));
    }
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => std::process::exit(commands::stderr::clap_message(&e)),
    };
    std::process::exit(commands::exit_code(commands::run(cli)).code());
}
