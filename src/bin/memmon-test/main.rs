//! `memmon-test`: processes of known memory for memmon's integration tests and examples —
//! `workload STEP...` (src/workload.rs), `test-daemon` and `test-client` (testdaemon.rs),
//! `mark-burst` (markers from a program's own code, through the memmon-mark crate). A
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
    /// Send COUNT markers b0, b1, ... at once through memmon-mark, then one that waits for its
    /// row (`end`); print what became of them
    MarkBurst {
        #[arg(long, value_name = "COUNT")]
        count: u32,
    },
    /// Run a workload of known memory
    Workload {
        /// Steps: ramp:SIZE:DUR, alloc:SIZE, mlock:SIZE, partitions:N:SIZE, memfd:NAME:SIZE,
        /// heap:SIZE, threads:N, thp:SIZE, spike:SIZE:DUR, hold:DUR, map-file:PATH:SIZE,
        /// cold-read:PATH:SIZE, thrash:PATH:SIZE:DUR, wait-file:PATH, free, free-all,
        /// children:N:SIZE:DUR, forks:N:DUR:BATCH, wait-children, undumpable, say:TEXT,
        /// mark:LABEL, exit:CODE (src/workload.rs says what each does)
        steps: Vec<String>,
    },
}

/// `mark-burst`: the markers, made as fast as the program can; the last waits for its row, so
/// every one before it has its row too when the program exits. Prints `queued Q sent S lost L
/// end OUTCOME`; exits 0 when every marker was sent.
fn mark_burst(count: u32) -> i32 {
    let queued = (0..count)
        .filter(|i| memmon_mark::mark(&format!("b{i}")))
        .count();
    let end = memmon_mark::mark_and_wait("end");
    let s = memmon_mark::stats();
    println!(
        "queued {queued} sent {} lost {} end {}",
        s.sent,
        s.lost(),
        match &end {
            Ok(()) => "taken".to_string(),
            Err(e) => e.to_string(),
        }
    );
    i32::from(!(end.is_ok() && s.sent == u64::from(count) + 1))
}

fn main() {
    let code = match Cli::parse().command {
        Command::TestDaemon(args) => testdaemon::daemon(&args).map(|()| 0),
        Command::TestClient(args) => testdaemon::client(&args),
        Command::MarkBurst { count } => Ok(mark_burst(count)),
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
