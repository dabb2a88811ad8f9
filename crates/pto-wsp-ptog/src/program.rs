//! A task-graph program as the assembler, the decoder and a lowering build it: the instructions
//! in order and the symbolic names of ids.
//!
//! Why: one value that text and binary both map to exactly, so that `decode(encode(p)) == p`
//! and `assemble(disassemble(p)) == p` are meaningful, and that the checks
//! ([`crate::check`]) read once for every front end.
//!
//! Promise: a [`Program`] is plain data (no offsets, no lines); equality is structural. Names
//! are metadata for text: an id keeps its meaning whether it is named or not.

use crate::isa::Insn;
use crate::operand::Ns;
use std::collections::BTreeMap;

/// The instructions of a program and the names of its ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    /// Every instruction, in program order.
    pub insns: Vec<Insn>,
    /// Names of ids.
    pub names: Names,
}

/// The name of an id: kernels are named per graph (`scope` is the graph's id), every other
/// namespace program-wide (`scope` 0).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    map: BTreeMap<(Ns, u32, u32), String>,
}

impl Names {
    /// No names.
    pub fn new() -> Names {
        Names::default()
    }

    /// The name of `id` of namespace `ns` in `scope`.
    pub fn get(&self, ns: Ns, scope: u32, id: u32) -> Option<&str> {
        self.map.get(&(ns, scope, id)).map(String::as_str)
    }

    /// Names `id` of namespace `ns` in `scope` (replacing a name it had).
    pub fn insert(&mut self, ns: Ns, scope: u32, id: u32, name: impl Into<String>) {
        self.map.insert((ns, scope, id), name.into());
    }

    /// Every name, ordered by namespace, scope and id.
    pub fn iter(&self) -> impl Iterator<Item = ((Ns, u32, u32), &str)> {
        self.map.iter().map(|(k, v)| (*k, v.as_str()))
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is named.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The id named `name` in namespace `ns` and `scope`, if any.
    pub fn lookup(&self, ns: Ns, scope: u32, name: &str) -> Option<u32> {
        self.map
            .range((ns, scope, 0)..=(ns, scope, u32::MAX))
            .find(|(_, v)| v.as_str() == name)
            .map(|(k, _)| k.2)
    }
}

impl Program {
    /// An empty program.
    pub fn new() -> Program {
        Program::default()
    }

    /// The name of tensor `id`, or its number (as the text writes it).
    pub fn tensor_name(&self, id: u32) -> String {
        self.name_of(Ns::Tensor, id)
    }

    /// The name of graph `id`, or its number.
    pub fn graph_name(&self, id: u32) -> String {
        self.name_of(Ns::Graph, id)
    }

    /// The name of kernel `id` of graph `graph`, or its number.
    pub fn kernel_name(&self, graph: u32, id: u32) -> String {
        self.names
            .get(Ns::Kernel, graph, id)
            .map_or_else(|| id.to_string(), str::to_string)
    }

    /// The name of an id of `ns` (scope 0), or its number.
    pub fn name_of(&self, ns: Ns, id: u32) -> String {
        self.names
            .get(ns, 0, id)
            .map_or_else(|| id.to_string(), str::to_string)
    }
}
