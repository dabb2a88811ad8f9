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
//! Each task has three `u32` atomics:
//!
//! - `fanin`: what the task still waits for. It starts at `BIAS` (2^31), the *wiring bias*: the
//!   task is "being wired" until [`seal`](TaskStates::seal) subtracts `BIAS - wired`, leaving
//!   the number of accepted edges whose producer has not completed yet. Each predecessor
//!   completion subtracts 1. While the bias is held the count is at least `BIAS - wired`, far
//!   above 1, so it cannot reach 1 or 0 before the task is sealed.
//! - `wired`: the number of accepted edges into the task, counted by its one wirer with plain
//!   (relaxed load and store) updates: an accepted edge costs the wirer no read-modify-write on
//!   the successor, only the compare-exchange on the producer's list.
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
//!   2. Write the node (`succ`, `next = head`, relaxed stores) and
//!      `pred.head.compare_exchange(head, node, Release, Acquire)`. On success count the edge in
//!      `succ.wired` and return `true`. On failure with `CLOSED` (the producer completed in
//!      between; the acquire sees its work) return `false` (nothing was counted). On any other
//!      failure (another wirer of the same producer), retry.
//! - `seal(task)`: drop the bias, keeping one count per accepted edge: `d = BIAS - wired`. Fast
//!   path: `fanin.load(Acquire) == d` means every accepted producer has already subtracted (none
//!   can still touch the counter), so the task is ready without a read-modify-write — always the
//!   case for a task with no accepted edge. Otherwise `fetch_sub(d, AcqRel) == d` decides.
//!   Either way, reading the final value acquires the whole release sequence of decrements on
//!   `fanin`, so every predecessor's work happens before the report.
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
//! A count of 1 observed by a predecessor implies the task is sealed: while the bias is held the
//! count is at least `BIAS - wired >= 2`, and after `seal` it only falls. The value of `fanin`
//! after the task became ready is unspecified.
//!
//! # Contract
//!
//! `add_edge(_, t)` only before `seal(t)`; `seal(t)` once; `complete(t)` once, after `t` became
//! ready; `add_edge(p, _)` only after `p` was allocated (any earlier `add_edge`/`seal` of `p`
//! or [`TaskStates::reserve`]). The protocol allows several concurrent wirers (of the same
//! producer, too), but every edge into one task is wired, and the task sealed, by one thread
//! (its `wired` count is updated without a read-modify-write); the builder is one thread in
//! practice. Violations are caught by debug assertions where cheap.
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
/// Initial `fanin`: the wiring bias (see the module docs). A task accepts fewer than
/// `BIAS - 1` edges.
const BIAS: u32 = 1 << 31;
/// `fanin` of a task whose `complete` has returned: nobody touches its state any more.
const DONE: u32 = u32::MAX;

/// Per-task atomic state.
struct TaskSlot {
    fanin: AtomicU32,
    head: AtomicU32,
    /// Accepted edges into the task (its one wirer's count).
    wired: AtomicU32,
}

impl TaskSlot {
    fn new() -> TaskSlot {
        TaskSlot {
            fanin: AtomicU32::new(BIAS),
            head: AtomicU32::new(EMPTY),
            wired: AtomicU32::new(0),
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
            // SAFETY: both are pairs of `u32` atomics (no drop, no reference): a copy of a
            // fresh one is a valid fresh one.
            #[allow(unsafe_code)]
            tasks: unsafe { ChunkArena::new_bitwise(TaskSlot::new) },
            #[allow(unsafe_code)]
            edges: unsafe { ChunkArena::new_bitwise(EdgeNode::new) },
            next_edge: AtomicU32::new(0),
            floor: AtomicU32::new(0),
        }
    }

    /// Empties the state for another run, as [`TaskStates::new`] would but keeping the memory
    /// of the last run's chunks for reuse ([`ChunkArena::reset`]).
    pub fn reset(&mut self) {
        self.tasks.reset();
        self.edges.reset();
        self.next_edge.store(0, Ordering::Relaxed);
        self.floor.store(0, Ordering::Relaxed);
    }

    /// Whether nothing was wired since [`TaskStates::new`] or [`TaskStates::reset`].
    pub fn is_fresh(&self) -> bool {
        self.tasks.live() == 0
            && self.next_edge.load(Ordering::Relaxed) == 0
            && self.floor.load(Ordering::Relaxed) == 0
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
        debug_assert_ne!(pred, succ, "a task cannot depend on itself");
        if pred.0 < self.floor.load(Ordering::Relaxed) {
            // Completed, and its storage was reclaimed.
            return false;
        }
        let p = self.slot_or_grow(pred);
        let s = self.slot_or_grow(succ);
        self.wire(p, s, succ, || {
            let idx = self.next_edge.fetch_add(1, Ordering::Relaxed);
            assert!(
                idx < MAX_EDGES,
                "task-state arena: more than {MAX_EDGES} edges"
            );
            (idx, self.edges.get_or_grow(idx))
        })
    }

    /// [`TaskStates::add_edge`] with the edge node taken from `cursor`, a wirer's own chunks of
    /// edge nodes, so that the wirer can free them once their predecessors are done
    /// ([`EdgeCursor::reclaim`]). A run uses cursors for every edge or for none.
    ///
    /// The cursor also remembers the chunks it last used (the task-state chunk of the newest
    /// successor and the edge-node chunk being filled), so a builder wiring task after task
    /// looks each chunk up once, not once per edge.
    #[inline]
    pub fn add_edge_in(&self, cursor: &mut EdgeCursor, pred: TaskId, succ: TaskId) -> bool {
        self.add_edge_in_inlined(cursor, pred, succ)
    }

    /// [`TaskStates::add_edge_in`], always inlined: for a wirer whose edge call is its hot path
    /// (the streamed run's sink, called once per inferred edge). Left to the compiler, the call
    /// stayed out of line there and its frame (saved registers, arguments moved, the cursor's
    /// fields reloaded) was about a fifth of an edge's cost; other callers keep the plain call.
    #[inline(always)]
    pub fn add_edge_in_inlined(&self, cursor: &mut EdgeCursor, pred: TaskId, succ: TaskId) -> bool {
        debug_assert_ne!(pred, succ, "a task cannot depend on itself");
        if pred.0 < self.floor.load(Ordering::Relaxed) {
            // Completed, and its storage was reclaimed.
            return false;
        }
        let p = match cursor.cached_slot(pred) {
            Some(p) => p,
            None => self.slot_or_grow(pred),
        };
        // `succ` is being wired, so it has not completed (the contract): `slot_in` may cache it.
        let s = self.slot_in(cursor, succ);
        self.wire(p, s, succ, || cursor.take(self, succ))
    }

    /// [`TaskStates::add_edge_in`] for a producer that is not sealed yet and whose only wirer is
    /// this thread (a batch of held submissions, the chain's case): nobody else can touch its
    /// fan-out list before it is sealed (it cannot be ready, so it cannot complete), so the node
    /// is pushed by a plain store instead of a compare-exchange, and the edge is always
    /// accepted. The producer's seal, later on this thread, orders the store before its
    /// completion (the seal's read-modify-write or the publication of the ready task is a
    /// release that its completer acquires).
    ///
    /// Contract: `pred` was allocated and is not sealed (checked only as far as "not completed":
    /// its own producers may have counted its `fanin` down already), `succ` is being wired, and
    /// this thread is the only wirer of both.
    ///
    /// Always inlined: its one caller outside tests is the streamed run's sink, once per edge.
    #[inline(always)]
    pub fn add_edge_unsealed_in(&self, cursor: &mut EdgeCursor, pred: TaskId, succ: TaskId) {
        debug_assert!(pred < succ, "a task's producer is older than it");
        let p = match cursor.cached_slot(pred) {
            Some(p) => p,
            None => self.slot_or_grow(pred),
        };
        let s = self.slot_in(cursor, succ);
        let head = p.head.load(Ordering::Relaxed);
        debug_assert_ne!(head, CLOSED, "an unsealed producer cannot have completed");
        let (idx, node) = cursor.take(self, succ);
        node.succ.store(succ.0, Ordering::Relaxed);
        node.next.store(head, Ordering::Relaxed);
        p.head.store(idx, Ordering::Release);
        let wired = s.wired.load(Ordering::Relaxed) + 1;
        assert!(wired < BIAS - 1, "a task accepts fewer than 2^31 - 1 edges");
        s.wired.store(wired, Ordering::Relaxed);
    }

    /// [`TaskStates::seal_in`] for a task whose every accepted edge comes from a producer that
    /// is not sealed yet ([`TaskStates::add_edge_unsealed_in`]): no producer can have completed
    /// or complete before this thread seals it, so nobody has touched the task's count and the
    /// bias is dropped by a plain store instead of a read-modify-write. Returns whether the task
    /// is ready (it accepted no edge). A batch of such tasks must be sealed newest first, so
    /// that each one's producers in the batch are still unsealed at its seal.
    ///
    /// Contract (checked by a debug assertion): every producer of an edge `task` accepted is
    /// unsealed, this thread is its only wirer, and `task` is not sealed.
    #[inline]
    pub fn seal_unsealed_preds_in(&self, cursor: &mut EdgeCursor, task: TaskId) -> bool {
        let s = self.slot_in(cursor, task);
        let wired = s.wired.load(Ordering::Relaxed);
        debug_assert_eq!(
            s.fanin.load(Ordering::Relaxed),
            BIAS,
            "task {} sealed twice or released by a producer",
            task.0
        );
        if wired == 0 {
            return true;
        }
        // Release: a producer that completes later (after its own seal on this thread) reads
        // this count or a later one with acquire.
        s.fanin.store(wired, Ordering::Release);
        false
    }

    /// The state of `task` through `cursor`'s cached chunk (caching the chunk of `task`).
    /// `task` must not have completed (it is being wired or sealed), so its chunk is alive.
    #[inline(always)]
    fn slot_in<'s>(&'s self, cursor: &mut EdgeCursor, task: TaskId) -> &'s TaskSlot {
        match cursor.cached_slot(task) {
            Some(s) => s,
            None => self.cache_slot(cursor, task),
        }
    }

    /// [`TaskStates::slot_in`] when `task` is not in the cached chunk: caches its chunk.
    #[cold]
    #[inline(never)]
    fn cache_slot<'s>(&'s self, cursor: &mut EdgeCursor, task: TaskId) -> &'s TaskSlot {
        self.slot_or_grow(task);
        let base = self.tasks.chunk_or_grow(task.0);
        let first = task.0 & !(crate::arena::CHUNK as u32 - 1);
        cursor.slots = Some((first, base));
        // SAFETY: `base` points at the first of the `CHUNK` entries of the chunk holding `task`
        // (offset `task - first`), allocated just now or before and not reclaimed: `task` has
        // not completed, and only chunks of completed tasks are reclaimed.
        #[allow(unsafe_code)]
        unsafe {
            &*base.as_ptr().add((task.0 - first) as usize)
        }
    }

    #[inline]
    fn wire<'s>(
        &'s self,
        p: &TaskSlot,
        s: &TaskSlot,
        succ: TaskId,
        alloc: impl FnOnce() -> (u32, &'s EdgeNode),
    ) -> bool {
        let mut head = p.head.load(Ordering::Acquire);
        if head == CLOSED {
            return false;
        }
        let (idx, node) = alloc();
        node.succ.store(succ.0, Ordering::Relaxed);
        loop {
            node.next.store(head, Ordering::Relaxed);
            match p
                .head
                .compare_exchange(head, idx, Ordering::Release, Ordering::Acquire)
            {
                Ok(_) => {
                    // Only this task's wirer writes `wired`: no read-modify-write needed.
                    let wired = s.wired.load(Ordering::Relaxed) + 1;
                    assert!(wired < BIAS - 1, "a task accepts fewer than 2^31 - 1 edges");
                    s.wired.store(wired, Ordering::Relaxed);
                    return true;
                }
                Err(CLOSED) => {
                    // The producer completed while we wired: it will never see this node (which
                    // stays unused), and the consumer must not wait for it.
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
        Self::unbias(self.slot_or_grow(task))
    }

    /// [`TaskStates::seal`] through the wirer's cursor (the chunk it wired `task`'s edges in is
    /// looked up once, not again per task).
    #[inline]
    pub fn seal_in(&self, cursor: &mut EdgeCursor, task: TaskId) -> bool {
        Self::unbias(self.slot_in(cursor, task))
    }

    /// Drops the wiring bias of a task's state: whether it became ready.
    #[inline]
    fn unbias(s: &TaskSlot) -> bool {
        let d = BIAS - s.wired.load(Ordering::Relaxed);
        if s.fanin.load(Ordering::Acquire) == d {
            return true;
        }
        s.fanin.fetch_sub(d, Ordering::AcqRel) == d
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
        // Acquire: a prefix taken from the floor comes with what its reclaimer saw (device
        // generation's bound on task state held relies on it).
        let mut t = from.0.max(self.floor.load(Ordering::Acquire));
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
        if done_below.0 <= self.floor.fetch_max(done_below.0, Ordering::AcqRel) {
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
///
/// It also caches two chunk pointers: the edge-node chunk being filled and the task-state chunk
/// it last wired or sealed a task in. Both stay valid while cached: the edge chunk is freed only
/// by this cursor's [`EdgeCursor::reclaim`] once filled (and then no longer current); a task-state
/// chunk is freed only when every task in it has completed, which puts all its ids below the
/// reclaimed floor, and the cache is used only for a successor being wired or sealed (not
/// completed) or for a predecessor at or above the floor.
#[derive(Debug, Default)]
pub struct EdgeCursor {
    next: u32,
    end: u32,
    /// The chunk being filled: its first index and the newest successor wired with it.
    current: Option<(u32, u32)>,
    /// The first node of the chunk being filled (`end - CHUNK .. end`).
    nodes: Option<std::ptr::NonNull<EdgeNode>>,
    /// The task-state chunk last used: its first task id and its first slot.
    slots: Option<(u32, std::ptr::NonNull<TaskSlot>)>,
    /// Filled chunks: first index, newest successor.
    filled: std::collections::VecDeque<(u32, u32)>,
}

// SAFETY: the cached pointers point into a `TaskStates`' arenas, whose entries are atomics
// shared between threads anyway; the cursor is used by one wirer at a time (`&mut`), wherever
// it moves.
#[allow(unsafe_code)]
unsafe impl Send for EdgeCursor {}

impl EdgeCursor {
    /// A cursor with no chunk yet.
    pub fn new() -> EdgeCursor {
        EdgeCursor::default()
    }

    /// The state of `task` if it lies in the cached task-state chunk. The caller makes sure the
    /// task is at or above the floor (see the type's docs), so the chunk is alive.
    #[inline(always)]
    fn cached_slot<'s>(&self, task: TaskId) -> Option<&'s TaskSlot> {
        let (first, base) = self.slots?;
        let off = task.0.wrapping_sub(first);
        if off >= crate::arena::CHUNK as u32 {
            return None;
        }
        // SAFETY: `base` is the first of the `CHUNK` entries of a chunk that is alive while
        // cached for tasks at or above the floor (the type's docs); `off < CHUNK`.
        #[allow(unsafe_code)]
        Some(unsafe { &*base.as_ptr().add(off as usize) })
    }

    /// The next edge node (index and node) for an edge into `succ`.
    #[inline]
    fn take<'s>(&mut self, states: &'s TaskStates, succ: TaskId) -> (u32, &'s EdgeNode) {
        let chunk = crate::arena::CHUNK as u32;
        let base = match self.nodes {
            Some(base) if self.next != self.end => base,
            _ => self.next_chunk(states, succ),
        };
        if let Some((_, newest)) = &mut self.current {
            *newest = (*newest).max(succ.0);
        }
        let idx = self.next;
        self.next += 1;
        // SAFETY: `base` is the first node of the chunk `end - CHUNK .. end` (allocated by
        // `next_chunk`), which holds `idx`; only `reclaim` frees it, once it is filled.
        #[allow(unsafe_code)]
        let node = unsafe { &*base.as_ptr().add((idx - (self.end - chunk)) as usize) };
        (idx, node)
    }

    #[cold]
    fn next_chunk(&mut self, states: &TaskStates, succ: TaskId) -> std::ptr::NonNull<EdgeNode> {
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
        let base = states.edges.chunk_or_grow(start);
        self.nodes = Some(base);
        base
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

    /// Wiring and sealing through a cursor (its cached chunks) across chunk boundaries and a
    /// reclaimed prefix: every task becomes ready exactly when the reference says — a task
    /// whose predecessors (two back and one back) have all completed — and edges from
    /// reclaimed tasks are refused.
    #[test]
    fn cursor_wiring_across_chunks_and_reclaim() {
        let s = TaskStates::new();
        let mut cursor = EdgeCursor::new();
        let chunk = crate::arena::CHUNK as u32;
        let n = chunk * 4 + 3;
        let mut done = vec![false; n as usize];
        let mut ready_at_seal = vec![];
        let mut released = vec![];
        let mut floor = 0u32;
        for t in 0..n {
            // Complete the task two behind first (it is ready: its producers completed in the
            // steps before), so that of each task's two edges one is refused (a completed
            // producer) and one accepted.
            if t >= 2 {
                let c = t - 2;
                s.complete(TaskId(c), |r| released.push(r.0));
                done[c as usize] = true;
            }
            let mut accepted = 0;
            for p in [t.checked_sub(2), t.checked_sub(1)].into_iter().flatten() {
                let a = s.add_edge_in(&mut cursor, TaskId(p), TaskId(t));
                // The reference: an edge is accepted iff its producer has not completed.
                assert_eq!(a, !done[p as usize], "edge {p} -> {t}");
                accepted += u32::from(a);
            }
            if s.seal_in(&mut cursor, TaskId(t)) {
                assert_eq!(
                    accepted, 0,
                    "task {t} ready at seal with a pending producer"
                );
                ready_at_seal.push(t);
            }
            if t % chunk == chunk - 1 && t > chunk {
                floor = t - chunk;
                #[allow(unsafe_code)]
                unsafe {
                    s.reclaim_below(TaskId(floor));
                    cursor.reclaim(&s, TaskId(floor));
                }
                assert!(s.is_complete(TaskId(floor - 1)));
            }
        }
        assert!(floor > chunk, "the prefix was reclaimed past a chunk");
        assert!(
            !s.add_edge_in(&mut cursor, TaskId(0), TaskId(n)),
            "reclaimed"
        );
        // Every task became ready exactly once, at its seal or released by a producer: all but
        // the newest, whose producer one back is still running.
        let mut all: Vec<u32> = ready_at_seal.iter().chain(&released).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..n - 1).collect::<Vec<_>>());
    }

    /// Batches of held tasks, as a streamed sink builds them: edges from a task of the batch
    /// being built are wired by plain stores, the others atomically; the batch is sealed newest
    /// first, a task wired only from its batch by the plain seal. Between batches some of the
    /// ready tasks complete (a worker lagging behind). Oracle: a task runs only once every
    /// producer has run, and every task runs exactly once.
    #[test]
    fn held_batches_wired_and_sealed_by_plain_stores() {
        const N: u32 = 300;
        const BATCH: u32 = 5;
        // Producers: one to three of the four tasks before (a fixed pseudo-random pattern).
        let preds = |t: u32| -> Vec<u32> {
            (1..=4u32)
                .filter(|k| t >= *k && !(t.wrapping_mul(7) + k * 3).is_multiple_of(4))
                .map(|k| t - k)
                .collect()
        };
        let s = TaskStates::new();
        let mut cursor = EdgeCursor::new();
        let mut done = vec![false; N as usize];
        let mut ran = 0u32;
        let mut ready: Vec<u32> = Vec::new();
        let run = |t: u32, done: &mut Vec<bool>, ready: &mut Vec<u32>| {
            for p in preds(t) {
                assert!(done[p as usize], "task {t} ran before its producer {p}");
            }
            assert!(!done[t as usize], "task {t} ran twice");
            done[t as usize] = true;
            s.complete(TaskId(t), |r| ready.push(r.0));
        };
        let mut start = 0;
        while start < N {
            let end = (start + BATCH).min(N);
            let mut outside = vec![false; (end - start) as usize];
            for t in start..end {
                for p in preds(t) {
                    if p >= start {
                        s.add_edge_unsealed_in(&mut cursor, TaskId(p), TaskId(t));
                    } else if s.add_edge_in(&mut cursor, TaskId(p), TaskId(t)) {
                        outside[(t - start) as usize] = true;
                    }
                }
            }
            for t in (start..end).rev() {
                let r = if outside[(t - start) as usize] {
                    s.seal_in(&mut cursor, TaskId(t))
                } else {
                    s.seal_unsealed_preds_in(&mut cursor, TaskId(t))
                };
                if r {
                    ready.push(t);
                }
            }
            // The worker runs half of what is ready (its oldest first) before the next batch.
            for _ in 0..ready.len().div_ceil(2) {
                let t = ready.remove(0);
                run(t, &mut done, &mut ready);
                ran += 1;
            }
            start = end;
        }
        while let Some(t) = ready.pop() {
            run(t, &mut done, &mut ready);
            ran += 1;
        }
        assert_eq!(ran, N, "every task ran");
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
