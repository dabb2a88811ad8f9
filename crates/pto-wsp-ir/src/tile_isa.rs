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
//! validator checks, a [`CostRule`] the cycle model charges and a [`CppForm`], how PTO-ISA's C++
//! API writes it (or why it cannot), which the C++ emitter reads.

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
    /// An optional integer expression (a row or column offset into a global tile); trailing
    /// optional operands default to 0.
    OptInt,
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
    /// Tile to global region (same element type).
    Store,
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
    /// 5 × valid rows × valid cols of the destination (a sort of n elements ≈ 5n).
    Sort5N,
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
    /// PTO-ISA has no instruction with these semantics; the reason, for the emitter's error.
    Missing(&'static str),
}

/// The comparison modes of `TCMP`, by their spelling.
pub const CMP_MODES: &[&str] = &["EQ", "NE", "LT", "LE", "GT", "GE"];

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
        $var:ident = $mn:literal, [$($operand:ident),*], $shape:ident, $cost:ident, $cpp:expr;
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
    Load = "TLOAD", [Dst, Global, OptInt, OptInt], Load, DstValid, CppForm::Direct;
    /// `TSTORE(global, src[, row, col])`: the tile's valid part to the region at (row, col).
    Store = "TSTORE", [Global, Src, OptInt, OptInt], Store, SrcValid, CppForm::Direct;
    /// `TEXPANDS(dst, v)`: every element = v.
    Expands = "TEXPANDS", [Dst, Float], Same, DstValid, CppForm::Direct;
    /// `TMOV(dst, src)`: copy (between tile kinds: acc to vec, vec to left, ...).
    Mov = "TMOV", [Dst, Src], Convert, DstValid, CppForm::Direct;
    /// `TTRANS(dst, src)`: transpose (the valid part: dst's valid rows × cols is src's cols ×
    /// rows).
    Trans = "TTRANS", [Dst, Src], Transpose, DstValid, CppForm::WithTmp;
    /// `TCVT(dst, src)`: convert element type (rounded to nearest even).
    Cvt = "TCVT", [Dst, Src], Convert, DstValid, CppForm::WithRound;
    /// `TADD(dst, a, b)`.
    Add = "TADD", [Dst, Src, Src], Same, DstValid, CppForm::Direct;
    /// `TSUB(dst, a, b)`.
    Sub = "TSUB", [Dst, Src, Src], Same, DstValid, CppForm::Direct;
    /// `TMUL(dst, a, b)`.
    Mul = "TMUL", [Dst, Src, Src], Same, DstValid, CppForm::Direct;
    /// `TDIV(dst, a, b)`.
    Div = "TDIV", [Dst, Src, Src], Same, DstValid, CppForm::Direct;
    /// `TMAX(dst, a, b)`.
    Max = "TMAX", [Dst, Src, Src], Same, DstValid, CppForm::Direct;
    /// `TMIN(dst, a, b)`.
    Min = "TMIN", [Dst, Src, Src], Same, DstValid, CppForm::Direct;
    /// `TADDS(dst, a, s)`.
    Adds = "TADDS", [Dst, Src, Float], Same, DstValid, CppForm::Direct;
    /// `TSUBS(dst, a, s)`.
    Subs = "TSUBS", [Dst, Src, Float], Same, DstValid, CppForm::Direct;
    /// `TMULS(dst, a, s)`.
    Muls = "TMULS", [Dst, Src, Float], Same, DstValid, CppForm::Direct;
    /// `TDIVS(dst, a, s)`.
    Divs = "TDIVS", [Dst, Src, Float], Same, DstValid, CppForm::Direct;
    /// `TMAXS(dst, a, s)`.
    Maxs = "TMAXS", [Dst, Src, Float], Same, DstValid, CppForm::Direct;
    /// `TEXP(dst, a)`.
    Exp = "TEXP", [Dst, Src], Same, DstValid, CppForm::Direct;
    /// `TLOG(dst, a)` (natural logarithm).
    Log = "TLOG", [Dst, Src], Same, DstValid, CppForm::Direct;
    /// `TSQRT(dst, a)`.
    Sqrt = "TSQRT", [Dst, Src], Same, DstValid, CppForm::Direct;
    /// `TRSQRT(dst, a)`: 1 / √a.
    Rsqrt = "TRSQRT", [Dst, Src], Same, DstValid, CppForm::Direct;
    /// `TABS(dst, a)`.
    Abs = "TABS", [Dst, Src], Same, DstValid, CppForm::Direct;
    /// `TNEG(dst, a)`.
    Neg = "TNEG", [Dst, Src], Same, DstValid, CppForm::Direct;
    /// `TRECIP(dst, a)`: 1 / a.
    Recip = "TRECIP", [Dst, Src], Same, DstValid, CppForm::Direct;
    /// `TROWSUM(dst, a)`: per row, the sum.
    RowSum = "TROWSUM", [Dst, Src], RowReduce, DstValid, CppForm::WithTmp;
    /// `TROWMAX(dst, a)`: per row, the maximum.
    RowMax = "TROWMAX", [Dst, Src], RowReduce, DstValid, CppForm::WithTmp;
    /// `TROWMIN(dst, a)`: per row, the minimum.
    RowMin = "TROWMIN", [Dst, Src], RowReduce, DstValid, CppForm::WithTmp;
    /// `TCOLSUM(dst, a)`: per column, the sum.
    ColSum = "TCOLSUM", [Dst, Src], ColReduce, DstValid, CppForm::Direct;
    /// `TCOLMAX(dst, a)`: per column, the maximum.
    ColMax = "TCOLMAX", [Dst, Src], ColReduce, DstValid, CppForm::Direct;
    /// `TROWEXPAND(dst, v)`: dst[r][c] = v[r][0].
    RowExpand = "TROWEXPAND", [Dst, Src], RowExpand, DstValid, CppForm::Direct;
    /// `TROWEXPANDSUB(dst, a, v)`: dst[r][c] = a[r][c] − v[r][0].
    RowExpandSub = "TROWEXPANDSUB", [Dst, Src, Src], RowExpandBinary, DstValid, CppForm::Direct;
    /// `TROWEXPANDMUL(dst, a, v)`: dst[r][c] = a[r][c] · v[r][0].
    RowExpandMul = "TROWEXPANDMUL", [Dst, Src, Src], RowExpandBinary, DstValid, CppForm::Direct;
    /// `TROWEXPANDDIV(dst, a, v)`: dst[r][c] = a[r][c] / v[r][0].
    RowExpandDiv = "TROWEXPANDDIV", [Dst, Src, Src], RowExpandBinary, DstValid, CppForm::Direct;
    /// `TCOLEXPANDMUL(dst, a, v)`: dst[r][c] = a[r][c] · v[0][c].
    ColExpandMul = "TCOLEXPANDMUL", [Dst, Src, Src], ColExpandBinary, DstValid, CppForm::Direct;
    /// `TCMP(mask, a, b, MODE)`: mask = 1 where `a MODE b` holds, else 0 (the mask is a tile of
    /// the same type; PTO-ISA's mask encoding is target-defined).
    Cmp = "TCMP", [Dst, Src, Src, CmpMode], Same, DstValid, CppForm::Missing("PTO-ISA's TCMP writes a packed bit mask (target-defined encoding), not a tile of 1.0 / 0.0");
    /// `TSEL(dst, mask, a, b)`: dst = a where mask ≠ 0, else b.
    Sel = "TSEL", [Dst, Src, Src, Src], Same, DstValid, CppForm::Missing("PTO-ISA's TSEL reads a packed bit mask (as TCMP writes it), not a tile of 1.0 / 0.0");
    /// `TSORT(dst, a)`: each row's valid part sorted in descending order (NaNs last), a top-k
    /// primitive: the first k columns are the row's k largest. (On the device: `TSORT32` and
    /// `TMRGSORT`.)
    Sort = "TSORT", [Dst, Src], Same, Sort5N, CppForm::Missing("PTO-ISA sorts with TSORT32 (blocks of 32, with an index tile) and TMRGSORT, not a whole-row descending sort");
    /// `TMATMUL(c, a, b)`: c = a · b.
    Matmul = "TMATMUL", [Dst, Src, Src], Matmul, MKN, CppForm::Direct;
    /// `TMATMUL_ACC(c, a, b)`: c += a · b.
    MatmulAcc = "TMATMUL_ACC", [Dst, Src, Src], Matmul, MKN, CppForm::AccTwice;
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
