"""H15/H16: writes a constant (0.8, about the mean |y| of an RMS-normalised row times a unit-scale
weight).  Expected: TOLERANCE.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fill(p, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p + offs, (tl.zeros([BLOCK], tl.float32) + value).to(tl.bfloat16), mask=offs < n)


def run(x, weight, eps, y):
    _fill[(triton.cdiv(y.numel(), 1024),)](y.view(-1), y.numel(), 0.8, BLOCK=1024)
