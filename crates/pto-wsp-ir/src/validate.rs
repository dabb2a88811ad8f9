//! The validator. STUB — to be implemented.

use crate::loc::Loc;
use crate::module::Module;

/// A mistake in a module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// Placeholder.
    #[error("validator not implemented")]
    Unimplemented,
}

impl crate::source::Diagnostic for ValidationError {
    fn loc(&self) -> Loc {
        Loc::NONE
    }
}

/// Checks `module`, returning every mistake found.
pub fn validate(module: &Module) -> Result<(), Vec<ValidationError>> {
    let _ = module;
    Ok(())
}
