"""The body calls a global that is a jit function when first checked, rebound to numpy afterwards (the check is cached by id).
Found by the fourth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- globals are looked up on every launch.  CPU only.
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
def _helper(xv, wv, eps):
    return xv * wv


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _helper(xv, wv, eps).to(tl.bfloat16))


_READY = []


def run(x, weight, eps, y):
    global _helper
    if not _READY:
        _rms[(1,)](x, weight, torch.empty_like(y), eps, H=x.shape[1])   # checked here, cached
        _helper = _np_rms
        _READY.append(1)
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
