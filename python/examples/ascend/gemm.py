"""GEMM with f16 inputs and f32 accumulation in tile instructions, one cube task per 16 x 16
output tile: examples/ascend/gemm.wsp in Python."""

from pto_wsp import *

A = Tensor(f16[64, 64])
B = Tensor(f16[64, 64])
C = Tensor(f32[64, 64])

T = Dense(4)

GEMM_TILE = """
    tile ta: left f16[16, 16];
    tile tb: right f16[16, 16];
    tile acc: acc f32[16, 16];
    TLOAD(ta, a, 0, 0);
    TLOAD(tb, b, 0, 0);
    TMATMUL(acc, ta, tb);
    for k in range(3) {
        TLOAD(ta, a, 0, k * 16 + 16);
        TLOAD(tb, b, k * 16 + 16, 0);
        TMATMUL_ACC(acc, ta, tb);
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
