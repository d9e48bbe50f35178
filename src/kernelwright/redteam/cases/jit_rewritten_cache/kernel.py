"""JitBodyCheck reads the kernel's source; the interpreter runs InterpretedFunction.rewritten_fn[fn]
(a class-level dict, filled on first use).  Pre-filling it with a Python function makes the honest
source the checked one and the numpy function the one that runs.
Found by the third CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the check reads the
function the cache holds, and the launch runs exactly that function.  CPU only.
"""
import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from triton.runtime.interpreter import InterpretedFunction

def _np_rms(xv, wv, eps):
    e = float(np.asarray(eps.handle.data if hasattr(eps, "handle") else eps))
    a = np.asarray(xv.handle.data, dtype=np.float32)
    b = np.asarray(wv.handle.data, dtype=np.float32)
    r = (a / np.sqrt((a * a).mean(-1, keepdims=True) + e) * b).astype(np.float32)
    return tl.core.tensor(TensorHandle(r, tl.float32), xv.type)


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


def _runs(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _np_rms(xv, wv, eps).to(tl.bfloat16))


InterpretedFunction.rewritten_fn[_rms.fn] = _runs


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
