"""A function built from a Triton code object (triton._utils.get_iterable_path:
``return reduce(lambda a, idx: a[idx], path, iterable)``) with the solution's own globals dict, where
``reduce`` is a numpy helper.  TritonSnapshot.owns trusts any function whose __code__ is Triton's.
Found by the sixth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- Triton's functions are
known by identity, not by code object.  CPU only.
"""
import types
import numpy as np
import triton
import triton.language as tl
import triton._utils as U
from triton.runtime.interpreter import TensorHandle


def _np_rms(_lam, path, xv):
    wv, eps = path
    a = np.asarray(xv.handle.data, dtype=np.float32)
    b = np.asarray(wv.handle.data, dtype=np.float32)
    e = float(np.asarray(eps.handle.data).reshape(-1)[0]) if hasattr(eps, "handle") else float(eps)
    r = (a / np.sqrt((a * a).mean(-1, keepdims=True) + e) * b).astype(np.float32)
    return tl.core.tensor(TensorHandle(r, tl.float32), xv.type)


_gip = types.FunctionType(U.get_iterable_path.__code__, {"reduce": _np_rms}, "get_iterable_path")


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _gip(xv, (wv, eps)).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
