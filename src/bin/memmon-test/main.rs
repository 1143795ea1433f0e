//! `memmon-test`: processes of known memory for memmon's integration tests and examples —
//! `workload STEP...` (src/workload.rs), `test-daemon` and `test-client` (testdaemon.rs). A
//! binary of its own, so the shipped `memmon` has none of them in its `--help` or parse tree.
//! It needs the `test-support` feature, which the tests turn on (Cargo.toml's dev-dependency on
//! memmon itself): `cargo test` builds it, `cargo build` and `cargo install` leave it out.

mod testdaemon;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "memmon-test",
    version,
    about = "Processes of known memory, for memmon's tests"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve requests of known memory on a Unix socket (a daemon for the bench tests)
    TestDaemon(testdaemon::TestDaemonArgs),
    /// Ask the test daemon for one request of known memory
    TestClient(testdaemon::TestClientArgs),
    /// Run a workload of known memory
    Workload {
        /// Steps: ramp:SIZE:DUR, alloc:SIZE, mlock:SIZE, spike:SIZE:DUR, hold:DUR, free, free-all,
        /// children:N:SIZE:DUR, wait-children, say:TEXT, exit:CODE
        steps: Vec<String>,
    },
}

fn main() {
    let code = match Cli::parse().command {
        Command::TestDaemon(args) => testdaemon::daemon(&args).map(|()| 0),
        Command::TestClient(args) => testdaemon::client(&args),
        Command::Workload { steps } => match memmon::workload::run(&steps) {
            Ok(code) => Ok(code),
            Err(msg) => {
                eprintln!("memmon-test: error: {msg}");
                std::process::exit(2);
            }
        },
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("memmon-test: error: {err:#}");
            std::process::exit(1);
        }
    }
}
