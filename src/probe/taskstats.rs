//! The kernel's exit records of processes (taskstats over generic netlink): each task that exits
//! on a registered CPU sends one, and with CONFIG_TASK_XACCT it carries `hiwater_rss`, the
//! process's high-water mark (VmHWM) at that moment. A process that peaks and exits between two
//! samples has no /proc/PID/status left to read, and memmon is not the parent of an attached
//! one; its exit record still has the peak.
//!
//! No thread: the socket is registered for every online CPU and read, without blocking, at each
//! tick (the kernel queues the records in between; a full queue is counted as lost records).
//! A socket filter (classic BPF, [`ExitWatch::keep_only`]) drops in the kernel the records of
//! processes that are not of the tree, so a busy machine's other exits cost memmon nothing.
//! Registering needs CAP_NET_ADMIN (the kernel's GENL_ADMIN_PERM) in the initial PID namespace.
//! Hand-written netlink: the offsets below are those of `struct taskstats` in the kernel's
//! include/uapi/linux/taskstats.h (checked against TASKSTATS_VERSION 13), and every read is
//! bounded by the lengths the kernel sent.

use crate::sys::raw;
use crate::sys::{WatchFd, Watched};

// Generic netlink (include/uapi/linux/genetlink.h, netlink.h).
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;
const NLA_HDRLEN: usize = 4;
/// nla_type's flag bits (nested, network byte order).
const NLA_TYPE_MASK: u16 = !(0x8000 | 0x4000);

// Taskstats (include/uapi/linux/taskstats.h).
const TASKSTATS_GENL_NAME: &[u8] = b"TASKSTATS\0";
const TASKSTATS_GENL_VERSION: u8 = 1;
const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_CMD_NEW: u8 = 2;
const TASKSTATS_CMD_ATTR_REGISTER_CPUMASK: u16 = 3;
const TASKSTATS_TYPE_PID: u16 = 1;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_PID: u16 = 4;

/// Offsets in `struct taskstats` (x86-64 and every 64-bit ABI: the struct is laid out with
/// explicit alignment attributes) and the version that added each field.
mod off {
    /// `__u16 version`, since version 1.
    pub const VERSION: usize = 0;
    /// `char ac_comm[32]`, version 1.
    pub const AC_COMM: usize = 80;
    /// `__u32 ac_pid` (the task's, i.e. thread's, PID), version 1.
    pub const AC_PID: usize = 128;
    /// `__u32 ac_ppid` (the parent's thread group), version 1.
    pub const AC_PPID: usize = 132;
    /// `__u32 ac_btime` (start, seconds since 1970), version 1.
    pub const AC_BTIME: usize = 136;
    /// `__u64 ac_majflt` (the task's, i.e. thread's, major faults), version 1.
    pub const AC_MAJFLT: usize = 176;
    /// `__u64 hiwater_rss` (KiB), version 1; 0 without CONFIG_TASK_XACCT.
    pub const HIWATER_RSS: usize = 200;
    /// `__u64 ac_btime64`, version 10.
    pub const AC_BTIME64: usize = 344;
    /// `__u32 ac_tgid` (the thread group: the process), version 12.
    pub const AC_TGID: usize = 368;
}

/// The most processes [`ExitWatch::keep_only`] filters on (two instructions per process and
/// field, under the kernel's 4,096); beyond, every record is taken and sorted out at the tick.
pub const FILTER_MAX_PROCESSES: usize = 600;

/// One classic BPF instruction (`struct sock_filter`, include/uapi/linux/filter.h).
type SockFilter = libc::sock_filter;

// Classic BPF opcodes: class | size | mode (linux/bpf_common.h: BPF_LD 0x00, BPF_LDX 0x01,
// BPF_JMP 0x05, BPF_RET 0x06; BPF_W 0x00, BPF_H 0x08; BPF_IMM 0x00, BPF_ABS 0x20, BPF_IND 0x40;
// BPF_JEQ 0x10, BPF_K 0x00), written out as their sums.
const BPF_LD_H_ABS: u16 = 0x28; // BPF_LD | BPF_H | BPF_ABS
const BPF_LD_W_IND: u16 = 0x40; // BPF_LD | BPF_W | BPF_IND
const BPF_LDX_IMM: u16 = 0x01; // BPF_LDX | BPF_W | BPF_IMM
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JA: u16 = 0x05;
const BPF_RET_K: u16 = 0x06;

/// The filter program: keeps a message whose stats' `ac_pid`, `ac_ppid` or `ac_tgid` is one of
/// `pids`. The stats follow the AGGR_PID header (offset 20), the PID attribute (24..32) and, when
/// the kernel padded for 8-byte alignment, a 4-byte TASKSTATS_TYPE_NULL attribute: at 36, or
/// 40 after the pad. Loads are big-endian, so values are compared byte-swapped; a load past the
/// end (a kernel without `ac_tgid`) ends the program with "drop", after `ac_pid` and `ac_ppid`.
fn filter_program(pids: &[u32]) -> Vec<SockFilter> {
    let op = |code, k, jt, jf| SockFilter { code, jt, jf, k };
    let be = |v: u32| u32::from_be_bytes(v.to_ne_bytes());
    let null_type = u16::from_be_bytes(6u16.to_ne_bytes()) as u32;
    let mut p = vec![
        op(BPF_LD_H_ABS, 34, 0, 0),
        op(BPF_JEQ_K, null_type, 0, 2),
        op(BPF_LDX_IMM, 40, 0, 0),
        op(BPF_JA, 1, 0, 0),
        op(BPF_LDX_IMM, 36, 0, 0),
    ];
    for field in [off::AC_PID, off::AC_PPID, off::AC_TGID] {
        p.push(op(BPF_LD_W_IND, field as u32, 0, 0));
        for &pid in pids {
            p.push(op(BPF_JEQ_K, be(pid), 0, 1));
            p.push(op(BPF_RET_K, u32::MAX, 0, 0));
        }
    }
    p.push(op(BPF_RET_K, 0, 0, 0));
    p
}

/// One exit record: a task (thread) that exited, the process it belonged to and that process's
/// high-water mark at the moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// The thread that exited.
    pub pid: u32,
    /// Its process (thread group); `None` from kernels before taskstats version 12, where only
    /// a thread group leader's record (`pid` is the process) can be matched.
    pub tgid: Option<u32>,
    pub ppid: u32,
    /// When the thread started, seconds since 1970.
    pub btime_s: u64,
    /// The process's VmHWM when the thread exited.
    pub hiwater_bytes: u64,
    /// The thread's own major faults (`ac_majflt`: not its process's other threads', not its
    /// children's); the sum over a process's threads is the process's count.
    pub majflt: u64,
    pub comm: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TaskstatsError {
    #[error("cannot open a generic netlink socket: {0}")]
    Socket(std::io::Error),
    #[error("the kernel has no TASKSTATS netlink family (CONFIG_TASKSTATS off): {0}")]
    NoFamily(String),
    #[error("registering for exit records was refused ({0}); it needs root or CAP_NET_ADMIN in the initial PID namespace")]
    Refused(std::io::Error),
    #[error("netlink: {0}")]
    Io(std::io::Error),
}

impl crate::error::Classified for TaskstatsError {
    /// Exit records are a source with a fallback: never the user's doing.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// A netlink socket registered for the exit records of every online CPU.
pub struct ExitWatch {
    fd: WatchFd,
    buf: Vec<u8>,
    /// Times the kernel dropped records because the queue was full (ENOBUFS).
    pub overruns: u64,
    /// Datagrams (and overruns) taken by the drains so far: a drain that adds none found the
    /// socket empty.
    pub received: u64,
}

impl ExitWatch {
    /// The socket in a sleep's slot (see `WaitSet`); `armed`: whether news on it ends the sleep.
    pub fn watched(&self, armed: bool) -> Watched<'_> {
        self.fd.watched(armed)
    }
}

impl ExitWatch {
    /// Opens the socket and registers `cpus` (the kernel's list form, as in
    /// /sys/devices/system/cpu/online: `0-3,8`).
    pub fn open(cpus: &str) -> Result<ExitWatch, TaskstatsError> {
        use rustix::net::{netlink, sockopt, AddressFamily, SocketFlags, SocketType};
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            Some(netlink::GENERIC),
        )
        .map_err(|e| TaskstatsError::Socket(e.into()))?;
        // A deep queue: records of a whole interval wait in it. The plain option is capped at
        // net.core.rmem_max; the forced one (CAP_NET_ADMIN, which registering needs anyway) is
        // not, and without the capability (EPERM) the capped size stays.
        let size = 8 << 20;
        let sized = |what: &str, e: rustix::io::Errno| {
            TaskstatsError::Io(std::io::Error::new(
                std::io::Error::from(e).kind(),
                format!("cannot size the receive queue ({what}): {e}"),
            ))
        };
        sockopt::set_socket_recv_buffer_size(&fd, size).map_err(|e| sized("SO_RCVBUF", e))?;
        match sockopt::set_socket_recv_buffer_size_force(&fd, size) {
            Ok(()) | Err(rustix::io::Errno::PERM) => {}
            Err(e) => return Err(sized("SO_RCVBUFFORCE", e)),
        }
        let mut w = ExitWatch {
            fd: WatchFd::new(fd),
            buf: vec![0u8; 64 * 1024],
            overruns: 0,
            received: 0,
        };
        let family = w.family_id()?;
        let mut cpumask = cpus.trim().as_bytes().to_vec();
        cpumask.push(0);
        let msg = request(
            family,
            SEQ_REGISTER,
            TASKSTATS_CMD_GET,
            TASKSTATS_GENL_VERSION,
            TASKSTATS_CMD_ATTR_REGISTER_CPUMASK,
            &cpumask,
        );
        w.send(&msg)?;
        match w.ack(SEQ_REGISTER)? {
            0 => {}
            e => {
                return Err(TaskstatsError::Refused(std::io::Error::from_raw_os_error(
                    -e,
                )))
            }
        }
        // From now on, reads never block: records are taken at ticks. (A socket left blocking
        // would stop the sampler at its first tick with no record queued: no watch rather.)
        let nonblocking = |e: rustix::io::Errno| {
            TaskstatsError::Io(std::io::Error::new(
                std::io::Error::from(e).kind(),
                format!("cannot make the socket non-blocking (fcntl): {e}"),
            ))
        };
        let fl = rustix::fs::fcntl_getfl(&w.fd).map_err(nonblocking)?;
        rustix::fs::fcntl_setfl(&w.fd, fl | rustix::fs::OFlags::NONBLOCK).map_err(nonblocking)?;
        Ok(w)
    }

    /// Registers on the online CPUs of this machine (/sys/devices/system/cpu/online).
    pub fn open_online() -> Result<ExitWatch, TaskstatsError> {
        let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_else(|_| {
            let n = crate::sys::raw::cpus_configured().unwrap_or(1);
            format!("0-{}", n - 1)
        });
        ExitWatch::open(&cpus)
    }

    fn send(&self, msg: &[u8]) -> Result<(), TaskstatsError> {
        // To the kernel: port 0, no multicast group.
        let kernel = rustix::net::netlink::SocketAddrNetlink::new(0, 0);
        rustix::net::sendto(&self.fd, msg, rustix::net::SendFlags::empty(), &kernel)
            .map_err(|e| TaskstatsError::Io(e.into()))?;
        Ok(())
    }

    /// One datagram (blocking until set non-blocking); its length.
    fn recv(&mut self) -> std::io::Result<usize> {
        loop {
            match rustix::net::recv(&self.fd, &mut self.buf[..], rustix::net::RecvFlags::empty()) {
                Ok((n, _)) => return Ok(n),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Asks the controller for the TASKSTATS family's id.
    fn family_id(&mut self) -> Result<u16, TaskstatsError> {
        let msg = request(
            GENL_ID_CTRL,
            SEQ_FAMILY,
            CTRL_CMD_GETFAMILY,
            1,
            CTRL_ATTR_FAMILY_NAME,
            TASKSTATS_GENL_NAME,
        );
        self.send(&msg)?;
        let n = self.recv().map_err(TaskstatsError::Io)?;
        let buf = &self.buf[..n];
        for (ty, _, payload) in messages(buf) {
            if ty == NLMSG_ERROR {
                let e = error_code(payload);
                return Err(TaskstatsError::NoFamily(
                    std::io::Error::from_raw_os_error(-e).to_string(),
                ));
            }
            let Some(attrs) = payload.get(GENL_HDRLEN..) else {
                continue;
            };
            for (at, value) in attributes(attrs) {
                if at == CTRL_ATTR_FAMILY_ID && value.len() >= 2 {
                    return Ok(u16::from_ne_bytes([value[0], value[1]]));
                }
            }
        }
        Err(TaskstatsError::NoFamily("no family id in the reply".into()))
    }

    /// The kernel's answer to request `seq`: 0, or a negative errno. Other messages (the
    /// family request's own acknowledgement) are skipped.
    fn ack(&mut self, seq: u32) -> Result<i32, TaskstatsError> {
        loop {
            let n = self.recv().map_err(TaskstatsError::Io)?;
            let buf = self.buf[..n].to_vec();
            for (ty, s, payload) in messages(&buf) {
                if ty == NLMSG_ERROR && s == seq {
                    return Ok(error_code(payload));
                }
            }
        }
    }

    /// From now on, has the kernel queue only the records of `pids` (a thread of one, the
    /// process itself, or a child of one); with more than [`FILTER_MAX_PROCESSES`], every
    /// record. Records are sorted out at the tick as well, so a filter is only a saving: when
    /// the kernel refuses the new one (no memory for it), the last one, which would drop the
    /// records of processes that joined since, is detached (every record comes) and the
    /// refusal returned; the caller may try again later.
    pub fn keep_only(&mut self, pids: &[u32]) -> std::io::Result<()> {
        if pids.len() > FILTER_MAX_PROCESSES {
            return raw::detach_filter(&self.fd);
        }
        let refused = match raw::attach_filter(&self.fd, &filter_program(pids)) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        raw::detach_filter(&self.fd)?;
        Err(refused)
    }

    /// Takes every record queued since the last call, appending to `out` those `keep` wants.
    pub fn drain(&mut self, out: &mut Vec<Exit>, mut keep: impl FnMut(&Exit) -> bool) {
        loop {
            match self.recv() {
                Ok(0) => return,
                Ok(n) => {
                    self.received += 1;
                    for e in parse_exits(&self.buf[..n]) {
                        if keep(&e) {
                            out.push(e);
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.overruns += 1;
                    self.received += 1;
                }
                Err(_) => return, // EAGAIN: the queue is empty
            }
        }
    }
}

/// Sequence numbers of the two requests: each acknowledgement is matched to its own (the
/// family request is acknowledged too, after its reply).
const SEQ_FAMILY: u32 = 1;
const SEQ_REGISTER: u32 = 2;

/// A generic netlink request with one attribute, flagged for an acknowledgement.
fn request(family: u16, seq: u32, cmd: u8, version: u8, attr: u16, value: &[u8]) -> Vec<u8> {
    let attr_len = NLA_HDRLEN + value.len();
    let total = NLMSG_HDRLEN + GENL_HDRLEN + align4(attr_len);
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&family.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel assigns it
    m.extend_from_slice(&[cmd, version, 0, 0]);
    m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    m.extend_from_slice(&attr.to_ne_bytes());
    m.extend_from_slice(value);
    m.resize(total, 0);
    m
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The netlink messages of a datagram: (type, sequence number, payload after the 16-byte
/// header).
fn messages(buf: &[u8]) -> impl Iterator<Item = (u16, u32, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let hdr = buf.get(at..at + NLMSG_HDRLEN)?;
        let len = u32::from_ne_bytes(hdr[0..4].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes(hdr[4..6].try_into().unwrap());
        let seq = u32::from_ne_bytes(hdr[8..12].try_into().unwrap());
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            return None;
        }
        let payload = &buf[at + NLMSG_HDRLEN..at + len];
        at += align4(len);
        Some((ty, seq, payload))
    })
}

/// The attributes in `buf`: (type without flag bits, value).
fn attributes(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let hdr = buf.get(at..at + NLA_HDRLEN)?;
        let len = u16::from_ne_bytes([hdr[0], hdr[1]]) as usize;
        let ty = u16::from_ne_bytes([hdr[2], hdr[3]]) & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || at + len > buf.len() {
            return None;
        }
        let value = &buf[at + NLA_HDRLEN..at + len];
        at += align4(len);
        Some((ty, value))
    })
}

/// The errno of an NLMSG_ERROR payload (0 for an acknowledgement).
fn error_code(payload: &[u8]) -> i32 {
    payload
        .get(0..4)
        .map_or(-libc::EPROTO, |b| i32::from_ne_bytes(b.try_into().unwrap()))
}

/// The exit records in one datagram: each TASKSTATS_CMD_NEW message's per-task part
/// (TASKSTATS_TYPE_AGGR_PID: the thread's PID and its stats). The per-process part
/// (AGGR_TGID) is skipped: the kernel fills only delay accounting there, not hiwater_rss.
pub fn parse_exits(buf: &[u8]) -> Vec<Exit> {
    let mut out = Vec::new();
    for (_, _, payload) in messages(buf) {
        let Some(genl) = payload.get(..GENL_HDRLEN) else {
            continue;
        };
        if genl[0] != TASKSTATS_CMD_NEW {
            continue;
        }
        for (ty, nested) in attributes(&payload[GENL_HDRLEN..]) {
            if ty != TASKSTATS_TYPE_AGGR_PID {
                continue;
            }
            let mut pid = None;
            let mut stats = None;
            for (t, v) in attributes(nested) {
                match t {
                    TASKSTATS_TYPE_PID if v.len() >= 4 => {
                        pid = Some(u32::from_ne_bytes(v[..4].try_into().unwrap()))
                    }
                    TASKSTATS_TYPE_STATS => stats = Some(v),
                    _ => {}
                }
            }
            if let (Some(pid), Some(stats)) = (pid, stats) {
                if let Some(e) = parse_stats(pid, stats) {
                    out.push(e);
                }
            }
        }
    }
    out
}

/// Reads the fields memmon uses from a `struct taskstats` of `len` bytes, each only when the
/// struct's version has it and the bytes are there.
fn parse_stats(pid: u32, s: &[u8]) -> Option<Exit> {
    let u16_at = |o: usize| s.get(o..o + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        s.get(o..o + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        s.get(o..o + 8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
    };
    let version = u16_at(off::VERSION)?;
    let hiwater_kib = u64_at(off::HIWATER_RSS)?;
    let btime = match (version >= 10).then(|| u64_at(off::AC_BTIME64)).flatten() {
        Some(b) if b > 0 => b,
        _ => u32_at(off::AC_BTIME)? as u64,
    };
    let tgid = (version >= 12)
        .then(|| u32_at(off::AC_TGID))
        .flatten()
        .filter(|&t| t != 0);
    let comm = s
        .get(off::AC_COMM..off::AC_COMM + 32)
        .map(|c| {
            let c = &c[..c.iter().position(|&b| b == 0).unwrap_or(c.len())];
            String::from_utf8_lossy(c).into_owned()
        })
        .unwrap_or_default();
    Some(Exit {
        pid: u32_at(off::AC_PID).filter(|&p| p != 0).unwrap_or(pid),
        tgid,
        ppid: u32_at(off::AC_PPID).unwrap_or(0),
        btime_s: btime,
        hiwater_bytes: hiwater_kib.saturating_mul(1024),
        majflt: u64_at(off::AC_MAJFLT).unwrap_or(0),
        comm,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A `struct taskstats` of `version` and `len` bytes with the given fields.
    pub(crate) fn stats(
        version: u16,
        len: usize,
        pid: u32,
        tgid: u32,
        btime: u64,
        kib: u64,
    ) -> Vec<u8> {
        let mut s = vec![0u8; len];
        let mut put = |o: usize, b: &[u8]| {
            if o + b.len() <= len {
                s[o..o + b.len()].copy_from_slice(b)
            }
        };
        put(off::VERSION, &version.to_ne_bytes());
        put(off::AC_COMM, b"spiker\0");
        put(off::AC_PID, &pid.to_ne_bytes());
        put(off::AC_PPID, &1u32.to_ne_bytes());
        put(off::AC_BTIME, &(btime as u32).to_ne_bytes());
        put(off::HIWATER_RSS, &kib.to_ne_bytes());
        put(off::AC_MAJFLT, &(kib / 4).to_ne_bytes());
        put(off::AC_BTIME64, &btime.to_ne_bytes());
        put(off::AC_TGID, &tgid.to_ne_bytes());
        s
    }

    fn attr(ty: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((NLA_HDRLEN + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(align4(a.len()), 0);
        a
    }

    /// A TASKSTATS_CMD_NEW message as the kernel sends it at an exit: AGGR_PID (PID, a NULL
    /// pad attribute, STATS), then for a thread group's last thread AGGR_TGID.
    pub(crate) fn exit_message(stats_bytes: &[u8], pid: u32) -> Vec<u8> {
        let mut nested = attr(TASKSTATS_TYPE_PID, &pid.to_ne_bytes());
        nested.extend(attr(6, &[])); // TASKSTATS_TYPE_NULL, for alignment
        nested.extend(attr(TASKSTATS_TYPE_STATS, stats_bytes));
        let mut body = vec![TASKSTATS_CMD_NEW, 1, 0, 0];
        body.extend(attr(TASKSTATS_TYPE_AGGR_PID | 0x8000, &nested));
        let mut tg = attr(2, &pid.to_ne_bytes());
        tg.extend(attr(TASKSTATS_TYPE_STATS, &vec![0u8; stats_bytes.len()]));
        body.extend(attr(5 | 0x8000, &tg));
        let total = NLMSG_HDRLEN + body.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(total as u32).to_ne_bytes());
        m.extend_from_slice(&0x17u16.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend(body);
        m
    }

    #[test]
    fn an_exit_record_gives_the_process_and_its_peak() {
        let mut buf = exit_message(&stats(13, 416, 4242, 4242, 1_700_000_000, 409_600), 4242);
        buf.extend(exit_message(
            &stats(13, 416, 4250, 4242, 1_700_000_001, 512),
            4250,
        ));
        let exits = parse_exits(&buf);
        assert_eq!(
            exits.len(),
            2,
            "the AGGR_TGID part is not a record of its own"
        );
        assert_eq!(exits[0].pid, 4242);
        assert_eq!(exits[0].tgid, Some(4242));
        assert_eq!(exits[0].hiwater_bytes, 400 << 20);
        assert_eq!(exits[0].majflt, 409_600 / 4);
        assert_eq!(exits[0].btime_s, 1_700_000_000);
        assert_eq!(exits[0].comm, "spiker");
        assert_eq!(exits[1].tgid, Some(4242));
    }

    #[test]
    fn an_old_kernels_record_has_no_thread_group_and_a_32_bit_start() {
        // Version 8: 328 bytes, no ac_btime64 (v10) nor ac_tgid (v12).
        let buf = exit_message(&stats(8, 328, 77, 0, 1_600_000_000, 2048), 77);
        let e = &parse_exits(&buf)[0];
        assert_eq!((e.pid, e.tgid), (77, None));
        assert_eq!(e.btime_s, 1_600_000_000);
        assert_eq!(e.hiwater_bytes, 2 << 20);
    }

    #[test]
    fn short_or_truncated_records_are_skipped_not_read_past() {
        // A struct too short to hold hiwater_rss.
        assert!(parse_exits(&exit_message(&stats(13, 150, 1, 1, 1, 1), 1)).is_empty());
        // A datagram cut anywhere yields no record from the cut message, and no panic.
        let whole = exit_message(&stats(13, 416, 9, 9, 1, 1), 9);
        for cut in 0..whole.len() {
            assert!(parse_exits(&whole[..cut]).is_empty(), "cut at {cut}");
        }
    }

    /// The filter program run by the kernel itself: attached to one end of a datagram socket
    /// pair, it must pass exactly the records of the listed processes.
    #[test]
    fn the_kernel_filter_keeps_the_records_of_the_listed_processes_only() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        raw::attach_filter(&b, &filter_program(&[100, 200])).unwrap();
        b.set_nonblocking(true).unwrap();
        let passes = |msg: Vec<u8>| {
            a.send(&msg).unwrap();
            let mut buf = [0u8; 2048];
            b.recv(&mut buf).is_ok_and(|n| n > 0)
        };
        // The leader of a listed process, with and without the kernel's alignment pad.
        assert!(passes(exit_message(&stats(13, 416, 100, 100, 1, 1), 100)));
        assert!(passes(exit_message_unpadded(
            &stats(13, 416, 100, 100, 1, 1),
            100
        )));
        // A thread of a listed process (by ac_tgid), a child of one (by ac_ppid: stats() sets 1,
        // so build one whose parent is 200).
        assert!(passes(exit_message(&stats(13, 416, 150, 200, 1, 1), 150)));
        let mut child = stats(13, 416, 300, 300, 1, 1);
        child[off::AC_PPID..off::AC_PPID + 4].copy_from_slice(&200u32.to_ne_bytes());
        assert!(passes(exit_message(&child, 300)));
        // Anything else is dropped in the kernel, also an old kernel's short record.
        assert!(!passes(exit_message(&stats(13, 416, 300, 300, 1, 1), 300)));
        assert!(!passes(exit_message_unpadded(
            &stats(13, 416, 300, 300, 1, 1),
            300
        )));
        assert!(!passes(exit_message(&stats(8, 328, 301, 0, 1, 1), 301)));
        assert!(passes(exit_message(&stats(8, 328, 100, 0, 1, 1), 100)));
    }

    /// An exit message without the NULL pad attribute (stats right after the PID attribute).
    fn exit_message_unpadded(stats_bytes: &[u8], pid: u32) -> Vec<u8> {
        let mut nested = attr(TASKSTATS_TYPE_PID, &pid.to_ne_bytes());
        nested.extend(attr(TASKSTATS_TYPE_STATS, stats_bytes));
        let mut body = vec![TASKSTATS_CMD_NEW, 1, 0, 0];
        body.extend(attr(TASKSTATS_TYPE_AGGR_PID | 0x8000, &nested));
        let total = NLMSG_HDRLEN + body.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(total as u32).to_ne_bytes());
        m.extend_from_slice(&0x17u16.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend(body);
        m
    }

    /// Runs a child to its end and drains `w` until its exit record comes (up to 20 s: the
    /// kernel queues it as the child exits, but a loaded machine may be slow); whether it came.
    /// Every record drained meanwhile is added to `seen`.
    fn record_of_a_child_comes(w: &mut ExitWatch, seen: &mut Vec<Exit>) -> bool {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < until {
            w.drain(seen, |_| true);
            if seen.iter().any(|e| e.pid == pid) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }

    /// On the kernel itself (root): a filter keeps out the records of other processes, and
    /// above `FILTER_MAX_PROCESSES` the filter is taken off, so that every record comes.
    #[test]
    fn a_filter_keeps_records_out_until_it_is_taken_off() {
        let mut w = match ExitWatch::open_online() {
            Ok(w) => w,
            // Registering needs root (CAP_NET_ADMIN): as another user there is nothing to test.
            Err(e) => {
                assert_ne!(
                    crate::sys::euid(),
                    0,
                    "root could not open exit records: {e}"
                );
                return;
            }
        };
        // Only PID 1's records (and its children's): this test's child is neither.
        w.keep_only(&[1]).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let filtered = child.id();
        child.wait().unwrap();
        // More processes than a filter holds: no filter, every record.
        let many: Vec<u32> = (1..=FILTER_MAX_PROCESSES as u32 + 1).collect();
        w.keep_only(&many).unwrap();
        let mut seen = Vec::new();
        assert!(
            record_of_a_child_comes(&mut w, &mut seen),
            "no record after the filter was taken off"
        );
        // Records are queued in the order of the exits: the first child's would be before.
        assert!(
            !seen.iter().any(|e| e.pid == filtered),
            "the filter let a record through"
        );
    }

    #[test]
    fn the_request_is_one_aligned_message_with_its_attribute() {
        let m = request(
            0x17,
            SEQ_REGISTER,
            TASKSTATS_CMD_GET,
            1,
            TASKSTATS_CMD_ATTR_REGISTER_CPUMASK,
            b"0-1\0",
        );
        assert_eq!(m.len() % 4, 0);
        let (ty, seq, payload) = messages(&m).next().unwrap();
        assert_eq!((ty, seq), (0x17, SEQ_REGISTER));
        let (at, v) = attributes(&payload[GENL_HDRLEN..]).next().unwrap();
        assert_eq!(
            (at, v),
            (TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, &b"0-1\0"[..])
        );
    }
}
