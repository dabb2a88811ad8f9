"""The orchestration's control flow on the Ascend runtime (a `for_each` over a dynamic axis, a
ragged axis, a `select` over a sparse axis, kernel tiers, a `while` loop with `load`, `set`, `if`
and `break`): examples/ascend/control_flow.wsp in Python."""

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
