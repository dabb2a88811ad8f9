//! How closely a tensor the workload writes must agree between `a2a3sim` and `cpu_sim`.
//!
//! Why: the two sides run the same algorithms in `f32` with different summation orders and
//! `exp` / `1/√x`, so each written value differs by some roundings. How many depends on the
//! arithmetic that produced it, so the tolerance is derived from it, per tensor:
//!
//! - **Scale: the elements the run wrote.** A tensor the tasks write only in part (a buffer of
//!   per-expert rows, most of them unused) keeps its input elsewhere, the same on both sides; its
//!   RMS over every element would say more about the unused part than about what was computed.
//!   The scale is the RMS of cpu_sim's values over the elements either side changed (all of
//!   them when none changed).
//! - **Accumulation: `K · ε` per reduction.** A sum of `K` terms in `f32` rounds `K − 1` times;
//!   each side's result is within `(K − 1)·u·Σ|tᵢ|` of the exact sum (`u = 2⁻²⁴`), by the
//!   standard bound, or about `√K·u·Σ|tᵢ|` when the roundings are independent (the
//!   probabilistic bound). For terms of random sign `Σ|tᵢ|` is about `√K` times the sum's own
//!   size, so the probable difference of two orders is `2·√K·u·√K = K·ε` (`ε = 2u = 2⁻²³`, the
//!   `f32` machine epsilon) of the result. A task's `K` is the length of the reduction its
//!   kernel runs ([`accumulation`]): a product's inner dimension, a row operation's row, an
//!   attention's head dimension plus its keys; 1 for element-wise kernels (one rounding).
//! - **Propagation: the inputs' tolerances add.** A task's result carries its inputs'
//!   differences: a product or sum of values off by relative `δ₁` and `δ₂` is off by
//!   `δ₁ + δ₂` (to first order, for operations of condition about 1, which the examples'
//!   matrix products, norms and activations are on data of random sign). So a written tensor's
//!   tolerance is `K·ε` plus the tolerances of the written tensors its tasks read; inputs given
//!   to the run are the same on both sides and add nothing.
//! - **Floors: one rounding of the type and the transcendentals.** `1e-5` for `f32` (the two
//!   sides' `exp` / `1/√x` differ by an `f32` step or two), `1e-2` for `f16` / `bf16` (one
//!   rounding of the output type is `2⁻¹¹` / `2⁻⁸` of each value, up to ten times that of the
//!   RMS where values are larger than it); a tensor's tolerance is never below its floor.
//!   An `f32` tensor computed from a written `f16` tensor gets at least that tensor's `1e-2`:
//!   where the two sides' `f32` values straddle an `f16` rounding boundary they round one `f16`
//!   step apart, and that difference propagates as above — the same derivation, no special
//!   rule.
//!
//! Promises: the derivation is conservative — every task statement of every workload and
//! process counts, whatever the control flow, a kernel whose reduction is not known (a
//! hand-written body, an unknown built-in) counts the two largest extents it reads, a tensor
//! updated in place counts the whole tensors it reads (its accumulation spans tasks), and a
//! dependency cycle (tasks updating each other's tensors) is cut at the tensor being derived —
//! so a tolerance is never tighter than the arithmetic allows; each tolerance names what it was
//! derived from ([`Tolerance::why`]); integers are always compared exactly.

use pto_wsp::ir::{Arg, Bindings, DType, Module, ParamKind, Stmt, StmtKind, TaskStmt, Value};
use std::collections::{BTreeMap, BTreeSet};

/// `ε`, the `f32` machine epsilon `2⁻²³`: the relative difference one reduction term may add.
pub const F32_EPS: f64 = f32::EPSILON as f64;

/// A written float tensor's tolerance (a multiple of its scale) and its derivation.
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerance {
    /// The multiple of the scale the largest difference may reach.
    pub value: f64,
    /// The floor of the tensor's type.
    pub floor: f64,
    /// `K`: the longest reduction of a task writing the tensor.
    pub terms: u64,
    /// The written tensors its tasks read, with their tolerances.
    pub from: Vec<(String, f64)>,
}

impl Tolerance {
    /// How the tolerance was derived, when the arithmetic raised it above the floor: `K · ε`
    /// and the inputs that add to it (the largest three).
    pub fn why(&self) -> Option<String> {
        if self.value <= self.floor {
            return None;
        }
        let mut from = self.from.clone();
        from.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut parts = vec![format!("{} term(s) x f32 eps", self.terms)];
        for (n, t) in from.iter().take(3) {
            parts.push(format!("`{n}`'s {t:.1e}"));
        }
        if from.len() > 3 {
            parts.push(format!("{} more", from.len() - 3));
        }
        Some(format!("derived: {}", parts.join(" + ")))
    }
}

/// What one task statement contributes: the tensors it writes, the written-or-not tensors it
/// reads, and its reduction length.
struct TaskTerms {
    writes: BTreeSet<String>,
    reads: BTreeSet<String>,
    terms: u64,
}

/// The tolerance of every float tensor some task writes (see the module docs): `aliases` maps
/// a kernel to the built-in it runs (`//@ alias`), `bindings` gives the symbols' values,
/// `floor` each type's floor.
pub fn tolerances(
    module: &Module,
    aliases: &BTreeMap<String, String>,
    bindings: &Bindings,
    floor: impl Fn(DType) -> f64,
) -> BTreeMap<String, Tolerance> {
    let mut tasks = Vec::new();
    let mut visit = |body: &[Stmt]| collect(module, aliases, bindings, body, &mut tasks);
    for w in &module.workloads {
        visit(&w.body);
    }
    for p in &module.pipelines {
        for proc_ in &p.processes {
            visit(&proc_.body);
        }
    }
    // Per written tensor: its longest reduction and the tensors read by its writers.
    let mut direct: BTreeMap<String, (u64, BTreeSet<String>)> = BTreeMap::new();
    for t in &tasks {
        for w in &t.writes {
            let e = direct.entry(w.clone()).or_insert((0, BTreeSet::new()));
            e.0 = e.0.max(t.terms);
            e.1.extend(t.reads.iter().filter(|r| *r != w).cloned());
        }
    }
    let dtype = |n: &str| {
        module
            .tensors
            .iter()
            .find(|d| d.name.name == n)
            .map_or(DType::F32, |d| d.dtype)
    };
    let mut done: BTreeMap<String, Tolerance> = BTreeMap::new();
    let names: Vec<String> = direct.keys().cloned().collect();
    for n in names {
        derive(&n, &direct, &dtype, &floor, &mut done, &mut BTreeSet::new());
    }
    done.retain(|n, _| dtype(n).is_float());
    done
}

/// The tolerance of `name` (memoised in `done`); a tensor on the path being derived
/// (`active`) adds nothing (the cycle is cut there), an integer or unwritten one neither.
fn derive(
    name: &str,
    direct: &BTreeMap<String, (u64, BTreeSet<String>)>,
    dtype: &dyn Fn(&str) -> DType,
    floor: &dyn Fn(DType) -> f64,
    done: &mut BTreeMap<String, Tolerance>,
    active: &mut BTreeSet<String>,
) -> f64 {
    if let Some(t) = done.get(name) {
        return t.value;
    }
    let Some((terms, reads)) = direct.get(name) else {
        return 0.0;
    };
    if !dtype(name).is_float() || !active.insert(name.to_string()) {
        return 0.0;
    }
    let mut from = Vec::new();
    for r in reads {
        if direct.contains_key(r) && dtype(r).is_float() {
            let t = derive(r, direct, dtype, floor, done, active);
            if t > 0.0 {
                from.push((r.clone(), t));
            }
        }
    }
    active.remove(name);
    let f = floor(dtype(name));
    let sum = *terms as f64 * F32_EPS + from.iter().map(|(_, t)| t).sum::<f64>();
    let tol = Tolerance {
        value: f.max(sum),
        floor: f,
        terms: *terms,
        from,
    };
    let v = tol.value;
    done.insert(name.to_string(), tol);
    v
}

/// Adds what every task statement under `body` contributes.
fn collect(
    module: &Module,
    aliases: &BTreeMap<String, String>,
    bindings: &Bindings,
    body: &[Stmt],
    out: &mut Vec<TaskTerms>,
) {
    for s in body {
        match &s.kind {
            StmtKind::Loop { body, .. }
            | StmtKind::Select { body, .. }
            | StmtKind::While { body, .. }
            | StmtKind::Consume { body, .. }
            | StmtKind::Combine(body)
            | StmtKind::Sequential(body) => collect(module, aliases, bindings, body, out),
            StmtKind::Cond {
                then_body,
                else_body,
                ..
            } => {
                collect(module, aliases, bindings, then_body, out);
                collect(module, aliases, bindings, else_body, out);
            }
            StmtKind::Task(t) => {
                if let Some(terms) = task_terms(module, aliases, bindings, t) {
                    out.push(terms);
                }
            }
            _ => {}
        }
    }
}

/// One task statement's reads, writes and reduction length.
fn task_terms(
    module: &Module,
    aliases: &BTreeMap<String, String>,
    bindings: &Bindings,
    t: &TaskStmt,
) -> Option<TaskTerms> {
    let k = module.kernels.iter().find(|k| k.name == t.kernel)?;
    let (mut reads, mut writes) = (BTreeSet::new(), BTreeSet::new());
    let mut in_place = false;
    // Extents of each region read: (the region's, the whole tensor's).
    let mut read_extents: Vec<(Vec<u64>, Vec<u64>)> = Vec::new();
    for (p, a) in k.params.iter().zip(&t.args) {
        if let (ParamKind::Tile { access, shape, .. }, Arg::Region(r)) = (&p.kind, a) {
            let name = r.tensor.name.clone();
            let whole = tensor_extents(module, bindings, &name);
            if access.reads() {
                reads.insert(name.clone());
                read_extents.push((region_extents(bindings, r, &whole, shape), whole.clone()));
            }
            if access.writes() {
                in_place |= access.reads();
                writes.insert(name);
            }
        }
    }
    // A tensor updated in place accumulates across tasks: count the whole tensors read.
    let extents: Vec<Vec<u64>> = read_extents
        .into_iter()
        .map(|(r, w)| if in_place { w } else { r })
        .collect();
    let builtin = if k.body.is_some() {
        None
    } else {
        let n = k.name.name.as_str();
        Some(aliases.get(n).map_or(n, String::as_str))
    };
    Some(TaskTerms {
        writes,
        reads,
        terms: accumulation(builtin, &extents),
    })
}

/// Built-ins that reduce nothing: every result element is a fixed, short computation of its
/// inputs (element-wise, broadcasts, copies, selections, RoPE's rotation).
const ELEMENT_WISE: &[&str] = &[
    "empty",
    "fill",
    "copy",
    "add",
    "scale",
    "accumulate",
    "counter",
    "sub",
    "mul",
    "div",
    "max",
    "min",
    "add_row",
    "sub_row",
    "mul_row",
    "div_row",
    "max_row",
    "min_row",
    "add_col",
    "sub_col",
    "mul_col",
    "div_col",
    "max_col",
    "min_col",
    "exp",
    "rsqrt",
    "relu",
    "silu",
    "gelu",
    "swiglu",
    "row_max",
    "rope",
    "add_scalar",
    "gather_rows",
    "bucket_by_index",
    "topk",
];

/// Built-ins that reduce along the rows of their first region (its last extent): matrix
/// products (`[M, K]` times `[K, N]` or its transpose) and row operations.
const ROW_REDUCING: &[&str] = &[
    "matmul",
    "matmul_acc",
    "matmul_bt",
    "matmul_bt_acc",
    "row_sum",
    "row_mean",
    "softmax",
    "rmsnorm",
];

/// Attention built-ins: queries (first region, `d` columns) against keys (second region, `S`
/// rows): a dot product of `d` terms, then a weighted sum of `S` values.
const ATTENTION: &[&str] = &["attn_decode_chunk", "attn_causal"];

/// The reduction length `K` of a task of built-in `builtin` (`None`: a kernel with a body)
/// reading regions of `extents` (outermost first).
pub fn accumulation(builtin: Option<&str>, extents: &[Vec<u64>]) -> u64 {
    let last = |i: usize| extents.get(i).and_then(|e| e.last().copied());
    let rows = |i: usize| {
        extents
            .get(i)
            .map(|e| e.iter().rev().skip(1).product::<u64>())
    };
    let k = match builtin {
        Some(b) if ELEMENT_WISE.contains(&b) => Some(1),
        Some(b) if ROW_REDUCING.contains(&b) => last(0),
        Some(b) if ATTENTION.contains(&b) => last(0).zip(rows(1)).map(|(d, s)| d + s),
        _ => None,
    };
    k.unwrap_or_else(|| {
        // Unknown: the two largest extents read (one contraction, or two in sequence).
        let mut all: Vec<u64> = extents.iter().flatten().copied().collect();
        all.sort_unstable_by(|a, b| b.cmp(a));
        all.iter().take(2).sum()
    })
    .max(1)
}

/// The declared extents of tensor `name` under `bindings` (0 where one does not evaluate).
fn tensor_extents(module: &Module, bindings: &Bindings, name: &str) -> Vec<u64> {
    let Some(d) = module.tensors.iter().find(|d| d.name.name == name) else {
        return Vec::new();
    };
    d.shape
        .iter()
        .map(|e| eval_extent(bindings, e).unwrap_or(0))
        .collect()
}

/// The extents of region `r` of a tensor of extents `whole`, as the kernel parameter of
/// `shape` sees them: the parameter's declared extents where it has them, else the region's
/// (a bare index is 1), else the tensor's.
fn region_extents(
    bindings: &Bindings,
    r: &pto_wsp::ir::Region,
    whole: &[u64],
    shape: &[Option<u64>],
) -> Vec<u64> {
    let mut ext: Vec<u64> = if r.dims.is_empty() {
        whole.to_vec()
    } else {
        r.dims
            .iter()
            .enumerate()
            .map(|(i, d)| match &d.size {
                None => 1,
                Some(e) => {
                    eval_extent(bindings, e).unwrap_or_else(|| whole.get(i).copied().unwrap_or(0))
                }
            })
            .collect()
    };
    // The parameter's declared extents, innermost aligned.
    let n = ext.len();
    for (j, s) in shape.iter().rev().enumerate() {
        if let (Some(v), Some(i)) = (s, n.checked_sub(j + 1)) {
            ext[i] = *v;
        }
    }
    ext
}

/// `e` under `bindings`' symbols, when it is a non-negative integer (a loop variable or
/// anything else unbound: `None`).
fn eval_extent(bindings: &Bindings, e: &pto_wsp::ir::Expr) -> Option<u64> {
    let env = |n: &str| bindings.symbols.get(n).copied();
    match pto_wsp::ir::eval::eval(e, &env).ok()? {
        Value::I64(v) => u64::try_from(v).ok(),
        Value::U64(v) => Some(v),
        _ => None,
    }
}

/// The RMS of `want` over the elements either side changed from `input` (every finite element
/// when none changed, or when the input is not known).
pub fn written_rms(want: &[f64], got: &[f64], input: Option<&[f64]>) -> f64 {
    let rms = |it: &mut dyn Iterator<Item = f64>| {
        let (mut s, mut n) = (0f64, 0usize);
        for x in it.filter(|x| x.is_finite()) {
            s += x * x;
            n += 1;
        }
        (n > 0).then(|| (s / n as f64).sqrt())
    };
    let changed = input.filter(|i| i.len() == want.len() && got.len() == want.len());
    if let Some(i) = changed {
        let same = |a: f64, b: f64| a == b || a.is_nan() && b.is_nan();
        let mut it = want
            .iter()
            .zip(got)
            .zip(i)
            .filter(|((w, g), x)| !same(**w, **x) || !same(**g, **x))
            .map(|((w, _), _)| *w);
        if let Some(r) = rms(&mut it) {
            return r;
        }
    }
    rms(&mut want.iter().copied()).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_is_the_rms_of_the_changed_elements() {
        let input = [1.0, 1.0, 1.0, 1.0];
        let want = [3.0, 4.0, 1.0, 1.0];
        let got = [3.0, 4.0, 1.0, 1.0];
        let r = written_rms(&want, &got, Some(&input));
        assert!((r - (12.5f64).sqrt()).abs() < 1e-12, "{r}");
        // Nothing changed: every element counts.
        assert!((written_rms(&input, &input, Some(&input)) - 1.0).abs() < 1e-12);
        // An element only the simulator changed counts too.
        let got2 = [3.0, 4.0, 2.0, 1.0];
        let r2 = written_rms(&want, &got2, Some(&input));
        assert!((r2 - (26.0f64 / 3.0).sqrt()).abs() < 1e-12, "{r2}");
    }
}

#[cfg(test)]
mod derivation_tests {
    use super::*;
    use crate::cmd::run::ascend::{Compared, floor};

    /// A SwiGLU feed-forward in tiles, as `llama_block` writes it: Gate and Up are products
    /// over `hidden` = 256 (through an alias), Act their SwiGLU, Z a product of an `f16` copy.
    const FFN: &str = "tensor X: f32[32, hidden];\ntensor Wg: f16[hidden, 128];\n\
        tensor Wu: f16[hidden, 128];\ntensor Gate: f32[32, 128];\ntensor Up: f32[32, 128];\n\
        tensor Act: f32[32, 128];\ntensor Act16: f16[32, 128];\ntensor Wd: f16[128, 8];\n\
        tensor Z: f32[32, 8];\ntensor V: f32[32, 128];\n\
        kernel proj(in x: f32[16, ?], in w: f16[?, 64], out y: f32[16, 64]);\n\
        kernel swiglu(in g: f32[16, 64], in u: f32[16, 64], out y: f32[16, 64]);\n\
        kernel copy(in a: f32[32, 128], out b: f16[32, 128]);\n\
        kernel matmul(in a: f16[32, 128], in b: f16[128, 8], out c: f32[32, 8]);\n\
        kernel add(in a: f32[32, 128], in b: f32[32, 128], out c: f32[32, 128]);\n\
        axis T = dense(2);\naxis F = dense(2);\n\
        workload w() {\n    parallel_for t in T {\n        parallel_for f in F {\n            \
        task proj(X[t * 16 +: 16, 0 +: hidden], Wg[0 +: hidden, f * 64 +: 64], Gate[t * 16 +: 16, f * 64 +: 64]);\n            \
        task proj(X[t * 16 +: 16, 0 +: hidden], Wu[0 +: hidden, f * 64 +: 64], Up[t * 16 +: 16, f * 64 +: 64]);\n            \
        task swiglu(Gate[t * 16 +: 16, f * 64 +: 64], Up[t * 16 +: 16, f * 64 +: 64], Act[t * 16 +: 16, f * 64 +: 64]);\n        \
        }\n    }\n    task copy(Act[0 +: 32, 0 +: 128], Act16[0 +: 32, 0 +: 128]);\n    task matmul(Act16[0 +: 32, 0 +: 128], Wd[0 +: 128, 0 +: 8], Z[0 +: 32, 0 +: 8]);\n    task add(X[0 +: 32, 0 +: 128], X[0 +: 32, 0 +: 128], V[0 +: 32, 0 +: 128]);\n}\n";

    fn derived() -> BTreeMap<String, Tolerance> {
        let module = pto_wsp::ir::parse(&FFN.replace("hidden", "256")).expect("parses");
        let aliases = BTreeMap::from([("proj".to_string(), "matmul".to_string())]);
        tolerances(&module, &aliases, &Bindings::new(), floor)
    }

    #[test]
    fn a_product_gets_k_eps_and_swiglu_adds_its_inputs() {
        let d = derived();
        let eps = 2f64.powi(-23);
        // Gate: one product over hidden = 256, above the f32 floor of 1e-5.
        assert_eq!(d["Gate"].terms, 256);
        assert_eq!(d["Gate"].value, 256.0 * eps);
        // Act: SwiGLU's own rounding plus Gate's and Up's.
        assert_eq!(d["Act"].terms, 1);
        assert_eq!(d["Act"].value, eps + 2.0 * 256.0 * eps);
        let why = d["Act"].why().expect("raised above the floor");
        assert!(why.contains("`Gate`") && why.contains("`Up`"), "{why}");
        // V: element-wise on inputs only: the floor.
        assert_eq!(d["V"].value, 1e-5);
        assert_eq!(d["V"].why(), None);
    }

    #[test]
    fn an_f32_product_of_a_written_f16_tensor_inherits_its_rounding() {
        let d = derived();
        // Act16 is f16: its floor, 1e-2, is above Act's derived tolerance.
        assert_eq!(d["Act16"].value, 1e-2);
        // Z = Act16 · Wd: 128 terms plus Act16's 1e-2 (the f16 step it carries).
        let eps = 2f64.powi(-23);
        assert_eq!(d["Z"].value, 128.0 * eps + 1e-2);
        assert!(d["Z"].why().expect("derived").contains("`Act16`"));
    }

    #[test]
    fn the_reduction_length_follows_the_bindings_and_in_place_updates_count_whole_tensors() {
        let text = FFN.replace("hidden", "n");
        let module = pto_wsp::ir::parse(&format!("symbol n: i64;\n{text}")).expect("parses");
        let aliases = BTreeMap::from([("proj".to_string(), "matmul".to_string())]);
        let mut b = Bindings::new();
        b.symbols.insert("n".into(), Value::I64(1024));
        let d = tolerances(&module, &aliases, &b, floor);
        assert_eq!(d["Gate"].terms, 1024);
        // An accumulation across tasks (`inout`) counts the whole tensors read.
        let acc = "tensor A: f32[16, 512];\ntensor B: f32[512, 16];\ntensor C: f32[16, 16];\n\
            kernel matmul_acc(in a: f32[16, 64], in b: f32[64, 16], inout c: f32[16, 16]);\n\
            axis K = dense(8);\nworkload w() {\n    for_each k in K {\n        \
            task matmul_acc(A[0 +: 16, k * 64 +: 64], B[k * 64 +: 64, 0 +: 16], C[0 +: 16, 0 +: 16]);\n    }\n}\n";
        let module = pto_wsp::ir::parse(acc).expect("parses");
        let d = tolerances(&module, &BTreeMap::new(), &Bindings::new(), floor);
        assert_eq!(d["C"].terms, 512);
    }

    #[test]
    fn a_result_perturbed_beyond_the_derived_bound_fails_and_within_it_passes() {
        let tol = derived()["Act"].clone();
        let want: Vec<f64> = (0..64)
            .map(|i| ((i * 37 % 11) as f64 - 5.0) / 3.0)
            .collect();
        let rms = (want.iter().map(|v| v * v).sum::<f64>() / want.len() as f64).sqrt();
        let compare = |by: f64| {
            let mut got = want.clone();
            got[17] += by * tol.value * rms;
            Compared::with_input("Act", DType::F32, &want, &got, None, (tol.value, tol.why()))
        };
        assert!(compare(0.9).passed);
        let beyond = compare(1.1);
        assert!(!beyond.passed);
        assert!(beyond.line().ends_with("FAIL"), "{}", beyond.line());
        // The case the derivation is for: a bound above the f32 floor.
        assert!(tol.value > 1e-5);
    }
}
