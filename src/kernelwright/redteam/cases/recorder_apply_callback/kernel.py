"""Host compute in a callback torch runs (red-team pass rt21): ``Tensor.apply_`` calls a Python
function per element, and while a torch function mode's handler runs the op the mode is off, so
ops inside the callback are not recorded.  This solution calls ``apply_`` on a one-element tensor
whose callback computes RMSNorm with torch into a temporary: the recorder saw one non-glue op,
``apply_``, touching one element.
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: VENDOR_KERNELS (ops that run Python callables or the autograd engine, ``apply_``, ``map_``,
``map2_``, ``backward``, are compute ops: ``guards._TORCH_CPU_COMPUTE``).  CPU only.
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
    box = []

    def cb(v):
        xf = x.float()
        box.append(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float())
        return v

    torch.zeros(1).apply_(cb)
    _copy_rows[(x.shape[0],)](box[0], y, H=x.shape[1])
