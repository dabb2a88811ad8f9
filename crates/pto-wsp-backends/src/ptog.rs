//! `ptog`: a module's entry point lowered to a task-graph ISA program (`docs/ISA.md`), written
//! as the `PTOG` binary.
//!
//! How: the reference expander generates the entry's tasks under the bindings (so the binary
//! bakes in every shape, loop count and routing decision); each task becomes a kernel node of
//! one graph (one instance, its kernel's name as entry symbol, cube / vector / either cores by
//! its pool); its tile arguments are bound as boxes of the module's tensors (with the kernel's
//! access) and its scalar arguments as scalars, tiles first; the dependencies between tasks are
//! inferred from their regions by the runtime's own builder (overlap mode: every pair of tasks
//! whose boxes intersect, one writing, is ordered) and become `DATA` edges through the tensor
//! that links them (`AFTER` for a write after a read); each structural order of the workload
//! (`for_each`, `sequential`) becomes one join node (built-in `empty`) after its earlier tasks
//! and before its later ones. Every tensor is allocated up front (`MC_ALLOC`, typed); the
//! control code launches the graph and waits for it.
//!
//! Promises: the program checks (it is built to), and running it executes the tasks the
//! reference expander generates, in an order every dependency allows. Entry symbols are the
//! module's kernel names: a kernel declared under its built-in name runs as is; a kernel with a
//! body or an alias comes from the module when the binary is run (`pto-wsp run OUT.ptog
//! --kernels FILE.wsp`). What cannot be lowered is refused with its location: CSP pipelines,
//! and workloads that read values their own tasks compute (their task list is only known when
//! they run).

use crate::{EmitError, Input};
use pto_wsp_graph::builder::GraphBuilder;
use pto_wsp_graph::types::ExecDomain;
use pto_wsp_ir::{
    Access as IrAccess, DepsMode, ExecPool, ExpandOptions, ExpandedTask, Expansion, OrderEdge,
    Value, eval::eval, expand,
};
use pto_wsp_ptog::isa::Insn;
use pto_wsp_ptog::operand::{
    Access, BoxRegion, CoreType, DependencyType, GraphId, KernelId, MemLocation, Ns, Shape, Split,
    StreamId, Symbol, TensorId,
};
use pto_wsp_ptog::{Names, Program};

/// The back end's name.
pub const NAME: &str = "ptog";
/// Its target.
pub const TARGET: &str = "ptog";

/// Alignment of every allocation (a cache line).
const ALIGN: u32 = 64;

/// What a lowering made: the program and notes for the user.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The program (it checks).
    pub program: Program,
    /// Kernel nodes (tasks and join nodes).
    pub nodes: usize,
    /// Dependency edges.
    pub edges: usize,
}

fn dims(input: &Input<'_>, t: usize) -> Result<Vec<u32>, EmitError> {
    let m = &input.resolved.module;
    let decl = &m.tensors[t];
    let lookup = |name: &str| input.bindings.symbols.get(name).copied();
    let mut out = Vec::with_capacity(decl.shape.len());
    for (d, e) in decl.shape.iter().enumerate() {
        let v = eval(e, &lookup).map_err(|err| {
            EmitError::at(
                decl.name.loc,
                format!(
                    "dimension {d} of tensor `{}`: {err} (bind it with `//@ bind`)",
                    decl.name
                ),
            )
        })?;
        let n = match v {
            Value::I64(x) if x > 0 => x as u64,
            Value::U64(x) if x > 0 => x,
            other => {
                return Err(EmitError::at(
                    decl.name.loc,
                    format!(
                        "dimension {d} of tensor `{}` is {other}, not a positive extent",
                        decl.name
                    ),
                ));
            }
        };
        out.push(u32::try_from(n).map_err(|_| {
            EmitError::at(
                decl.name.loc,
                format!(
                    "dimension {d} of tensor `{}` ({n}) does not fit 32 bits",
                    decl.name
                ),
            )
        })?);
    }
    if out.is_empty() {
        out.push(1);
    }
    Ok(out)
}

fn core(pool: ExecPool) -> CoreType {
    match pool {
        ExecPool::Vector => CoreType::Aiv,
        ExecPool::Cube => CoreType::Aic,
        ExecPool::Any => CoreType::AicAiv,
    }
}

fn access(a: IrAccess) -> Access {
    match a {
        IrAccess::In => Access::In,
        IrAccess::Out => Access::Out,
        IrAccess::InOut => Access::InOut,
    }
}

/// `s` as an identifier of the text (other characters become `_`).
fn ident(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    match clean.chars().next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => clean,
        _ => format!("_{clean}"),
    }
}

/// Lowers the entry point of `input` (see the module docs).
pub fn lower(input: &Input<'_>) -> Result<Lowered, EmitError> {
    let r = input.resolved;
    let m = &r.module;
    if r.csp {
        return Err(csp_refused(input));
    }
    let exp = expand(r, input.bindings, &ExpandOptions::default()).map_err(|e| {
        // At the place the expander names (the read of a computed value, the bad binding).
        EmitError::at(
            pto_wsp_ir::Diagnostic::loc(&e),
            format!("expanding `{}` under the bindings: {e}", r.entry),
        )
    })?;
    let mut names = Names::new();
    let mut insns = allocations(input, &mut names)?;
    // Dependencies, as the runtime's builder infers them.
    let mut builder = GraphBuilder::new(DepsMode::Overlap);
    for task in &exp.tasks {
        builder
            .submit_expanded(task, ExecDomain::HostCpu)
            .map_err(|e| EmitError::plain(format!("task of `{}`: {e}", r.entry)))?;
    }
    let (_, sink) = builder.finish_with_sink();
    let graph = GraphId(0);
    names.insert(Ns::Graph, 0, 0, ident(&r.entry));
    insns.push(Insn::TgBegin { graph });
    kernel_nodes(m, &exp, &mut insns, &mut names);
    let edges = data_edges(&exp.tasks, sink.preds(), &mut insns)
        + order_edges(exp.tasks.len(), &exp.order, &mut insns);
    bind_arguments(&exp.tasks, &mut insns);
    insns.push(Insn::TgEnd { graph });
    insns.push(Insn::TgLaunch {
        graph,
        stream: StreamId(0),
    });
    insns.push(Insn::TgSync { graph });
    let mut program = Program { insns, names };
    keep_used_names(&mut program);
    Ok(Lowered {
        program,
        nodes: exp.tasks.len() + exp.order.len(),
        edges,
    })
}

/// The refusal of a CSP pipeline, at its declaration.
fn csp_refused(input: &Input<'_>) -> EmitError {
    let r = input.resolved;
    let loc = r
        .module
        .pipelines
        .iter()
        .find(|p| p.name.as_str() == r.entry.as_str())
        .map_or(pto_wsp_ir::Loc::NONE, |p| p.loc);
    EmitError::at(
        loc,
        format!(
            "`{}` is a CSP pipeline: its processes run as threads ordered by channels, which a \
             task graph cannot express",
            r.entry
        ),
    )
}

/// One global-memory allocation per module tensor, its name recorded.
fn allocations(input: &Input<'_>, names: &mut Names) -> Result<Vec<Insn>, EmitError> {
    let m = &input.resolved.module;
    let mut insns = Vec::new();
    for (t, decl) in m.tensors.iter().enumerate() {
        let d = dims(input, t)?;
        let shape = Shape {
            dtype: decl.dtype,
            dims: d,
        };
        let size = shape.bytes().ok_or_else(|| {
            EmitError::at(
                decl.name.loc,
                format!("tensor `{}` has more than 2^64 bytes", decl.name),
            )
        })?;
        insns.push(Insn::McAlloc {
            tensor: TensorId(t as u32),
            size,
            alignment: ALIGN,
            location: MemLocation::Gm,
            shape: Some(shape),
        });
        names.insert(Ns::Tensor, 0, t as u32, decl.name.name.clone());
    }
    Ok(insns)
}

/// One kernel node per task (`KIND_i`), then one empty AICPU node per order edge (`order_j`).
fn kernel_nodes(m: &pto_wsp_ir::Module, exp: &Expansion, insns: &mut Vec<Insn>, names: &mut Names) {
    for (i, task) in exp.tasks.iter().enumerate() {
        let kname = &m.kernels[task.kernel as usize].name.name;
        insns.push(Insn::TgKernel {
            kernel: KernelId(i as u32),
            entry: Symbol(kname.clone()),
            block_dim: 1,
            core_type: core(task.pool),
            workspace: 0,
        });
        names.insert(Ns::Kernel, 0, i as u32, format!("{}_{i}", ident(kname)));
    }
    let n = exp.tasks.len();
    for (j, _) in exp.order.iter().enumerate() {
        let id = (n + j) as u32;
        insns.push(Insn::TgKernel {
            kernel: KernelId(id),
            entry: Symbol("empty".into()),
            block_dim: 1,
            core_type: CoreType::Aicpu,
            workspace: 0,
        });
        names.insert(Ns::Kernel, 0, id, format!("order_{j}"));
    }
}

/// The builder's edges (`preds` of each task, ending at `ends`) as dependencies: `Data` through
/// the tensor a write of the predecessor shares with the successor, else `After`. Returns how
/// many.
fn data_edges(
    tasks: &[ExpandedTask],
    (preds, ends): (&[u32], &[u32]),
    insns: &mut Vec<Insn>,
) -> usize {
    let mut edges = 0;
    for (succ, task) in tasks.iter().enumerate() {
        let lo = if succ == 0 {
            0
        } else {
            ends[succ - 1] as usize
        };
        for &p in &preds[lo..ends[succ] as usize] {
            let pred = &tasks[p as usize];
            // The tensor a write of the predecessor shares with the successor, if any.
            let through = pred.regions.iter().find_map(|a| {
                (a.access != IrAccess::In
                    && task.regions.iter().any(|b| {
                        b.tensor == a.tensor
                            && a.start
                                .iter()
                                .zip(&a.size)
                                .zip(b.start.iter().zip(&b.size))
                                .all(|((s1, z1), (s2, z2))| s1 < &(s2 + z2) && s2 < &(s1 + z1))
                    }))
                .then_some(a.tensor)
            });
            insns.push(Insn::TgDepend {
                src: KernelId(p),
                dst: KernelId(succ as u32),
                dep_type: if through.is_some() {
                    DependencyType::Data
                } else {
                    DependencyType::After
                },
                tensor: through.map(TensorId),
            });
            edges += 1;
        }
    }
    edges
}

/// Each structural order edge through its join node (`n` tasks come first): every task before
/// it precedes the node, the node every task after. Returns how many dependencies.
fn order_edges(n: usize, order: &[OrderEdge], insns: &mut Vec<Insn>) -> usize {
    let mut edges = 0;
    for (j, o) in order.iter().enumerate() {
        let join = KernelId((n + j) as u32);
        for b in o.before.clone() {
            insns.push(Insn::TgDepend {
                src: KernelId(b),
                dst: join,
                dep_type: DependencyType::After,
                tensor: None,
            });
        }
        for a in o.after.clone() {
            insns.push(Insn::TgDepend {
                src: join,
                dst: KernelId(a),
                dep_type: DependencyType::After,
                tensor: None,
            });
        }
        edges += o.before.len() + o.after.len();
    }
    edges
}

/// Each task's arguments: its regions (boxes of their tensors), then its scalars.
fn bind_arguments(tasks: &[ExpandedTask], insns: &mut Vec<Insn>) {
    for (i, task) in tasks.iter().enumerate() {
        let mut arg = 0u32;
        for reg in &task.regions {
            // A scalar tensor is one element: its box is the whole of it.
            let region = if reg.start.is_empty() {
                BoxRegion {
                    start: vec![0],
                    size: vec![1],
                }
            } else {
                BoxRegion {
                    start: reg.start.iter().map(|&s| s as u32).collect(),
                    size: reg.size.iter().map(|&z| z as u32).collect(),
                }
            };
            insns.push(Insn::McBind {
                kernel: KernelId(i as u32),
                arg,
                tensor: Some(TensorId(reg.tensor)),
                offset: 0,
                size: 0,
                access: access(reg.access),
                split: Split::Whole,
                region: Some(region),
            });
            arg += 1;
        }
        for p in &task.params {
            insns.push(Insn::McBind {
                kernel: KernelId(i as u32),
                arg,
                tensor: None,
                offset: p.to_bits(),
                size: 0,
                access: Access::InOut,
                split: Split::Whole,
                region: None,
            });
            arg += 1;
        }
    }
}

/// Drops the names of ids no instruction uses (names the text can write only).
fn keep_used_names(program: &mut Program) {
    let used = pto_wsp_ptog::binary::used_ids(program);
    let mut kept = Names::new();
    for (key, name) in program.names.iter() {
        if used.contains(&key) {
            kept.insert(key.0, key.1, key.2, name);
        }
    }
    program.names = kept;
}

/// The binary of `input`'s entry point, checked.
pub fn emit(input: &Input<'_>) -> Result<Vec<u8>, EmitError> {
    let lowered = lower(input)?;
    pto_wsp_ptog::check::check(lowered.program.clone())
        .map_err(|e| EmitError::plain(format!("the lowered program does not check: {e}")))?;
    Ok(pto_wsp_ptog::encode(&lowered.program))
}
