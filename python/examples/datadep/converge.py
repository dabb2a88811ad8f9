"""Iterate x <- x / 2 + 1 until it stops changing (a `while` whose condition a task computes):
examples/datadep/converge.wsp in Python."""

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
