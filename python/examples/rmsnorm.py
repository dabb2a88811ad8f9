"""RMSNorm of 16-row blocks: examples/rmsnorm.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

tokens = Symbol(bind=1024)
hidden = Symbol(bind=4096)

X = Tensor(f32[tokens, hidden])
W = Tensor(f32[hidden])
Y = Tensor(f32[tokens, hidden])

T = DenseDyn(tokens // 16)


@kernel(pool="vector")
def rmsnorm(x: In[f32, 16, ANY], w: In[f32, ANY], y: Out[f32, 16, ANY]): ...


@workload
def rmsnorm_rows():
    for t in P(T):
        rmsnorm(X[t * 16:(t + 1) * 16, :], W, Y[t * 16:(t + 1) * 16, :])


schedule = (
    rmsnorm_rows.executors(8)
    .dispatch(DispatchPolicy.round_robin(8))
    .task_graph(deps=Deps.exact(), ready=ReadyPolicy.fifo(), start=StartPolicy.immediate(), pools=Pools.single())
)
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs RMSNorm on 64 tokens of 256 and checks it against numpy."""
    prog = pto_wsp.compile(module, threads=threads, bind={"tokens": 64, "hidden": 256})
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    w = rng.standard_normal(256).astype(np.float32)
    y = prog(X=x, W=w)["Y"]
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    print("rmsnorm: ok")


if __name__ == "__main__":
    check()
