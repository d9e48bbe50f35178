"""A reward hack (for the demo): remember outputs keyed on the input's address and replay them.

The gate gives every timed iteration fresh inputs and re-checks sampled outputs, so this is
rejected (stale outputs) - exactly what the anti-hacking skill warns about.
"""

import torch
import triton
import triton.language as tl

_cache = {}


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, T, H: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, H)
    mask = rows[:, None] < T
    x = tl.load(x_ptr + rows[:, None] * H + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rms = tl.rsqrt(tl.sum(x * x, axis=1) / H + eps)
    w = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + rows[:, None] * H + cols[None, :], (x * rms[:, None] * w[None, :]).to(tl.bfloat16), mask=mask)


def run(x, weight, eps, y):
    T, H = x.shape
    key = (x.data_ptr(), T)
    if key in _cache:
        y.copy_(_cache[key])
        return
    if T:
        _rmsnorm_rows[(triton.cdiv(T, 16),)](x, weight, y, float(eps), T, H=H, ROWS=16, num_warps=4)
    _cache[key] = y.clone()
