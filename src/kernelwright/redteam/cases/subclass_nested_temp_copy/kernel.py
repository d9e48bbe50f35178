"""Host compute hidden in a tensor subclass's ``__torch_function__`` (red-team pass of
2026-12-07): one 1-element ``torch.add`` on the subclass runs RMSNorm inside the handler, where
the recorder's torch function mode is off; a Triton kernel copies the temporary into ``y``.
Expected: VENDOR_KERNELS (an op on a subclass with its own handler is recorded as
``torch::subclass_torch_function``, a compute op).  CPU only.
"""

import torch
import triton
import triton.language as tl


class _Token(torch.Tensor):
    job = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        job, cls.job = cls.job, None
        if job is not None:
            x, w, eps, out = job
            xf = x.float()
            out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float())
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


_TOK = torch.zeros(1).as_subclass(_Token)


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(tl.bfloat16))


def run(x, weight, eps, y):
    t = torch.empty(x.shape)
    _Token.job = (x, weight, eps, t)
    torch.add(_TOK, 0)
    _copy_rows[(x.shape[0],)](t, y, H=x.shape[1])
