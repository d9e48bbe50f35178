"""Host compute inside the interpreter's launch window (found by the 2026-12-06 red-team pass).

An honest RMSNorm kernel, with a Triton pre-run hook that computes the outputs with torch, launched
on an empty grid: the hook runs inside ``InterpretedFunction.run`` (the counted launch), where the
CPU host-op recorder used to skip every op as the interpreter's own, and no program runs.  Expected:
BUILD_FAILED (a launch with pre-run hooks is refused: ``interpreted.JitBodyCheck``), else
VENDOR_KERNELS (the recorder keeps ops whose calling frame is not Triton's code: the hook's
rsqrt/mean/mul touch as many elements as the outputs) or HOST_COMPUTE (the provenance ablation
drops Triton's stores; the hook's writes still land).  CPU only: on CUDA the
hook's torch ops are aten kernels in CUPTI's records (case ``vendor_library``).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * inv_rms * w).to(tl.bfloat16))


def _hook(x_ptr, w_ptr, y_ptr, eps, **_):
    xf = x_ptr.float()
    y_ptr.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w_ptr.float()).to(y_ptr.dtype))


_rmsnorm_row.add_pre_run_hook(_hook)


def run(x, weight, eps, y):
    _rmsnorm_row[(0,)](x, weight, y, eps, H=x.shape[1])
