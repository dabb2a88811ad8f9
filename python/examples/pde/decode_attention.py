"""Variable-length GQA decode attention as two plans (Plan-Descriptor-Execute):
examples/pde/decode_attention.wsp written in Python.

Plan `chunks` walks the space Chunks (request r, KV position c tiled by 512, KV head g): for each
request the generator loads its length from the host metadata `kv_lens`, picks the tier by that
length (`short` up to 2048 tokens, `long` beyond), skips the chunks past the request's end and
emits one descriptor per (request, chunk, KV head). Plan `merge_heads` then combines each query
head's partials over the request's chunks, whose count travels in the user field `nchunks`.
"""

from typing import Any

import numpy as np

import pto_wsp
from pto_wsp import *

nreq = Symbol(bind=4)
max_chunks = Symbol(bind=8)

kv_lens = Tensor(i32[nreq], bind=[1500, 200, 4096, 2100])
Qd = Tensor(f16[nreq, 32, 128])
Kc = Tensor(f16[nreq, 8, max_chunks * 512, 128])
Vc = Tensor(f16[nreq, 8, max_chunks * 512, 128])
Opart = Tensor(f32[nreq, 32, max_chunks, 128])
Mpart = Tensor(f32[nreq, 32, max_chunks])
Lpart = Tensor(f32[nreq, 32, max_chunks])
Od = Tensor(f16[nreq, 32, 128])


@kernel(pool="cube", alias="attn_decode_chunk")
def decode_chunk(
    q: In[f16, 4, 128], k: In[f16, 512, 128], v: In[f16, 512, 128], o: Out[f32, 4, 1, 128],
    m: Out[f32, 4, 1], l: Out[f32, 4, 1], chunk_start: i64, chunk_end: i64,
): ...
@kernel(pool="cube", alias="attn_decode_chunk")
def decode_chunk_long(
    q: In[f16, 4, 128], k: In[f16, 512, 128], v: In[f16, 512, 128], o: Out[f32, 4, 1, 128],
    m: Out[f32, 4, 1], l: Out[f32, 4, 1], chunk_start: i64, chunk_end: i64,
): ...
@kernel(pool="vector", alias="attn_merge")
def merge(o: In[f32, ANY, 128], m: In[f32, ANY], l: In[f32, ANY], out_row: Out[f16, 128]): ...


Chunks = Space(r=(0, nreq), c=(0, DYNAMIC), g=(0, 8), tile={"c": 512}, constraints=[max_chunks >= 1])
Heads = Space(q=(0, nreq), h=(0, 32))
ByLength = Tiers(short=2048, long=DEFAULT)
Merge = Tiers(all=DEFAULT)


def chunk_call(kernel: Kernel) -> Any:
    """The call a chunk descriptor runs: its request, KV head and chunk's rows."""
    return lambda d: kernel(
        Qd[d.r, span(d.g * 4, 4), :],
        Kc[d.r, d.g, span(d.c * 512, 512), :],
        Vc[d.r, d.g, span(d.c * 512, 512), :],
        Opart[d.r, span(d.g * 4, 4), d.c, :],
        Mpart[d.r, span(d.g * 4, 4), d.c],
        Lpart[d.r, span(d.g * 4, 4), d.c],
        d.start,
        d.end,
    )


@plan(
    Chunks,
    ByLength,
    bind_end={"c": max_chunks * 512},
    kernels={"short": chunk_call(decode_chunk), "long": chunk_call(decode_chunk_long)},
)
def chunks() -> None:
    for i in Chunks.r:
        kv = load(kv_lens[i])
        t = select_tier(ByLength, kv)
        for j, lo, hi in Chunks.c.bounds():
            with P.when(lo >= kv):
                P.continue_()
            for k in Chunks.g:
                emit(tier=t, r=i, c=j, g=k, start=lo, end=min_(hi, kv))


@plan(
    Heads,
    Merge,
    fields=["nchunks"],
    kernels={
        "all": lambda d: merge(
            Opart[d.q, d.h, span(0, d.nchunks), :], Mpart[d.q, d.h, span(0, d.nchunks)],
            Lpart[d.q, d.h, span(0, d.nchunks)], Od[d.q, d.h, :],
        )
    },
)
def merge_heads() -> None:
    for i in Heads.q:
        kv = load(kv_lens[i])
        for k in Heads.h:
            emit(tier=0, q=i, h=k, nchunks=(kv + 511) // 512)


module = build([chunks, merge_heads])


def check(threads: int = 2) -> None:
    """Three requests of 2500, 1 and 20 tokens against numpy attention."""
    lens = np.array([2500, 1, 20], dtype=np.int32)
    prog = pto_wsp.compile(module, threads=threads, bind={"nreq": 3, "max_chunks": 5})
    rng = np.random.default_rng(0)
    qd = rng.standard_normal((3, 32, 128)).astype(np.float16)
    kc = rng.standard_normal((3, 8, 5 * 512, 128)).astype(np.float16)
    vc = rng.standard_normal((3, 8, 5 * 512, 128)).astype(np.float16)
    od = prog(kv_lens=lens, Qd=qd, Kc=kc, Vc=vc)["Od"]
    for r, n in enumerate(lens):
        for h in range(32):
            keys, values = kc[r, h // 4, :n].astype(np.float64), vc[r, h // 4, :n].astype(np.float64)
            s = keys @ qd[r, h].astype(np.float64) / np.sqrt(128)
            p = np.exp(s - s.max())
            np.testing.assert_allclose(od[r, h].astype(np.float64), p @ values / p.sum(), rtol=1e-2, atol=2e-3)
    descriptors = [p["descriptors"] for p in prog.stats["plans"]]
    assert descriptors == [(5 + 1 + 1) * 8, 3 * 32], descriptors
    print(f"pde/decode_attention: ok ({descriptors[0]} chunk and {descriptors[1]} merge descriptors)")


if __name__ == "__main__":
    check()
