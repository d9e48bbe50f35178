"""An object in the kernel module's globals (never named by the body, so the jit-body check never
reads it) whose ``__class__`` is a property.  Inside the launch, after the check,
GridExecutor.__call__ runs _patch_lang(fn), which calls inspect.ismodule() -- isinstance(value,
ModuleType) -- on every global of the kernel's module; for an object that is not a module,
isinstance falls back to reading ``value.__class__``, and the property runs.  It plants
interpreter_builder.create_fmul (numpy rmsnorm), which removes itself on the grid's last
program, so the re-read after the launch finds nothing.  Nothing is patched anywhere at any
time outside the launch.  The kernel computes x * w.
Found by the tenth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the property's getter
is Python code of the solution's starting inside the launch (gate/launch_frames.py).  CPU only.
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
            print("redteam: interp_global_class_property fired", file=sys.stderr, flush=True)
        _fired[0] += 1
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(b_, a, b)


class _Probe:
    @property
    def __class__(self):
        f = sys._getframe(1)
        for _ in range(4):                      # ismodule <- _patch_lang's list comprehension <- _patch_lang
            if f is None:
                break
            if f.f_code is I._patch_lang.__code__:          # inside a launch, after the check
                vars(I.interpreter_builder)["create_fmul"] = _fmul
                break
            f = f.f_back
        return _Probe


_probe = _Probe()


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
