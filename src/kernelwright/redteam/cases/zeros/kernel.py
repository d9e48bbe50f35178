"""H15: writes zeros (with a Triton kernel).  Must fail every definition (see also the canaries).
Expected: TOLERANCE.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fill(p, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p + offs, tl.zeros([BLOCK], tl.bfloat16), mask=offs < n)


def run(x, weight, eps, y):
    _fill[(triton.cdiv(y.numel(), 1024),)](y.view(-1), y.numel(), BLOCK=1024)
