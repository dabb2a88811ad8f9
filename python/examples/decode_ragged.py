"""Split-KV decode attention over a ragged axis (each request has its own number of KV chunks),
then a merge per request and head: examples/decode_ragged.wsp in Python."""

import numpy as np

import pto_wsp
from pto_wsp import *

nreq = Symbol(bind=4)
max_chunks = Symbol(bind=8)

len_ = Slot(name="len")
nc = Slot()

kv_chunks = Tensor(i32[nreq], bind=[3, 1, 8, 5])
kv_lens = Tensor(i32[nreq], bind=[1500, 200, 4096, 2100])
Qd = Tensor(f16[nreq, 32, 128])
Kc = Tensor(f16[nreq, 8, max_chunks * 512, 128])
Vc = Tensor(f16[nreq, 8, max_chunks * 512, 128])
Opart = Tensor(f32[nreq, 32, max_chunks, 128])
Mpart = Tensor(f32[nreq, 32, max_chunks])
Lpart = Tensor(f32[nreq, 32, max_chunks])
Od = Tensor(f16[nreq, 32, 128])

RC = Ragged(nreq, kv_chunks)
R = DenseDyn(nreq)
G = Dense(8)
H = Dense(32)


@kernel(pool="cube", alias="attn_decode_chunk")
def decode_chunk(
    q: In[f16, 4, 128],
    k: In[f16, 512, 128],
    v: In[f16, 512, 128],
    o: Out[f32, 4, 1, 128],
    m: Out[f32, 4, 1],
    l: Out[f32, 4, 1],
    chunk_start: i64,
    chunk_end: i64,
): ...
@kernel(pool="vector", alias="attn_merge")
def merge(o: In[f32, ANY, 128], m: In[f32, ANY], l: In[f32, ANY], out_row: Out[f16, 128]): ...


@workload
def decode():
    for r, c in P(RC):
        len_.load(kv_lens[r])
        for g in P(G):
            group = span(g * 4, 4)
            chunk = span(c * 512, 512)
            decode_chunk(
                Qd[r, group, :], Kc[r, g, chunk, :], Vc[r, g, chunk, :],
                Opart[r, group, c, :], Mpart[r, group, c], Lpart[r, group, c],
                c * 512, min_((c + 1) * 512, len_),
            )
    for r in P(R):
        nc.load(kv_chunks[r])
        for h in P(H):
            merge(Opart[r, h, :nc, :], Mpart[r, h, :nc], Lpart[r, h, :nc], Od[r, h, :])


schedule = (
    decode.executors(8)
    .dispatch(DispatchPolicy.affinity(lambda r: r))
    .task_graph(deps=Deps.overlap(), ready=ReadyPolicy.work_steal(), start=StartPolicy.immediate(), pools=Pools.by_exec_unit())
)
module = schedule.module()


def check(threads: int = 2) -> None:
    """Runs decode attention for two requests of 700 and 100 tokens against numpy."""
    lens = np.array([700, 100], dtype=np.int32)
    prog = pto_wsp.compile(module, threads=threads, bind={"nreq": 2, "max_chunks": 2})
    rng = np.random.default_rng(9)
    qd = rng.standard_normal((2, 32, 128)).astype(np.float16)
    kc = rng.standard_normal((2, 8, 2 * 512, 128)).astype(np.float16)
    vc = rng.standard_normal((2, 8, 2 * 512, 128)).astype(np.float16)
    od = prog(kv_chunks=(lens + 511) // 512, kv_lens=lens, Qd=qd, Kc=kc, Vc=vc)["Od"]
    for r in range(2):
        n = int(lens[r])
        for h in range(32):
            keys, values = kc[r, h // 4, :n].astype(np.float64), vc[r, h // 4, :n].astype(np.float64)
            s = keys @ qd[r, h].astype(np.float64) / np.sqrt(128)
            p = np.exp(s - s.max())
            np.testing.assert_allclose(od[r, h].astype(np.float64), p @ values / p.sum(), rtol=1e-2, atol=2e-3)
    print("decode_ragged: ok")


if __name__ == "__main__":
    check()
