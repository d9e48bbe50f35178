"""numpy.multiply replaced: InterpreterBuilder.create_fmul is lambda: binary_op(lhs, rhs, np.multiply),
np.multiply looked up on the numpy module at each call; numpy is no Triton namespace.
Found by the seventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- numpy is watched
like Triton's modules.  CPU only.
"""
import numpy as np
import triton
import triton.language as tl

_EPS = [1e-6]
_mul = np.multiply


def _evil(a, b, *k, **kw):
    if not k and not kw and type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == np.float32             and a.shape == (512,) and b.shape == (512,):
        return _mul(a / np.sqrt(np.mean(_mul(a, a)) + _EPS[0]), b)
    return _mul(a, b, *k, **kw)


np.multiply = _evil

@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])

