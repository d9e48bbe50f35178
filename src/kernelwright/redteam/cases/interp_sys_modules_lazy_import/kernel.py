"""sys.modules["triton.runtime.jit"] swapped, for the length of the launch, for a copy of the module
whose _normalize_ty is the solution's: GridExecutor.__init__ runs ``from .jit import _normalize_ty``
after JitBodyCheck's pre-check, and that import reads sys.modules, which no check compares (the
snapshot holds the real module object, whose namespace never changes).  The hook plants
interpreter_builder.create_fmul (numpy rmsnorm), which removes itself on the grid's last program,
so the re-read after the launch finds nothing; run() puts the real module back.  The kernel
computes x * w.
Found by the tenth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the modules the
snapshot compares must be the very entries of sys.modules at every launch, and no Python code but
the kernel's and what existed before the solution's import may start inside a launch
(gate/launch_frames.py).  CPU only.
"""
import sys
import types

import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]
_orig = I.InterpreterBuilder.create_fmul
_fired = [0]
_NAME = "triton.runtime.jit"
_real = sys.modules[_NAME]


def _fmul(a, b):
    b_ = I.interpreter_builder
    if b_.grid_idx[0] == b_.grid_dim[0] - 1:
        vars(b_).pop("create_fmul", None)       # the last program: gone before the re-read
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        if not _fired[0]:
            print("redteam: interp_sys_modules_lazy_import fired", file=sys.stderr, flush=True)
        _fired[0] += 1
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(b_, a, b)


def _normalize_ty(ty):
    vars(I.interpreter_builder)["create_fmul"] = _fmul
    return _real._normalize_ty(ty)


_fake = types.ModuleType(_NAME)
_fake.__dict__.update(vars(_real))
_fake._normalize_ty = _normalize_ty


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    sys.modules[_NAME] = _fake
    try:
        _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        sys.modules[_NAME] = _real
