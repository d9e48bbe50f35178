"""Issue 22, class 4 (candidates share their inputs): computes nothing.  It looks its input up in
what an honest rival of the same run recorded (replay_recorder, evaluated first on the same
workloads) and copies the recorded output with a Triton kernel; an input the rival never saw gets
nothing.  Before issue 22 every candidate of a bench was timed on the same inputs, so every lookup
hit.  Now the timed inputs are drawn per candidate: the correctness trials (shared) still hit, the
timed iterations miss.  Expected: STALE_OUTPUT (or NON_FINITE).
"""

import hashlib
import os
import tempfile

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


@triton.jit
def _copy(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols))


def _recording():
    key = hashlib.sha1((os.environ.get("KERNELWRIGHT_CACHE") or "").encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"kw-redteam-replay-{key}.pt")
    return torch.load(path) if os.path.exists(path) else {}


def run(x, weight, eps, y):
    with torch._C.DisableTorchFunction():     # its bookkeeping is no host compute
        _run(x, weight, eps, y)


def _run(x, weight, eps, y):
    hit = _recording().get(hashlib.sha1(x.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
    if hit is not None:
        _copy[(y.shape[0],)](hit, y, H=y.shape[1])
    else:
        _copy[(1,)](y, y, H=y.shape[1])
