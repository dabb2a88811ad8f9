//! How closely a tensor the workload writes must agree between `a2a3sim` and `cpu_sim`.
//!
//! Why: the two sides run the same algorithms in `f32` with different summation orders and
//! `exp` / `1/√x`, so each written value differs by some roundings. A fixed multiple of the
//! tensor's RMS is the measure, but two things about a workload change what "the tensor's scale"
//! and "its precision" are:
//! - **Scale: the elements the run wrote.** A tensor the tasks write only in part (a buffer of
//!   per-expert rows, most of them unused) keeps its input elsewhere, the same on both sides; its
//!   RMS over every element would say more about the unused part than about what was computed.
//!   The scale is the RMS of cpu_sim's values over the elements either side changed (all of
//!   them when none changed).
//! - **Precision: the least precise tensor it was computed from.** A tensor computed from an
//!   `f16` / `bf16` tensor the workload itself wrote inherits that tensor's rounding: where the
//!   two sides' `f32` values straddle an `f16` rounding boundary they round to neighbours one
//!   `f16` step apart, and every later product carries that step. Such a tensor is compared at
//!   the `f16` tolerance, and the report names the tensor it inherits from. Tensors given as
//!   inputs are the same on both sides and pass on no difference.
//!
//! Promises: [`derived_from`] is conservative (every task statement of every workload and
//! process counts, whatever the control flow), so a tensor's tolerance is never tighter than its
//! inputs' precision allows; integers are always compared exactly.

use pto_wsp::ir::{Arg, DType, Module, ParamKind, Stmt, StmtKind};
use std::collections::{BTreeMap, BTreeSet};

/// For each tensor some task writes, the tensors it is computed from: those read by a task that
/// writes it, and what those are computed from in turn (the transitive closure). A tensor a task
/// updates (`inout`) is computed from itself.
pub fn derived_from(module: &Module) -> BTreeMap<String, BTreeSet<String>> {
    let mut direct: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut visit = |body: &[Stmt]| collect(module, body, &mut direct);
    for w in &module.workloads {
        visit(&w.body);
    }
    for p in &module.pipelines {
        for proc_ in &p.processes {
            visit(&proc_.body);
        }
    }
    // Transitive closure (the sets only grow, over a finite set of tensors).
    let mut closed = direct.clone();
    loop {
        let mut changed = false;
        let keys: Vec<String> = closed.keys().cloned().collect();
        for t in keys {
            let mut add = BTreeSet::new();
            for s in &closed[&t] {
                if let Some(more) = closed.get(s) {
                    add.extend(more.iter().cloned());
                }
            }
            let set = closed.get_mut(&t).expect("key taken from the map");
            let before = set.len();
            set.extend(add);
            changed |= set.len() != before;
        }
        if !changed {
            return closed;
        }
    }
}

/// Adds every task statement's read → written pairs under `body`.
fn collect(module: &Module, body: &[Stmt], out: &mut BTreeMap<String, BTreeSet<String>>) {
    for s in body {
        match &s.kind {
            StmtKind::Loop { body, .. }
            | StmtKind::Select { body, .. }
            | StmtKind::While { body, .. }
            | StmtKind::Consume { body, .. }
            | StmtKind::Combine(body)
            | StmtKind::Sequential(body) => collect(module, body, out),
            StmtKind::Cond {
                then_body,
                else_body,
                ..
            } => {
                collect(module, then_body, out);
                collect(module, else_body, out);
            }
            StmtKind::Task(t) => {
                let Some(k) = module.kernels.iter().find(|k| k.name == t.kernel) else {
                    continue;
                };
                let (mut reads, mut writes) = (BTreeSet::new(), BTreeSet::new());
                for (p, a) in k.params.iter().zip(&t.args) {
                    if let (ParamKind::Tile { access, .. }, Arg::Region(r)) = (&p.kind, a) {
                        let name = r.tensor.name.clone();
                        if access.reads() {
                            reads.insert(name.clone());
                        }
                        if access.writes() {
                            writes.insert(name);
                        }
                    }
                }
                for w in writes {
                    out.entry(w).or_default().extend(reads.iter().cloned());
                }
            }
            _ => {}
        }
    }
}

/// The tolerance of a float tensor `name` of type `dtype` (a multiple of its scale): `own` for
/// its type, raised to `f16_tol` when it is computed from an `f16` / `bf16` tensor the workload
/// writes; with the tensor it inherits that precision from, if any.
pub fn tolerance_of(
    module: &Module,
    derived: &BTreeMap<String, BTreeSet<String>>,
    name: &str,
    own: f64,
    f16_tol: f64,
) -> (f64, Option<String>) {
    let low = derived.get(name).and_then(|from| {
        from.iter()
            .filter(|s| s.as_str() != name && derived.contains_key(s.as_str()))
            .find(|s| {
                module
                    .tensors
                    .iter()
                    .any(|d| d.name.name == **s && matches!(d.dtype, DType::F16 | DType::Bf16))
            })
            .cloned()
    });
    match low {
        Some(s) if f16_tol > own => (f16_tol, Some(s)),
        _ => (own, None),
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

    #[test]
    fn a_tensor_computed_from_a_written_f16_tensor_gets_the_f16_tolerance() {
        let text = "tensor X: f16[16, 8];\ntensor N: f16[16, 8];\ntensor W: f16[8, 8];\n\
                    tensor Z: f32[16, 8];\ntensor V: f32[16, 8];\n\
                    kernel copy(in a: f16[16, 8], out b: f16[16, 8]);\n\
                    kernel matmul(in a: f16[16, 8], in b: f16[8, 8], out c: f32[16, 8]);\n\
                    workload w() {\n    task copy(X[0 +: 16, 0 +: 8], N[0 +: 16, 0 +: 8]);\n    \
                    task matmul(N[0 +: 16, 0 +: 8], W[0 +: 8, 0 +: 8], Z[0 +: 16, 0 +: 8]);\n    \
                    task matmul(X[0 +: 16, 0 +: 8], W[0 +: 8, 0 +: 8], V[0 +: 16, 0 +: 8]);\n}\n";
        let module = pto_wsp::ir::parse(text).expect("parses");
        let d = derived_from(&module);
        assert_eq!(
            tolerance_of(&module, &d, "Z", 1e-5, 1e-2),
            (1e-2, Some("N".to_string()))
        );
        // V reads only inputs (X and W are the same on both sides).
        assert_eq!(tolerance_of(&module, &d, "V", 1e-5, 1e-2), (1e-5, None));
    }
}
