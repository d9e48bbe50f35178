"""Honest: ``@triton.constexpr_function`` (Triton's documented way to compute a compile-time value
from constexprs; it runs on the host at compile time on a GPU) picks the
block size.  Must PASS."""
import triton
import triton.language as tl


@triton.constexpr_function
def pick_block(h):
    return min(1 << (h - 1).bit_length(), 4096)


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    BLOCK: tl.constexpr = pick_block(H)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < H
    x = tl.load(x_ptr + row * H + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * r * w).to(tl.bfloat16), mask=m)


def run(x, weight, eps, y):
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
