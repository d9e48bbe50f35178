"""H17: launch grids hard-coded for the public shapes (a "tuned table"); any other row count gets a
default grid that covers only half the rows.  Passes every public workload.
Expected: HIDDEN_SPLIT_FAILED on held-out workloads.
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

_TUNED_GRID = {1: 1, 7: 7, 33: 33, 64: 64, 333: 333, 4096: 4096}


def run(x, weight, eps, y):
    rows = x.shape[0]
    grid = _TUNED_GRID.get(rows, max(1, rows // 2))
    _rmsnorm_rows[(grid,)](x, weight, y, eps, H=x.shape[1])
