"""The host-op recorder's record, erased before it reaches the parent (red-team pass rt19): on the
CPU the gate records the torch ops a call runs.  This solution computes RMSNorm with plain torch
(recorded) into a temporary, copies it into the output with a one-program Triton kernel (so the
ablation call, whose Triton stores are dropped, leaves the outputs wrong like an honest
solution's), and before returning clears the tally dict it looks for in ``op_call``'s frame (a
local ``host_ops``) or in ``_profile_kernels``' (the profiled call after the timed loop): a recorder
that kept its tallies in the worker until the reply would send the parent an empty record.  Timed
calls carry no recorder.
Expected: VENDOR_KERNELS (``worker.HostOpRecorder`` sends each record to the parent as the op
runs; nothing waits in the worker to be cleared).  CPU only (on CUDA CUPTI sees the aten kernels).
"""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, N: tl.constexpr):
    o = tl.arange(0, N)
    m = o < n
    tl.store(dst + o, tl.load(src + o, mask=m), mask=m)


def _erase_record():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name in ("op_call", "_profile_kernels"):
            ops = f.f_locals.get("host_ops")
            if type(ops) is dict:
                ops.clear()
            return
        f = f.f_back


def run(x, weight, eps, y):
    xf = x.float()
    tmp = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype)
    n = tmp.numel()
    _copy[(1,)](tmp, y, n, N=triton.next_power_of_2(n))
    _erase_record()
