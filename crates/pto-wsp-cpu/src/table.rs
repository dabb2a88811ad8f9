//! The task table of a streamed run: task nodes, params and regions written by the
//! orchestration thread while workers read the ones already published.
//!
//! Why: when the graph is built while it runs, the builder's own arrays move as they grow, so
//! workers cannot read them. The orchestrator copies each task into a [`TaskTable`] before the
//! task can become ready; the table's storage never moves.
//!
//! # What it promises
//!
//! [`AppendVec`] is an append-only vector with one writer and any number of readers. Storage is
//! a [`ChunkArena`]: chunks allocated on demand, never moved, and freed only by the writer's
//! [`TableWriter::reclaim_below`] behind the completed prefix. The writer fills slot `len` (or
//! a run of slots from `len`, [`Writer::extend_from_slice`]) and then publishes it by storing
//! the new length with release ordering; a reader only hands out slots
//! below a length it loaded with acquire ordering, so every slot it reads was completely written
//! before, and no slot is written again once published. A task's slots are published before the
//! builder seals the task, and a worker learns a task id only through the ready queues or a
//! predecessor's completion, both of which happen after the seal. A worker reads a task's slots
//! only while it runs the task or routes it as a successor, both before the task completes; so
//! once the writer has seen every task below `W` done (an acquire load of the completion state)
//! nobody reads their slots and the writer may free them.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;

use pto_wsp_graph::TaskId;
use pto_wsp_graph::arena::{CHUNK, ChunkArena};
use pto_wsp_graph::storage::TaskNode;
use pto_wsp_graph::types::TaskIo;

use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// An append-only vector with one writer and many readers (see the module docs).
pub struct AppendVec<T: Copy> {
    slots: ChunkArena<UnsafeCell<MaybeUninit<T>>>,
    len: AtomicUsize,
    writer: AtomicBool,
}

// SAFETY: slots are written only by the single writer (enforced by `Writer`'s uniqueness) and
// only before they are published; readers only read published slots (see the module docs), so
// sharing the vector between threads is sound for `T: Send + Sync`.
unsafe impl<T: Copy + Send + Sync> Sync for AppendVec<T> {}

// SAFETY: the vector owns its slots (plain `T: Copy + Send` values in cells) and its chunks;
// moving the whole vector to another thread moves them with it, and nobody can hold a writer or
// a reference into it while it moves.
unsafe impl<T: Copy + Send + Sync> Send for AppendVec<T> {}

impl<T: Copy> Default for AppendVec<T> {
    fn default() -> Self {
        AppendVec {
            // SAFETY: a cell of `MaybeUninit` of a `Copy` type is valid whatever its bytes and
            // owns nothing; slots are read only once written (the module docs).
            #[allow(unsafe_code)]
            slots: unsafe { ChunkArena::new_unfilled(|| UnsafeCell::new(MaybeUninit::uninit())) },
            len: AtomicUsize::new(0),
            writer: AtomicBool::new(false),
        }
    }
}

impl<T: Copy> AppendVec<T> {
    /// Number of published elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether nothing was published.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`, if published.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len.load(Ordering::Acquire) {
            return None;
        }
        let slot = self.slots.try_get(u32::try_from(i).ok()?)?;
        // SAFETY: `i` is below a length loaded with acquire, so the slot was initialised by the
        // writer before its release store of that length, and is never written again; its
        // chunk is freed only once nobody reads it (module docs).
        Some(unsafe { (*slot.get()).assume_init_ref() })
    }

    /// Elements held in memory (whole chunks; freed behind the completed prefix).
    pub fn live(&self) -> usize {
        self.slots.live()
    }

    /// Most elements held at once.
    pub fn peak(&self) -> usize {
        self.slots.peak()
    }

    /// Elements `start .. start + len`, if all published (they may span segments, so this
    /// copies into `out`).
    pub fn copy_range(&self, start: usize, len: usize, out: &mut Vec<T>) -> bool {
        out.clear();
        for i in start..start + len {
            match self.get(i) {
                Some(v) => out.push(*v),
                None => return false,
            }
        }
        true
    }

    /// Empties the vector for reuse: its chunks are kept for the next writer (see
    /// `ChunkArena::reset`); exclusive access means nobody reads or writes it.
    pub fn reset(&mut self) {
        self.slots.reset();
        self.len.store(0, Ordering::Relaxed);
        self.writer.store(false, Ordering::Relaxed);
    }

    /// The writer, if nobody else holds it.
    pub fn writer(&self) -> Option<Writer<'_, T>> {
        (!self.writer.swap(true, Ordering::Acquire)).then(|| Writer {
            vec: self,
            len: self.len.load(Ordering::Relaxed),
            end: 0,
            at: std::ptr::null_mut(),
        })
    }
}

/// The one writer of an [`AppendVec`].
///
/// It keeps the published length and the chunk being filled as the end of its indices and a
/// pointer to the slot at that length: room for `n` more is one compare, and the arena lookup
/// is paid once per chunk, not once per push. The pointer is used only for slots from the
/// published length on, which no reclamation frees.
pub struct Writer<'a, T: Copy> {
    vec: &'a AppendVec<T>,
    /// The published length (this is its only writer).
    len: usize,
    /// One past the last index of the cached chunk (0: none cached).
    end: usize,
    /// Slot `len` of the cached chunk (when `len < end`).
    at: *mut T,
}

// SAFETY: the chunk pointer is a cache of what `vec` holds (a writer on another thread reaches
// the same chunk through `vec`); the writer stays unique wherever it moves.
unsafe impl<T: Copy + Send + Sync> Send for Writer<'_, T> {}

impl<T: Copy> Writer<'_, T> {
    /// Appends `v` and publishes it; returns its index.
    #[inline]
    pub fn push(&mut self, v: T) -> usize {
        let i = self.len;
        let p = self.slot();
        // SAFETY: `slot` gave slot `i`: alive, not yet published (no reader looks at it), and
        // this is its only writer (`Writer` is unique).
        unsafe { p.write(v) };
        self.advance(1);
        i
    }

    /// Appends every element of `vs`, in order, and publishes them together: one release store
    /// of the length after the last is written (readers see none of them or all), and one chunk
    /// check when they all fit the chunk being filled.
    #[inline]
    pub fn extend_from_slice(&mut self, vs: &[T]) {
        // Most tasks have no params: no copy call, no store.
        if vs.is_empty() {
            return;
        }
        if self.len + vs.len() <= self.end {
            // SAFETY: slots `len .. len + vs.len()` lie in the cached chunk (as in `push`).
            unsafe { copy_small(vs, self.at) };
            self.advance(vs.len());
            return;
        }
        let start = self.len;
        for (k, &v) in vs.iter().enumerate() {
            if start + k >= self.end {
                self.grow(start + k);
            }
            // SAFETY: as in `push` (slot `start + k` is past the published length, in the
            // chunk just cached). Published together below.
            unsafe { self.at.wrapping_add(start + k - self.len).write(v) };
        }
        self.advance(vs.len());
    }

    /// A pointer to slot `len` of the cached chunk, growing the arena when `len` is past it.
    #[inline(always)]
    fn slot(&mut self) -> *mut T {
        if self.len >= self.end {
            self.grow(self.len);
        }
        self.at
    }

    /// Publishes the next `n` elements (written at [`Writer::slot`]'s pointer or in the cached chunk).
    #[inline(always)]
    fn advance(&mut self, n: usize) {
        self.len += n;
        // In bounds of the chunk or one past it.
        self.at = self.at.wrapping_add(n);
        self.vec.len.store(self.len, Ordering::Release);
    }

    /// Looks up (allocating if needed) the chunk holding slot `i` (at or past the published
    /// length) and caches it: `end` past its last slot, `at` pointing at slot `len` as if that
    /// chunk held it (so `at + (i - len)` is slot `i`; `at` itself is dereferenced only while
    /// `len < end`, when it lies in the chunk).
    #[cold]
    fn grow(&mut self, i: usize) {
        let at = u32::try_from(i).expect("an append vector holds at most 2^32 elements");
        let first = i & !(CHUNK - 1);
        let base = self.vec.slots.chunk_or_grow(at).as_ptr();
        self.end = first + CHUNK;
        // `UnsafeCell<MaybeUninit<T>>` has the layout of `T`. Slot `len` (in this chunk or the
        // one before: only `wrapping` arithmetic, never dereferenced outside the chunk).
        self.at = UnsafeCell::raw_get(base)
            .cast::<T>()
            .wrapping_add(self.len)
            .wrapping_sub(first);
    }

    /// Frees the chunks wholly below element `below`.
    ///
    /// # Safety
    /// No thread reads an element below `below` any more (module docs).
    pub unsafe fn reclaim_below(&mut self, below: usize) {
        let below = u32::try_from(below.min(self.len))
            .expect("an append vector holds at most 2^32 elements");
        // The cached chunk may be among those freed.
        self.end = 0;
        // SAFETY: the caller's promise; indices below `len` are never grown again.
        unsafe { self.vec.slots.reclaim_below(below) };
    }
}

impl<T: Copy> Drop for Writer<'_, T> {
    fn drop(&mut self) {
        self.vec.writer.store(false, Ordering::Release);
    }
}

/// Tasks of a streamed run, as workers read them: node, params, regions, and (under the
/// priority ready policy) each task's priority key.
#[derive(Default)]
pub struct TaskTable {
    nodes: AppendVec<TaskNode>,
    params: AppendVec<u64>,
    io: AppendVec<TaskIo>,
    priorities: AppendVec<i64>,
}

impl std::fmt::Debug for TaskTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskTable")
            .field("tasks", &self.nodes.len())
            .finish()
    }
}

impl TaskTable {
    /// An empty table.
    pub fn new() -> TaskTable {
        TaskTable::default()
    }

    /// Empties the table for another run, keeping the memory of the last run's chunks (a
    /// program keeps one table across its runs: no fresh pages per run).
    pub fn reset(&mut self) {
        self.nodes.reset();
        self.params.reset();
        self.io.reset();
        self.priorities.reset();
    }

    /// Number of published tasks.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Tasks whose nodes are held in memory (whole chunks; a streamed run frees them behind the
    /// completed prefix unless it records its graph).
    pub fn live_tasks(&self) -> usize {
        self.nodes.live()
    }

    /// Most tasks whose nodes were held at once.
    pub fn peak_tasks(&self) -> usize {
        self.nodes.peak()
    }

    /// Whether no task was published.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node of task `t` (published).
    #[inline]
    pub fn node(&self, t: TaskId) -> Option<&TaskNode> {
        self.nodes.get(t.index())
    }

    /// The params of `node`, copied into `out`.
    pub fn params(&self, node: &TaskNode, out: &mut Vec<u64>) -> bool {
        self.params
            .copy_range(node.params_start as usize, node.params_count as usize, out)
    }

    /// The regions of `node`, copied into `out`.
    pub fn io(&self, node: &TaskNode, out: &mut Vec<TaskIo>) -> bool {
        self.io
            .copy_range(node.io_start as usize, node.io_count as usize, out)
    }

    /// Priority key of task `t`: what the priority writer pushed at index `t`, 0 if nothing.
    #[inline]
    pub fn priority(&self, t: TaskId) -> i64 {
        self.priorities.get(t.index()).copied().unwrap_or(0)
    }

    /// The writer of priority keys (one at a time): push task `t`'s key as element `t`, before
    /// the task is submitted (so before any worker can see it ready).
    pub fn priority_writer(&self) -> Option<Writer<'_, i64>> {
        self.priorities.writer()
    }

    /// The table's writer (one at a time).
    pub(crate) fn writer(&self) -> Option<TableWriter<'_>> {
        Some(TableWriter {
            nodes: self.nodes.writer()?,
            params: self.params.writer()?,
            io: self.io.writer()?,
            table: self,
        })
    }
}

/// Copies `src` to `dst` element by element for up to four elements (a task's regions: a
/// copy of unknown length is a `memcpy` call, which costs more for so few).
///
/// # Safety
/// `dst .. dst + src.len()` is valid for writes and does not overlap `src`.
#[inline(always)]
unsafe fn copy_small<T: Copy>(src: &[T], dst: *mut T) {
    let s = src.as_ptr();
    // SAFETY: the caller's promise; each index is below `src.len()`.
    unsafe {
        let one = |k: usize| std::ptr::copy_nonoverlapping(s.add(k), dst.add(k), 1);
        match src.len() {
            0 => {}
            1 => one(0),
            2 => {
                one(0);
                one(1);
            }
            3 => {
                one(0);
                one(1);
                one(2);
            }
            4 => {
                one(0);
                one(1);
                one(2);
                one(3);
            }
            n => std::ptr::copy_nonoverlapping(s, dst, n),
        }
    }
}

/// The orchestrator's handle for appending tasks to a [`TaskTable`].
pub(crate) struct TableWriter<'a> {
    nodes: Writer<'a, TaskNode>,
    params: Writer<'a, u64>,
    io: Writer<'a, TaskIo>,
    table: &'a TaskTable,
}

impl TableWriter<'_> {
    /// Appends a task; its node's `params_start` / `io_start` are rewritten to the table's.
    ///
    /// Inlined into the submission and written in place: one room check per vector (the arena
    /// is looked up once per chunk), the regions copied by straight-line stores (a task has a
    /// handful) and the node written with the table's offsets straight into its slot. Params,
    /// then regions, then the node are published (release stores), so a reader that sees the
    /// node sees the rest.
    #[inline(always)]
    pub(crate) fn push(&mut self, node: &TaskNode, params: &[u64], io: &[TaskIo]) {
        let params_start = self.params.len as u32;
        let io_start = self.io.len as u32;
        self.params.extend_from_slice(params);
        self.io.extend_from_slice(io);
        let p = self.nodes.slot();
        // SAFETY: `slot` gave slot `len` of the chunk being filled: alive, not yet published
        // (no reader looks at it), and this is its only writer.
        unsafe {
            p.write(TaskNode {
                params_start,
                io_start,
                ..*node
            })
        };
        debug_assert_eq!(
            self.nodes.len,
            node.id.index(),
            "tasks are published in id order"
        );
        self.nodes.advance(1);
    }

    /// Frees what the table holds for the tasks below `done_below` (nodes, params, regions,
    /// priority keys).
    ///
    /// # Safety
    /// Every task below `done_below` has completed, as seen by this thread with an acquire
    /// load, so no worker reads its slots any more (module docs); and the priority writer, if
    /// any, is used on this thread only.
    pub(crate) unsafe fn reclaim_below(&mut self, done_below: TaskId) {
        let (params, io) = match self.table.nodes.get(done_below.index()) {
            Some(n) => (n.params_start as usize, n.io_start as usize),
            None => (self.table.params.len(), self.table.io.len()),
        };
        // SAFETY: the caller's promise, for each vector's part of those tasks. Priority keys
        // are pushed in task order by one writer on this thread, so `done_below` is below or
        // at their published length when reclaimed.
        unsafe {
            self.params.reclaim_below(params);
            self.io.reclaim_below(io);
            self.nodes.reclaim_below(done_below.index());
            let below = done_below.index().min(self.table.priorities.len());
            self.table
                .priorities
                .slots
                .reclaim_below(u32::try_from(below).unwrap_or(u32::MAX));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn append_vec_grows_across_segments_and_reads_back() {
        let v = AppendVec::<u64>::default();
        let mut w = v.writer().unwrap();
        assert!(v.writer().is_none(), "one writer at a time");
        for i in 0..5000u64 {
            assert_eq!(w.push(i * 3), i as usize);
        }
        assert_eq!(v.len(), 5000);
        assert!(v.get(5000).is_none());
        for i in 0..5000 {
            assert_eq!(*v.get(i).unwrap(), i as u64 * 3);
        }
        let mut out = Vec::new();
        assert!(v.copy_range(1020, 10, &mut out));
        assert_eq!(out, (1020..1030).map(|i| i * 3).collect::<Vec<u64>>());
    }

    #[test]
    fn extend_appends_runs_across_chunk_boundaries_like_a_vec() {
        // Runs of 0..=13 elements between single pushes: some fit the chunk being filled, some
        // cross into the next one, some start a chunk; the oracle is a plain vector.
        let v = AppendVec::<u64>::default();
        let mut w = v.writer().unwrap();
        let mut want: Vec<u64> = Vec::new();
        let mut k = 0u64;
        while want.len() < 3 * CHUNK + 7 {
            let run: Vec<u64> = (0..k % 14).map(|j| k * 100 + j).collect();
            w.extend_from_slice(&run);
            want.extend(&run);
            assert_eq!(v.len(), want.len(), "a run is published whole");
            w.push(k);
            want.push(k);
            k += 1;
        }
        let got: Vec<u64> = (0..v.len()).map(|i| *v.get(i).unwrap()).collect();
        assert_eq!(got, want);
        assert!(v.get(want.len()).is_none());
    }

    #[test]
    fn readers_see_only_published_runs_while_writing() {
        // The writer appends runs of 0..=6 elements (a task's regions); a reader checks every
        // element below each length it loads.
        let v = AppendVec::<u64>::default();
        let total = std::thread::scope(|s| {
            let w = s.spawn(|| {
                let mut w = v.writer().unwrap();
                let (mut n, mut k) = (0u64, 0u64);
                while n < 100_000 {
                    let run: Vec<u64> = (n..n + k % 7).map(|i| i ^ 0x5555).collect();
                    w.extend_from_slice(&run);
                    n += k % 7;
                    k += 1;
                }
                n
            });
            s.spawn(|| {
                let mut seen = 0;
                while seen < 100_000 {
                    let n = v.len();
                    for i in seen..n {
                        assert_eq!(*v.get(i).unwrap(), i as u64 ^ 0x5555);
                    }
                    seen = n;
                }
            });
            w.join().unwrap()
        });
        assert_eq!(v.len() as u64, total);
    }

    #[test]
    fn readers_see_only_published_elements_while_writing() {
        let v = AppendVec::<u64>::default();
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut w = v.writer().unwrap();
                for i in 0..200_000u64 {
                    w.push(i ^ 0x5555);
                }
            });
            s.spawn(|| {
                let mut seen = 0;
                while seen < 200_000 {
                    let n = v.len();
                    for i in seen..n {
                        assert_eq!(*v.get(i).unwrap(), i as u64 ^ 0x5555);
                    }
                    seen = n;
                }
            });
        });
    }

    #[test]
    fn tasks_written_in_place_read_back_across_chunks_and_reclaims() {
        use pto_wsp_graph::types::{Access, Region};
        // Tasks of 0..=6 regions and 0..=2 params (the straight-line copies, the general copy,
        // runs that cross a chunk), the nodes past several chunks, with the completed prefix
        // reclaimed now and then (the writer then looks its chunk up again). The oracle is a
        // plain vector of what was pushed, read back through the table's own readers.
        let table = TaskTable::new();
        let mut w = table.writer().unwrap();
        let mut want: Vec<(TaskNode, Vec<u64>, Vec<TaskIo>)> = Vec::new();
        let mut live_from = 0usize;
        for t in 0..3 * CHUNK + 11 {
            let nio = (t * 5) % 7;
            let io: Vec<TaskIo> = (0..nio)
                .map(|k| {
                    let r = Region::new((t + k) as u32, &[t as i64, k as i64], &[1, 2]).unwrap();
                    TaskIo::new(
                        r,
                        if k % 2 == 0 {
                            Access::In
                        } else {
                            Access::InOut
                        },
                    )
                })
                .collect();
            let params: Vec<u64> = (0..t % 3).map(|k| (t * 10 + k) as u64).collect();
            let node = TaskNode {
                id: TaskId(t as u32),
                kernel: t as u32 % 5,
                stream: 1,
                // Whatever the caller had: the table writes its own offsets.
                params_start: 999,
                io_start: 999,
                params_count: params.len() as u16,
                io_count: io.len() as u16,
                ..TaskNode::default()
            };
            w.push(&node, &params, &io);
            want.push((node, params, io));
            assert_eq!(table.len(), t + 1, "a task is published when pushed");
            if t % 700 == 699 {
                // SAFETY: one thread; nothing reads the tasks below `t` any more.
                unsafe { w.reclaim_below(TaskId(t as u32)) };
                live_from = t;
            }
        }
        let (mut ps, mut ios) = (Vec::new(), Vec::new());
        let (mut params_at, mut io_at) = (0usize, 0usize);
        for (t, (node, params, io)) in want.iter().enumerate() {
            if t >= live_from {
                let got = table.node(TaskId(t as u32)).expect("published");
                assert_eq!((got.id, got.kernel), (node.id, node.kernel), "task {t}");
                assert_eq!(
                    (got.params_start as usize, got.io_start as usize),
                    (params_at, io_at),
                    "task {t}: the table's offsets"
                );
                assert!(
                    table.params(got, &mut ps) && table.io(got, &mut ios),
                    "task {t}"
                );
                assert_eq!(&ps, params, "task {t}");
                assert_eq!(&ios, io, "task {t}");
            }
            params_at += params.len();
            io_at += io.len();
        }
    }
}
