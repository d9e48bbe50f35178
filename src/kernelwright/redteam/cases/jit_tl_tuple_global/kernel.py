"""A global ``tl.tuple`` whose first value is a numpy helper and whose field names answer
``getattr(value, "fn")`` and ``getattr(value, "__func__")`` with Triton's own functions
(``tl.tuple.__getattr__``): the check trusted any instance of a Triton class, and the body calls
``_OPS[0](...)``.  Found by the fifth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED --
a ``tl.tuple`` is judged like a tuple, value by value, and Triton's objects by type, never by an
attribute they answer.  CPU only.
"""

import numpy as np
import triton
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _np_rms(xv, wv, eps):
    a = np.asarray(xv.handle.data, dtype=np.float32)
    b = np.asarray(wv.handle.data, dtype=np.float32)
    e = float(np.asarray(eps.handle.data).reshape(-1)[0]) if hasattr(eps, "handle") else float(eps)
    r = (a / np.sqrt((a * a).mean(-1, keepdims=True) + e) * b).astype(np.float32)
    return tl.core.tensor(TensorHandle(r, tl.float32), xv.type)


# tl.tuple.__getattr__ answers field names: a probe for a wrapper's ``.fn`` meets tl.sum (a jit
# function of Triton's own) and one for a method's ``__func__`` meets a plain function of Triton's,
# while the body calls the first value
_OPS = tl.tuple([_np_rms, tl.sum, tl.core._unwrap_if_constexpr],
                tl.core.tuple_type([tl.int32] * 3, ["_", "fn", "__func__"]))


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, _OPS[0](xv, wv, eps).to(tl.bfloat16))


def run(x, weight, eps, y):
    _rms[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
