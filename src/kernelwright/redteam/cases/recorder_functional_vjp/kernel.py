"""Host compute in a custom autograd backward run by ``torch.autograd.functional.vjp`` (red-team pass
rt22): ``vjp`` runs the function with the mode on, then calls ``torch.autograd.grad``, a Python
function with its own ``__torch_function__`` dispatch: while a torch function mode's handler runs it
the mode is off, so the ops of the backward it runs are not recorded.  This solution takes
``vjp(F.apply, torch.zeros(1), torch.ones(1))`` of an ``autograd.Function`` whose ``backward``
computes RMSNorm with torch into a temporary: the recorder saw glue ops and one non-glue op,
``grad``, touching one element.
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: VENDOR_KERNELS (a recorded torch function implemented in Python that is not glue is a
compute op: ``guards.host_op_name``).  CPU only.
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

    class _Norm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v.clone()

        @staticmethod
        def backward(ctx, g):
            xf = x.float()
            box.append(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float())
            return g

    torch.autograd.functional.vjp(_Norm.apply, torch.zeros(1), torch.ones(1))
    _copy_rows[(x.shape[0],)](box[0], y, H=x.shape[1])
