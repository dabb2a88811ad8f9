"""pto-wsp from Python: workloads in the ``.wsp`` text format, compiled and run on the CPU
simulation with numpy arrays read and written in place.

>>> import numpy as np, pto_wsp
>>> module = pto_wsp.Module.from_file("examples/gemm.wsp")      # doctest: +SKIP
>>> program = module.compile(threads=2)                          # doctest: +SKIP
>>> program.execute(A=a, B=b, C=c)                               # doctest: +SKIP

See docs/PYTHON.md for a walkthrough.
"""

from ._pto_wsp import (
    CompileError,
    Module,
    Program,
    PtoWspError,
    RunError,
    ValidationError,
    __version__,
)

__all__ = [
    "CompileError",
    "Module",
    "Program",
    "PtoWspError",
    "RunError",
    "ValidationError",
    "__version__",
]
