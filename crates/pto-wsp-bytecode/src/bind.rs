//! Bindings at interpretation time: symbol values, slot initial values, bound arrays.
//!
//! Why: the same bytes must serve every sequence length, ragged length list and routing table
//! (the on-device generation specification: "same bytecode, different bounds"). So nothing
//! runtime-dependent is in the bytecode; [`Program::bind`] resolves a [`Bindings`] against the
//! program's own name table and evaluates tensor shapes once, giving a [`Bound`] every executor can
//! share.
//!
//! Promise: the checks and their order are the reference expander's (the rules themselves are
//! `pto_wsp_ir::resolve`'s binding checks, shared): every symbol the entry reads and every
//! tensor whose contents it reads must be bound, bound values must have the declared type, and
//! shapes must not be negative; each failure is a [`BindError`] naming the symbol, slot or
//! tensor.

use crate::eval::value;
use crate::program::Program;
use pto_wsp_ir::eval::EvalError;
use pto_wsp_ir::resolve::{BindingError, array_value, slot_value, symbol_value};
use pto_wsp_ir::{Bindings, Value};

/// Why bindings do not fit a program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// A missing symbol or array, a value of the wrong type: the same refusal the reference
    /// expander makes ([`BindingError`]).
    #[error(transparent)]
    Binding(#[from] BindingError),
    /// A tensor dimension evaluated negative.
    #[error("dimension {dim} of tensor `{tensor}` is negative ({value})")]
    NegativeDimension {
        /// The tensor.
        tensor: String,
        /// The dimension.
        dim: usize,
        /// Its value.
        value: i64,
    },
    /// A tensor dimension failed to evaluate.
    #[error("evaluating dimension {dim} of tensor `{tensor}`: {source}")]
    Eval {
        /// The tensor.
        tensor: String,
        /// The dimension.
        dim: usize,
        /// Why.
        source: EvalError,
    },
}

/// A program's bindings, resolved: initial registers, bound arrays, tensor shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    pub(crate) regs: Vec<u64>,
    pub(crate) arrays: Vec<Option<Vec<i64>>>,
    pub(crate) shapes: Vec<Vec<i64>>,
    /// Every tensor's shape, concatenated in tensor order.
    pub(crate) flat_shapes: Vec<i64>,
}

impl Bound {
    /// Every tensor's shape as bound (its extents, in tensor order; empty for a tensor without
    /// one). The interpreter checks every region it hands out against these.
    pub fn shapes(&self) -> &[Vec<i64>] {
        &self.shapes
    }
}

impl Program {
    /// Resolves `bindings` by name against this program (see the module docs).
    pub fn bind(&self, bindings: &Bindings) -> Result<Bound, BindError> {
        let symbols = (0..self.symbols.len())
            .map(|i| {
                bindings
                    .symbols
                    .get(&self.names.symbols.get(i).cloned().unwrap_or_default())
                    .copied()
            })
            .collect::<Vec<_>>();
        let slots = (0..self.slots.len())
            .map(|i| {
                bindings
                    .slots
                    .get(&self.names.slots.get(i).cloned().unwrap_or_default())
                    .copied()
            })
            .collect::<Vec<_>>();
        let arrays = (0..self.tensors.len())
            .map(|i| {
                if self.tensors[i].array {
                    let name = self.names.tensors.get(i).cloned().unwrap_or_default();
                    bindings.arrays.get(&name).cloned()
                } else {
                    None
                }
            })
            .collect();
        self.bind_indexed(&symbols, &slots, arrays)
    }

    /// Resolves bindings given by position: symbol `i`, slot `i`, tensor `i` (only tensors whose
    /// contents the program reads are kept). Missing trailing entries count as unbound.
    pub fn bind_indexed(
        &self,
        symbols: &[Option<Value>],
        slots: &[Option<Value>],
        mut arrays: Vec<Option<Vec<i64>>>,
    ) -> Result<Bound, BindError> {
        let mut regs: Vec<u64> = vec![0; self.reg_types.len()];
        for (i, &(ty, used)) in self.symbols.iter().enumerate() {
            let given = symbols.get(i).copied().flatten();
            regs[i] = symbol_value(|| self.symbol_name(i), ty, used, given)?.to_bits();
        }
        let ns = self.symbols.len();
        for (i, &ty) in self.slots.iter().enumerate() {
            let given = slots.get(i).copied().flatten();
            regs[ns + i] = slot_value(|| self.slot_name(i), ty, given)?.to_bits();
        }
        arrays.resize(self.tensors.len(), None);
        for (i, t) in self.tensors.iter().enumerate() {
            if !t.array {
                arrays[i] = None;
            } else {
                let a = array_value(
                    || self.tensor_name(i as u32),
                    pto_wsp_ir::Loc::NONE,
                    arrays[i].take(),
                )?;
                arrays[i] = Some(a);
            }
        }
        let mut shapes = vec![Vec::new(); self.tensors.len()];
        for (i, t) in self.tensors.iter().enumerate() {
            if let Some(dims) = &t.shape {
                for (d, &e) in dims.iter().enumerate() {
                    let raw = self.eval(e, &regs, &[]).map_err(|source| BindError::Eval {
                        tensor: self.tensor_name(i as u32),
                        dim: d,
                        source,
                    })?;
                    let v = match value(raw, self.expr_type(e)) {
                        Value::I64(v) => v,
                        Value::U64(v) => i64::try_from(v).map_err(|_| BindError::Eval {
                            tensor: self.tensor_name(i as u32),
                            dim: d,
                            source: EvalError::Overflow {
                                op: "as i64",
                                lhs: Value::U64(v),
                                rhs: None,
                            },
                        })?,
                        Value::Bool(_) => 0,
                    };
                    if v < 0 {
                        return Err(BindError::NegativeDimension {
                            tensor: self.tensor_name(i as u32),
                            dim: d,
                            value: v,
                        });
                    }
                    shapes[i].push(v);
                }
            }
        }
        let flat_shapes = shapes.iter().flatten().copied().collect();
        Ok(Bound {
            regs,
            arrays,
            shapes,
            flat_shapes,
        })
    }
}
