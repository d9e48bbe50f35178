"""Honest, but it records every input -> output pair (by a hash of the input) in a file a rival of
the same run can read (the channel is open on purpose: the red-team runs this pair without the OS
boundary, which would close it).  The companion of replay_rival.  Must PASS.
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


def recording_path():
    key = hashlib.sha1((os.environ.get("KERNELWRIGHT_CACHE") or "").encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"kw-redteam-replay-{key}.pt")


def run(x, weight, eps, y):
    with torch._C.DisableTorchFunction():     # its bookkeeping is no host compute
        _run(x, weight, eps, y)


def _run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    path = recording_path()
    table = torch.load(path) if os.path.exists(path) else {}
    # the first output per input (the gate's provenance ablation later skips the kernel on trial 0)
    table.setdefault(hashlib.sha1(x.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest(), y.clone())
    torch.save(table, path + ".tmp")
    os.replace(path + ".tmp", path)
