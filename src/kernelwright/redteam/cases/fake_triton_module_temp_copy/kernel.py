"""A helper compiled with a file name under Triton's package folder and registered as the module
``triton._kw_helpers``, called from a jit body (red-team pass of 2026-12-07): aimed at the host-op
recorder's test of "Triton's own code".  Expected: BUILD_FAILED (the jit body calls a Python
function: ``interpreted.JitBodyCheck``) or VENDOR_KERNELS (the Triton code objects are walked once,
before the solution's import, so the helper is not one).  CPU only.
"""

import os
import sys
import types

import torch
import triton
import triton.language as tl

_SRC = '''
def helper(x, w, eps, out):
    xf = x.float()
    out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float())
'''
_mod = types.ModuleType("triton._kw_helpers")
_mod.__dict__["torch"] = torch
exec(compile(_SRC, os.path.join(os.path.dirname(triton.__file__), "_kw_helpers.py"), "exec"), _mod.__dict__)
sys.modules["triton._kw_helpers"] = _mod
_JOB = []


@triton.jit
def _rms_copy(t_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    if row == 0:
        _mod.helper(*_JOB[0])
    cols = tl.arange(0, H)
    tl.store(y_ptr + row * H + cols, tl.load(t_ptr + row * H + cols).to(tl.bfloat16))


def run(x, weight, eps, y):
    t = torch.empty(x.shape)
    _JOB[:] = [(x, weight, eps, t)]
    _rms_copy[(x.shape[0],)](t, y, H=x.shape[1])
