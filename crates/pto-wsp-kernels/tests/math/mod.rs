//! The built-in tile kernels against independent naive references.
//!
//! Every reference is written plainly here, in `f64`, from the exact input values (random
//! inputs from fixed seeds, drawn by `TensorStore::fill_random` on each type's grid so that every
//! input is exact in its storage type). Tolerances, stated once:
//!
//! - `f32` results: `1e-5` relative to the natural scale of the result — `|want|` for one
//!   operation, `Σ|terms|` for a sum or dot product (the relative error of a sum is unbounded
//!   under cancellation; its error relative to the sum of magnitudes is what rounding bounds:
//!   at most `n·2^-24` for `n` terms, ~`1.5e-5` at `n = 256`, and far less in practice).
//!   Single correctly rounded operations (`add` … `min`, `max` reductions) are checked exactly.
//! - `f16` / `bf16` results: the `f32` computation's tolerance plus one rounding into the
//!   output type, its unit roundoff `2^-11` (`f16`) or `2^-8` (`bf16`), relative to `|want|`;
//!   plus half the smallest `f16` subnormal spacing (`2^-25`) absolute for `f16`, whose
//!   subnormals have coarser relative spacing. Inputs of those types are exact in `f32`, and a
//!   product of two is exact in `f32` (11 + 11 significant bits), so low-precision inputs add
//!   no error of their own: the `f32` accumulator is what `f16`-in / `f32`-acc promises.

mod attention;
mod costs;
mod elementwise;
mod index;
mod lang;
mod matmul;
mod moe;
mod robust;
mod rows;
mod topk;

use half::{bf16, f16};
use pto_wsp_ir::task_io::TaskIo;
use pto_wsp_ir::{Access, Bindings, DType};
use pto_wsp_kernels::{KernelError, KernelRegistry, TensorStore};

use crate::{ctx, io, module, run};

/// A store of `text`'s tensors filled at random from `seed`.
pub(crate) fn store(text: &str, seed: u64) -> TensorStore {
    let mut s = TensorStore::new(&module(text), &Bindings::new()).unwrap();
    s.fill_random(seed);
    s
}

pub(crate) fn dtype(s: &TensorStore, name: &str) -> DType {
    s.info(s.index_of(name).expect("tensor")).dtype
}

/// Tensor `name` (any float type) as `f64`, row-major.
pub(crate) fn get(s: &TensorStore, name: &str) -> Vec<f64> {
    match dtype(s, name) {
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
        other => panic!("{name} is {other}, not a float tensor"),
    }
}

/// Writes `v` into float tensor `name`, rounded to its type.
pub(crate) fn put(s: &mut TensorStore, name: &str, v: &[f64]) {
    match dtype(s, name) {
        DType::F32 => {
            let d: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            s.write(name, &d).unwrap()
        }
        DType::F16 => {
            let d: Vec<f16> = v.iter().map(|&x| f16::from_f64(x)).collect();
            s.write(name, &d).unwrap()
        }
        DType::Bf16 => {
            let d: Vec<bf16> = v.iter().map(|&x| bf16::from_f64(x)).collect();
            s.write(name, &d).unwrap()
        }
        other => panic!("{name} is {other}, not a float tensor"),
    }
}

/// The whole of tensor `name` as one region.
pub(crate) fn whole(s: &TensorStore, name: &str, access: Access) -> TaskIo {
    let t = s.index_of(name).expect("tensor");
    let shape: Vec<i64> = s.info(t).shape.iter().map(|&d| d as i64).collect();
    io(t, &vec![0; shape.len()], &shape, access)
}

/// Region `start +: size` of tensor `name`.
pub(crate) fn part(
    s: &TensorStore,
    name: &str,
    start: &[i64],
    size: &[i64],
    access: Access,
) -> TaskIo {
    io(s.index_of(name).expect("tensor"), start, size, access)
}

/// Base relative tolerance of `f32` results.
pub(crate) const F32_TOL: f64 = 1e-5;

/// (relative tolerance, absolute floor) of a result stored as `out`, computed in `f32` with
/// relative tolerance `base` (see the module docs).
pub(crate) fn tol(out: DType, base: f64) -> (f64, f64) {
    match out {
        DType::F16 => (base + 1.0 / 2048.0, 1.0 / (1u64 << 25) as f64),
        DType::Bf16 => (base + 1.0 / 256.0, 0.0),
        _ => (base, 0.0),
    }
}

/// Asserts `|got − want| ≤ rel · scale + floor` elementwise; NaN matches NaN and infinities
/// must be equal.
pub(crate) fn assert_close(
    what: &str,
    got: &[f64],
    want: &[f64],
    scale: &[f64],
    (rel, floor): (f64, f64),
) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, ((&g, &w), &sc)) in got.iter().zip(want).zip(scale).enumerate() {
        if w.is_nan() {
            assert!(g.is_nan(), "{what}[{i}]: got {g}, want NaN");
            continue;
        }
        if w.is_infinite() {
            assert_eq!(g, w, "{what}[{i}]");
            continue;
        }
        let bound = rel * sc.abs() + floor;
        assert!(
            (g - w).abs() <= bound,
            "{what}[{i}]: got {g}, want {w} (error {:e} > bound {bound:e})",
            (g - w).abs()
        );
    }
}

/// Asserts `got` equals `want` rounded to `out` (a single correctly rounded `f32` operation,
/// stored once).
pub(crate) fn assert_rounded(what: &str, got: &[f64], want: &[f64], out: DType) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let w32 = w as f32;
        let expect = match out {
            DType::F16 => f16::from_f32(w32).to_f64(),
            DType::Bf16 => bf16::from_f32(w32).to_f64(),
            _ => w32 as f64,
        };
        assert!(
            g == expect || (g.is_nan() && expect.is_nan()),
            "{what}[{i}]: got {g}, want {expect} ({w} rounded)"
        );
    }
}

/// Runs `name` expecting an error whose message contains every needle; returns it.
pub(crate) fn expect_err(
    reg: &KernelRegistry,
    s: &TensorStore,
    name: &str,
    params: &[u64],
    list: &[TaskIo],
    needles: &[&str],
) -> KernelError {
    let err = run(reg, s, name, params, list).expect_err("the kernel should refuse");
    let msg = err.to_string();
    for n in needles {
        assert!(msg.contains(n), "`{name}` error {msg:?} lacks {n:?}");
    }
    err
}

/// `f64` bits of `x`, as float parameters are passed.
pub(crate) fn f(x: f64) -> u64 {
    x.to_bits()
}

/// `i64` parameter.
pub(crate) fn i(x: i64) -> u64 {
    x as u64
}

/// A row-major `rows × cols` matrix of `f64`, for references.
pub(crate) struct Mat<'a> {
    pub(crate) data: &'a [f64],
    pub(crate) cols: usize,
}

impl Mat<'_> {
    pub(crate) fn at(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.cols + c]
    }
}
