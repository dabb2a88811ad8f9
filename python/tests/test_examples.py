"""Every Python example runs as a user runs it — `python EXAMPLE.py`, in a fresh interpreter,
from a directory outside the source tree, so the installed package is the one imported — and
checks its own results against numpy (each example's `check()`); a failed check is a non-zero
exit. Every example has a `check()`."""

import os
import subprocess
import sys

import pytest

from support import ROOT

EXAMPLES = sorted((ROOT / "python" / "examples").rglob("*.py"))


def test_every_example_checks_its_results():
    missing = [str(p.relative_to(ROOT)) for p in EXAMPLES if "def check(" not in p.read_text()]
    assert missing == []
    assert len(EXAMPLES) >= 27


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "python" / "examples")))
def test_example_runs_as_a_script_and_matches_numpy(path, tmp_path):
    env = dict(os.environ, PYTHONWARNINGS="error::pto_wsp.CoverageWarning")
    r = subprocess.run(
        [sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900
    )
    assert r.returncode == 0, r.stderr[-4000:]
    assert ": ok" in r.stdout, r.stdout
