"""RMSNorm on 8 x 64 row tiles, then each tile of X halved in place (a write-after-read):
examples/ascend/rmsnorm.wsp in Python, its kernels written as Python functions over tile values
(`pto_wsp.tile`) that trace into the same tile instructions as the `.wsp` text."""

from typing import Any

import numpy as np

import pto_wsp
from pto_wsp import *
from pto_wsp import tile as T

X = Tensor(f32[32, 64])
W = Tensor(f32[1, 64])
Y = Tensor(f32[32, 64])

R = Dense(4)


@kernel(pool="vector")
def rmsnorm_tile(x: In[f32, 8, 64], w: In[f32, 1, 64], y: Out[f32, 8, 64], eps: f32):
    """y = x / sqrt(mean(x^2) + eps) * w, on one 8 x 64 tile."""
    tx = T.load(x)
    sq = tx * tx
    s = T.row_sum(sq)  # one value per row: 8 x 1
    s = s * (1 / 64)
    s = s + eps
    s = T.rsqrt(s)
    tx = tx * s  # each row by its own factor (TROWEXPANDMUL)
    tw = T.load(w)
    tx = tx * tw  # each column by its weight (TCOLEXPANDMUL)
    T.store(y, tx)


@kernel(pool="vector")
def scale_tile(x: InOut[f32, 8, 64], k: f32):
    """x = k * x, in place."""
    tx = T.load(x)
    T.store(x, tx * k)


@workload
def main():
    for r in P(R):
        rmsnorm_tile(X[span(r * 8, 8), :], W, Y[span(r * 8, 8), :], 1e-6)
    for r in P(R):
        scale_tile(X[span(r * 8, 8), :], 0.5)


module = main.module()


def check(threads: int = 2) -> None:
    """RMSNorm of X, then X halved in place, against numpy."""
    def rmsnorm(x: Any, w: Any) -> Any:
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w

    rng = np.random.default_rng(32)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal((1, 64)).astype(np.float32)
    x0 = x.astype(np.float64)
    y = pto_wsp.compile(module, threads=threads)(X=x, W=w)["Y"]
    # Y from X before the halving (the halving waits for the norm that read it).
    np.testing.assert_allclose(y, rmsnorm(x0, w[0].astype(np.float64)), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(x, (x0 * 0.5).astype(np.float32))
    print("ascend/rmsnorm: ok")


if __name__ == "__main__":
    check()
