"""CUDA only (docs/gate.md, section 3, item 8): the whole call (a 40 µs kernel) on a private stream
that waits for the caller's and is never joined back, below UNMEASURED_WORK's 2x + 50 µs wall-clock
slack; a decoy in a separate CUPTI window (``_time_cupti``, ``_profile_kernels``), where the gate
traced until 2026-12-03.  The events read ~2-4 µs.
Expected: PHASE_MISMATCH: CUPTI traces every held timed call, so each one's own records show 40 µs
of kernels against its events.
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
def _spin(ns: tl.constexpr):
    t0 = _now()
    while _now() - t0 < ns:
        pass


@triton.jit
def _rmsnorm_after_spin(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, SPIN: tl.constexpr):
    row = tl.program_id(0)
    _spin(SPIN)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


@triton.jit
def _pad(y_ptr, SPIN: tl.constexpr):
    _spin(SPIN)


@triton.jit
def _touch(y_ptr):
    v = tl.load(y_ptr)
    tl.store(y_ptr, v)


def _callers():
    names, f = set(), sys._getframe(2)
    while f is not None:
        names.add(f.f_code.co_name)
        f = f.f_back
    return names


_streams = []


def run(x, weight, eps, y):
    callers = _callers()
    if "_time_cupti" in callers or "_profile_kernels" in callers:
        _touch[(1,)](y)
        return
    if "_time_graph" in callers or torch.cuda.is_current_stream_capturing():
        raise RuntimeError("this solution does not capture")
    if not _streams:
        _streams.append(torch.cuda.Stream(device=x.device))
    side = _streams[0]
    here = torch.cuda.current_stream(x.device)
    side.wait_stream(here)                  # ordered after the inputs (and the hold), never joined back
    with torch.cuda.stream(side):
        _rmsnorm_after_spin[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=SPIN_NS)
    # a few us on the harness stream, so that the headline stays above the roofline floor
    floor_ns = int(2 * x.numel() * 2 / 3.0e12 * 1e9) + 1500
    _pad[(1,)](y, SPIN=floor_ns - floor_ns % 500)
