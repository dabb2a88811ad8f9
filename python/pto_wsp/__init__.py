"""pto-wsp from Python: workloads, schedules, plans and tile kernels written in Python (or read
from the ``.wsp`` text format), compiled once and called like functions on numpy arrays, torch
tensors or any DLPack producer, in place.

>>> import numpy as np
>>> from pto_wsp import *
>>> from pto_wsp import tile as T
>>> X = Tensor(f32[32, 64], name="X")
>>> Y = Tensor(f32[32, 64], name="Y")
>>> R = Dense(4, name="R")
>>> @kernel(pool="vector")
... def rows(x: In[f32, 8, 64], y: Out[f32, 8, 64], scale: f32):
...     t = T.load(x) * scale
...     e = T.exp(t - T.row_max(t))
...     T.store(y, e / T.row_sum(e))
>>> @workload
... def softmax():
...     for r in P(R, names=["r"]):
...         rows(X[span(r * 8, 8), :], Y[span(r * 8, 8), :], 0.5)
>>> prog = pto_wsp.compile(softmax, threads=1)      # doctest: +SKIP
>>> out = prog(X=np.ones((32, 64), np.float32))      # doctest: +SKIP
>>> out["Y"][0, :2]                                   # doctest: +SKIP
array([0.015625, 0.015625], dtype=float32)

See docs/PYTHON.md for a walkthrough.
"""

from __future__ import annotations

import os as _os

try:
    from ._pto_wsp import __version__
except ImportError as _e:  # pragma: no cover - depends on how the package was installed
    # Running from the source tree (`python/`), whose `pto_wsp/` has no built extension, shadows
    # an installed package: use the installed extension if there is one, else say what to do.
    import importlib.util as _util
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _found = None
    for _entry in _sys.path:
        _cand = _os.path.join(_os.path.abspath(_entry or "."), "pto_wsp")
        if _cand != _here and _os.path.isdir(_cand) and any(
            f.startswith("_pto_wsp") and f.endswith((".so", ".pyd")) for f in _os.listdir(_cand)
        ):
            _found = _cand
            break
    if _found is None:
        raise ImportError(
            "pto_wsp is being imported from a source tree without its compiled extension "
            f"({_here}); install the package (`pip install pto-wsp`, or `pip install -v ./python` "
            "in a checkout) and run Python from another directory, or build it in place with "
            "`maturin develop -m python/pyproject.toml`"
        ) from _e
    __path__.append(_found)  # type: ignore[name-defined]
    from ._pto_wsp import __version__

from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    CompileError,
    CoverageError,
    CoverageWarning,
    Error,
    PtoWspError,
    RunError,
    ValidationError,
)
from ._expr import Expr, max_, min_, u64, where
from ._decl import (
    ANY,
    Dense,
    DenseDyn,
    DType,
    In,
    InOut,
    Kernel,
    Out,
    Ragged,
    Region,
    Slot,
    Sparse,
    Symbol,
    Tensor,
    TensorType,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    i32,
    i64,
    kernel,
    span,
    u8,
    u32,
    u64_t,
)
from ._trace import (
    Channel,
    P,
    Pipeline,
    Process,
    Workload,
    call,
    combine,
    connect,
    pipeline,
    process,
    sequential,
    workload,
)
from ._schedule import (
    Deps,
    DispatchPolicy,
    Pools,
    ReadyPolicy,
    Schedule,
    StartPolicy,
    TimingPolicy,
    TracePolicy,
)
from ._plan import AUTO, DEFAULT, DYNAMIC, Plan, Space, SpaceAxis, Tier, Tiers, alloc, emit, load, plan, select_tier
from ._module import BuiltModule, Module, build
from .program import Outputs, PlanProgram, Program
from . import tile
from ._compile import compile
from ._pto_wsp import backends, get_backend

#: The former name of :class:`Program` for modules built in Python.
BuiltProgram = Program

__all__ = [
    "ANY",
    "AUTO",
    "ArgumentTypeError",
    "ArgumentValueError",
    "BuiltModule",
    "BuiltProgram",
    "Channel",
    "CompileError",
    "CoverageError",
    "CoverageWarning",
    "DEFAULT",
    "DYNAMIC",
    "DType",
    "Dense",
    "DenseDyn",
    "Deps",
    "DispatchPolicy",
    "Error",
    "Expr",
    "In",
    "InOut",
    "Kernel",
    "Module",
    "Out",
    "Outputs",
    "P",
    "Pipeline",
    "Plan",
    "PlanProgram",
    "Pools",
    "Process",
    "Program",
    "PtoWspError",
    "Ragged",
    "ReadyPolicy",
    "Region",
    "RunError",
    "Schedule",
    "Slot",
    "Space",
    "SpaceAxis",
    "Sparse",
    "StartPolicy",
    "Symbol",
    "Tensor",
    "TensorType",
    "Tier",
    "Tiers",
    "TimingPolicy",
    "TracePolicy",
    "ValidationError",
    "Workload",
    "__version__",
    "alloc",
    "backends",
    "bf16",
    "bool_",
    "build",
    "call",
    "combine",
    "compile",
    "connect",
    "emit",
    "f16",
    "f32",
    "f64",
    "get_backend",
    "i32",
    "i64",
    "kernel",
    "load",
    "max_",
    "min_",
    "pipeline",
    "plan",
    "process",
    "select_tier",
    "sequential",
    "span",
    "u8",
    "u32",
    "u64",
    "u64_t",
    "where",
    "workload",
]
