// pto-wsp emitted-kernel support (written by `pto-wsp emit`; do not edit).
// What every emitted kernel needs beside PTO-ISA itself, legal in AI Core code (no exceptions,
// no stdio, no heap, C++17): a task's region as a descriptor of global memory (no copies), the
// GlobalTensor of the part of a region a TLOAD / TSTORE moves, integer division that refuses
// zero, and the status a kernel reports a failed check through. The same text compiles for
// PTO-ISA's CPU simulation (-D__CPU_SIM) and for an a2a3 AI Core.
#pragma once
#include <cstdint>

#include <pto/pto-inst.hpp>

#ifndef __gm__
#define __gm__
#endif

namespace pto_wsp_rt {

// The outcome of one task. A kernel whose check fails writes the check's number (`code`, an
// index into the message table its emitter wrote beside it, 0 = no failure) and up to six
// integers the message quotes, then returns. Written once per task: the host reads it after the
// run and prints the message.
struct Status {
    int64_t code;
    int64_t v[7];
};

// Records a failed check (the first one of the task) and returns false.
inline bool fail(__gm__ Status *st, int64_t code, int64_t a = 0, int64_t b = 0, int64_t c = 0, int64_t d = 0,
                 int64_t e = 0, int64_t f = 0)
{
    if (st != nullptr && st->code == 0) {
        st->v[0] = a;
        st->v[1] = b;
        st->v[2] = c;
        st->v[3] = d;
        st->v[4] = e;
        st->v[5] = f;
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

} // namespace pto_wsp_rt
