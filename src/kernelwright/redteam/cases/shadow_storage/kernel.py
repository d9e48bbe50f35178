"""Off-clock work through a storage accessor on a buffer the harness owns (found by a red-team
pass, 2026-11-30): each call launches a no-op and sets ``y.untyped_storage`` on its output buffer;
the harness's post-call check that buffers still own their storage called it after the clock
stopped, and the hook ran the real kernel there.  Expected: GATE_TAMPERED (buffers must carry no
attributes of their own; the harness reads storage through ``torch.Tensor.untyped_storage``).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


@triton.jit
def _noop(p):
    pass

_storage_of = torch.Tensor.untyped_storage


def run(x, weight, eps, y):
    _noop[(1,)](y)

    def untyped_storage(_x=x, _w=weight, _y=y, _e=eps):
        vars(_y).pop("untyped_storage", None)
        _rmsnorm_rows[(_x.shape[0],)](_x, _w, _y, _e, H=_x.shape[1])
        return _storage_of(_y)
    y.untyped_storage = untyped_storage
