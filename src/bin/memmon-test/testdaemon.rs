//! A daemon of known memory and its client, for the bench tests (`memmon-test test-daemon`,
//! `memmon-test test-client`): the daemon
//! serves requests on a Unix socket, each mapping and touching exactly SIZE, holding it, freeing it.
//!
//! Protocol: one line per connection, `SIZE_BYTES HOLD_US\n`; the reply is `ok\n` once the
//! memory is freed again. With `--leak SIZE` the daemon keeps that much more after each request.
//! With `--fork` each request is served by a child process of its own (as a pre-forking or
//! process-per-connection server does): it maps the memory, holds it and exits, and the daemon
//! reaps it before it replies, so the daemon's own memory never moves.
//!
//! Shaped like a GPU prover: `--locked SIZE` keeps that much mlock'd from the start (its
//! parameters), `--shared SIZE` a shared mapping, `--threads N` serves each request's SIZE as N
//! partitions allocated at once by N threads, and `--helper SIZE` starts, with each request, a
//! helper process that maps and touches SIZE, holds it while the partitions are held (the hold
//! time starts once both are touched), and exits (reaped before the reply): a process that lives and dies between two samples.
//!
//! With `--phases` the daemon marks its phases through `memmon_mark::MarkLayer`, as a Rust
//! daemon would from its `tracing` spans: each request is a span `proof` holding a span
//! `synthesis` (SIZE, served as above) and a span `gpu` (SIZE/2 mapped, touched, held, freed),
//! so the markers are `proof`, `synthesis`, `proof`, `gpu`, `proof`, `idle`. `--phases-wait`
//! has each boundary wait for its row (`MarkLayer::wait_for_row`).

use clap::Args;
use memmon::sys::raw::{self, Forked};
use memmon::units::{parse_duration, parse_size};
use memmon::workload::Block;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct TestDaemonArgs {
    /// Listen on this Unix socket (a stale one is replaced)
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,

    /// Keep this much more memory after each request (a leaking daemon)
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub leak: Option<u64>,

    /// Write the daemon's PID to FILE once it listens
    #[arg(long, value_name = "FILE")]
    pub pidfile: Option<PathBuf>,

    /// Serve each request in a child process that exits when done (reaped before the reply)
    #[arg(long, conflicts_with = "leak")]
    pub fork: bool,

    /// Keep this much mlock'd from the start (VmLck: a prover's parameters)
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub locked: Option<u64>,

    /// Keep a shared mapping of this much from the start (RssShmem)
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub shared: Option<u64>,

    /// Serve each request as this many partitions, allocated at once by as many threads
    #[arg(long, default_value_t = 1, value_name = "N", conflicts_with = "fork")]
    pub threads: usize,

    /// With each request, a helper process that maps and touches SIZE, holds it while the
    /// partitions are held, and exits
    #[arg(long, value_parser = size, value_name = "SIZE", conflicts_with = "fork")]
    pub helper: Option<u64>,

    /// Mark each request's phases (proof, synthesis, gpu, then idle) through memmon-mark's
    /// tracing layer
    #[arg(long, conflicts_with = "fork")]
    pub phases: bool,

    /// With --phases: each phase boundary waits until memmon has taken its row
    #[arg(long, requires = "phases")]
    pub phases_wait: bool,

    /// Serve up to N requests at once, each on a worker thread of its own; more wait in the
    /// socket's queue (throughput saturates at N requests per hold time)
    #[arg(long, default_value_t = 1, value_name = "N", conflicts_with_all = ["fork", "phases", "leak"])]
    pub workers: usize,
}

#[derive(Args, Debug)]
pub struct TestClientArgs {
    /// The daemon's Unix socket
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,

    /// Memory the daemon should allocate; a comma-separated list is taken in turn by run number
    /// (MEMMON_BENCH_RUN, from 1)
    #[arg(long, value_name = "SIZE[,SIZE...]")]
    pub size: String,

    /// How long the daemon holds the memory
    #[arg(long, default_value = "5ms", value_parser = duration, value_name = "DURATION")]
    pub hold: Duration,

    /// Exit with code 1 after the request (a failing client)
    #[arg(long)]
    pub fail: bool,
}

fn size(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// Serves requests one at a time until killed.
pub fn daemon(args: &TestDaemonArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let _ = std::fs::remove_file(&args.socket);
    let listener = UnixListener::bind(&args.socket)
        .with_context(|| format!("cannot listen on {} (--socket)", args.socket.display()))?;
    // Held for the daemon's whole life; mapped before the pidfile says the daemon is ready.
    let _params = match args.locked {
        Some(n) => {
            let b = Block::touched(n as usize).context("cannot map --locked")?;
            b.lock()
                .context("cannot mlock --locked (RLIMIT_MEMLOCK: `ulimit -l`)")?;
            Some(b)
        }
        None => None,
    };
    let _shared = match args.shared {
        Some(n) => Some(Block::shared_touched(n as usize).context("cannot map --shared")?),
        None => None,
    };
    if args.phases {
        use tracing_subscriber::layer::SubscriberExt;
        let layer = memmon_mark::MarkLayer::new()
            .span("proof")
            .span("synthesis")
            .span("gpu")
            .wait_for_row(args.phases_wait);
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .context("cannot install the tracing layer (--phases)")?;
    }
    if let Some(p) = &args.pidfile {
        memmon::output::write_whole(p, format!("{}\n", std::process::id()).as_bytes(), true)
            .with_context(|| format!("cannot write {} (--pidfile)", p.display()))?;
    }
    if args.workers > 1 {
        // Each worker takes the next connection off the one listening socket.
        std::thread::scope(|scope| -> anyhow::Result<()> {
            for _ in 0..args.workers {
                let l = listener
                    .try_clone()
                    .context("cannot share the socket among --workers")?;
                scope.spawn(move || {
                    for conn in l.incoming() {
                        let Ok(conn) = conn else { continue };
                        answer(&conn, args, &mut Vec::new());
                    }
                });
            }
            Ok(())
        })?;
        return Ok(());
    }
    let mut leaked: Vec<Block> = Vec::new();
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        answer(&conn, args, &mut leaked);
    }
    Ok(())
}

/// Reads one request from `conn`, serves it and replies; with `--leak`, what is kept goes into
/// `leaked`.
fn answer(conn: &UnixStream, args: &TestDaemonArgs, leaked: &mut Vec<Block>) {
    let mut line = String::new();
    let mut reader = BufReader::new(conn);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let reply = match parse_request(&line) {
        Ok((bytes, hold)) if args.fork => serve_in_child(bytes, hold),
        Ok((bytes, hold)) => match serve_request(bytes, hold, args) {
            Ok(()) => {
                if let Some(l) = args.leak {
                    if let Ok(b) = Block::touched(l as usize) {
                        leaked.push(b);
                    }
                }
                "ok\n".to_string()
            }
            Err(e) => format!("error: cannot serve {bytes} bytes: {e}\n"),
        },
        Err(e) => format!("error: {e}\n"),
    };
    let mut w = conn;
    let _ = w.write_all(reply.as_bytes());
}

/// Serves one request: in its phases' spans with `--phases`.
fn serve_request(bytes: u64, hold: Duration, args: &TestDaemonArgs) -> std::io::Result<()> {
    if !args.phases {
        return serve(bytes, hold, args);
    }
    let _proof = tracing::info_span!("proof").entered();
    tracing::info_span!("synthesis").in_scope(|| serve(bytes, hold, args))?;
    tracing::info_span!("gpu").in_scope(|| {
        let block = Block::touched((bytes / 2) as usize)?;
        std::thread::sleep(hold);
        drop(block);
        Ok(())
    })
}

/// Serves one request in the daemon itself: its helper started (`--helper`), `bytes` mapped and
/// touched as `--threads` partitions at once, held, freed; the helper released and reaped.
fn serve(bytes: u64, hold: Duration, args: &TestDaemonArgs) -> std::io::Result<()> {
    let helper = match args.helper {
        Some(h) => {
            // The helper says when its memory is touched (a byte on `ready`) and holds it until
            // the daemon lets go of the partitions (it closes `release`): the daemon holds its
            // partitions only once the helper's pages are touched too, so the two are held at
            // once for the hold time however slowly either was touched on a busy machine.
            let cloexec = rustix::pipe::PipeFlags::CLOEXEC;
            let (until, release) = rustix::pipe::pipe_with(cloexec)?;
            let (ready, say_ready) = rustix::pipe::pipe_with(cloexec)?;
            let (mut until, mut say_ready) =
                (std::fs::File::from(until), std::fs::File::from(say_ready));
            // SAFETY: forked before any thread of this request starts; the child only maps,
            // touches, writes and reads pipes, and exits.
            match unsafe { raw::fork() }? {
                Forked::Child => {
                    drop((release, ready));
                    let code = match Block::touched(h as usize) {
                        Ok(_block) => {
                            let _ = say_ready.write_all(b"r");
                            let _ = until.read(&mut [0u8; 1]); // EOF: released
                            0
                        }
                        Err(_) => 1,
                    };
                    raw::exit_now(code)
                }
                Forked::Parent { child } => Some((child, release, std::fs::File::from(ready))),
            }
        }
        None => None,
    };
    let n = args.threads.max(1) as u64;
    let part = bytes / n;
    let partitions: Vec<std::io::Result<Block>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let len = if i + 1 == n {
                    bytes - part * (n - 1)
                } else {
                    part
                };
                s.spawn(move || Block::touched(len as usize))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a partition thread panicked"))
            .collect()
    });
    let partitions: std::io::Result<Vec<Block>> = partitions.into_iter().collect();
    if partitions.is_ok() {
        if let Some((_, _, ready)) = &helper {
            let _ = (&*ready).read(&mut [0u8; 1]); // a byte, or EOF if the helper failed
        }
        std::thread::sleep(hold);
    }
    // Freed before the reply.
    let served = partitions.map(drop);
    if let Some((pid, release, _)) = helper {
        drop(release);
        memmon::sys::wait_child(pid)?;
    }
    served
}

/// Forks a child that maps and touches `bytes`, holds them and exits; reaps it; the reply.
fn serve_in_child(bytes: u64, hold: Duration) -> String {
    // SAFETY: the daemon is single-threaded, so the child may do anything the parent could.
    match unsafe { raw::fork() } {
        Ok(Forked::Child) => {
            let code = match Block::touched(bytes as usize) {
                Ok(block) => {
                    std::thread::sleep(hold);
                    drop(block);
                    0
                }
                Err(_) => 1,
            };
            raw::exit_now(code)
        }
        Ok(Forked::Parent { child }) => match memmon::sys::wait_child(child) {
            Ok(status) if status.exit_status() == Some(0) => "ok\n".into(),
            Ok(_) => format!("error: the worker could not map {bytes} bytes\n"),
            Err(e) => format!("error: cannot wait for the worker: {e}\n"),
        },
        Err(e) => format!("error: cannot fork: {e}\n"),
    }
}

fn parse_request(line: &str) -> Result<(u64, Duration), String> {
    let mut w = line.split_ascii_whitespace();
    let bytes = w.next().and_then(|b| b.parse().ok());
    let hold = w.next().and_then(|h| h.parse().ok());
    match (bytes, hold) {
        (Some(b), Some(h)) => Ok((b, Duration::from_micros(h))),
        _ => Err(format!(
            "bad request '{}' (expected 'SIZE_BYTES HOLD_US')",
            line.trim()
        )),
    }
}

/// Sends one request; returns the exit code (1 with `--fail` or when the daemon refuses).
pub fn client(args: &TestClientArgs) -> anyhow::Result<i32> {
    use anyhow::Context;
    let sizes: Vec<u64> = args
        .size
        .split(',')
        .map(parse_size)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--size: {e}"))?;
    let run: usize = std::env::var("MEMMON_BENCH_RUN")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let bytes = sizes[run.max(1).saturating_sub(1) % sizes.len()];
    let mut conn = UnixStream::connect(&args.socket)
        .with_context(|| format!("cannot connect to {} (--socket)", args.socket.display()))?;
    writeln!(conn, "{bytes} {}", args.hold.as_micros()).context("cannot send the request")?;
    let mut reply = String::new();
    BufReader::new(&conn)
        .read_line(&mut reply)
        .context("cannot read the reply")?;
    if reply.trim() != "ok" {
        eprintln!("test-client: the daemon answered '{}'", reply.trim());
        return Ok(1);
    }
    if args.fail {
        eprintln!("test-client: failing as asked (--fail)");
        return Ok(1);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_a_size_and_a_hold_time() {
        assert_eq!(
            parse_request("4096 5000\n").unwrap(),
            (4096, Duration::from_millis(5))
        );
        assert!(parse_request("lots\n").unwrap_err().contains("lots"));
    }
}
