//! The orchestration C++ of an Ascend tree, generated from the resolved entry point.
//!
//! Why: the runtime's AICPU runs an orchestration function that submits the tasks; it should be
//! the workload itself — its loops, conditions and slots — not a list of tasks, so its size does
//! not grow with the task count.
//!
//! Promise: statement by statement, the C++ does what the reference expander does under the
//! same bindings (symbols, slots and bound integer tensors are baked in as constants): dense,
//! ragged and sparse loops, `if`, `while` / `break`, blocks, `set`, `load`, inlined calls, tiers;
//! integer arithmetic checked as ours (`pto_wsp_orch.hpp`); regions bounds-checked; a computed
//! read (an integer tensor the tasks write, read by `load` or an axis) waits for the tasks
//! submitted before it that write the element, through the runtime's `get_tensor_data`. Ordered
//! constructs and write-after-read become explicit dependencies (see `pto_wsp_orch.hpp`). A
//! runtime error (overflow, a region out of its tensor, a negative length) stops the
//! orchestration through `rt_report_fatal`, naming the statement's `file:line:column`.

use crate::Input;
use pto_wsp_ir::device::Core;
use pto_wsp_ir::device::split::{PartParam, Scratch};
use pto_wsp_ir::resolve::{
    AxisExtent, ExprId, Loop, RowLength, Stmt, StmtKind, TExpr, Task, TaskArg, TensorId,
};
use pto_wsp_ir::{BinOp, OpClass, ParamKind, ScalarType, UnOp, Value};
use std::fmt::Write as _;

/// One part of a kernel as the orchestration submits it.
#[derive(Clone, Debug)]
pub(crate) struct PartPlan {
    /// Its function id.
    pub func: u32,
    /// The core it runs on.
    pub core: Core,
    /// What each of its parameters is.
    pub params: Vec<PartParam>,
}

/// How a kernel's task is submitted: its parts in order (one for most kernels) and the scratch
/// tensors joining them.
#[derive(Clone, Debug)]
pub(crate) struct KernelPlan {
    pub parts: Vec<PartPlan>,
    pub scratch: Vec<Scratch>,
}

/// What the generator needs besides the emitter's input.
pub(crate) struct OrchInput<'a> {
    pub input: &'a Input<'a>,
    /// Per tensor: its evaluated shape.
    pub shapes: Vec<Vec<u64>>,
    /// Per kernel: how its tasks are submitted, when a task may run it.
    pub kernels: Vec<Option<KernelPlan>>,
}

fn cty(t: ScalarType) -> &'static str {
    match t {
        ScalarType::Bool => "bool",
        ScalarType::I64 => "int64_t",
        ScalarType::U64 => "uint64_t",
    }
}

fn value(v: Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::I64(i64::MIN) => "(-INT64_C(9223372036854775807) - 1)".into(),
        Value::I64(i) => format!("INT64_C({i})"),
        Value::U64(u) => format!("UINT64_C({u})"),
    }
}

fn expr(e: &TExpr) -> String {
    match e {
        TExpr::Const(v) => value(*v),
        TExpr::Reg(r, _) => format!("R{r}"),
        TExpr::Arg(i, _) => format!("a{i}"),
        TExpr::Unary(UnOp::Neg, a) => format!("pw::neg({})", expr(a)),
        TExpr::Unary(UnOp::Not, a) => format!("(!{})", expr(a)),
        TExpr::Binary(..) => chain(e),
        TExpr::Ternary(c, a, b) => format!("({} ? {} : {})", expr(c), expr(a), expr(b)),
    }
}

/// The shortest run of operators of one class [`chain`] writes as a statement list.
const LONG_RUN: usize = 32;

/// A chain of binary operations, read along its left operands in a loop. A run of at least
/// [`LONG_RUN`] arithmetic (or `&&` / `||`) operators, whose operands and results all have one
/// type, is written as an immediately invoked lambda updating one variable, so the C++ nests no
/// deeper for a long sum; shorter runs nest one call per operator.
fn chain(e: &TExpr) -> String {
    let (first, rest) = e.left_spine();
    let mut acc = expr(first);
    let mut i = 0;
    while i < rest.len() {
        let class = rest[i].0.class();
        let run = rest[i..]
            .iter()
            .take_while(|(op, _)| class != OpClass::Compare && op.class() == class)
            .count();
        if run >= LONG_RUN {
            let t = cty(rest[i].1.ty());
            let mut body = format!("[&]() -> {t} {{ {t} v = {acc};");
            for (op, b) in &rest[i..i + run] {
                let _ = write!(body, " v = {};", binary(*op, t, "v", &expr(b)));
            }
            body.push_str(" return v; }()");
            acc = body;
            i += run;
        } else {
            let (op, b) = rest[i];
            acc = binary(op, cty(b.ty()), &acc, &expr(b));
            i += 1;
        }
    }
    acc
}

/// `x op y` as C++, for operands of type `t`.
fn binary(op: BinOp, t: &str, x: &str, y: &str) -> String {
    let f = |name: &str| format!("pw::{name}<{t}>({x}, {y})");
    match op {
        BinOp::Add => f("add"),
        BinOp::Sub => f("sub"),
        BinOp::Mul => f("mul"),
        BinOp::Div => f("div"),
        BinOp::Rem => f("rem"),
        BinOp::Min => format!("std::min<{t}>({x}, {y})"),
        BinOp::Max => format!("std::max<{t}>({x}, {y})"),
        BinOp::Eq => format!("({x} == {y})"),
        BinOp::Ne => format!("({x} != {y})"),
        BinOp::Lt => format!("({x} < {y})"),
        BinOp::Le => format!("({x} <= {y})"),
        BinOp::Gt => format!("({x} > {y})"),
        BinOp::Ge => format!("({x} >= {y})"),
        BinOp::And => format!("({x} && {y})"),
        BinOp::Or => format!("({x} || {y})"),
    }
}

struct Gen<'a> {
    inp: &'a OrchInput<'a>,
    out: String,
    fresh: usize,
}

impl Gen<'_> {
    fn x(&self, id: pto_wsp_ir::resolve::ExprId) -> String {
        expr(&self.inp.input.resolved.exprs[id.index()].expr)
    }

    fn line(&mut self, depth: usize, s: &str) {
        let _ = writeln!(self.out, "{}{s}", "    ".repeat(depth));
    }

    fn next(&mut self) -> usize {
        self.fresh += 1;
        self.fresh
    }

    /// An integer tensor's element `index` (row-major): from its bound contents, or, for a
    /// tensor the workload's tasks write (a computed read), read from the runtime once the
    /// tasks submitted before that write it are done (`get_tensor_data`).
    fn element(&self, t: TensorId, index: &str) -> String {
        let res = self.inp.input.resolved;
        let tensor = &res.module.tensors[t.index()];
        let name = &tensor.name.name;
        if res.written[t.index()] {
            let shape = &self.inp.shapes[t.index()];
            let ext: Vec<String> = shape.iter().map(|e| format!("INT64_C({e})")).collect();
            let cty = match tensor.dtype {
                pto_wsp_ir::DType::I32 => "int32_t",
                pto_wsp_ir::DType::U32 => "uint32_t",
                pto_wsp_ir::DType::U8 => "uint8_t",
                pto_wsp_ir::DType::U64 => "uint64_t",
                _ => "int64_t",
            };
            return format!(
                "pw::computed<{cty}>(orch, {}, {index}, std::vector<int64_t>{{{}}}, {name:?})",
                t.0,
                ext.join(", ")
            );
        }
        format!(
            "pw::element(kArr{}, static_cast<int64_t>(sizeof(kArr{}) / sizeof(kArr{}[0])), {index}, {name:?}, orch.at)",
            t.0, t.0, t.0
        )
    }

    fn body(&mut self, body: &[Stmt], depth: usize, whiles: &[usize]) {
        for s in body {
            self.stmt(s, depth, whiles);
        }
    }

    fn stmt(&mut self, s: &Stmt, d: usize, whiles: &[usize]) {
        let at = self.inp.input.position(s.loc);
        match &s.kind {
            StmtKind::Task(t) => {
                self.line(d, &format!("orch.at = {at:?};"));
                self.task(t, d);
            }
            StmtKind::Set { slot, value } => {
                self.line(d, &format!("orch.at = {at:?};"));
                let v = self.x(*value);
                self.line(d, &format!("R{slot} = {v};"));
            }
            StmtKind::Load {
                slot,
                tensor,
                index,
            } => {
                self.line(d, &format!("orch.at = {at:?};"));
                self.load(*slot, *tensor, index, d);
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.line(d, &format!("orch.at = {at:?};"));
                let c = self.x(*cond);
                self.line(d, &format!("if ({c}) {{"));
                self.body(then_body, d + 1, whiles);
                self.line(d, "} else {");
                self.body(else_body, d + 1, whiles);
                self.line(d, "}");
            }
            StmtKind::Block { ordered, body } => self.block(*ordered, body, d, whiles),
            StmtKind::Call { args, body, .. } => {
                self.line(d, &format!("orch.at = {at:?};"));
                for (r, e) in args {
                    let v = self.x(*e);
                    self.line(d, &format!("R{r} = {v};"));
                }
                self.body(body, d, whiles);
            }
            StmtKind::While { cond, max, body } => {
                self.while_loop((*cond, *max), body, d, whiles, &at)
            }
            StmtKind::Break { cond } => {
                let c = self.x(*cond);
                let k = whiles.last().copied().unwrap_or(0);
                self.line(d, &format!("if ({c}) goto while_end{k};"));
            }
            StmtKind::Loop(lp) => self.lp(lp, d, whiles, &at),
            StmtKind::Send { .. } | StmtKind::Consume { .. } => {
                // Refused before generation (CSP entries); nothing to emit.
            }
        }
    }

    /// `R{slot} = TENSOR[INDEX...];`, each index checked against its extent.
    fn load(
        &mut self,
        slot: u32,
        tensor: TensorId,
        index: &[pto_wsp_ir::resolve::ExprId],
        d: usize,
    ) {
        let shape = &self.inp.shapes[tensor.index()];
        let mut flat = "INT64_C(0)".to_string();
        for (k, e) in index.iter().enumerate() {
            let i = self.x(*e);
            let ext = shape[k];
            self.line(
                d,
                &format!(
                    "if ({i} < 0 || {i} >= INT64_C({ext})) pw::fail(orch.at + \": load index out of range\");"
                ),
            );
            flat = format!("({flat} * INT64_C({ext}) + {i})");
        }
        let e = self.element(tensor, &flat);
        let ty = cty(self.inp.input.resolved.regs[slot as usize]);
        self.line(d, &format!("R{slot} = static_cast<{ty}>({e});"));
    }

    /// A block; an ordered one (`sequential`) puts a boundary after each statement.
    fn block(&mut self, ordered: bool, body: &[Stmt], d: usize, whiles: &[usize]) {
        self.line(d, "{");
        if ordered {
            let k = self.next();
            self.line(d + 1, &format!("pto_wsp_orch::Ordered o{k}(orch);"));
            for c in body {
                self.stmt(c, d + 1, whiles);
                self.line(d + 1, &format!("o{k}.boundary();"));
            }
        } else {
            self.body(body, d + 1, whiles);
        }
        self.line(d, "}");
    }

    /// `while COND max MAX { BODY }`: at most MAX ordered iterations, each in its own scope; a
    /// `break` jumps to `while_end{k}`.
    fn while_loop(
        &mut self,
        (cond, max): (pto_wsp_ir::resolve::ExprId, pto_wsp_ir::resolve::ExprId),
        body: &[Stmt],
        d: usize,
        whiles: &[usize],
        at: &str,
    ) {
        let k = self.next();
        self.line(d, &format!("orch.at = {at:?};"));
        let m = self.x(max);
        let c = self.x(cond);
        self.line(d, "{");
        self.line(d + 1, &format!("const int64_t max{k} = {m};"));
        self.line(d + 1, &format!("pto_wsp_orch::Ordered o{k}(orch);"));
        self.line(
            d + 1,
            &format!("for (int64_t it{k} = 0; it{k} < max{k}; ++it{k}) {{"),
        );
        self.line(d + 2, &format!("orch.at = {at:?};"));
        self.line(d + 2, &format!("if (!({c})) break;"));
        self.line(d + 2, "PTO2_SCOPE_GUARD();");
        let mut w = whiles.to_vec();
        w.push(k);
        self.body(body, d + 2, &w);
        self.line(d + 2, &format!("o{k}.boundary();"));
        self.line(d + 1, "}");
        self.line(d + 1, &format!("while_end{k}:;"));
        self.line(d, "}");
    }

    /// `const int64_t n{k} = ROWS;` of a ragged or sparse axis, refusing a negative count.
    fn row_count(&mut self, rows: pto_wsp_ir::resolve::ExprId, k: usize, d1: usize, aname: &str) {
        let n = self.x(rows);
        self.line(d1, &format!("const int64_t n{k} = {n};"));
        self.line(
            d1,
            &format!(
                "if (n{k} < 0) pw::fail(orch.at + \": axis `{aname}` has a negative row count\");"
            ),
        );
    }

    /// The innermost level of a ragged or sparse loop `k` (rows `r{k}`, opened at `d1`): binds
    /// the row variable and the inner one (`inner`: its C++ value), opens a scope per
    /// iteration, runs the body and closes both loops.
    fn inner_body(
        &mut self,
        lp: &pto_wsp_ir::resolve::Loop,
        k: usize,
        d1: usize,
        inner: Option<(u32, String)>,
        whiles: &[usize],
    ) {
        let v0 = lp.vars.first().copied().unwrap_or(0);
        self.line(d1 + 2, &format!("R{v0} = r{k};"));
        if let Some((v1, value)) = inner {
            self.line(d1 + 2, &format!("R{v1} = {value};"));
        }
        self.line(d1 + 2, "PTO2_SCOPE_GUARD();");
        self.body(&lp.body, d1 + 2, whiles);
        if lp.ordered {
            self.line(d1 + 2, &format!("o{k}.boundary();"));
        }
        self.line(d1 + 1, "}");
        self.line(d1, "}");
    }

    /// A loop over an axis: dense, ragged (row lengths from a tensor) or sparse (CSR), each
    /// iteration in its own scope; an ordered loop puts a boundary after each.
    fn lp(&mut self, lp: &Loop, d: usize, whiles: &[usize], at: &str) {
        let k = self.next();
        let axis = &self.inp.input.resolved.axes[lp.axis.index()];
        let aname = axis.name.clone();
        self.line(d, &format!("orch.at = {at:?};"));
        self.line(d, "{");
        let d1 = d + 1;
        if lp.ordered {
            self.line(d1, &format!("pto_wsp_orch::Ordered o{k}(orch);"));
        }
        let level = Level {
            k,
            d1,
            aname: &aname,
        };
        match &axis.kind {
            AxisExtent::Dense(e) => self.dense(lp, *e, &level, whiles),
            AxisExtent::Ragged {
                rows,
                lengths,
                per_row,
            } => self.ragged(lp, (*rows, *lengths, *per_row), &level, whiles),
            AxisExtent::Sparse {
                rows,
                indptr,
                indices,
            } => self.sparse(lp, (*rows, *indptr, *indices), &level, whiles),
        }
        self.line(d, "}");
    }

    /// A dense axis of extent `e`.
    fn dense(&mut self, lp: &Loop, e: ExprId, level: &Level<'_>, whiles: &[usize]) {
        let Level { k, d1, aname } = *level;
        let v0 = lp.vars.first().copied().unwrap_or(0);
        let n = self.x(e);
        self.line(d1, &format!("const int64_t n{k} = {n};"));
        self.line(
            d1,
            &format!(
                "if (n{k} < 0) pw::fail(orch.at + \": axis `{aname}` has negative extent \" + std::to_string(n{k}));"
            ),
        );
        self.line(
            d1,
            &format!("for (int64_t i{k} = 0; i{k} < n{k}; ++i{k}) {{"),
        );
        self.line(d1 + 1, &format!("R{v0} = i{k};"));
        self.line(d1 + 1, "PTO2_SCOPE_GUARD();");
        self.body(&lp.body, d1 + 1, whiles);
        if lp.ordered {
            self.line(d1 + 1, &format!("o{k}.boundary();"));
        }
        self.line(d1, "}");
    }

    /// A ragged axis: `rows` rows whose lengths are the elements of `lengths` (or computed from
    /// each by `per_row`).
    fn ragged(
        &mut self,
        lp: &Loop,
        (rows, lengths, per_row): (ExprId, TensorId, Option<RowLength>),
        level: &Level<'_>,
        whiles: &[usize],
    ) {
        let Level { k, d1, aname } = *level;
        self.row_count(rows, k, d1, aname);
        self.line(
            d1,
            &format!("std::vector<int64_t> len{k}(static_cast<size_t>(n{k}));"),
        );
        self.line(d1, &format!("for (int64_t r = 0; r < n{k}; ++r) {{"));
        let el = self.element(lengths, "r");
        match per_row {
            None => self.line(d1 + 1, &format!("len{k}[r] = static_cast<int64_t>({el});")),
            Some(pr) => {
                let l = self.x(pr.length);
                self.line(
                    d1 + 1,
                    &format!("R{} = static_cast<int64_t>({el});", pr.element),
                );
                self.line(d1 + 1, &format!("len{k}[r] = {l};"));
            }
        }
        self.line(
            d1 + 1,
            &format!(
                "if (len{k}[r] < 0) pw::fail(orch.at + \": a row length of axis `{aname}` is negative\");"
            ),
        );
        self.line(d1, "}");
        self.line(
            d1,
            &format!("for (int64_t r{k} = 0; r{k} < n{k}; ++r{k}) {{"),
        );
        self.line(
            d1 + 1,
            &format!("for (int64_t p{k} = 0; p{k} < len{k}[r{k}]; ++p{k}) {{"),
        );
        let v1 = lp.vars.get(1).copied();
        self.inner_body(lp, k, d1, v1.map(|v| (v, format!("p{k}"))), whiles);
    }

    /// A sparse axis in CSR form: `rows` rows, row offsets `indptr`, column `indices`.
    fn sparse(
        &mut self,
        lp: &Loop,
        (rows, indptr, indices): (ExprId, TensorId, TensorId),
        level: &Level<'_>,
        whiles: &[usize],
    ) {
        let Level { k, d1, aname } = *level;
        self.row_count(rows, k, d1, aname);
        let lo = self.element(indptr, &format!("r{k}"));
        let hi = self.element(indptr, &format!("r{k} + 1"));
        let ix = self.element(indices, &format!("j{k}"));
        self.line(
            d1,
            &format!("for (int64_t r{k} = 0; r{k} < n{k}; ++r{k}) {{"),
        );
        self.line(
            d1 + 1,
            &format!(
                "const int64_t lo{k} = static_cast<int64_t>({lo}), hi{k} = static_cast<int64_t>({hi});"
            ),
        );
        self.line(
            d1 + 1,
            &format!(
                "if (lo{k} < 0 || hi{k} < lo{k}) pw::fail(orch.at + \": axis `{aname}`: bad CSR offsets\");"
            ),
        );
        self.line(
            d1 + 1,
            &format!("for (int64_t j{k} = lo{k}; j{k} < hi{k}; ++j{k}) {{"),
        );
        let inner = format!("static_cast<int64_t>({ix})");
        let v1 = lp.vars.get(1).copied();
        self.inner_body(lp, k, d1, v1.map(|v| (v, inner)), whiles);
    }

    fn task(&mut self, t: &Task, d: usize) {
        let module = &self.inp.input.resolved.module;
        let k = &module.kernels[t.kernel.index()];
        self.line(d, &format!("{{ // task {}", k.name.name));
        let d1 = d + 1;
        // Scalars first (tiers read them).
        // `a{j}`: the task's j-th scalar argument (what a tier's `TExpr::Arg(j)` names).
        let mut scalars = 0;
        for a in &t.args {
            if let TaskArg::Scalar(e) = a {
                let v = self.x(*e);
                let ty = cty(self.inp.input.resolved.exprs[e.index()].expr.ty());
                self.line(d1, &format!("const {ty} a{scalars} = {v};"));
                scalars += 1;
            }
        }
        // The kernel: the task's, or the first tier whose condition holds.
        match &self.inp.input.resolved.tiers[t.kernel.index()] {
            None => self.parts(Source::Stmt(t), t.kernel.index(), d1),
            Some(tiers) => {
                let mut kids = vec![tiers.default.index()];
                self.line(d1, &format!("int32_t kid = {};", tiers.default.index()));
                let mut first = true;
                for (c, kid) in &tiers.cases {
                    let cond = self.x(*c);
                    let kw = if first { "if" } else { "else if" };
                    first = false;
                    self.line(d1, &format!("{kw} ({cond}) {{ kid = {}; }}", kid.index()));
                    kids.push(kid.index());
                }
                kids.sort_unstable();
                kids.dedup();
                for (i, kid) in kids.iter().enumerate() {
                    let kw = if i == 0 { "if" } else { "} else if" };
                    self.line(d1, &format!("{kw} (kid == {kid}) {{"));
                    self.parts(Source::Stmt(t), *kid, d1 + 1);
                }
                self.line(d1, "}");
            }
        }
        self.line(d, "}");
    }

    /// The `tk.region(...)` line of the task's argument `i` (a region).
    fn region(&mut self, t: &Task, i: usize, ri: usize, kname: &str, d: usize) {
        let module = &self.inp.input.resolved.module;
        let TaskArg::Region {
            tensor,
            access,
            dims,
        } = &t.args[i]
        else {
            return;
        };
        let pname = module.kernels[t.kernel.index()]
            .params
            .get(i)
            .map_or("", |p| p.name.name.as_str());
        let starts: Vec<String> = dims.iter().map(|(s, _)| self.x(*s)).collect();
        let sizes: Vec<String> = dims
            .iter()
            .map(|(_, z)| z.map_or("INT64_C(1)".to_string(), |z| self.x(z)))
            .collect();
        let ext: Vec<String> = self.inp.shapes[tensor.index()]
            .iter()
            .map(|e| format!("INT64_C({e})"))
            .collect();
        let tname = &module.tensors[tensor.index()].name.name;
        self.line(
            d,
            &format!(
                "{{ const int64_t s[] = {{{}}}, z[] = {{{}}}, e[] = {{{}}}; tk.region({}, {}, {}, {}, s, z, e, {:?}); }}",
                starts.join(", "),
                sizes.join(", "),
                ext.join(", "),
                tensor.0,
                access.reads(),
                access.writes(),
                dims.len(),
                format!("region {ri} (`{pname}`) of tensor `{tname}` ({kname})")
            ),
        );
    }

    /// The `tk.region(...)` line of a pipeline task's region `ri` (known numbers).
    fn csp_region(&mut self, t: &super::csp::CspTask, ri: usize, kname: &str, d: usize) {
        let module = &self.inp.input.resolved.module;
        let Some(r) = t.task.regions.get(ri) else {
            return;
        };
        let list = |v: &[i64]| {
            v.iter()
                .map(|x| format!("INT64_C({x})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let ext: Vec<i64> = self.inp.shapes[r.tensor as usize]
            .iter()
            .map(|&e| e as i64)
            .collect();
        let tname = &module.tensors[r.tensor as usize].name.name;
        self.line(
            d,
            &format!(
                "{{ const int64_t s[] = {{{}}}, z[] = {{{}}}, e[] = {{{}}}; tk.region({}, {}, {}, {}, s, z, e, {:?}); }}",
                list(&r.start),
                list(&r.size),
                list(&ext),
                r.tensor,
                r.access.reads(),
                r.access.writes(),
                r.start.len(),
                format!("region {ri} of tensor `{tname}` ({kname})")
            ),
        );
    }

    /// Submits the parts of kernel `kid` for a task: a task statement (whose scalars are `a0`,
    /// `a1`, ...) or a pipeline's task (known values, explicit dependencies, its id kept in
    /// `ids`).
    fn parts(&mut self, src: Source<'_>, kid: usize, d: usize) {
        let Some(plan) = self.inp.kernels[kid].clone() else {
            self.line(d, "pw::fail(orch.at + \": a kernel without AICore code\");");
            return;
        };
        let module = &self.inp.input.resolved.module;
        let kname = module.kernels[kid].name.name.clone();
        // Per parameter: its index among regions, or among scalars.
        let mut region_no = Vec::new();
        let mut scalar_no = Vec::new();
        let (mut r, mut s) = (0, 0);
        for p in &module.kernels[kid].params {
            match p.kind {
                ParamKind::Tile { .. } => {
                    region_no.push(r);
                    scalar_no.push(usize::MAX);
                    r += 1;
                }
                ParamKind::Scalar(_) => {
                    region_no.push(usize::MAX);
                    scalar_no.push(s);
                    s += 1;
                }
            }
        }
        let base = self.next();
        if !plan.scratch.is_empty() {
            let vars: Vec<String> = (0..plan.scratch.len())
                .map(|i| format!("x{base}_{i}"))
                .collect();
            self.line(d, &format!("ChipTensor {};", vars.join(", ")));
        }
        let sub = Submission {
            src,
            plan: &plan,
            region_no,
            scalar_no,
            base,
            kname: &kname,
        };
        let last = plan.parts.len().saturating_sub(1);
        for (pi, part) in plan.parts.iter().enumerate() {
            self.part(&sub, part, pi == last, d);
        }
    }

    /// Submits one part of a task's kernel (`last`: the part whose id a pipeline keeps).
    fn part(&mut self, sub: &Submission<'_>, part: &PartPlan, last: bool, d: usize) {
        self.line(d, "{");
        let d1 = d + 1;
        self.line(d1, "pto_wsp_orch::Task tk(orch);");
        let outs = self.part_tensors(sub, part, d1);
        self.part_scalars(sub, part, d1);
        self.line(d1, "tk.scalar(orch.status_slot());");
        if let Source::Csp(t, _) = sub.src {
            for dep in &t.deps {
                self.line(d1, &format!("tk.after(ids[{dep}]);"));
            }
        }
        let submit = format!("tk.submit({}, {})", part.func, part.core == Core::Aic);
        match sub.src {
            Source::Csp(_, i) if last => self.line(d1, &format!("ids[{i}] = {submit};")),
            _ => self.line(d1, &format!("{submit};")),
        }
        for (k, id) in outs.iter().enumerate() {
            self.line(d1, &format!("x{}_{id} = tk.output({k});", sub.base));
        }
        self.line(d, "}");
    }

    /// A part's tensor arguments: the task's regions and the scratch tensors it reads or
    /// writes; returns the scratch tensors it writes, in order.
    fn part_tensors(&mut self, sub: &Submission<'_>, part: &PartPlan, d1: usize) -> Vec<usize> {
        let mut outs = Vec::new();
        for p in &part.params {
            match *p {
                PartParam::Original(i) => {
                    if sub.region_no.get(i).is_some_and(|&r| r != usize::MAX) {
                        match sub.src {
                            Source::Stmt(t) => {
                                self.region(t, i, sub.region_no[i], sub.kname, d1);
                            }
                            Source::Csp(t, _) => {
                                self.csp_region(t, sub.region_no[i], sub.kname, d1);
                            }
                        }
                    }
                }
                PartParam::Scratch { id, output: true } => {
                    let x = &sub.plan.scratch[id];
                    let dt = match x.dtype {
                        pto_wsp_ir::DType::F16 => "FLOAT16",
                        _ => "FLOAT32",
                    };
                    self.line(
                        d1,
                        &format!(
                            "tk.scratch_out(DataType::{dt}, {}, {}); // tile `{}`",
                            x.rows, x.cols, x.tile
                        ),
                    );
                    outs.push(id);
                }
                PartParam::Scratch { id, output: false } => {
                    self.line(d1, &format!("tk.scratch_in(x{}_{id});", sub.base));
                }
            }
        }
        outs
    }

    /// A part's scalar arguments, in parameter order.
    fn part_scalars(&mut self, sub: &Submission<'_>, part: &PartPlan, d1: usize) {
        for p in &part.params {
            if let PartParam::Original(i) = *p
                && sub.scalar_no.get(i).is_some_and(|&s| s != usize::MAX)
            {
                let v = match sub.src {
                    Source::Stmt(_) => format!("a{}", sub.scalar_no[i]),
                    Source::Csp(t, _) => t
                        .task
                        .params
                        .get(sub.scalar_no[i])
                        .map_or("0".to_string(), |v| value(*v)),
                };
                self.line(d1, &format!("tk.scalar(static_cast<uint64_t>({v}));"));
            }
        }
    }
}

/// The loop being written: its number `k` (the suffix of its C++ names), the depth `d1` of its
/// body and its axis's name.
#[derive(Clone, Copy)]
struct Level<'n> {
    k: usize,
    d1: usize,
    aname: &'n str,
}

/// One task's submission of a kernel's parts.
struct Submission<'s> {
    /// Where its arguments come from.
    src: Source<'s>,
    /// How the kernel's tasks are submitted.
    plan: &'s KernelPlan,
    /// Per kernel parameter: its index among the regions (`usize::MAX` for a scalar).
    region_no: Vec<usize>,
    /// Per kernel parameter: its index among the scalars (`usize::MAX` for a region).
    scalar_no: Vec<usize>,
    /// The suffix of its scratch tensors' names (`x{base}_{id}`).
    base: usize,
    /// The kernel's name.
    kname: &'s str,
}

/// Where a submitted task's arguments come from.
#[derive(Clone, Copy)]
enum Source<'t> {
    /// A task statement of the program.
    Stmt(&'t Task),
    /// Task `.1` of a pipeline's submission list.
    Csp(&'t super::csp::CspTask, usize),
}

/// The orchestration source of a pipeline's tasks in submission order (`super::csp`): one
/// submission each, with its explicit dependencies on earlier ones.
pub(crate) fn csp_orchestration(inp: &OrchInput<'_>, tasks: &[super::csp::CspTask]) -> String {
    let module = &inp.input.resolved.module;
    let mut g = Gen {
        inp,
        out: String::new(),
        fresh: 0,
    };
    g.prologue();
    let _ = writeln!(
        g.out,
        "        std::vector<PTO2TaskId> ids({});",
        tasks.len().max(1)
    );
    for (i, t) in tasks.iter().enumerate() {
        let k = &module.kernels[t.task.kernel as usize];
        g.line(
            2,
            &format!("{{ // task {i}: {} (process {})", k.name.name, t.process),
        );
        g.line(3, &format!("orch.at = \"task {i} ({})\";", k.name.name));
        g.parts(Source::Csp(t, i), t.task.kernel as usize, 3);
        g.line(2, "}");
    }
    g.epilogue();
    g.out
}

/// The orchestration source.
pub(crate) fn orchestration(inp: &OrchInput<'_>) -> String {
    let res = inp.input.resolved;
    let mut g = Gen {
        inp,
        out: String::new(),
        fresh: 0,
    };
    g.prologue();
    let body = &res
        .processes
        .first()
        .map(|p| p.body.clone())
        .unwrap_or_default();
    g.body(body, 2, &[]);
    g.epilogue();
    g.out
}

impl Gen<'_> {
    /// The file up to the entry's `try {`: includes, bound arrays, the registers.
    fn prologue(&mut self) {
        let inp = self.inp;
        let res = inp.input.resolved;
        let module = &res.module;
        let g = self;
        let _ = writeln!(
            g.out,
            "// Generated by `pto-wsp emit ascend` from {}: the orchestration of workload `{}` for simpler's\n\
             // tensormap_and_ringbuffer runtime. Do not edit. Symbols, slots and bound integer tensors\n\
             // are the values given at emit time.\n\
             #include <algorithm>\n#include <cstdint>\n#include <cstdio>\n#include <string>\n#include <vector>\n\n\
             #include \"pto_orchestration_api.h\"\n#include \"pto_wsp_orch.hpp\"\n\n\
             namespace pw = pto_wsp_orch;\n\nnamespace {{\n",
            inp.input.name(),
            res.entry
        );
        // Bound integer tensors the program reads.
        for (i, t) in module.tensors.iter().enumerate() {
            if res.arrays[i] && !res.written[i] {
                let data = inp
                    .input
                    .bindings
                    .arrays
                    .get(&t.name.name)
                    .cloned()
                    .unwrap_or_default();
                let mut s = String::new();
                for (j, v) in data.iter().enumerate() {
                    let _ = write!(
                        s,
                        "{}{}",
                        value(Value::I64(*v)),
                        if j % 8 == 7 { ",\n" } else { ", " }
                    );
                }
                let _ = writeln!(
                    g.out,
                    "// tensor `{}`\nconst int64_t kArr{i}[] = {{{s}{}}};",
                    t.name.name,
                    if data.is_empty() { "0" } else { "" }
                );
            }
        }
        let written: Vec<String> = res.written.iter().map(|w| w.to_string()).collect();
        let _ = writeln!(
            g.out,
            "const std::vector<bool> kWritten = {{{}}};\n\n}} // namespace\n",
            written.join(", ")
        );
        g.out.push_str(
            "namespace pto_wsp_orch {\ninline int64_t element(const int64_t *a, int64_t len, int64_t i, const char *name, const std::string &at)\n{\n    if (i < 0 || i >= len) {\n        fail(at + \": index \" + std::to_string(i) + \" is outside tensor `\" + name + \"`\");\n    }\n    return a[i];\n}\n} // namespace pto_wsp_orch\n\n",
        );
        let _ = writeln!(
            g.out,
            "extern \"C\" {{\n\n__attribute__((visibility(\"default\"))) PTO2OrchestrationConfig aicpu_orchestration_config(const ChipTaskArgs &orch_args)\n{{\n    (void)orch_args;\n    PTO2OrchestrationConfig c{{}};\n    c.expected_arg_count = {}; // the module's tensors, then the status tensor\n    return c;\n}}\n",
            module.tensors.len() + 1
        );
        g.out.push_str(
            "__attribute__((visibility(\"default\"))) void aicpu_orchestration_entry(const ChipTaskArgs &orch_args)\n{\n",
        );
        let _ = writeln!(
            g.out,
            "    pw::Orch orch(orch_args, {}, kWritten);",
            module.tensors.len()
        );
        // Registers: symbols and slots with their values, variables zero.
        let nsym = module.symbols.len();
        for (r, ty) in res.regs.iter().enumerate() {
            let init = if r < nsym {
                let s = &module.symbols[r];
                inp.input
                    .bindings
                    .symbols
                    .get(&s.name.name)
                    .copied()
                    .unwrap_or(Value::zero(*ty))
            } else if r < nsym + module.slots.len() {
                let s = &module.slots[r - nsym];
                inp.input
                    .bindings
                    .slots
                    .get(&s.name.name)
                    .copied()
                    .unwrap_or(Value::zero(*ty))
            } else {
                Value::zero(*ty)
            };
            let _ = writeln!(
                g.out,
                "    {} R{r} = {}; (void)R{r};",
                cty(*ty),
                value(init)
            );
        }
        g.out.push_str("    try {\n");
    }

    /// Closes the entry: the error report, the computed reads' figures.
    fn epilogue(&mut self) {
        let res = self.inp.input.resolved;
        self.out.push_str(
            "    } catch (const pw::Error &e) {\n        rt_report_fatal(PTO2_ERROR_EXPLICIT_ORCH_FATAL, \"pto-wsp: %s\", e.message.c_str());\n    }\n",
        );
        if !res.computed_reads().is_empty() {
            self.out.push_str(
                "    std::printf(\"pto-wsp: computed reads: %llu, waited %.3f ms\\n\", static_cast<unsigned long long>(orch.reads), orch.read_wait_ms);\n    std::fflush(stdout);\n",
            );
        }
        self.out.push_str("}\n\n} // extern \"C\"\n");
    }
}
