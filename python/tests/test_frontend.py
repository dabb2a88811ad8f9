"""Tests of workloads and schedules written in Python: every example under python/examples/
gives the canonical text of its `.wsp` twin under examples/, runs give numpy's numbers, and a
user's mistake is reported at the user's Python file and line."""

import importlib.util
import pathlib
import re

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
    if not twin.exists():
        pytest.skip(f"skipped: {path.name} has no .wsp twin")
    expected = without_prose(pto_wsp.Module.from_file(str(twin)).to_text())
    built = load(path).module
    assert isinstance(built, pto_wsp.BuiltModule)
    assert without_prose(built.to_text()) == expected


# ----- a user's mistakes, reported at the user's file and line -------------------------------

PRELUDE = """\
from pto_wsp import *

X = Tensor(f32[128, 64])
Y = Tensor(f32[128, 64])
I = Dense[4]


@kernel(pool="vector", alias="relu")
def act(x: In[f32, 32, 64], y: Out[f32, 32, 64]): ...
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
def no_such_kernel(x: In[f32, 32, 64], y: Out[f32, 32, 64]): ...


@workload
def w():
    for i in P(I):
        no_such_kernel(X[i * 32:(i + 1) * 32, :], Y[i * 32:(i + 1) * 32, :])


program = w.module().compile(threads=1)
""",
    )
    assert isinstance(e, pto_wsp.CompileError)
    assert "no_such_kernel" in str(e)
    # The kernel's declaration: where Python applies its decorator (the `@kernel` line, or the
    # `def` line on some Python versions).
    define = line_of(path, "def no_such_kernel")
    assert e.file == str(path) and e.line in (define - 1, define)
    # Said in Python terms: what to write in the `@kernel` function, never "register it" or a
    # byte offset.
    assert '@kernel(alias="BUILTIN")' in e.message and "tile operations" in e.message
    assert "register" not in str(e) and "byte" not in str(e)


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
    with pytest.raises(RuntimeError, match="no run in progress"):
        program.synchronize()


def test_a_failing_async_run_raises_at_synchronize():
    ex = load(ROOT / "python" / "examples" / "datadep" / "early_exit.py")
    program = ex.module.compile(threads=2)
    # An array that does not fit its tensor is refused at once (a TypeError: its element type),
    # before any run starts.
    with pytest.raises(TypeError, match="V"):
        program.execute_async(V=np.zeros((16, 4), dtype=np.float64))
    with pytest.raises(RuntimeError, match="no run in progress"):
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


# ----- every construct, against text written by hand ----------------------------------------------

CONSTRUCTS_WSP = """
symbol n: i64;
symbol big: u64;
symbol flag: bool;
slot s: i64;
tensor lens: i32[n];
tensor ptr: i32[n + 1];
tensor idx: i32[n * 4];
tensor X: f32[n, 64];
tensor Y: f32[n, 64];
axis D = dense(4);
axis DD = dense_dyn(n);
axis RG = ragged(n, lens);
axis RC = ragged(n, lens, (lens + 15) / 16);
axis SP = sparse(n, ptr, idx);
kernel k(in x: f32[1, 64], out y: f32[1, 64], a: i64) @vector;
kernel k2(in x: f32[1, 64], out y: f32[1, 64], a: i64) @vector;
kernel kt(in x: f32[1, 64], out y: f32[1, 64], a: i64) tiers { a < 8 => k, else => k2 };
kernel c(in x: f32[1, 64], out y: f32[1, 64], a: i64);
workload helper(m: i64) {
    task k(X[m, 0 +: 64], Y[m, 0 +: 64], m);
}
workload main() {
    parallel_for i in DD {
        combine {
            task k(X[i, 0 +: 64], Y[i, 0 +: 64], i % 4);
            task kt(X[i, 0 +: 64], Y[i, 0 +: 64], max(i, 3));
        }
    }
    sequential {
        for_each j in D {
            call helper(j);
        }
        parallel_for r, p in RG {
            task c(X[r, 0 +: 64], Y[r, 0 +: 64], p);
        }
        parallel_for r, q in RC {
            task c(X[r, 0 +: 64], Y[r, 0 +: 64], flag ? q : -q);
        }
        select r, e in SP {
            task c(X[r, 0 +: 64], Y[e, 0 +: 64], e);
        }
    }
    if flag && big > 7u || !flag {
        set s = 0;
    }
    while s < n max 100 {
        load s = lens[s];
        break if s == 3;
    }
}
schedule for main {
    executors 4;
    dispatch threshold(n) { below 8: round_robin(2), else: hash(n * 2) };
    streams 2;
    stream_by n % 2;
    timing batched(16);
    task_graph {
        deps explicit;
        ready priority(0 - n);
        start threshold(32);
        trace cycles(n + 1);
        pools by_exec_unit;
    }
    task_window 64 abort;
    pipeline_depth 3 per_stream;
    batch_deps 8;
    dispatch_threshold(n) { below 4: vector, else: cube };
}
"""


def test_every_construct_gives_the_text_written_by_hand():
    from pto_wsp import (
        Dense, DenseDyn, Deps, DispatchPolicy, In, Out, Pools, P, Ragged, ReadyPolicy, Slot,
        Sparse, StartPolicy, Symbol, Tensor, TimingPolicy, TracePolicy, bool_, call, combine,
        f32, i32, i64, kernel, max_, sequential, u64, u64_t, where, workload,
    )

    n = Symbol()
    big = Symbol(u64_t)
    flag = Symbol(bool_)
    s = Slot()
    lens = Tensor(i32[n])
    ptr = Tensor(i32[n + 1])
    idx = Tensor(i32[n * 4])
    X = Tensor(f32[n, 64])
    Y = Tensor(f32[n, 64])
    D = Dense[4]
    DD = DenseDyn(n)
    RG = Ragged(n, lens)
    RC = Ragged(n, lens, length=lambda m: (m + 15) // 16)
    SP = Sparse(n, ptr, idx)

    @kernel(pool="vector")
    def k(x: In[f32, 1, 64], y: Out[f32, 1, 64], a: i64): ...

    @kernel(pool="vector")
    def k2(x: In[f32, 1, 64], y: Out[f32, 1, 64], a: i64): ...

    @kernel(tiers=[(lambda a: a < 8, k)], otherwise=k2)
    def kt(x: In[f32, 1, 64], y: Out[f32, 1, 64], a: i64): ...

    @kernel(name="c")
    def c_kernel(x: In[f32, 1, 64], y: Out[f32, 1, 64], a: i64): ...

    @workload
    def helper(m: i64):
        k(X[m, :], Y[m, :], m)

    @workload
    def main():
        for i in P(DD):
            with combine():
                k(X[i, :], Y[i, :], i % 4)
                kt(X[i, :], Y[i, :], max_(i, 3))
        with sequential():
            for j in P.seq(D):
                call(helper, j)
            for r, p in P(RG):
                c_kernel(X[r, :], Y[r, :], p)
            for r, q in P.grid(RC):
                c_kernel(X[r, :], Y[r, :], where(flag, q, -q))
            for r, e in P.sel(SP):
                c_kernel(X[r, :], Y[e, :], e)
        with P.when(flag & (big > u64(7)) | ~flag):
            s.set(0)
        with P.while_(s < n, max=100):
            s.load(lens[s])
            P.break_if(s == 3)

    built = (
        main.executors(4)
        .dispatch(
            DispatchPolicy.threshold(
                n, [(8, DispatchPolicy.round_robin(2))], DispatchPolicy.hash(lambda: n * 2)
            )
        )
        .streams(2)
        .stream_by(n % 2)
        .timing(TimingPolicy.batched(16))
        .task_graph(
            deps=Deps.explicit(),
            ready=ReadyPolicy.priority(lambda: 0 - n),
            start=StartPolicy.threshold(32),
            trace=TracePolicy.cycles(lambda: n + 1),
            pools=Pools.by_exec_unit(),
        )
        .task_window(64, "abort")
        .pipeline_depth(3, "per_stream")
        .batch_deps(8)
        .dispatch_threshold(n, [(4, "vector")], "cube")
        .module()
    )
    assert built.to_text() == pto_wsp.Module.from_text(CONSTRUCTS_WSP).to_text()
    assert built.entry == "main"


def test_a_tensor_declared_from_a_numpy_array():
    from pto_wsp import Dense, In, Out, P, Tensor, f32, kernel, workload

    a = np.zeros((8, 16), dtype=np.float32)
    A = Tensor.like(a)
    B = Tensor.like(a)
    I = Dense[8]  # noqa: E741

    @kernel(alias="relu")
    def act(x: In[f32, 1, 16], y: Out[f32, 1, 16]): ...

    @workload
    def w():
        for i in P(I):
            act(A[i, :], B[i, :])

    built = w.module()
    assert "tensor A: f32[8, 16];" in built.to_text()
    a[:] = np.arange(-64, 64, dtype=np.float32).reshape(8, 16)
    b = np.zeros_like(a)
    built.compile(threads=1).execute(A=a, B=b)
    np.testing.assert_array_equal(b, np.maximum(a, 0))


# ----- more of a user's mistakes ---------------------------------------------------------------------


def test_a_region_out_of_bounds_at_run_time_names_the_users_line(tmp_path):
    path = tmp_path / "user_run.py"
    path.write_text(
        PRELUDE
        + """
@workload
def w():
    for i in P(I):
        act(X[i * 40:i * 40 + 32, :], Y[i * 32:(i + 1) * 32, :])   # the mistake (i = 3: 120 + 32 > 128)


program = w.module().compile(threads=1)
"""
    )
    spec = importlib.util.spec_from_file_location("user_run", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(pto_wsp.RunError) as info:
        mod.program.execute()
    assert "out of bounds" in str(info.value)
    assert f"{path}:{line_of(path, '# the mistake')}" in str(info.value)


def test_a_value_that_is_no_expression_names_the_users_line(tmp_path):
    path, e = run_user_file(
        tmp_path,
        """
@workload
def w():
    for i in P(I):
        act(X[i * 32:(i + 1) * 32, :], Y[i * 32:(i + 1) * 32, 0.5])   # the mistake


module = w.module()
""",
    )
    assert isinstance(e, pto_wsp.ValidationError)
    assert f"{path}:{line_of(path, '# the mistake')}" in str(e)
    assert "region of `Y`" in str(e) and "0.5" in str(e)


def test_python_truth_of_an_expression_points_at_p_when():
    i = pto_wsp.Symbol(name="i")
    with pytest.raises(TypeError, match="P.when"):
        if i < 3:
            pass


TENSOR = re.compile(r"^tensor (\w+): (\w+)\[([^\]]*)\];", re.M)
NUMPY = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64}


@pytest.mark.parametrize(
    "name, bind",
    [("kernels/cycles_golden", {}), ("kernels/every_instruction", {}), ("llama7b_layer", {"seq": 32})],
)
def test_python_example_computes_the_numbers_of_its_wsp_twin(name, bind):
    """The examples without a numpy reference of their own: the Python module, run on the same
    inputs as its `.wsp` twin, writes the same bits into every tensor. (The twins' numbers are
    checked apart: every_instruction and cycles_golden against PTO-ISA's CPU simulation in
    crates/pto-wsp-cli/tests/emit.rs, the LLaMA layer's kernels against f64 references.)"""
    wsp = pto_wsp.Module.from_file(str(ROOT / "examples" / f"{name}.wsp"))
    built = load(ROOT / "python" / "examples" / f"{name}.py").module
    rng = np.random.default_rng(21)
    inputs = {}
    for tname, dtype, dims in TENSOR.findall(wsp.to_text()):
        shape = tuple(int(eval(d, {}, dict(bind))) for d in dims.split(","))
        inputs[tname] = (rng.standard_normal(shape) * 0.5).astype(NUMPY[dtype])
    results = []
    for module in (wsp, built):
        arrays = {k: v.copy() for k, v in inputs.items()}
        module.compile(threads=2, bind=bind).execute(**arrays)
        results.append(arrays)
    assert results[0].keys() == inputs.keys() and len(inputs) > 0
    changed = 0
    for k in inputs:
        np.testing.assert_array_equal(results[1][k].view(np.uint8), results[0][k].view(np.uint8), err_msg=k)
        changed += not np.array_equal(results[0][k].view(np.uint8), inputs[k].view(np.uint8))
    assert changed > 0, "the run wrote no tensor"


# ----- connect: joining a producer's channel to a consumer ------------------------------------------

CONNECTED = """\
from pto_wsp import *

ntiles = Symbol(bind=16)
nbuf = Symbol(bind=4)

Src = Tensor(f16[ntiles * 256, 1024])
Stage = Tensor(f16[nbuf * 256, 1024])
Res = Tensor(f16[nbuf * 256, 1024])
Dst = Tensor(f16[ntiles * 256, 1024])

T = DenseDyn(ntiles)

Tile = f16[256, 1024]


@kernel(pool="vector", alias="copy")
def load_tile(src: In[Tile], dst: Out[Tile]): ...
@kernel(pool="cube", alias="silu")
def compute_tile(x: In[Tile], y: Out[Tile]): ...
@kernel(pool="vector", alias="copy")
def store_tile(src: In[Tile], dst: Out[Tile]): ...


def buf(i):
    return span(i % nbuf * 256, 256)


@pipeline
def stream3():
    loaded = Channel(2)
    computed = Channel(2)

    @process
    def loader():
        for t in P.seq(T):
            load_tile(Src[t * 256:(t + 1) * 256, :], Stage[buf(t), :])
            loaded.send(t)

    @process
    def computer():
        for i in loaded.consume():
            compute_tile(Stage[buf(i), :], Res[buf(i), :])
            computed.send(i)

    @process
    def storer():
        for j in computed.consume():
            store_tile(Res[buf(j), :], Dst[j * 256:(j + 1) * 256, :])

    connect(loader, loaded, computer)
    CONNECT_MORE


schedule = (
    stream3.executors(4)
    .dispatch(DispatchPolicy.work_steal())
    .task_graph(deps=Deps.exact(), ready=ReadyPolicy.work_steal(), start=StartPolicy.immediate(), pools=Pools.by_exec_unit())
)
module = schedule.module()
"""


def load_connected(tmp_path, more='connect(computer, "computed", storer)', name="connected"):
    path = tmp_path / f"{name}.py"
    path.write_text(CONNECTED.replace("CONNECT_MORE", more))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return path, mod


def test_a_pipeline_joined_by_connect_is_the_pipeline_with_channel_lists(tmp_path):
    _, connected = load_connected(tmp_path)
    listed = load(ROOT / "python" / "examples" / "csp_pipeline.py")
    assert connected.module.to_text() == listed.module.to_text()
    # Independently of the text: the producer / consumer lists connect wrote.
    assert "process computer(consumes loaded; produces computed)" in connected.module.to_text()
    # Same numbers, against numpy.
    ntiles, nbuf = 6, 4
    rng = np.random.default_rng(37)
    src = rng.standard_normal((ntiles * 256, 1024)).astype(np.float16)
    results = []
    for m in (connected, listed):
        dst = np.zeros_like(src)
        m.module.compile(threads=2, bind={"ntiles": ntiles, "nbuf": nbuf}).execute(Src=src, Dst=dst)
        results.append(dst)
    x = src.astype(np.float64)
    np.testing.assert_allclose(results[0].astype(np.float64), x / (1 + np.exp(-x)), rtol=2e-3, atol=1e-3)
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize(
    "more, message",
    [
        ("connect(computer, 'computd', storer)", "unknown channel `computd` in pipeline `stream3`"),
        ("connect(computer, Channel(1, name='spare'), storer)", "`computer` is given as the producer of channel `spare` but never sends on it"),
        ("connect(computer, 'computed', loader)", "`loader` is given as the consumer of channel `computed` but never consumes it"),
        ("connect(loader, loaded, computer)", "channel `loaded` is connected twice: its producer is already `loader`"),
        ("connect(storer, computed, computer)", "never sends on it (`computed.send(...)`); `computer` does, so swap them"),
        ("connect(computed, computer, storer)", "the producer must be a `@process`, not channel `computed`"),
        ("connect(computer, 3, storer)", "the channel must be a `Channel` (or its name), not 3"),
    ],
)
def test_a_bad_connect_names_the_users_line(tmp_path, more, message):
    with pytest.raises(pto_wsp.ValidationError) as info:
        load_connected(tmp_path, more, name="bad_connect")
    path = tmp_path / "bad_connect.py"
    assert message in str(info.value)
    # The line of the bad call (the template's CONNECT_MORE line), not the good ones before it.
    line = next(i for i, text in enumerate(CONNECTED.split("\n"), 1) if "CONNECT_MORE" in text)
    assert (info.value.file, info.value.line) == (str(path), line)
    assert info.value.message.startswith("connect: ")
    assert f"--> {path}:{line}:" in str(info.value)


def test_connecting_a_channel_of_another_pipeline_is_an_unknown_channel(tmp_path):
    from pto_wsp import Channel, connect, pipeline, process

    other = {}

    @pipeline
    def first():
        other["ch"] = Channel(1, name="ch")

        @process
        def a():
            other["ch"].send(1)

    first._trace()  # records the channel in `first` (it is not a complete pipeline)

    @pipeline
    def second():
        Channel(1, name="mine")

        @process
        def p():
            pass

        @process
        def q():
            pass

        connect(p, other["ch"], q)

    with pytest.raises(pto_wsp.ValidationError, match=r"unknown channel `ch` in pipeline `second` \(it was created at .*test_frontend.py:\d+"):
        second.module()


def test_connect_outside_a_pipeline_is_refused():
    with pytest.raises(pto_wsp.ValidationError, match="inside the `@pipeline` function"):
        pto_wsp.connect(None, "x", None)
