"""triton.language.semantic.TritonSemantic.mul replaced at import (TritonSemantic was not among the
classes the check compared): the kernel body only computes x * w, legal Triton, and
the semantic layer the interpreter runs it through does the row reduction in numpy.
Found by the sixth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- every Triton class is
compared with the snapshot.  CPU only.
"""
import numpy as np
import triton
import triton.language as tl
from triton.language.semantic import TritonSemantic
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]
_orig = TritonSemantic.mul


def _mul(self, input, other, *rest, **kw):
    h1, h2 = getattr(input, "handle", None), getattr(other, "handle", None)
    a, b = np.asarray(getattr(h1, "data", 0)), np.asarray(getattr(h2, "data", 0))
    if a.dtype == np.float32 and a.ndim == 1 and a.size == 512 and b.shape == a.shape:
        r = (a / np.sqrt((a * a).mean() + _EPS[0]) * b).astype(np.float32)
        return tl.core.tensor(TensorHandle(r, tl.float32), input.type)
    return _orig(self, input, other, *rest, **kw)


TritonSemantic.mul = _mul


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _rms[(x.shape[0],)](x, weight, y, H=x.shape[1])
