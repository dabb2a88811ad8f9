"""A tile kernel written in Python (the RMSNorm and in-place scaling of
python/examples/ascend/rmsnorm.py, `@kernel` functions over tile values) run on our CPU
simulation, under PTO-ISA's CPU simulation (the emitted C++, built with g++) and on simpler's
`a2a3sim`, each against the same run of its `.wsp` twin (examples/ascend/rmsnorm.wsp) on the same
inputs. The toolchains are the ones the Rust tests use (`PTO_ISA_ROOT`, `SIMPLER_ROOT`, ...,
defaulting to `$HOME/.cache/pto-wsp/`); without them each test prints one `skipped:` line."""

import importlib.util
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import pto_wsp
from support import ROOT, fmt_binary, toolchain_missing, toolchain_ran

CACHE = pathlib.Path.home() / ".cache" / "pto-wsp"
TWIN = ROOT / "examples" / "ascend" / "rmsnorm.wsp"


def cache_dir(var, name):
    return pathlib.Path(os.environ.get(var) or CACHE / name)


def python_module():
    spec = importlib.util.spec_from_file_location("rmsnorm_py", ROOT / "python" / "examples" / "ascend" / "rmsnorm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.module


@pytest.fixture
def inputs(tmp_path):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal((1, 64)).astype(np.float32)
    d = tmp_path / "in"
    d.mkdir()
    np.save(d / "X.npy", x)
    np.save(d / "W.npy", w)
    return x, w, d


def written_text(tmp_path, module, name):
    path = tmp_path / f"{name}.wsp"
    path.write_text(module.to_text())
    return path


def reference(x, w):
    x64 = x.astype(np.float64)
    y = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w[0].astype(np.float64)
    return y, (x64 * 0.5).astype(np.float32)


def test_python_rmsnorm_on_the_cpu_equals_the_wsp_kernel(inputs):
    x, w, _ = inputs
    outs = []
    for module in (python_module(), pto_wsp.Module.from_file(TWIN)):
        xx = x.copy()
        y = pto_wsp.compile(module, threads=2)(X=xx, W=w)["Y"]
        outs.append((y, xx))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    want_y, want_x = reference(x, w)
    np.testing.assert_allclose(outs[0][0], want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(outs[0][1], want_x)


def test_python_rmsnorm_under_pto_isa_cpu_simulation_equals_the_wsp_kernel(tmp_path, inputs):
    pto = cache_dir("PTO_ISA_ROOT", "pto-isa")
    if not (pto / "include" / "pto" / "pto-inst.hpp").exists() or shutil.which("g++") is None:
        toolchain_missing("pto-isa", f"no PTO-ISA at {pto} (or no g++)")
    toolchain_ran("pto-isa")
    x, w, d_in = inputs
    results = []
    for name, module in (("python", python_module()), ("wsp", pto_wsp.Module.from_file(TWIN))):
        # The emitter reached from Python: the module's `pto_isa` tree, written out and built.
        out_dir, run_dir = tmp_path / f"emit_{name}", tmp_path / f"out_{name}"
        for rel, data in module.emit("pto_isa").items():
            (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (out_dir / rel).write_bytes(data)
        subprocess.run(["make", "-C", str(out_dir), f"PTO_ISA_ROOT={pto}"], check=True, capture_output=True, timeout=600)
        run_dir.mkdir()
        subprocess.run([str(out_dir / "driver"), str(d_in), str(run_dir)], check=True, capture_output=True, timeout=300)
        results.append((np.load(run_dir / "Y.npy"), np.load(run_dir / "X.npy")))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    want_y, want_x = reference(x, w)
    # PTO-ISA's TRSQRT computes in f64 (docs/KERNELS.md): within an ulp or two of ours.
    np.testing.assert_allclose(results[0][0], want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(results[0][1], want_x)
    cpu = pto_wsp.compile(python_module(), threads=1)(X=x.copy(), W=w)["Y"]
    assert np.abs(results[0][0] - cpu).max() <= 1e-6 * np.abs(cpu).max()


def test_python_rmsnorm_on_a2a3sim_equals_the_wsp_kernel(tmp_path, inputs):
    simpler = cache_dir("SIMPLER_ROOT", "simpler")
    venv = cache_dir("SIMPLER_VENV", "simpler-venv")
    binary = fmt_binary()
    if not (simpler / "build" / "lib" / "a2a3" / "sim").exists() or not (venv / "bin" / "python").exists() or binary is None:
        toolchain_missing("simpler", f"no simpler a2a3sim at {simpler} (or its venv, or no pto-wsp binary)")
    toolchain_ran("simpler")
    x, w, d_in = inputs
    results = []
    for name, module in (("python", python_module()), ("wsp", pto_wsp.Module.from_file(TWIN))):
        src = written_text(tmp_path, module, name)
        y_path = tmp_path / f"y_{name}.npy"
        r = subprocess.run(
            [binary, "run", str(src), "--target", "ascend_a2a3sim", "-q", "--threads", "2",
             "--input", f"X={d_in / 'X.npy'}", "--input", f"W={d_in / 'W.npy'}", "--output", f"Y={y_path}"],
            capture_output=True, text=True, timeout=1800,
        )
        # Exit 0: the simulator's outputs agree with cpu_sim's on every written tensor.
        assert r.returncode == 0, r.stdout + r.stderr
        results.append(np.load(y_path))
    np.testing.assert_array_equal(results[0], results[1])
    want_y, _ = reference(x, w)
    np.testing.assert_allclose(results[0], want_y, rtol=1e-5, atol=1e-6)
