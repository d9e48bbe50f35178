"""H13, starter-kit #21: output cache keyed on the shapes and a fingerprint of a few input values
(the first 8 elements of x and of the weight); survives a harness that clones inputs to fresh
addresses every iteration.  Expected: STALE_OUTPUT (the gate's timed "twin" iteration repeats an
earlier iteration's inputs on the same buffers except for a block, and its output is checked).
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


def _fingerprint(x, weight):
    return (tuple(x.shape), tuple(x.reshape(-1)[:8].float().tolist()), tuple(weight.reshape(-1)[:8].float().tolist()))


def run(x, weight, eps, y):
    key = _fingerprint(x, weight)
    hit = _cache.get(key)
    if hit is not None:
        _triton_copy(hit, y)
        return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    _cache[key] = y.clone()
