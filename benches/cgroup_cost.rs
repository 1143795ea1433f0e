//! CPU time of a tick with the cgroup source on: one idle process (`sleep`) launched into a
//! memory cgroup memmon makes (`CgroupFs::create_own`, as `record --own-cgroup` does), sampled
//! by the tree alone, by the cgroup reader alone (memory.current or usage_in_bytes, memory.stat,
//! the limit, the peak and the events), and by both, as a recorder's tick does. Hot loop and
//! paced at 100 ticks/s. Needs root and a memory controller (v1 or v2).
//! Run: `cargo bench --bench cgroup_cost`. Results go in BENCHMARKS.md.

use memmon::probe::cgroup::{CgroupFs, CgroupReader};
use memmon::probe::ProcFs;
use memmon::sampler::tree::Tree;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

/// CPU time (user + system) of this thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU nanoseconds per call of `f`, best of 5 rounds of `n` calls.
fn hot(n: u32, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t0 = thread_cpu();
            for _ in 0..n {
                f();
            }
            (thread_cpu() - t0).as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// CPU nanoseconds per call of `f` at 100 calls/s for 3 s, wake-ups included.
fn paced(mut f: impl FnMut()) -> f64 {
    let every = Duration::from_millis(10);
    let t0 = thread_cpu();
    let start = Instant::now();
    for i in 1..=300u32 {
        f();
        if let Some(left) = (start + every * i).checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
    }
    (thread_cpu() - t0).as_nanos() as f64 / 300.0
}

fn main() {
    let fs = CgroupFs::default();
    let mine = fs.of_pid(std::path::Path::new("/proc"), std::process::id() as i32);
    let name = format!("memmon-bench-{}", std::process::id());
    let mut own = match fs.create_own(&name, mine.as_ref()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cgroup_cost: cannot make a memory cgroup ({e}): run as root on a machine with a memory controller");
            return;
        }
    };
    let fd = own.procs_fd().unwrap().try_clone_to_owned().unwrap();
    // SAFETY: between fork and exec the closure makes one system call (write, through rustix),
    // which neither allocates nor locks.
    let mut child = unsafe {
        std::process::Command::new("sleep")
            .arg("60")
            .pre_exec(move || {
                if rustix::io::write(&fd, b"0\n")? != 2 {
                    return Err(std::io::Error::from_raw_os_error(libc::EIO));
                }
                Ok(())
            })
            .spawn()
            .unwrap()
    };
    let procfs = ProcFs::default();
    let mut tree = Tree::new(
        procfs.clone(),
        procfs.open(child.id() as i32).unwrap(),
        true,
    );
    let mut reader = CgroupReader::new(own.cgroup().clone());
    println!(
        "cgroup {} ({}), one idle process; CPU time per call (user + system)",
        own.cgroup().dir.display(),
        own.cgroup().version.name()
    );
    let tree_hot = hot(20_000, || {
        tree.sample().unwrap();
    });
    let cg_hot = hot(20_000, || {
        reader.read().unwrap();
    });
    let both_hot = hot(20_000, || {
        tree.sample().unwrap();
        reader.read().unwrap();
    });
    println!("hot loop:        tree {tree_hot:>8.0} ns   cgroup {cg_hot:>8.0} ns   tick with both {both_hot:>8.0} ns ({:.2}x the tree alone)", both_hot / tree_hot);
    // What each file costs (open + read + close), to see where a reading's time goes.
    let mut buf = String::new();
    let mut files: Vec<String> = std::fs::read_dir(&own.cgroup().dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            [
                "memory.current",
                "memory.usage_in_bytes",
                "memory.stat",
                "memory.max",
                "memory.limit_in_bytes",
                "memory.peak",
                "memory.max_usage_in_bytes",
                "memory.events",
                "memory.failcnt",
                "memory.oom_control",
                "memory.kmem.usage_in_bytes",
                "memory.kmem.tcp.usage_in_bytes",
            ]
            .contains(&n.as_str())
        })
        .collect();
    files.sort();
    for f in &files {
        let path = own.cgroup().dir.join(f);
        let ns = hot(5_000, || {
            use std::io::Read;
            buf.clear();
            std::fs::File::open(&path)
                .unwrap()
                .read_to_string(&mut buf)
                .unwrap();
        });
        println!("  {f:<34} {ns:>8.0} ns");
    }
    let tree_p = paced(|| {
        tree.sample().unwrap();
    });
    let both_p = paced(|| {
        tree.sample().unwrap();
        reader.read().unwrap();
    });
    println!(
        "paced 100/s:     tree {tree_p:>8.0} ns   tick with both {both_p:>8.0} ns ({:.2}x)",
        both_p / tree_p
    );
    let _ = child.kill();
    let _ = child.wait();
    own.remove().unwrap();
}
