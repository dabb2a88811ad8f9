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
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Type

from . import _where
from ._expr import Expr, difference, lit
from .errors import ValidationError, _render, api

_ORDER = itertools.count()


def FrontError(message: str, loc: Optional[_where.Loc] = None) -> ValidationError:
    """A mistake found while building a module in Python: a ``ValidationError`` at the user's
    ``file:line:column`` (``loc``, else the caller's place)."""
    loc = loc or _where.here()
    return ValidationError(_render(message, loc.file, loc.line, loc.column), loc.file, loc.line, loc.column)


def _name(name: Optional[str], what: str) -> str:
    if name is not None:
        if not isinstance(name, str) or not name.isidentifier():
            raise FrontError(f"the name of a {what} must be an identifier, not {name!r}")
        return name
    n = _where.assigned_name(exact=True)
    if n is None:
        raise FrontError(
            f"cannot tell the name of this {what}: assign it to one variable (`X = ...`, or "
            "`A, B = ..., ...` element by element) in a source file, or pass `name=`"
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


class _DTypeMeta(type):
    """Makes ``f32[M, 128]`` (a tensor or tile type) and ``repr(f32)`` work on the classes."""

    def __getitem__(cls, dims: Any) -> "TensorType":
        if not getattr(cls, "tensor", False):
            raise TypeError(f"`{getattr(cls, 'text', cls.__name__)}` is not an element type of tensors")
        if not isinstance(dims, tuple):
            dims = (dims,)
        return TensorType(cls, tuple(dims))  # type: ignore[arg-type]

    def __repr__(cls) -> str:
        return str(getattr(cls, "text", cls.__name__))


class DType(metaclass=_DTypeMeta):
    """An element or scalar type (``f32``, ``i64``, ...).

    The types are classes, so they can annotate parameters (``eps: f32``, ``pos: i64``); an
    element type indexed by dimensions is a tensor or tile type: ``f32[M, 128]``.

    Attributes
    ----------
    text : str
        Its spelling in the text format (``u64_t`` is ``u64``, ``bool_`` is ``bool``).
    tensor : bool
        Whether tensors and tiles may hold it.
    scalar : bool
        Whether symbols, slots and kernel parameters may have it.
    """

    text: ClassVar[str] = ""
    tensor: ClassVar[bool] = False
    scalar: ClassVar[bool] = False


class f16(DType):
    """16-bit IEEE float (``numpy.float16``): tensors and tiles."""

    text, tensor = "f16", True


class bf16(DType):
    """bfloat16 (``ml_dtypes.bfloat16``, or ``numpy.uint16`` bits): tensors and tiles."""

    text, tensor = "bf16", True


class f32(DType):
    """32-bit float: tensors, tiles and float scalar parameters."""

    text, tensor, scalar = "f32", True, True


class f64(DType):
    """64-bit float: scalar parameters (a float constant passed to a kernel)."""

    text, scalar = "f64", True


class i32(DType):
    """32-bit signed integer tensors."""

    text, tensor = "i32", True


class u32(DType):
    """32-bit unsigned integer tensors."""

    text, tensor = "u32", True


class i64(DType):
    """64-bit signed integer: tensors, symbols, slots and integer scalar parameters."""

    text, tensor, scalar = "i64", True, True


class u64_t(DType):
    """64-bit unsigned integer (``u64`` in the text; ``u64(7)`` is the literal ``7u``)."""

    text, tensor, scalar = "u64", True, True


class u8(DType):
    """8-bit unsigned integer tensors."""

    text, tensor = "u8", True


class bool_(DType):
    """A boolean scalar (``bool`` in the text)."""

    text, scalar = "bool", True


#: A tile dimension of any size (``?`` in the text).
ANY = None

DTYPES: Dict[str, Type[DType]] = {d.text: d for d in (f16, bf16, f32, f64, i32, u32, i64, u64_t, u8, bool_)}

# numpy / torch dtype names -> element type.
_ARRAY_DTYPES: Dict[str, Type[DType]] = {
    "float16": f16,
    "float32": f32,
    "int32": i32,
    "uint32": u32,
    "int64": i64,
    "uint64": u64_t,
    "uint8": u8,
    "bfloat16": bf16,
}


class TensorType:
    """``DTYPE[dims]``: dims are expressions (tensors) or ints / ``None`` for ``?`` (tiles).

    Attributes
    ----------
    dtype : type
        The element type (a :class:`DType` class).
    dims : tuple
    """

    def __init__(self, dtype: Type[DType], dims: Tuple[Any, ...]):
        self.dtype = dtype
        self.dims = dims

    def text(self, tile: bool = False) -> str:
        """The type as ``.wsp`` text (``tile=True``: the kernel parameter form, ``?`` for ANY)."""
        if tile:
            parts = ["?" if d is None else str(int(d)) for d in self.dims]
        else:
            parts = [lit(d).text() for d in self.dims]
        return f"{self.dtype.text}[{', '.join(parts)}]"

    def __repr__(self) -> str:
        return self.text(tile=all(d is None or isinstance(d, int) for d in self.dims))


def _is_dtype(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, DType) and t is not DType


def _scalar_type(t: Any, what: str) -> Type[DType]:
    if t is bool:
        return bool_
    if t is int:
        return i64
    if t is float:
        return f64
    if _is_dtype(t) and t.scalar:
        return t  # type: ignore[no-any-return]
    raise FrontError(f"{what}: `{t!r}` is not a scalar type (bool, i64, u64_t, f32, f64)")


# ----- symbols and slots -------------------------------------------------------------------


class _Named(Decl, Expr):
    """A declaration that is also an expression: its name (``M // 128`` is ``M / 128``)."""

    __hash__ = object.__hash__

    def __init__(self, name: str):
        Decl.__init__(self, name)
        Expr.__init__(self, "name", (name,), self)


class Symbol(_Named):
    """A value fixed when the program is compiled: a size, a count, a flag.

    An expression in Python arithmetic (``M // 128``); ``symbol NAME: TYPE;`` in the text.

    Parameters
    ----------
    type : scalar type, default i64
        ``i64``, ``u64_t``, ``bool_`` (or Python's ``int`` / ``bool``), ``f32``, ``f64``.
    bind : optional
        Its default value (a ``//@ bind`` line); ``compile(bind=...)`` overrides it.
    name : str, optional
        Default: the variable it is assigned to (``M = Symbol()`` is ``M``).

    Examples
    --------
    >>> M, K = Symbol(bind=256), Symbol(bind=128)   # doctest: +SKIP
    """

    kind = "symbol"

    @api
    def __init__(self, type: Any = i64, *, bind: Any = None, name: Optional[str] = None):
        super().__init__(_name(name, "symbol"))
        self.type = _scalar_type(type, f"symbol `{self.name}`")
        self.bind = bind

    def decl_text(self) -> str:
        """The declaration as ``.wsp`` text."""
        return f"symbol {self.name}: {self.type.text};"


class Slot(_Named):
    """A variable of the program that generates tasks, set while it runs (``slot.set(e)``,
    ``slot.load(T[i])``); ``slot NAME: TYPE;`` in the text.

    Parameters
    ----------
    type : scalar type, default i64
    name : str, optional
        Default: the variable it is assigned to.
    """

    kind = "slot"

    @api
    def __init__(self, type: Any = i64, *, name: Optional[str] = None):
        super().__init__(_name(name, "slot"))
        self.type = _scalar_type(type, f"slot `{self.name}`")

    def decl_text(self) -> str:
        """The declaration as ``.wsp`` text."""
        return f"slot {self.name}: {self.type.text};"

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
    """A region dimension of ``size`` indices from ``start``: ``X[span(i * 16, 16), :]`` is
    ``X[i * 16:(i + 1) * 16, :]`` (``start +: size`` in the text).

    Parameters
    ----------
    start, size : int or expression
    """

    def __init__(self, start: Any, size: Any):
        self.start = lit(start)
        self.size = lit(size)


class Region:
    """``TENSOR[dims]``: each dim is ``(start, size)`` or ``(index, None)``."""

    def __init__(self, tensor: "Tensor", dims: List[Tuple[Expr, Optional[Expr]]]):
        self.tensor = tensor
        self.dims = dims

    def exprs(self) -> List[Expr]:
        """The region's start and size expressions, in order."""
        out = []
        for s, z in self.dims:
            out.append(s)
            if z is not None:
                out.append(z)
        return out

    def template(self) -> str:
        """The region as ``.wsp`` text with a ``{}`` per expression."""
        parts = ["{}" if z is None else "{} +: {}" for _, z in self.dims]
        return f"{self.tensor.name}[{', '.join(parts)}]"


class Tensor(Decl):
    """A tensor of the module: what tasks read and write, one array per tensor when the program
    is called.

    ``X[i * 16:(i + 1) * 16, :]`` is a region of it (numpy-style: an index, a slice with a
    constant-folded size, ``:`` for a whole dimension, ``span(start, size)``).

    Parameters
    ----------
    type : TensorType
        Element type and dimensions, expressions of symbols: ``f32[M, 128]``.
    bind : list of int, optional
        The contents of an integer tensor read by the program (``//@ bind`` line).
    fill : str, optional
        How ``pto-wsp run`` generates this float tensor when no input gives it (a ``//@ fill``
        line): ``"uniform(LO, HI)"``, ``"rope_cos(THETA)"`` or ``"rope_sin(THETA)"``
        (README, "Generated inputs"). Arrays passed to a compiled program replace it.
    name : str, optional
        Default: the variable it is assigned to.

    Examples
    --------
    >>> A = Tensor(f16[M, K])                          # doctest: +SKIP
    >>> lens = Tensor(i32[nreq], bind=[1500, 200])     # doctest: +SKIP
    >>> cos = Tensor(f32[seq, 64], fill="rope_cos(10000)")  # doctest: +SKIP
    """

    kind = "tensor"

    @api
    def __init__(
        self, type: TensorType, *, bind: Any = None, fill: Optional[str] = None, name: Optional[str] = None
    ):
        super().__init__(_name(name, "tensor"))
        if not isinstance(type, TensorType):
            raise FrontError(f"tensor `{self.name}`: give a type such as `f32[M, 128]`")
        if fill is not None and not isinstance(fill, str):
            raise FrontError(f"tensor `{self.name}`: `fill` is a generator such as \"uniform(-1, 1)\"")
        self.type = type
        self.dims = [lit(d) for d in type.dims]
        self.bind = bind
        self.fill = fill

    @staticmethod
    def like(array: Any, *, name: Optional[str] = None) -> "Tensor":
        """A tensor of the element type and (constant) shape of an array (numpy, torch, or any
        object with ``dtype`` and ``shape``)."""
        dt = _ARRAY_DTYPES.get(str(array.dtype).replace("torch.", ""))
        if dt is None:
            raise FrontError(f"array dtype `{array.dtype}` has no pto-wsp element type")
        return Tensor(TensorType(dt, tuple(int(d) for d in array.shape)), name=_name(name, "tensor"))

    def deps(self) -> List[Decl]:
        return [d for e in self.dims for d in expr_deps(e)]

    def decl_text(self) -> str:
        """The declaration as ``.wsp`` text."""
        return f"tensor {self.name}: {self.type.text()};"

    @api
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
        """The region of the whole tensor (``T[:, :]``)."""
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
    """An iteration space of ``n`` points, ``n`` known at compile time: ``Dense(8)``
    (``axis NAME = dense(8);``; ``Dense[8]`` also works at run time).

    Parameters
    ----------
    n : int or expression of symbols
    name : str, optional
        Default: the variable it is assigned to.
    """

    def __init__(self, n: Any, *, name: Optional[str] = None):
        super().__init__(name)
        self.n = lit(n)

    def deps(self) -> List[Decl]:
        return expr_deps(self.n)

    def decl_text(self) -> str:
        """The declaration as ``.wsp`` text."""
        return f"axis {self.name} = dense({self.n.text()});"


class DenseDyn(Axis):
    """An iteration space whose extent is evaluated when a loop over it starts
    (``axis NAME = dense_dyn(n);``): ``DenseDyn(M // 128)``.

    Parameters
    ----------
    n : expression
        Over symbols and slots.
    name : str, optional
        Default: the variable it is assigned to.
    """

    def __init__(self, n: Any, *, name: Optional[str] = None):
        super().__init__(name)
        self.n = lit(n)

    def deps(self) -> List[Decl]:
        return expr_deps(self.n)

    def decl_text(self) -> str:
        """The declaration as ``.wsp`` text."""
        return f"axis {self.name} = dense_dyn({self.n.text()});"


class Ragged(Axis):
    """A ragged iteration space: ``outer`` rows, row ``r`` of ``lengths[r]`` points (or
    ``length(lengths[r])``); a loop over it has two variables (``for r, i in P(axis)``).
    ``axis NAME = ragged(outer, lengths[, LEN]);`` in the text.

    Parameters
    ----------
    outer : expression
        Number of rows.
    lengths : Tensor
        An integer tensor of one length per row.
    length : callable, optional
        ``lambda n: (n + 511) // 512``: the row's point count from its length.
    name : str, optional
    """

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
        """The declaration as ``.wsp`` text."""
        extra = "" if self.length is None else f", {self.length.text()}"
        return f"axis {self.name} = ragged({self.outer.text()}, {self.lengths.name}{extra});"


class Sparse(Axis):
    """A sparse iteration space in CSR form; ``for r, e in P.sel(axis)`` visits each stored
    entry (``axis NAME = sparse(outer, indptr, indices);``).

    Parameters
    ----------
    outer : expression
        Number of rows.
    indptr, indices : Tensor
        Integer tensors: row ``r``'s entries are ``indices[indptr[r]:indptr[r + 1]]``.
    name : str, optional
    """

    nvars = 2

    def __init__(self, outer: Any, indptr: Tensor, indices: Tensor, *, name: Optional[str] = None):
        super().__init__(name)
        self.outer = lit(outer)
        self.indptr = indptr
        self.indices = indices

    def deps(self) -> List[Decl]:
        return expr_deps(self.outer) + [self.indptr, self.indices]

    def decl_text(self) -> str:
        """The declaration as ``.wsp`` text."""
        return f"axis {self.name} = sparse({self.outer.text()}, {self.indptr.name}, {self.indices.name});"


# ----- kernels ------------------------------------------------------------------------------


class _Dir:
    """A tile parameter direction used as an annotation: ``x: In[f32, 16, ANY]`` (element type,
    then the tile's dimensions; ``In[f32[16, ANY]]`` is read the same way)."""

    def __init__(self, word: str):
        self.word = word

    def __getitem__(self, key: Any) -> Tuple[str, TensorType]:
        if isinstance(key, TensorType):
            return (self.word, key)
        if isinstance(key, tuple) and key and _is_dtype(key[0]) and key[0].tensor:
            dims = key[1:]
            if not dims or not all(d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in dims):
                raise TypeError(
                    f"`{self.word.capitalize()}[{key[0].text}, ...]` takes the tile's dimensions as ints or ANY, "
                    f"as in `{_DIR_NAMES[self.word]}[f32, 16, ANY]`"
                )
            return (self.word, TensorType(key[0], tuple(dims)))
        raise TypeError(
            f"`{_DIR_NAMES[self.word]}[...]` takes an element type and the tile's dimensions, such as "
            f"`{_DIR_NAMES[self.word]}[f32, 16, ANY]`"
        )

    def __repr__(self) -> str:
        return _DIR_NAMES[self.word]


_DIR_NAMES = {"in": "In", "out": "Out", "inout": "InOut"}

if TYPE_CHECKING:
    # For a type checker a tile parameter is its element type, annotated with its dimensions:
    # `In[f32, 16, ANY]` is `Annotated[f32, 16, None]`, a valid type in the user's file.
    from typing import Annotated as In
    from typing import Annotated as InOut
    from typing import Annotated as Out
else:
    #: Tile parameter directions, used as annotations: ``x: In[f32, 16, ANY]``.
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
        """The parameter as ``.wsp`` text."""
        if self.direction is None:
            return f"{self.name}: {self.type.text}"
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
        # A body written as a Python tile function: (statement text, where it was written).
        self.body_lines: List[Tuple[str, _where.Loc]] = []
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
        """The declaration as ``.wsp`` text (with its body, if it has one)."""
        s = f"kernel {self.name}({', '.join(p.text() for p in self.params)})"
        if self.pool != "any":
            s += f" @{self.pool}"
        if self.tiers:
            cases = [f"{c.text()} => {_kname(k)}" for c, k in self.tiers]
            cases.append(f"else => {_kname(self.otherwise)}")
            s += " tiers { " + ", ".join(cases) + " }"
        if self.body is not None:
            return s + " {\n" + self.body.strip("\n") + "\n}"
        if self.body_lines:
            return s + " {\n" + "\n".join("    " + t for t, _ in self.body_lines) + "\n}"
        return s + ";"

    def decl_lines(self) -> List[Tuple[str, _where.Loc]]:
        """The declaration's lines, each with the Python place it came from (a body written as
        a Python tile function maps each instruction to its line)."""
        text = self.decl_text().split("\n")
        if not self.body_lines:
            return [(t, self.loc) for t in text]
        locs = [self.loc] + [loc for _, loc in self.body_lines] + [self.loc]
        return list(zip(text, locs))

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
    """Declares a kernel from a function: its annotated signature is the parameter list, and its
    body, when it has one, is the kernel written in tile instructions.

    Parameters
    ----------
    fn : function
        Tile parameters are annotated ``In[DTYPE, ROWS, COLS]``, ``Out[...]`` or ``InOut[...]``
        (``ANY`` for a dimension of any size), scalar parameters with a scalar type (``pos:
        i64``, ``eps: f32``). A body of ``...`` declares a kernel implemented elsewhere (a
        built-in of the same name, ``alias=``, or ``tiers=``); any other body is run once, at
        decoration, over tile values (:mod:`pto_wsp.tile`) and recorded as the kernel's tile
        instructions.
    pool : {"any", "vector", "cube"}
        The execution unit the kernel's tasks run on.
    name : str, optional
        The kernel's name (default: the function's).
    alias : str, optional
        Run the built-in of this name (a ``//@ alias`` line of the text format).
    tiers : list of (callable, Kernel), optional
        ``(lambda PARAM: condition, kernel)`` pairs, tried in order; ``otherwise`` is the kernel
        when none holds.
    otherwise : Kernel, optional
    body : str, optional
        The body as tile-instruction text (the text format's form), instead of a Python body.

    Returns
    -------
    Kernel
        Calling it inside a ``@workload`` writes a ``task``.

    Raises
    ------
    ValidationError
        At the user's line: a parameter without an annotation, a tile operation the instruction
        table does not allow (the same checks as the text format's).

    Examples
    --------
    A declaration of a built-in, and a kernel written with tile operations:

    >>> from pto_wsp import *
    >>> from pto_wsp import tile as T
    >>> @kernel(pool="cube", alias="matmul")
    ... def proj(x: In[f32, ANY, ANY], w: In[f16, ANY, 128], y: Out[f32, ANY, 128]): ...
    >>> @kernel(pool="vector")
    ... def softmax_rows(x: In[f32, 8, 64], y: Out[f32, 8, 64], scale: f32):
    ...     t = T.load(x) * scale
    ...     e = T.exp(t - T.row_max(t))
    ...     T.store(y, e / T.row_sum(e))
    """

    @api
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
        k = Kernel(name or f.__name__, params, pool, alias, tiers, otherwise, body)
        if body is None and alias is None and not tiers:
            from . import tile

            k.body_lines = tile.trace_kernel(k, f)
        k.__doc__ = f.__doc__
        return k

    return make if fn is None else make(fn)
