"""Asks the parent for the specs of iterations still to come, under another phase's name, then
precomputes their outputs (found by the 2026-12-03 red-team pass, rt3).  The timing exchange
served a ``profile`` spec (``specs[warmup + i]``, any ``i``) and a ``graph`` spec (trial 0's held
timed iterations since ``paired_graph_seeds``) at any time, not only after the timed loop, so the
first warm-up call could learn every timed spec of the trial, the twin's included, compute all
the outputs and leave the timed calls a copy; every sampled check then passes.  Expected:
GATE_TAMPERED (a graph or profile spec asked before the timed loop finished is out of step with
the parent's exchange; the answer carries no spec, so this solution then works honestly).
"""

import sys

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


@triton.jit
def _copy_rows(src_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(y_ptr + row * H + cols, tl.load(src_ptr + row * H + cols))


_ready = {}


def _precompute(caller):
    from kernelwright.gate import fresh

    harness, msg = caller.f_locals["self"], caller.f_locals["msg"]
    builtin, workload = caller.f_locals["builtin"], caller.f_locals["workload"]
    count, warmup = msg["iterations"], msg["warmup"]
    for i in range(count):
        try:   # profile spec k is specs[(warmup + k) % count]
            spec = harness._spec("profile", (i - warmup) % count)
        except Exception:
            return
        inputs = fresh.expand(builtin, workload, spec, harness.device)
        out = inputs["x"].new_empty(inputs["x"].shape)
        _rmsnorm_rows[(out.shape[0],)](inputs["x"], inputs["weight"], out, inputs["eps"], H=out.shape[1])
        _ready[(id(msg), i)] = out


def _op_time_frame():
    """The harness's ``op_time`` frame above this call, or None (the depth differs by device: on
    CUDA the call passes through the stream pin)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "op_time":
        frame = frame.f_back
    return frame


def run(x, weight, eps, y):
    caller = _op_time_frame()
    if caller is None or "i" not in caller.f_locals:
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
        return
    i, msg = caller.f_locals["i"], caller.f_locals["msg"]
    if i == 0:
        _ready.clear()
        _precompute(caller)
    ready = _ready.get((id(msg), i))
    if ready is None:
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    else:
        _copy_rows[(y.shape[0],)](ready, y, H=y.shape[1])
