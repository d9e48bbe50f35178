"""``builtins.divmod`` replaced by a helper named "divmod": JitBodyCheck passes a SAFE_BUILTINS
name when the value *is* builtins.<name> now, read off the (mutable) builtins module at launch.
The helper falls back to the real divmod for plain numbers.
Found by the sixth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED or GATE_TAMPERED --
builtins is compared with the snapshot, and the builtins a body may call are the ones of the gate's
start.  CPU only.
"""
import builtins
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


_real = builtins.divmod


def divmod(a, b, eps=None):
    if eps is None:
        return _real(a, b)
    return _np_rms(a, b, eps)


builtins.divmod = divmod
del globals()["divmod"]


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, divmod(xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
