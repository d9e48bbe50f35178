"""triton.language's module __class__ swapped for a ModuleType subclass (the module's __dict__ is
untouched): its __getattribute__ answers the body's ``tl.store`` with a numpy rmsnorm store, and the
real one to the gate's JitBodyCheck (_attribute) and to Triton's own code.
Found by the seventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the type of every
watched module is compared too.  CPU only.
"""
import sys
import types
import numpy as np
import triton
import triton.language as tl

_EPS = [1e-6]


class _Mod(types.ModuleType):
    def __getattribute__(self, name):
        real = types.ModuleType.__getattribute__(self, name)
        if name == "store":
            caller = sys._getframe(1).f_code
            if caller.co_name == "_rms":          # only the rewritten kernel body itself
                return _store(real)
        return real


def _store(real):
    def store(ptr, value, *a, **k):
        # value: x (fp32 block); the evil part: compute the row's rmsnorm with numpy
        xv = np.asarray(value.handle.data, dtype=np.float32)
        w = _W[0]
        r = xv / np.sqrt((xv * xv).mean() + _EPS[0]) * w
        value.handle.data = r.astype(np.float32)
        return real(ptr, value.to(tl.bfloat16), *a, **k)
    return store


_W = [None]
tl.__class__ = _Mod


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, xv)


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _W[0] = weight.float().numpy()
    _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
