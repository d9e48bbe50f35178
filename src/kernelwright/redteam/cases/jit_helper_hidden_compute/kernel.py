"""``jit_helper_compute`` with the helper's torch ops under ``torch._C.DisableTorchFunction()``, so
that no torch function mode sees them, inside or outside a launch.  Expected: BUILD_FAILED (a
launched jit body may call only what a GPU kernel can: ``interpreted.JitBodyCheck``); without
that check, HOST_COMPUTE (the ablation call runs every launch with Triton's stores dropped, and
the helper's writes still land).  CPU only: a GPU kernel cannot call Python.
"""

import torch
import triton
import triton.language as tl

_CALL = []


def _compute():
    x, weight, eps, y = _CALL[-1]
    with torch._C.DisableTorchFunction():
        xf = x.float()
        y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    if tl.program_id(0) == 0:
        _compute()


def run(x, weight, eps, y):
    _CALL[:] = [(x, weight, eps, y)]
    _rmsnorm_row[(1,)](x, weight, y, eps, H=x.shape[1])
