"""Softmax over long rows in three tiled passes: examples/softmax_3pass.wsp written in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

rows = Symbol(bind=64)
ntiles = Symbol(bind=16)

X = Tensor(f32[rows, ntiles * 1024])
Mpart = Tensor(f32[rows, ntiles])
M = Tensor(f32[rows])
D = Tensor(f32[rows, ntiles * 1024])
E = Tensor(f32[rows, ntiles * 1024])
Lpart = Tensor(f32[rows, ntiles])
L = Tensor(f32[rows])
Y = Tensor(f32[rows, ntiles * 1024])

B = DenseDyn(rows // 16)
C = DenseDyn(ntiles)


@kernel(pool="vector")
def row_max(x: In[f32, 16, ANY], m: Out[f32, ANY]): ...
@kernel(pool="vector")
def sub_col(x: In[f32, 16, 1024], m: In[f32, 16], d: Out[f32, 16, 1024]): ...
@kernel(pool="vector")
def exp(d: In[f32, 16, 1024], e: Out[f32, 16, 1024]): ...
@kernel(pool="vector")
def row_sum(e: In[f32, 16, ANY], l: Out[f32, ANY]): ...
@kernel(pool="vector")
def div_col(e: In[f32, 16, 1024], l: In[f32, 16], y: Out[f32, 16, 1024]): ...


@workload
def softmax_3pass():
    for b in P(B):
        rs = span(b * 16, 16)
        for c in P(C):
            row_max(X[rs, c * 1024:(c + 1) * 1024], Mpart[rs, c])
        row_max(Mpart[rs, :], M[rs])
        for c in P(C):
            cs = span(c * 1024, 1024)
            sub_col(X[rs, cs], M[rs], D[rs, cs])
            exp(D[rs, cs], E[rs, cs])
            row_sum(E[rs, cs], Lpart[rs, c])
        row_sum(Lpart[rs, :], L[rs])
        for c in P(C):
            div_col(E[rs, c * 1024:(c + 1) * 1024], L[rs], Y[rs, c * 1024:(c + 1) * 1024])


schedule = softmax_3pass.executors(8).dispatch(DispatchPolicy.affinity(lambda b: b)).task_graph(
    deps=Deps.hybrid(),
    ready=ReadyPolicy.work_steal(),
    start=StartPolicy.immediate(),
    pools=Pools.single(),
)
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs the softmax on random rows (32 rows of 3 x 1024) and checks it against numpy."""
    prog = pto_wsp.compile(module, threads=threads, bind={"rows": 32, "ntiles": 3})
    x = np.random.default_rng(3).standard_normal((32, 3 * 1024)).astype(np.float32) * 4
    y = prog(X=x)["Y"]
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-7)
    print(f"softmax_3pass: ok ({prog.stats['num_tasks']} tasks)")


if __name__ == "__main__":
    check()
