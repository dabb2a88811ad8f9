"""Compiled programs, called like functions: ``out = prog(X=x, W=w)``.

Why: an ML engineer calls a compiled kernel the way FlashInfer, Triton or JAX functions are
called — inputs in, outputs back — with the arrays of the framework they use (numpy, torch, any
DLPack producer), without copies, from any thread, and stops a long run with Ctrl-C.

Promises:

- ``prog(**arrays)`` binds every given array to the tensor of its name in place (zero-copy:
  numpy arrays, and objects with ``__dlpack__`` on the CPU such as torch tensors), allocates the
  outputs not given (zeroed, with the library of the inputs: torch tensors when a torch tensor
  was given, else numpy arrays) and returns them in an :class:`Outputs` mapping. ``out=``
  supplies caller buffers; ``outputs=`` names the tensors to return (any tensor, intermediates
  included). A read-only array is accepted for a tensor no task writes; a non-contiguous one for
  such a tensor is copied once (it is only read).
- Calls of one program from several threads run one at a time (each waits its turn);
  ``execute_async`` on a program that is running raises ``RuntimeError`` at once, naming it.
- Ctrl-C during a run cancels it within a few milliseconds of the kernels in flight finishing,
  and raises ``KeyboardInterrupt``; the arrays are released and hold what the completed tasks
  wrote; the program can run again.
- After a run, every output tensor with elements no task wrote is reported: a
  :class:`~pto_wsp.CoverageWarning` naming the tensor and the unwritten region, or under
  ``strict=True`` a :class:`~pto_wsp.CoverageError`.
- Errors are ``pto_wsp`` exceptions: ``TypeError`` / ``ValueError`` subclasses for arrays of the
  wrong type or shape, :class:`~pto_wsp.RunError` for runs that fail (at the user's Python line
  for modules built in Python).
"""

from __future__ import annotations

import io
import os
import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .errors import ArgumentTypeError, ArgumentValueError, CoverageError, CoverageWarning, Error, api

if TYPE_CHECKING:
    from ._module import Module

__all__ = ["Outputs", "PlanProgram", "Program"]

_NUMPY_DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "i32": "int32",
    "u32": "uint32",
    "i64": "int64",
    "u64": "uint64",
    "u8": "uint8",
}
_TORCH_DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i32": "int32",
    "u32": "uint32",
    "i64": "int64",
    "u64": "uint64",
    "u8": "uint8",
}


class Outputs(Dict[str, Any]):
    """The tensors a call returns, by name; also readable as attributes (``out.Y``).

    A ``dict`` of tensor name to array (numpy arrays, or torch tensors when the inputs were
    torch tensors)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(
                f"no output named {name!r} (this call returned: {', '.join(self) or 'nothing'})"
            ) from None

    def __repr__(self) -> str:
        parts = []
        for k, v in self.items():
            shape = tuple(getattr(v, "shape", ()))
            dtype = getattr(v, "dtype", "?")
            parts.append(f"{k}: {type(v).__module__.split('.')[0]} {dtype} {shape}")
        return "Outputs(" + ", ".join(parts) + ")"


def _is_torch(a: Any) -> bool:
    return type(a).__module__.startswith("torch")


class _Base:
    """What workload programs and plan programs share."""

    def __init__(self, engine: Any, module: "Module", strict: bool):
        self._engine = engine
        self._module = module
        self.strict = bool(strict)
        self._lock = threading.Lock()
        self._info: Optional[List[Dict[str, Any]]] = None
        self._index: Dict[str, Dict[str, Any]] = {}
        self._default: List[str] = []

    # ----- what it runs on ----------------------------------------------------------------

    @property
    def name(self) -> str:
        """The program's name (the module's path, or ``<python NAME>`` for one built in
        Python)."""
        return str(self._engine.name)

    @property
    def module(self) -> "Module":
        """The module it was compiled from."""
        return self._module

    @property
    def threads(self) -> int:
        """Worker threads (dispatch threads for a program of plans)."""
        return int(self._engine.threads)

    @property
    def stats(self) -> Dict[str, Any]:
        """Statistics of the last completed run (empty before the first)."""
        return dict(self._engine.stats)

    def tensor_info(self) -> List[Dict[str, Any]]:
        """One dict per tensor, in declaration order: ``name``, ``dtype`` (``"f32"``, ...),
        ``shape`` (under the compile-time bindings), ``read`` (a task or the generator reads
        it), ``written`` (a task writes it) and ``output`` (written and never read: what a call
        returns by default)."""
        self._by_name()
        return [dict(d) for d in self._info or []]

    @property
    def tensors(self) -> List[str]:
        """Every tensor's name, in declaration order."""
        return [d["name"] for d in self.tensor_info()]

    @property
    def inputs(self) -> List[str]:
        """The tensors no task writes (read-only arrays are accepted for them)."""
        return [d["name"] for d in self.tensor_info() if not d["written"]]

    @property
    def outputs(self) -> List[str]:
        """The tensors a call returns by default: written by some task and read by none."""
        return [d["name"] for d in self.tensor_info() if d["output"]]

    # ----- calling ------------------------------------------------------------------------

    @api
    def __call__(
        self,
        out: Optional[Mapping[str, Any]] = None,
        outputs: Union[None, str, Sequence[str]] = None,
        **arrays: Any,
    ) -> Outputs:
        """Runs the program on the given arrays and returns its outputs.

        Parameters
        ----------
        out : dict, optional
            Arrays to write outputs into (by tensor name) instead of allocating them.
        outputs : str or list of str, optional
            The tensors to return, any of them by name (default: :attr:`outputs`).
        **arrays
            The tensors given, by name: numpy arrays or DLPack producers (torch tensors, ...)
            of the tensor's element type and shape. Tensors neither given nor returned use the
            program's own memory (zeroed at compile time, then what earlier runs left).

        Returns
        -------
        Outputs
            Tensor name to array: the arrays of ``out`` and ``arrays`` as given (written in
            place), the others newly allocated (numpy, or torch when a torch tensor was given).

        Raises
        ------
        TypeError
            An array of the wrong element type, or not an array (``pto_wsp.ArgumentTypeError``).
        ValueError
            An unknown tensor name, an array of the wrong shape, a read-only array for a tensor
            tasks write (``pto_wsp.ArgumentValueError``).
        RunError
            The run failed (a kernel's error, a region out of bounds, ...).
        CoverageError
            Under ``strict=True``: an output tensor left partly unwritten.
        KeyboardInterrupt
            Ctrl-C cancelled the run.

        Examples
        --------
        >>> out = prog(X=x, W=w)            # doctest: +SKIP
        >>> y = out["Y"]                    # doctest: +SKIP
        >>> prog(X=x, W=w, out={"Y": y})    # doctest: +SKIP
        """
        info = self._by_name()
        for name in arrays:
            if name not in info:
                self._check_names(arrays, info, "")
        buffers: Dict[str, Any] = {}
        if out is not None:
            if not isinstance(out, Mapping):
                raise ArgumentTypeError(f"out= takes a dict of tensor name to array, not {type(out).__name__}")
            buffers = self._check_names(dict(out), info, "out=")
            clash = [n for n in buffers if n in arrays]
            if clash:
                raise ArgumentValueError(f"tensor `{clash[0]}` is given both as an argument and in out=")
        wanted = self._outputs() if outputs is None else self._wanted(outputs, info)
        given = {**arrays, **buffers}
        torch = next((a for a in given.values() if _is_torch(a)), None)
        bound = {name: self._prepared(name, a, info[name]) for name, a in given.items()}
        result = Outputs()
        for name in wanted:
            a = given.get(name)
            if a is None:
                a = bound[name] = _allocate(info[name], torch)
            result[name] = a
        self._run(bound)
        for name in buffers:
            result.setdefault(name, buffers[name])
        return result

    def _by_name(self) -> Dict[str, Dict[str, Any]]:
        if self._info is None:
            self._info = [dict(d) for d in self._engine.tensor_info()]
            self._index = {d["name"]: d for d in self._info}
            self._default = [d["name"] for d in self._info if d["output"]]
        return self._index

    def _outputs(self) -> List[str]:
        self._by_name()
        return self._default

    def _check_names(self, arrays: Dict[str, Any], info: Dict[str, Any], what: str) -> Dict[str, Any]:
        for name in arrays:
            if name not in info:
                raise ArgumentValueError(
                    f"{what}{name}=: program `{self.name}` has no tensor `{name}` (its tensors: "
                    f"{', '.join(info)})"
                )
        return arrays

    def _wanted(self, outputs: Union[None, str, Sequence[str]], info: Dict[str, Any]) -> List[str]:
        if outputs is None:
            return [n for n, d in info.items() if d["output"]]
        names = [outputs] if isinstance(outputs, str) else list(outputs)
        for n in names:
            if not isinstance(n, str) or n not in info:
                raise ArgumentValueError(
                    f"outputs=: program `{self.name}` has no tensor {n!r} (its tensors: {', '.join(info)})"
                )
        return names

    def _prepared(self, name: str, a: Any, d: Dict[str, Any]) -> Any:
        """``a`` as the extension takes it: an input no task writes that is not C-contiguous
        (``numpy.broadcast_to``, a slice) is copied once; everything else is passed as is."""
        if d["written"] or type(a).__module__ == "numpy" and a.flags.c_contiguous:
            return a
        flags = getattr(a, "flags", None)
        if flags is not None and not getattr(flags, "c_contiguous", True) and hasattr(a, "__array_interface__"):
            import numpy as np

            return np.ascontiguousarray(a)
        if _is_torch(a) and not a.is_contiguous():
            return a.contiguous()
        return a

    def _run(self, arrays: Dict[str, Any]) -> Dict[str, Any]:
        if getattr(self, "_async", None) is not None:
            raise RuntimeError(
                f"program `{self.name}` is busy: a run started by execute_async is in progress; "
                "call synchronize() first"
            )
        with self._lock:
            try:
                stats = self._engine.execute(**arrays)
            except Error as e:
                raise self._module._task_note(e) from None
        self._report(stats)
        return dict(stats)

    def _report(self, stats: Mapping[str, Any]) -> None:
        for c in stats.get("coverage", ()):
            if self.strict:
                raise CoverageError(f"error: {c['message']}\n", c["tensor"], [tuple(b) for b in c["bounds"]])
            warnings.warn(CoverageWarning(c["message"]), stacklevel=_user_level())

    @api
    def execute(self, **arrays: Any) -> Dict[str, Any]:
        """Runs with each array as the tensor of its name, read and written in place, and
        returns the run's statistics (``num_tasks``, ``execute_time_ms``, ..., ``coverage``).
        Tensors not given use the program's own memory. Prefer calling the program
        (``prog(...)``), which also returns the outputs."""
        info = {d["name"]: d for d in self.tensor_info()}
        self._check_names(arrays, info, "")
        return self._run({n: self._prepared(n, a, info[n]) for n, a in arrays.items()})

    @api
    def read(self, name: str) -> Any:
        """A copy (numpy) of tensor ``name`` in the program's own memory after the last run:
        for a tensor no array was given for."""
        import numpy as np

        with self._lock:
            data = self._engine.read_tensor(name)
        return np.load(io.BytesIO(data))

    def __repr__(self) -> str:
        return f"<pto_wsp.{type(self).__name__} {self.name} ({self.threads} thread(s))>"


class Program(_Base):
    """A compiled workload or pipeline, called like a function (see :meth:`__call__`).

    Made by :func:`pto_wsp.compile` or :meth:`Module.compile`.

    Examples
    --------
    >>> prog = pto_wsp.compile(module, threads=2, bind={"M": 256})   # doctest: +SKIP
    >>> out = prog(A=a, B=b)                                        # doctest: +SKIP
    >>> out.C.shape                                                 # doctest: +SKIP
    (256, 128)
    """

    def __init__(self, engine: Any, module: "Module", strict: bool):
        super().__init__(engine, module, strict)
        self._async: Optional[threading.Lock] = None

    @api
    def execute_async(self, **arrays: Any) -> None:
        """Starts the run :meth:`execute` does and returns at once; the arrays must not be
        touched until :meth:`synchronize`.

        Raises
        ------
        RuntimeError
            The program is running (another thread's call, or an ``execute_async`` not yet
            synchronized).
        """
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(
                f"program `{self.name}` is busy: a run is in progress (another thread's call, or an "
                "execute_async not yet synchronized); call synchronize() first"
            )
        try:
            info = {d["name"]: d for d in self.tensor_info()}
            self._check_names(arrays, info, "")
            self._engine.execute_async(**{n: self._prepared(n, a, info[n]) for n, a in arrays.items()})
        except Error as e:
            self._lock.release()
            raise self._module._task_note(e) from None
        except BaseException:
            self._lock.release()
            raise
        self._async = self._lock

    @api
    def synchronize(self) -> Dict[str, Any]:
        """Waits for the run :meth:`execute_async` started (Ctrl-C cancels it) and returns its
        statistics, or raises its error."""
        if self._async is None:
            raise RuntimeError(f"program `{self.name}`: no run in progress (call execute_async first)")
        try:
            stats = self._engine.synchronize()
        except Error as e:
            raise self._module._task_note(e) from None
        finally:
            self._async = None
            self._lock.release()
        self._report(stats)
        return dict(stats)

    def is_complete(self) -> bool:
        """Whether no run is in progress (or the one in progress has finished)."""
        return bool(self._engine.is_complete())

    def write_trace(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the Chrome trace (chrome://tracing, Perfetto) of the last run: one event per
        task, named by its kernel (needs ``compile(..., trace=True)``)."""
        self._engine.write_trace(os.fspath(path))


class PlanProgram(_Base):
    """A compiled module of plans (Plan-Descriptor-Execute): calling it runs every plan in
    declaration order on the given arrays (see :meth:`Program.__call__`)."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_level() -> int:
    """The ``stacklevel`` of a warning that names the user's line calling into the package."""
    f = sys._getframe(1)
    level = 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PACKAGE_DIR):
        f = f.f_back  # type: ignore[assignment]
        level += 1
    return level


def _allocate(d: Dict[str, Any], torch_like: Any) -> Any:
    """A zeroed array for tensor ``d``: torch when ``torch_like`` is a torch tensor, else numpy
    (bf16: ``ml_dtypes.bfloat16`` when installed, else ``uint16`` bits)."""
    shape = tuple(int(x) for x in d["shape"])
    if torch_like is not None:
        import torch  # type: ignore[import-not-found, unused-ignore]

        return torch.zeros(shape, dtype=getattr(torch, _TORCH_DTYPES[d["dtype"]]))
    import numpy as np

    if d["dtype"] == "bf16":
        try:
            import ml_dtypes

            return np.zeros(shape, dtype=ml_dtypes.bfloat16)
        except ImportError:
            return np.zeros(shape, dtype=np.uint16)
    return np.zeros(shape, dtype=_NUMPY_DTYPES[d["dtype"]])


def _names(xs: Iterable[str]) -> str:
    return ", ".join(xs)
