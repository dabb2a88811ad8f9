// pto-wsp AICore kernel support (written by `pto-wsp emit ascend`; do not edit).
// A task's region arrives from the simpler runtime as a ChipTensor descriptor (a view of a
// module tensor: element offset, shapes, element strides). Emitted kernels take a region as a
// rows x cols row-major block (rows = product of all but the last extent, row stride = cols).
// `Region` hands the kernel the view's own memory when it has that layout, else a contiguous
// copy that `finish` writes back when the kernel writes the region.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

// PTO-ISA first: it defines __aicore__ for the CPU simulation before the runtime's headers do.
#include <pto/pto-inst.hpp>

#include "tensor.h"

#ifndef __gm__
#define __gm__
#endif

namespace pto_wsp_aicore {

template <typename T>
struct Region {
    T *base = nullptr; // element (0, ..., 0) of the view
    int64_t rows = 1, cols = 1;
    bool direct = true;
    uint32_t nd = 0;
    uint32_t shapes[MAX_TENSOR_DIMS] = {};
    uint64_t strides[MAX_TENSOR_DIMS] = {};
    std::vector<T> copy;

    explicit Region(int64_t arg)
    {
        const __gm__ ChipTensor *t = reinterpret_cast<const __gm__ ChipTensor *>(arg);
        base = reinterpret_cast<T *>(t->buffer.addr) + t->start_offset;
        nd = t->ndims;
        for (uint32_t i = 0; i < nd; ++i) {
            shapes[i] = t->shapes[i];
            strides[i] = t->strides[i];
        }
        cols = nd == 0 ? 1 : shapes[nd - 1];
        rows = 1;
        for (uint32_t i = 0; i + 1 < nd; ++i) {
            rows *= shapes[i];
        }
        // Row-major with row stride = cols: the last stride is 1 and every other stride is the
        // product of the extents after it.
        uint64_t want = 1;
        for (uint32_t i = nd; i-- > 0;) {
            if (shapes[i] > 1 && strides[i] != want) {
                direct = false;
            }
            want *= shapes[i];
        }
        if (!direct) {
            copy.resize(static_cast<size_t>(rows * cols));
            walk([&](size_t k, T *p) { copy[k] = *p; });
        }
    }

    // Visits every element of the view in row-major order: (index in the block, address).
    template <typename F>
    void walk(F f)
    {
        uint32_t idx[MAX_TENSOR_DIMS] = {};
        const size_t n = static_cast<size_t>(rows * cols);
        for (size_t k = 0; k < n; ++k) {
            T *p = base;
            for (uint32_t i = 0; i < nd; ++i) {
                p += static_cast<uint64_t>(idx[i]) * strides[i];
            }
            f(k, p);
            for (uint32_t i = nd; i-- > 0;) {
                if (++idx[i] < shapes[i]) {
                    break;
                }
                idx[i] = 0;
            }
        }
    }

    T *data() { return direct ? base : copy.data(); }

    // Writes a copied block back into the view (after a kernel that writes the region).
    void finish()
    {
        if (!direct) {
            walk([&](size_t k, T *p) { *p = copy[k]; });
        }
    }
};

// A kernel refused its input: the message goes to stderr and the run stops (a simulated core
// is a thread of the runner's process; the runner reports the failure).
[[noreturn]] inline void fail(const char *kernel, const char *what)
{
    std::fprintf(stderr, "error: pto-wsp kernel `%s`: %s\n", kernel, what);
    std::fflush(stderr);
    std::abort();
}

} // namespace pto_wsp_aicore
