"""Issue 22, class 3 (the worker edits its own evidence): in its timed calls it computes the right
output, then zeroes its input (using the input as scratch), and clears the worker's record of which
spec each buffer set holds (Harness.last_specs), which the parent used to trust: with the record
empty the input-mutation check after the timed loop checked nothing.  Now the parent derives each
set's spec from what it served.  Expected: INPUT_MUTATED.
"""

import sys

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
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name != "op_time":
        f = f.f_back
    if f is None:
        return
    x.zero_()
    harness = f.f_locals.get("self")
    specs = getattr(harness, "last_specs", None)
    if isinstance(specs, dict):
        specs.clear()
