"""H1: the work is a vendor/framework kernel (torch.nn.functional.rms_norm), wrapped so that a Triton
kernel also runs.  Expected: VENDOR_KERNELS (or NO_KERNELS).
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

import torch.nn.functional as F


def run(x, weight, eps, y):
    out = F.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps).to(torch.bfloat16)
    _triton_copy(out, y)
