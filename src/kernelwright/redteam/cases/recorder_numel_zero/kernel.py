"""Host compute the host-op recorder counts as touching nothing (red-team pass rt21): on the CPU the
gate records the torch ops a call runs with the largest element count among their tensors, and
ops that touch fewer elements than half the outputs pass as glue.  This solution views its inputs
as a plain tensor subclass (no ``__torch_function__`` of its own, so its ops are recorded under
their own names) whose ``numel`` returns 0, computes RMSNorm on them with torch into a temporary,
and copies that into the output with a one-program Triton kernel (the ablation call, whose Triton
stores are dropped, leaves the outputs wrong like an honest solution's).  A recorder that asked
the tensor for its size would record every op at 0 elements.
Expected: VENDOR_KERNELS (``worker.HostOpRecorder`` counts elements with ``TensorBase.numel``, which
a subclass's Python override does not replace).  CPU only (on CUDA CUPTI sees the aten kernels).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, N: tl.constexpr):
    o = tl.arange(0, N)
    m = o < n
    tl.store(dst + o, tl.load(src + o, mask=m), mask=m)


class _Small(torch.Tensor):
    def numel(self):
        return 0


def run(x, weight, eps, y):
    xs, ws = x.as_subclass(_Small), weight.as_subclass(_Small)
    xf = xs.float()
    tmp = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * ws.float()).to(y.dtype)
    tmp = tmp.as_subclass(torch.Tensor)
    n = torch.Tensor.numel(tmp)
    _copy[(1,)](tmp, y, n, N=triton.next_power_of_2(n))
