// pto-wsp AICore kernel support (written by `pto-wsp emit ascend`; do not edit).
// A task's region arrives from the simpler runtime as a ChipTensor descriptor (a view of a
// module tensor: element offset, shapes, element strides). `region` turns it into the kernel's
// rows x cols view (pto_wsp_rt::Gm) without copying: the columns are the last dimension
// (adjacent), the rows every other dimension, in at most two strides (rows in groups). Legal in
// AI Core code: no exceptions, stdio or heap.
#pragma once
#include <cstdint>

// PTO-ISA first: it defines __aicore__ for the CPU simulation before the runtime's headers do.
#include <pto/pto-inst.hpp>

#include "pto_wsp_rt.hpp"
#include "tensor.h"

namespace pto_wsp_aicore {

// The view of the ChipTensor at `arg` as rows x cols; false (status `code` or `code + 1`
// written) when its columns are not adjacent or its rows need more than two strides.
template <typename T>
inline bool region(__gm__ pto_wsp_rt::Status *st, int64_t code, int64_t arg, pto_wsp_rt::Gm<T> &g)
{
    const __gm__ ChipTensor *t = reinterpret_cast<const __gm__ ChipTensor *>(static_cast<uintptr_t>(arg));
    const int64_t nd = static_cast<int64_t>(t->ndims);
    g.base = reinterpret_cast<__gm__ T *>(static_cast<uintptr_t>(t->buffer.addr)) + t->start_offset;
    g.cols = nd == 0 ? 1 : static_cast<int64_t>(t->shapes[nd - 1]);
    if (nd > 0 && t->shapes[nd - 1] > 1 && t->strides[nd - 1] != 1) {
        return pto_wsp_rt::fail(st, code, static_cast<int64_t>(t->strides[nd - 1]));
    }
    g.rows = 1;
    for (int64_t d = 0; d + 1 < nd; ++d) {
        g.rows *= static_cast<int64_t>(t->shapes[d]);
    }
    // Up to two groups of row dimensions, each a run of dimensions whose strides nest.
    int64_t extent[2] = {1, 1};
    int64_t stride[2] = {g.cols, g.cols};
    int groups = 0;
    for (int64_t d = nd - 2; d >= 0; --d) {
        const int64_t n = static_cast<int64_t>(t->shapes[d]);
        const int64_t s = static_cast<int64_t>(t->strides[d]);
        if (n == 1) {
            continue;
        }
        if (groups > 0 && s == stride[groups - 1] * extent[groups - 1]) {
            extent[groups - 1] *= n;
            continue;
        }
        if (groups == 2) {
            return pto_wsp_rt::fail(st, code + 1, nd);
        }
        extent[groups] = n;
        stride[groups] = s;
        ++groups;
    }
    g.inner = groups == 0 ? 1 : extent[0];
    g.row_stride = stride[0];
    g.outer_stride = groups == 2 ? stride[1] : extent[0] * stride[0];
    return true;
}

} // namespace pto_wsp_aicore
