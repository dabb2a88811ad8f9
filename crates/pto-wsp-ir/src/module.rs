//! The module: every declaration a workload program is made of.
//!
//! A [`Module`] is what a front end produces (text parser or [`crate::builder`]) and what the
//! validator, the expander and every back end read. It refers to things by name; the validator
//! checks that every name resolves. Declarations keep the order they were written in within each
//! kind; the printer writes kinds in a fixed order (symbols, slots, tensors, axes, kernels,
//! workloads, pipelines, schedule, spaces, tier tables, plans, spatial maps), which is the
//! canonical form.

use crate::csp::Pipeline;
use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::schedule::Schedule;
use crate::types::{Access, DType, ExecPool, ParamType, ScalarType};
use crate::workload::Stmt;

/// A whole program: declarations, workloads, CSP pipelines and at most one schedule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Module {
    /// Runtime symbols (`symbol seq: i64;`), bound when the program runs.
    pub symbols: Vec<SymbolDecl>,
    /// Slots (`slot kv_len: i64;`): scalar variables set while tasks are generated.
    pub slots: Vec<SlotDecl>,
    /// Tensors (`tensor Q: f16[seq, 4096];`).
    pub tensors: Vec<TensorDecl>,
    /// Iteration axes (`axis B = dense(4);`).
    pub axes: Vec<AxisDecl>,
    /// Kernel declarations.
    pub kernels: Vec<KernelDecl>,
    /// Workloads (task-generating programs).
    pub workloads: Vec<Workload>,
    /// CSP pipelines.
    pub pipelines: Vec<Pipeline>,
    /// The schedule; it also names the entry workload or pipeline.
    pub schedule: Option<Schedule>,
    /// Plan-Descriptor-Execute iteration spaces (`crate::plan`).
    pub spaces: Vec<crate::plan::SpaceDecl>,
    /// Tier tables (tiers as values).
    pub tier_tables: Vec<crate::plan::TierTableDecl>,
    /// Plans: descriptor generators over a space, run in declaration order.
    pub plans: Vec<crate::plan::PlanDecl>,
    /// Spatial maps (`crate::spatial`): where an entry point runs on a spatial array, and how
    /// its tensors are laid out there (read by the AIE back end only).
    pub spatial_maps: Vec<crate::spatial::SpatialMap>,
}

/// `symbol NAME: TYPE;` — a scalar whose value is bound at run time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SymbolDecl {
    /// The symbol's name.
    pub name: Ident,
    /// Its type.
    pub ty: ScalarType,
}

/// `slot NAME: TYPE;` — a scalar variable of the generating program, initially zero (or
/// `false`) unless bound, changed by `set` and `load` statements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SlotDecl {
    /// The slot's name.
    pub name: Ident,
    /// Its type.
    pub ty: ScalarType,
}

/// `tensor NAME: DTYPE[d0, d1, ...];` — a named buffer. Dimensions are expressions over symbols
/// (a literal for a static dimension).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorDecl {
    /// The tensor's name.
    pub name: Ident,
    /// Element type.
    pub dtype: DType,
    /// Extent of each dimension, outermost first.
    pub shape: Vec<Expr>,
}

/// `axis NAME = KIND;` — an iteration space that loops range over.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AxisDecl {
    /// The axis's name.
    pub name: Ident,
    /// What it ranges over.
    pub kind: AxisKind,
}

/// The kinds of axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AxisKind {
    /// `dense(N)`: `0..N` with `N` a constant expression. One loop variable.
    Dense(Expr),
    /// `dense_dyn(E)`: `0..E` with `E` evaluated when the loop starts (symbols and slots).
    /// One loop variable.
    DenseDyn(Expr),
    /// `ragged(OUTER, LENGTHS)`: rows `0..OUTER`, row `r` has `LENGTHS[r]` elements, read from
    /// the 1-D integer tensor `LENGTHS` bound at run time. Two loop variables (row, position).
    ///
    /// `ragged(OUTER, LENGTHS, EXPR)`: row `r` has `EXPR` elements, where the name `LENGTHS` in
    /// `EXPR` stands for the element `LENGTHS[r]` (e.g. `(kv_lens + 511) / 512` chunks per row).
    Ragged {
        /// Number of rows.
        outer: Expr,
        /// 1-D integer tensor of row lengths (or of the values `per_row` maps to lengths).
        lengths: Ident,
        /// The length of a row as an integer expression of `lengths[r]` (named `lengths`),
        /// symbols and slots; `None`: the element itself.
        per_row: Option<Expr>,
    },
    /// `sparse(OUTER, INDPTR, INDICES)`: CSR structure; row `r` holds the entries
    /// `INDICES[INDPTR[r] .. INDPTR[r+1]]`. Iterated by `select`, which binds (row, index value).
    Sparse {
        /// Number of rows.
        outer: Expr,
        /// 1-D integer tensor of `OUTER + 1` row offsets.
        indptr: Ident,
        /// 1-D integer tensor of column indices.
        indices: Ident,
    },
}

impl AxisKind {
    /// The keyword that introduces this kind in the text format.
    pub fn keyword(&self) -> &'static str {
        match self {
            AxisKind::Dense(_) => "dense",
            AxisKind::DenseDyn(_) => "dense_dyn",
            AxisKind::Ragged { .. } => "ragged",
            AxisKind::Sparse { .. } => "sparse",
        }
    }

    /// How many loop variables a loop over this axis binds (1 for dense, 2 otherwise).
    pub fn arity(&self) -> usize {
        match self {
            AxisKind::Dense(_) | AxisKind::DenseDyn(_) => 1,
            AxisKind::Ragged { .. } | AxisKind::Sparse { .. } => 2,
        }
    }
}

/// `kernel NAME(PARAMS) @POOL [tiers { ... }];`
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelDecl {
    /// The kernel's name (the key in the kernel registry).
    pub name: Ident,
    /// Parameters in call order: tiles and scalars.
    pub params: Vec<KernelParam>,
    /// Executor pool (default [`ExecPool::Any`]).
    pub pool: ExecPool,
    /// Optional tiers: variants chosen by a runtime value (the PDE specification's kernel tiers).
    pub tiers: Option<Tiers>,
    /// The kernel's body in tile instructions (`crate::kernel_body`), or `None` for a kernel
    /// the runtime supplies (a built-in reached through an alias, a registered Rust kernel).
    pub body: Option<Vec<crate::kernel_body::KStmt>>,
}

impl KernelDecl {
    /// The types of the scalar parameters, in call order (the values a task passes).
    pub fn scalar_types(&self) -> Vec<ParamType> {
        self.params
            .iter()
            .filter_map(|p| match p.kind {
                ParamKind::Scalar(t) => Some(t),
                ParamKind::Tile { .. } => None,
            })
            .collect()
    }
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelParam {
    /// Parameter name (in scope in tier conditions when scalar).
    pub name: Ident,
    /// Tile or scalar.
    pub kind: ParamKind,
}

/// Tile or scalar parameter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `in|out|inout NAME: DTYPE[d, ...]`: a region of a tensor. The tile shape constrains the
    /// *last* `shape.len()` sizes of the region; `None` (written `?`) accepts any size.
    Tile {
        /// How the kernel uses the region.
        access: Access,
        /// Element type the region's tensor must have.
        dtype: DType,
        /// Tile dimensions (innermost last); `None` = any.
        shape: Vec<Option<u64>>,
    },
    /// `NAME: TYPE`: a scalar passed by value (`f32` / `f64` take float literals).
    Scalar(ParamType),
}

/// `tiers { COND => VARIANT, ..., else => VARIANT }`: the first case whose condition holds picks
/// the kernel that runs; conditions may name the kernel's scalar parameters and runtime symbols.
/// Every variant is a declared kernel with the same parameter list and no tiers of its own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tiers {
    /// Conditions and their variants, tried in order.
    pub cases: Vec<(Expr, Ident)>,
    /// The variant used when no condition holds.
    pub default: Ident,
}

/// `workload NAME(PARAMS) { BODY }` — a program that generates tasks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Workload {
    /// The workload's name.
    pub name: Ident,
    /// Scalar parameters (bound by `call`).
    pub params: Vec<(Ident, ScalarType)>,
    /// Statements; their tasks are unordered with respect to each other unless data
    /// dependencies or `for_each` / `sequential` order them.
    pub body: Vec<Stmt>,
    /// Where the declaration was written.
    pub loc: Loc,
}

impl Module {
    /// The symbol declared as `name`.
    pub fn symbol(&self, name: &str) -> Option<&SymbolDecl> {
        self.symbols.iter().find(|d| d.name.name == name)
    }

    /// The slot declared as `name`.
    pub fn slot(&self, name: &str) -> Option<&SlotDecl> {
        self.slots.iter().find(|d| d.name.name == name)
    }

    /// The tensor declared as `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorDecl> {
        self.tensors.iter().find(|d| d.name.name == name)
    }

    /// The axis declared as `name`.
    pub fn axis(&self, name: &str) -> Option<&AxisDecl> {
        self.axes.iter().find(|d| d.name.name == name)
    }

    /// The kernel declared as `name`.
    pub fn kernel(&self, name: &str) -> Option<&KernelDecl> {
        self.kernels.iter().find(|d| d.name.name == name)
    }

    /// The workload declared as `name`.
    pub fn workload(&self, name: &str) -> Option<&Workload> {
        self.workloads.iter().find(|d| d.name.name == name)
    }

    /// The pipeline declared as `name`.
    pub fn pipeline(&self, name: &str) -> Option<&Pipeline> {
        self.pipelines.iter().find(|d| d.name.name == name)
    }

    /// The space declared as `name`.
    pub fn space(&self, name: &str) -> Option<&crate::plan::SpaceDecl> {
        self.spaces.iter().find(|d| d.name.name == name)
    }

    /// The tier table declared as `name`.
    pub fn tier_table(&self, name: &str) -> Option<&crate::plan::TierTableDecl> {
        self.tier_tables.iter().find(|d| d.name.name == name)
    }

    /// The plan declared as `name`.
    pub fn plan(&self, name: &str) -> Option<&crate::plan::PlanDecl> {
        self.plans.iter().find(|d| d.name.name == name)
    }

    /// The spatial map of entry point `entry`, if one was declared.
    pub fn spatial_map_for(&self, entry: &str) -> Option<&crate::spatial::SpatialMap> {
        self.spatial_maps.iter().find(|d| d.entry.name == entry)
    }

    /// The name of the entry point: the workload or pipeline the schedule names; without a
    /// schedule, the workload called `main`, else the only workload or pipeline.
    pub fn entry_name(&self) -> Option<&str> {
        if let Some(s) = &self.schedule {
            return Some(&s.target.name);
        }
        if let Some(w) = self.workload("main") {
            return Some(&w.name.name);
        }
        match (self.workloads.as_slice(), self.pipelines.as_slice()) {
            ([w], []) => Some(&w.name.name),
            ([], [p]) => Some(&p.name.name),
            _ => None,
        }
    }
}
