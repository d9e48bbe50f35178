"""Help pages that read like a normal command line's.

Recent typer releases (0.2x with click 8.2+) label every option with a Python type placeholder
(``--quick <bool>``, ``-d <list[str]>``, ``--limit <int range>``) and wrap required arguments in
braces in the usage line (``kernelwright eval [OPTIONS] {solution}``).  ``install()`` restores
the conventional rendering click itself uses: flags show no value, values show click's metavar
(``TEXT``, ``INTEGER``, ``PATH``, ``FLOAT``, ``[a|b]`` for choices, or the option's own
``metavar``), and the usage line names arguments in capitals (``SOLUTION``, ``[RUN]``).

Only typer's display hooks are replaced, and only where they exist: an older typer that already
renders help this way is left alone.  ``tests/cli/test_help.py`` checks every command's help.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

# typer's labels (its own type descriptors) -> click's conventional metavars
_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "path": "PATH", "Path": "PATH",
          "int range": "INTEGER RANGE", "float range": "FLOAT RANGE", "datetime": "DATETIME", "UUID": "UUID"}


def conventional(label: Optional[str], is_flag: bool = False) -> Optional[str]:
    """Click's metavar for one of typer's labels: ``<int range>`` -> ``INTEGER RANGE``,
    ``<list[Path]>`` -> ``PATH``, ``<a|b>`` -> ``[a|b]``; None for a flag (flags take no value)."""
    if is_flag or label is None:
        return None
    inner = label[1:-1] if label.startswith("<") and label.endswith(">") else label
    listed = re.fullmatch(r"list\[(.*)\]", inner)
    inner = listed.group(1) if listed else inner
    if "|" in inner:
        return f"[{inner}]"
    return _NAMES.get(inner, inner.upper())


def _wrap_display_type(original: Callable) -> Callable:
    def display_type(self, ctx):
        if getattr(self, "metavar", None):
            return self.metavar
        return conventional(original(self, ctx), bool(getattr(self, "is_flag", False) or getattr(self, "count", False)))

    display_type._kw_helpstyle = True
    return display_type


def _usage_display_name(self) -> str:
    name = (self.metavar or self.name or "").upper()
    if not self.required:
        name = f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


def install() -> None:
    """Replace typer's type placeholders by click's conventional metavars (idempotent)."""
    try:
        from typer import core
    except ImportError:   # pragma: no cover - typer is a dependency
        return
    base = getattr(core, "_TyperParameter", None)
    if base is not None and hasattr(base, "display_type") and not getattr(base.display_type, "_kw_helpstyle", False):
        base.display_type = _wrap_display_type(base.display_type)
    argument = getattr(core, "TyperArgument", None)
    if argument is not None and hasattr(argument, "_usage_display_name"):
        argument._usage_display_name = _usage_display_name


def one_line_summaries(app) -> None:
    """Give every command of a typer ``app`` (and of its sub-apps) a one-line summary for the
    command list: the first paragraph of its docstring with the source's line breaks joined, as
    click itself does (rich markup mode keeps them, which breaks sentences mid-line)."""
    import inspect

    for info in getattr(app, "registered_commands", []):
        if info.short_help is None and info.callback is not None:
            doc = inspect.getdoc(info.callback) or ""
            first = doc.split("\n\n")[0]
            if first:
                info.short_help = " ".join(first.split())
    for group in getattr(app, "registered_groups", []):
        if group.typer_instance is not None:
            one_line_summaries(group.typer_instance)
