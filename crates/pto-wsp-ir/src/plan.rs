//! Plan-Descriptor-Execute declarations (the PDE specification): iteration spaces, tier tables and
//! plans.
//!
//! Why: the second programming model beside workload–schedule needs the same front ends (text,
//! builder, Python through `Module.from_text`) and shares the module's kernels, tensors and
//! symbols. This module is its IR only — what was written, names unresolved; the validator checks
//! it (`validate/plan.rs`), the printer spells it (`print.rs`), and the facade lowers a plan onto
//! `pto-wsp-pde` to run it (`pto_wsp::plan`), so the runtime crate stays free of the IR.
//!
//! Promise: a [`PlanDecl`] names a [`SpaceDecl`] and a [`TierTableDecl`]; its `generate` block is a
//! list of [`GenStmt`]s that loops over the space's axes and emits descriptors; each tier of the
//! table runs the kernel call bound to it by the plan, whose arguments may name the descriptor's
//! fields. Locations are metadata, as everywhere in the IR.

use crate::expr::Expr;
use crate::loc::{Ident, Loc};
use crate::workload::TaskStmt;

/// `space NAME { axis ...; tile(...); constraint ...; }` — a named iteration space.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpaceDecl {
    /// The space's name.
    pub name: Ident,
    /// Its axes, in declaration order (= descriptor index order; at most 3).
    pub axes: Vec<SpaceAxis>,
    /// `tile(axis, ...)` items, in order.
    pub tiles: Vec<TileDecl>,
    /// `constraint EXPR;` items: conditions over symbols checked when a plan binds the space.
    pub constraints: Vec<(Expr, Loc)>,
}

/// `axis NAME in START .. END;`
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpaceAxis {
    /// The axis's name (also the descriptor field holding its index).
    pub name: Ident,
    /// First index (a literal).
    pub start: u64,
    /// The end (exclusive).
    pub end: SpaceEnd,
}

/// The end of a space axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SpaceEnd {
    /// A literal.
    Const(u64),
    /// A module symbol, read when the plan runs.
    Symbol(Ident),
    /// `dynamic`: given by the plan's `bind end(axis) = EXPR;` when it runs.
    Dynamic,
}

/// `tile(AXIS, n)`, `tile(AXIS, n, pad_last)` or `tile(AXIS, auto)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TileDecl {
    /// The axis tiled.
    pub axis: Ident,
    /// How.
    pub kind: TileKind,
}

/// How a space axis is tiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileKind {
    /// `tile(axis, n)`: the last tile may be shorter.
    Size(u64),
    /// `tile(axis, n, pad_last)`: the last tile keeps the full size.
    PadLast(u64),
    /// `tile(axis, auto)`: the size is given by the plan's `bind tile(axis) = EXPR;`.
    Auto,
}

/// `tiers NAME { tier A <= 2048 workspace 64; tier B default; }` — tiers as values.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TierTableDecl {
    /// The table's name.
    pub name: Ident,
    /// Its tiers; the index of a tier is its position.
    pub tiers: Vec<TierDecl>,
}

/// One tier of a table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TierDecl {
    /// The tier's name.
    pub name: Ident,
    /// `<= N`: the largest value it takes; `None` (`default`) for the last tier.
    pub max: Option<u64>,
    /// Workspace elements one `alloc` of this tier takes (`workspace N`; 0 when not written).
    pub workspace: u64,
}

/// `plan NAME over SPACE with TIERS { ... }`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanDecl {
    /// The plan's name.
    pub name: Ident,
    /// The space it generates over.
    pub space: Ident,
    /// The tier table its descriptors name.
    pub tiers: Ident,
    /// `fields a, b;`: the user fields of its descriptors (at most 2).
    pub fields: Vec<Ident>,
    /// `workspace TENSOR;`: the tensor `alloc` hands out offsets in (its element count is the
    /// capacity); `None`: no workspace.
    pub workspace: Option<Ident>,
    /// `bind end(axis) = EXPR;` and `bind tile(axis) = EXPR;`: values fixed when the plan runs.
    pub binds: Vec<PlanBind>,
    /// `kernel TIER => CALL;`: the call each tier's descriptors run.
    pub kernels: Vec<TierKernel>,
    /// `prefetch(AXIS, DEPTH) => CALL;`: the PDE specification's prefetch, the call run for value
    /// `v + DEPTH` of the axis before the first descriptor of `v` (`docs/PDE.md`).
    pub prefetch: Option<PlanPrefetch>,
    /// `order(AXIS, ...);` items (the PDE specification's `PTO_ORDER`), at most one per axis: the
    /// order the generator's `for` loops over an axis emit in (`docs/PDE.md`).
    pub orders: Vec<PlanOrder>,
    /// `affinity(AXIS, ...);` (the PDE specification's `PTO_AFFINITY`), at most once: which
    /// dispatch threads run a descriptor, by its value of the axis.
    pub affinity: Option<PlanAffinity>,
    /// `generate { ... }`: the descriptor generator.
    pub body: Vec<GenStmt>,
    /// Where the declaration was written.
    pub loc: Loc,
}

/// `bind end(AXIS) = EXPR;` or `bind tile(AXIS) = EXPR;` (expressions over symbols).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanBind {
    /// Whether the end or the tile size is bound.
    pub what: BindWhat,
    /// The axis.
    pub axis: Ident,
    /// The value.
    pub value: Expr,
}

/// What a [`PlanBind`] fixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BindWhat {
    /// A `dynamic` end.
    End,
    /// An `auto` tile size.
    Tile,
}

impl BindWhat {
    /// Its keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            BindWhat::End => "end",
            BindWhat::Tile => "tile",
        }
    }
}

/// `kernel TIER => KERNEL(ARGS);` — the call a tier's descriptors run. Region bounds and scalar
/// arguments are expressions over symbols and the descriptor's fields (`tier`, the axis names,
/// `start`, `end`, `workspace`, the user fields).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TierKernel {
    /// The tier.
    pub tier: Ident,
    /// The call.
    pub call: TaskStmt,
    /// Where it was written.
    pub loc: Loc,
}

/// `prefetch(AXIS, DEPTH) => KERNEL(ARGS);` — its call sees the descriptor fields of a prefetch
/// descriptor: the axis holds the value to fetch, every other field is 0.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanPrefetch {
    /// The axis.
    pub axis: Ident,
    /// How many values ahead.
    pub depth: u64,
    /// The call that fetches.
    pub call: TaskStmt,
    /// Where it was written.
    pub loc: Loc,
}

/// `order(AXIS, sequential | parallel | interleaved(N));`
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanOrder {
    /// The axis.
    pub axis: Ident,
    /// Its order.
    pub order: OrderKind,
    /// Where it was written.
    pub loc: Loc,
}

/// The order of one axis (`pto_wsp_pde::Order`, as written).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderKind {
    /// `sequential`: increasing values (the default).
    Sequential,
    /// `parallel`: no order promised; the values are emitted in increasing order.
    Parallel,
    /// `interleaved(N)`: the values in groups of `N`, the group's descriptors emitted in turn.
    Interleaved(u64),
}

/// `affinity(AXIS, spread | core_group(N) | core_local);`
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlanAffinity {
    /// The axis.
    pub axis: Ident,
    /// Where its values' descriptors run.
    pub affinity: AffinityKind,
    /// Where it was written.
    pub loc: Loc,
}

/// Where the descriptors of one value of an axis run (`pto_wsp_pde::Affinity`, as written).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AffinityKind {
    /// `spread`: any dispatch thread (the default).
    Spread,
    /// `core_group(N)`: the threads in groups of `N`; value `v` runs in group `v mod groups`.
    CoreGroup(u64),
    /// `core_local`: value `v` runs on dispatch thread `v mod threads`.
    CoreLocal,
}

impl std::fmt::Display for OrderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OrderKind::Sequential => f.write_str("sequential"),
            OrderKind::Parallel => f.write_str("parallel"),
            OrderKind::Interleaved(n) => write!(f, "interleaved({n})"),
        }
    }
}

impl std::fmt::Display for AffinityKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AffinityKind::Spread => f.write_str("spread"),
            AffinityKind::CoreGroup(n) => write!(f, "core_group({n})"),
            AffinityKind::CoreLocal => f.write_str("core_local"),
        }
    }
}

/// A generator statement and where it was written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GenStmt {
    /// What it does.
    pub kind: GenKind,
    /// Where.
    pub loc: Loc,
}

impl GenStmt {
    /// `kind` with no location (the builder's statements).
    pub fn new(kind: GenKind) -> GenStmt {
        GenStmt {
            kind,
            loc: Loc::NONE,
        }
    }
}

/// The generator statements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GenKind {
    /// `for i in AXIS { }` (tile index) or `for i, lo, hi in AXIS { }` (with the tile's bounds:
    /// clamped to the axis end, or padded under `pad_last`).
    For {
        /// One or three variables.
        vars: Vec<Ident>,
        /// A space axis.
        axis: Ident,
        /// The body.
        body: Vec<GenStmt>,
    },
    /// `if COND { } else { }`.
    If {
        /// The condition.
        cond: Expr,
        /// Run when it holds.
        then_body: Vec<GenStmt>,
        /// Run otherwise.
        else_body: Vec<GenStmt>,
    },
    /// `continue;`: the next iteration of the innermost `for`.
    Continue,
    /// `let NAME = EXPR;`.
    Let {
        /// The new variable.
        name: Ident,
        /// Its value.
        value: Expr,
    },
    /// `let NAME = select_tier(TIERS, EXPR);`: the index of the tier of the value.
    SelectTier {
        /// The new variable.
        name: Ident,
        /// The tier table (the plan's).
        tiers: Ident,
        /// The value.
        value: Expr,
    },
    /// `let NAME = alloc(TIER, INDEX, ...);`: the workspace offset of a slot of the tier's size
    /// for the work at those indices.
    Alloc {
        /// The new variable.
        name: Ident,
        /// The tier index.
        tier: Expr,
        /// The indices the slot is for (named in errors).
        indices: Vec<Expr>,
    },
    /// `load NAME = TENSOR[INDEX, ...];`: an element of an integer tensor's bound contents (host
    /// metadata; never device data).
    Load {
        /// The new variable.
        name: Ident,
        /// The tensor.
        tensor: Ident,
        /// The element's index.
        index: Vec<Expr>,
    },
    /// `emit(tier = EXPR, FIELD = EXPR, ...);`: one descriptor. `tier` is required; other fields
    /// not given are 0 (`workspace`: none).
    Emit {
        /// Field names and values, as written.
        fields: Vec<(Ident, FieldValue)>,
    },
}

/// The value of one field of an `emit`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FieldValue {
    /// An expression over symbols and generator variables.
    Expr(Expr),
    /// `select_tier(TIERS, EXPR)`: the index of the tier of the value (as the statement
    /// `let NAME = select_tier(...)` computes it), written in place.
    SelectTier {
        /// The tier table (the plan's).
        tiers: Ident,
        /// The value.
        value: Expr,
    },
}

impl From<Expr> for FieldValue {
    fn from(e: Expr) -> FieldValue {
        FieldValue::Expr(e)
    }
}

/// The fixed descriptor fields every plan has, besides its axes and user fields.
pub const FIXED_FIELDS: [&str; 4] = ["tier", "start", "end", "workspace"];

/// Most axes a space has (a descriptor's index count).
pub const MAX_SPACE_AXES: usize = 3;

/// Most user fields a plan has.
pub const MAX_PLAN_FIELDS: usize = 2;
