//! The command line: one clap struct per subcommand, a `///` line per flag; a group of flags
//! that several subcommands share is one struct, flattened into each (`TargetArgs`,
//! `SamplingArgs`, `PssArgs`, `MarkArgs`, `BudgetArgs`, `InputArgs`). Values are parsed here into
//! their types: durations and sizes from human forms (`250ms`, `8GiB`), an output into a
//! `Dest` (`-` is stdout), a listen address, export targets, a regex. The only file of clap
//! structs: `commands/` turns each into the core's options; the core never sees them.

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use memmon::analysis::compare::{Limit, LimitError};
use memmon::export::ExportTarget;
use memmon::format::{Format, InputFormat, InputSpec};
use memmon::output::Dest;
use memmon::sampler::target::TargetSpec;
use memmon::units::UnitError;
use regex::Regex;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

fn duration(s: &str) -> Result<Duration, UnitError> {
    memmon::units::parse_duration(s)
}

/// A duration that must be above 0 (a zero one would stop at once, or read on every tick).
fn positive_duration(s: &str) -> Result<Duration, String> {
    match memmon::units::parse_duration(s).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err(format!("'{s}' must be above 0")),
        d => Ok(d),
    }
}

fn interval(s: &str) -> Result<Duration, UnitError> {
    memmon::units::parse_interval(s)
}

fn size(s: &str) -> Result<u64, UnitError> {
    memmon::units::parse_size(s)
}

/// An output: `-` is stdout, anything else a file (`Dest::from` decides).
fn dest() -> impl TypedValueParser<Value = Dest> {
    clap::builder::PathBufValueParser::new().map(Dest::from)
}

fn regex(s: &str) -> Result<Regex, String> {
    Regex::new(s).map_err(|e| format!("not a valid regex: {e}"))
}

fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|e| {
        format!("not an ADDRESS:PORT ({e}); e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464")
    })
}

fn export_target(s: &str) -> Result<ExportTarget, memmon::export::TargetListError> {
    memmon::export::parse_target(s)
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
    Record(Deferred<RecordArgs>),
    /// Summarize recordings: peak (sampled and kernel), when, idle floor, duration
    Summary(Deferred<SummaryArgs>),
    /// Record a built-in workload shaped like a proving pipeline and print its summary
    Demo(Deferred<DemoArgs>),
    /// Compare a baseline's recordings with a candidate's: peak, idle floor, mean, duration; CI gates
    Compare(Deferred<CompareArgs>),
    /// Write one self-contained HTML report: interactive chart, summaries, comparison
    Report(Deferred<ReportArgs>),
    /// Plot recordings to SVG or PNG: RSS over time, peak, kernel peak, idle floor, events
    Plot(Deferred<PlotArgs>),
    /// Add a marker (a labelled instant that opens a phase) to a running recording
    Mark(Deferred<MarkCommandArgs>),
    /// Run a client N times against a daemon (or a command N times): each run's time and exact peak
    Bench(Deferred<BenchArgs>),
    /// Serve targets' memory on /metrics for Prometheus: current RSS and parts, and the peak over a sliding window
    Export(Deferred<ExportArgs>),
    /// Print a shell's completion script for memmon (bash, zsh, fish, elvish, powershell)
    Completions(Deferred<CompletionsArgs>),
    /// Print memmon's manual page (roff), or a subcommand's: memmon man record > memmon-record.1
    Man(Deferred<ManArgs>),
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete memmon in
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// The subcommand whose page to print (default: memmon's own, which lists the subcommands)
    #[arg(value_name = "SUBCOMMAND", conflicts_with = "dir")]
    pub subcommand: Option<String>,

    /// Write every page (memmon.1 and memmon-SUBCOMMAND.1 for each subcommand) into DIR,
    /// made if missing, instead of one page to stdout
    #[arg(
        long,
        value_name = "DIR",
        long_help = "Write every page (memmon.1 and memmon-SUBCOMMAND.1 for each subcommand) into DIR, made if \
                     missing, instead of one page to stdout. An existing page is refused unless --force. \
                     For man to find them: `memmon man --dir ~/.local/share/man/man1`, then \
                     `man memmon` (with ~/.local/share/man in MANPATH where man does not look there already)."
    )]
    pub dir: Option<std::path::PathBuf>,

    /// With --dir: replace pages that are already there
    #[arg(long, requires = "dir")]
    pub force: bool,
}

/// A subcommand's flags, which clap builds only when that subcommand is the one given, or its
/// help asked for (`Command::defer`). Without it every start built all nine subcommands' flags,
/// and a recorder kept that code and heap mapped for its whole life (BENCHMARKS.md, "memmon's own
/// memory"). The variant's doc comment stays its `about` (`keep_about`).
#[derive(Debug)]
pub struct Deferred<T>(pub T);

impl<T> std::ops::Deref for Deferred<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Args> Args for Deferred<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| keep_about(cmd, T::augment_args))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| keep_about(cmd, T::augment_args_for_update))
    }

    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
}

/// `augment` run on `cmd` with the about its variant set kept: a flattened group's doc comment
/// would set its own, and clap applied the variant's after the flags when they were not deferred.
fn keep_about(cmd: clap::Command, augment: fn(clap::Command) -> clap::Command) -> clap::Command {
    let about = cmd.get_about().cloned();
    let long_about = cmd.get_long_about().cloned();
    let cmd = augment(cmd);
    let cmd = match about {
        Some(about) => cmd.about(about),
        None => cmd.about(None::<&str>),
    };
    match long_about {
        Some(long_about) => cmd.long_about(long_about),
        None => cmd.long_about(None::<&str>),
    }
}

impl<T: clap::FromArgMatches> clap::FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }

    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(
        &mut self,
        matches: &mut clap::ArgMatches,
    ) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// With --name or --pidfile: wait for the target to appear instead of failing
    #[arg(long)]
    pub wait: bool,

    /// With --name or --pidfile: stop when the target exits instead of waiting for a restart
    #[arg(long)]
    pub exit_with_target: bool,

    /// Reset the kernel's high-water marks at the first sample, so an attached target's kernel peak is exact from the start
    #[arg(
        long,
        alias = "reset-peak",
        long_help = "Right after the first sample, reset the kernel's high-water mark (VmHWM, by \
writing 5 to /proc/PID/clear_refs) of every process of the tree, as bench does before each run. \
Without it, a process memmon attaches to carries the peak of its whole life, which may predate the \
recording: its kernel peak then counts only if it rises during the recording, and `summary` shows \
the older one apart as the lifetime peak. With --cgroup, the cgroup's peak (memory.peak, v1 \
memory.max_usage_in_bytes) is reset too. Needs to be the target's owner or root; a launched \
command needs no reset. (`--reset-peak` is an older spelling of this flag.)"
    )]
    pub reset_peaks: bool,

    #[command(flatten)]
    pub sampling: SamplingArgs,

    /// Stop recording after this long
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,

    /// Print nothing but errors (no banner, no live line, no summary)
    #[arg(short, long)]
    pub quiet: bool,

    /// Also say what is read, from which files and how often (kept in the metadata's `sources`)
    #[arg(short, long, conflicts_with = "quiet")]
    pub verbose: bool,

    /// When the recording ends, plot it to FILE (.svg or .png); needs -o FILE
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,

    #[command(flatten)]
    pub anatomy: AnatomyArgs,

    #[command(flatten)]
    pub marks: MarkArgs,

    /// A launched command's stdout lines matching REGEX are markers (the lines still pass through)
    #[arg(
        long,
        value_name = "REGEX",
        help_heading = "Markers",
        long_help = "A launched command's stdout lines matching REGEX are markers, labelled by the \
regex's (?P<label>...) group or else the whole match; every line is still passed through \
unchanged (to stderr when the recording goes to stdout). The command's stdout becomes a pipe: \
programs that buffer a pipe (C stdio) should flush each line, e.g. run under `stdbuf -oL`."
    )]
    pub mark_stdout: Option<String>,

    #[command(flatten)]
    pub cgroup: CgroupArgs,

    /// The command to launch and record, after `--`
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// A running process to watch, by PID, pidfile or name (`record`, and `bench`'s daemon): at most
/// one of the three.
#[derive(Args, Debug, Clone, Default)]
#[group(id = "target", multiple = false)]
pub struct TargetArgs {
    /// Watch the process with this PID
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,

    /// Watch the process whose PID is in FILE (re-read when it restarts)
    #[arg(long, value_name = "FILE")]
    pub pidfile: Option<PathBuf>,

    /// Watch the process whose name or command line matches REGEX (followed across restarts)
    #[arg(long, value_name = "REGEX", value_parser = regex)]
    pub name: Option<Regex>,
}

impl TargetArgs {
    /// The process named by `--pid`, `--pidfile` or `--name`; `None` when none is given.
    pub fn spec(&self) -> Option<TargetSpec> {
        match (self.pid, &self.pidfile, &self.name) {
            (Some(pid), _, _) => Some(TargetSpec::Pid(pid)),
            (_, Some(f), _) => Some(TargetSpec::Pidfile(f.clone())),
            (_, _, Some(re)) => Some(TargetSpec::Name(re.clone())),
            (None, None, None) => None,
        }
    }
}

/// Memory cgroups: one to read per tick, and the cgroup of memmon's own for a launched command.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Cgroups")]
pub struct CgroupArgs {
    /// Also read a memory cgroup every tick: PATH (/system.slice/x.service or its directory), or auto (the target's own); alone, record that whole cgroup
    #[arg(
        long,
        value_name = "PATH|auto",
        long_help = "Also read a memory cgroup every tick: memory.current, anon/file/kernel/shmem/sock \
of memory.stat, the working set (current - inactive_file, as Kubernetes computes it), memory.max, \
the memory.events counters and memory.peak (v1: memory.usage_in_bytes, memory.stat, \
memory.limit_in_bytes, memory.failcnt, memory.oom_control, memory.max_usage_in_bytes). PATH is \
a cgroup path as /proc/PID/cgroup writes it (/system.slice/proverd.service) or its directory \
under /sys/fs/cgroup. `auto` is the target's own cgroup, refused when it holds processes outside \
the target's tree. Given alone (no --pid, --pidfile, --name or COMMAND), memmon records the whole \
cgroup: a service or a container, its RSS columns from its top process's tree."
    )]
    pub cgroup: Option<String>,

    /// Launch the command in a memory cgroup of memmon's own, removed after (default: where memmon may make one)
    #[arg(
        long,
        overrides_with = "no_own_cgroup",
        long_help = "Launch the command in a memory cgroup memmon makes for it (the v1 memory \
hierarchy, or the top of a v2 hierarchy with the memory controller: as root), read its peak \
every tick and at the end, and remove it after. Its peak is the launched tree's exact peak, each \
page counted once (page cache included), where the sum of the processes' high-water marks is \
only an upper bound. On by default where memmon may make one; with this flag, failing to make \
one is an error."
    )]
    pub own_cgroup: bool,

    /// Do not launch the command in a cgroup of memmon's own
    #[arg(long, overrides_with = "own_cgroup")]
    pub no_own_cgroup: bool,
}

impl CgroupArgs {
    /// `--own-cgroup` as the core takes it: `None` where memmon may make one.
    pub fn own(&self) -> Option<bool> {
        match (self.own_cgroup, self.no_own_cgroup) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }
}

/// Bench's cgroups: against a daemon, the daemon's own (its tree's exact peak, reset per run);
/// without one, a cgroup memmon makes for each run of the command.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Cgroups")]
pub struct BenchCgroupArgs {
    /// Against a daemon: read this cgroup (PATH, or auto: the daemon's own), which must hold the daemon's tree alone
    #[arg(
        long,
        value_name = "PATH|auto",
        long_help = "Against a daemon (--pid, --pidfile, --name): read this memory cgroup every tick \
and reset its peak with the high-water marks at each run, so each run's peak is the tree's exact \
peak (each page once, page cache included): PATH (/system.slice/proverd.service or its directory) \
or auto, the daemon's own. Refused, with the reason, when the cgroup holds a process outside the \
daemon's tree. Without this flag memmon reads the daemon's own cgroup when it holds the tree \
alone (a systemd service, a container), and says so."
    )]
    pub cgroup: Option<String>,

    /// Without a daemon: run each run of the command in a memory cgroup of memmon's own (default: where memmon may make one)
    #[arg(long, overrides_with = "no_own_cgroup")]
    pub own_cgroup: bool,

    /// Without a daemon: do not run the command in a cgroup of memmon's own
    #[arg(long, overrides_with = "own_cgroup")]
    pub no_own_cgroup: bool,
}

impl BenchCgroupArgs {
    /// `--own-cgroup` as the core takes it: `None` where memmon may make one.
    pub fn own(&self) -> Option<bool> {
        match (self.own_cgroup, self.no_own_cgroup) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }
}

/// Budgets a recording's peak must keep (summary, bench, compare): exit 1 when one is exceeded.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Budgets")]
pub struct BudgetArgs {
    /// Fail (exit 1) when the peak exceeds SIZE (e.g. 128GiB): the tree's from a cgroup that holds it alone, else the kernel's, else the sampled one
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub max_peak: Option<u64>,

    /// Fail (exit 1) when the memory cgroup's peak (page cache included) exceeds SIZE
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub max_cgroup: Option<u64>,

    /// Fail (exit 1) when the GPU peak exceeds SIZE (e.g. 64GiB): NVML accounting's exact mark of the tree where it has one (gpu_hwm_bytes), else the sampled gpu_bytes
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub max_gpu: Option<u64>,
}

impl BudgetArgs {
    pub fn budgets(&self) -> memmon::analysis::budget::Budgets {
        memmon::analysis::budget::Budgets {
            max_peak: self.max_peak,
            max_cgroup: self.max_cgroup,
            max_gpu: self.max_gpu,
        }
    }
}

#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// Write the folded stacks of the live mappings at the recording's highest anatomy (record --anatomy with its ledger) to FILE (- for stdout): a line per stack, outermost frame first, and its bytes mapped, as flame graph tools read them
    #[arg(long, value_name = "FILE", value_parser = dest())]
    pub folded: Option<Dest>,

    /// With --folded: replace FILE if it exists
    #[arg(long, requires = "folded")]
    pub force: bool,

    /// Recordings to summarize (CSV or JSON Lines written by memmon record)
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Print one JSON object per file (a list when several)
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub budgets: BudgetArgs,
}

/// How to read input files: shared by every subcommand that reads recordings.
#[derive(Args, Debug, Clone)]
pub struct InputArgs {
    /// Format of the input files (default: recognised by content)
    #[arg(long, value_enum, default_value = "auto")]
    pub input_format: InputFormatArg,

    /// For a headerless CSV: its columns with units, e.g. unix_ms,rss_kb,- ('-' skips one)
    #[arg(long, value_name = "LIST")]
    pub columns: Option<String>,
}

impl InputArgs {
    pub fn spec(&self) -> InputSpec {
        let format = match (InputFormat::from(self.input_format), &self.columns) {
            (InputFormat::Auto, Some(_)) => InputFormat::Columns,
            (f, _) => f,
        };
        InputSpec {
            format,
            columns: self.columns.clone(),
        }
    }
}

/// `--input-format`: `format::InputFormat` as clap reads it (the core has no clap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InputFormatArg {
    /// Recognised by content.
    Auto,
    /// A memmon recording (CSV or JSON Lines).
    Memmon,
    /// A psrecord log (plain `--log` text or CSV).
    Psrecord,
    /// A memory_profiler `mprof run` .dat file.
    Mprof,
    /// A headerless CSV whose columns are declared with `--columns`.
    Columns,
}

impl From<InputFormatArg> for InputFormat {
    fn from(f: InputFormatArg) -> InputFormat {
        match f {
            InputFormatArg::Auto => InputFormat::Auto,
            InputFormatArg::Memmon => InputFormat::Memmon,
            InputFormatArg::Psrecord => InputFormat::Psrecord,
            InputFormatArg::Mprof => InputFormat::Mprof,
            InputFormatArg::Columns => InputFormat::Columns,
        }
    }
}

/// `--format`: `format::Format` as clap reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Csv,
    Jsonl,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Csv => Format::Csv,
            FormatArg::Jsonl => Format::Jsonl,
        }
    }
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to write the recording (default: memmon-demo.csv, or the next free name)
    #[arg(short, long, value_name = "FILE", value_parser = dest())]
    pub output: Option<Dest>,

    /// Time between samples
    #[arg(short, long, default_value = "50ms", value_parser = interval, value_name = "DURATION")]
    pub interval: Duration,

    /// Print nothing but errors
    #[arg(short, long)]
    pub quiet: bool,
}

fn size_limit(s: &str) -> Result<Limit, LimitError> {
    memmon::analysis::compare::parse_size_limit(s)
}

fn duration_limit(s: &str) -> Result<Limit, LimitError> {
    memmon::analysis::compare::parse_duration_limit(s)
}

fn percent(s: &str) -> Result<f64, String> {
    memmon::analysis::compare::parse_percent(s)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("'{s}' is not a percentage (examples: 1%, 0.5%)"))
}

#[derive(Args, Debug)]
#[command(
    after_help = "A change is a regression (or an improvement) only when the candidate's mean \
lies outside the baseline's [min, max] widened by the candidate's own range (at least --min-noise \
of the baseline mean); else it is within noise. Gates compare the change of the means with their \
limit. Exit codes: 0 all gates passed; 1 a gate failed; 2 bad input (flag or recording)."
)]
pub struct CompareArgs {
    /// Baseline recordings (each one run, or one per bench run in it), then `--` and the candidate's; or just BASE NEW
    #[arg(required = true, value_name = "BASE")]
    pub base: Vec<PathBuf>,

    /// The candidate's recordings, after `--`
    #[arg(last = true, value_name = "NEW")]
    pub new: Vec<PathBuf>,

    /// Also compare the time spent with RSS above this level (e.g. 150GiB)
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub above: Option<u64>,

    /// Fail (exit 1) when the peak RSS rises more than this: a percentage (2%) or a size (512MiB)
    #[arg(long, value_parser = size_limit, value_name = "LIMIT")]
    pub max_peak_increase: Option<Limit>,

    /// Fail (exit 1) when the idle floor rises more than this: a percentage or a size
    #[arg(long, value_parser = size_limit, value_name = "LIMIT")]
    pub max_idle_increase: Option<Limit>,

    /// Fail (exit 1) when the GPU peak rises more than this (a percentage or a size): NVML accounting's exact marks where every run has one, else the sampled gpu_bytes
    #[arg(long, value_parser = size_limit, value_name = "LIMIT")]
    pub max_gpu_increase: Option<Limit>,

    /// Fail (exit 1) when the duration rises more than this: a percentage (5%) or a duration (5s)
    #[arg(long, value_parser = duration_limit, value_name = "LIMIT")]
    pub max_duration_increase: Option<Limit>,

    /// Changes smaller than this share of the baseline mean are always noise
    #[arg(long, default_value = "1%", value_parser = percent, value_name = "PERCENT")]
    pub min_noise: f64,

    /// Print the whole comparison as JSON (per-side stats, deltas, verdicts, gates)
    #[arg(long)]
    pub json: bool,

    /// Count each file as one run, even a `bench -o` recording of several runs
    #[arg(long)]
    pub whole_files: bool,

    #[command(flatten)]
    pub input: InputArgs,

    /// Budgets of the candidate's peak (each of its recordings): --max-peak, --max-cgroup
    #[command(flatten)]
    pub budgets: BudgetArgs,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Recordings to show; with `--`, those before it are the baseline and those after the candidate
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// The candidate's recordings, after `--` (the report then compares the two sides)
    #[arg(last = true, value_name = "NEW")]
    pub new: Vec<PathBuf>,

    /// Where to write the HTML file ('-' for stdout); required
    #[arg(short, long, value_name = "FILE", value_parser = dest())]
    pub output: Option<Dest>,

    /// Overwrite an existing output file
    #[arg(long)]
    pub force: bool,

    /// The report's title (default: the files' names)
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,

    /// In the comparison, also compare the time spent with RSS above this level
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub above: Option<u64>,

    #[command(flatten)]
    pub input: InputArgs,
}

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// Recordings to draw; several are overlaid, each from its own first sample
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Write the plot to FILE: .svg or .png
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,

    /// Overwrite an existing output file
    #[arg(long)]
    pub force: bool,

    /// Image width in pixels
    #[arg(long, default_value_t = 1200, value_parser = clap::value_parser!(u32).range(200..=20000))]
    pub width: u32,

    /// Image height in pixels
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(150..=20000))]
    pub height: u32,

    /// Also draw RSS split into anon, file and shmem as stacked areas
    #[arg(long)]
    pub parts: bool,

    /// Also draw swap (VmSwap)
    #[arg(long)]
    pub swap: bool,

    /// Also draw PSS, on the ticks where it was read (recorded with --pss)
    #[arg(long)]
    pub pss: bool,

    /// Also draw this size column, e.g. locked_bytes, pinned_bytes, top_rss_bytes, hwm_bytes, hwm_sum_bytes (repeat or comma-separate)
    #[arg(long, value_name = "COLUMN", value_delimiter = ',')]
    pub series: Vec<String>,

    /// The plot's title (default: the files' names)
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,

    #[command(flatten)]
    pub input: InputArgs,
}

/// Where markers come from during a recording (flattened into `record`, and `bench`).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Markers and phases")]
pub struct MarkArgs {
    /// Follow FILE like `tail -F` (from its end, across rotation and truncation) for markers
    #[arg(long, value_name = "FILE", requires = "mark_regex")]
    pub mark_log: Option<PathBuf>,

    /// With --mark-log: each line matching REGEX is a marker, labelled by (?P<label>...) or the match
    #[arg(long, value_name = "REGEX", requires = "mark_log")]
    pub mark_regex: Option<String>,

    /// The Unix socket `memmon mark` talks to (default: memmon-PID.sock in $XDG_RUNTIME_DIR when it is private, else in $TMPDIR/memmon-UID)
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,

    /// Reset the kernel's high-water marks at each marker, so each phase's kernel peak is exact
    #[arg(
        long,
        long_help = "Right after each marker's sample, reset the kernel's high-water mark (VmHWM, \
by writing 5 to /proc/PID/clear_refs) of every process of the tree, so the hwm_bytes of the \
following phase's rows is that phase's exact peak: `memmon summary` then gives each phase's \
kernel peak, even of a spike shorter than the interval. Needs to be the target's owner or root."
    )]
    pub phase_peaks: bool,
}

#[derive(Args, Debug)]
pub struct MarkCommandArgs {
    /// The marker's label (e.g. "synthesis start"); it opens a phase of that name
    #[arg(value_name = "LABEL")]
    pub label: String,

    /// The recorder's socket (default: the one running recorder's, found in
    /// $XDG_RUNTIME_DIR or the temp directory)
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

/// PSS flags, shared by record, bench and export.
#[derive(Args, Debug, Clone)]
pub struct PssArgs {
    /// Also record (or export) PSS (proportional set size) from /proc/PID/smaps_rollup
    #[arg(
        long,
        long_help = "Also read PSS (proportional set size, shared pages divided among their \
users) from /proc/PID/smaps_rollup. Reading smaps_rollup walks the target's page tables under \
its memory-map lock: on a 210 GB process one read took 4.5 s of system time and stalled the \
target. So PSS is read every --pss-every (default 10s), and at a new high of the tree's RSS \
(5% above the RSS of the last read) at most every tenth of that, so the largest PSS read falls \
at the peak; any process whose RSS is over --pss-max-rss (default 8GiB) is skipped unless \
--pss-force."
    )]
    pub pss: bool,

    /// With --pss: read PSS this often (and at a new RSS high, at most every tenth of it)
    #[arg(long, default_value = "10s", value_parser = positive_duration, value_name = "DURATION", requires = "pss")]
    pub pss_every: Duration,

    /// With --pss: skip processes whose RSS is above this (reading them stalls them)
    #[arg(long, default_value = "8GiB", value_parser = size, value_name = "SIZE", requires = "pss")]
    pub pss_max_rss: u64,

    /// With --pss: read PSS even of processes above --pss-max-rss
    #[arg(long, requires = "pss")]
    pub pss_force: bool,
}

/// The recorder's sampling and output flags, as `record` has them (for `bench`).
#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Time between samples: 1s, 250ms, 100us (the shortest) or plain seconds (0.5)
    #[arg(short, long, default_value = "1s", value_parser = interval, value_name = "DURATION")]
    pub interval: Duration,

    /// Watch the process alone, not its descendants
    #[arg(long)]
    pub no_children: bool,

    /// Write the recording to FILE ('-' is stdout); without it record writes to stdout, bench keeps no time series
    #[arg(short, long, value_name = "FILE", value_parser = dest())]
    pub output: Option<Dest>,

    /// Recording format (default: from the file's extension, .jsonl, .ndjson or .json for JSON Lines, else CSV)
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,

    /// Overwrite an existing output file
    #[arg(long, conflicts_with = "append")]
    pub force: bool,

    /// Add to an existing recording (its columns must match)
    #[arg(long)]
    pub append: bool,

    #[command(flatten)]
    pub pss_args: PssArgs,

    /// Also record GPU memory through NVML (libnvidia-ml.so.1); fail if it cannot be read
    #[arg(
        long,
        overrides_with = "no_gpu",
        long_help = "Record the GPU memory of the watched tree through NVIDIA's NVML (libnvidia-ml.so.1, loaded at run time): per tick gpu_bytes, the device memory held by the tree's processes (summed over their PIDs), the used and total memory of the GPUs they use, gpu_hwm_bytes (the GPU's own high-water mark of the tree's processes, where NVML accounting is on: `nvidia-smi -am 1`) and nvidia_mapped_bytes (their mappings of /dev/nvidia*: CUDA's pinned host buffers). Without --gpu this is done whenever NVML loads; with --gpu, memmon exits 2 when it cannot."
    )]
    pub gpu: bool,

    /// Do not record GPU memory, even where NVML loads
    #[arg(long, overrides_with = "gpu")]
    pub no_gpu: bool,

    /// Read GPU memory at most this often (NVML calls run on their own thread, off the tick)
    #[arg(long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    pub gpu_every: Duration,

    /// Give up on NVML when it has not started and given a first reading within this
    #[arg(
        long,
        default_value = "30s",
        value_parser = duration,
        value_name = "DURATION",
        long_help = "Give up on NVML when it has not started and given a first reading within DURATION (a hung driver): with --gpu memmon exits 2, else it records without GPU memory and says why. Starting NVML takes seconds per GPU where the GPUs are not kept initialised (persistence mode off)."
    )]
    pub gpu_timeout: Duration,

    /// The host's /proc, mounted into the container memmon runs in: maps NVML's host PIDs to the container's
    #[arg(
        long,
        value_name = "DIR",
        long_help = "The host's /proc as mounted into the container memmon runs in (e.g. `-v /proc:/host/proc:ro`, then --gpu-host-proc /host/proc). NVML gives the host's PIDs; memmon in a container sees its own namespace's, and maps one to the other through NSpid in DIR/PID/status. Without it, in a container, memmon uses NVML's PIDs only when every one is a process of its namespace (a driver that translates them), and otherwise says the GPU memory cannot be attributed."
    )]
    pub gpu_host_proc: Option<std::path::PathBuf>,

    #[arg(
        long,
        long_help = "Do not read the kernel's exit records (taskstats over netlink). With them (root or \
CAP_NET_ADMIN), a process that leaves the tree between two samples keeps the peak the kernel \
reported as it exited, and so does a child born and gone between two samples: that peak is in the \
row where it left, so phases and bench runs hold it. Without them a process's peak is exact only up \
to its last sample, such a child is not seen, and the summary says so."
    )]
    /// Do not read the kernel's exit records (taskstats): peaks at exit are then not seen
    pub no_taskstats: bool,
}

#[derive(Args, Debug)]
#[command(
    after_help = "At each run's start memmon resets the daemon's high-water marks (VmHWM through \
/proc/PID/clear_refs; the peak of its own cgroup, when it holds the daemon's tree alone) and \
reads them at its end, so each run's peak is the kernel's exact peak whatever the interval: the \
tree's, from its cgroup, else the exact peak of its largest process (the table then bounds the \
tree's). Every run is shown on the one kind all runs have. Where a reset is refused, a run's peak \
counts only where it rose. Without a daemon, each run of the command is recorded and its peak is \
its tree's exact peak from a memory cgroup memmon makes for the run (where it may: --own-cgroup), \
else wait4's ru_maxrss of that run's process. The client \
gets MEMMON_BENCH_RUN=N (0 in warmup runs). Exit codes: 0 all runs done; 1 a client failed or the \
daemon exited; 2 bad input; 3 daemon not found; 130 Ctrl-C (exports still written).",
    mut_arg("pid", |a| a.help("The daemon: the process with this PID")),
    mut_arg("pidfile", |a| a.help("The daemon: the process whose PID is in FILE")),
    mut_arg("name", |a| a.help("The daemon: the process whose name or command line matches REGEX"))
)]
pub struct BenchArgs {
    #[command(flatten)]
    pub anatomy: AnatomyArgs,

    /// The daemon (none: the client is the command measured)
    #[command(flatten)]
    pub daemon: TargetArgs,

    /// With --name or --pidfile: wait for the daemon to appear instead of failing
    #[arg(long)]
    pub wait: bool,

    /// Measured runs of the client
    #[arg(short = 'n', long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..), value_name = "RUNS")]
    pub runs: u32,

    /// Runs before the measured ones, not counted
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub warmup: u32,

    /// Runs in flight together against the daemon: a new one starts as one ends. Above 1 the
    /// bench gives the window's exact peak, its throughput and latencies (no run's own peak)
    #[arg(
        long,
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..),
        value_name = "C",
        long_help = "Runs in flight together against the daemon (a daemon bench): C clients \
start at once and a new one starts as one ends, as a loaded daemon serves them. The measured \
window runs from the reset of the kernel's high-water marks just before the first measured \
client starts to the last one's exit: its peak is exact as a run's is, and the bench gives the \
window's throughput (runs per hour), the runs' latencies (p50, p95, max), the idle floor before \
the window and the peak above it per run in flight. Runs that overlap share the daemon's \
memory, so no run's own peak is given. --prepare runs before each client starts, inside the \
window. The recording marks the window (window-start, window-end) and each client's start and \
end (client-start:N, client-end:N)."
    )]
    pub concurrency: u32,

    /// Shell command to run before each run (not timed; warmup runs too)
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,

    /// Pause between runs, e.g. 5s
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub cooldown: Option<Duration>,

    /// Go on when the client exits non-zero (else the bench stops with exit code 1)
    #[arg(long)]
    pub ignore_failure: bool,

    /// Write the runs and their statistics as JSON to FILE ('-' is stdout)
    #[arg(long, value_name = "FILE", value_parser = dest())]
    pub export_json: Option<Dest>,

    /// Write one CSV row per run to FILE ('-' is stdout)
    #[arg(long, value_name = "FILE", value_parser = dest())]
    pub export_csv: Option<Dest>,

    /// Write the runs and their statistics as a Markdown table to FILE ('-' is stdout)
    #[arg(long, value_name = "FILE", value_parser = dest())]
    pub export_markdown: Option<Dest>,

    /// Push each run's results to the Prometheus Pushgateway at URL (http://HOST:PORT): job memmon_bench, groups instance/bench/run
    #[arg(long, value_name = "URL")]
    pub push: Option<String>,

    /// With --push: the bench's name, the `bench` grouping label (default: the client program's file name)
    #[arg(long, value_name = "NAME", requires = "push")]
    pub push_name: Option<String>,

    #[command(flatten)]
    pub sampling: SamplingArgs,

    /// Print no progress, only errors and the table
    #[arg(short, long)]
    pub quiet: bool,

    /// Markers and phases within the runs (against a daemon): --mark-log, --phase-peaks, the
    /// socket of `memmon mark`
    #[command(flatten)]
    pub marks: MarkArgs,

    /// The cgroup whose peak is each run's: the daemon's own, or one memmon makes per run
    #[command(flatten)]
    pub cgroup: BenchCgroupArgs,

    /// Budgets of every run's peak: --max-peak, --max-cgroup
    #[command(flatten)]
    pub budgets: BudgetArgs,

    /// Sweeps of configurations: --parameter-list, --parameter-scan, --daemon
    #[command(flatten)]
    pub sweep: Box<SweepArgs>,

    /// The client to run each time (or, without a daemon, the command to measure), after `--`
    #[arg(last = true, required = true, value_name = "CLIENT")]
    pub client: Vec<String>,
}

/// A sweep: the bench once per configuration of the parameters, `{NAME}` replaced by its value
/// in the client, --prepare, --daemon, its ready paths and -o.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Sweeps")]
pub struct SweepArgs {
    /// Run the bench once per value of NAME, `{NAME}` replaced by it in the client, --prepare, --daemon and -o (repeat for a grid of several)
    #[arg(long, num_args = 2, value_names = ["NAME", "V1,V2,..."], action = clap::ArgAction::Append)]
    pub parameter_list: Vec<String>,

    /// Run the bench once per number from MIN to MAX in steps of --parameter-step-size, `{NAME}` replaced by it
    #[arg(long, num_args = 3, value_names = ["NAME", "MIN", "MAX"])]
    pub parameter_scan: Vec<String>,

    /// With --parameter-scan: the step between two values
    #[arg(
        long,
        default_value = "1",
        value_name = "STEP",
        requires = "parameter_scan"
    )]
    pub parameter_step_size: String,

    /// Start this daemon (sh -c CMD) for each configuration, in a memory cgroup of its own where memmon may make one; stop it after its runs (SIGTERM, then SIGKILL after --stop-timeout)
    #[arg(long, value_name = "CMD", conflicts_with_all = ["pid", "pidfile", "name", "wait"])]
    pub daemon: Option<String>,

    /// With --daemon: it is ready once FILE holds the PID of a live process (the one the bench then watches)
    #[arg(long, value_name = "FILE", requires = "daemon")]
    pub ready_pidfile: Option<PathBuf>,

    /// With --daemon: it is ready once the Unix socket PATH accepts a connection
    #[arg(long, value_name = "PATH", requires = "daemon")]
    pub ready_socket: Option<PathBuf>,

    /// With --daemon: it is ready once a line of its output (stdout or stderr, copied to memmon's stderr) matches REGEX
    #[arg(long, value_name = "REGEX", value_parser = regex, requires = "daemon")]
    pub ready_log: Option<Regex>,

    /// With --daemon: how long it may take to be ready before its configuration fails
    #[arg(long, default_value = "60s", value_parser = positive_duration, value_name = "DURATION", requires = "daemon")]
    pub ready_timeout: Duration,

    /// With a sweep: draw each configuration's throughput against its peak, the Pareto front joined, to FILE (.svg or .png)
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,

    /// With --daemon: how long SIGTERM may take to stop it before SIGKILL
    #[arg(long, default_value = "10s", value_parser = duration, value_name = "DURATION", requires = "daemon")]
    pub stop_timeout: Duration,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Example: memmon export --target cuzk=pidfile:/run/cuzk.pid \
--target db=name:postgres --window 15s\n\
Metrics: memmon_rss_bytes and its parts, memmon_window_peak_rss_bytes (the largest RSS over \
--window), memmon_target_up, memmon_restarts_total, memmon_missed_ticks_total; for a cgroup:PATH target memmon_cgroup_bytes, its parts, \
memmon_cgroup_limit_bytes and memmon_cgroup_window_peak_bytes; every series \
labelled target=\"NAME\" (no PID: a restart keeps its series). Guide: docs/guide/fleet.md."
)]
pub struct ExportArgs {
    /// Address to serve /metrics on (loopback by default; another address must be given explicitly)
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT", value_parser = listen_addr)]
    pub listen: SocketAddr,

    /// A target as NAME=pid:PID, NAME=pidfile:PATH, NAME=name:REGEX or NAME=cgroup:PATH (a memory cgroup's directory or path; repeat for more; followed across restarts)
    #[arg(long = "target", value_name = "NAME=KIND:VALUE", value_parser = export_target)]
    pub targets: Vec<ExportTarget>,

    /// Read targets from FILE, one NAME=KIND:VALUE a line ('#' starts a comment)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Time between samples of every target
    #[arg(short, long, default_value = "100ms", value_parser = interval, value_name = "DURATION")]
    pub interval: Duration,

    /// Length of the sliding window of memmon_window_peak_rss_bytes (set it to your scrape interval or longer)
    #[arg(long, default_value = "15s", value_parser = positive_duration, value_name = "DURATION")]
    pub window: Duration,

    /// Reset the kernel's high-water marks (VmHWM) after each sample, so the window peak holds each process's spikes between samples
    #[arg(
        long,
        long_help = "Reset each watched process's high-water mark (VmHWM, by writing 5 to \
/proc/PID/clear_refs) after each sample, so the next sample's VmHWM is the exact peak since \
this one and the window peak misses no process's spike (for a tree it stays a lower bound: \
each process's mark counts alone, their sum only at the samples). Off by default: other tools reading VmHWM of \
these processes then see the peak since memmon's last sample, not since the process started. \
Without it, a spike between samples is still exact when it raises VmHWM above every earlier peak. \
For a cgroup:PATH target the same holds of the cgroup's peak file (v1 memory.max_usage_in_bytes: \
written 0, which other readers of that file then see; v2 memory.peak: written through a descriptor \
of memmon's own, Linux 6.12 and later, which is no private reset either: a write by any program \
lowers the mark every reader of the file sees to the usage of that moment)."
    )]
    pub reset_peaks: bool,

    /// Watch each target's process alone, not its descendants
    #[arg(long)]
    pub no_children: bool,

    /// Do not read the kernel's exit records (taskstats): a process that peaks and exits between two samples is then missed
    #[arg(long)]
    pub no_taskstats: bool,

    #[command(flatten)]
    pub pss_args: PssArgs,

    /// Print no messages about targets found, exited or restarted
    #[arg(short, long)]
    pub quiet: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        // Every flag, group, conflict and requirement names things that exist, no two flags
        // share a name, defaults parse: what clap checks only when a flag is used.
        Cli::command().debug_assert();
    }

    #[test]
    fn a_deferred_subcommand_keeps_its_own_about_and_gets_its_flags_when_built() {
        // Before its flags are built, a subcommand has only what the variant set: its name and
        // the one-line about of the top-level listing. Building it (as parsing it or asking for
        // its help does) adds the flags and keeps that about, though a flattened group's doc
        // comment would set another.
        let unbuilt = Cli::command();
        let mut built = Cli::command();
        built.build();
        for sub in unbuilt.get_subcommands() {
            let name = sub.get_name();
            assert_eq!(
                sub.get_arguments().count(),
                0,
                "{name}: built before it was asked for"
            );
            let about = sub.get_about().map(ToString::to_string);
            assert!(about.is_some(), "{name}");
            let done = built.find_subcommand(name).unwrap();
            assert_eq!(done.get_about().map(ToString::to_string), about, "{name}");
            assert!(
                done.get_arguments().any(|a| a.get_long().is_some()),
                "{name}: no flags"
            );
        }
    }

    fn parse(args: &[&str]) -> Command {
        Cli::try_parse_from(std::iter::once("memmon").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .command
    }

    /// A v2 memory.peak reset is no private one (the kernel lowers every writer's mark to the
    /// usage of that moment): export's help does not promise a reset for memmon's descriptor only.
    #[test]
    fn exports_help_calls_no_cgroup_peak_reset_private() {
        let help = Cli::command()
            .find_subcommand_mut("export")
            .unwrap()
            .render_long_help()
            .to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(!help.contains("descriptor only"), "{help}");
        assert!(help.contains("no private reset either"), "{help}");
    }

    #[test]
    fn an_old_spelling_is_a_hidden_alias_of_the_new_one() {
        for flag in ["--reset-peaks", "--reset-peak"] {
            let Command::Record(r) = parse(&["record", "--pid", "1", flag]) else {
                panic!("not record")
            };
            assert!(r.reset_peaks, "{flag}");
        }
        let help = Cli::command()
            .find_subcommand_mut("record")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(help.contains("--reset-peaks"), "{help}");
        assert!(!help.contains("--reset-peak "), "{help}");
    }

    #[test]
    fn a_dash_output_is_stdout_in_every_subcommand() {
        let Command::Record(r) = parse(&["record", "-o", "-", "--", "true"]) else {
            panic!("not record")
        };
        assert_eq!(r.sampling.output, Some(Dest::Stdout));
        let Command::Bench(b) = parse(&["bench", "--export-json", "-", "-o", "r.csv", "--", "x"])
        else {
            panic!("not bench")
        };
        assert_eq!(b.export_json, Some(Dest::Stdout));
        assert_eq!(b.sampling.output, Some(Dest::File("r.csv".into())));
        let Command::Report(r) = parse(&["report", "a.csv", "-o", "-"]) else {
            panic!("not report")
        };
        assert_eq!(r.output, Some(Dest::Stdout));
    }

    #[test]
    fn one_target_flag_at_most_and_each_the_same_in_record_and_bench() {
        for sub in ["record", "bench"] {
            let e = Cli::try_parse_from(["memmon", sub, "--pid", "1", "--name", "x", "--", "y"])
                .unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{sub}");
            let e = Cli::try_parse_from(["memmon", sub, "--name", "(", "--", "y"]).unwrap_err();
            assert!(e.to_string().contains("not a valid regex"), "{sub}: {e}");
        }
        let Command::Bench(b) = parse(&["bench", "--pidfile", "/run/d.pid", "--", "c"]) else {
            panic!("not bench")
        };
        assert!(
            matches!(b.daemon.spec(), Some(TargetSpec::Pidfile(p)) if p == std::path::Path::new("/run/d.pid"))
        );
    }

    #[test]
    fn export_takes_typed_targets_and_a_socket_address() {
        let Command::Export(e) = parse(&[
            "export",
            "--listen",
            "[::1]:9464",
            "--target",
            "db=name:^postgres$",
        ]) else {
            panic!("not export")
        };
        assert_eq!(e.listen, "[::1]:9464".parse::<SocketAddr>().unwrap());
        assert_eq!(e.targets[0].name, "db");
        assert!(matches!(e.targets[0].spec, TargetSpec::Name(_)));
    }
}

/// `--anatomy` and its flags (`record`, `bench`).
#[derive(Args, Debug, Clone)]
pub struct AnatomyArgs {
    /// Also record what the memory is made of (the tree's mappings, grouped) into FILE.anatomy.jsonl (record: needs -o FILE)
    #[arg(
        long,
        help_heading = "Anatomy",
        long_help = "Also record what the memory is made of: the tree's mappings from \
/proc/PID/maps (no page-table walk), grouped (heap, stacks, anonymous mappings by size class, files \
by path, memfds, shared memory, devices, huge pages), into a side file FILE.anatomy.jsonl next to \
the recording (-o FILE). Read on a thread of its own at the first sample, at each phase's end \
(the next marker) and bench run's end, at the end, and at the highest point of every stretch \
between them: at each new high of the tree's RSS at least --anatomy-rise above the last one read \
in the stretch, and where the tree stops rising below that (a top held for two samples), the \
highest kept. Resident sizes per group come from /proc/PID/smaps, read of \
each process whose RSS is at most --anatomy-smaps-max (smaps walks every page table: about 20 ms \
per GiB). `memmon summary` says what grew between the idle floor and the peak, and in each phase \
(from its start to its highest); bench (against a daemon only): what grew in each run from the \
idle floor's anatomy to the run's highest, and -o FILE keeps the anatomy table beside the \
recording (without -o, none is written)."
    )]
    pub anatomy: bool,

    /// With --anatomy: within a stretch, a new high must be this much above the last anatomy read in it
    #[arg(long, default_value = "1%", value_parser = percent, value_name = "PERCENT", help_heading = "Anatomy", requires = "anatomy")]
    pub anatomy_rise: f64,

    /// With --anatomy: at most one read at a new high every this long (the reads also take at most a tenth of the time)
    #[arg(long, default_value = "0s", value_parser = duration, value_name = "DURATION", help_heading = "Anatomy", requires = "anatomy")]
    pub anatomy_gap: Duration,

    /// With --anatomy: read smaps (resident sizes) only of processes whose RSS is at most this; 0: never
    #[arg(long, default_value = "1GiB", value_parser = size, value_name = "SIZE", help_heading = "Anatomy", requires = "anatomy")]
    pub anatomy_smaps_max: u64,

    /// With --anatomy: no ledger of mappings (the kernel's mmap, munmap, mremap and brk calls with the stacks that made them)
    #[arg(
        long,
        help_heading = "Anatomy",
        requires = "anatomy",
        long_help = "With --anatomy: no ledger of mappings. By default, where memmon may use perf \
(CAP_PERFMON, or root), it follows the tree's mmap, munmap, mremap and brk calls through the \
kernel's syscall tracepoints (filtered in the kernel to --ledger-min and more), attached to a \
running process without restarting it, and unwinds the user stack of each large mapping (no \
frame pointers needed) to the functions that made it: each anatomy then holds the live mappings \
by the stack that made them. Without the privilege it says so and reads the anatomies without."
    )]
    pub no_ledger: bool,

    /// With --anatomy: the ledger follows mmap, munmap and mremap calls of at least this length (and brk raises of it get their stack)
    #[arg(long, default_value = "1MiB", value_parser = size, value_name = "SIZE", help_heading = "Anatomy", requires = "anatomy", conflicts_with = "no_ledger")]
    pub ledger_min: u64,

    /// With --anatomy and its ledger: one page fault in N sampled with its address and stack, so each anatomy credits the resident memory to the code that first touched it, whatever allocator handed it out (0: none)
    #[arg(
        long,
        default_value_t = memmon::probe::mapcalls::DEFAULT_TOUCH_EVERY,
        value_name = "N",
        help_heading = "Anatomy",
        requires = "anatomy",
        conflicts_with = "no_ledger",
        long_help = "With --anatomy and its ledger: one page fault in N sampled (perf's software event page-faults, on every CPU) with the faulting address and the user stack. At each anatomy every data mapping's resident bytes (smaps' Rss) are shared among the stacks whose sampled pages in it are still present (pagemap), in proportion: the code that first touched the memory, whether it came from glibc's brk heap or arenas, jemalloc, mimalloc or mmap. A smaller N is a finer estimate at more cost: each sample copies 8 KiB of stack (N = 1024 is one sample per 4 MiB of 4 KiB pages faulted). N is taken up to the next prime (1024: 1031; the metadata and the summary say which), so that a program whose faults come round in a fixed order, as a prover pushing to four vectors in turn, does not have every sample fall on the same one. 0: no sampling."
    )]
    pub touch_every: u64,

    /// With --anatomy and its ledger: keep the kernel's events to the recording's cgroup in the kernel, where it holds the tree alone on a v2 host (Linux 6.1 and later), so no other process's calls reach memmon (off by default)
    #[arg(
        long,
        help_heading = "Anatomy",
        requires = "anatomy",
        conflicts_with = "no_ledger",
        long_help = "With --anatomy and its ledger: open the ledger's events for the recording's \
cgroup (PERF_FLAG_PID_CGROUP) where it holds the tree alone (memmon's own for a launched command, \
or --cgroup found to) on a v2 host with Linux 6.1 or later: the kernel then keeps every other \
process's calls and page faults out of the rings, which on a busy host is most of them. Off by \
default: cgroup events make the kernel patch its scheduler's hot path, and in guests QEMU \
emulated on several threads at once that crashed the kernel (memmon's lane, Debian's 6.12 and 7.3, \
before it emulated on one); not yet proven as the default since."
    )]
    pub ledger_in_kernel: bool,
}

impl AnatomyArgs {
    /// The anatomies asked for (`None` without `--anatomy`).
    pub fn options(&self) -> Option<memmon::sampler::anatomy::AnatomyOptions> {
        self.anatomy
            .then(|| memmon::sampler::anatomy::AnatomyOptions {
                rise: self.anatomy_rise / 100.0,
                gap: self.anatomy_gap,
                smaps: (self.anatomy_smaps_max > 0).then_some(memmon::sampler::record::PssGuard {
                    every: Duration::ZERO,
                    max_rss: self.anatomy_smaps_max,
                    force: false,
                }),
                ledger: (!self.no_ledger).then(|| memmon::probe::mapcalls::Options {
                    min_bytes: self.ledger_min.max(1),
                    touch_every: self.touch_every,
                    in_kernel: self.ledger_in_kernel,
                    ..Default::default()
                }),
            })
    }
}
