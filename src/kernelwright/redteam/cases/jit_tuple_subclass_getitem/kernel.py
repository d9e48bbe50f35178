"""A tuple subclass holding a jit function; its __getitem__ hands back a numpy function.
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


@triton.jit
def _ident(v, w, e):
    return v


class _Fns(tuple):
    def __getitem__(self, i):
        return _np_rms


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, FNS, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, FNS[0](xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, _Fns((_ident,)), H=x.shape[1])
