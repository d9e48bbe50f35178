"""CUDA only, against the device-time clock: the blocking kernel takes every SM; would a copy on a
private stream run while the caller's stream is held?  Each call copies its input (and 256 MiB
of padding, ~0.13 ms) device to device on a private stream that does not wait for the caller's,
busy-waits on the host for 1 ms while the caller's stream is still held, joins the private stream
and normalises from the copy.
Expected: PASS with a latency of at least the padding's copy (min_latency_ms): on the H200 the
copy ran after the release (device time 0.133 ms); one that starts early is seen by CUPTI and
refuses device time, and the eager latency includes it.
"""

import time

import torch
import triton
import triton.language as tl

PAD_BYTES = 256 << 20
HOST_WAIT_S = 1e-3


@triton.jit
def _rmsnorm(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


_state = {}


def run(x, weight, eps, y):
    if "side" not in _state:
        _state["side"] = torch.cuda.Stream(device=x.device)
        _state["pad"] = (torch.empty(PAD_BYTES, dtype=torch.uint8, device=x.device),
                         torch.empty(PAD_BYTES, dtype=torch.uint8, device=x.device))
    if _state.get("shape") != tuple(x.shape):
        _state["shape"], _state["copy"] = tuple(x.shape), torch.empty_like(x)
    side, (src, dst), copy = _state["side"], _state["pad"], _state["copy"]
    with torch.cuda.stream(side):          # no wait on the caller's stream: the inputs are there
        dst.copy_(src)
        copy.copy_(x)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < HOST_WAIT_S:
        pass
    torch.cuda.current_stream(x.device).wait_stream(side)
    _rmsnorm[(x.shape[0],)](copy, weight, y, eps, H=x.shape[1])
