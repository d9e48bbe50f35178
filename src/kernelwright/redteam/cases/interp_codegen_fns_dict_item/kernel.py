"""interpreter_builder.codegen_fns (a dict in the __dict__ of an instance Triton's module holds) has
its "min_dot_size" item replaced: the dict is the same object, so TritonSnapshot.changed() sees
nothing. TritonSemantic.dot calls it inside the launch (a dummy 16x16 tl.dot in the kernel); there
it plants interpreter_builder.create_fmul (numpy rmsnorm), which run() removes after the launch.
The kernel computes x * w.
Found by the eighth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the namespaces are
read again right after the launch, before the solution runs.  CPU only.
"""
import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]
_orig = I.InterpreterBuilder.create_fmul
_orig_min = I.interpreter_builder.codegen_fns["min_dot_size"]


def _fmul(a, b):
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(I.interpreter_builder, a, b)


def _min_dot_size(lhs, rhs):
    vars(I.interpreter_builder)["create_fmul"] = _fmul
    return _orig_min(lhs, rhs)


I.interpreter_builder.codegen_fns["min_dot_size"] = _min_dot_size


@triton.jit
def _rows(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    z = tl.zeros((16, 16), dtype=tl.float32)
    d = tl.dot(z, z)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    try:
        _rows[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        vars(I.interpreter_builder).pop("create_fmul", None)
