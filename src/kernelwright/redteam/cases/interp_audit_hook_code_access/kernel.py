"""sys.addaudithook: CPython raises the audit event object.__getattr__ (fn, "__code__") whenever a
function's __code__ is read. The gate's own check reads the rewritten kernel's __code__ *after*
TritonSnapshot.changed() (JitBodyCheck._read), and GridExecutor.__call__ reads it again through
inspect.getfullargspec / getcallargs: the hook plants interpreter_builder.create_fmul (numpy rmsnorm)
there, after the comparison; run() removes it once the launch returns. _hooks_problem never looks
at audit hooks (they cannot be removed or listed).
Found by the eighth CPU red-team pass (2026-12-07).  Expected: TOLERANCE or BUILD_FAILED -- the gate
refuses every audit hook added after it starts (its own hook on the sys.addaudithook event), and
names the attempt.  CPU only.
"""
import sys

import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]
_ON = [False]
_orig = I.InterpreterBuilder.create_fmul


def _fmul(a, b):
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(I.interpreter_builder, a, b)


def _audit(event, args):
    if _ON[0] and event == "object.__getattr__" and len(args) == 2 and args[1] == "__code__" \
            and getattr(args[0], "__name__", "") == "_rms" and args[0] is not _rms.fn:
        # the rewritten function (what the gate reads and the launch runs), not the source one
        vars(I.interpreter_builder)["create_fmul"] = _fmul


sys.addaudithook(_audit)


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _ON[0] = True
    try:
        _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        _ON[0] = False
        vars(I.interpreter_builder).pop("create_fmul", None)
