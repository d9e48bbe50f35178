"""H13, flashinfer-bench #228: computes honestly on a miss and caches the output keyed on the input
and output pointers; on a hit it copies the cached output (no compute).  FIB reuses the same
tensors for all timed iterations, so every timed call is a hit.  Expected: TOLERANCE (the second
correctness trial reuses buffer set 0 with new contents) or STALE_OUTPUT.
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

_cache = {}


def run(x, weight, eps, y):
    key = (x.data_ptr(), weight.data_ptr(), y.data_ptr())
    hit = _cache.get(key)
    if hit is not None:
        _triton_copy(hit, y)
        return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    _cache[key] = y.clone()
