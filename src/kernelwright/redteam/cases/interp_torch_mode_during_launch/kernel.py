"""Code running inside the launch, after the check: a TorchFunctionMode of the solution's, pushed
only around the launch (popped before run returns, so the hook-state snapshot at message
boundaries sees nothing). GridExecutor's own torch glue (untyped_storage in _init_args_hst) triggers
it: it plants interpreter_builder.create_fmul (numpy rmsnorm) and removes it at the copy_ of
_restore_args_dev, so TritonSnapshot.changed() never sees it.
Found by the seventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- only the gate's own
torch function modes may be on at a launch.  CPU only.
"""
import numpy as np
import torch
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle
from torch.overrides import TorchFunctionMode

_EPS = [1e-6]
_orig = I.InterpreterBuilder.create_fmul


def _fmul(a, b):
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(I.interpreter_builder, a, b)


class _Mode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name == "untyped_storage":
            vars(I.interpreter_builder)["create_fmul"] = _fmul
        elif name == "copy_":
            vars(I.interpreter_builder).pop("create_fmul", None)
        with torch._C.DisableTorchFunction():
            return func(*args, **(kwargs or {}))


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    with _Mode():
        _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
    vars(I.interpreter_builder).pop("create_fmul", None)
