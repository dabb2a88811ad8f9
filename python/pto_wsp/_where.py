"""Where in the user's Python a construct was written, and the names written there.

Why: a ``.wsp`` construct built from Python should be reported at the user's
``file:line:column``, and should carry the names the user wrote (``for b, h in P(B, H)`` makes
loop variables ``b`` and ``h``; ``G = Dense[8]`` makes axis ``G``) without making the user
repeat them as strings.

Promises: ``user_frame()`` is the innermost frame outside this package; ``here()`` is its
``file:line`` and, on Python 3.11 and later, the column of the call being evaluated there.
``assigned_name`` reads the statement at that place from the source file's syntax tree (cached
per file) and returns the one name the call's value is assigned to: ``M, K = Symbol(),
Symbol()`` names them ``M`` and ``K``, and ``M = Symbol(); K = Symbol()`` on one line names each
by its own assignment. Where the call's column is unknown (Python before 3.11) and the line holds
more than one assignment, or the value is not assigned to one plain name, it returns ``None``
and the caller asks for ``name=``: a name is never guessed. Without source (code typed into
``python -c``) every answer is ``None``.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
from types import CodeType, FrameType
from typing import Dict, List, NamedTuple, Optional, Tuple

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class Loc(NamedTuple):
    """A place in the user's Python source (``column`` 1-based, ``None`` when unknown)."""

    file: str
    line: int
    column: Optional[int] = None

    def __str__(self) -> str:
        if self.column is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"


def user_frame() -> Optional[FrameType]:
    """The innermost frame whose code is not in the ``pto_wsp`` package."""
    f: Optional[FrameType] = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == _PACKAGE_DIR:
        f = f.f_back
    return f


_POSITIONS: Dict[CodeType, List[Tuple[Optional[int], Optional[int], Optional[int], Optional[int]]]] = {}


def _span(f: FrameType) -> Optional[Tuple[int, int, int, int]]:
    """(line, column, end line, end column) of the instruction the frame is executing (0-based
    columns), on Python 3.11 and later."""
    positions_of = getattr(f.f_code, "co_positions", None)
    if positions_of is None:
        return None
    table = _POSITIONS.get(f.f_code)
    if table is None:
        table = list(positions_of())
        if len(_POSITIONS) > 4096:
            _POSITIONS.clear()
        _POSITIONS[f.f_code] = table
    i = f.f_lasti // 2
    if not 0 <= i < len(table):
        return None
    line, end_line, col, end_col = table[i]
    if line is None or end_line is None or col is None or end_col is None:
        return None
    return line, col, end_line, end_col


def here() -> Loc:
    """The user's ``file:line:column`` calling into the package now."""
    f = user_frame()
    if f is None:
        return Loc("<unknown>", 0)
    span = _span(f)
    if span is not None and span[0] == f.f_lineno:
        return Loc(f.f_code.co_filename, f.f_lineno, span[1] + 1)
    return Loc(f.f_code.co_filename, f.f_lineno)


class _Tables(NamedTuple):
    # One row per (plain name, the value assigned to it): the value's span (line, col, end
    # line, end col; 0-based columns) and the name. A tuple unpacking `a, b = x, y` gives a row
    # per element; any other target gives a row with name None.
    assigns: List[Tuple[int, int, int, int, Optional[str]]]
    # Statements per line that assign (to tell a line with one assignment from several).
    per_line: Dict[int, int]
    fors: List[Tuple[int, int, List[Optional[str]]]]  # the iter expression's lines, target names


_CACHE: Dict[str, Optional[_Tables]] = {}


def _targets(t: ast.expr) -> List[Optional[str]]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        out: List[Optional[str]] = []
        for e in t.elts:
            out.extend(_targets(e))
        return out
    return [None]


def _node_span(v: ast.expr) -> Tuple[int, int, int, int]:
    end_line = getattr(v, "end_lineno", None) or v.lineno
    end_col = getattr(v, "end_col_offset", None)
    return v.lineno, v.col_offset, end_line, end_col if end_col is not None else 1 << 30


def _pairs(target: ast.expr, value: ast.expr) -> List[Tuple[ast.expr, Optional[str]]]:
    """(value, name) pairs of one assignment target; tuples unpacked element by element."""
    if isinstance(target, ast.Name):
        return [(value, target.id)]
    if (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
        and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)
    ):
        out: List[Tuple[ast.expr, Optional[str]]] = []
        for t, v in zip(target.elts, value.elts):
            out.extend(_pairs(t, v))
        return out
    return [(value, None)]


def _tables(filename: str) -> Optional[_Tables]:
    if filename in _CACHE:
        return _CACHE[filename]
    lines = linecache.getlines(filename)
    tables: Optional[_Tables] = None
    if lines:
        try:
            tree = ast.parse("".join(lines), filename)
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            tables = _Tables([], {}, [])
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    tables.per_line[node.lineno] = tables.per_line.get(node.lineno, 0) + 1
                    if len(targets) != 1:
                        tables.assigns.append((*_node_span(node.value), None))
                        continue
                    for value, name in _pairs(targets[0], node.value):
                        tables.assigns.append((*_node_span(value), name))
                elif isinstance(node, ast.For):
                    it = node.iter
                    end = getattr(it, "end_lineno", it.lineno) or it.lineno
                    tables.fors.append((it.lineno, end, _targets(node.target)))
    _CACHE[filename] = tables
    return tables


def _contains(row: Tuple[int, int, int, int], span: Tuple[int, int, int, int]) -> bool:
    (l0, c0, l1, c1), (s0, d0, s1, d1) = row, span
    return (l0, c0) <= (s0, d0) and (s1, d1) <= (l1, c1)


def _size(row: Tuple[int, int, int, int]) -> Tuple[int, int]:
    return row[2] - row[0], (row[3] - row[1]) if row[2] == row[0] else 1 << 30


def assigned_name(exact: bool = False) -> Optional[str]:
    """The name the user's current call is assigned to (``G = Dense[8]`` gives ``"G"``; in
    ``M, K = Symbol(), Symbol()`` the second call gives ``"K"``), or ``None`` when that is not
    one plain name or cannot be told for sure. ``exact``: only when the call is the whole value
    assigned (``t = exp(x)`` names the ``exp``, not an operation inside its argument); where
    columns are unknown this falls back to the line's one assignment."""
    f = user_frame()
    if f is None:
        return None
    t = _tables(f.f_code.co_filename)
    if t is None:
        return None
    span = _span(f)
    if span is not None:
        if exact:
            same = [row for row in t.assigns if tuple(row[:4]) == span]
            return same[0][4] if same else None
        inside = [row for row in t.assigns if _contains(row[:4], span)]
        if not inside:
            return None
        best = min(inside, key=lambda row: _size(row[:4]))
        return best[4]
    # No column (Python before 3.11): only a line with exactly one assignment of one name.
    line = f.f_lineno
    rows = [row for row in t.assigns if row[0] <= line <= row[2]]
    if not rows:
        return None
    best = min(rows, key=lambda row: _size(row[:4]))
    if t.per_line.get(best[0], 0) != 1 or sum(1 for row in rows if row[0] == best[0]) != 1:
        return None
    return best[4]


def for_targets() -> Optional[List[Optional[str]]]:
    """The target names of the ``for`` whose iterable the user's frame is evaluating now."""
    f = user_frame()
    if f is None:
        return None
    t = _tables(f.f_code.co_filename)
    if t is None:
        return None
    line = f.f_lineno
    best = None
    for row in t.fors:
        if row[0] <= line <= row[1] and (best is None or row[1] - row[0] < best[1] - best[0]):
            best = row
    return list(best[2]) if best else None
