//! Reader lists of the exact maps: who read a key since its last write.
//!
//! Why: write-after-read needs every reader since the last write, and most keys have one or two
//! while a few (a weight tile read by every row tile) have thousands. A list keeps up to
//! [`INLINE`] readers in the entry itself and spills into fixed 64-byte chunks from a shared
//! pool with a free list, so the steady state allocates nothing.

use crate::types::{Access, EdgeKind, TaskId};

/// Readers kept inside the entry.
pub(crate) const INLINE: usize = 3;
const CHUNK: usize = 15;
const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Chunk {
    ids: [u32; CHUNK],
    next: u32,
}

/// The chunk pool one map's reader lists share.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReaderPool {
    chunks: Vec<Chunk>,
    free: u32,
}

/// The readers of one key (order not kept).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReaderList {
    inline: [u32; INLINE],
    len: u32,
    /// Most recently filled chunk; each links to the previous one.
    head: u32,
}

impl Default for ReaderList {
    fn default() -> Self {
        ReaderList {
            inline: [0; INLINE],
            len: 0,
            head: NIL,
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

    fn alloc(&mut self, next: u32) -> u32 {
        if self.free != NIL {
            let i = self.free;
            self.free = self.chunks[i as usize].next;
            self.chunks[i as usize].next = next;
            i
        } else {
            self.chunks.push(Chunk {
                ids: [0; CHUNK],
                next,
            });
            (self.chunks.len() - 1) as u32
        }
    }
}

impl ReaderList {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of readers in the head chunk (when `len > INLINE`).
    #[inline]
    fn head_fill(&self) -> usize {
        (self.len as usize - INLINE - 1) % CHUNK + 1
    }

    /// The most recently added reader.
    #[inline]
    fn last(&self, pool: &ReaderPool) -> Option<u32> {
        let n = self.len as usize;
        if n == 0 {
            None
        } else if n <= INLINE {
            Some(self.inline[n - 1])
        } else {
            Some(pool.chunks[self.head as usize].ids[self.head_fill() - 1])
        }
    }

    /// Adds `t` unless it is already the most recent reader (readers arrive in task order, so
    /// this keeps a task from being listed twice).
    #[inline]
    pub(crate) fn push(&mut self, t: TaskId, pool: &mut ReaderPool) {
        if self.last(pool) == Some(t.0) {
            return;
        }
        let n = self.len as usize;
        if n < INLINE {
            self.inline[n] = t.0;
        } else {
            if n == INLINE || self.head_fill() == CHUNK {
                self.head = pool.alloc(self.head);
            }
            let fill = (n - INLINE) % CHUNK;
            pool.chunks[self.head as usize].ids[fill] = t.0;
        }
        self.len += 1;
    }

    /// Calls `f` on every reader.
    #[inline]
    pub(crate) fn for_each(&self, pool: &ReaderPool, mut f: impl FnMut(TaskId)) {
        let n = self.len as usize;
        for &r in &self.inline[..n.min(INLINE)] {
            f(TaskId(r));
        }
        if n > INLINE {
            let mut c = self.head;
            let mut fill = self.head_fill();
            while c != NIL {
                let chunk = &pool.chunks[c as usize];
                for &r in &chunk.ids[..fill] {
                    f(TaskId(r));
                }
                c = chunk.next;
                fill = CHUNK;
            }
        }
    }

    /// Empties the list, returning its chunks to the pool.
    #[inline]
    pub(crate) fn clear(&mut self, pool: &mut ReaderPool) {
        let mut c = self.head;
        while c != NIL {
            let next = pool.chunks[c as usize].next;
            pool.chunks[c as usize].next = pool.free;
            pool.free = c;
            c = next;
        }
        self.head = NIL;
        self.len = 0;
    }

    /// Keeps only readers `>= oldest` (in their original order).
    pub(crate) fn retain_from(
        &mut self,
        oldest: TaskId,
        pool: &mut ReaderPool,
        buf: &mut Vec<u32>,
    ) {
        buf.clear();
        self.for_each(pool, |t| buf.push(t.0));
        // for_each visits the inline part, then chunks newest first: restore task order.
        buf.sort_unstable();
        self.clear(pool);
        for &t in buf.iter().filter(|&&t| t >= oldest.0) {
            self.push(TaskId(t), pool);
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
    /// Whether no live task is recorded.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.writer == NIL && self.readers.is_empty()
    }

    /// Applies one access by `t` (see the module promises of `tensor_map`).
    #[inline]
    pub(crate) fn apply<F: FnMut(TaskId, EdgeKind)>(
        &mut self,
        t: TaskId,
        access: Access,
        pool: &mut ReaderPool,
        pred: &mut F,
    ) {
        let has_writer = self.writer != NIL && self.writer != t.0;
        if access.writes() {
            if has_writer {
                let kind = if access.reads() {
                    EdgeKind::Raw
                } else {
                    EdgeKind::Waw
                };
                pred(TaskId(self.writer), kind);
            }
            self.readers.for_each(pool, |r| {
                if r != t {
                    pred(r, EdgeKind::War)
                }
            });
            self.readers.clear(pool);
            self.writer = t.0;
        } else {
            if has_writer {
                pred(TaskId(self.writer), EdgeKind::Raw);
            }
            self.readers.push(t, pool);
        }
    }

    /// Forgets tasks older than `oldest`.
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

    /// Frees the entry's chunks.
    pub(crate) fn release(&mut self, pool: &mut ReaderPool) {
        self.readers.clear(pool);
        self.writer = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_iterate_clear_reuse() {
        let mut pool = ReaderPool::new();
        let mut l = ReaderList::default();
        for n in [0usize, 1, 3, 4, 17, 18, 19, 100] {
            l.clear(&mut pool);
            for i in 0..n as u32 {
                l.push(TaskId(i), &mut pool);
                l.push(TaskId(i), &mut pool); // a repeat is ignored
            }
            let mut got = Vec::new();
            l.for_each(&pool, |t| got.push(t.0));
            got.sort_unstable();
            assert_eq!(got, (0..n as u32).collect::<Vec<_>>());
        }
        let chunks = pool.chunks.len();
        l.clear(&mut pool);
        for i in 0..100 {
            l.push(TaskId(i), &mut pool);
        }
        assert_eq!(pool.chunks.len(), chunks, "chunks are reused");
        let mut buf = Vec::new();
        l.retain_from(TaskId(90), &mut pool, &mut buf);
        let mut got = Vec::new();
        l.for_each(&pool, |t| got.push(t.0));
        got.sort_unstable();
        assert_eq!(got, (90..100).collect::<Vec<_>>());
    }
}
