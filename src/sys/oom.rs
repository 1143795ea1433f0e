//! memmon's own place in the OOM killer's order. memmon often shares a memory limit with what
//! it watches (launched in place in a cgroup with a limit, or attached inside the service's
//! slice); when that limit is hit, the kernel kills the process with the highest
//! `oom_score_adj`-weighted size, and a small command beside a recorder holding its ledger can
//! make memmon the one killed, losing the recording that would have said why. So memmon lowers
//! its own `oom_score_adj` to -999 where it may (lowering needs CAP_SYS_RESOURCE): killed last,
//! still killable (-1000 would make it unkillable, and a cgroup left holding memmon alone could
//! not recover). Every process it starts gets the value memmon had back before its exec
//! ([`restore_in_child`]; raising is always allowed), so the command is killed as it would be
//! without memmon.

use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicI32, Ordering};

/// The value memmon lowers its own to.
pub const SHIELDED: i32 = -999;

/// The value memmon had before it lowered its own; `NOT_LOWERED` when it did not.
static BEFORE: AtomicI32 = AtomicI32::new(NOT_LOWERED);
const NOT_LOWERED: i32 = i32::MIN;

const FILE: &str = "/proc/self/oom_score_adj";

/// Lowers memmon's own `oom_score_adj` to [`SHIELDED`]; the value it had, where it lowered it
/// (not where it was already as low, or the kernel refused: no CAP_SYS_RESOURCE).
pub fn shield_self() -> Option<i32> {
    let before: i32 = std::fs::read_to_string(FILE).ok()?.trim().parse().ok()?;
    if before <= SHIELDED {
        return None;
    }
    std::fs::write(FILE, SHIELDED.to_string()).ok()?;
    BEFORE.store(before, Ordering::Relaxed);
    Some(before)
}

/// Makes `cmd`'s process write memmon's former `oom_score_adj` back to its own before its exec,
/// where memmon lowered its own; a child that cannot is not started (it would run shielded).
pub fn restore_in_child(cmd: &mut std::process::Command) {
    let before = BEFORE.load(Ordering::Relaxed);
    if before == NOT_LOWERED {
        return;
    }
    // Formatted here: between fork and exec nothing may allocate.
    let (text, len) = decimal(before);
    // SAFETY: the closure makes three system calls through rustix (open, write, close by drop)
    // on a path and bytes made before the fork: no allocation, no lock.
    unsafe {
        cmd.pre_exec(move || {
            let fd = rustix::fs::open(
                c"/proc/self/oom_score_adj",
                rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?;
            rustix::io::write(&fd, &text[..len])?;
            Ok(())
        });
    }
}

/// `n` in decimal, in a buffer and its length.
fn decimal(n: i32) -> ([u8; 12], usize) {
    let mut out = [0u8; 12];
    let mut digits = [0u8; 10];
    let mut m = n.unsigned_abs();
    let mut k = 0;
    loop {
        digits[k] = b'0' + (m % 10) as u8;
        k += 1;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    let mut len = 0;
    if n < 0 {
        out[0] = b'-';
        len = 1;
    }
    for d in digits[..k].iter().rev() {
        out[len] = *d;
        len += 1;
    }
    (out, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_the_kernel_reads_them() {
        for n in [0, 7, -999, 1000, -1000, i32::MIN + 1, i32::MAX] {
            let (b, len) = decimal(n);
            assert_eq!(std::str::from_utf8(&b[..len]).unwrap(), n.to_string());
        }
    }
}
