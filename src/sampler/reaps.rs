//! Departures without exit records: each process that left the tree is counted once, from
//! what /proc shows — a member found gone, a child found already exited (a zombie), and a
//! reap no known departure explains (a rise of the reaper's `cminflt`: a child born and gone
//! between two samples).
//!
//! A rise of `cminflt` says "at least one child was reaped since the last read", never how
//! many, and a departure found by the walk may show as its parent's rise in the same tick or
//! the next. A rise counts as a new departure only when no departure of that reaper's children
//! can be behind it, so no process is counted twice; the count is a lower bound (a reaper that
//! reaped a known child and an unseen one between two reads rises once).
//!
//! What makes that hold: within a tick every reaper is read before its children (the tree keeps
//! members in discovery order) and the children lists are read last; so a departure the tick
//! `u` finds was reaped after the reaper's read of tick `u - 1` and before its read of tick
//! `u + 1`. A rise read at tick `v` is explained by any known departure of its children found at
//! a tick before `v` and not yet matched (it was reaped before this read, and after the read
//! before it, which matched or dropped all older ones), or else by one found at `v` itself.

/// At most this many departures wait for their reaper's read (a bound for reapers whose
/// `cminflt` cannot be read).
const DEAD_KEEP: usize = 65_536;

/// Who reaps a process that left: a member (its parent), someone outside the tree whose reaps
/// memmon never reads (the subreaper of a launched command: memmon), or not known (its parent
/// left the tree first: it was re-parented, maybe to a member that is a subreaper).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaper {
    Member(i32),
    Outside,
    Unknown,
}

/// A process of the tree known to have exited, until a read of its reaper accounts for its reap.
#[derive(Debug)]
struct Dead {
    pid: i32,
    start: u64,
    reaper: Reaper,
    /// The tick at which it was found reaped (gone from /proc); `None` while it is a zombie.
    reaped_at: Option<u64>,
    /// The last tick a children list named it (a zombie waiting to be reaped).
    listed_at: u64,
}

/// The departures of a tree without exit records. Call [`Reaps::tick`] at the start of each
/// sample, report what the walk finds, and [`Reaps::settle`] at its end.
#[derive(Debug, Default)]
pub struct Reaps {
    tick: u64,
    dead: Vec<Dead>,
    /// The reapers read in this tick: (PID, whether its `cminflt` rose since its last read). A
    /// first read (nothing to compare with) is a read without a rise.
    reads: Vec<(i32, bool)>,
    /// Departures counted in this tick, besides the members found gone: exited children first
    /// listed, and rises no departure explains.
    counted: u32,
}

impl Reaps {
    /// Starts a tick (a sample of the tree).
    pub fn tick(&mut self) {
        self.tick += 1;
        self.reads.clear();
        self.counted = 0;
    }

    /// The current tick, for [`Reaps::settle`]'s `oldest_read`.
    pub fn now(&self) -> u64 {
        self.tick
    }

    /// A member found gone (the tree counts it): `reaped` when /proc no longer has it, else it
    /// has exited and waits to be reaped (or cannot be read any more).
    pub fn member_left(&mut self, pid: i32, start: u64, reaper: Reaper, reaped: bool) {
        self.dead.push(Dead {
            pid,
            start,
            reaper,
            reaped_at: reaped.then_some(self.tick),
            listed_at: self.tick,
        });
    }

    /// A process a children list names that has exited and was never a member (a zombie
    /// child): counted unless it is already known.
    pub fn exited_child_listed(&mut self, pid: i32, start: u64, reaper: Reaper) {
        let tick = self.tick;
        match self
            .dead
            .iter_mut()
            .find(|d| d.pid == pid && d.start == start)
        {
            Some(d) => d.listed_at = tick,
            None => {
                self.counted += 1;
                self.dead.push(Dead {
                    pid,
                    start,
                    reaper,
                    reaped_at: None,
                    listed_at: tick,
                });
            }
        }
    }

    /// A read of member `pid`'s `cminflt`: `rose` when it rose since its previous read (false
    /// for a first read).
    pub fn reaper_read(&mut self, pid: i32, rose: bool) {
        self.reads.push((pid, rose));
    }

    /// Ends the tick and returns how many processes left in it besides the members found gone
    /// (which the tree counts): children never members, found exited or reaped unseen.
    /// `exists(pid, start)`: whether that process is still in /proc (a zombie not listed this
    /// tick, perhaps because its parent's other threads' lists were not read, may still wait).
    /// `is_member(pid)`: whether a PID is a member now. `oldest_read`: the earliest tick among
    /// the members' latest reads of `cminflt` (those read at least once): a reap found before
    /// it has shown as a rise of whichever member reaped it, if any did.
    pub fn settle(
        &mut self,
        mut exists: impl FnMut(i32, u64) -> bool,
        is_member: impl Fn(i32) -> bool,
        oldest_read: u64,
    ) -> u32 {
        let now = self.tick;
        for d in &mut self.dead {
            if d.reaped_at.is_none() && d.listed_at != now && !exists(d.pid, d.start) {
                d.reaped_at = Some(now);
            }
        }
        for k in 0..self.reads.len() {
            let (pid, rose) = self.reads[k];
            self.account_read(pid, rose);
        }
        for d in &mut self.dead {
            if let Reaper::Member(p) = d.reaper {
                if !is_member(p) {
                    // Its parent left the tree before reaping it: it was re-parented.
                    d.reaper = Reaper::Unknown;
                }
            }
        }
        self.dead.retain(|d| match (d.reaper, d.reaped_at) {
            (_, None) => true,
            (Reaper::Member(_), Some(_)) => true,
            (Reaper::Outside, Some(_)) => false,
            (Reaper::Unknown, Some(u)) => u >= oldest_read,
        });
        if self.dead.len() > DEAD_KEEP {
            // Reapers whose cminflt cannot be read never match theirs: drop the oldest reaped
            // (never a zombie, which a children list may name again).
            let mut reaped: Vec<u64> = self.dead.iter().filter_map(|d| d.reaped_at).collect();
            let excess = (self.dead.len() - DEAD_KEEP).min(reaped.len());
            if excess > 0 {
                let (_, &mut cut, _) = reaped.select_nth_unstable(excess - 1);
                self.dead.retain(|d| d.reaped_at.is_none_or(|u| u > cut));
            }
        }
        self.counted
    }

    /// Accounts one read of reaper `pid` at this tick `v`: its children's departures reaped
    /// before `v` were reaped before this read (after the previous one, or they were matched or
    /// dropped then), so they explain a rise, or are dropped when there is none; one found at
    /// `v` may have been reaped before or after this read.
    fn account_read(&mut self, pid: i32, rose: bool) {
        let v = self.tick;
        let before =
            |d: &Dead| d.reaper == Reaper::Member(pid) && d.reaped_at.is_some_and(|u| u < v);
        let explained = self.dead.iter().any(before);
        self.dead.retain(|d| !before(d));
        if !rose || explained {
            return;
        }
        // One departure found at this tick, of its own children or (failing those) of a process
        // whose reaper is not known, may be this reap.
        let candidate =
            |r: Reaper| move |d: &Dead| d.reaper == r && d.reaped_at.is_some_and(|u| u <= v);
        let found = self
            .dead
            .iter()
            .position(candidate(Reaper::Member(pid)))
            .or_else(|| self.dead.iter().position(candidate(Reaper::Unknown)));
        match found {
            Some(i) => {
                self.dead.swap_remove(i);
            }
            // A child born and gone that no one saw.
            None => self.counted += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settles a tick where nothing is in /proc any more but what `alive` names, every PID in
    /// `members` is a member, and every member was read at this tick. Members found gone are
    /// counted by the tree, not here.
    fn settle(r: &mut Reaps, alive: &[i32], members: &[i32]) -> u32 {
        let now = r.now();
        r.settle(|p, _| alive.contains(&p), |p| members.contains(&p), now)
    }

    #[test]
    fn a_child_found_gone_and_its_reap_count_once_whichever_tick_shows_the_reap() {
        // The reap shows at the same tick as the departure...
        let mut r = Reaps::default();
        r.tick();
        r.reaper_read(100, false);
        assert_eq!(settle(&mut r, &[], &[100, 101]), 0);
        r.tick();
        r.reaper_read(100, true);
        r.member_left(101, 1, Reaper::Member(100), true);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        r.tick();
        r.reaper_read(100, false);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        // ...or at the next (reaped after the reaper's read).
        r.tick();
        r.reaper_read(100, false);
        r.member_left(102, 1, Reaper::Member(100), true);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        r.tick();
        r.reaper_read(100, true);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        assert!(r.dead.is_empty());
    }

    #[test]
    fn a_zombie_member_listed_again_by_its_parent_counts_once() {
        let mut r = Reaps::default();
        r.tick();
        r.reaper_read(100, false);
        // Found a zombie, then listed by its parent in the same tick and the next.
        r.member_left(101, 7, Reaper::Member(100), false);
        r.exited_child_listed(101, 7, Reaper::Member(100));
        assert_eq!(settle(&mut r, &[101], &[100]), 0);
        r.tick();
        r.reaper_read(100, false);
        r.exited_child_listed(101, 7, Reaper::Member(100));
        assert_eq!(settle(&mut r, &[101], &[100]), 0);
        // Reaped: gone from the list and from /proc; the rise shows at the next read.
        r.tick();
        r.reaper_read(100, false);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        r.tick();
        r.reaper_read(100, true);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        // A later process with the same PID is another one.
        r.tick();
        r.reaper_read(100, false);
        r.exited_child_listed(101, 9, Reaper::Member(100));
        assert_eq!(settle(&mut r, &[101], &[100]), 1);
    }

    #[test]
    fn a_rise_no_departure_explains_is_a_child_born_and_gone_unseen() {
        let mut r = Reaps::default();
        r.tick();
        r.reaper_read(100, false);
        settle(&mut r, &[], &[100]);
        r.tick();
        r.reaper_read(100, true);
        assert_eq!(settle(&mut r, &[], &[100]), 1);
    }

    #[test]
    fn a_departure_explains_one_rise_only() {
        let mut r = Reaps::default();
        r.tick();
        r.reaper_read(100, false);
        settle(&mut r, &[], &[100]);
        // One found gone and a rise at the same tick; another rise at the next: that one was
        // a second child.
        r.tick();
        r.reaper_read(100, true);
        r.member_left(101, 1, Reaper::Member(100), true);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        r.tick();
        r.reaper_read(100, true);
        assert_eq!(settle(&mut r, &[], &[100]), 1);
    }

    #[test]
    fn departures_not_matched_by_a_rise_do_not_hide_later_unseen_children() {
        // Two children reaped at once rise once; the one left over must not explain a later
        // rise (it was reaped before that read's predecessor).
        let mut r = Reaps::default();
        r.tick();
        r.reaper_read(100, false);
        settle(&mut r, &[], &[100]);
        r.tick();
        r.reaper_read(100, false);
        r.member_left(101, 1, Reaper::Member(100), true);
        r.member_left(102, 1, Reaper::Member(100), true);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        r.tick();
        r.reaper_read(100, true);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        r.tick();
        r.reaper_read(100, true);
        assert_eq!(settle(&mut r, &[], &[100]), 1, "an unseen child");
    }

    #[test]
    fn a_process_reaped_outside_the_tree_explains_nothing() {
        let mut r = Reaps::default();
        r.tick();
        r.reaper_read(100, false);
        r.member_left(300, 1, Reaper::Outside, true);
        assert_eq!(settle(&mut r, &[], &[100]), 0);
        assert!(r.dead.is_empty());
        r.tick();
        r.reaper_read(100, true);
        assert_eq!(settle(&mut r, &[], &[100]), 1);
    }

    #[test]
    fn an_orphan_reaped_by_a_member_is_not_counted_again() {
        // 101's parent 100 left first; 101 is re-parented to subreaper 50, a member.
        let mut r = Reaps::default();
        r.tick();
        r.reaper_read(50, false);
        r.member_left(101, 1, Reaper::Member(100), true);
        assert_eq!(settle(&mut r, &[], &[50]), 0);
        r.tick();
        r.reaper_read(50, true);
        assert_eq!(settle(&mut r, &[], &[50]), 0);
    }

    #[test]
    fn a_zombie_waiting_unlisted_is_not_taken_for_reaped() {
        let mut r = Reaps::default();
        r.tick();
        r.reaper_read(100, false);
        r.exited_child_listed(101, 1, Reaper::Member(100));
        assert_eq!(settle(&mut r, &[101], &[100]), 1);
        // Not listed this tick (another thread's list), still in /proc: not reaped, and a rise
        // now is another child.
        r.tick();
        r.reaper_read(100, true);
        assert_eq!(settle(&mut r, &[101], &[100]), 1);
        r.tick();
        r.reaper_read(100, false);
        r.exited_child_listed(101, 1, Reaper::Member(100));
        assert_eq!(settle(&mut r, &[101], &[100]), 0);
    }
}
