"""Row softmax written in tile instructions next to the built-in `softmax` on the same input:
examples/kernels/softmax.wsp in Python (the kernel written as a Python function over tile values)."""

from typing import Any

import numpy as np

import pto_wsp
from pto_wsp import *
from pto_wsp import tile as T

X = Tensor(f32[32, 64])
Y = Tensor(f32[32, 64])
Z = Tensor(f32[32, 64])
R = Dense(4)

@kernel(pool="vector")
def softmax_tile(x: In[f32, 8, 64], y: Out[f32, 8, 64], scale: f32):
    """Fused row softmax of an 8 x 64 tile: y = softmax(scale * x) per row."""
    t = T.load(x)
    t = t * scale
    m = T.row_max(t)
    t = T.exp(t - m)  # each row minus its max (TROWEXPANDSUB), then TEXP
    l = T.row_sum(t)
    T.store(y, t / l)


@kernel(pool="vector", alias="softmax")
def softmax_builtin(x: In[f32, 8, 64], y: Out[f32, 8, 64], scale: f64): ...


@workload
def main():
    for r in P(R):
        rows = span(r * 8, 8)
        softmax_tile(X[rows, :], Y[rows, :], 0.125)
        softmax_builtin(X[rows, :], Z[rows, :], 0.125)


module = main.module()


def check(threads: int = 2) -> None:
    """Both softmax kernels (tile instructions and the built-in) against numpy."""
    def softmax(x: Any) -> Any:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    prog = pto_wsp.compile(module, threads=threads)
    x = np.random.default_rng(6).standard_normal((32, 64)).astype(np.float32)
    out = prog(X=x)
    want = softmax(x.astype(np.float64) * 0.125)
    np.testing.assert_allclose(out.Y, want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out.Z, want, rtol=1e-4, atol=1e-6)
    print("kernels/softmax: ok")


if __name__ == "__main__":
    check()
