"""A constexpr_function whose ``fn`` is replaced on the instance by a ``functools.partial`` of a
numpy helper: the check read ``fn`` only when it was a plain function and otherwise trusted the
instance because its class is Triton's.  Found by the fifth CPU red-team pass (2026-12-07).
Expected: BUILD_FAILED -- a constexpr_function is accepted only when its ``fn`` (read with
``vars()``) is a plain function whose body passes a kernel's rules.  CPU only.
"""

import functools

import numpy as np
import triton
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _np_rms(xv, wv, eps):
    a = np.asarray(xv.handle.data, dtype=np.float32)
    b = np.asarray(wv.handle.data, dtype=np.float32)
    e = float(np.asarray(eps.handle.data).reshape(-1)[0]) if hasattr(eps, "handle") else float(eps)
    r = (a / np.sqrt((a * a).mean(-1, keepdims=True) + e) * b).astype(np.float32)
    return tl.core.tensor(TensorHandle(r, tl.float32), xv.type)


@triton.constexpr_function
def _pick(xv, wv, eps):
    return xv


_pick.fn = functools.partial(_np_rms)


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _pick(xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
