"""Honest: the jit body calls jit helpers of a sibling module through the module (``helpers.inv_rms``),
a common way to organise Triton code.  Must PASS."""
import triton
import triton.language as tl

from . import helpers


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    r = helpers.inv_rms(x, H, eps)
    tl.store(y_ptr + row * H + cols, helpers.scale(x, r, w).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
