"""The documented open class, demonstrated (red-team pass rt21): RMSNorm with torch under
``torch._C.DisableTorchFunction()``, where no torch function mode runs (case ``hidden_host_compute``
writes the output itself and the ablation catches it), but into a temporary.
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: PASS (HOLE, pass rt21, open: docs/gate.md section 3 items 6 and 10, host work the recorder
cannot see combined with a Triton copy out of a temporary).  Fixed: HOST_COMPUTE or VENDOR_KERNELS.
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
