"""A loop left early by `break if` on a value a task computes: examples/datadep/early_exit.wsp in
Python."""

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
