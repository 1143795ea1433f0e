//! The sampling loops' sleep: an epoll set kept from one sleep to the next (`WaitSet`), so a
//! tick that finds nothing new sleeps with one `ppoll` of one descriptor, however many it
//! watches. A `poll` of N descriptors hooks and unhooks each of them at every sleep (perf put
//! about a tenth of a 1 Hz recorder's samples in that poll, five descriptors); with the set, a
//! tick cost 2% less CPU (BENCHMARKS.md).
//!
//! An epoll set remembers a registration by descriptor number and open file, and a number can
//! be closed and given to a new file between two sleeps. So each descriptor a sleep watches is
//! a `WatchFd`: an owned descriptor with an ID no other one gets in memmon's life. A slot whose
//! descriptor is gone, or came back under another ID or number, makes the set start afresh (a
//! new epoll instance: the old one's registrations go with it); that happens when a target
//! restarts, not at a tick.

use rustix::event::epoll::{self, CreateFlags, EventData, EventFlags};
use rustix::event::{PollFd, PollFlags, Timespec};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// IDs for `WatchFd`s; 0 is for descriptors never closed (the signal socket).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A descriptor a sleep can watch, with an ID that no other `WatchFd` gets while memmon runs.
#[derive(Debug)]
pub struct WatchFd {
    fd: OwnedFd,
    id: u64,
}

impl WatchFd {
    pub fn new(fd: OwnedFd) -> WatchFd {
        WatchFd {
            fd,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// This descriptor in a sleep's slot; `armed`: whether its readiness ends the sleep (one
    /// that is not stays registered, silenced, until armed again).
    pub fn watched(&self, armed: bool) -> Watched<'_> {
        Watched {
            fd: self.fd.as_fd(),
            id: self.id,
            armed,
        }
    }
}

impl AsFd for WatchFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A descriptor in one slot of a sleep (see [`WaitSet::wait`]).
#[derive(Debug, Clone, Copy)]
pub struct Watched<'a> {
    fd: BorrowedFd<'a>,
    id: u64,
    armed: bool,
}

impl<'a> Watched<'a> {
    /// Whether its readiness ends the sleep.
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// The same descriptor, armed only if it was and `also` holds.
    pub fn armed_if(self, also: bool) -> Watched<'a> {
        Watched {
            armed: self.armed && also,
            ..self
        }
    }

    pub fn fd(&self) -> BorrowedFd<'a> {
        self.fd
    }
}

impl Watched<'static> {
    /// A descriptor that stays open, the same file, until memmon exits.
    pub fn forever(fd: BorrowedFd<'static>) -> Watched<'static> {
        Watched {
            fd,
            id: 0,
            armed: true,
        }
    }
}

/// What the set holds in a slot: the number and ID registered there, and whether it is armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Registered {
    fd: RawFd,
    id: u64,
    armed: bool,
}

/// An epoll set over numbered slots, kept across sleeps.
pub struct WaitSet {
    epoll: OwnedFd,
    slots: Vec<Option<Registered>>,
}

impl std::fmt::Debug for WaitSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitSet")
            .field("epoll", &self.epoll)
            .field("slots", &self.slots)
            .finish_non_exhaustive()
    }
}

impl WaitSet {
    pub fn new() -> io::Result<WaitSet> {
        Ok(WaitSet {
            epoll: epoll::create(CreateFlags::CLOEXEC)?,
            slots: Vec::new(),
        })
    }

    /// Sleeps until an armed descriptor of `fds` is ready to read (or hung up, or in error), or
    /// `timeout` passes (`None`: no limit); `ready[i]` tells whether `fds[i]` is. A signal that
    /// interrupts the sleep (EINTR) ends it with none ready, as a timeout does. The slots are
    /// the caller's: slot `i` must hold the same descriptor (`WatchFd`) from one call to the
    /// next, or `None`; any other change costs a fresh set, not a wrong answer.
    pub fn wait(
        &mut self,
        fds: &[Option<Watched<'_>>],
        timeout: Option<Duration>,
        ready: &mut [bool],
    ) -> io::Result<()> {
        ready.iter_mut().for_each(|r| *r = false);
        if self.sync(fds).is_err() {
            // The kernel refused an epoll set or a registration (no memory or descriptors, or
            // the user's limit on watches): this sleep polls the armed descriptors themselves.
            return poll_armed(fds, timeout, ready);
        }
        let mut polled = [PollFd::from_borrowed_fd(self.epoll.as_fd(), PollFlags::IN)];
        if super::poll(&mut polled, timeout)? == 0 {
            return Ok(());
        }
        // Level-triggered: a call returns up to a buffer's worth and puts those at the back of
        // the kernel's ready list, so enough calls see every ready slot.
        let mut buf = [MaybeUninit::<epoll::Event>::uninit(); 16];
        for _ in 0..=fds.len() / buf.len() {
            let (got, _) = epoll::wait(&self.epoll, &mut buf[..], Some(&Timespec::default()))?;
            for e in got.iter() {
                if let Some(r) = ready.get_mut(e.data.u64() as usize) {
                    *r = true;
                }
            }
            if got.len() < 16 {
                break;
            }
        }
        Ok(())
    }

    /// Registers what `fds` holds: an armed slot is watched for input, an unarmed one kept
    /// silent; a slot emptied, or holding another descriptor, starts a fresh set.
    fn sync(&mut self, fds: &[Option<Watched<'_>>]) -> io::Result<()> {
        if fds.len() != self.slots.len() && self.slots.iter().all(Option::is_none) {
            self.slots = vec![None; fds.len()];
        }
        let fresh = fds.len() != self.slots.len()
            || fds.iter().zip(&self.slots).any(|(w, r)| match (w, r) {
                (None, None) | (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some(w), Some(r)) => w.fd.as_raw_fd() != r.fd || w.id != r.id,
            });
        if fresh {
            self.epoll = epoll::create(CreateFlags::CLOEXEC)?;
            self.slots = vec![None; fds.len()];
        }
        for (i, (w, r)) in fds.iter().zip(self.slots.iter_mut()).enumerate() {
            let Some(w) = w else { continue };
            let flags = if w.armed {
                EventFlags::IN
            } else {
                EventFlags::empty()
            };
            let data = EventData::new_u64(i as u64);
            match r {
                Some(r) if r.armed == w.armed => continue,
                Some(_) => epoll::modify(&self.epoll, w.fd, data, flags)?,
                None => epoll::add(&self.epoll, w.fd, data, flags)?,
            }
            *r = Some(Registered {
                fd: w.fd.as_raw_fd(),
                id: w.id,
                armed: w.armed,
            });
        }
        Ok(())
    }
}

/// `WaitSet::wait` without the set: one `poll` of the armed descriptors.
fn poll_armed(
    fds: &[Option<Watched<'_>>],
    timeout: Option<Duration>,
    ready: &mut [bool],
) -> io::Result<()> {
    let armed: Vec<_> = fds
        .iter()
        .map(|w| w.filter(|w| w.armed).map(|w| w.fd))
        .collect();
    super::wait_ready_into(&armed, timeout, ready)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Waker;
    use std::time::Instant;

    fn waker() -> WatchFd {
        WatchFd::new(rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap())
    }

    fn wake(w: &WatchFd) {
        rustix::io::write(w, &1u64.to_ne_bytes()).unwrap();
    }

    fn reset(w: &WatchFd) {
        let mut b = [0u8; 8];
        rustix::io::read(w, &mut b).unwrap();
    }

    #[test]
    fn a_sleep_ends_at_its_timeout_with_nothing_ready() {
        let (a, b) = (waker(), waker());
        let mut set = WaitSet::new().unwrap();
        let mut ready = [true; 2];
        let start = Instant::now();
        set.wait(
            &[Some(a.watched(true)), Some(b.watched(true))],
            Some(Duration::from_millis(30)),
            &mut ready,
        )
        .unwrap();
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert_eq!(ready, [false, false]);
    }

    #[test]
    fn the_ready_slot_is_told_and_an_unarmed_one_does_not_end_the_sleep() {
        let (a, b, c) = (waker(), waker(), waker());
        let mut set = WaitSet::new().unwrap();
        let mut ready = [false; 3];
        wake(&b);
        let fds = [Some(a.watched(true)), Some(b.watched(true)), None];
        set.wait(&fds, Some(Duration::from_secs(60)), &mut ready)
            .unwrap();
        assert_eq!(ready, [false, true, false]);
        // Still readable but unarmed: the sleep lasts to its timeout.
        let fds = [
            Some(a.watched(true)),
            Some(b.watched(false)),
            Some(c.watched(true)),
        ];
        let start = Instant::now();
        set.wait(&fds, Some(Duration::from_millis(30)), &mut ready)
            .unwrap();
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert_eq!(ready, [false, false, false]);
        // Armed again, it is heard at once.
        let fds = [
            Some(a.watched(true)),
            Some(b.watched(true)),
            Some(c.watched(true)),
        ];
        set.wait(&fds, Some(Duration::from_secs(60)), &mut ready)
            .unwrap();
        assert_eq!(ready, [false, true, false]);
        reset(&b);
    }

    #[test]
    fn a_new_descriptor_under_an_old_number_is_watched() {
        let keep = waker();
        let mut set = WaitSet::new().unwrap();
        let mut ready = [false; 2];
        let old = waker();
        let number = old.as_fd().as_raw_fd();
        set.wait(
            &[Some(keep.watched(true)), Some(old.watched(true))],
            Some(Duration::ZERO),
            &mut ready,
        )
        .unwrap();
        drop(old);
        // The kernel gives the lowest free number: the one just closed.
        let new = waker();
        assert_eq!(new.as_fd().as_raw_fd(), number, "the number is reused");
        wake(&new);
        set.wait(
            &[Some(keep.watched(true)), Some(new.watched(true))],
            Some(Duration::from_secs(60)),
            &mut ready,
        )
        .unwrap();
        assert_eq!(ready, [false, true]);
    }

    #[test]
    fn a_slot_emptied_and_filled_again_is_watched() {
        let mut set = WaitSet::new().unwrap();
        let mut ready = [false; 1];
        let first = waker();
        set.wait(
            &[Some(first.watched(true))],
            Some(Duration::ZERO),
            &mut ready,
        )
        .unwrap();
        drop(first);
        set.wait(&[None], Some(Duration::ZERO), &mut ready).unwrap();
        let second = waker();
        wake(&second);
        set.wait(
            &[Some(second.watched(true))],
            Some(Duration::from_secs(60)),
            &mut ready,
        )
        .unwrap();
        assert_eq!(ready, [true]);
    }

    #[test]
    fn the_poll_without_a_set_answers_as_the_set_does() {
        let (a, b, c) = (waker(), waker(), waker());
        wake(&b);
        wake(&c);
        let mut ready = [false; 4];
        let fds = [
            Some(a.watched(true)),
            Some(b.watched(true)),
            None,
            Some(c.watched(false)),
        ];
        poll_armed(&fds, Some(Duration::from_secs(60)), &mut ready).unwrap();
        assert_eq!(ready, [false, true, false, false]);
    }

    #[test]
    fn a_waker_from_another_thread_ends_the_sleep() {
        let w = std::sync::Arc::new(Waker::new().unwrap());
        let theirs = w.clone();
        let mut set = WaitSet::new().unwrap();
        let mut ready = [false; 1];
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            theirs.wake();
        });
        set.wait(
            &[Some(w.watched())],
            Some(Duration::from_secs(60)),
            &mut ready,
        )
        .unwrap();
        t.join().unwrap();
        assert_eq!(ready, [true]);
    }
}
