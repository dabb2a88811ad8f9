"""Helpers shared by the test modules: where the repository is, and the check that the module
text the Python side prints is what `pto-wsp fmt` prints."""

import os
import pathlib
import shutil
import subprocess

import pytest

import pto_wsp

ROOT = pathlib.Path(__file__).resolve().parents[2]


def fmt_binary():
    """The `pto-wsp` command line: $PTO_WSP_BIN, else the workspace's debug or release build,
    else one on PATH (None if there is none)."""
    env = os.environ.get("PTO_WSP_BIN")
    if env:
        return env
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "pto-wsp"
        if p.exists():
            return str(p)
    return shutil.which("pto-wsp")


def assert_to_text_is_what_pto_wsp_fmt_prints(path):
    """`Module.from_file(path).to_text()` equals `pto-wsp fmt path` (skips when there is no
    `pto-wsp` binary)."""
    binary = fmt_binary()
    if binary is None:
        pytest.skip("no pto-wsp binary (build it with `cargo build -p pto-wsp-cli`)")
    expected = subprocess.run(
        [binary, "fmt", str(path)], check=True, capture_output=True, text=True
    ).stdout
    assert pto_wsp.Module.from_file(str(path)).to_text() == expected


SETUP = {
    "pto-isa": "scripts/prepare-toolchains.sh (or set PTO_ISA_ROOT)",
    "simpler": "scripts/prepare-simpler.sh (or set SIMPLER_ROOT, SIMPLER_VENV)",
}


def _toolchain_record(outcome, needs, why=None):
    """Appends `OUTCOME TOOLCHAIN TEST[: WHY]` to $PTO_WSP_TOOLCHAIN_LOG when set (the format
    the Rust tests write; `scripts/toolchain-summary.sh` counts them)."""
    log = os.environ.get("PTO_WSP_TOOLCHAIN_LOG")
    if not log:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "unnamed test").split(" ")[0]
    line = f"{outcome} {needs} {test}" + (f": {why}" if why else "") + "\n"
    with open(log, "a", encoding="utf-8") as f:
        f.write(line)


def toolchain_ran(needs):
    """Records that the running test found the outside toolchain `needs` (`pto-isa`,
    `simpler`)."""
    _toolchain_record("ran", needs)


def toolchain_missing(needs, why):
    """The running test's toolchain is missing: records it, then fails the test under
    `PTO_WSP_REQUIRE_TOOLCHAINS=1` (naming what is missing and how to get it) or skips it with
    one `skipped: WHY` line."""
    _toolchain_record("skipped", needs, why)
    if os.environ.get("PTO_WSP_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(
            f"PTO_WSP_REQUIRE_TOOLCHAINS=1 and this test's toolchain is missing: {why}; "
            f"get it with {SETUP[needs]}"
        )
    pytest.skip(f"skipped: {why}")
