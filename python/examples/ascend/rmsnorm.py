"""RMSNorm on 8 x 64 row tiles in tile instructions, then each tile of X halved in place (a
write-after-read): examples/ascend/rmsnorm.wsp in Python."""

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
