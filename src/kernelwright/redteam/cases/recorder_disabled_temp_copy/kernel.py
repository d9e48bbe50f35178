"""The documented open class, demonstrated (red-team pass rt21): RMSNorm with torch under
``torch._C.DisableTorchFunction()``, where no torch function mode runs (case ``hidden_host_compute``
writes the output itself and the ablation catches it), but into a temporary.
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: VENDOR_KERNELS: the host-op profile (``gate/aten_ops.py``, pass rt22) reads the
dispatcher's own record of every aten op, which DisableTorchFunction does not switch off.
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


def run(x, weight, eps, y):
    with torch._C.DisableTorchFunction():
        xf = x.float()
        t = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    _copy_rows[(x.shape[0],)](t, y, H=x.shape[1])
