//! The binding checks every consumer of a resolved program makes before it runs.
//!
//! Why: the reference expander binds a [`super::Resolved`] program to [`crate::Bindings`] by
//! name; the bytecode binds its decoded program by position. Both must refuse the same bindings
//! with the same errors — a symbol the entry reads and nobody bound, a tensor whose contents it
//! reads and nobody bound, a value of the wrong type — so the rules and the error type are here,
//! once.
//!
//! Promise: a symbol or slot gets its bound value, or zero of its type when it is not bound and
//! the entry does not read it (slots always start at zero when unbound); every refusal is a
//! [`BindingError`] naming the symbol, slot or tensor.

use crate::loc::Loc;
use crate::source::Diagnostic;
use crate::types::ScalarType;
use crate::value::Value;

/// Why bindings do not fit a resolved program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    /// A symbol the entry reads is not bound.
    #[error("symbol `{name}` is not bound")]
    MissingSymbol {
        /// The symbol.
        name: String,
    },
    /// An integer tensor the entry reads (ragged lengths, sparse arrays, `load`) is not bound.
    #[error("the contents of tensor `{tensor}` are not bound")]
    MissingArray {
        /// The tensor.
        tensor: String,
        /// The statement that reads it ([`Loc::NONE`] when not known).
        loc: Loc,
    },
    /// A symbol or slot bound to a value of the wrong type.
    #[error("`{name}` is declared {expected} but bound to a {found}")]
    BindingType {
        /// The symbol or slot.
        name: String,
        /// Its declared type.
        expected: ScalarType,
        /// The bound value's type.
        found: ScalarType,
    },
}

/// The initial value of symbol `name` declared `ty`: the bound value (of type `ty`), or zero when
/// it is unbound and the entry does not read it (`used`). `name` is only called on an error.
pub fn symbol_value(
    name: impl FnOnce() -> String,
    ty: ScalarType,
    used: bool,
    given: Option<Value>,
) -> Result<Value, BindingError> {
    match given {
        Some(v) if v.ty() != ty => Err(BindingError::BindingType {
            name: name(),
            expected: ty,
            found: v.ty(),
        }),
        Some(v) => Ok(v),
        None if used => Err(BindingError::MissingSymbol { name: name() }),
        None => Ok(Value::zero(ty)),
    }
}

/// The initial value of slot `name` declared `ty`: the bound value (of type `ty`), else zero.
pub fn slot_value(
    name: impl FnOnce() -> String,
    ty: ScalarType,
    given: Option<Value>,
) -> Result<Value, BindingError> {
    symbol_value(name, ty, false, given)
}

/// The bound contents of tensor `name`, which the entry reads at `loc`.
pub fn array_value<T>(
    name: impl FnOnce() -> String,
    loc: Loc,
    given: Option<T>,
) -> Result<T, BindingError> {
    given.ok_or_else(|| BindingError::MissingArray {
        tensor: name(),
        loc,
    })
}

impl Diagnostic for BindingError {
    fn loc(&self) -> Loc {
        match self {
            BindingError::MissingArray { loc, .. } => *loc,
            BindingError::MissingSymbol { .. } | BindingError::BindingType { .. } => Loc::NONE,
        }
    }

    fn label(&self) -> Option<String> {
        match self {
            BindingError::MissingArray { .. } => {
                Some("read here; no task of the run writes it and the host did not bind it".into())
            }
            _ => None,
        }
    }
}
