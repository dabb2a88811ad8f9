"""One LLaMA-7B layer (prefill, 32-token tiles, fixed model sizes): examples/llama7b_layer.wsp
in Python. The seven projections are separate kernels (all running the built-in `matmul`)."""

from typing import Any

import numpy as np

import pto_wsp
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
Wq = Tensor(f16[4096, 4096], fill="uniform(-0.015625, 0.015625)")
Wk = Tensor(f16[4096, 4096], fill="uniform(-0.015625, 0.015625)")
Wv = Tensor(f16[4096, 4096], fill="uniform(-0.015625, 0.015625)")
Wo = Tensor(f16[4096, 4096], fill="uniform(-0.015625, 0.015625)")
Wgate = Tensor(f16[4096, 11008], fill="uniform(-0.015625, 0.015625)")
Wup = Tensor(f16[4096, 11008], fill="uniform(-0.015625, 0.015625)")
Wdown = Tensor(f16[11008, 4096], fill="uniform(-0.0078125, 0.0078125)")
NormAttn = Tensor(f16[4096], fill="uniform(0.5, 1.0)")
NormFfn = Tensor(f16[4096], fill="uniform(0.5, 1.0)")
RopeCos = Tensor(f32[seq, 64], fill="rope_cos(10000)")
RopeSin = Tensor(f32[seq, 64], fill="rope_sin(10000)")

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
def rope(q: InOut[f16, 32, 128], k: InOut[f16, 32, 128], cs: In[f32, 32, 64], sn: In[f32, 32, 64]): ...
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
            rope(Qr[rows, c128(h)], Kr[rows, c128(h)], RopeCos[rows, :], RopeSin[rows, :])
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


def check(threads: int = 2, seq_len: int = 32) -> None:
    """One LLaMA-7B layer over 32 tokens (the real sizes: 4096 hidden, 11008 FFN) against numpy
    (float32, each intermediate rounded to f16 as the tensors store it)."""
    prog = pto_wsp.compile(module, threads=threads, bind={"seq": seq_len})
    rng = np.random.default_rng(41)

    def weight(*shape: int) -> Any:
        return (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[0])).astype(np.float16)

    def rope(x: Any, pos: Any, theta: float = 10000.0) -> Any:
        """Rotate-half RoPE of the rows of x (..., d) at position `pos` (one, or one per row)."""
        half = x.shape[-1] // 2
        freq = theta ** (-2.0 * np.arange(half) / x.shape[-1])
        angle = np.asarray(pos, dtype=np.float64)[..., None] * freq
        c, s = np.cos(angle), np.sin(angle)
        lo, hi = x[..., :half], x[..., half:]
        return np.concatenate([lo * c - hi * s, lo * s + hi * c], axis=-1)

    def h(a: Any) -> Any:  # rounded to f16 as the tensor stores it, computed on in f32
        return a.astype(np.float16).astype(np.float32)

    def rms(x: Any, w: Any) -> Any:
        return h(x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w)

    x = rng.standard_normal((seq_len, 4096), dtype=np.float32).astype(np.float16)
    n1, n2 = ((1 + 0.1 * rng.standard_normal(4096)).astype(np.float16) for _ in range(2))
    wq, wk, wv, wo = (weight(4096, 4096) for _ in range(4))
    wgate, wup, wdown = weight(4096, 11008), weight(4096, 11008), weight(11008, 4096)
    # The RoPE tables: cos / sin of every position's angles (the reference uses the angles).
    angle = np.arange(seq_len)[:, None] * 10000.0 ** (-2.0 * np.arange(64) / 128)
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    y = prog(
        X=x, NormAttn=n1, NormFfn=n2, Wq=wq, Wk=wk, Wv=wv, Wo=wo, Wgate=wgate, Wup=wup, Wdown=wdown,
        RopeCos=cos, RopeSin=sin,
    )["Y"]
    f = lambda a: a.astype(np.float32)  # noqa: E731
    xn = rms(f(x), f(n1))
    q, k, v = h(xn @ f(wq)), h(xn @ f(wk)), h(xn @ f(wv))
    attn = np.zeros((seq_len, 4096), np.float32)
    pos = np.arange(seq_len)
    for hd in range(32):
        cols = slice(hd * 128, (hd + 1) * 128)
        qh, kh = h(rope(q[:, cols], pos)), h(rope(k[:, cols], pos))
        s = qh @ kh.T / np.sqrt(128)
        s[np.triu_indices(seq_len, 1)] = -np.inf  # token t attends tokens 0 ..= t
        p = np.exp(s - s.max(axis=1, keepdims=True))
        attn[:, cols] = h((p / p.sum(axis=1, keepdims=True)) @ v[:, cols])
    h1 = h(f(x) + h(attn @ f(wo)))
    xn2 = rms(h1, f(n2))
    gate, up = h(xn2 @ f(wgate)), h(xn2 @ f(wup))
    act = h(gate / (1 + np.exp(-gate)) * up)
    want = h(h1 + h(act @ f(wdown)))
    np.testing.assert_allclose(f(y), want, rtol=2e-2, atol=2e-2)
    print(f"llama7b_layer: ok ({prog.stats['num_tasks']} tasks)")


if __name__ == "__main__":
    check()
