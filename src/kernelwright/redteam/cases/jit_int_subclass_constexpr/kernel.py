"""An int subclass passed as a constexpr argument; its __mul__ computes with numpy.
Found by the fourth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- launch arguments are checked by exact type.  CPU only.
"""

import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import TensorHandle, InterpretedFunction


def _np_rms(xv, wv, eps):
    a = np.asarray(xv.handle.data, dtype=np.float32)
    b = np.asarray(wv.handle.data, dtype=np.float32)
    e = float(np.asarray(eps.handle.data).reshape(-1)[0]) if hasattr(eps, "handle") else float(eps)
    r = (a / np.sqrt((a * a).mean(-1, keepdims=True) + e) * b).astype(np.float32)
    return tl.core.tensor(TensorHandle(r, tl.float32), xv.type)


class _One(int):
    def __mul__(self, other):
        if isinstance(other, tuple):
            return _np_rms(*other)
        return int(self) * other


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, S: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (S * (xv, wv, eps)).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], S=_One(1))
