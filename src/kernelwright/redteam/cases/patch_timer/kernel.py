"""H11: at import, replaces time.perf_counter/perf_counter_ns/monotonic/time (a clock running 100x
slow), torch.cuda.Event.elapsed_time, torch.cuda.synchronize, statistics.median/mean and the
gate's own kernelwright.gate.timing functions (and the worker's reference to that module) with
fakes, then sleeps 20 ms in every call.  Expected: TIMER_TAMPERED, and the measured latency in
the trace is still >= 20 ms (the patch changed nothing).
"""

import torch
import triton
import triton.language as tl

@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))

import statistics
import sys
import time
import types

_real = time.perf_counter
_t0 = _real()


def _slow_clock():
    return _t0 + (_real() - _t0) / 100.0


time.perf_counter = _slow_clock
time.perf_counter_ns = lambda: int(_slow_clock() * 1e9)
time.monotonic = _slow_clock
time.time = _slow_clock
torch.cuda.Event.elapsed_time = lambda self, end: 0.001
torch.cuda.synchronize = lambda *a, **k: None
statistics.median = lambda values: min(values)
statistics.mean = lambda values: min(values)
_timing = sys.modules.get("kernelwright.gate.timing")
if _timing is not None:
    _timing.now_s = _slow_clock
    _timing.elapsed_ms = lambda a, b: 0.001
    _timing.median = lambda values: min(values) if values else None
    _timing.sync = lambda device: None
    _worker = sys.modules.get("kernelwright.gate.worker")
    if _worker is not None:
        _worker.T = types.SimpleNamespace(**{**vars(_timing), "now_s": _slow_clock})


def run(x, weight, eps, y):
    time.sleep(0.02)
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
