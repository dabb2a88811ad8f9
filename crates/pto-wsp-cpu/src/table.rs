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
//! a list of segments of doubling size, allocated on demand and never moved or freed before the
//! vector drops. The writer fills slot `len` and then publishes it by storing `len + 1` with
//! release ordering; a reader only hands out slots below a length it loaded with acquire
//! ordering, so every slot it reads was completely written before, and no slot is written again
//! once published. A task's slots are published before the builder seals the task, and a
//! worker learns a task id only through the ready queues or a predecessor's completion, both of
//! which happen after the seal.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pto_wsp_graph::TaskId;
use pto_wsp_graph::storage::TaskNode;
use pto_wsp_graph::types::TaskIo;

/// log2 of the first segment's length.
const FIRST_BITS: u32 = 10;
/// Segments needed to index every `u32`.
const SEGMENTS: usize = (33 - FIRST_BITS) as usize;

type Segment<T> = Box<[UnsafeCell<MaybeUninit<T>>]>;

/// An append-only vector with one writer and many readers (see the module docs).
pub struct AppendVec<T: Copy> {
    segments: Box<[OnceLock<Segment<T>>]>,
    len: AtomicUsize,
    writer: AtomicBool,
}

// SAFETY: slots are written only by the single writer (enforced by `Writer`'s uniqueness) and
// only before they are published; readers only read published slots (see the module docs), so
// sharing the vector between threads is sound for `T: Send + Sync`.
unsafe impl<T: Copy + Send + Sync> Sync for AppendVec<T> {}

impl<T: Copy> Default for AppendVec<T> {
    fn default() -> Self {
        AppendVec {
            segments: (0..SEGMENTS).map(|_| OnceLock::new()).collect(),
            len: AtomicUsize::new(0),
            writer: AtomicBool::new(false),
        }
    }
}

impl<T: Copy> AppendVec<T> {
    #[inline]
    fn locate(i: usize) -> (usize, usize) {
        let j = i as u64 + (1u64 << FIRST_BITS);
        let top = 63 - j.leading_zeros();
        ((top - FIRST_BITS) as usize, (j - (1u64 << top)) as usize)
    }

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
        let (seg, off) = Self::locate(i);
        let s = self.segments[seg].get()?;
        // SAFETY: `i` is below a length loaded with acquire, so the slot was initialised by the
        // writer before its release store of that length, and is never written again.
        Some(unsafe { (*s[off].get()).assume_init_ref() })
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

    /// The writer, if nobody else holds it.
    pub fn writer(&self) -> Option<Writer<'_, T>> {
        (!self.writer.swap(true, Ordering::Acquire)).then_some(Writer { vec: self })
    }
}

/// The one writer of an [`AppendVec`].
pub struct Writer<'a, T: Copy> {
    vec: &'a AppendVec<T>,
}

impl<T: Copy> Writer<'_, T> {
    /// Appends `v` and publishes it; returns its index.
    #[inline]
    pub fn push(&mut self, v: T) -> usize {
        let i = self.vec.len.load(Ordering::Relaxed);
        let (seg, off) = AppendVec::<T>::locate(i);
        let s = self.vec.segments[seg].get_or_init(|| {
            (0..1usize << (FIRST_BITS as usize + seg))
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect()
        });
        // SAFETY: slot `i` is not yet published (`i == len`), so no reader looks at it, and this
        // is the only writer (`Writer` is unique), so nobody else writes it.
        unsafe { (*s[off].get()).write(v) };
        self.vec.len.store(i + 1, Ordering::Release);
        i
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

    /// Number of published tasks.
    pub fn len(&self) -> usize {
        self.nodes.len()
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
        })
    }
}

/// The orchestrator's handle for appending tasks to a [`TaskTable`].
pub(crate) struct TableWriter<'a> {
    nodes: Writer<'a, TaskNode>,
    params: Writer<'a, u64>,
    io: Writer<'a, TaskIo>,
}

impl TableWriter<'_> {
    /// Appends a task; its node's `params_start` / `io_start` are rewritten to the table's.
    pub(crate) fn push(&mut self, node: &TaskNode, params: &[u64], io: &[TaskIo]) {
        let mut n = *node;
        n.params_start = self.params.vec.len() as u32;
        n.io_start = self.io.vec.len() as u32;
        for &p in params {
            self.params.push(p);
        }
        for &r in io {
            self.io.push(r);
        }
        let i = self.nodes.push(n);
        debug_assert_eq!(i, node.id.index(), "tasks are published in id order");
    }
}

#[cfg(test)]
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
}
