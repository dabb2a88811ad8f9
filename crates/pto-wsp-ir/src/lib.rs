//! `pto-wsp-ir`: the one IR every pto-wsp front end produces and every back end consumes.
//!
//! A [`Module`] declares runtime symbols, slots, tensors, axes and kernels, then *workloads* —
//! small programs that generate tasks — and CSP *pipelines*, and at most one [`Schedule`] saying
//! how the generated tasks run. Modules come from the text format ([`parse()`], printed back by
//! `Display`) or from the [`builder`]. [`validate()`] checks one and reports every mistake with
//! a source location or a path. [`expand()`] is the reference expander: a sequential, obviously
//! correct enumeration of the tasks a module generates under given [`Bindings`], the oracle every
//! back end is checked against.
//!
//! This crate knows nothing of threads, files or targets.

#![forbid(unsafe_code)]

pub mod builder;
mod chain;
pub mod csp;
pub mod device;
pub mod eval;
pub mod expand;
pub mod expr;
pub mod kernel_body;
pub mod loc;
pub mod module;
pub mod parse;
pub mod plan;
pub mod print;
pub mod resolve;
pub mod schedule;
pub mod soak;
pub mod source;
pub mod spatial;
pub mod task_io;
pub mod tile_isa;
pub mod types;
pub mod validate;
pub mod value;
pub mod workload;

pub use csp::{Channel, Pipeline, Process};
pub use expand::{
    ChannelPort, DataRead, ExpandError, ExpandOptions, ExpandSink, ExpandSummary, ExpandedRegion,
    ExpandedTask, Expansion, MAX_KEPT_TASKS, OrderEdge, OrderTrack, ReadRefused, expand,
    expand_each, expand_process, expand_with,
};
pub use expr::{BinOp, Expr, FloatLit, OpClass, UnOp};
pub use kernel_body::{FloatArg, InstArg, KStmt, KStmtKind, TileDecl, TileKind};
pub use loc::{Ident, Loc};
pub use module::{
    AxisDecl, AxisKind, KernelDecl, KernelParam, Module, ParamKind, SlotDecl, SymbolDecl,
    TensorDecl, Tiers, Workload,
};
pub use parse::{ParseError, parse, parse_expr};
pub use resolve::{BindingError, ResolveError, ResolveOptions, Resolved, Unsupported, resolve};
pub use schedule::{
    DepsMode, Dispatch, GateScope, Levels, PoolsPolicy, ReadyPolicy, Schedule, ScheduleConfig,
    ScheduleItem, ScheduleItemKind, StartPolicy, TaskGraphItem, Timing, TracePolicy, WindowMode,
};
pub use source::{Diagnostic, SourceFile};
pub use spatial::{GridAxis, Layout, LayoutDim, SpatialMap};
pub use tile_isa::{CostRule, CppForm, Elems, Operand, ShapeRule, TileOp};
pub use types::{Access, DType, ExecPool, ParamType, ScalarType};
pub use validate::depth::{MAX_TOTAL_DEPTH, total_depth};
pub use validate::{ValidationError, validate, validate_for_run, validate_kernel};
pub use value::{BindError, Bindings, Value};
pub use workload::{Arg, LoopOrder, Region, RegionDim, Stmt, StmtKind, TaskStmt};
