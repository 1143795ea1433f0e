//! The hand-written `libc` calls: only those no crate wraps (rustix has no `wait4` with its
//! rusage, no `si_pid` from `waitid`, no classic-BPF socket filter, no processor count, no
//! `perf_event_open` or its ioctls, and `fork` only in its experimental runtime API). Each
//! `unsafe` block says why it is sound.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// `SO_ATTACH_FILTER`: has the kernel run `prog` (classic BPF) on each datagram queued to
/// `sock`, dropping those it returns 0 for. Replaces the filter there was.
pub fn attach_filter(sock: impl AsFd, prog: &[libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(prog.len()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a filter over 65535 instructions",
        )
    })?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points to `len` instructions that outlive the call (the kernel copies
    // them, and only reads them), and its size is passed with it.
    let r = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    check(r)
}

/// `SO_DETACH_FILTER`: every datagram is queued again. No filter to detach is no error.
pub fn detach_filter(sock: impl AsFd) -> io::Result<()> {
    // The option's value is not read, but the kernel refuses (EINVAL) one shorter than an int.
    let unused: libc::c_int = 0;
    // SAFETY: a pointer to an int that outlives the call, and its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DETACH_FILTER,
            (&unused as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    match check(r) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        other => other,
    }
}

/// The PID of a child of memmon that has exited and waits to be reaped, without reaping it
/// (`waitid(P_ALL, WEXITED | WNOHANG | WNOWAIT)`); `None` when there is none.
pub fn exited_child() -> io::Result<Option<i32>> {
    // SAFETY: all zeroes is a valid siginfo_t (plain integers and a union of them).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid siginfo_t for the kernel to fill; no other pointer.
    let r = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    match check(r) {
        // ECHILD: no child at all.
        Err(e) if e.raw_os_error() == Some(libc::ECHILD) => Ok(None),
        Err(e) => Err(e),
        // SAFETY: waitid succeeded, so `info` holds a child's state, or zeroes when none has
        // exited (WNOHANG); si_pid reads the PID field of the SIGCHLD layout either way.
        Ok(()) => Ok(Some(unsafe { info.si_pid() }).filter(|&p| p > 0)),
    }
}

/// How a child ended, and what it used.
pub struct Reaped {
    /// The wait status (`WIFEXITED`, `WEXITSTATUS`, ... read it).
    pub status: i32,
    pub rusage: libc::rusage,
}

/// `wait4(pid)`: reaps the child `pid` with its own rusage (`ru_maxrss` of that process,
/// not RUSAGE_CHILDREN's maximum over every child). With `nohang`, `None` while it runs.
/// Interrupted by a signal: `ErrorKind::Interrupted`.
pub fn wait4(pid: i32, nohang: bool) -> io::Result<Option<Reaped>> {
    let mut status = 0;
    // SAFETY: all zeroes is a valid rusage (plain integers).
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = if nohang { libc::WNOHANG } else { 0 };
    // SAFETY: `status` and `rusage` are valid for the kernel to fill.
    let r = unsafe { libc::wait4(pid, &mut status, flags, &mut rusage) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r == pid).then_some(Reaped { status, rusage }))
}

/// The processors online (`sysconf(_SC_NPROCESSORS_ONLN)`: every one the kernel runs, not the
/// affinity mask `std::thread::available_parallelism` gives); `None` if it will not say.
pub fn cpus_online() -> Option<u64> {
    // SAFETY: sysconf takes an integer and touches no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    (n > 0).then_some(n as u64)
}

/// The processors configured (`sysconf(_SC_NPROCESSORS_CONF)`, online or not); `None` if the
/// libc will not say.
pub fn cpus_configured() -> Option<u64> {
    // SAFETY: sysconf takes an integer and touches no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    (n > 0).then_some(n as u64)
}

/// Which side of a `fork` this is.
pub enum Forked {
    Child,
    Parent { child: i32 },
}

/// `fork(2)`.
///
/// # Safety
/// In a process with more than one thread, the child may only call async-signal-safe
/// functions (no allocation, no lock another thread may have held) until it execs or ends
/// with [`exit_now`].
pub unsafe fn fork() -> io::Result<Forked> {
    // SAFETY: the caller keeps the child to what is safe after a fork (above).
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        child => Ok(Forked::Parent { child }),
    }
}

/// `_exit(2)`: ends the process at once, without the exit handlers or destructors that a
/// forked child must not run twice.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { libc::_exit(code) }
}

/// `perf_event_open(2)`: an event described by `attr` (its `size` field set), for the process
/// `pid` (-1: every process) on `cpu` (-1: any), close-on-exec, no group.
pub fn perf_event_open(
    attr: &crate::sys::perf::Attr,
    pid: i32,
    cpu: i32,
) -> io::Result<std::os::fd::OwnedFd> {
    perf_event_open_flags(attr, pid, cpu, 0)
}

/// `perf_event_open(2)` on `cpu` for the processes of the cgroup (v2, or v1's perf_event
/// hierarchy) whose directory `cgroup` is open, and of the cgroups below it
/// (`PERF_FLAG_PID_CGROUP`): the kernel leaves every other process out.
pub fn perf_event_open_cgroup(
    attr: &crate::sys::perf::Attr,
    cgroup: std::os::fd::BorrowedFd<'_>,
    cpu: i32,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    perf_event_open_flags(attr, cgroup.as_raw_fd(), cpu, PERF_FLAG_PID_CGROUP)
}

fn perf_event_open_flags(
    attr: &crate::sys::perf::Attr,
    pid: i32,
    cpu: i32,
    flags: u32,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: `attr` points to a whole `perf_event_attr` (repr(C), its `size` the struct's)
    // that outlives the call; the kernel only reads it (and writes `size` back on E2BIG, into
    // memory we own). The other arguments are integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const crate::sys::perf::Attr,
            pid,
            cpu,
            -1,
            libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC | flags),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// `PERF_FLAG_FD_CLOEXEC`, `PERF_FLAG_PID_CGROUP`.
const PERF_FLAG_FD_CLOEXEC: u32 = 1 << 3;
const PERF_FLAG_PID_CGROUP: u32 = 1 << 2;

/// The perf ioctls memmon makes (`'$'`, from linux/perf_event.h).
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;
const PERF_EVENT_IOC_ID: libc::c_ulong = 0x8008_2407;

/// `PERF_EVENT_IOC_ENABLE` (or `_DISABLE`): the event starts (or stops) counting.
pub fn perf_enable(fd: impl AsFd, on: bool) -> io::Result<()> {
    let req = if on {
        PERF_EVENT_IOC_ENABLE
    } else {
        PERF_EVENT_IOC_DISABLE
    };
    // SAFETY: these ioctls take no pointer (the argument is ignored).
    check(unsafe { libc::ioctl(fd.as_fd().as_raw_fd(), req, 0) })
}

/// `PERF_EVENT_IOC_SET_FILTER`: a tracepoint's filter, in the kernel's filter language
/// (`len >= 1048576`).
pub fn perf_set_filter(fd: impl AsFd, filter: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: a NUL-terminated string that outlives the call; the kernel copies it.
    check(unsafe {
        libc::ioctl(
            fd.as_fd().as_raw_fd(),
            PERF_EVENT_IOC_SET_FILTER,
            filter.as_ptr(),
        )
    })
}

/// `PERF_EVENT_IOC_SET_OUTPUT`: the event's records go to `target`'s ring buffer (an event on
/// the same CPU).
pub fn perf_set_output(fd: impl AsFd, target: impl AsFd) -> io::Result<()> {
    // SAFETY: the argument is a descriptor number, no pointer.
    check(unsafe {
        libc::ioctl(
            fd.as_fd().as_raw_fd(),
            PERF_EVENT_IOC_SET_OUTPUT,
            target.as_fd().as_raw_fd(),
        )
    })
}

/// `PERF_EVENT_IOC_ID`: the event's ID, as its samples carry it (`PERF_SAMPLE_IDENTIFIER`).
pub fn perf_id(fd: impl AsFd) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: a pointer to a u64 we own, which the kernel fills.
    check(unsafe { libc::ioctl(fd.as_fd().as_raw_fd(), PERF_EVENT_IOC_ID, &mut id) })?;
    Ok(id)
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait4_gives_the_status_and_the_childs_own_peak() {
        // SAFETY: the child only sleeps (nanosleep) and calls _exit.
        let child = match unsafe { fork() }.unwrap() {
            Forked::Child => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                exit_now(7)
            }
            Forked::Parent { child } => child,
        };
        let reaped = loop {
            match wait4(child, false) {
                Ok(Some(r)) => break r,
                Ok(None) => panic!("a blocking wait4 returned without the child"),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("{e}"),
            }
        };
        assert!(libc::WIFEXITED(reaped.status));
        assert_eq!(libc::WEXITSTATUS(reaped.status), 7);
        assert!(reaped.rusage.ru_maxrss > 0);
        // Reaped: no such child any more.
        assert!(wait4(child, true).is_err());
    }

    #[test]
    fn a_filter_drops_in_the_kernel_until_detached() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let passes = |msg: &[u8]| {
            a.send(msg).unwrap();
            let mut buf = [0u8; 16];
            b.recv(&mut buf).is_ok()
        };
        // Nothing attached yet: detaching is no error.
        detach_filter(&b).unwrap();
        // One instruction: keep 0 bytes of each datagram (BPF_RET | BPF_K, 0): drop it.
        let none = [libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0,
        }];
        attach_filter(&b, &none).unwrap();
        assert!(!passes(b"dropped"));
        detach_filter(&b).unwrap();
        assert!(passes(b"kept"));
    }

    #[test]
    fn there_is_at_least_one_cpu() {
        assert!(cpus_online().unwrap() >= 1);
        assert!(cpus_configured().unwrap() >= cpus_online().unwrap());
    }
}
