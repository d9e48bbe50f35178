"""A deliberately slow RMSNorm for demo_rmsnorm_h512: the starting point of the workflow demo.

One Triton program per row, and each program walks the 512 columns in small chunks, twice
(once for the sum of squares, once to write). Correct, but it does the least work per
program and the most loop iterations - the kind of first draft an optimisation run improves.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_row_chunks(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, H, CHUNK):
        offs = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * H + offs).to(tl.float32)
        acc += x * x
    rms = tl.rsqrt(tl.sum(acc, axis=0) / H + eps)
    for start in range(0, H, CHUNK):
        offs = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * H + offs).to(tl.float32)
        w = tl.load(w_ptr + offs).to(tl.float32)
        tl.store(y_ptr + row * H + offs, (x * rms * w).to(tl.bfloat16))


def run(x, weight, eps, y):
    T, H = x.shape
    if T == 0:
        return
    _rmsnorm_row_chunks[(T,)](x, weight, y, float(eps), H=H, CHUNK=128)
