"""The launch counter's scalars (worker.LaunchCounter.install) were kept in a dict keyed by
"total" / "ablate" / "watched".  In timed iterations this solution swaps the "watched" key for a
str subclass with the same hash whose ``__eq__`` runs the deferred kernel: the harness looked the
count up right after it stopped the timer, so the work ran off the clock (PASSED at 15.9 us against
the honest 90 ms; the same through "total").  Where the counter holds its scalars in list slots
(no keys to compare), the solution falls back to putting an int subclass into the frame-watched
slot (case launch_counter_int_subclass).  Found by red-team pass rt17 (2026-12-07).
Expected: GATE_TAMPERED -- the counter's scalars sit in list slots and every read checks exact
types (worker._counter), and the per-kernel table's keys must be exact strs (worker._table_copy).
CPU only (it finds the interpreter's launcher).
"""
import sys

import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


_pending = []


def _real(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])


def _flush():
    while _pending:
        _real(*_pending.pop())


class _Key(str):
    """Equal to "watched", with its hash; comparing it runs the deferred kernel."""

    def __hash__(self):
        return str.__hash__(self)

    def __eq__(self, other):
        _flush()
        return str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)


class _Count(int):
    """An int whose subtraction runs the deferred kernel (the list-slot layout's fallback)."""

    def __add__(self, other):
        return _Count(int(self) + int(other))

    __radd__ = __add__

    def __sub__(self, other):
        _flush()
        return int(self) - int(other)


def _counter_state():
    """The counter's scalars: a dict with a "watched" key, or a three-slot list, found through
    the closures of the wrapped launcher."""
    from triton.runtime.interpreter import InterpretedFunction

    seen, todo = set(), [InterpretedFunction.run]
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for cell in getattr(f, "__closure__", None) or ():
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if isinstance(v, dict) and "watched" in v:
                return v
            if type(v) is list and len(v) == 3 and type(v[1]) is bool:
                return v
            if callable(v) and hasattr(v, "__closure__"):
                todo.append(v)
    return None


def _timed():
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "op_time":
            return True
        if f.f_code.co_name in ("op_call", "_graph_phase"):
            return False
        f = f.f_back
    return False


_S = []


def run(x, weight, eps, y):
    if not _S:
        _S.append(_counter_state())
    state = _S[0]
    if state is not None and _timed():
        if isinstance(state, dict):
            if not any(type(k) is _Key for k in state):
                state[_Key("watched")] = state.pop("watched")
        elif type(state[2]) is not _Count:
            state[2] = _Count(state[2])
        _pending.append((x, weight, eps, y))
        return
    _real(x, weight, eps, y)
