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
// Errors are thrown as `Error` and reported by the entry through rt_report_fatal.
#pragma once
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

    Orch(const ChipTaskArgs &args, uint32_t n, const std::vector<bool> &written)
        : ext(n), tracked(written), readers(n)
    {
        for (uint32_t t = 0; t < n; ++t) {
            ext[t] = &args.tensor(t).ref();
        }
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

// One task being put together.
struct Task {
    Orch &o;
    ChipTensor views[32];
    Box boxes[32];
    uint8_t writes[32] = {};
    uint8_t reads[32] = {};
    uint32_t n = 0;
    uint64_t scalars[16] = {};
    uint32_t ns = 0;

    explicit Task(Orch &orch) : o(orch) {}

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
        views[n] = o.ext[t]->view(sh, off);
        reads[n] = rd;
        writes[n] = wr;
        ++n;
    }

    void scalar(uint64_t v) { scalars[ns++] = v; }

    PTO2TaskId submit(int32_t func, bool cube)
    {
        CoreTaskArgs args;
        for (uint32_t i = 0; i < n; ++i) {
            if (writes[i]) {
                args.add_inout(views[i]);
            } else {
                args.add_input(views[i]);
            }
        }
        for (uint32_t i = 0; i < ns; ++i) {
            args.add_scalar(scalars[i]);
        }
        std::vector<PTO2TaskId> deps;
        o.gates(deps);
        // Write-after-read: every earlier reader of a box this task writes.
        for (uint32_t i = 0; i < n; ++i) {
            if (!writes[i]) {
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
        const PTO2TaskId id = cube ? rt_submit_aic_task(func, args).task_id() : rt_submit_aiv_task(func, args).task_id();
        for (uint32_t i = 0; i < n; ++i) {
            const uint32_t t = boxes[i].tensor;
            if (!o.tracked[t]) {
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
            if (reads[i] && o.tracked[boxes[i].tensor]) {
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
