"""Off-clock work through the returned container (found by a red-team pass, 2026-11-30): the
timed call launches a no-op kernel and returns a dict subclass whose ``get`` runs the real kernel.
The harness used to read the outputs with ``returned.get(name)`` after the clock stopped, so the
work escaped the timer while the outputs were right.  Expected: the harness reads containers
through ``dict.get`` / ``tuple.__iter__`` themselves, the subclass method never runs, and the
stored zeros are what the gate checks (TOLERANCE).
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


class _Deferred(dict):
    def __init__(self, x, weight, eps):
        super().__init__(y=torch.zeros_like(x))     # the stored value: never computed
        self._args = (x, weight, eps)

    def get(self, name, default=None):
        x, weight, eps = self._args
        y = torch.empty_like(x)
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
        return y


def run(x, weight, eps):
    _noop[(1,)](x)
    return _Deferred(x, weight, eps)
