"""One LLaMA-7B layer (prefill, 32-token tiles, fixed model sizes): examples/llama7b_layer.wsp
in Python. The seven projections are separate kernels (all running the built-in `matmul`)."""

from pto_wsp import *

seq = Symbol(bind=1024)

X = Tensor(f16[seq, 4096])
Xn1 = Tensor(f16[seq, 4096])
Qr = Tensor(f16[seq, 4096])
Kr = Tensor(f16[seq, 4096])
Vr = Tensor(f16[seq, 4096])
Attn = Tensor(f16[seq, 4096])
AttnOut = Tensor(f16[seq, 4096])
H1 = Tensor(f16[seq, 4096])
Xn2 = Tensor(f16[seq, 4096])
Gate = Tensor(f16[seq, 11008])
Up = Tensor(f16[seq, 11008])
Act = Tensor(f16[seq, 11008])
Down = Tensor(f16[seq, 4096])
Y = Tensor(f16[seq, 4096])
Wq = Tensor(f16[4096, 4096])
Wk = Tensor(f16[4096, 4096])
Wv = Tensor(f16[4096, 4096])
Wo = Tensor(f16[4096, 4096])
Wgate = Tensor(f16[4096, 11008])
Wup = Tensor(f16[4096, 11008])
Wdown = Tensor(f16[11008, 4096])
NormAttn = Tensor(f16[4096])
NormFfn = Tensor(f16[4096])

T = DenseDyn(seq // 32)
Heads = Dense(32)
HiddenCols = Dense(32)
FfnCols = Dense(86)



@kernel(pool="vector")
def rmsnorm(x: In[f16, 32, 4096], w: In[f16, 4096], y: Out[f16, 32, 4096]): ...
@kernel(pool="cube", alias="matmul")
def proj_q(x: In[f16, 32, 4096], w: In[f16, 4096, 128], y: Out[f16, 32, 128]): ...
@kernel(pool="cube", alias="matmul")
def proj_k(x: In[f16, 32, 4096], w: In[f16, 4096, 128], y: Out[f16, 32, 128]): ...
@kernel(pool="cube", alias="matmul")
def proj_v(x: In[f16, 32, 4096], w: In[f16, 4096, 128], y: Out[f16, 32, 128]): ...
@kernel(pool="vector")
def rope(q: InOut[f16, 32, 128], k: InOut[f16, 32, 128], pos: i64): ...
@kernel(pool="vector", alias="attn_causal")
def causal_attn(q: In[f16, 32, 128], k: In[f16, ANY, 128], v: In[f16, ANY, 128], o: Out[f16, 32, 128], kv_len: i64): ...
@kernel(pool="cube", alias="matmul")
def proj_o(x: In[f16, 32, 4096], w: In[f16, 4096, 128], y: Out[f16, 32, 128]): ...
@kernel(pool="vector", alias="add")
def residual_add(a: In[f16, 32, 4096], b: In[f16, 32, 4096], y: Out[f16, 32, 4096]): ...
@kernel(pool="cube", alias="matmul")
def proj_gate(x: In[f16, 32, 4096], w: In[f16, 4096, 128], y: Out[f16, 32, 128]): ...
@kernel(pool="cube", alias="matmul")
def proj_up(x: In[f16, 32, 4096], w: In[f16, 4096, 128], y: Out[f16, 32, 128]): ...
@kernel(pool="vector")
def swiglu(gate: In[f16, 32, 128], up: In[f16, 32, 128], y: Out[f16, 32, 128]): ...
@kernel(pool="cube", alias="matmul")
def proj_down(x: In[f16, 32, 11008], w: In[f16, 11008, 128], y: Out[f16, 32, 128]): ...


def c128(j):
    return span(j * 128, 128)


@workload
def llama_layer():
    for t in P(T):
        rows = span(t * 32, 32)
        rmsnorm(X[rows, :], NormAttn, Xn1[rows, :])
        for h in P(Heads):
            proj_q(Xn1[rows, :], Wq[:, c128(h)], Qr[rows, c128(h)])
            proj_k(Xn1[rows, :], Wk[:, c128(h)], Kr[rows, c128(h)])
            proj_v(Xn1[rows, :], Wv[:, c128(h)], Vr[rows, c128(h)])
            rope(Qr[rows, c128(h)], Kr[rows, c128(h)], t * 32)
            causal_attn(Qr[rows, c128(h)], Kr[:(t + 1) * 32, c128(h)], Vr[:(t + 1) * 32, c128(h)], Attn[rows, c128(h)], (t + 1) * 32)
        for j in P(HiddenCols):
            proj_o(Attn[rows, :], Wo[:, c128(j)], AttnOut[rows, c128(j)])
        residual_add(X[rows, :], AttnOut[rows, :], H1[rows, :])
        rmsnorm(H1[rows, :], NormFfn, Xn2[rows, :])
        for f in P(FfnCols):
            proj_gate(Xn2[rows, :], Wgate[:, c128(f)], Gate[rows, c128(f)])
            proj_up(Xn2[rows, :], Wup[:, c128(f)], Up[rows, c128(f)])
            swiglu(Gate[rows, c128(f)], Up[rows, c128(f)], Act[rows, c128(f)])
        for j in P(HiddenCols):
            proj_down(Act[rows, :], Wdown[:, c128(j)], Down[rows, c128(j)])
        residual_add(H1[rows, :], Down[rows, :], Y[rows, :])


schedule = (
    llama_layer.executors(24)
    .dispatch(DispatchPolicy.affinity(lambda t: t))
    .task_graph(deps=Deps.hybrid(), ready=ReadyPolicy.work_steal(), start=StartPolicy.immediate(), pools=Pools.by_exec_unit())
    .task_window(8192, "stall")
)
module = schedule.module()
