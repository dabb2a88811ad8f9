"""One kernel that uses every tile instruction: examples/kernels/every_instruction.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

X = Tensor(f32[8, 16])
W = Tensor(f32[8, 16])
H = Tensor(f16[8, 16])
Y = Tensor(f32[8, 16])
R = Tensor(f32[8, 1])
S = Tensor(f32[1, 16])
HY = Tensor(f16[8, 16])

EVERY_OP_BODY = """
    tile a: vec f32[8, 16];
    tile b: vec f32[8, 16];
    tile p: vec f32[8, 16];
    tile t: vec f32[8, 16];
    tile u: vec f32[16, 8];
    tile rr: vec f32[8, 1];
    tile r2: vec f32[8, 1];
    tile cs: vec f32[1, 16];
    tile c2: vec f32[1, 16];
    tile th: vec f16[8, 16];
    TLOAD(a, x);
    TLOAD(b, w);
    // p in [0.5, 1.5): an operand for log, square roots, division and reciprocals.
    TABS(p, b);
    TADDS(p, p, 0.5);
    TADD(t, a, b);
    TSUB(t, t, a);
    TMUL(t, t, p);
    TDIV(t, t, p);
    TMAX(t, t, a);
    TMIN(t, t, b);
    TSUBS(t, t, 0.25);
    TMULS(t, t, k);
    TDIVS(t, t, 3.0);
    TMAXS(t, t, -0.5);
    TNEG(t, t);
    TEXP(t, t);
    TLOG(b, p);
    TADD(t, t, b);
    TSQRT(b, p);
    TADD(t, t, b);
    TRSQRT(b, p);
    TADD(t, t, b);
    TRECIP(b, p);
    TADD(t, t, b);
    TROWMIN(rr, t);
    TROWMAX(r2, t);
    TADD(rr, rr, r2);
    TROWSUM(r2, t);
    TADD(rr, rr, r2);
    TROWEXPANDSUB(t, t, rr);
    // Row and column factors in [0.5, 1.5), so that t stays well within f16's range.
    TROWMAX(r2, p);
    TROWEXPANDMUL(t, t, r2);
    TROWEXPANDDIV(t, t, r2);
    TCOLSUM(cs, t);
    TCOLMAX(c2, p);
    TDIV(cs, cs, c2);
    TCOLEXPANDMUL(t, t, c2);
    TROWEXPAND(b, rr);
    TSUB(t, t, b);
    TTRANS(u, t);
    TTRANS(a, u);
    TEXPANDS(b, 0.125);
    TADD(t, a, b);
    TLOAD(th, h);
    TCVT(b, th);
    TADD(t, t, b);
    TCVT(th, t);
    TMOV(b, t);
    TSTORE(hy, th);
    TSTORE(y, b);
    TSTORE(r, rr);
    TSTORE(s, cs);
"""


@kernel(pool="vector", body=EVERY_OP_BODY)
def every_op(
    x: In[f32, 8, 16], w: In[f32, 8, 16], h: In[f16, 8, 16], y: Out[f32, 8, 16],
    r: Out[f32, 8, 1], s: Out[f32, 1, 16], hy: Out[f16, 8, 16], k: f32,
): ...


@workload
def main():
    every_op(X, W, H, Y, R, S, HY, 0.75)


module = main.module()


def check(threads: int = 2) -> None:
    """Every instruction once, replayed in numpy (float32, as the kernel computes)."""
    prog = pto_wsp.compile(module, threads=threads)
    rng = np.random.default_rng(22)
    x, w = (rng.standard_normal((8, 16)).astype(np.float32) for _ in range(2))
    h = rng.standard_normal((8, 16)).astype(np.float16)
    out = prog(X=x, W=w, H=h)
    f = np.float32
    a, b = x.copy(), w.copy()
    p = np.abs(b) + f(0.5)
    t = ((((a + b) - a) * p) / p)
    t = np.minimum(np.maximum(t, a), b)
    t = np.maximum((t - f(0.25)) * f(0.75) / f(3.0), f(-0.5))
    t = np.exp(-t)
    t = t + np.log(p)
    t = t + np.sqrt(p)
    t = t + f(1) / np.sqrt(p)
    t = t + f(1) / p
    rr = t.min(axis=1, keepdims=True) + t.max(axis=1, keepdims=True) + t.sum(axis=1, keepdims=True)
    t = t - rr
    r2 = p.max(axis=1, keepdims=True)
    t = t * r2 / r2
    cs = t.sum(axis=0, keepdims=True)
    c2 = p.max(axis=0, keepdims=True)
    cs = cs / c2
    t = t * c2
    t = t - np.broadcast_to(rr, t.shape)
    t = t.T.T + f(0.125)
    t = t + h.astype(np.float32)
    np.testing.assert_allclose(out.Y, t, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.HY.astype(np.float32), t.astype(np.float16).astype(np.float32), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(out.R, rr, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.S, cs, rtol=1e-4, atol=1e-4)
    print("kernels/every_instruction: ok")


if __name__ == "__main__":
    check()
