//! The streaming completion protocol: per-task atomic state that lets the builder wire edges
//! while earlier tasks are already completing (`StartPolicy::Immediate`).
//!
//! # What it promises
//!
//! - *A consumer wired after its producer finished does not wait for it*: [`TaskStates::add_edge`]
//!   returns `false` and the edge costs nothing.
//! - *A producer finishing while a consumer is being wired is never lost*: every edge that
//!   `add_edge` accepted is released exactly once by the producer's [`TaskStates::complete`].
//! - Each task becomes ready exactly once — reported either by [`TaskStates::seal`] returning
//!   `true` or by exactly one `on_ready` call of some predecessor's `complete` — and only after
//!   every predecessor whose edge was accepted has completed. Whatever those predecessors did
//!   (and whatever a refused predecessor did) *happens before* the report.
//!
//! # State
//!
//! Each task has two `u32` atomics:
//!
//! - `fanin`: the number of things the task still waits for. It starts at 1, the *wiring bias*:
//!   the task is "being wired" until [`seal`](TaskStates::seal) drops the bias. Each accepted edge
//!   adds 1; each predecessor completion subtracts 1. Because the bias is held while edges are
//!   added, the count cannot reach 0 before the task is sealed.
//! - `head`: the head of the task's fan-out list, a lock-free LIFO of nodes in an append-only edge
//!   arena (`EMPTY` when the list is empty), or `CLOSED` once the task has completed.
//!
//! # Protocol and memory orderings
//!
//! The builder calls, for each task in submission order, `add_edge(pred, task)` for each
//! inferred predecessor and then `seal(task)`. Workers call `complete(task)` once per task after
//! running it. Per-task storage grows while workers read it: tasks and edge nodes live in
//! [`ChunkArena`]s whose chunks are allocated on demand and never move. A task's `complete`
//! ends by storing `DONE` in its `fanin` (release); once the one wirer has seen every task below
//! `W` done ([`TaskStates::is_complete`], acquire), [`TaskStates::reclaim_below`] frees their
//! chunks and the edge nodes wired before them, so a run under a task window holds state for the
//! tasks between the oldest unfinished one and the newest submitted, not for every task.
//!
//! - `add_edge(pred, succ)`:
//!   1. `pred.head.load(Acquire)`; if `CLOSED`, return `false` at once. The acquire pairs with
//!      the completing producer's release, so the producer's work happens before the builder's
//!      later `seal` and hence before `succ` runs.
//!   2. `succ.fanin.fetch_add(1, Relaxed)`. Relaxed suffices: the producer learns of the edge only
//!      through the release CAS of step 3, so its decrement follows this increment in `fanin`'s
//!      modification order.
//!   3. Write the node (`succ`, `next = head`, relaxed stores) and
//!      `pred.head.compare_exchange(head, node, Release, Acquire)`. On success return `true`.
//!      On failure with `CLOSED` (the producer completed in between; the acquire sees its
//!      work), undo the increment with `fetch_sub(1, Relaxed)` — it cannot reach 0, the bias is
//!      still held — and return `false`. On any other failure (another wirer), retry.
//! - `seal(task)`: drop the bias. Fast path: `fanin.load(Acquire) == 1` means only the bias is
//!   left; no predecessor can still touch the counter, so the task is ready without a
//!   read-modify-write. Otherwise `fetch_sub(1, AcqRel) == 1` decides. Either way, reading the
//!   final value acquires the whole release sequence of decrements on `fanin`, so every
//!   predecessor's work happens before the report.
//! - `complete(task, on_ready)`: `head.swap(CLOSED, AcqRel)`. Acquire: every pushed node was
//!   published by a release CAS and all writes to `head` are read-modify-writes, so the swap sees
//!   every node and its fields. Release: a wirer that later sees `CLOSED` acquires this task's
//!   work. The list (newest first) is reversed in place — after the swap nobody else can reach
//!   it — so successors are released in wiring order. For each successor: if
//!   `fanin.load(Acquire) == 1`, this is the last thing it waits for (the bias is gone and every
//!   other predecessor has subtracted), so it is ready *without* a read-modify-write: the common
//!   single-predecessor case costs one load, not a contended atomic. Otherwise
//!   `fetch_sub(1, AcqRel) == 1` decides (release so that the last decrementer acquires this
//!   task's work). A ready successor is passed to `on_ready`.
//!
//! A count of 1 observed by a predecessor implies the task is sealed: while the bias is held and
//! an accepted edge is pending the count is at least 2, and nothing is added after `seal`. The
//! value of `fanin` after the task became ready is unspecified (0 or 1).
//!
//! # Contract
//!
//! `add_edge(_, t)` only before `seal(t)`; `seal(t)` once; `complete(t)` once, after `t` became
//! ready; `add_edge(p, _)` only after `p` was allocated (any earlier `add_edge`/`seal` of `p`
//! or [`TaskStates::reserve`]). The protocol allows several concurrent wirers, but the builder
//! is one thread in practice. Violations are caught by debug assertions where cheap.
//!
//! [`Wiring`] is the builder's streaming [`EdgeSink`]: each inferred edge becomes `add_edge`, each
//! submission `seal`.
//!
//! Checked with loom in `tests/loom.rs` and stressed with random DAGs in `tests/sched.rs`.

use crate::TaskId;
use crate::arena::ChunkArena;
use crate::builder::EdgeSink;
use crate::sync::{AtomicU32, Ordering};

/// Fan-out list terminator.
const EMPTY: u32 = u32::MAX - 1;
/// Fan-out head of a completed task.
const CLOSED: u32 = u32::MAX;
/// Largest number of edge nodes (indices `EMPTY` and `CLOSED` are reserved).
const MAX_EDGES: u32 = u32::MAX - 2;
/// `fanin` of a task whose `complete` has returned: nobody touches its state any more.
const DONE: u32 = u32::MAX;

/// Per-task atomic state.
struct TaskSlot {
    fanin: AtomicU32,
    head: AtomicU32,
}

impl TaskSlot {
    fn new() -> TaskSlot {
        TaskSlot {
            fanin: AtomicU32::new(1),
            head: AtomicU32::new(EMPTY),
        }
    }
}

/// One fan-out list node: "when the owner completes, release `succ`".
struct EdgeNode {
    succ: AtomicU32,
    next: AtomicU32,
}

impl EdgeNode {
    fn new() -> EdgeNode {
        EdgeNode {
            succ: AtomicU32::new(0),
            next: AtomicU32::new(EMPTY),
        }
    }
}

/// The streaming completion state of every task of a run (see the module docs for the protocol).
///
/// Shared by the builder and the workers (`&self` everywhere; wrap it in an `Arc`).
pub struct TaskStates {
    tasks: ChunkArena<TaskSlot>,
    edges: ChunkArena<EdgeNode>,
    next_edge: AtomicU32,
    /// Every task below has completed and its storage may be freed ([`TaskStates::reclaim_below`]).
    floor: AtomicU32,
}

impl Default for TaskStates {
    fn default() -> Self {
        TaskStates::new()
    }
}

impl std::fmt::Debug for TaskStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStates")
            .field("live_tasks", &self.live_tasks())
            .field("edges", &self.edge_nodes())
            .finish()
    }
}

impl TaskStates {
    /// Empty state; storage grows as tasks are wired.
    pub fn new() -> TaskStates {
        TaskStates {
            tasks: ChunkArena::new(TaskSlot::new),
            edges: ChunkArena::new(EdgeNode::new),
            next_edge: AtomicU32::new(0),
            floor: AtomicU32::new(0),
        }
    }

    #[inline]
    fn slot(&self, task: TaskId) -> &TaskSlot {
        self.tasks.get(task.0)
    }

    #[inline]
    fn slot_or_grow(&self, task: TaskId) -> &TaskSlot {
        self.tasks.get_or_grow(task.0)
    }

    /// Make sure storage for `task` exists (it is "being wired" until sealed). `add_edge` and
    /// `seal` do this themselves; call it only to pre-allocate.
    pub fn reserve(&self, task: TaskId) {
        self.slot_or_grow(task);
    }

    /// Wire `pred -> succ` (before `seal(succ)`). Returns `true` if the edge was recorded, in
    /// which case `pred`'s `complete` will release `succ`; `false` if `pred` had already
    /// completed, in which case `succ` does not wait for it.
    pub fn add_edge(&self, pred: TaskId, succ: TaskId) -> bool {
        self.wire(pred, succ, || {
            let idx = self.next_edge.fetch_add(1, Ordering::Relaxed);
            assert!(
                idx < MAX_EDGES,
                "task-state arena: more than {MAX_EDGES} edges"
            );
            idx
        })
    }

    /// [`TaskStates::add_edge`] with the edge node taken from `cursor`, a wirer's own chunks of
    /// edge nodes, so that the wirer can free them once their predecessors are done
    /// ([`EdgeCursor::reclaim`]). A run uses cursors for every edge or for none.
    pub fn add_edge_in(&self, cursor: &mut EdgeCursor, pred: TaskId, succ: TaskId) -> bool {
        self.wire(pred, succ, || cursor.take(self, succ))
    }

    #[inline]
    fn wire(&self, pred: TaskId, succ: TaskId, alloc: impl FnOnce() -> u32) -> bool {
        debug_assert_ne!(pred, succ, "a task cannot depend on itself");
        if pred.0 < self.floor.load(Ordering::Relaxed) {
            // Completed, and its storage was reclaimed.
            return false;
        }
        let p = self.slot_or_grow(pred);
        let mut head = p.head.load(Ordering::Acquire);
        if head == CLOSED {
            return false;
        }
        let s = self.slot_or_grow(succ);
        s.fanin.fetch_add(1, Ordering::Relaxed);
        let idx = alloc();
        let node = self.edges.get_or_grow(idx);
        node.succ.store(succ.0, Ordering::Relaxed);
        loop {
            node.next.store(head, Ordering::Relaxed);
            match p
                .head
                .compare_exchange(head, idx, Ordering::Release, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(CLOSED) => {
                    // The producer completed while we wired: it will never see this node (which
                    // stays unused), and the consumer must not wait for it.
                    s.fanin.fetch_sub(1, Ordering::Relaxed);
                    return false;
                }
                Err(other) => head = other,
            }
        }
    }

    /// Finish wiring `task`: drop its bias. Returns `true` if it became ready now (every
    /// accepted predecessor has completed, or there were none); otherwise the last predecessor's
    /// `complete` reports it.
    pub fn seal(&self, task: TaskId) -> bool {
        let s = self.slot_or_grow(task);
        if s.fanin.load(Ordering::Acquire) == 1 {
            return true;
        }
        s.fanin.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Record that `task` (which became ready and ran) has completed, and pass every successor
    /// that became ready to `on_ready`, in wiring order. Returns the number of successors on its
    /// fan-out list (ready or not).
    pub fn complete(&self, task: TaskId, mut on_ready: impl FnMut(TaskId)) -> usize {
        let slot = self.slot(task);
        let mut cur = slot.head.swap(CLOSED, Ordering::AcqRel);
        assert_ne!(cur, CLOSED, "task {} completed twice", task.0);
        // Reverse the list (newest first) in place: after the swap it is ours alone.
        let mut prev = EMPTY;
        while cur != EMPTY {
            let node = self.edges.get(cur);
            let next = node.next.load(Ordering::Relaxed);
            node.next.store(prev, Ordering::Relaxed);
            prev = cur;
            cur = next;
        }
        let mut cur = prev;
        let mut n = 0;
        while cur != EMPTY {
            let node = self.edges.get(cur);
            let succ = TaskId(node.succ.load(Ordering::Relaxed));
            cur = node.next.load(Ordering::Relaxed);
            n += 1;
            if self.release(succ) {
                on_ready(succ);
            }
        }
        // Nothing of this task is touched after this store; an acquire load that sees it (the
        // completed-prefix watermark) may free its storage.
        slot.fanin.store(DONE, Ordering::Release);
        n
    }

    /// One predecessor of `succ` is done; `true` if that made it ready.
    #[inline]
    fn release(&self, succ: TaskId) -> bool {
        let fanin = &self.slot(succ).fanin;
        if fanin.load(Ordering::Acquire) == 1 {
            return true;
        }
        fanin.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Whether `task` has completed and its `complete` has returned (`false` for a task never
    /// allocated). An acquire load: what the task and its completer did happens before.
    pub fn is_complete(&self, task: TaskId) -> bool {
        if task.0 < self.floor.load(Ordering::Relaxed) {
            return true;
        }
        match self.tasks.try_get(task.0) {
            Some(s) => s.fanin.load(Ordering::Acquire) == DONE,
            None => false,
        }
    }

    /// The first task in `from .. to` that has not completed ([`TaskStates::is_complete`] is
    /// `false`), or `to` if all have: the completed prefix advanced in one scan that looks each
    /// chunk of task state up once, where a loop of `is_complete` looks up every task.
    pub fn completed_until(&self, from: TaskId, to: TaskId) -> TaskId {
        let mut t = from.0.max(self.floor.load(Ordering::Relaxed));
        while t < to.0 {
            let Some(run) = self.tasks.try_chunk_from(t) else {
                break;
            };
            for slot in run.iter().take((to.0 - t) as usize) {
                if slot.fanin.load(Ordering::Acquire) != DONE {
                    return TaskId(t);
                }
                t += 1;
            }
        }
        TaskId(t.min(to.0).max(from.0))
    }

    /// Frees the state of every task below `done_below`; afterwards `add_edge` from such a task
    /// returns `false` and `is_complete` returns `true` at once. Returns the entries freed
    /// (whole chunks of [`crate::arena::CHUNK`]; the rest when the watermark passes them). Edge
    /// nodes are freed by the wirers' [`EdgeCursor::reclaim`].
    ///
    /// # Safety
    /// Every task below `done_below` was seen [`TaskStates::is_complete`] by some thread, which
    /// happens before this call; and no thread names such a task afterwards, nor is naming one
    /// now, except as the predecessor of an `add_edge` that begins after this call (answered
    /// from the floor without touching storage).
    #[allow(unsafe_code)]
    pub unsafe fn reclaim_below(&self, done_below: TaskId) -> usize {
        if done_below.0 <= self.floor.fetch_max(done_below.0, Ordering::Relaxed) {
            return 0;
        }
        // SAFETY: every task below `done_below` completed and its `complete` returned (its
        // `DONE` store was acquired), so no worker touches its slot; the caller promised that
        // no wirer does.
        unsafe { self.tasks.reclaim_below(done_below.0) }
    }

    /// Task entries held now (whole chunks; freed behind [`TaskStates::reclaim_below`]).
    pub fn live_tasks(&self) -> usize {
        self.tasks.live()
    }

    /// Most task entries held at once.
    pub fn peak_tasks(&self) -> usize {
        self.tasks.peak()
    }

    /// Edge nodes held now.
    pub fn live_edge_nodes(&self) -> usize {
        self.edges.live()
    }

    /// Number of edge nodes allocated: accepted edges plus edges refused after the `CLOSED` fast
    /// path (the producer completed while the edge was being wired).
    pub fn edge_nodes(&self) -> u64 {
        u64::from(self.next_edge.load(Ordering::Relaxed))
    }
}

/// A wirer's own supply of edge nodes: whole chunks of the edge arena, so that the chunks it
/// filled can be freed once every task they point from is done, however many wirers there are.
/// A chunk's nodes were all wired by this wirer into successors no newer than the newest it
/// records; their predecessors are older still.
#[derive(Debug, Default)]
pub struct EdgeCursor {
    next: u32,
    end: u32,
    /// The chunk being filled: its first index and the newest successor wired with it.
    current: Option<(u32, u32)>,
    /// Filled chunks: first index, newest successor.
    filled: std::collections::VecDeque<(u32, u32)>,
}

impl EdgeCursor {
    /// A cursor with no chunk yet.
    pub fn new() -> EdgeCursor {
        EdgeCursor::default()
    }

    fn take(&mut self, states: &TaskStates, succ: TaskId) -> u32 {
        if self.next == self.end {
            let chunk = crate::arena::CHUNK as u32;
            let start = states.next_edge.fetch_add(chunk, Ordering::Relaxed);
            assert!(
                start <= MAX_EDGES - chunk,
                "task-state arena: more than {MAX_EDGES} edges"
            );
            debug_assert_eq!(start % chunk, 0, "edge cursors and add_edge were mixed");
            if let Some(done) = self.current.replace((start, succ.0)) {
                self.filled.push_back(done);
            }
            self.next = start;
            self.end = start + chunk;
        }
        if let Some((_, newest)) = &mut self.current {
            *newest = (*newest).max(succ.0);
        }
        let idx = self.next;
        self.next += 1;
        idx
    }

    /// Frees the filled chunks whose every node points from a task below `done_below`.
    ///
    /// # Safety
    /// Every task below `done_below` was seen [`TaskStates::is_complete`] by the calling thread
    /// (so its fan-out list was walked for the last time), and this cursor was used with
    /// `states` alone, on this thread.
    #[allow(unsafe_code)]
    pub unsafe fn reclaim(&mut self, states: &TaskStates, done_below: TaskId) {
        while let Some(&(start, newest)) = self.filled.front() {
            if newest >= done_below.0 {
                break;
            }
            self.filled.pop_front();
            // SAFETY: every node of the chunk was wired by this thread into a successor no
            // newer than `newest`, from a predecessor older than it, hence below `done_below`
            // and done: nobody walks or wires these nodes any more.
            unsafe { states.edges.reclaim_chunk(start) };
        }
    }
}

/// The streaming [`EdgeSink`] for [`crate::builder::GraphBuilder`]: wires the builder's edges
/// into [`TaskStates`] as they are inferred and reports each task that
/// becomes ready at submission to `on_ready` (tasks that become ready later are reported by the
/// `complete` of their last predecessor).
pub struct Wiring<'a, F: FnMut(TaskId)> {
    states: &'a TaskStates,
    on_ready: F,
    refused: u64,
}

impl<'a, F: FnMut(TaskId)> Wiring<'a, F> {
    /// A sink that wires into `states` and calls `on_ready` for tasks ready at submission.
    pub fn new(states: &'a TaskStates, on_ready: F) -> Wiring<'a, F> {
        Wiring {
            states,
            on_ready,
            refused: 0,
        }
    }

    /// Edges that were not needed because their producer had already completed.
    pub fn refused_edges(&self) -> u64 {
        self.refused
    }
}

impl<F: FnMut(TaskId)> EdgeSink for Wiring<'_, F> {
    fn edge(&mut self, pred: TaskId, succ: TaskId) {
        if !self.states.add_edge(pred, succ) {
            self.refused += 1;
        }
    }

    fn submitted(&mut self, task: TaskId) {
        if self.states.seal(task) {
            (self.on_ready)(task);
        }
    }
}

impl<F: FnMut(TaskId)> std::fmt::Debug for Wiring<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wiring")
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn sequential_protocol() {
        let s = TaskStates::new();
        assert!(s.seal(TaskId(0)));
        assert!(s.add_edge(TaskId(0), TaskId(1)));
        assert!(!s.seal(TaskId(1)));
        let mut ready = vec![];
        assert_eq!(s.complete(TaskId(0), |t| ready.push(t)), 1);
        assert_eq!(ready, vec![TaskId(1)]);
        assert!(s.is_complete(TaskId(0)));
        // Wired after its producer completed: no wait.
        assert!(!s.add_edge(TaskId(0), TaskId(2)));
        assert!(s.seal(TaskId(2)));
    }

    /// `completed_until` agrees with a loop of `is_complete` over every range, whatever tasks
    /// completed, across chunk boundaries and below a reclaimed floor.
    #[test]
    fn completed_until_matches_is_complete() {
        let s = TaskStates::new();
        let chunk = crate::arena::CHUNK as u32;
        let n = chunk * 3 + 7;
        for t in 0..n {
            assert!(s.seal(TaskId(t)));
        }
        // Complete a prefix of two chunks and a bit, then every third task.
        let done = |t: u32| t < 2 * chunk + 5 || t.is_multiple_of(3);
        for t in (0..n).filter(|&t| done(t)) {
            s.complete(TaskId(t), |_| {});
        }
        let reference = |from: u32, to: u32| {
            (from..to)
                .find(|&t| !s.is_complete(TaskId(t)))
                .unwrap_or(to.max(from))
        };
        let check = |label: &str| {
            for from in (0..n + 3).step_by(5) {
                for to in [from, from + 1, from + 9, chunk, 2 * chunk + 6, n, n + 4] {
                    let to = to.max(from);
                    assert_eq!(
                        s.completed_until(TaskId(from), TaskId(to)).0,
                        reference(from, to),
                        "{label}: {from}..{to}"
                    );
                }
            }
        };
        check("all held");
        #[allow(unsafe_code)]
        unsafe {
            s.reclaim_below(TaskId(chunk + 3))
        };
        check("first chunk reclaimed");
    }

    #[test]
    fn growth_across_segments() {
        let s = TaskStates::new();
        let n = crate::arena::CHUNK as u32 * 5;
        assert!(s.seal(TaskId(0)));
        for t in 1..n {
            assert!(s.add_edge(TaskId(t - 1), TaskId(t)));
            assert!(!s.seal(TaskId(t)));
        }
        assert!(s.live_tasks() >= n as usize);
        for t in 0..n - 1 {
            let mut ready = vec![];
            s.complete(TaskId(t), |r| ready.push(r));
            assert_eq!(ready, vec![TaskId(t + 1)]);
        }
        assert!(s.is_complete(TaskId(n - 2)) && !s.is_complete(TaskId(n - 1)));
        // Reclaim behind the completed prefix: whole chunks go, the rest stays usable.
        #[allow(unsafe_code)]
        let freed = unsafe { s.reclaim_below(TaskId(n - 1)) };
        assert_eq!(freed, 4 * crate::arena::CHUNK);
        assert_eq!(s.live_tasks(), crate::arena::CHUNK);
        assert!(s.is_complete(TaskId(0)));
        assert!(
            !s.add_edge(TaskId(0), TaskId(n)),
            "a reclaimed task is complete"
        );
        assert!(s.add_edge(TaskId(n - 1), TaskId(n)));
        assert!(!s.seal(TaskId(n)));
        let mut ready = vec![];
        s.complete(TaskId(n - 1), |r| ready.push(r));
        assert_eq!(ready, vec![TaskId(n)]);
    }
}
