"""Workloads and pipelines written as Python functions, traced once into ``.wsp`` statements.

Why: a workload is written as the Python a user would write (``for b, h in P(B, H):``,
``with P.when(c):``, ``matmul(A[...], B[...], C[...])``); running the function once with
symbolic loop variables records each construct as the statement of the text format, with the
user's ``file:line`` and loop variable names.

Promises: each ``for`` over ``P(...)`` / ``P.seq`` / ``P.sel`` / ``ch.consume()`` runs its body
exactly once and records one loop; a loop variable used after its loop has ended raises at the
line that used it; statements outside a ``@workload`` / ``@process`` raise; a trace that fails
leaves no half-built workload behind (the next attempt starts afresh).
"""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from . import _where
from ._decl import (
    Axis,
    Decl,
    FrontError,
    Kernel,
    Region,
    Sparse,
    Tensor,
    _name,
    _scalar_type,
    expr_deps,
    i64,
)
from ._expr import Expr, lit
from .errors import api

if TYPE_CHECKING:
    from ._module import BuiltModule
    from .program import Program
    from ._schedule import Schedule

# ----- recorded statements ------------------------------------------------------------------


class LoopVar:
    """What a loop (or ``consume``) variable's name refers to: live while its body is traced."""

    def __init__(self, name: str, loc: _where.Loc):
        self.name = name
        self.loc = loc
        self.active = True


def _lit_at(v: Any, template: str, loc: _where.Loc) -> Expr:
    """``lit(v)``, a value that is not an expression reported at the user's line."""
    try:
        return lit(v)
    except (TypeError, ValueError) as e:
        what = template.split("(")[0].replace("{}", "...")
        raise FrontError(f"in `{what}`: {e}", loc) from None


def _check_scope(exprs: Sequence[Expr], loc: _where.Loc) -> None:
    for e in exprs:
        for n in e.names():
            if isinstance(n.ref, LoopVar) and not n.ref.active:
                raise FrontError(
                    f"loop variable `{n.ref.name}` is used outside its loop (the loop at "
                    f"{n.ref.loc})",
                    loc,
                )


class Line:
    """One statement of one line: ``template`` with a ``{}`` per expression."""

    def __init__(self, template: str, exprs: Sequence[Any], decls: Sequence[Decl] = ()):
        self.loc = _where.here()
        self.exprs = [_lit_at(e, template, self.loc) for e in exprs]
        _check_scope(self.exprs, self.loc)
        self.template = template
        self.decls = list(decls)

    def deps(self) -> List[Any]:
        return self.decls + [d for e in self.exprs for d in expr_deps(e)]

    def render(self, indent: int, out: List[Tuple[str, _where.Loc]]) -> None:
        text = self.template.format(*(e.text() for e in self.exprs))
        out.append(("    " * indent + text, self.loc))


class Block(Line):
    """A statement with a body (and, for ``if``, an ``else`` body)."""

    def __init__(self, template: str, exprs: Sequence[Any], decls: Sequence[Decl] = ()):
        super().__init__(template, exprs, decls)
        self.body: List[Line] = []
        self.orelse: Optional[List[Line]] = None

    def deps(self) -> List[Any]:
        out = super().deps()
        for s in self.body + (self.orelse or []):
            out += s.deps()
        return out

    def render(self, indent: int, out: List[Tuple[str, _where.Loc]]) -> None:
        head = self.template.format(*(e.text() for e in self.exprs))
        pad = "    " * indent
        out.append((f"{pad}{head} {{", self.loc))
        for s in self.body:
            s.render(indent + 1, out)
        if self.orelse:
            out.append((f"{pad}}} else {{", self.loc))
            for s in self.orelse:
                s.render(indent + 1, out)
        out.append((f"{pad}}}", self.loc))


# ----- the tracing state --------------------------------------------------------------------


class _State(threading.local):
    def __init__(self) -> None:
        self.bodies: List[List[Line]] = []
        self.pipeline: Optional["Pipeline"] = None
        # While a ``@process`` body is traced: the channels it sends on and consumes.
        self.channel_uses: Optional[Dict[str, Set[str]]] = None


_STATE = _State()


def _body(what: str) -> List[Line]:
    if not _STATE.bodies:
        raise FrontError(f"{what} is a statement: write it inside a `@workload` or `@process` function")
    return _STATE.bodies[-1]


def emit(stmt: Line) -> None:
    """Appends a statement to the body being traced."""
    _body(stmt.template.split(" ")[0]).append(stmt)


class _Open:
    """A context manager that makes a block's body the current one."""

    def __init__(self, block: Block, body: List[Line]):
        self.block = block
        self.body = body

    def __enter__(self) -> None:
        _STATE.bodies.append(self.body)

    def __exit__(self, *exc: Any) -> None:
        if _STATE.bodies and _STATE.bodies[-1] is self.body:
            _STATE.bodies.pop()


def _block(template: str, exprs: Sequence[Any] = (), decls: Sequence[Decl] = ()) -> _Open:
    b = Block(template, exprs, decls)
    emit(b)
    return _Open(b, b.body)


# ----- loops ------------------------------------------------------------------------------


class _Loops:
    """The iterable of ``P(...)``: one loop per axis, nested; yields the loop variables."""

    def __init__(self, word: str, axes: Sequence[Any], names: Optional[Sequence[str]]):
        self.loc = _where.here()
        self.word = word
        self.axes = list(axes)
        for a in self.axes:
            if not isinstance(a, Axis):
                raise FrontError(f"`P(...)` takes axes (Dense[N], DenseDyn(n), ...), not {a!r}", self.loc)
            if isinstance(a, Sparse) and word != "select":
                raise FrontError(f"sparse axis `{a.name}` is iterated by `P.sel({a.name})`", self.loc)
            if word == "select" and not isinstance(a, Sparse):
                raise FrontError(f"`P.sel` takes a sparse axis; `{a.name}` is not", self.loc)
        targets = list(names) if names is not None else _where.for_targets()
        want = sum(a.nvars for a in self.axes)
        if targets is None or None in targets:
            raise FrontError(
                "cannot read the loop variable names: write `for i, j in P(...)` in a source "
                "file, or pass `names=(...)`",
                self.loc,
            )
        if len(targets) != want:
            raise FrontError(
                f"{', '.join(a.name for a in self.axes)} give {want} loop variable(s), the "
                f"`for` names {len(targets)}",
                self.loc,
            )
        self.names: List[str] = targets  # type: ignore[assignment]

    def __iter__(self) -> Iterator[Any]:
        opened: List[_Open] = []
        vars_: List[LoopVar] = []
        exprs: List[Expr] = []
        k = 0
        for a in self.axes:
            names = self.names[k : k + a.nvars]
            k += a.nvars
            o = _block(f"{self.word} {', '.join(names)} in {a.name}", (), [a])
            o.block.loc = self.loc
            o.__enter__()
            opened.append(o)
            for n in names:
                v = LoopVar(n, self.loc)
                vars_.append(v)
                exprs.append(Expr("name", (n,), v))
        try:
            yield exprs[0] if len(exprs) == 1 else tuple(exprs)
        finally:
            for v in vars_:
                v.active = False
            for o in reversed(opened):
                o.__exit__()


class _P:
    """``P(A, B)`` / ``P.grid``: nested ``parallel_for``; ``P.seq``: ``for_each``; ``P.sel``:
    ``select``; ``P.when`` / ``P.otherwise``: ``if`` / ``else``; ``P.while_`` / ``P.break_if``."""

    def __call__(self, *axes: Axis, names: Optional[Sequence[str]] = None) -> _Loops:
        return _Loops("parallel_for", axes, names)

    def grid(self, *axes: Axis, names: Optional[Sequence[str]] = None) -> _Loops:
        """Nested ``parallel_for`` over the axes (the same as ``P(...)``)."""
        return _Loops("parallel_for", axes, names)

    def seq(self, *axes: Axis, names: Optional[Sequence[str]] = None) -> _Loops:
        """Nested ``for_each``: iteration i+1 after iteration i."""
        return _Loops("for_each", axes, names)

    def sel(self, axis: Sparse, names: Optional[Sequence[str]] = None) -> _Loops:
        """``select ROW, IDX in AXIS``: one iteration per stored entry of a sparse axis."""
        return _Loops("select", [axis], names)

    def when(self, cond: Any) -> _Open:
        """``with P.when(cond):`` is ``if cond { ... }``."""
        return _block("if {}", [cond])

    def otherwise(self) -> _Open:
        """``with P.otherwise():`` right after a ``P.when`` block is its ``else { ... }``."""
        body = _body("`P.otherwise()`")
        last = body[-1] if body else None
        if not isinstance(last, Block) or not last.template.startswith("if ") or last.orelse is not None:
            raise FrontError("`P.otherwise()` must come right after a `with P.when(...):` block")
        last.orelse = []
        return _Open(last, last.orelse)

    def while_(self, cond: Any, max: Any) -> _Open:  # noqa: A002 - the text's word
        """``with P.while_(cond, max=N):`` is ``while cond max N { ... }``."""
        return _block("while {} max {}", [cond, max])

    def break_if(self, cond: Any) -> None:
        """``break if cond;``: leaves the innermost ``P.while_``."""
        emit(Line("break if {};", [cond]))

    def continue_(self) -> None:
        """``continue;`` in a plan's generator: the next iteration of the innermost loop."""
        emit(Line("continue;", []))


P = _P()


def combine() -> _Open:
    """``with combine():`` is ``combine { ... }``."""
    return _block("combine")


def sequential() -> _Open:
    """``with sequential():`` is ``sequential { ... }``."""
    return _block("sequential")


def _float_text(v: Any, what: str) -> str:
    f = float(v)
    t = repr(f)
    if t in ("inf", "-inf", "nan"):
        raise FrontError(f"{what}: {t} is not a float literal")
    return t


def task(k: Kernel, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
    """Records ``task K(args);`` for a kernel call inside a workload."""
    params = k.params
    if len(args) > len(params):
        raise FrontError(f"kernel `{k.name}` takes {len(params)} arguments, {len(args)} given")
    bound: Dict[str, Any] = {}
    for p, a in zip(params, args):
        bound[p.name] = a
    for n, a in kwargs.items():
        if not any(p.name == n for p in params):
            raise FrontError(f"kernel `{k.name}` has no parameter `{n}` ({', '.join(p.name for p in params)})")
        if n in bound:
            raise FrontError(f"kernel `{k.name}`: parameter `{n}` given twice")
        bound[n] = a
    parts: List[str] = []
    exprs: List[Any] = []
    decls: List[Decl] = [k]
    for p in params:
        if p.name not in bound:
            raise FrontError(f"kernel `{k.name}`: no argument for parameter `{p.name}`")
        a = bound[p.name]
        if p.direction is not None:
            if isinstance(a, Tensor):
                a = a.whole()
            if not isinstance(a, Region):
                raise FrontError(
                    f"kernel `{k.name}`: parameter `{p.name}` is a tile; pass a region such as "
                    f"`T[i * 16:(i + 1) * 16, :]`, not {a!r}"
                )
            parts.append(a.template())
            exprs += a.exprs()
            decls.append(a.tensor)
        elif p.type.text in ("f32", "f64"):
            if isinstance(a, Expr):
                raise FrontError(f"kernel `{k.name}`: parameter `{p.name}` ({p.type.text}) takes a float constant")
            parts.append(_float_text(a, f"kernel `{k.name}` parameter `{p.name}`"))
        else:
            parts.append("{}")
            exprs.append(a)
    emit(Line(f"task {k.name}({', '.join(parts)});", exprs, decls))


# ----- workloads ----------------------------------------------------------------------------


def _params(fn: Callable[..., Any]) -> List[Tuple[str, Any]]:
    out = []
    for n, p in inspect.signature(fn).parameters.items():
        ann = p.annotation
        if isinstance(ann, str):
            ann = eval(ann, fn.__globals__)  # noqa: S307 - the user's own annotation
        t = i64 if ann is inspect.Parameter.empty else _scalar_type(ann, f"parameter `{n}`")
        out.append((n, t))
    return out


def _trace_body(fn: Callable[..., Any], args: Sequence[Any]) -> List[Line]:
    body: List[Line] = []
    depth = len(_STATE.bodies)
    _STATE.bodies.append(body)
    try:
        fn(*args)
        if len(_STATE.bodies) != depth + 1:
            raise FrontError(
                f"`{fn.__name__}` left a loop or block with `break` or `return` (the body of "
                "a pto-wsp loop is traced once; use `P.break_if` / `P.when`)"
            )
    finally:
        del _STATE.bodies[depth:]
    return body


class Schedulable:
    """A workload or pipeline: each schedule directive starts a ``Schedule`` of it (see
    ``_schedule.Schedule`` for what each writes); ``module()`` / ``compile()`` build it without
    a schedule."""

    def _schedule(self) -> "Schedule":
        from ._schedule import Schedule

        return Schedule(self)  # type: ignore[arg-type]

    def executors(self, n: int) -> "Schedule":
        """``executors N;``"""
        return self._schedule().executors(n)

    def dispatch(self, policy: Any) -> "Schedule":
        """``dispatch POLICY;`` (a ``DispatchPolicy``)."""
        return self._schedule().dispatch(policy)

    def streams(self, n: int) -> "Schedule":
        """``streams N;``"""
        return self._schedule().streams(n)

    def stream_by(self, key: Any) -> "Schedule":
        """``stream_by KEY;`` (an expression or a lambda traced once)."""
        return self._schedule().stream_by(key)

    def timing(self, policy: Any) -> "Schedule":
        """``timing POLICY;`` (a ``TimingPolicy``)."""
        return self._schedule().timing(policy)

    def task_graph(
        self, deps: Any = None, ready: Any = None, start: Any = None, trace: Any = None, pools: Any = None
    ) -> "Schedule":
        """``task_graph { ... }`` with the policies given."""
        return self._schedule().task_graph(deps, ready, start, trace, pools)

    def task_window(self, n: int, mode: str = "stall") -> "Schedule":
        """``task_window N MODE;``"""
        return self._schedule().task_window(n, mode)

    def pipeline_depth(self, n: int, scope: str = "global") -> "Schedule":
        """``pipeline_depth N SCOPE;``"""
        return self._schedule().pipeline_depth(n, scope)

    def batch_deps(self, n: int) -> "Schedule":
        """``batch_deps N;``"""
        return self._schedule().batch_deps(n)

    def dispatch_threshold(self, metric: Any, levels: Sequence[Tuple[int, str]], otherwise: str) -> "Schedule":
        """``dispatch_threshold(METRIC) { below B: POOL, ..., else: POOL };``"""
        return self._schedule().dispatch_threshold(metric, levels, otherwise)

    @api
    def module(self, **kw: Any) -> "BuiltModule":
        """The module of this workload or pipeline (no schedule): a ``BuiltModule``."""
        from ._module import build

        return build(self, **kw)

    @api
    def compile(self, **kw: Any) -> "Program":
        """``self.module().compile(**kw)``: a program callable like a function."""
        return self.module().compile(**kw)  # type: ignore[return-value]


class Workload(Decl, Schedulable):
    """``workload NAME(params) { ... }`` from a ``@workload`` function, traced when first used."""

    kind = "workload"

    def __init__(self, fn: Callable[..., Any], name: Optional[str] = None):
        super().__init__(name or fn.__name__)
        self.fn = fn
        self.params = _params(fn)
        self.__doc__ = fn.__doc__
        self._body: Optional[List[Line]] = None

    def body(self) -> List[Line]:
        """The workload's statements (the function traced on first use)."""
        if self._body is None:
            args = [Expr("name", (n,), None) for n, _ in self.params]
            self._body = _trace_body(self.fn, args)
        return self._body

    def deps(self) -> List[Any]:
        return [d for s in self.body() for d in s.deps()]

    def render(self, out: List[Tuple[str, _where.Loc]]) -> None:
        """Appends the workload's lines, each with its Python place."""
        ps = ", ".join(f"{n}: {t.text}" for n, t in self.params)
        out.append((f"workload {self.name}({ps}) {{", self.loc))
        for s in self.body():
            s.render(1, out)
        out.append(("}", self.loc))

    def __call__(self, *args: Any) -> None:
        """Inside another workload: ``call NAME(args);``."""
        call(self, *args)


def workload(fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None) -> Any:
    """Declares a workload: a Python function whose loops (``for i in P(axis)``) and kernel
    calls are recorded, once, as the program that generates tasks.

    Parameters
    ----------
    fn : function
        Its parameters (annotated with scalar types, default ``i64``) are the workload's.
    name : str, optional
        Default: the function's name.

    Returns
    -------
    Workload
        Chain a schedule on it (``.dispatch(...)``, ``.task_graph(...)``), build it
        (``.module()``) or compile it (``pto_wsp.compile(w)``).

    Examples
    --------
    >>> @workload
    ... def main():
    ...     for i in P(T):
    ...         relu(X[span(i * 16, 16), :], Y[span(i * 16, 16), :])   # doctest: +SKIP
    """
    if fn is None:
        return lambda f: Workload(f, name)
    return Workload(fn, name)


def call(w: Workload, *args: Any) -> None:
    """Inside a workload, calls another workload: ``call W(args);`` (the same as ``w(args)``).

    Parameters
    ----------
    w : Workload
    *args
        One expression per parameter of ``w``.
    """
    if not isinstance(w, Workload):
        raise FrontError(f"`call` takes a workload, not {w!r}")
    if len(args) != len(w.params):
        raise FrontError(f"workload `{w.name}` takes {len(w.params)} arguments, {len(args)} given")
    emit(Line(f"call {w.name}({', '.join('{}' for _ in args)});", args, [w]))


# ----- pipelines (CSP) ---------------------------------------------------------------------


class Channel:
    """``channel NAME[DEPTH];`` inside a ``@pipeline`` function."""

    def __init__(self, depth: int, *, name: Optional[str] = None):
        self.name = _name(name, "channel")
        self.depth = int(depth)
        self.loc = _where.here()
        if _STATE.pipeline is None:
            raise FrontError(f"channel `{self.name}` must be created inside a `@pipeline` function")
        _STATE.pipeline._channels.append(self)

    def send(self, value: Any) -> None:
        """``send CH(value);``"""
        emit(Line(f"send {self.name}({{}});", [value]))
        if _STATE.channel_uses is not None:
            _STATE.channel_uses["send"].add(self.name)

    def consume(self, names: Optional[Sequence[str]] = None) -> Iterator[Expr]:
        """``for i in ch.consume():`` is ``consume CH as i { ... }``."""
        loc = _where.here()
        targets = list(names) if names is not None else _where.for_targets()
        if not targets or len(targets) != 1 or targets[0] is None:
            raise FrontError("write `for i in channel.consume():` (one variable)", loc)
        return self._consume(targets[0], loc)

    def _consume(self, name: str, loc: _where.Loc) -> Iterator[Expr]:
        o = _block(f"consume {self.name} as {name}")
        o.block.loc = loc
        if _STATE.channel_uses is not None:
            _STATE.channel_uses["consume"].add(self.name)
        v = LoopVar(name, loc)
        o.__enter__()
        try:
            yield Expr("name", (name,), v)
        finally:
            v.active = False
            o.__exit__()


class Process:
    """``process NAME(consumes ...; produces ...) { ... }``."""

    def __init__(
        self,
        name: str,
        consumes: Sequence[Channel],
        produces: Sequence[Channel],
        body: List[Line],
        loc: _where.Loc,
        uses: Optional[Dict[str, Set[str]]] = None,
    ):
        self.name = name
        self.consumes = list(consumes)
        self.produces = list(produces)
        self.body = body
        self.loc = loc
        # The channels its body sends on / consumes (what ``connect`` checks against).
        self.uses: Dict[str, Set[str]] = uses or {"send": set(), "consume": set()}
        # Where each listed channel was joined: the ``@process`` line or a ``connect`` call.
        self.joined: Dict[str, _where.Loc] = {c.name: loc for c in [*self.consumes, *self.produces]}


def process(
    fn: Optional[Callable[[], Any]] = None,
    *,
    consumes: Sequence[Channel] = (),
    produces: Sequence[Channel] = (),
    name: Optional[str] = None,
) -> Any:
    """Inside a ``@pipeline`` function, declares (and traces) a process."""

    def make(f: Callable[[], Any]) -> Process:
        pl = _STATE.pipeline
        if pl is None:
            raise FrontError(f"process `{f.__name__}` must be declared inside a `@pipeline` function")
        loc = _where.here()
        saved, saved_uses = _STATE.pipeline, _STATE.channel_uses
        uses: Dict[str, Set[str]] = {"send": set(), "consume": set()}
        _STATE.pipeline, _STATE.channel_uses = None, uses
        try:
            body = _trace_body(f, [])
        finally:
            _STATE.pipeline, _STATE.channel_uses = saved, saved_uses
        p = Process(name or f.__name__, consumes, produces, body, loc, uses)
        pl._processes.append(p)
        return p

    return make if fn is None else make(fn)


def _what(x: Any) -> str:
    if isinstance(x, Process):
        return f"process `{x.name}`"
    if isinstance(x, Channel):
        return f"channel `{x.name}`"
    return repr(x)


def connect(producer: Process, channel: Union[Channel, str], consumer: Process) -> None:
    """Inside a ``@pipeline`` function, after its processes: joins ``producer``'s output
    ``channel`` to ``consumer`` (read it as ``producer -> channel -> consumer``).

    It writes what the text format says in the process headers: ``produces CH`` on the producer
    and ``consumes CH`` on the consumer, so a pipeline built with ``connect`` has the same
    module text as one whose processes list the channel in ``produces=`` / ``consumes=``.
    ``channel`` is a ``Channel`` of this pipeline or its name. Raises ``ValidationError`` at the
    line of the call when the channel is not one of this pipeline's, an argument is not a
    process / channel, the producer does not ``send`` on the channel or the consumer does not
    ``consume`` it, or the channel already has a producer or a consumer (a channel joins exactly
    one of each)."""
    loc = _where.here()
    pl = _STATE.pipeline
    if pl is None:
        raise FrontError(
            "`connect` joins processes of a pipeline: call it inside the `@pipeline` function, "
            "after the `@process` functions it joins",
            loc,
        )
    usage = "write `connect(producer, channel, consumer)`"
    for role, p in (("producer", producer), ("consumer", consumer)):
        if not isinstance(p, Process):
            raise FrontError(f"connect: the {role} must be a `@process`, not {_what(p)}; {usage}", loc)
        if all(q is not p for q in pl._processes):
            raise FrontError(f"connect: process `{p.name}` (at {p.loc}) is not a process of pipeline `{pl.name}`", loc)
    if isinstance(channel, str):
        named = [c for c in pl._channels if c.name == channel]
        if not named:
            known = ", ".join(f"`{c.name}`" for c in pl._channels) or "none"
            raise FrontError(f"connect: unknown channel `{channel}` in pipeline `{pl.name}` (its channels: {known})", loc)
        channel = named[0]
    if not isinstance(channel, Channel):
        raise FrontError(f"connect: the channel must be a `Channel` (or its name), not {_what(channel)}; {usage}", loc)
    if all(c is not channel for c in pl._channels):
        raise FrontError(
            f"connect: unknown channel `{channel.name}` in pipeline `{pl.name}` (it was created "
            f"at {channel.loc}, outside this pipeline)",
            loc,
        )
    ch = channel.name
    if producer is consumer:
        raise FrontError(f"connect: process `{producer.name}` cannot be both ends of channel `{ch}`", loc)
    for role, lists in (("producer", "produces"), ("consumer", "consumes")):
        holder = next((q for q in pl._processes if any(c is channel for c in getattr(q, lists))), None)
        if holder is not None:
            raise FrontError(
                f"connect: channel `{ch}` is connected twice: its {role} is already `{holder.name}` "
                f"(joined at {holder.joined.get(ch, holder.loc)}); a channel has one producer and one consumer",
                loc,
            )
    if ch not in producer.uses["send"]:
        hint = f"; `{consumer.name}` does, so swap them" if ch in consumer.uses["send"] else ""
        raise FrontError(
            f"connect: `{producer.name}` is given as the producer of channel `{ch}` but never sends on it "
            f"(`{ch}.send(...)`){hint}",
            loc,
        )
    if ch not in consumer.uses["consume"]:
        raise FrontError(
            f"connect: `{consumer.name}` is given as the consumer of channel `{ch}` but never consumes it "
            f"(`for x in {ch}.consume():`)",
            loc,
        )
    producer.produces.append(channel)
    producer.joined[ch] = loc
    consumer.consumes.append(channel)
    consumer.joined[ch] = loc


class Pipeline(Decl, Schedulable):
    """``pipeline NAME { channels; processes }`` from a ``@pipeline`` function."""

    kind = "pipeline"

    def __init__(self, fn: Callable[[], Any], name: Optional[str] = None):
        super().__init__(name or fn.__name__)
        self.fn = fn
        self._traced = False
        self._channels: List[Channel] = []
        self._processes: List[Process] = []

    def _trace(self) -> None:
        if self._traced:
            return
        self._channels, self._processes = [], []
        saved = _STATE.pipeline
        _STATE.pipeline = self
        try:
            self.fn()
        finally:
            _STATE.pipeline = saved
        self._traced = True

    def deps(self) -> List[Any]:
        self._trace()
        return [d for p in self._processes for s in p.body for d in s.deps()]

    def render(self, out: List[Tuple[str, _where.Loc]]) -> None:
        """Appends the pipeline's lines, each with its Python place."""
        self._trace()
        out.append((f"pipeline {self.name} {{", self.loc))
        for c in self._channels:
            out.append((f"    channel {c.name}[{c.depth}];", c.loc))
        for p in self._processes:
            lists = []
            if p.consumes:
                lists.append("consumes " + ", ".join(c.name for c in p.consumes))
            if p.produces:
                lists.append("produces " + ", ".join(c.name for c in p.produces))
            out.append((f"    process {p.name}({'; '.join(lists)}) {{", p.loc))
            for s in p.body:
                s.render(2, out)
            out.append(("    }", p.loc))
        out.append(("}", self.loc))


def pipeline(fn: Optional[Callable[[], Any]] = None, *, name: Optional[str] = None) -> Any:
    """Declares a CSP pipeline: a function that creates ``Channel``s and ``@process`` functions
    (each run as its own process on a thread, connected by the channels).

    Parameters
    ----------
    fn : function
        Takes no parameters.
    name : str, optional
        Default: the function's name.

    Returns
    -------
    Pipeline
    """
    if fn is None:
        return lambda f: Pipeline(f, name)
    return Pipeline(fn, name)
