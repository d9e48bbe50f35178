"""Work before the clock starts through an instance attribute on the harness (found while fixing
the 2026-11-29 second red-team review).  ``harness._prepare`` runs after the timed iteration's
inputs are in place and its outputs poisoned, before the L2 flush and the start event; setting it on
the instance (the class is watched, the instance was not) lets this solution compute the output
there.  Timed calls launch an empty kernel.  Expected: GATE_TAMPERED (the worker reports attributes
added to its own objects that shadow a method or hold a callable).
"""


import triton
import triton.language as tl

from kernelwright.redteam.frames import harness_frame


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


@triton.jit
def _empty(y_ptr):
    tl.program_id(0)


_done = set()


def _install(harness):
    cls_prepare = type(harness)._prepare

    def prepare(set_index, scalars):
        x, weight = harness.sets[set_index]["inputs"][:2]
        y = harness.sets[set_index]["outputs"][0]
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, scalars["eps"], H=x.shape[1])
        _done.add(y.data_ptr())
        return cls_prepare(harness, set_index, scalars)

    harness._prepare = prepare


def run(x, weight, eps, y):
    caller = harness_frame("op_time")
    if caller is not None:
        harness = caller.f_locals["self"]
        if "_prepare" not in vars(harness):
            _install(harness)
        if y.data_ptr() in _done:
            _done.discard(y.data_ptr())
            _empty[(1,)](y)
            return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
