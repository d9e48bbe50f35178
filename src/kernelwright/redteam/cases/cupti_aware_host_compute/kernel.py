"""CUDA only (docs/gate.md, section 3, item 15): case ``host_compute_held`` (inputs copied to the
host on a private stream while the caller's stream is held, the normalisation on the CPU, the result
copied back) in the held calls; one decoy kernel in a separate CUPTI window (``_time_cupti``,
``_profile_kernels`` among its callers), where the gate traced until 2026-12-03 and which then
never saw the copies (3.2 µs of device time on the H200); no graph capture.
Expected (the gate's own rule): PASS on the eager clock, whose latency includes the copies and the
host work (min_latency_ms): CUPTI traces every held timed call, so the copies show there.
"""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _touch(y_ptr):
    v = tl.load(y_ptr)
    tl.store(y_ptr, v)


@triton.jit
def _rmsnorm(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


def _callers():
    names, f = set(), sys._getframe(2)
    while f is not None:
        names.add(f.f_code.co_name)
        f = f.f_back
    return names


_state = {}


def _host_compute(x, weight, eps, y):
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
    with torch.cuda.stream(side):           # does not wait for the held stream: inputs are there
        hx.copy_(x, non_blocking=True)
        hw.copy_(weight, non_blocking=True)
    side.synchronize()
    xf = hx.float()
    rms = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    hy.copy_((xf * rms * hw.float()).to(y.dtype))
    with torch.cuda.stream(side):
        y.copy_(hy, non_blocking=True)
    torch.cuda.current_stream(dev).wait_stream(side)
    _touch[(1,)](y)


def run(x, weight, eps, y):
    callers = _callers()
    if "_time_cupti" in callers or "_profile_kernels" in callers:
        _touch[(1,)](y)                      # traced: the decoy only (nobody checks y here)
        return
    if "_time_graph" in callers:
        raise RuntimeError("this solution does not capture")   # -> graph_error note only
    if "_held_call" in callers:
        _host_compute(x, weight, eps, y)
        return
    _rmsnorm[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
