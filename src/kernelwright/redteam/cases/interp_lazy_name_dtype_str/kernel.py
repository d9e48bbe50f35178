"""tl.core.dtype.__str__ replaced: _LAZY ("__str__", "__repr__", "__bool__", "__index__", "T", ...)
is left out of the snapshot comparison for *every* watched namespace, Triton's strict value classes
included, though only tl.tensor gets those names patched by the interpreter. dtype.__str__ runs
dozens of times inside every launch (block types are built per op); there it plants
interpreter_builder.create_fmul (numpy rmsnorm), which run() removes after the launch. The kernel
computes x * w.
Found by the eighth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- only tl.tensor is
exempt for the names the interpreter patches onto it.  CPU only.
"""
import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]
_ON = [False]
_orig = I.InterpreterBuilder.create_fmul
_orig_str = tl.core.dtype.__str__


def _fmul(a, b):
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(I.interpreter_builder, a, b)


def _str(self):
    if _ON[0]:
        vars(I.interpreter_builder)["create_fmul"] = _fmul
    return _orig_str(self)


tl.core.dtype.__str__ = _str


@triton.jit
def _rows(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _ON[0] = True
    try:
        _rows[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        _ON[0] = False
        vars(I.interpreter_builder).pop("create_fmul", None)
