//! CSP pipelines: processes connected by bounded channels.
//!
//! A [`Pipeline`] declares channels and processes. Each process is a sequential program (the same
//! statements as a workload, plus `send` and `consume`). A channel has exactly one producing
//! process; it is closed when that process ends, which ends every `consume` loop on it. Because
//! processes only block on their own channels, a pipeline is a Kahn network: the tokens every
//! process sees do not depend on timing, which is what lets the sequential reference expander
//! stand as the oracle for it.

use crate::loc::{Ident, Loc};
use crate::workload::Stmt;

/// `pipeline NAME { channel ...; process ... }`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pipeline {
    /// The pipeline's name.
    pub name: Ident,
    /// Its channels.
    pub channels: Vec<Channel>,
    /// Its processes.
    pub processes: Vec<Process>,
    /// Where the declaration was written.
    pub loc: Loc,
}

/// `channel NAME[DEPTH];` — a bounded FIFO of integer tokens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Channel {
    /// The channel's name.
    pub name: Ident,
    /// Capacity in tokens (at least 1).
    pub depth: u64,
}

/// `process NAME(consumes a, b; produces c) { BODY }`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Process {
    /// The process's name.
    pub name: Ident,
    /// Channels it reads with `consume`.
    pub consumes: Vec<Ident>,
    /// Channels it writes with `send` (it is their only producer).
    pub produces: Vec<Ident>,
    /// Its program.
    pub body: Vec<Stmt>,
    /// Where the declaration was written.
    pub loc: Loc,
}
