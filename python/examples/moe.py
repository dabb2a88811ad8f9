"""Mixture of experts with a sparse routing axis (tokens x the experts they are routed to):
examples/moe.wsp in Python."""

import numpy as np

import pto_wsp
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


def check(threads: int = 2) -> None:
    """Three token tiles routed to 2, 1 and 3 experts, against numpy."""
    tokens, hidden, ffn = 48, 64, 96
    # Token tile 0 goes to experts 0 and 3, tile 1 to expert 5, tile 2 to experts 1, 2, 7.
    indptr, experts = [0, 2, 3, 6], [0, 3, 5, 1, 2, 7]
    prog = pto_wsp.compile(
        module, threads=threads, bind={"tokens": tokens, "hidden": hidden, "ffn": ffn, "routes": len(experts)}
    )
    rng = np.random.default_rng(14)
    x = rng.standard_normal((tokens, hidden)).astype(np.float16)
    gates = rng.random((tokens, 8)).astype(np.float32)
    w1 = (rng.standard_normal((8, hidden, ffn)) / 8).astype(np.float16)
    w3 = (rng.standard_normal((8, hidden, ffn)) / 8).astype(np.float16)
    w2 = (rng.standard_normal((8, ffn, hidden)) / 10).astype(np.float16)
    y = prog(
        route_indptr=np.array(indptr, np.int32), route_experts=np.array(experts, np.int32),
        X=x, Gates=gates, W1=w1, W3=w3, W2=w2,
    )["Y"]
    f = lambda a: a.astype(np.float64)  # noqa: E731
    want = np.zeros((tokens, hidden))
    for t in range(tokens // 16):
        rows = slice(t * 16, (t + 1) * 16)
        for e in experts[indptr[t] : indptr[t + 1]]:
            g, u = f(x[rows]) @ f(w1[e]), f(x[rows]) @ f(w3[e])
            want[rows] += f(gates[rows, e])[:, None] * ((g / (1 + np.exp(-g)) * u) @ f(w2[e]))
    np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3)
    print("moe: ok")


if __name__ == "__main__":
    check()
