"""Python code of the solution's running inside an interpreted launch (docs/gate.md, section 3,
item 10).

Under ``TRITON_INTERPRET=1`` a launch is Python: Triton's interpreter runs the kernel body program
by program through Triton's, numpy's, torch's and the standard library's Python code.  Any other
Python code that starts inside the launch -- a callback numpy calls, an import hook, a property or
``__str__`` the interpreter reads, a method planted on the builder and removed again before the
launch ends -- is the solution's, running where a GPU kernel could not.  ``ForeignFrames`` watches
every Python frame that starts inside a launch (``sys.settrace``'s call events; the trace function
returns None, so no line is traced) and stops the first whose code is none of:

* a function that existed before the solution's import (every function object the collector
  tracks then, ``gc.get_objects``), by identity of the pair (its code object, its globals), and
  the code nested in it (closures and comprehensions it makes later run that code with those
  globals).  A function made later from such code with other globals, or with such globals and
  code of its own (a library's file name included), is not one of them;
* a jit body the gate read for a launch (``allow``): the rewritten kernel, its jit callees and
  ``constexpr_function`` bodies, with the globals they run with.

What it cannot see: code that runs no Python frame (a builtin or ``functools.partial`` of one
called as a hook), and trusted code called with the solution's arguments; the hooks that could
call those are closed one by one (``interpreted.JitBodyCheck``).  Cost on Python 3.11: about 2.6x
the interpreter's own time on the demo's launch of many small programs and 4x on MoE (one trace
call per Python frame), so the caller watches a share of the launches
(``interpreted.FRAME_WATCH_SHARE``).
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable, Dict, Optional, Set, Tuple


class ForeignCode(RuntimeError):
    """Raised inside the launch at the first frame of code the gate does not trust."""


class ForeignFrames:
    """The functions that exist when it is made (before the solution's import) and the jit bodies
    the gate allows; ``watch(call)`` runs ``call`` with every new Python frame checked.  Made in
    about 50 ms (some 30,000 functions once torch, Triton and numpy are loaded)."""

    def __init__(self) -> None:
        import gc

        self._trusted: Dict[int, int] = {}        # id(code) -> id(the globals it runs with)
        self._shared: Set[Tuple[int, int]] = set()   # further (code, globals) pairs of one code
        self._keep: list = []                      # ids stay unique while these live
        for obj in gc.get_objects():
            if type(obj) is types.FunctionType:
                self._add_code(obj.__code__, obj.__globals__)
        self._settrace, self._gettrace = sys.settrace, sys.gettrace
        self.found: Optional[str] = None

    def allow(self, fn: types.FunctionType) -> None:
        """Trust ``fn``'s code (and the code nested in it) with ``fn``'s globals: a jit body the
        gate has read."""
        self._add_code(fn.__code__, fn.__globals__)

    def watch(self, call: Callable[[], Any]) -> Any:
        """``call()`` with every Python frame that starts in it checked; the first foreign one
        sets ``found`` (one line) and raises ``ForeignCode`` in that frame before its first
        instruction.  The caller's trace function (none: ``JitBodyCheck`` refuses one) is put back
        after."""
        trusted, shared, judge = self._trusted, self._shared, self._judge

        def on_call(frame, _event, _arg):
            code, space = id(frame.f_code), id(frame.f_globals)
            if trusted.get(code) != space and (code, space) not in shared:
                judge(frame)
            return None

        previous = self._gettrace()
        self._settrace(on_call)
        try:
            return call()
        finally:
            self._settrace(previous)

    def foreign(self, frame) -> bool:
        """Whether ``frame`` runs code this object does not trust (another thread's frame)."""
        code, space = id(frame.f_code), id(frame.f_globals)
        return self._trusted.get(code) != space and (code, space) not in self._shared

    def _judge(self, frame) -> None:
        code = frame.f_code
        why = (f"Python code that is not the kernel's and did not exist before the solution's import ran "
               f"inside the launch: {code.co_name} ({code.co_filename}:{frame.f_lineno})")
        if self.found is None:
            self.found = why
        raise ForeignCode(why)

    def _add_code(self, code: types.CodeType, space: dict) -> None:
        have = self._trusted.get(id(code))
        if have == id(space) or (id(code), id(space)) in self._shared:
            return
        if have is None:
            self._trusted[id(code)] = id(space)
        else:
            self._shared.add((id(code), id(space)))
        self._keep += (code, space)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._add_code(const, space)
