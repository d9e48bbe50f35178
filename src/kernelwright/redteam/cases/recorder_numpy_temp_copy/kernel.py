"""Host compute in numpy (red-team pass rt21): ``Tensor.numpy()`` and ``torch.from_numpy`` are glue
to the host-op recorder and numpy's math is no torch op, so RMSNorm computed in numpy on the
inputs' numpy views is not recorded at all.
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: PASS (HOLE, pass rt21, open: docs/gate.md section 3 items 6 and 10, host work the recorder
cannot see combined with a Triton copy out of a temporary).  Fixed: HOST_COMPUTE or VENDOR_KERNELS.
CPU only (on CUDA CUPTI sees the aten kernels).
"""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


def run(x, weight, eps, y):
    xn = x.float().numpy()
    wn = weight.float().numpy()
    r = 1.0 / np.sqrt((xn * xn).mean(-1, keepdims=True) + eps)
    t = torch.from_numpy(np.ascontiguousarray(xn * r * wn, dtype=np.float32))
    _copy_rows[(x.shape[0],)](t, y, H=x.shape[1])
