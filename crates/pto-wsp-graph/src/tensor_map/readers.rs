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
//! chunks whose readers have all completed go back to the pool first, and completed readers still
//! listed are filtered out when reported (`oldest`), so nothing is swept or re-sorted.

use crate::types::{Access, EdgeKind, TaskId};

/// Readers kept inside the entry.
pub(crate) const INLINE: usize = 3;
const CHUNK: usize = 14;
const NIL: u32 = u32::MAX;

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
    /// Readers in `inline`.
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
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `t`. `oldest` is the oldest live task: when a new chunk is needed, chunks whose
    /// readers are all older go back to the pool first.
    #[inline]
    pub(crate) fn push(&mut self, t: TaskId, pool: &mut ReaderPool, oldest: u32) {
        let n = self.len as usize;
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
        // Prune: free the oldest chunks whose readers (the newest is the last) have completed.
        let newest = self.newest as usize;
        loop {
            let old = pool.chunks[newest].next;
            if old == self.newest || pool.chunks[old as usize].ids[CHUNK - 1] >= oldest {
                break;
            }
            pool.chunks[newest].next = pool.chunks[old as usize].next;
            pool.chunks[old as usize].next = pool.free;
            pool.free = old;
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
        for &r in &self.inline[..self.len as usize] {
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

    /// Empties the list, returning its chunks to the pool.
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

    /// Keeps only readers `>= oldest` (in their order).
    pub(crate) fn retain_from(
        &mut self,
        oldest: TaskId,
        pool: &mut ReaderPool,
        buf: &mut Vec<u32>,
    ) {
        // Readers are in task order, so the first is the oldest.
        if self.len == 0 || self.inline[0] >= oldest.0 {
            return;
        }
        buf.clear();
        self.for_each(pool, |t| buf.push(t.0));
        self.clear(pool);
        for &t in buf.iter().filter(|&&t| t >= oldest.0) {
            self.push(TaskId(t), pool, 0);
        }
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

    /// Applies one access by `t` (see the module promises of `tensor_map`), reporting only tasks
    /// `>= oldest` (older ones have completed).
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
        // `w + 1 > oldest` is false for NIL (wraps to 0) and for completed writers.
        let live_writer = w.wrapping_add(1) > oldest && w != t.0;
        if access.writes() {
            if live_writer {
                let kind = if access.reads() {
                    EdgeKind::Raw
                } else {
                    EdgeKind::Waw
                };
                pred(TaskId(w), kind);
            }
            if !self.readers.is_empty() {
                self.readers.for_each(pool, |r| {
                    if r != t && r.0 >= oldest {
                        pred(r, EdgeKind::War)
                    }
                });
                self.readers.clear(pool);
            }
            self.writer = t.0;
        } else {
            if live_writer {
                pred(TaskId(w), EdgeKind::Raw);
            }
            self.readers.push(t, pool, oldest);
        }
    }

    /// Forgets tasks older than `oldest` now (eager retire).
    pub(crate) fn retire_before(
        &mut self,
        oldest: TaskId,
        pool: &mut ReaderPool,
        buf: &mut Vec<u32>,
    ) {
        if self.writer != NIL && self.writer < oldest.0 {
            self.writer = NIL;
        }
        if !self.readers.is_empty() {
            self.readers.retain_from(oldest, pool, buf);
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
        } else if r.len > 0 {
            r.inline[r.len as usize - 1]
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
        let mut buf = Vec::new();
        l.retain_from(TaskId(90), &mut pool, &mut buf);
        assert_eq!(items(&l, &pool), (90..100).collect::<Vec<_>>());
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
}
