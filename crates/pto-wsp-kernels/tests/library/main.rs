//! The kernel library (`pto_wsp_kernels::library`) against the Rust built-ins: every built-in's
//! tile-instruction definition, instantiated per element-type signature, run by our CPU
//! executor on the same inputs as the built-in, on random and edge shapes (one row, widths not a
//! multiple of the tile, several row and column chunks, empty regions), with edge values (rows of
//! `-inf`, large magnitudes). Each comparison prints its max error (`--nocapture`) and asserts a
//! bound stated per kernel family in [`bound`]; `summary` tests print one line per (kernel,
//! element types) with the largest error seen.
//!
//! Errors are "normwise": max |library − built-in| / max |built-in| over an output tensor (1 when
//! the built-in's output is all zero), so a bound is relative to the output's scale. Integer
//! outputs and the exact family must match bit for bit.

// Contexts are made here directly (single-threaded), which is `unsafe` by contract.
#![allow(unsafe_code)]

mod attention;
mod elementwise;
mod index;
mod matmul;
mod rows;

use half::{bf16, f16};
use pto_wsp_ir::task_io::{Region, TaskIo};
use pto_wsp_ir::{Access, Bindings, DType, Module, parse};
use pto_wsp_kernels::{KernelError, KernelRegistry, TaskContext, TensorStore, library};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// How a region of a case is filled.
#[derive(Clone, Debug)]
pub(crate) enum Fill {
    /// Uniform in `[-scale, scale)`.
    Random(f64),
    /// Given values (row-major; converted to the tensor's type).
    Values(Vec<f64>),
    /// Left as zeros (outputs).
    Zero,
}

/// One region of a case: element type, rows × cols, access, contents.
#[derive(Clone, Debug)]
pub(crate) struct Reg {
    pub(crate) dtype: DType,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) access: Access,
    pub(crate) fill: Fill,
}

pub(crate) fn reg(dtype: DType, rows: usize, cols: usize, access: Access, fill: Fill) -> Reg {
    Reg {
        dtype,
        rows,
        cols,
        access,
        fill,
    }
}

pub(crate) fn input(dtype: DType, rows: usize, cols: usize) -> Reg {
    reg(dtype, rows, cols, Access::In, Fill::Random(1.0))
}

pub(crate) fn output(dtype: DType, rows: usize, cols: usize) -> Reg {
    reg(dtype, rows, cols, Access::Out, Fill::Zero)
}

/// A scalar parameter of a case: its declared type and value bits.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scalar {
    F(f64),
    I(i64),
}

/// The family of a kernel: how close the library must be to the built-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// One correctly rounded operation per element (or a copy): bit for bit.
    Exact,
    /// Transcendentals (`exp`: the fast exp against the standard library's): `2e-7` relative
    /// per element, normwise `1e-6`.
    Transcendental,
    /// Sums in another order (reductions, norms, products, attention): normwise `1e-5`.
    Sum,
}

/// The bound on the normwise error for a family and the output's element type: the family's
/// `f32` bound plus one unit of the output type's rounding (`2^-10` for `f16`, `2^-7` for
/// `bf16`) when the family is not exact (two `f32` results an ulp apart may round apart).
pub(crate) fn bound(family: Family, out: DType) -> f64 {
    let base = match family {
        Family::Exact => return 0.0,
        Family::Transcendental => 1e-6,
        Family::Sum => 1e-5,
    };
    base + match out {
        DType::F16 => 1.0 / 1024.0,
        DType::Bf16 => 1.0 / 128.0,
        _ => 0.0,
    }
}

/// Largest error per (kernel, element types), for the summaries.
static SEEN: Mutex<BTreeMap<String, f64>> = Mutex::new(BTreeMap::new());

/// SplitMix64.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// The module text of a case: one tensor per region (`T0`, `T1`, ...), the user-style kernel
/// `k` without a body, and one task over whole tensors.
fn module_text(regions: &[Reg], scalars: &[(&str, Scalar)]) -> String {
    let mut t = String::new();
    let mut params = Vec::new();
    let mut args = Vec::new();
    for (i, r) in regions.iter().enumerate() {
        t += &format!("tensor T{i}: {}[{}, {}];\n", r.dtype, r.rows, r.cols);
        params.push(format!("{} r{i}: {}[?, ?]", r.access, r.dtype));
        args.push(format!("T{i}[0 +: {}, 0 +: {}]", r.rows, r.cols));
    }
    for (name, v) in scalars {
        match v {
            Scalar::F(x) => {
                params.push(format!("{name}: f64"));
                args.push(format!("{x:?}"));
            }
            Scalar::I(x) => {
                params.push(format!("{name}: i64"));
                args.push(format!("{x}"));
            }
        }
    }
    t += &format!("kernel k({});\n", params.join(", "));
    t += &format!("workload main() {{ task k({}); }}\n", args.join(", "));
    t
}

fn store(module: &Module, regions: &[Reg], seed: u64) -> TensorStore {
    let mut s = TensorStore::new(module, &Bindings::new()).unwrap();
    let mut rng = Rng(seed);
    for (i, r) in regions.iter().enumerate() {
        let n = r.rows * r.cols;
        let vals: Vec<f64> = match &r.fill {
            Fill::Random(scale) => (0..n).map(|_| rng.unit() * scale).collect(),
            Fill::Values(v) => v.clone(),
            Fill::Zero => vec![0.0; n],
        };
        put(&mut s, &format!("T{i}"), r.dtype, &vals);
    }
    s
}

fn put(s: &mut TensorStore, name: &str, dtype: DType, v: &[f64]) {
    match dtype {
        DType::F32 => s
            .write(name, &v.iter().map(|&x| x as f32).collect::<Vec<_>>())
            .unwrap(),
        DType::F16 => s
            .write(
                name,
                &v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>(),
            )
            .unwrap(),
        DType::Bf16 => s
            .write(
                name,
                &v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>(),
            )
            .unwrap(),
        DType::I32 => s
            .write(name, &v.iter().map(|&x| x as i32).collect::<Vec<_>>())
            .unwrap(),
        DType::U32 => s
            .write(name, &v.iter().map(|&x| x as u32).collect::<Vec<_>>())
            .unwrap(),
        DType::I64 => s
            .write(name, &v.iter().map(|&x| x as i64).collect::<Vec<_>>())
            .unwrap(),
        DType::U64 => s
            .write(name, &v.iter().map(|&x| x as u64).collect::<Vec<_>>())
            .unwrap(),
        DType::U8 => s
            .write(name, &v.iter().map(|&x| x as u8).collect::<Vec<_>>())
            .unwrap(),
    }
}

/// Tensor `name` as `f64`.
fn get(s: &TensorStore, name: &str, dtype: DType) -> Vec<f64> {
    match dtype {
        DType::F32 => s
            .read::<f32>(name)
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect(),
        DType::F16 => s
            .read::<f16>(name)
            .unwrap()
            .iter()
            .map(|x| x.to_f64())
            .collect(),
        DType::Bf16 => s
            .read::<bf16>(name)
            .unwrap()
            .iter()
            .map(|x| x.to_f64())
            .collect(),
        DType::I32 => s
            .read::<i32>(name)
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect(),
        DType::U32 => s
            .read::<u32>(name)
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect(),
        DType::I64 => s
            .read::<i64>(name)
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect(),
        DType::U64 => s
            .read::<u64>(name)
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect(),
        DType::U8 => s
            .read::<u8>(name)
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect(),
    }
}

fn io_list(regions: &[Reg]) -> Vec<TaskIo> {
    regions
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let region = Region::new(i as u32, &[0, 0], &[r.rows as i64, r.cols as i64]).unwrap();
            TaskIo::new(region, r.access)
        })
        .collect()
}

fn bits(scalars: &[(&str, Scalar)]) -> Vec<u64> {
    scalars
        .iter()
        .map(|(_, v)| match v {
            Scalar::F(x) => x.to_bits(),
            Scalar::I(x) => *x as u64,
        })
        .collect()
}

/// Runs kernel `run` over a fresh store of the case.
fn run_on(
    module: &Module,
    regions: &[Reg],
    seed: u64,
    params: &[u64],
    run: &dyn Fn(&TaskContext<'_>) -> Result<(), KernelError>,
) -> (TensorStore, Result<(), KernelError>) {
    let s = store(module, regions, seed);
    let io = io_list(regions);
    // SAFETY: one context at a time on this thread; the store is touched only through it while
    // it lives.
    let ctx = unsafe { TaskContext::new(&s, 0, 0, params, &io) };
    let r = run(&ctx);
    drop(ctx);
    (s, r)
}

/// What [`check`] found.
pub(crate) struct Outcome {
    /// The errors of both sides, when they failed.
    pub(crate) failed: Option<(String, String)>,
}

/// Runs built-in `builtin` and its library instance on the same inputs, compares every tensor
/// either writes, prints and records the largest normwise error, and asserts it within
/// `bound(family, ...)` (or both sides failing). Returns the outcome.
pub(crate) fn check(
    builtin: &str,
    family: Family,
    regions: &[Reg],
    scalars: &[(&str, Scalar)],
    seed: u64,
) -> Outcome {
    let text = module_text(regions, scalars);
    let module = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let user = module.kernel("k").unwrap();
    let types: Vec<&str> = regions.iter().map(|r| r.dtype.keyword()).collect();
    let label = format!("{builtin}({})", types.join(", "));
    let shapes: Vec<String> = regions
        .iter()
        .map(|r| format!("{}x{}", r.rows, r.cols))
        .collect();
    let inst =
        library::instantiate(builtin, user).unwrap_or_else(|e| panic!("{label}: no instance: {e}"));
    let registry = KernelRegistry::with_builtins();
    let id = registry.lookup(builtin).unwrap();
    let params = bits(scalars);
    let (want, rw) = run_on(&module, regions, seed, &params, &|ctx| {
        registry.call(id, ctx)
    });
    let (got, rg) = run_on(&module, regions, seed, &params, &|ctx| {
        pto_wsp_kernels::lang::run_body(&inst, ctx)
    });
    match (rw, rg) {
        (Ok(()), Ok(())) => {}
        (Err(a), Err(b)) => {
            println!(
                "library {label} [{}]: both refuse: built-in: {a}; library: {b}",
                shapes.join(" ")
            );
            return Outcome {
                failed: Some((a.to_string(), b.to_string())),
            };
        }
        (a, b) => panic!(
            "{label} [{}]: built-in {a:?}, library {b:?}",
            shapes.join(" ")
        ),
    }
    let mut worst = 0.0f64;
    let mut out_type = DType::F32;
    for (i, r) in regions.iter().enumerate() {
        if !r.access.writes() {
            continue;
        }
        let name = format!("T{i}");
        let (w, g) = (get(&want, &name, r.dtype), get(&got, &name, r.dtype));
        let scale = w
            .iter()
            .filter(|x| x.is_finite())
            .fold(0.0f64, |a, &x| a.max(x.abs()));
        let scale = if scale == 0.0 { 1.0 } else { scale };
        for (j, (&a, &b)) in w.iter().zip(&g).enumerate() {
            if a.is_nan() || b.is_nan() || a.is_infinite() || b.is_infinite() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{label} [{}] {name}[{j}]: built-in {a}, library {b}",
                    shapes.join(" ")
                );
                continue;
            }
            let e = (a - b).abs() / scale;
            if e > worst {
                worst = e;
                out_type = r.dtype;
            }
        }
        if r.dtype.is_integer() || family == Family::Exact {
            assert!(
                w.iter()
                    .zip(&g)
                    .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())),
                "{label} [{}] {name}: not bit-identical (max error {worst:e})",
                shapes.join(" ")
            );
        }
    }
    let b = bound(family, out_type);
    println!(
        "library {label} [{}]: max error {worst:.3e} (bound {b:.1e})",
        shapes.join(" ")
    );
    assert!(
        worst <= b,
        "{label} [{}]: max error {worst:e} over the bound {b:e}",
        shapes.join(" ")
    );
    let mut seen = SEEN.lock().unwrap();
    let e = seen.entry(label).or_insert(0.0);
    *e = e.max(worst);
    Outcome { failed: None }
}

/// Prints the largest error seen per (kernel, element types) of the kernels named `prefix...`.
pub(crate) fn summary(builtins: &[&str]) {
    let seen = SEEN.lock().unwrap();
    for (label, e) in seen.iter() {
        if builtins.iter().any(|b| label.starts_with(&format!("{b}("))) {
            println!("library summary: {label}: max error {e:.3e}");
        }
    }
}

/// The float element types the tests run each float region at.
pub(crate) const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];

/// Row × column shapes: one element, one row of widths around the 512-column tile, several
/// row chunks of ragged widths, and one shape crossing several row and column chunks.
pub(crate) const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (1, 7),
    (1, 63),
    (1, 513),
    (1, 1025),
    (5, 65),
    (17, 511),
    (33, 2049),
];

#[test]
fn every_builtin_has_a_library_definition() {
    let missing: Vec<&str> = pto_wsp_kernels::builtins::NAMES
        .iter()
        .copied()
        .filter(|n| !library::defines(n))
        .collect();
    assert!(missing.is_empty(), "no library definition: {missing:?}");
}

#[test]
fn the_library_parses_and_every_definition_names_its_types() {
    let defs = library::definitions();
    assert!(defs.len() >= 25, "{}", defs.len());
    for d in defs {
        assert!(!d.builtins.is_empty(), "{}:{}", d.file, d.line);
    }
}

#[test]
fn a_mixed_product_without_a_definition_is_refused_naming_the_types_and_the_definitions() {
    // A bf16 x f32 product of 40 rows: the vector path takes at most 16 rows, which its check
    // reports; an integer operand has no definition at all.
    let text = "kernel proj(in x: i32[?, ?], in w: f16[?, ?], out y: f32[?, ?]);\n";
    let m = parse(text).unwrap();
    let err = library::instantiate("matmul", m.kernel("proj").unwrap()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "kernel `proj` (built-in `matmul`): no tile-instruction definition for its 3 region(s) of element types (i32, f16, f32)"
        ),
        "{msg}"
    );
    assert!(msg.contains("matmul.wsp:"), "{msg}");
}

#[test]
fn an_out_region_the_definition_updates_is_refused_as_the_builtin_refuses_it() {
    let text = "kernel acc(in x: f32[?, ?], out y: f32[?, ?]);\n";
    let m = parse(text).unwrap();
    let err = library::instantiate("accumulate", m.kernel("acc").unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `acc` (built-in `accumulate`): region 1 (`y`) is declared `out`, but the kernel \
         reads and updates it: declare it `inout`"
    );
}
