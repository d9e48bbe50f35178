"""A finder on sys.meta_path as a hook inside the launch: run() takes "triton.runtime.jit" out of
sys.modules for the length of the launch and puts its finder first on sys.meta_path, so that
GridExecutor.__init__'s lazy ``from .jit import _normalize_ty`` (after JitBodyCheck's pre-check)
goes through the import system (the rewriter's own import of .jit is done at import, by
rewriting the kernel then; the finder also lets through any import outside GridExecutor).  find_spec plants interpreter_builder.create_fmul (numpy rmsnorm),
which removes itself on the grid's last program; the loader hands back the real module (the
snapshot's module is never touched).  run() restores sys.modules and sys.meta_path after.  The
kernel computes x * w.
Found by the tenth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- sys.meta_path and
sys.path_hooks must be what they were at the gate's start, and the finder's find_spec is Python
code of the solution's starting inside the launch (gate/launch_frames.py).  CPU only.
"""
import importlib.machinery
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
            print("redteam: interp_meta_path_finder fired", file=sys.stderr, flush=True)
        _fired[0] += 1
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(b_, a, b)


class _Loader:
    def create_module(self, spec):
        return types.ModuleType(spec.name)      # a throwaway the import system may decorate

    def exec_module(self, module):
        sys.modules[_NAME] = _real              # what the import then returns


def _from_grid_executor():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code is I.GridExecutor.__init__.__code__:
            return True
        f = f.f_back
    return False


class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name != _NAME:
            return None
        if _from_grid_executor():             # not the rewriter's import before the check
            vars(I.interpreter_builder)["create_fmul"] = _fmul
        return importlib.machinery.ModuleSpec(name, _Loader())


_FINDER = _Finder()


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


_rms.rewrite()      # the rewriter's own lazy import of .jit, done now, while the module is in sys.modules


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    sys.meta_path.insert(0, _FINDER)
    del sys.modules[_NAME]
    try:
        _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        sys.modules[_NAME] = _real
        if _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
