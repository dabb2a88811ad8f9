//! The tile instruction set of kernel bodies, written once.
//!
//! Why: a kernel body (`crate::kernel_body`) is a list of PTO tile instructions (`TLOAD`,
//! `TMATMUL`, `TROWMAX`, ...). The parser, the validator, the CPU executor, the cycle model and
//! the C++ emitter all need to know, per instruction, its operands, its shape rule and its cost;
//! they all read this one table ([`TileOp`], made by the `tile_ops!` macro) so that adding an
//! instruction is one line here plus its CPU loop.
//!
//! Promise: every [`TileOp`] has a mnemonic (its spelling in `.wsp` text and the PTO-ISA C++
//! function name), an operand signature ([`Operand`] kinds in order), a [`ShapeRule`] the
//! validator checks, the element types its tiles take ([`Elems`]), a [`CostRule`] the cycle
//! model charges and a [`CppForm`], how PTO-ISA's C++ API writes it (or why it cannot), which
//! the C++ emitter reads.
//!
//! Semantics are PTO-ISA's (its `docs/isa/*.md` and the a2a3 implementation under
//! `include/pto/npu/a2a3/`) wherever they are defined there: comparisons write a packed `u8`
//! mask (bit `c % 8` of byte `r · Cols + c / 8` for element `(r, c)`, `Cols` the mask tile's
//! declared columns, which are the source's), `TSEL` reads it; `TSORT32` sorts blocks of 32
//! into (value, index) records that `TMRGSORT` merges; `TGATHER` indexes the source tile's
//! storage flat (row pitch = its declared columns); `TSCATTER` writes rows by index, the last
//! writer winning.

/// The kind of one operand of a tile instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// A tile declared in the body that the instruction writes.
    Dst,
    /// A tile declared in the body that the instruction reads.
    Src,
    /// A tile parameter of the kernel (global memory: the task's region).
    Global,
    /// A float scalar: a float literal or an `f32` / `f64` parameter of the kernel.
    Float,
    /// A comparison mode word: `EQ`, `NE`, `LT`, `LE`, `GT` or `GE`.
    CmpMode,
    /// A triangle word of `TTRI`: `LOWER` or `UPPER`.
    TriMode,
    /// A padding word of `TFILLPAD`: `ZERO`, `MIN` (−∞ for floats) or `MAX` (+∞).
    PadMode,
    /// An integer expression (`i64`).
    Int,
    /// An optional integer expression (a row or column offset into a global tile); trailing
    /// optional operands default to 0.
    OptInt,
}

/// The element types an instruction's tiles take (beyond what its [`ShapeRule`] says).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elems {
    /// Float tiles only (`f32`, `f16`, `bf16`): arithmetic.
    Float,
    /// Any element type, integers included (data movement).
    Any,
}

/// How the shapes of an instruction's tiles must relate (checked on declared rows × cols; valid
/// rows / cols are checked again at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShapeRule {
    /// Every tile operand has the destination's shape and element type.
    Same,
    /// Same shape, any float element types (conversion).
    Convert,
    /// `dst[r][0] = reduce(src[r][..])`: dst is `R × 1`, src `R × C`.
    RowReduce,
    /// `dst[0][c] = reduce(src[..][c])`: dst is `1 × C`, src `R × C`.
    ColReduce,
    /// `dst[r][c] = src[r][0]`: dst `R × C`, src `R × 1`.
    RowExpand,
    /// `dst[r][c] = a[r][c] ∘ b[r][0]`: dst and a `R × C`, b `R × 1`.
    RowExpandBinary,
    /// `dst[r][c] = a[r][c] ∘ b[0][c]`: dst and a `R × C`, b `1 × C`.
    ColExpandBinary,
    /// `dst (M × N, acc, f32) ⟵ a (M × K, left) · b (K × N, right)`.
    Matmul,
    /// `dst[c][r] = src[r][c]`: dst `C × R`, src `R × C`, any float types.
    Transpose,
    /// Global region to tile (same element type); the region must hold the tile's valid part.
    Load,
    /// Tile to global region (same element type, or an `f32` accumulator into an `f16` /
    /// `bf16` region: the cube's fix pipe converts).
    Store,
    /// `dst[r][c] = src[0][c]`: dst `R × C`, src `1 × C`.
    ColExpand,
    /// A comparison into a packed mask: dst `u8` with the source's shape, float sources of one
    /// type (`TCMP`: two tiles; `TCMPS`: a tile and a scalar).
    Compare,
    /// `dst = mask ? a : b`: dst and the sources one shape and type, the mask `u8` of that
    /// shape (`TSELS`: `b` is a scalar).
    Select,
    /// `TSORT32(dst, src, idx)`: src `R × C` float, idx `u32` with src's shape, dst of src's
    /// type with `R` rows and room for `C` 8-byte (value, index) records (`2C` columns of `f32`,
    /// `4C` of `f16`).
    Sort32,
    /// `TMRGSORT(dst, src, blockLen)`: one-row tiles of one float type and shape.
    MrgSort,
    /// `TSORTIDX` / `TSORTVAL(dst, records)`: the indices (`i32`/`u32` dst) or values (dst of
    /// the records' type) of the records of a sorted one-row tile; dst has half the columns
    /// (`f32` records) or a quarter (`f16`).
    SortPart,
    /// `TCI(dst, start)`: an integer tile of one row.
    Index,
    /// `TTRI(dst, diagonal, MODE)`: any element type.
    Tri,
    /// `TGATHER(dst, src, idx)`: dst and src one element type, idx `i32` / `u32` with dst's
    /// shape.
    Gather,
    /// `TSCATTER(dst, src, idx)`: dst and src one element type, idx `i32` / `u32` with src's
    /// shape, dst with src's columns.
    Scatter,
    /// `TFILLPAD(dst, src, PAD)`: same shape and element type.
    FillPad,
    /// `SETVAL(dst, row, col, value)`: one element of a tile.
    SetVal,
}

/// How many cycles one instruction costs, from the shapes it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CostRule {
    /// Valid rows × valid cols of the destination tile (element-wise, reductions, `TLOAD`).
    DstValid,
    /// Valid rows × valid cols of the source tile (`TSTORE`).
    SrcValid,
    /// M × K × N (`TMATMUL`).
    MKN,
    /// 5 × valid rows × valid cols of the source (a sort of n elements ≈ 5n).
    Sort5N,
    /// One cycle (a scalar access).
    One,
}

/// How an instruction is written in PTO-ISA's C++ API (`#include <pto/pto-inst.hpp>`), read by
/// the C++ emitter. Tile operands become tile objects, global operands `GlobalTensor`s of the
/// region part the instruction moves, float operands values of the tile's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CppForm {
    /// `MNEMONIC(operands...)`, the operands in the order written.
    Direct,
    /// `MNEMONIC(dst, src, tmp)`: PTO-ISA also takes a scratch tile shaped like the source
    /// (row reductions, `TTRANS`).
    WithTmp,
    /// `MNEMONIC(dst, src, RoundMode::CAST_RINT)` (`TCVT`: round to nearest even).
    WithRound,
    /// `TMATMUL_ACC(c, c, a, b)`: PTO-ISA names the accumulator as output and input.
    AccTwice,
    /// `MNEMONIC(dst, src, PAD)` written with the pad as `dst`'s tile type (`TFILLPAD`), or
    /// the mode as a template argument (`TCI`, `TTRI`): the emitter writes the form.
    Template,
    /// `pto_wsp_rt::NAME(operands...[, tmp])`: a helper of the emitted support header, because
    /// the instruction's C++ spelling or semantics differ between PTO-ISA's CPU simulation and
    /// the a2a3 templates (e.g. `TCOLSUM(dst, src)` there, `TCOLSUM(dst, src, tmp, isBinary)`
    /// on a2a3); the header picks the form by platform (its `__CPU_SIM` branch gives the
    /// device's semantics). With `tmp`, a scratch tile shaped like the source is passed last.
    Helper {
        /// The support function's name.
        name: &'static str,
        /// Whether it takes a scratch tile shaped like the source.
        tmp: bool,
    },
    /// PTO-ISA has no instruction with these semantics; the reason, for the emitter's error.
    Missing(&'static str),
}

/// The comparison modes of `TCMP`, by their spelling.
pub const CMP_MODES: &[&str] = &["EQ", "NE", "LT", "LE", "GT", "GE"];

/// The triangle modes of `TTRI`, by their spelling (PTO-ISA's `isUpperOrLower` 0 and 1).
pub const TRI_MODES: &[&str] = &["LOWER", "UPPER"];

/// The padding values of `TFILLPAD`, by their spelling (PTO-ISA's `PadValue`).
pub const PAD_MODES: &[&str] = &["ZERO", "MIN", "MAX"];

/// The bit of element `(r, c)` in a packed mask of `cols` declared columns (PTO-ISA's a2a3
/// layout): byte `r · cols + c / 8`, bit `c % 8`.
pub fn mask_bit(cols: usize, r: usize, c: usize) -> (usize, u32) {
    (r * cols + c / 8, (c % 8) as u32)
}

/// `a MODE b` for a mode of [`CMP_MODES`] (`false` for an unknown mode).
pub fn compare(mode: &str, a: f32, b: f32) -> bool {
    match mode {
        "EQ" => a == b,
        "NE" => a != b,
        "LT" => a < b,
        "LE" => a <= b,
        "GT" => a > b,
        "GE" => a >= b,
        _ => false,
    }
}

macro_rules! tile_ops {
    ($(
        $(#[doc = $doc:literal])*
        $var:ident = $mn:literal, [$($operand:ident),*], $shape:ident, $elems:ident, $cost:ident, $cpp:expr;
    )*) => {
        /// A tile instruction.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum TileOp {
            $( $(#[doc = $doc])* $var, )*
        }

        impl TileOp {
            /// Every instruction, in table order.
            pub const ALL: &'static [TileOp] = &[$(TileOp::$var),*];

            /// The mnemonic (`.wsp` spelling and PTO-ISA C++ function name).
            pub fn mnemonic(self) -> &'static str {
                match self { $(TileOp::$var => $mn,)* }
            }

            /// The operand kinds in order.
            pub fn operands(self) -> &'static [Operand] {
                match self { $(TileOp::$var => &[$(Operand::$operand),*],)* }
            }

            /// The shape rule the validator checks.
            pub fn shape_rule(self) -> ShapeRule {
                match self { $(TileOp::$var => ShapeRule::$shape,)* }
            }

            /// The element types its tiles take.
            pub fn elems(self) -> Elems {
                match self { $(TileOp::$var => Elems::$elems,)* }
            }

            /// The cycle charge of the default cycle model.
            pub fn cost_rule(self) -> CostRule {
                match self { $(TileOp::$var => CostRule::$cost,)* }
            }

            /// How PTO-ISA's C++ API spells the instruction (the C++ emitter's column).
            pub fn cpp_form(self) -> CppForm {
                match self { $(TileOp::$var => $cpp,)* }
            }

            /// The instruction's documentation line(s), as written in the table.
            pub fn doc(self) -> &'static str {
                match self { $(TileOp::$var => concat!($($doc, "\n"),*),)* }
            }

            /// The instruction spelled `mnemonic`.
            pub fn parse(mnemonic: &str) -> Option<TileOp> {
                match mnemonic { $($mn => Some(TileOp::$var),)* _ => None }
            }
        }
    };
}

tile_ops! {
    /// `TLOAD(dst, global[, row, col])`: the global region's part at (row, col) into the tile.
    Load = "TLOAD", [Dst, Global, OptInt, OptInt], Load, Any, DstValid, CppForm::Direct;
    /// `TSTORE(global, src[, row, col])`: the tile's valid part to the region at (row, col).
    Store = "TSTORE", [Global, Src, OptInt, OptInt], Store, Any, SrcValid, CppForm::Direct;
    /// `TSTOREADD(global, src[, row, col])`: the region's part += the tile (an `inout` region;
    /// PTO-ISA's `TSTORE<AtomicType::AtomicAdd>`, which its CPU simulation ignores: a helper).
    StoreAdd = "TSTOREADD", [Global, Src, OptInt, OptInt], Store, Float, SrcValid, CppForm::Helper { name: "store_add", tmp: false };
    /// `TEXPANDS(dst, v)`: every element = v.
    Expands = "TEXPANDS", [Dst, Float], Same, Any, DstValid, CppForm::Direct;
    /// `TMOV(dst, src)`: copy (between tile kinds: acc to vec, vec to left, ...).
    Mov = "TMOV", [Dst, Src], Convert, Any, DstValid, CppForm::Direct;
    /// `TTRANS(dst, src)`: transpose (the valid part: dst's valid rows × cols is src's cols ×
    /// rows).
    Trans = "TTRANS", [Dst, Src], Transpose, Float, DstValid, CppForm::WithTmp;
    /// `TCVT(dst, src)`: convert element type (rounded to nearest even; float to integer
    /// rounds to nearest even too).
    Cvt = "TCVT", [Dst, Src], Convert, Any, DstValid, CppForm::WithRound;
    /// `TADD(dst, a, b)`.
    Add = "TADD", [Dst, Src, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TSUB(dst, a, b)`.
    Sub = "TSUB", [Dst, Src, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TMUL(dst, a, b)`.
    Mul = "TMUL", [Dst, Src, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TDIV(dst, a, b)`.
    Div = "TDIV", [Dst, Src, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TMAX(dst, a, b)`.
    Max = "TMAX", [Dst, Src, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TMIN(dst, a, b)`.
    Min = "TMIN", [Dst, Src, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TADDS(dst, a, s)`.
    Adds = "TADDS", [Dst, Src, Float], Same, Float, DstValid, CppForm::Direct;
    /// `TSUBS(dst, a, s)`.
    Subs = "TSUBS", [Dst, Src, Float], Same, Float, DstValid, CppForm::Direct;
    /// `TMULS(dst, a, s)`.
    Muls = "TMULS", [Dst, Src, Float], Same, Float, DstValid, CppForm::Direct;
    /// `TDIVS(dst, a, s)`.
    Divs = "TDIVS", [Dst, Src, Float], Same, Float, DstValid, CppForm::Direct;
    /// `TMAXS(dst, a, s)`.
    Maxs = "TMAXS", [Dst, Src, Float], Same, Float, DstValid, CppForm::Direct;
    /// `TMINS(dst, a, s)`.
    Mins = "TMINS", [Dst, Src, Float], Same, Float, DstValid, CppForm::Direct;
    /// `TEXP(dst, a)`.
    Exp = "TEXP", [Dst, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TLOG(dst, a)` (natural logarithm).
    Log = "TLOG", [Dst, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TSQRT(dst, a)`.
    Sqrt = "TSQRT", [Dst, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TRSQRT(dst, a)`: 1 / √a.
    Rsqrt = "TRSQRT", [Dst, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TABS(dst, a)`.
    Abs = "TABS", [Dst, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TNEG(dst, a)`.
    Neg = "TNEG", [Dst, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TRECIP(dst, a)`: 1 / a.
    Recip = "TRECIP", [Dst, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TRELU(dst, a)`: `a < 0 ? 0 : a` (NaN and −0 kept).
    Relu = "TRELU", [Dst, Src], Same, Float, DstValid, CppForm::Direct;
    /// `TROWSUM(dst, a)`: per row, the sum.
    RowSum = "TROWSUM", [Dst, Src], RowReduce, Float, DstValid, CppForm::WithTmp;
    /// `TROWMAX(dst, a)`: per row, the maximum.
    RowMax = "TROWMAX", [Dst, Src], RowReduce, Float, DstValid, CppForm::WithTmp;
    /// `TROWMIN(dst, a)`: per row, the minimum.
    RowMin = "TROWMIN", [Dst, Src], RowReduce, Float, DstValid, CppForm::WithTmp;
    /// `TCOLSUM(dst, a)`: per column, the sum.
    ColSum = "TCOLSUM", [Dst, Src], ColReduce, Float, DstValid, CppForm::Helper { name: "colsum", tmp: true };
    /// `TCOLMAX(dst, a)`: per column, the maximum.
    ColMax = "TCOLMAX", [Dst, Src], ColReduce, Float, DstValid, CppForm::Direct;
    /// `TCOLMIN(dst, a)`: per column, the minimum.
    ColMin = "TCOLMIN", [Dst, Src], ColReduce, Float, DstValid, CppForm::Direct;
    /// `TROWEXPAND(dst, v)`: dst[r][c] = v[r][0].
    RowExpand = "TROWEXPAND", [Dst, Src], RowExpand, Float, DstValid, CppForm::Direct;
    /// `TROWEXPANDADD(dst, a, v)`: dst[r][c] = a[r][c] + v[r][0].
    RowExpandAdd = "TROWEXPANDADD", [Dst, Src, Src], RowExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TROWEXPANDSUB(dst, a, v)`: dst[r][c] = a[r][c] − v[r][0].
    RowExpandSub = "TROWEXPANDSUB", [Dst, Src, Src], RowExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TROWEXPANDMUL(dst, a, v)`: dst[r][c] = a[r][c] · v[r][0].
    RowExpandMul = "TROWEXPANDMUL", [Dst, Src, Src], RowExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TROWEXPANDDIV(dst, a, v)`: dst[r][c] = a[r][c] / v[r][0].
    RowExpandDiv = "TROWEXPANDDIV", [Dst, Src, Src], RowExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TROWEXPANDMAX(dst, a, v)`: dst[r][c] = max(a[r][c], v[r][0]).
    RowExpandMax = "TROWEXPANDMAX", [Dst, Src, Src], RowExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TROWEXPANDMIN(dst, a, v)`: dst[r][c] = min(a[r][c], v[r][0]).
    RowExpandMin = "TROWEXPANDMIN", [Dst, Src, Src], RowExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TROWEXPANDEXPDIF(dst, a, v)`: dst[r][c] = exp(a[r][c] − v[r][0]).
    RowExpandExpDif = "TROWEXPANDEXPDIF", [Dst, Src, Src], RowExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TCOLEXPAND(dst, v)`: dst[r][c] = v[0][c].
    ColExpand = "TCOLEXPAND", [Dst, Src], ColExpand, Any, DstValid, CppForm::Direct;
    /// `TCOLEXPANDADD(dst, a, v)`: dst[r][c] = a[r][c] + v[0][c].
    ColExpandAdd = "TCOLEXPANDADD", [Dst, Src, Src], ColExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TCOLEXPANDSUB(dst, a, v)`: dst[r][c] = a[r][c] − v[0][c].
    ColExpandSub = "TCOLEXPANDSUB", [Dst, Src, Src], ColExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TCOLEXPANDMUL(dst, a, v)`: dst[r][c] = a[r][c] · v[0][c].
    ColExpandMul = "TCOLEXPANDMUL", [Dst, Src, Src], ColExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TCOLEXPANDDIV(dst, a, v)`: dst[r][c] = a[r][c] / v[0][c].
    ColExpandDiv = "TCOLEXPANDDIV", [Dst, Src, Src], ColExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TCOLEXPANDMAX(dst, a, v)`: dst[r][c] = max(a[r][c], v[0][c]).
    ColExpandMax = "TCOLEXPANDMAX", [Dst, Src, Src], ColExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TCOLEXPANDMIN(dst, a, v)`: dst[r][c] = min(a[r][c], v[0][c]).
    ColExpandMin = "TCOLEXPANDMIN", [Dst, Src, Src], ColExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TCOLEXPANDEXPDIF(dst, a, v)`: dst[r][c] = exp(a[r][c] − v[0][c]).
    ColExpandExpDif = "TCOLEXPANDEXPDIF", [Dst, Src, Src], ColExpandBinary, Float, DstValid, CppForm::Direct;
    /// `TCMP(mask, a, b, MODE)`: bit (r, c) of the `u8` mask = `a[r][c] MODE b[r][c]`.
    Cmp = "TCMP", [Dst, Src, Src, CmpMode], Compare, Float, DstValid, CppForm::Helper { name: "cmp", tmp: false };
    /// `TCMPS(mask, a, s, MODE)`: bit (r, c) of the `u8` mask = `a[r][c] MODE s`.
    Cmps = "TCMPS", [Dst, Src, Float, CmpMode], Compare, Float, DstValid, CppForm::Helper { name: "cmps", tmp: false };
    /// `TSEL(dst, mask, a, b)`: dst = a where the mask's bit is set, else b.
    Sel = "TSEL", [Dst, Src, Src, Src], Select, Float, DstValid, CppForm::Helper { name: "sel", tmp: false };
    /// `TSELS(dst, mask, a, s)`: dst = a where the mask's bit is set, else s (a2a3's form).
    Sels = "TSELS", [Dst, Src, Src, Float], Select, Float, DstValid, CppForm::Helper { name: "sels", tmp: false };
    /// `TSORT32(dst, src, idx)`: per row, each block of 32 valid elements sorted descending
    /// (equal values by smaller index) into (value, index) records, `idx` giving each
    /// element's index.
    Sort32 = "TSORT32", [Dst, Src, Src], Sort32, Float, Sort5N, CppForm::Direct;
    /// `TMRGSORT(dst, src, blockLen)`: merges each group of four sorted runs of `blockLen`
    /// record words (values and indices: 2 per `f32` record) into one run.
    MrgSort = "TMRGSORT", [Dst, Src, Int], MrgSort, Float, DstValid, CppForm::Direct;
    /// `TSORTIDX(idx, records)`: the index of each record.
    SortIdx = "TSORTIDX", [Dst, Src], SortPart, Any, DstValid, CppForm::Helper { name: "sort_index", tmp: false };
    /// `TSORTVAL(dst, records)`: the value of each record.
    SortVal = "TSORTVAL", [Dst, Src], SortPart, Any, DstValid, CppForm::Helper { name: "sort_value", tmp: false };
    /// `TCI(dst, start)`: dst[0][j] = start + j.
    Ci = "TCI", [Dst, Int], Index, Any, DstValid, CppForm::Template;
    /// `TTRI(dst, d, LOWER)`: 1 where `c ≤ r + d`, else 0; `UPPER`: 0 where `c < r + d`, else 1.
    Tri = "TTRI", [Dst, Int, TriMode], Tri, Any, DstValid, CppForm::Template;
    /// `TGATHER(dst, src, idx)`: dst[r][c] = src's element `idx[r][c]` in storage order (row
    /// pitch = src's declared columns).
    Gather = "TGATHER", [Dst, Src, Src], Gather, Any, DstValid, CppForm::Direct;
    /// `TSCATTER(dst, src, idx)`: dst[idx[r][c]][c] = src[r][c], row-major order, the last
    /// writer winning.
    Scatter = "TSCATTER", [Dst, Src, Src], Scatter, Any, SrcValid, CppForm::Direct;
    /// `TFILLPAD(dst, src, PAD)`: dst = src inside src's valid part, PAD elsewhere in dst's
    /// declared shape.
    FillPad = "TFILLPAD", [Dst, Src, PadMode], FillPad, Any, DstValid, CppForm::Template;
    /// `SETVAL(dst, row, col, value)`: one element (on the scalar unit: PTO-ISA's `SetValue`).
    SetVal = "SETVAL", [Dst, Int, Int, Int], SetVal, Any, One, CppForm::Helper { name: "set_value", tmp: false };
    /// `TMATMUL(c, a, b)`: c = a · b.
    Matmul = "TMATMUL", [Dst, Src, Src], Matmul, Float, MKN, CppForm::Direct;
    /// `TMATMUL_ACC(c, a, b)`: c += a · b.
    MatmulAcc = "TMATMUL_ACC", [Dst, Src, Src], Matmul, Float, MKN, CppForm::AccTwice;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemonics_parse_back_and_are_unique() {
        for &op in TileOp::ALL {
            assert_eq!(TileOp::parse(op.mnemonic()), Some(op));
        }
        let mut names: Vec<_> = TileOp::ALL.iter().map(|o| o.mnemonic()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TileOp::ALL.len());
    }
}
