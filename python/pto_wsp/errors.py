"""The exceptions and warnings pto-wsp raises, all importable from ``pto_wsp``.

Why: a Python user catches ``pto_wsp.Error`` (or one kind of it) and reads where the mistake is
from attributes, not by parsing text; mistakes in the *arguments* of a call (an array of the
wrong dtype or shape, a negative thread count) are the ``TypeError`` / ``ValueError`` every
Python library raises for them.

Promises: every class here has ``__module__ == "pto_wsp"``, so tracebacks name
``pto_wsp.ValidationError``, never a private module; every ``Error`` has ``file``, ``line`` and
``column`` (``None`` when the mistake has no place in a source file) and ``message`` (the first
line, without the location); ``str(error)`` is the full rendered text (rustc style: the
message, `` --> file:line:column``, the source line and a caret). ``ArgumentTypeError`` is both
an ``Error`` and a ``TypeError``, ``ArgumentValueError`` both an ``Error`` and a ``ValueError``.
This module imports nothing else of the package (the extension module raises these classes).
"""

from __future__ import annotations

import functools
import linecache
import os
import re
import types
from typing import Any, Callable, Optional, Tuple, TypeVar

__all__ = [
    "ArgumentTypeError",
    "ArgumentValueError",
    "CompileError",
    "CoverageError",
    "CoverageWarning",
    "Error",
    "PtoWspError",
    "RunError",
    "ValidationError",
]

# ` --> file:line:column` (rustc style, as the Rust renderer writes it).
_ARROW = re.compile(r"^\s*--> (?P<file>.+?):(?P<line>\d+)(?::(?P<column>\d+))?\s*$", re.M)


def _location(text: str) -> Tuple[Optional[str], Optional[int], Optional[int]]:
    """The first ``--> file:line[:column]`` of a rendered message."""
    m = _ARROW.search(text)
    if m is None:
        return None, None, None
    column = m.group("column")
    return m.group("file"), int(m.group("line")), None if column is None else int(column)


def _render(message: str, file: Optional[str], line: Optional[int], column: Optional[int]) -> str:
    """``message`` rendered as the Rust side renders a diagnostic: ``error: message``, the place
    (`` --> file:line:column``), the source line and a caret under the column."""
    out = f"error: {message}\n"
    if file is None or line is None:
        return out
    width = len(str(line))
    pad = " " * width
    where = f"{file}:{line}" if column is None else f"{file}:{line}:{column}"
    out += f"{pad}--> {where}\n"
    source = linecache.getline(file, line).rstrip("\n")
    if source:
        out += f"{pad} |\n{line} | {source}\n"
        if column is not None:
            lead = "".join("\t" if c == "\t" else " " for c in source[: column - 1])
            out += f"{pad} | {lead}^\n"
    return out


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line[len("error: ") :] if line.startswith("error: ") else line


class Error(Exception):
    """Base class of every pto-wsp error.

    Parameters
    ----------
    text : str
        The full message. When it contains a rendered location (`` --> file:line:column``) and
        ``file`` is not given, the location is read from it.
    file, line, column : optional
        Where the mistake is: the ``.wsp`` file, or the user's Python file for modules written
        in Python. ``None`` when there is no such place.

    Attributes
    ----------
    message : str
        The first line of the message, without ``error:`` and without the location.
    file : str or None
    line : int or None
        1-based.
    column : int or None
        1-based; ``None`` when only the line is known.

    Examples
    --------
    >>> import pto_wsp
    >>> try:
    ...     pto_wsp.Module.from_text("tensor A: f32[4];\\nworkload w() { task k(A); }", path="m.wsp")
    ... except pto_wsp.ValidationError as e:
    ...     print(e.file, e.line)
    m.wsp 2
    """

    def __init__(
        self,
        text: str = "",
        file: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[int] = None,
    ) -> None:
        text = str(text)
        super().__init__(text)
        if file is None and line is None:
            file, line, column = _location(text)
        self.file: Optional[str] = file
        self.line: Optional[int] = line
        self.column: Optional[int] = column
        self.message: str = _first_line(text)

    def __str__(self) -> str:
        return str(self.args[0]).rstrip("\n") if self.args else ""

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (str(self), self.file, self.line, self.column))


#: The former name of :class:`Error`, kept so that older code keeps working.
PtoWspError = Error


class ValidationError(Error):
    """A module does not parse or is not valid: a mistake in its text, or in the Python that
    built it (then ``file`` / ``line`` are the user's Python file and line)."""


class CompileError(Error):
    """A module cannot be compiled for the target: a kernel with no implementation, bindings
    that do not fit, an option the target does not have."""


class RunError(Error):
    """A run failed: a kernel reported an error, a region was out of bounds at run time, a
    plan broke its promise. ``file`` / ``line`` name the statement when the run knows it."""


class CoverageError(RunError):
    """Raised instead of a :class:`CoverageWarning` when a program compiled with
    ``strict=True`` leaves elements of an output tensor unwritten.

    Attributes
    ----------
    tensor : str
        The tensor's name.
    unwritten : list of tuple
        Boxes of elements no task wrote, each a tuple of ``(start, stop)`` per dimension.
    """

    def __init__(self, text: str = "", tensor: str = "", unwritten: Optional[list] = None) -> None:
        super().__init__(text)
        self.tensor = tensor
        self.unwritten = list(unwritten or [])


class CoverageWarning(UserWarning):
    """A run left elements of an output tensor unwritten (no task's ``out`` / ``inout``
    region covers them): they keep whatever the array held before. Compile with
    ``strict=True`` to make this an error (:class:`CoverageError`)."""


class ArgumentTypeError(Error, TypeError):
    """An argument of the wrong type: an array of the wrong element type, an object that is not
    an array, a bind value of the wrong kind. Also a ``TypeError``."""


class ArgumentValueError(Error, ValueError):
    """An argument of the right type and a wrong value: an array of the wrong shape, a negative
    thread count, an unknown tensor name. Also a ``ValueError``."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

F = TypeVar("F", bound=Callable[..., Any])


def _user_traceback(tb: Optional[types.TracebackType]) -> Optional[types.TracebackType]:
    """``tb`` without the frames of this package (the user's frames in between are kept)."""
    frames = []
    while tb is not None:
        if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR):
            frames.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    out: Optional[types.TracebackType] = None
    for frame, lasti, lineno in reversed(frames):
        out = types.TracebackType(out, frame, lasti, lineno)
    return out


def api(fn: F) -> F:
    """Marks a public entry point: a pto-wsp error (or a ``TypeError`` / ``ValueError`` of the
    package) raised inside it reaches the user with the package's own frames taken out of its
    traceback, so the last line shown is the user's."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (Error, TypeError, ValueError) as e:
            tb = e.__traceback__
            raised_here = tb is not None and _innermost_in_package(tb)
            if not raised_here:
                raise
            raise e.with_traceback(_user_traceback(tb.tb_next if tb is not None else None)) from None

    return wrapper  # type: ignore[return-value]


def _innermost_in_package(tb: types.TracebackType) -> bool:
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR)


for _cls in (
    Error,
    ValidationError,
    CompileError,
    RunError,
    CoverageError,
    CoverageWarning,
    ArgumentTypeError,
    ArgumentValueError,
):
    _cls.__module__ = "pto_wsp"
del _cls
