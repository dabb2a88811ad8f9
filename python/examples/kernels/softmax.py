"""Row softmax written in tile instructions next to the built-in `softmax` on the same input:
examples/kernels/softmax.wsp in Python (the kernel body is the tile-instruction text)."""

from pto_wsp import *

X = Tensor(f32[32, 64])
Y = Tensor(f32[32, 64])
Z = Tensor(f32[32, 64])
R = Dense(4)

SOFTMAX_TILE = """
    tile t: vec f32[8, 64];
    tile m: vec f32[8, 1];
    tile l: vec f32[8, 1];
    TLOAD(t, x);
    TMULS(t, t, scale);
    TROWMAX(m, t);
    TROWEXPANDSUB(t, t, m);
    TEXP(t, t);
    TROWSUM(l, t);
    TROWEXPANDDIV(t, t, l);
    TSTORE(y, t);
"""


@kernel(pool="vector", body=SOFTMAX_TILE)
def softmax_tile(x: In[f32, 8, 64], y: Out[f32, 8, 64], scale: f32): ...
@kernel(pool="vector", alias="softmax")
def softmax_builtin(x: In[f32, 8, 64], y: Out[f32, 8, 64], scale: f64): ...


@workload
def main():
    for r in P(R):
        rows = span(r * 8, 8)
        softmax_tile(X[rows, :], Y[rows, :], 0.125)
        softmax_builtin(X[rows, :], Z[rows, :], 0.125)


module = main.module()
