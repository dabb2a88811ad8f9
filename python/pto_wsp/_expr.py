"""Symbolic integer and boolean expressions, built by Python operators.

Why: workloads, regions, schedule keys and costs are written as ordinary Python arithmetic on
loop variables, symbols and slots (``i * 128``, ``(len_ + 256) // 256``, ``lambda b: b``); each
operator builds a node of the ``.wsp`` expression language instead of computing a number.

Promises: ``text()`` is valid ``.wsp`` expression text (fully parenthesised; the Rust printer
gives the canonical form); ``/`` and ``//`` are both the language's integer ``/``; ``&``, ``|``,
``~`` are ``&&``, ``||``, ``!``; comparisons build expressions (an expression is never a Python
truth value: ``if`` on one raises, pointing at ``P.when``); ``difference(stop, start)`` folds
``stop - start`` of linear expressions so ``X[i * 32:(i + 1) * 32]`` has size ``32``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1

# Operator name -> text; precedence is left to the Rust printer (everything is parenthesised).
_BIN = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "mod": "%",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "and": "&&",
    "or": "||",
}


class Expr:
    """A node of a ``.wsp`` expression. Built with Python operators; see the module docstring."""

    __slots__ = ("op", "args", "ref")
    __hash__ = object.__hash__

    def __init__(self, op: str, args: Tuple[Any, ...] = (), ref: Any = None):
        self.op = op  # "int", "uint", "bool", "name", a _BIN key, "neg", "not", "min", "max", "where"
        self.args = args
        self.ref = ref  # for "name": the declaration (Symbol, Slot, loop variable, ...)

    # ----- printing -----------------------------------------------------------------------

    def text(self) -> str:
        """The expression as ``.wsp`` text."""
        op = self.op
        if op == "int":
            v = self.args[0]
            return f"({v})" if v < 0 else str(v)
        if op == "uint":
            return f"{self.args[0]}u"
        if op == "bool":
            return "true" if self.args[0] else "false"
        if op == "name":
            return self.args[0]
        if op in _BIN:
            a, b = self.args
            return f"({a.text()} {_BIN[op]} {b.text()})"
        if op == "neg":
            return f"(-{self.args[0].text()})"
        if op == "not":
            return f"(!{self.args[0].text()})"
        if op in ("min", "max"):
            a, b = self.args
            return f"{op}({a.text()}, {b.text()})"
        if op == "where":
            c, a, b = self.args
            return f"({c.text()} ? {a.text()} : {b.text()})"
        raise AssertionError(op)

    def __repr__(self) -> str:
        return f"Expr({self.text()})"

    def names(self) -> Iterator["Expr"]:
        """Every name node in the expression."""
        if self.op == "name":
            yield self
        elif self.op not in ("int", "uint", "bool"):
            for a in self.args:
                yield from a.names()

    # ----- operators ----------------------------------------------------------------------

    def __bool__(self) -> bool:
        raise TypeError(
            f"`{self.text()}` is a pto-wsp expression, evaluated when the program runs, not a "
            "Python truth value: write `with P.when(cond):` instead of `if`, `&`/`|`/`~` "
            "instead of `and`/`or`/`not`"
        )

    def __add__(self, o: Any) -> "Expr":
        return Expr("add", (self, lit(o)))

    def __radd__(self, o: Any) -> "Expr":
        return Expr("add", (lit(o), self))

    def __sub__(self, o: Any) -> "Expr":
        return Expr("sub", (self, lit(o)))

    def __rsub__(self, o: Any) -> "Expr":
        return Expr("sub", (lit(o), self))

    def __mul__(self, o: Any) -> "Expr":
        return Expr("mul", (self, lit(o)))

    def __rmul__(self, o: Any) -> "Expr":
        return Expr("mul", (lit(o), self))

    def __floordiv__(self, o: Any) -> "Expr":
        return Expr("div", (self, lit(o)))

    def __rfloordiv__(self, o: Any) -> "Expr":
        return Expr("div", (lit(o), self))

    __truediv__ = __floordiv__
    __rtruediv__ = __rfloordiv__

    def __mod__(self, o: Any) -> "Expr":
        return Expr("mod", (self, lit(o)))

    def __rmod__(self, o: Any) -> "Expr":
        return Expr("mod", (lit(o), self))

    def __neg__(self) -> "Expr":
        return Expr("neg", (self,))

    def __pos__(self) -> "Expr":
        return self

    def __invert__(self) -> "Expr":
        return Expr("not", (self,))

    def __and__(self, o: Any) -> "Expr":
        return Expr("and", (self, lit(o)))

    def __rand__(self, o: Any) -> "Expr":
        return Expr("and", (lit(o), self))

    def __or__(self, o: Any) -> "Expr":
        return Expr("or", (self, lit(o)))

    def __ror__(self, o: Any) -> "Expr":
        return Expr("or", (lit(o), self))

    def __eq__(self, o: Any) -> "Expr":  # type: ignore[override]
        return Expr("eq", (self, lit(o)))

    def __ne__(self, o: Any) -> "Expr":  # type: ignore[override]
        return Expr("ne", (self, lit(o)))

    def __lt__(self, o: Any) -> "Expr":
        return Expr("lt", (self, lit(o)))

    def __le__(self, o: Any) -> "Expr":
        return Expr("le", (self, lit(o)))

    def __gt__(self, o: Any) -> "Expr":
        return Expr("gt", (self, lit(o)))

    def __ge__(self, o: Any) -> "Expr":
        return Expr("ge", (self, lit(o)))


def lit(v: Any) -> Expr:
    """``v`` as an expression: an ``Expr`` as is, a Python ``bool`` or ``int`` as a literal."""
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool):
        return Expr("bool", (v,))
    if isinstance(v, int):
        if not I64_MIN <= v <= I64_MAX:
            raise ValueError(f"integer {v} does not fit i64")
        return Expr("int", (v,))
    raise TypeError(
        f"{type(v).__name__} `{v!r}` cannot be a pto-wsp expression (ints, bools, symbols, "
        "slots, loop variables and expressions of them can)"
    )


def u64(v: int) -> Expr:
    """A ``u64`` literal (``7u``)."""
    if not 0 <= v < 2**64:
        raise ValueError(f"integer {v} does not fit u64")
    return Expr("uint", (v,))


def min_(a: Any, b: Any) -> Expr:
    """The smaller of two integer expressions: ``min(a, b)`` in the text (Python's ``min`` would
    compare them now)."""
    return Expr("min", (lit(a), lit(b)))


def max_(a: Any, b: Any) -> Expr:
    """The larger of two integer expressions: ``max(a, b)`` in the text (Python's ``max`` would
    compare them now)."""
    return Expr("max", (lit(a), lit(b)))


def where(cond: Any, a: Any, b: Any) -> Expr:
    """``a`` where ``cond`` holds, else ``b``, decided when the program runs: ``cond ? a : b`` in
    the text (a Python ``if`` would decide now)."""
    return Expr("where", (lit(cond), lit(a), lit(b)))


# ----- the size of a slice: stop - start, folded ----------------------------------------------

Mono = Tuple[str, ...]


def _linear(e: Expr, atoms: Dict[str, Expr]) -> Dict[Mono, int]:
    """``e`` as a sum of integer multiples of products of atoms (anything not ``+ - *`` of
    integers is an atom, keyed by its text), in order of first appearance."""
    if e.op == "int":
        return {(): e.args[0]}
    if e.op == "add" or e.op == "sub":
        a = _linear(e.args[0], atoms)
        b = _linear(e.args[1], atoms)
        sign = 1 if e.op == "add" else -1
        for k, v in b.items():
            a[k] = a.get(k, 0) + sign * v
        return a
    if e.op == "neg":
        return {k: -v for k, v in _linear(e.args[0], atoms).items()}
    if e.op == "mul":
        a = _linear(e.args[0], atoms)
        b = _linear(e.args[1], atoms)
        out: Dict[Mono, int] = {}
        for ka, va in a.items():
            for kb, vb in b.items():
                k = tuple(sorted(ka + kb))
                out[k] = out.get(k, 0) + va * vb
        return out
    key = e.text()
    atoms.setdefault(key, e)
    return {(key,): 1}


def difference(stop: Expr, start: Expr) -> Expr:
    """``stop - start``, folded when both are sums of products (``(i + 1) * 32 - i * 32`` is
    ``32``); ``stop`` as written when ``start`` is ``0``; otherwise the plain difference."""
    if start.op == "int" and start.args[0] == 0:
        return stop
    atoms: Dict[str, Expr] = {}
    try:
        a = _linear(stop, atoms)
        b = _linear(start, atoms)
    except RecursionError:
        return stop - start
    for k, v in b.items():
        a[k] = a.get(k, 0) - v
    terms: List[Tuple[Mono, int]] = [(k, v) for k, v in a.items() if v != 0 and k != ()]
    const = a.get((), 0)
    out: Any = None
    for k, v in terms:
        product: Any = None
        for name in k:
            product = atoms[name] if product is None else product * atoms[name]
        if out is None:
            out = product * v if v != 1 else product
        elif v > 0:
            out = out + (product * v if v != 1 else product)
        else:
            out = out - (product * -v if v != -1 else product)
    if out is None:
        return lit(const)
    if const > 0:
        out = out + const
    elif const < 0:
        out = out - (-const)
    return out
