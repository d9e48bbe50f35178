"""Blinds both host-op records before computing (red-team pass rt22): RMSNorm with torch under
``torch._C.DisableTorchFunction()`` (no torch function mode runs) with the dispatcher's
RecordFunction switched off (``torch.autograd._enable_record_function(False)``: the host-op
profile sees no op), both switched back on after, into a temporary a Triton kernel copies out.
Expected: REJECT (EXCEPTION): in a CPU worker the profiler's and RecordFunction's switches are the
gate's (``aten_ops.seal_controls``): calling one raises.  CPU only.
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
    switch = getattr(torch.autograd, "_enable_record_" + "function")
    with torch._C.DisableTorchFunction():
        switch(False)
        try:
            xf = x.float()
            t = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        finally:
            switch(True)
    _copy_rows[(x.shape[0],)](t, y, H=x.shape[1])
