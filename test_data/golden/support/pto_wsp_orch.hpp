// pto-wsp orchestration support (written by `pto-wsp emit ascend`; do not edit).
// What the generated orchestration needs beside simpler's orchestration API:
// - integer arithmetic with pto-wsp's semantics (checked: overflow and division by zero are
//   errors, not wrap-around);
// - task submission: region views of the module tensors (bounds-checked), `in` regions as
//   inputs and `out` / `inout` regions as inouts (so the runtime's TensorMap looks up
//   read-after-write and write-after-write), scalars, and the explicit dependencies the
//   runtime does not infer:
//   * write-after-read: per written tensor, the readers since the last write covering them; a
//     write depends on every earlier reader it overlaps;
//   * structural order (`for_each`, `sequential`, `while`): the tasks of a child precede the
//     tasks of the next non-empty child, through the one earlier task or a barrier (a dummy task
//     depending on every task of the earlier child), made when the later child's first task is.
// - computed reads: an element of a tensor the tasks write, read through the runtime's
//   `get_tensor_data` on a one-element view (it waits for the earlier tasks writing that
//   element); the number of reads and the time spent waiting are counted.
// Errors are thrown as `Error` and reported by the entry through rt_report_fatal.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pto_orchestration_api.h"

namespace pto_wsp_orch {

struct Error {
    std::string message;
};

[[noreturn]] inline void fail(const std::string &m) { throw Error{m}; }

template <typename T>
inline T add(T a, T b)
{
    T r;
    if (__builtin_add_overflow(a, b, &r)) {
        fail("integer overflow in `+`");
    }
    return r;
}
template <typename T>
inline T sub(T a, T b)
{
    T r;
    if (__builtin_sub_overflow(a, b, &r)) {
        fail("integer overflow in `-`");
    }
    return r;
}
template <typename T>
inline T mul(T a, T b)
{
    T r;
    if (__builtin_mul_overflow(a, b, &r)) {
        fail("integer overflow in `*`");
    }
    return r;
}
template <typename T>
inline T div(T a, T b)
{
    if (b == 0) {
        fail("division by zero in `/`");
    }
    if (T(-1) < T(0) && b == T(-1) && a == T(T(1) << (sizeof(T) * 8 - 1))) {
        fail("integer overflow in `/`");
    }
    return a / b;
}
template <typename T>
inline T rem(T a, T b)
{
    if (b == 0) {
        fail("division by zero in `%`");
    }
    if (T(-1) < T(0) && b == T(-1)) {
        return T(0);
    }
    return a % b;
}
inline int64_t neg(int64_t a)
{
    if (a == INT64_MIN) {
        fail("integer overflow in `-`");
    }
    return -a;
}
inline uint64_t neg(uint64_t a)
{
    if (a != 0) {
        fail("integer overflow in `-`");
    }
    return 0;
}

// A box of a tensor: per dimension [start, start + size).
struct Box {
    uint32_t tensor = 0;
    uint32_t rank = 0;
    int64_t start[5] = {};
    int64_t size[5] = {};
    bool meets(const Box &o) const
    {
        if (tensor != o.tensor) {
            return false;
        }
        for (uint32_t d = 0; d < rank && d < o.rank; ++d) {
            if (!(start[d] < o.start[d] + o.size[d] && o.start[d] < start[d] + size[d])) {
                return false;
            }
        }
        return true;
    }
    bool covers(const Box &o) const
    {
        for (uint32_t d = 0; d < rank; ++d) {
            if (o.start[d] < start[d] || o.start[d] + o.size[d] > start[d] + size[d]) {
                return false;
            }
        }
        return true;
    }
};

// One ordered construct (a `for_each` loop, a `sequential` block, a `while` loop).
struct Order {
    std::vector<PTO2TaskId> cur;  // tasks of the current child
    std::vector<PTO2TaskId> prev; // tasks of the last non-empty child, until the next task
    bool has_gate = false;
    PTO2TaskId gate{};
};

struct Orch {
    std::vector<const ChipTensor *> ext;
    std::vector<bool> tracked; // tensors some task writes: their readers are kept
    std::vector<std::vector<std::pair<PTO2TaskId, Box>>> readers;
    std::vector<Order *> orders;
    std::string at; // the statement being run, for messages
    int64_t *status = nullptr; // the status tensor (the last argument): 8 words per kernel task
    uint64_t slots = 0, next_slot = 0;
    uint64_t reads = 0;       // computed reads made
    double read_wait_ms = 0;  // time spent in them

    Orch(const ChipTaskArgs &args, uint32_t n, const std::vector<bool> &written)
        : ext(n), tracked(written), readers(n)
    {
        for (uint32_t t = 0; t < n; ++t) {
            ext[t] = &args.tensor(t).ref();
        }
        const ChipTensor &s = args.tensor(n).ref();
        status = s.data_as<int64_t>();
        slots = s.shapes[0];
    }

    // The address of the next kernel task's status slot (the runner reads them after the run).
    // A workload whose task count is known only when it runs (computed reads) takes the slots
    // round and round: a failure stays in its slot (a kernel writes only a clear slot).
    uint64_t status_slot()
    {
        if (slots == 0) {
            fail(at + ": no status slots");
        }
        return reinterpret_cast<uint64_t>(status + 8 * (next_slot++ % slots));
    }

    void push(Order &o) { orders.push_back(&o); }
    void pop() { orders.pop_back(); }
    static void boundary(Order &o)
    {
        if (!o.cur.empty()) {
            o.prev = std::move(o.cur);
            o.cur.clear();
        }
    }

    // Opens the gates of the ordered constructs the next task is in (outermost first).
    void gates(std::vector<PTO2TaskId> &deps)
    {
        for (Order *o : orders) {
            if (!o->prev.empty()) {
                if (o->prev.size() == 1) {
                    o->gate = o->prev[0];
                } else {
                    CoreTaskArgs b;
                    b.set_dependencies(o->prev.data(), static_cast<uint32_t>(o->prev.size()));
                    o->gate = rt_submit_dummy_task(b).task_id();
                }
                o->has_gate = true;
                o->prev.clear();
            }
            if (o->has_gate) {
                deps.push_back(o->gate);
            }
        }
    }
};

// Element `flat` (row-major) of tensor `t` of shape `extent`, which the workload's tasks write:
// waits until the tasks submitted so far that write that element are done, then reads it.
template <typename T>
inline int64_t computed(Orch &o, uint32_t t, int64_t flat, const std::vector<int64_t> &extent, const char *name)
{
    int64_t total = 1;
    for (int64_t e : extent) {
        total *= e;
    }
    if (flat < 0 || flat >= total) {
        fail(o.at + ": index " + std::to_string(flat) + " is outside tensor `" + name + "`");
    }
    const uint32_t rank = static_cast<uint32_t>(extent.size());
    uint32_t off[5] = {}, sh[5] = {1, 1, 1, 1, 1}, zero[5] = {};
    int64_t rest = flat;
    for (uint32_t d = rank; d-- > 0;) {
        off[d] = static_cast<uint32_t>(rest % extent[d]);
        rest /= extent[d];
    }
    const ChipTensor one = o.ext[t]->view(sh, off);
    const auto t0 = std::chrono::steady_clock::now();
    const T v = get_tensor_data<T>(one, rank, zero);
    o.read_wait_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    o.reads += 1;
    return static_cast<int64_t>(v);
}

// An ordered construct for as long as it is in scope (a `break` leaving it by `goto` pops it).
struct Ordered {
    Orch &o;
    Order ord;
    explicit Ordered(Orch &orch) : o(orch) { o.push(ord); }
    ~Ordered() { o.pop(); }
    Ordered(const Ordered &) = delete;
    Ordered &operator=(const Ordered &) = delete;
    void boundary() { Orch::boundary(ord); }
};

// One task being put together: its tensor arguments in the kernel's order (views of module
// tensors, scratch tensors a part of a split kernel writes for a later part, which the runtime
// allocates, and scratch tensors an earlier part wrote), then its scalars.
struct Task {
    enum Kind : uint8_t { View, ScratchIn, ScratchOut };
    Orch &o;
    Kind kinds[32] = {};
    ChipTensor views[32];
    const ChipTensor *ins[32] = {};
    TensorCreateInfo outs[32];
    Box boxes[32];
    uint8_t writes[32] = {};
    uint8_t reads[32] = {};
    uint32_t n = 0;
    uint64_t scalars[16] = {};
    uint32_t ns = 0;
    TaskOutputTensors result;
    std::vector<PTO2TaskId> extra; // explicit dependencies (a pipeline's process and channel order)

    explicit Task(Orch &orch) : o(orch) {}

    void after(PTO2TaskId id) { extra.push_back(id); }

    void region(uint32_t t, bool rd, bool wr, uint32_t rank, const int64_t *start, const int64_t *size,
                const int64_t *extent, const char *what)
    {
        Box &b = boxes[n];
        b.tensor = t;
        b.rank = rank;
        uint32_t off[5] = {}, sh[5] = {1, 1, 1, 1, 1};
        for (uint32_t d = 0; d < rank; ++d) {
            if (start[d] < 0 || size[d] < 0 || start[d] > extent[d] - size[d]) {
                fail(o.at + ": " + what + ": dimension " + std::to_string(d) + " [" + std::to_string(start[d]) +
                     " +: " + std::to_string(size[d]) + "] is outside 0.." + std::to_string(extent[d]));
            }
            b.start[d] = start[d];
            b.size[d] = size[d];
            off[d] = static_cast<uint32_t>(start[d]);
            sh[d] = static_cast<uint32_t>(size[d]);
        }
        kinds[n] = View;
        views[n] = o.ext[t]->view(sh, off);
        reads[n] = rd;
        writes[n] = wr;
        ++n;
    }

    // A rows x cols tensor the runtime allocates for this task to write.
    void scratch_out(DataType dtype, uint32_t rows, uint32_t cols)
    {
        const uint32_t shape[2] = {rows, cols};
        kinds[n] = ScratchOut;
        outs[n] = TensorCreateInfo(shape, 2, dtype);
        ++n;
    }

    // A tensor an earlier task of the same split kernel wrote.
    void scratch_in(const ChipTensor &t)
    {
        kinds[n] = ScratchIn;
        ins[n] = &t;
        ++n;
    }

    void scalar(uint64_t v) { scalars[ns++] = v; }

    // The k-th scratch tensor this task wrote (after `submit`).
    ChipTensor output(uint32_t k) const { return result.get_ref(k); }

    PTO2TaskId submit(int32_t func, bool cube)
    {
        CoreTaskArgs args;
        for (uint32_t i = 0; i < n; ++i) {
            if (kinds[i] == ScratchOut) {
                args.add_output(outs[i]);
            } else if (kinds[i] == ScratchIn) {
                args.add_input(*ins[i]);
            } else if (writes[i]) {
                args.add_inout(views[i]);
            } else {
                args.add_input(views[i]);
            }
        }
        for (uint32_t i = 0; i < ns; ++i) {
            args.add_scalar(scalars[i]);
        }
        std::vector<PTO2TaskId> deps = extra;
        o.gates(deps);
        // Write-after-read: every earlier reader of a box this task writes.
        for (uint32_t i = 0; i < n; ++i) {
            if (kinds[i] != View || !writes[i]) {
                continue;
            }
            auto &rs = o.readers[boxes[i].tensor];
            for (auto &r : rs) {
                if (r.second.meets(boxes[i])) {
                    deps.push_back(r.first);
                }
            }
        }
        if (!deps.empty()) {
            args.set_dependencies(deps.data(), static_cast<uint32_t>(deps.size()));
        }
        MixedKernels mk;
        if (cube) {
            mk.aic_kernel_id = func;
        } else {
            mk.aiv0_kernel_id = func;
        }
        result = rt_submit_task(mk, args);
        const PTO2TaskId id = result.task_id();
        for (uint32_t i = 0; i < n; ++i) {
            const uint32_t t = boxes[i].tensor;
            if (kinds[i] != View || !o.tracked[t]) {
                continue;
            }
            auto &rs = o.readers[t];
            if (writes[i]) {
                // Readers this write covers are ordered before it, and later writers after it.
                std::vector<std::pair<PTO2TaskId, Box>> keep;
                for (auto &r : rs) {
                    if (!boxes[i].covers(r.second)) {
                        keep.push_back(r);
                    }
                }
                rs.swap(keep);
            }
        }
        for (uint32_t i = 0; i < n; ++i) {
            if (kinds[i] == View && reads[i] && o.tracked[boxes[i].tensor]) {
                o.readers[boxes[i].tensor].push_back({id, boxes[i]});
            }
        }
        for (Order *ord : o.orders) {
            ord->cur.push_back(id);
        }
        return id;
    }
};

} // namespace pto_wsp_orch
