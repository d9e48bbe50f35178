"""Host compute the CPU recorder does not see (found by the 2026-11-29 red-team review).  The CPU
provenance rule records the solution's torch calls through a torch function mode; inside
``torch._C.DisableTorchFunction()`` no mode is called, so this solution computes RMSNorm with torch
there and launches one empty Triton kernel for the launch counter.  Expected: HOST_COMPUTE (the
gate runs one call with Triton's stores dropped: the outputs still come out right, so the work
is not in the solution's kernels).  CPU only by nature (on the GPU, CUPTI sees the aten kernels).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _empty(y_ptr):
    tl.program_id(0)


def run(x, weight, eps, y):
    with torch._C.DisableTorchFunction():
        xf = x.float()
        y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))
    _empty[(1,)](y)
