"""A constexpr parameter whose default is a numpy function, never passed at launch.
Found by the fourth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the kernel's defaults are checked like its arguments.  CPU only.
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
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, OP: tl.constexpr = _np_rms):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, OP(xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
