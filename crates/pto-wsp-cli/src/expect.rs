//! `pto-wsp run --expect NAME=PATH.npy`: an output compared with the user's own golden file.
//!
//! Why: a user who brings data usually has a numpy or PyTorch reference of the result. The main
//! job checks itself against its `f64` reference; any other module is checked against a `.npy`
//! file the user wrote, with numpy's tolerance rule, so "are the numbers right" is one flag.
//!
//! Promises:
//! - [`Expectation::read`] reads and parses the file before anything runs (a missing or bad
//!   file fails at once, naming the flag and the file).
//! - [`Expectation::compare`] checks the shape against the tensor's exactly and compares every
//!   element as `numpy.isclose` does: `|actual − expected| ≤ atol + rtol·|expected|`, in `f64`.
//!   A NaN passes only where the golden has a NaN too; an infinity only where the golden has the
//!   same infinity. The golden may hold any numeric numpy type (`float64` included); for a
//!   `bf16` tensor a `<u2` golden is read as `bf16` bits, as `--input` does.
//! - The report line names the tensor, the file, the element count, the largest absolute and
//!   relative errors with the index of the worst element, how many elements are outside the
//!   tolerance, and `PASS` or `FAIL`.

use crate::CliError;
use half::{bf16, f16};
use pto_wsp::ir::DType;
use pto_wsp::kernels::TensorStore;
use pto_wsp::kernels::npy::{NpyArray, shape_text};
use std::path::PathBuf;

/// numpy's default relative tolerance (`numpy.isclose`).
pub const DEFAULT_RTOL: f64 = 1e-5;
/// numpy's default absolute tolerance (`numpy.isclose`).
pub const DEFAULT_ATOL: f64 = 1e-8;

/// One `--expect NAME=PATH.npy`, read.
#[derive(Debug)]
pub struct Expectation {
    /// The flag's text (for messages).
    pub spec: String,
    /// The tensor compared.
    pub tensor: String,
    /// The golden file.
    pub path: PathBuf,
    array: NpyArray,
}

/// The outcome of one comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpectResult {
    /// The tensor compared.
    pub tensor: String,
    /// Elements compared.
    pub elements: usize,
    /// Largest `|actual − expected|` (NaN and infinity mismatches excluded).
    pub max_abs: f64,
    /// Largest `|actual − expected| / |expected|` over elements with a non-zero golden.
    pub max_rel: f64,
    /// Row-major index of the worst element: the failing one furthest outside the tolerance,
    /// or, when all pass, the one closest to it.
    pub worst: Vec<u64>,
    /// Elements outside the tolerance.
    pub failed: usize,
    /// Whether every element is within the tolerance.
    pub passed: bool,
    /// The report line (ends with a newline).
    pub line: String,
}

impl Expectation {
    /// Parses `NAME=PATH.npy` and reads the file.
    pub fn read(spec: &str) -> Result<Expectation, CliError> {
        let bad = || CliError::plain(format!("`--expect {spec}` is not `NAME=PATH.npy`"));
        let (tensor, path) = spec.split_once('=').ok_or_else(bad)?;
        let (tensor, path) = (tensor.trim(), path.trim());
        if tensor.is_empty() || path.is_empty() {
            return Err(bad());
        }
        let path = PathBuf::from(path);
        let bytes = std::fs::read(&path).map_err(|e| {
            CliError::plain(format!(
                "in `--expect {spec}`: cannot read `{}`: {e}",
                path.display()
            ))
        })?;
        let array = NpyArray::parse(&bytes)
            .map_err(|e| CliError::plain(format!("in `--expect {spec}`: {e}")))?;
        Ok(Expectation {
            spec: spec.to_string(),
            tensor: tensor.to_string(),
            path,
            array,
        })
    }

    /// Compares tensor [`Expectation::tensor`] of `store` with the golden.
    pub fn compare(
        &self,
        store: &TensorStore,
        rtol: f64,
        atol: f64,
    ) -> Result<ExpectResult, CliError> {
        let err = |m: String| CliError::plain(format!("in `--expect {}`: {m}", self.spec));
        let t = store
            .index_of(&self.tensor)
            .ok_or_else(|| err(format!("no tensor is named `{}`", self.tensor)))?;
        let info = store.info(t);
        if self.array.shape != info.shape {
            return Err(err(format!(
                "tensor `{}` has shape {}, but the golden has shape {}",
                self.tensor,
                shape_text(&info.shape),
                shape_text(&self.array.shape)
            )));
        }
        let actual = values(info.dtype, store.bytes(t));
        let bf16_bits = info.dtype == DType::Bf16 && self.array.kind == 'u' && self.array.size == 2;
        let expected = if bf16_bits {
            Some(values(DType::Bf16, &self.array.data))
        } else {
            golden_values(&self.array)
        }
        .ok_or_else(|| {
            err(format!(
                "the golden holds {} ({}), not numbers this tool compares",
                self.array.descr,
                self.array.type_name()
            ))
        })?;
        let mut r = ExpectResult {
            tensor: self.tensor.clone(),
            elements: actual.len(),
            max_abs: 0.0,
            max_rel: 0.0,
            worst: Vec::new(),
            failed: 0,
            passed: true,
            line: String::new(),
        };
        let (mut worst_at, mut worst_failed, mut worst_excess) = (0usize, false, f64::NEG_INFINITY);
        for (i, (&a, &e)) in actual.iter().zip(&expected).enumerate() {
            let diff = (a - e).abs();
            let tol = atol + rtol * e.abs();
            let close = if a.is_nan() || e.is_nan() {
                a.is_nan() && e.is_nan()
            } else if a.is_infinite() || e.is_infinite() {
                a == e
            } else {
                diff <= tol
            };
            if diff.is_finite() {
                r.max_abs = r.max_abs.max(diff);
                if e != 0.0 {
                    r.max_rel = r.max_rel.max(diff / e.abs());
                }
            }
            // The worst element: a failing one before any passing one, then the largest
            // excess over the tolerance (NaN and infinity mismatches first among failures).
            let excess = if diff.is_finite() {
                diff - tol
            } else {
                f64::INFINITY
            };
            if !close {
                r.failed += 1;
            }
            if (!close, excess) > (worst_failed, worst_excess) {
                (worst_at, worst_failed, worst_excess) = (i, !close, excess);
            }
        }
        r.passed = r.failed == 0;
        r.worst = unravel(worst_at, &info.shape);
        let idx: Vec<String> = r.worst.iter().map(u64::to_string).collect();
        r.line = format!(
            "  expect: {} ({} values) against {}: max abs error {:.3e}, max rel error {:.3e}, worst at [{}] ({:.7e} vs {:.7e}); {} outside atol {} + rtol {}·|expected|: {}\n",
            self.tensor,
            r.elements,
            self.path.display(),
            r.max_abs,
            r.max_rel,
            idx.join(", "),
            actual.get(worst_at).copied().unwrap_or(f64::NAN),
            expected.get(worst_at).copied().unwrap_or(f64::NAN),
            r.failed,
            tolerance(atol),
            tolerance(rtol),
            if r.passed { "PASS" } else { "FAIL" }
        );
        Ok(r)
    }
}

/// A tolerance as written on the command line (`1e-5`, `0`, `0.001`).
fn tolerance(x: f64) -> String {
    if x == 0.0 {
        "0".to_string()
    } else {
        format!("{x:e}")
    }
}

/// The row-major index of element `i` in `shape`.
fn unravel(mut i: usize, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for (d, &n) in shape.iter().enumerate().rev() {
        if n > 0 {
            idx[d] = i as u64 % n;
            i /= n as usize;
        }
    }
    idx
}

/// The elements of a tensor of `dtype` held in `bytes` (this machine's byte order), as `f64`.
pub fn values(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    fn each<const N: usize>(bytes: &[u8], f: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        bytes
            .chunks_exact(N)
            .map(|c| f(c.try_into().expect("N bytes")))
            .collect()
    }
    match dtype {
        DType::F32 => each(bytes, |b| f64::from(f32::from_ne_bytes(b))),
        DType::F16 => each(bytes, |b| f16::from_ne_bytes(b).to_f64()),
        DType::Bf16 => each(bytes, |b| bf16::from_ne_bytes(b).to_f64()),
        DType::I32 => each(bytes, |b| f64::from(i32::from_ne_bytes(b))),
        DType::U32 => each(bytes, |b| f64::from(u32::from_ne_bytes(b))),
        DType::I64 => each(bytes, |b| i64::from_ne_bytes(b) as f64),
        DType::U64 => each(bytes, |b| u64::from_ne_bytes(b) as f64),
        DType::U8 => bytes.iter().map(|&b| f64::from(b)).collect(),
    }
}

/// A golden's elements as `f64`: any tensor element type, or numpy's `float64`, `int8` and
/// `int16`/`uint16`; `None` for anything else (complex, bool, structured).
fn golden_values(a: &NpyArray) -> Option<Vec<f64>> {
    if let Some(d) = a.dtype() {
        return Some(values(d, &a.data));
    }
    let d = &a.data;
    Some(match (a.kind, a.size) {
        ('f', 8) => d
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect(),
        ('i', 1) => d.iter().map(|&b| f64::from(b as i8)).collect(),
        ('i', 2) => d
            .chunks_exact(2)
            .map(|c| f64::from(i16::from_ne_bytes([c[0], c[1]])))
            .collect(),
        ('u', 2) => d
            .chunks_exact(2)
            .map(|c| f64::from(u16::from_ne_bytes([c[0], c[1]])))
            .collect(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unravel_is_row_major() {
        assert_eq!(unravel(0, &[2, 3]), [0, 0]);
        assert_eq!(unravel(5, &[2, 3]), [1, 2]);
        assert_eq!(unravel(7, &[2, 3, 4]), [0, 1, 3]);
        assert_eq!(unravel(0, &[]), Vec::<u64>::new());
    }
}
