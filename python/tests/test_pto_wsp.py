"""Tests of the pto_wsp extension: text round trip against `pto-wsp fmt`, runs against numpy
references, numpy arrays bound in place, and errors naming the tensor or `file:line:column`."""

import subprocess

import numpy as np
import pytest

import pto_wsp
from support import ROOT, assert_to_text_is_what_pto_wsp_fmt_prints, fmt_binary

EXAMPLES = sorted((ROOT / "examples").glob("*.wsp"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_to_text_is_what_pto_wsp_fmt_prints(path):
    assert_to_text_is_what_pto_wsp_fmt_prints(path)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_to_text_reparses_to_the_same_text(path):
    text = pto_wsp.Module.from_file(str(path)).to_text()
    assert pto_wsp.Module.from_text(text).to_text() == text


def gemm(**bind):
    module = pto_wsp.Module.from_file(str(ROOT / "examples" / "gemm.wsp"))
    return module.compile(threads=2, bind=bind)


def test_gemm_matches_numpy_and_writes_the_arrays_in_place():
    m, n, k = 256, 128, 384
    program = gemm(M=m, N=n, K=k)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), 7.0, dtype=np.float32)
    c_before = c  # the same object: nothing is copied back into a new array
    address = c.__array_interface__["data"][0]
    stats = program.execute(A=a, B=b, C=c)
    assert c is c_before
    assert c.__array_interface__["data"][0] == address
    reference = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, reference, rtol=1e-4, atol=1e-3)
    # 2 x 1 output tiles, each one zero task and 3 K steps.
    assert stats["num_tasks"] == (m // 128) * (n // 128) * (1 + k // 128)
    assert program.stats["num_tasks"] == stats["num_tasks"]


def test_rmsnorm_matches_numpy():
    module = pto_wsp.Module.from_file(str(ROOT / "examples" / "rmsnorm.wsp"))
    tokens, hidden = 64, 256
    program = module.compile(threads=2, bind={"tokens": tokens, "hidden": hidden})
    rng = np.random.default_rng(2)
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    w = rng.standard_normal(hidden).astype(np.float32)
    y = np.zeros((tokens, hidden), dtype=np.float32)
    program.execute(X=x, W=w, Y=y)
    x64 = x.astype(np.float64)
    reference = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, reference, rtol=1e-4, atol=1e-5)


def test_a_wrong_dtype_names_the_tensor():
    program = gemm(M=128, N=128, K=128)
    a = np.zeros((128, 128), dtype=np.float32)
    with pytest.raises(TypeError, match=r"A=: tensor `A` is declared f16") as e:
        program.execute(A=a)
    assert isinstance(e.value, pto_wsp.Error)


def test_a_wrong_shape_names_the_tensor():
    program = gemm(M=128, N=128, K=128)
    b = np.zeros((128, 64), dtype=np.float16)
    with pytest.raises(ValueError, match=r"tensor `B` has shape \(128, 128\)") as e:
        program.execute(B=b)
    assert isinstance(e.value, pto_wsp.Error)


def test_a_non_contiguous_or_read_only_array_is_refused_for_a_tensor_tasks_write():
    program = gemm(M=128, N=128, K=128)
    c = np.zeros((128, 256), dtype=np.float32)[:, ::2]
    with pytest.raises(ValueError, match="C=: the array is not C-contiguous"):
        program.execute(C=c)
    frozen = np.zeros((128, 128), dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="C=: the array is read-only, but tasks write tensor `C`"):
        program.execute(C=frozen)


def test_after_a_run_the_program_no_longer_touches_the_arrays():
    program = gemm(M=128, N=128, K=128)
    a = np.ones((128, 128), dtype=np.float16)
    b = np.ones((128, 128), dtype=np.float16)
    c = np.zeros((128, 128), dtype=np.float32)
    program.execute(A=a, B=b, C=c)
    np.testing.assert_array_equal(c, np.full((128, 128), 128.0, dtype=np.float32))
    # A second run without C writes the program's own C, not the earlier array.
    program.execute(A=a, B=b)
    np.testing.assert_array_equal(c, np.full((128, 128), 128.0, dtype=np.float32))


def test_a_syntax_error_gives_file_line_column():
    text = "tensor A: f32[4];\nworkload w() { task foo(A[0:4]); }\n"
    with pytest.raises(pto_wsp.ValidationError, match=r"mine\.wsp:2:28"):
        pto_wsp.Module.from_text(text, path="mine.wsp")


def test_an_invalid_module_gives_file_line_column():
    text = "tensor A: f32[4];\n\nworkload w() {\n    task nope(A[0 +: 4]);\n}\n"
    with pytest.raises(pto_wsp.ValidationError, match=r"bad\.wsp:4:\d+") as e:
        pto_wsp.Module.from_text(text, path="bad.wsp")
    assert "nope" in str(e.value)


def test_a_bad_bind_is_a_compile_error_naming_the_symbol():
    module = pto_wsp.Module.from_file(str(ROOT / "examples" / "gemm.wsp"))
    with pytest.raises(pto_wsp.CompileError, match="`M`"):
        module.compile(bind={"M": "x"})


def test_errors_share_one_base_class():
    for e in (pto_wsp.ValidationError, pto_wsp.CompileError, pto_wsp.RunError):
        assert issubclass(e, pto_wsp.PtoWspError)


BF16_COPY = """
tensor A: bf16[16, 16];
tensor B: bf16[16, 16];
tensor F: f32[16, 16];
kernel copy(in a: bf16[16, 16], out b: bf16[16, 16]);
workload main() {
    task copy(A[0 +: 16, 0 +: 16], B[0 +: 16, 0 +: 16]);
}
"""


def test_bf16_tensors_take_ml_dtypes_bfloat16_or_uint16_bits():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    program = pto_wsp.Module.from_text(BF16_COPY).compile(threads=1)
    a = np.random.default_rng(3).standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    b = np.zeros((16, 16), dtype=ml_dtypes.bfloat16)
    program.execute(A=a, B=b)
    np.testing.assert_array_equal(b.view(np.uint16), a.view(np.uint16))
    bits = np.zeros((16, 16), dtype=np.uint16)
    program.execute(A=a.view(np.uint16), B=bits)
    np.testing.assert_array_equal(bits, a.view(np.uint16))
    with pytest.raises(TypeError, match="F=: the array holds bfloat16, but tensor `F` is f32"):
        program.execute(F=np.zeros((16, 16), dtype=ml_dtypes.bfloat16))


def test_every_back_end_is_registered_for_python_and_emits_what_pto_wsp_compile_writes(tmp_path):
    names = {b["name"]: b for b in pto_wsp.backends()}
    assert {"cpu", "bytecode", "ptoisa", "ascend"} <= set(names)
    ascend = pto_wsp.get_backend("ascend_a2a3sim")
    assert ascend["name"] == "ascend"
    assert ascend["targets"] == ["ascend_a2a3sim", "ascend_a2a3"]
    assert ascend["capabilities"] == ["emit"]
    assert pto_wsp.get_backend("nope") is None
    path = ROOT / "examples" / "ascend" / "vector_example.wsp"
    files = pto_wsp.Module.from_file(str(path)).emit("ascend_a2a3sim")
    assert "aicpu_orchestration_entry" in files["orchestration.cpp"].decode()
    # The same tree the command line writes for the same file (positions name the same path).
    binary = fmt_binary()
    if binary is None:
        pytest.skip("no pto-wsp binary (build it with `cargo build -p pto-wsp-cli`)")
    out = tmp_path / "tree"
    subprocess.run(
        [binary, "compile", str(path), "--target", "ascend_a2a3sim", "-o", str(out)],
        check=True,
        capture_output=True,
    )
    written = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert written == files


def test_an_emitter_refusal_is_a_compile_error_at_its_place():
    text = (
        "tensor X: f32[8, 64];\nkernel k(inout x: f32[8, 64]) @vector;\n"
        "workload main() { task k(X[0 +: 8, 0 +: 64]); }\n"
    )
    module = pto_wsp.Module.from_text(text, path="bad.wsp")
    with pytest.raises(pto_wsp.CompileError, match=r"bad\.wsp:2:8") as e:
        module.emit("ascend_a2a3sim")
    assert "which has no body" in str(e.value)
