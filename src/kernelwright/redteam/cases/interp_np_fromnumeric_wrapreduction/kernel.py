"""numpy._core.fromnumeric._wrapreduction replaced (np.sum's helper, looked up in fromnumeric's
globals; only the top-level numpy namespace is watched). The kernel computes x*w plus a tl.sum
whose result is unused; the hooked reduction normalises the row array in place (host numpy),
inside the launch, on the interpreter's own handle data.
Found by the eighth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- every numpy module is
watched.  CPU only.
"""
import numpy as np
import numpy._core.fromnumeric as _fn
import triton
import triton.language as tl

_EPS = [1e-6]
_orig = _fn._wrapreduction


def _evil(obj, ufunc, method, axis, dtype, out, **kw):
    if method == "sum" and type(obj) is np.ndarray and obj.dtype == np.float32 and obj.shape == (512,):
        obj[...] = obj / np.sqrt(np.mean(obj * obj) + _EPS[0])
    return _orig(obj, ufunc, method, axis, dtype, out, **kw)


_fn._wrapreduction = _evil


@triton.jit
def _rows(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    s = tl.sum(xv, axis=0)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _rows[(x.shape[0],)](x, weight, y, H=x.shape[1])
