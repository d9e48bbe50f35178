"""Recognises the CPU provenance ablation call by its inputs alone (red-team pass of 2026-12-07):
the ablation refills trial 0's inputs, which the solution has seen twice before (the correctness
call and the determinism re-run), so the third sighting of an input fingerprint is the ablation;
that call leaves ``y`` unwritten, every other one computes RMSNorm with torch under
``torch._C.DisableTorchFunction()`` (unrecorded) straight into ``y``.  Expected: VENDOR_KERNELS (the host-op profile records the torch work)
or HOST_COMPUTE (the ablation call runs on inputs of its own, drawn per candidate from the run's
nonce, so no fingerprint repeats, and with the set-0 correctness calls' poison).  CPU only.
"""

import hashlib

import torch
import triton
import triton.language as tl

_SEEN = {}


def _compute(x, w, eps, out):
    key = hashlib.sha1(x.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
    _SEEN[key] = _SEEN.get(key, 0) + 1
    if _SEEN[key] < 3:
        xf = x.float()
        out.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(out.dtype))


@triton.jit
def _empty(y_ptr):
    tl.program_id(0)


def run(x, weight, eps, y):
    with torch._C.DisableTorchFunction():
        _compute(x, weight, eps, y)
    _empty[(1,)](y)
