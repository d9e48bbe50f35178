"""JitBodyCheck reads the body through inspect.getsource, looked up at check time; Triton's
rewriter uses inspect.getsourcelines.  getsource patched to hand back an honest body for this
kernel: the checked source is honest, the one that runs calls numpy.
Found by the third CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the check reads
bytecode, not source text.  CPU only.
"""
import inspect
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

_HONEST = '''def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))
'''


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _np_rms(xv, wv, eps).to(tl.bfloat16))


_getsource = inspect.getsource
inspect.getsource = lambda obj: _HONEST if obj is _rms.fn else _getsource(obj)


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
