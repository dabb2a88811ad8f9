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
