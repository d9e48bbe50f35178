"""numpy's floating-point error callback (``np.seterr(invalid="call")`` + ``np.seterrcall``) as a
hook inside the launch: numpy keeps it in a context variable, in no namespace the gate compares,
and ``_hooks_problem`` does not read it.  The kernel divides a zero block by itself (0/0: numpy's
"invalid" flag) right before ``xv * wv``; the interpreter's np.divide calls the callback, which
plants a one-shot interpreter_builder.create_fmul (numpy rmsnorm) that removes itself on its
first call, so the re-read after the launch finds nothing.  The kernel computes x * w.
Found by the tenth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED or TOLERANCE -- numpy's
error callback set at a launch is refused and the launch runs with numpy's error state off, so the
callback never runs and the kernel's own x * w comes out (the tolerance check reads first).  CPU
only.
"""
import sys

import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]
_orig = I.InterpreterBuilder.create_fmul
_fired = [0]


def _fmul(a, b):
    vars(I.interpreter_builder).pop("create_fmul", None)       # one shot: gone before the re-read
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        if not _fired[0]:
            print("redteam: interp_numpy_errcall fired", file=sys.stderr, flush=True)
        _fired[0] += 1
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(I.interpreter_builder, a, b)


def _on_fp_error(kind, flag):
    vars(I.interpreter_builder)["create_fmul"] = _fmul


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    z = tl.zeros((2,), dtype=tl.float32)
    q = z / z
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    old = np.seterr(invalid="call")
    old_cb = np.seterrcall(_on_fp_error)
    try:
        _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        np.seterrcall(old_cb)
        np.seterr(**old)
