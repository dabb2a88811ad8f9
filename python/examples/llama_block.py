"""One LLaMA-style transformer block over 16-token tiles (prefill): examples/llama_block.wsp in
Python."""

from typing import Any

import numpy as np

import pto_wsp
from pto_wsp import *

seq = Symbol(bind=128)
heads = Symbol(bind=4)
ffn = Symbol(bind=512)

hidden = heads * 64
X = Tensor(f32[seq, hidden])
Xn1 = Tensor(f32[seq, hidden])
Q = Tensor(f32[seq, hidden])
K = Tensor(f32[seq, hidden])
V = Tensor(f32[seq, hidden])
Attn = Tensor(f32[seq, hidden])
AttnOut = Tensor(f32[seq, hidden])
H1 = Tensor(f32[seq, hidden])
Xn2 = Tensor(f32[seq, hidden])
Gate = Tensor(f32[seq, ffn])
Up = Tensor(f32[seq, ffn])
Act = Tensor(f32[seq, ffn])
Down = Tensor(f32[seq, hidden])
Y = Tensor(f32[seq, hidden])
Wq = Tensor(f16[hidden, hidden], fill="uniform(-0.0625, 0.0625)")
Wk = Tensor(f16[hidden, hidden], fill="uniform(-0.0625, 0.0625)")
Wv = Tensor(f16[hidden, hidden], fill="uniform(-0.0625, 0.0625)")
Wo = Tensor(f16[hidden, hidden], fill="uniform(-0.0625, 0.0625)")
Wgate = Tensor(f16[hidden, ffn], fill="uniform(-0.0625, 0.0625)")
Wup = Tensor(f16[hidden, ffn], fill="uniform(-0.0625, 0.0625)")
Wdown = Tensor(f16[ffn, hidden], fill="uniform(-0.03125, 0.03125)")
NormAttn = Tensor(f32[hidden], fill="uniform(0.5, 1.0)")
NormFfn = Tensor(f32[hidden], fill="uniform(0.5, 1.0)")
RopeCos = Tensor(f32[seq, 32], fill="rope_cos(10000)")
RopeSin = Tensor(f32[seq, 32], fill="rope_sin(10000)")

T = DenseDyn(seq // 16)
H = DenseDyn(heads)
F = DenseDyn(ffn // 64)


@kernel(pool="vector")
def rmsnorm(x: In[f32, 16, ANY], w: In[f32, ANY], y: Out[f32, 16, ANY]): ...
@kernel(pool="cube", alias="matmul")
def proj(x: In[f32, 16, ANY], w: In[f16, ANY, 64], y: Out[f32, 16, 64]): ...
@kernel(pool="vector")
def rope(q: InOut[f32, 16, 64], k: InOut[f32, 16, 64], cs: In[f32, 16, 32], sn: In[f32, 16, 32]): ...
@kernel(pool="vector", alias="attn_causal")
def causal_attn(q: In[f32, 16, 64], k: In[f32, ANY, 64], v: In[f32, ANY, 64], o: Out[f32, 16, 64], kv_len: i64): ...
@kernel(pool="vector", alias="add")
def residual_add(a: In[f32, 16, ANY], b: In[f32, 16, ANY], y: Out[f32, 16, ANY]): ...
@kernel(pool="vector")
def swiglu(gate: In[f32, 16, 64], up: In[f32, 16, 64], y: Out[f32, 16, 64]): ...


def c64(j):
    """The 64 columns of head (or FFN tile) `j`."""
    return span(j * 64, 64)


@workload
def llama_block():
    for t in P(T):
        rows = span(t * 16, 16)
        rmsnorm(X[rows, :], NormAttn, Xn1[rows, :])
        for h in P(H):
            proj(Xn1[rows, :], Wq[:, c64(h)], Q[rows, c64(h)])
            proj(Xn1[rows, :], Wk[:, c64(h)], K[rows, c64(h)])
            proj(Xn1[rows, :], Wv[:, c64(h)], V[rows, c64(h)])
            rope(Q[rows, c64(h)], K[rows, c64(h)], RopeCos[rows, :], RopeSin[rows, :])
            causal_attn(Q[rows, c64(h)], K[:(t + 1) * 16, c64(h)], V[:(t + 1) * 16, c64(h)], Attn[rows, c64(h)], (t + 1) * 16)
        for j in P(H):
            proj(Attn[rows, :], Wo[:, c64(j)], AttnOut[rows, c64(j)])
        residual_add(X[rows, :], AttnOut[rows, :], H1[rows, :])
        rmsnorm(H1[rows, :], NormFfn, Xn2[rows, :])
        for f in P(F):
            proj(Xn2[rows, :], Wgate[:, c64(f)], Gate[rows, c64(f)])
            proj(Xn2[rows, :], Wup[:, c64(f)], Up[rows, c64(f)])
            swiglu(Gate[rows, c64(f)], Up[rows, c64(f)], Act[rows, c64(f)])
        for j in P(H):
            proj(Act[rows, :], Wdown[:, c64(j)], Down[rows, c64(j)])
        residual_add(H1[rows, :], Down[rows, :], Y[rows, :])


schedule = (
    llama_block.executors(8)
    .dispatch(DispatchPolicy.affinity(lambda t: t))
    .task_graph(deps=Deps.hybrid(), ready=ReadyPolicy.work_steal(), start=StartPolicy.immediate(), pools=Pools.by_exec_unit())
)
module = schedule.module()


def check(threads: int = 2) -> None:
    """One block over 48 tokens, 2 heads, FFN 128, against a float64 numpy block."""
    seq, heads, ffn = 48, 2, 128
    hidden = heads * 64
    prog = pto_wsp.compile(module, threads=threads, bind={"seq": seq, "heads": heads, "ffn": ffn})
    rng = np.random.default_rng(12)

    def weight(*shape: int) -> Any:
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float16)

    def rmsnorm(x: Any, w: Any) -> Any:
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w
    def rope(x: Any, pos: Any, theta: float = 10000.0) -> Any:
        """Rotate-half RoPE of the rows of x (..., d) at position `pos` (one, or one per row)."""
        half = x.shape[-1] // 2
        freq = theta ** (-2.0 * np.arange(half) / x.shape[-1])
        angle = np.asarray(pos, dtype=np.float64)[..., None] * freq
        c, s = np.cos(angle), np.sin(angle)
        lo, hi = x[..., :half], x[..., half:]
        return np.concatenate([lo * c - hi * s, lo * s + hi * c], axis=-1)

    x = rng.standard_normal((seq, hidden)).astype(np.float32)
    norm_attn = (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
    norm_ffn = (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
    wq, wk, wv, wo = (weight(hidden, hidden) for _ in range(4))
    wgate, wup, wdown = weight(hidden, ffn), weight(hidden, ffn), weight(ffn, hidden)
    # The RoPE tables: cos / sin of every position's angles (the reference uses the angles).
    angle = np.arange(seq)[:, None] * 10000.0 ** (-2.0 * np.arange(32) / 64)
    y = prog(
        X=x, NormAttn=norm_attn, NormFfn=norm_ffn, Wq=wq, Wk=wk, Wv=wv, Wo=wo, Wgate=wgate,
        Wup=wup, Wdown=wdown, RopeCos=np.cos(angle).astype(np.float32),
        RopeSin=np.sin(angle).astype(np.float32),
    )["Y"]
    f = lambda a: a.astype(np.float64)  # noqa: E731
    x64 = f(x)
    xn = rmsnorm(x64, f(norm_attn))
    q, k, v = xn @ f(wq), xn @ f(wk), xn @ f(wv)
    positions = np.arange(seq)
    attn = np.zeros((seq, hidden))
    for h in range(heads):
        cols = slice(h * 64, (h + 1) * 64)
        qh, kh = rope(q[:, cols], positions), rope(k[:, cols], positions)
        s = qh @ kh.T / 8.0
        s[np.triu_indices(seq, 1)] = -np.inf  # token t attends tokens 0 ..= t
        p = np.exp(s - s.max(axis=1, keepdims=True))
        attn[:, cols] = (p / p.sum(axis=1, keepdims=True)) @ v[:, cols]
    h1 = x64 + attn @ f(wo)
    xn2 = rmsnorm(h1, f(norm_ffn))
    gate, up = xn2 @ f(wgate), xn2 @ f(wup)
    want = h1 + (gate / (1 + np.exp(-gate)) * up) @ f(wdown)
    np.testing.assert_allclose(y, want, rtol=2e-3, atol=2e-3)
    print("llama_block: ok")


if __name__ == "__main__":
    check()
