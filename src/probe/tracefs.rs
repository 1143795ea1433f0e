//! The kernel's tracepoints as perf_event_open needs them: each one's ID and the layout of its
//! record (tracefs `events/GROUP/NAME/id` and `format`). Read without changing the host: from a
//! tracefs already mounted (/proc/self/mountinfo), else from one mounted in a mount namespace of
//! a thread of its own (made private first, so nothing propagates back; the namespace ends with
//! the thread, taking the mount with it). That needs CAP_SYS_ADMIN; without it, and without a
//! tracefs mounted, the error says so.

use std::path::{Path, PathBuf};

/// One field of a tracepoint's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
}

/// A tracepoint: its ID (perf's `config`) and its record's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracepoint {
    pub group: String,
    pub name: String,
    pub id: u64,
    pub fields: Vec<Field>,
    /// The format's `print fmt:` line, as the kernel wrote it.
    pub print_fmt: String,
}

impl Tracepoint {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The value of a flag the print format names (`__GFP_NORETRY` in `kmem:mm_page_alloc`'s
    /// table of GFP flags), written as the kernel writes it: `0x10000u` (5.10) or
    /// `((gfp_t)((((1UL))) << (16)))` (6.x); `None` where it is not there, or is neither.
    pub fn print_flag(&self, name: &str) -> Option<u64> {
        let quoted = format!("\"{name}\"");
        let at = self.print_fmt.find(&quoted)?;
        let entry = &self.print_fmt[self.print_fmt[..at].rfind('{')? + 1..at];
        if let Some(shift) = entry.rfind("<<") {
            let digits: String = entry[shift + 2..]
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(char::is_ascii_digit)
                .collect();
            return 1u64.checked_shl(digits.parse().ok()?);
        }
        let hex = &entry[entry.rfind("0x")? + 2..];
        let digits: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
        u64::from_str_radix(&digits, 16).ok()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    #[error("no tracefs is mounted, and memmon cannot mount one in a mount namespace of its own: {0} (that needs CAP_SYS_ADMIN)")]
    CannotMount(String),
    #[error("cannot read {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Format(PathBuf, FormatError),
    #[error("the tracepoint {0} is not in this kernel ({1} has no such event; a kernel without CONFIG_FTRACE_SYSCALLS has no syscalls group)")]
    Missing(String, PathBuf),
}

/// A tracepoint's `format` file that does not read as one: the line at fault.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("a field without a name: {0:?}")]
    NoName(String),
    #[error("a field without {key} {line:?}")]
    NoKey { key: &'static str, line: String },
    #[error("not an ID: {0:?}")]
    NotAnId(String),
    #[error("no field")]
    NoField,
}

impl crate::error::Classified for TracefsError {
    /// The kernel's tracefs unreadable or unmountable: the ledger is off, the recording goes on.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

impl crate::error::Classified for FormatError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// Reads the tracepoints `events` (`("syscalls", "sys_enter_mmap")`...); with the words for
/// where they were read (`tracefs at /sys/kernel/tracing`, `tracefs mounted in a private mount
/// namespace`).
pub fn read(events: &[(&str, &str)]) -> Result<(Vec<Tracepoint>, String), TracefsError> {
    if let Some(root) = mounted(Path::new("/proc/self/mountinfo")) {
        if let Ok(t) = read_from(&root, events) {
            return Ok((t, format!("tracefs at {}", root.display())));
        }
    }
    let owned: Vec<(String, String)> = events
        .iter()
        .map(|(g, n)| (g.to_string(), n.to_string()))
        .collect();
    let thread = std::thread::Builder::new()
        .name("memmon-tracefs".into())
        .spawn(move || in_private_namespace(&owned))
        .map_err(|e| TracefsError::CannotMount(format!("cannot start a thread: {e}")))?;
    let t = thread
        .join()
        .map_err(|_| TracefsError::CannotMount("the thread failed".into()))??;
    Ok((t, "tracefs mounted in a private mount namespace".into()))
}

/// On a thread of its own (its mount namespace ends with it): a private copy of the mount
/// namespace, tracefs mounted in it, the events read.
fn in_private_namespace(events: &[(String, String)]) -> Result<Vec<Tracepoint>, TracefsError> {
    use rustix::mount::{mount, mount_change, unmount, MountFlags, MountPropagationFlags};
    use rustix::thread::UnshareFlags;
    let refused = |what: &str, e: rustix::io::Errno| {
        TracefsError::CannotMount(format!("{what}: {}", std::io::Error::from(e)))
    };
    // SAFETY: NEWNS (with FS, which it implies) unshares this thread's mount namespace and its
    // root and working directory only; the descriptor table stays shared (no FILES), so no
    // thread sees descriptors another cannot.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS | UnshareFlags::FS) }
        .map_err(|e| refused("unshare(CLONE_NEWNS)", e))?;
    // Nothing mounted from here on reaches the host's namespace.
    mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|e| refused("making / private", e))?;
    // The standard mount point is there on every kernel with tracefs; mounting over it in
    // this namespace leaves the host's as it is. Without it, an empty directory of our own.
    let standard = Path::new("/sys/kernel/tracing");
    let scratch = !standard.is_dir();
    let dir = if scratch {
        // This thread's own, removed again below.
        let dir = std::env::temp_dir().join(format!(
            "memmon-tracefs-{}-{}",
            std::process::id(),
            rustix::thread::gettid().as_raw_nonzero()
        ));
        std::fs::create_dir(&dir).map_err(|e| {
            TracefsError::CannotMount(format!("a mount point {}: {e}", dir.display()))
        })?;
        dir
    } else {
        standard.to_path_buf()
    };
    let read = mount("tracefs", &dir, "tracefs", MountFlags::empty(), None)
        .map_err(|e| refused(&format!("mount -t tracefs on {}", dir.display()), e))
        .and_then(|()| {
            let refs: Vec<(&str, &str)> = events
                .iter()
                .map(|(g, n)| (g.as_str(), n.as_str()))
                .collect();
            let read = read_from(&dir, &refs);
            let _ = unmount(&dir, rustix::mount::UnmountFlags::DETACH);
            read
        });
    if scratch {
        let _ = std::fs::remove_dir(&dir);
    }
    read
}

/// Where tracefs is mounted, from a mountinfo file: a `tracefs` mount, or `tracing` under a
/// `debugfs` one.
fn mounted(mountinfo: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(mountinfo).ok()?;
    let mut debugfs = None;
    for line in text.lines() {
        // ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(point) = left.split(' ').nth(4) else {
            continue;
        };
        let point = unescape(point);
        match right.split(' ').next().unwrap_or("") {
            "tracefs" => return Some(PathBuf::from(point)),
            "debugfs" => debugfs = Some(PathBuf::from(point).join("tracing")),
            _ => {}
        }
    }
    debugfs
}

/// mountinfo escapes spaces, tabs, newlines and backslashes as octal (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads `events` from the tracefs at `root`.
pub fn read_from(root: &Path, events: &[(&str, &str)]) -> Result<Vec<Tracepoint>, TracefsError> {
    events
        .iter()
        .map(|(group, name)| {
            let dir = root.join("events").join(group).join(name);
            let id_path = dir.join("id");
            let id = match std::fs::read_to_string(&id_path) {
                Ok(t) => t.trim().parse::<u64>().map_err(|_| {
                    TracefsError::Format(
                        id_path.clone(),
                        FormatError::NotAnId(t.trim().to_string()),
                    )
                })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(TracefsError::Missing(
                        format!("{group}:{name}"),
                        root.join("events"),
                    ))
                }
                Err(e) => return Err(TracefsError::Read(id_path, e)),
            };
            let format_path = dir.join("format");
            let text = std::fs::read_to_string(&format_path)
                .map_err(|e| TracefsError::Read(format_path.clone(), e))?;
            let fields =
                parse_format(&text).map_err(|why| TracefsError::Format(format_path, why))?;
            let print_fmt = text
                .lines()
                .find_map(|l| l.strip_prefix("print fmt:"))
                .unwrap_or_default()
                .trim()
                .to_string();
            Ok(Tracepoint {
                group: group.to_string(),
                name: name.to_string(),
                id,
                fields,
                print_fmt,
            })
        })
        .collect()
}

/// The fields of a tracepoint's `format` file: each `field:TYPE NAME;\toffset:N;\tsize:N;...`.
pub fn parse_format(text: &str) -> Result<Vec<Field>, FormatError> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(decl) = line.trim_start().strip_prefix("field:") else {
            continue;
        };
        let mut parts = decl.split(';').map(str::trim);
        let declared = parts.next().unwrap_or("");
        let name = declared
            .rsplit(' ')
            .next()
            .map(|n| n.split('[').next().unwrap_or(n))
            .filter(|n| !n.is_empty())
            .ok_or_else(|| FormatError::NoName(line.to_string()))?;
        let mut value = |key: &'static str| -> Result<usize, FormatError> {
            parts
                .find_map(|p| p.strip_prefix(key))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| FormatError::NoKey {
                    key,
                    line: line.to_string(),
                })
        };
        let offset = value("offset:")?;
        let size = value("size:")?;
        out.push(Field {
            name: name.to_string(),
            offset,
            size,
        });
    }
    if out.is_empty() {
        return Err(FormatError::NoField);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    /// A flag's value from `kmem:mm_page_alloc`'s table of GFP flags, in each way kernels
    /// write it (6.18's from this machine, 5.10's as its headers spell the values).
    #[test]
    fn a_flag_is_read_from_the_print_format_as_a_shift_or_a_hex_value() {
        let tp = |print_fmt: &str| Tracepoint {
            group: "kmem".into(),
            name: "mm_page_alloc".into(),
            id: 1,
            fields: Vec::new(),
            print_fmt: print_fmt.into(),
        };
        let new = tp(
            r#""page=%p", REC->pfn, (REC->gfp_flags) ? __print_flags(REC->gfp_flags, "|", {( unsigned long)((((((( gfp_t)(((((1UL))) << (10))|((((1UL))) << (11)))) | (( gfp_t)((((1UL))) << (6))))), "GFP_TRANSHUGE"}, {( unsigned long)(( gfp_t)((((1UL))) << (16))), "__GFP_NORETRY"}, {( unsigned long)(( gfp_t)((((1UL))) << (21))), "__GFP_THISNODE"}, { 0, ((void *)0) } ) : "none""#,
        );
        assert_eq!(new.print_flag("__GFP_NORETRY"), Some(1 << 16));
        assert_eq!(new.print_flag("__GFP_THISNODE"), Some(1 << 21));
        let old = tp(
            r#""page=%p", REC->pfn, (REC->gfp_flags) ? __print_flags(REC->gfp_flags, "|", {(unsigned long)(((( gfp_t)(0x400u|0x800u)) | (( gfp_t)0x40u))), "GFP_TRANSHUGE"}, {(unsigned long)(( gfp_t)0x10000u), "__GFP_NORETRY"}, {(unsigned long)(( gfp_t)0x200000u), "__GFP_THISNODE"}) : "none""#,
        );
        assert_eq!(old.print_flag("__GFP_NORETRY"), Some(0x10000));
        assert_eq!(old.print_flag("__GFP_THISNODE"), Some(0x200000));
        assert_eq!(old.print_flag("__GFP_NOFAIL"), None);
    }

    use super::*;

    const MMAP: &str = "name: sys_enter_mmap
ID: 174
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;
\tfield:unsigned long addr;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned long len;\toffset:24;\tsize:8;\tsigned:0;
\tfield:char comm[16];\toffset:32;\tsize:16;\tsigned:0;

print fmt: \"addr: 0x%08lx, len: 0x%08lx\", ((unsigned long)(REC->addr)), ((unsigned long)(REC->len))
";

    #[test]
    fn a_format_gives_each_fields_offset_and_size() {
        let f = parse_format(MMAP).unwrap();
        assert_eq!(f.len(), 7);
        let find = |n: &str| f.iter().find(|x| x.name == n).cloned().unwrap();
        assert_eq!(
            find("len"),
            Field {
                name: "len".into(),
                offset: 24,
                size: 8
            }
        );
        assert_eq!((find("comm").offset, find("comm").size), (32, 16));
        assert!(parse_format("name: x\nID: 1\n").is_err());
        assert!(parse_format("\tfield:int x;\tsize:4;\n")
            .unwrap_err()
            .to_string()
            .contains("offset"));
    }

    #[test]
    fn events_are_read_from_a_tracefs_tree_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let ev = dir.path().join("events/syscalls/sys_enter_mmap");
        std::fs::create_dir_all(&ev).unwrap();
        std::fs::write(ev.join("id"), "174\n").unwrap();
        std::fs::write(ev.join("format"), MMAP).unwrap();
        let t = read_from(dir.path(), &[("syscalls", "sys_enter_mmap")]).unwrap();
        assert_eq!((t[0].id, t[0].field("addr").unwrap().offset), (174, 16));
        let e = read_from(dir.path(), &[("syscalls", "sys_enter_brk")]).unwrap_err();
        assert!(e.to_string().contains("syscalls:sys_enter_brk"), "{e}");
    }

    #[test]
    fn mountinfo_names_a_tracefs_or_a_debugfs_with_tracing_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let info = dir.path().join("mountinfo");
        std::fs::write(
            &info,
            "22 1 0:21 / /proc rw,nosuid - proc proc rw\n\
             30 22 0:7 / /sys/kernel/debug rw - debugfs debugfs rw\n",
        )
        .unwrap();
        assert_eq!(
            mounted(&info),
            Some(PathBuf::from("/sys/kernel/debug/tracing"))
        );
        std::fs::write(
            &info,
            "30 22 0:7 / /sys/kernel/debug rw - debugfs debugfs rw\n\
             31 22 0:12 / /my\\040trace rw shared:5 - tracefs tracefs rw\n",
        )
        .unwrap();
        assert_eq!(mounted(&info), Some(PathBuf::from("/my trace")));
        std::fs::write(&info, "22 1 0:21 / /proc rw - proc proc rw\n").unwrap();
        assert_eq!(mounted(&info), None);
    }
}
