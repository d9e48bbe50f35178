"""CUDA only, against the device-time clock: the work runs on the CPU while the caller's stream is
held.  The call copies x and the weight to pinned host memory on a private stream (copy engines
run while every SM is held), waits for that stream only, computes RMSNorm with torch on the CPU,
copies y back on the private stream, makes the caller's stream wait, and launches one trivial
Triton kernel of its own so that provenance sees a kernel.  By device time the call would read a
few µs; CUPTI, which traces every held call, sees the device-to-host copy and takes the headline on the eager
clock, which counts the host work.  Expected: PASS with at least the eager cost of the copies
and the host compute (min_latency_ms).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _touch(y_ptr):
    v = tl.load(y_ptr)
    tl.store(y_ptr, v)


_state = {}


def run(x, weight, eps, y):
    dev = x.device
    if "side" not in _state:
        _state["side"] = torch.cuda.Stream(device=dev)
    side = _state["side"]
    key = (tuple(x.shape), tuple(weight.shape))
    if _state.get("key") != key:
        _state.update(key=key, hx=torch.empty(x.shape, dtype=x.dtype, pin_memory=True),
                      hw=torch.empty(weight.shape, dtype=weight.dtype, pin_memory=True),
                      hy=torch.empty(y.shape, dtype=y.dtype, pin_memory=True))
    hx, hw, hy = _state["hx"], _state["hw"], _state["hy"]
    with torch.cuda.stream(side):
        hx.copy_(x, non_blocking=True)
        hw.copy_(weight, non_blocking=True)
    side.synchronize()                      # only the private stream: the held stream is not waited for
    xf = hx.float()
    rms = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    hy.copy_((xf * rms * hw.float()).to(y.dtype))
    with torch.cuda.stream(side):
        y.copy_(hy, non_blocking=True)
    torch.cuda.current_stream(dev).wait_stream(side)
    _touch[(1,)](y)
