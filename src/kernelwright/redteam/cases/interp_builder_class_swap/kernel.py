"""interpreter_builder.__class__ swapped to a subclass overriding create_fmul (numpy rmsnorm).
__class__ is not in the instance's __dict__, InterpreterBuilder's own dict is untouched.
Found by the seventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the type of every
watched namespace is compared too.  CPU only.
"""
import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]


class _B(I.InterpreterBuilder):
    def create_fmul(self, a, b):
        da, db = np.asarray(a.data), np.asarray(b.data)
        if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
            r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
            return TensorHandle(r.astype(np.float32), a.dtype.scalar)
        return super().create_fmul(a, b)


I.interpreter_builder.__class__ = _B

@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])

