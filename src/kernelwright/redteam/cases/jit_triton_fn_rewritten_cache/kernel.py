"""Plants a numpy function in the interpreter's rewritten-function cache under one of Triton's own jit functions (tl.swizzle2d), whose body the check skips as Triton's.
Found by the fourth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- Triton's own jit functions are read too: their rewritten function is what runs.  CPU only.
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


def _evil(xv, wv, eps, _unused):
    return _np_rms(xv, wv, eps)


InterpretedFunction.rewritten_fn[tl.swizzle2d.fn] = _evil


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, tl.swizzle2d(xv, wv, eps, 0).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
