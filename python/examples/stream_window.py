"""A stream of small tasks through a bounded task window: examples/stream_window.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

tasks = Symbol(bind=10000)

A = Tensor(f32[64, 16])

R = DenseDyn(tasks // 64)
J = Dense(64)


@kernel(pool="vector")
def counter(a: InOut[f32, 1, 16]): ...


@workload
def stream():
    for r, j in P(R, J):
        counter(A[j, :])


schedule = stream.task_graph(
    deps=Deps.exact(), ready=ReadyPolicy.work_steal(), start=StartPolicy.immediate()
).task_window(1024, "stall")
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs 3,200 counter tasks through the window: every element counted 50 times."""
    prog = pto_wsp.compile(module, threads=threads, bind={"tasks": 64 * 50})
    a = prog(outputs="A")["A"]
    assert prog.stats["num_tasks"] == 64 * 50
    np.testing.assert_array_equal(a, np.full((64, 16), 50.0, dtype=np.float32))
    print("stream_window: ok")


if __name__ == "__main__":
    check()
