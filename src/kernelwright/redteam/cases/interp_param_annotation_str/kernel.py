"""A kernel parameter annotated with an object of the solution's, set at import on the rewritten
function Triton caches (``_rms.rewrite().__annotations__["x_ptr"] = _PTR``; an annotation written
in the source arrives as a string, since the rewriter compiles under its own module's ``from
__future__ import annotations``).  The jit-body check reads the body's bytecode, the launch's
arguments and the parameters' defaults, never the annotations.  Inside the launch, after the
check, GridExecutor.__init__ normalises every annotation (triton.runtime.jit._normalize_ty),
which ends in ``str(ty)`` for an object that is not a string, a dtype or a type: its __str__
plants interpreter_builder.create_fmul (numpy rmsnorm), which removes itself on the grid's last
program, so the re-read after the launch finds nothing.  No namespace of Triton's is changed
outside the launch.  The kernel computes x * w.
Found by the tenth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- a jit body's
annotations must be strings, int/float/bool or Triton's classes and dtypes, and the object's
__str__ is Python code of the solution's starting inside the launch (gate/launch_frames.py).  CPU
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
    b_ = I.interpreter_builder
    if b_.grid_idx[0] == b_.grid_dim[0] - 1:
        vars(b_).pop("create_fmul", None)       # the last program: gone before the re-read
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        if not _fired[0]:
            print("redteam: interp_param_annotation_str fired", file=sys.stderr, flush=True)
        _fired[0] += 1
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(b_, a, b)


class _Annotation:
    def __str__(self):
        f = sys._getframe(1)
        for _ in range(4):                      # _normalize_ty <- dict comprehension <- GridExecutor.__init__
            if f is None:
                break
            if f.f_code is I.GridExecutor.__init__.__code__:
                vars(I.interpreter_builder)["create_fmul"] = _fmul
                break
            f = f.f_back
        return "pointer"


_PTR = _Annotation()


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


# the interpreter's rewriter compiles the body under `from __future__ import annotations` (its own
# module's flags), so an annotation in the source arrives as a string: set it on the rewritten
# function instead, which Triton caches and the launch runs
_rms.rewrite().__annotations__["x_ptr"] = _PTR


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
