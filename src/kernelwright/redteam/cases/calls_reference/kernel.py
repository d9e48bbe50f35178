"""H1/H3: calls the definition's own reference (imports kernelwright) and writes the result with a
Triton copy kernel, so that "a Triton kernel ran" is true.  A naive harness that only checks the
output and that some Triton kernel launched accepts it.  Expected: VENDOR_KERNELS (the host's
torch ops do the work: CPU host-op trace / CUPTI time in aten kernels).
"""

import torch
import triton
import triton.language as tl

@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _triton_copy(src, dst):
    n = dst.numel()
    _copy[(triton.cdiv(n, 1024),)](src.contiguous().view(-1), dst.view(-1), n, BLOCK=1024)

from kernelwright.definitions.demo_rmsnorm.reference import run as _reference


def run(x, weight, eps, y):
    _triton_copy(_reference(x, weight, eps), y)
