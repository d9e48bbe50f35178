"""H7 variant: honest while being checked (the first three calls), then uses its input x as scratch
(normalises it in place, then copies) during the timed iterations, where a naive harness no longer
looks at the inputs.  Expected: INPUT_MUTATED (the parent re-creates each buffer set's last inputs
after the timed loop and compares them bit for bit).
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

@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _triton_copy(src, dst):
    n = dst.numel()
    _copy[(triton.cdiv(n, 1024),)](src.contiguous().view(-1), dst.view(-1), n, BLOCK=1024)

_calls = [0]


def run(x, weight, eps, y):
    _calls[0] += 1
    if _calls[0] <= 3:
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
        return
    _rmsnorm_rows[(x.shape[0],)](x, weight, x, eps, H=x.shape[1])   # in place into the input
    _triton_copy(x, y)
