//! Kernel aliases written in a `.wsp` file: `//@ alias NAME=BUILTIN`.
//!
//! Why: a module names its kernels for what they mean in the workload (`gemm_tile`,
//! `decode_chunk`); the CPU simulation runs a kernel by name. An alias line says which built-in
//! (`docs/KERNELS.md`) a declared kernel runs, so `pto-wsp run` (or Python's `compile`) computes
//! real numbers for a module without any Rust code. Like `//@ bind`, this is a convention of the
//! front ends, read by this driver: the parser sees ordinary comments.
//! Promise: every alias line is checked — the name must be a kernel the module declares, the
//! target a registered kernel, and no kernel aliased twice — and a bad one is reported at its
//! `file:line:column`.

use super::binds::directive_lines;
use super::{Error, Loaded};
use pto_wsp_ir::{Diagnostic, Loc};
use pto_wsp_kernels::{KernelRegistry, builtins};
use std::fmt;

/// The comment prefix that marks a kernel alias.
pub const PREFIX: &str = "//@ alias";

/// Adds every `//@ alias NAME=BUILTIN` line of `loaded` to `registry`: kernel `NAME` of the
/// module runs the kernel `registry` knows as `BUILTIN`.
pub fn apply_aliases(loaded: &Loaded, registry: &mut KernelRegistry) -> Result<(), Error> {
    // Kernels aliased so far: name, target, where.
    let mut seen: Vec<(String, String, Loc)> = Vec::new();
    for line in directive_lines(&loaded.source.text, PREFIX) {
        let err = |message: String| {
            Error::diagnostic(
                &loaded.source,
                &AliasLineError {
                    message,
                    loc: line.loc,
                },
            )
        };
        let Some((name, target)) = line.spec.split_once('=') else {
            return Err(err(format!(
                "`{}` is not `NAME=BUILTIN` (kernel aliases are written `//@ alias NAME=BUILTIN`)",
                line.spec
            )));
        };
        let (name, target) = (name.trim(), target.trim());
        let Some(decl) = loaded.module.kernel(name) else {
            return Err(err(format!(
                "alias of `{name}`, but the module declares no kernel `{name}`"
            )));
        };
        if let Some((_, first, at)) = seen.iter().find(|(n, _, _)| n == name) {
            let (l, c) = loaded.source.line_col(at.start as usize);
            return Err(err(format!(
                "second alias of `{name}` (to `{target}`); line {l}:{c} already maps it to `{first}`"
            )));
        }
        if let Some(sig) = builtins::signature(target) {
            let declared = decl.scalar_types();
            let fits = declared.len() >= sig.required
                && declared.len() <= sig.params.len()
                && declared.iter().zip(sig.params).all(|(d, (_, t))| d == t);
            if !fits {
                let shown: Vec<String> = declared.iter().map(|t| t.to_string()).collect();
                let takes = match sig.params.len() {
                    0 => "no scalar parameters".to_string(),
                    _ => sig.describe(),
                };
                return Err(err(format!(
                    "kernel `{name}` declares scalar parameters ({}), but built-in `{target}` takes {takes}",
                    shown.join(", ")
                )));
            }
        }
        seen.push((name.to_string(), target.to_string(), line.loc));
        if registry.alias(name, target).is_none() {
            let mut known: Vec<&str> = registry.names().collect();
            known.sort_unstable();
            return Err(err(format!(
                "alias of `{name}` to `{target}`, which is not a registered kernel (built-ins: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// A bad `//@ alias` line, as a diagnostic pointing at it.
#[derive(Clone, Debug)]
pub struct AliasLineError {
    /// What is wrong.
    pub message: String,
    /// The `NAME=BUILTIN` text in the file.
    pub loc: Loc,
}

impl fmt::Display for AliasLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad kernel alias: {}", self.message)
    }
}

impl Diagnostic for AliasLineError {
    fn loc(&self) -> Loc {
        self.loc
    }
    fn notes(&self) -> Vec<String> {
        vec![
            "kernel aliases are written `//@ alias NAME=BUILTIN` (see docs/KERNELS.md)".to_string(),
        ]
    }
}
