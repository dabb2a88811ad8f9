"""RMSNorm on 8 x 64 row tiles in tile instructions, then each tile of X halved in place (a
write-after-read): examples/ascend/rmsnorm.wsp in Python."""

from typing import Any

import numpy as np

import pto_wsp
from pto_wsp import *

X = Tensor(f32[32, 64])
W = Tensor(f32[1, 64])
Y = Tensor(f32[32, 64])

R = Dense(4)

RMSNORM_TILE = """
    tile tx: vec f32[8, 64];
    tile sq: vec f32[8, 64];
    tile s: vec f32[8, 1];
    tile tw: vec f32[1, 64];
    TLOAD(tx, x);
    TMUL(sq, tx, tx);
    TROWSUM(s, sq);
    TMULS(s, s, 0.015625);
    TADDS(s, s, eps);
    TRSQRT(s, s);
    TROWEXPANDMUL(tx, tx, s);
    TLOAD(tw, w);
    TCOLEXPANDMUL(tx, tx, tw);
    TSTORE(y, tx);
"""

SCALE_TILE = """
    tile tx: vec f32[8, 64];
    TLOAD(tx, x);
    TMULS(tx, tx, k);
    TSTORE(x, tx);
"""



@kernel(pool="vector", body=RMSNORM_TILE)
def rmsnorm_tile(x: In[f32, 8, 64], w: In[f32, 1, 64], y: Out[f32, 8, 64], eps: f32): ...
@kernel(pool="vector", body=SCALE_TILE)
def scale_tile(x: InOut[f32, 8, 64], k: f32): ...


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
