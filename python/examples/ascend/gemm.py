"""GEMM with f16 inputs and f32 accumulation in tile instructions, one cube task per 16 x 16
output tile: examples/ascend/gemm.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

A = Tensor(f16[64, 64])
B = Tensor(f16[64, 64])
C = Tensor(f32[64, 64])

T = Dense(4)

GEMM_TILE = """
    tile am: mat f16[16, 16];
    tile bm: mat f16[16, 16];
    tile ta: left f16[16, 16];
    tile tb: right f16[16, 16];
    tile acc: acc f32[16, 16];
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
    TSTORE(c, acc);
"""


@kernel(pool="cube", body=GEMM_TILE)
def gemm_tile(a: In[f16, 16, 64], b: In[f16, 64, 16], c: Out[f32, 16, 16]): ...


def tile(i):
    return span(i * 16, 16)


@workload
def main():
    for i, j in P(T, T):
        gemm_tile(A[tile(i), :], B[:, tile(j)], C[tile(i), tile(j)])


module = main.module()


def check(threads: int = 2) -> None:
    """C = A @ B (an `out`: overwritten, not accumulated) against numpy."""
    rng = np.random.default_rng(31)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    c = np.full((64, 64), 7.0, dtype=np.float32)
    pto_wsp.compile(module, threads=threads)(A=a, B=b, out={"C": c})
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
    print("ascend/gemm: ok")


if __name__ == "__main__":
    check()
