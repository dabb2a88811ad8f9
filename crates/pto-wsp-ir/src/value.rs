//! Runtime scalar values and bindings: what a program is given when it runs.
//!
//! [`Value`] is the result of evaluating a scalar expression. [`Bindings`] carries everything a
//! module leaves open until run time: runtime symbols, the contents of the integer tensors that
//! drive control (ragged lengths, sparse `indptr` / `indices`, tensors read by `load`), and initial
//! slot values.

use crate::types::ScalarType;
use std::collections::BTreeMap;
use std::fmt;

/// A scalar value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    I64(i64),
    /// An unsigned integer.
    U64(u64),
}

impl Value {
    /// The value's type.
    pub fn ty(self) -> ScalarType {
        match self {
            Value::Bool(_) => ScalarType::Bool,
            Value::I64(_) => ScalarType::I64,
            Value::U64(_) => ScalarType::U64,
        }
    }

    /// The zero value of a type (`false`, `0`, `0u`).
    pub fn zero(ty: ScalarType) -> Value {
        match ty {
            ScalarType::Bool => Value::Bool(false),
            ScalarType::I64 => Value::I64(0),
            ScalarType::U64 => Value::U64(0),
        }
    }

    /// The value as raw 64 bits (how it is passed to kernels as a `u64` parameter).
    pub fn to_bits(self) -> u64 {
        match self {
            Value::Bool(b) => b as u64,
            Value::I64(v) => v as u64,
            Value::U64(v) => v,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::U64(v) => write!(f, "{v}u"),
        }
    }
}

/// Everything bound at run time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bindings {
    /// Runtime symbol values by name.
    pub symbols: BTreeMap<String, Value>,
    /// Contents (row-major) of integer tensors that control generation, by tensor name.
    pub arrays: BTreeMap<String, Vec<i64>>,
    /// Initial slot values by name (slots not listed start at zero).
    pub slots: BTreeMap<String, Value>,
}

impl Bindings {
    /// No bindings.
    pub fn new() -> Bindings {
        Bindings::default()
    }

    /// Binds a symbol.
    pub fn symbol(mut self, name: impl Into<String>, value: impl Into<Value>) -> Bindings {
        self.symbols.insert(name.into(), value.into());
        self
    }

    /// Binds an integer tensor's contents.
    pub fn array(mut self, name: impl Into<String>, data: impl Into<Vec<i64>>) -> Bindings {
        self.arrays.insert(name.into(), data.into());
        self
    }

    /// Sets a slot's initial value.
    pub fn slot(mut self, name: impl Into<String>, value: impl Into<Value>) -> Bindings {
        self.slots.insert(name.into(), value.into());
        self
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::I64(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::U64(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}
