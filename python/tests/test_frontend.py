"""Tests of workloads and schedules written in Python: every example under python/examples/
gives the canonical text of its `.wsp` twin under examples/, runs give numpy's numbers, and a
user's mistake is reported at the user's Python file and line."""

import importlib.util
import pathlib

import numpy as np
import pytest

import pto_wsp

ROOT = pathlib.Path(__file__).resolve().parents[2]
PY_EXAMPLES = sorted((ROOT / "python" / "examples").rglob("*.py"))


def load(path):
    """Imports a Python example by path (they are scripts, not a package)."""
    rel = path.relative_to(ROOT / "python" / "examples").with_suffix("")
    spec = importlib.util.spec_from_file_location("example_" + "_".join(rel.parts), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def without_prose(text):
    """The text without its prose comments (the Python examples carry the prose as docstrings),
    its `//@ alias` and `//@ bind` lines sorted (their order means nothing; the Python front end
    writes them in declaration order) ahead of the body."""
    lines = text.split("\n")
    directives = sorted(line for line in lines if line.startswith("//@"))
    body = [line for line in lines if not line.startswith("//")]
    while body and body[0] == "":
        body.pop(0)
    return "\n".join(directives + [""] + body)


def test_the_main_examples_are_written_in_python():
    names = {p.stem for p in PY_EXAMPLES}
    assert {"llm_decode", "softmax_3pass", "gemm"} <= names


@pytest.mark.parametrize("path", PY_EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "python" / "examples")))
def test_python_example_prints_the_text_of_its_wsp_twin(path):
    twin = ROOT / "examples" / path.relative_to(ROOT / "python" / "examples").with_suffix(".wsp")
    expected = without_prose(pto_wsp.Module.from_file(str(twin)).to_text())
    built = load(path).module
    assert isinstance(built, pto_wsp.BuiltModule)
    assert without_prose(built.to_text()) == expected


def softmax_reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_softmax_3pass_in_python_matches_numpy():
    ex = load(ROOT / "python" / "examples" / "softmax_3pass.py")
    rows, ntiles = 32, 3
    program = ex.module.compile(threads=2, bind={"rows": rows, "ntiles": ntiles})
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, ntiles * 1024)).astype(np.float32) * 4
    y = np.zeros_like(x)
    stats = program.execute(X=x, Y=y)
    np.testing.assert_allclose(y, softmax_reference(x.astype(np.float64)), rtol=1e-4, atol=1e-7)
    blocks = rows // 16
    assert stats["num_tasks"] == blocks * (ntiles + 1 + 3 * ntiles + 1 + ntiles)


def test_gemm_in_python_matches_numpy():
    ex = load(ROOT / "python" / "examples" / "gemm.py")
    m, n, k = 256, 384, 256
    program = ex.module.compile(threads=2, bind={"M": m, "N": n, "K": k})
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), 3.0, dtype=np.float32)
    program.execute(A=a, B=b, C=c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)


# ----- a user's mistakes, reported at the user's file and line -------------------------------

PRELUDE = """\
from pto_wsp import *

X = Tensor(f32[128, 64])
Y = Tensor(f32[128, 64])
I = Dense[4]


@kernel(pool="vector", alias="relu")
def act(x: In[f32[32, 64]], y: Out[f32[32, 64]]): ...
"""


def run_user_file(tmp_path, body):
    """Writes PRELUDE + body as a user's script and runs it; returns (path, exception)."""
    path = tmp_path / "user_model.py"
    path.write_text(PRELUDE + body)
    spec = importlib.util.spec_from_file_location("user_model", path)
    mod = importlib.util.module_from_spec(spec)
    with pytest.raises(pto_wsp.PtoWspError) as info:
        spec.loader.exec_module(mod)
    return path, info.value


def line_of(path, needle):
    return next(i for i, line in enumerate(path.read_text().split("\n"), 1) if needle in line)


def test_a_loop_variable_used_outside_its_loop_names_the_users_line(tmp_path):
    path, e = run_user_file(
        tmp_path,
        """
@workload
def w():
    for i in P(I):
        act(X[i * 32:(i + 1) * 32, :], Y[i * 32:(i + 1) * 32, :])
    act(X[i * 32:(i + 1) * 32, :], Y[0:32, :])   # the mistake


module = w.module()
""",
    )
    assert isinstance(e, pto_wsp.ValidationError)
    assert f"{path}:{line_of(path, '# the mistake')}" in str(e)
    assert "loop variable `i` is used outside its loop" in str(e)
    assert f"{path}:{line_of(path, 'for i in P(I)')}" in str(e)


def test_a_region_out_of_bounds_names_the_users_line(tmp_path):
    path, e = run_user_file(
        tmp_path,
        """
@workload
def w():
    for i in P(I):
        act(X[i * 32:(i + 1) * 32, :], Y[100:132, :])   # the mistake


module = w.module()
""",
    )
    assert isinstance(e, pto_wsp.ValidationError)
    assert f"{path}:{line_of(path, '# the mistake')}" in str(e)
    assert "out" in str(e) and "`Y`" in str(e)


def test_an_unknown_kernel_names_the_users_line(tmp_path):
    path, e = run_user_file(
        tmp_path,
        """
@kernel(pool="vector")
def no_such_kernel(x: In[f32[32, 64]], y: Out[f32[32, 64]]): ...


@workload
def w():
    for i in P(I):
        no_such_kernel(X[i * 32:(i + 1) * 32, :], Y[i * 32:(i + 1) * 32, :])


program = w.module().compile(threads=1)
""",
    )
    assert isinstance(e, pto_wsp.CompileError)
    assert "no_such_kernel" in str(e)
    # The kernel's declaration: the line of its decorator (where Python applies it).
    decorator = line_of(path, "def no_such_kernel") - 1
    assert f"{path}:{decorator}" in str(e)


# ----- expand, execute_async / synchronize, trace ------------------------------------------------


def test_expand_lists_the_tasks_of_the_python_gemm():
    ex = load(ROOT / "python" / "examples" / "gemm.py")
    m, n, k = 256, 384, 512
    tasks = ex.module.expand(bind={"M": m, "N": n, "K": k})
    # Independently: per output tile (i, j) in row-major order, a zero task, then K/128 steps.
    expected = []
    for i in range(m // 128):
        for j in range(n // 128):
            expected.append(("zero_tile", [("out", "C", [i * 128, j * 128])]))
            for kk in range(k // 128):
                expected.append(
                    (
                        "gemm_tile",
                        [
                            ("in", "A", [i * 128, kk * 128]),
                            ("in", "B", [kk * 128, j * 128]),
                            ("inout", "C", [i * 128, j * 128]),
                        ],
                    )
                )
    got = [
        (t["kernel"], [(r["access"], r["tensor"], r["start"]) for r in t["regions"]])
        for t in tasks
    ]
    assert got == expected
    assert all(r["size"] == [128, 128] for t in tasks for r in t["regions"])
    assert tasks[0]["params"] == {"value": 0.0}
    # dispatch affinity(i * (N / 128) + j) over 24 executors
    assert [t["executor"] for t in tasks if t["kernel"] == "zero_tile"] == [
        (i * (n // 128) + j) % 24 for i in range(m // 128) for j in range(n // 128)
    ]


def test_execute_async_then_synchronize_gives_numpys_numbers():
    ex = load(ROOT / "python" / "examples" / "rmsnorm.py")
    tokens, hidden = 64, 256
    program = ex.module.compile(threads=2, bind={"tokens": tokens, "hidden": hidden})
    rng = np.random.default_rng(5)
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    w = rng.standard_normal(hidden).astype(np.float32)
    y = np.zeros_like(x)
    assert program.execute_async(X=x, W=w, Y=y) is None
    stats = program.synchronize()
    assert program.is_complete()
    x64 = x.astype(np.float64)
    reference = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, reference, rtol=1e-4, atol=1e-5)
    assert stats["num_tasks"] == tokens // 16
    with pytest.raises(pto_wsp.RunError, match="no run in progress"):
        program.synchronize()


def test_a_failing_async_run_raises_at_synchronize():
    ex = load(ROOT / "python" / "examples" / "datadep" / "early_exit.py")
    program = ex.module.compile(threads=2)
    # An array that does not fit its tensor is refused at once, before any run starts.
    with pytest.raises(pto_wsp.RunError, match="V"):
        program.execute_async(V=np.zeros((16, 4), dtype=np.float64))
    with pytest.raises(pto_wsp.RunError, match="no run in progress"):
        program.synchronize()


def test_trace_writes_one_chrome_event_per_task(tmp_path):
    import json

    ex = load(ROOT / "python" / "examples" / "softmax_3pass.py")
    program = ex.module.compile(threads=2, bind={"rows": 16, "ntiles": 2}, trace=True)
    x = np.ones((16, 2048), dtype=np.float32)
    stats = program.execute(X=x)
    path = tmp_path / "trace.json"
    program.write_trace(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(events) == stats["num_tasks"] == 2 + 1 + 6 + 1 + 2
    names = sorted(e["name"] for e in events)
    assert names == sorted(["row_max"] * 3 + ["sub_col", "exp", "row_sum"] * 2 + ["row_sum"] + ["div_col"] * 2)


def test_trace_needs_a_traced_compile(tmp_path):
    ex = load(ROOT / "python" / "examples" / "rmsnorm.py")
    program = ex.module.compile(threads=1, bind={"tokens": 16, "hidden": 64})
    program.execute()
    with pytest.raises(pto_wsp.RunError, match="trace=True"):
        program.write_trace(str(tmp_path / "t.json"))


def test_tile_instruction_kernels_written_in_python_match_numpy():
    ex = load(ROOT / "python" / "examples" / "kernels" / "softmax.py")
    program = ex.module.compile(threads=2)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y, z = np.zeros_like(x), np.zeros_like(x)
    program.execute(X=x, Y=y, Z=z)
    reference = softmax_reference(x.astype(np.float64) * 0.125)
    np.testing.assert_allclose(y, reference, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(z, reference, rtol=1e-4, atol=1e-6)

    ex = load(ROOT / "python" / "examples" / "kernels" / "rmsnorm_gemm.py")
    program = ex.module.compile(threads=2)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal(64).astype(np.float32)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    y, y2 = np.zeros_like(x), np.zeros_like(x)
    c, c2 = np.ones((32, 32), np.float32), np.ones((32, 32), np.float32)
    program.execute(X=x, W=w, Y=y, Y2=y2, A=a, B=b, C=c, C2=c2)
    x64 = x.astype(np.float64)
    norm = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, norm, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y2, norm, rtol=1e-4, atol=1e-5)
    gemm = 1.0 + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, gemm, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(c2, gemm, rtol=1e-4, atol=1e-4)


def rmsnorm_reference(x, w):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


def rope_reference(x, pos, theta=10000.0):
    """Rotate-half RoPE of the rows of x (..., d), all at position `pos`."""
    d = x.shape[-1]
    half = d // 2
    freq = theta ** (-2.0 * np.arange(half) / d)
    c, s = np.cos(pos * freq), np.sin(pos * freq)
    lo, hi = x[..., :half], x[..., half:]
    return np.concatenate([lo * c - hi * s, lo * s + hi * c], axis=-1)


def test_llm_decode_in_python_matches_numpy():
    """The main job's decode step, built in Python, against a float64 numpy decode step."""
    ex = load(ROOT / "python" / "examples" / "llm_decode.py")
    nreq, g, ffn, max_chunks = 2, 1, 256, 2
    kv_lens = np.array([300, 5], dtype=np.int32)
    hidden, qh = 512 * g, 4 * g
    program = ex.module.compile(
        threads=2,
        bind={"nreq": nreq, "kv_heads": g, "ffn": ffn, "layers": 1, "max_chunks": max_chunks},
    )
    rng = np.random.default_rng(7)

    def weight(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[-2])).astype(np.float16)

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

    program.execute(
        kv_lens=kv_lens, X=x, NormAttn=norm_attn, NormFfn=norm_ffn, Wq=wq, Wk=wk, Wv=wv, Wo=wo,
        Wgate=wgate, Wup=wup, Wdown=wdown, Kc=kc, Vc=vc,
    )

    f = lambda a: a.astype(np.float64)  # noqa: E731
    x0 = f(x[0])
    xn = rmsnorm_reference(x0, f(norm_attn[0]))
    q = (xn @ f(wq[0])).reshape(nreq, qh, 128)
    k_new = (xn @ f(wk[0])).reshape(nreq, g, 128)
    v_new = (xn @ f(wv[0])).reshape(nreq, g, 128)
    attn = np.zeros((nreq, qh, 128))
    for r in range(nreq):
        n = int(kv_lens[r])
        q[r] = rope_reference(q[r], n)
        k_new[r] = rope_reference(k_new[r], n)
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
    xn2 = rmsnorm_reference(h1, f(norm_ffn[0]))
    gate, up = xn2 @ f(wgate[0]), xn2 @ f(wup[0])
    act = gate / (1 + np.exp(-gate)) * up
    out = h1 + act @ f(wdown[0])

    np.testing.assert_allclose(kc, kc_ref, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(x[1], out, rtol=2e-3, atol=2e-3)
