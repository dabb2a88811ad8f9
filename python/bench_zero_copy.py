"""How much binding a 1 GiB numpy array to a tensor adds to `Program.execute`: the same small
run with and without a 1 GiB `f32` array bound to a tensor the run does not touch (the median
of 20 runs each; the difference is the binding's cost). Run: `python python/bench_zero_copy.py`."""

import statistics
import time

import numpy as np

import pto_wsp

TEXT = """
symbol n: i64;
tensor Big: f32[n];
tensor A: f32[16, 8];
tensor B: f32[16, 8];
tensor C: f32[16, 8];
axis T = dense(4);
kernel add(in a: f32[4, 8], in b: f32[4, 8], out c: f32[4, 8]);
workload main() {
    parallel_for t in T {
        task add(A[t * 4 +: 4, 0 +: 8], B[t * 4 +: 4, 0 +: 8], C[t * 4 +: 4, 0 +: 8]);
    }
}
"""


def median_ms(program, **arrays):
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        program.execute(**arrays)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    n = (1 << 30) // 4
    program = pto_wsp.Module.from_text(TEXT).compile(threads=2, bind={"n": n})
    big = np.ones(n, dtype=np.float32)
    a = np.ones((16, 8), dtype=np.float32)
    b = np.ones((16, 8), dtype=np.float32)
    c = np.zeros((16, 8), dtype=np.float32)
    without = median_ms(program, A=a, B=b, C=c)
    with_big = median_ms(program, A=a, B=b, C=c, Big=big)
    assert (c == 2.0).all()
    print(f"run without the 1 GiB array: {without:.3f} ms (median of 20)")
    print(f"run with the 1 GiB array bound: {with_big:.3f} ms (median of 20)")
    print(f"added by binding 1 GiB: {with_big - without:.3f} ms")


if __name__ == "__main__":
    main()
