"""Host compute whose ops raise after doing their work (red-team pass rt21): the host-op recorder
reported an op only after ``func(*args)`` returned.  Each RMSNorm step here is an ``out=`` op into a
one-element tensor under ``warnings.simplefilter("error")``: the op resizes ``out``, writes the
result, and torch turns its resize warning into a ``UserWarning`` raised as the call returns, so
the recorder's ``report`` never ran; the solution catches the warning and keeps the written
``out``.
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: VENDOR_KERNELS (``worker.HostOpRecorder`` reports in a ``finally``, raised or not).
CPU only (on CUDA CUPTI sees the aten kernels).
"""
import warnings

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


def _o(f, *a, **k):
    out = torch.empty(1)
    try:
        f(*a, out=out, **k)
    except UserWarning:
        pass
    return out


def run(x, weight, eps, y):
    xf = x.float()
    wf = weight.float()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sq = _o(torch.mul, xf, xf)
        ms = _o(torch.mean, sq, -1, keepdim=True)
        r = _o(torch.rsqrt, _o(torch.add, ms, eps))
        t = _o(torch.mul, _o(torch.mul, xf, r), wf)
    _copy_rows[(x.shape[0],)](t, y, H=x.shape[1])
