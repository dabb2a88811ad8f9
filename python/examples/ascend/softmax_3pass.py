"""Row softmax in three passes over 8 x 64 tiles (row maxima, sums of exponentials, normalize in
place), in tile instructions: examples/ascend/softmax_3pass.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

X = Tensor(f32[32, 256])
MP = Tensor(f32[32, 4])
M = Tensor(f32[32, 1])
LP = Tensor(f32[32, 4])
L = Tensor(f32[32, 1])

B = Dense(4)
C = Dense(4)

TILE_MAX = """
    tile t: vec f32[8, 64];
    tile tm: vec f32[8, 1];
    TLOAD(t, x);
    TROWMAX(tm, t);
    TSTORE(m, tm);
"""

REDUCE = """
    tile t: vec f32[8, 4];
    tile {out}: vec f32[8, 1];
    TLOAD(t, p);
    {op}({out}, t);
    TSTORE({param}, {out});
"""

TILE_SUMEXP = """
    tile t: vec f32[8, 64];
    tile tm: vec f32[8, 1];
    tile tl: vec f32[8, 1];
    TLOAD(t, x);
    TLOAD(tm, m);
    TROWEXPANDSUB(t, t, tm);
    TEXP(t, t);
    TROWSUM(tl, t);
    TSTORE(l, tl);
"""

NORMALIZE = """
    tile t: vec f32[8, 64];
    tile tm: vec f32[8, 1];
    tile tl: vec f32[8, 1];
    TLOAD(t, x);
    TLOAD(tm, m);
    TLOAD(tl, l);
    TROWEXPANDSUB(t, t, tm);
    TEXP(t, t);
    TROWEXPANDDIV(t, t, tl);
    TSTORE(x, t);
"""



@kernel(pool="vector", body=TILE_MAX)
def tile_max(x: In[f32, 8, 64], m: Out[f32, 8, 1]): ...
@kernel(pool="vector", body=REDUCE.format(out="tm", op="TROWMAX", param="m"))
def reduce_max(p: In[f32, 8, 4], m: Out[f32, 8, 1]): ...
@kernel(pool="vector", body=TILE_SUMEXP)
def tile_sumexp(x: In[f32, 8, 64], m: In[f32, 8, 1], l: Out[f32, 8, 1]): ...
@kernel(pool="vector", body=REDUCE.format(out="tl", op="TROWSUM", param="l"))
def reduce_sum(p: In[f32, 8, 4], l: Out[f32, 8, 1]): ...
@kernel(pool="vector", body=NORMALIZE)
def normalize(x: InOut[f32, 8, 64], m: In[f32, 8, 1], l: In[f32, 8, 1]): ...


@workload
def main():
    for b in P(B):
        rows = span(b * 8, 8)
        for c in P(C):
            tile_max(X[rows, span(c * 64, 64)], MP[rows, c:c + 1])
        reduce_max(MP[rows, :], M[rows, :])
        for c in P(C):
            tile_sumexp(X[rows, span(c * 64, 64)], M[rows, :], LP[rows, c:c + 1])
        reduce_sum(LP[rows, :], L[rows, :])
        for c in P(C):
            normalize(X[rows, span(c * 64, 64)], M[rows, :], L[rows, :])


module = main.task_graph(deps=Deps.overlap()).module()


def check(threads: int = 2) -> None:
    """Row max, sum of exponentials and softmax of X (in place) against numpy."""
    rng = np.random.default_rng(34)
    x = (rng.standard_normal((32, 256)) * 3).astype(np.float32)
    x0 = x.astype(np.float64)
    out = pto_wsp.compile(module, threads=threads)(X=x, outputs=["M", "L"])
    np.testing.assert_array_equal(out.M[:, 0], x0.max(axis=1).astype(np.float32))
    e = np.exp(x0 - x0.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out.L[:, 0], e.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(x, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    print("ascend/softmax_3pass: ok")


if __name__ == "__main__":
    check()
