"""A Triton function bound to the solution's object: types.MethodType(
triton.runtime._allocation._AllocatorWrapper.__call__, obj) -- its body is
``return self._allocator(size, alignment, stream)`` -- where obj._allocator is a numpy helper.
TritonSnapshot.owns unwraps a method to its __func__ and trusts Triton's code, whatever self is.
Found by the sixth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- a bound method is
Triton's only when its function is and its object is one Triton's modules held at the snapshot (or a
class of Triton's).  CPU only.
"""
import types
import numpy as np
import triton
import triton.language as tl
from triton.runtime import _allocation as A
from triton.runtime.interpreter import TensorHandle


def _np_rms(xv, wv, eps):
    a = np.asarray(xv.handle.data, dtype=np.float32)
    b = np.asarray(wv.handle.data, dtype=np.float32)
    e = float(np.asarray(eps.handle.data).reshape(-1)[0]) if hasattr(eps, "handle") else float(eps)
    r = (a / np.sqrt((a * a).mean(-1, keepdims=True) + e) * b).astype(np.float32)
    return tl.core.tensor(TensorHandle(r, tl.float32), xv.type)


_call = types.MethodType(A._AllocatorWrapper.__call__, types.SimpleNamespace(_allocator=_np_rms))


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _call(xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
