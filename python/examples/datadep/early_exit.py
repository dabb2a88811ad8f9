"""A loop left early by `break if` on a value a task computes: examples/datadep/early_exit.wsp in
Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

c = Slot()
s = Slot()

V = Tensor(f32[16, 4])
OUT = Tensor(f32[16, 4])
R = Tensor(f32[1, 2])
F = Tensor(i32[1, 1])



@kernel
def fill(y: Out[f32, ANY, ANY], value: f64): ...
@kernel
def scale(x: In[f32, ANY, ANY], y: Out[f32, ANY, ANY], factor: f64): ...
@kernel
def copy(x: In[f32, ANY, ANY], y: Out[f32, ANY, ANY]): ...
@kernel
def topk(x: In[f32, ANY, ANY], idx: Out[i32, ANY, ANY]): ...


@workload
def decode():
    fill(OUT, 0.0)
    fill(R[0, 1:2], 1.5)
    with P.while_(c < 16, max=16):
        scale(V[c, :], OUT[c, :], 2.0)
        copy(OUT[c, 0:1], R[0, 0:1])
        topk(R[0, :], F[0, :])
        s.load(F[0, 0])
        c.set(c + 1)
        P.break_if(s == 0)


schedule = decode.executors(2).task_graph(deps=Deps.overlap(), ready=ReadyPolicy.work_steal())
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs the early exit and checks it stops where a numpy loop does."""
    prog = pto_wsp.compile(module, threads=threads)
    v = np.full((16, 4), 0.25, dtype=np.float32)
    v[:, 1:] = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    v[6, 0] = 1.0  # 2 * 1.0 > 1.5: the step of row 6 is the last one
    out = np.full((16, 4), 9.0, dtype=np.float32)
    prog(V=v, out={"OUT": out})
    want = np.zeros((16, 4))
    for c in range(16):
        want[c] = 2 * v[c]
        if 2 * v[c, 0] > 1.5:
            break
    np.testing.assert_array_equal(out, want)
    print("early_exit: ok")


if __name__ == "__main__":
    check()
