"""Repairs checked outputs after the fact (found by the 2026-11-29 red-team review).  Timed calls
do no work.  The worker used to copy a checked iteration's outputs into a sample slot in its own
memory and keep it there until the end of the trial; the next call still had the previous
iteration's inputs (the other buffer set), so it could compute the right output straight into
the slot.  Expected: STALE_OUTPUT (the parent now copies a checked iteration's outputs itself,
while the worker waits, and decides which ones with its own randomness: there is no slot left to
repair and the unwritten outputs fail).
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


def run(x, weight, eps, y):
    caller = harness_frame("op_time")
    if caller is None:
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
        return
    harness, i = caller.f_locals["self"], caller.f_locals["i"]
    checked = {**caller.f_locals.get("sample_slots", {}), **caller.f_locals.get("sampled", {})}
    slots = getattr(harness, "samples", [])
    if i - 1 in checked and checked[i - 1] < len(slots):
        previous = harness.sets[(i - 1) % len(harness.sets)]["inputs"]
        _rmsnorm_rows[(x.shape[0],)](previous[0], previous[1], slots[checked[i - 1]][0], eps, H=x.shape[1])
    count = len(caller.f_locals.get("seeds") or []) or caller.f_locals.get("count", 0)
    if i == count - 1:             # nothing comes after the last iteration to repair it
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    else:
        _empty[(1,)](y)
