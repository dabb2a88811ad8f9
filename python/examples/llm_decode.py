"""One decode step of a LLaMA-style model for a batch of requests of different lengths:
examples/llm_decode.wsp (the main job of `pto-wsp run`) written in Python."""

from typing import Any

import numpy as np

import pto_wsp
from pto_wsp import *

nreq = Symbol(bind=8)
kv_heads = Symbol(bind=8)
ffn = Symbol(bind=14336)
layers = Symbol(bind=1)
max_chunks = Symbol(bind=16)

len_ = Slot(name="len")
nc = Slot()

hidden = kv_heads * 512
kv_lens = Tensor(i32[nreq], bind=[3100, 517, 1900, 4000, 260, 2750, 1200, 3500])
X = Tensor(f32[layers + 1, nreq, hidden])
NormAttn = Tensor(f32[layers, hidden], fill="uniform(0.5, 1.0)")
NormFfn = Tensor(f32[layers, hidden], fill="uniform(0.5, 1.0)")
Wq = Tensor(f16[layers, hidden, hidden], fill="uniform(-0.015625, 0.015625)")
Wk = Tensor(f16[layers, hidden, kv_heads * 128], fill="uniform(-0.015625, 0.015625)")
Wv = Tensor(f16[layers, hidden, kv_heads * 128], fill="uniform(-0.015625, 0.015625)")
Wo = Tensor(f16[layers, hidden, hidden], fill="uniform(-0.015625, 0.015625)")
Wgate = Tensor(f16[layers, hidden, ffn], fill="uniform(-0.015625, 0.015625)")
Wup = Tensor(f16[layers, hidden, ffn], fill="uniform(-0.015625, 0.015625)")
Wdown = Tensor(f16[layers, ffn, hidden], fill="uniform(-0.0078125, 0.0078125)")
RopeCos = Tensor(f32[max_chunks * 256, 64], fill="rope_cos(10000)")
RopeSin = Tensor(f32[max_chunks * 256, 64], fill="rope_sin(10000)")
Kc = Tensor(f16[layers, nreq * kv_heads, max_chunks * 256, 128])
Vc = Tensor(f16[layers, nreq * kv_heads, max_chunks * 256, 128])
Xn = Tensor(f32[nreq, hidden])
Q = Tensor(f32[nreq, kv_heads * 4, 128])
Kn = Tensor(f32[nreq, kv_heads, 128])
Vn = Tensor(f32[nreq, kv_heads, 128])
Opart = Tensor(f32[nreq, kv_heads * 4, max_chunks, 128])
Mpart = Tensor(f32[nreq, kv_heads * 4, max_chunks])
Lpart = Tensor(f32[nreq, kv_heads * 4, max_chunks])
Attn = Tensor(f32[nreq, hidden])
AttnOut = Tensor(f32[nreq, hidden])
H1 = Tensor(f32[nreq, hidden])
Xn2 = Tensor(f32[nreq, hidden])
Gate = Tensor(f32[nreq, ffn])
Up = Tensor(f32[nreq, ffn])
Act = Tensor(f32[nreq, ffn])
Down = Tensor(f32[nreq, hidden])

L = DenseDyn(layers)
R = DenseDyn(nreq)
KVH = DenseDyn(kv_heads)
QH = DenseDyn(kv_heads * 4)
FT = DenseDyn(ffn // 128)
Chunks = DenseDyn(nc)


@kernel(pool="vector")
def rmsnorm(x: In[f32, ANY, ANY], w: In[f32, ANY], y: Out[f32, ANY, ANY]): ...
@kernel(pool="cube", alias="matmul")
def proj(x: In[f32, ANY, ANY], w: In[f16, ANY, 128], y: Out[f32, ANY, 128]): ...
@kernel(pool="vector")
def rope(q: InOut[f32, ANY, 128], k: InOut[f32, ANY, 128], cs: In[f32, 1, 64], sn: In[f32, 1, 64]): ...
@kernel(pool="vector", alias="copy")
def append(x: In[f32, ANY, 128], cache: Out[f16, ANY, 128]): ...
@kernel(pool="cube", alias="attn_decode_chunk")
def decode_chunk(
    q: In[f32, 4, 128],
    k: In[f16, 256, 128],
    v: In[f16, 256, 128],
    o: Out[f32, 4, 1, 128],
    m: Out[f32, 4, 1],
    l: Out[f32, 4, 1],
    chunk_start: i64,
    chunk_end: i64,
): ...
@kernel(pool="vector", alias="attn_merge")
def merge(o: In[f32, ANY, 128], m: In[f32, ANY], l: In[f32, ANY], out_row: Out[f32, 128]): ...
@kernel(pool="vector", alias="add")
def residual_add(a: In[f32, ANY, ANY], b: In[f32, ANY, ANY], y: Out[f32, ANY, ANY]): ...
@kernel(pool="vector")
def swiglu(gate: In[f32, ANY, 128], up: In[f32, ANY, 128], y: Out[f32, ANY, 128]): ...


def cols(j):
    """The 128 columns of head (or tile) `j`."""
    return span(j * 128, 128)


@workload
def decode_step():
    for l in P.seq(L):
        rmsnorm(X[l, :, :], NormAttn[l, :], Xn)
        for h in P(QH):
            proj(Xn, Wq[l, :, cols(h)], Q[:, h, :])
        for g in P(KVH):
            proj(Xn, Wk[l, :, cols(g)], Kn[:, g, :])
            proj(Xn, Wv[l, :, cols(g)], Vn[:, g, :])
        for r in P(R):
            len_.load(kv_lens[r])
            nc.set((len_ + 256) // 256)
            rope(Q[r, :, :], Kn[r, :, :], RopeCos[span(len_, 1), :], RopeSin[span(len_, 1), :])
            heads_of_r = span(r * kv_heads, kv_heads)
            append(Kn[r, :, :], Kc[l, heads_of_r, len_, :])
            append(Vn[r, :, :], Vc[l, heads_of_r, len_, :])
            for c in P(Chunks):
                for g in P(KVH):
                    group = span(g * 4, 4)
                    decode_chunk[r, c, g](
                        q=Q[r, group, :],
                        k=Kc[l, r * kv_heads + g, c * 256:(c + 1) * 256, :],
                        v=Vc[l, r * kv_heads + g, c * 256:(c + 1) * 256, :],
                        o=Opart[r, group, c, :],
                        m=Mpart[r, group, c],
                        l=Lpart[r, group, c],
                        chunk_start=c * 256,
                        chunk_end=min_((c + 1) * 256, len_ + 1),
                    )
            for h in P(QH):
                merge(Opart[r, h, :nc, :], Mpart[r, h, :nc], Lpart[r, h, :nc], Attn[r, cols(h)])
        for j in P(QH):
            proj(Attn, Wo[l, :, cols(j)], AttnOut[:, cols(j)])
        residual_add(X[l, :, :], AttnOut, H1)
        rmsnorm(H1, NormFfn[l, :], Xn2)
        for f in P(FT):
            proj(Xn2, Wgate[l, :, cols(f)], Gate[:, cols(f)])
            proj(Xn2, Wup[l, :, cols(f)], Up[:, cols(f)])
            swiglu(Gate[:, cols(f)], Up[:, cols(f)], Act[:, cols(f)])
        for j in P(QH):
            proj(Act, Wdown[l, :, cols(j)], Down[:, cols(j)])
        residual_add(H1, Down, X[l + 1, :, :])


schedule = (
    decode_step.executors(24)
    .dispatch(DispatchPolicy.work_steal())
    .task_graph(
        deps=Deps.hybrid(),
        ready=ReadyPolicy.work_steal(),
        start=StartPolicy.immediate(),
        pools=Pools.single(),
    )
)
module = schedule.module()


def check(threads: int = 2) -> None:
    """One decode step for two requests (300 and 5 tokens) against a float64 numpy decode step."""
    nreq, g, ffn, max_chunks = 2, 1, 256, 2
    kv_lens = np.array([300, 5], dtype=np.int32)
    hidden, qh = 512 * g, 4 * g
    prog = pto_wsp.compile(
        module, threads=threads,
        bind={"nreq": nreq, "kv_heads": g, "ffn": ffn, "layers": 1, "max_chunks": max_chunks},
    )
    rng = np.random.default_rng(7)

    def weight(*shape: int) -> Any:
        return (rng.standard_normal(shape) / np.sqrt(shape[-2])).astype(np.float16)

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

    x = np.zeros((2, nreq, hidden), np.float32)
    x[0] = rng.standard_normal((nreq, hidden))
    norm_attn = (1 + 0.1 * rng.standard_normal((1, hidden))).astype(np.float32)
    norm_ffn = (1 + 0.1 * rng.standard_normal((1, hidden))).astype(np.float32)
    wq, wk, wv = weight(1, hidden, hidden), weight(1, hidden, g * 128), weight(1, hidden, g * 128)
    wo, wgate, wup = weight(1, hidden, hidden), weight(1, hidden, ffn), weight(1, hidden, ffn)
    wdown = weight(1, ffn, hidden)
    kc = np.zeros((1, nreq * g, max_chunks * 256, 128), np.float16)
    vc = np.zeros_like(kc)
    for r in range(nreq):
        n = kv_lens[r]
        kc[0, r * g : (r + 1) * g, :n] = rng.standard_normal((g, n, 128))
        vc[0, r * g : (r + 1) * g, :n] = rng.standard_normal((g, n, 128))
    kc_ref, vc_ref = kc.astype(np.float64), vc.astype(np.float64)
    # The RoPE tables: cos / sin of every cache position's angles (the reference uses the angles).
    angle = np.arange(max_chunks * 256)[:, None] * 10000.0 ** (-2.0 * np.arange(64) / 128)
    prog(
        kv_lens=kv_lens, X=x, NormAttn=norm_attn, NormFfn=norm_ffn, Wq=wq, Wk=wk, Wv=wv, Wo=wo,
        Wgate=wgate, Wup=wup, Wdown=wdown, Kc=kc, Vc=vc,
        RopeCos=np.cos(angle).astype(np.float32), RopeSin=np.sin(angle).astype(np.float32),
    )
    f = lambda a: a.astype(np.float64)  # noqa: E731
    x0 = f(x[0])
    xn = rmsnorm(x0, f(norm_attn[0]))
    q = (xn @ f(wq[0])).reshape(nreq, qh, 128)
    k_new = (xn @ f(wk[0])).reshape(nreq, g, 128)
    v_new = (xn @ f(wv[0])).reshape(nreq, g, 128)
    attn = np.zeros((nreq, qh, 128))
    for r in range(nreq):
        n = int(kv_lens[r])
        q[r] = rope(q[r], n)
        k_new[r] = rope(k_new[r], n)
        for kv in range(g):
            # The new key and value are appended (as f16) at position n, then attended to.
            kc_ref[0, r * g + kv, n] = k_new[r, kv].astype(np.float16)
            vc_ref[0, r * g + kv, n] = v_new[r, kv].astype(np.float16)
            keys, values = kc_ref[0, r * g + kv, : n + 1], vc_ref[0, r * g + kv, : n + 1]
            for h in range(4 * kv, 4 * kv + 4):
                s = keys @ q[r, h] / np.sqrt(128)
                p = np.exp(s - s.max())
                attn[r, h] = p @ values / p.sum()
    h1 = x0 + attn.reshape(nreq, hidden) @ f(wo[0])
    xn2 = rmsnorm(h1, f(norm_ffn[0]))
    gate, up = xn2 @ f(wgate[0]), xn2 @ f(wup[0])
    out = h1 + (gate / (1 + np.exp(-gate)) * up) @ f(wdown[0])
    np.testing.assert_allclose(kc, kc_ref, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(x[1], out, rtol=2e-3, atol=2e-3)
    print("llm_decode: ok")


if __name__ == "__main__":
    check()
