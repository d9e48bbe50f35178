"""Off-clock work through a method of the trace model (red-team pass rt19): every built-in
definition's ``make_inputs`` calls ``definition.axis_values(workload.axes)`` while the worker
regenerates a timed iteration's inputs; ``Definition`` lives in ``kernelwright.trace``, which the
integrity snapshot does not list (it lists the definitions' modules, case ``inputs_global_hook``,
not the model classes their functions call).  The solution rebinds ``Definition.axis_values`` at
import to a wrapper that, when called from ``fresh.expand`` inside the harness's ``_regenerate``,
reads the iteration's spec from that frame, expands it itself (deterministic: the same bytes as
the harness gets; re-entry guarded) and computes the outputs with its Triton kernel, off the
clock.  The timed call finds the result for its inputs and only copies it.  Correctness calls (the
parent fills the inputs, nothing is expanded in the worker) get the honest kernel.
Expected: GATE_TAMPERED.  Works the same on CUDA.
"""
import sys

import torch
import triton
import triton.language as tl

from kernelwright.trace import Definition


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


_orig = Definition.axis_values
_busy = []
_stash = []      # (x fingerprint, weight fingerprint, y)


def _axis_values(self, var_values):
    if not _busy:
        f = sys._getframe(1)
        while f is not None and f.f_code.co_name != "_regenerate":
            f = f.f_back
        if f is not None:
            loc = f.f_locals
            _busy.append(True)
            try:
                from kernelwright.gate import fresh
                new = fresh.expand(loc["builtin"], loc["workload"], loc["spec"], loc["self"].device)
                x, w = new["x"], new["weight"]
                y = torch.empty_like(x)
                _rmsnorm_rows[(x.shape[0],)](x, w, y, new["eps"], H=x.shape[1])
                _stash[:] = [(x[:, :8].clone(), w[:8].clone(), y)]
            except Exception:
                _stash.clear()
            finally:
                _busy.clear()
    return _orig(self, var_values)


Definition.axis_values = _axis_values


def run(x, weight, eps, y):
    if _stash:
        fx, fw, stash = _stash.pop()
        if stash.shape == y.shape and torch.equal(fx, x[:, :8]) and torch.equal(fw, weight[:8]):
            _copy[(1,)](stash, y, y.numel(), N=triton.next_power_of_2(y.numel()))
            return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
