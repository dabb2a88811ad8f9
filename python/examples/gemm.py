"""Tiled GEMM, C[M, N] = A[M, K] * B[K, N] with 128 x 128 tiles: examples/gemm.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

M = Symbol(bind=2048)
N = Symbol(bind=2048)
K = Symbol(bind=2048)

A = Tensor(f16[M, K])
B = Tensor(f16[K, N])
C = Tensor(f32[M, N])

MT = DenseDyn(M // 128)
NT = DenseDyn(N // 128)
KT = DenseDyn(K // 128)


@kernel(pool="vector", alias="fill")
def zero_tile(c: Out[f32, 128, 128], value: f64): ...
@kernel(pool="cube", alias="matmul_acc")
def gemm_tile(a: In[f16, 128, 128], b: In[f16, 128, 128], c: InOut[f32, 128, 128]): ...


def tile(i):
    return span(i * 128, 128)


@workload
def gemm():
    for i, j in P(MT, NT):
        zero_tile(C[tile(i), tile(j)], 0.0)
        for k in P.seq(KT):
            gemm_tile[i, j, k](a=A[tile(i), tile(k)], b=B[tile(k), tile(j)], c=C[tile(i), tile(j)])


schedule = (
    gemm.executors(24)
    .dispatch(DispatchPolicy.affinity(lambda i, j: i * (N // 128) + j))
    .task_graph(
        deps=Deps.infer_tensor_map_exact(),
        ready=ReadyPolicy.fifo(),
        start=StartPolicy.immediate(),
        pools=Pools.by_exec_unit(),
    )
)
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs C = A @ B at M = 256, N = 384, K = 256 and checks it against numpy."""
    prog = pto_wsp.compile(module, threads=threads, bind={"M": 256, "N": 384, "K": 256})
    rng = np.random.default_rng(4)
    a = rng.standard_normal((256, 256)).astype(np.float16)
    b = rng.standard_normal((256, 384)).astype(np.float16)
    c = prog(A=a, B=b)["C"]
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
    print(f"gemm: ok ({prog.stats['num_tasks']} tasks)")


if __name__ == "__main__":
    check()
