"""Different code when traced (found by the 2026-11-29 red-team review).  Provenance is observed
in calls the solution can recognise from its caller's frame: the correctness calls, the profiled
call (CPU), the CUPTI window (GPU).  There it runs its own Triton kernel; in the timed calls
(called from ``op_time``) it computes with torch and launches one empty kernel, which no host-op
recorder sees there.  Expected: PHASE_MISMATCH (timed calls far faster than the work the traced
calls showed: on CPU the profiled call's Triton launches alone, on GPU the CUPTI kernel span).
"""

import sys

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
def _empty(y_ptr):
    tl.program_id(0)


def run(x, weight, eps, y):
    if sys._getframe(2).f_code.co_name == "op_time":
        xf = x.float()
        y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))
        _empty[(1,)](y)
        return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
