"""triton.runtime.interpreter._implicit_cvt (a module-level function of Triton's, called by the
launcher on every argument) replaced after the snapshot: for the scale argument it returns a block
tensor holding the whole rmsnorm output computed in numpy; the kernel only stores it.  The ablation
drops that store, so it reads as Triton's write.
Found by the sixth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- a callable of a Triton
module replaced since the snapshot.  CPU only.
"""
import numpy as np
import torch
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_orig = I._implicit_cvt
_PENDING = {}


def _cvt(arg):
    if isinstance(arg, int) and arg == 77 and "y" in _PENDING:
        x, w, eps = _PENDING.pop("y")
        r = (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w).reshape(-1)
        P = 1 << max(0, (r.size - 1).bit_length())
        r = np.concatenate([r, np.zeros(P - r.size, np.float32)])
        ty = tl.block_type(tl.float32, list(r.shape))
        return tl.tensor(TensorHandle(r.astype(np.float32), tl.float32), ty)
    return _orig(arg)


I._implicit_cvt = _cvt


@triton.jit
def _copy(y_ptr, s, NH, P: tl.constexpr):
    r = tl.arange(0, P)
    tl.store(y_ptr + r, s.to(tl.bfloat16), mask=r < NH)


def run(x, weight, eps, y):
    # read the inputs as numpy without torch ops (raw memory through ctypes)
    import ctypes
    n, h = x.shape
    buf = (ctypes.c_uint16 * (n * h)).from_address(x.data_ptr())
    xv = (np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(n, h)
    wb = (ctypes.c_uint16 * h).from_address(weight.data_ptr())
    wv = (np.frombuffer(wb, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    _PENDING["y"] = (xv, wv, float(eps))
    _copy[(1,)](y, 77, n * h, P=1 << max(0, (n * h - 1).bit_length()))
