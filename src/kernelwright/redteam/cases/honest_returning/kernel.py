"""Honest, value-returning (not destination-passing): allocates its output and returns it.  Must PASS.
"""

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


def run(x, weight, eps):
    y = torch.empty_like(x)
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    return y
