//! Workload statements: the task-generating program.
//!
//! A workload body is a list of [`Stmt`]s executed in order by the generator (so a `set` before an
//! `if` is seen by the `if`), while the *tasks* it generates are ordered only by data dependencies
//! and by the structural orders stated here: `for_each` orders iteration `i + 1` after
//! iteration `i`, and `sequential` orders each child after the previous one.

use crate::expr::Expr;
use crate::loc::{Ident, Loc};

/// A statement with its source location.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stmt {
    /// What the statement does.
    pub kind: StmtKind,
    /// Where it was written.
    pub loc: Loc,
}

impl Stmt {
    /// A statement with no source location.
    pub fn new(kind: StmtKind) -> Stmt {
        Stmt {
            kind,
            loc: Loc::NONE,
        }
    }
}

/// Whether the iterations of a loop are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoopOrder {
    /// `parallel_for`: iterations are independent.
    Parallel,
    /// `for_each`: every task of iteration `i + 1` runs after every task of iteration `i`.
    Sequential,
}

impl LoopOrder {
    /// The keyword that spells the loop.
    pub fn keyword(self) -> &'static str {
        match self {
            LoopOrder::Parallel => "parallel_for",
            LoopOrder::Sequential => "for_each",
        }
    }
}

/// The statements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StmtKind {
    /// `parallel_for v in AXIS { }` / `for_each v in AXIS { }`; over a ragged axis two variables
    /// are bound: `parallel_for row, pos in R { }`.
    Loop {
        /// Parallel or sequential.
        order: LoopOrder,
        /// Bound loop variables (one for dense axes, two for ragged).
        vars: Vec<Ident>,
        /// The axis ranged over.
        axis: Ident,
        /// Loop body.
        body: Vec<Stmt>,
    },
    /// `select row, idx in SPARSE { }`: one iteration per stored entry of a sparse axis, binding
    /// the row and the entry's index value. Iterations are independent.
    Select {
        /// Bound variables: row and index value.
        vars: Vec<Ident>,
        /// The sparse axis.
        axis: Ident,
        /// Body.
        body: Vec<Stmt>,
    },
    /// `if COND { } else { }`.
    Cond {
        /// A `bool` expression.
        cond: Expr,
        /// Taken when `cond` holds.
        then_body: Vec<Stmt>,
        /// Taken otherwise (may be empty).
        else_body: Vec<Stmt>,
    },
    /// `while COND max N { }`: runs the body while `cond` holds, at most `max` times (`max` is
    /// evaluated once when the loop starts). Iterations are ordered like `for_each`: every task
    /// of iteration `i + 1` runs after every task of iteration `i`. The condition may read slots
    /// that `load` filled from tensors earlier tasks computed (`docs/SEMANTICS.md`).
    While {
        /// A `bool` expression, evaluated before every iteration.
        cond: Expr,
        /// The iteration bound (an integer expression); reaching it ends the loop and is
        /// counted in the run's statistics, it is not an error.
        max: Expr,
        /// Loop body.
        body: Vec<Stmt>,
    },
    /// `break if COND;`: leaves the innermost enclosing `while` when `cond` holds.
    Break {
        /// A `bool` expression.
        cond: Expr,
    },
    /// `combine { }`: children are independent (the same as a plain body, made explicit).
    Combine(Vec<Stmt>),
    /// `sequential { }`: every task of child `i + 1` runs after every task of child `i`.
    Sequential(Vec<Stmt>),
    /// `task KERNEL(ARGS);`: one task.
    Task(TaskStmt),
    /// `set SLOT = EXPR;`.
    SlotSet {
        /// The slot written.
        slot: Ident,
        /// Its new value.
        value: Expr,
    },
    /// `load SLOT = TENSOR[i, j, ...];`: one element of an integer tensor into a slot.
    SlotLoad {
        /// The slot written.
        slot: Ident,
        /// The integer tensor read.
        tensor: Ident,
        /// Element index, one expression per dimension.
        index: Vec<Expr>,
    },
    /// `call WORKLOAD(ARGS);`: generate the tasks of another workload here.
    Call {
        /// The called workload.
        workload: Ident,
        /// Its arguments.
        args: Vec<Expr>,
    },
    /// `send CHANNEL(EXPR);` (only in a CSP process): put a token on a channel.
    Send {
        /// The channel.
        channel: Ident,
        /// The token's value (an integer).
        value: Expr,
    },
    /// `consume CHANNEL as v { }` (only in a CSP process): run the body once per token received,
    /// binding its value, until the channel is closed (its producer has ended).
    Consume {
        /// The channel.
        channel: Ident,
        /// Variable bound to each token.
        var: Ident,
        /// Body.
        body: Vec<Stmt>,
    },
}

/// `task KERNEL(ARG, ...)`: arguments match the kernel's parameters in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskStmt {
    /// The kernel called.
    pub kernel: Ident,
    /// One argument per kernel parameter.
    pub args: Vec<Arg>,
}

/// A task argument.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    /// A region, for a tile parameter.
    Region(Region),
    /// An expression, for a scalar parameter.
    Scalar(Expr),
}

/// `TENSOR[d0, d1, ...]`: an N-d box of a tensor. Each dimension is `start` (size 1) or
/// `start +: size`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    /// The tensor.
    pub tensor: Ident,
    /// One entry per tensor dimension.
    pub dims: Vec<RegionDim>,
}

/// One dimension of a region.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RegionDim {
    /// First index.
    pub start: Expr,
    /// Number of indices; `None` means 1 (written as a bare index).
    pub size: Option<Expr>,
}

impl RegionDim {
    /// A single index.
    pub fn index(start: impl Into<Expr>) -> RegionDim {
        RegionDim {
            start: start.into(),
            size: None,
        }
    }

    /// `start +: size`.
    pub fn span(start: impl Into<Expr>, size: impl Into<Expr>) -> RegionDim {
        RegionDim {
            start: start.into(),
            size: Some(size.into()),
        }
    }
}
