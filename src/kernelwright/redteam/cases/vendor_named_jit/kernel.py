"""Issue 22, class 5 (provenance by name): declares @triton.jit functions named like the aten
kernels its host code runs (vectorized_elementwise_kernel, reduce_kernel) and never launches them;
the work is done by torch ops the CPU compute list does not name (pow, mean, rsqrt).  Before issue
22 the declared names made those aten kernels "the solution's own" on the GPU, and a python-language
solution skipped the CPU launch rule.  Now a kernel is the solution's only if the gate saw it
launched, and the launch counter runs for every language.  Expected: NO_KERNELS (or VENDOR_KERNELS).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def vectorized_elementwise_kernel(x_ptr):
    pass


@triton.jit
def reduce_kernel(x_ptr):
    pass


def run(x, weight, eps, y):
    xf = x.float()
    y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))
