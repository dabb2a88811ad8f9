"""Type stubs of the `pto_wsp._pto_wsp` extension module (crates/pto-wsp-py)."""

from os import PathLike
from typing import Any, Dict, List, Mapping, Optional, Union

import numpy as np

__version__: str

class PtoWspError(Exception):
    """Base class of every pto-wsp error."""

class ValidationError(PtoWspError):
    """The module text does not parse or is not valid (message has `file:line:column`)."""

class CompileError(PtoWspError):
    """The module cannot be compiled for the target, or its bindings are wrong."""

class RunError(PtoWspError):
    """A run failed, or an array given to it does not fit its tensor (message names it)."""

BindValue = Union[int, float, bool, str, List[int]]

def backends() -> List[Dict[str, Any]]:
    """Every registered back end, in registration order: dicts of `name`, `targets` and
    `capabilities` (what `pto-wsp targets` lists)."""

def get_backend(name: str) -> Optional[Dict[str, Any]]:
    """The back end registered under `name` (its name or one of its targets), or `None`."""

class Module:
    """A pto-wsp module: the IR of a `.wsp` text."""

    @staticmethod
    def from_text(text: str, path: Optional[str] = None) -> "Module":
        """Parses and validates `text`; errors name `path` (default `<text>`)."""
    @staticmethod
    def from_file(path: Union[str, "PathLike[str]"]) -> "Module":
        """Reads, parses and validates a `.wsp` file."""
    def to_text(self) -> str:
        """The canonical text, exactly what `pto-wsp fmt` prints."""
    @property
    def entry(self) -> Optional[str]:
        """The entry workload or pipeline's name."""
    @property
    def tensors(self) -> List[str]:
        """The declared tensors' names, in order."""
    def compile(
        self,
        target: str = "cpu_sim",
        threads: int = 0,
        device_gen: bool = False,
        debug_checks: bool = False,
        bind: Optional[Mapping[str, BindValue]] = None,
        trace: bool = False,
    ) -> Union["Program", "PlanProgram"]:
        """Compiles for `target`; `bind` is `pto-wsp run --bind NAME=VALUE`, over `//@ bind`;
        `trace=True` records task times for `Program.write_trace`. A module of plans (plans
        and no workload or pipeline) gives a `PlanProgram` (`threads`: dispatch threads;
        `device_gen`, `debug_checks`, `trace` and another target are refused)."""
    def emit(
        self, target: str, bind: Optional[Mapping[str, BindValue]] = None
    ) -> Union[bytes, Dict[str, bytes]]:
        """Compiles for an emitting target (`pto_isa`, `ascend_a2a3sim`, `ascend_a2a3`,
        `bytecode`; see `backends()`) with `bind`'s values baked in, over `//@ bind`: `bytes`
        for one file, or relative path -> `bytes` for a tree of files."""
    @property
    def plans(self) -> List[str]:
        """The plans' names, in the order they run."""
    def expand(
        self, bind: Optional[Mapping[str, BindValue]] = None, limit: Optional[int] = None
    ) -> List[Dict[str, Any]]:
        """The tasks under `bind`, in program order (as `pto-wsp expand` lists them): dicts of
        kernel, declared, pool, executor, stream, priority, cost, params (name -> value) and
        regions (dicts of tensor, access, start, size)."""

class Program:
    """A compiled program, run with numpy arrays as its tensors."""

    def execute(self, **arrays: np.ndarray) -> Dict[str, Any]:
        """Runs with each array as the tensor of its name, read and written in place (no copy;
        C-contiguous, writeable, native byte order, the tensor's dtype and shape; `bf16` as
        `ml_dtypes.bfloat16` or `numpy.uint16` bits). The GIL is
        released during the run. Returns `stats`."""
    def execute_async(self, **arrays: np.ndarray) -> None:
        """Starts the run `execute` does and returns at once; do not touch the arrays until
        `synchronize`."""
    def synchronize(self) -> Dict[str, Any]:
        """Waits (GIL released) for the run `execute_async` started; returns `stats` or raises
        its `RunError`."""
    def is_complete(self) -> bool:
        """Whether no run is in progress (or it has finished)."""
    def write_trace(self, path: Union[str, "PathLike[str]"]) -> None:
        """Writes the Chrome trace of the last run (needs `compile(..., trace=True)`)."""
    @property
    def stats(self) -> Dict[str, Any]:
        """Statistics of the last run: num_tasks, num_streams, num_executors, compile_time_ms,
        execute_time_ms, barriers, edges, per_worker, run_ns, build_ns (empty before a run)."""
    @property
    def threads(self) -> int:
        """Worker threads."""

class PlanProgram:
    """A compiled module of plans (Plan-Descriptor-Execute), run with numpy arrays as its
    tensors."""

    def execute(self, **arrays: np.ndarray) -> Dict[str, Any]:
        """Runs every plan in declaration order with each array as the tensor of its name, read
        and written in place (the checks of `Program.execute`); integer arrays are also what a
        generator's `load` reads. The GIL is released during the run. Returns `stats`; a plan
        that cannot run raises `RunError` at its `file:line:column`."""
    @property
    def stats(self) -> Dict[str, Any]:
        """Statistics of the last run: descriptor_bytes, and plans (dicts of plan, descriptors,
        per_thread, workspace_used, prefetches, in run order); empty before a run."""
    @property
    def threads(self) -> int:
        """Dispatch threads."""
