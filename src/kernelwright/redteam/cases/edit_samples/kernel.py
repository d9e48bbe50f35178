"""Issue 22, class 3 (the worker edits its own evidence): every call sleeps 20 ms (its honest
cost), then divides every raw timing sample the worker has collected so far by 100, reaching the
harness's TimingSamples through frames.  Before issue 22 the parent computed the latency from the
worker's final lists.  Now each iteration's sample goes to the parent as soon as it is read; the
parent keeps its own and reports the edit.  Expected: GATE_TAMPERED, with the latency the parent
measured (>= 19 ms).
"""

import sys
import time

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


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    time.sleep(0.02)
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name != "op_time":
        f = f.f_back
    out = f.f_locals.get("out") if f is not None else None
    if out is None:
        return
    for name in ("wall_ms", "latency_ms", "eager_latency_ms", "held_wall_ms", "held_span_ms"):
        values = getattr(out, name, None)
        if isinstance(values, list):
            values[:] = [v / 100.0 for v in values]
