//! The disassembler: a [`Program`] as text the assembler reads back to the same program.
//!
//! Why: a binary must be readable, and readable text is only trustworthy if it means exactly
//! the binary. Each operand is printed by its kind (the instruction table); trailing operands
//! equal to their defaults are left out; graph bodies and control-flow blocks are indented.
//!
//! Promise: `assemble(disassemble(p)) == p` for every checked program: a name is written
//! `NAME=ID` where the assembler's numbering (names in order of first use, skipping ids
//! written as numbers) would give it another id ([`pins`]).

use crate::isa::{Insn, Op};
use crate::operand::Ns;
use crate::program::{Names, Program};
use std::collections::{BTreeSet, HashMap, HashSet};

/// What printing an operand needs: the names, the graph being defined, the pinned ids.
pub struct PrintCx<'a> {
    names: &'a Names,
    /// The graph whose body is being printed (kernel names are per graph).
    graph: Option<u32>,
    /// The `TG_BEGIN` index of that body.
    scope: usize,
    pinned: &'a HashSet<((Ns, usize), u32)>,
}

impl PrintCx<'_> {
    /// An id of `ns`: its name (with `=ID` when pinned), else its number (`#N` where a bare
    /// number would read as an immediate).
    pub fn id(&self, ns: Ns, id: u32, immediate_context: bool) -> String {
        let name = match ns {
            Ns::Kernel => self.graph.and_then(|g| self.names.get(ns, g, id)),
            _ => self.names.get(ns, 0, id),
        };
        match name {
            Some(n) => {
                let key = (ns, if ns == Ns::Kernel { self.scope } else { 0 });
                if self.pinned.contains(&(key, id)) {
                    format!("{n}={id}")
                } else {
                    n.to_string()
                }
            }
            None if immediate_context => format!("#{id}"),
            None => id.to_string(),
        }
    }
}

/// Outside any graph.
const NO_GRAPH: usize = usize::MAX;

/// Walks the ids of `program` in text order with their scope keys and names.
fn walk_ids(program: &Program, mut f: impl FnMut((Ns, usize), u32, bool)) {
    let mut scope = NO_GRAPH;
    let mut graph: Option<u32> = None;
    for (i, insn) in program.insns.iter().enumerate() {
        if let Insn::TgBegin { graph: g } = insn {
            scope = i;
            graph = Some(g.0);
        }
        insn.visit_ids(&mut |_, ns, id| {
            let named = match ns {
                Ns::Kernel => graph.and_then(|g| program.names.get(ns, g, id)).is_some(),
                _ => program.names.get(ns, 0, id).is_some(),
            };
            let key = (ns, if ns == Ns::Kernel { scope } else { 0 });
            f(key, id, named);
        });
        if insn.op() == Op::TgEnd {
            scope = NO_GRAPH;
            graph = None;
        }
    }
}

/// The named ids the assembler would number otherwise, which the text must write `NAME=ID`.
pub fn pins(program: &Program) -> HashSet<((Ns, usize), u32)> {
    #[derive(Default)]
    struct Uses {
        order: Vec<u32>,
        seen: HashSet<u32>,
        literal: BTreeSet<u32>,
    }
    let mut spaces: HashMap<(Ns, usize), Uses> = HashMap::new();
    walk_ids(program, |key, id, named| {
        let u = spaces.entry(key).or_default();
        if !named {
            u.literal.insert(id);
        } else if u.seen.insert(id) {
            u.order.push(id);
        }
    });
    let mut pinned = HashSet::new();
    for (key, u) in spaces {
        let mut mine: BTreeSet<u32> = BTreeSet::new();
        // Restart after each new pin: a pin reserves its id for every name after it.
        'again: loop {
            let mut next = 0u32;
            for &id in u.order.iter().filter(|id| !mine.contains(id)) {
                while u.literal.contains(&next) || mine.contains(&next) {
                    next += 1;
                }
                if next != id {
                    mine.insert(id);
                    continue 'again;
                }
                next += 1;
            }
            break;
        }
        pinned.extend(mine.into_iter().map(|id| (key, id)));
    }
    pinned
}

/// Instruction `index` of `program` as the disassembler writes it (without indentation), for
/// messages about it.
pub fn render(program: &Program, index: usize) -> String {
    let text = disassemble(program);
    text.lines()
        .nth(index)
        .map(|l| l.trim().to_string())
        .unwrap_or_default()
}

/// The program as text, one instruction per line (see the module docs).
pub fn disassemble(program: &Program) -> String {
    let pinned = pins(program);
    let mut cx = PrintCx {
        names: &program.names,
        graph: None,
        scope: NO_GRAPH,
        pinned: &pinned,
    };
    let mut out = String::new();
    let mut depth = 0usize;
    for (i, insn) in program.insns.iter().enumerate() {
        let op = insn.op();
        if let Insn::TgBegin { graph } = insn {
            cx.graph = Some(graph.0);
            cx.scope = i;
        }
        let opens = matches!(
            op,
            Op::TgBegin | Op::CfIf | Op::CfLoop | Op::CfWhile | Op::CfElse
        );
        let closes = matches!(
            op,
            Op::TgEnd | Op::CfEndIf | Op::CfEndLoop | Op::CfEndWhile | Op::CfElse
        );
        if closes {
            depth = depth.saturating_sub(1);
        }
        for _ in 0..depth {
            out.push_str("    ");
        }
        out.push_str(op.mnemonic());
        let mut ops = insn.print_operands(&cx);
        while ops.last().is_some_and(|(_, is_default)| *is_default) {
            ops.pop();
        }
        if !ops.is_empty() {
            out.push('(');
            for (k, (text, _)) in ops.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                out.push_str(text);
            }
            out.push(')');
        }
        out.push('\n');
        if opens {
            depth += 1;
        }
        if op == Op::TgEnd {
            cx.graph = None;
            cx.scope = NO_GRAPH;
        }
    }
    out
}
