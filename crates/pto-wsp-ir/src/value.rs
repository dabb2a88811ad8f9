//! Runtime scalar values and bindings: what a program is given when it runs.
//!
//! [`Value`] is the result of evaluating a scalar expression. [`Bindings`] carries everything a
//! module leaves open until run time: runtime symbols, the contents of the integer tensors that
//! drive control (ragged lengths, sparse `indptr` / `indices`, tensors read by `load`), and initial
//! slot values. [`Bindings::bind_str`] reads one binding from text (`NAME=VALUE`, as the CLI's
//! `--bind` takes it), typed by the module's declaration of `NAME`.

use crate::module::Module;
use crate::types::{DType, ScalarType};
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

/// Why a `NAME=VALUE` binding could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// The text is not `NAME=VALUE`.
    #[error("bad binding `{spec}`: expected NAME=VALUE")]
    Syntax {
        /// The whole binding text.
        spec: String,
    },
    /// No symbol, slot or tensor has that name.
    #[error("cannot bind `{name}`: no symbol, slot or tensor has that name")]
    UnknownName {
        /// The name.
        name: String,
    },
    /// The name is declared but is not something a binding can give a value (a tensor of
    /// floating-point elements, ...).
    #[error("cannot bind `{name}`: {reason}")]
    NotBindable {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The value does not parse as the declared type.
    #[error("cannot bind `{name}` to `{value}`: expected {expected}")]
    BadValue {
        /// The name.
        name: String,
        /// The value text.
        value: String,
        /// What was expected.
        expected: String,
    },
}

impl Value {
    /// Parses a value of type `ty`: `true` / `false` for `bool`, a decimal integer (optionally
    /// negative) for `i64`, a decimal integer with an optional `u` suffix for `u64`.
    pub fn parse_typed(text: &str, ty: ScalarType) -> Option<Value> {
        let text = text.trim();
        match ty {
            ScalarType::Bool => match text {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            ScalarType::I64 => parse_decimal::<i64>(text).map(Value::I64),
            ScalarType::U64 => {
                parse_decimal::<u64>(text.strip_suffix('u').unwrap_or(text)).map(Value::U64)
            }
        }
    }
}

/// A decimal integer: an optional `-` then ASCII digits only (no `+`, no spaces).
fn parse_decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The range of values an element of an integer tensor can hold, as `(min, max)` in `i64`.
fn element_range(dtype: DType) -> Option<(i64, i64)> {
    match dtype {
        DType::U8 => Some((0, u8::MAX.into())),
        DType::I32 => Some((i32::MIN.into(), i32::MAX.into())),
        DType::U32 => Some((0, u32::MAX.into())),
        DType::I64 => Some((i64::MIN, i64::MAX)),
        DType::U64 => Some((0, i64::MAX)),
        DType::F16 | DType::Bf16 | DType::F32 => None,
    }
}

impl Bindings {
    /// Applies one binding written `NAME=VALUE` (spaces around either side are ignored):
    /// - a runtime symbol or a slot takes a scalar of its declared type (`true`, `-3`, `7`,
    ///   `7u`);
    /// - a tensor of integer elements takes its contents as a comma-separated list, with or
    ///   without brackets (`3,5,2`, `[3, 5, 2]`, `[]`); every element must fit the element type.
    ///
    /// A later binding of the same name replaces an earlier one.
    pub fn bind_str(&mut self, module: &Module, spec: &str) -> Result<(), BindError> {
        let Some((name, value)) = spec.split_once('=') else {
            return Err(BindError::Syntax { spec: spec.into() });
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return Err(BindError::Syntax { spec: spec.into() });
        }
        let bad = |expected: String| BindError::BadValue {
            name: name.into(),
            value: value.into(),
            expected,
        };
        if let Some(sym) = module.symbol(name) {
            let v = Value::parse_typed(value, sym.ty).ok_or_else(|| {
                bad(format!(
                    "{} (symbol `{name}: {}`)",
                    type_phrase(sym.ty),
                    sym.ty
                ))
            })?;
            self.symbols.insert(name.into(), v);
            return Ok(());
        }
        if let Some(slot) = module.slot(name) {
            let v = Value::parse_typed(value, slot.ty).ok_or_else(|| {
                bad(format!(
                    "{} (slot `{name}: {}`)",
                    type_phrase(slot.ty),
                    slot.ty
                ))
            })?;
            self.slots.insert(name.into(), v);
            return Ok(());
        }
        if let Some(t) = module.tensor(name) {
            let Some((lo, hi)) = element_range(t.dtype) else {
                return Err(BindError::NotBindable {
                    name: name.into(),
                    reason: format!(
                        "only tensors of integer elements can be bound, and `{name}` is {}",
                        t.dtype
                    ),
                });
            };
            let list = value
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .unwrap_or(value)
                .trim();
            let mut data = Vec::new();
            if !list.is_empty() {
                for item in list.split(',') {
                    let item = item.trim();
                    let v = parse_decimal::<i64>(item)
                        .filter(|v| (lo..=hi).contains(v))
                        .ok_or_else(|| {
                            bad(format!(
                                "a comma-separated list of {} values; `{item}` is not one",
                                t.dtype
                            ))
                        })?;
                    data.push(v);
                }
            }
            self.arrays.insert(name.into(), data);
            return Ok(());
        }
        let declared_otherwise = module.axis(name).is_some()
            || module.kernel(name).is_some()
            || module.workload(name).is_some()
            || module.pipeline(name).is_some();
        if declared_otherwise {
            return Err(BindError::NotBindable {
                name: name.into(),
                reason: "only symbols, slots and integer tensors can be bound".into(),
            });
        }
        Err(BindError::UnknownName { name: name.into() })
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

/// "a bool", "an i64", "a u64": the type with its article, for messages.
fn type_phrase(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::Bool => "a bool",
        ScalarType::I64 => "an i64",
        ScalarType::U64 => "a u64",
    }
}
