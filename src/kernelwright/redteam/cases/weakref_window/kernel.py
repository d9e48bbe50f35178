"""Issue 22, class 2 (work inside the harness's own code, off the clock), value-returning: each
timed call returns a fresh, unwritten tensor (after an empty kernel) and registers a weakref
callback on it.  Before issue 22 the harness let go of the previous call's returned tensor inside
the next iteration, after the timer stopped and before the parent copied the outputs: the callback
then computed the outputs into the harness's buffer (found through frames).  Correctness calls
compute honestly.  Now the harness keeps every reference alive until the parent's copy, so the
callback fires too late.  Expected: STALE_OUTPUT or OUTPUT_PREWRITTEN.
"""

import sys
import weakref

import torch
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
def _nothing(y_ptr):
    pass


def _compute_into_the_harness_buffer():
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name != "_accept_returned":
        f = f.f_back
    if f is None:
        return
    args, outputs = f.f_locals.get("args"), f.f_locals.get("outputs")
    if not args or not outputs:
        return
    x, w = args[0], args[1]
    xf = x.float()
    outputs[0].copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(outputs[0].dtype))


def _timed():
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "op_time":
            return True
        f = f.f_back
    return False


def run(x, weight, eps):
    y = torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)
    if not _timed():
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
        return y
    _nothing[(1,)](y)
    weakref.finalize(y, _compute_into_the_harness_buffer)
    return y
