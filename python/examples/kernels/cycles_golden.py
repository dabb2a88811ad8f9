"""Kernels in tile instructions whose cycle counts are golden-tested (a batched GEMM tile, a
small attention, a softmax over four chunks): examples/kernels/cycles_golden.wsp in Python."""

from typing import Any

import numpy as np

import pto_wsp
from pto_wsp import *

A = Tensor(f16[16, 16])
B = Tensor(f16[16, 16])
C = Tensor(f32[16, 16])
Q = Tensor(f32[8, 8])
K = Tensor(f32[8, 8])
V = Tensor(f32[8, 8])
O = Tensor(f32[8, 8])
X = Tensor(f32[8, 256])
E = Tensor(f32[8, 256])
Y = Tensor(f32[8, 256])
M = Tensor(f32[8, 1])
L = Tensor(f32[8, 1])

CH = Dense(4)

BGEMM_BODY = """
    tile am: mat f16[16, 16];
    tile bm: mat f16[16, 16];
    tile ta: left f16[16, 16];
    tile tb: right f16[16, 16];
    tile acc: acc f32[16, 16];
    tile p: vec f32[16, 16];
    tile tc: vec f32[16, 16];
    TLOAD(am, a);
    TLOAD(bm, b);
    TMOV(ta, am);
    TMOV(tb, bm);
    TMATMUL(acc, ta, tb);
    TMOV(p, acc);
    TLOAD(tc, c);
    TADD(tc, tc, p);
    TSTORE(c, tc);
"""

ATTN_BODY = """
    tile qm: mat f32[8, 8];
    tile km: mat f32[8, 8];
    tile vm: mat f32[8, 8];
    tile tq: left f32[8, 8];
    tile tk: right f32[8, 8];
    tile tv: right f32[8, 8];
    tile sacc: acc f32[8, 8];
    tile s: vec f32[8, 8];
    tile m: vec f32[8, 1];
    tile l: vec f32[8, 1];
    tile p: left f32[8, 8];
    tile oacc: acc f32[8, 8];
    TLOAD(qm, q);
    TLOAD(km, kt);
    TMOV(tq, qm);
    TMOV(tk, km);
    TMATMUL(sacc, tq, tk);
    TMOV(s, sacc);
    TROWMAX(m, s);
    TROWEXPANDSUB(s, s, m);
    TEXP(s, s);
    TROWSUM(l, s);
    TROWEXPANDDIV(s, s, l);
    TMOV(p, s);
    TLOAD(vm, v);
    TMOV(tv, vm);
    TMATMUL(oacc, p, tv);
    TSTORE(o, oacc);
"""

SOFTMAX_INIT_BODY = """
    tile tm: vec f32[8, 1];
    tile tl: vec f32[8, 1];
    TEXPANDS(tm, -3e38);
    TEXPANDS(tl, 0.0);
    TSTORE(m, tm);
    TSTORE(l, tl);
"""

SOFTMAX_MAX_BODY = """
    tile tx: vec f32[8, 64];
    tile cm: vec f32[8, 1];
    tile tm: vec f32[8, 1];
    TLOAD(tx, x);
    TROWMAX(cm, tx);
    TLOAD(tm, m);
    TMAX(tm, tm, cm);
    TSTORE(m, tm);
"""

SOFTMAX_SUM_BODY = """
    tile tx: vec f32[8, 64];
    tile tm: vec f32[8, 1];
    tile cs: vec f32[8, 1];
    tile tl: vec f32[8, 1];
    TLOAD(tx, x);
    TLOAD(tm, m);
    TROWEXPANDSUB(tx, tx, tm);
    TEXP(tx, tx);
    TSTORE(e, tx);
    TROWSUM(cs, tx);
    TLOAD(tl, l);
    TADD(tl, tl, cs);
    TSTORE(l, tl);
"""

SOFTMAX_NORM_BODY = """
    tile te: vec f32[8, 64];
    tile tl: vec f32[8, 1];
    TLOAD(te, e);
    TLOAD(tl, l);
    TROWEXPANDDIV(te, te, tl);
    TSTORE(y, te);
"""


@kernel(pool="cube", body=BGEMM_BODY)
def bgemm(a: In[f16, 16, 16], b: In[f16, 16, 16], c: InOut[f32, 16, 16]): ...
@kernel(pool="cube", body=ATTN_BODY)
def attn(q: In[f32, 8, 8], kt: In[f32, 8, 8], v: In[f32, 8, 8], o: Out[f32, 8, 8]): ...
@kernel(pool="vector", body=SOFTMAX_INIT_BODY)
def softmax_init(m: Out[f32, 8, 1], l: Out[f32, 8, 1]): ...
@kernel(pool="vector", body=SOFTMAX_MAX_BODY)
def softmax_max(x: In[f32, 8, 64], m: InOut[f32, 8, 1]): ...
@kernel(pool="vector", body=SOFTMAX_SUM_BODY)
def softmax_sum(x: In[f32, 8, 64], m: In[f32, 8, 1], e: Out[f32, 8, 64], l: InOut[f32, 8, 1]): ...
@kernel(pool="vector", body=SOFTMAX_NORM_BODY)
def softmax_norm(e: In[f32, 8, 64], l: In[f32, 8, 1], y: Out[f32, 8, 64]): ...


@workload
def main():
    bgemm(A, B, C)
    attn(Q, K, V, O)
    softmax_init(M, L)
    for c in P(CH):
        softmax_max(X[:, c * 64:(c + 1) * 64], M)
    for c in P(CH):
        softmax_sum(X[:, c * 64:(c + 1) * 64], M, E[:, c * 64:(c + 1) * 64], L)
    for c in P(CH):
        softmax_norm(E[:, c * 64:(c + 1) * 64], L, Y[:, c * 64:(c + 1) * 64])


module = main.module()


def check(threads: int = 2) -> None:
    """The bgemm tile, the tile-local attention and the 3-pass softmax against numpy."""
    def softmax(x: Any) -> Any:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    prog = pto_wsp.compile(module, threads=threads)
    rng = np.random.default_rng(21)
    a, b = (rng.standard_normal((16, 16)).astype(np.float16) for _ in range(2))
    q, kt, v = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(3))
    x = rng.standard_normal((8, 256)).astype(np.float32)
    c = np.full((16, 16), 0.5, np.float32)
    out = prog(A=a, B=b, Q=q, K=kt, V=v, X=x, out={"C": c}, outputs=["O", "Y", "M", "L"])
    f = lambda t: t.astype(np.float64)  # noqa: E731
    np.testing.assert_allclose(c, 0.5 + f(a) @ f(b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.O, softmax(f(q) @ f(kt)) @ f(v), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out.M[:, 0], x.max(axis=1))
    np.testing.assert_allclose(out.L[:, 0], np.exp(f(x) - f(x).max(axis=1, keepdims=True)).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(out.Y, softmax(f(x)), rtol=1e-5, atol=1e-7)
    print("kernels/cycles_golden: ok")


if __name__ == "__main__":
    check()
