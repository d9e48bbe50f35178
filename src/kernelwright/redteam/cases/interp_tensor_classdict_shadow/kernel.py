"""torch.Tensor.untyped_storage shadowed in torch.Tensor's own (Python) class dict for the length of
the launch only (integrity reads torch.Tensor at message boundaries; nothing reads it at a launch).
GridExecutor calls tensor.untyped_storage() in _init_args_hst (after JitBodyCheck's pre-check):
there the shadow plants interpreter_builder.create_fmul (numpy rmsnorm); in _restore_args_dev (after
the kernel, before the post-launch re-check) it removes it.  The kernel computes x * w.
Found by the ninth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- torch.Tensor's and the
storage classes' Python dicts and torch.storage are compared with the snapshot at each launch.  CPU
only.
"""
import sys

import numpy as np
import torch
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_c_us = torch._C.TensorBase.untyped_storage
_orig_fmul = I.InterpreterBuilder.create_fmul
_st = {"eps": 1e-6}


def _fmul(a, b):
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape:
        r = da / np.sqrt((da * da).mean() + _st["eps"]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig_fmul(I.interpreter_builder, a, b)


def _us(self):
    where = sys._getframe(1).f_code.co_name
    if where == "_to_cpu":
        I.interpreter_builder.__dict__["create_fmul"] = _fmul
    elif where == "_from_cpu":
        I.interpreter_builder.__dict__.pop("create_fmul", None)
    with torch._C.DisableTorchFunction():   # the inner C call would name this function to the recorder
        return _c_us(self)


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(y_ptr.dtype.element_ty))


def run(x, weight, eps, y):
    _st["eps"] = float(eps)
    torch.Tensor.untyped_storage = _us
    try:
        _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        del torch.Tensor.untyped_storage
        I.interpreter_builder.__dict__.pop("create_fmul", None)
