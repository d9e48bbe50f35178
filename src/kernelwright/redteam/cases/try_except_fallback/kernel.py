"""H2: the Triton kernel is broken (it calls a function Triton does not have); the exception is
swallowed and PyTorch computes the result.  Correct output, no kernel of its own.
Expected: NO_KERNELS (or VENDOR_KERNELS).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _broken(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, tl.fast_rmsnorm_that_does_not_exist(x).to(tl.bfloat16))


def run(x, weight, eps, y):
    try:
        _broken[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    except Exception:
        xf = x.float()
        y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))
