"""Precomputes the outputs of every timed iteration during the warm-up (found by the 2026-11-29
red-team review).  The ``time`` message used to carry the input spec of every iteration of the
trial; the first call read them from the worker's frame, generated those inputs and computed
their outputs, and the timed calls only copied.  Expected: STALE_OUTPUT (the worker now asks the
parent for each iteration's spec just before it: there is no list to read, so this solution has
nothing to copy and leaves the outputs unwritten).
"""


import triton
import triton.language as tl

from kernelwright.redteam.frames import harness_frame


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


@triton.jit
def _empty(y_ptr):
    tl.program_id(0)


_ready = {}


def _precompute(caller):
    from kernelwright.gate import fresh

    msg = caller.f_locals["msg"]
    builtin, workload = caller.f_locals["builtin"], caller.f_locals["workload"]
    for i, spec in enumerate(msg["seeds"]):
        inputs = fresh.expand(builtin, workload, spec, caller.f_locals["self"].device)
        out = inputs["x"].new_empty(inputs["x"].shape)
        _rmsnorm_rows[(out.shape[0],)](inputs["x"], inputs["weight"], out, inputs["eps"], H=out.shape[1])
        _ready[i] = out


def run(x, weight, eps, y):
    caller = harness_frame("op_time")
    if caller is None:
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
        return
    i = caller.f_locals["i"]
    if i == 0 and "seeds" in caller.f_locals.get("msg", {}):
        _precompute(caller)
    if i in _ready:
        y.copy_(_ready[i])
    _empty[(1,)](y)
