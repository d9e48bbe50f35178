"""Honest: RMSNorm whose sum of squares is a ``tl.reduce`` with a ``@triton.jit`` combine function
(GPU-valid Triton).  The interpreter's generic reduction calls the combine function's raw
``.fn`` (``ReduceOps.generic_reduce``: ``self.combine_fn.fn(...)``), not the rewritten body the
jit-body check read and trusted for the frame check.
Found by the eleventh CPU red-team pass (2026-12-07).  Expected: PASS -- honest Triton: the combine
function's own Python function is read as a body and trusted by the frame check.
"""
import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    ss = tl.reduce(xv * xv, 0, _add)
    rms = 1.0 / tl.sqrt(ss / H + eps)
    tl.store(y_ptr + row * H + cols, (xv * rms * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
