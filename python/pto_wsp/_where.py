"""Where in the user's Python a construct was written, and the names written there.

Why: a ``.wsp`` construct built from Python should be reported at the user's ``file:line``, and
should carry the names the user wrote (``for b, h in P(B, H)`` makes loop variables ``b`` and
``h``; ``G = Dense[8]`` makes axis ``G``) without making the user repeat them as strings.

Promises: ``user_frame()`` is the innermost frame outside this package; ``assigned_name`` and
``for_targets`` read the statement at that frame's line from the source file's syntax tree
(cached per file); when the source is not available (code typed into ``python -c``) they return
``None`` and the caller asks for an explicit ``name=`` / ``names=``.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
from typing import Dict, List, NamedTuple, Optional, Tuple

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class Loc(NamedTuple):
    """A place in the user's Python source."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def user_frame():
    """The innermost frame whose code is not in the ``pto_wsp`` package."""
    f = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == _PACKAGE_DIR:
        f = f.f_back
    return f


def here() -> Loc:
    """The user's ``file:line`` calling into the package now."""
    f = user_frame()
    if f is None:
        return Loc("<unknown>", 0)
    return Loc(f.f_code.co_filename, f.f_lineno)


class _Tables(NamedTuple):
    assigns: List[Tuple[int, int, str]]  # first line, last line, the one Name assigned
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
            tables = _Tables([], [])
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if len(targets) == 1 and isinstance(targets[0], ast.Name) and node.value:
                        v = node.value
                        end = getattr(v, "end_lineno", v.lineno) or v.lineno
                        tables.assigns.append((v.lineno, end, targets[0].id))
                elif isinstance(node, ast.For):
                    it = node.iter
                    end = getattr(it, "end_lineno", it.lineno) or it.lineno
                    tables.fors.append((it.lineno, end, _targets(node.target)))
    _CACHE[filename] = tables
    return tables


def _innermost(rows, line: int):
    best = None
    for row in rows:
        if row[0] <= line <= row[1] and (best is None or row[1] - row[0] < best[1] - best[0]):
            best = row
    return best


def assigned_name() -> Optional[str]:
    """The name the user's current statement assigns to (``G = Dense[8]`` gives ``"G"``)."""
    f = user_frame()
    if f is None:
        return None
    t = _tables(f.f_code.co_filename)
    if t is None:
        return None
    row = _innermost(t.assigns, f.f_lineno)
    return row[2] if row else None


def for_targets() -> Optional[List[Optional[str]]]:
    """The target names of the ``for`` whose iterable the user's frame is evaluating now."""
    f = user_frame()
    if f is None:
        return None
    t = _tables(f.f_code.co_filename)
    if t is None:
        return None
    row = _innermost(t.fors, f.f_lineno)
    return list(row[2]) if row else None
