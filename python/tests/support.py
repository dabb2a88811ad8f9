"""Helpers shared by the test modules: where the repository is, and which `pto-wsp` command line
checks the module text the Python side prints."""

import os
import pathlib
import shutil

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
