//! The recorder's memory pressure source (PSI): the machine's `/proc/pressure/memory` and, when
//! the recorded cgroup is a v2 one, its `memory.pressure`, read at every tick into the
//! `psi_memory_*` and `cgroup_psi_memory_*` columns, as microseconds since the recording began
//! (each file's totals at the first row taken away: that row is 0, however long the setup
//! before it took on a machine that stalls).

use crate::model::sample::Sample;
use crate::probe::psi::{Pressure, PsiError, Stall};
use std::path::Path;

/// One pressure file, with its totals at the first row (`None` before it).
struct Held {
    file: Pressure,
    base: Option<Stall>,
    /// The last totals read (a failed read repeats them: the columns never fall).
    last: Stall,
    /// What the files read before this one counted: a cgroup removed and made again (a
    /// restarted service's) has a new file whose totals start from 0, and go on from here.
    carried: Stall,
}

impl Held {
    fn open(path: &Path) -> Result<Held, PsiError> {
        let mut file = Pressure::open(path)?;
        // Read once here, so a file that cannot be read is said at the start.
        let last = file.read()?;
        Ok(Held {
            file,
            base: None,
            last,
            carried: Stall::default(),
        })
    }

    /// Stall since the first row: `(some, full)` microseconds. A file that can no longer be
    /// read (its cgroup was removed) is opened again by its path once per tick: the cgroup made
    /// again in its place goes on counting from the totals reached.
    fn tick(&mut self) -> (u64, u64) {
        let now = match self.file.read() {
            Ok(now) => Some(now),
            Err(_) => match Pressure::open(self.file.path()) {
                Ok(mut again) => {
                    self.carried = self.last;
                    let now = again.read().ok();
                    self.file = again;
                    now
                }
                Err(_) => None,
            },
        };
        if let Some(now) = now {
            let now = Stall {
                some_us: self.carried.some_us + now.some_us,
                full_us: self.carried.full_us + now.full_us,
            };
            self.last.some_us = self.last.some_us.max(now.some_us);
            self.last.full_us = self.last.full_us.max(now.full_us);
        }
        let base = *self.base.get_or_insert(self.last);
        (
            self.last.some_us - base.some_us,
            self.last.full_us - base.full_us,
        )
    }
}

/// The pressure files a recording reads.
pub struct PsiSource {
    system: Option<Held>,
    cgroup: Option<Held>,
    /// Why the machine's file gives nothing (said once, and in the metadata's sources).
    pub system_unavailable: Option<String>,
    pub cgroup_unavailable: Option<String>,
}

impl PsiSource {
    /// Opens the machine's file under `proc_root` and, given, a v2 cgroup's directory's
    /// `memory.pressure`; each one that gives nothing is `None` with its reason.
    pub fn open(proc_root: &Path, cgroup_v2_dir: Option<&Path>) -> PsiSource {
        let (system, system_unavailable) =
            match Held::open(&crate::probe::psi::system_memory(proc_root)) {
                Ok(h) => (Some(h), None),
                Err(e) => (None, Some(e.to_string())),
            };
        let (cgroup, cgroup_unavailable) = match cgroup_v2_dir {
            Some(dir) => match Held::open(&dir.join("memory.pressure")) {
                Ok(h) => (Some(h), None),
                Err(e) => (None, Some(e.to_string())),
            },
            None => (None, None),
        };
        PsiSource {
            system,
            cgroup,
            system_unavailable,
            cgroup_unavailable,
        }
    }

    /// The metadata's line for what is read.
    pub fn source_line(&self) -> String {
        let mut parts = Vec::new();
        match (&self.system, &self.system_unavailable) {
            (Some(h), _) => parts.push(format!(
                "{} (some and full total=) every tick, since the recording began",
                h.file.path().display()
            )),
            (None, Some(why)) => parts.push(format!("memory pressure (PSI) not read: {why}")),
            (None, None) => {}
        }
        match (&self.cgroup, &self.cgroup_unavailable) {
            (Some(h), _) => parts.push(format!("the cgroup's {}", h.file.path().display())),
            (None, Some(why)) => {
                parts.push(format!("the cgroup's memory.pressure not read: {why}"))
            }
            (None, None) => {}
        }
        parts.join("; ")
    }

    /// Puts this tick's stall into the sample's PSI columns (`None` where a file gives
    /// nothing).
    pub fn fill(&mut self, s: &mut Sample) {
        if let Some(h) = &mut self.system {
            let (some, full) = h.tick();
            s.psi_memory_some_us = Some(some);
            s.psi_memory_full_us = Some(full);
        }
        if let Some(h) = &mut self.cgroup {
            let (some, full) = h.tick();
            s.cgroup_psi_memory_some_us = Some(some);
            s.cgroup_psi_memory_full_us = Some(full);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, some: u64, full: u64) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            path,
            format!(
                "some avg10=0.00 avg60=0.00 avg300=0.00 total={some}\n\
                 full avg10=0.00 avg60=0.00 avg300=0.00 total={full}\n"
            ),
        )
        .unwrap();
    }

    #[test]
    fn the_columns_count_the_stall_since_the_first_row_and_never_fall() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().join("proc");
        let cg = dir.path().join("cg");
        write(&proc_root.join("pressure/memory"), 5_000_000, 2_000_000);
        write(&cg.join("memory.pressure"), 700, 100);
        let mut src = PsiSource::open(&proc_root, Some(&cg));
        assert!(src.system_unavailable.is_none() && src.cgroup_unavailable.is_none());
        // A stall between the opening and the first row is before the recording: not counted.
        write(&proc_root.join("pressure/memory"), 5_000_089, 2_000_000);
        let mut s = Sample::default();
        src.fill(&mut s);
        assert_eq!(
            (s.psi_memory_some_us, s.psi_memory_full_us),
            (Some(0), Some(0))
        );
        assert_eq!(s.cgroup_psi_memory_some_us, Some(0));
        write(&proc_root.join("pressure/memory"), 5_250_089, 2_040_000);
        write(&cg.join("memory.pressure"), 1_700, 600);
        src.fill(&mut s);
        assert_eq!(
            (s.psi_memory_some_us, s.psi_memory_full_us),
            (Some(250_000), Some(40_000))
        );
        assert_eq!(
            (s.cgroup_psi_memory_some_us, s.cgroup_psi_memory_full_us),
            (Some(1_000), Some(500))
        );
        // A file that cannot be read a moment repeats its last totals.
        std::fs::write(proc_root.join("pressure/memory"), "").unwrap();
        src.fill(&mut s);
        assert_eq!(s.psi_memory_some_us, Some(250_000));
    }

    #[test]
    fn without_psi_the_columns_stay_empty_and_the_reason_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut src = PsiSource::open(dir.path(), Some(&dir.path().join("cg")));
        let why = src.system_unavailable.clone().unwrap();
        assert!(why.contains("no PSI"), "{why}");
        assert!(src.cgroup_unavailable.is_some());
        assert!(
            src.source_line().contains("not read"),
            "{}",
            src.source_line()
        );
        let mut s = Sample::default();
        src.fill(&mut s);
        assert_eq!(s.psi_memory_some_us, None);
        assert_eq!(s.cgroup_psi_memory_full_us, None);
    }
}
