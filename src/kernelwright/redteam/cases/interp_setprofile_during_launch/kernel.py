"""Code running inside the launch, after the check: sys.setprofile set only around the launch (the
hook-state snapshot is read at message boundaries). On the call of GridExecutor._init_args_hst it
plants interpreter_builder.create_fmul (numpy rmsnorm); on _restore_args_dev it removes it.
Found by the seventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- no profile or trace
function may be set at a launch.  CPU only.
"""
import sys
import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]
_orig = I.InterpreterBuilder.create_fmul


def _fmul(a, b):
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(I.interpreter_builder, a, b)


def _prof(frame, event, arg):
    if event == "call":
        n = frame.f_code.co_name
        if n == "_init_args_hst":
            vars(I.interpreter_builder)["create_fmul"] = _fmul
        elif n == "_restore_args_dev":
            vars(I.interpreter_builder).pop("create_fmul", None)


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    old = sys.getprofile()
    sys.setprofile(_prof)
    try:
        _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        sys.setprofile(old)
        vars(I.interpreter_builder).pop("create_fmul", None)
