//! Conversions between equal element types removed from a library instance.
//!
//! Why: a library definition loads every region into a staging tile of the region's type and
//! converts it into an `f32` tile (`TLOAD(s, x); TCVT(t, s)`), and converts results into a
//! staging tile of the output's type before storing (`TCVT(s, t); TSTORE(y, s)`), so that one
//! text serves every element type. When the region is `f32` itself, the staging tile and the
//! copy are waste (a UB buffer and a vector pass on the device).
//!
//! Promise: `TLOAD(s, g, ...); TCVT(t, s)` becomes `TLOAD(t, g, ...)` and `TCVT(s, t); TSTORE(g,
//! s, ...)` becomes `TSTORE(g, t, ...)` when `s` and `t` are single tiles declared in the same
//! block with the same kind, element type, shape and valid sizes, and `s` is used nowhere else;
//! then tiles no statement names are dropped. The kernel computes exactly what it did.

use pto_wsp_ir::TileOp;
use pto_wsp_ir::kernel_body::{InstArg, KStmt, KStmtKind, TileDecl};
use std::collections::HashMap;

/// Simplifies `body` in place (see the module docs).
pub(super) fn simplify(body: &mut Vec<KStmt>) {
    let mut uses = HashMap::new();
    count(body, &mut uses);
    fold(body, &mut uses);
    drop_unused(body, &uses);
}

fn count(body: &[KStmt], uses: &mut HashMap<String, usize>) {
    for s in body {
        match &s.kind {
            KStmtKind::Inst { args, .. } => {
                for a in args {
                    if let Some(id) = a.tile_name() {
                        *uses.entry(id.name.clone()).or_default() += 1;
                    }
                }
            }
            KStmtKind::GetVal { tile, .. } => {
                if let Some(id) = tile.tile_name() {
                    *uses.entry(id.name.clone()).or_default() += 1;
                }
            }
            KStmtKind::For { body, .. } => count(body, uses),
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                count(then_body, uses);
                count(else_body, uses);
            }
            _ => {}
        }
    }
}

/// The single tile named by `a`, declared in `decls`.
fn single<'d>(a: &InstArg, decls: &'d HashMap<String, TileDecl>) -> Option<&'d TileDecl> {
    match a {
        InstArg::Name(id) => decls.get(&id.name).filter(|d| d.count.is_none()),
        _ => None,
    }
}

fn alike(a: &TileDecl, b: &TileDecl) -> bool {
    a.kind == b.kind
        && a.dtype == b.dtype
        && a.rows == b.rows
        && a.cols == b.cols
        && a.valid == b.valid
}

fn fold(body: &mut Vec<KStmt>, uses: &mut HashMap<String, usize>) {
    let mut decls: HashMap<String, TileDecl> = HashMap::new();
    let mut i = 0;
    while i < body.len() {
        match &mut body[i].kind {
            KStmtKind::Tile(t) => {
                decls.insert(t.name.name.clone(), t.clone());
            }
            KStmtKind::For { body, .. } => fold(body, uses),
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                fold(then_body, uses);
                fold(else_body, uses);
            }
            _ => {}
        }
        if i + 1 < body.len()
            && let Some(new) = fuse(&body[i].kind, &body[i + 1].kind, &decls, uses)
        {
            body[i].kind = new;
            body.remove(i + 1);
            continue;
        }
        i += 1;
    }
}

/// The one instruction standing for the pair `a; b`, if it is a load-convert or a
/// convert-store between equal types (updating `uses`).
fn fuse(
    a: &KStmtKind,
    b: &KStmtKind,
    decls: &HashMap<String, TileDecl>,
    uses: &mut HashMap<String, usize>,
) -> Option<KStmtKind> {
    let (KStmtKind::Inst { op: oa, args: aa }, KStmtKind::Inst { op: ob, args: ba }) = (a, b)
    else {
        return None;
    };
    let name = |x: &InstArg| x.tile_name().map(|i| i.name.clone()).unwrap_or_default();
    match (oa, ob) {
        (TileOp::Load, TileOp::Cvt) => {
            let (s, t) = (single(&aa[0], decls)?, single(&ba[0], decls)?);
            let same_src = name(&ba[1]) == s.name.name;
            if same_src && alike(s, t) && uses.get(&s.name.name) == Some(&2) {
                uses.insert(s.name.name.clone(), 0);
                let mut args = aa.clone();
                args[0] = ba[0].clone();
                return Some(KStmtKind::Inst {
                    op: TileOp::Load,
                    args,
                });
            }
            None
        }
        (TileOp::Cvt, TileOp::Store) => {
            let (s, t) = (single(&aa[0], decls)?, single(&aa[1], decls)?);
            let same_dst = name(&ba[1]) == s.name.name;
            if same_dst && alike(s, t) && uses.get(&s.name.name) == Some(&2) {
                uses.insert(s.name.name.clone(), 0);
                let mut args = ba.clone();
                args[1] = aa[1].clone();
                return Some(KStmtKind::Inst {
                    op: TileOp::Store,
                    args,
                });
            }
            None
        }
        _ => None,
    }
}

fn drop_unused(body: &mut Vec<KStmt>, uses: &HashMap<String, usize>) {
    body.retain(|s| match &s.kind {
        KStmtKind::Tile(t) => uses.get(&t.name.name).copied().unwrap_or(0) > 0,
        _ => true,
    });
    for s in body.iter_mut() {
        match &mut s.kind {
            KStmtKind::For { body, .. } => drop_unused(body, uses),
            KStmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                drop_unused(then_body, uses);
                drop_unused(else_body, uses);
            }
            _ => {}
        }
    }
}
