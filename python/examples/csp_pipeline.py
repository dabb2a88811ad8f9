"""A three-stage CSP pipeline (load, compute, store) over `nbuf` rotating buffers:
examples/csp_pipeline.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

ntiles = Symbol(bind=16)
nbuf = Symbol(bind=4)

Src = Tensor(f16[ntiles * 256, 1024])
Stage = Tensor(f16[nbuf * 256, 1024])
Res = Tensor(f16[nbuf * 256, 1024])
Dst = Tensor(f16[ntiles * 256, 1024])

T = DenseDyn(ntiles)



@kernel(pool="vector", alias="copy")
def load_tile(src: In[f16, 256, 1024], dst: Out[f16, 256, 1024]): ...
@kernel(pool="cube", alias="silu")
def compute_tile(x: In[f16, 256, 1024], y: Out[f16, 256, 1024]): ...
@kernel(pool="vector", alias="copy")
def store_tile(src: In[f16, 256, 1024], dst: Out[f16, 256, 1024]): ...


def buf(i):
    """The rotating buffer of tile `i`."""
    return span(i % nbuf * 256, 256)


@pipeline
def stream3():
    loaded = Channel(2)
    computed = Channel(2)

    @process(produces=[loaded])
    def loader():
        for t in P.seq(T):
            load_tile(Src[t * 256:(t + 1) * 256, :], Stage[buf(t), :])
            loaded.send(t)

    @process(consumes=[loaded], produces=[computed])
    def computer():
        for i in loaded.consume():
            compute_tile(Stage[buf(i), :], Res[buf(i), :])
            computed.send(i)

    @process(consumes=[computed])
    def storer():
        for j in computed.consume():
            store_tile(Res[buf(j), :], Dst[j * 256:(j + 1) * 256, :])


schedule = (
    stream3.executors(4)
    .dispatch(DispatchPolicy.work_steal())
    .task_graph(deps=Deps.exact(), ready=ReadyPolicy.work_steal(), start=StartPolicy.immediate(), pools=Pools.by_exec_unit())
)
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs the pipeline over 6 tiles (silu of each) and checks it against numpy."""
    # nbuf = channel depth 2 + one tile in each of the two consumers: no buffer is reused early.
    prog = pto_wsp.compile(module, threads=threads, bind={"ntiles": 6, "nbuf": 4})
    src = np.random.default_rng(10).standard_normal((6 * 256, 1024)).astype(np.float16)
    dst = prog(Src=src)["Dst"]
    x = src.astype(np.float64)
    np.testing.assert_allclose(dst.astype(np.float64), x / (1 + np.exp(-x)), rtol=2e-3, atol=1e-3)
    print("csp_pipeline: ok")


if __name__ == "__main__":
    check()
