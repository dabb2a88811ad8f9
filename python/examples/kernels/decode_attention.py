"""Split-KV decode attention for one query row and one head, in tile instructions beside the
built-ins `attn_decode_chunk` and `attn_merge`: examples/kernels/decode_attention.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

kv = Symbol(bind=200)

Q = Tensor(f32[1, 64])
K = Tensor(f32[256, 64])
V = Tensor(f32[256, 64])
PO = Tensor(f32[4, 64])
PM = Tensor(f32[4])
PL = Tensor(f32[4])
OUT = Tensor(f32[1, 64])
PO2 = Tensor(f32[4, 64])
PM2 = Tensor(f32[4])
PL2 = Tensor(f32[4])
OUT2 = Tensor(f32[1, 64])

CH = Dense(4)

CHUNK_BODY = """
    let n: i64 = chunk_end - chunk_start;
    tile qm: mat f32[1, 64];
    tile tq: left f32[1, 64];
    tile tk: vec f32[64, 64] valid(n, 64);
    tile tkv: vec f32[64, 64] valid(64, n);
    tile tkt: right f32[64, 64] valid(64, n);
    tile sacc: acc f32[1, 64] valid(1, n);
    tile s: vec f32[1, 64] valid(1, n);
    tile tm: vec f32[1, 1];
    tile tl: vec f32[1, 1];
    tile p: left f32[1, 64] valid(1, n);
    tile vm: mat f32[64, 64] valid(n, 64);
    tile tv: right f32[64, 64] valid(n, 64);
    tile oacc: acc f32[1, 64];
    tile to: vec f32[1, 64];
    if n > 0 {
        TLOAD(qm, q);
        TMOV(tq, qm);
        TLOAD(tk, k);
        TTRANS(tkv, tk);
        TMOV(tkt, tkv);
        TMATMUL(sacc, tq, tkt);
        TMOV(s, sacc);
        TMULS(s, s, 0.125);
        TROWMAX(tm, s);
        TROWEXPANDSUB(s, s, tm);
        TEXP(s, s);
        TROWSUM(tl, s);
        TMOV(p, s);
        TLOAD(vm, v);
        TMOV(tv, vm);
        TMATMUL(oacc, p, tv);
        TMOV(to, oacc);
        TROWEXPANDDIV(to, to, tl);
    } else {
        TEXPANDS(to, 0.0);
        TEXPANDS(tm, -3e38);
        TEXPANDS(tl, 0.0);
    }
    TSTORE(o, to);
    TSTORE(m, tm);
    TSTORE(l, tl);
"""

MERGE_BODY = """
    tile tm: vec f32[1, 4];
    tile tl: vec f32[1, 4];
    tile mx: vec f32[1, 1];
    tile ws: vec f32[1, 1];
    tile w: left f32[1, 4];
    tile om: mat f32[4, 64];
    tile to: right f32[4, 64];
    tile acc: acc f32[1, 64];
    tile res: vec f32[1, 64];
    TLOAD(tm, m);
    TLOAD(tl, l);
    TROWMAX(mx, tm);
    TROWEXPANDSUB(tm, tm, mx);
    TEXP(tm, tm);
    TMUL(tm, tm, tl);
    TROWSUM(ws, tm);
    TMOV(w, tm);
    TLOAD(om, o);
    TMOV(to, om);
    TMATMUL(acc, w, to);
    TMOV(res, acc);
    TROWEXPANDDIV(res, res, ws);
    TSTORE(y, res);
"""


@kernel(pool="cube", body=CHUNK_BODY)
def chunk(
    q: In[f32, 1, 64], k: In[f32, 64, 64], v: In[f32, 64, 64], o: Out[f32, 1, 64],
    m: Out[f32, 1], l: Out[f32, 1], chunk_start: i64, chunk_end: i64,
): ...
@kernel(pool="cube", body=MERGE_BODY)
def merge(o: In[f32, 4, 64], m: In[f32, 4], l: In[f32, 4], y: Out[f32, 1, 64]): ...
@kernel(pool="cube", alias="attn_decode_chunk")
def chunk_builtin(
    q: In[f32, 1, 64], k: In[f32, 64, 64], v: In[f32, 64, 64], o: Out[f32, 1, 64],
    m: Out[f32, 1], l: Out[f32, 1], chunk_start: i64, chunk_end: i64,
): ...
@kernel(pool="cube", alias="attn_merge")
def merge_builtin(o: In[f32, 4, 64], m: In[f32, 4], l: In[f32, 4], y: Out[f32, 1, 64]): ...


@workload
def main():
    with sequential():
        for c in P(CH):
            keys = span(c * 64, 64)
            end = min_(c * 64 + 64, kv)
            chunk(Q, K[keys, :], V[keys, :], PO[c:c + 1, :], PM[c:c + 1], PL[c:c + 1], c * 64, end)
            chunk_builtin(Q, K[keys, :], V[keys, :], PO2[c:c + 1, :], PM2[c:c + 1], PL2[c:c + 1], c * 64, end)
        merge(PO, PM, PL, OUT)
        merge_builtin(PO2, PM2, PL2, OUT2)


module = main.task_graph(deps=Deps.hybrid()).module()


def check(threads: int = 2) -> None:
    """Split-KV decode over 200 keys (tile instructions and built-ins) against numpy."""
    prog = pto_wsp.compile(module, threads=threads)  # kv = 200 (its //@ bind)
    rng = np.random.default_rng(11)
    q = rng.standard_normal((1, 64)).astype(np.float32)
    k = rng.standard_normal((256, 64)).astype(np.float32)
    v = rng.standard_normal((256, 64)).astype(np.float32)
    out = prog(Q=q, K=k, V=v)
    s = q.astype(np.float64) @ k[:200].astype(np.float64).T / 8.0
    p = np.exp(s - s.max())
    want = p @ v[:200].astype(np.float64) / p.sum()
    np.testing.assert_allclose(out.OUT, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.OUT2, want, rtol=1e-4, atol=1e-5)
    print("kernels/decode_attention: ok")


if __name__ == "__main__":
    check()
