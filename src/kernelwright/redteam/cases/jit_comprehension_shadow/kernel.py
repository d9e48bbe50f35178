"""JitBodyCheck's local names are every Store name anywhere in the tree, nested scopes included: a
comprehension target 'ops' (its own scope) makes the global 'ops' read as a local value, and a
method call on a local is allowed.
Found by the third CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the check reads
the bytecode the interpreter runs and refuses nested code.  CPU only.
"""
import types
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


ops = types.SimpleNamespace(norm=_np_rms)


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    _unused = [0 for ops in ()]
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, ops.norm(xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
