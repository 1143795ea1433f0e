//! Reading several inputs at once: one reader per CPU, results in the order given.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f` of each path, as many at once as there are CPUs (reading is CPU-bound: parsing the
/// text), in the order given.
pub fn read_parallel<T: Send>(paths: &[PathBuf], f: impl Fn(&Path) -> T + Sync) -> Vec<T> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..paths.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = paths.get(i) else { break };
                let r = f(path);
                results.lock().expect("no reader panics holding the lock")[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .expect("readers finished")
        .into_iter()
        .map(|r| r.expect("every file read"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_the_order_given() {
        let paths: Vec<PathBuf> = (0..20).map(|i| PathBuf::from(format!("f{i}"))).collect();
        let got = read_parallel(&paths, |p| p.display().to_string());
        let want: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        assert_eq!(got, want);
        assert!(read_parallel(&[], |p| p.to_path_buf()).is_empty());
    }
}
