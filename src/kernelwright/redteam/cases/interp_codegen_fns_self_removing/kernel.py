"""interp_codegen_fns_dict_item again, with the planted method removing itself: the
"min_dot_size" item of interpreter_builder.codegen_fns (a dict held in an instance Triton's module
holds; the dict is the same object, so TritonSnapshot.changed() sees nothing) is swapped by run()
before the launch and put back after it.  TritonSemantic.dot calls it inside the launch (a dummy
16x16 tl.dot in the kernel), after the check; there it plants interpreter_builder.create_fmul
(numpy rmsnorm), which pops itself from the instance on its own call, so the re-read right after
the launch finds nothing.  The kernel computes x * w.
Found by the tenth CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the planted method is
Python code of the solution's starting inside the launch, stopped at its first frame
(gate/launch_frames.py); the re-read after the launch alone could not see it.  CPU only.
"""
import sys

import numpy as np
import triton
import triton.language as tl
import triton.runtime.interpreter as I
from triton.runtime.interpreter import TensorHandle

_EPS = [1e-6]
_orig = I.InterpreterBuilder.create_fmul
_fns = I.interpreter_builder.codegen_fns
_orig_min = _fns["min_dot_size"]
_fired = [0]


def _fmul(a, b):
    vars(I.interpreter_builder).pop("create_fmul", None)       # one shot: gone before the re-read
    da, db = np.asarray(a.data), np.asarray(b.data)
    if da.dtype == np.float32 and da.ndim == 1 and da.shape == db.shape and da.size == 512:
        if not _fired[0]:
            print("redteam: interp_codegen_fns_self_removing fired", file=sys.stderr, flush=True)
        _fired[0] += 1
        r = da / np.sqrt((da * da).mean() + _EPS[0]) * db
        return TensorHandle(r.astype(np.float32), a.dtype.scalar)
    return _orig(I.interpreter_builder, a, b)


def _min_dot_size(lhs, rhs):
    vars(I.interpreter_builder)["create_fmul"] = _fmul
    return _orig_min(lhs, rhs)


@triton.jit
def _rows(x_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    z = tl.zeros((16, 16), dtype=tl.float32)
    d = tl.dot(z, z)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row * H + cols, (xv * wv).to(tl.bfloat16))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _fns["min_dot_size"] = _min_dot_size
    try:
        _rows[(x.shape[0],)](x, weight, y, H=x.shape[1])
    finally:
        _fns["min_dot_size"] = _orig_min
