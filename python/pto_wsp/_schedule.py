"""Schedules written in Python: ``workload.dispatch(...).task_graph(...)``, the policies, and
keys / costs given as lambdas.

Why: the schedule half of the programming model (seeds 000, 003) is chained Python calls; each
call is one item of the text's ``schedule for W { ... }`` block, in the order written.

Promises: a key or cost lambda is called once, with one symbolic variable per parameter named as
the parameter (``lambda b, h: b * heads + h`` is ``b * heads + h``; a single parameter named
``t`` is also a view whose attributes are names: ``lambda t: t.batch`` is ``batch``); its
result is an expression, never called per task. Every chaining call returns a new ``Schedule``
(the one it was called on is unchanged) and records the caller's ``file:line``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple, Type, Union

from . import _where
from ._decl import Decl, FrontError, expr_deps
from ._expr import Expr, lit
from ._trace import Pipeline, Workload

if TYPE_CHECKING:
    from ._module import BuiltModule
    from .program import Program


class _TaskView(Expr):
    """A key lambda's parameter: the name it spells (``lambda b: b``), and in
    ``lambda t: t.batch`` each attribute is the name the attribute spells."""

    def __getattr__(self, name: str) -> Expr:
        if name.startswith("__"):
            raise AttributeError(name)
        return Expr("name", (name,), None)


def key(f: Any) -> Expr:
    """A key or cost: an expression, an int, or a lambda traced once into an expression."""
    if not callable(f) or isinstance(f, Expr):
        return lit(f)
    params = list(inspect.signature(f).parameters)
    return lit(f(*(_TaskView("name", (p,), None) for p in params)))


class Policy:
    """A policy word with its ``.wsp`` text and the expressions in it."""

    def __init__(self, text: str, exprs: Sequence[Expr] = ()):
        self._text = text
        self.exprs = list(exprs)

    def text(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._text}>"


def _levels(metric: Any, levels: Sequence[Tuple[int, Any]], otherwise: Any, word: Callable[[Any], str]) -> Tuple[str, List[Expr]]:
    m = key(metric)
    parts = [f"below {int(b)}: {word(c)}" for b, c in levels]
    parts.append(f"else: {word(otherwise)}")
    return f"({m.text()}) {{ {', '.join(parts)} }}", [m]


def _count(n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise FrontError(f"{what} takes a non-negative integer, not {n!r}")
    return n


class DispatchPolicy(Policy):
    """Which executor a task goes to: ``DispatchPolicy.round_robin(4)``, ``affinity(key)``, ..."""

    @staticmethod
    def round_robin(n: int) -> "DispatchPolicy":
        """Task k goes to executor k mod n (``dispatch round_robin(n)``)."""
        return DispatchPolicy(f"round_robin({_count(n, 'round_robin')})")

    @staticmethod
    def affinity(k: Any) -> "DispatchPolicy":
        """Each task goes to executor ``key mod executors``: ``affinity(lambda i, j: i * 4 + j)``."""
        e = key(k)
        return DispatchPolicy(f"affinity({e.text()})", [e])

    @staticmethod
    def hash(k: Any) -> "DispatchPolicy":
        """Each task goes to the executor of the hash of ``key`` (``dispatch hash(KEY)``)."""
        e = key(k)
        return DispatchPolicy(f"hash({e.text()})", [e])

    @staticmethod
    def work_steal() -> "DispatchPolicy":
        """No fixed executor: idle workers take ready tasks (``dispatch work_steal``)."""
        return DispatchPolicy("work_steal")

    @staticmethod
    def static_partition(*starts: int) -> "DispatchPolicy":
        """Contiguous ranges of tasks per executor, starting at the given task numbers."""
        return DispatchPolicy(f"static_partition({', '.join(str(_count(s, 'static_partition')) for s in starts)})")

    @staticmethod
    def threshold(metric: Any, levels: Sequence[Tuple[int, "DispatchPolicy"]], otherwise: "DispatchPolicy") -> "DispatchPolicy":
        """``threshold(METRIC) { below B: P, ..., else: P }``."""
        text, exprs = _levels(metric, levels, otherwise, lambda p: p.text())
        inner = [e for _, p in levels for e in p.exprs] + otherwise.exprs
        return DispatchPolicy("threshold" + text, exprs + inner)


class Deps(Policy):
    """How task dependencies are found."""

    @staticmethod
    def infer_tensor_map_exact() -> "Deps":
        """Dependencies from exact region matches (``deps exact``): tasks touching the same tile are ordered."""
        return Deps("exact")

    @staticmethod
    def infer_bytes_overlap() -> "Deps":
        """Dependencies from overlapping regions (``deps overlap``): any two tasks whose regions share an element."""
        return Deps("overlap")

    @staticmethod
    def explicit() -> "Deps":
        """Only the program's structural order (``deps explicit``): ``for_each``, ``sequential``, channels."""
        return Deps("explicit")

    @staticmethod
    def hybrid() -> "Deps":
        """Exact matches where regions are tiles, overlap elsewhere (``deps hybrid``)."""
        return Deps("hybrid")

    exact = staticmethod(infer_tensor_map_exact.__func__)  # type: ignore[attr-defined]
    overlap = staticmethod(infer_bytes_overlap.__func__)  # type: ignore[attr-defined]


class ReadyPolicy(Policy):
    """The order ready tasks are taken in."""

    @staticmethod
    def fifo() -> "ReadyPolicy":
        """Ready tasks run in the order they became ready (``ready fifo``)."""
        return ReadyPolicy("fifo")

    @staticmethod
    def work_steal() -> "ReadyPolicy":
        """Per-worker queues; idle workers steal (``ready work_steal``)."""
        return ReadyPolicy("work_steal")

    @staticmethod
    def priority(k: Any) -> "ReadyPolicy":
        """Ready tasks by ``key``, smallest first (``ready priority(KEY)``)."""
        e = key(k)
        return ReadyPolicy(f"priority({e.text()})", [e])


class StartPolicy(Policy):
    """When execution starts relative to task generation."""

    @staticmethod
    def after_orchestration() -> "StartPolicy":
        """Tasks start once every task has been generated (``start after_orchestration``)."""
        return StartPolicy("after_orchestration")

    @staticmethod
    def immediate() -> "StartPolicy":
        """Tasks start as soon as they are generated and ready (``start immediate``)."""
        return StartPolicy("immediate")

    @staticmethod
    def threshold(n: int) -> "StartPolicy":
        """Tasks start once ``n`` have been generated (``start threshold(n)``)."""
        return StartPolicy(f"threshold({_count(n, 'threshold')})")


class TracePolicy(Policy):
    """What is recorded per task."""

    @staticmethod
    def none() -> "TracePolicy":
        """Record nothing per task (``trace none``)."""
        return TracePolicy("none")

    @staticmethod
    def wall() -> "TracePolicy":
        """Record each task's wall-clock start and end (``trace wall``)."""
        return TracePolicy("wall")

    @staticmethod
    def cycles(cost: Any = None) -> "TracePolicy":
        """Model the run in cycles (``trace cycles``), each task costing ``cost`` (a lambda of the task) or its kernel's model."""
        if cost is None:
            return TracePolicy("cycles")
        e = key(cost)
        return TracePolicy(f"cycles({e.text()})", [e])


class Pools(Policy):
    """How executors are pooled."""

    @staticmethod
    def single() -> "Pools":
        """One pool of workers for every task (``pools single``)."""
        return Pools("single")

    @staticmethod
    def by_exec_unit() -> "Pools":
        """Vector and cube tasks on separate worker pools (``pools by_exec_unit``)."""
        return Pools("by_exec_unit")


class TimingPolicy(Policy):
    """When generated tasks are released."""

    @staticmethod
    def immediate() -> "TimingPolicy":
        """Each generated task is released at once (``timing immediate``)."""
        return TimingPolicy("immediate")

    @staticmethod
    def batched(n: int) -> "TimingPolicy":
        """Generated tasks are released ``n`` at a time (``timing batched(n)``)."""
        return TimingPolicy(f"batched({_count(n, 'batched')})")

    @staticmethod
    def interleaved(n: int) -> "TimingPolicy":
        """Generation and release alternate every ``n`` tasks (``timing interleaved(n)``)."""
        return TimingPolicy(f"interleaved({_count(n, 'interleaved')})")

    @staticmethod
    def rate_limit(n: int) -> "TimingPolicy":
        """At most ``n`` tasks released per step (``timing rate_limit(n)``)."""
        return TimingPolicy(f"rate_limit({_count(n, 'rate_limit')})")


def _word(v: Any, cls: Type[Policy], what: str) -> Policy:
    if isinstance(v, Policy) and isinstance(v, cls):
        return v
    if isinstance(v, str):
        return cls(v)
    raise FrontError(f"{what} takes a {cls.__name__}, not {v!r}")


class _Item:
    def __init__(self, lines: List[str], exprs: Sequence[Expr]):
        self.lines = lines
        self.exprs = list(exprs)
        self.loc = _where.here()


class Schedule:
    """``schedule for TARGET { items }``: built by chaining on a workload or pipeline."""

    def __init__(self, target: Union[Workload, Pipeline], items: Sequence[_Item] = ()):
        self.target = target
        self.items = list(items)

    def _add(self, lines: List[str], exprs: Sequence[Expr] = ()) -> "Schedule":
        return Schedule(self.target, self.items + [_Item(lines, exprs)])

    def executors(self, n: int) -> "Schedule":
        """``executors N;``"""
        return self._add([f"executors {_count(n, 'executors')};"])

    def dispatch(self, policy: DispatchPolicy) -> "Schedule":
        """``dispatch POLICY;``"""
        p = _word(policy, DispatchPolicy, "dispatch")
        return self._add([f"dispatch {p.text()};"], p.exprs)

    def streams(self, n: int) -> "Schedule":
        """``streams N;``"""
        return self._add([f"streams {_count(n, 'streams')};"])

    def stream_by(self, k: Any) -> "Schedule":
        """``stream_by KEY;``"""
        e = key(k)
        return self._add([f"stream_by {e.text()};"], [e])

    def timing(self, policy: TimingPolicy) -> "Schedule":
        """``timing POLICY;``"""
        p = _word(policy, TimingPolicy, "timing")
        return self._add([f"timing {p.text()};"], p.exprs)

    def task_graph(
        self,
        deps: Optional[Deps] = None,
        ready: Optional[ReadyPolicy] = None,
        start: Optional[StartPolicy] = None,
        trace: Optional[TracePolicy] = None,
        pools: Optional[Pools] = None,
    ) -> "Schedule":
        """``task_graph { deps ...; ready ...; start ...; trace ...; pools ...; }`` (the ones given)."""
        lines, exprs = ["task_graph {"], []
        for word, v, cls in (
            ("deps", deps, Deps),
            ("ready", ready, ReadyPolicy),
            ("start", start, StartPolicy),
            ("trace", trace, TracePolicy),
            ("pools", pools, Pools),
        ):
            if v is not None:
                p = _word(v, cls, word)
                lines.append(f"    {word} {p.text()};")
                exprs += p.exprs
        lines.append("}")
        return self._add(lines, exprs)

    def task_window(self, n: int, mode: str = "stall") -> "Schedule":
        """``task_window N stall | abort | benchmark;``"""
        return self._add([f"task_window {_count(n, 'task_window')} {mode};"])

    def pipeline_depth(self, n: int, scope: str = "global") -> "Schedule":
        """``pipeline_depth N global | per_stream | per_pool;``"""
        return self._add([f"pipeline_depth {_count(n, 'pipeline_depth')} {scope};"])

    def batch_deps(self, n: int) -> "Schedule":
        """``batch_deps N;``"""
        return self._add([f"batch_deps {_count(n, 'batch_deps')};"])

    def dispatch_threshold(self, metric: Any, levels: Sequence[Tuple[int, str]], otherwise: str) -> "Schedule":
        """``dispatch_threshold(METRIC) { below B: POOL, ..., else: POOL };``"""
        text, exprs = _levels(metric, levels, otherwise, str)
        return self._add([f"dispatch_threshold{text};"], exprs)

    # ----- building ----------------------------------------------------------------------

    def deps(self) -> List[Decl]:
        """The declarations the schedule refers to (its target, the names in its keys)."""
        return [self.target] + [d for it in self.items for e in it.exprs for d in expr_deps(e)]

    def render(self, out: List[Tuple[str, _where.Loc]]) -> None:
        """Appends the ``schedule for ...`` block's lines, each with its Python place."""
        out.append((f"schedule for {self.target.name} {{", self.items[0].loc if self.items else self.target.loc))
        for it in self.items:
            for line in it.lines:
                out.append(("    " + line, it.loc))
        out.append(("}", self.items[-1].loc if self.items else self.target.loc))

    def module(self, **kw: Any) -> "BuiltModule":
        """The module of the target, its declarations and this schedule (see ``build``)."""
        from ._module import build

        return build(self.target, schedule=self, **kw)

    def compile(self, **kw: Any) -> "Program":
        """``self.module().compile(**kw)``: a program callable like a function."""
        return self.module().compile(**kw)  # type: ignore[return-value]
