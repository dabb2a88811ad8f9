"""RMSNorm of 16-row blocks: examples/rmsnorm.wsp in Python."""

from pto_wsp import *

tokens = Symbol(bind=1024)
hidden = Symbol(bind=4096)

X = Tensor(f32[tokens, hidden])
W = Tensor(f32[hidden])
Y = Tensor(f32[tokens, hidden])

T = DenseDyn(tokens // 16)


@kernel(pool="vector")
def rmsnorm(x: In[f32, 16, ANY], w: In[f32, ANY], y: Out[f32, 16, ANY]): ...


@workload
def rmsnorm_rows():
    for t in P(T):
        rmsnorm(X[t * 16:(t + 1) * 16, :], W, Y[t * 16:(t + 1) * 16, :])


schedule = (
    rmsnorm_rows.executors(8)
    .dispatch(DispatchPolicy.round_robin(8))
    .task_graph(deps=Deps.exact(), ready=ReadyPolicy.fifo(), start=StartPolicy.immediate(), pools=Pools.single())
)
module = schedule.module()
