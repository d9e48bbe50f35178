"""A Triton class (triton.runtime.interpreter.ReduceScanOpInterface, not one of the classes whose
dicts the check compared) given a solution-set ``__new__``: the kernel body calls the
class, which _triton_object_problem passes outright (``isinstance(value, type)``), and __new__ runs
numpy on the interpreter's handles.
Found by the sixth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- every Triton class is
compared with the snapshot.  CPU only.
"""
import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle


def _np_rms(cls, xv, wv, eps):
    a = np.asarray(xv.handle.data, dtype=np.float32)
    b = np.asarray(wv.handle.data, dtype=np.float32)
    e = float(np.asarray(eps.handle.data).reshape(-1)[0]) if hasattr(eps, "handle") else float(eps)
    r = (a / np.sqrt((a * a).mean(-1, keepdims=True) + e) * b).astype(np.float32)
    return tl.core.tensor(TensorHandle(r, tl.float32), xv.type)


I.ReduceScanOpInterface.__new__ = staticmethod(_np_rms)
_Op = I.ReduceScanOpInterface


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _Op(xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
