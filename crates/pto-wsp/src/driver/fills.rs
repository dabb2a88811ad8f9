//! How a `.wsp` file's generated inputs look: `//@ fill NAME=GENERATOR` lines.
//!
//! Why: `pto-wsp run` generates every input it is not given from a seed, uniformly in
//! `[-1, 1)`. That is no model: weights of that size make attention scores of tens (a softmax
//! of rounding noise), and a RoPE table of random numbers rotates nothing. An example that
//! stands for a model says, in its own file, what its inputs are like — weights at the scale of
//! `1/√fan_in`, cos / sin tables of real angles — so every run of it (the CPU simulation, the
//! Ascend simulator, both from the same inputs) computes what the model would. Like `//@ bind`,
//! this is a convention of the front ends, read by this driver: the parser sees comments.
//!
//! Generators (README, "Generated inputs: `//@ fill`"):
//! - `uniform(LO, HI)`: the seed's values `x` in `[-1, 1)` mapped to `LO + (x + 1)·(HI − LO)/2`
//!   (for `uniform(-a, a)` with `a` a power of two, exactly `a·x`: the values stay exact in the
//!   tensor's type);
//! - `rope_cos(THETA)`, `rope_sin(THETA)`: the RoPE tables of rotate-half pairing: the last
//!   dimension holds the `h` pairs `i` of a head of `d = 2h`, every earlier index is flattened
//!   into the position `p`: element `(p, i)` is `cos` / `sin` of `p·THETA^(−2i/d)`, computed in
//!   `f64` and rounded once into the tensor's type.
//!
//! Promises: every line is checked before anything is filled — the tensor must exist, hold
//! floats, be named once, and the generator be known with finite arguments (`LO < HI`,
//! `THETA > 0`) — and a bad line is reported at its `file:line:column` ([`FillLineError`]).
//! [`apply`] changes only the tensors the lines name and the caller does not exclude.

use super::binds::directive_lines;
use super::{Error, Loaded};
use pto_wsp_ir::{DType, Diagnostic, Loc};
use pto_wsp_kernels::{Float, SeedRange, TensorStore};
use std::fmt;

/// The comment prefix that marks a generated input.
pub const PREFIX: &str = "//@ fill";

/// What a `//@ fill` line generates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Generator {
    /// The seed's `[-1, 1)` values mapped affinely onto `[lo, hi)`.
    Uniform {
        /// Lower end.
        lo: f64,
        /// Upper end.
        hi: f64,
    },
    /// `cos(p·theta^(−2i/d))` at position `p` (row), pair `i` (column), `d` twice the columns.
    RopeCos {
        /// The RoPE base.
        theta: f64,
    },
    /// `sin` of the same angles.
    RopeSin {
        /// The RoPE base.
        theta: f64,
    },
}

/// One checked `//@ fill NAME=GENERATOR` line.
#[derive(Clone, Debug, PartialEq)]
pub struct FillLine {
    /// The tensor filled.
    pub tensor: String,
    /// How.
    pub generator: Generator,
    /// Where the line's `NAME=GENERATOR` stands.
    pub loc: Loc,
}

/// Every `//@ fill` line of `loaded`, checked against its module (see the module docs).
pub fn fill_lines(loaded: &Loaded) -> Result<Vec<FillLine>, Error> {
    let mut out: Vec<FillLine> = Vec::new();
    for line in directive_lines(&loaded.source.text, PREFIX) {
        let err = |message: String| {
            Error::diagnostic(
                &loaded.source,
                &FillLineError {
                    message,
                    loc: line.loc,
                },
            )
        };
        let Some((name, spec)) = line.spec.split_once('=') else {
            return Err(err(format!("`{}` is not `NAME=GENERATOR`", line.spec)));
        };
        let (name, spec) = (name.trim(), spec.trim());
        let Some(decl) = loaded.module.tensors.iter().find(|t| t.name.name == name) else {
            return Err(err(format!(
                "fill of `{name}`, but the module declares no tensor `{name}`"
            )));
        };
        if !decl.dtype.is_float() {
            return Err(err(format!(
                "tensor `{name}` holds {}; only float tensors are filled by a generator (integer \
                 tensors are given with `//@ bind`)",
                decl.dtype
            )));
        }
        if let Some(first) = out.iter().find(|f| f.tensor == name) {
            let (l, c) = loaded.source.line_col(first.loc.start as usize);
            return Err(err(format!(
                "second fill of `{name}`; line {l}:{c} already fills it"
            )));
        }
        let generator = parse_generator(spec).map_err(err)?;
        out.push(FillLine {
            tensor: name.to_string(),
            generator,
            loc: line.loc,
        });
    }
    Ok(out)
}

/// `uniform(LO, HI)`, `rope_cos(THETA)` or `rope_sin(THETA)`.
fn parse_generator(spec: &str) -> Result<Generator, String> {
    let shape = "generators are `uniform(LO, HI)`, `rope_cos(THETA)`, `rope_sin(THETA)`";
    let (head, rest) = spec
        .split_once('(')
        .ok_or_else(|| format!("`{spec}` is not a generator: {shape}"))?;
    let args = rest
        .strip_suffix(')')
        .ok_or_else(|| format!("`{spec}` has no closing `)`"))?;
    let args: Vec<f64> = args
        .split(',')
        .map(|a| {
            let a = a.trim();
            a.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("`{a}` in `{spec}` is not a finite number"))
        })
        .collect::<Result<_, _>>()?;
    let arity = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!(
                "`{}` takes {n} argument(s), `{spec}` gives {}",
                head.trim(),
                args.len()
            ))
        }
    };
    match head.trim() {
        "uniform" => {
            arity(2)?;
            if args[0] >= args[1] {
                return Err(format!("`{spec}`: LO must be below HI"));
            }
            Ok(Generator::Uniform {
                lo: args[0],
                hi: args[1],
            })
        }
        g @ ("rope_cos" | "rope_sin") => {
            arity(1)?;
            let theta = args[0];
            if theta <= 0.0 {
                return Err(format!("`{spec}`: THETA must be positive"));
            }
            Ok(if g == "rope_cos" {
                Generator::RopeCos { theta }
            } else {
                Generator::RopeSin { theta }
            })
        }
        other => Err(format!("unknown generator `{other}`: {shape}")),
    }
}

/// Fills every tensor of `store` from `seed` except those whose index is in `given` (and those
/// whose contents the bindings hold), as `lines` say: the same bytes as
/// [`TensorStore::fill_random_except`] followed by [`apply`], in one pass over each `uniform`
/// tensor (its values placed in their range as they are made). Large tensors are only promised
/// their contents ([`TensorStore::fill_random_lazy`]): each part is made where a task (or any
/// read of the store) first reads it, on that thread.
pub fn fill(
    store: &mut TensorStore,
    seed: u64,
    lines: &[FillLine],
    given: &[u32],
) -> Result<(), String> {
    let mut ranges = Vec::new();
    let mut rest = Vec::new();
    for line in lines {
        let t = index(store, line)?;
        match line.generator {
            Generator::Uniform { lo, hi } if store.info(t).dtype.is_float() => {
                ranges.push((t, SeedRange { lo, hi }));
            }
            _ => rest.push(line.clone()),
        }
    }
    store.fill_random_lazy(seed, given, &ranges);
    apply(store, &rest, given)
}

fn index(store: &TensorStore, line: &FillLine) -> Result<u32, String> {
    store
        .index_of(&line.tensor)
        .ok_or_else(|| format!("no tensor `{}` to fill", line.tensor))
}

/// Fills the tensors of `lines` in `store` (already filled from the seed), except those whose
/// index is in `skip` (given by the caller's own inputs).
pub fn apply(store: &mut TensorStore, lines: &[FillLine], skip: &[u32]) -> Result<(), String> {
    for line in lines {
        let t = index(store, line)?;
        if skip.contains(&t) {
            continue;
        }
        let cols = store.info(t).shape.last().copied().unwrap_or(1).max(1) as usize;
        let g = line.generator;
        // The angles' frequencies, one per pair (column), computed once.
        let freq: Vec<f64> = match g {
            Generator::RopeCos { theta } | Generator::RopeSin { theta } => (0..cols)
                .map(|i| pto_wsp_kernels::builtins::rows::rope_frequency(theta, i, cols))
                .collect(),
            Generator::Uniform { .. } => Vec::new(),
        };
        let f = |k: usize, x: f32| value(g, &freq, k, cols, x);
        match store.info(t).dtype {
            DType::F32 => map::<f32>(store, t, f),
            DType::F16 => map::<half::f16>(store, t, f),
            DType::Bf16 => map::<half::bf16>(store, t, f),
            d => return Err(format!("tensor `{}` holds {d}, not floats", line.tensor)),
        }
    }
    Ok(())
}

/// The generated value of flat element `k` (position `k / cols`, pair `k % cols`) from the
/// seed's value `x`; `freq` holds the tables' frequency of each pair.
fn value(g: Generator, freq: &[f64], k: usize, cols: usize, x: f32) -> f32 {
    let angle = || (k / cols) as f64 * freq[k % cols];
    (match g {
        Generator::Uniform { lo, hi } => SeedRange { lo, hi }.map(x) as f64,
        Generator::RopeCos { .. } => angle().cos(),
        Generator::RopeSin { .. } => angle().sin(),
    }) as f32
}

/// Replaces every element of tensor `t` (of type `T`) by `f(flat index, old value)`, rounded
/// once into `T`.
fn map<T: Float>(store: &mut TensorStore, t: u32, f: impl Fn(usize, f32) -> f32) {
    let data: &mut [T] = bytemuck::cast_slice_mut(store.bytes_mut(t));
    let mut buf = vec![0f32; 4096];
    for (c, chunk) in data.chunks_mut(buf.len()).enumerate() {
        let b = &mut buf[..chunk.len()];
        T::load(chunk, b);
        for (j, x) in b.iter_mut().enumerate() {
            *x = f(c * 4096 + j, *x);
        }
        T::store(b, chunk);
    }
}

/// A bad `//@ fill` line, as a diagnostic pointing at it.
#[derive(Clone, Debug)]
pub struct FillLineError {
    /// What is wrong.
    pub message: String,
    /// The `NAME=GENERATOR` text in the file.
    pub loc: Loc,
}

impl fmt::Display for FillLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad input fill: {}", self.message)
    }
}

impl Diagnostic for FillLineError {
    fn loc(&self) -> Loc {
        self.loc
    }
    fn notes(&self) -> Vec<String> {
        vec![
            "generated inputs are written `//@ fill NAME=uniform(LO, HI)`, `rope_cos(THETA)` or \
             `rope_sin(THETA)` (see the README, \"Generated inputs\")"
                .to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(text: &str) -> Loaded {
        crate::driver::parse_source("t.wsp", text).unwrap()
    }

    const DECLS: &str =
        "tensor W: f16[4, 8];\ntensor C: f32[6, 4];\ntensor S: f32[6, 4];\ntensor I: i32[4];\n";

    #[test]
    fn lines_are_read_and_tables_hold_the_angles() {
        let text = format!(
            "//@ fill W=uniform(-0.0625, 0.0625)\n//@ fill C=rope_cos(10000)\n//@ fill S=rope_sin(10000)\n{DECLS}"
        );
        let l = loaded(&text);
        let lines = fill_lines(&l).unwrap();
        assert_eq!(lines.len(), 3);
        let b = pto_wsp_ir::Bindings::new();
        let mut store = TensorStore::new(&l.module, &b).unwrap();
        store.fill_random(3);
        let before: Vec<half::f16> = store.read("W").unwrap();
        apply(&mut store, &lines, &[]).unwrap();
        let after: Vec<half::f16> = store.read("W").unwrap();
        for (a, b) in after.iter().zip(&before) {
            // Exactly a sixteenth of the seed's value.
            assert_eq!(a.to_f64(), b.to_f64() / 16.0);
        }
        let (c, s): (Vec<f32>, Vec<f32>) = (store.read("C").unwrap(), store.read("S").unwrap());
        for p in 0..6 {
            for i in 0..4 {
                let ang = p as f64 / 10000f64.powf(i as f64 / 4.0);
                assert!((c[p * 4 + i] as f64 - ang.cos()).abs() < 1e-7);
                assert!((s[p * 4 + i] as f64 - ang.sin()).abs() < 1e-7);
            }
        }
        // Skipped tensors keep their contents.
        let mut again = TensorStore::new(&l.module, &b).unwrap();
        again.fill_random(3);
        let c0: Vec<f32> = again.read("C").unwrap();
        let ci = again.index_of("C").unwrap();
        apply(&mut again, &lines, &[ci]).unwrap();
        assert_eq!(again.read::<f32>("C").unwrap(), c0);
    }

    /// One fused pass gives the bytes of the seeded fill followed by the lines.
    #[test]
    fn the_fused_fill_is_the_fill_then_the_lines() {
        let text = format!(
            "//@ fill W=uniform(-0.0625, 0.0625)\n//@ fill C=uniform(0.5, 1.0)\n//@ fill S=rope_sin(10000)\n{DECLS}"
        );
        let l = loaded(&text);
        let lines = fill_lines(&l).unwrap();
        let b = pto_wsp_ir::Bindings::new();
        let mut two = TensorStore::new(&l.module, &b).unwrap();
        two.fill_random_except(3, &[1]);
        apply(&mut two, &lines, &[1]).unwrap();
        let mut one = TensorStore::new(&l.module, &b).unwrap();
        fill(&mut one, 3, &lines, &[1]).unwrap();
        for t in 0..one.len() as u32 {
            assert_eq!(one.bytes(t), two.bytes(t), "tensor {t}");
        }
        assert!(
            one.bytes(1).iter().all(|&x| x == 0),
            "a given tensor is left alone"
        );
    }

    #[test]
    fn bad_lines_are_reported_at_their_place() {
        for (line, says) in [
            ("//@ fill X=uniform(0, 1)", "declares no tensor `X`"),
            ("//@ fill I=uniform(0, 1)", "only float tensors"),
            ("//@ fill W=uniform(1, 0)", "LO must be below HI"),
            ("//@ fill W=uniform(1)", "takes 2 argument(s)"),
            ("//@ fill W=gauss(0, 1)", "unknown generator `gauss`"),
            ("//@ fill C=rope_cos(-1)", "THETA must be positive"),
            ("//@ fill C=rope_cos(nan)", "not a finite number"),
            ("//@ fill C rope_cos(1)", "is not `NAME=GENERATOR`"),
            (
                "//@ fill C=rope_cos(1)\n//@ fill C=rope_sin(1)",
                "second fill of `C`; line 1:10",
            ),
        ] {
            let text = format!("{line}\n{DECLS}");
            let e = fill_lines(&loaded(&text)).unwrap_err().rendered;
            assert!(e.contains(says), "{line}: {e}");
            assert!(e.contains("t.wsp:"), "{line}: {e}");
        }
    }
}
