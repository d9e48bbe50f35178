"""Host compute through torch's own C functions registered as Triton pre-run hooks (red-team
pass of 2026-12-07): ``torch.mul`` / ``add`` / ``mean`` / ``rsqrt`` run as hooks of empty jit
kernels launched with keyword arguments named like the torch parameters, so each op's calling
frame is Triton's ``GridExecutor.__call__``; the result lands in a temporary that an honest
Triton kernel copies into ``y``.  Expected: BUILD_FAILED (a launch with pre-run hooks is refused), else
VENDOR_KERNELS (inside a launch the host-op recorder
leaves out only glue that Triton's code calls; these are compute ops).  CPU only: on CUDA the
hooks' ops are aten kernels in CUPTI's records.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _mul(input, other, out):
    pass


@triton.jit
def _add(input, other, out):
    pass


@triton.jit
def _mean(input, dim: tl.constexpr, keepdim: tl.constexpr, out):
    pass


@triton.jit
def _rsqrt(input, out):
    pass


_mul.add_pre_run_hook(torch.mul)
_add.add_pre_run_hook(torch.add)
_mean.add_pre_run_hook(torch.mean)
_rsqrt.add_pre_run_hook(torch.rsqrt)


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(tl.bfloat16))


def run(x, weight, eps, y):
    T, H = x.shape
    xf = torch.empty(T, H)
    sq = torch.empty(T, H)
    ms = torch.empty(T, 1)
    r = torch.empty(T, 1)
    t = torch.empty(T, H)
    _mul[(1,)](input=x, other=1.0, out=xf)
    _mul[(1,)](input=xf, other=xf, out=sq)
    _mean[(1,)](input=sq, dim=-1, keepdim=True, out=ms)
    _add[(1,)](input=ms, other=float(eps), out=ms)
    _rsqrt[(1,)](input=ms, out=r)
    _mul[(1,)](input=xf, other=r, out=t)
    _mul[(1,)](input=t, other=weight, out=t)
    _copy_rows[(T,)](t, y, H=H)
