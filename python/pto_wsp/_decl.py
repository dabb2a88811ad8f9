"""The declarations of a module written in Python: types, symbols, slots, tensors and their
regions, axes, kernels.

Why: these are the nouns a Python workload talks about; each is a Python object named after the
variable it is assigned to (``X = Tensor(f32[M, K])`` declares tensor ``X``), remembering the
user's ``file:line`` so errors can point there.

Promises: ``decl_text()`` of each is its ``.wsp`` declaration; a symbol, slot or loop variable is
an expression (``lit`` accepts it); ``X[...]`` builds a ``Region`` with numpy-style indexing (an
index, ``a:b`` slices whose size ``b - a`` is folded, ``:`` for the whole dimension, missing
trailing dimensions whole) or ``span(start, size)`` for the text's ``start +: size``.
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import _where
from ._expr import Expr, difference, lit
from ._pto_wsp import ValidationError

_ORDER = itertools.count()


class FrontError(ValidationError):
    """A mistake found while building a module in Python: a ``ValidationError`` at the user's
    ``file:line``."""

    def __init__(self, message: str, loc: Optional[_where.Loc] = None):
        loc = loc or _where.here()
        super().__init__(f"{loc}: {message}")
        self.loc = loc


def _name(name: Optional[str], what: str) -> str:
    if name is not None:
        return name
    n = _where.assigned_name()
    if n is None:
        raise FrontError(
            f"cannot tell the name of this {what}: assign it to a variable (`X = ...`) in a "
            "source file, or pass `name=`"
        )
    return n


class Decl:
    """Something declared at the top level of a module."""

    kind = ""

    def __init__(self, name: str):
        self.name = name
        self.loc = _where.here()
        self.order = next(_ORDER)

    def deps(self) -> List["Decl"]:
        """Declarations this one refers to."""
        return []

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def expr_deps(e: Expr) -> List[Decl]:
    """The declarations an expression names."""
    return [n.ref for n in e.names() if isinstance(n.ref, Decl)]


# ----- types ----------------------------------------------------------------------------------


class DType:
    """An element or scalar type: ``f32``; ``f32[M, 128]`` is a tensor or tile type."""

    def __init__(self, name: str, tensor: bool, scalar: bool):
        self.name = name
        self.tensor = tensor
        self.scalar = scalar

    def __getitem__(self, dims: Any) -> "TensorType":
        if not self.tensor:
            raise TypeError(f"`{self.name}` is not an element type of tensors")
        if not isinstance(dims, tuple):
            dims = (dims,)
        return TensorType(self, tuple(dims))

    def __repr__(self) -> str:
        return self.name


class TensorType:
    """``DTYPE[dims]``: dims are expressions (tensors) or ints / ``None`` for ``?`` (tiles)."""

    def __init__(self, dtype: DType, dims: Tuple[Any, ...]):
        self.dtype = dtype
        self.dims = dims

    def text(self, tile: bool = False) -> str:
        if tile:
            parts = ["?" if d is None else str(int(d)) for d in self.dims]
        else:
            parts = [lit(d).text() for d in self.dims]
        return f"{self.dtype.name}[{', '.join(parts)}]"


f16 = DType("f16", True, False)
bf16 = DType("bf16", True, False)
f32 = DType("f32", True, True)
f64 = DType("f64", False, True)
i32 = DType("i32", True, False)
u32 = DType("u32", True, False)
i64 = DType("i64", True, True)
u64_t = DType("u64", True, True)
u8 = DType("u8", True, False)
bool_ = DType("bool", False, True)
#: A tile dimension of any size (``?`` in the text).
ANY = None

_NUMPY_DTYPES = {
    "float16": f16,
    "float32": f32,
    "int32": i32,
    "uint32": u32,
    "int64": i64,
    "uint64": u64_t,
    "uint8": u8,
}


def _scalar_type(t: Any, what: str) -> DType:
    if t is bool:
        return bool_
    if t is int:
        return i64
    if isinstance(t, DType) and t.scalar:
        return t
    raise FrontError(f"{what}: `{t!r}` is not a scalar type (bool, i64, u64, f32, f64)")


# ----- symbols and slots -------------------------------------------------------------------


class _Named(Decl, Expr):
    """A declaration that is also an expression: its name (``M // 128`` is ``M / 128``)."""

    __hash__ = object.__hash__

    def __init__(self, name: str):
        Decl.__init__(self, name)
        Expr.__init__(self, "name", (name,), self)


class Symbol(_Named):
    """``symbol NAME: TYPE;`` — a run-time value (``bind=`` writes a ``//@ bind`` line)."""

    kind = "symbol"

    def __init__(self, type: Any = i64, *, bind: Any = None, name: Optional[str] = None):
        super().__init__(_name(name, "symbol"))
        self.type = _scalar_type(type, f"symbol `{self.name}`")
        self.bind = bind

    def decl_text(self) -> str:
        return f"symbol {self.name}: {self.type.name};"


class Slot(_Named):
    """``slot NAME: TYPE;`` — a variable of the generating program (``.set``, ``.load``)."""

    kind = "slot"

    def __init__(self, type: Any = i64, *, name: Optional[str] = None):
        super().__init__(_name(name, "slot"))
        self.type = _scalar_type(type, f"slot `{self.name}`")

    def decl_text(self) -> str:
        return f"slot {self.name}: {self.type.name};"

    def set(self, value: Any) -> None:
        """``set SLOT = value;``"""
        from . import _trace

        _trace.emit(_trace.Line(f"set {self.name} = {{}};", [lit(value)]))

    def load(self, element: "Region") -> None:
        """``load SLOT = TENSOR[index, ...];`` (one element of an integer tensor)."""
        from . import _trace

        if not isinstance(element, Region) or any(s is not None for _, s in element.dims):
            raise FrontError(f"`{self.name}.load(...)` takes one element: `T[i, j]`, no slices")
        idx = ", ".join("{}" for _ in element.dims)
        _trace.emit(
            _trace.Line(
                f"load {self.name} = {element.tensor.name}[{idx}];",
                [s for s, _ in element.dims],
                [element.tensor],
            )
        )


# ----- tensors and regions -----------------------------------------------------------------


class span:
    """``span(start, size)``: the region dimension ``start +: size``."""

    def __init__(self, start: Any, size: Any):
        self.start = lit(start)
        self.size = lit(size)


class Region:
    """``TENSOR[dims]``: each dim is ``(start, size)`` or ``(index, None)``."""

    def __init__(self, tensor: "Tensor", dims: List[Tuple[Expr, Optional[Expr]]]):
        self.tensor = tensor
        self.dims = dims

    def exprs(self) -> List[Expr]:
        out = []
        for s, z in self.dims:
            out.append(s)
            if z is not None:
                out.append(z)
        return out

    def template(self) -> str:
        parts = ["{}" if z is None else "{} +: {}" for _, z in self.dims]
        return f"{self.tensor.name}[{', '.join(parts)}]"


class Tensor(Decl):
    """``tensor NAME: DTYPE[dims];`` from a type (``Tensor(f32[M, K])``) or ``Tensor.like(array)``."""

    kind = "tensor"

    def __init__(self, type: TensorType, *, bind: Any = None, name: Optional[str] = None):
        super().__init__(_name(name, "tensor"))
        if not isinstance(type, TensorType):
            raise FrontError(f"tensor `{self.name}`: give a type such as `f32[M, 128]`")
        self.type = type
        self.dims = [lit(d) for d in type.dims]
        self.bind = bind

    @staticmethod
    def like(array: Any, *, name: Optional[str] = None) -> "Tensor":
        """A tensor of the element type and (constant) shape of a numpy array."""
        dt = _NUMPY_DTYPES.get(str(array.dtype))
        if dt is None:
            raise FrontError(f"numpy dtype `{array.dtype}` has no pto-wsp element type")
        return Tensor(TensorType(dt, tuple(int(d) for d in array.shape)), name=_name(name, "tensor"))

    def deps(self) -> List[Decl]:
        return [d for e in self.dims for d in expr_deps(e)]

    def decl_text(self) -> str:
        return f"tensor {self.name}: {self.type.text()};"

    def __getitem__(self, key: Any) -> Region:
        try:
            return self._region(key)
        except (TypeError, ValueError) as e:
            raise FrontError(f"region of `{self.name}`: {e}") from None

    def _region(self, key: Any) -> Region:
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > len(self.dims):
            raise FrontError(
                f"region of `{self.name}` has {len(key)} dimensions, the tensor {len(self.dims)}"
            )
        dims: List[Tuple[Expr, Optional[Expr]]] = []
        for i, k in enumerate(list(key) + [slice(None)] * (len(self.dims) - len(key))):
            if isinstance(k, span):
                dims.append((k.start, k.size))
            elif isinstance(k, slice):
                if k.step is not None:
                    raise FrontError(f"region of `{self.name}`: slices have no step")
                start = lit(0 if k.start is None else k.start)
                if k.stop is None:
                    size = self.dims[i] if k.start is None else difference(self.dims[i], start)
                else:
                    size = difference(lit(k.stop), start)
                dims.append((start, size))
            else:
                dims.append((lit(k), None))
        return Region(self, dims)

    def whole(self) -> Region:
        return self[()]


# ----- axes ---------------------------------------------------------------------------------


class Axis(Decl):
    """An iteration space (``axis NAME = ...;``)."""

    kind = "axis"
    nvars = 1

    def __init__(self, name: Optional[str]):
        super().__init__(_name(name, "axis"))


class _DenseMeta(type):
    def __getitem__(cls, n: int) -> "Dense":
        return cls(n)


class Dense(Axis, metaclass=_DenseMeta):
    """``axis NAME = dense(N);`` — written ``Dense[N]`` (or ``Dense(N)``)."""

    def __init__(self, n: Any, *, name: Optional[str] = None):
        super().__init__(name)
        self.n = lit(n)

    def deps(self) -> List[Decl]:
        return expr_deps(self.n)

    def decl_text(self) -> str:
        return f"axis {self.name} = dense({self.n.text()});"


class DenseDyn(Axis):
    """``axis NAME = dense_dyn(n);`` — the extent evaluated when a loop over it starts."""

    def __init__(self, n: Any, *, name: Optional[str] = None):
        super().__init__(name)
        self.n = lit(n)

    def deps(self) -> List[Decl]:
        return expr_deps(self.n)

    def decl_text(self) -> str:
        return f"axis {self.name} = dense_dyn({self.n.text()});"


class Ragged(Axis):
    """``axis NAME = ragged(outer, lengths);`` — row ``r`` has ``lengths[r]`` elements, or
    ``length(lengths[r])`` with ``length=lambda n: (n + 511) // 512``. Two loop variables."""

    nvars = 2

    def __init__(
        self,
        outer: Any,
        lengths: Tensor,
        length: Optional[Callable[[Expr], Any]] = None,
        *,
        name: Optional[str] = None,
    ):
        super().__init__(name)
        self.outer = lit(outer)
        self.lengths = lengths
        self.length = None if length is None else lit(length(Expr("name", (lengths.name,), lengths)))

    def deps(self) -> List[Decl]:
        out = expr_deps(self.outer) + [self.lengths]
        if self.length is not None:
            out += expr_deps(self.length)
        return out

    def decl_text(self) -> str:
        extra = "" if self.length is None else f", {self.length.text()}"
        return f"axis {self.name} = ragged({self.outer.text()}, {self.lengths.name}{extra});"


class Sparse(Axis):
    """``axis NAME = sparse(outer, indptr, indices);`` — CSR; ``P.sel`` iterates its entries."""

    nvars = 2

    def __init__(self, outer: Any, indptr: Tensor, indices: Tensor, *, name: Optional[str] = None):
        super().__init__(name)
        self.outer = lit(outer)
        self.indptr = indptr
        self.indices = indices

    def deps(self) -> List[Decl]:
        return expr_deps(self.outer) + [self.indptr, self.indices]

    def decl_text(self) -> str:
        return f"axis {self.name} = sparse({self.outer.text()}, {self.indptr.name}, {self.indices.name});"


# ----- kernels ------------------------------------------------------------------------------


class _Dir:
    def __init__(self, word: str):
        self.word = word

    def __getitem__(self, t: TensorType) -> Tuple[str, TensorType]:
        if not isinstance(t, TensorType):
            raise TypeError(f"`{self.word}[...]` takes a tile type such as `f32[16, ANY]`")
        return (self.word, t)


#: Tile parameter directions, used as annotations: ``x: In[f32[16, ANY]]``.
In = _Dir("in")
Out = _Dir("out")
InOut = _Dir("inout")


class Param:
    """A kernel parameter: a tile (``direction``, ``type``) or a scalar (``type``)."""

    def __init__(self, name: str, direction: Optional[str], type: Any):
        self.name = name
        self.direction = direction
        self.type = type

    def text(self) -> str:
        if self.direction is None:
            return f"{self.name}: {self.type.name}"
        return f"{self.direction} {self.name}: {self.type.text(tile=True)}"


class Kernel(Decl):
    """``kernel NAME(params) @POOL [tiers {...}] [{ body }];`` declared with ``@kernel``; calling
    it inside a workload writes a ``task``."""

    kind = "kernel"

    def __init__(
        self,
        name: str,
        params: List[Param],
        pool: str = "any",
        alias: Optional[str] = None,
        tiers: Sequence[Tuple[Callable[..., Any], Any]] = (),
        otherwise: Any = None,
        body: Optional[str] = None,
    ):
        super().__init__(name)
        if pool not in ("any", "vector", "cube"):
            raise FrontError(f"kernel `{name}`: pool must be `vector`, `cube` or `any`, not `{pool}`")
        self.params = params
        self.pool = pool
        self.alias = alias
        self.body = body
        self.tiers: List[Tuple[Expr, Kernel]] = []
        names = {p.name: p for p in params}
        for cond, target in tiers:
            args = []
            for a in inspect.signature(cond).parameters:
                if a not in names:
                    raise FrontError(f"kernel `{name}`: tier condition names `{a}`, not a parameter")
                args.append(Expr("name", (a,), None))
            self.tiers.append((lit(cond(*args)), target))
        if tiers and otherwise is None:
            raise FrontError(f"kernel `{name}`: tiers need `otherwise=` (the `else` kernel)")
        self.otherwise = otherwise

    def deps(self) -> List[Decl]:
        out: List[Decl] = [k for _, k in self.tiers if isinstance(k, Kernel)]
        if isinstance(self.otherwise, Kernel):
            out.append(self.otherwise)
        return out

    def decl_text(self) -> str:
        s = f"kernel {self.name}({', '.join(p.text() for p in self.params)})"
        if self.pool != "any":
            s += f" @{self.pool}"
        if self.tiers:
            cases = [f"{c.text()} => {_kname(k)}" for c, k in self.tiers]
            cases.append(f"else => {_kname(self.otherwise)}")
            s += " tiers { " + ", ".join(cases) + " }"
        if self.body is not None:
            return s + " {\n" + self.body.strip("\n") + "\n}"
        return s + ";"

    def __getitem__(self, key: Any) -> "Kernel":
        """``kernel[b, h](...)``: the task's loop indices, for the reader (the task runs once per
        iteration of its enclosing loops either way)."""
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        from . import _trace

        _trace.task(self, args, kwargs)


def _kname(k: Any) -> str:
    return k.name if isinstance(k, Kernel) else str(k)


def kernel(
    fn: Optional[Callable[..., Any]] = None,
    *,
    pool: str = "any",
    name: Optional[str] = None,
    alias: Optional[str] = None,
    tiers: Sequence[Tuple[Callable[..., Any], Any]] = (),
    otherwise: Any = None,
    body: Optional[str] = None,
) -> Any:
    """Declares a kernel from a function's annotated signature (its body is not run)::

        @kernel(pool="cube", alias="matmul")
        def proj(x: In[f32[ANY, ANY]], w: In[f16[ANY, 128]], y: Out[f32[ANY, 128]]): ...

    Scalar parameters are annotated with a scalar type (``pos: i64``, ``eps: f64``). ``alias``
    runs a built-in under this name (a ``//@ alias`` line); ``tiers`` are ``(lambda PARAM:
    cond, kernel)`` pairs with ``otherwise=``; ``body`` is the kernel's tile instructions.
    """

    def make(f: Callable[..., Any]) -> Kernel:
        params = []
        for pname, p in inspect.signature(f).parameters.items():
            ann = p.annotation
            if isinstance(ann, str):
                ann = eval(ann, f.__globals__)  # noqa: S307 - the user's own annotation
            if ann is inspect.Parameter.empty:
                raise FrontError(f"kernel `{f.__name__}`: parameter `{pname}` has no type annotation")
            if isinstance(ann, tuple) and len(ann) == 2 and isinstance(ann[1], TensorType):
                params.append(Param(pname, ann[0], ann[1]))
            else:
                params.append(Param(pname, None, _scalar_type(ann, f"kernel `{f.__name__}`")))
        return Kernel(name or f.__name__, params, pool, alias, tiers, otherwise, body)

    return make if fn is None else make(fn)
