"""H8 (CUDA only): launches the kernel on a private non-default stream and returns without making
the caller's stream wait; the kernel spins for milliseconds before writing the correct result.
CUDA events on the caller's stream measure only the launch.  Expected: UNMEASURED_WORK
(device-synchronised wall clock and CUPTI span >> events) or STALE_OUTPUT (a sampled output is
copied before the side stream finishes).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _slow_rmsnorm(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, SPIN: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    acc = tl.zeros([H], dtype=tl.float32)
    for i in range(SPIN):
        acc = acc * 0.5 + tl.load(x_ptr + row * H + (cols + i) % H).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w + acc * 0.0).to(tl.bfloat16))


_streams = []


def run(x, weight, eps, y):
    if not _streams:
        _streams.append(torch.cuda.Stream(device=x.device))
    with torch.cuda.stream(_streams[0]):
        _slow_rmsnorm[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=1 << 18)
