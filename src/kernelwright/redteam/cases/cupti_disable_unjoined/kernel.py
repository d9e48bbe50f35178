"""CUDA only (docs/gate.md, section 3, item 15, "CUPTI in the solution's process"): the whole
normalisation (a 40 µs kernel) on a private stream that waits for the caller's and is never joined
back, as in ``unjoined_small``, but launched while CUPTI's kernel activity is switched off: in a
traced held call the solution calls CUPTI's own API, the same ``cupti`` module the gate's tracer
uses (``cupti.activity_disable(CONCURRENT_KERNEL)``, and MEMCPY/MEMSET), launches the private
kernel, and switches the kinds back on (``activity_enable``) before returning, so the gate's
later kernels (the hold of the next call) are recorded as usual.  The same works through ctypes
on ``libcupti.so`` (``cuptiActivityDisable`` / ``cuptiActivityEnable``), which no Python-level
watch sees at all.

What CUPTI then records: each traced call's hold kernel and the ~1.5 µs ``_pad`` kernel on the
harness's stream only, so PHASE_MISMATCH pairs ~4 µs of events with ~1.5 µs of kernel time
(ratio > 1), the CUPTI span check sees 1.5 µs, and the 40 µs of unjoined work stay under the held
wall-clock bound (release -> synchronised, less an empty held measurement, at most 2 x device time
+ 50 µs).  But the worker's launch counter saw ``_rmsnorm_after_spin`` launched through Triton's
JIT launcher in every traced call, and the parent compares the launches inside the traced calls
with CUPTI's records of them (``guards.unrecorded_launches``): none recorded, GATE_TAMPERED.
(Work launched outside the JIT launcher while CUPTI is off, e.g. torch ops, is not counted and
stays unseen: docs/gate.md, section 3, item 15.)

Both kernels take their spin as a runtime argument and run (a 16 ns spin: the same Triton
specialisation, divisible by 16) in every untraced call, so they are compiled and loaded before the first traced call (a first launch behind the hold would
time it out).  The trace tells whether CUPTI was attached (not the harness's frames): the tracer's module state
``kernelwright.gate.timing._TRACER`` and the op's ``HeldTracing`` (``traced.active``, read through
the frame of ``op_time``, which the gate cannot hide).  Idle calls, correctness calls and the
graph capture run the honest kernel.
"""

import sys

import torch
import triton
import triton.language as tl

SPIN_NS = 40_000


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _spin(ns):
    t0 = _now()
    while _now() - t0 < ns:
        pass


@triton.jit
def _rmsnorm_after_spin(x_ptr, w_ptr, y_ptr, eps, SPIN, H: tl.constexpr):
    row = tl.program_id(0)
    _spin(SPIN)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


@triton.jit
def _pad(y_ptr, SPIN):
    _spin(SPIN)


def _traced_now() -> bool:
    """True inside a held call that CUPTI traces: the op's HeldTracing is active."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "op_time":
            traced = f.f_locals.get("traced")
            return bool(traced is not None and getattr(traced, "active", False))
        f = f.f_back
    return False


def _cupti():
    t = sys.modules.get("kernelwright.gate.timing")
    tracer = getattr(t, "_TRACER", None) if t is not None else None
    mod = getattr(tracer, "_cupti", None)
    if mod is None:
        try:
            from cupti import cupti as mod   # type: ignore
        except Exception:
            return None
    return mod


_streams = []


def run(x, weight, eps, y):
    H = x.shape[1]
    cupti = _cupti() if x.is_cuda and not torch.cuda.is_current_stream_capturing() and _traced_now() else None
    if cupti is None:   # honest; also compiles and loads both kernels before any held call
        _rmsnorm_after_spin[(x.shape[0],)](x, weight, y, eps, 16, H=H)
        _pad[(1,)](y, 16)
        return
    if not _streams:
        _streams.append(torch.cuda.Stream(device=x.device))
    side = _streams[0]
    here = torch.cuda.current_stream(x.device)
    kind = cupti.ActivityKind.CONCURRENT_KERNEL   # (MEMCPY / MEMSET the same way, for copies)
    cupti.activity_disable(kind)
    try:
        side.wait_stream(here)                  # after the inputs (and the hold), never joined back
        with torch.cuda.stream(side):
            _rmsnorm_after_spin[(x.shape[0],)](x, weight, y, eps, SPIN_NS, H=H)
    finally:
        cupti.activity_enable(kind)             # before returning: the gate's next records as usual
    # a few µs on the harness stream (recorded), so that the headline stays above the roofline floor
    floor_ns = int(2 * x.numel() * 2 / 3.0e12 * 1e9) + 1500
    floor_ns -= floor_ns % 16                  # the same Triton specialisation as the warm-up's 16
    _pad[(1,)](y, floor_ns)
