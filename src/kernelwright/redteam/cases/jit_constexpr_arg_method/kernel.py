"""An object passed as a tl.constexpr launch argument; the jit body calls a method of it
(JitBodyCheck allows 'a method of a value the body holds' for any parameter).
Found by the third CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- every launch
argument must be a tensor, a scalar, a dtype, a Triton object or a jit function.  CPU only.
"""
import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _np_rms(xv, wv, eps):
    e = float(np.asarray(eps.handle.data if hasattr(eps, "handle") else eps))
    a = np.asarray(xv.handle.data, dtype=np.float32)
    b = np.asarray(wv.handle.data, dtype=np.float32)
    r = (a / np.sqrt((a * a).mean(-1, keepdims=True) + e) * b).astype(np.float32)
    return tl.core.tensor(TensorHandle(r, tl.float32), xv.type)


class _Ops:
    def norm(self, xv, wv, eps):
        return _np_rms(xv, wv, eps)


_OPS = _Ops()


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, OPS: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, OPS.norm(xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], OPS=_OPS)
