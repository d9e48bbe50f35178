"""``math.eval = eval``: JitBodyCheck passes a C builtin if it *is* the attribute of that name on
the (mutable) math module, so the body calls eval() on a string constant that runs a numpy helper.
Found by the sixth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- math is compared with
the snapshot, and the math functions a body may call are the ones of the gate's start.  CPU only.
"""
import math
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


math.eval = eval


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, eval("_np_rms(xv, wv, eps)").to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
