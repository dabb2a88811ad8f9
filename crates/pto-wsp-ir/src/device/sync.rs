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
}

impl Sync {
    /// The C++ statement.
    pub fn cpp(&self) -> String {
        match self {
            Sync::Set { from, to, event } => {
                format!("set_flag({}, {}, EVENT_ID{event});", from.cpp(), to.cpp())
            }
            Sync::Wait { from, to, event } => {
                format!("wait_flag({}, {}, EVENT_ID{event});", from.cpp(), to.cpp())
            }
            Sync::Barrier(p) => format!(
                "pipe_barrier({});",
                p.map_or("PIPE_ALL", |p| p.cpp())
            ),
        }
    }
}

/// The synchronisation of one body.
#[derive(Debug, Clone, Default)]
pub struct SyncPlan {
    before: HashMap<*const KStmt, Vec<Sync>>,
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
            let InstArg::Name(id) = a else { continue };
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
                        acc.push((format!("@{}", id.name), op == TileOp::Store));
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
        let mut out = Vec::new();
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
            st.pending[idx(p)] = after_wait(q);
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
                KStmtKind::Let { .. } => {}
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

/// The synchronisation of `k`'s body (a single-core kernel or part; see the module docs).
pub fn plan(k: &KernelDecl) -> SyncPlan {
    let mut p = Planner {
        k,
        plan: SyncPlan::default(),
        scope: Vec::new(),
    };
    let mut st = State::new();
    p.block(k.body.as_deref().unwrap_or(&[]), &mut st, true);
    p.plan.end = vec![Sync::Barrier(None)];
    p.plan
}
