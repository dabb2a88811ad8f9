"""Mixture of experts routed at run time: a top-k task picks each token's experts, a bucketing
task lists the tokens of each expert, and each expert's tile loop runs as many times as it has
tokens: examples/datadep/moe_routed.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

n = Slot()

X = Tensor(f32[16, 8])
WG = Tensor(f32[8, 8])
LOGIT = Tensor(f32[16, 8])
IDX = Tensor(i32[16, 2])
COUNT = Tensor(i32[8])
LIST = Tensor(i32[8, 16])
W = Tensor(f32[64, 8])
XG = Tensor(f32[128, 8])
YG = Tensor(f32[128, 8])
Y = Tensor(f32[16, 8])

EXPERTS = Dense(8)
TILES = DenseDyn((n + 3) // 4)



@kernel
def matmul(a: In[f32, ANY, ANY], b: In[f32, ANY, ANY], c: Out[f32, ANY, ANY]): ...
@kernel
def topk(x: In[f32, ANY, ANY], idx: Out[i32, ANY, ANY]): ...
@kernel
def bucket_by_index(idx: In[i32, ANY, ANY], counts: Out[i32, ANY], lists: Out[i32, ANY, ANY]): ...
@kernel
def fill(y: Out[f32, ANY, ANY], value: f64): ...
@kernel
def gather_rows(src: In[f32, ANY, ANY], idx: In[i32, ANY, ANY], dst: Out[f32, ANY, ANY]): ...
@kernel
def scatter_add_rows(src: In[f32, ANY, ANY], idx: In[i32, ANY, ANY], dst: InOut[f32, ANY, ANY]): ...


@workload
def moe():
    fill(Y, 0.0)
    matmul(X, WG, LOGIT)
    topk(LOGIT, IDX)
    bucket_by_index(IDX, COUNT, LIST)
    for e in P(EXPERTS):
        n.load(COUNT[e])
        for q in P(TILES):
            part = min_(4, n - q * 4)
            rows = span(e * 16 + q * 4, part)
            gather_rows(X, LIST[e, span(q * 4, part)], XG[rows, :])
            matmul(XG[rows, :], W[e * 8:(e + 1) * 8, :], YG[rows, :])
            scatter_add_rows(YG[rows, :], LIST[e, span(q * 4, part)], Y)


schedule = moe.executors(4).task_graph(deps=Deps.overlap(), ready=ReadyPolicy.work_steal())
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs the routed mixture of experts (top-2 of 8) and checks it against numpy."""
    prog = pto_wsp.compile(module, threads=threads)
    rng = np.random.default_rng(15)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    wg = rng.standard_normal((8, 8)).astype(np.float32)
    w = rng.standard_normal((64, 8)).astype(np.float32)
    y = np.full((16, 8), 3.0, dtype=np.float32)
    prog(X=x, WG=wg, W=w, out={"Y": y})
    x64 = x.astype(np.float64)
    logits = x64 @ wg.astype(np.float64)
    top2 = np.argsort(-logits, axis=1, kind="stable")[:, :2]
    want = np.zeros((16, 8))
    for t in range(16):
        for e in top2[t]:
            want[t] += x64[t] @ w[e * 8 : (e + 1) * 8].astype(np.float64)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    print("moe_routed: ok")


if __name__ == "__main__":
    check()
