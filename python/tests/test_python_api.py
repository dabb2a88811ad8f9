"""Python the way ML engineers use it: one test (or more) per promise of docs/PYTHON.md —
install, DLPack and torch, function-style calls, plans and tile kernels written in Python,
Ctrl-C and threads, errors as Python expects them, coverage of outputs, docs and typing."""

import importlib.util
import inspect
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import warnings

import numpy as np
import pytest

import pto_wsp
from pto_wsp import *
from pto_wsp import tile as T
from support import ROOT, fmt_binary


def user_file(tmp_path, body, name="user_model"):
    """Writes `body` as a user's script and imports it; returns (path, module or exception)."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - the test looks at what was raised
        return path, e
    return path, mod


def line_of(path, needle):
    return next(i for i, line in enumerate(path.read_text().split("\n"), 1) if needle in line)


RELU = """
symbol n: i64;
tensor X: f32[n, 64];
tensor Y: f32[n, 64];
axis T = dense_dyn(n / 16);
kernel relu(in x: f32[16, 64], out y: f32[16, 64]) @vector;
workload main() {
    parallel_for t in T {
        task relu(X[t * 16 +: 16, 0 +: 64], Y[t * 16 +: 16, 0 +: 64]);
    }
}
"""

ADD = """
tensor A: f32[64, 32];
tensor B: f32[64, 32];
tensor H: f32[64, 32];
tensor C: f32[64, 32];
axis R = dense(4);
kernel add(in a: f32[16, 32], in b: f32[16, 32], out c: f32[16, 32]) @vector;
kernel relu(in x: f32[16, 32], out y: f32[16, 32]) @vector;
workload main() {
    parallel_for r in R {
        task add(A[r * 16 +: 16, 0 +: 32], B[r * 16 +: 16, 0 +: 32], H[r * 16 +: 16, 0 +: 32]);
        task relu(H[r * 16 +: 16, 0 +: 32], C[r * 16 +: 16, 0 +: 32]);
    }
}
"""


def add_program(**kw):
    return pto_wsp.compile(pto_wsp.Module.from_text(ADD, path="add.wsp"), threads=2, **kw)


def ab():
    rng = np.random.default_rng(1)
    return (rng.standard_normal((64, 32)).astype(np.float32) for _ in range(2))


# ----- install ---------------------------------------------------------------------------------


def test_the_package_is_typed_and_carries_its_extension():
    pkg = pathlib.Path(pto_wsp.__file__).parent
    assert (pkg / "py.typed").exists()
    assert any(p.name.startswith("_pto_wsp") for p in pkg.iterdir()) or len(pto_wsp.__path__) > 1
    assert re.fullmatch(r"\d+\.\d+\.\d+", pto_wsp.__version__)


def test_importing_from_inside_the_source_tree_uses_the_installed_extension():
    """`python -c 'import pto_wsp'` run from `python/` (whose `pto_wsp/` has no extension when the
    package is installed from a wheel) imports, instead of `No module named 'pto_wsp._pto_wsp'`."""
    r = subprocess.run(
        [sys.executable, "-c", f"import pto_wsp; print(pto_wsp.Module.from_text({ADD!r}).tensors)"],
        cwd=ROOT / "python", capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "['A', 'B', 'H', 'C']" in r.stdout


def test_the_docs_state_the_rust_version_and_a_one_command_install():
    text = (ROOT / "docs" / "PYTHON.md").read_text()
    cargo = (ROOT / "Cargo.toml").read_text()
    rust = re.search(r'rust-version = "([\d.]+)"', cargo).group(1)
    assert f"Rust {rust}" in text
    readme = (ROOT / "README.md").read_text()
    assert "pip install --find-links target/wheels pto-wsp" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r'maturin"? build --release', ci) and "--find-links target/wheels pto-wsp" in ci


# ----- DLPack and torch ---------------------------------------------------------------------


class DlpackOnly:
    """A producer that is no numpy array: only `__dlpack__` / `__dlpack_device__` (as JAX's and
    other libraries' arrays are), over a numpy array's memory."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_any_dlpack_producer_is_bound_in_place():
    prog = add_program()
    a, b = ab()
    c = np.full((64, 32), 9.0, np.float32)
    out = prog(A=DlpackOnly(a), B=DlpackOnly(b), out={"C": DlpackOnly(c)})
    # Written through the producer's memory: the caller's array holds the result.
    np.testing.assert_array_equal(c, np.maximum(a + b, 0))
    assert isinstance(out["C"], DlpackOnly)


def test_a_dlpack_tensor_of_the_wrong_type_or_device_is_refused_with_python_errors():
    prog = add_program()
    with pytest.raises(TypeError, match="A=: tensor `A` is declared f32"):
        prog(A=DlpackOnly(np.zeros((64, 32), np.float64)))
    with pytest.raises(ValueError, match="A=: tensor `A` has shape"):
        prog(A=DlpackOnly(np.zeros((64, 16), np.float32)))


def test_jax_arrays_are_inputs():
    jnp = pytest.importorskip("jax.numpy", reason="skipped: jax is not installed")
    prog = add_program()
    a, b = ab()
    c = prog(A=jnp.asarray(a), B=jnp.asarray(b))["C"]
    np.testing.assert_array_equal(c, np.maximum(a + b, 0))


def test_torch_tensors_in_and_out_without_copies():
    torch = pytest.importorskip("torch", reason="skipped: torch is not installed")
    prog = add_program()
    a, b = (torch.randn(64, 32) for _ in range(2))
    out = prog(A=a, B=b)
    assert isinstance(out["C"], torch.Tensor) and out["C"].dtype == torch.float32
    torch.testing.assert_close(out["C"], torch.relu(a + b))
    c = torch.zeros(64, 32)
    prog(A=a, B=b, out={"C": c})
    torch.testing.assert_close(c, torch.relu(a + b))
    # Read-only views of an input and transposed (non-contiguous) inputs are accepted for inputs.
    prog(A=a.t().contiguous().t(), B=b.expand(64, 32))


# ----- function style -----------------------------------------------------------------------


def test_a_program_is_called_like_a_function_and_returns_its_outputs():
    prog = add_program()
    a, b = ab()
    out = prog(A=a, B=b)
    assert list(out) == ["C"] and prog.outputs == ["C"]
    np.testing.assert_array_equal(out["C"], np.maximum(a + b, 0))
    np.testing.assert_array_equal(out.C, out["C"])
    assert sorted(prog.inputs) == ["A", "B"]


def test_out_writes_the_callers_buffer_and_any_tensor_is_returned_by_name():
    prog = add_program()
    a, b = ab()
    c = np.empty((64, 32), np.float32)
    out = prog(A=a, B=b, out={"C": c}, outputs=["H", "C"])
    assert out["C"] is c
    np.testing.assert_array_equal(out["H"], a + b)  # an intermediate, asked for by name
    np.testing.assert_array_equal(c, np.maximum(a + b, 0))
    # A tensor neither given nor returned is readable after the run from the program's memory.
    prog(A=a, B=b)
    np.testing.assert_array_equal(prog.read("H"), a + b)


def test_read_only_arrays_are_accepted_for_tensors_no_task_writes(tmp_path):
    prog = add_program()
    a, b = ab()
    np.save(tmp_path / "a.npy", a)
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r")
    assert not mapped.flags.writeable
    row = np.arange(32, dtype=np.float32)
    broadcast = np.broadcast_to(row, (64, 32))  # read-only, not contiguous: copied once
    c = prog(A=mapped, B=broadcast)["C"]
    np.testing.assert_array_equal(c, np.maximum(a + row, 0))
    frozen = np.zeros((64, 32), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="C=: the array is read-only, but tasks write tensor `C`"):
        prog(A=a, B=b, out={"C": frozen})


def test_compile_takes_a_workload_a_module_or_a_path():
    assert isinstance(pto_wsp.compile(ROOT / "examples" / "kernels" / "softmax.wsp", threads=1), pto_wsp.Program)
    with pytest.raises(TypeError, match="compile takes a Module"):
        pto_wsp.compile(42)
    with pytest.raises(ValueError, match="no tensor `Q`"):
        add_program()(Q=np.zeros(3))


# ----- plans and tile kernels in Python ------------------------------------------------------


def test_plans_written_in_python_are_the_wsp_plans_and_run():
    spec = importlib.util.spec_from_file_location("pde_example", ROOT / "python" / "examples" / "pde" / "decode_attention.py")
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    want = pto_wsp.Module.from_file(ROOT / "examples" / "pde" / "decode_attention.wsp").to_text()
    body = lambda t: "\n".join(l for l in t.split("\n") if not l.startswith("//"))  # noqa: E731
    assert body(ex.module.to_text()).strip() == body(want).strip()
    ex.check()


def test_emit_takes_select_tier_in_place_in_the_text_format():
    text = (ROOT / "examples" / "pde" / "decode_attention.wsp").read_text()
    inline = text.replace("            let t = select_tier(ByLength, kv);\n", "").replace(
        "emit(tier = t,", "emit(tier = select_tier(ByLength, kv),"
    )
    assert inline != text
    m = pto_wsp.Module.from_text(inline)
    assert "emit(tier = select_tier(ByLength, kv), r = i" in m.to_text()
    lens = np.array([2500, 1, 20], np.int32)
    rng = np.random.default_rng(5)
    args = dict(
        kv_lens=lens,
        Qd=rng.standard_normal((3, 32, 128)).astype(np.float16),
        Kc=rng.standard_normal((3, 8, 5 * 512, 128)).astype(np.float16),
        Vc=rng.standard_normal((3, 8, 5 * 512, 128)).astype(np.float16),
    )
    bind = {"nreq": 3, "max_chunks": 5}
    got = pto_wsp.compile(m, threads=2, bind=bind)(**args)["Od"]
    want = pto_wsp.compile(pto_wsp.Module.from_text(text), threads=2, bind=bind)(**args)["Od"]
    np.testing.assert_array_equal(got, want)


def test_a_tile_kernel_in_python_traces_into_the_instructions_of_its_wsp_twin():
    x_t = Tensor(f32[32, 64], name="X")
    y_t = Tensor(f32[32, 64], name="Y")

    @kernel(pool="vector")
    def softmax_tile(x: In[f32, 8, 64], y: Out[f32, 8, 64], scale: f32):
        t = T.load(x)
        t = t * scale
        m = T.row_max(t)
        t = T.exp(t - m)
        l = T.row_sum(t)
        T.store(y, t / l)

    body = [line for line, _ in softmax_tile.body_lines]
    assert body == [
        "tile t: vec f32[8, 64];", "tile m: vec f32[8, 1];", "tile l: vec f32[8, 1];",
        "TLOAD(t, x);", "TMULS(t, t, scale);", "TROWMAX(m, t);", "TROWEXPANDSUB(t, t, m);",
        "TEXP(t, t);", "TROWSUM(l, t);", "TROWEXPANDDIV(t, t, l);", "TSTORE(y, t);",
    ]
    rows = Dense(4, name="rows")

    @workload
    def main():
        for r in P(rows, names=["r"]):
            softmax_tile(x_t[span(r * 8, 8), :], y_t[span(r * 8, 8), :], 0.5)

    x = np.random.default_rng(2).standard_normal((32, 64)).astype(np.float32)
    y = pto_wsp.compile(main, threads=2)(X=x)["Y"]
    e = np.exp(0.5 * x - (0.5 * x).max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_loops_carry_tiles_and_matmuls_accumulate_in_python_tile_kernels():
    @kernel(pool="cube")
    def gemm_rows(a: In[f32, 16, 64], b: In[f32, 64, 16], c: Out[f32, 16, 16], m: Out[f32, 16, 1]):
        acc = T.zeros((16, 16), kind="acc")
        best = T.full((16, 1), -3e38)
        for k in T.range(4):
            ta = T.load(a[:, k * 16:(k + 1) * 16], kind="left")
            tb = T.load(b[k * 16:(k + 1) * 16, :], kind="right")
            acc += ta @ tb
            best = T.maximum(best, T.row_max(T.load(a[:, k * 16:(k + 1) * 16])))
        T.store(c, acc.to("vec"))
        T.store(m, best)

    text = "\n".join(line for line, _ in gemm_rows.body_lines)
    assert "TMATMUL_ACC(acc, ta, tb);" in text and "TMAX(best, best," in text
    A, B = Tensor(f32[16, 64], name="A"), Tensor(f32[64, 16], name="B")
    C, M = Tensor(f32[16, 16], name="C"), Tensor(f32[16, 1], name="M")

    @workload
    def one():
        gemm_rows(A, B, C, M)

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((16, 64)).astype(np.float32), rng.standard_normal((64, 16)).astype(np.float32)
    out = pto_wsp.compile(one, threads=1)(A=a, B=b)
    np.testing.assert_allclose(out.C, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out.M[:, 0], a.max(axis=1))


def test_tilelang_style_copies_clear_and_gemm_trace_to_the_same_instructions():
    @kernel(pool="cube")
    def gemm_tl(a: In[f32, 16, 64], b: In[f32, 64, 16], c: Out[f32, 16, 16]):
        a_s = T.tile((16, 16), kind="left")
        b_s = T.tile((16, 16), kind="right")
        acc = T.tile((16, 16), kind="acc")
        T.clear(acc)
        for k in T.range(4):
            T.copy(a[:, k * 16:(k + 1) * 16], a_s)
            T.copy(b[k * 16:(k + 1) * 16, :], b_s)
            T.gemm(a_s, b_s, acc)
        T.copy(T.copy(acc, kind="vec"), c)

    body = [line for line, _ in gemm_tl.body_lines]
    assert body[4:] == [
        "TEXPANDS(acc, 0.0);", "for k in range(4) {", "    TLOAD(a_s, a, 0, (k * 16));",
        "    TLOAD(b_s, b, (k * 16), 0);", "    TMATMUL_ACC(acc, a_s, b_s);", "}",
        "TMOV(t0, acc);", "TSTORE(c, t0);",
    ], body
    A, B, C = Tensor(f32[16, 64], name="A"), Tensor(f32[64, 16], name="B"), Tensor(f32[16, 16], name="C")

    @workload
    def one():
        gemm_tl(A, B, C)

    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((16, 64)).astype(np.float32), rng.standard_normal((64, 16)).astype(np.float32)
    np.testing.assert_allclose(pto_wsp.compile(one, threads=1)(A=a, B=b)["C"], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_every_instruction_of_the_table_is_a_function_of_the_tile_module():
    table = pto_wsp._pto_wsp.tile_instructions()
    assert len(table) >= 30
    for ins in table:
        fn = getattr(T, ins["mnemonic"])
        assert callable(fn) and ins["mnemonic"] in fn.__doc__ or fn.__doc__


def test_a_tile_kernel_mistake_is_reported_at_the_python_line(tmp_path):
    path, e = user_file(tmp_path, """
        from pto_wsp import *
        from pto_wsp import tile as T

        X = Tensor(f32[8, 64])
        Y = Tensor(f32[8, 64])

        @kernel(pool="vector")
        def bad(x: In[f32, 8, 64], y: Out[f32, 8, 64]):
            t = T.load(x)
            m = T.TROWMAX(t, shape=(8, 2))   # the mistake: a row max is 8 x 1
            T.store(y, t)

        @workload
        def w():
            bad(X, Y)

        module = w.module()
    """)
    assert isinstance(e, pto_wsp.ValidationError), e
    assert (e.file, e.line) == (str(path), line_of(path, "# the mistake"))
    assert "TROWMAX" in e.message and "8 x 1" in e.message


# ----- control: Ctrl-C, threads, execute_async -------------------------------------------------

LONG = """
import sys, threading, time
import numpy as np
import pto_wsp

# 16 x 16 output tiles, each zeroed then 256 steps of a 128 x 128 x 128 product: about 5 s on
# two cores (a run of 1 s, with K = 4096, let a loaded machine end it before the signal landed).
K = 32768
prog = pto_wsp.compile("{gemm}", threads=2, bind={{"M": 2048, "N": 2048, "K": K}})
a = np.ones((2048, K), np.float16)
b = np.ones((K, 2048), np.float16)
c = np.full((2048, 2048), -1.0, np.float32)
main = threading.main_thread().ident


def announce():
    # "started" once the main thread is inside the call, waiting for the run (its innermost
    # Python frame is the program's `_run`): the parent's SIGINT then lands in the wait.
    for _ in range(600000):
        f = sys._current_frames().get(main)
        if f is not None and f.f_code.co_name == "{frame}" and f.f_code.co_filename.endswith("program.py"):
            print("started", flush=True)
            return
        time.sleep(0.0001)


threading.Thread(target=announce, daemon=True).start()
try:
    {call}
    print("finished without interruption", flush=True)
except KeyboardInterrupt:
    t = time.monotonic()
    print(f"interrupted at {{t:.6f}}", flush=True)
    # Consistent: every tile is as a whole number of its tasks left it (-1 untouched, else
    # 128 per completed K step): no task was stopped half-way, none ran after the return.
    tiles = c.reshape(16, 128, 16, 128).transpose(0, 2, 1, 3).reshape(256, -1)
    assert (tiles == tiles[:, :1]).all()
    first = tiles[:, 0]
    assert ((first == -1) | (first % 128 == 0)).all(), first
    done = int((first >= 0).sum())
    assert done < 256 or (first < K).any(), "the run was not cut short"
    snapshot = c.copy()
    assert (c == snapshot).all()
    # The program runs again (a small one: the same engine, fresh bindings).
    small = pto_wsp.compile("{gemm}", threads=2, bind={{"M": 128, "N": 128, "K": 128}})
    out = small(A=np.ones((128, 128), np.float16), B=np.ones((128, 128), np.float16))
    assert (out["C"] == 128).all()
    print(f"consistent: {{done}} of 256 tiles started", flush=True)
"""


@pytest.mark.parametrize(
    "call, frame",
    [("prog(A=a, B=b, out={'C': c})", "_run"), ("prog.execute_async(A=a, B=b, C=c); prog.synchronize()", "synchronize")],
    ids=["call", "execute_async"],
)
def test_ctrl_c_cancels_a_run_and_raises_keyboard_interrupt(tmp_path, call, frame):
    script = tmp_path / "long.py"
    script.write_text(LONG.format(gemm=ROOT / "examples" / "gemm.wsp", call=call, frame=frame))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert p.stdout.readline().strip() == "started"
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=600)
    finally:
        p.kill()
    assert p.returncode == 0, err
    interrupted = [float(line.split()[-1]) for line in out.split("\n") if line.startswith("interrupted at")]
    assert interrupted, out + err  # the run of seconds did not run to its end
    print(f"KeyboardInterrupt {1e3 * (interrupted[0] - sent):.1f} ms after SIGINT")
    assert "consistent" in out


def test_a_program_called_from_several_threads_runs_one_call_at_a_time():
    prog = add_program()
    a, b = ab()
    want = np.maximum(a + b, 0)
    errors, results = [], []

    def worker(i):
        try:
            for _ in range(20):
                results.append(prog(A=a * 0 + a, B=b)["C"])
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []
    assert len(results) == 80
    for r in results:
        np.testing.assert_array_equal(r, want)


def test_execute_async_on_a_busy_program_raises_at_once_naming_it():
    prog = add_program()
    a, b = ab()
    prog.execute_async(A=a, B=b)
    with pytest.raises(RuntimeError, match="program `add.wsp` is busy"):
        prog.execute_async(A=a, B=b)
    # A call meanwhile, from this thread or another, is refused too (it would wait forever for
    # the run only `synchronize` ends).
    with pytest.raises(RuntimeError, match="program `add.wsp` is busy"):
        prog(A=a, B=b)
    prog.synchronize()
    with pytest.raises(RuntimeError, match="no run in progress"):
        prog.synchronize()


# ----- errors as Python expects them ---------------------------------------------------------


def test_errors_form_a_public_hierarchy_with_locations():
    assert pto_wsp.Error is pto_wsp.PtoWspError
    for cls in (pto_wsp.ValidationError, pto_wsp.CompileError, pto_wsp.RunError, pto_wsp.CoverageError):
        assert issubclass(cls, pto_wsp.Error) and cls.__module__ == "pto_wsp"
    assert issubclass(pto_wsp.ArgumentTypeError, TypeError) and issubclass(pto_wsp.ArgumentValueError, ValueError)
    with pytest.raises(pto_wsp.ValidationError) as info:
        pto_wsp.Module.from_text("tensor A: f32[4];\n\nworkload w() {\n    task nope(A[0 +: 4]);\n}\n", path="bad.wsp")
    e = info.value
    assert (e.file, e.line, e.column) == ("bad.wsp", 4, 10)
    assert "nope" in e.message and "-->" not in e.message


def test_bad_arguments_are_type_and_value_errors_naming_the_parameter():
    m = pto_wsp.Module.from_text(ADD)
    with pytest.raises(ValueError, match="threads=-1"):
        m.compile(threads=-1)
    with pytest.raises(TypeError, match="threads="):
        m.compile(threads="2")
    with pytest.raises(TypeError, match="bind="):
        m.compile(bind=[1])
    prog = m.compile(threads=1)
    with pytest.raises(TypeError, match="A=: a tensor is given as an array"):
        prog(A=[1, 2, 3])


def test_tracebacks_name_the_users_line_and_no_private_module(tmp_path):
    path, e = user_file(tmp_path, """
        from pto_wsp import *

        X = Tensor(f32[128, 64])
        Y = Tensor(f32[128, 64])
        I = Dense(4)

        @kernel(pool="vector", alias="relu")
        def act(x: In[f32, 32, 64], y: Out[f32, 32, 64]): ...

        @workload
        def w():
            for i in P(I):
                act(X[i * 32:(i + 1) * 32, :], Y[100:132, :])   # the mistake

        module = w.module()
    """)
    assert isinstance(e, pto_wsp.ValidationError)
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    assert "pto_wsp.ValidationError" in text and "FrontError" not in text
    # No frame of a private module (`pto_wsp/_*.py`, the extension): the package's own frames
    # are taken out but for the one public wrapper that re-raises (`pto_wsp/errors.py`).
    frames = traceback.extract_tb(e.__traceback__)
    package = [f.filename for f in frames if f"{os.sep}pto_wsp{os.sep}" in f.filename]
    assert all(f.endswith(f"pto_wsp{os.sep}errors.py") for f in package), package
    assert "_pto_wsp" not in text and f"pto_wsp{os.sep}_" not in text, text
    # The error is at the user's line, and the frames before it are the user's.
    assert (e.file, e.line) == (str(path), line_of(path, "# the mistake"))
    assert any(f.filename == str(path) and f.lineno == line_of(path, "module = w.module()") for f in frames)


def test_a_mistake_while_tracing_ends_the_traceback_at_the_users_line(tmp_path):
    path, e = user_file(tmp_path, """
        from pto_wsp import *

        X = Tensor(f32[128, 64])
        I = Dense(4)

        @kernel(pool="vector", alias="relu")
        def act(x: In[f32, 32, 64], y: Out[f32, 32, 64]): ...

        @workload
        def w():
            for i in P(I):
                act(X[i * 32:(i + 1) * 32, :], 3)   # the mistake

        module = w.module()
    """)
    assert isinstance(e, pto_wsp.ValidationError)
    last = traceback.extract_tb(e.__traceback__)[-1]
    assert (last.filename, last.lineno) == (str(path), line_of(path, "# the mistake"))


def test_a_builtin_given_too_few_tiles_says_what_is_missing():
    m = pto_wsp.Module.from_text("""//@ alias mm=matmul
tensor A: f32[16, 16];
tensor B: f32[16, 16];
kernel mm(in a: f32[16, 16], out c: f32[16, 16]) @cube;
workload main() { task mm(A[0 +: 16, 0 +: 16], B[0 +: 16, 0 +: 16]); }
""")
    with pytest.raises(pto_wsp.RunError) as info:
        m.compile(threads=1)()
    assert "reads region 2 (tile argument 3), but the task passes 2 tile argument(s)" in str(info.value)
    assert "region 2 requested" not in str(info.value)


# ----- coverage -------------------------------------------------------------------------------


def test_an_output_with_unwritten_elements_warns_naming_the_region():
    prog = pto_wsp.compile(pto_wsp.Module.from_text(RELU, path="relu.wsp"), threads=2, bind={"n": 70})
    x = np.ones((70, 64), np.float32)
    with pytest.warns(pto_wsp.CoverageWarning, match=r"output tensor `Y` .* \[64:70, 0:64\] \(384 of 4480\)") as w:
        prog(X=x)
    assert w[0].filename == __file__  # at the user's call
    # 64 rows written, 6 not.
    full = pto_wsp.compile(pto_wsp.Module.from_text(RELU), threads=2, bind={"n": 64})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        full(X=np.ones((64, 64), np.float32))


def test_strict_makes_unwritten_outputs_an_error():
    prog = pto_wsp.compile(pto_wsp.Module.from_text(RELU), threads=2, bind={"n": 70}, strict=True)
    with pytest.raises(pto_wsp.CoverageError) as info:
        prog(X=np.ones((70, 64), np.float32))
    assert info.value.tensor == "Y" and info.value.unwritten == [(64, 70), (0, 64)]


def test_the_cli_reports_unwritten_outputs_too(tmp_path):
    binary = fmt_binary()
    if binary is None:
        pytest.skip("skipped: no pto-wsp binary")
    path = tmp_path / "relu.wsp"
    path.write_text(RELU)
    r = subprocess.run([binary, "run", str(path), "--bind", "n=70", "-q"], capture_output=True, text=True)
    assert r.returncode == 0 and "warning:" in r.stderr and "[64:70, 0:64]" in r.stderr
    r = subprocess.run([binary, "run", str(path), "--bind", "n=70", "-q", "--strict"], capture_output=True, text=True)
    assert r.returncode != 0 and "[64:70, 0:64]" in r.stderr


# ----- docs and typing ------------------------------------------------------------------------


def test_every_public_name_has_a_docstring():
    missing = []
    for name in pto_wsp.__all__:
        obj = getattr(pto_wsp, name)
        if name == "__version__" or isinstance(obj, (str, int, type(None))):
            continue
        doc = inspect.getdoc(obj)
        if not doc or len(doc) < 20:
            missing.append(name)
    assert missing == []


def test_entry_points_have_numpy_style_sections():
    for obj in (pto_wsp.compile, pto_wsp.Program.__call__, pto_wsp.kernel, pto_wsp.plan, pto_wsp.build, pto_wsp.Module.from_text):
        doc = inspect.getdoc(obj)
        assert "Parameters\n----------" in doc, obj
    for obj in (pto_wsp.compile, pto_wsp.Program.__call__, pto_wsp.kernel):
        assert "Raises\n------" in inspect.getdoc(obj) or "Returns\n-------" in inspect.getdoc(obj)


def test_user_code_type_checks_with_mypy(tmp_path):
    mypy = shutil.which("mypy", path=os.path.dirname(sys.executable)) or shutil.which("mypy")
    if mypy is None:
        pytest.skip("skipped: mypy is not installed")
    user = tmp_path / "model.py"
    user.write_text(textwrap.dedent("""
        import numpy as np
        import pto_wsp
        from pto_wsp import *
        from pto_wsp import tile as T

        M, K = Symbol(bind=64), Symbol(bind=32)
        X = Tensor(f32[M, K])
        Y = Tensor(f32[M, K])
        R = DenseDyn(M // 16)

        @kernel(pool="vector")
        def scale_rows(x: In[f32, 16, ANY], y: Out[f32, 16, ANY], s: f32) -> None:
            t = T.load(x, shape=(16, 32))
            T.store(y, T.TMULS(t, s))

        @workload
        def main() -> None:
            for r in P(R):
                scale_rows(X[r * 16:(r + 1) * 16, :], Y[r * 16:(r + 1) * 16, :], 2.0)

        prog = pto_wsp.compile(main, threads=1)
        out: pto_wsp.Outputs = prog(X=np.ones((64, 32), np.float32))
        y: np.ndarray = out["Y"]
    """))
    examples = sorted(str(p) for p in (ROOT / "python" / "examples").rglob("*.py"))
    for target in [str(user)] + examples:
        r = subprocess.run([mypy, "--no-error-summary", "--follow-imports=silent", target], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 0, f"{target}:\n{r.stdout}{r.stderr}"


def test_symbols_on_one_line_get_their_own_names(tmp_path):
    path, mod = user_file(tmp_path, """
        from pto_wsp import *
        M, K = Symbol(bind=8), Symbol(bind=16)
        A = Symbol(); B = Symbol()
        X = Tensor(f32[M, K]); Y = Tensor(f32[K, M])
    """)
    assert not isinstance(mod, Exception), mod
    assert (mod.M.name, mod.K.name, mod.A.name, mod.B.name) == ("M", "K", "A", "B")
    assert (mod.X.name, mod.Y.name) == ("X", "Y")
    path, e = user_file(tmp_path, """
        from pto_wsp import *
        pair = (Symbol(), Symbol())
    """, name="ambiguous")
    assert isinstance(e, pto_wsp.ValidationError) and "pass `name=`" in e.message
