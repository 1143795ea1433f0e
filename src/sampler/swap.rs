//! The recorder's swap source: the machine's pages swapped in and out (/proc/vmstat `pswpin`,
//! `pswpout`) into the `swap_in_pages` and `swap_out_pages` columns, as pages since the
//! recording began. A read of /proc/vmstat costs more than a whole sample of an idle tree
//! (BENCHMARKS.md), so a thread of its own reads it, once a second, and the tick takes its latest
//! counts: a row's counts are at most a second old. And only while the machine has a swap device:
//! without one (/proc/swaps lists none, as on most GPU servers) no page can be swapped and the
//! counts cannot move, so the thread only looks at /proc/swaps again every 10 s (a `swapon` is
//! seen then, and the counts read from there are still those since the start). Where the recorded
//! cgroup counts its own swap (v2 `pswpin`), this source is not started: the cgroup's columns say
//! the tree's.

use crate::model::sample::Sample;
use crate::probe::vmstat::{SwapPages, Vmstat, VmstatError};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A cumulative counter since the recording began: its value at the start taken away, never
/// falling (a counter that went back, a cgroup made anew, holds its last value until it passes
/// it).
#[derive(Debug, Clone, Copy)]
pub struct SinceStart {
    base: u64,
    last: u64,
}

impl SinceStart {
    pub fn new(base: u64) -> SinceStart {
        SinceStart { base, last: base }
    }

    /// The count since the start, given the counter now.
    pub fn at(&mut self, now: u64) -> u64 {
        self.last = self.last.max(now);
        self.last - self.base
    }
}

/// How often the thread reads /proc/vmstat while the machine has a swap device.
pub const READ_EVERY: Duration = Duration::from_secs(1);
/// How often it looks for a swap device (/proc/swaps) while there is none.
pub const LOOK_EVERY: Duration = Duration::from_secs(10);

/// The machine's swap counts, read on a thread of its own.
pub struct SwapSource {
    path: PathBuf,
    read_every: Duration,
    latest: Arc<Mutex<SwapPages>>,
    swap_in: SinceStart,
    swap_out: SinceStart,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Whether `/proc/swaps` under `proc_root` lists a device (a line after its header). Unreadable
/// counts as having one: the counts are then read, as they would be without this check.
fn has_swap_device(proc_root: &Path) -> bool {
    // One read: the header and a device's line fit in 512 bytes (a string read of an unsized
    // file would take several).
    let mut buf = [0u8; 512];
    std::fs::File::open(proc_root.join("swaps"))
        .and_then(|mut f| std::io::Read::read(&mut f, &mut buf))
        .map_or(true, |n| {
            buf[..n]
                .split(|&b| b == b'\n')
                .skip(1)
                .any(|l| !l.trim_ascii().is_empty())
        })
}

impl SwapSource {
    /// Opens `/proc/vmstat` under `proc_root`, reads the counts at the start and starts the
    /// thread that reads them every [`READ_EVERY`] while the machine has a swap device.
    pub fn start(proc_root: &Path) -> Result<SwapSource, VmstatError> {
        SwapSource::start_every(proc_root, READ_EVERY, LOOK_EVERY)
    }

    fn start_every(
        proc_root: &Path,
        read_every: Duration,
        look_every: Duration,
    ) -> Result<SwapSource, VmstatError> {
        let path = crate::probe::vmstat::path(proc_root);
        let mut file = Vmstat::open(&path)?;
        let base = file.read()?;
        let latest = Arc::new(Mutex::new(base));
        let (stop, stopped) = mpsc::channel::<()>();
        let shared = Arc::clone(&latest);
        let root = proc_root.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("memmon-swap".into())
            .spawn(move || {
                // Until the source is dropped (its sender goes). A read that fails a moment
                // leaves the last counts (the columns never fall); the next one tries again.
                let mut device = has_swap_device(&root);
                loop {
                    let wait = if device { read_every } else { look_every };
                    if !matches!(stopped.recv_timeout(wait), Err(RecvTimeoutError::Timeout)) {
                        return;
                    }
                    device = device || has_swap_device(&root);
                    if !device {
                        continue;
                    }
                    if let Ok(now) = file.read() {
                        *shared.lock().unwrap_or_else(|e| e.into_inner()) = now;
                    }
                }
            })
            .map_err(|e| VmstatError::Thread(path.clone(), e))?;
        Ok(SwapSource {
            path,
            read_every,
            latest,
            swap_in: SinceStart::new(base.swap_in),
            swap_out: SinceStart::new(base.swap_out),
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The metadata's line for what is read.
    pub fn source_line(&self) -> String {
        format!(
            "{} (pswpin, pswpout: the machine's swap, every program's) every {} while /proc/swaps lists a device (looked at every {} while it lists none), since the recording began",
            self.path.display(),
            crate::units::fmt_seconds(self.read_every.as_secs_f64()),
            crate::units::fmt_seconds(LOOK_EVERY.as_secs_f64())
        )
    }

    /// Puts the latest counts into the sample's swap columns.
    pub fn fill(&mut self, s: &mut Sample) {
        let now = *self.latest.lock().unwrap_or_else(|e| e.into_inner());
        s.swap_in_pages = Some(self.swap_in.at(now.swap_in));
        s.swap_out_pages = Some(self.swap_out.at(now.swap_out));
    }
}

impl Drop for SwapSource {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devices(proc_root: &Path, lines: &str) {
        let header = "Filename\tType\tSize\tUsed\tPriority\n";
        std::fs::write(proc_root.join("swaps"), format!("{header}{lines}")).unwrap();
    }

    /// The columns once the thread has read `swap_in` pages swapped in (up to 30 s: a loaded
    /// machine may be slow to run it).
    fn counts_once_read(src: &mut SwapSource, swap_in: u64) -> (Option<u64>, Option<u64>) {
        let mut s = Sample::default();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            src.fill(&mut s);
            if s.swap_in_pages == Some(swap_in) || std::time::Instant::now() >= deadline {
                return (s.swap_in_pages, s.swap_out_pages);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn write(proc_root: &Path, swap_in: u64, swap_out: u64) {
        std::fs::write(
            proc_root.join("vmstat"),
            format!("nr_free_pages 1\npswpin {swap_in}\npswpout {swap_out}\n"),
        )
        .unwrap();
    }

    #[test]
    fn the_columns_count_pages_since_the_start_as_the_thread_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 1000, 5000);
        devices(dir.path(), "/dev/vda2\tpartition\t1048572\t0\t-2\n");
        let every = Duration::from_millis(100);
        let mut src = SwapSource::start_every(dir.path(), every, every).unwrap();
        assert!(
            src.source_line().contains("vmstat"),
            "{}",
            src.source_line()
        );
        let mut s = Sample::default();
        src.fill(&mut s);
        assert_eq!((s.swap_in_pages, s.swap_out_pages), (Some(0), Some(0)));
        write(dir.path(), 1040, 5100);
        // The thread reads every 100 ms.
        assert_eq!(counts_once_read(&mut src, 40), (Some(40), Some(100)));
    }

    #[test]
    fn a_counter_since_the_start_never_falls() {
        let mut c = SinceStart::new(100);
        assert_eq!(c.at(150), 50);
        assert_eq!(c.at(20), 50);
        assert_eq!(c.at(170), 70);
    }

    #[test]
    fn no_vmstat_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = SwapSource::start(dir.path()).err().unwrap().to_string();
        assert!(e.contains("vmstat"), "{e}");
    }

    #[test]
    fn without_a_swap_device_vmstat_is_not_read_until_one_appears() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 1000, 5000);
        devices(dir.path(), "");
        let (read, look) = (Duration::from_millis(20), Duration::from_millis(200));
        let mut src = SwapSource::start_every(dir.path(), read, look).unwrap();
        // vmstat moves (another reader's fake), but with no device the thread does not read it.
        write(dir.path(), 1040, 5100);
        std::thread::sleep(Duration::from_millis(150));
        let mut s = Sample::default();
        src.fill(&mut s);
        assert_eq!((s.swap_in_pages, s.swap_out_pages), (Some(0), Some(0)));
        // swapon: the thread sees the device when it looks next, and reads the counts since the
        // start from then on.
        devices(dir.path(), "/swapfile\tfile\t1048572\t0\t-2\n");
        assert_eq!(counts_once_read(&mut src, 40), (Some(40), Some(100)));
    }

    #[test]
    fn an_unreadable_swaps_file_counts_as_a_device() {
        let dir = tempfile::tempdir().unwrap();
        assert!(has_swap_device(dir.path()));
        devices(dir.path(), "");
        assert!(!has_swap_device(dir.path()));
    }
}
