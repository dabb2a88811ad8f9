"""Modules: the ``.wsp`` text of a module read by the Rust side, and modules written in Python,
assembled into that text with a map back to the user's lines.

Why: the Rust crates own parsing, validation, lowering and running; the Python front end only
has to produce the text they read — the same text a ``.wsp`` file holds — and a map from each
line of it back to the user's Python ``file:line:column``, so that Rust's errors are reported
there.

Promises: ``build(entry, schedule=...)`` declares exactly what the entry (and the workloads it
calls, the schedule, ``extra``) refer to, each kind in the order the Python created it, plus the
``//@ alias`` (kernels' ``alias=``), ``//@ bind`` (symbols' and tensors' ``bind=``) and ``//@ fill``
(tensors' ``fill=``) lines; the result is parsed and validated by the Rust side. For a module built in Python every error the
Rust side reports at a line of the generated text is re-rendered at the Python place that line
came from (``file`` / ``line`` / ``column`` of the exception are the user's), with the generated
line quoted in a note.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _pto_wsp, _where
from ._decl import Decl, Kernel, Symbol, Tensor
from .errors import Error, ValidationError, _render, api

if TYPE_CHECKING:
    from .program import PlanProgram, Program

_KINDS = ["symbol", "slot", "tensor", "axis", "kernel", "workload", "pipeline", "space", "tiers", "plan"]

# An `error:` block of the Rust renderer: message, ` --> file:line:column`, source, caret, notes.
_BLOCK = re.compile(r"^error: (?P<message>.*?)\n(?P<rest>(?:(?!error: ).*\n?)*)", re.M)


class Module:
    """A pto-wsp module: declarations, workloads, pipelines, a schedule, plans.

    Read from the text format (:meth:`from_text`, :meth:`from_file`) or built in Python
    (``workload.module()``, :func:`pto_wsp.build`: a :class:`BuiltModule`). Compile it with
    :meth:`compile` or :func:`pto_wsp.compile`.

    Examples
    --------
    >>> import pto_wsp
    >>> m = pto_wsp.Module.from_text('''
    ... tensor X: f32[4, 8];
    ... tensor Y: f32[4, 8];
    ... kernel relu(in x: f32[4, 8], out y: f32[4, 8]);
    ... workload main() { task relu(X[0 +: 4, 0 +: 8], Y[0 +: 4, 0 +: 8]); }
    ... ''')
    >>> m.tensors
    ['X', 'Y']
    """

    def __init__(self, inner: Any, path: str, text: str, locs: Optional[List[_where.Loc]] = None):
        self._inner = inner
        self.path = path
        self._text = text
        self._locs = locs

    # ----- reading ----------------------------------------------------------------------

    @classmethod
    @api
    def from_text(cls, text: str, path: Optional[str] = None) -> "Module":
        """Parses and validates ``text``.

        Parameters
        ----------
        text : str
            A module in the text format (``docs/FORMAT.md``).
        path : str, optional
            The name errors give the text (default ``<text>``).

        Raises
        ------
        ValidationError
            With ``file`` (``path``), ``line`` and ``column`` of the first mistake.
        """
        if not isinstance(text, str):
            raise TypeError(f"Module.from_text takes the module's text (a str), not {type(text).__name__}")
        name = "<text>" if path is None else str(path)
        inner = _pto_wsp.Module.from_text(text, path=name)
        return cls(inner, name, text)

    @classmethod
    @api
    def from_file(cls, path: Union[str, "os.PathLike[str]"]) -> "Module":
        """Reads, parses and validates the ``.wsp`` file at ``path``.

        Raises
        ------
        ValidationError
            The file cannot be read, or its text is not valid (at its ``file:line:column``).
        """
        p = os.fspath(path)
        try:
            with open(p, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ValidationError(f"error: cannot read `{p}`: {e.strerror or e}\n", p, None, None) from None
        return cls.from_text(text, path=p)

    # ----- what it holds ------------------------------------------------------------------

    def to_text(self) -> str:
        """The canonical text: what ``pto-wsp fmt`` prints (the leading comment block, then the
        printer's output)."""
        return str(self._inner.to_text())

    @property
    def entry(self) -> Optional[str]:
        """The name of the entry workload or pipeline (``None`` for a module of plans)."""
        return self._inner.entry  # type: ignore[no-any-return]

    @property
    def tensors(self) -> List[str]:
        """The declared tensors' names, in declaration order."""
        return list(self._inner.tensors)

    @property
    def plans(self) -> List[str]:
        """The plans' names, in the order they run."""
        return list(self._inner.plans)

    @property
    def module(self) -> "Module":
        """The module itself (kept for code written against older versions)."""
        return self

    @api
    def expand(self, bind: Optional[Dict[str, Any]] = None, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The tasks the module generates under ``bind``, in program order, as ``pto-wsp expand``
        lists them.

        Parameters
        ----------
        bind : dict, optional
            Symbol (or integer tensor) values, as :meth:`compile` takes them.
        limit : int, optional
            Stop after this many tasks.

        Returns
        -------
        list of dict
            One per task: ``kernel``, ``declared``, ``pool``, ``executor``, ``stream``,
            ``priority``, ``cost``, ``params`` (name to value) and ``regions`` (dicts of
            ``tensor``, ``access``, ``start``, ``size``).
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            from .errors import ArgumentValueError

            raise ArgumentValueError(f"limit={limit!r}: a number of tasks, 0 or more")
        try:
            return list(self._inner.expand(bind=bind, limit=limit))
        except Error as e:
            raise self._remap(e) from None

    @api
    def compile(
        self,
        target: str = "cpu_sim",
        threads: int = 0,
        *,
        bind: Optional[Dict[str, Any]] = None,
        strict: bool = False,
        device_gen: bool = False,
        debug_checks: bool = False,
        trace: bool = False,
        coverage: bool = True,
    ) -> "Union[Program, PlanProgram]":
        """Compiles the module into a program (see :func:`pto_wsp.compile`)."""
        from .program import PlanProgram, Program

        if not isinstance(target, str):
            raise TypeError(f"target={target!r}: a target name such as 'cpu_sim'")
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise TypeError(f"threads={threads!r}: the number of worker threads, an int (0: one per core)")
        if bind is not None and not isinstance(bind, dict):
            raise TypeError(f"bind= takes a dict of symbol name to value, not {type(bind).__name__}")
        try:
            engine = self._inner.compile(
                target=target,
                threads=threads,
                device_gen=device_gen,
                debug_checks=debug_checks,
                bind=bind,
                trace=trace,
                coverage=coverage,
            )
        except Error as e:
            raise self._remap(e) from None
        if isinstance(engine, _pto_wsp.PlanProgram):
            return PlanProgram(engine, self, strict)
        return Program(engine, self, strict)

    @api
    def emit(self, target: str, *, bind: Optional[Dict[str, Any]] = None) -> Union[bytes, Dict[str, bytes]]:
        """Compiles the module for an emitting back end and returns what it writes.

        Parameters
        ----------
        target : str
            ``"pto_isa"`` (each kernel with a body as PTO-ISA C++, a host driver and a Makefile),
            ``"ascend_a2a3sim"`` / ``"ascend_a2a3"`` (the workload for the Ascend runtime
            simpler) or ``"bytecode"``; ``pto_wsp.backends()`` lists them.
        bind : dict, optional
            Values baked into the artefact, over the text's ``//@ bind`` lines.

        Returns
        -------
        bytes or dict of str to bytes
            One file, or a tree of files by relative path (write them out, then ``make -C DIR``
            for ``pto_isa``).

        Raises
        ------
        CompileError
            What the back end cannot express, at its place (the user's Python line for a
            module built in Python).
        """
        if not isinstance(target, str):
            raise TypeError(f"target={target!r}: a target name such as 'pto_isa'")
        if bind is not None and not isinstance(bind, dict):
            raise TypeError(f"bind= takes a dict of symbol name to value, not {type(bind).__name__}")
        try:
            out = self._inner.emit(target, bind=bind)
        except Error as e:
            raise self._remap(e) from None
        return out if isinstance(out, bytes) else dict(out)

    def __repr__(self) -> str:
        return repr(self._inner).replace("pto_wsp.Module", f"pto_wsp.{type(self).__name__}")

    # ----- errors at the user's place -----------------------------------------------------

    def _remap(self, e: Error) -> Error:
        """``e`` as it should reach the user: for a module built in Python, at the Python place."""
        if not self._locs:
            return e
        text, loc = remap(_in_python_terms(str(e)), self.path, self._locs, self._text)
        if loc is None:
            return type(e)(text)
        return type(e)(text, loc.file, loc.line, loc.column)

    def _task_note(self, e: Error) -> Error:
        """A run error naming a task (``task #3 (`k`)``) with the Python lines that write tasks of
        that kernel, for a module built in Python."""
        e = self._remap(e)
        if not self._locs:
            return e
        message = str(e)
        m = re.search(r"task #\d+ \(`(\w+)`\)", message)
        if not m:
            return e
        locs: List[_where.Loc] = []
        for line, loc in zip(self._text.split("\n"), self._locs):
            t = re.match(r"\s*task (\w+)\(", line)
            if t and t.group(1) == m.group(1) and loc not in locs:
                locs.append(loc)
        if not locs:
            return e
        message += f"\n  = note: tasks of `{m.group(1)}` are written at " + ", ".join(map(str, locs))
        first = locs[0]
        return type(e)(message, first.file, first.line, first.column)


class BuiltModule(Module):
    """A module built from Python (``workload.module()``, :func:`build`): a :class:`Module`
    whose errors name the user's Python ``file:line:column``.

    Attributes
    ----------
    generated_text : str
        The text the Python produced (before the canonical print).
    locs : list
        Per line of ``generated_text``, the Python place it came from.
    """

    @property
    def generated_text(self) -> str:
        """The text the Python produced (before the canonical print of :meth:`to_text`)."""
        return self._text

    @property
    def locs(self) -> List[_where.Loc]:
        """Per line of :attr:`generated_text`, the Python place (file, line, column) it came from."""
        return list(self._locs or [])

    def __repr__(self) -> str:
        return f"<pto_wsp.BuiltModule {self.entry or ', '.join(self.plans)} from {self.path}>"


def _in_python_terms(message: str) -> str:
    """A message of the text format's world said as a Python user acts on it."""
    return re.sub(
        r"give it a body in tile instructions, or map it to a built-in taking the same parameters "
        r"with a `//@ alias (\w+)=BUILTIN` line",
        lambda m: "write its body with tile operations (`from pto_wsp import tile`) in the `@kernel` "
        'function, or run a built-in taking the same parameters: `@kernel(alias="BUILTIN")`',
        message,
    )


def remap(message: str, path: str, locs: List[_where.Loc], text: str = "") -> Tuple[str, Optional[_where.Loc]]:
    """``message`` with each rendered error at ``path:LINE:COL`` of the generated text rendered at
    the Python place of that line instead (the generated line quoted in a note); and the first
    such place."""
    first: Optional[_where.Loc] = None
    generated = text.split("\n")
    out: List[str] = []
    pos = 0
    for m in _BLOCK.finditer(message):
        out.append(message[pos : m.start()])
        pos = m.end()
        rest = m.group("rest")
        arrow = re.search(re.escape(path) + r":(\d+):(\d+)", rest)
        line = int(arrow.group(1)) if arrow else 0
        if arrow is None or not 1 <= line <= len(locs):
            out.append(m.group(0))
            continue
        loc = locs[line - 1]
        first = first or loc
        notes = [n for n in rest.split("\n") if n.strip().startswith("= note:")]
        block = _render(m.group("message"), loc.file, loc.line, loc.column)
        src = generated[line - 1].strip() if line - 1 < len(generated) else ""
        pad = " " * len(str(loc.line))
        for n in notes:
            block += f"{pad} {n.strip()}\n"
        if src:
            block += f"{pad} = note: in the generated module, line {line}: `{src}`\n"
        out.append(block)
    out.append(message[pos:])
    return "".join(out), first


# ----- building -------------------------------------------------------------------------------


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


def render(entries: Sequence[Any], schedule: Any = None, extra: Sequence[Decl] = ()) -> Tuple[str, List[_where.Loc]]:
    """The module's text and, per line, the Python place it came from."""
    roots: List[Any] = [*entries, *extra]
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
    for d in decls:
        if isinstance(d, Tensor) and d.fill is not None:
            out.append((f"//@ fill {d.name}={d.fill}", d.loc))
    kind = None
    for d in decls:
        lines = _lines(d)
        if kind is not None and (d.kind != kind or d.kind in ("workload", "pipeline", "plan") or len(lines) > 1):
            out.append(("", d.loc))
        elif kind is None and out:
            out.append(("", d.loc))
        kind = d.kind
        out.extend(lines)
    if schedule is not None:
        out.append(("", schedule.target.loc))
        schedule.render(out)
    return "\n".join(t for t, _ in out) + "\n", [loc for _, loc in out]


def _lines(d: Decl) -> List[Tuple[str, _where.Loc]]:
    render_into = getattr(d, "render", None)
    if render_into is not None:
        out: List[Tuple[str, _where.Loc]] = []
        render_into(out)
        return out
    decl_lines = getattr(d, "decl_lines", None)
    if decl_lines is not None:
        return list(decl_lines())
    return [(t, d.loc) for t in d.decl_text().split("\n")]  # type: ignore[attr-defined]


@api
def build(entry: Any, schedule: Any = None, extra: Sequence[Decl] = ()) -> BuiltModule:
    """Assembles and validates the module of a ``@workload`` or ``@pipeline`` (and what it
    refers to), or of plans.

    Parameters
    ----------
    entry : Workload, Pipeline, Plan, or a list of Plans
        The entry point: a workload or pipeline, or the plans of a module of plans (they run in
        the order given).
    schedule : Schedule, optional
        The schedule (usually built by chaining on the workload: ``w.dispatch(...).module()``).
    extra : list of declarations, optional
        Declarations to include though nothing refers to them.

    Returns
    -------
    BuiltModule

    Raises
    ------
    ValidationError
        At the user's Python line of the first mistake.
    """
    from ._plan import Plan
    from ._trace import Pipeline, Workload

    entries = list(entry) if isinstance(entry, (list, tuple)) else [entry]
    if not entries or not all(isinstance(e, (Workload, Pipeline, Plan)) for e in entries):
        raise TypeError(f"a module is built from a @workload, a @pipeline or plans, not {entry!r}")
    if len(entries) > 1 and not all(isinstance(e, Plan) for e in entries):
        raise TypeError("a module has one workload or pipeline; only plans may be given as a list")
    text, locs = render(entries, schedule, extra)
    name = entries[0].name if len(entries) == 1 else "+".join(e.name for e in entries)
    path = f"<python {name}>"
    try:
        inner = _pto_wsp.Module.from_text(text, path=path)
    except ValidationError as e:
        msg, loc = remap(str(e), path, locs, text)
        if loc is None:
            raise ValidationError(msg) from None
        raise ValidationError(msg, loc.file, loc.line, loc.column) from None
    return BuiltModule(inner, path, text, locs)
