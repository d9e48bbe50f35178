"""CUDA only, against the device-time clock: the whole call's work is a 200 µs kernel launched on
a private stream that does NOT wait for the caller's stream; the caller's stream then waits for
it.  If the gate's blocking kernel held only the caller's stream, the private stream would run
the kernel while the call is still being enqueued, and the events around the call would see
only the join.  The hold fills every SM, so the kernel cannot start before the release.
Expected: PASS with a device time of at least the kernel's 200 µs (min_latency_ms).
"""

import torch
import triton
import triton.language as tl

SPIN_NS = 200_000


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _rmsnorm_after_spin(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, SPIN: tl.constexpr):
    row = tl.program_id(0)
    t0 = _now()
    while _now() - t0 < SPIN:
        pass
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


_streams = []


def run(x, weight, eps, y):
    if not _streams:
        _streams.append(torch.cuda.Stream(device=x.device))
    side = _streams[0]
    with torch.cuda.stream(side):          # no wait on the caller's stream: inputs are already there
        _rmsnorm_after_spin[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=SPIN_NS)
    torch.cuda.current_stream(x.device).wait_stream(side)
