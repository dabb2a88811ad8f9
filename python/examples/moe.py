"""Mixture of experts with a sparse routing axis (tokens x the experts they are routed to):
examples/moe.wsp in Python."""

from pto_wsp import *

tokens = Symbol(bind=256)
hidden = Symbol(bind=1024)
ffn = Symbol(bind=3584)
routes = Symbol(bind=38)

route_indptr = Tensor(i32[tokens // 16 + 1], bind=[0, 2, 5, 7, 11, 12, 14, 17, 19, 21, 24, 26, 27, 30, 32, 34, 38])
route_experts = Tensor(
    i32[routes],
    bind=[0, 3, 1, 3, 5, 2, 7, 0, 1, 4, 6, 3, 2, 5, 0, 4, 7, 1, 6, 3, 5, 0, 2, 4, 6, 7, 1, 2, 3, 6, 4, 5, 0, 7, 1, 2, 5, 6],
)
X = Tensor(f16[tokens, hidden])
Gates = Tensor(f32[tokens, 8])
W1 = Tensor(f16[8, hidden, ffn])
W3 = Tensor(f16[8, hidden, ffn])
W2 = Tensor(f16[8, ffn, hidden])
Ypart = Tensor(f32[8, tokens, hidden])
Y = Tensor(f32[tokens, hidden])

R = Sparse(tokens // 16, route_indptr, route_experts)
TT = DenseDyn(tokens // 16)


@kernel(pool="cube", alias="moe_expert")
def expert_ffn(
    x: In[f16, 16, ANY], gate: In[f32, 16, 1], w1: In[f16, ANY, ANY], w3: In[f16, ANY, ANY],
    w2: In[f16, ANY, ANY], y: Out[f32, 16, ANY],
): ...
@kernel(pool="vector", alias="fill")
def zero_tile(y: Out[f32, 16, ANY], value: f64): ...
@kernel(pool="vector", alias="accumulate")
def combine_expert(part: In[f32, 16, ANY], y: InOut[f32, 16, ANY]): ...


@workload
def moe():
    for t in P(TT):
        zero_tile(Y[t * 16:(t + 1) * 16, :], 0.0)
    for t, e in P.sel(R):
        rows = span(t * 16, 16)
        expert_ffn(X[rows, :], Gates[rows, e], W1[e, :, :], W3[e, :, :], W2[e, :, :], Ypart[e, rows, :])
        combine_expert(Ypart[e, rows, :], Y[rows, :])


schedule = (
    moe.executors(16)
    .dispatch(DispatchPolicy.affinity(lambda t: t))
    .task_graph(deps=Deps.exact(), ready=ReadyPolicy.work_steal(), start=StartPolicy.immediate(), pools=Pools.by_exec_unit())
)
module = schedule.module()
