"""Host compute in TorchScript (red-team pass rt21): a ``torch.jit.script`` function runs its aten
ops in the TorchScript interpreter, which never calls ``__torch_function__``, so the host-op
recorder sees nothing of it.
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: VENDOR_KERNELS: the host-op profile (``gate/aten_ops.py``, pass rt22) records the aten
ops the TorchScript interpreter runs.
CPU only (on CUDA CUPTI sees the aten kernels).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


@torch.jit.script
def _rms(x: torch.Tensor, w: torch.Tensor, eps: float):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def run(x, weight, eps, y):
    t = _rms(x, weight, float(eps))
    _copy_rows[(x.shape[0],)](t, y, H=x.shape[1])
