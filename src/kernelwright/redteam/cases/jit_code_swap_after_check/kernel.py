"""The rewritten function's __code__ is replaced after its first (checked, cached) launch.
Found by the fourth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the bytecode is read on every launch.  CPU only.
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
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def _evil(x_ptr, w_ptr, y_ptr, eps, H):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _np_rms(xv, wv, eps).to(tl.bfloat16))


_READY = []


def run(x, weight, eps, y):
    if not _READY:
        _rms[(1,)](x, weight, torch.empty_like(y), eps, H=x.shape[1])   # checked here, cached
        _rms.rewrite().__code__ = _evil.__code__
        _READY.append(1)
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
