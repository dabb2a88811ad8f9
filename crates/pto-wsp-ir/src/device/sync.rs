//! Pipe synchronisation of a single-core kernel body, from its def-use across pipes.
//!
//! Why: on the device each instruction runs on a hardware pipe ([`super::PIPES_SOURCE`]) and the
//! pipes run concurrently: a tile (or a global region) written on one pipe and read or written on
//! another needs an event between them, and two dependent vector instructions a `pipe_barrier`
//! ([`super::VECTOR_BARRIER_SOURCE`]); the programmer is responsible for that ordering
//! ([`super::ORDERING_SOURCE`]). The CPU simulation runs in program order and hides a missing
//! one.
//!
//! Promise: [`plan`] returns, for every instruction, the synchronisation to issue before it:
//! for each earlier access on another pipe `Q` that conflicts with it (same tile or region, at
//! least one a write) and that its pipe `P` is not yet ordered after, one
//! `set_flag(Q, P, EVENT_ID0); wait_flag(Q, P, EVENT_ID0)` (every set is waited at once, so flags
//! never stay set on any path); for a conflict with an earlier vector instruction not yet behind
//! a barrier, `pipe_barrier(PIPE_V)`. Nothing else: a pipe ordered after `Q` stays ordered after
//! everything `Q` was ordered after, until new conflicting accesses are issued. Branches join (the union of what may be pending) and
//! loops iterate to a fixed point, so accesses of the previous iteration are ordered too.
//! [`SyncPlan::end`] drains every pipe before the kernel returns.

use super::Pipe;
use super::check::{inst_tiles, place};
use super::pair::{Pair, resolved, tile_of};
use crate::kernel_body::KStmt;
use crate::module::KernelDecl;
use crate::resolve::body::{Arg, Body, BodyKind, BodyStmt};
use crate::tile_isa::{Operand, TileOp};
use std::collections::{BTreeSet, HashMap};

/// One synchronisation statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sync {
    /// `set_flag(from, to, EVENT_ID{event})`.
    Set {
        /// The producing pipe.
        from: Pipe,
        /// The waiting pipe.
        to: Pipe,
        /// The event id.
        event: u8,
    },
    /// `wait_flag(from, to, EVENT_ID{event})`.
    Wait {
        /// The producing pipe.
        from: Pipe,
        /// The waiting pipe.
        to: Pipe,
        /// The event id.
        event: u8,
    },
    /// `pipe_barrier(pipe)`; `None` is `PIPE_ALL`.
    Barrier(Option<Pipe>),
    /// The flag of a double-buffered tile's buffer (see [`Double`]): `set_flag` (or, with
    /// `wait`, `wait_flag`) from `from` to `to` with `events[h]` in half `h` of the loop, which
    /// the emitter writes twice, once per buffer.
    Credit {
        /// Whether it waits (or sets).
        wait: bool,
        /// The pipe reading the buffer.
        from: Pipe,
        /// The pipe loading it (`MTE2`).
        to: Pipe,
        /// The event of each buffer.
        events: [u8; 2],
    },
}

impl Sync {
    /// The C++ statement (in half 0 of a double-buffered loop).
    pub fn cpp(&self) -> String {
        self.cpp_in(0)
    }

    /// The C++ statement in half `half` of a double-buffered loop.
    pub fn cpp_in(&self, half: usize) -> String {
        match self {
            Sync::Credit {
                wait,
                from,
                to,
                events,
            } => {
                let f = if *wait { "wait_flag" } else { "set_flag" };
                format!(
                    "{f}({}, {}, EVENT_ID{});",
                    from.cpp(),
                    to.cpp(),
                    events[half % 2]
                )
            }
            Sync::Set { from, to, event } => {
                format!("set_flag({}, {}, EVENT_ID{event});", from.cpp(), to.cpp())
            }
            Sync::Wait { from, to, event } => {
                format!("wait_flag({}, {}, EVENT_ID{event});", from.cpp(), to.cpp())
            }
            Sync::Barrier(p) => format!("pipe_barrier({});", p.map_or("PIPE_ALL", |p| p.cpp())),
        }
    }
}

/// A tile a loop loads afresh at the top of every iteration and then only reads on one other
/// pipe: it gets two buffers, iterations alternate between them, and the load of the next
/// iteration overlaps the reads of this one. The loader waits for the buffer's last reader two
/// iterations back through a flag per buffer ("credits": both set before the loop, each waited
/// before a load and set again after the iteration's last read, both waited after the loop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Double {
    /// The tile.
    pub tile: String,
    /// Its declaration.
    pub decl: *const KStmt,
    /// The load at the top of the loop body.
    pub load: *const KStmt,
    /// The statement of the loop body (at its top level) holding the last read.
    pub last_read: *const KStmt,
    /// The pipe of every read.
    pub reader: Pipe,
    /// The event of each buffer's flag.
    pub events: [u8; 2],
}

/// The double-buffered tiles of a body, by loop.
#[derive(Clone, Debug, Default)]
pub struct Doubles {
    by_loop: HashMap<*const KStmt, Vec<Double>>,
}

impl Doubles {
    /// The double-buffered tiles of loop `s`.
    pub fn of_loop(&self, s: &KStmt) -> &[Double] {
        self.by_loop
            .get(&(s as *const KStmt))
            .map_or(&[], |v| v.as_slice())
    }

    /// The declarations of every double-buffered tile (for [`super::alloc::plan_with`]).
    pub fn decls(&self) -> std::collections::HashSet<*const KStmt> {
        self.by_loop.values().flatten().map(|d| d.decl).collect()
    }

    /// Whether `decl` declares a double-buffered tile.
    pub fn doubled(&self, decl: &KStmt) -> bool {
        self.by_loop
            .values()
            .flatten()
            .any(|d| std::ptr::eq(d.decl, decl))
    }

    /// How many tiles are double-buffered.
    pub fn len(&self) -> usize {
        self.by_loop.values().map(Vec::len).sum()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The synchronisation of one body.
#[derive(Debug, Clone, Default)]
pub struct SyncPlan {
    before: HashMap<*const KStmt, Vec<Sync>>,
    after: HashMap<*const KStmt, Vec<Sync>>,
    prologue: HashMap<*const KStmt, Vec<Sync>>,
    epilogue: HashMap<*const KStmt, Vec<Sync>>,
    pipes: HashMap<*const KStmt, Pipe>,
    /// What to issue at the end of the body (a full drain).
    pub end: Vec<Sync>,
    /// Event pairs (`set_flag` + `wait_flag`) and barriers placed, for reports.
    pub pairs: usize,
    /// `pipe_barrier(PIPE_V)`s placed.
    pub barriers: usize,
}

impl SyncPlan {
    /// What to issue before instruction `s`.
    pub fn before(&self, s: &KStmt) -> &[Sync] {
        self.before
            .get(&(s as *const KStmt))
            .map_or(&[], |v| v.as_slice())
    }

    /// What to issue after statement `s` (the credits of double-buffered tiles).
    pub fn after(&self, s: &KStmt) -> &[Sync] {
        self.after
            .get(&(s as *const KStmt))
            .map_or(&[], |v| v.as_slice())
    }

    /// What to issue before loop `s` starts.
    pub fn prologue(&self, s: &KStmt) -> &[Sync] {
        self.prologue
            .get(&(s as *const KStmt))
            .map_or(&[], |v| v.as_slice())
    }

    /// What to issue after loop `s` ends.
    pub fn epilogue(&self, s: &KStmt) -> &[Sync] {
        self.epilogue
            .get(&(s as *const KStmt))
            .map_or(&[], |v| v.as_slice())
    }

    /// The pipe instruction `s` runs on.
    pub fn pipe(&self, s: &KStmt) -> Option<Pipe> {
        self.pipes.get(&(s as *const KStmt)).copied()
    }
}

/// An access not yet ordered before some pipe: resource, whether it writes, the pipe it ran on.
type Access = (String, bool, Pipe);

/// What may still be in flight: per consumer pipe, the accesses of other pipes it is not ordered
/// after; and the vector accesses since the last vector barrier.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct State {
    pending: Vec<BTreeSet<Access>>,
    vector: BTreeSet<(String, bool)>,
}

impl State {
    fn new() -> State {
        State {
            pending: vec![BTreeSet::new(); Pipe::ALL.len()],
            vector: BTreeSet::new(),
        }
    }

    fn join(&mut self, other: &State) {
        for (a, b) in self.pending.iter_mut().zip(&other.pending) {
            a.extend(b.iter().cloned());
        }
        self.vector.extend(other.vector.iter().cloned());
    }
}

fn idx(p: Pipe) -> usize {
    Pipe::ALL.iter().position(|q| *q == p).expect("a pipe")
}

struct Planner<'k> {
    /// The body in slot form, beside the written one.
    body: &'k Body,
    plan: SyncPlan,
    doubles: &'k Doubles,
    /// The double-buffered load each statement is, if any.
    loads: HashMap<*const KStmt, Double>,
}

/// The resource a tile or region operand stands for: the tile's declared name, or `@` and the
/// region's. Tiles of sibling blocks that share a name are one resource (they may share an
/// address, [`super::alloc`] placing tiles by scope), so accesses to them are ordered as one.
fn resource(body: &Body, a: &Arg) -> Option<String> {
    match a {
        Arg::Tile(r) => tile_of(body, r.tile).map(|t| t.name.name.clone()),
        Arg::Region(r) => body
            .regions
            .get(*r as usize)
            .map(|p| format!("@{}", p.name)),
        _ => None,
    }
}

impl Planner<'_> {
    /// The resources instruction `op` reads and writes (tiles and `@region`s), and its pipe.
    fn accesses(&self, op: TileOp, args: &[Arg]) -> (Vec<(String, bool)>, Option<Pipe>) {
        let Some(tiles) = inst_tiles(self.body, op, args) else {
            return (Vec::new(), None);
        };
        let pipe = match place(op, &tiles).map(|m| m.run) {
            Ok(super::Run::On { pipe, .. }) => Some(pipe),
            _ => None,
        };
        let mut acc = Vec::new();
        for (kind, a) in op.operands().iter().zip(args) {
            let Some(r) = resource(self.body, a) else {
                continue;
            };
            match kind {
                Operand::Dst => {
                    acc.push((r.clone(), true));
                    if op == TileOp::MatmulAcc {
                        acc.push((r, false));
                    }
                }
                Operand::Src => acc.push((r, false)),
                Operand::Global => acc.push((r, matches!(op, TileOp::Store | TileOp::StoreAdd))),
                _ => {}
            }
        }
        (acc, pipe)
    }

    fn inst(&mut self, s: &KStmt, op: TileOp, args: &[Arg], st: &mut State, emit: bool) {
        let (acc, pipe) = self.accesses(op, args);
        let Some(p) = pipe else { return };
        self.issue(s, acc, p, st, emit);
    }

    /// Orders statement `s`, accessing `acc` on pipe `p`, after the conflicting accesses of
    /// other pipes (and vector barriers), and records its own accesses.
    fn issue(&mut self, s: &KStmt, acc: Vec<(String, bool)>, p: Pipe, st: &mut State, emit: bool) {
        let mut out = Vec::new();
        if let Some(d) = self.loads.get(&(s as *const KStmt)) {
            // The buffer this iteration loads was last read two iterations back; its credit
            // orders that read. The other buffer's reads do not conflict.
            out.push(Sync::Credit {
                wait: true,
                from: d.reader,
                to: p,
                events: d.events,
            });
            st.pending[idx(p)].retain(|a| !(a.0 == d.tile && a.2 == d.reader));
        }
        // Other pipes this instruction must wait for.
        let conflicts = |pending: &BTreeSet<Access>| -> BTreeSet<Pipe> {
            pending
                .iter()
                .filter(|(r, w, _)| acc.iter().any(|(r2, w2)| r == r2 && (*w || *w2)))
                .map(|(_, _, q)| *q)
                .collect()
        };
        // Wait for one conflicting pipe at a time, the one whose wait also orders the most
        // other conflicts (a pipe that waited for another passes that order on).
        loop {
            let pending = &st.pending[idx(p)];
            let open = conflicts(pending);
            let after_wait = |q: Pipe| -> BTreeSet<Access> {
                let of_q = &st.pending[idx(q)];
                pending
                    .iter()
                    .filter(|a| a.2 != q && of_q.contains(*a))
                    .cloned()
                    .collect()
            };
            let Some(q) = open
                .iter()
                .copied()
                .min_by_key(|q| conflicts(&after_wait(*q)).len())
            else {
                break;
            };
            out.push(Sync::Set {
                from: q,
                to: p,
                event: 0,
            });
            out.push(Sync::Wait {
                from: q,
                to: p,
                event: 0,
            });
            // P is now after every access of Q, and after every access Q was already ordered
            // after (the set is issued on Q behind Q's own waits).
            let ordered = after_wait(q);
            if p.needs_barrier_within() {
                // Accesses of P itself that Q was ordered after are complete too: no barrier
                // is needed for them.
                let of_q = &st.pending[idx(q)];
                st.vector
                    .retain(|(r, w)| of_q.contains(&(r.clone(), *w, p)));
            }
            st.pending[idx(p)] = ordered;
        }
        if p.needs_barrier_within() {
            let hit = st
                .vector
                .iter()
                .any(|(r, w)| acc.iter().any(|(r2, w2)| r == r2 && (*w || *w2)));
            if hit {
                out.push(Sync::Barrier(Some(p)));
                st.vector.clear();
            }
            st.vector.extend(acc.iter().cloned());
        }
        for q in Pipe::ALL {
            if q != p {
                for (r, w) in &acc {
                    st.pending[idx(q)].insert((r.clone(), *w, p));
                }
            }
        }
        if emit {
            self.plan.pairs += out.iter().filter(|x| matches!(x, Sync::Set { .. })).count();
            self.plan.barriers += out.iter().filter(|x| matches!(x, Sync::Barrier(_))).count();
            self.plan.pipes.insert(s as *const _, p);
            if !out.is_empty() {
                self.plan.before.insert(s as *const _, out);
            }
        }
    }

    fn block(&mut self, block: Pair<'_>, st: &mut State, emit: bool) {
        for (s, b) in block.iter() {
            match &b.kind {
                BodyKind::Tile { .. }
                | BodyKind::Let { .. }
                | BodyKind::LetFloat { .. }
                | BodyKind::Check { .. } => {}
                // The scalar unit reads one element of the tile.
                BodyKind::GetVal { tile, .. } => {
                    if let Some(t) = tile_of(self.body, tile.tile) {
                        self.issue(s, vec![(t.name.name.clone(), false)], Pipe::S, st, emit);
                    }
                }
                BodyKind::Inst { op, args } => self.inst(s, *op, args, st, emit),
                BodyKind::If { .. } => {
                    let mut joined: Option<State> = None;
                    for branch in Pair::nested(s, b) {
                        let mut t = st.clone();
                        self.block(branch, &mut t, emit);
                        match &mut joined {
                            Some(j) => j.join(&t),
                            None => joined = Some(t),
                        }
                    }
                    if let Some(j) = joined {
                        *st = j;
                    }
                }
                BodyKind::For { .. } => {
                    if let Some(inner) = Pair::nested(s, b).pop() {
                        self.lp(s, inner, st, emit);
                    }
                }
            }
        }
    }

    /// Loop `s` with body `inner`: the credits of its double-buffered tiles, then its body
    /// from the state at the top of an iteration.
    fn lp(&mut self, s: &KStmt, inner: Pair<'_>, st: &mut State, emit: bool) {
        if emit {
            for d in self.doubles.of_loop(s) {
                let (set, wait) = credits(d);
                let at = s as *const KStmt;
                self.plan.prologue.entry(at).or_default().extend(set);
                self.plan.epilogue.entry(at).or_default().extend(wait);
                self.plan
                    .after
                    .entry(d.last_read)
                    .or_default()
                    .push(Sync::Credit {
                        wait: false,
                        from: d.reader,
                        to: Pipe::Mte2,
                        events: d.events,
                    });
            }
        }
        // The state at the top of an iteration: before the loop, or after any number of
        // iterations (also the state after the loop, which may run 0 times).
        let mut entry = st.clone();
        loop {
            let mut end = entry.clone();
            self.block(inner, &mut end, false);
            let mut next = entry.clone();
            next.join(&end);
            if next == entry {
                break;
            }
            entry = next;
        }
        let mut end = entry.clone();
        self.block(inner, &mut end, emit);
        entry.join(&end);
        *st = entry;
    }
}

/// Both credits of a double-buffered tile set before its loop, and both waited after it.
fn credits(d: &Double) -> (Vec<Sync>, Vec<Sync>) {
    let one = |wait: bool, e: u8| {
        if wait {
            Sync::Wait {
                from: d.reader,
                to: Pipe::Mte2,
                event: e,
            }
        } else {
            Sync::Set {
                from: d.reader,
                to: Pipe::Mte2,
                event: e,
            }
        }
    };
    (
        d.events.iter().map(|e| one(false, *e)).collect(),
        d.events.iter().map(|e| one(true, *e)).collect(),
    )
}

/// The synchronisation of `k`'s body (a single-core kernel or part; see the module docs), with
/// no tile double-buffered. The body is read in slot form, keyed by the written statements; one
/// that does not resolve (which [`super::alloc::plan`] refuses) gets only the final drain.
pub fn plan(k: &KernelDecl) -> SyncPlan {
    plan_with(k, &Doubles::default())
}

/// [`plan`], with the tiles of `doubles` double-buffered.
pub fn plan_with(k: &KernelDecl, doubles: &Doubles) -> SyncPlan {
    let mut plan = SyncPlan::default();
    if let Ok(body) = resolved(k) {
        let loads = doubles
            .by_loop
            .values()
            .flatten()
            .map(|d| (d.load, d.clone()))
            .collect();
        let mut p = Planner {
            body: &body,
            plan,
            doubles,
            loads,
        };
        let mut st = State::new();
        p.block(Pair::top(k, &body), &mut st, true);
        plan = p.plan;
    }
    plan.end = vec![Sync::Barrier(None)];
    plan
}

/// One access of a tile inside a loop body: the top-level statement of the body holding it,
/// whether it writes, its pipe, and the statement itself.
struct Use {
    top: usize,
    write: bool,
    pipe: Option<Pipe>,
    stmt: *const KStmt,
}

/// Finds the tiles to double-buffer: in each `for` loop, a tile whose first access in the body
/// is a `TLOAD` at the body's top level, whose every other access is a read on one pipe other
/// than the loader's, and that nothing outside the loop touches. At most three per pipe pair
/// (two event ids each, ids 1 to 6; 0 is the planner's, 7 the kernel exit's). A body that does
/// not resolve (which [`super::alloc::plan`] refuses) has none.
pub fn find_doubles(k: &KernelDecl) -> Doubles {
    let Ok(body) = resolved(k) else {
        return Doubles::default();
    };
    let top = Pair::top(k, &body);
    let mut f = Finder {
        body: &body,
        decls: vec![std::ptr::null(); body.tiles.len()],
        all: vec![0; body.tiles.len()],
        out: Doubles::default(),
        used_events: HashMap::new(),
    };
    // Every access of every tile in the kernel.
    f.count_uses(top);
    f.find_in(top, &mut Vec::new());
    f.out
}

/// The tiles (slot, write?) a statement touches, and its pipe.
type Touches = (Vec<(u32, bool)>, Option<Pipe>);

/// The tiles (slot, write?) statement `b` touches, and its pipe: an instruction's, or a
/// `GETVAL`'s read on the scalar unit; `None` for other statements.
fn touches(body: &Body, b: &BodyStmt) -> Option<Touches> {
    let (op, args) = match &b.kind {
        BodyKind::Inst { op, args } => (*op, args),
        BodyKind::GetVal { tile, .. } => return Some((vec![(tile.tile, false)], Some(Pipe::S))),
        _ => return None,
    };
    let pipe = inst_tiles(body, op, args)
        .and_then(|t| place(op, &t).ok())
        .and_then(|m| match m.run {
            super::Run::On { pipe, .. } => Some(pipe),
            super::Run::Cross { .. } => None,
        });
    let mut out = Vec::new();
    for (kind, a) in op.operands().iter().zip(args) {
        if let (Operand::Dst | Operand::Src, Arg::Tile(r)) = (kind, a) {
            let write = *kind == Operand::Dst;
            out.push((r.tile, write));
            if write && op == TileOp::MatmulAcc {
                out.push((r.tile, false));
            }
        }
    }
    Some((out, pipe))
}

/// The search of [`find_doubles`].
struct Finder<'b> {
    body: &'b Body,
    /// The statement declaring each tile slot.
    decls: Vec<*const KStmt>,
    /// The accesses of each tile slot in the whole kernel.
    all: Vec<usize>,
    out: Doubles,
    /// The next event id of each pipe pair.
    used_events: HashMap<(Pipe, Pipe), u8>,
}

impl Finder<'_> {
    fn count_uses(&mut self, block: Pair<'_>) {
        for (s, b) in block.iter() {
            if let BodyKind::Tile { tile, .. } = &b.kind
                && let Some(d) = self.decls.get_mut(*tile as usize)
            {
                *d = s as *const _;
            }
            for inner in Pair::nested(s, b) {
                self.count_uses(inner);
            }
            for (t, _) in touches(self.body, b).map(|t| t.0).unwrap_or_default() {
                if let Some(n) = self.all.get_mut(t as usize) {
                    *n += 1;
                }
            }
        }
    }

    /// The uses of every tile in a loop body, by slot (`top`: the top-level statement of the
    /// loop body holding `block`, `None` for the loop body itself).
    fn loop_uses(&self, block: Pair<'_>, top: Option<usize>, uses: &mut HashMap<u32, Vec<Use>>) {
        for (i, (s, b)) in block.iter().enumerate() {
            let t = top.unwrap_or(i);
            for inner in Pair::nested(s, b) {
                self.loop_uses(inner, Some(t), uses);
            }
            let (ts, pipe) = touches(self.body, b).unwrap_or_default();
            for (slot, write) in ts {
                uses.entry(slot).or_default().push(Use {
                    top: t,
                    write,
                    pipe,
                    stmt: s as *const _,
                });
            }
        }
    }

    /// `visible`: the tile slots declared in the enclosing blocks so far.
    fn find_in(&mut self, block: Pair<'_>, visible: &mut Vec<u32>) {
        let mark = visible.len();
        for (s, b) in block.iter() {
            match &b.kind {
                BodyKind::Tile { tile, .. } => visible.push(*tile),
                BodyKind::If { .. } => {
                    for branch in Pair::nested(s, b) {
                        self.find_in(branch, visible);
                    }
                }
                BodyKind::For { .. } => {
                    let Some(inner) = Pair::nested(s, b).pop() else {
                        continue;
                    };
                    let found = self.of_loop(inner, visible);
                    if !found.is_empty() {
                        self.out.by_loop.insert(s as *const _, found);
                    }
                    self.find_in(inner, &mut visible.clone());
                }
                _ => {}
            }
        }
        visible.truncate(mark);
    }

    /// The double-buffered tiles of the loop with body `inner`, in the order of their loads,
    /// each with two event ids of its pipe pair.
    fn of_loop(&mut self, inner: Pair<'_>, visible: &[u32]) -> Vec<Double> {
        let mut uses = HashMap::new();
        self.loop_uses(inner, None, &mut uses);
        // Tiles visible in the body: the enclosing blocks' and its own top level's.
        let mut visible = visible.to_vec();
        for (_, b) in inner.iter() {
            if let BodyKind::Tile { tile, .. } = &b.kind {
                visible.push(*tile);
            }
        }
        let mut found: Vec<Double> = uses
            .iter()
            .filter(|(slot, _)| visible.contains(slot))
            .filter_map(|(slot, us)| self.candidate(inner, *slot, us))
            .collect();
        found.sort_by_key(|d| {
            inner
                .written
                .iter()
                .position(|x| std::ptr::eq(x, d.load))
                .unwrap_or(0)
        });
        found.retain_mut(|d| {
            let next = self.used_events.entry((d.reader, Pipe::Mte2)).or_insert(1);
            if *next > 5 {
                return false;
            }
            d.events = [*next, *next + 1];
            *next += 2;
            true
        });
        found
    }

    /// Tile `slot` of a loop with body `inner`, used `us` there, if it is double-buffered
    /// (with no events yet).
    fn candidate(&self, inner: Pair<'_>, slot: u32, us: &[Use]) -> Option<Double> {
        let td = tile_of(self.body, slot)?;
        if td.count.is_some() {
            return None; // tile arrays keep one buffer per element
        }
        if self.all.get(slot as usize).copied().unwrap_or(0) != us.len() {
            return None; // used outside the loop
        }
        let first = &us[0];
        let load = &inner.written[first.top];
        let first_is_load = std::ptr::eq(first.stmt, load)
            && matches!(
                &inner.resolved[first.top].kind,
                BodyKind::Inst {
                    op: TileOp::Load,
                    ..
                }
            )
            && first.write;
        let reads = &us[1..];
        let reader = reads.first().and_then(|u| u.pipe);
        if !first_is_load
            || reads.is_empty()
            || reads.iter().any(|u| u.write || u.pipe != reader)
            || reader.is_none_or(|r| r == Pipe::Mte2)
        {
            return None;
        }
        let last = reads.iter().map(|u| u.top).max()?;
        Some(Double {
            tile: td.name.name.clone(),
            decl: self.decls[slot as usize],
            load: load as *const _,
            last_read: &inner.written[last] as *const _,
            reader: reader?,
            events: [0, 0],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_body::KStmtKind;

    fn kernel(params: &str, body: &str, task: &str) -> KernelDecl {
        let src = format!(
            "tensor A: f16[16, 64];\ntensor X: f32[16, 16];\nkernel k({params}) @cube {{\n{body}}}\n\
             workload main() {{\n    task k({task});\n}}\n"
        );
        let m = crate::parse(&src).expect("parses");
        crate::validate(&m).expect("valid");
        m.kernels[0].clone()
    }

    #[test]
    fn a_load_then_a_move_waits_once_per_pipe_pair() {
        let k = kernel(
            "in a: f16[16, 64], out x: f32[16, 16]",
            "tile m: mat f16[16, 16];\ntile l: left f16[16, 16];\ntile r: right f16[16, 16];\n\
             tile c: acc f32[16, 16];\nTLOAD(m, a);\nTMOV(l, m);\nTMOV(r, m);\nTMATMUL(c, l, r);\nTSTORE(x, c);\n",
            "A[0 +: 16, 0 +: 64], X[0 +: 16, 0 +: 16]",
        );
        let p = plan(&k);
        let body = k.body.as_ref().unwrap();
        let wait = |q, p| Sync::Wait {
            from: q,
            to: p,
            event: 0,
        };
        // TMOV(l, m) waits for the load; TMOV(r, m) is on the same pipe and need not.
        assert!(p.before(&body[5]).contains(&wait(Pipe::Mte2, Pipe::Mte1)));
        assert!(p.before(&body[6]).is_empty());
        assert!(p.before(&body[7]).contains(&wait(Pipe::Mte1, Pipe::M)));
        assert!(p.before(&body[8]).contains(&wait(Pipe::M, Pipe::Fix)));
        assert_eq!(p.pairs, 3);
    }

    #[test]
    fn a_tile_loaded_afresh_in_a_loop_is_double_buffered() {
        let k = kernel(
            "in a: f16[16, 64], out x: f32[16, 16]",
            "tile m: mat f16[16, 16];\ntile l: left f16[16, 16];\nfor i in range(4) {\n\
             TLOAD(m, a, 0, i * 16);\nTMOV(l, m);\n}\n",
            "A[0 +: 16, 0 +: 64], X[0 +: 16, 0 +: 16]",
        );
        let d = find_doubles(&k);
        assert_eq!(d.len(), 1);
        let body = k.body.as_ref().unwrap();
        let dd = &d.of_loop(&body[2])[0];
        assert_eq!(
            (dd.tile.as_str(), dd.reader, dd.events),
            ("m", Pipe::Mte1, [1, 2])
        );
        let p = plan_with(&k, &d);
        assert_eq!(p.prologue(&body[2]).len(), 2);
        assert_eq!(p.epilogue(&body[2]).len(), 2);
        let KStmtKind::For { body: inner, .. } = &body[2].kind else {
            panic!()
        };
        // The load waits for its buffer's credit, not for the previous iteration's move.
        assert!(matches!(
            p.before(&inner[0])[..],
            [Sync::Credit { wait: true, .. }]
        ));
        assert!(matches!(
            p.after(&inner[1])[..],
            [Sync::Credit { wait: false, .. }]
        ));
    }
}
