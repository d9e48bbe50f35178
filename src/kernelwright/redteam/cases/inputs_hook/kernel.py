"""Off-clock work through the definition's input generator (found by a second red-team pass,
2026-11-30): the definition object's ``make_inputs`` is wrapped, and the wrapper's result computes
each timed iteration's outputs while the worker writes that iteration's inputs; the timed call
only copies them.  Expected: GATE_TAMPERED (the definitions are in the integrity snapshot).
"""
import sys
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
def _copy(src, dst, n, N: tl.constexpr):
    o = tl.arange(0, N)
    m = o < n
    tl.store(dst + o, tl.load(src + o, mask=m), mask=m)

_pending = []

class _Inputs(dict):
    def __getitem__(self, k):
        v = dict.__getitem__(self, k)
        if k == "eps":          # _regenerate reads x, weight, eps in order; x is final by now
            x, w = dict.__getitem__(self, "x"), dict.__getitem__(self, "weight")
            y = torch.empty_like(x)
            _rmsnorm_rows[(x.shape[0],)](x, w, y, v, H=x.shape[1])
            _pending[:] = [(x[0, :16].clone(), y)]
        return v

def _wrap():
    mod = sys.modules.get("kernelwright.definitions.demo_rmsnorm")
    if mod is None or getattr(mod.BUILTIN.make_inputs, "_w", False):
        return
    orig = mod.BUILTIN.make_inputs
    def make_inputs(*a, **k):
        return _Inputs(orig(*a, **k))
    make_inputs._w = True
    object.__setattr__(mod.BUILTIN, "make_inputs", make_inputs)

def run(x, weight, eps, y):
    _wrap()
    if _pending:
        fp, stash = _pending.pop()
        if torch.equal(fp, x[0, :16]):
            _copy[(1,)](stash, y, y.numel(), N=triton.next_power_of_2(y.numel()))
            return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
