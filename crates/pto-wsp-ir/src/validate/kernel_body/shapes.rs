//! The shape column of the instruction table ([`ShapeRule`]) applied to an instruction's tile
//! operands, one rule per function.
//!
//! Why: each rule is a few comparisons of rows, columns, element types and tile kinds, with its
//! own message; written one per function they read as the table does.
//!
//! Promise: [`problems`] returns what breaks `op`'s rule, each message without the mnemonic,
//! in a fixed order; the rules of loads and stores (which read the region parameter) and the
//! element types of broadcast binaries are the caller's.

use super::{TileUse, d};
use crate::kernel_body::TileKind;
use crate::tile_isa::{ShapeRule, TileOp};
use crate::types::DType;

/// `x`'s name and shape, for messages.
fn shape(x: &TileUse) -> String {
    format!("`{}` is {} x {}", x.name, x.decl.rows, x.decl.cols)
}

/// Whether `a` and `b` have one shape.
fn same(a: &TileUse, b: &TileUse) -> bool {
    a.decl.rows == b.decl.rows && a.decl.cols == b.decl.cols
}

/// What breaks `op`'s shape rule on tile operands `t` (see the module docs).
pub(super) fn problems(op: TileOp, t: &[TileUse]) -> Vec<String> {
    match op.shape_rule() {
        ShapeRule::Same | ShapeRule::Convert | ShapeRule::FillPad => same_shape(op, t),
        ShapeRule::RowReduce | ShapeRule::RowExpand => row_vector(op, t),
        ShapeRule::ColExpand => col_expand(t),
        ShapeRule::Transpose => transpose(t),
        ShapeRule::ColReduce => col_reduce(t),
        ShapeRule::RowExpandBinary | ShapeRule::ColExpandBinary => expand_binary(op, t),
        ShapeRule::Matmul => matmul(t),
        ShapeRule::Compare => compare(t),
        ShapeRule::Select => select(t),
        ShapeRule::Sort32 => sort32(t),
        ShapeRule::MrgSort => mrg_sort(t),
        ShapeRule::SortPart => sort_part(op, t),
        ShapeRule::Index => index(t),
        ShapeRule::Gather | ShapeRule::Scatter => gather_scatter(op, t),
        ShapeRule::Load | ShapeRule::Store | ShapeRule::Tri | ShapeRule::SetVal => Vec::new(),
    }
}

/// All operands of one shape (and, but for a conversion, one element type).
fn same_shape(op: TileOp, t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    for x in &t[1..] {
        if !same(&t[0], x) {
            bad.push(format!(
                "{} but {}: operands must have the same shape",
                shape(&t[0]),
                shape(x)
            ));
        }
        if op.shape_rule() != ShapeRule::Convert && d(x).dtype != d(&t[0]).dtype {
            bad.push(format!(
                "`{}` is {} but `{}` is {}: operands must have the same element type",
                t[0].name,
                d(&t[0]).dtype,
                x.name,
                d(x).dtype
            ));
        }
    }
    if op == TileOp::Mov && t.len() == 2 && d(&t[0]).dtype != d(&t[1]).dtype {
        bad.push(format!(
            "`{}` is {} but `{}` is {}: TMOV copies; convert with TCVT",
            t[0].name,
            d(&t[0]).dtype,
            t[1].name,
            d(&t[1]).dtype
        ));
    }
    bad
}

/// A row reduction or expansion: the vector operand is rows x 1.
fn row_vector(op: TileOp, t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    let (v, full) = if op.shape_rule() == ShapeRule::RowReduce {
        (&t[0], &t[1])
    } else {
        (&t[1], &t[0])
    };
    if d(v).rows != d(full).rows || d(v).cols != 1 {
        bad.push(format!(
            "{} and {}: `{}` must be {} x 1",
            shape(full),
            shape(v),
            v.name,
            d(full).rows
        ));
    }
    bad
}

/// A column expansion: the source is 1 x cols.
fn col_expand(t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    if d(&t[1]).cols != d(&t[0]).cols || d(&t[1]).rows != 1 {
        bad.push(format!(
            "{} and {}: `{}` must be 1 x {}",
            shape(&t[0]),
            shape(&t[1]),
            t[1].name,
            d(&t[0]).cols
        ));
    }
    bad
}

/// A transpose: the destination has the source's shape swapped.
fn transpose(t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    if d(&t[0]).rows != d(&t[1]).cols || d(&t[0]).cols != d(&t[1]).rows {
        bad.push(format!(
            "{} and {}: `{}` must be {} x {}",
            shape(&t[1]),
            shape(&t[0]),
            t[0].name,
            d(&t[1]).cols,
            d(&t[1]).rows
        ));
    }
    bad
}

/// A column reduction: the destination is 1 x cols.
fn col_reduce(t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    if d(&t[0]).cols != d(&t[1]).cols || d(&t[0]).rows != 1 {
        bad.push(format!(
            "{} and {}: `{}` must be 1 x {}",
            shape(&t[1]),
            shape(&t[0]),
            t[0].name,
            d(&t[1]).cols
        ));
    }
    bad
}

/// A broadcast binary: operands 1 and 2 of one shape, the broadcast one a row or column of it.
fn expand_binary(op: TileOp, t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    if !same(&t[0], &t[1]) {
        bad.push(format!(
            "{} but {}: operands 1 and 2 must have the same shape",
            shape(&t[0]),
            shape(&t[1])
        ));
    }
    let (r, c) = if op.shape_rule() == ShapeRule::RowExpandBinary {
        (d(&t[0]).rows, 1)
    } else {
        (1, d(&t[0]).cols)
    };
    if d(&t[2]).rows != r || d(&t[2]).cols != c {
        bad.push(format!(
            "{}: `{}` must be {r} x {c}",
            shape(&t[2]),
            t[2].name
        ));
    }
    bad
}

/// A matrix multiply: M x K by K x N into M x N, of acc, left and right tiles.
fn matmul(t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    let (c, a, b) = (&t[0], &t[1], &t[2]);
    if d(a).cols != d(b).rows || d(c).rows != d(a).rows || d(c).cols != d(b).cols {
        bad.push(format!(
            "{}, {} and {}: need c M x N, a M x K, b K x N",
            shape(c),
            shape(a),
            shape(b)
        ));
    }
    for (x, kind) in [
        (c, TileKind::Acc),
        (a, TileKind::Left),
        (b, TileKind::Right),
    ] {
        if d(x).kind != kind {
            bad.push(format!(
                "`{}` is a {} tile, this operand must be {}",
                x.name,
                d(x).kind,
                kind
            ));
        }
    }
    if d(c).dtype != DType::F32 {
        bad.push(format!(
            "accumulator `{}` must be f32, not {}",
            c.name,
            d(c).dtype
        ));
    }
    if d(a).dtype != d(b).dtype {
        bad.push(format!(
            "`{}` is {} but `{}` is {}: the cube multiplies operands of one type \
                 (f16, bf16 or f32)",
            a.name,
            d(a).dtype,
            b.name,
            d(b).dtype
        ));
    }
    bad
}

/// A comparison into a u8 mask shaped like its sources.
fn compare(t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    if d(&t[0]).dtype != DType::U8 {
        bad.push(format!(
            "mask `{}` must be u8 (PTO-ISA's packed mask), not {}",
            t[0].name,
            d(&t[0]).dtype
        ));
    }
    for x in &t[1..] {
        if !same(&t[0], x) {
            bad.push(format!(
                "{} but {}: the mask is declared with its source's shape",
                shape(&t[0]),
                shape(x)
            ));
        }
    }
    if t.len() == 3 && d(&t[1]).dtype != d(&t[2]).dtype {
        bad.push(format!(
            "`{}` is {} but `{}` is {}: operands must have the same element type",
            t[1].name,
            d(&t[1]).dtype,
            t[2].name,
            d(&t[2]).dtype
        ));
    }
    bad
}

/// A select by a u8 mask: every operand of one shape.
fn select(t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    if d(&t[1]).dtype != DType::U8 {
        bad.push(format!(
            "mask `{}` must be u8 (PTO-ISA's packed mask), not {}",
            t[1].name,
            d(&t[1]).dtype
        ));
    }
    for (i, x) in t.iter().enumerate().skip(1) {
        if !same(&t[0], x) {
            bad.push(format!(
                "{} but {}: operands must have the same shape",
                shape(&t[0]),
                shape(x)
            ));
        }
        if i > 1 && d(x).dtype != d(&t[0]).dtype {
            bad.push(format!(
                "`{}` is {} but `{}` is {}: operands must have the same element type",
                t[0].name,
                d(&t[0]).dtype,
                x.name,
                d(x).dtype
            ));
        }
    }
    bad
}

/// A sort of 32-element blocks into records with their indices.
fn sort32(t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    let (dst, src, idx) = (&t[0], &t[1], &t[2]);
    let per = if d(src).dtype == DType::F16 { 4 } else { 2 };
    if d(dst).dtype != d(src).dtype {
        bad.push(format!(
            "`{}` is {} but `{}` is {}: records have the source's type",
            dst.name,
            d(dst).dtype,
            src.name,
            d(src).dtype
        ));
    }
    if d(idx).dtype != DType::U32 || !same(src, idx) {
        bad.push(format!(
            "{}: the index tile `{}` must be u32 with the source's shape",
            shape(idx),
            idx.name
        ));
    }
    if d(dst).rows != d(src).rows || d(dst).cols != per * d(src).cols {
        bad.push(format!(
            "{} and {}: `{}` must be {} x {} ({per} words per record)",
            shape(src),
            shape(dst),
            dst.name,
            d(src).rows,
            per * d(src).cols
        ));
    }
    bad
}

/// A merge of two sorted one-row record tiles.
fn mrg_sort(t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    if !same(&t[0], &t[1]) || d(&t[0]).rows != 1 || d(&t[0]).dtype != d(&t[1]).dtype {
        bad.push(format!(
            "{} and {}: TMRGSORT merges one-row tiles of one shape and type",
            shape(&t[0]),
            shape(&t[1])
        ));
    }
    bad
}

/// The index or value part of a one-row record tile.
fn sort_part(op: TileOp, t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    let (dst, rec) = (&t[0], &t[1]);
    let per = if d(rec).dtype == DType::F16 { 4 } else { 2 };
    if !d(rec).dtype.is_float() || d(rec).rows != 1 {
        bad.push(format!(
            "records `{}` must be a one-row float tile, not {} {} x {}",
            rec.name,
            d(rec).dtype,
            d(rec).rows,
            d(rec).cols
        ));
    }
    if d(dst).rows != 1 || d(dst).cols * per != d(rec).cols {
        bad.push(format!(
            "{} and {}: `{}` must be 1 x {}",
            shape(rec),
            shape(dst),
            dst.name,
            d(rec).cols / per
        ));
    }
    let want_index = op == TileOp::SortIdx;
    let ok = if want_index {
        matches!(d(dst).dtype, DType::I32 | DType::U32)
    } else {
        d(dst).dtype == d(rec).dtype
    };
    if !ok {
        bad.push(format!(
            "`{}` is {}: {}",
            dst.name,
            d(dst).dtype,
            if want_index {
                "indices are i32 or u32".to_string()
            } else {
                format!("values have the records' type, {}", d(rec).dtype)
            }
        ));
    }
    bad
}

/// An index sequence: a one-row integer tile.
fn index(t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    if !d(&t[0]).dtype.is_integer() || d(&t[0]).rows != 1 {
        bad.push(format!(
            "`{}` is {} {} x {}: TCI writes a one-row integer tile",
            t[0].name,
            d(&t[0]).dtype,
            d(&t[0]).rows,
            d(&t[0]).cols
        ));
    }
    bad
}

/// A gather or scatter by an index tile.
fn gather_scatter(op: TileOp, t: &[TileUse]) -> Vec<String> {
    let mut bad = Vec::new();
    let (dst, src, idx) = (&t[0], &t[1], &t[2]);
    if d(dst).dtype != d(src).dtype {
        bad.push(format!(
            "`{}` is {} but `{}` is {}: operands must have the same element type",
            dst.name,
            d(dst).dtype,
            src.name,
            d(src).dtype
        ));
    }
    let shaped = if op.shape_rule() == ShapeRule::Gather {
        dst
    } else {
        src
    };
    if !matches!(d(idx).dtype, DType::I32 | DType::U32) || !same(shaped, idx) {
        bad.push(format!(
            "{}: the index tile `{}` must be i32 or u32 with `{}`'s shape",
            shape(idx),
            idx.name,
            shaped.name
        ));
    }
    if op.shape_rule() == ShapeRule::Scatter && d(dst).cols != d(src).cols {
        bad.push(format!(
            "{} and {}: TSCATTER moves rows: same columns",
            shape(dst),
            shape(src)
        ));
    }
    bad
}
