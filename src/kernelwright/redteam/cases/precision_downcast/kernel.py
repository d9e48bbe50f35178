"""H14: quantises the activations to FP8 (e4m3, per-tensor scale) to halve the bytes read, then
normalises.  About 3 mantissa bits: a loose harness tolerance passes it.  Expected: TOLERANCE.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_fp8(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    scale = tl.max(tl.abs(x), axis=0) / 448.0 + 1e-12
    xq = (x / scale).to(tl.float8e4nv).to(tl.float32) * scale
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(xq * xq, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (xq * rms * w).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rmsnorm_fp8[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
