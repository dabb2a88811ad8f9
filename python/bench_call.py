"""Per-call overhead of a program called from Python: a 4-task program (4 `add` tasks on 16 x 8
tiles) called 1,000 times as `prog(A=a, B=b)` (the outputs allocated and returned) and 1,000
times as `prog.execute(...)` on the same arrays, against the engine's own time of each run (its
clock from `execute_async` to the end of the run, `stats["execute_time_ms"]`, and the run on
its orchestration thread, `stats["run_ns"]`); medians, same process. Also the same with the
output coverage check off (`coverage=False`). Run: `python -P python/bench_call.py`."""

import statistics
import time

import numpy as np

import pto_wsp

TEXT = """
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

CALLS = 1000


def measure(prog, call):
    wall, engine, run = [], [], []
    for _ in range(50):  # warm-up
        call()
    for _ in range(CALLS):
        t0 = time.perf_counter()
        call()
        wall.append((time.perf_counter() - t0) * 1e6)
        s = prog.stats
        engine.append(s["execute_time_ms"] * 1e3)
        run.append(s["run_ns"] / 1e3)
    return statistics.median(wall), statistics.median(engine), statistics.median(run)


def main():
    a = np.ones((16, 8), np.float32)
    b = np.ones((16, 8), np.float32)
    c = np.zeros((16, 8), np.float32)
    rows = []
    for coverage in (True, False):
        prog = pto_wsp.compile(pto_wsp.Module.from_text(TEXT), threads=2, coverage=coverage)
        assert prog.stats == {} and (prog(A=a, B=b)["C"] == 2).all()
        for what, call in (
            ("prog(A=a, B=b)", lambda: prog(A=a, B=b)),
            ("prog.execute(A=a, B=b, C=c)", lambda: prog.execute(A=a, B=b, C=c)),
        ):
            wall, engine, run = measure(prog, call)
            rows.append((what, coverage, wall, engine, run))
    print(f"| call | coverage check | median µs per call | engine (execute_time) µs | run on its thread µs | Python and binding µs |")
    print("|---|---|---|---|---|---|")
    for what, coverage, wall, engine, run in rows:
        print(f"| `{what}` | {'on' if coverage else 'off'} | {wall:.1f} | {engine:.1f} | {run:.1f} | {wall - engine:.1f} |")


if __name__ == "__main__":
    main()
