//! Happens-before between the processes of a pipeline, so that two accesses to overlapping
//! regions that no channel orders are found in every run, whatever the timing.
//!
//! Why: the processes of a pipeline are ordered only through their channels. The
//! [`pto_wsp_kernels::ConflictChecker`] sees only the regions *in flight*, so a buffer reused
//! one token too early was caught only when the two tasks happened to overlap in time — with
//! heavy kernels nearly always, with light ones almost never. Here every access is compared
//! with the accesses of the other processes that the channel semantics does not order before
//! it, and the same program gives the same verdict on every run.
//!
//! Promises:
//! - [`VectorClock`]: one counter per process; process `p`'s clock starts with its own entry
//!   at one. The edges are those the channel semantics guarantees in *every* run, never one an
//!   interleaving happened to give: a send carries the sender's clock, then the sender ticks;
//!   receiving token `k` merges the clock sent with it, the receiver's clock then is the
//!   channel's acknowledgement `k`, then the receiver ticks; send number `s` on a channel of
//!   depth `d` merges acknowledgement `s - d` (a bounded channel lets send `s` complete only
//!   after receive `s - d`); seeing a channel closed merges its producer's final clock. (The
//!   `csp` module keeps these rules; this one keeps the clocks.)
//! - [`HbLedger::record`] compares each region of an access of process `p` (with `p`'s clock)
//!   with every recorded access of another process that overlaps it, one of the two writing.
//!   One whose epoch (its process's own entry when it was recorded) the clock does not cover is
//!   unordered: a [`Race`], with the earliest recorded such access. Otherwise every region is
//!   recorded. A process records an access before making it, and an access ordered before
//!   another was recorded before the channel operation that orders them, so of an unordered
//!   pair whichever is recorded second finds the first: a pipeline with an unordered pair
//!   fails on every run (naming one such pair), one without never does.
//! - Memory: an access is forgotten once every live process other than its own has recorded
//!   with a clock covering it (it is then ordered before everything still to come), checked
//!   each time the ledger doubles; a process that [`HbLedger::end`]s counts no more. So a
//!   pipeline whose processes all hear from each other (a chain of bounded channels) keeps
//!   about its channels' worth of accesses, not its task count.

use std::collections::HashMap;

use pto_wsp_graph::types::TaskIo;
use pto_wsp_kernels::RegionIndex;

/// One counter per process of a pipeline (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorClock(Vec<u32>);

impl VectorClock {
    /// Process `own`'s clock at its start, among `processes`.
    pub fn new(processes: usize, own: usize) -> VectorClock {
        let mut v = vec![0; processes];
        if let Some(e) = v.get_mut(own) {
            *e = 1;
        }
        VectorClock(v)
    }

    /// Takes, entry by entry, the larger of the two clocks.
    pub fn merge(&mut self, other: &VectorClock) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// Advances process `p`'s own entry: what `p` does next is not covered by the clock it
    /// had before.
    pub fn tick(&mut self, p: usize) {
        if let Some(e) = self.0.get_mut(p) {
            *e = e.saturating_add(1);
        }
    }

    /// Process `p`'s entry.
    pub fn epoch(&self, p: usize) -> u32 {
        self.0.get(p).copied().unwrap_or(0)
    }

    /// Whether process `p`'s access at `epoch` happened before whatever this clock's owner does
    /// now.
    pub fn covers(&self, p: usize, epoch: u32) -> bool {
        self.epoch(p) >= epoch
    }
}

/// An access recorded in or refused by a [`HbLedger`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access<T> {
    /// The process.
    pub process: usize,
    /// The region and how it is used.
    pub io: TaskIo,
    /// What made it (the caller's description: a task, a read).
    pub what: T,
}

/// Two accesses of different processes to overlapping regions, one writing, with no
/// happens-before between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Race<T> {
    /// The access recorded first.
    pub earlier: Access<T>,
    /// The access being recorded.
    pub later: Access<T>,
}

#[derive(Debug)]
struct Entry<T> {
    process: usize,
    epoch: u32,
    seq: u64,
    what: T,
}

/// The recorded accesses of one tensor with one kind of use.
type Accesses<T> = RegionIndex<Entry<T>>;

/// A ledger checked only this often (it doubles in between).
const MIN_PRUNE: usize = 64;

/// The accesses of a pipeline's processes, per tensor, with the epoch each was made at (module
/// docs).
#[derive(Debug)]
pub struct HbLedger<T> {
    /// Per tensor: writes, then reads.
    tensors: HashMap<u32, (Accesses<T>, Accesses<T>)>,
    /// The latest clock each live process recorded with; `None` once it ended.
    known: Vec<Option<VectorClock>>,
    seq: u64,
    entries: usize,
    prune_at: usize,
}

impl<T: Copy> HbLedger<T> {
    /// An empty ledger for `processes` processes, each at its starting clock.
    pub fn new(processes: usize) -> HbLedger<T> {
        HbLedger {
            tensors: HashMap::new(),
            known: (0..processes)
                .map(|p| Some(VectorClock::new(processes, p)))
                .collect(),
            seq: 0,
            entries: 0,
            prune_at: MIN_PRUNE,
        }
    }

    /// Records process `p`'s access `what` to the regions `io`, made with clock `clock`, unless
    /// one region races with a recorded access of another process: then nothing is recorded
    /// and the race with the earliest recorded such access is returned.
    pub fn record(
        &mut self,
        p: usize,
        clock: &VectorClock,
        io: &[TaskIo],
        what: T,
    ) -> Result<(), Race<T>> {
        let mut found: Option<(u64, Access<T>, TaskIo)> = None;
        for new in io {
            let Some((writes, reads)) = self.tensors.get(&new.region.tensor) else {
                continue;
            };
            let mut visit = |old: &TaskIo, e: &Entry<T>| {
                if e.process != p
                    && !clock.covers(e.process, e.epoch)
                    && found.as_ref().is_none_or(|(s, _, _)| e.seq < *s)
                {
                    let earlier = Access {
                        process: e.process,
                        io: *old,
                        what: e.what,
                    };
                    found = Some((e.seq, earlier, *new));
                }
            };
            writes.for_each_overlap(&new.region, &mut visit);
            if new.access().writes() {
                reads.for_each_overlap(&new.region, &mut visit);
            }
        }
        if let Some((_, earlier, io)) = found {
            let later = Access {
                process: p,
                io,
                what,
            };
            return Err(Race { earlier, later });
        }
        let epoch = clock.epoch(p);
        for &x in io {
            let (writes, reads) = self.tensors.entry(x.region.tensor).or_default();
            let entry = Entry {
                process: p,
                epoch,
                seq: self.seq,
                what,
            };
            self.seq += 1;
            if x.access().writes() {
                writes.insert(x, entry);
            } else {
                reads.insert(x, entry);
            }
        }
        if let Some(Some(k)) = self.known.get_mut(p) {
            k.clone_from(clock);
        }
        self.entries += io.len();
        if self.entries >= self.prune_at {
            self.prune();
        }
        Ok(())
    }

    /// Process `p` ended: it makes no more accesses, so what it knows no longer keeps any.
    pub fn end(&mut self, p: usize) {
        if let Some(k) = self.known.get_mut(p) {
            *k = None;
        }
    }

    /// Number of accesses' regions kept.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no region is kept.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Forgets the accesses every other live process's clock covers.
    fn prune(&mut self) {
        let n = self.known.len();
        let frontier: Vec<u32> = (0..n)
            .map(|q| {
                self.known
                    .iter()
                    .enumerate()
                    .filter(|&(r, _)| r != q)
                    .filter_map(|(_, c)| c.as_ref())
                    .map(|c| c.epoch(q))
                    .min()
                    .unwrap_or(u32::MAX)
            })
            .collect();
        let keep = |e: &Entry<T>| frontier.get(e.process).is_none_or(|&f| e.epoch > f);
        let mut entries = 0;
        self.tensors.retain(|_, (writes, reads)| {
            writes.retain(keep);
            reads.retain(keep);
            entries += writes.len() + reads.len();
            !(writes.is_empty() && reads.is_empty())
        });
        self.entries = entries;
        self.prune_at = (2 * entries).max(MIN_PRUNE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pto_wsp_graph::types::Region;
    use pto_wsp_ir::Access as Use;

    fn io(row: i64, access: Use) -> [TaskIo; 1] {
        [TaskIo::new(
            Region::new(0, &[row, 0], &[1, 4]).unwrap(),
            access,
        )]
    }

    /// A write and a read of the same row by two processes race unless the reader's clock has
    /// heard of the write; the check does not depend on which is recorded first.
    #[test]
    fn unordered_overlap_is_a_race_in_either_recording_order() {
        for writer_first in [true, false] {
            let mut l = HbLedger::<u32>::new(2);
            let (w, r) = (VectorClock::new(2, 0), VectorClock::new(2, 1));
            let (a, b) = if writer_first {
                (
                    l.record(0, &w, &io(3, Use::Out), 10),
                    l.record(1, &r, &io(3, Use::In), 20),
                )
            } else {
                (
                    l.record(1, &r, &io(3, Use::In), 20),
                    l.record(0, &w, &io(3, Use::Out), 10),
                )
            };
            assert!(a.is_ok());
            let race = b.unwrap_err();
            let (first, second) = if writer_first { (10, 20) } else { (20, 10) };
            assert_eq!((race.earlier.what, race.later.what), (first, second));
        }
        // Ordered: the reader merged the writer's clock (a token sent after the write).
        let mut l = HbLedger::<u32>::new(2);
        let mut w = VectorClock::new(2, 0);
        l.record(0, &w, &io(3, Use::Out), 1).unwrap();
        let sent = w.clone();
        w.tick(0);
        let mut r = VectorClock::new(2, 1);
        r.merge(&sent);
        l.record(1, &r, &io(3, Use::In), 2).unwrap();
        // The same process again, or another row: never a race.
        l.record(1, &r, &io(3, Use::Out), 3).unwrap();
        l.record(0, &w, &io(4, Use::Out), 4).unwrap();
        // But the writer, not having heard of the reader's write, races with it.
        let race = l.record(0, &w, &io(3, Use::In), 5).unwrap_err();
        assert_eq!((race.earlier.what, race.later.what), (3, 5));
        // Two reads never race.
        let mut l = HbLedger::<u32>::new(2);
        l.record(0, &VectorClock::new(2, 0), &io(3, Use::In), 1)
            .unwrap();
        l.record(1, &VectorClock::new(2, 1), &io(3, Use::In), 2)
            .unwrap();
    }

    /// Accesses every other live process has heard of are forgotten; the others are kept.
    #[test]
    fn covered_accesses_are_forgotten() {
        let mut l = HbLedger::<u32>::new(2);
        let mut a = VectorClock::new(2, 0);
        let mut b = VectorClock::new(2, 1);
        for i in 0..200 {
            l.record(0, &a, &io(i % 8, Use::Out), 0).unwrap();
            let sent = a.clone();
            a.tick(0);
            b.merge(&sent);
            l.record(1, &b, &io(100 + i % 8, Use::Out), 1).unwrap();
            let back = b.clone();
            b.tick(1);
            a.merge(&back);
        }
        assert!(l.len() < MIN_PRUNE * 2, "{} kept", l.len());
        // A process that never hears back keeps the other's accesses.
        let mut l = HbLedger::<u32>::new(2);
        let a = VectorClock::new(2, 0);
        for i in 0..200 {
            l.record(0, &a, &io(i, Use::Out), 0).unwrap();
        }
        assert_eq!(l.len(), 200);
        l.end(1);
        l.record(0, &a, &io(500, Use::Out), 0).unwrap();
        for i in 0..200 {
            l.record(0, &a, &io(1000 + i, Use::Out), 0).unwrap();
        }
        assert!(l.len() < 200, "{} kept", l.len());
    }
}
