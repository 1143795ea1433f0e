//! The command line: one clap struct per subcommand, a `///` line per flag. Durations and sizes
//! take human forms (`250ms`, `8GiB`).

use crate::format::{Format, InputFormat, InputSpec};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

fn duration(s: &str) -> Result<Duration, String> {
    crate::units::parse_duration(s)
}

fn size(s: &str) -> Result<u64, String> {
    crate::units::parse_size(s)
}

#[derive(Parser, Debug)]
#[command(
    name = "memmon",
    version,
    about = "Measure the memory of big, long-lived programs: RSS over time with kernel-checked peaks",
    after_help = "Exit codes: 0 success; 1 run-time failure; 2 bad input (flag, value, recording); \
3 target not found or not readable; 128+N stopped by signal N after a clean end; a launched \
command's own exit code is passed through."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Record a process tree's memory over time (attach by PID, pidfile or name, or launch a command)
    Record(RecordArgs),
    /// Summarize recordings: peak (sampled and kernel), when, idle floor, duration
    Summary(SummaryArgs),
    /// Record a built-in workload shaped like a proving pipeline and print its summary
    Demo(DemoArgs),
    /// Run a workload of known memory (for tests and the demo)
    #[command(hide = true)]
    Workload {
        /// Steps: ramp:SIZE:DUR, alloc:SIZE, spike:SIZE:DUR, hold:DUR, free, free-all,
        /// children:N:SIZE:DUR, wait-children, exit:CODE
        steps: Vec<String>,
    },
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Watch the process with this PID
    #[arg(long, value_name = "PID", group = "target")]
    pub pid: Option<i32>,

    /// Watch the process whose PID is in FILE (re-read when it restarts)
    #[arg(long, value_name = "FILE", group = "target")]
    pub pidfile: Option<PathBuf>,

    /// Watch the process whose name or command line matches REGEX (followed across restarts)
    #[arg(long, value_name = "REGEX", group = "target")]
    pub name: Option<String>,

    /// With --name or --pidfile: wait for the target to appear instead of failing
    #[arg(long)]
    pub wait: bool,

    /// With --name or --pidfile: stop when the target exits instead of waiting for a restart
    #[arg(long)]
    pub exit_with_target: bool,

    /// Time between samples: 1s, 250ms, 100us or plain seconds (0.5)
    #[arg(short, long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    pub interval: Duration,

    /// Watch the process alone, not its descendants
    #[arg(long)]
    pub no_children: bool,

    /// Write the recording to FILE (default: stdout; '-' is stdout)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Recording format (default: from the file's extension, .jsonl for JSON Lines, else CSV)
    #[arg(long, value_enum)]
    pub format: Option<Format>,

    /// Overwrite an existing output file
    #[arg(long, conflicts_with = "append")]
    pub force: bool,

    /// Add to an existing recording (its columns must match)
    #[arg(long)]
    pub append: bool,

    /// Also record PSS (proportional set size) from /proc/PID/smaps_rollup
    #[arg(
        long,
        long_help = "Also record PSS (proportional set size, shared pages divided among their \
users) from /proc/PID/smaps_rollup. Reading smaps_rollup walks the target's page tables under \
its memory-map lock: on a 210 GB process one read took 4.5 s of system time and stalled the \
target. So PSS is read at most every --pss-every (default 10s) and skipped for any process \
whose RSS is over --pss-max-rss (default 8GiB) unless --pss-force."
    )]
    pub pss: bool,

    /// With --pss: read PSS at most this often
    #[arg(long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    pub pss_every: Duration,

    /// With --pss: skip processes whose RSS is above this (reading them stalls them)
    #[arg(long, default_value = "8GiB", value_parser = size, value_name = "SIZE")]
    pub pss_max_rss: u64,

    /// With --pss: read PSS even of processes above --pss-max-rss
    #[arg(long)]
    pub pss_force: bool,

    /// Stop recording after this long
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub duration: Option<Duration>,

    /// Print nothing but errors (no banner, no live line, no summary)
    #[arg(short, long)]
    pub quiet: bool,

    /// The command to launch and record, after `--`
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// Recordings to summarize (CSV or JSON Lines written by memmon record)
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Print one JSON object per file (a list when several)
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub input: InputArgs,
}

/// How to read input files: shared by every subcommand that reads recordings.
#[derive(Args, Debug, Clone)]
pub struct InputArgs {
    /// Format of the input files (default: recognised by content)
    #[arg(long, value_enum, default_value = "auto")]
    pub input_format: InputFormat,

    /// For a headerless CSV: its columns with units, e.g. unix_ms,rss_kb,- ('-' skips one)
    #[arg(long, value_name = "LIST")]
    pub columns: Option<String>,
}

impl InputArgs {
    pub fn spec(&self) -> InputSpec {
        let format = match (self.input_format, &self.columns) {
            (InputFormat::Auto, Some(_)) => InputFormat::Columns,
            (f, _) => f,
        };
        InputSpec { format, columns: self.columns.clone() }
    }
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to write the recording (default: memmon-demo.csv, or the next free name)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Time between samples
    #[arg(short, long, default_value = "50ms", value_parser = duration, value_name = "DURATION")]
    pub interval: Duration,

    /// Print nothing but errors
    #[arg(short, long)]
    pub quiet: bool,
}
