//! Reader lists of the exact maps: who read a key since its last write.
//!
//! Why: write-after-read needs every reader since the last write, and most keys have one or two
//! while a few (a weight tile read by every row tile) have thousands. A list keeps up to
//! [`INLINE`] readers in the entry itself and spills into 64-byte chunks (14 readers, a fill count
//! and a link) from a shared pool with a free list, so the steady state allocates nothing. The
//! chunks of one list form a ring (the newest links to the oldest): appending, pruning the oldest
//! chunk and freeing the whole list are O(1). Readers stay in task order.
//!
//! Under a task window the lists are pruned lazily: when a list needs a new chunk, its oldest
//! chunks whose readers have all completed go back to the pool first, so nothing is swept or
//! re-sorted. A pruned chunk leaves a *tombstone*: the list counts the distinct completed readers
//! it dropped, and the next write reports that many write-after-read edges as
//! [`TaskId::FORGOTTEN`] (counted as inferred, never wired), so the edges the inference finds do
//! not depend on when tasks completed. Completed readers still listed are reported by id (the
//! builder and the runtimes know they completed and wire nothing).

use crate::types::{Access, EdgeKind, TaskId};

/// Readers kept inside the entry.
pub(crate) const INLINE: usize = 3;
const CHUNK: usize = 14;
const NIL: u32 = u32::MAX;
/// Bits of [`ReaderList::len`] holding the inline count (at most [`INLINE`]).
const LEN_BITS: u32 = 2;
const LEN_MASK: u32 = (1 << LEN_BITS) - 1;
const _: () = assert!(INLINE as u32 <= LEN_MASK);

#[derive(Clone, Copy, Debug)]
struct Chunk {
    ids: [u32; CHUNK],
    fill: u32,
    /// The next older chunk; the oldest links to the newest.
    next: u32,
}

const _: () = assert!(std::mem::size_of::<Chunk>() == 64);

/// The chunk pool one map's reader lists share.
#[derive(Clone, Debug)]
pub(crate) struct ReaderPool {
    chunks: Vec<Chunk>,
    free: u32,
}

impl Default for ReaderPool {
    fn default() -> Self {
        ReaderPool::new()
    }
}

/// The readers of one key, in task order (a task may appear twice if it read the key twice).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReaderList {
    inline: [u32; INLINE],
    /// Readers in `inline` (the low [`LEN_BITS`] bits), and above them the number of distinct
    /// completed readers pruned since the last write (the tombstone count).
    len: u32,
    /// The newest chunk (whose `next` is the oldest), or `NIL`.
    newest: u32,
}

impl Default for ReaderList {
    fn default() -> Self {
        ReaderList {
            inline: [0; INLINE],
            len: 0,
            newest: NIL,
        }
    }
}

impl ReaderPool {
    pub(crate) fn new() -> ReaderPool {
        ReaderPool {
            chunks: Vec::new(),
            free: NIL,
        }
    }

    /// Drops every chunk (keeping the allocation): every list must be forgotten with it.
    pub(crate) fn clear(&mut self) {
        self.chunks.clear();
        self.free = NIL;
    }

    /// A chunk holding `t` alone (its `next` is set by the caller).
    #[cold]
    fn alloc(&mut self, t: u32) -> u32 {
        let mut ids = [0; CHUNK];
        ids[0] = t;
        let c = Chunk {
            ids,
            fill: 1,
            next: NIL,
        };
        if self.free != NIL {
            let i = self.free;
            self.free = self.chunks[i as usize].next;
            self.chunks[i as usize] = c;
            i
        } else {
            self.chunks.push(c);
            (self.chunks.len() - 1) as u32
        }
    }
}

impl ReaderList {
    /// No reader listed and no tombstone count.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Readers in `inline`.
    #[inline]
    fn inline_len(&self) -> usize {
        (self.len & LEN_MASK) as usize
    }

    /// Distinct completed readers pruned since the last write (see the module docs).
    #[inline]
    pub(crate) fn forgotten(&self) -> u32 {
        self.len >> LEN_BITS
    }

    /// Appends `t`. `oldest` is the oldest live task: when a new chunk is needed, chunks whose
    /// readers are all older go back to the pool first (counted in [`ReaderList::forgotten`]).
    #[inline]
    pub(crate) fn push(&mut self, t: TaskId, pool: &mut ReaderPool, oldest: u32) {
        let n = self.inline_len();
        if n < INLINE {
            self.inline[n] = t.0;
            self.len += 1;
            return;
        }
        if self.newest != NIL {
            let c = &mut pool.chunks[self.newest as usize];
            let f = c.fill as usize;
            if f < CHUNK {
                c.ids[f] = t.0;
                c.fill += 1;
                return;
            }
        }
        self.push_chunk(t.0, pool, oldest);
    }

    #[cold]
    #[inline(never)]
    fn push_chunk(&mut self, t: u32, pool: &mut ReaderPool, oldest: u32) {
        if self.newest == NIL {
            let c = pool.alloc(t);
            pool.chunks[c as usize].next = c;
            self.newest = c;
            return;
        }
        // Prune: free the oldest chunks whose readers (the newest is the last) have completed,
        // counting the distinct tasks they held. A task listed twice is adjacent: a repeat of the
        // reader before it is skipped, and so is the last reader pruned if the oldest chunk left
        // starts with it (it stays listed, reported by id).
        let newest = self.newest as usize;
        let mut before = match self.inline_len() {
            0 => NIL,
            n => self.inline[n - 1],
        };
        let mut distinct = 0u32;
        loop {
            let old = pool.chunks[newest].next;
            if old == self.newest || pool.chunks[old as usize].ids[CHUNK - 1] >= oldest {
                break;
            }
            for &r in &pool.chunks[old as usize].ids {
                distinct += u32::from(r != before);
                before = r;
            }
            pool.chunks[newest].next = pool.chunks[old as usize].next;
            pool.chunks[old as usize].next = pool.free;
            pool.free = old;
        }
        if distinct > 0 {
            let first_left = pool.chunks[pool.chunks[newest].next as usize].ids[0];
            distinct -= u32::from(before == first_left);
            let count = self
                .forgotten()
                .saturating_add(distinct)
                .min(u32::MAX >> LEN_BITS);
            self.len = (count << LEN_BITS) | (self.len & LEN_MASK);
        }
        let oldest_chunk = pool.chunks[newest].next;
        let c = pool.alloc(t);
        pool.chunks[c as usize].next = oldest_chunk;
        pool.chunks[newest].next = c;
        self.newest = c;
    }

    /// Calls `f` on every reader, in task order.
    #[inline]
    pub(crate) fn for_each(&self, pool: &ReaderPool, mut f: impl FnMut(TaskId)) {
        for &r in &self.inline[..self.inline_len()] {
            f(TaskId(r));
        }
        if self.newest != NIL {
            let mut c = self.newest;
            loop {
                c = pool.chunks[c as usize].next;
                let chunk = &pool.chunks[c as usize];
                for &r in &chunk.ids[..chunk.fill as usize] {
                    f(TaskId(r));
                }
                if c == self.newest {
                    break;
                }
            }
        }
    }

    /// Empties the list (tombstone count included), returning its chunks to the pool.
    #[inline]
    pub(crate) fn clear(&mut self, pool: &mut ReaderPool) {
        if self.newest != NIL {
            // Cut the ring after the newest chunk and put it in front of the free list.
            // (The oldest chunk becomes the free list's head; the newest links to the old head.)
            std::mem::swap(&mut pool.chunks[self.newest as usize].next, &mut pool.free);
            self.newest = NIL;
        }
        self.len = 0;
    }
}

/// What an exact map keeps per key: the last writer and the readers since.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExactEntry {
    /// Last writer, or `NIL`.
    pub(crate) writer: u32,
    pub(crate) readers: ReaderList,
}

impl Default for ExactEntry {
    fn default() -> Self {
        ExactEntry {
            writer: NIL,
            readers: ReaderList::default(),
        }
    }
}

impl ExactEntry {
    /// Whether no task is recorded.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.writer == NIL && self.readers.is_empty()
    }

    /// Applies one access by `t` (see the module promises of `tensor_map`). Every earlier task
    /// recorded is reported, completed or not (the caller knows which completed and wires only
    /// the others); completed readers pruned from the list are reported as that many
    /// [`TaskId::FORGOTTEN`]. `oldest` is the oldest live task: it only decides what may be
    /// pruned.
    #[inline]
    pub(crate) fn apply<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        t: TaskId,
        access: Access,
        pool: &mut ReaderPool,
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
            if !self.readers.is_empty() {
                self.readers.for_each(pool, |r| {
                    if r != t {
                        pred(r, EdgeKind::War)
                    }
                });
                for _ in 0..self.readers.forgotten() {
                    pred(TaskId::FORGOTTEN, EdgeKind::War);
                }
                self.readers.clear(pool);
            }
            self.writer = t.0;
        } else {
            if has_writer {
                pred(TaskId(w), EdgeKind::Raw);
            }
            self.readers.push(t, pool, oldest);
        }
    }

    /// Frees the entry's chunks and empties it.
    pub(crate) fn release(&mut self, pool: &mut ReaderPool) {
        self.readers.clear(pool);
        self.writer = NIL;
    }

    /// The newest task recorded (readers since the last write are newer than the writer), or
    /// `NIL` if none: the key is dead once it has completed.
    #[inline]
    pub(crate) fn last(&self, pool: &ReaderPool) -> u32 {
        let r = &self.readers;
        if r.newest != NIL {
            let c = &pool.chunks[r.newest as usize];
            c.ids[c.fill as usize - 1]
        } else if r.inline_len() > 0 {
            r.inline[r.inline_len() - 1]
        } else {
            self.writer
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(l: &ReaderList, pool: &ReaderPool) -> Vec<u32> {
        let mut got = Vec::new();
        l.for_each(pool, |t| got.push(t.0));
        got
    }

    #[test]
    fn push_iterate_clear_reuse() {
        let mut pool = ReaderPool::new();
        let mut l = ReaderList::default();
        for n in [0usize, 1, 2, 3, 15, 16, 17, 30, 31, 100] {
            l.clear(&mut pool);
            for i in 0..n as u32 {
                l.push(TaskId(i), &mut pool, 0);
            }
            assert_eq!(items(&l, &pool), (0..n as u32).collect::<Vec<_>>());
        }
        let chunks = pool.chunks.len();
        l.clear(&mut pool);
        for i in 0..100 {
            l.push(TaskId(i), &mut pool, 0);
        }
        assert_eq!(pool.chunks.len(), chunks, "chunks are reused");
    }

    /// Pruned readers leave a count of distinct tasks: with the readers still listed, it
    /// accounts for every distinct reader exactly once (a task may read a key twice in a row).
    #[test]
    fn pruned_readers_are_counted_once_each() {
        for repeat in [1u32, 2, 3, 15] {
            let mut pool = ReaderPool::new();
            let mut l = ReaderList::default();
            let tasks = 600u32;
            for i in 0..tasks {
                for _ in 0..repeat {
                    // Tasks older than `i - 40` have completed.
                    l.push(TaskId(i), &mut pool, i.saturating_sub(40));
                }
            }
            let mut listed = items(&l, &pool);
            assert!(l.forgotten() > 0, "repeat {repeat}: nothing pruned");
            listed.dedup();
            assert_eq!(
                l.forgotten() + listed.len() as u32,
                tasks,
                "repeat {repeat}"
            );
            l.clear(&mut pool);
            assert_eq!((l.forgotten(), l.is_empty()), (0, true));
        }
    }

    #[test]
    fn completed_chunks_are_pruned_on_push() {
        let mut pool = ReaderPool::new();
        let mut l = ReaderList::default();
        for i in 0..1000 {
            // Tasks older than `i - 50` have completed.
            l.push(TaskId(i), &mut pool, i.saturating_sub(50));
        }
        assert!(pool.chunks.len() <= 6, "{} chunks", pool.chunks.len());
        let got = items(&l, &pool);
        assert!(got.windows(2).all(|w| w[0] < w[1]), "task order kept");
        // Every reader that may still be live is listed.
        assert!((950..1000).all(|t| got.contains(&t)));
    }
    /// Clearing the pool drops every chunk (every list is forgotten with it): a list started
    /// afterwards is built from chunk 0 again, and its readers are its own.
    #[test]
    fn clearing_the_pool_drops_its_chunks() {
        let mut pool = ReaderPool::new();
        let mut l = ReaderList::default();
        for i in 0..100 {
            l.push(TaskId(i), &mut pool, 0);
        }
        // 3 inline, then ceil(97 / 14) chunks.
        assert_eq!(pool.chunks.len(), 97usize.div_ceil(CHUNK));
        pool.clear();
        assert_eq!((pool.chunks.len(), pool.free), (0, NIL));
        let mut l = ReaderList::default();
        for i in 500..520 {
            l.push(TaskId(i), &mut pool, 0);
        }
        assert_eq!(pool.chunks.len(), 2);
        assert_eq!(items(&l, &pool), (500..520).collect::<Vec<_>>());
    }

    /// The count of pruned readers saturates at the most the length word holds instead of
    /// wrapping (and never disturbs the inline count below it).
    #[test]
    fn the_pruned_reader_count_saturates() {
        let max = u32::MAX >> LEN_BITS;
        let mut pool = ReaderPool::new();
        let mut l = ReaderList::default();
        for i in 0..3 + 2 * CHUNK as u32 {
            l.push(TaskId(i), &mut pool, 0);
        }
        l.len = (max - 1) << LEN_BITS | (l.len & LEN_MASK);
        // Every earlier task completed: the next chunk prunes the oldest (14 readers).
        l.push(TaskId(1000), &mut pool, 1000);
        assert_eq!((l.forgotten(), l.inline_len()), (max, INLINE));
        let listed = items(&l, &pool);
        assert_eq!(listed.len(), INLINE + CHUNK + 1, "{listed:?}");
    }
}
