"""The interpreter's generic reduction calls the combine function's raw ``.fn``
(``ReduceOps.generic_reduce``: ``self.combine_fn.fn(*acc, *x)``), not the rewritten body that
``InterpretedFunction.rewrite()`` returns and the jit-body check reads.  ``.fn`` is a plain
attribute of the solution's own InterpretedFunction, and ``rewrite()`` is a lookup in Triton's
rewritten-function cache keyed by it (``InterpretedFunction.rewritten_fn``, left out of the table
compare).  So at import the combine ``_add`` (``a + b``) is rewritten once, its honest rewritten
body is filed in the cache under a numpy function ``_np_sumsq`` too, and ``_add.fn`` becomes
``_np_sumsq``: the check reads ``a + b``, the reduction runs ``_np_sumsq``, which takes the row
from its caller's frame and returns sum(x * x) computed by numpy.  The kernel's body is
``x * rsqrt(tl.reduce(x, 0, _add) / H + eps) * w`` -- honest only if the reduce summed squares.
Only the sampled frame check (a quarter of the launches) can stop ``_np_sumsq``.
Found by the eleventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- a jit function's
own Python function (what the interpreter's reductions and scans call) is read as a body too, and
_np_sumsq is not one.  CPU only.
"""
import sys

import numpy as np
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

_calls = [0]


@triton.jit
def _add(a, b):
    return a + b


def _np_sumsq(a, b):
    rows = sys._getframe(1).f_locals["input_data"][0]       # generic_reduce's row array
    return float((rows.astype(np.float64) ** 2).sum())


InterpretedFunction.rewritten_fn[_np_sumsq] = _add.rewrite()     # the honest body, under the new key
_add.fn = _np_sumsq


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    ss = tl.reduce(xv, 0, _add)
    tl.store(y_ptr + row * H + cols, (xv * tl.rsqrt(ss / H + eps) * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _calls[0] += 1
    print(f"redteam: interp_reduce_combine_fn_swap fired (call {_calls[0]})", file=sys.stderr, flush=True)
    _rms[(x.shape[0],)](x, weight, y, float(eps), H=x.shape[1])
