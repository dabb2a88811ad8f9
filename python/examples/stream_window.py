"""A stream of small tasks through a bounded task window: examples/stream_window.wsp in Python."""

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
