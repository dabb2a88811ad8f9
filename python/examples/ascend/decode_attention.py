"""Varlen split-KV decode attention with merge for two requests of different KV lengths, in tile
instructions: examples/ascend/decode_attention.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

kv0 = Symbol(bind=200)
kv1 = Symbol(bind=96)

Q = Tensor(f32[2, 64])
K = Tensor(f32[512, 64])
V = Tensor(f32[512, 64])
PO = Tensor(f32[8, 64])
PM = Tensor(f32[8])
PL = Tensor(f32[8])
OUT = Tensor(f32[2, 64])

RQ = Dense(2)
CH = Dense(4)

# The kernels of examples/kernels/decode_attention.wsp (python/examples/kernels/decode_attention.py).
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


@workload
def main():
    with sequential():
        for r, c in P(RQ, CH):
            keys = span(r * 256 + c * 64, 64)
            part = r * 4 + c
            kv = where(r == 0, kv0, kv1)
            chunk(
                Q[r:r + 1, :], K[keys, :], V[keys, :], PO[part:part + 1, :], PM[part:part + 1],
                PL[part:part + 1], min_(c * 64, kv), min_(c * 64 + 64, kv),
            )
        for r in P(RQ):
            parts = span(r * 4, 4)
            merge(PO[parts, :], PM[parts], PL[parts], OUT[r:r + 1, :])


module = main.task_graph(deps=Deps.overlap()).module()


def check(threads: int = 2) -> None:
    """Two rows of decode attention over 200 and 96 keys against numpy."""
    rng = np.random.default_rng(35)
    q = rng.standard_normal((2, 64)).astype(np.float32)
    k = rng.standard_normal((512, 64)).astype(np.float32)
    v = rng.standard_normal((512, 64)).astype(np.float32)
    kv = {"kv0": 200, "kv1": 96}
    out = pto_wsp.compile(module, threads=threads, bind=kv)(Q=q, K=k, V=v)["OUT"]
    for r, n in enumerate(kv.values()):
        keys = slice(r * 256, r * 256 + n)
        s = k[keys].astype(np.float64) @ q[r].astype(np.float64) / 8.0  # scale 1/8 = 1/sqrt(64)
        p = np.exp(s - s.max())
        np.testing.assert_allclose(out[r], p @ v[keys].astype(np.float64) / p.sum(), rtol=1e-4, atol=1e-5)
    print("ascend/decode_attention: ok")


if __name__ == "__main__":
    check()
