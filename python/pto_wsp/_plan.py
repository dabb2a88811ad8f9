"""Plans (Plan-Descriptor-Execute) written in Python: spaces, tier tables and plans whose
generator is a Python function traced once.

Why: the second programming model of pto-wsp (``docs/PDE.md``) is written in Python the way
workloads are: a ``Space`` and a ``Tiers`` table are declarations, a ``@plan`` function is the
descriptor generator (``for i in Chunks.r:``, ``with P.when(...)``, ``emit(...)``), and the call
each tier runs is an ordinary kernel call in a ``lambda d: ...`` over the descriptor's fields.
The result is the text format's ``space`` / ``tiers`` / ``plan`` declarations, so it is
validated and run by the same code as ``.wsp`` plans.

Promises: every declaration takes its name from the variable it is assigned to (``name=``
overrides); ``text`` of each is its ``.wsp`` declaration; the generator runs once at build time
with symbolic variables and records each statement with the user's ``file:line:column``;
``load``, ``select_tier`` and ``alloc`` are named after the variable they are assigned to.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Tuple

from . import _where
from ._decl import Decl, FrontError, Region, Tensor, _name, expr_deps
from ._expr import Expr, lit
from ._trace import Line, _block, _body, _STATE, _trace_body, emit as _emit_stmt

__all__ = [
    "AUTO",
    "DEFAULT",
    "DYNAMIC",
    "Plan",
    "Space",
    "SpaceAxis",
    "Tier",
    "Tiers",
    "alloc",
    "emit",
    "load",
    "plan",
    "select_tier",
]


class _Word:
    """A keyword of a plan declaration (``DYNAMIC``, ``AUTO``, ``DEFAULT``)."""

    def __init__(self, word: str, doc: str):
        self.word = word
        self.__doc__ = doc

    def __repr__(self) -> str:
        return self.word.upper()


#: An axis end known only when the plan runs (``to dynamic``; the plan binds it: ``bind_end``).
DYNAMIC = _Word("dynamic", "An axis end known only when the plan runs (``to dynamic``); the plan binds it with ``bind_end``.")
#: A tile size the plan binds (``tile(AXIS, auto)``; the plan gives it: ``bind_tile``).
AUTO = _Word("auto", "A tile size the plan binds (``tile(AXIS, auto)``) with ``bind_tile``.")
#: The last tier, taken by every value above the others' bounds (``tier NAME default``).
DEFAULT = _Word("default", "The last tier, taken by every value above the other tiers' bounds (``tier NAME default``).")


class SpaceAxis(Expr):
    """An axis of a :class:`Space`: a descriptor field (``d.r`` in a tier's call is the same
    name) and, in a generator, what ``for i in Chunks.r:`` (tile index) or ``for i, lo, hi in
    Chunks.c.bounds():`` (with the tile's bounds) iterate."""

    __hash__ = Expr.__hash__

    def __init__(self, space: "Space", name: str, start: Any, end: Any, tile: Any):
        Expr.__init__(self, "name", (name,), None)
        self.space = space
        self.axis_name = name
        self.start = lit(start)
        self.end = end if end is DYNAMIC else lit(end)
        self.tile = tile

    def __iter__(self) -> Iterator[Expr]:
        return self._loop(1)

    def bounds(self) -> Iterator[Tuple[Expr, Expr, Expr]]:
        """``for i, lo, hi in AXIS.bounds():`` — the tile index and the tile's bounds."""
        return self._loop(3)  # type: ignore[return-value]

    def _loop(self, n: int) -> Iterator[Any]:
        loc = _where.here()
        targets = _where.for_targets()
        if targets is None or None in targets or len(targets) != n:
            raise FrontError(
                f"write `for i in {self.space.name}.{self.axis_name}:` or "
                f"`for i, lo, hi in {self.space.name}.{self.axis_name}.bounds():`",
                loc,
            )
        o = _block(f"for {', '.join(t for t in targets if t)} in {self.axis_name}", (), [])
        o.block.loc = loc
        o.__enter__()
        try:
            vs = [Expr("name", (t,), None) for t in targets if t]
            yield vs[0] if n == 1 else tuple(vs)
        finally:
            o.__exit__()

    def __repr__(self) -> str:
        return f"<space axis {self.space.name}.{self.axis_name}>"


class Space(Decl):
    """``space NAME { axis ...; tile(...); constraint ...; }``: a plan's iteration space.

    Parameters
    ----------
    tile : dict, optional
        Axis name to its tile: an int ``N`` (``tile(AXIS, N)``), ``(N, "pad_last")``, or
        ``AUTO``.
    constraints : list of expressions, optional
        Booleans over symbols checked when a plan runs.
    name : str, optional
    **axes
        Axis name to ``(start, end)``; ``end`` an int, a symbol or ``DYNAMIC``. At most 3.

    Examples
    --------
    >>> Chunks = Space(r=(0, nreq), c=(0, DYNAMIC), g=(0, 8), tile={"c": 512})   # doctest: +SKIP
    """

    kind = "space"

    def __init__(
        self,
        *,
        tile: Optional[Mapping[str, Any]] = None,
        constraints: Sequence[Any] = (),
        name: Optional[str] = None,
        **axes: Tuple[Any, Any],
    ):
        super().__init__(_name(name, "space"))
        if not axes:
            raise FrontError(f"space `{self.name}` needs at least one axis: `Space(r=(0, n))`")
        tiles = dict(tile or {})
        for a in tiles:
            if a not in axes:
                raise FrontError(f"space `{self.name}`: tile= names `{a}`, not one of its axes ({', '.join(axes)})")
        self.axes: List[SpaceAxis] = []
        for a, bounds in axes.items():
            if not (isinstance(bounds, tuple) and len(bounds) == 2):
                raise FrontError(f"space `{self.name}`: axis `{a}` takes `(start, end)`, not {bounds!r}")
            if hasattr(self, a):
                raise FrontError(f"space `{self.name}`: an axis cannot be named `{a}` (a Space attribute)")
            ax = SpaceAxis(self, a, bounds[0], bounds[1], tiles.get(a))
            self.axes.append(ax)
            setattr(self, a, ax)
        try:
            self.constraints = [lit(c) for c in constraints]
        except (TypeError, ValueError) as e:
            raise FrontError(f"space `{self.name}`: a constraint {e}") from None

    def __getattr__(self, name: str) -> SpaceAxis:
        # The axes are attributes (set in __init__); this is only reached for other names.
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"space has no axis `{name}`")

    def deps(self) -> List[Decl]:
        out: List[Decl] = []
        for a in self.axes:
            out += expr_deps(a.start)
            if isinstance(a.end, Expr):
                out += expr_deps(a.end)
        for c in self.constraints:
            out += expr_deps(c)
        return out

    def decl_text(self) -> str:
        """The declaration as ``.wsp`` text."""
        lines = [f"space {self.name} {{"]
        for a in self.axes:
            end = a.end.text() if isinstance(a.end, Expr) else "dynamic"
            lines.append(f"    axis {a.axis_name} from {a.start.text()} to {end};")
        for a in self.axes:
            t = a.tile
            if t is None:
                continue
            if t is AUTO:
                lines.append(f"    tile({a.axis_name}, auto);")
            elif isinstance(t, tuple) and len(t) == 2 and t[1] == "pad_last":
                lines.append(f"    tile({a.axis_name}, {int(t[0])}, pad_last);")
            elif isinstance(t, int) and not isinstance(t, bool):
                lines.append(f"    tile({a.axis_name}, {t});")
            else:
                raise FrontError(f"space `{self.name}`: the tile of `{a.axis_name}` is an int, (N, 'pad_last') or AUTO, not {t!r}", self.loc)
        for c in self.constraints:
            lines.append(f"    constraint {c.text()};")
        lines.append("}")
        return "\n".join(lines)


class Tier:
    """One tier of a :class:`Tiers` table: values up to ``bound`` (or ``DEFAULT``), with an
    optional workspace size (elements ``alloc`` hands out per slot)."""

    def __init__(self, bound: Any, workspace: Optional[int] = None):
        self.bound = bound
        self.workspace = workspace
        self.name = ""


class Tiers(Decl):
    """``tiers NAME { tier A <= N; ...; tier Z default; }``, the tiers in the order given.

    Each keyword is a tier: ``short=2048`` (values up to 2048), ``long=DEFAULT`` (the last,
    every other value), or ``Tier(2048, workspace=64)``. ``table.short`` is the tier's name.

    Examples
    --------
    >>> ByLength = Tiers(short=2048, long=DEFAULT)   # doctest: +SKIP
    """

    kind = "tiers"

    def __init__(self, *, name: Optional[str] = None, **tiers: Any):
        super().__init__(_name(name, "tier table"))
        if not tiers:
            raise FrontError(f"tier table `{self.name}` needs at least one tier: `Tiers(all=DEFAULT)`")
        self.tiers: List[Tier] = []
        for n, t in tiers.items():
            tier = t if isinstance(t, Tier) else Tier(t)
            tier.name = n
            if hasattr(self, n):
                raise FrontError(f"tier table `{self.name}`: a tier cannot be named `{n}` (a Tiers attribute)")
            if tier.bound is not DEFAULT and (isinstance(tier.bound, bool) or not isinstance(tier.bound, int)):
                raise FrontError(f"tier `{n}` of `{self.name}`: the bound is an int or DEFAULT, not {tier.bound!r}")
            self.tiers.append(tier)
            setattr(self, n, n)

    def __getattr__(self, name: str) -> str:
        # The tiers' names are attributes (set in __init__); this is only reached for others.
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"tier table has no tier `{name}`")

    def decl_text(self) -> str:
        """The declaration as ``.wsp`` text."""
        lines = [f"tiers {self.name} {{"]
        for t in self.tiers:
            bound = "default" if t.bound is DEFAULT else f"<= {int(t.bound)}"
            ws = "" if t.workspace is None else f" workspace {int(t.workspace)}"
            lines.append(f"    tier {t.name} {bound}{ws};")
        lines.append("}")
        return "\n".join(lines)


class _Descriptor:
    """A tier call's view of the descriptor: ``d.r`` (an axis), ``d.start``, ``d.end``,
    ``d.workspace``, ``d.tier`` and the plan's user fields, each the field's name."""

    def __init__(self, fields: Sequence[str]):
        self._fields = list(fields)

    def __getattr__(self, name: str) -> Expr:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._fields:
            raise FrontError(f"the descriptor has no field `{name}` (fields: {', '.join(self._fields)})")
        return Expr("name", (name,), None)


def _call_text(fn: Callable[[Any], Any], fields: Sequence[str], what: str) -> Tuple[str, List[Decl]]:
    """Runs ``fn(d)`` capturing the one kernel call it makes: its ``K(ARGS)`` text and what it
    refers to."""
    if not callable(fn):
        raise FrontError(f"{what} takes a function of the descriptor: `lambda d: kernel(X[d.r, :], ...)`")
    body: List[Line] = []
    _STATE.bodies.append(body)
    try:
        fn(_Descriptor(fields))
    finally:
        _STATE.bodies.pop()
    if len(body) != 1 or not body[0].template.startswith("task "):
        raise FrontError(f"{what}: the function must call one kernel (it made {len(body)} call(s))")
    line = body[0]
    text = line.template.format(*(e.text() for e in line.exprs))
    return text[len("task ") :].rstrip(";"), line.deps()


class Plan(Decl):
    """``plan NAME over SPACE with TIERS { ... }`` from a ``@plan`` function (see :func:`plan`)."""

    kind = "plan"

    def __init__(
        self,
        fn: Callable[[], Any],
        over: Space,
        tiers: Tiers,
        kernels: Mapping[str, Callable[[Any], Any]],
        fields: Sequence[str] = (),
        workspace: Optional[Tensor] = None,
        bind_end: Optional[Mapping[Any, Any]] = None,
        bind_tile: Optional[Mapping[Any, Any]] = None,
        prefetch: Optional[Tuple[Any, int, Callable[[Any], Any]]] = None,
        order: Optional[Mapping[Any, Any]] = None,
        affinity: Optional[Tuple[Any, Any]] = None,
        name: Optional[str] = None,
    ):
        super().__init__(name or fn.__name__)
        if not isinstance(over, Space):
            raise FrontError(f"plan `{self.name}`: `over=` takes a Space, not {over!r}")
        if not isinstance(tiers, Tiers):
            raise FrontError(f"plan `{self.name}`: `tiers=` takes a Tiers table, not {tiers!r}")
        self.fn = fn
        self.space = over
        self.tiers = tiers
        self.fields = list(fields)
        self.workspace = workspace
        names = [a.axis_name for a in over.axes] + ["tier", "start", "end", "workspace"] + self.fields
        self.items: List[str] = []
        self.refs: List[Decl] = [over, tiers] + ([workspace] if workspace is not None else [])
        if self.fields:
            self.items.append(f"fields {', '.join(self.fields)};")
        if workspace is not None:
            self.items.append(f"workspace {workspace.name};")
        for word, binds in (("end", bind_end), ("tile", bind_tile)):
            for axis, value in (binds or {}).items():
                e = lit(value)
                self.refs += expr_deps(e)
                self.items.append(f"bind {word}({self._axis(axis)}) = {e.text()};")
        known = [t.name for t in tiers.tiers]
        for tier, call in kernels.items():
            if tier not in known:
                raise FrontError(f"plan `{self.name}`: kernels= names tier `{tier}`, not one of `{tiers.name}` ({', '.join(known)})")
            text, deps = _call_text(call, names, f"the kernel of tier `{tier}`")
            self.refs += deps
            self.items.append(f"kernel {tier} => {text};")
        if prefetch is not None:
            axis, depth, call = prefetch
            text, deps = _call_text(call, names, "prefetch=")
            self.refs += deps
            self.items.append(f"prefetch({self._axis(axis)}, {int(depth)}) => {text};")
        for axis, how in (order or {}).items():
            self.items.append(f"order({self._axis(axis)}, {_policy(how)});")
        if affinity is not None:
            self.items.append(f"affinity({self._axis(affinity[0])}, {_policy(affinity[1])});")
        self._body: Optional[List[Line]] = None

    def _axis(self, a: Any) -> str:
        n = a.axis_name if isinstance(a, SpaceAxis) else str(a)
        if n not in [x.axis_name for x in self.space.axes]:
            raise FrontError(f"plan `{self.name}`: `{n}` is not an axis of space `{self.space.name}`")
        return n

    def body(self) -> List[Line]:
        """The generator's statements (the function traced on first use)."""
        if self._body is None:
            self._body = _trace_body(self.fn, [])
        return self._body

    def deps(self) -> List[Any]:
        return self.refs + [d for s in self.body() for d in s.deps()]

    def render(self, out: List[Tuple[str, _where.Loc]]) -> None:
        """Appends the plan's lines, each with its Python place."""
        out.append((f"plan {self.name} over {self.space.name} with {self.tiers.name} {{", self.loc))
        for it in self.items:
            out.append(("    " + it, self.loc))
        out.append(("    generate {", self.loc))
        for s in self.body():
            s.render(2, out)
        out.append(("    }", self.loc))
        out.append(("}", self.loc))

    def module(self) -> Any:
        """The module of this plan alone (:func:`pto_wsp.build` takes several)."""
        from ._module import build

        return build(self)

    def compile(self, **kw: Any) -> Any:
        """``self.module().compile(**kw)``."""
        return self.module().compile(**kw)


def _policy(how: Any) -> str:
    if isinstance(how, str):
        return how
    if isinstance(how, tuple) and len(how) == 2:
        return f"{how[0]}({int(how[1])})"
    raise FrontError(f"a plan order / affinity is a word or (word, N), not {how!r}")


def plan(
    over: Space,
    tiers: Tiers,
    *,
    kernels: Mapping[str, Callable[[Any], Any]],
    fields: Sequence[str] = (),
    workspace: Optional[Tensor] = None,
    bind_end: Optional[Mapping[Any, Any]] = None,
    bind_tile: Optional[Mapping[Any, Any]] = None,
    prefetch: Optional[Tuple[Any, int, Callable[[Any], Any]]] = None,
    order: Optional[Mapping[Any, Any]] = None,
    affinity: Optional[Tuple[Any, Any]] = None,
    name: Optional[str] = None,
) -> Callable[[Callable[[], Any]], Plan]:
    """Declares a plan whose descriptor generator is the decorated function.

    Parameters
    ----------
    over : Space
        The iteration space.
    tiers : Tiers
        The tier table descriptors name.
    kernels : dict
        Tier name to ``lambda d: kernel(...)``: the call each tier's descriptors run, over the
        descriptor's fields (``d.r``, ``d.start``, ``d.end``, ``d.workspace``, user fields).
    fields : list of str, optional
        User descriptor fields (at most 2).
    workspace : Tensor, optional
        What ``alloc`` hands out offsets in.
    bind_end, bind_tile : dict, optional
        Axis (or its name) to the expression of its ``DYNAMIC`` end / ``AUTO`` tile size.
    prefetch : (axis, depth, function), optional
        The call run for value ``v + depth`` of the axis before the first descriptor of ``v``.
    order : dict, optional
        Axis to ``"sequential"``, ``"parallel"`` or ``("interleaved", N)``.
    affinity : (axis, policy), optional
        ``"spread"``, ``("core_group", N)`` or ``"core_local"``.
    name : str, optional
        Default: the function's name.

    Returns
    -------
    function
        A decorator making a :class:`Plan`. The generator uses ``for i in SPACE.axis:``, ``for
        i, lo, hi in SPACE.axis.bounds():``, ``with P.when(c):`` / ``P.otherwise()``,
        ``P.continue_()``, ``v = load(T[i])``, ``t = select_tier(TIERS, v)``, ``w = alloc(tier,
        i, ...)`` and ``emit(tier=..., FIELD=...)``.

    Examples
    --------
    >>> @plan(Heads, Merge, fields=["nchunks"],
    ...       kernels={"all": lambda d: merge(Opart[d.q, d.h, span(0, d.nchunks), :], ...)})
    ... def merge_heads():
    ...     for i in Heads.q:
    ...         kv = load(kv_lens[i])
    ...         for k in Heads.h:
    ...             emit(tier=0, q=i, h=k, nchunks=(kv + 511) // 512)   # doctest: +SKIP
    """

    def make(fn: Callable[[], Any]) -> Plan:
        return Plan(fn, over, tiers, kernels, fields, workspace, bind_end, bind_tile, prefetch, order, affinity, name)

    return make


# ----- generator statements -------------------------------------------------------------------


def _gen_name(what: str) -> str:
    n = _where.assigned_name(exact=True) or _where.assigned_name()
    if n is None:
        raise FrontError(f"assign `{what}(...)` to one variable: `v = {what}(...)`")
    return n


def load(element: Region) -> Expr:
    """``load NAME = TENSOR[i, ...];`` in a plan generator: one element of an integer tensor's
    bound contents, named after the variable it is assigned to."""
    _body("`load`")
    if not isinstance(element, Region) or any(s is not None for _, s in element.dims):
        raise FrontError("`load(...)` takes one element of an integer tensor: `T[i]`, no slices")
    name = _gen_name("load")
    idx = ", ".join("{}" for _ in element.dims)
    _emit_stmt(Line(f"load {name} = {element.tensor.name}[{idx}];", [s for s, _ in element.dims], [element.tensor]))
    return Expr("name", (name,), None)


def select_tier(tiers: Tiers, value: Any) -> Expr:
    """``let NAME = select_tier(TIERS, value);``: the index of the first tier whose bound holds
    the value."""
    _body("`select_tier`")
    if not isinstance(tiers, Tiers):
        raise FrontError(f"select_tier takes a Tiers table, not {tiers!r}")
    name = _gen_name("select_tier")
    _emit_stmt(Line(f"let {name} = select_tier({tiers.name}, {{}});", [value], [tiers]))
    return Expr("name", (name,), None)


def alloc(tier: Any, *indices: Any) -> Expr:
    """``let NAME = alloc(TIER, INDEX, ...);``: the workspace offset of a slot of the tier's
    size for the work at those indices (-1: none)."""
    _body("`alloc`")
    name = _gen_name("alloc")
    parts = ", ".join("{}" for _ in (tier, *indices))
    _emit_stmt(Line(f"let {name} = alloc({parts});", [tier, *indices]))
    return Expr("name", (name,), None)


def emit(**fields: Any) -> None:
    """``emit(tier = ..., FIELD = ..., ...);``: one descriptor (``tier`` required; fields not
    given are 0)."""
    _body("`emit`")
    if "tier" not in fields:
        raise FrontError("`emit` must give `tier=`")
    parts = ", ".join(f"{k} = {{}}" for k in fields)
    _emit_stmt(Line(f"emit({parts});", list(fields.values())))

