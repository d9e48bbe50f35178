"""The kernel's module replaces its own ``__builtins__`` with a dict in which ``len``, ``abs`` and
``min`` are C callables: ``operator.attrgetter("handle.data")`` (a tl.tensor's numpy array),
``np.copyto`` and ``np.ndarray.mean``.  A function takes its builtins from its globals'
``__builtins__`` when it is made, so the interpreter's rewritten kernel (exec'd into this module's
globals at the first launch) looks ``len`` up there; JitBodyCheck._lookup reads the real builtins
module instead and sees three SAFE_BUILTINS.  The body does RMSNorm with numpy on the handle of
``xv`` in place (``abs(a, a * pow(min(a * a) + eps, -0.5) * len(wv))``) and stores ``xv`` with
tl.store, so the ablation's dropped stores leave the poison.  No Python frame of the solution's
starts in a launch (the callables are C), no namespace the snapshot compares changes, and the
module's ``__builtins__`` value is a plain dict (``_globals_problem``).
Found by the eleventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- a body (and every
jit function and constexpr_function it reaches) must run with the interpreter's own builtins dict
and a plain globals dict (JitBodyCheck._signature_problem), so the names the check reads are the
ones the body calls.  CPU only.
"""
import builtins
import operator
import sys

import numpy as np
import triton
import triton.language as tl

_mine = dict(vars(builtins))
_mine.update(len=operator.attrgetter("handle.data"), abs=np.copyto, min=np.ndarray.mean)
globals()["__builtins__"] = _mine
_calls = [0]


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    a = len(xv)
    abs(a, a * pow(min(a * a) + eps, -0.5) * len(wv))
    tl.store(y_ptr + row * H + cols, xv.to(tl.bfloat16))


def run(x, weight, eps, y):
    _calls[0] += 1
    print(f"redteam: interp_module_builtins_dict fired (call {_calls[0]}; len/abs/min of the kernel's module "
          "are numpy's)", file=sys.stderr, flush=True)
    _rms[(x.shape[0],)](x, weight, y, float(eps), H=x.shape[1])
