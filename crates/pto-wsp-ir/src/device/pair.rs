//! A kernel body's written statements beside their resolved ones, for the device passes.
//!
//! Why: the tile placement ([`super::alloc`]) and the pipe synchronisation ([`super::sync`])
//! are read by the Ascend emitter, which walks the written statements (for the source text in
//! comments) and asks the plans by statement. The passes read every operand in slot form
//! ([`crate::resolve::body`]) and key what they find by the written statement it came from.
//!
//! Promise: [`resolved`] gives a body whose statements correspond one to one, in order and
//! nesting, with the written ones (strict resolution leaves nothing out), so a [`Pair`] walks
//! both together; nothing here looks a name up.

use crate::kernel_body::{KStmt, KStmtKind, TileDecl};
use crate::module::KernelDecl;
use crate::resolve::ResolveError;
use crate::resolve::body::{Body, BodyKind, BodyStmt, resolve_body};

/// `k`'s body in slot form (see the module docs); an empty body when it has none.
pub(crate) fn resolved(k: &KernelDecl) -> Result<Body, ResolveError> {
    resolve_body(k)
}

/// The declaration of tile slot `slot` of `body`, if it is one.
pub(crate) fn tile_of(body: &Body, slot: u32) -> Option<&TileDecl> {
    body.tiles.get(slot as usize).map(|t| &t.decl)
}

/// A block: its written statements beside their resolved ones.
#[derive(Clone, Copy)]
pub(crate) struct Pair<'a> {
    /// As written: the keys of the plans.
    pub(crate) written: &'a [KStmt],
    /// Resolved.
    pub(crate) resolved: &'a [BodyStmt],
}

impl<'a> Pair<'a> {
    /// The top-level block of `k`'s body, `body` being [`resolved`]`(k)`.
    pub(crate) fn top(k: &'a KernelDecl, body: &'a Body) -> Pair<'a> {
        Pair {
            written: k.body.as_deref().unwrap_or(&[]),
            resolved: &body.stmts,
        }
    }

    /// Each statement as written beside it resolved.
    pub(crate) fn iter(self) -> impl Iterator<Item = (&'a KStmt, &'a BodyStmt)> {
        self.written.iter().zip(self.resolved)
    }

    /// The blocks nested in statement `s` (resolved as `b`): a `for`'s body, or an `if`'s two
    /// branches (`then` first); none for other statements.
    pub(crate) fn nested(s: &'a KStmt, b: &'a BodyStmt) -> Vec<Pair<'a>> {
        let pair = |written: &'a [KStmt], resolved: &'a [BodyStmt]| Pair { written, resolved };
        match (&s.kind, &b.kind) {
            (KStmtKind::For { body, .. }, BodyKind::For { body: r, .. }) => vec![pair(body, r)],
            (
                KStmtKind::If {
                    then_body,
                    else_body,
                    ..
                },
                BodyKind::If {
                    then_body: rt,
                    else_body: re,
                    ..
                },
            ) => vec![pair(then_body, rt), pair(else_body, re)],
            _ => Vec::new(),
        }
    }
}
