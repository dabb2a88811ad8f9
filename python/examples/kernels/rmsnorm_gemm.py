"""RMSNorm and a GEMM tile with accumulation written in tile instructions, each next to the
built-in it re-expresses: examples/kernels/rmsnorm_gemm.wsp in Python."""

from typing import Any

import numpy as np

import pto_wsp
from pto_wsp import *
from pto_wsp import tile as tl

X = Tensor(f32[32, 64])
W = Tensor(f32[64])
Y = Tensor(f32[32, 64])
Y2 = Tensor(f32[32, 64])
A = Tensor(f32[32, 64])
B = Tensor(f32[64, 32])
C = Tensor(f32[32, 32])
C2 = Tensor(f32[32, 32])

R = Dense(4)
T = Dense(2)

GEMM_TILE = """
    tile am: mat f32[16, 16];
    tile bm: mat f32[16, 16];
    tile ta: left f32[16, 16];
    tile tb: right f32[16, 16];
    tile acc: acc f32[16, 16];
    tile p: vec f32[16, 16];
    tile tc: vec f32[16, 16];
    for k in range(4) {
        TLOAD(am, a, 0, k * 16);
        TLOAD(bm, b, k * 16, 0);
        TMOV(ta, am);
        TMOV(tb, bm);
        if k == 0 {
            TMATMUL(acc, ta, tb);
        } else {
            TMATMUL_ACC(acc, ta, tb);
        }
    }
    TMOV(p, acc);
    TLOAD(tc, c);
    TADD(tc, tc, p);
    TSTORE(c, tc);
"""



@kernel(pool="vector")
def rmsnorm_tile(x: In[f32, 8, 64], w: In[f32, 64], y: Out[f32, 8, 64], eps: f32):
    """y = x / sqrt(mean(x^2) + eps) * w on an 8 x 64 tile, written with tile operations."""
    tx = tl.load(x)
    sq = tx * tx
    s = tl.rsqrt(tl.row_sum(sq) * (1 / 64) + eps)
    tx = tx * s
    tw = tl.load(w)
    tl.store(y, tx * tw)


@kernel(pool="vector", alias="rmsnorm")
def rmsnorm_builtin(x: In[f32, 8, 64], w: In[f32, 64], y: Out[f32, 8, 64], eps: f64): ...
@kernel(pool="cube", body=GEMM_TILE)
def gemm_tile(a: In[f32, 16, 64], b: In[f32, 64, 16], c: InOut[f32, 16, 16]): ...
@kernel(pool="cube", alias="matmul_acc")
def gemm_builtin(a: In[f32, 16, 64], b: In[f32, 64, 16], c: InOut[f32, 16, 16]): ...


@workload
def main():
    for r in P(R):
        rows = span(r * 8, 8)
        rmsnorm_tile(X[rows, :], W, Y[rows, :], 1e-6)
        rmsnorm_builtin(X[rows, :], W, Y2[rows, :], 1e-6)
    for i, j in P(T, T):
        a, b = A[span(i * 16, 16), :], B[:, span(j * 16, 16)]
        gemm_tile(a, b, C[span(i * 16, 16), span(j * 16, 16)])
        gemm_builtin(a, b, C2[span(i * 16, 16), span(j * 16, 16)])


module = main.module()


def check(threads: int = 2) -> None:
    """RMSNorm and the accumulating GEMM tile (tile instructions and built-ins) against numpy."""
    def rmsnorm(x: Any, w: Any) -> Any:
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w

    prog = pto_wsp.compile(module, threads=threads)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal(64).astype(np.float32)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    c, c2 = np.ones((32, 32), np.float32), np.ones((32, 32), np.float32)
    out = prog(X=x, W=w, A=a, B=b, out={"C": c, "C2": c2})
    norm = rmsnorm(x.astype(np.float64), w)
    np.testing.assert_allclose(out.Y, norm, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.Y2, norm, rtol=1e-4, atol=1e-5)
    gemm = 1.0 + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, gemm, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(c2, gemm, rtol=1e-4, atol=1e-4)
    print("kernels/rmsnorm_gemm: ok")


if __name__ == "__main__":
    check()
