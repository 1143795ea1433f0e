//! Helpers shared by the integration tests: the memmon binary, temp dirs, workloads.

#![allow(dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

pub const MIB: u64 = 1 << 20;

/// The memmon binary under test.
pub fn memmon() -> Command {
    Command::cargo_bin("memmon").unwrap()
}

/// The path of the memmon binary, for spawning it with std::process.
pub fn memmon_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("memmon")
}

/// The path of `memmon-test` (src/bin/memmon-test/): the workload, test daemon and test client.
pub fn memmon_test_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("memmon-test")
}

/// The arguments that run a workload of known memory (see src/workload.rs).
pub fn workload(steps: &[&str]) -> Vec<String> {
    let mut v = vec![
        memmon_test_path().display().to_string(),
        "workload".to_string(),
    ];
    v.extend(steps.iter().map(|s| s.to_string()));
    v
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Reads `summary --json` of a recording.
/// True when one of `summary --json`'s warnings contains `text`.
pub fn warns(summary: &serde_json::Value, text: &str) -> bool {
    summary["warnings"].as_array().is_some_and(|w| {
        w.iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains(text)))
    })
}

/// `memmon summary PATH`'s text, which must succeed.
pub fn summary_text(path: &Path) -> String {
    let out = memmon().arg("summary").arg(path).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn summary_json(path: &Path) -> serde_json::Value {
    let out = memmon()
        .arg("summary")
        .arg("--json")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "summary failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Reads a CSV recording with the csv crate (no options): header and rows.
pub fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let headers = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    (headers, rows)
}

/// Column `name` of every row, as integers.
pub fn column(path: &Path, name: &str) -> Vec<u64> {
    let (h, rows) = read_csv(path);
    let i = h
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    rows.iter().filter_map(|r| r[i].parse().ok()).collect()
}

/// Waits up to `secs` for `cond`.
pub fn wait_for(secs: f64, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    while std::time::Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// `memmon record FLAGS -o OUT -- memmon-test workload STEPS`, ready to run and assert on.
pub fn record_workload(out: &Path, flags: &[&str], steps: &[&str]) -> Command {
    let mut c = memmon();
    c.arg("record")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg("--")
        .args(workload(steps));
    c
}

/// Runs `memmon ARGS` under GNU time: its exit code, its stderr, and memmon's peak RSS in
/// bytes (`%M`).
pub fn memmon_under_time<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String, u64) {
    let out = std::process::Command::new(outside_program("time"))
        .args(["-f", "maxrss_kib %M"])
        .arg(memmon_path())
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let kib: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("maxrss_kib "))
        .and_then(|k| k.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak from GNU time in: {err}"));
    (out.status.code().unwrap_or(-1), err, kib << 10)
}

/// The flame graph a report embeds (a base64 `data:` URL), as SVG text.
/// `memmon report -o HTML RECORDING`, which must succeed: the page.
pub fn report_html(recording: &Path, html: &Path) -> String {
    memmon()
        .args(["report", "-o"])
        .arg(html)
        .arg(recording)
        .assert()
        .success();
    std::fs::read_to_string(html).unwrap()
}

pub fn report_flame_graph(html: &str) -> String {
    let at = html
        .find("data:image/svg+xml;base64,")
        .expect("no flame graph");
    let b64 = &html[at + 26..];
    let b64 = &b64[..b64.find('"').unwrap()];
    use base64::Engine as _;
    let svg = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    String::from_utf8(svg).unwrap()
}

/// tests/NAME.c built into `dir`/NAME as C is released (-O2, no frame pointers: the stacks the
/// ledger unwinds have none), with `flags` besides; fails the test with cc's message.
pub fn build_c_program(name: &str, dir: &Path, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/{name}.c"));
    let out = dir.join(name);
    let done = std::process::Command::new(outside_program("cc"))
        .args(["-O2", "-fomit-frame-pointer"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    out
}

/// The path of an outside program the tests run, found as `tests/outside-programs.txt` says
/// (a name on PATH, or a path pattern with `*` for a version directory). A missing program
/// fails the test, naming its Debian package: a test never passes silently without it.
pub fn outside_program(name: &str) -> PathBuf {
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/outside-programs.txt");
    let text = std::fs::read_to_string(&list).unwrap();
    let (pattern, package) = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 3 && f[0] == name)
        .map(|f| (f[1].to_string(), f[2].to_string()))
        .unwrap_or_else(|| panic!("{name} is not listed in {}", list.display()));
    find_program(&pattern).unwrap_or_else(|| {
        panic!(
            "{name} is needed by this test and was not found ({pattern}): run ./scripts/test, \
             which installs it, or `apt-get install -y {package}`"
        )
    })
}

/// A name on PATH, or the first match of a path pattern whose `*` stands for one directory.
fn find_program(pattern: &str) -> Option<PathBuf> {
    if !pattern.contains('/') {
        let path = std::env::var_os("PATH")?;
        return std::env::split_paths(&path)
            .map(|d| d.join(pattern))
            .find(|p| p.is_file());
    }
    let mut found = vec![PathBuf::from("/")];
    for part in Path::new(pattern).iter().skip(1) {
        let part = part.to_str()?;
        found = match part.split_once('*') {
            None => found.into_iter().map(|d| d.join(part)).collect(),
            Some((pre, post)) => {
                let mut next: Vec<PathBuf> = found
                    .iter()
                    .filter_map(|d| std::fs::read_dir(d).ok())
                    .flatten()
                    .flatten()
                    .filter(|e| {
                        let n = e.file_name();
                        let n = n.to_string_lossy();
                        n.len() >= pre.len() + post.len() && n.starts_with(pre) && n.ends_with(post)
                    })
                    .map(|e| e.path())
                    .collect();
                next.sort();
                next.reverse(); // the newest version directory first
                next
            }
        };
    }
    found.into_iter().find(|p| p.is_file())
}

/// A `memmon test-daemon` that memmon did not start (to attach to), killed when dropped.
pub struct SpikedDaemon {
    pub child: std::process::Child,
    pub socket: PathBuf,
}

impl SpikedDaemon {
    /// Starts the daemon in `dir` and has it touch and free `spike` once, so its high-water mark
    /// (VmHWM) holds a peak from before any recording.
    pub fn start(dir: &Path, spike: &str) -> SpikedDaemon {
        let socket = dir.join("spiked.sock");
        let pidfile = dir.join("spiked.pid");
        let child = std::process::Command::new(memmon_test_path())
            .arg("test-daemon")
            .arg("--socket")
            .arg(&socket)
            .arg("--pidfile")
            .arg(&pidfile)
            .spawn()
            .unwrap();
        assert!(
            wait_for(10.0, || pidfile.exists()),
            "the test daemon did not start"
        );
        let d = SpikedDaemon { child, socket };
        d.spike(spike);
        d
    }

    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Has the daemon touch `size` and free it again; returns once it is freed.
    pub fn spike(&self, size: &str) {
        Command::new(memmon_test_path())
            .arg("test-client")
            .arg("--socket")
            .arg(&self.socket)
            .args(["--size", size])
            .assert()
            .success();
    }

    /// VmHWM of the daemon now, from /proc.
    pub fn hwm_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    }

    /// `memmon record --pid P -i 100ms --duration DUR FLAGS -o OUT` of the idle daemon.
    pub fn record(&self, out: &Path, duration: &str, flags: &[&str]) -> assert_cmd::assert::Assert {
        memmon()
            .args([
                "record",
                "--pid",
                &self.pid(),
                "-i",
                "100ms",
                "--duration",
                duration,
            ])
            .args(flags)
            .arg("-o")
            .arg(out)
            .assert()
            .success()
    }
}

impl Drop for SpikedDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a workload that memmon did not launch (to attach to by PID or name).
pub fn spawn_workload(steps: &[&str]) -> std::process::Child {
    let argv = workload(steps);
    std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .spawn()
        .unwrap()
}

/// Starts memmon in the background with its stdout and stderr captured.
pub fn spawn_memmon(args: &[&str]) -> std::process::Child {
    std::process::Command::new(memmon_path())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// memmon running in the background, its stderr collected as it comes: a test waits for what
/// memmon says (`wait_for_stderr`) before it acts, rather than sleeping and hoping a busy
/// machine was quick enough. Its stdout goes nowhere.
pub struct Running {
    child: std::process::Child,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    pub fn spawn(args: &[&str]) -> Running {
        let mut child = std::process::Command::new(memmon_path())
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (mut pipe, into) = (child.stderr.take().unwrap(), stderr.clone());
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut pipe, &mut buf) {
                if n == 0 {
                    break;
                }
                into.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Running {
            child,
            stderr,
            reader: Some(reader),
        }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `secs` for memmon to have said `text` on stderr.
    pub fn wait_for_stderr(&self, text: &str, secs: f64) -> bool {
        wait_for(secs, || self.stderr.lock().unwrap().contains(text))
    }

    /// What memmon said so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling a child we spawned and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Waits for memmon to end: its exit status and all it said.
    pub fn finish(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        (status, self.stderr())
    }
}

/// The resident size of process `pid` (VmRSS), in bytes; 0 once it is gone.
pub fn rss_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// Whether process `pid` has a handler for signal `sig` (SigCgt of its status): memmon is far
/// enough in its start to take the signal as a request to stop.
pub fn catches(pid: u32, sig: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

/// Waits until process `pid` holds at least `bytes` (a workload that has touched its memory).
pub fn wait_for_rss(pid: u32, bytes: u64) {
    assert!(
        wait_for(30.0, || rss_of(pid) >= bytes),
        "PID {pid} never reached {bytes} bytes resident"
    );
}

/// Wake-ups of `pid`: its voluntary context switches (a thread going to sleep, to be woken
/// later), summed over every thread. Preemptions (nonvoluntary switches) are left out: they count
/// how busy the machine is, not how often memmon wakes.
pub fn wake_ups(pid: u32) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue; // a thread that just ended
        };
        total += status
            .lines()
            .filter(|l| l.starts_with("voluntary_ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// Whether the tests run as root (some attacks need a second user or a device node to stage).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no failure mode and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// Makes a FIFO at `path` (mode 0600).
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(
        // SAFETY: a valid NUL-terminated path.
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
        0,
        "mkfifo {}",
        path.display()
    );
}

/// Opens the FIFO at `path` for reading without blocking: a reader is there (writers' opens
/// succeed) until it is dropped; `drain` reads what came.
pub struct FifoReader(std::fs::File);

impl FifoReader {
    pub fn open(path: &Path) -> FifoReader {
        use std::os::unix::fs::OpenOptionsExt;
        FifoReader(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .unwrap(),
        )
    }

    /// The bytes waiting in the FIFO now.
    pub fn drain(&mut self) -> Vec<u8> {
        use std::io::Read;
        let mut all = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading the FIFO: {e}"),
            }
        }
        all
    }
}

/// The PIDs of the live processes whose environment holds `KEY=VALUE` (a test's token, passed
/// to what it starts: every descendant inherits it). Root reads every process's environment.
pub fn processes_with_env(key: &str, value: &str) -> Vec<i32> {
    let entry = format!("{key}={value}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        // A zombie's environment reads empty: it has ended, only its parent has yet to reap it.
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|v| v == entry.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// The command line of `pid`, its arguments joined by spaces (empty once it is gone).
pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default()
}

/// Whether the machine the tests run on promises `what` (`cgroup2`, `psi`, `numa`, `swap`,
/// `memory.peak`, `memory.peak-reset`): the VM lane (scripts/vm) lists what each kernel it boots
/// offers in `MEMMON_TEST_HOST`, so that there a test that needs one of them fails rather than
/// skips. Elsewhere nothing is promised.
pub fn host_promises(what: &str) -> bool {
    std::env::var("MEMMON_TEST_HOST").is_ok_and(|h| h.split_whitespace().any(|w| w == what))
}

/// `have`, where the test may go on; else it says `skipped: why` and the test returns, unless the
/// host promised `what` (`host_promises`): then the test fails, naming it.
pub fn host_has(what: &str, have: bool, why: &str) -> bool {
    if !have {
        assert!(
            !host_promises(what),
            "this host promised {what} (MEMMON_TEST_HOST), but {why}"
        );
        eprintln!("skipped: {why}");
    }
    have
}

/// What a test may need of the machine, each probed on its own (`Need::met`), so that a skip
/// can be held against what the machine has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// root: another user's files and processes, mounts, namespaces.
    Root,
    /// root and setpriv: memmon (or a target) run as nobody.
    RunAsNobody,
    /// A memory cgroup a test may make (v1's hierarchy, or v2 with the memory controller).
    MemoryCgroup,
    /// perf's events on every CPU with the syscall tracepoints: the ledger (`--anatomy`'s stacks).
    Perf,
    /// perf kept from the unprivileged (perf_event_paranoid 0 or more).
    PerfRestricted,
}

impl Need {
    /// Whether this machine has it, probed apart from the test that skipped.
    pub fn met(self) -> bool {
        match self {
            Need::Root => is_root(),
            Need::RunAsNobody => is_root() && Path::new("/usr/bin/setpriv").exists(),
            Need::MemoryCgroup => crate::cgroup::memory_hierarchy().is_some(),
            Need::Perf => {
                static OPENS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
                *OPENS.get_or_init(|| {
                    use memmon::probe::mapcalls::{Faults, MapCalls, Options};
                    MapCalls::open(Options::default(), None, Faults::Everyone).is_ok()
                })
            }
            Need::PerfRestricted => std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .is_ok_and(|p| p.trim().parse::<i32>().is_ok_and(|p| p >= 0)),
        }
    }
}

/// Whether the tests run strict (`MEMMON_TEST_STRICT=1`, as CI runs them): a test that skips
/// where the machine has what it needs fails.
pub fn strict() -> bool {
    std::env::var("MEMMON_TEST_STRICT").is_ok_and(|v| v == "1")
}

/// Says `skipped: why`, after which the test returns (or leaves out the part that needs `need`).
/// Strict (`strict`), where the machine has `need` this fails instead: the test did not run for
/// a reason of its own, and a skip would pass it unseen.
pub fn skip(need: Need, why: &str) {
    skip_as(strict(), need, why)
}

/// `skip`, strict or not as told.
pub fn skip_as(strict: bool, need: Need, why: &str) {
    if strict && need.met() {
        panic!("skipped where this machine has {need:?} (MEMMON_TEST_STRICT=1): {why}");
    }
    eprintln!("skipped: {why}");
}

/// How many NUMA nodes this machine has (`/sys/devices/system/node/nodeN`); 1 where it does not
/// say.
pub fn numa_nodes() -> usize {
    std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_prefix("node")
                        .is_some_and(|i| i.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0)
        .max(1)
}
