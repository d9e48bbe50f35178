"""The launch counter's table (``state`` in the closures of the wrapped Triton launcher,
worker.LaunchCounter.install) holds its counts as plain ints.  In timed iterations this solution
puts an int subclass there as the frame-watched count, defers its kernel, and runs it from that
subclass's ``__sub__``: the harness subtracted the count before and after the call right after it
stopped the timer, so the work ran off the clock before the outputs went to the parent (PASSED at
11.6 us against the honest 50 ms).  Found by red-team pass rt16 (2026-12-07); the same through the
launch total.  Expected: GATE_TAMPERED -- every update and read of the counter looks at exact types
first (worker._bump, _counter), so no value of the solution's runs its arithmetic in the harness.
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


class _W(int):
    def __add__(self, o):
        return _W(int(self) + int(o))
    __radd__ = __add__
    __iadd__ = __add__

    def __sub__(self, o):
        while _pending:                 # off the clock: the harness stopped its timer already
            _real(*_pending.pop())
        return int(self) - int(o)


def _state():
    from triton.runtime.interpreter import InterpretedFunction as IF
    seen = set()
    todo = [IF.run]
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for c in getattr(f, "__closure__", None) or ():
            try:
                v = c.cell_contents
            except ValueError:
                continue
            if isinstance(v, dict) and "watched" in v and "ablate" in v:
                return v
            if type(v) is list and len(v) == 3 and type(v[1]) is bool:   # the slots' layout
                return v
            if callable(v) and hasattr(v, "__closure__"):
                todo.append(v)
    return None


def _timed():
    # ... <- Harness._call <- Harness.op_time (the timed loop itself, not the profiled call)
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name != "_call":
        f = f.f_back
    return f is not None and f.f_back is not None and f.f_back.f_code.co_name == "op_time"


_S = None


def run(x, weight, eps, y):
    global _S
    if _S is None:
        _S = _state()
    if _S is not None and _timed():
        key = "watched" if isinstance(_S, dict) else 2
        if not isinstance(_S[key], _W):
            _S[key] = _W(_S[key])
        _pending.append((x, weight, eps, y))
        return
    _real(x, weight, eps, y)
