"""CUDA only, against the device-time clock: the first call makes a private stream the current
stream for good (``torch.cuda.set_stream``, never restored) and every call runs its 200 µs kernel
on whatever stream is current.  A harness that recorded its events on its own stream, without
checking which stream the call left current, would time an empty span.
Expected: STREAM_SWITCHED (the call returned with another stream current than it was given).
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
    torch.cuda.set_stream(_streams[0])   # and never back
    _rmsnorm_after_spin[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=SPIN_NS)
