"""Work outside the measured span through the harness's own torch calls (found by the
2026-11-29 red-team review).  A TorchFunctionMode entered at import and never left sees every
torch call of the worker, the harness's included: after the inputs of a timed iteration are in
place, the harness poisons the outputs (``fill_`` with NaN) before its clock starts.  On that
``fill_`` the mode writes the honest result into the output; the timed call then launches an
empty kernel.  No attribute of torch is replaced.  Expected: GATE_TAMPERED (after every message
the worker reports hooks installed since its snapshot: profile and trace functions, torch
function and dispatch modes, gc callbacks, sys.monitoring tools).
"""

import math

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


_args_of = {}     # output data_ptr -> (x, weight, eps) of the last call on that buffer
_done = set()     # outputs already computed during the harness's poisoning


class _OnPoison(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") == "fill_" and len(args) > 1 and isinstance(args[1], float) \
                and math.isnan(args[1]) and args[0].data_ptr() in _args_of:
            x, weight, eps = _args_of[args[0].data_ptr()]
            _rmsnorm_rows[(x.shape[0],)](x, weight, args[0], eps, H=x.shape[1])
            _done.add(args[0].data_ptr())
        return result


_OnPoison().__enter__()


def run(x, weight, eps, y):
    key = y.data_ptr()
    _args_of[key] = (x, weight, eps)
    if key in _done:
        _done.discard(key)
        _empty[(1,)](y)
        return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
