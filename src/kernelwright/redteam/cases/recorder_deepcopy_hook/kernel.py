"""Host compute in a ``__deepcopy__`` hook run by ``copy.deepcopy`` of a tensor (red-team pass rt22):
``Tensor.__deepcopy__`` is a Python method with its own ``__torch_function__`` dispatch, and while a
torch function mode's handler runs it the mode is off, so the ops of the hooks it runs (it deep-copies
the tensor's ``__dict__``) are not recorded.  This solution deep-copies a one-element tensor whose
``__dict__`` holds an object whose ``__deepcopy__`` computes RMSNorm with torch into a temporary: the
recorder saw one non-glue op, ``deepcopy``, touching one element.
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: VENDOR_KERNELS (a recorded torch function implemented in Python that is not glue is a
compute op: ``guards.host_op_name``).  CPU only.
"""
import copy

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

    class _Hook:
        def __deepcopy__(self, memo):
            xf = x.float()
            box.append(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float())
            return self

    t = torch.zeros(1)
    t.hook = _Hook()
    copy.deepcopy(t)
    _copy_rows[(x.shape[0],)](box[0], y, H=x.shape[1])
