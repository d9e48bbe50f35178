"""Off-clock work through a dispatcher kernel registered over ``aten::fill_`` at import (found
by a second red-team pass, 2026-11-30): the harness poisons each timed iteration's outputs with
``fill_`` after writing its inputs, and the registered kernel ran the real work there.
Expected: GATE_TAMPERED (the dispatcher tables of the operators the harness runs are part of the
hook state).
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

_known = {}     # output data_ptr -> (x, weight, eps) seen in an earlier call on that buffer set
_ready = set()

def _fill(self, value):
    with torch._C._AutoDispatchBelowAutograd():
        torch.ops.aten.fill_.Scalar(self, value)
    job = _known.get(self.data_ptr())
    if job is not None and self.shape == job[0].shape:
        x, w, eps = job
        _rmsnorm_rows[(x.shape[0],)](x, w, self, eps, H=x.shape[1])
        _ready.add(self.data_ptr())
    return self

_lib = torch.library.Library("aten", "IMPL")
for _key in ("AutogradCPU", "AutogradCUDA"):
    _lib.impl("fill_.Scalar", _fill, _key)

def run(x, weight, eps, y):
    p = y.data_ptr()
    if p in _ready:
        _ready.discard(p)
        _noop[(1,)](y)
    else:
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    _known[p] = (x, weight, eps)
