"""Different code when traced (found by the 2026-11-29 red-team review).  Provenance is observed
in calls the solution can recognise from its caller's frame: the correctness calls and the CUPTI
window.  There it runs its own Triton kernel, slow here on purpose (a spin of dependent FMAs on a
scalar that leaves the values unchanged, standing in for an own kernel slower than a vendor library);
in the timed calls (``op_time`` among its callers) it computes with torch and launches one empty kernel.
Expected on CUDA: PHASE_MISMATCH (on the same inputs, the timed calls take a fraction of the
kernel span CUPTI saw in the traced calls).  CUDA only: on CPU the same switch is a documented open
hole (docs/gate.md, section 3, item 6).
"""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows_slow(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, SPIN: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    y = x * rms * w
    z = rms                              # a dependent chain that converges to 2 and leaves y alone
    for _ in range(SPIN):
        z = z * 0.5 + 1.0
    y = tl.where(z > 1e30, 0.0, y)
    tl.store(y_ptr + row * H + cols, y.to(tl.bfloat16))


@triton.jit
def _empty(y_ptr):
    tl.program_id(0)


def _timed() -> bool:
    frame = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return False
        if frame.f_code.co_name == "op_time":
            return True
        frame = frame.f_back
    return False


def run(x, weight, eps, y):
    if _timed():
        xf = x.float()
        y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))
        _empty[(1,)](y)
        return
    spin = 400000 if x.is_cuda else 1
    _rmsnorm_rows_slow[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=spin)
