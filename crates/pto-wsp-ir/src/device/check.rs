//! The a2a3 rules applied to kernel bodies, for the places users work: `check --target
//! ascend_a2a3`, `compile` and `emit ascend` for the Ascend targets, and `run --device-rules a2a3`.
//!
//! Why: the CPU simulation runs any tile kind from anywhere and any element type on any unit;
//! the device does not. A kernel is judged here, at the `.wsp` line, before anything reaches a
//! device compiler.
//!
//! Promise: [`check_kernel`] returns every violation of a body (a movement the device lacks, an
//! element type a unit does not take, a shape over an instruction's limit, a cube + vector kernel
//! the runtime cannot host, live tiles over a buffer's capacity), each a [`DeviceError`] at the
//! statement's location naming the kernel, the tiles, the numbers and the rule's [`Source`].
//! A kernel with no violations splits ([`super::split`]) and places ([`super::alloc`]) without
//! error.

use super::{Class, Core, Move, Place, Run, Source, Unit};
use crate::kernel_body::{TileDecl, TileKind};
use crate::loc::Loc;
use crate::module::KernelDecl;
use crate::resolve::body::{Arg, Body, BodyKind, BodyStmt, resolve_body_all};
use crate::source::Diagnostic;
use crate::tile_isa::{Operand, TileOp};

/// A kernel breaks a rule of the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceError {
    /// The kernel.
    pub kernel: String,
    /// What is wrong, with the numbers.
    pub message: String,
    /// Where the rule is stated.
    pub source: Source,
    /// The statement.
    pub loc: Loc,
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kernel `{}`: not legal on {}: {}",
            self.kernel,
            super::DEVICE,
            self.message
        )
    }
}

impl Diagnostic for DeviceError {
    fn loc(&self) -> Loc {
        self.loc
    }

    fn notes(&self) -> Vec<String> {
        vec![format!("rule: {}", self.source)]
    }
}

/// A rule broken by one instruction, before it is located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What is wrong.
    pub message: String,
    /// Where the rule is stated.
    pub source: Source,
}

/// The tile operands of an instruction of `body` (destination and sources, in operand order),
/// read through their slots; `None` if one is not a tile (never in a body that resolves).
pub fn inst_tiles<'b>(
    body: &'b Body,
    op: TileOp,
    args: &[Arg],
) -> Option<Vec<(Operand, &'b TileDecl)>> {
    let mut out = Vec::new();
    for (kind, a) in op.operands().iter().zip(args) {
        if matches!(kind, Operand::Dst | Operand::Src) {
            let Arg::Tile(r) = a else { return None };
            out.push((*kind, super::pair::tile_of(body, r.tile)?));
        }
    }
    Some(out)
}

fn place_of(t: &TileDecl) -> Place {
    Place::Tile(t.kind)
}

fn describe(t: &TileDecl) -> String {
    format!(
        "`{}`, a `{}` tile ({})",
        t.name,
        t.kind,
        super::buffer(t.kind).name
    )
}

/// Where `op` on these tile operands runs on the device (its movement row), or why it cannot.
pub fn place(op: TileOp, tiles: &[(Operand, &TileDecl)]) -> Result<&'static Move, Violation> {
    let mn = op.mnemonic();
    let class = Class::of(op);
    let first = tiles.first().map(|t| t.1);
    let (dst, src) = match class {
        Class::Load => (first.map(place_of), Some(Place::Gm)),
        Class::Store => (Some(Place::Gm), first.map(place_of)),
        Class::Mov | Class::Matmul => (first.map(place_of), tiles.get(1).map(|t| place_of(t.1))),
        Class::Vector | Class::Scalar => {
            if let Some((_, t)) = tiles.iter().find(|(_, t)| t.kind != TileKind::Vec) {
                return Err(Violation {
                    message: format!(
                        "{mn} on {}: vector instructions read and write `vec` (UB) tiles only; \
                         TMOV the tile into a `vec` tile first",
                        describe(t)
                    ),
                    source: super::MOVES
                        .iter()
                        .find(|m| m.class == Class::Vector)
                        .map(|m| m.source)
                        .unwrap_or(super::PIPES_SOURCE),
                });
            }
            (
                Some(Place::Tile(TileKind::Vec)),
                Some(Place::Tile(TileKind::Vec)),
            )
        }
    };
    let (Some(dst), Some(src)) = (dst, src) else {
        return Err(Violation {
            message: format!("{mn}: operands missing"),
            source: super::PIPES_SOURCE,
        });
    };
    if let Some(m) = super::find_move(class, dst, src) {
        return Ok(m);
    }
    let source = super::MOVES
        .iter()
        .find(|m| m.class == class)
        .map(|m| m.source)
        .unwrap_or(super::PIPES_SOURCE);
    let message = match class {
        Class::Load => format!(
            "TLOAD into {}: on {} global memory is loaded into `vec` (UB) or `mat` (L1) tiles \
             only; load into a `mat` tile and TMOV it into `{}`",
            describe(first.expect("a load has a tile")),
            super::DEVICE,
            first.map(|t| t.name.name.as_str()).unwrap_or("")
        ),
        Class::Store => format!(
            "TSTORE from {}: on {} only `vec`, `acc` and `mat` tiles are stored to global memory",
            describe(first.expect("a store has a tile")),
            super::DEVICE
        ),
        Class::Mov => format!(
            "TMOV from {} into {}: {} moves mat → left / right, acc → mat and vec → vec within a \
             core, and acc / mat → vec and vec → left / right / mat between the cube and vector \
             cores (through global memory); nothing else",
            describe(tiles[1].1),
            describe(tiles[0].1),
            super::DEVICE
        ),
        Class::Matmul => format!(
            "{mn}: the accumulator must be an `acc` tile and the operands `left` and `right` tiles \
             (got {})",
            tiles
                .iter()
                .map(|(_, t)| describe(t))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Class::Vector | Class::Scalar => unreachable!("vector operands were checked above"),
    };
    Err(Violation { message, source })
}

/// The element-type rule `op` on these tiles breaks, if any.
pub fn element_types(op: TileOp, tiles: &[(Operand, &TileDecl)]) -> Option<Violation> {
    let mn = op.mnemonic();
    if super::is_vector_arith(op) {
        let rule = super::type_rule(Unit::VectorArith);
        // Integer operands (masks, indices) are the instruction's own business; the unit's rule
        // is about floating-point data.
        if let Some((_, t)) = tiles
            .iter()
            .find(|(_, t)| t.dtype.is_float() && !rule.dtypes.contains(&t.dtype))
        {
            return Some(Violation {
                message: format!("{mn} on `{}` ({}): {}", t.name, t.dtype, rule.what),
                source: rule.source,
            });
        }
    }
    if Class::of(op) == Class::Matmul && tiles.len() == 3 {
        let rule = super::type_rule(Unit::Cube);
        let (a, b) = (tiles[1].1, tiles[2].1);
        if a.dtype != b.dtype || !rule.dtypes.contains(&a.dtype) {
            return Some(Violation {
                message: format!(
                    "{mn} of `{}` ({}) by `{}` ({}): {}",
                    a.name, a.dtype, b.name, b.dtype, rule.what
                ),
                source: rule.source,
            });
        }
    }
    if op == TileOp::Mov && tiles.len() == 2 {
        let (d, s) = (tiles[0].1, tiles[1].1);
        if d.dtype != s.dtype && s.kind != TileKind::Acc {
            let rule = super::type_rule(Unit::Movement);
            return Some(Violation {
                message: format!(
                    "TMOV from `{}` ({}) into `{}` ({}): {}; convert with TCVT on a `vec` tile",
                    s.name, s.dtype, d.name, d.dtype, rule.what
                ),
                source: rule.source,
            });
        }
    }
    None
}

/// The shape limit `op` on these tiles breaks, if any.
pub fn limits(op: TileOp, tiles: &[(Operand, &TileDecl)]) -> Option<Violation> {
    let mn = op.mnemonic();
    let over = |i: usize, value: u64, what: String| {
        let l = &super::LIMITS[i];
        (value > l.max).then(|| Violation {
            message: format!("{mn}: {what} is {value}, over the {} of {}", l.max, l.what),
            source: l.source,
        })
    };
    let t0 = tiles.first()?.1;
    match Class::of(op) {
        Class::Load if t0.kind == TileKind::Vec => {
            let (r, _) = super::padded_shape(t0.kind, t0.dtype, t0.rows, t0.cols);
            over(0, r, format!("`{}` has {r} rows", t0.name))
        }
        Class::Store if t0.kind == TileKind::Acc => {
            let (_, c) = super::padded_shape(t0.kind, t0.dtype, t0.rows, t0.cols);
            over(1, c, format!("`{}` has {c} columns", t0.name))
        }
        Class::Matmul if tiles.len() == 3 => {
            let (a, b) = (tiles[1].1, tiles[2].1);
            let m = a.rows.max(a.cols).max(b.cols);
            over(2, m, "the largest of M, K and N".to_string())
        }
        _ => None,
    }
}

/// Every violation of the a2a3 rules in `k`'s body (none for a kernel without a body). The
/// body is read resolved ([`resolve_body_all`]): an instruction whose operands do not resolve is
/// the validator's to report and is not judged here.
pub fn check_kernel(k: &KernelDecl) -> Vec<DeviceError> {
    if k.body.is_none() {
        return Vec::new();
    }
    let (body, _) = resolve_body_all(k);
    let mut errors = Vec::new();
    walk(k, &body, &body.stmts, &mut errors);
    if errors.is_empty() {
        match super::split::split(k) {
            Err(e) => errors.push(e),
            Ok(split) => {
                for part in &split.parts {
                    if let Err(e) = super::alloc::plan(&part.kernel) {
                        errors.push(DeviceError {
                            kernel: k.name.name.clone(),
                            ..e
                        });
                    }
                }
            }
        }
    }
    errors
}

/// The violation of statement `s`, if any.
fn violation(body: &Body, s: &BodyStmt) -> Option<Violation> {
    match &s.kind {
        BodyKind::GetVal { tile, .. } => {
            let t = super::pair::tile_of(body, tile.tile)?;
            (t.kind != TileKind::Vec).then(|| Violation {
                message: format!(
                    "GETVAL of {}: the scalar unit reads single elements of `vec` (UB) tiles only",
                    describe(t)
                ),
                source: super::MOVES
                    .iter()
                    .find(|m| m.class == Class::Scalar)
                    .expect("a scalar row")
                    .source,
            })
        }
        BodyKind::Inst { op, args } => {
            let tiles = inst_tiles(body, *op, args)?;
            place(*op, &tiles)
                .err()
                .or_else(|| element_types(*op, &tiles))
                .or_else(|| limits(*op, &tiles))
        }
        _ => None,
    }
}

fn walk(k: &KernelDecl, body: &Body, stmts: &[BodyStmt], errors: &mut Vec<DeviceError>) {
    for s in stmts {
        match &s.kind {
            BodyKind::For { body: inner, .. } => walk(k, body, inner, errors),
            BodyKind::If {
                then_body,
                else_body,
                ..
            } => {
                walk(k, body, then_body, errors);
                walk(k, body, else_body, errors);
            }
            _ => {
                if let Some(v) = violation(body, s) {
                    errors.push(DeviceError {
                        kernel: k.name.name.clone(),
                        message: v.message,
                        source: v.source,
                        loc: s.loc,
                    });
                }
            }
        }
    }
}

/// The core an instruction's movement row runs on, or the cores it joins.
pub fn cores(m: &Move) -> (Core, Core) {
    match m.run {
        Run::On { core, .. } => (core, core),
        Run::Cross { from, to } => (from, to),
    }
}
