"""numpy_in_jit_store with the helper's __module__ set to 'triton.language': JitBodyCheck accepts any
callable whose __module__ names triton (SAFE_MODULES).
Found by the third CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- Triton's own is
decided by identity (``interpreted.TritonSnapshot``), never by ``__module__``.  CPU only.
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


_np_rms.__module__ = "triton.language.extra"


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _np_rms(xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
