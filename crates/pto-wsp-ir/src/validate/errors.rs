//! The mistakes the validator reports.
//!
//! Why: a user needs to know *what* is wrong (the message names the thing), *where* (the [`Loc`]
//! of the offending name or statement, for modules parsed from text) and, for modules built
//! without text, *where in the module* (a path such as
//! `workload main > parallel_for t > task attn > argument 2`).
//! Promise: one variant per kind of mistake; every variant carries `loc` and `path`; the
//! [`Diagnostic`] implementation gives the location, a short label and the path as a note.

use crate::loc::Loc;
use crate::source::Diagnostic;
use crate::types::{DType, ScalarType};

/// `n noun` with the noun pluralised unless `n == 1` (`1 argument`, `3 arguments`).
pub(crate) fn count(n: &usize, noun: &str) -> String {
    if *n == 1 {
        format!("{n} {noun}")
    } else if let Some(stem) = noun.strip_suffix("ex") {
        format!("{n} {stem}ices")
    } else {
        format!("{n} {noun}s")
    }
}

macro_rules! validation_errors {
    ($(
        $(#[doc = $doc:literal])*
        #[error($($msg:tt)+)]
        #[label = $label:literal]
        $var:ident { $( $(#[doc = $fdoc:literal])* $field:ident : $ty:ty ),* $(,)? }
    )*) => {
        /// A mistake in a module. Every variant carries the `loc` of the offending name or
        /// statement ([`Loc::NONE`] for built modules) and the `path` to it in the module.
        #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
        pub enum ValidationError {
            $(
                $(#[doc = $doc])*
                #[error($($msg)+)]
                $var {
                    $( $(#[doc = $fdoc])* $field: $ty, )*
                    /// Where the offending name or statement was written.
                    loc: Loc,
                    /// Where the mistake is in the module
                    /// (`workload main > parallel_for t > task attn > argument 2`).
                    path: String,
                },
            )*
        }

        impl ValidationError {
            /// Where the offending name or statement was written.
            pub fn loc(&self) -> Loc {
                match self {
                    $( ValidationError::$var { loc, .. } => *loc, )*
                }
            }

            /// Where the mistake is in the module.
            pub fn path(&self) -> &str {
                match self {
                    $( ValidationError::$var { path, .. } => path, )*
                }
            }

            /// A short label for the offending place (shown under the caret).
            pub fn label(&self) -> &'static str {
                match self {
                    $( ValidationError::$var { .. } => $label, )*
                }
            }
        }
    };
}

validation_errors! {
    /// A top-level name (or a channel / process name within a pipeline) declared twice.
    #[error("{kind} `{name}` is already declared as {previous}")]
    #[label = "declared twice"]
    DuplicateDeclaration {
        /// What the second declaration declares (`tensor`).
        kind: &'static str,
        /// The name.
        name: String,
        /// What the first declaration declared, with its article (`a symbol`).
        previous: &'static str,
    }

    /// Two parameters of one kernel or workload with the same name.
    #[error("{owner} has two parameters named `{name}`")]
    #[label = "duplicate parameter"]
    DuplicateParameter {
        /// The kernel or workload (`kernel `attn``).
        owner: String,
        /// The parameter name.
        name: String,
    }

    /// An expression names something that is neither declared nor bound.
    #[error("unknown name `{name}`")]
    #[label = "not declared or bound here"]
    UnknownName {
        /// The name.
        name: String,
    }

    /// `set` / `load` writes a slot that is not declared.
    #[error("unknown slot `{name}`")]
    #[label = "no such slot"]
    UnknownSlot {
        /// The name.
        name: String,
    }

    /// A region, `load` or axis names an undeclared tensor.
    #[error("unknown tensor `{name}`")]
    #[label = "no such tensor"]
    UnknownTensor {
        /// The name.
        name: String,
    }

    /// A loop or `select` names an undeclared axis.
    #[error("unknown axis `{name}`")]
    #[label = "no such axis"]
    UnknownAxis {
        /// The name.
        name: String,
    }

    /// A task or tier names an undeclared kernel.
    #[error("unknown kernel `{name}`")]
    #[label = "no such kernel"]
    UnknownKernel {
        /// The name.
        name: String,
    }

    /// A `call` names an undeclared workload.
    #[error("unknown workload `{name}`")]
    #[label = "no such workload"]
    UnknownWorkload {
        /// The name.
        name: String,
    }

    /// `send`, `consume` or a process header names a channel the pipeline does not declare.
    #[error("unknown channel `{name}` in pipeline `{pipeline}`")]
    #[label = "no such channel"]
    UnknownChannel {
        /// The name.
        name: String,
        /// The pipeline searched.
        pipeline: String,
    }

    /// The schedule's target is not declared.
    #[error("schedule target `{name}` is not declared")]
    #[label = "no such workload or pipeline"]
    UnknownScheduleTarget {
        /// The name.
        name: String,
    }

    /// A name is declared, but as the wrong kind of thing for where it is used.
    #[error("`{name}` is {found}, not {expected}")]
    #[label = "wrong kind of name"]
    WrongKind {
        /// The name.
        name: String,
        /// What it is, with its article (`a tensor`).
        found: &'static str,
        /// What is needed here, with its article (`an axis`).
        expected: &'static str,
    }

    /// An expression names something its scope does not allow (a slot in a tensor dimension, a
    /// symbol in a `dense` extent, ...).
    #[error("{context} {rule}, but names {what} `{name}`")]
    #[label = "not allowed here"]
    NameNotAllowed {
        /// Where the expression stands (`dimension 0 of tensor `Q``).
        context: String,
        /// What the scope allows (`may name only symbols`).
        rule: &'static str,
        /// What the name is (`slot`).
        what: &'static str,
        /// The name.
        name: String,
    }

    /// A variable or parameter reuses a name already in scope.
    #[error("{what} `{name}` shadows {shadowed} of the same name")]
    #[label = "shadows another name"]
    Shadowing {
        /// What is being bound (`loop variable`).
        what: String,
        /// The name.
        name: String,
        /// What it shadows (`a symbol`, `an enclosing loop variable`).
        shadowed: String,
    }

    /// A task passes a different number of arguments than its kernel has parameters.
    #[error("kernel `{kernel}` takes {}, task passes {args}", count(.params, "argument"))]
    #[label = "wrong number of arguments"]
    TaskArity {
        /// The kernel.
        kernel: String,
        /// Its parameter count.
        params: usize,
        /// The argument count.
        args: usize,
    }

    /// A `call` passes a different number of arguments than the workload has parameters.
    #[error("workload `{workload}` takes {}, call passes {args}", count(.params, "argument"))]
    #[label = "wrong number of arguments"]
    CallArity {
        /// The workload.
        workload: String,
        /// Its parameter count.
        params: usize,
        /// The argument count.
        args: usize,
    }

    /// A loop or `select` binds the wrong number of variables for its axis.
    #[error("`{keyword}` over {kind} axis `{axis}` binds {}, found {found}", count(.expected, "variable"))]
    #[label = "wrong number of loop variables"]
    LoopVarCount {
        /// `parallel_for`, `for_each` or `select`.
        keyword: &'static str,
        /// The axis.
        axis: String,
        /// The axis kind keyword (`ragged`).
        kind: &'static str,
        /// How many variables the axis binds.
        expected: usize,
        /// How many are written.
        found: usize,
    }

    /// `parallel_for` / `for_each` over a sparse axis.
    #[error("`{keyword}` cannot range over sparse axis `{axis}`; use `select`")]
    #[label = "sparse axis"]
    LoopOverSparse {
        /// `parallel_for` or `for_each`.
        keyword: &'static str,
        /// The axis.
        axis: String,
    }

    /// `select` over an axis that is not sparse.
    #[error("`select` needs a sparse axis, `{axis}` is {kind}")]
    #[label = "not a sparse axis"]
    SelectNeedsSparse {
        /// The axis.
        axis: String,
        /// Its kind keyword (`dense`).
        kind: &'static str,
    }

    /// A region with a different number of dimensions than its tensor.
    #[error("region of `{tensor}` has {}, tensor `{tensor}` has {rank}", count(.dims, "dimension"))]
    #[label = "wrong number of dimensions"]
    RegionRank {
        /// The tensor.
        tensor: String,
        /// Dimensions written in the region.
        dims: usize,
        /// The tensor's rank.
        rank: usize,
    }

    /// A region passed to a scalar parameter.
    #[error("argument {index} of `{kernel}` is scalar parameter `{param}`, but a region is passed")]
    #[label = "region for a scalar parameter"]
    RegionForScalar {
        /// The kernel.
        kernel: String,
        /// 1-based argument position.
        index: usize,
        /// The parameter as declared (`n: i64`).
        param: String,
    }

    /// A mistake in a kernel body (operands, shapes, element types, names).
    #[error("kernel `{kernel}`: {message}")]
    #[label = "here"]
    KernelBody {
        /// The kernel.
        kernel: String,
        /// What is wrong, naming the instruction or declaration.
        message: String,
    }

    /// A region bound at a task is smaller than what the kernel's body loads from or stores
    /// to it there (a `?` dimension bound to too few rows or columns).
    #[error("kernel `{kernel}`: {message}")]
    #[label = "region too small for the kernel's body"]
    RegionTooSmall {
        /// The kernel.
        kernel: String,
        /// What is wrong, naming the parameter, the instruction and the tile.
        message: String,
    }

    /// A float literal anywhere but as the argument of a float kernel parameter.
    #[error("float literal `{text}` here: float literals are only arguments of `f32` / `f64` kernel parameters")]
    #[label = "float literal not allowed here"]
    FloatMisplaced {
        /// The literal as written.
        text: String,
    }

    /// A float kernel parameter given something other than a float literal.
    #[error("argument {index} of `{kernel}` (`{param}`) must be a float literal such as `1.0`, `1e-6` or `-0.5`")]
    #[label = "not a float literal"]
    FloatArg {
        /// The kernel.
        kernel: String,
        /// 1-based argument position.
        index: usize,
        /// The parameter as declared (`eps: f64`).
        param: String,
    }

    /// A float literal too large for an `f32` parameter.
    #[error("argument {index} of `{kernel}` (`{param}`): `{text}` is out of the range of f32")]
    #[label = "out of f32 range"]
    FloatRange {
        /// The kernel.
        kernel: String,
        /// 1-based argument position.
        index: usize,
        /// The parameter as declared.
        param: String,
        /// The literal.
        text: String,
    }

    /// An expression passed to a tile parameter.
    #[error("argument {index} of `{kernel}` is tile parameter `{param}`, but an expression is passed")]
    #[label = "expression for a tile parameter"]
    ExprForTile {
        /// The kernel.
        kernel: String,
        /// 1-based argument position.
        index: usize,
        /// The parameter as declared (`in q: f16[32, 128]`).
        param: String,
    }

    /// A region of a tensor whose element type differs from the tile parameter's.
    #[error("argument {index} of `{kernel}` (`{param}`) needs a tensor of element type {expected}, `{tensor}` is {found}")]
    #[label = "wrong element type"]
    DTypeMismatch {
        /// The kernel.
        kernel: String,
        /// 1-based argument position.
        index: usize,
        /// The parameter name.
        param: String,
        /// The parameter's element type.
        expected: DType,
        /// The tensor.
        tensor: String,
        /// The tensor's element type.
        found: DType,
    }

    /// A tile parameter with more dimensions than the region passed to it.
    #[error("tile parameter `{param}` of `{kernel}` has {}, region of `{tensor}` has {dims} (tiles match regions from the right, unit dimensions may be left out; this region fits a tile `{fits}`)", count(.tile, "dimension"))]
    #[label = "too few dimensions for the tile"]
    TileRank {
        /// The kernel.
        kernel: String,
        /// The parameter name.
        param: String,
        /// The tile's rank.
        tile: usize,
        /// The tensor.
        tensor: String,
        /// The region's rank.
        dims: usize,
        /// A tile shape the region fits (`f32[512, 128]`).
        fits: String,
    }

    /// A constant region size that differs from the kernel's declared tile size.
    #[error("region of `{tensor}` has size {size} in dimension {dim}, tile parameter `{param}` of `{kernel}` expects {expected} (tiles match regions from the right, unit dimensions may be left out; this region fits a tile `{fits}`)")]
    #[label = "size differs from the tile"]
    TileShapeMismatch {
        /// The tensor.
        tensor: String,
        /// 0-based tensor dimension.
        dim: usize,
        /// The region's size there.
        size: i64,
        /// The kernel.
        kernel: String,
        /// The parameter name.
        param: String,
        /// The tile's size.
        expected: u64,
        /// A tile shape the region fits (`f32[512, 128]`).
        fits: String,
    }

    /// A constant region that ends past a constant tensor dimension.
    #[error("region of `{tensor}` is outside its static shape in dimension {dim}: {start} +: {size} exceeds {extent}")]
    #[label = "out of bounds"]
    RegionOutOfBounds {
        /// The tensor.
        tensor: String,
        /// 0-based dimension.
        dim: usize,
        /// Constant start.
        start: i64,
        /// Constant size.
        size: i64,
        /// Constant tensor dimension.
        extent: i64,
    }

    /// A region with a negative constant start.
    #[error("region of `{tensor}` starts at {start} in dimension {dim}; starts must be at least 0")]
    #[label = "negative start"]
    NegativeRegionStart {
        /// The tensor.
        tensor: String,
        /// 0-based dimension.
        dim: usize,
        /// The start.
        start: i64,
    }

    /// A region with a constant size below 1.
    #[error("region of `{tensor}` has size {size} in dimension {dim}; sizes must be at least 1")]
    #[label = "empty or negative size"]
    BadRegionSize {
        /// The tensor.
        tensor: String,
        /// 0-based dimension.
        dim: usize,
        /// The size.
        size: i64,
    }

    /// An operator applied to an operand of the wrong type.
    #[error("operator `{op}` needs {expected} operands, found {found}")]
    #[label = "wrong operand type"]
    OperandType {
        /// The operator (`+`, `!`, `min`).
        op: &'static str,
        /// `integer` or `bool`.
        expected: &'static str,
        /// The operand's type.
        found: ScalarType,
    }

    /// A binary operator or `?:` with operands of two different types.
    #[error("operands of `{op}` have different types: {left} and {right}")]
    #[label = "mismatched types"]
    OperandMismatch {
        /// The operator (`+`, `==`, `?:`).
        op: &'static str,
        /// Left (or `then`) type.
        left: ScalarType,
        /// Right (or `else`) type.
        right: ScalarType,
    }

    /// An expression of the wrong type for where it stands.
    #[error("{context} must be {expected}, found {found}")]
    #[label = "wrong type"]
    ExprType {
        /// Where it stands (`the condition of `if``).
        context: String,
        /// The type needed (`bool`, `an integer (i64 or u64)`).
        expected: String,
        /// Its type.
        found: ScalarType,
    }

    /// A ragged / sparse axis whose array tensor is not a 1-D integer tensor.
    #[error("the {role} tensor of axis `{axis}` must be a 1-D integer tensor, `{tensor}` is {found}")]
    #[label = "not a 1-D integer tensor"]
    ArrayTensor {
        /// The axis.
        axis: String,
        /// `lengths`, `indptr` or `indices`.
        role: &'static str,
        /// The tensor.
        tensor: String,
        /// What it is (`f16 with 2 dimensions`).
        found: String,
    }

    /// A constant extent or tensor dimension that is negative.
    #[error("{what} is negative: {value}")]
    #[label = "negative"]
    NegativeExtent {
        /// What (`the extent of axis `H``).
        what: String,
        /// The value.
        value: i64,
    }

    /// `tiers { else => v }` with no conditional case.
    #[error("kernel `{kernel}` has tiers with no cases; it needs at least one `COND => VARIANT`")]
    #[label = "no tier cases"]
    EmptyTiers {
        /// The kernel.
        kernel: String,
    }

    /// A tier variant that has tiers of its own (or is the tiered kernel itself).
    #[error("tier variant `{variant}` of `{kernel}` has tiers of its own")]
    #[label = "nested tiers"]
    NestedTiers {
        /// The tiered kernel.
        kernel: String,
        /// The variant.
        variant: String,
    }

    /// A tier variant with a different number of parameters.
    #[error("tier variant `{variant}` takes {found} parameters, `{kernel}` takes {expected}")]
    #[label = "different parameter list"]
    TierParamCount {
        /// The tiered kernel.
        kernel: String,
        /// The variant.
        variant: String,
        /// The tiered kernel's parameter count.
        expected: usize,
        /// The variant's parameter count.
        found: usize,
    }

    /// A tier variant whose parameter differs from the tiered kernel's.
    #[error("parameter {index} of tier variant `{variant}` is `{found}`, `{kernel}` declares `{expected}`")]
    #[label = "different parameter"]
    TierParamMismatch {
        /// The tiered kernel.
        kernel: String,
        /// The variant.
        variant: String,
        /// 1-based parameter position.
        index: usize,
        /// The tiered kernel's parameter.
        expected: String,
        /// The variant's parameter.
        found: String,
    }

    /// A tier variant that writes a tile the tiered kernel declares `in` (the task's caller
    /// relies on the region being only read).
    #[error("argument {index} of `{kernel}` is `in`; tier variant `{variant}` declares it `{access}` and would write to it")]
    #[label = "writes an `in` parameter"]
    TierWritesInParam {
        /// The tiered kernel.
        kernel: String,
        /// The variant.
        variant: String,
        /// 1-based parameter position.
        index: usize,
        /// The variant's access (`out` or `inout`).
        access: &'static str,
    }

    /// `set` / `load` writing a name that is not a slot (a symbol, a loop variable, ...).
    #[error("`{stmt}` cannot write `{name}`: it is {what}, which is read-only; only slots can be written")]
    #[label = "read-only name"]
    WriteToReadOnly {
        /// `set` or `load`.
        stmt: &'static str,
        /// The name.
        name: String,
        /// What it is (`a symbol`).
        what: &'static str,
    }

    /// `break if` outside every `while` loop of its body.
    #[error("`break if` is not inside a `while` loop")]
    #[label = "no enclosing `while`"]
    BreakOutsideWhile {}

    /// `load` into a slot that is not of integer type.
    #[error("`load` target slot `{slot}` is {ty}; it must be an integer slot")]
    #[label = "not an integer slot"]
    LoadSlotNotInteger {
        /// The slot.
        slot: String,
        /// Its type.
        ty: ScalarType,
    }

    /// `load` from a tensor whose elements are not integers.
    #[error("`load` reads tensor `{tensor}` of element type {dtype}; it must be an integer tensor")]
    #[label = "not an integer tensor"]
    LoadTensorNotInteger {
        /// The tensor.
        tensor: String,
        /// Its element type.
        dtype: DType,
    }

    /// `load` with a different number of indices than the tensor has dimensions.
    #[error("`load` indexes tensor `{tensor}` with {}, it has {}", count(.found, "index"), count(.rank, "dimension"))]
    #[label = "wrong number of indices"]
    LoadIndexCount {
        /// The tensor.
        tensor: String,
        /// Indices written.
        found: usize,
        /// The tensor's rank.
        rank: usize,
    }

    /// Workloads that call each other in a cycle.
    #[error("recursion through calls: {cycle}")]
    #[label = "closes a call cycle"]
    RecursiveCall {
        /// The cycle (`main -> layer -> main`).
        cycle: String,
    }

    /// A workload or process whose nesting plus calls, added up across calls, is deeper than
    /// the limit every back end's stack allows (`MAX_TOTAL_DEPTH`).
    #[error("{what} reaches {depth} levels of nesting and calls, more than the limit of {limit}, through the call chain {chain}")]
    #[label = "too deep"]
    TooDeep {
        /// `workload `main`` / `process `p` of pipeline `q``.
        what: String,
        /// Its total depth.
        depth: usize,
        /// The limit.
        limit: usize,
        /// The workloads its deepest path goes through (`main -> w0 -> w1`).
        chain: String,
    }

    /// `send` or `consume` in a workload (outside any process).
    #[error("`{stmt} {channel}` is outside a process; `send` and `consume` are allowed only in pipeline processes")]
    #[label = "outside a process"]
    CspOutsideProcess {
        /// `send` or `consume`.
        stmt: &'static str,
        /// The channel named.
        channel: String,
    }

    /// `send` / `consume` on a channel missing from the process's `produces` / `consumes` list.
    #[error("`{stmt}` on channel `{channel}`, which process `{process}` does not list in `{list}`")]
    #[label = "channel not listed"]
    ChannelNotListed {
        /// `send` or `consume`.
        stmt: &'static str,
        /// The channel.
        channel: String,
        /// The process.
        process: String,
        /// `produces` or `consumes`.
        list: &'static str,
    }

    /// A channel without exactly one producer or exactly one consumer.
    #[error("channel `{channel}` has {count} {role}s; it needs exactly one")]
    #[label = "needs exactly one"]
    ChannelEndpointCount {
        /// The channel.
        channel: String,
        /// `producer` or `consumer`.
        role: &'static str,
        /// How many processes list it.
        count: usize,
    }

    /// A depth, count or size that must be at least 1 is 0.
    #[error("{what} is 0; it must be at least 1")]
    #[label = "zero"]
    ZeroValue {
        /// What (`task_window`, `the depth of channel `c``).
        what: String,
    }

    /// Under `deps exact`, two accesses to a written tensor that are not provably on one tile
    /// grid (equal or disjoint boxes), so exact-key dependencies could miss a conflict.
    #[error("under `deps exact`, {second} and {first} on tensor `{tensor}` can partially overlap ({why}), and exact dependencies order only identical regions: use `deps overlap` or `deps hybrid`, or access `{tensor}` in tiles of one shape at multiples of it")]
    #[label = "can partially overlap"]
    ExactPartialOverlap {
        /// The tensor.
        tensor: String,
        /// The tensor's first access (`` `A[0 +: 2]` (task inc, argument 0 in workload main) ``).
        first: String,
        /// The access off its grid.
        second: String,
        /// What differs.
        why: String,
    }

    /// A module with no `deps` item (so exact dependencies, the default) compiled to *run*, with
    /// two accesses to a written tensor that are not provably on one tile grid (checked by
    /// [`crate::validate::validate_for_run`], not by [`crate::validate()`]).
    #[error("the schedule names no `deps` mode, so dependencies are exact (the default), and {second} and {first} on tensor `{tensor}` can partially overlap ({why}): exact dependencies order only identical regions, so the run could race; write `deps overlap;` or `deps hybrid;` in the schedule's `task_graph` (sound for overlapping regions), or access `{tensor}` in tiles of one shape at multiples of it")]
    #[label = "can partially overlap"]
    DefaultExactPartialOverlap {
        /// The tensor.
        tensor: String,
        /// The tensor's first access.
        first: String,
        /// The access off its grid.
        second: String,
        /// What differs.
        why: String,
    }

    /// Under `deps explicit`, a module compiled to *run* with two task accesses to a written
    /// tensor (or one that may run more than once), which nothing proves ordered (checked by
    /// [`crate::validate::validate_for_run`]).
    #[error("under `deps explicit`, {second} and {first} on tensor `{tensor}` can conflict (at least one writes), and explicit dependencies infer no edges: a run is allowed only when each tensor a task writes is accessed by a single task that runs once; use `deps exact`, `deps overlap` or `deps hybrid`")]
    #[label = "not proven ordered"]
    ExplicitUnordered {
        /// The tensor.
        tensor: String,
        /// The earlier access (or `another instance of itself`).
        first: String,
        /// The access reported.
        second: String,
    }

    /// A size past the limit a runtime allocates for (`crate::schedule::limits`).
    #[error("{what} is {value}, more than the limit of {limit}")]
    #[label = "too large"]
    OverLimit {
        /// What (`task_window`, `the depth of channel `c``).
        what: String,
        /// The value written.
        value: u64,
        /// The limit.
        limit: u64,
    }

    /// A schedule item (or `task_graph` item) given twice.
    #[error("`{item}` appears twice in {block}")]
    #[label = "duplicate item"]
    DuplicateScheduleItem {
        /// The item keyword.
        item: &'static str,
        /// `the schedule` or ``task_graph``.
        block: &'static str,
    }

    /// `static_partition()` with no starts.
    #[error("`static_partition` needs at least one start")]
    #[label = "no starts"]
    EmptyStaticPartition {}

    /// `static_partition` whose first start is not 0.
    #[error("`static_partition` must start at 0, not {first}")]
    #[label = "first start is not 0"]
    StaticPartitionStart {
        /// The first start.
        first: u64,
    }

    /// `static_partition` starts that do not strictly increase.
    #[error("`static_partition` starts must strictly increase: {next} after {prev}")]
    #[label = "not increasing"]
    StaticPartitionOrder {
        /// The earlier start.
        prev: u64,
        /// The later start.
        next: u64,
    }

    /// `threshold` / `dispatch_threshold` bounds that do not strictly increase.
    #[error("levels of `{item}` must strictly increase: `below {next}` after `below {prev}`")]
    #[label = "not increasing"]
    LevelOrder {
        /// `threshold` or `dispatch_threshold`.
        item: &'static str,
        /// The earlier bound.
        prev: i64,
        /// The later bound.
        next: i64,
    }

    /// `static_partition` with a different number of starts than `executors`.
    #[error("`static_partition` has {} but `executors` is {executors}", count(.starts, "start"))]
    #[label = "length differs from `executors`"]
    PartitionExecutors {
        /// Number of starts.
        starts: usize,
        /// The `executors` value.
        executors: u64,
    }

    /// A schedule expression names a variable that is not bound at every task of the entry.
    #[error("`{item}` names `{name}`, which is not bound at task `{task}` ({task_path})")]
    #[label = "not bound at every task"]
    NotBoundAtEveryTask {
        /// The schedule item (`stream_by`).
        item: &'static str,
        /// The name.
        name: String,
        /// The kernel of a task where it is missing.
        task: String,
        /// The path to that task.
        task_path: String,
    }

    /// A mistake in a Plan-Descriptor-Execute declaration (`space`, `tiers` or `plan`); the
    /// message names the space, tier table, plan, axis, tier or field.
    #[error("{message}")]
    #[label = "here"]
    Plan {
        /// What is wrong, naming the declaration and the item.
        message: String,
    }

    /// A mistake in a spatial map (`spatial_map`): the message names the map and the item
    /// (device, grid, tile variable, process, layout).
    #[error("{message}")]
    #[label = "here"]
    Spatial {
        /// What is wrong, naming the map and the item.
        message: String,
    }

    /// Nothing says what to run.
    #[error("no entry point: no schedule, no workload `main`, and {} and {} (need exactly one)", count(.workloads, "workload"), count(.pipelines, "pipeline"))]
    #[label = "no entry point"]
    NoEntry {
        /// Number of workloads.
        workloads: usize,
        /// Number of pipelines.
        pipelines: usize,
    }

    /// The entry workload has parameters, which nothing can bind.
    #[error("entry workload `{workload}` has parameters, which nothing binds")]
    #[label = "entry with parameters"]
    EntryHasParams {
        /// The workload.
        workload: String,
    }
}

impl Diagnostic for ValidationError {
    fn loc(&self) -> Loc {
        ValidationError::loc(self)
    }

    fn label(&self) -> Option<String> {
        Some(ValidationError::label(self).to_string())
    }

    fn notes(&self) -> Vec<String> {
        vec![format!("in {}", self.path())]
    }
}
