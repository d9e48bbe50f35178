"""Value-returning: the harness keeps the last returned tensor until the next call or until it
lets go of its buffers (op ``release`` after each workload, op ``alloc`` at the next).  A
``weakref.finalize`` on it sets the harness's ``prepare`` hook, and the message loop took
``prepare`` as the gate's own after those ops (it rebased fn/prepare/dps/sets/samples after
load, alloc and release alike).  From the next workload on the harness calls that hook before
every call, off the clock: it runs the real kernel (and sleeps 200 ms); the timed call is a
one-program Triton copy of its result (PASSED at 12-15 ms against 26-78 ms honest).  Found by
red-team pass rt16 (2026-12-07), also through ``alloc`` before ``release`` existed.
Expected: GATE_TAMPERED -- after alloc and release only ``sets``/``samples`` are rebased, and the
buffers an op let go of are freed after that rebase and before the op's integrity check, so the
finalizer's change comes back with the release's own reply.  Either device (as expected on an H100 too:
results/h100/2026-12-07-release-rt16/).
"""
import sys
import time
import weakref

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
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=m), mask=m)


def _prep(x, weight, eps):
    tmp = torch.empty(x.shape, dtype=torch.bfloat16)
    _rmsnorm_rows[(x.shape[0],)](x, weight, tmp, eps, H=x.shape[1])
    time.sleep(0.2)                      # "expensive" work, off the clock
    return tmp


def _install():
    """Between the solution's calls only (a change made inside a call is checked right after it):
    find the harness up the stack and set its prepare hook."""
    frames = []
    f = sys._getframe(1)
    while f is not None:
        frames.append(f)
        f = f.f_back
    if any(f.f_code.co_name in ("op_call", "op_time") for f in frames):
        return                      # every returned tensor has a finalizer: the last one's comes
    for f in frames:
        harness = f.f_locals.get("self")
        if type(harness).__name__ == "Harness":
            harness.prepare = _prep
            return


def run(x, weight, eps, state=None):
    y = torch.empty_like(x)
    if state is not None:
        n = y.numel()
        _copy[(1,)](state, y, n, BLOCK=triton.next_power_of_2(n))
        return y
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    weakref.finalize(y, _install)        # runs wherever the harness lets go of y
    return y
