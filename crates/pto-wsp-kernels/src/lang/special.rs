//! The instructions that run element by element: those on integer tiles (indices, masks,
//! copies of integer tensors), compare and select with PTO-ISA's packed masks, the sort
//! records of `TSORT32` / `TMRGSORT`, index generation (`TCI`, `TTRI`), gather and scatter,
//! padding, single elements (`SETVAL`, `GETVAL`) and the accumulating store.
//!
//! Why apart: the float loops of [`super`] are the hot path of kernels written in tile
//! instructions; these instructions are rare in hot loops (index handling, top-k) and mix
//! element types, so they are written plainly, one element at a time, every index checked.
//!
//! Promise: the semantics are PTO-ISA's (see `pto_wsp_ir::tile_isa`): a mask bit `(r, c)` is
//! bit `c % 8` of byte `r · Cols + c / 8`; `TSORT32` records are (value, index) pairs of
//! `f32` words, the index stored as its value (as PTO-ISA's CPU simulation stores it), sorted
//! descending with equal values by smaller index and NaN last; `TMRGSORT` merges whole groups
//! of four runs, an equal value taken from the earlier run; every index read from a tile is
//! checked against the tile or region it addresses, and an index out of range fails the task
//! with a message naming the instruction, never a panic.

use super::{At, Cmp, Inst, Task, TileInfo, View};
use crate::context::{ReadView, WriteView};
use crate::registry::KernelError;
use half::{bf16, f16};
use pto_wsp_ir::{DType, TileOp};

/// The instructions [`Task::special`] runs whatever their tiles' element types, as a pattern
/// (the one list: [`handles`] tests it and the float executor's dispatch excludes it).
macro_rules! special_ops {
    () => {
        TileOp::StoreAdd
            | TileOp::Cmp
            | TileOp::Cmps
            | TileOp::Sel
            | TileOp::Sels
            | TileOp::Sort32
            | TileOp::MrgSort
            | TileOp::SortIdx
            | TileOp::SortVal
            | TileOp::Ci
            | TileOp::Tri
            | TileOp::Gather
            | TileOp::Scatter
            | TileOp::FillPad
            | TileOp::SetVal
    };
}
pub(super) use special_ops;

/// Whether [`Task::special`] runs the instruction (on the slots `t`): every instruction but the
/// float arithmetic, loads and stores of float tiles.
pub(super) fn handles(i: &Inst, t: &[usize; 4], tiles: &[TileInfo]) -> bool {
    let int = t
        .iter()
        .any(|&s| s != usize::MAX && tiles[s].dtype.is_integer());
    int || matches!(i.op, special_ops!())
}

/// A view of a region of an integer tensor.
pub(super) enum IntView<'c> {
    ReadI32(ReadView<'c, i32>),
    ReadU32(ReadView<'c, u32>),
    ReadI64(ReadView<'c, i64>),
    ReadU64(ReadView<'c, u64>),
    ReadU8(ReadView<'c, u8>),
    WriteI32(WriteView<'c, i32>),
    WriteU32(WriteView<'c, u32>),
    WriteI64(WriteView<'c, i64>),
    WriteU64(WriteView<'c, u64>),
    WriteU8(WriteView<'c, u8>),
}

macro_rules! each_view {
    ($v:expr, $x:ident => $e:expr) => {
        match $v {
            IntView::ReadI32($x) => $e,
            IntView::ReadU32($x) => $e,
            IntView::ReadI64($x) => $e,
            IntView::ReadU64($x) => $e,
            IntView::ReadU8($x) => $e,
            IntView::WriteI32($x) => $e,
            IntView::WriteU32($x) => $e,
            IntView::WriteI64($x) => $e,
            IntView::WriteU64($x) => $e,
            IntView::WriteU8($x) => $e,
        }
    };
}

impl<'c> IntView<'c> {
    /// Opens region `i` of `ctx` (an integer tensor of `dtype`), for writing or not.
    fn open(
        ctx: &'c crate::context::TaskContext<'_>,
        i: usize,
        dtype: DType,
        write: bool,
    ) -> Result<IntView<'c>, KernelError> {
        Ok(match (dtype, write) {
            (DType::I32, false) => IntView::ReadI32(ctx.read(i)?),
            (DType::U32, false) => IntView::ReadU32(ctx.read(i)?),
            (DType::I64, false) => IntView::ReadI64(ctx.read(i)?),
            (DType::U64, false) => IntView::ReadU64(ctx.read(i)?),
            (DType::I32, true) => IntView::WriteI32(ctx.write(i)?),
            (DType::U32, true) => IntView::WriteU32(ctx.write(i)?),
            (DType::I64, true) => IntView::WriteI64(ctx.write(i)?),
            (DType::U64, true) => IntView::WriteU64(ctx.write(i)?),
            (_, false) => IntView::ReadU8(ctx.read(i)?),
            (_, true) => IntView::WriteU8(ctx.write(i)?),
        })
    }

    pub(super) fn dims(&self) -> (usize, usize, DType) {
        let dtype = match self {
            IntView::ReadI32(_) | IntView::WriteI32(_) => DType::I32,
            IntView::ReadU32(_) | IntView::WriteU32(_) => DType::U32,
            IntView::ReadI64(_) | IntView::WriteI64(_) => DType::I64,
            IntView::ReadU64(_) | IntView::WriteU64(_) => DType::U64,
            IntView::ReadU8(_) | IntView::WriteU8(_) => DType::U8,
        };
        let (r, c) = each_view!(self, v => (v.rows(), v.cols()));
        (r, c, dtype)
    }

    fn writable(&self) -> bool {
        !matches!(
            self,
            IntView::ReadI32(_)
                | IntView::ReadU32(_)
                | IntView::ReadI64(_)
                | IntView::ReadU64(_)
                | IntView::ReadU8(_)
        )
    }

    fn get(&self, r: usize, c: usize) -> i64 {
        match self {
            IntView::ReadI32(v) => v.get(r, c) as i64,
            IntView::ReadU32(v) => v.get(r, c) as i64,
            IntView::ReadI64(v) => v.get(r, c),
            IntView::ReadU64(v) => v.get(r, c) as i64,
            IntView::ReadU8(v) => v.get(r, c) as i64,
            IntView::WriteI32(v) => v.get(r, c) as i64,
            IntView::WriteU32(v) => v.get(r, c) as i64,
            IntView::WriteI64(v) => v.get(r, c),
            IntView::WriteU64(v) => v.get(r, c) as i64,
            IntView::WriteU8(v) => v.get(r, c) as i64,
        }
    }

    fn set(&mut self, r: usize, c: usize, x: i64) {
        match self {
            IntView::WriteI32(v) => v.set(r, c, x as i32),
            IntView::WriteU32(v) => v.set(r, c, x as u32),
            IntView::WriteI64(v) => v.set(r, c, x),
            IntView::WriteU64(v) => v.set(r, c, x as u64),
            IntView::WriteU8(v) => v.set(r, c, x as u8),
            _ => unreachable!("opened for writing by the caller"),
        }
    }
}

/// One element of a tile, float or integer.
#[derive(Clone, Copy, Debug)]
enum Num {
    F(f32),
    I(i64),
}

impl Num {
    fn f(self) -> f32 {
        match self {
            Num::F(x) => x,
            Num::I(x) => x as f32,
        }
    }

    fn i(self) -> i64 {
        match self {
            Num::F(x) => x.round_ties_even() as i64,
            Num::I(x) => x,
        }
    }
}

/// `x` as an element of an integer type (two's complement wrap, as a C++ conversion).
fn wrap(dtype: DType, x: i64) -> i64 {
    match dtype {
        DType::I32 => x as i32 as i64,
        DType::U32 => x as u32 as i64,
        DType::U8 => x as u8 as i64,
        _ => x,
    }
}

/// `x` rounded to a float type.
fn round(dtype: DType, x: f32) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(x).to_f32(),
        DType::Bf16 => bf16::from_f32(x).to_f32(),
        _ => x,
    }
}

/// The descending order of `TSORT32` records: by value, NaN last, equal values by index.
fn record_order(a: (f32, i64), b: (f32, i64)) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a.0.is_nan(), b.0.is_nan()) {
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => {
            b.0.partial_cmp(&a.0)
                .unwrap_or(Ordering::Equal)
                .then(a.1.cmp(&b.1))
        }
    }
}

impl Task<'_, '_, '_, '_> {
    fn info(&self, t: usize) -> &TileInfo {
        &self.prog.tiles[t]
    }

    fn cell(&self, t: usize, r: usize, c: usize) -> Num {
        let info = self.info(t);
        let k = r * info.cols + c;
        if info.int() {
            Num::I(self.itiles[t][k])
        } else {
            Num::F(self.tiles[t][k])
        }
    }

    fn set_cell(&mut self, t: usize, r: usize, c: usize, x: Num) {
        let (cols, dtype) = (self.info(t).cols, self.info(t).dtype);
        let k = r * cols + c;
        if dtype.is_integer() {
            self.itiles[t][k] = wrap(dtype, x.i());
        } else {
            self.tiles[t][k] = round(dtype, x.f());
        }
    }

    /// Element `(r, c)` of integer tile `t` (`GETVAL`), checked against its declared shape.
    pub(super) fn get_value(&self, t: usize, r: i64, c: i64) -> Result<i64, KernelError> {
        let (row, col) = self.element("GETVAL", t, r, c)?;
        Ok(self.cell(t, row, col).i())
    }

    /// `(r, c)` as indices of tile `t`'s declared shape, or the error naming `what`.
    fn element(&self, what: &str, t: usize, r: i64, c: i64) -> Result<(usize, usize), KernelError> {
        let info = self.info(t);
        match (usize::try_from(r), usize::try_from(c)) {
            (Ok(row), Ok(col)) if row < info.rows && col < info.cols => Ok((row, col)),
            _ => Err(self.err(format!(
                "{what}: ({r}, {c}) is outside tile `{}` ({} x {})",
                info.name, info.rows, info.cols
            ))),
        }
    }

    /// Runs an instruction [`handles`] accepts.
    pub(super) fn special(&mut self, i: &Inst, t: [usize; 4]) -> Result<(), KernelError> {
        let live: Vec<usize> = t.iter().copied().filter(|&s| s != usize::MAX).collect();
        self.materialize(&live);
        let (vr, vc) = self.valid[t[0]];
        let mn = i.op.mnemonic();
        match i.op {
            TileOp::Load | TileOp::Store | TileOp::StoreAdd => return self.int_load_store(i, t),
            TileOp::Expands => {
                let x = self.scalar(&i.scalar)?;
                let x = if x.is_finite() {
                    Num::F(x)
                } else {
                    return Err(self.err(format!("{mn}: {x} into integer tile")));
                };
                for r in 0..vr {
                    for c in 0..vc {
                        self.set_cell(t[0], r, c, x);
                    }
                }
            }
            TileOp::Mov | TileOp::Cvt => {
                for r in 0..vr {
                    for c in 0..vc {
                        let x = self.cell(t[1], r, c);
                        self.set_cell(t[0], r, c, x);
                    }
                }
            }
            TileOp::ColExpand => {
                for r in 0..vr {
                    for c in 0..vc {
                        let x = self.cell(t[1], 0, c);
                        self.set_cell(t[0], r, c, x);
                    }
                }
            }
            TileOp::Cmp | TileOp::Cmps => self.compare(i, t)?,
            TileOp::Sel | TileOp::Sels => {
                let s = self.scalar(&i.scalar)?;
                let mcols = self.info(t[1]).cols;
                for r in 0..vr {
                    for c in 0..vc {
                        let (byte, bit) = pto_wsp_ir::tile_isa::mask_bit(mcols, r, c);
                        let on = self.itiles[t[1]][byte] >> bit & 1 == 1;
                        let x = match (on, i.op) {
                            (true, _) => self.cell(t[2], r, c),
                            (false, TileOp::Sel) => self.cell(t[3], r, c),
                            (false, _) => Num::F(s),
                        };
                        self.set_cell(t[0], r, c, x);
                    }
                }
            }
            TileOp::Sort32 => self.sort32(t)?,
            TileOp::MrgSort => self.merge_sort(i, t)?,
            TileOp::SortIdx | TileOp::SortVal => {
                let word = usize::from(i.op == TileOp::SortIdx);
                for c in 0..vc {
                    let x = self.cell(t[1], 0, 2 * c + word);
                    self.set_cell(t[0], 0, c, x);
                }
            }
            TileOp::Ci => {
                let start = self.int(&i.ints[0])?;
                for c in 0..vc {
                    self.set_cell(t[0], 0, c, Num::I(start + c as i64));
                }
            }
            TileOp::Tri => {
                let d = self.int(&i.ints[0])?;
                for r in 0..vr {
                    for c in 0..vc {
                        let (r, c) = (r as i64, c as i64);
                        let one = if i.mode == 0 { c <= r + d } else { c >= r + d };
                        self.set_cell(t[0], r as usize, c as usize, Num::I(i64::from(one)));
                    }
                }
            }
            TileOp::Gather => self.gather(t)?,
            TileOp::Scatter => self.scatter(t)?,
            TileOp::FillPad => self.fill_pad(i, t),
            TileOp::SetVal => {
                let (r, c, x) = (
                    self.int(&i.ints[0])?,
                    self.int(&i.ints[1])?,
                    self.int(&i.ints[2])?,
                );
                let (row, col) = self.element("SETVAL", t[0], r, c)?;
                self.set_cell(t[0], row, col, Num::I(x));
            }
            _ => {
                return Err(self.err(format!(
                    "{mn}: integer tiles take only data movement, not arithmetic"
                )));
            }
        }
        Ok(())
    }

    fn compare(&mut self, i: &Inst, t: [usize; 4]) -> Result<(), KernelError> {
        let (vr, vc) = self.valid[t[1]];
        let s = self.scalar(&i.scalar)?;
        let mcols = self.info(t[0]).cols;
        for r in 0..vr {
            for byte in 0..vc.div_ceil(8) {
                self.itiles[t[0]][r * mcols + byte] = 0;
            }
            for c in 0..vc {
                let a = self.cell(t[1], r, c).f();
                let b = if i.op == TileOp::Cmp {
                    self.cell(t[2], r, c).f()
                } else {
                    s
                };
                let on = match i.cmp {
                    Cmp::Eq => a == b,
                    Cmp::Ne => a != b,
                    Cmp::Lt => a < b,
                    Cmp::Le => a <= b,
                    Cmp::Gt => a > b,
                    Cmp::Ge => a >= b,
                };
                if on {
                    let (byte, bit) = pto_wsp_ir::tile_isa::mask_bit(mcols, r, c);
                    self.itiles[t[0]][byte] |= 1 << bit;
                }
            }
        }
        Ok(())
    }

    fn sort32(&mut self, t: [usize; 4]) -> Result<(), KernelError> {
        let (vr, vc) = self.valid[t[1]];
        if self.valid[t[2]] != (vr, vc) {
            return Err(self.err(format!(
                "TSORT32: the index tile `{}` has valid {:?}, the source {:?}: they must agree",
                self.info(t[2]).name,
                self.valid[t[2]],
                (vr, vc)
            )));
        }
        let mut block = Vec::with_capacity(32);
        for r in 0..vr {
            for j in (0..vc).step_by(32) {
                block.clear();
                for c in j..(j + 32).min(vc) {
                    block.push((self.cell(t[1], r, c).f(), self.cell(t[2], r, c).i()));
                }
                block.sort_by(|a, b| record_order(*a, *b));
                for (k, &(v, ix)) in block.iter().enumerate() {
                    self.set_cell(t[0], r, 2 * (j + k), Num::F(v));
                    self.set_cell(t[0], r, 2 * (j + k) + 1, Num::F(ix as f32));
                }
            }
        }
        Ok(())
    }

    fn merge_sort(&mut self, i: &Inst, t: [usize; 4]) -> Result<(), KernelError> {
        let block = self.int(&i.ints[0])?;
        let cols = self.valid[t[0]].1;
        let block = match usize::try_from(block) {
            Ok(b) if b > 0 && b % 2 == 0 => b,
            _ => {
                return Err(self.err(format!(
                    "TMRGSORT: block length {block} is not a positive even number of words"
                )));
            }
        };
        let per = block / 2;
        let src: Vec<f32> = (0..cols.min(self.info(t[1]).cols))
            .map(|c| self.cell(t[1], 0, c).f())
            .collect();
        let mut base = 0;
        while base + 4 * block <= cols && base + 4 * block <= src.len() {
            let mut next = [0usize; 4];
            for out in 0..4 * per {
                let mut pick: Option<usize> = None;
                for (b, &n) in next.iter().enumerate() {
                    if n >= per {
                        continue;
                    }
                    let v = src[base + b * block + 2 * n];
                    if pick.is_none_or(|p| v > src[base + p * block + 2 * next[p]]) {
                        pick = Some(b);
                    }
                }
                let Some(p) = pick else { break };
                let at = base + p * block + 2 * next[p];
                self.set_cell(t[0], 0, base + 2 * out, Num::F(src[at]));
                self.set_cell(t[0], 0, base + 2 * out + 1, Num::F(src[at + 1]));
                next[p] += 1;
            }
            base += 4 * block;
        }
        Ok(())
    }

    fn gather(&mut self, t: [usize; 4]) -> Result<(), KernelError> {
        let (vr, vc) = self.valid[t[0]];
        let (sr, sc) = (self.info(t[1]).rows, self.info(t[1]).cols);
        for r in 0..vr {
            for c in 0..vc {
                let k = self.cell(t[2], r, c).i();
                let Some(k) = usize::try_from(k).ok().filter(|&k| k < sr * sc) else {
                    return Err(self.err(format!(
                        "TGATHER: index {k} at ({r}, {c}) is outside `{}` ({sr} x {sc} = {} elements)",
                        self.info(t[1]).name,
                        sr * sc
                    )));
                };
                let x = self.cell(t[1], k / sc, k % sc);
                self.set_cell(t[0], r, c, x);
            }
        }
        Ok(())
    }

    fn scatter(&mut self, t: [usize; 4]) -> Result<(), KernelError> {
        let (vr, vc) = self.valid[t[1]];
        let rows = self.info(t[0]).rows;
        for r in 0..vr {
            for c in 0..vc {
                let row = self.cell(t[2], r, c).i();
                let Some(row) = usize::try_from(row).ok().filter(|&x| x < rows) else {
                    return Err(self.err(format!(
                        "TSCATTER: row index {row} at ({r}, {c}) is outside `{}` ({rows} rows)",
                        self.info(t[0]).name
                    )));
                };
                let x = self.cell(t[1], r, c);
                self.set_cell(t[0], row, c, x);
            }
        }
        Ok(())
    }

    fn fill_pad(&mut self, i: &Inst, t: [usize; 4]) {
        let (rows, cols, dtype) = (
            self.info(t[0]).rows,
            self.info(t[0]).cols,
            self.info(t[0]).dtype,
        );
        let (sr, sc) = self.valid[t[1]];
        let pad = match (i.mode, dtype) {
            (0, _) => Num::I(0),
            (1, DType::I32) => Num::I(i32::MIN as i64),
            (2, DType::I32) => Num::I(i32::MAX as i64),
            (1, DType::U32 | DType::U8 | DType::U64) => Num::I(0),
            (2, DType::U32) => Num::I(u32::MAX as i64),
            (2, DType::U8) => Num::I(u8::MAX as i64),
            (1, DType::I64) => Num::I(i64::MIN),
            (2, DType::I64 | DType::U64) => Num::I(i64::MAX),
            (1, _) => Num::F(f32::NEG_INFINITY),
            (_, _) => Num::F(f32::INFINITY),
        };
        // Reads of the source first: it may be the destination.
        let mut cells = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            for c in 0..cols {
                cells.push(if r < sr && c < sc {
                    self.cell(t[1], r, c)
                } else {
                    pad
                });
            }
        }
        for (k, x) in cells.into_iter().enumerate() {
            self.set_cell(t[0], k / cols, k % cols, x);
        }
    }

    /// Loads and stores of integer tiles, and `TSTOREADD`.
    fn int_load_store(&mut self, i: &Inst, t: [usize; 4]) -> Result<(), KernelError> {
        let tile = t[0];
        let (vr, vc) = self.valid[tile];
        let (r0, c0) = (self.offset(&i.at[0])?, self.offset(&i.at[1])?);
        let ri = i.region;
        let load = i.op == TileOp::Load;
        let ctx = self.ctx;
        let dtype = ctx.info(ri)?.dtype;
        if self.info(tile).int() != dtype.is_integer() {
            return Err(self.err(format!(
                "{}: tile `{}` is {} but region {ri} holds {dtype}",
                i.op.mnemonic(),
                self.info(tile).name,
                self.info(tile).dtype
            )));
        }
        let write = !load || self.prog.regions[ri];
        match &self.views[ri] {
            View::Closed => {
                self.views[ri] = if dtype.is_integer() {
                    View::Int(IntView::open(ctx, ri, dtype, write)?)
                } else {
                    View::Write(ctx.write_float(ri)?)
                };
            }
            View::Int(v) if !load && !v.writable() => {
                self.views[ri] = View::Int(IntView::open(ctx, ri, dtype, true)?);
            }
            View::Read(_) if !load => self.views[ri] = View::Write(ctx.write_float(ri)?),
            _ => {}
        }
        let (rows, cols, _) = self.views[ri].dims();
        let outside =
            |start: usize, n: usize, end: usize| start.checked_add(n).is_none_or(|e| e > end);
        if outside(r0, vr, rows) || outside(c0, vc, cols) {
            return Err(self.err(format!(
                "{}: {vr} x {vc} at ({r0}, {c0}) is outside region {ri} ({rows} x {cols})",
                i.op.mnemonic()
            )));
        }
        let at: At = (r0, c0, vr, vc);
        self.move_elements(i.op, tile, ri, at)
    }

    fn move_elements(
        &mut self,
        op: TileOp,
        tile: usize,
        ri: usize,
        at: At,
    ) -> Result<(), KernelError> {
        let (r0, c0, vr, vc) = at;
        let cols = self.info(tile).cols;
        let dtype = self.info(tile).dtype;
        match (&mut self.views[ri], op) {
            (View::Int(v), TileOp::Load) => {
                for r in 0..vr {
                    for c in 0..vc {
                        self.itiles[tile][r * cols + c] = wrap(dtype, v.get(r0 + r, c0 + c));
                    }
                }
            }
            (View::Int(v), TileOp::Store) => {
                for r in 0..vr {
                    for c in 0..vc {
                        v.set(r0 + r, c0 + c, self.itiles[tile][r * cols + c]);
                    }
                }
            }
            (View::Write(w), TileOp::StoreAdd) => {
                // The whole row, so that its other elements are stored back unchanged (they
                // are exact in the region's type).
                let mut row = vec![0.0f32; w.cols()];
                for r in 0..vr {
                    w.load_row(r0 + r, &mut row);
                    for c in 0..vc {
                        row[c0 + c] += self.tiles[tile][r * cols + c];
                    }
                    w.store_row(r0 + r, &row);
                }
            }
            _ => {
                return Err(self.err(format!(
                    "{}: region {ri} cannot take this tile",
                    op.mnemonic()
                )));
            }
        }
        Ok(())
    }
}
