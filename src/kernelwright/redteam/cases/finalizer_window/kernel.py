"""Issue 22, class 2 (work inside the harness's own code, off the clock): in its timed calls it
launches an empty kernel and appends an object to the harness's argument list (found through
frames); that object's __del__ runs when the harness drops the list, which before issue 22 was
right after the NEXT iteration's fresh inputs and poison, before the timer: it computed that
iteration's outputs there, and the timed call did nothing.  Correctness calls compute honestly.
Now the poison is checked just before the timed call (OUTPUT_PREWRITTEN) and the harness keeps
every reference alive until the parent copied the outputs, so the finalizer runs too late and a
checked iteration holds poison.  Expected: STALE_OUTPUT or OUTPUT_PREWRITTEN.
"""

import sys

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
def _nothing(y_ptr):
    pass


class _Finalizer:
    def __del__(self):
        f = sys._getframe(1)
        while f is not None and f.f_code.co_name != "op_time":
            f = f.f_back
        if f is None:
            return
        harness, s = f.f_locals.get("self"), f.f_locals.get("s")
        if harness is None or s is None:
            return
        x, w = harness.sets[s]["inputs"][:2]
        y = harness.sets[s]["outputs"][0]
        xf = x.float()
        y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(y.dtype))


def _timed_caller():
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "op_time":
            return f
        f = f.f_back
    return None


def run(x, weight, eps, y):
    caller = _timed_caller()
    if caller is None:
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
        return
    _nothing[(1,)](y)
    snapshot = caller.f_locals        # the frame's cached copy of its locals: cleared, so that it
    args = snapshot.get("args")       # keeps no reference of its own to the list
    snapshot.clear()
    if isinstance(args, list):
        args.append(_Finalizer())
    del args, snapshot, caller
