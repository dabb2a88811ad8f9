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
use crate::kernel_body::{InstArg, KStmt, KStmtKind, TileDecl};
use crate::module::{KernelDecl, ParamKind};
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
    k: &'k KernelDecl,
    plan: SyncPlan,
    scope: Vec<TileDecl>,
    doubles: &'k Doubles,
    /// The double-buffered load each statement is, if any.
    loads: HashMap<*const KStmt, Double>,
}

impl Planner<'_> {
    /// The resources instruction `op` reads and writes (`tile` names and `@region` names).
    fn accesses(&self, op: TileOp, args: &[InstArg]) -> (Vec<(String, bool)>, Option<Pipe>) {
        let sc = &self.scope;
        let lookup = |n: &str| sc.iter().rev().find(|t| t.name.name == n);
        let Some(tiles) = inst_tiles(op, args, &lookup) else {
            return (Vec::new(), None);
        };
        let pipe = match place(op, &tiles).map(|m| m.run) {
            Ok(super::Run::On { pipe, .. }) => Some(pipe),
            _ => None,
        };
        let mut acc = Vec::new();
        for (kind, a) in op.operands().iter().zip(args) {
            let Some(id) = a.tile_name() else { continue };
            match kind {
                Operand::Dst => {
                    acc.push((id.name.clone(), true));
                    if op == TileOp::MatmulAcc {
                        acc.push((id.name.clone(), false));
                    }
                }
                Operand::Src => acc.push((id.name.clone(), false)),
                Operand::Global => {
                    let region = self.k.params.iter().any(|p| {
                        p.name.name == id.name && matches!(p.kind, ParamKind::Tile { .. })
                    });
                    if region {
                        acc.push((
                            format!("@{}", id.name),
                            matches!(op, TileOp::Store | TileOp::StoreAdd),
                        ));
                    }
                }
                _ => {}
            }
        }
        (acc, pipe)
    }

    fn inst(&mut self, s: &KStmt, op: TileOp, args: &[InstArg], st: &mut State, emit: bool) {
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

    fn block(&mut self, body: &[KStmt], st: &mut State, emit: bool) {
        let mark = self.scope.len();
        for s in body {
            match &s.kind {
                KStmtKind::Tile(t) => self.scope.push(t.clone()),
                KStmtKind::Let { .. } | KStmtKind::LetFloat { .. } | KStmtKind::Check { .. } => {}
                // The scalar unit reads one element of the tile.
                KStmtKind::GetVal { tile, .. } => {
                    if let Some(id) = tile.tile_name() {
                        self.issue(s, vec![(id.name.clone(), false)], Pipe::S, st, emit);
                    }
                }
                KStmtKind::Inst { op, args } => self.inst(s, *op, args, st, emit),
                KStmtKind::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    let mut t = st.clone();
                    self.block(then_body, &mut t, emit);
                    let mut e = st.clone();
                    self.block(else_body, &mut e, emit);
                    t.join(&e);
                    *st = t;
                }
                KStmtKind::For { body, .. } => {
                    if emit {
                        for d in self.doubles.of_loop(s) {
                            let (set, wait) = credits(d);
                            self.plan
                                .prologue
                                .entry(s as *const _)
                                .or_default()
                                .extend(set);
                            self.plan
                                .epilogue
                                .entry(s as *const _)
                                .or_default()
                                .extend(wait);
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
                    // The state at the top of an iteration: before the loop, or after any
                    // number of iterations (also the state after the loop, which may run 0
                    // times).
                    let mut entry = st.clone();
                    loop {
                        let mut end = entry.clone();
                        self.block(body, &mut end, false);
                        let mut next = entry.clone();
                        next.join(&end);
                        if next == entry {
                            break;
                        }
                        entry = next;
                    }
                    let mut end = entry.clone();
                    self.block(body, &mut end, emit);
                    entry.join(&end);
                    *st = entry;
                }
            }
        }
        self.scope.truncate(mark);
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
/// no tile double-buffered.
pub fn plan(k: &KernelDecl) -> SyncPlan {
    plan_with(k, &Doubles::default())
}

/// [`plan`], with the tiles of `doubles` double-buffered.
pub fn plan_with(k: &KernelDecl, doubles: &Doubles) -> SyncPlan {
    let loads = doubles
        .by_loop
        .values()
        .flatten()
        .map(|d| (d.load, d.clone()))
        .collect();
    let mut p = Planner {
        k,
        plan: SyncPlan::default(),
        scope: Vec::new(),
        doubles,
        loads,
    };
    let mut st = State::new();
    p.block(k.body.as_deref().unwrap_or(&[]), &mut st, true);
    p.plan.end = vec![Sync::Barrier(None)];
    p.plan
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
/// (two event ids each, ids 1 to 6; 0 is the planner's, 7 the kernel exit's).
pub fn find_doubles(k: &KernelDecl) -> Doubles {
    let body = k.body.as_deref().unwrap_or(&[]);
    // Every access of every tile declaration in the kernel.
    let mut all: HashMap<*const KStmt, usize> = HashMap::new();
    count_uses(body, &mut Vec::new(), &mut all);
    let mut out = Doubles::default();
    let mut used_events: HashMap<(Pipe, Pipe), u8> = HashMap::new();
    find_in(body, &mut Vec::new(), &all, &mut out, &mut used_events);
    out
}

type Scope = Vec<(String, *const KStmt, TileDecl)>;

fn lookup<'s>(scope: &'s Scope, name: &str) -> Option<&'s (String, *const KStmt, TileDecl)> {
    scope.iter().rev().find(|(n, _, _)| n == name)
}

/// The tiles (declaration, write?) a statement touches, and its pipe: an instruction's, or a
/// `GETVAL`'s read on the scalar unit; `None` for other statements.
type Touches = (Vec<(*const KStmt, String, bool)>, Option<Pipe>);

fn stmt_touches(s: &KStmt, scope: &Scope) -> Option<Touches> {
    match &s.kind {
        KStmtKind::Inst { op, args } => Some(touches(*op, args, scope)),
        KStmtKind::GetVal { tile, .. } => {
            let id = tile.tile_name()?;
            let (n, d, _) = lookup(scope, &id.name)?;
            Some((vec![(*d, n.clone(), false)], Some(Pipe::S)))
        }
        _ => None,
    }
}

/// The tiles (declaration, write?) an instruction touches, and its pipe.
fn touches(
    op: TileOp,
    args: &[InstArg],
    scope: &Scope,
) -> (Vec<(*const KStmt, String, bool)>, Option<Pipe>) {
    let decls: Vec<TileDecl> = scope.iter().map(|(_, _, d)| d.clone()).collect();
    let lk = |n: &str| decls.iter().rev().find(|t| t.name.name == n);
    let pipe = inst_tiles(op, args, &lk)
        .and_then(|t| place(op, &t).ok())
        .and_then(|m| match m.run {
            super::Run::On { pipe, .. } => Some(pipe),
            super::Run::Cross { .. } => None,
        });
    let mut out = Vec::new();
    for (kind, a) in op.operands().iter().zip(args) {
        if let (Operand::Dst | Operand::Src, Some(id)) = (kind, a.tile_name())
            && let Some((n, d, _)) = lookup(scope, &id.name)
        {
            let write = *kind == Operand::Dst;
            out.push((*d, n.clone(), write));
            if write && op == TileOp::MatmulAcc {
                out.push((*d, n.clone(), false));
            }
        }
    }
    (out, pipe)
}

fn count_uses(body: &[KStmt], scope: &mut Scope, all: &mut HashMap<*const KStmt, usize>) {
    let mark = scope.len();
    for s in body {
        match &s.kind {
            KStmtKind::Tile(t) => scope.push((t.name.name.clone(), s as *const _, t.clone())),
            KStmtKind::Let { .. } | KStmtKind::LetFloat { .. } | KStmtKind::Check { .. } => {}
            KStmtKind::For { body, .. } => count_uses(body, scope, all),
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                count_uses(then_body, scope, all);
                count_uses(else_body, scope, all);
            }
            KStmtKind::Inst { .. } | KStmtKind::GetVal { .. } => {
                for (d, _, _) in stmt_touches(s, scope).map(|t| t.0).unwrap_or_default() {
                    *all.entry(d).or_default() += 1;
                }
            }
        }
    }
    scope.truncate(mark);
}

/// The uses of every tile in a loop body, by declaration.
fn loop_uses(
    body: &[KStmt],
    top: Option<usize>,
    scope: &mut Scope,
    uses: &mut HashMap<*const KStmt, Vec<Use>>,
) {
    let mark = scope.len();
    for (i, s) in body.iter().enumerate() {
        let t = top.unwrap_or(i);
        match &s.kind {
            KStmtKind::Tile(d) => scope.push((d.name.name.clone(), s as *const _, d.clone())),
            KStmtKind::Let { .. } | KStmtKind::LetFloat { .. } | KStmtKind::Check { .. } => {}
            KStmtKind::For { body, .. } => loop_uses(body, Some(t), scope, uses),
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                loop_uses(then_body, Some(t), scope, uses);
                loop_uses(else_body, Some(t), scope, uses);
            }
            KStmtKind::Inst { .. } | KStmtKind::GetVal { .. } => {
                let (ts, pipe) = stmt_touches(s, scope).unwrap_or_default();
                for (d, _, write) in ts {
                    uses.entry(d).or_default().push(Use {
                        top: t,
                        write,
                        pipe,
                        stmt: s as *const _,
                    });
                }
            }
        }
    }
    scope.truncate(mark);
}

fn find_in(
    body: &[KStmt],
    scope: &mut Scope,
    all: &HashMap<*const KStmt, usize>,
    out: &mut Doubles,
    used_events: &mut HashMap<(Pipe, Pipe), u8>,
) {
    let mark = scope.len();
    for s in body {
        match &s.kind {
            KStmtKind::Tile(t) => scope.push((t.name.name.clone(), s as *const _, t.clone())),
            KStmtKind::Let { .. }
            | KStmtKind::LetFloat { .. }
            | KStmtKind::Check { .. }
            | KStmtKind::GetVal { .. }
            | KStmtKind::Inst { .. } => {}
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                find_in(then_body, scope, all, out, used_events);
                find_in(else_body, scope, all, out, used_events);
            }
            KStmtKind::For { body: inner, .. } => {
                let mut uses = HashMap::new();
                loop_uses(inner, None, &mut scope.clone(), &mut uses);
                // Declarations visible in the body: the enclosing scope and its own top level.
                let mut visible: Scope = scope.clone();
                for t in inner {
                    if let KStmtKind::Tile(d) = &t.kind {
                        visible.push((d.name.name.clone(), t as *const _, d.clone()));
                    }
                }
                let mut found = Vec::new();
                for (decl, us) in &uses {
                    let Some((name, _, td)) = visible.iter().rev().find(|v| v.1 == *decl) else {
                        continue;
                    };
                    if td.count.is_some() {
                        continue; // tile arrays keep one buffer per element
                    }
                    if all.get(decl).copied().unwrap_or(0) != us.len() {
                        continue; // used outside the loop
                    }
                    let first = &us[0];
                    let load = &inner[first.top];
                    let first_is_load = std::ptr::eq(first.stmt, load)
                        && matches!(
                            &load.kind,
                            KStmtKind::Inst {
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
                        continue;
                    }
                    let reader = reader.expect("checked");
                    let last = reads.iter().map(|u| u.top).max().expect("reads");
                    found.push(Double {
                        tile: name.clone(),
                        decl: *decl,
                        load: load as *const _,
                        last_read: &inner[last] as *const _,
                        reader,
                        events: [0, 0],
                    });
                }
                // In the order of their loads, each with two event ids of its pipe pair.
                found.sort_by_key(|d| {
                    inner
                        .iter()
                        .position(|x| std::ptr::eq(x, d.load))
                        .unwrap_or(0)
                });
                found.retain_mut(|d| {
                    let next = used_events.entry((d.reader, Pipe::Mte2)).or_insert(1);
                    if *next > 5 {
                        return false;
                    }
                    d.events = [*next, *next + 1];
                    *next += 2;
                    true
                });
                if !found.is_empty() {
                    out.by_loop.insert(s as *const _, found);
                }
                let mut sc = scope.clone();
                find_in(inner, &mut sc, all, out, used_events);
            }
        }
    }
    scope.truncate(mark);
}

#[cfg(test)]
mod tests {
    use super::*;

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
