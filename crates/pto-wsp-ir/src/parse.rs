//! The text format parser. STUB — to be implemented.

use crate::loc::Loc;
use crate::module::Module;

/// A syntax error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    /// What is wrong.
    pub message: String,
    /// Where.
    pub loc: Loc,
}

impl crate::source::Diagnostic for ParseError {
    fn loc(&self) -> Loc {
        self.loc
    }
}

/// Parses a module from its text.
pub fn parse(text: &str) -> Result<Module, ParseError> {
    let _ = text;
    Err(ParseError {
        message: "parser not implemented".into(),
        loc: Loc::NONE,
    })
}
