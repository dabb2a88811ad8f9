"""simpler's `vector_example` re-expressed (c = a + b, d = c + 1, e = c + 2, g = d * e,
f = g + c on four 32-row tiles): examples/ascend/vector_example.wsp in Python."""

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
