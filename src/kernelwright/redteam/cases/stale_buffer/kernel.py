"""H13 (output-buffer reuse): computes only the first time it sees an output buffer and skips the
work afterwards, trusting that the harness reuses the buffer and never clears it (true of harnesses
that time on the same output tensor).  Expected: NON_FINITE / STALE_OUTPUT / TOLERANCE
(outputs are poisoned before every call).
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

_seen = set()


def run(x, weight, eps, y):
    key = y.data_ptr()
    if key in _seen:
        return
    _seen.add(key)
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
