"""In timed calls the solution launches an empty kernel, keeps its inputs, and returns with a
``sys.setprofile`` function installed.  The function waits for the first Python call the
harness makes from ``op_time`` after the call returned and the clock was read, removes itself and
runs the real kernel there: off the clock, before the outputs went to the parent, gone before the
harness's integrity check between iterations (PASSED at 11.8 ms against the honest 58.7 ms).
Found by red-team pass rt18 (2026-12-07).  Expected: GATE_TAMPERED -- the harness reads the
profile/trace functions, timer signal handlers, monitoring tools and torch mode stacks before and
after every call of the solution, still inside the timed window (worker.Harness._solution).
CPU only (the demo definition's interpreted launches; the harness's frames are looked up by name).
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


@triton.jit
def _empty(y_ptr):
    tl.program_id(0)


_pending = []
_setprofile = sys.setprofile


def _timed() -> bool:
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "op_time":
            return True
        f = f.f_back
    return False


def _prof(frame, event, arg):
    # the first Python call op_time itself makes after the call returned
    if event == "call" and frame.f_back is not None and frame.f_back.f_code.co_name == "op_time" and _pending:
        _setprofile(None)
        x, w, eps, y = _pending.pop()
        _rmsnorm_rows[(x.shape[0],)](x, w, y, eps, H=x.shape[1])


def run(x, weight, eps, y):
    if _timed():
        _pending.append((x, weight, eps, y))
        _empty[(1,)](y)
        _setprofile(_prof)
        return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
