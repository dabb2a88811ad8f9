//! The kernel library at the front end: the built-in each body-less kernel of a module names
//! (its own name, or a `//@ alias NAME=BUILTIN` line), typed against the built-in's definition in
//! tile instructions (`pto_wsp_kernels::library`) at `check`, and carried to the emitters.
//!
//! Why: the CPU simulation runs the Rust built-ins; every back end that emits code (PTO-ISA
//! C++, the Ascend tree) needs the kernel in tile instructions. A kernel whose element types the
//! library does not define (an integer operand of a product, say) must be refused where the
//! user works, at the kernel's declaration, not inside a C++ compiler.
//!
//! Promises: [`check`] returns one diagnostic per body-less kernel that names a built-in the
//! library cannot instantiate at its types (at the kernel's name; a warning only for a form the
//! CPU simulation alone computes); [`with_bodies`] returns the
//! module with every such kernel given its instance's body (statements located at the kernel's
//! declaration), refusing with the same diagnostics; kernels with their own body, and kernels
//! that name no built-in, are left as they are.

use super::aliases::PREFIX;
use super::binds::directive_lines;
use super::{Error, Loaded, render_all};
use pto_wsp_ir::kernel_body::{KStmt, KStmtKind};
use pto_wsp_ir::{Access, Diagnostic, Loc, ParamKind};
use pto_wsp_kernels::{builtins, library};
use std::fmt;

/// A kernel the library cannot define at its types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryDiag {
    /// What is wrong (the library's message).
    pub message: String,
    /// The kernel's name in its declaration.
    pub loc: Loc,
    /// Whether the module is wrong everywhere (`false`: it runs on the CPU simulation, whose
    /// built-in takes this form, but cannot be emitted for a device: `rope` with angles).
    pub fatal: bool,
}

impl fmt::Display for LibraryDiag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Diagnostic for LibraryDiag {
    fn loc(&self) -> Loc {
        self.loc
    }
}

/// The built-in kernel `name` of `loaded` runs: its alias target, or its own name when that is
/// a built-in; `None` for a kernel with a body or one the runtime supplies otherwise.
pub fn builtin_of(loaded: &Loaded, name: &str) -> Option<String> {
    let k = loaded.module.kernel(name)?;
    if k.body.is_some() {
        return None;
    }
    for line in directive_lines(&loaded.source.text, PREFIX) {
        if let Some((n, target)) = line.spec.split_once('=')
            && n.trim() == name
        {
            return Some(target.trim().to_string());
        }
    }
    builtins::NAMES.contains(&name).then(|| name.to_string())
}

/// The library instance of every body-less kernel naming a built-in: `(index of the kernel in
/// the module, instance)`, or the diagnostics of those the library cannot define.
#[allow(clippy::type_complexity)]
fn instances(loaded: &Loaded) -> Result<Vec<(usize, pto_wsp_ir::KernelDecl)>, Vec<LibraryDiag>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, k) in loaded.module.kernels.iter().enumerate() {
        let Some(builtin) = builtin_of(loaded, &k.name.name) else {
            continue;
        };
        if !builtins::NAMES.contains(&builtin.as_str()) {
            continue;
        }
        match library::instantiate(&builtin, k) {
            Ok(mut inst) => {
                if let Some(body) = inst.body.as_mut() {
                    relocate(body, k.name.loc);
                }
                inst.name = k.name.clone();
                out.push((i, inst));
            }
            Err(e) => {
                let angles = builtin == "rope"
                    && !k.params.iter().any(|p| {
                        matches!(
                            p.kind,
                            ParamKind::Tile {
                                access: Access::In,
                                ..
                            }
                        )
                    });
                errors.push(if angles {
                    LibraryDiag {
                        message: format!(
                            "kernel `{}` runs the built-in `rope` with angle parameters, which \
                             only the CPU simulation computes (the device has no sine or \
                             cosine): to emit it, pass cos / sin tables as its last two `in` \
                             regions (docs/KERNELS.md, `rope`)",
                            k.name
                        ),
                        loc: k.name.loc,
                        fatal: false,
                    }
                } else {
                    LibraryDiag {
                        message: e.to_string(),
                        loc: k.name.loc,
                        fatal: true,
                    }
                });
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The diagnostics of the kernels the library cannot define (empty when all are fine); those
/// not [`LibraryDiag::fatal`] are warnings for `check`, errors for the emitters.
pub fn check(loaded: &Loaded) -> Vec<LibraryDiag> {
    instances(loaded).err().unwrap_or_default()
}

/// `loaded` with every body-less kernel that names a built-in given its library body.
pub fn with_bodies(loaded: &Loaded) -> Result<Loaded, Error> {
    let insts = instances(loaded).map_err(|errs| render_all(&loaded.source, &errs))?;
    let mut out = loaded.clone();
    for (i, inst) in insts {
        out.module.kernels[i] = inst;
    }
    Ok(out)
}

/// Gives every statement of `body` the location `loc` (the library's own text is not the
/// user's file: positions in emitted code and messages point at the kernel's declaration).
fn relocate(body: &mut [KStmt], loc: Loc) {
    for s in body {
        s.loc = loc;
        match &mut s.kind {
            KStmtKind::For { body, .. } => relocate(body, loc),
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                relocate(then_body, loc);
                relocate(else_body, loc);
            }
            _ => {}
        }
    }
}
