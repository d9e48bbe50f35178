"""The interpreter runs a kernel made by exec'ing its source again at the first launch
(FunctionRewriter._compile_and_exec), so the ``def``'s default values are evaluated a second
time, in the module's globals as they are then.  The jit-body check reads the defaults of the
original function (``kernel.fn.__defaults__``, ``_launch_problem``), never those of the rewritten
function that GridExecutor's ``inspect.getcallargs`` fills the call from.  Here the defaults name
module globals ``_A``, ``_B``, ``_C`` that are 0 when the ``def`` runs at import and are rebound
right after it to C callables: ``operator.attrgetter("handle.data")``, ``np.copyto`` and
``np.ndarray.mean`` (``_implicit_cvt`` passes them through untouched).  The body calls its
parameters (no global, no attribute the check refuses) to do RMSNorm with numpy on the handle of
``xv`` in place, then stores ``xv`` with tl.store (the ablation's dropped stores leave the poison).
No Python frame of the solution's starts in a launch and no compared namespace changes.
Found by the eleventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- the defaults of
the rewritten function, the one the interpreter calls, must be values a launch argument could be
(JitBodyCheck._signature_problem).  CPU only.
"""
import operator
import sys

import numpy as np
import triton
import triton.language as tl

_A = _B = _C = 0
_calls = [0]


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, A=_A, B=_B, C=_C):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    xv = tl.load(x_ptr + row * H + cols).to(tl.float32)
    wv = tl.load(w_ptr + cols).to(tl.float32)
    a = A(xv)
    B(a, a * pow(C(a * a) + eps, -0.5) * A(wv))
    tl.store(y_ptr + row * H + cols, xv.to(tl.bfloat16))


# after the def: the original keeps 0, the interpreter's re-exec at the first launch sees these
_A, _B, _C = operator.attrgetter("handle.data"), np.copyto, np.ndarray.mean


def run(x, weight, eps, y):
    _calls[0] += 1
    print(f"redteam: interp_rewrite_default_args fired (call {_calls[0]})", file=sys.stderr, flush=True)
    _rms[(x.shape[0],)](x, weight, y, float(eps), H=x.shape[1])
