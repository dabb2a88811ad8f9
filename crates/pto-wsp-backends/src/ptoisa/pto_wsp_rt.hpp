// pto-wsp emitted-kernel support (written by `pto-wsp emit kernels`; do not edit).
// What every emitted kernel needs beside PTO-ISA itself: the error a kernel raises on bad input
// (the same checks and messages as pto-wsp's CPU executor), integer division that refuses zero,
// and the GlobalTensor of the part of a task's region that a TLOAD / TSTORE moves.
#pragma once
// PTO-ISA's headers use these without including them.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

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

} // namespace pto_wsp_rt
