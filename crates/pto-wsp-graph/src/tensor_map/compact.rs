//! The fixed exact map's entry in half a cache line: a key and its last writer and readers in
//! 32 bytes instead of 64.
//!
//! Why: past the caches the exact build is bound by the bytes it streams, and every new key
//! writes its entry (about one per task on the LLaMA layer). Two facts of real streams make the
//! half line enough: a key's region has at most two used dimensions almost always (its unused
//! ones are start 0, size 1), and a key has at most one reader between two writes almost always
//! (on the LLaMA layer at 200,000 tasks, 823 of 216,336 keys get a second reader; the weight
//! tiles, read by every row, get thousands).
//!
//! Promises:
//! - [`Keyed`] (32 bytes) holds a *short* key (tensor below 2^28, rank below 7, and
//!   `start[2..] == 0`, `size[2..] == 1`) in place; any other key keeps its first two
//!   dimensions and the tensor's low bits in place, a flag, and the whole region out of line
//!   ([`LongKeys`], indexed by entry), so [`Keyed::matches`] is exact for every region.
//! - [`CompactEntry`] records exactly what [`super::readers::ExactEntry`] records and reports
//!   the same predecessors in the same order: one reader is kept in place; from a second one
//!   on, every reader since the last write is in a [`ReaderList`] out of line ([`Lists`],
//!   pooled with a free list), pushed in the same order with the same completion bound, so its
//!   pruning and tombstone counts are those of the in-place list.

use super::readers::{ReaderList, ReaderPool};
use crate::types::{Access, EdgeKind, Region, TaskId};

const NIL: u32 = u32::MAX;

/// Low bits of a [`Keyed`]'s head: the rank (at most 7: any higher reads as 7), then the flag
/// of a key kept out of line; the tensor's low 28 bits are above them.
const RANK_MASK: u32 = 7;
const LONG_FLAG: u32 = 8;
const TENSOR_SHIFT: u32 = 4;

/// Whether `region` is a *short* key: tensor below 2^28, rank below 7, unused dimensions at
/// start 0 and size 1 from the third on (so the in-place words hold all of it).
#[inline]
fn is_short(region: &Region) -> bool {
    let w = |lo: u32, hi: u32| (lo as u64) | ((hi as u64) << 32);
    let rest = w(region.start[2], region.start[3])
        | (w(region.size[2], region.size[3]) ^ (1 | 1 << 32))
        | u64::from(region.tensor >> (32 - TENSOR_SHIFT))
        | u64::from(region.rank >= RANK_MASK);
    rest == 0
}

/// A region's in-place words ([`InPlace::of`]), as a [`Keyed`] stores them but for the flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InPlace {
    /// `tensor << 4 | min(rank, 7)` (the tensor's high bits dropped).
    head: u32,
    /// `start[0]`, `start[1]`.
    s01: u64,
    /// `size[0]`, `size[1]`.
    z01: u64,
}

impl InPlace {
    /// `region`'s in-place words (computed once per access, before the probe): a few
    /// instructions, no test of the other dimensions (that is done on a match).
    #[inline]
    pub(crate) fn of(region: &Region) -> InPlace {
        let w = |lo: u32, hi: u32| (lo as u64) | ((hi as u64) << 32);
        InPlace {
            head: region.tensor << TENSOR_SHIFT | region.rank.min(RANK_MASK),
            s01: w(region.start[0], region.start[1]),
            z01: w(region.size[0], region.size[1]),
        }
    }
}

/// Per-entry reader lists and long keys of one map, kept beside its entries.
#[derive(Debug, Default)]
pub(crate) struct Lists {
    lists: Vec<ReaderList>,
    free: Vec<u32>,
}

impl Lists {
    /// Forgets every list (with the pool's chunks, which the caller clears).
    pub(crate) fn clear(&mut self) {
        self.lists.clear();
        self.free.clear();
    }

    #[inline]
    fn alloc(&mut self) -> u32 {
        if let Some(i) = self.free.pop() {
            self.lists[i as usize] = ReaderList::default();
            i
        } else {
            self.lists.push(ReaderList::default());
            (self.lists.len() - 1) as u32
        }
    }
}

/// Whole regions of the keys that are not short, at their entry's index.
#[derive(Debug, Default)]
pub(crate) struct LongKeys(Vec<Region>);

impl LongKeys {
    /// Forgets every key.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    #[cold]
    #[inline(never)]
    fn set(&mut self, e: u32, region: &Region) {
        let e = e as usize;
        if self.0.len() <= e {
            self.0.resize(e + 1, Region::default());
        }
        self.0[e] = *region;
    }

    /// Whether entry `e`'s long key is `region`.
    #[cold]
    #[inline(never)]
    fn matches(&self, e: u32, region: &Region) -> bool {
        self.0[e as usize] == *region
    }
}

/// A key's last writer and readers since it (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompactEntry {
    writer: u32,
    /// The only reader since the last write, or `NIL`; ignored once `list` is set.
    first: u32,
    /// Every reader since the last write, in [`Lists`], once there were two; or `NIL`.
    list: u32,
}

impl CompactEntry {
    const EMPTY: CompactEntry = CompactEntry {
        writer: NIL,
        first: NIL,
        list: NIL,
    };

    /// Records `t`'s access and reports its predecessors, as [`super::readers::ExactEntry::apply`].
    #[inline]
    pub(crate) fn apply<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        t: TaskId,
        access: Access,
        (pool, lists): (&mut ReaderPool, &mut Lists),
        oldest: u32,
        pred: &mut F,
    ) {
        let w = self.writer;
        let has_writer = w != NIL && w != t.0;
        if access.writes() {
            if has_writer {
                let kind = if access.reads() {
                    EdgeKind::Raw
                } else {
                    EdgeKind::Waw
                };
                pred(TaskId(w), kind);
            }
            if self.first != NIL {
                self.war(t, pool, lists, pred);
            }
            self.writer = t.0;
        } else {
            if has_writer {
                pred(TaskId(w), EdgeKind::Raw);
            }
            if self.first == NIL {
                self.first = t.0;
            } else if self.list != NIL {
                lists.lists[self.list as usize].push(t, pool, oldest);
            } else {
                self.start_list(t, pool, lists, oldest);
            }
        }
    }

    /// A write after reads: reports every reader (and the pruned ones' count) and forgets them.
    #[inline]
    fn war<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        t: TaskId,
        pool: &mut ReaderPool,
        lists: &mut Lists,
        pred: &mut F,
    ) {
        if self.list == NIL {
            if self.first != t.0 {
                pred(TaskId(self.first), EdgeKind::War);
            }
        } else {
            let l = &mut lists.lists[self.list as usize];
            l.for_each(pool, |r| {
                if r != t {
                    pred(r, EdgeKind::War)
                }
            });
            for _ in 0..l.forgotten() {
                pred(TaskId::FORGOTTEN, EdgeKind::War);
            }
            l.clear(pool);
            lists.free.push(self.list);
            self.list = NIL;
        }
        self.first = NIL;
    }

    /// A second reader since the last write: a list takes both (and every later reader).
    #[cold]
    #[inline(never)]
    fn start_list(&mut self, t: TaskId, pool: &mut ReaderPool, lists: &mut Lists, oldest: u32) {
        self.list = lists.alloc();
        let l = &mut lists.lists[self.list as usize];
        l.push(TaskId(self.first), pool, oldest);
        l.push(t, pool, oldest);
    }

    /// Frees the entry's list and chunks and empties it.
    pub(crate) fn release(&mut self, pool: &mut ReaderPool, lists: &mut Lists) {
        if self.list != NIL {
            lists.lists[self.list as usize].clear(pool);
            lists.free.push(self.list);
        }
        *self = CompactEntry::EMPTY;
    }

    /// The newest task recorded, or `NIL` if none (as [`super::readers::ExactEntry::last`]).
    #[inline]
    pub(crate) fn last(&self, pool: &ReaderPool, lists: &Lists) -> u32 {
        if self.list != NIL {
            lists.lists[self.list as usize]
                .newest_reader(pool)
                .unwrap_or(self.writer)
        } else if self.first != NIL {
            self.first
        } else {
            self.writer
        }
    }
}

/// A key and its entry in 32 bytes (see the module docs): two entries per cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
pub(crate) struct Keyed {
    s01: u64,
    z01: u64,
    head: u32,
    /// The key's writer and readers.
    pub(crate) entry: CompactEntry,
}

const _: () = assert!(std::mem::size_of::<Keyed>() == 32);

impl Keyed {
    /// A new entry of index `e` for `region`, whose in-place words are `key` (its whole
    /// region goes to `long` if it is not short).
    #[inline]
    pub(crate) fn new(key: InPlace, region: &Region, e: u32, long: &mut LongKeys) -> Keyed {
        let mut head = key.head;
        if !is_short(region) {
            long.set(e, region);
            head |= LONG_FLAG;
        }
        Keyed {
            s01: key.s01,
            z01: key.z01,
            head,
            entry: CompactEntry::EMPTY,
        }
    }

    /// Whether this entry, of index `e`, is `region`'s key (`key` its in-place words): the
    /// words first, then (on a match) that `region` is short like the key, or equal to the
    /// key's region out of line.
    #[inline]
    pub(crate) fn matches(&self, key: InPlace, region: &Region, e: u32, long: &LongKeys) -> bool {
        (((self.head ^ key.head) & !LONG_FLAG) as u64 | (self.s01 ^ key.s01) | (self.z01 ^ key.z01))
            == 0
            && if self.head & LONG_FLAG == 0 {
                is_short(region)
            } else {
                long.matches(e, region)
            }
    }

    /// The key's region (entry index `e`).
    pub(crate) fn region(&self, e: u32, long: &LongKeys) -> Region {
        if self.head & LONG_FLAG != 0 {
            return long.0[e as usize];
        }
        let lo = |w: u64| w as u32;
        let hi = |w: u64| (w >> 32) as u32;
        let mut r = Region {
            tensor: self.head >> TENSOR_SHIFT,
            rank: self.head & RANK_MASK,
            start: [0; 4],
            size: [1; 4],
        };
        r.start[..2].copy_from_slice(&[lo(self.s01), hi(self.s01)]);
        r.size[..2].copy_from_slice(&[lo(self.z01), hi(self.z01)]);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_map::readers::ExactEntry;

    /// Short and long keys, including ones that share every in-place word: each matches
    /// exactly the regions equal to it, and gives its region back.
    #[test]
    fn keys_match_exactly_the_equal_regions() {
        let r = |tensor: u32, rank: u32, start: [u32; 4], size: [u32; 4]| Region {
            tensor,
            rank,
            start,
            size,
        };
        let regions = [
            Region::new_2d(3, 0, 32, 128, 128),
            Region::new_2d(3, 0, 32, 0, 128),
            Region::new_2d(4, 0, 32, 128, 128),
            r(3, 1, [0, 0, 0, 0], [32, 1, 1, 1]),
            r(3, 3, [0, 128, 0, 0], [32, 128, 1, 1]),
            r(3, 3, [0, 128, 5, 0], [32, 128, 1, 1]),
            r(3, 3, [0, 128, 0, 0], [32, 128, 2, 1]),
            r(3, 4, [0, 128, 0, 7], [32, 128, 1, 1]),
            r(3 + (1 << 28), 2, [0, 128, 0, 0], [32, 128, 1, 1]),
            r(3 + (1 << 29), 2, [0, 128, 0, 0], [32, 128, 1, 1]),
            r(3 + (1 << 31), 2, [0, 128, 0, 0], [32, 128, 1, 1]),
            r(3, 2, [0, 128, 0, 0], [32, 128, 1, 1]),
            r(3, 2, [0, 128, 0, 0], [32, 128, 1, 2]),
            r(3, 6, [0, 128, 0, 0], [32, 128, 1, 1]),
            r(3, 15, [0, 128, 0, 0], [32, 128, 1, 1]),
            r(3, u32::MAX, [0, 128, 0, 0], [32, 128, 1, 1]),
            r(3, 9, [0, 128, 0, 0], [32, 128, 1, 1]),
            r(3, 7, [0, 128, 0, 0], [32, 128, 1, 1]),
        ];
        let mut long = LongKeys::default();
        let keyed: Vec<Keyed> = (0..regions.len() as u32)
            .map(|e| {
                let region = &regions[e as usize];
                Keyed::new(InPlace::of(region), region, e, &mut long)
            })
            .collect();
        for (e, k) in keyed.iter().enumerate() {
            assert_eq!(k.region(e as u32, &long), regions[e], "key {e} back");
            for (j, other) in regions.iter().enumerate() {
                let got = k.matches(InPlace::of(other), other, e as u32, &long);
                assert_eq!(got, regions[e] == *other, "{e} vs {j}");
            }
        }
    }

    /// Random reads and writes of one key with a completion bound that advances: the compact
    /// entry reports the predecessors the in-place entry reports, in order, and agrees on the
    /// newest task, also across releases.
    #[test]
    fn reports_what_the_in_place_entry_reports() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let (mut pool_a, mut pool_b, mut lists) =
            (ReaderPool::new(), ReaderPool::new(), Lists::default());
        let mut entries = [(ExactEntry::default(), CompactEntry::EMPTY); 3];
        let mut t = 0u32;
        for round in 0..4000u32 {
            let k = next(3) as usize;
            // Bursts of reads (some long enough to prune chunks), now and then a write.
            let access = match next(40) {
                0 => Access::Out,
                1 => Access::InOut,
                _ => Access::In,
            };
            let oldest = t.saturating_sub(next(60) as u32 + 5);
            let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
            let (a, b) = &mut entries[k];
            a.apply(TaskId(t), access, &mut pool_a, oldest, &mut |p, kind| {
                got_a.push((p, kind))
            });
            b.apply(
                TaskId(t),
                access,
                (&mut pool_b, &mut lists),
                oldest,
                &mut |p, kind| got_b.push((p, kind)),
            );
            assert_eq!(got_a, got_b, "round {round}");
            assert_eq!(a.last(&pool_a), b.last(&pool_b, &lists), "round {round}");
            if next(500) == 0 {
                a.release(&mut pool_a);
                b.release(&mut pool_b, &mut lists);
            }
            // A task may access a key twice in a row.
            t += u32::from(next(4) != 0);
        }
        assert!(
            pool_b.chunks_made() > 0 && !lists.lists.is_empty(),
            "some list spilled into chunks"
        );
    }
}
