//! Top-level names and local variables.
//!
//! Why: a name may be declared only once across all kinds of declaration, and a variable may not
//! shadow any name in scope (`SEMANTICS.md`, "Names and scopes"), so that every name means one
//! thing. This module keeps the one table of top-level names the other checks resolve against.
//! Promise: the table maps each name to its *first* declaration; later duplicates are reported by
//! [`Globals::build`] and otherwise ignored.

use super::errors::ValidationError;
use crate::loc::Loc;
use crate::module::Module;
use crate::types::ScalarType;
use std::collections::HashMap;

/// What a top-level name declares (with the index into its `Module` list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decl {
    /// A runtime symbol.
    Symbol(ScalarType),
    /// A slot.
    Slot(ScalarType),
    /// `Module::tensors[i]`.
    Tensor(usize),
    /// `Module::axes[i]`.
    Axis(usize),
    /// `Module::kernels[i]`.
    Kernel(usize),
    /// `Module::workloads[i]`.
    Workload(usize),
    /// `Module::pipelines[i]`.
    Pipeline(usize),
}

impl Decl {
    /// The kind keyword (`tensor`).
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Decl::Symbol(_) => "symbol",
            Decl::Slot(_) => "slot",
            Decl::Tensor(_) => "tensor",
            Decl::Axis(_) => "axis",
            Decl::Kernel(_) => "kernel",
            Decl::Workload(_) => "workload",
            Decl::Pipeline(_) => "pipeline",
        }
    }

    /// The kind with its article (`a tensor`, `an axis`).
    pub(crate) fn article(self) -> &'static str {
        match self {
            Decl::Symbol(_) => "a symbol",
            Decl::Slot(_) => "a slot",
            Decl::Tensor(_) => "a tensor",
            Decl::Axis(_) => "an axis",
            Decl::Kernel(_) => "a kernel",
            Decl::Workload(_) => "a workload",
            Decl::Pipeline(_) => "a pipeline",
        }
    }
}

/// The table of top-level names.
pub(crate) struct Globals {
    names: HashMap<String, Decl>,
}

impl Globals {
    /// Collects every top-level declaration of `m`, reporting names declared twice.
    pub(crate) fn build(m: &Module, errors: &mut Vec<ValidationError>) -> Globals {
        let mut decls: Vec<(&crate::loc::Ident, Decl)> = Vec::new();
        decls.extend(m.symbols.iter().map(|d| (&d.name, Decl::Symbol(d.ty))));
        decls.extend(m.slots.iter().map(|d| (&d.name, Decl::Slot(d.ty))));
        decls.extend(
            m.tensors
                .iter()
                .enumerate()
                .map(|(i, d)| (&d.name, Decl::Tensor(i))),
        );
        decls.extend(
            m.axes
                .iter()
                .enumerate()
                .map(|(i, d)| (&d.name, Decl::Axis(i))),
        );
        decls.extend(
            m.kernels
                .iter()
                .enumerate()
                .map(|(i, d)| (&d.name, Decl::Kernel(i))),
        );
        decls.extend(
            m.workloads
                .iter()
                .enumerate()
                .map(|(i, d)| (&d.name, Decl::Workload(i))),
        );
        decls.extend(
            m.pipelines
                .iter()
                .enumerate()
                .map(|(i, d)| (&d.name, Decl::Pipeline(i))),
        );
        // Report the later declaration in source order when locations are known; otherwise in
        // the order kinds are listed above.
        decls.sort_by_key(|(id, _)| {
            if id.loc.is_known() {
                id.loc.start
            } else {
                u32::MAX
            }
        });
        let mut names: HashMap<String, Decl> = HashMap::new();
        for (id, decl) in decls {
            if let Some(prev) = names.get(&id.name) {
                errors.push(ValidationError::DuplicateDeclaration {
                    kind: decl.kind(),
                    name: id.name.clone(),
                    previous: prev.article(),
                    loc: id.loc,
                    path: format!("{} {}", decl.kind(), id.name),
                });
            } else {
                names.insert(id.name.clone(), decl);
            }
        }
        Globals { names }
    }

    /// The first declaration of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Decl> {
        self.names.get(name).copied()
    }
}

/// A variable bound in a workload or process body.
#[derive(Clone, Debug)]
pub(crate) struct Local {
    /// The name.
    pub(crate) name: String,
    /// Its type.
    pub(crate) ty: ScalarType,
    /// What it is, with article (`a loop variable`).
    pub(crate) what: &'static str,
}

/// The shadowing check shared by every binder: `name` (a `what`, e.g. `loop variable`) may not
/// reuse a top-level name or a local already in scope.
pub(crate) fn check_shadowing(
    globals: &Globals,
    locals: &[Local],
    what: &str,
    name: &str,
    loc: Loc,
    path: &str,
    errors: &mut Vec<ValidationError>,
) {
    let shadowed = if let Some(l) = locals.iter().rev().find(|l| l.name == name) {
        Some(l.what.to_string())
    } else {
        globals.get(name).map(|d| d.article().to_string())
    };
    if let Some(shadowed) = shadowed {
        errors.push(ValidationError::Shadowing {
            what: what.to_string(),
            name: name.to_string(),
            shadowed,
            loc,
            path: path.to_string(),
        });
    }
}
