// pto-wsp emitted-kernel support (written by `pto-wsp emit kernels`; do not edit).
// What every emitted kernel needs beside PTO-ISA itself: the error a kernel raises on bad input
// (the same checks and messages as pto-wsp's CPU executor), integer division that refuses zero,
// the GlobalTensor of the part of a task's region that a TLOAD / TSTORE moves, tile arrays, and
// the instructions whose C++ spelling or semantics differ between PTO-ISA's CPU simulation and
// the device (packed compare masks and selects, sort-record fields, padding, accumulating and
// converting stores, single elements): each helper's `__CPU_SIM` branch computes the device's
// documented semantics element by element, its other branch is the PTO-ISA instruction.
#pragma once
// PTO-ISA's headers use these without including them.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <pto/pto-inst.hpp>

namespace pto_wsp_rt {

// A kernel refused its input; the message names the kernel and the instruction.
struct Fail : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline int64_t idiv(int64_t a, int64_t b, const char *where)
{
    if (b == 0) {
        throw Fail(std::string(where) + ": division by zero");
    }
    return a / b;
}

inline int64_t irem(int64_t a, int64_t b, const char *where)
{
    if (b == 0) {
        throw Fail(std::string(where) + ": remainder by zero");
    }
    return a % b;
}

// A tile's valid rows x cols must lie within its declared shape.
inline void check_valid(const char *kernel, const char *tile, int64_t vr, int64_t vc, int64_t rows, int64_t cols)
{
    if (vr < 0 || vc < 0 || vr > rows || vc > cols) {
        throw Fail("kernel `" + std::string(kernel) + "`: tile `" + tile + "`: valid " + std::to_string(vr) + " x " +
                   std::to_string(vc) + " is outside its " + std::to_string(rows) + " x " + std::to_string(cols));
    }
}

// The vr x vc part at (r0, c0) of a rows x cols row-major region, as a PTO-ISA GlobalTensor.
template <typename T>
inline pto::GlobalTensor<T, pto::Shape<>, pto::Stride<>> part(T *base, int64_t rows, int64_t cols, int64_t r0,
                                                                int64_t c0, int64_t vr, int64_t vc, int region,
                                                                const char *where)
{
    if (r0 < 0 || c0 < 0 || r0 + vr > rows || c0 + vc > cols) {
        throw Fail(std::string(where) + ": " + std::to_string(vr) + " x " + std::to_string(vc) + " at (" +
                   std::to_string(r0) + ", " + std::to_string(c0) + ") is outside region " + std::to_string(region) +
                   " (" + std::to_string(rows) + " x " + std::to_string(cols) + ")");
    }
    const int64_t n = rows * cols;
    return pto::GlobalTensor<T, pto::Shape<>, pto::Stride<>>(base + r0 * cols + c0, pto::Shape<>(1, 1, 1, vr, vc),
                                                             pto::Stride<>(n, n, n, cols, 1));
}

// A float scalar parameter travels as the bits of its f64 value; kernels compute in f32.
inline float f32_param(uint64_t bits)
{
    return static_cast<float>(std::bit_cast<double>(bits));
}

// Element `i` of a tile array of `n`, checked.
inline size_t at(int64_t i, int64_t n, const char *where)
{
    if (i < 0 || i >= n) {
        throw Fail(std::string(where) + ": index " + std::to_string(i) + " is outside 0.." + std::to_string(n));
    }
    return static_cast<size_t>(i);
}

template <typename T, size_t... I>
inline std::array<T, sizeof...(I)> tiles_(size_t vr, size_t vc, std::index_sequence<I...>)
{
    return {{((void)I, T(vr, vc))...}};
}

// An array of `N` tiles of type `T`, each with valid vr x vc.
template <typename T, size_t N>
inline std::array<T, N> tiles(size_t vr, size_t vc)
{
    return tiles_<T>(vr, vc, std::make_index_sequence<N>());
}

#ifdef __CPU_SIM
// The storage offset of element (r, c) of a tile (any layout).
template <typename T>
inline size_t off(int64_t r, int64_t c)
{
    return pto::GetTileElementOffset<T>(static_cast<size_t>(r), static_cast<size_t>(c));
}
#endif

// Element (r, c) of a tile, checked against its declared shape (the scalar unit's GetValue).
template <typename T>
inline int64_t get_value(T &t, int64_t r, int64_t c, const char *where)
{
    if (r < 0 || c < 0 || r >= T::Rows || c >= T::Cols) {
        throw Fail(std::string(where) + ": (" + std::to_string(r) + ", " + std::to_string(c) + ") is outside the tile");
    }
    return static_cast<int64_t>(t.GetValue(static_cast<uint32_t>(r * T::Cols + c)));
}

// Element (r, c) of a tile = v (the scalar unit's SetValue), checked.
template <typename T>
inline void set_value(T &t, int64_t r, int64_t c, int64_t v, const char *where)
{
    if (r < 0 || c < 0 || r >= T::Rows || c >= T::Cols) {
        throw Fail(std::string(where) + ": (" + std::to_string(r) + ", " + std::to_string(c) + ") is outside the tile");
    }
    t.SetValue(static_cast<uint32_t>(r * T::Cols + c), static_cast<typename T::DType>(v));
}

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
        TCMPS(mask, a, b, m);
    } else {
        TCMP(mask, a, b, m);
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
    TSEL(dst, mask, a, b);
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
    TSELS(dst, mask, a, s);
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
    TFILLPAD<D, Pad>(dst, src);
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
    TCVT(tmp, t, pto::RoundMode::CAST_RINT);
    TSTORE(gt, tmp);
#else
    TSTORE(gt, t);
#endif
}

template <typename G, typename T>
inline void store_cvt(G &gt, T &t)
{
    store_cvt_<typename G::RawDType>(gt, t);
}

// TSTORE accumulating: the region's part += the tile, rounded once to the region's type
// (PTO-ISA's TSTORE<AtomicType::AtomicAdd>, which its CPU simulation ignores).
template <typename G, typename T>
inline void store_add(G &gt, T &t)
{
    using E = typename G::RawDType;
#ifdef __CPU_SIM
    const size_t vr = t.GetValidRow(), vc = t.GetValidCol();
    vec_like<float, T> a(vr, vc), b(vr, vc);
    vec_like<E, T> g(vr, vc);
    TLOAD(g, gt);
    TCVT(a, g, pto::RoundMode::CAST_RINT);
    TCVT(b, t, pto::RoundMode::CAST_RINT);
    TADD(a, a, b);
    TCVT(g, a, pto::RoundMode::CAST_RINT);
    TSTORE(gt, g);
#else
    TSTORE<T, G, pto::AtomicType::AtomicAdd>(gt, t);
#endif
}

} // namespace pto_wsp_rt
