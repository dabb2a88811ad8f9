"""simpler's `vector_example` re-expressed (c = a + b, d = c + 1, e = c + 2, g = d * e,
f = g + c on four 32-row tiles): examples/ascend/vector_example.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

a = Tensor(f32[128, 128])
b = Tensor(f32[128, 128])
c = Tensor(f32[128, 128])
d = Tensor(f32[128, 128])
e = Tensor(f32[128, 128])
g = Tensor(f32[128, 128])
f = Tensor(f32[128, 128])

R = Dense(4)


BINARY = """
    tile tx: vec f32[32, 128];
    tile ty: vec f32[32, 128];
    TLOAD(tx, x);
    TLOAD(ty, y);
    {op}(tx, tx, ty);
    TSTORE(z, tx);
"""

ADD_SCALAR = """
    tile tx: vec f32[32, 128];
    TLOAD(tx, x);
    TADDS(tx, tx, s);
    TSTORE(z, tx);
"""


@kernel(pool="vector", body=BINARY.format(op="TADD"))
def add(x: In[f32, 32, 128], y: In[f32, 32, 128], z: Out[f32, 32, 128]): ...
@kernel(pool="vector", body=ADD_SCALAR)
def add_scalar(x: In[f32, 32, 128], z: Out[f32, 32, 128], s: f32): ...
@kernel(pool="vector", body=BINARY.format(op="TMUL"))
def mul(x: In[f32, 32, 128], y: In[f32, 32, 128], z: Out[f32, 32, 128]): ...


@workload
def main():
    for r in P(R):
        rows = span(r * 32, 32)
        add(a[rows, :], b[rows, :], c[rows, :])
        add_scalar(c[rows, :], d[rows, :], 1.0)
        add_scalar(c[rows, :], e[rows, :], 2.0)
        mul(d[rows, :], e[rows, :], g[rows, :])
        add(g[rows, :], c[rows, :], f[rows, :])


module = main.module()


def check(threads: int = 2) -> None:
    """f = (c + 1)(c + 2) + c with c = a + b, against numpy (and simpler's 47 for a = 2, b = 3)."""
    prog = pto_wsp.compile(module, threads=threads)
    rng = np.random.default_rng(33)
    a, b = (rng.standard_normal((128, 128)).astype(np.float32) for _ in range(2))
    c = a.astype(np.float64) + b
    np.testing.assert_allclose(prog(a=a, b=b)["f"], (c + 1) * (c + 2) + c, rtol=1e-5, atol=1e-4)
    twos, threes = np.full((128, 128), 2, np.float32), np.full((128, 128), 3, np.float32)
    np.testing.assert_array_equal(prog(a=twos, b=threes)["f"], np.full((128, 128), 47, np.float32))
    print("ascend/vector_example: ok")


if __name__ == "__main__":
    check()
