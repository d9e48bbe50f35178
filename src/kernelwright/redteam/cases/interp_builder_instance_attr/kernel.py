"""An instance attribute on the interpreter's module-level builder (interpreter_builder.create_fmul)
shadows InterpreterBuilder's method: the kernel body only computes x * w, and the builder -- which
the jit-body check never reads -- does the row reduction in numpy.  The check compared the dicts of
a fixed list of classes only.
Found by the sixth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- every namespace the
interpreter runs through is compared with the snapshot before each launch, the instances Triton's
modules hold included (``TritonSnapshot.changed``).  CPU only.
"""
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


I.interpreter_builder.create_fmul = _fmul


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
