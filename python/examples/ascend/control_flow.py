"""The orchestration's control flow on the Ascend runtime (a `for_each` over a dynamic axis, a
ragged axis, a `select` over a sparse axis, kernel tiers, a `while` loop with `load`, `set`, `if`
and `break`): examples/ascend/control_flow.wsp in Python."""

from typing import Any

import numpy as np

import pto_wsp
from pto_wsp import *

steps = Symbol(bind=3)
n = Slot()
i = Slot()

lens = Tensor(i64[4], bind=[2, 0, 3, 1])
indptr = Tensor(i64[5], bind=[0, 2, 3, 3, 5])
indices = Tensor(i64[5], bind=[1, 3, 0, 2, 3])
X = Tensor(f32[16, 64])
Y = Tensor(f32[16, 64])
Z = Tensor(f32[16, 64])

S = DenseDyn(steps)
RG = Ragged(4, lens)
SP = Sparse(4, indptr, indices)
R4 = Dense(4)


BUMP_SMALL = """
    tile t: vec f32[4, 64];
    TLOAD(t, x);
    TADDS(t, t, 1.0);
    TSTORE(x, t);
"""

BUMP_LARGE = """
    tile t: vec f32[4, 64];
    TLOAD(t, x);
    TMULS(t, t, 0.5);
    TADDS(t, t, 2.0);
    TSTORE(x, t);
"""

COPY = """
    tile t: vec f32[4, 64];
    TLOAD(t, x);
    TSTORE(y, t);
"""


@kernel(pool="vector", body=BUMP_SMALL)
def bump_small(x: InOut[f32, 4, 64], j: i64): ...
@kernel(pool="vector", body=BUMP_LARGE)
def bump_large(x: InOut[f32, 4, 64], j: i64): ...
@kernel(pool="vector", tiers=[(lambda j: j < 2, bump_small)], otherwise=bump_large)
def bump(x: InOut[f32, 4, 64], j: i64): ...
@kernel(pool="vector", body=COPY)
def copy(x: In[f32, 4, 64], y: Out[f32, 4, 64]): ...


def block(k):
    """Row block `k` (4 rows) of a tensor."""
    return span(k * 4, 4)


@workload
def main():
    for s in P.seq(S):
        for r, p in P(RG):
            bump(X[block(r), :], p)
    for r, c in P.sel(SP):
        copy(X[block(c), :], Y[block(r), :])
    for r in P(R4):
        bump(X[block(r), :], 7)
    i.set(0)
    with P.while_(i < 10, max=8):
        n.load(lens[i % 4])
        with P.when(n > 1):
            bump(Z[block(i % 4), :], n)
        with P.otherwise():
            copy(Y[block(i % 4), :], Z[block(i % 4), :])
        i.set(i + 3)
        P.break_if(i > 6)


module = main.module()


def check(threads: int = 2) -> None:
    """Every construct of the example, replayed by hand in numpy with its `//@ bind` values."""
    rng = np.random.default_rng(36)
    x, y, z = (rng.standard_normal((16, 64)).astype(np.float32) for _ in range(3))
    want_x, want_y, want_z = (a.astype(np.float64) for a in (x, y, z))
    pto_wsp.compile(module, threads=threads)(X=x, Y=y, Z=z)
    steps, lens = 3, [2, 0, 3, 1]
    indptr, indices = [0, 2, 3, 3, 5], [1, 3, 0, 2, 3]

    def block(a: Any, k: int) -> Any:
        return a[k * 4 : k * 4 + 4]

    def bump(a: Any, k: int, j: int) -> None:  # tiers: j < 2 adds 1, else halves and adds 2
        rows = block(a, k)
        rows[:] = rows + 1 if j < 2 else rows * 0.5 + 2

    for _ in range(steps):
        for r in range(4):
            for p in range(lens[r]):
                bump(want_x, r, p)
    for r in range(4):
        for c in indices[indptr[r] : indptr[r + 1]]:
            block(want_y, r)[:] = block(want_x, c)
    for r in range(4):
        bump(want_x, r, 7)
    i, rounds = 0, 0
    while i < 10 and rounds < 8:
        rounds += 1
        n = lens[i % 4]
        if n > 1:
            bump(want_z, i % 4, n)
        else:
            block(want_z, i % 4)[:] = block(want_y, i % 4)
        i += 3
        if i > 6:
            break
    np.testing.assert_allclose(x, want_x, rtol=1e-6)
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    np.testing.assert_allclose(z, want_z, rtol=1e-6)
    print("ascend/control_flow: ok")


if __name__ == "__main__":
    check()
