//! The kernel's fork events (the process events connector, netlink `NETLINK_CONNECTOR`): each
//! new process sends one, with the process its parent belongs to. With them the tree finds a
//! member's new children without reading every thread's /proc/PID/task/TID/children file at each
//! tick: a daemon of hundreds of threads costs what a single-threaded process does, at any rate.
//!
//! No thread: the socket is read, without blocking, at each tick (the kernel queues the events in
//! between; a full queue is counted, and the tree then reads every children file once). A socket
//! filter (classic BPF, [`ForkWatch::keep_parents`]) drops in the kernel the events of threads and
//! of processes whose parent is not of the tree, so a busy machine's other forks cost memmon
//! nothing. The kernel sends events only to listeners in the initial PID and user namespaces
//! (they name processes by their PIDs there); older kernels only to root (CAP_NET_ADMIN), while
//! Linux 6.18 lets any user listen (measured). [`ForkWatch::open`] proves the events reach it (it
//! starts a thread, whose creation queues an event before it returns) or gives up: the caller
//! then reads the children files as before. Hand-written netlink: the offsets below are those of
//! `struct cn_msg` (include/uapi/linux/connector.h) and `struct proc_event`
//! (include/uapi/linux/cn_proc.h), and every read is bounded by the length the kernel sent. The
//! socket, its queue size, `bind`, `sendto` and `recv` are rustix's; the filter is attached by
//! `sys::raw::attach_filter` (rustix has no socket filter option).

use crate::sys::raw;
use crate::sys::{WatchFd, Watched};
use rustix::net::netlink::{self, SocketAddrNetlink};

// include/uapi/linux/netlink.h, connector.h, cn_proc.h.
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const NLMSG_DONE: u16 = 3;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_CN_MCAST_IGNORE: u32 = 2;
const PROC_EVENT_FORK: u32 = 1;

/// Offsets in a datagram: a 16-byte `nlmsghdr`, a 20-byte `cn_msg`, then `struct proc_event`
/// (`what` at 0, `cpu` at 4, `timestamp_ns` at 8, the event's data at 16).
mod off {
    pub const CN_IDX: usize = 16;
    pub const CN_VAL: usize = 20;
    pub const WHAT: usize = 36;
    /// `fork.parent_tgid`: the process of the parent (the thread that forked, or with
    /// CLONE_PARENT its parent).
    pub const PARENT_TGID: usize = 56;
    /// `fork.child_pid` and `fork.child_tgid`: equal for a new process, not for a new thread.
    pub const CHILD_PID: usize = 60;
    pub const CHILD_TGID: usize = 64;
    pub const END: usize = 68;
}

/// The most parents [`ForkWatch::keep_parents`] filters on (two instructions each, under the
/// kernel's 4,096); beyond, every new process's event is taken and sorted out at the tick.
pub const FILTER_MAX_PARENTS: usize = 1500;

/// A new process and the process its parent belongs to (PIDs of the initial namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fork {
    pub parent: u32,
    pub child: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ForkWatchError {
    #[error("cannot open a connector netlink socket: {0}")]
    Socket(std::io::Error),
    #[error(
        "listening to process events was refused ({0}); it needs root in the initial PID namespace"
    )]
    Refused(std::io::Error),
    #[error("no process event arrived for a thread memmon started (not root, not in the initial PID namespace, or a kernel without CONFIG_PROC_EVENTS)")]
    Silent,
}

impl crate::error::Classified for ForkWatchError {
    /// Fork events are a source with a fallback (the children files): never the user's doing.
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Failure
    }
}

/// One classic-BPF instruction (`struct sock_filter`, include/uapi/linux/filter.h).
type SockFilter = libc::sock_filter;

// Classic BPF opcodes (linux/bpf_common.h), written out as their sums.
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_TAX: u16 = 0x07; // BPF_MISC | BPF_TAX
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JEQ_X: u16 = 0x1d; // BPF_JMP | BPF_JEQ | BPF_X
const BPF_RET_K: u16 = 0x06;

/// What the filter lets through.
#[derive(Clone, Copy)]
enum Keep<'a> {
    /// The events of new processes whose parent is one of these (all of them when `None`).
    Processes(Option<&'a [u32]>),
    /// The events of new threads of process `tgid` (the proof of [`ForkWatch::open`]).
    ThreadsOf(u32),
}

/// The filter program. Loads are big-endian, so values are compared byte-swapped; a load past
/// the end of a datagram ends the program with "drop".
fn filter_program(keep: Keep) -> Vec<SockFilter> {
    let op = |code, k, jt, jf| SockFilter { code, jt, jf, k };
    let be = |v: u32| u32::from_be_bytes(v.to_ne_bytes());
    const ACCEPT: u32 = u32::MAX;
    let mut p = vec![
        // Anything but a fork (an exec, an exit, the acknowledgements of every listener's
        // requests, which the kernel sends to all): dropped.
        op(BPF_LD_W_ABS, off::WHAT as u32, 0, 0),
        op(BPF_JEQ_K, be(PROC_EVENT_FORK), 1, 0),
        op(BPF_RET_K, 0, 0, 0),
    ];
    match keep {
        Keep::ThreadsOf(tgid) => {
            p.push(op(BPF_LD_W_ABS, off::CHILD_TGID as u32, 0, 0));
            p.push(op(BPF_JEQ_K, be(tgid), 0, 1));
            p.push(op(BPF_RET_K, ACCEPT, 0, 0));
        }
        Keep::Processes(parents) => {
            // A new thread (child_pid != child_tgid): dropped.
            p.push(op(BPF_LD_W_ABS, off::CHILD_TGID as u32, 0, 0));
            p.push(op(BPF_TAX, 0, 0, 0));
            p.push(op(BPF_LD_W_ABS, off::CHILD_PID as u32, 0, 0));
            p.push(op(BPF_JEQ_X, 0, 1, 0));
            p.push(op(BPF_RET_K, 0, 0, 0));
            match parents {
                None => p.push(op(BPF_RET_K, ACCEPT, 0, 0)),
                Some(parents) => {
                    p.push(op(BPF_LD_W_ABS, off::PARENT_TGID as u32, 0, 0));
                    for &pid in parents {
                        p.push(op(BPF_JEQ_K, be(pid), 0, 1));
                        p.push(op(BPF_RET_K, ACCEPT, 0, 0));
                    }
                }
            }
        }
    }
    p.push(op(BPF_RET_K, 0, 0, 0));
    p
}

/// What one datagram says.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    Fork {
        parent: u32,
        child: u32,
        child_tgid: u32,
    },
    Other,
}

fn parse_event(buf: &[u8]) -> Event {
    let u32_at = |o: usize| {
        buf.get(o..o + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
    };
    let len = u32_at(0).unwrap_or(0) as usize;
    if len < off::WHAT + 4 || len > buf.len() {
        return Event::Other;
    }
    let buf = &buf[..len];
    let u32_at = |o: usize| {
        buf.get(o..o + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
    };
    if u32_at(off::CN_IDX) != Some(CN_IDX_PROC) || u32_at(off::CN_VAL) != Some(CN_VAL_PROC) {
        return Event::Other;
    }
    match u32_at(off::WHAT) {
        Some(PROC_EVENT_FORK) if buf.len() >= off::END => Event::Fork {
            parent: u32_at(off::PARENT_TGID).unwrap_or(0),
            child: u32_at(off::CHILD_PID).unwrap_or(0),
            child_tgid: u32_at(off::CHILD_TGID).unwrap_or(0),
        },
        _ => Event::Other,
    }
}

/// A connector socket that hears of new processes.
pub struct ForkWatch {
    fd: WatchFd,
    buf: Vec<u8>,
    /// Times the kernel dropped events because the queue was full (ENOBUFS): the tree reads
    /// every children file again after one.
    pub overruns: u64,
    /// Datagrams (and overruns) taken by the drains so far: a drain that adds none found the
    /// socket empty.
    pub received: u64,
}

impl ForkWatch {
    /// Opens the socket, listens, and proves that events arrive: a thread started here must be
    /// heard of at once (the kernel queues the event before the thread's creation returns).
    pub fn open() -> Result<ForkWatch, ForkWatchError> {
        use rustix::net::{sockopt, AddressFamily, SocketFlags, SocketType};
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            Some(netlink::CONNECTOR),
        )
        .map_err(|e| ForkWatchError::Socket(e.into()))?;
        let mut w = ForkWatch {
            fd: WatchFd::new(fd),
            buf: vec![0u8; 4096],
            overruns: 0,
            received: 0,
        };
        let me = std::process::id();
        // Only this process's new threads until proven, so nothing else is queued meanwhile.
        w.set_filter(Keep::ThreadsOf(me))
            .map_err(ForkWatchError::Socket)?;
        // A queue for the forks of a whole interval: past the system's cap where allowed
        // (SO_RCVBUFFORCE, CAP_NET_ADMIN), else up to it (SO_RCVBUF, capped at
        // net.core.rmem_max). Neither is needed: with the default queue a full one is noticed
        // (ENOBUFS at `drain`) and every children file read again, nothing lost.
        let size = 1 << 20;
        if sockopt::set_socket_recv_buffer_size_force(&w.fd, size).is_err() {
            let _ = sockopt::set_socket_recv_buffer_size(&w.fd, size);
        }
        // The process events' multicast group; port 0: the kernel picks ours.
        rustix::net::bind(&w.fd, &SocketAddrNetlink::new(0, CN_IDX_PROC))
            .map_err(|e| ForkWatchError::Refused(e.into()))?;
        w.send_op(PROC_CN_MCAST_LISTEN)
            .map_err(ForkWatchError::Refused)?;
        let probe = std::thread::Builder::new()
            .name("memmon-forks".into())
            .spawn(|| {})
            .map_err(ForkWatchError::Socket)?;
        let _ = probe.join();
        w.proven(me)?;
        w.set_filter(Keep::Processes(Some(&[])))
            .map_err(ForkWatchError::Socket)?;
        Ok(w)
    }

    /// Reads what is queued after the probe thread was started: its event, or nothing (the
    /// kernel did not take the listen request, or sends no events here).
    fn proven(&mut self, me: u32) -> Result<(), ForkWatchError> {
        loop {
            match self.recv() {
                Ok(n) => {
                    if matches!(parse_event(&self.buf[..n]), Event::Fork { child_tgid, .. } if child_tgid == me)
                    {
                        return Ok(());
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(_) => return Err(ForkWatchError::Silent),
            }
        }
    }

    /// Sends a multicast control request (`PROC_CN_MCAST_LISTEN` or `_IGNORE`): a netlink
    /// header, a `cn_msg` for the process connector, and the operation (4 bytes, the form every
    /// kernel takes).
    fn send_op(&self, op: u32) -> std::io::Result<()> {
        let mut m = Vec::with_capacity(40);
        m.extend_from_slice(&40u32.to_ne_bytes());
        m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes()); // flags
        m.extend_from_slice(&0u32.to_ne_bytes()); // seq
        m.extend_from_slice(&0u32.to_ne_bytes()); // port
        m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
        m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes()); // seq
        m.extend_from_slice(&0u32.to_ne_bytes()); // ack
        m.extend_from_slice(&4u16.to_ne_bytes()); // len
        m.extend_from_slice(&0u16.to_ne_bytes()); // flags
        m.extend_from_slice(&op.to_ne_bytes());
        // To the kernel: port 0, no multicast group.
        let kernel = SocketAddrNetlink::new(0, 0);
        rustix::net::sendto(&self.fd, &m, rustix::net::SendFlags::empty(), &kernel)?;
        Ok(())
    }

    fn set_filter(&self, keep: Keep) -> std::io::Result<()> {
        raw::attach_filter(&self.fd, &filter_program(keep))
    }

    /// From now on, has the kernel queue only the events of new processes whose parent is one
    /// of `parents`; with more than [`FILTER_MAX_PARENTS`], of every new process. Returns
    /// false when the kernel refused the filter: the last one stays, and the caller must not
    /// count on events of the new parents.
    pub fn keep_parents(&mut self, parents: &[u32]) -> bool {
        let keep = Keep::Processes((parents.len() <= FILTER_MAX_PARENTS).then_some(parents));
        self.set_filter(keep).is_ok()
    }

    /// One datagram, without blocking; its length.
    fn recv(&mut self) -> std::io::Result<usize> {
        loop {
            match rustix::net::recv(&self.fd, &mut self.buf[..], rustix::net::RecvFlags::empty()) {
                Ok((n, _)) => return Ok(n),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Takes every event queued since the last call, appending the new processes to `out`.
    /// Returns false when the kernel dropped some (the queue was full): a new child may then be
    /// missing from `out`.
    pub fn drain(&mut self, out: &mut Vec<Fork>) -> bool {
        let mut complete = true;
        loop {
            match self.recv() {
                Ok(0) => return complete,
                Ok(n) => {
                    self.received += 1;
                    if let Event::Fork {
                        parent,
                        child,
                        child_tgid,
                    } = parse_event(&self.buf[..n])
                    {
                        if child == child_tgid {
                            out.push(Fork { parent, child });
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.overruns += 1;
                    self.received += 1;
                    complete = false;
                }
                Err(_) => return complete, // EAGAIN: the queue is empty
            }
        }
    }
}

impl ForkWatch {
    /// The socket in a sleep's slot (see `WaitSet`); `armed`: whether news on it ends the sleep.
    pub fn watched(&self, armed: bool) -> Watched<'_> {
        self.fd.watched(armed)
    }
}

impl Drop for ForkWatch {
    fn drop(&mut self) {
        // Kernels before 6.6 count listeners by these requests only, not by sockets.
        let _ = self.send_op(PROC_CN_MCAST_IGNORE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram as the kernel sends it for a fork.
    fn fork_message(parent_tgid: u32, child_pid: u32, child_tgid: u32) -> Vec<u8> {
        let mut m = vec![0u8; off::END];
        m[0..4].copy_from_slice(&(off::END as u32).to_ne_bytes());
        m[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        m[off::CN_IDX..off::CN_IDX + 4].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
        m[off::CN_VAL..off::CN_VAL + 4].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
        m[off::WHAT..off::WHAT + 4].copy_from_slice(&PROC_EVENT_FORK.to_ne_bytes());
        m[off::PARENT_TGID..off::PARENT_TGID + 4].copy_from_slice(&parent_tgid.to_ne_bytes());
        m[off::CHILD_PID..off::CHILD_PID + 4].copy_from_slice(&child_pid.to_ne_bytes());
        m[off::CHILD_TGID..off::CHILD_TGID + 4].copy_from_slice(&child_tgid.to_ne_bytes());
        m
    }

    fn other_message(what: u32) -> Vec<u8> {
        let mut m = fork_message(100, 200, 200);
        m[off::WHAT..off::WHAT + 4].copy_from_slice(&what.to_ne_bytes());
        m
    }

    #[test]
    fn a_fork_datagram_gives_the_parent_and_the_child() {
        assert_eq!(
            parse_event(&fork_message(100, 200, 200)),
            Event::Fork {
                parent: 100,
                child: 200,
                child_tgid: 200
            }
        );
        // Cut anywhere: nothing read past the end, no event.
        let whole = fork_message(100, 200, 200);
        for cut in 0..whole.len() {
            assert!(
                !matches!(parse_event(&whole[..cut]), Event::Fork { .. }),
                "cut at {cut}"
            );
        }
        // Another connector's message is not a process event.
        let mut m = fork_message(100, 200, 200);
        m[off::CN_IDX..off::CN_IDX + 4].copy_from_slice(&7u32.to_ne_bytes());
        assert_eq!(parse_event(&m), Event::Other);
    }

    /// The filter program run by the kernel itself: attached to one end of a datagram socket
    /// pair, it must pass exactly what it is for.
    #[test]
    fn the_kernel_filter_keeps_new_processes_of_the_listed_parents_only() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let attach = |keep: Keep| raw::attach_filter(&b, &filter_program(keep)).unwrap();
        let passes = |msg: Vec<u8>| {
            a.send(&msg).unwrap();
            let mut buf = [0u8; 256];
            b.recv(&mut buf).is_ok_and(|n| n > 0)
        };
        attach(Keep::Processes(Some(&[100, 300])));
        assert!(passes(fork_message(100, 200, 200)), "a child of 100");
        assert!(passes(fork_message(300, 201, 201)), "a child of 300");
        assert!(!passes(fork_message(400, 202, 202)), "a child of another");
        assert!(
            !passes(fork_message(100, 203, 200)),
            "a thread of a child of 100"
        );
        assert!(!passes(other_message(0)), "an acknowledgement");
        assert!(!passes(other_message(0x2)), "an exec");
        assert!(!passes(other_message(0x8000_0000)), "an exit");
        assert!(!passes(fork_message(100, 200, 200)[..50].to_vec()), "cut");
        attach(Keep::Processes(None));
        assert!(passes(fork_message(400, 202, 202)), "any new process");
        assert!(!passes(fork_message(400, 203, 202)), "but no thread");
        attach(Keep::ThreadsOf(500));
        assert!(passes(fork_message(1, 501, 500)), "a thread of 500");
        assert!(!passes(fork_message(500, 600, 600)), "a child of 500");
    }

    #[test]
    fn a_filter_for_the_most_parents_fits_the_kernels_limit() {
        let parents: Vec<u32> = (1..=FILTER_MAX_PARENTS as u32).collect();
        assert!(filter_program(Keep::Processes(Some(&parents))).len() <= 4096);
    }

    /// As root, in the initial namespaces: the events of real children arrive, those of other
    /// processes' children do not.
    #[test]
    fn the_fork_of_a_watched_parent_is_heard_of() {
        let mut w = match ForkWatch::open() {
            Ok(w) => w,
            // The socket opens anywhere; the events come only to the initial PID and user
            // namespaces (and, on older kernels, only to root): elsewhere there is nothing to hear
            // (tests/record.rs checks the fallback to the children files there).
            Err(e) => {
                assert!(
                    matches!(e, ForkWatchError::Silent | ForkWatchError::Refused(_)),
                    "{e}"
                );
                return;
            }
        };
        let me = std::process::id();
        assert!(w.keep_parents(&[me]));
        // From another thread of this process: the parent is the process, not the thread.
        let child = std::thread::spawn(|| std::process::Command::new("true").spawn().unwrap())
            .join()
            .unwrap();
        let mut out = Vec::new();
        assert!(w.drain(&mut out));
        let mut child = child;
        let pid = child.id();
        child.wait().unwrap();
        assert!(
            out.contains(&Fork {
                parent: me,
                child: pid
            }),
            "{out:?}, child {pid}"
        );
        // Not a parent of the filter: not queued.
        assert!(w.keep_parents(&[1]));
        let mut c = std::process::Command::new("true").spawn().unwrap();
        c.wait().unwrap();
        out.clear();
        w.drain(&mut out);
        assert!(out.iter().all(|f| f.parent != me), "{out:?}");
    }
}
