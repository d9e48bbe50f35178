"""One-line descriptions of exceptions that name the user's file and line.

A traceback printed to a terminal or a trace log is for reading later; what a table row, a CLI
error or a failure line needs is one line that says where the user's code broke::

    kernel.py, line 12: SyntaxError: invalid syntax
    gdn_decode.json (reference), line 36: AssertionError

``exception_line(exc, names)`` finds the innermost frame (or, for a SyntaxError, the offending
line) that lies in one of the user's files and prints it under the name the user knows
(``names`` maps real paths -- a solution's temporary copy, a definition's compiled reference --
to display names).  ``rename(text, names)`` rewrites those paths in a whole traceback.
"""

from __future__ import annotations

import traceback
from typing import Mapping, Optional, Tuple


def _display(filename: Optional[str], names: Mapping[str, str]) -> Optional[str]:
    if not filename:
        return None
    if filename in names:
        return names[filename]
    for prefix, shown in names.items():
        if prefix.endswith("/") and filename.startswith(prefix):
            return shown + filename[len(prefix):]
    return None


def user_location(exc: BaseException, names: Mapping[str, str]) -> Optional[Tuple[str, int]]:
    """(display name, line) of the innermost place in the user's files where ``exc`` arose."""
    if isinstance(exc, SyntaxError):
        shown = _display(exc.filename, names)
        if shown is not None and exc.lineno:
            return shown, int(exc.lineno)
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        shown = _display(frame.filename, names)
        if shown is not None:
            found = (shown, int(frame.lineno or 0))
    return found


def exception_line(exc: BaseException, names: Mapping[str, str], limit: int = 300) -> str:
    """``<file>, line <n>: <Type>: <message>`` (the location left out when no frame is the
    user's), on one line, at most ``limit`` characters, cut at a word boundary."""
    message = str(exc.msg if isinstance(exc, SyntaxError) and exc.msg else exc).strip()
    message = " ".join(rename(message, names).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    where = user_location(exc, names)
    if where is not None:
        text = f"{where[0]}, line {where[1]}: {text}"
    return clip(text, limit)


def rename(text: str, names: Mapping[str, str]) -> str:
    """``text`` with every real path of ``names`` replaced by its display name."""
    for real, shown in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(real, shown)
    return text


def clip(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters: cut at the last space before the limit
    (never mid-word; a single longer word is cut) and marked with an ellipsis."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[: max(1, width - 1)]
    space = cut.rfind(" ")
    if space > width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"
