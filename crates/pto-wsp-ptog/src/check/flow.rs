//! Allocations and launched graphs followed through the control code.
//!
//! Why: the control CPU frees, copies and reads tensors while graphs it launched may still be
//! running. Whether a graph may still run at an instruction, and whether a tensor is surely
//! allocated there, follow from the control code alone, over every path (both branches of a
//! `CF_IF`, zero or more passes of a loop, leaving at a `CF_BREAK`), so a program that could
//! free a tensor in use, or launch a graph over memory it has not allocated, is refused before
//! it runs.
//!
//! Rules, each a [`CheckError`] at the instruction: `MC_ALLOC` of a tensor that is (or may
//! be) allocated; `MC_FREE` of a tensor that is not surely allocated, or that a graph which
//! may still run uses; `MC_COPY` of tensors not surely allocated or used by a graph which may
//! still run; a condition or count read from such a tensor; a launch of a graph using a tensor
//! not surely allocated; a launch on another stream of a graph that may still run on one.

use super::{CheckError, Checked, Ctl, Scalar};
use crate::program::Program;
use std::collections::{BTreeMap, BTreeSet};

/// What is known of one tensor at a point of the control code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Free,
    Live,
    /// Allocated on some paths, not on others.
    Maybe,
}

/// What is known at a point: each tensor's state, and the graphs that may be running (with
/// the streams they were launched on).
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    alloc: Vec<St>,
    running: BTreeMap<usize, BTreeSet<u32>>,
}

impl State {
    fn join(&self, o: &State) -> State {
        let alloc = self
            .alloc
            .iter()
            .zip(&o.alloc)
            .map(|(&a, &b)| if a == b { a } else { St::Maybe })
            .collect();
        let mut running = self.running.clone();
        for (g, s) in &o.running {
            running.entry(*g).or_default().extend(s.iter().copied());
        }
        State { alloc, running }
    }
}

struct Flow<'a> {
    c: &'a Checked,
}

impl Flow<'_> {
    fn fail<T>(&self, pc: usize, operand: Option<usize>, m: String) -> Result<T, CheckError> {
        Err(CheckError::at(self.c.control_insns[pc], operand, m))
    }

    /// A graph that may run and uses tensor `t`.
    fn user(&self, st: &State, t: usize) -> Option<usize> {
        st.running
            .keys()
            .copied()
            .find(|&g| self.c.graphs[g].uses.binary_search(&t).is_ok())
    }

    /// Tensor `t` is surely allocated and no graph that may run uses it.
    fn quiet(
        &self,
        st: &State,
        pc: usize,
        operand: usize,
        t: usize,
        what: &str,
    ) -> Result<(), CheckError> {
        let name = &self.c.tensors[t].name;
        match st.alloc[t] {
            St::Live => {}
            St::Free => {
                return self.fail(
                    pc,
                    Some(operand),
                    format!("{what} tensor {name}, which is not allocated here"),
                );
            }
            St::Maybe => {
                return self.fail(
                    pc,
                    Some(operand),
                    format!("{what} tensor {name}, which may not be allocated here"),
                );
            }
        }
        if let Some(g) = self.user(st, t) {
            return self.fail(
                pc,
                Some(operand),
                format!(
                    "{what} tensor {name} while graph {}, which uses it, may still run (TG_SYNC \
                     it first)",
                    self.c.graphs[g].name
                ),
            );
        }
        Ok(())
    }

    fn read(&self, st: &State, pc: usize, s: &Scalar, what: &str) -> Result<(), CheckError> {
        match s {
            Scalar::Imm(_) => Ok(()),
            Scalar::Elem { tensor, .. } => self.quiet(st, pc, 0, *tensor, what),
        }
    }

    /// One straight step.
    fn step(&self, st: &mut State, pc: usize) -> Result<(), CheckError> {
        match &self.c.control[pc] {
            Ctl::Alloc { tensor } => {
                let name = &self.c.tensors[*tensor].name;
                match st.alloc[*tensor] {
                    St::Free => st.alloc[*tensor] = St::Live,
                    St::Live => {
                        return self.fail(
                            pc,
                            Some(0),
                            format!("MC_ALLOC of tensor {name}, which is already allocated"),
                        );
                    }
                    St::Maybe => {
                        return self.fail(
                            pc,
                            Some(0),
                            format!(
                                "MC_ALLOC of tensor {name}, which may already be allocated here \
                                 (allocated on another path, or by an earlier pass of a loop, \
                                 without MC_FREE)"
                            ),
                        );
                    }
                }
            }
            Ctl::Free { tensor } => {
                self.quiet(st, pc, 0, *tensor, "MC_FREE of")?;
                st.alloc[*tensor] = St::Free;
            }
            Ctl::Copy { src, dst, .. } => {
                self.quiet(st, pc, 0, *src, "MC_COPY from")?;
                self.quiet(st, pc, 1, *dst, "MC_COPY into")?;
            }
            Ctl::Launch { graph, stream, .. } => {
                let g = &self.c.graphs[*graph];
                for &t in &g.uses {
                    let name = &self.c.tensors[t].name;
                    let why = match st.alloc[t] {
                        St::Live => continue,
                        St::Free => "is not allocated here",
                        St::Maybe => "may not be allocated here",
                    };
                    return self.fail(
                        pc,
                        Some(0),
                        format!("graph {} uses tensor {name}, which {why}", g.name),
                    );
                }
                let streams = st.running.entry(*graph).or_default();
                if let Some(&other) = streams.iter().find(|&&s| s != *stream) {
                    return self.fail(
                        pc,
                        Some(0),
                        format!(
                            "graph {} may still run on stream {other}: launching it on stream \
                             {stream} could run it twice at once (TG_SYNC it first)",
                            g.name
                        ),
                    );
                }
                streams.insert(*stream);
            }
            Ctl::Sync { graph } => {
                st.running.remove(graph);
            }
            Ctl::Fence(_)
            | Ctl::Notify { .. }
            | Ctl::WaitNotify { .. }
            | Ctl::Else { .. }
            | Ctl::EndIf
            | Ctl::EndLoop { .. }
            | Ctl::EndWhile { .. } => {}
            Ctl::If { .. } | Ctl::Loop { .. } | Ctl::While { .. } | Ctl::Break { .. } => {}
        }
        Ok(())
    }

    /// Runs steps `from..to` from `st`: the state at `to` and the states at each `CF_BREAK`
    /// leaving an enclosing loop.
    fn walk(
        &self,
        from: usize,
        to: usize,
        mut st: State,
    ) -> Result<(State, Vec<State>), CheckError> {
        let mut breaks = Vec::new();
        let mut pc = from;
        while pc < to {
            match &self.c.control[pc] {
                Ctl::If { cond, skip } => {
                    self.read(&st, pc, cond, "CF_IF reads")?;
                    let (then_end, els, next) = match &self.c.control[skip - 1] {
                        Ctl::Else { end } if *skip - 1 > pc => {
                            (*skip - 1, Some((*skip, *end)), *end + 1)
                        }
                        _ => (*skip, None, *skip + 1),
                    };
                    let (s1, b1) = self.walk(pc + 1, then_end, st.clone())?;
                    let (s2, b2) = match els {
                        Some((a, z)) => self.walk(a, z, st.clone())?,
                        None => (st.clone(), Vec::new()),
                    };
                    st = s1.join(&s2);
                    breaks.extend(b1);
                    breaks.extend(b2);
                    pc = next;
                }
                Ctl::Loop { count, end, .. } => {
                    self.read(&st, pc, count, "CF_LOOP reads")?;
                    st = self.fixpoint(pc + 1, *end, st, None)?;
                    pc = end + 1;
                }
                Ctl::While { cond, end } => {
                    st = self.fixpoint(pc + 1, *end, st, Some((pc, *cond)))?;
                    pc = end + 1;
                }
                Ctl::Break { cond, .. } => {
                    self.read(&st, pc, cond, "CF_BREAK reads")?;
                    breaks.push(st.clone());
                    pc += 1;
                }
                _ => {
                    self.step(&mut st, pc)?;
                    pc += 1;
                }
            }
        }
        Ok((st, breaks))
    }

    /// The state after a loop whose body is `from..to`, run zero or more times from `st`;
    /// `test` is a `CF_WHILE`'s condition, read before every pass.
    fn fixpoint(
        &self,
        from: usize,
        to: usize,
        st: State,
        test: Option<(usize, Scalar)>,
    ) -> Result<State, CheckError> {
        let mut entry = st;
        loop {
            if let Some((pc, cond)) = &test {
                self.read(&entry, *pc, cond, "CF_WHILE reads")?;
            }
            let (out, breaks) = self.walk(from, to, entry.clone())?;
            let next = entry.join(&out);
            if next == entry {
                return Ok(breaks.iter().fold(next, |a, b| a.join(b)));
            }
            entry = next;
        }
    }
}

/// Checks the control code of `c` (see the module docs).
pub fn check(_p: &Program, c: &Checked) -> Result<(), CheckError> {
    let f = Flow { c };
    let st = State {
        alloc: vec![St::Free; c.tensors.len()],
        running: BTreeMap::new(),
    };
    f.walk(0, c.control.len(), st)?;
    Ok(())
}
