"""Serving requests of different lengths, prefill or decode, with an attention kernel chosen by
sequence length (tiers): examples/tiered.wsp in Python."""

import warnings

import numpy as np

import pto_wsp
from pto_wsp import *

nreq = Symbol(bind=6)
heads = Symbol(bind=4)
maxlen = Symbol(bind=12288)
prefill = Symbol(bool_, bind=False)

kvlen = Slot()

req_len = Tensor(i32[nreq], bind=[512, 1800, 4096, 8192, 10000, 12000])
Q = Tensor(f16[nreq, heads, maxlen, 128])
Kc = Tensor(f16[nreq, heads, maxlen, 128])
Vc = Tensor(f16[nreq, heads, maxlen, 128])
O = Tensor(f16[nreq, heads, maxlen, 128])

R = DenseDyn(nreq)
H = DenseDyn(heads)
QT = DenseDyn((kvlen + 127) // 128)



@kernel(pool="vector", alias="attn_causal")
def attn_2k(q: In[f16, ANY, 128], k: In[f16, ANY, 128], v: In[f16, ANY, 128], o: Out[f16, ANY, 128], seq: i64): ...
@kernel(pool="vector", alias="attn_causal")
def attn_8k(q: In[f16, ANY, 128], k: In[f16, ANY, 128], v: In[f16, ANY, 128], o: Out[f16, ANY, 128], seq: i64): ...
@kernel(pool="vector", alias="attn_causal")
def attn_64k(q: In[f16, ANY, 128], k: In[f16, ANY, 128], v: In[f16, ANY, 128], o: Out[f16, ANY, 128], seq: i64): ...
@kernel(
    pool="vector",
    tiers=[(lambda seq: seq <= 2048, attn_2k), (lambda seq: seq <= 8192, attn_8k)],
    otherwise=attn_64k,
)
def attn(q: In[f16, ANY, 128], k: In[f16, ANY, 128], v: In[f16, ANY, 128], o: Out[f16, ANY, 128], seq: i64): ...


@workload
def serve():
    for r in P(R):
        kvlen.load(req_len[r])
        with P.when(prefill):
            for q, h in P(QT, H):
                rows = span(q * 128, min_(128, kvlen - q * 128))
                seen = min_((q + 1) * 128, kvlen)
                attn(Q[r, h, rows, :], Kc[r, h, :seen, :], Vc[r, h, :seen, :], O[r, h, rows, :], seen)
        with P.otherwise():
            for h in P(H):
                attn(Q[r, h, kvlen - 1, :], Kc[r, h, :kvlen, :], Vc[r, h, :kvlen, :], O[r, h, kvlen - 1, :], kvlen)


schedule = (
    serve.executors(16)
    .dispatch(DispatchPolicy.affinity(lambda r, h: r * heads + h))
    .task_graph(deps=Deps.hybrid(), ready=ReadyPolicy.priority(lambda t: t.kvlen), start=StartPolicy.immediate(), pools=Pools.single())
)
module = schedule.module()


def check(threads: int = 2) -> None:
    """Two requests (300 and 77 tokens), decode then prefill, against numpy attention."""
    req_len = np.array([300, 77], dtype=np.int32)
    rng = np.random.default_rng(13)
    q, k, v = (rng.standard_normal((2, 2, 320, 128)).astype(np.float16) for _ in range(3))
    f = lambda a: a.astype(np.float64)  # noqa: E731
    for prefill in (False, True):
        prog = pto_wsp.compile(
            module, threads=threads, bind={"nreq": 2, "heads": 2, "maxlen": 320, "prefill": prefill}
        )
        with warnings.catch_warnings():
            # A decode step writes only the last token's row of O.
            warnings.simplefilter("ignore", pto_wsp.CoverageWarning)
            o = prog(req_len=req_len, Q=q, Kc=k, Vc=v)["O"]
        want = np.zeros(o.shape)
        for r in range(2):
            n = int(req_len[r])
            for h in range(2):
                s = f(q[r, h, :n]) @ f(k[r, h, :n]).T / np.sqrt(128)
                s[np.triu_indices(n, 1)] = -np.inf  # token t attends tokens 0 ..= t
                p = np.exp(s - s.max(axis=1, keepdims=True))
                full = (p / p.sum(axis=1, keepdims=True)) @ f(v[r, h, :n])
                if prefill:
                    want[r, h, :n] = full
                else:  # decode: only the last token's row
                    want[r, h, n - 1] = full[n - 1]
        np.testing.assert_allclose(f(o), want, rtol=1e-2, atol=2e-3)
    print("tiered: ok")


if __name__ == "__main__":
    check()
