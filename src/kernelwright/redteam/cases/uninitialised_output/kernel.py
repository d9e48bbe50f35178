"""H5: returns torch.empty(...) without writing it, hoping the allocator hands back memory that still
holds the reference's result (what fooled harnesses that computed the reference in the same
process).  Here the reference never exists in the worker and outputs are copied into poisoned
buffers.  Expected: NON_FINITE / TOLERANCE / NONDETERMINISTIC.
"""

import torch
import triton
import triton.language as tl


def run(x, weight, eps):
    return torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)
