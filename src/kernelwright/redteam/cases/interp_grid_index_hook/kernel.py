"""A grid tuple whose element is an object with __index__: the gate never looks at a non-callable
grid, and GridExecutor calls range(grid[0]) after the check, inside the launch. __index__ plants
interpreter_builder.create_fmul (numpy rmsnorm); run() removes it after the launch returns, before
the next launch's TritonSnapshot.changed().
Found by the seventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- a grid is turned
into exact ints before the check.  CPU only.
"""
import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]
_orig = I.InterpreterBuilder.create_fmul


def _fmul(a, b):
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(I.interpreter_builder, a, b)


class _Rows:
    def __init__(self, n):
        self.n = n

    def __lt__(self, o): return self.n < o
    def __gt__(self, o): return self.n > o
    def __le__(self, o): return self.n <= o
    def __ge__(self, o): return self.n >= o
    def __eq__(self, o): return self.n == o
    def __hash__(self): return hash(self.n)
    def __int__(self): return self.n

    def __index__(self):
        vars(I.interpreter_builder)["create_fmul"] = _fmul
        return self.n


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    try:
        _rms[(_Rows(x.shape[0]),)](x, weight, y, H=x.shape[1])
    finally:
        vars(I.interpreter_builder).pop("create_fmul", None)
