"""H13 (call count): honest for the first three calls (what a harness checks before timing), then
returns the last computed output for every later call.  Expected: STALE_OUTPUT (timed iterations
get fresh inputs and some of them are checked).
"""

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
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _triton_copy(src, dst):
    n = dst.numel()
    _copy[(triton.cdiv(n, 1024),)](src.contiguous().view(-1), dst.view(-1), n, BLOCK=1024)

_state = {"calls": 0, "last": None}


def run(x, weight, eps, y):
    _state["calls"] += 1
    if _state["calls"] > 3 and _state["last"] is not None and _state["last"].shape == y.shape:
        _triton_copy(_state["last"], y)
        return
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    _state["last"] = y.clone()
