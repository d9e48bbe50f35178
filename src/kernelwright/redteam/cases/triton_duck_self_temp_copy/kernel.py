"""Host compute routed through Triton's own code (red-team pass of 2026-12-07): every torch op is
called by ``triton.language.core.binary_op_type_legalization`` with a duck-typed ``semantic``
whose ``binary_op_type_checking_impl`` is a torch function, from a pre-run hook, so a genuine
Triton code object is the op's caller; a Triton kernel copies the result into ``y``.  Expected:
BUILD_FAILED (a launch with pre-run hooks is refused), else VENDOR_KERNELS (only glue ops that
Triton's code calls are left out).  CPU only.
"""

import functools
import types

import torch
import triton
import triton.language as tl
from triton.language.core import binary_op_type_legalization as _via_triton


def _op(fn):
    return types.SimpleNamespace(binary_op_type_checking_impl=fn)


_MUL, _ADD, _POW = _op(torch.mul), _op(torch.add), _op(torch.pow)
_MEAN = _op(functools.partial(torch.mean, keepdim=True))
_OUT = []


def _hook(x_ptr, w_ptr, eps, **_):
    xf = _via_triton(x_ptr, 1.0, _MUL)                  # bf16 * 1.0 -> exact, then
    xf = _via_triton(xf, torch.float32, _op(torch.Tensor.to))
    ms = _via_triton(_via_triton(xf, xf, _MUL), -1, _MEAN)
    r = _via_triton(_via_triton(ms, eps, _ADD), -0.5, _POW)
    _OUT[:] = [_via_triton(_via_triton(xf, r, _MUL), w_ptr, _MUL)]


@triton.jit
def _compute(x_ptr, w_ptr, eps):
    pass


_compute.add_pre_run_hook(_hook)


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(tl.bfloat16))


def run(x, weight, eps, y):
    _compute[(1,)](x, weight, float(eps))
    _copy_rows[(x.shape[0],)](_OUT[0], y, H=x.shape[1])
