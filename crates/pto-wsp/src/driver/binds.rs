//! Default bindings written in a `.wsp` file, and the one place bindings are applied.
//!
//! Why: an example should expand with no flags, so a file may carry its default bindings as
//! comments of the form `//@ bind NAME=VALUE` (one per line, anywhere in the file). This is a
//! convention of the front ends (read by this driver), not of the format: the parser sees
//! ordinary comments.
//! Promise: every `//@ bind` line is found with its location, so a bad default is reported at
//! `file:line:column`; bindings given by the front end (`--bind`, Python's `bind=`) are applied
//! after the file's defaults and override them.

use pto_wsp_ir::{Bindings, Diagnostic, Loc, Module};
use std::fmt;

/// The comment prefix that marks a default binding.
pub const PREFIX: &str = "//@ bind";

/// One `//@ bind NAME=VALUE` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindLine {
    /// The `NAME=VALUE` text, trimmed.
    pub spec: String,
    /// Where `spec` stands in the file.
    pub loc: Loc,
}

/// Every `//@ bind` line of `text`, in file order.
pub fn default_binds(text: &str) -> Vec<BindLine> {
    directive_lines(text, PREFIX)
}

/// Every line of `text` that starts (after indentation) with the directive `prefix` (`//@ bind`,
/// `//@ alias`) followed by whitespace, in file order, with the location of what follows it.
pub fn directive_lines(text: &str, prefix: &str) -> Vec<BindLine> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let lead = body.len() - body.trim_start().len();
        if let Some(rest) = body.trim_start().strip_prefix(prefix)
            && (rest.is_empty() || rest.starts_with(char::is_whitespace))
        {
            let spec = rest.trim();
            let spec_start = offset + lead + prefix.len() + (rest.len() - rest.trim_start().len());
            out.push(BindLine {
                spec: spec.to_string(),
                loc: Loc::new(spec_start, spec_start + spec.len().max(1)),
            });
        }
        offset += line.len();
    }
    out
}

/// Applies one `NAME=VALUE` binding to `bindings`, checked against `module`.
pub fn apply(bindings: &mut Bindings, module: &Module, spec: &str) -> Result<(), String> {
    bindings.bind_str(module, spec).map_err(|e| e.to_string())
}

/// A bad `//@ bind` line, as a diagnostic pointing at it.
#[derive(Clone, Debug)]
pub struct BindLineError {
    /// What is wrong.
    pub message: String,
    /// The `NAME=VALUE` text in the file.
    pub loc: Loc,
}

impl fmt::Display for BindLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad default binding: {}", self.message)
    }
}

impl Diagnostic for BindLineError {
    fn loc(&self) -> Loc {
        self.loc
    }
    fn notes(&self) -> Vec<String> {
        vec!["default bindings are written `//@ bind NAME=VALUE`".to_string()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_bind_lines_with_locations() {
        let text = "// header\n//@ bind seq=1024\nsymbol seq: i64;\n  //@ bind  n=[1, 2]\n//@ binder x=1\n";
        let lines = default_binds(text);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].spec, "seq=1024");
        assert_eq!(
            &text[lines[0].loc.start as usize..lines[0].loc.end as usize],
            "seq=1024"
        );
        assert_eq!(lines[1].spec, "n=[1, 2]");
        assert_eq!(
            &text[lines[1].loc.start as usize..lines[1].loc.end as usize],
            "n=[1, 2]"
        );
    }
}
