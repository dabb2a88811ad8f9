"""``pto_wsp.compile``: whatever names a module, compiled into a program callable like a
function.

Why: one entry point a user reaches for first (``prog = pto_wsp.compile(module, ...)``), taking
what they have in hand: a module read from text, a ``@workload`` / ``@pipeline``, a schedule
built on one, plans, or the path of a ``.wsp`` file.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from ._module import Module, build
from .errors import api
from .program import PlanProgram, Program


@api
def compile(  # noqa: A001 - the package's verb, as `torch.compile`
    module: Any,
    target: str = "cpu_sim",
    threads: int = 0,
    *,
    bind: Optional[Dict[str, Any]] = None,
    strict: bool = False,
    device_gen: bool = False,
    debug_checks: bool = False,
    trace: bool = False,
    coverage: bool = True,
) -> Union[Program, PlanProgram]:
    """Compiles a module into a program: ``out = prog(X=x, W=w)``.

    Parameters
    ----------
    module : Module, Workload, Pipeline, Schedule, Plan, list of Plans, str or PathLike
        What to compile: a module (``Module.from_text``, ``workload.module()``), a
        ``@workload`` / ``@pipeline`` or a schedule chained on one (built first), plans, or the
        path of a ``.wsp`` file.
    target : str
        ``"cpu_sim"``: the CPU simulation.
    threads : int
        Worker threads (0: one per core); for plans, dispatch threads.
    bind : dict, optional
        Values of symbols (and contents of integer tensors), over the text's ``//@ bind`` lines:
        ``{"M": 256, "kv_lens": [2500, 1, 20]}``.
    strict : bool
        Raise :class:`~pto_wsp.CoverageError` when a run leaves elements of an output tensor
        unwritten (default: a :class:`~pto_wsp.CoverageWarning`).
    device_gen : bool
        Device-generation mode (every worker interprets the workload's bytecode).
    debug_checks : bool
        Check that no two tasks with conflicting regions run at once.
    trace : bool
        Record each task's times for :meth:`Program.write_trace`.
    coverage : bool
        Check after each run that the output tensors were fully written (default ``True``).

    Returns
    -------
    Program or PlanProgram
        Call it with the tensors by name; it returns the outputs (:class:`~pto_wsp.Outputs`).

    Raises
    ------
    ValidationError
        The module is not valid (at its ``file:line:column``, the user's Python line for one
        built in Python).
    CompileError
        A kernel with no implementation, bindings that do not fit, an option the target lacks.
    TypeError, ValueError
        An argument of the wrong type or value (``threads=-1``), naming the parameter.

    Examples
    --------
    >>> prog = pto_wsp.compile("examples/gemm.wsp", threads=2, bind={"M": 256, "N": 128, "K": 384})  # doctest: +SKIP
    >>> c = prog(A=a, B=b)["C"]                                                                  # doctest: +SKIP
    """
    m = _module_of(module)
    return m.compile(
        target,
        threads,
        bind=bind,
        strict=strict,
        device_gen=device_gen,
        debug_checks=debug_checks,
        trace=trace,
        coverage=coverage,
    )


def _module_of(x: Any) -> Module:
    from ._plan import Plan
    from ._schedule import Schedule
    from ._trace import Pipeline, Workload

    if isinstance(x, Module):
        return x
    if isinstance(x, (Workload, Pipeline, Schedule, Plan)):
        return x.module()  # type: ignore[no-any-return]
    if isinstance(x, (list, tuple)) and x and all(isinstance(p, Plan) for p in x):
        return build(list(x))
    if isinstance(x, (str, os.PathLike)):
        return Module.from_file(x)
    raise TypeError(
        "compile takes a Module, a @workload / @pipeline (or a schedule built on one), plans, or "
        f"the path of a .wsp file, not {type(x).__name__}"
    )
