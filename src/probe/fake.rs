//! A fake /proc for unit tests: one builder for every test that reads processes (the tree, a
//! watch, export's targets, target resolution), so a test states only what it cares about and
//! every fake process has the files the readers open.

use std::fs;
use std::path::Path;

/// One fake /proc/PID. `FakeProc::new(pid).rss_kb(1024).write(root)` writes stat, status,
/// statm, cmdline and task/PID/children (and smaps_rollup with `pss_kb`).
#[derive(Debug, Clone)]
pub(crate) struct FakeProc {
    pid: i32,
    ppid: i32,
    tgid: i32,
    /// stat's flags (field 9): `PF_KTHREAD` (0x200000) marks a kernel thread.
    flags: u64,
    start: u64,
    /// `None`: no memory lines, as a kernel thread's or a zombie's status.
    rss_kb: Option<u64>,
    hwm_kb: Option<u64>,
    pss_kb: Option<u64>,
    children: Vec<i32>,
    cmdline: String,
    name: Option<String>,
    /// /proc/PID/clear_refs, which a reset of VmHWM writes `5` to (`clear_refs`); none by
    /// default: a reset is refused, as the kernel refuses it to a user who does not own the
    /// process.
    clear_refs: bool,
    /// /proc/PID/maps and smaps, and the exe link, when given.
    maps: Option<String>,
    smaps: Option<String>,
    exe: Option<String>,
}

impl FakeProc {
    /// PID `pid`, child of 1, started at tick 100, 1000 kB resident, named `fake{pid}` with
    /// the command line `fake{pid} --serve`.
    pub(crate) fn new(pid: i32) -> FakeProc {
        FakeProc {
            pid,
            ppid: 1,
            tgid: pid,
            flags: 0,
            start: 100,
            rss_kb: Some(1000),
            hwm_kb: None,
            pss_kb: None,
            children: Vec::new(),
            cmdline: format!("fake{pid}\0--serve\0"),
            name: None,
            clear_refs: false,
            maps: None,
            smaps: None,
            exe: None,
        }
    }

    pub(crate) fn ppid(mut self, ppid: i32) -> FakeProc {
        self.ppid = ppid;
        self
    }

    pub(crate) fn tgid(mut self, tgid: i32) -> FakeProc {
        self.tgid = tgid;
        self
    }

    pub(crate) fn flags(mut self, flags: u64) -> FakeProc {
        self.flags = flags;
        self
    }

    /// The start time, in clock ticks since boot (stat field 22): a PID's identity.
    pub(crate) fn start(mut self, start: u64) -> FakeProc {
        self.start = start;
        self
    }

    /// VmRSS and RssAnon; VmHWM too unless `hwm_kb` says otherwise.
    pub(crate) fn rss_kb(mut self, kb: u64) -> FakeProc {
        self.rss_kb = Some(kb);
        self
    }

    /// No memory lines in status and an empty command line: a kernel thread.
    pub(crate) fn memoryless(mut self) -> FakeProc {
        self.rss_kb = None;
        self.cmdline.clear();
        self
    }

    pub(crate) fn hwm_kb(mut self, kb: u64) -> FakeProc {
        self.hwm_kb = Some(kb);
        self
    }

    /// A smaps_rollup with this PSS (and Rss as status says).
    pub(crate) fn pss_kb(mut self, kb: u64) -> FakeProc {
        self.pss_kb = Some(kb);
        self
    }

    /// The main thread's children file.
    pub(crate) fn children(mut self, kids: &[i32]) -> FakeProc {
        self.children = kids.to_vec();
        self
    }

    /// The name in stat and status (default `fake{pid}`).
    pub(crate) fn name(mut self, name: &str) -> FakeProc {
        self.name = Some(name.to_string());
        self
    }

    /// An empty /proc/PID/clear_refs: a reset of VmHWM is taken (and leaves `5` in it).
    pub(crate) fn clear_refs(mut self) -> FakeProc {
        self.clear_refs = true;
        self
    }

    /// /proc/PID/maps and /proc/PID/smaps as given.
    pub(crate) fn mappings(mut self, maps: &str, smaps: &str) -> FakeProc {
        self.maps = Some(maps.to_string());
        self.smaps = Some(smaps.to_string());
        self
    }

    /// /proc/PID/exe, a link to `path`.
    pub(crate) fn exe(mut self, path: &str) -> FakeProc {
        self.exe = Some(path.to_string());
        self
    }

    /// Writes (or rewrites) ROOT/PID.
    pub(crate) fn write(&self, root: &Path) {
        let pid = self.pid;
        let name = self.name.clone().unwrap_or_else(|| format!("fake{pid}"));
        let dir = root.join(pid.to_string());
        fs::create_dir_all(dir.join(format!("task/{pid}"))).unwrap();
        fs::write(
            dir.join("stat"),
            format!(
                "{pid} ({name}) S {} 1 1 0 -1 {} 0 0 0 0 0 0 0 0 20 0 1 0 {} 0 0\n",
                self.ppid, self.flags, self.start
            ),
        )
        .unwrap();
        let memory = match self.rss_kb {
            Some(rss) => format!(
                "VmSize:\t400 kB\nVmHWM:\t{} kB\nVmRSS:\t{rss} kB\nRssAnon:\t{rss} kB\n\
RssFile:\t0 kB\nRssShmem:\t0 kB\nVmData:\t200 kB\nVmStk:\t0 kB\nVmSwap:\t0 kB\n",
                self.hwm_kb.unwrap_or(rss)
            ),
            None => String::new(),
        };
        fs::write(
            dir.join("status"),
            format!(
                "Name:\t{name}\nTgid:\t{}\nPid:\t{pid}\nPPid:\t{}\n{memory}Threads:\t1\n",
                self.tgid, self.ppid
            ),
        )
        .unwrap();
        // What the status says (size 100 pages, text 1, data 50), so a reader comparing the two
        // reads status again only when the resident size moved.
        let resident = self.rss_kb.unwrap_or(0) / 4;
        fs::write(dir.join("statm"), format!("100 {resident} 0 1 0 50 0\n")).unwrap();
        fs::write(dir.join("cmdline"), &self.cmdline).unwrap();
        if let Some(pss) = self.pss_kb {
            let rss = self.rss_kb.unwrap_or(0);
            fs::write(
                dir.join("smaps_rollup"),
                format!("Rss: {rss} kB\nPss: {pss} kB\n"),
            )
            .unwrap();
        }
        let kids: Vec<String> = self.children.iter().map(|k| k.to_string()).collect();
        fs::write(dir.join(format!("task/{pid}/children")), kids.join(" ")).unwrap();
        if self.clear_refs {
            fs::write(dir.join("clear_refs"), "").unwrap();
        }
        if let (Some(maps), Some(smaps)) = (&self.maps, &self.smaps) {
            fs::write(dir.join("maps"), maps).unwrap();
            fs::write(dir.join("smaps"), smaps).unwrap();
        }
        if let Some(exe) = &self.exe {
            let link = dir.join("exe");
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(exe, link).unwrap();
        }
    }
}
