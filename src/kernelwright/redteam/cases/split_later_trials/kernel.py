"""CUDA only (docs/gate.md, section 3, item 16): 110 µs + 90 µs of kernels on the caller's stream
while CUPTI is attached (the tracer's module state, no frames); once it has seen CUPTI attached
for its shape, the 90 µs part moves to a private stream that waits for the first and is never
joined whenever CUPTI is not attached.  Under the gate's separate CUPTI windows (until 2026-12-03)
that was every later trial's timed calls: 0.55x of trial 0 on the H200 (0.1127 against 0.2055 ms),
caught only by each trial's own window.  CUPTI now traces every held timed call, so the held calls
are honest and the unjoined work lands in the untraced eager calls.
Expected: PASS with the honest ~0.2 ms of device time (min_latency_ms).
"""

import sys

import torch
import triton
import triton.language as tl

A_NS, B_NS = 110_000, 90_000


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _phase_a(x_ptr, SPIN: tl.constexpr):
    t0 = _now()
    while _now() - t0 < SPIN:
        pass


@triton.jit
def _phase_b(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, SPIN: tl.constexpr):
    row = tl.program_id(0)
    t0 = _now()
    while _now() - t0 < SPIN:
        pass
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


_s = {"traced": set()}


def _window_open() -> bool:
    t = sys.modules.get("kernelwright.gate.timing")
    tracer = getattr(t, "_TRACER", None) if t is not None else None
    return bool(tracer is not None and getattr(tracer, "_registered", False) and
                getattr(tracer, "detaches", False))


def run(x, weight, eps, y):
    if _window_open():
        _s["traced"].add(tuple(x.shape))
    cheat = tuple(x.shape) in _s["traced"] and not _window_open() and not torch.cuda.is_current_stream_capturing()
    _phase_a[(x.shape[0],)](x, SPIN=A_NS)
    if not cheat:
        _phase_b[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=B_NS)
        return
    if "side" not in _s:
        _s.update(side=torch.cuda.Stream(device=x.device), ev=torch.cuda.Event())
    side, ev = _s["side"], _s["ev"]
    ev.record(torch.cuda.current_stream(x.device))
    side.wait_event(ev)
    with torch.cuda.stream(side):
        _phase_b[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=B_NS)
