"""Computes when the gate's profile object dies (red-team pass rt22c): the call launches a Triton
kernel that copies ``x`` into ``y`` (a decoy) and reads one element back: if the store landed,
this is not the ablation call, and the call finds the gate's ``aten_ops.AtenOpProfile`` instance
(``gc.get_objects()``, a read: the collector stays off) and puts a ``weakref.finalize`` on it.
The ``with`` statement in ``Harness._checked_call`` holds the only reference; when the profile's
``__exit__`` has stopped the profiler and returned, the object is freed by reference counting (no
collector), and the finalizer writes RMSNorm into ``y`` with torch under ``DisableTorchFunction``,
in the harness's own code, before the reply takes the outputs to the parent.  The torch function
mode exited before, the profiler is off: neither record sees the work; no cycle, no gc switch, no
thread, no harness attribute changed.  In the ablation call nothing is armed and the outputs hold
the decoy.  A call without the profiler (a timed call) computes into ``y`` directly.
Expected: TOLERANCE: the worker keeps every host-op profile and recorder alive for its life
(``Harness._recording``), so the finalizer never runs and the outputs stay the decoy's.  CPU only (on CUDA CUPTI sees the aten kernels).
"""
import gc
import weakref

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


def _rmsnorm_into(x, weight, eps, y):
    with torch._C.DisableTorchFunction():
        xf = x.float()
        y.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float())


def _gate_profile():
    for obj in gc.get_objects():
        if type(obj).__name__ == "AtenOpProfile":
            return obj
    return None


def run(x, weight, eps, y):
    _copy_rows[(x.shape[0],)](x, y, H=x.shape[1])
    if not torch._C._autograd._profiler_enabled():
        _rmsnorm_into(x, weight, eps, y)      # an unrecorded (timed) call: nothing watches
        return
    with torch._C.DisableTorchFunction():
        landed = bool(torch.equal(y[:1, :1], x[:1, :1]))
    prof = _gate_profile()
    if landed and prof is not None:
        weakref.finalize(prof, _rmsnorm_into, x, weight, eps, y)
