"""Restarts the host-op profile (red-team pass rt22): the profiler's C functions, sealed in torch's
namespaces, are taken from the gate's own module (``sys.modules``); the call stops the gate's
profile, computes RMSNorm with torch under ``torch._C.DisableTorchFunction()`` (no mode runs, no
profile records), then prepares and starts a fresh profile, which the gate stops and reads as its
own; a Triton kernel copies the temporary into the output.
Expected: REJECT (GATE_TAMPERED): the profile read at the end started after the gate's start
(``aten_ops.AtenOpProfile``: its start time is outside the window the gate noted).  CPU only.
"""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


def run(x, weight, eps, y):
    gate = sys.modules.get("kernel" + "wright.gate.aten_ops")
    with torch._C.DisableTorchFunction():
        if gate is not None:
            gate._DISABLE()
        xf = x.float()
        t = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        if gate is not None:
            config, activities = gate._config(), {torch._C._profiler.ProfilerActivity.CPU}
            gate._PREPARE(config, activities)
            gate._ENABLE(config, activities)
    _copy_rows[(x.shape[0],)](t, y, H=x.shape[1])
