"""In timed calls the solution launches an empty kernel, keeps its inputs, and returns with a torch
function mode pushed on torch's stack.  The harness's first torch call after the clock was read
(``_check_rebound`` reads each buffer's storage) reaches the mode, which runs the real kernel
there -- off the clock, before the outputs went to the parent -- and hands a ``_Popper`` to the
timed loop's ``args`` list, whose ``__del__`` (when the loop drops its locals after the parent's
copy) pops the mode before the integrity check between iterations (PASSED at 19.2 ms against the
honest 58.7 ms).  Found by red-team pass rt18 (2026-12-07).  Expected: GATE_TAMPERED -- the
torch mode stacks' depths are read before and after every call of the solution, inside the timed
window (worker.Harness._solution).  CPU only (the harness's frames are looked up by name).
"""
import sys

import torch
import triton
import triton.language as tl
from torch.overrides import TorchFunctionMode


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


def _real(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])


_pending = []
_mode_on = []


def _frame(name, depth=2):
    f = sys._getframe(depth)
    while f is not None:
        if f.f_code.co_name == name:
            return f
        f = f.f_back
    return None


class _Popper:
    """Dropped with op_time's ``args`` list (after the parent's copy): takes the mode off."""

    def __del__(self):
        try:
            while _mode_on and torch._C._len_torch_function_stack() > 0:
                torch._C._pop_torch_function_stack()
                _mode_on.pop()
        except Exception:
            pass


class _Hook(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if _pending and _frame("_check_rebound") is not None:
            _real(*_pending.pop())          # after the clock was read
            timed = _frame("op_time")
            if timed is not None:
                local = timed.f_locals
                local["args"].append(_Popper())
                local.clear()
                del local
        return func(*args, **(kwargs or {}))


def _timed() -> bool:
    """Called by the harness's _call straight from op_time's timed loop."""
    call = _frame("_call")
    return call is not None and call.f_back is not None and call.f_back.f_code.co_name == "op_time"


def run(x, weight, eps, y):
    if _timed():
        _pending.append((x, weight, eps, y))
        _empty[(1,)](y)
        torch._C._push_on_torch_function_stack(_Hook())
        _mode_on.append(1)
        return
    _real(x, weight, eps, y)
