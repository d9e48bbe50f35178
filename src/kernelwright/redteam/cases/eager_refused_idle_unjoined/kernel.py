"""CUDA only (docs/gate.md, section 3, items 8 and 16, combined): the solution chooses which half of
the trial is its headline.  The work is one 40 µs kernel (a spin, then the normalisation).

- Held calls (the traced half): the kernel on the harness's stream, honestly, followed by an
  8-byte non-blocking copy of the output into pinned host memory.  CUPTI sees a device-to-host copy
  in a traced call, so ``ClockTrials.decide`` refuses device time (``device_time_refused``) and
  the headline becomes the eager latency.  Their events, kernel times and spans are honest: every
  PHASE_MISMATCH pair reads ~1.
- Idle calls (the untraced half, which now times the headline): the same kernel on a private
  stream that waits for the caller's and is never joined back.  The events read the call's host
  launch path only; the wall clock sees the 40 µs, but UNMEASURED_WORK's eager bound allows
  2 x the event latency + 50 µs of excess.  The output is complete when the parent copies it (the
  harness synchronises the device first).

An eager headline is now bounded by the traced kernel time of its own trial
(``guards.eager_kernel_verdict``: below 0.8x it is PHASE_MISMATCH), so hidden idle work larger
than about the idle calls' host launch path is rejected.  This case's 40 µs is below that path in
the gate's worker (~80-130 µs for one Triton launch on the H200 VM), which the events time anyway:
the gain left is the kernel's tail past the host's return (launch + 40 µs - host path), and the
headline cannot fall below 0.8 x 40 µs.  Forcing the eager headline works without a copy too: two
held calls that wait for the device (each costs the hold's 50 ms limit) turn holding off for the
rest of the trial (``HoldPolicy``).  Correctness calls and the graph capture run the kernel
honestly on the stream.
Expected: PASS with an eager headline >= 0.032 ms (a narrowed hole); the larger hidden work it
stands for, PHASE_MISMATCH or UNMEASURED_WORK.
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


def _callers():
    names, f = set(), sys._getframe(2)
    while f is not None:
        names.add(f.f_code.co_name)
        f = f.f_back
    return names


_state = {}


def run(x, weight, eps, y):
    callers = _callers()
    if "host" not in _state:                # pinned memory allocated outside any held call
        _state["host"] = torch.empty(8, dtype=y.dtype, pin_memory=True)
        _state["side"] = torch.cuda.Stream(device=x.device)
    if "_idle_call" in callers and not torch.cuda.is_current_stream_capturing():
        side = _state["side"]
        side.wait_stream(torch.cuda.current_stream(x.device))   # after the inputs; never joined back
        with torch.cuda.stream(side):
            _rmsnorm_after_spin[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=SPIN_NS)
        return
    _rmsnorm_after_spin[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=SPIN_NS)
    if "_held_call" in callers:             # a device-to-host copy CUPTI sees: device time refused
        n = min(8, y.shape[-1])
        _state["host"][:n].copy_(y.reshape(-1)[:n], non_blocking=True)
