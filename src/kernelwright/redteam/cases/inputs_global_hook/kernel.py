"""Off-clock work through a global of the definition's module (red-team pass rt4, 2026-12-03):
``inputs_hook`` wraps the definition object's ``make_inputs``, which the integrity snapshot lists;
this case leaves every listed function alone and rebinds ``random_tensor`` in the module
``kernelwright.definitions.demo_rmsnorm``, whose ``make_inputs`` looks it up there at each call
(a definition module's globals were not in the snapshot: only ``kernelwright.definitions``,
``definitions.base`` and the built-ins' own fields were; MoE's ``make_shared_inputs`` reaches
``synth_routing_*`` the same way).  The wrapper sees the tensors of each timed iteration's inputs
as the worker expands its spec and computes that iteration's outputs then, off the clock; the
timed call only copies them.  A twin (its expansion draws two inputs' worth more: the donor) and
the correctness calls (the parent fills the inputs, nothing is drawn) get the honest kernel, so
every checked output is right.  Expected: GATE_TAMPERED (the modules that the built-ins'
functions live in are in the snapshot).  Before the fix: PASS.
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


_drawn = []      # tensors drawn since the last call
_stash = []      # (fingerprint of x, precomputed y)


def _wrap():
    mod = sys.modules.get("kernelwright.definitions.demo_rmsnorm")
    if mod is None or getattr(mod.random_tensor, "_w", False):
        return
    orig = mod.random_tensor

    def random_tensor(shape, dtype, gen, device):
        t = orig(shape, dtype, gen, device)
        _drawn.append(t)
        if len(_drawn) == 2 and len(tuple(shape)) == 1:     # x then weight: one spec's inputs
            x, w = _drawn
            y = torch.empty_like(x)
            _rmsnorm_rows[(x.shape[0],)](x, w, y, 1e-6, H=x.shape[1])
            _stash[:] = [(x[0, :16].clone(), y)]
        return t

    random_tensor._w = True
    mod.random_tensor = random_tensor


def run(x, weight, eps, y):
    _wrap()
    fresh_spec = len(_drawn) == 2
    _drawn.clear()
    if fresh_spec and _stash:
        fp, stash = _stash.pop()
        if torch.equal(fp, x[0, :16]):
            _copy[(1,)](stash, y, y.numel(), N=triton.next_power_of_2(y.numel()))
            return
    _stash.clear()
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
