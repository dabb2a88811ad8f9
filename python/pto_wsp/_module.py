"""A module written in Python, assembled into ``.wsp`` text and handed to the Rust side.

Why: the Rust crates own parsing, validation, lowering and running; the Python front end only has
to produce the text they read — the same text a ``.wsp`` file holds — and a map from each line
of it back to the user's Python ``file:line``, so that Rust's errors can be reported there.

Promises: ``build(entry, schedule=...)`` declares exactly what the entry (and the workloads it
calls, the schedule, ``extra``) refer to, each kind in the order the Python created it, plus the
``//@ alias`` (kernels' ``alias=``) and ``//@ bind`` (symbols' and tensors' ``bind=``) lines; the
result is parsed and validated by ``Module.from_text``. Every ``path:line:column`` of the
generated text in an error message is replaced by the Python ``file:line`` it came from (and the
generated position, in parentheses).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import _where
from ._decl import Decl, Kernel, Symbol, Tensor
from ._pto_wsp import CompileError, Module, RunError, ValidationError
from ._trace import Pipeline, Workload

_KINDS = ["symbol", "slot", "tensor", "axis", "kernel", "workload", "pipeline"]


def _collect(roots: Iterable[Any]) -> List[Decl]:
    seen: Dict[int, Decl] = {}
    stack = list(roots)
    while stack:
        d = stack.pop()
        if not isinstance(d, Decl) or id(d) in seen:
            continue
        seen[id(d)] = d
        stack.extend(d.deps())
    return sorted(seen.values(), key=lambda d: (_KINDS.index(d.kind), d.order))


def _bind_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(str(int(x)) for x in v) + "]"
    if hasattr(v, "tolist"):
        return _bind_text(v.tolist())
    return str(v)


def render(entry: Any, schedule: Any = None, extra: Sequence[Decl] = ()) -> Tuple[str, List[_where.Loc]]:
    """The module's text and, per line, the Python place it came from."""
    roots: List[Any] = [entry, *extra]
    if schedule is not None:
        roots += schedule.deps()
    decls = _collect(roots)
    out: List[Tuple[str, _where.Loc]] = []
    for k in decls:
        if isinstance(k, Kernel) and k.alias is not None:
            out.append((f"//@ alias {k.name}={k.alias}", k.loc))
    bound: List[Any] = [d for d in decls if isinstance(d, Symbol)]
    bound += [d for d in decls if isinstance(d, Tensor)]
    for b in bound:
        if b.bind is not None:
            out.append((f"//@ bind {b.name}={_bind_text(b.bind)}", b.loc))
    kind = None
    for d in decls:
        if kind is not None and (d.kind != kind or d.kind in ("workload", "pipeline") or "\n" in _decl(d)):
            out.append(("", d.loc))
        elif kind is None and out:
            out.append(("", d.loc))
        kind = d.kind
        if isinstance(d, (Workload, Pipeline)):
            d.render(out)
        else:
            for i, line in enumerate(_decl(d).split("\n")):
                out.append((line, d.loc))
    if schedule is not None:
        out.append(("", entry.loc))
        schedule.render(out)
    return "\n".join(t for t, _ in out) + "\n", [loc for _, loc in out]


def _decl(d: Decl) -> str:
    return d.decl_text()  # type: ignore[attr-defined]


class BuiltModule:
    """A module built from Python: the Rust ``Module`` (``.module``) plus the map of its text's
    lines to the Python that wrote them. ``compile`` and errors report Python ``file:line``."""

    def __init__(self, module: Module, text: str, path: str, locs: List[_where.Loc]):
        self.module = module
        self.generated_text = text
        self.path = path
        self.locs = locs

    def to_text(self) -> str:
        """The canonical text (``pto-wsp fmt`` of the generated text)."""
        return self.module.to_text()

    @property
    def entry(self) -> Optional[str]:
        return self.module.entry

    @property
    def tensors(self) -> List[str]:
        return self.module.tensors

    def compile(self, **kw: Any) -> "BuiltProgram":
        """``Module.compile`` (same arguments); errors name the Python ``file:line``."""
        try:
            program = self.module.compile(**kw)
        except CompileError as e:
            raise CompileError(remap(str(e), self.path, self.locs)) from None
        tasks: Dict[str, List[_where.Loc]] = {}
        for line, loc in zip(self.generated_text.split("\n"), self.locs):
            m = re.match(r"\s*task (\w+)\(", line)
            if m and loc not in tasks.setdefault(m.group(1), []):
                tasks[m.group(1)].append(loc)
        return BuiltProgram(program, tasks)

    def expand(self, bind: Optional[Dict[str, Any]] = None, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """``Module.expand``: the task list (one dict per task)."""
        return self.module.expand(bind=bind, limit=limit)

    def __repr__(self) -> str:
        return f"<pto_wsp.BuiltModule {self.entry} from {self.path}>"


class BuiltProgram:
    """A ``Program`` compiled from a module built in Python: the same methods (``execute``,
    ``execute_async``, ``synchronize``, ``stats``, ``write_trace``, ...); a run's error that
    names a task (``task #3 (`k`)``) also names the Python lines that wrote tasks of that kernel.
    ``.program`` is the ``Program``."""

    def __init__(self, program: Any, tasks: Dict[str, List[_where.Loc]]):
        self.program = program
        self._tasks = tasks

    def _where(self, e: RunError) -> RunError:
        message = str(e)
        m = re.search(r"task #\d+ \(`(\w+)`\)", message)
        locs = self._tasks.get(m.group(1), []) if m else []
        if m and locs:
            message += f"\n  = note: tasks of `{m.group(1)}` are written at " + ", ".join(map(str, locs))
        return RunError(message)

    def execute(self, **arrays: Any) -> Dict[str, Any]:
        """``Program.execute``."""
        try:
            return self.program.execute(**arrays)
        except RunError as e:
            raise self._where(e) from None

    def execute_async(self, **arrays: Any) -> None:
        """``Program.execute_async``."""
        try:
            self.program.execute_async(**arrays)
        except RunError as e:
            raise self._where(e) from None

    def synchronize(self) -> Dict[str, Any]:
        """``Program.synchronize``."""
        try:
            return self.program.synchronize()
        except RunError as e:
            raise self._where(e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.program, name)


def remap(message: str, path: str, locs: List[_where.Loc]) -> str:
    """``message`` with each ``path:LINE:COL`` replaced by the Python place of that line."""

    def sub(m: "re.Match[str]") -> str:
        line = int(m.group(1))
        if 1 <= line <= len(locs):
            return f"{locs[line - 1]} (generated .wsp {m.group(1)}:{m.group(2)})"
        return m.group(0)

    return re.sub(re.escape(path) + r":(\d+):(\d+)", sub, message)


def build(entry: Any, schedule: Any = None, extra: Sequence[Decl] = ()) -> BuiltModule:
    """Assembles and validates the module of ``entry`` (a ``@workload`` or ``@pipeline``)."""
    if not isinstance(entry, (Workload, Pipeline)):
        raise TypeError(f"a module is built from a @workload or @pipeline, not {entry!r}")
    text, locs = render(entry, schedule, extra)
    path = f"<python {entry.name}>"
    try:
        module = Module.from_text(text, path=path)
    except ValidationError as e:
        raise ValidationError(remap(str(e), path, locs)) from None
    return BuiltModule(module, text, path, locs)
