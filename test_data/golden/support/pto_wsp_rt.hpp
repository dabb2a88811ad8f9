// pto-wsp emitted-kernel support (written by `pto-wsp emit`; do not edit).
// What every emitted kernel needs beside PTO-ISA itself, legal in AI Core code (no exceptions,
// no stdio, no heap, C++17): a task's region as a descriptor of global memory (no copies), the
// GlobalTensor of the part of a region a TLOAD / TSTORE moves, integer division that refuses
// zero, the status a kernel reports a failed check through, and the instructions whose C++
// spelling or semantics differ between PTO-ISA's CPU simulation and the device (column sums,
// packed compare masks and selects, sort-record fields, padding, accumulating and converting
// stores, single elements): each such helper's `__CPU_SIM` branch computes the device's
// documented semantics element by element, its other branch is the PTO-ISA instruction. The
// same text compiles for PTO-ISA's CPU simulation (-D__CPU_SIM) and for an a2a3 AI Core.
#pragma once
#include <cstdint>
#include <type_traits>
#ifdef __CPU_SIM
// PTO-ISA's CPU simulation uses these without including them.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#endif

#include <pto/pto-inst.hpp>

#ifndef __gm__
#define __gm__
#endif

namespace pto_wsp_rt {

// The outcome of one task. A kernel whose check fails writes the check's number (`code`, an
// index into the message table its emitter wrote beside it, 0 = no failure) and up to seven
// integers the message quotes, then returns. Written once per task: the host reads it after the
// run and prints the message.
struct Status {
    int64_t code;
    int64_t v[7];
};

// Records a failed check (the first one of the task) and returns false.
inline bool fail(__gm__ Status *st, int64_t code, int64_t a = 0, int64_t b = 0, int64_t c = 0, int64_t d = 0,
                 int64_t e = 0, int64_t f = 0, int64_t g = 0)
{
    if (st != nullptr && st->code == 0) {
        st->v[0] = a;
        st->v[1] = b;
        st->v[2] = c;
        st->v[3] = d;
        st->v[4] = e;
        st->v[5] = f;
        st->v[6] = g;
        st->code = code;
    }
    return false;
}

inline bool failed(__gm__ Status *st)
{
    return st != nullptr && st->code != 0;
}

inline int64_t idiv(__gm__ Status *st, int64_t code, int64_t a, int64_t b)
{
    if (b == 0) {
        fail(st, code, a);
        return 0;
    }
    return a / b;
}

inline int64_t irem(__gm__ Status *st, int64_t code, int64_t a, int64_t b)
{
    if (b == 0) {
        fail(st, code, a);
        return 0;
    }
    return a % b;
}

inline int64_t imin(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

inline int64_t imax(int64_t a, int64_t b)
{
    return a < b ? b : a;
}

// A tile's valid rows x cols must lie within its declared shape.
inline bool check_valid(__gm__ Status *st, int64_t code, int64_t vr, int64_t vc, int64_t rows, int64_t cols)
{
    if (vr < 0 || vc < 0 || vr > rows || vc > cols) {
        return fail(st, code, vr, vc);
    }
    return true;
}

// A task's region seen as rows x cols (rows: every dimension but the last, collapsed): row r
// starts at base + (r / inner) * outer_stride + (r % inner) * row_stride, columns are adjacent.
// Regions whose leading dimensions collapse into one stride have inner == rows.
template <typename T>
struct Gm {
    __gm__ T *base;
    int64_t rows;
    int64_t cols;
    int64_t inner;
    int64_t row_stride;
    int64_t outer_stride;
};

// A contiguous rows x cols block (the host driver's copies).
template <typename T>
inline Gm<T> block(__gm__ T *base, int64_t rows, int64_t cols)
{
    return Gm<T>{base, rows, cols, rows > 0 ? rows : 1, cols, rows * cols};
}

// The vr x vc part at (r0, c0) of a region, as the shapes and strides of a 5-D GlobalTensor.
template <typename T>
struct Part {
    __gm__ T *ptr;
    int64_t shape[5];
    int64_t stride[5];
};

// Fills `p` with the part at (r0, c0) of `g` (vr x vc). A part must lie inside the region (code)
// and, when its rows span several groups of the region's layout, start and end on group
// boundaries and (`stacked` false: matrix tiles) stay inside one group (code + 1); a matrix
// tile's rows may be at most 65,535 elements apart (code + 2: PTO-ISA's ND-to-NZ load,
// include/pto/npu/a2a3/TLoad.hpp, "The Stride3 of GlobalTensor must be in range of [1, 65535]").
template <typename T>
inline bool part(__gm__ Status *st, int64_t code, const Gm<T> &g, int64_t r0, int64_t c0, int64_t vr, int64_t vc,
                 bool stacked, Part<T> &p)
{
    if (r0 < 0 || c0 < 0 || vr < 0 || vc < 0 || r0 + vr > g.rows || c0 + vc > g.cols) {
        return fail(st, code, vr, vc, r0, c0, g.rows, g.cols);
    }
    const int64_t n = g.rows * g.cols;
    const int64_t group = r0 / g.inner;
    const int64_t first = r0 % g.inner;
    p.ptr = g.base + group * g.outer_stride + first * g.row_stride + c0;
    if (!stacked && vr > 1 && g.row_stride > 65535) {
        return fail(st, code + 2, g.row_stride);
    }
    if (first + vr <= g.inner) {
        const int64_t shape[5] = {1, 1, 1, vr, vc};
        const int64_t stride[5] = {n, n, n, g.row_stride, 1};
        for (int i = 0; i < 5; ++i) {
            p.shape[i] = shape[i];
            p.stride[i] = stride[i];
        }
        return true;
    }
    if (!stacked || first != 0 || vr % g.inner != 0) {
        return fail(st, code + 1, r0, r0 + vr, g.inner);
    }
    const int64_t shape[5] = {1, 1, vr / g.inner, g.inner, vc};
    const int64_t stride[5] = {n, n, g.outer_stride, g.row_stride, 1};
    for (int i = 0; i < 5; ++i) {
        p.shape[i] = shape[i];
        p.stride[i] = stride[i];
    }
    return true;
}

template <typename T>
inline pto::GlobalTensor<T, pto::Shape<>, pto::Stride<>> tensor(const Part<T> &p)
{
    return pto::GlobalTensor<T, pto::Shape<>, pto::Stride<>>(
        p.ptr, pto::Shape<>(p.shape[0], p.shape[1], p.shape[2], p.shape[3], p.shape[4]),
        pto::Stride<>(p.stride[0], p.stride[1], p.stride[2], p.stride[3], p.stride[4]));
}

// A part that stays inside one group of rows, as a GlobalTensor whose leading dimensions are
// statically 1 (what PTO-ISA's ND-to-NZ loads into `mat` tiles require).
template <typename T>
inline pto::GlobalTensor<T, pto::Shape<1, 1, 1, pto::DYNAMIC, pto::DYNAMIC>, pto::Stride<>> tensor2(const Part<T> &p)
{
    return pto::GlobalTensor<T, pto::Shape<1, 1, 1, pto::DYNAMIC, pto::DYNAMIC>, pto::Stride<>>(
        p.ptr, pto::Shape<1, 1, 1, pto::DYNAMIC, pto::DYNAMIC>(p.shape[3], p.shape[4]),
        pto::Stride<>(p.stride[0], p.stride[1], p.stride[2], p.stride[3], p.stride[4]));
}

// TCOLSUM: PTO-ISA's CPU simulation takes (dst, src), its a2a3 templates (dst, src, tmp,
// isBinary); the sequential sum is the one the CPU simulation computes.
template <typename D, typename S, typename T>
inline void colsum(D &dst, S &src, T &tmp)
{
#ifdef __CPU_SIM
    (void)tmp;
    pto::TCOLSUM(dst, src);
#else
    pto::TCOLSUM(dst, src, tmp, false);
#endif
}

// A float scalar parameter travels as the bits of its f64 value; kernels compute in f32.
inline float f32_param(uint64_t bits)
{
    return static_cast<float>(__builtin_bit_cast(double, bits));
}

// Element `i` of a tile array of `n`: inside it, or a failed check (code; values i, n).
inline bool in_range(__gm__ Status *st, int64_t code, int64_t i, int64_t n)
{
    if (i < 0 || i >= n) {
        return fail(st, code, i, n);
    }
    return true;
}

// 1 / sqrt(x) of an integer (a kernel's `rsqrt(EXPR)` operand), in f32.
inline float inv_sqrt(int64_t x)
{
    return static_cast<float>(1.0 / __builtin_sqrt(static_cast<double>(x)));
}

#ifdef __CPU_SIM
// The storage offset of element (r, c) of a tile (any layout).
template <typename T>
inline size_t off(int64_t r, int64_t c)
{
    return pto::GetTileElementOffset<T>(static_cast<size_t>(r), static_cast<size_t>(c));
}
#endif

// Element (r, c) of a tile (the scalar unit's GetValue) into `out`, checked against the tile's
// declared shape (code; values r, c, rows, cols).
template <typename T>
inline bool get_value(__gm__ Status *st, int64_t code, T &t, int64_t r, int64_t c, int64_t &out)
{
    if (r < 0 || c < 0 || r >= T::Rows || c >= T::Cols) {
        out = 0;
        return fail(st, code, r, c, T::Rows, T::Cols);
    }
    out = static_cast<int64_t>(t.GetValue(static_cast<uint32_t>(r * T::Cols + c)));
    return true;
}

// Element (r, c) of a tile = v (the scalar unit's SetValue), checked as `get_value`.
template <typename T>
inline bool set_value(__gm__ Status *st, int64_t code, T &t, int64_t r, int64_t c, int64_t v)
{
    if (r < 0 || c < 0 || r >= T::Rows || c >= T::Cols) {
        return fail(st, code, r, c, T::Rows, T::Cols);
    }
    t.SetValue(static_cast<uint32_t>(r * T::Cols + c), static_cast<typename T::DType>(v));
    return true;
}

#ifdef __CPU_SIM
inline bool compare(double a, double b, pto::CmpMode m)
{
    switch (m) {
        case pto::CmpMode::EQ: return a == b;
        case pto::CmpMode::NE: return a != b;
        case pto::CmpMode::LT: return a < b;
        case pto::CmpMode::LE: return a <= b;
        case pto::CmpMode::GT: return a > b;
        default: return a >= b;
    }
}
#endif

// The packed mask of a2a3: bit c % 8 of byte r * Cols + c / 8 for element (r, c), set where
// `a MODE b` (over `a`'s valid part); `b` a tile or a scalar.
template <typename M, typename A, typename B>
inline void cmp_(M &mask, A &a, B b, pto::CmpMode m, bool scalar)
{
#ifdef __CPU_SIM
    const int64_t vr = a.GetValidRow(), vc = a.GetValidCol();
    for (int64_t r = 0; r < vr; ++r) {
        for (int64_t byte = 0; byte < (vc + 7) / 8; ++byte) {
            mask.data()[r * M::Cols + byte] = 0;
        }
        for (int64_t c = 0; c < vc; ++c) {
            double y;
            if constexpr (std::is_arithmetic_v<B> || std::is_same_v<B, half>) {
                y = static_cast<double>(b);
            } else {
                y = static_cast<double>(b.data()[off<std::remove_reference_t<decltype(b)>>(r, c)]);
            }
            if (compare(static_cast<double>(a.data()[off<A>(r, c)]), y, m)) {
                mask.data()[r * M::Cols + c / 8] |= static_cast<uint8_t>(1u << (c % 8));
            }
        }
    }
    (void)scalar;
#else
    if constexpr (std::is_arithmetic_v<B> || std::is_same_v<B, half>) {
        pto::TCMPS(mask, a, b, m);
    } else {
        pto::TCMP(mask, a, b, m);
    }
    (void)scalar;
#endif
}

template <typename M, typename A>
inline void cmp(M &mask, A &a, A &b, pto::CmpMode m)
{
    cmp_<M, A, A &>(mask, a, b, m, false);
}

template <typename M, typename A>
inline void cmps(M &mask, A &a, typename A::DType s, pto::CmpMode m)
{
    cmp_<M, A, typename A::DType>(mask, a, s, m, true);
}

// dst = a where the mask's bit is set, else b (a tile) or s (a scalar).
template <typename D, typename M>
inline void sel(D &dst, M &mask, D &a, D &b)
{
#ifdef __CPU_SIM
    const int64_t vr = dst.GetValidRow(), vc = dst.GetValidCol();
    for (int64_t r = 0; r < vr; ++r) {
        for (int64_t c = 0; c < vc; ++c) {
            const bool on = (mask.data()[r * M::Cols + c / 8] >> (c % 8)) & 1;
            dst.data()[off<D>(r, c)] = on ? a.data()[off<D>(r, c)] : b.data()[off<D>(r, c)];
        }
    }
#else
    pto::TSEL(dst, mask, a, b);
#endif
}

template <typename D, typename M>
inline void sels(D &dst, M &mask, D &a, typename D::DType s)
{
#ifdef __CPU_SIM
    const int64_t vr = dst.GetValidRow(), vc = dst.GetValidCol();
    for (int64_t r = 0; r < vr; ++r) {
        for (int64_t c = 0; c < vc; ++c) {
            const bool on = (mask.data()[r * M::Cols + c / 8] >> (c % 8)) & 1;
            dst.data()[off<D>(r, c)] = on ? a.data()[off<D>(r, c)] : s;
        }
    }
#else
    pto::TSELS(dst, mask, a, s);
#endif
}

// The index (TSORTIDX) or the value (TSORTVAL) of each f32 (value, index) record of a sorted
// one-row tile, for dst's valid columns. The CPU simulation stores the index as its value, the
// device as the raw u32 bits of the record's second word.
template <typename D, typename R>
inline void sort_index(D &dst, R &rec)
{
    for (int64_t c = 0; c < dst.GetValidCol(); ++c) {
#ifdef __CPU_SIM
        dst.SetValue(static_cast<uint32_t>(c), static_cast<typename D::DType>(rec.GetValue(static_cast<uint32_t>(2 * c + 1))));
#else
        const float w = rec.GetValue(static_cast<uint32_t>(2 * c + 1));
        uint32_t bits;
        __builtin_memcpy(&bits, &w, sizeof bits);
        dst.SetValue(static_cast<uint32_t>(c), static_cast<typename D::DType>(bits));
#endif
    }
}

template <typename D, typename R>
inline void sort_value(D &dst, R &rec)
{
    for (int64_t c = 0; c < dst.GetValidCol(); ++c) {
        dst.SetValue(static_cast<uint32_t>(c), static_cast<typename D::DType>(rec.GetValue(static_cast<uint32_t>(2 * c))));
    }
}

// dst = src inside src's valid part, PAD in the rest of dst's declared shape.
template <pto::PadValue Pad, typename D, typename S>
inline void fill_pad(D &dst, S &src)
{
#ifdef __CPU_SIM
    using T = typename D::DType;
    T pad = T(0);
    if constexpr (Pad == pto::PadValue::Min) {
        pad = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    } else if constexpr (Pad == pto::PadValue::Max) {
        pad = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
    }
    const int64_t sr = src.GetValidRow(), sc = src.GetValidCol();
    for (int64_t r = 0; r < D::Rows; ++r) {
        for (int64_t c = 0; c < D::Cols; ++c) {
            dst.data()[off<D>(r, c)] = (r < sr && c < sc) ? src.data()[off<S>(r, c)] : pad;
        }
    }
#else
    // On the device the pad value is the destination tile type's: the same buffer seen as a
    // tile of that type.
    using P = pto::Tile<pto::TileType::Vec, typename D::DType, D::Rows, D::Cols, pto::BLayout::RowMajor, pto::DYNAMIC,
                        pto::DYNAMIC, pto::SLayout::NoneBox, pto::TileConfig::fractalABSize, Pad>;
    P p(dst.GetValidRow(), dst.GetValidCol());
    pto::TASSIGN(p, reinterpret_cast<uint64_t>(dst.data()));
    pto::TFILLPAD(p, src);
#endif
}

// A Vec tile of element type E shaped like tile type T (columns rounded to 32 bytes).
template <typename E, typename T>
using vec_like = pto::Tile<pto::TileType::Vec, E, T::Rows, (T::Cols * sizeof(E) + 31) / 32 * 32 / sizeof(E),
                           pto::BLayout::RowMajor, pto::DYNAMIC, pto::DYNAMIC>;

// TSTORE converting: an f32 accumulator into an f16 / bf16 region (the fix pipe on the device;
// the CPU simulation refuses a store between element sizes, so it converts in a Vec tile first).
template <typename E, typename G, typename T>
inline void store_cvt_(G &gt, T &t)
{
#ifdef __CPU_SIM
    vec_like<E, T> tmp(t.GetValidRow(), t.GetValidCol());
    pto::TCVT(tmp, t, pto::RoundMode::CAST_RINT);
    pto::TSTORE(gt, tmp);
#else
    pto::TSTORE(gt, t);
#endif
}

template <typename G, typename T>
inline void store_cvt(G &gt, T &t)
{
    store_cvt_<typename G::RawDType>(gt, t);
}

// TSTORE accumulating: the region's part += the tile, rounded once to the region's type
// (PTO-ISA's pto::TSTORE<AtomicType::AtomicAdd>, which its CPU simulation ignores).
template <typename G, typename T>
inline void store_add(G &gt, T &t)
{
    using E = typename G::RawDType;
#ifdef __CPU_SIM
    const size_t vr = t.GetValidRow(), vc = t.GetValidCol();
    vec_like<float, T> a(vr, vc), b(vr, vc);
    vec_like<E, T> g(vr, vc);
    pto::TLOAD(g, gt);
    pto::TCVT(a, g, pto::RoundMode::CAST_RINT);
    pto::TCVT(b, t, pto::RoundMode::CAST_RINT);
    pto::TADD(a, a, b);
    pto::TCVT(g, a, pto::RoundMode::CAST_RINT);
    pto::TSTORE(gt, g);
#else
    pto::TSTORE<T, G, pto::AtomicType::AtomicAdd>(gt, t);
#endif
}

} // namespace pto_wsp_rt
