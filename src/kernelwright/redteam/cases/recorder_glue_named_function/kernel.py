"""Host compute behind a torch-function dispatch of the solution's own callable (red-team pass
rt21): ``torch.overrides.handle_torch_function(fn, (x,), ...)`` calls the active mode's
``__torch_function__`` with ``func=fn``; the host-op recorder names the record after
``fn.__name__`` and runs ``fn`` with the mode off.  ``fn`` is named ``clone`` (glue), so the record
is one glue op and the RMSNorm inside it is not recorded.
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: VENDOR_KERNELS: the host-op profile (``gate/aten_ops.py``, pass rt22) records the aten
ops run inside the glue-named function.
CPU only (on CUDA CUPTI sees the aten kernels).
A recorder that named only torch's own callables (by identity) and re-entered itself for a
foreign one would close this means.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


def _work(x, weight, eps):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


_work.__name__ = "clone"


def run(x, weight, eps, y):
    t = torch.overrides.handle_torch_function(_work, (x,), x, weight, eps)
    _copy_rows[(x.shape[0],)](t, y, H=x.shape[1])
