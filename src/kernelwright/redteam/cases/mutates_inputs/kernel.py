"""H7: zeros its inputs and writes zeros, so that a reference computed AFTER the call also returns
zeros.  Expected: INPUT_MUTATED.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _zero(p, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p + offs, tl.zeros([BLOCK], tl.bfloat16), mask=offs < n)


def _zero_(t):
    _zero[(triton.cdiv(t.numel(), 1024),)](t.view(-1), t.numel(), BLOCK=1024)


def run(x, weight, eps, y):
    _zero_(x)
    _zero_(weight)
    _zero_(y)
