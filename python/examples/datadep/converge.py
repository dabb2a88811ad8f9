"""Iterate x <- x / 2 + 1 until it stops changing (a `while` whose condition a task computes):
examples/datadep/converge.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

f = Slot()

X = Tensor(f32[1, 16])
T = Tensor(f32[1, 16])
XN = Tensor(f32[1, 16])
R = Tensor(f32[1, 2])
F = Tensor(i32[1, 1])



@kernel
def fill(y: Out[f32, ANY, ANY], value: f64): ...
@kernel
def scale(x: In[f32, ANY, ANY], y: Out[f32, ANY, ANY], factor: f64): ...
@kernel
def add_scalar(x: In[f32, ANY, ANY], y: Out[f32, ANY, ANY], value: f64): ...
@kernel
def sub(a: In[f32, ANY, ANY], b: In[f32, ANY, ANY], c: Out[f32, ANY, ANY]): ...
@kernel
def copy(x: In[f32, ANY, ANY], y: Out[f32, ANY, ANY]): ...
@kernel
def topk(x: In[f32, ANY, ANY], idx: Out[i32, ANY, ANY]): ...


@workload
def converge():
    fill(X[0, :], 0.0)
    fill(R[0, 1:2], 0.001)
    with P.while_(f == 0, max=60):
        scale(X[0, :], T[0, :], 0.5)
        add_scalar(T[0, :], XN[0, :], 1.0)
        sub(XN[0, 0:1], X[0, 0:1], R[0, 0:1])
        copy(XN[0, :], X[0, :])
        topk(R[0, :], F[0, :])
        f.load(F[0, 0])


schedule = converge.executors(2).task_graph(deps=Deps.overlap(), ready=ReadyPolicy.work_steal())
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs the fixed-point iteration and checks it reaches numpy's fixed point."""
    prog = pto_wsp.compile(module, threads=threads)
    x = np.full((1, 16), 5.0, dtype=np.float32)
    prog(X=x)
    want, steps = np.float32(0.0), 0
    while steps < 60:
        nxt = np.float32(want * np.float32(0.5) + np.float32(1.0))
        diff = nxt - want
        want, steps = nxt, steps + 1
        if not diff > np.float32(0.001):
            break
    np.testing.assert_array_equal(x, np.full((1, 16), want, dtype=np.float32))
    print("converge: ok")


if __name__ == "__main__":
    check()
