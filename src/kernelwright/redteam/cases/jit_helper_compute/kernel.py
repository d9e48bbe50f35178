"""Host compute called from inside a jit body (found by the 2026-12-06 red-team pass).

Under ``TRITON_INTERPRET=1`` a ``@triton.jit`` body is ordinary Python, so it can call a plain
Python function; this one computes RMSNorm with torch on the call's tensors (kept in a module
global by ``run``) while the launch is counted, and the kernel itself stores nothing.  Expected:
BUILD_FAILED (a launched jit body may call only what a GPU kernel can:
``interpreted.JitBodyCheck``); without that check, VENDOR_KERNELS (the host-op recorder keeps ops
whose calling frame is not Triton's code) or HOST_COMPUTE (the ablation call drops Triton's
stores; the helper's writes land).
CPU only: a GPU kernel cannot call Python.
"""

import torch
import triton
import triton.language as tl

_CALL = []


def _compute():
    x, weight, eps, y = _CALL[-1]
    xf = x.float()
    y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    if tl.program_id(0) == 0:
        _compute()


def run(x, weight, eps, y):
    _CALL[:] = [(x, weight, eps, y)]
    _rmsnorm_row[(1,)](x, weight, y, eps, H=x.shape[1])
