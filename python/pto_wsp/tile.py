"""Tile kernels written as Python functions over tile values.

Why: a kernel body in PTO tile instructions is what a kernel author writes for Ascend, and a
Python user wants to write it the way Triton or TileLang kernels are written: values, operators
and a few functions, not instruction text in a string. The function is run once, when ``@kernel``
decorates it, over symbolic tile values; every operation records the tile instruction it stands
for, with the user's ``file:line:column``, and the kernel's body is that list of instructions —
the same body the text format writes, so it is parsed, validated, run on the CPU, costed and
emitted as PTO-ISA C++ by exactly the code that handles ``.wsp`` kernels.

Promises:

- The instructions are the one table of the Rust side (``pto_wsp::ir::tile_isa``), read from the
  extension at import: each is also a function of this module under its mnemonic (``TROWMAX``,
  ``TMATMUL``, ...), which allocates its destination tile (or writes ``out=``) and returns it.
- Operators choose the instruction from the operands' shapes: ``a - m`` with ``m`` one value per
  row is ``TROWEXPANDSUB``, ``a * s`` with a float is ``TMULS``, ``c += a @ b`` on an
  accumulator is ``TMATMUL_ACC``. An operation the table cannot express raises a
  ``ValidationError`` at the user's line naming what is missing.
- Every operation makes a new tile value; the body's tiles are then assigned to declared tiles
  by liveness (tiles of one kind, type, shape and valid part whose values do not overlap in time
  share one declaration, and an instruction may write the tile it reads), so ``t = t * s`` is
  ``TMULS(t, t, s)``. A tile is named after the variable it is assigned to.
- Inside ``for i in range(n)`` (``tile.range``) and ``with when(c)`` / ``with otherwise()``, a
  local variable that held a tile before the block and is rebound inside it is a value carried
  across iterations: the block ends with a ``TMOV`` into the tile it held before, and the variable
  then names that tile — so ``m = maximum(m, row_max(x))`` in a loop keeps the running maximum.
- Mistakes the instruction table's checks find (shapes, element types, tile kinds) are reported
  by the validator at the Python line of the operation, when the module is built.

Example (a fused row softmax, ``examples/kernels/softmax.wsp``'s kernel)::

    from pto_wsp import *
    from pto_wsp import tile as T

    @kernel(pool="vector")
    def softmax_tile(x: In[f32, 8, 64], y: Out[f32, 8, 64], scale: f32):
        t = T.load(x)
        t = t * scale
        m = T.row_max(t)
        t = T.exp(t - m)
        l = T.row_sum(t)
        T.store(y, t / l)
"""

from __future__ import annotations

import builtins
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type, Union

from . import _where
from ._decl import DType, FrontError, Param, _is_dtype, f32
from ._expr import Expr, difference, lit

if TYPE_CHECKING:
    from ._decl import Kernel

__all__ = [
    "Tile",
    "abs",
    "astype",
    "clear",
    "col_max",
    "col_sum",
    "copy",
    "exp",
    "fill",
    "full",
    "gemm",
    "let",
    "load",
    "log",
    "matmul",
    "maximum",
    "minimum",
    "otherwise",
    "range",
    "recip",
    "row_max",
    "row_min",
    "row_sum",
    "rsqrt",
    "select",
    "sort",
    "sqrt",
    "store",
    "tile",
    "transpose",
    "when",
    "where",
    "zeros",
]

KINDS = ("vec", "mat", "left", "right", "acc")
CMP_MODES = ("EQ", "NE", "LT", "LE", "GT", "GE")


def _table() -> List[Dict[str, Any]]:
    from ._pto_wsp import tile_instructions

    return list(tile_instructions())


#: The instruction table, by mnemonic: ``operands`` (kinds in order) and ``shape`` (the rule).
INSTRUCTIONS: Dict[str, Dict[str, Any]] = {d["mnemonic"]: d for d in _table()}


# ----- the body being traced ------------------------------------------------------------------


class _Inst:
    """One instruction: its mnemonic and operands (tiles, globals, text of scalars)."""

    def __init__(self, op: str, args: List[Any], loc: _where.Loc):
        self.op = op
        self.args = args
        self.loc = loc


class _Block:
    """``for`` / ``if`` with their bodies; ``let``."""

    def __init__(self, word: str, head: str, exprs: Sequence[Expr], loc: _where.Loc):
        self.word = word  # "for", "if", "let"
        self.head = head  # text with a {} per expression
        self.exprs = list(exprs)
        self.loc = loc
        self.body: List[Any] = []
        self.orelse: Optional[List[Any]] = None


class _Body:
    """A kernel body being traced."""

    def __init__(self, kernel: "Kernel"):
        self.kernel = kernel
        self.stmts: List[Any] = []
        self.stack: List[List[Any]] = [self.stmts]
        self.tiles: List[Tile] = []
        # Names of parameters, locals and loop variables (tiles must not take them).
        self.names = {p.name for p in kernel.params}
        # Where a `tile.range` loop was left with `break` / `return`, if one was.
        self.broken: Optional[_where.Loc] = None

    def emit(self, stmt: Any) -> None:
        self.stack[-1].append(stmt)

    def fresh(self, hint: str) -> str:
        name, k = hint, 1
        while name in self.names:
            name, k = f"{hint}_{k}", k + 1
        self.names.add(name)
        return name


class _State(threading.local):
    def __init__(self) -> None:
        self.body: Optional[_Body] = None


_STATE = _State()


def _body(what: str) -> _Body:
    b = _STATE.body
    if b is None:
        raise FrontError(f"`{what}` is a tile operation: use it inside the body of a `@kernel` function")
    return b


def _hint() -> Optional[str]:
    """The variable the current operation's result is assigned to, when the operation is the
    whole assigned value."""
    return _where.assigned_name(exact=True)


# ----- values -------------------------------------------------------------------------------


class Global:
    """A tile parameter of the kernel (global memory: the task's region), as ``rows × cols``.

    ``x[r0:r1, c0:c1]`` is the part of it at row ``r0``, column ``c0`` (the offsets of ``load``
    and ``store``); the sizes must be constants."""

    def __init__(self, param: Param):
        self.name = param.name
        self.direction = param.direction
        self.dtype: Type[DType] = param.type.dtype
        dims = list(param.type.dims)
        if len(dims) == 1:
            self.rows: Optional[int] = 1
            self.cols: Optional[int] = dims[0]
        else:
            rows: Optional[int] = 1
            for d in dims[:-1]:
                rows = None if (d is None or rows is None) else rows * d
            self.rows, self.cols = rows, dims[-1]

    def __getitem__(self, key: Any) -> "_Part":
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != 2:
            raise FrontError(f"`{self.name}[...]` takes a row and a column part: `{self.name}[r0:r1, c0:c1]`")
        starts: List[Expr] = []
        sizes: List[Optional[int]] = []
        for k, full in zip(key, (self.rows, self.cols)):
            if isinstance(k, slice):
                if k.step is not None:
                    raise FrontError(f"`{self.name}[...]`: parts have no step")
                start = lit(0 if k.start is None else k.start)
                if k.stop is None:
                    size: Any = None if full is None else (lit(full) if start.op == "int" and start.args[0] == 0 else difference(lit(full), start))
                else:
                    size = difference(lit(k.stop), start)
                if size is not None and size.op != "int":
                    raise FrontError(
                        f"`{self.name}[...]`: the part's size `{size.text()}` is not a constant (tile shapes are)"
                    )
                starts.append(start)
                sizes.append(None if size is None else size.args[0])
            else:
                starts.append(lit(k))
                sizes.append(1)
        return _Part(self, starts[0], starts[1], sizes[0], sizes[1])

    def __repr__(self) -> str:
        return f"<tile parameter {self.direction} {self.name}>"


class _Part:
    """A part of a tile parameter: offsets and (constant) sizes."""

    def __init__(self, g: Global, row: Expr, col: Expr, rows: Optional[int], cols: Optional[int]):
        self.g, self.row, self.col, self.rows, self.cols = g, row, col, rows, cols


class Scalar:
    """A float scalar parameter of the kernel: usable as the float operand of an instruction
    (``t * scale``), not in arithmetic of its own (the kernel language has none on floats)."""

    def __init__(self, name: str):
        self.name = name

    def _refuse(self, *_: Any) -> Any:
        raise FrontError(
            f"`{self.name}` is a float parameter: it can be an operand of a tile operation (`t * {self.name}`), "
            "but the kernel language has no arithmetic on float scalars"
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse

    def __repr__(self) -> str:
        return f"<float parameter {self.name}>"


class Tile:
    """A tile value: ``kind`` (``vec``, ``mat``, ``left``, ``right``, ``acc``), element type,
    declared ``rows × cols`` and optional valid part.

    Operators: ``+ - * /`` with a tile of the same shape (element-wise), a tile of one value per
    row (``R × 1``: broadcast across the row) or one per column (``1 × C``, for ``*``), or a
    float (the ``...S`` instructions); ``-t``, ``abs(t)``, ``a @ b`` (a ``left`` and a ``right``
    tile: a new ``acc`` tile), ``c += a @ b``; ``<, <=, >, >=`` give a mask tile
    (``TCMP``). Methods: ``sum``/``max``/``min`` along an axis, ``astype``, ``to`` (another
    kind), ``T`` (transpose)."""

    __array_priority__ = 1000  # `2.0 * t` calls Tile.__rmul__, never numpy

    def __init__(
        self,
        body: _Body,
        kind: str,
        dtype: Type[DType],
        rows: int,
        cols: int,
        valid: Optional[Tuple[Expr, Expr]],
        hint: Optional[str],
        loc: _where.Loc,
    ):
        if kind not in KINDS:
            raise FrontError(f"tile kind must be one of {', '.join(KINDS)}, not {kind!r}", loc)
        if not (_is_dtype(dtype) and dtype.text in ("f32", "f16", "bf16")):
            raise FrontError(f"a tile holds f32, f16 or bf16, not {dtype!r}", loc)
        self._b = body
        self.kind = kind
        self.dtype = dtype
        self.rows = int(rows)
        self.cols = int(cols)
        self.valid = valid
        self.hint = hint
        self.loc = loc
        self.id = len(body.tiles)
        # After a block that rebinds a variable, the tile later instructions use instead.
        self.redirect: Optional[Tile] = None
        body.tiles.append(self)

    def _cur(self) -> "Tile":
        t = self
        while t.redirect is not None:
            t = t.redirect
        return t

    @property
    def shape(self) -> Tuple[int, int]:
        """``(rows, cols)`` as declared."""
        return (self.rows, self.cols)

    def signature(self) -> Tuple[Any, ...]:
        valid = None if self.valid is None else (self.valid[0].text(), self.valid[1].text())
        return (self.kind, self.dtype, self.rows, self.cols, valid)

    def __repr__(self) -> str:
        return f"<tile {self.hint or '#' + str(self.id)}: {self.kind} {self.dtype.text}[{self.rows}, {self.cols}]>"

    def __bool__(self) -> bool:
        raise FrontError("a tile is not a truth value: its elements are known only when the kernel runs")

    # ----- operators ----------------------------------------------------------------------

    def __add__(self, o: Any) -> "Tile":
        return _binary("add", self, o)

    def __radd__(self, o: Any) -> "Tile":
        return _binary("add", self, o)

    def __sub__(self, o: Any) -> "Tile":
        return _binary("sub", self, o)

    def __rsub__(self, o: Any) -> "Tile":
        if isinstance(o, Tile):
            return _binary("sub", o, self)
        return _binary("add", _unary("TNEG", self, None), o)

    def __mul__(self, o: Any) -> "Tile":
        return _binary("mul", self, o)

    def __rmul__(self, o: Any) -> "Tile":
        return _binary("mul", self, o)

    def __truediv__(self, o: Any) -> "Tile":
        return _binary("div", self, o)

    def __rtruediv__(self, o: Any) -> "Tile":
        if isinstance(o, Tile):
            return _binary("div", o, self)
        return _binary("mul", _unary("TRECIP", self, None), o)

    def __neg__(self) -> "Tile":
        return _unary("TNEG", self, _hint())

    def __abs__(self) -> "Tile":
        return _unary("TABS", self, _hint())

    def __matmul__(self, o: Any) -> "Tile":
        return matmul(self, o)

    def __iadd__(self, o: Any) -> "Tile":
        return _inplace("add", self, o)

    def __isub__(self, o: Any) -> "Tile":
        return _inplace("sub", self, o)

    def __imul__(self, o: Any) -> "Tile":
        return _inplace("mul", self, o)

    def __itruediv__(self, o: Any) -> "Tile":
        return _inplace("div", self, o)

    def __lt__(self, o: Any) -> "Tile":
        return _cmp(self, o, "LT")

    def __le__(self, o: Any) -> "Tile":
        return _cmp(self, o, "LE")

    def __gt__(self, o: Any) -> "Tile":
        return _cmp(self, o, "GT")

    def __ge__(self, o: Any) -> "Tile":
        return _cmp(self, o, "GE")

    __hash__ = object.__hash__

    # ----- methods ------------------------------------------------------------------------

    def sum(self, axis: int) -> "Tile":
        """``axis=1``: one sum per row (``R × 1``, ``TROWSUM``); ``axis=0``: per column
        (``1 × C``, ``TCOLSUM``)."""
        return _reduce("sum", self, axis)

    def max(self, axis: int) -> "Tile":
        """``axis=1``: ``TROWMAX`` (``R × 1``); ``axis=0``: ``TCOLMAX`` (``1 × C``)."""
        return _reduce("max", self, axis)

    def min(self, axis: int) -> "Tile":
        """``axis=1``: ``TROWMIN`` (``R × 1``)."""
        return _reduce("min", self, axis)

    def astype(self, dtype: Type[DType]) -> "Tile":
        """A tile of another element type (``TCVT``, rounded to nearest even)."""
        return astype(self, dtype)

    def to(self, kind: str) -> "Tile":
        """The tile copied into a tile of another kind (``TMOV``): ``acc.to("vec")``,
        ``t.to("left")``."""
        result: Tile = copy(self, kind=kind)
        return result

    @property
    def T(self) -> "Tile":  # noqa: N802 - numpy's spelling
        """The transpose (``TTRANS``)."""
        return transpose(self)

    def set(self, value: "Tile") -> None:
        """Copies ``value`` into this tile (``TMOV(self, value)``)."""
        copy(value, out=self)


# ----- recording ----------------------------------------------------------------------------


def _new(
    kind: str,
    dtype: Type[DType],
    rows: int,
    cols: int,
    valid: Optional[Tuple[Expr, Expr]] = None,
    hint: Optional[str] = None,
    loc: Optional[_where.Loc] = None,
) -> Tile:
    b = _body("tile")
    return Tile(b, kind, dtype, rows, cols, valid, hint, loc or _where.here())


def _record(op: str, args: List[Any], loc: Optional[_where.Loc] = None) -> None:
    b = _body(op)
    resolved = [a._cur() if isinstance(a, Tile) else a for a in args]
    b.emit(_Inst(op, resolved, loc or _where.here()))


def _float(v: Any, what: str) -> str:
    if isinstance(v, Scalar):
        return v.name
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FrontError(f"{what} takes a float (a Python number or a float parameter), not {v!r}")
    t = repr(float(v))
    if t in ("inf", "-inf", "nan"):
        raise FrontError(f"{what}: {t} is not a float literal (the kernel language has none; use e.g. -3e38)")
    return t


def _is_scalar(v: Any) -> bool:
    return isinstance(v, Scalar) or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _tile_arg(v: Any, what: str) -> Tile:
    if not isinstance(v, Tile):
        raise FrontError(f"{what} takes a tile, not {v!r}")
    return v._cur()


def _like(t: Tile, hint: Optional[str], kind: Optional[str] = None, dtype: Optional[Type[DType]] = None) -> Tile:
    return _new(kind or t.kind, dtype or t.dtype, t.rows, t.cols, t.valid, hint)


def _valid_rows(t: Tile, cols: int = 1) -> Optional[Tuple[Expr, Expr]]:
    return None if t.valid is None else (t.valid[0], lit(cols))


_SAME = {"add": "TADD", "sub": "TSUB", "mul": "TMUL", "div": "TDIV"}
_SCALAR = {"add": "TADDS", "sub": "TSUBS", "mul": "TMULS", "div": "TDIVS"}
_ROW = {"sub": "TROWEXPANDSUB", "mul": "TROWEXPANDMUL", "div": "TROWEXPANDDIV"}
_COL = {"mul": "TCOLEXPANDMUL"}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _binary(op: str, a: Tile, b: Any, out: Optional[Tile] = None) -> Tile:
    """``a OP b``: the instruction chosen by ``b``'s shape (see :class:`Tile`)."""
    a = a._cur()
    hint = _hint() if out is None else None
    if _is_scalar(b):
        dst = out if out is not None else _like(a, hint)
        _record(_SCALAR[op], [dst, a, _float(b, f"`{_SYMBOL[op]}`")])
        return dst
    if not isinstance(b, Tile):
        raise FrontError(f"`tile {_SYMBOL[op]} {type(b).__name__}`: a tile combines with a tile or a float, not {b!r}")
    b = b._cur()
    if b.shape == a.shape:
        dst = out if out is not None else _like(a, hint)
        _record(_SAME[op], [dst, a, b])
        return dst
    if b.cols == 1 and b.rows == a.rows:
        if op in _ROW:
            dst = out if out is not None else _like(a, hint)
            _record(_ROW[op], [dst, a, b])
            return dst
        # No TROWEXPANDADD: broadcast the column, then add.
        wide = _new(a.kind, b.dtype, a.rows, a.cols, None if b.valid is None else (b.valid[0], a.valid[1] if a.valid else lit(a.cols)))
        _record("TROWEXPAND", [wide, b])
        dst = out if out is not None else _like(a, hint)
        _record(_SAME[op], [dst, a, wide])
        return dst
    if b.rows == 1 and b.cols == a.cols and op in _COL:
        dst = out if out is not None else _like(a, hint)
        _record(_COL[op], [dst, a, b])
        return dst
    if a.shape == (b.rows, 1) and b.cols > 1 and op in ("add", "mul"):
        return _binary(op, b, a, out)
    raise FrontError(
        f"`{a.rows} x {a.cols} {_SYMBOL[op]} {b.rows} x {b.cols}`: no tile instruction combines these shapes "
        "(the table has element-wise ops on equal shapes, TROWEXPANDSUB/MUL/DIV with one value per row, "
        "TCOLEXPANDMUL with one value per column)"
    )


def _inplace(op: str, a: Tile, b: Any) -> Tile:
    a = a._cur()
    if op == "add" and isinstance(b, Tile) and a.kind == "acc":
        b = b._cur()
        body = _body("+=")
        last = body.stack[-1][-1] if body.stack[-1] else None
        # `c += a @ b`: the product just recorded becomes an accumulation into c.
        if isinstance(last, _Inst) and last.op == "TMATMUL" and last.args[0] is b:
            last.op = "TMATMUL_ACC"
            last.args[0] = a
            last.loc = _where.here()
            b.redirect = a
            return a
    return _binary(op, a, b, out=a)


def _unary(op: str, a: Tile, hint: Optional[str], out: Optional[Tile] = None) -> Tile:
    a = _tile_arg(a, op)
    dst = out if out is not None else _like(a, hint)
    _record(op, [dst, a])
    return dst


def _cmp(a: Tile, b: Any, mode: str, out: Optional[Tile] = None) -> Tile:
    a = a._cur()
    if not isinstance(b, Tile):
        raise FrontError("a comparison of tiles takes two tiles of the same shape (TCMP)")
    dst = out if out is not None else _like(a, _hint())
    _record("TCMP", [dst, a, b._cur(), mode])
    return dst


def _reduce(what: str, a: Tile, axis: int, out: Optional[Tile] = None) -> Tile:
    a = _tile_arg(a, f"{what}")
    ops = {("sum", 1): "TROWSUM", ("max", 1): "TROWMAX", ("min", 1): "TROWMIN", ("sum", 0): "TCOLSUM", ("max", 0): "TCOLMAX"}
    op = ops.get((what, axis))
    if op is None:
        raise FrontError(f"no tile instruction takes the {what} along axis {axis!r} (axis=1: per row; axis=0: per column for sum and max)")
    hint = _hint() if out is None else None
    if axis == 1:
        dst = out if out is not None else _new(a.kind, a.dtype, a.rows, 1, _valid_rows(a), hint)
    else:
        valid = None if a.valid is None else (lit(1), a.valid[1])
        dst = out if out is not None else _new(a.kind, a.dtype, 1, a.cols, valid, hint)
    _record(op, [dst, a])
    return dst


# ----- the functions ----------------------------------------------------------------------


def _shape_of(shape: Any, what: str) -> Tuple[int, int]:
    if isinstance(shape, int) and not isinstance(shape, bool):
        return (1, shape)
    if isinstance(shape, tuple) and len(shape) == 2 and all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        return shape  # type: ignore[return-value]
    raise FrontError(f"{what}: a tile shape is `(rows, cols)` of ints, not {shape!r}")


def _valid_of(valid: Any) -> Optional[Tuple[Expr, Expr]]:
    if valid is None:
        return None
    if not (isinstance(valid, tuple) and len(valid) == 2):
        raise FrontError(f"valid= takes (rows, cols) expressions, not {valid!r}")
    return (lit(valid[0]), lit(valid[1]))


def tile(
    shape: Any, dtype: Type[DType] = f32, kind: str = "vec", *, valid: Any = None
) -> Tile:
    """Declares a tile whose contents later operations write (``out=``): ``tile((8, 64))``.

    Parameters
    ----------
    shape : (int, int)
        Declared rows and columns.
    dtype : f32, f16 or bf16
    kind : {"vec", "mat", "left", "right", "acc"}
    valid : (expr, expr), optional
        The valid rows and columns, integer expressions over the kernel's integer parameters
        and locals (``valid=(n, 64)``); the declared shape when not given.
    """
    r, c = _shape_of(shape, "tile")
    return _new(kind, dtype, r, c, _valid_of(valid), _hint())


def load(
    src: Any,
    *,
    shape: Any = None,
    kind: str = "vec",
    valid: Any = None,
    out: Optional[Tile] = None,
) -> Tile:
    """``TLOAD``: the tile parameter ``src`` (or its part ``src[r0:r1, c0:c1]``) into a new tile.

    Parameters
    ----------
    src : tile parameter, or a part of one
    shape : (int, int), optional
        The tile's shape when the parameter's (or part's) is not a constant.
    kind : str
        The new tile's kind (``"left"`` / ``"right"`` for matmul operands).
    valid : (expr, expr), optional
        Valid rows and columns of the new tile.
    out : Tile, optional
        Load into this tile instead of a new one.
    """
    part = src if isinstance(src, _Part) else (_Part(src, lit(0), lit(0), src.rows, src.cols) if isinstance(src, Global) else None)
    if part is None:
        raise FrontError(f"load takes a tile parameter of the kernel (or a part `x[r0:r1, c0:c1]`), not {src!r}")
    if out is None:
        if shape is not None:
            rows, cols = _shape_of(shape, "load")
        elif part.rows is None or part.cols is None:
            raise FrontError(
                f"load: the shape of `{part.g.name}` is not a constant (a dimension is ANY): give `shape=(rows, cols)`"
            )
        else:
            rows, cols = part.rows, part.cols
        out = _new(kind, part.g.dtype, rows, cols, _valid_of(valid), _hint())
    _record("TLOAD", [out, part.g, *_offsets(part)])
    return out


def _offsets(part: _Part) -> List[Expr]:
    if part.col.op == "int" and part.col.args[0] == 0:
        if part.row.op == "int" and part.row.args[0] == 0:
            return []
    return [part.row, part.col]


def store(dst: Any, value: Tile) -> None:
    """``TSTORE``: the tile's valid part into the tile parameter ``dst`` (or its part
    ``dst[r0:r1, c0:c1]``)."""
    part = dst if isinstance(dst, _Part) else (_Part(dst, lit(0), lit(0), dst.rows, dst.cols) if isinstance(dst, Global) else None)
    if part is None:
        raise FrontError(f"store writes a tile parameter of the kernel (or a part of one), not {dst!r}")
    _record("TSTORE", [part.g, _tile_arg(value, "store"), *_offsets(part)])


def full(shape: Any, value: Any, dtype: Type[DType] = f32, kind: str = "vec", *, valid: Any = None, out: Optional[Tile] = None) -> Tile:
    """``TEXPANDS``: a tile with every element ``value`` (a float or a float parameter)."""
    if out is None:
        r, c = _shape_of(shape, "full")
        out = _new(kind, dtype, r, c, _valid_of(valid), _hint())
    _record("TEXPANDS", [out, _float(value, "full")])
    return out


def zeros(shape: Any, dtype: Type[DType] = f32, kind: str = "vec", *, valid: Any = None) -> Tile:
    """``full(shape, 0.0, ...)``."""
    r, c = _shape_of(shape, "zeros")
    out = _new(kind, dtype, r, c, _valid_of(valid), _hint())
    _record("TEXPANDS", [out, "0.0"])
    return out


def exp(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TEXP``: e to each element."""
    return _unary("TEXP", t, _hint(), out)


def log(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TLOG``: the natural logarithm of each element."""
    return _unary("TLOG", t, _hint(), out)


def sqrt(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TSQRT``."""
    return _unary("TSQRT", t, _hint(), out)


def rsqrt(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TRSQRT``: ``1 / sqrt(x)``."""
    return _unary("TRSQRT", t, _hint(), out)


def abs(t: Tile, *, out: Optional[Tile] = None) -> Tile:  # noqa: A001 - numpy's name
    """``TABS``."""
    return _unary("TABS", t, _hint(), out)


def recip(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TRECIP``: ``1 / x``."""
    return _unary("TRECIP", t, _hint(), out)


def maximum(a: Tile, b: Any, *, out: Optional[Tile] = None) -> Tile:
    """``TMAX`` (two tiles of one shape) or ``TMAXS`` (a tile and a float)."""
    a = _tile_arg(a, "maximum")
    dst = out if out is not None else _like(a, _hint())
    if _is_scalar(b):
        _record("TMAXS", [dst, a, _float(b, "maximum")])
    else:
        _record("TMAX", [dst, a, _tile_arg(b, "maximum")])
    return dst


def minimum(a: Tile, b: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TMIN`` (two tiles of one shape)."""
    a = _tile_arg(a, "minimum")
    if _is_scalar(b):
        raise FrontError("minimum of a tile and a float: the table has no TMINS (use -maximum(-t, -f))")
    dst = out if out is not None else _like(a, _hint())
    _record("TMIN", [dst, a, _tile_arg(b, "minimum")])
    return dst


def row_sum(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TROWSUM``: per row, the sum (an ``R × 1`` tile)."""
    return _reduce("sum", t, 1, out)


def row_max(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TROWMAX``: per row, the maximum (an ``R × 1`` tile)."""
    return _reduce("max", t, 1, out)


def row_min(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TROWMIN``: per row, the minimum (an ``R × 1`` tile)."""
    return _reduce("min", t, 1, out)


def col_sum(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TCOLSUM``: per column, the sum (a ``1 × C`` tile)."""
    return _reduce("sum", t, 0, out)


def col_max(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TCOLMAX``: per column, the maximum (a ``1 × C`` tile)."""
    return _reduce("max", t, 0, out)


def matmul(a: Tile, b: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TMATMUL``: ``a @ b`` of a ``left`` (M × K) and a ``right`` (K × N) tile into a new
    ``acc`` f32 tile (M × N); ``c += a @ b`` accumulates (``TMATMUL_ACC``)."""
    a, b = _tile_arg(a, "matmul"), _tile_arg(b, "matmul")
    if out is None:
        valid = None
        if a.valid is not None or b.valid is not None:
            valid = (a.valid[0] if a.valid else lit(a.rows), b.valid[1] if b.valid else lit(b.cols))
        out = _new("acc", f32, a.rows, b.cols, valid, _hint())
    _record("TMATMUL", [out, a, b])
    return out


def transpose(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TTRANS``: the transpose (``C × R``)."""
    t = _tile_arg(t, "transpose")
    if out is None:
        valid = None if t.valid is None else (t.valid[1], t.valid[0])
        out = _new(t.kind, t.dtype, t.cols, t.rows, valid, _hint())
    _record("TTRANS", [out, t])
    return out


def astype(t: Tile, dtype: Type[DType], *, out: Optional[Tile] = None) -> Tile:
    """``TCVT``: the tile converted to ``dtype`` (rounded to nearest even)."""
    t = _tile_arg(t, "astype")
    dst = out if out is not None else _like(t, _hint(), dtype=dtype)
    _record("TCVT", [dst, t])
    return dst


def copy(src: Any, dst: Any = None, *, kind: Optional[str] = None, out: Optional[Tile] = None) -> Any:
    """Moves a tile, as TileLang's ``T.copy``: from a tile parameter (or part of one) into a tile
    (``TLOAD``; a new one when ``dst`` is not given), from a tile into a tile parameter (or part:
    ``TSTORE``), or between tiles (``TMOV``, into a new tile of ``kind`` when ``dst`` is not
    given). Returns the destination tile (``None`` for a store)."""
    target = dst if dst is not None else out
    if isinstance(src, (Global, _Part)):
        if target is not None and not isinstance(target, Tile):
            raise FrontError("copy from a tile parameter goes into a tile (or a new one when none is given)")
        return load(src, kind=kind or "vec", out=target)
    if isinstance(target, (Global, _Part)):
        store(target, src)
        return None
    t = _tile_arg(src, "copy")
    result = target if target is not None else _like(t, _hint(), kind=kind)
    _record("TMOV", [result, t])
    return result


def clear(t: Tile) -> Tile:
    """Sets every element of ``t`` to 0 (``TEXPANDS(t, 0.0)``), as TileLang's ``T.clear``."""
    return full(t.shape, 0.0, out=_tile_arg(t, "clear"))


def fill(t: Tile, value: Any) -> Tile:
    """Sets every element of ``t`` to ``value`` (``TEXPANDS``), as TileLang's ``T.fill``."""
    return full(t.shape, value, out=_tile_arg(t, "fill"))


def gemm(a: Tile, b: Tile, c: Tile) -> Tile:
    """``c += a @ b`` (``TMATMUL_ACC``), as TileLang's ``T.gemm(A, B, C)``: ``a`` a ``left``,
    ``b`` a ``right`` and ``c`` an ``acc`` tile."""
    a, b, c = _tile_arg(a, "gemm"), _tile_arg(b, "gemm"), _tile_arg(c, "gemm")
    _record("TMATMUL_ACC", [c, a, b])
    return c


def select(mask: Tile, a: Tile, b: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TSEL``: ``a`` where ``mask`` is nonzero, else ``b``."""
    mask = _tile_arg(mask, "select")
    dst = out if out is not None else _like(_tile_arg(a, "select"), _hint())
    _record("TSEL", [dst, mask, _tile_arg(a, "select"), _tile_arg(b, "select")])
    return dst


where = select


def sort(t: Tile, *, out: Optional[Tile] = None) -> Tile:
    """``TSORT``: each row's valid part in descending order (the first k columns: top-k)."""
    return _unary("TSORT", t, _hint(), out)


# ----- control flow and locals --------------------------------------------------------------


def let(value: Any) -> Expr:
    """``let NAME: i64 = value;``: an integer local named after the variable it is assigned to
    (``half = let(n // 2)``)."""
    b = _body("let")
    loc = _where.here()
    name = _where.assigned_name()
    if name is None:
        raise FrontError("assign `let(...)` to one variable: `n = let(...)`")
    name = b.fresh(name)
    blk = _Block("let", f"let {name}: i64 = {{}};", [lit(value)], loc)
    b.emit(blk)
    return Expr("name", (name,), None)


class _Carry:
    """Snapshot of the user's local variables that hold tiles, to find the ones a block rebinds."""

    def __init__(self) -> None:
        f = _where.user_frame()
        self.frame = f
        self.before: Dict[str, Tile] = {}
        if f is not None:
            self.before = {k: v for k, v in f.f_locals.items() if isinstance(v, Tile)}

    def close(self, body: _Body, loc: _where.Loc) -> None:
        """Ends a block: every variable rebound to a new tile copies it into the old one."""
        if self.frame is None:
            return
        now = {k: v for k, v in self.frame.f_locals.items() if isinstance(v, Tile)}
        for name, old in self.before.items():
            new = now.get(name)
            if new is None or new is old:
                continue
            o, n = old._cur(), new._cur()
            if o is n:
                continue
            if o.signature() != n.signature():
                raise FrontError(
                    f"`{name}` held a {o.kind} {o.dtype.text}[{o.rows}, {o.cols}] tile before this block and a "
                    f"{n.kind} {n.dtype.text}[{n.rows}, {n.cols}] one at its end: a value carried across a "
                    "loop or branch keeps its kind, type and shape",
                    loc,
                )
            if not _merge_into(body.stack[-1], n, o):
                body.emit(_Inst("TMOV", [o, n], loc))
            n.redirect = o


def _flat(stmts: List[Any]) -> List[_Inst]:
    out: List[_Inst] = []
    for st in stmts:
        if isinstance(st, _Inst):
            out.append(st)
        elif st.word != "let":
            out += _flat(st.body)
            out += _flat(st.orelse or [])
    return out


def _merge_into(stmts: List[Any], n: Tile, o: Tile) -> bool:
    """Writes the block's value ``n`` straight into the carried tile ``o`` instead of copying it
    at the block's end, when that is the same: ``n`` is written once in the block, by an
    instruction that may write a tile it reads, and ``o`` is not read after that."""
    insts = _flat(stmts)
    defs = [i for i, x in enumerate(insts) if x.args and x.args[0] is n and INSTRUCTIONS[x.op]["operands"][:1] == ["dst"]]
    if len(defs) != 1:
        return False
    d = defs[0]
    if o in insts[d].args[1:] and INSTRUCTIONS[insts[d].op]["shape"] not in _IN_PLACE:
        return False
    if any(o in x.args for x in insts[d + 1 :]):
        return False
    for x in insts[d:]:
        x.args = [o if a is n else a for a in x.args]
    return True


def range(count: Any, *, name: Optional[str] = None) -> Iterator[Expr]:  # noqa: A001 - Python's word
    """``for i in range(count) { ... }``: the body is traced once; ``i`` is ``0 .. count - 1``
    when the kernel runs. Write it ``for i in tile.range(n):``."""
    b = _body("range")
    loc = _where.here()
    targets = [name] if name is not None else _where.for_targets()
    if not targets or len(targets) != 1 or targets[0] is None:
        raise FrontError("write `for i in tile.range(n):` (one loop variable)", loc)
    var = b.fresh(targets[0])
    return _loop(b, var, lit(count), loc)


def _loop(b: _Body, var: str, count: Expr, loc: _where.Loc) -> Iterator[Expr]:
    blk = _Block("for", f"for {var} in range({{}})", [count], loc)
    b.emit(blk)
    carry = _Carry()
    b.stack.append(blk.body)
    try:
        yield Expr("name", (var,), None)
        carry.close(b, loc)
    except GeneratorExit:
        # The loop was left with `break` (or `return`): its body is traced once, so that
        # cannot mean what it says.
        b.broken = b.broken or loc
        raise
    finally:
        b.stack.pop()


class _Open:
    def __init__(self, b: _Body, body: List[Any], loc: _where.Loc):
        self.b, self.body, self.loc = b, body, loc
        self.carry: Optional[_Carry] = None

    def __enter__(self) -> None:
        self.carry = _Carry()
        self.b.stack.append(self.body)

    def __exit__(self, kind: Any, *_: Any) -> None:
        try:
            if kind is None and self.carry is not None:
                self.carry.close(self.b, self.loc)
        finally:
            self.b.stack.pop()


def when(cond: Any) -> _Open:
    """``with when(cond):`` is ``if cond { ... }`` (``cond`` over integer parameters and
    locals)."""
    b = _body("when")
    loc = _where.here()
    blk = _Block("if", "if {}", [lit(cond)], loc)
    b.emit(blk)
    return _Open(b, blk.body, loc)


def otherwise() -> _Open:
    """``with otherwise():`` right after a ``with when(...):`` block is its ``else { ... }``."""
    b = _body("otherwise")
    loc = _where.here()
    last = b.stack[-1][-1] if b.stack[-1] else None
    if not isinstance(last, _Block) or last.word != "if" or last.orelse is not None:
        raise FrontError("`otherwise()` must come right after a `with when(...):` block", loc)
    last.orelse = []
    return _Open(b, last.orelse, loc)


# ----- the instruction functions, from the table ----------------------------------------------


def _instruction(mnemonic: str, spec: Dict[str, Any]) -> Callable[..., Any]:
    kinds = spec["operands"]
    has_dst = bool(kinds) and kinds[0] == "dst"
    rest = kinds[1:] if has_dst else kinds
    rule = spec["shape"]

    def fn(*args: Any, out: Optional[Tile] = None, shape: Any = None, dtype: Any = None, kind: Optional[str] = None) -> Any:
        b = _body(mnemonic)
        loc = _where.here()
        need = [k for k in rest if k != "opt_int"]
        if not len(need) <= len(args) <= len(rest):
            raise FrontError(f"{mnemonic} takes {len(need)} operand(s) after the destination ({', '.join(rest)}), {len(args)} given", loc)
        operands: List[Any] = []
        for k, a in zip(rest, args):
            if k == "src":
                operands.append(_tile_arg(a, mnemonic))
            elif k == "global":
                if not isinstance(a, Global):
                    raise FrontError(f"{mnemonic}: operand takes a tile parameter of the kernel, not {a!r}", loc)
                operands.append(a)
            elif k == "float":
                operands.append(_float(a, mnemonic))
            elif k == "cmp_mode":
                if a not in CMP_MODES:
                    raise FrontError(f"{mnemonic}: the mode is one of {', '.join(CMP_MODES)}, not {a!r}", loc)
                operands.append(a)
            else:
                operands.append(lit(a))
        if not has_dst:
            b.emit(_Inst(mnemonic, operands, loc))
            return None
        if out is None:
            out = _dst_for(mnemonic, rule, operands, shape, dtype, kind, loc)
        b.emit(_Inst(mnemonic, [out._cur(), *operands], loc))
        return out

    fn.__name__ = mnemonic
    fn.__qualname__ = mnemonic
    fn.__doc__ = (
        f"{spec['doc']}\n\nThe destination is a new tile (its shape from the instruction's rule, "
        f"{rule}) unless ``out=`` names one; returns it."
        if has_dst
        else spec["doc"]
    )
    return fn


def _dst_for(
    mnemonic: str, rule: str, operands: List[Any], shape: Any, dtype: Any, kind: Optional[str], loc: _where.Loc
) -> Tile:
    srcs = [o for o in operands if isinstance(o, Tile)]
    hint = _where.assigned_name(exact=True)
    if shape is not None:
        r, c = _shape_of(shape, mnemonic)
        if rule == "Load":
            return _new(kind or "vec", dtype or operands[0].dtype, r, c, None, hint, loc)
        base = srcs[0] if srcs else None
        return _new(
            kind or (base.kind if base is not None else "vec"),
            dtype or (base.dtype if base is not None else f32), r, c, None, hint, loc,
        )
    if rule == "Load":
        g = operands[0]
        if g.rows is None or g.cols is None:
            raise FrontError(f"{mnemonic}: `{g.name}` has a dimension of any size: give `shape=(rows, cols)`", loc)
        return _new(kind or "vec", g.dtype, g.rows, g.cols, None, hint, loc)
    if not srcs:
        raise FrontError(f"{mnemonic}: give the destination's `shape=(rows, cols)` (and `dtype=`, `kind=`) or `out=`", loc)
    a = srcs[0]
    if rule in ("Same", "Convert", "RowExpandBinary", "ColExpandBinary"):
        return _new(kind or a.kind, dtype or a.dtype, a.rows, a.cols, a.valid, hint, loc)
    if rule == "RowReduce":
        return _new(kind or a.kind, dtype or a.dtype, a.rows, 1, _valid_rows(a), hint, loc)
    if rule == "ColReduce":
        return _new(kind or a.kind, dtype or a.dtype, 1, a.cols, None if a.valid is None else (lit(1), a.valid[1]), hint, loc)
    if rule == "Transpose":
        return _new(kind or a.kind, dtype or a.dtype, a.cols, a.rows, None if a.valid is None else (a.valid[1], a.valid[0]), hint, loc)
    if rule == "Matmul":
        b = srcs[1] if len(srcs) > 1 else a
        return _new(kind or "acc", dtype or f32, a.rows, b.cols, None, hint, loc)
    raise FrontError(f"{mnemonic}: give the destination's `shape=(rows, cols)` or `out=` (rule {rule})", loc)


for _mn, _spec in INSTRUCTIONS.items():
    globals()[_mn] = _instruction(_mn, _spec)
    __all__.append(_mn)
del _mn, _spec


def __getattr__(name: str) -> Callable[..., Any]:
    """The instruction functions are made from the table at import (``TLOAD``, ``TROWMAX``,
    ...); this is reached only for names that are none of them (and tells a type checker that
    ``tile.TROWMAX`` is a function)."""
    raise AttributeError(
        f"module 'pto_wsp.tile' has no attribute {name!r} (its instructions: {', '.join(INSTRUCTIONS)})"
    )


# ----- tracing a kernel and writing its body ----------------------------------------------


def trace_kernel(kernel: "Kernel", fn: Callable[..., Any]) -> List[Tuple[str, _where.Loc]]:
    """Runs ``fn`` once over the kernel's parameters as tile values and returns its body's
    lines (text, Python place); an empty list when the function records nothing (a
    declaration such as ``def k(...): ...``)."""
    if _STATE.body is not None:
        raise FrontError(f"kernel `{kernel.name}` is declared inside the body of another kernel")
    b = _Body(kernel)
    args: List[Any] = []
    for p in kernel.params:
        if p.direction is not None:
            args.append(Global(p))
        elif p.type.text in ("f32", "f64"):
            args.append(Scalar(p.name))
        else:
            args.append(Expr("name", (p.name,), None))
    _STATE.body = b
    try:
        result = fn(*args)
    finally:
        _STATE.body = None
    if b.broken is not None:
        raise FrontError(
            f"kernel `{kernel.name}`: a `tile.range` loop is left with `break` or `return`; its body is traced "
            "once, so it always runs to the end (use `with when(...):` around what to skip)",
            b.broken,
        )
    if result is not None:
        raise FrontError(f"kernel `{kernel.name}`: a kernel body returns nothing (store results with `store`)", kernel.loc)
    if not b.stmts:
        return []
    return _render(b)


def _operand_text(a: Any, names: Dict[int, str]) -> str:
    if isinstance(a, Tile):
        return names[id(a)]
    if isinstance(a, Global):
        return a.name
    if isinstance(a, Expr):
        return a.text()
    return str(a)


def _positions(b: _Body) -> Tuple[Dict[int, int], Dict[int, int], List[_Inst]]:
    """First definition and last use (extended to the end of any loop the tile is used in but
    defined outside) of every tile, over the instructions in order."""
    first: Dict[int, int] = {}
    last: Dict[int, int] = {}
    flat: List[_Inst] = []
    loops: List[int] = []  # start position of each enclosing loop

    def walk(stmts: List[Any]) -> None:
        for s in stmts:
            if isinstance(s, _Inst):
                pos = len(flat)
                flat.append(s)
                for a in s.args:
                    if isinstance(a, Tile):
                        first.setdefault(id(a), pos)
                        last[id(a)] = pos
                        uses_in.setdefault(id(a), []).append((pos, list(loops)))
            elif s.word == "let":
                continue
            else:
                if s.word == "for":
                    loops.append(len(flat))
                walk(s.body)
                if s.orelse:
                    walk(s.orelse)
                if s.word == "for":
                    start = loops.pop()
                    end = len(flat) - 1
                    for tid, uses in uses_in.items():
                        if first[tid] < start and any(start <= p for p, _ in uses):
                            last[tid] = max(last[tid], end)

    uses_in: Dict[int, List[Tuple[int, List[int]]]] = {}
    walk(b.stmts)
    return first, last, flat


_IN_PLACE = {"Same", "Convert", "RowExpandBinary", "ColExpandBinary"}


def _allocate(b: _Body) -> Dict[int, "Tile"]:
    """Assigns every tile to a declared tile (the representative of its group)."""
    first, last, flat = _positions(b)
    used = [t for t in b.tiles if id(t) in first]
    used.sort(key=lambda t: first[id(t)])
    local = {t.id for t in used if t.valid is not None and _local_valid(t, b)}
    # [representative, end position, the variable name the group's values have (or None)]
    groups: List[List[Any]] = []
    of: Dict[int, Tile] = {}
    for t in used:
        pos = first[id(t)]
        inst = flat[pos]
        choice = None
        if t.id not in local and inst.args and inst.args[0] is t:
            rule = INSTRUCTIONS[inst.op]["shape"]
            srcs = [a for a in inst.args[1:] if isinstance(a, Tile)]
            for g in groups:
                rep, end, hint = g
                if rep.id in local or rep.signature() != t.signature():
                    continue
                # A value the user named gets a tile of that name: it joins only a group of
                # the same name (`t = t * s`) or of unnamed temporaries.
                if t.hint is not None and hint is not None and hint != t.hint:
                    continue
                if end < pos and choice is None:
                    choice = g
                elif end == pos and rule in _IN_PLACE and any(of.get(id(s)) is rep for s in srcs):
                    if srcs and of.get(id(srcs[0])) is rep:
                        choice = g
                        break
                    if choice is None or choice[1] < pos:
                        choice = g
        if choice is None:
            groups.append([t, last[id(t)], t.hint])
            of[id(t)] = t
        else:
            choice[1] = max(choice[1], last[id(t)])
            choice[2] = choice[2] or t.hint
            of[id(t)] = choice[0]
    return of


def _local_valid(t: Tile, b: _Body) -> bool:
    """Whether a tile's valid part names a local or loop variable of the body."""
    assert t.valid is not None
    params = {p.name for p in b.kernel.params}
    return any(n.args[0] not in params for e in t.valid for n in e.names())


def _render(b: _Body) -> List[Tuple[str, _where.Loc]]:
    of = _allocate(b)
    reps: List[Tile] = []
    for t in b.tiles:
        r = of.get(id(t))
        if r is not None and r not in reps:
            reps.append(r)
    # Names: the first hint in the group that is free, else t0, t1, ...
    members: Dict[int, List[Tile]] = {}
    for t in b.tiles:
        if id(t) in of:
            members.setdefault(id(of[id(t)]), []).append(t)
    names: Dict[int, str] = {}
    taken = set(b.names)
    counter = 0
    for r in reps:
        name = None
        for t in members[id(r)]:
            if t.hint and t.hint not in taken:
                name = t.hint
                break
        while name is None:
            cand = f"t{counter}"
            counter += 1
            if cand not in taken:
                name = cand
        taken.add(name)
        for t in members[id(r)]:
            names[id(t)] = name
    out: List[Tuple[str, _where.Loc]] = []
    local_reps = [r for r in reps if r.valid is not None and _local_valid(r, b)]
    for r in reps:
        if r not in local_reps:
            out.append((_decl_text(r, names), r.loc))
    declared = {id(r) for r in reps if r not in local_reps}

    def walk(stmts: List[Any], depth: int) -> None:
        pad = "    " * depth
        for s in stmts:
            if isinstance(s, _Inst):
                for a in s.args:
                    if isinstance(a, Tile):
                        r = of[id(a)]
                        if id(r) not in declared:
                            declared.add(id(r))
                            out.append((pad + _decl_text(r, names), r.loc))
                args = ", ".join(_operand_text(a, names) for a in s.args)
                out.append((f"{pad}{s.op}({args});", s.loc))
            elif s.word == "let":
                out.append((pad + s.head.format(*(e.text() for e in s.exprs)), s.loc))
            else:
                head = s.head.format(*(e.text() for e in s.exprs))
                out.append((f"{pad}{head} {{", s.loc))
                walk(s.body, depth + 1)
                if s.orelse:
                    out.append((f"{pad}}} else {{", s.loc))
                    walk(s.orelse, depth + 1)
                out.append((f"{pad}}}", s.loc))

    walk(b.stmts, 0)
    return out


def _decl_text(t: Tile, names: Dict[int, str]) -> str:
    s = f"tile {names[id(t)]}: {t.kind} {t.dtype.text}[{t.rows}, {t.cols}]"
    if t.valid is not None:
        s += f" valid({t.valid[0].text()}, {t.valid[1].text()})"
    return s + ";"


_ = builtins  # the module shadows `range` and `abs`; the builtins stay reachable here
