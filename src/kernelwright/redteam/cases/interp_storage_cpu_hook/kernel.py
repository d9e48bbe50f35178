"""torch.storage._StorageBase.cpu (a plain Python function of torch's, neither watched by the
TritonSnapshot nor by integrity) is replaced around the launch.  GridExecutor._init_args_hst calls
storage.cpu() on every tensor argument -- after JitBodyCheck's pre-check.  There the hook plants
interpreter_builder.create_fmul (numpy rmsnorm), which removes itself on its last call (one per
program), so the post-launch re-check sees nothing.  The kernel computes x * w.
Found by the ninth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- torch.Tensor's and the
storage classes' Python dicts and torch.storage are compared with the snapshot at each launch.  CPU
only.
"""
import numpy as np
import torch
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_base = torch.storage._StorageBase
_orig_cpu = _base.cpu
_orig_fmul = I.InterpreterBuilder.create_fmul
_st = {"eps": 1e-6, "left": 0, "armed": False}


def _fmul(a, b):
    b_ = I.interpreter_builder
    _st["left"] -= 1
    if _st["left"] <= 0:
        b_.__dict__.pop("create_fmul", None)      # gone before the re-check
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape:
        r = da / np.sqrt((da * da).mean() + _st["eps"]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig_fmul(b_, a, b)


def _cpu(self):
    if _st["armed"]:
        _st["armed"] = False
        I.interpreter_builder.__dict__["create_fmul"] = _fmul
    return _orig_cpu(self)


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(y_ptr.dtype.element_ty))


def run(x, weight, eps, y):
    _st.update(eps=float(eps), left=int(x.shape[0]), armed=True)
    _base.cpu = _cpu
    try:
        _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        _base.cpu = _orig_cpu
        _st["armed"] = False
        I.interpreter_builder.__dict__.pop("create_fmul", None)
