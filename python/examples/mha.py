"""Multi-head attention per (batch, head, 128-query tile): examples/mha.wsp in Python."""

import math

import numpy as np

import pto_wsp
from pto_wsp import *

batch = Symbol(bind=4)
seq = Symbol(bind=512)

Q = Tensor(f16[batch, 32, seq, 128])
K = Tensor(f16[batch, 32, seq, 128])
V = Tensor(f16[batch, 32, seq, 128])
S = Tensor(f32[batch, 32, seq, seq])
Probs = Tensor(f16[batch, 32, seq, seq], name="P")
O = Tensor(f16[batch, 32, seq, 128])

B = DenseDyn(batch)
H = Dense(32)
QT = DenseDyn(seq // 128)


@kernel(pool="cube", alias="matmul_bt")
def qk(q: In[f16, 128, 128], k: In[f16, ANY, 128], s: Out[f32, 128, ANY]): ...
@kernel(pool="vector")
def softmax(s: In[f32, 128, ANY], p: Out[f16, 128, ANY], scale: f64): ...
@kernel(pool="cube", alias="matmul")
def pv(p: In[f16, 128, ANY], v: In[f16, ANY, 128], o: Out[f16, 128, 128]): ...


@workload
def mha():
    for b, h, q in P(B, H, QT):
        rows = span(q * 128, 128)
        qk(Q[b, h, rows, :], K[b, h, :, :], S[b, h, rows, :])
        softmax(S[b, h, rows, :], Probs[b, h, rows, :], 1 / math.sqrt(128))
        pv(Probs[b, h, rows, :], V[b, h, :, :], O[b, h, rows, :])


schedule = (
    mha.executors(24)
    .dispatch(DispatchPolicy.affinity(lambda b, h: b * 32 + h))
    .streams(4)
    .stream_by(lambda b: b)
    .task_graph(
        deps=Deps.exact(),
        ready=ReadyPolicy.fifo(),
        start=StartPolicy.immediate(),
        pools=Pools.by_exec_unit(),
    )
)
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs attention for one batch of 256 tokens and checks three heads against numpy."""
    prog = pto_wsp.compile(module, threads=threads, bind={"batch": 1, "seq": 256})
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((1, 32, 256, 128)).astype(np.float16) for _ in range(3))
    o = prog(Q=q, K=k, V=v)["O"]
    for h in (0, 17, 31):
        qh, kh, vh = (a[0, h].astype(np.float64) for a in (q, k, v))
        s = qh @ kh.T / np.sqrt(128)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        want = (p / p.sum(axis=1, keepdims=True)) @ vh
        # P is f16 between the two products, O is f16.
        np.testing.assert_allclose(o[0, h].astype(np.float64), want, rtol=2e-2, atol=5e-3)
    print("mha: ok")


if __name__ == "__main__":
    check()
