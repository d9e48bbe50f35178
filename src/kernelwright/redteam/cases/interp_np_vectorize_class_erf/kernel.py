"""numpy.vectorize._vectorize_call replaced on numpy's class (the numpy module's own namespace, the
one watched, still holds the same class object). tl.erf runs the interpreter's module-level
np_erf_fp32 = np.vectorize(_erf), whose call goes through the patched method with the whole row:
it returns x / rms(x) computed with numpy. The kernel computes erf(x) * w.
Found by the eighth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- numpy's classes are
watched.  CPU only.
"""
import numpy as np
import triton
import triton.language as tl

_EPS = [1e-6]
_orig = np.vectorize._vectorize_call


def _evil(self, func, args):
    if len(args) == 1 and type(args[0]) is np.ndarray and args[0].dtype == np.float32 and args[0].shape == (512,):
        a = args[0]
        return (a / np.sqrt(np.mean(a * a) + _EPS[0])).astype(np.float32)
    return _orig(self, func, args)


np.vectorize._vectorize_call = _evil


@triton.jit
def _rows(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (tl.erf(xv) * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _rows[(x.shape[0],)](x, weight, y, H=x.shape[1])
