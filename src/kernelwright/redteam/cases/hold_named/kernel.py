"""CUDA only, no frame inspection: its 40 µs kernel is named ``kw_stream_hold``, the gate's blocking
kernel's name, and runs on a private stream that waits for the caller's and is never joined; a
1-2 µs decoy after it and a 4 µs kernel of the same name on the caller's stream.  CUPTI would take
the solution's kernels for the hold (out of the kernel time, the release moved later).
Expected: UNMEASURED_WORK (a traced call holds a second kernel named like the hold).
"""

import torch
import triton
import triton.language as tl

SPIN_NS = 40_000
PAD_NS = 4_000


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def kw_stream_hold(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, SPIN: tl.constexpr, WRITE: tl.constexpr):
    row = tl.program_id(0)
    t0 = _now()
    while _now() - t0 < SPIN:
        pass
    if WRITE:
        cols = tl.arange(0, H)
        x = tl.load(x_ptr + row * H + cols).to(tl.float32)
        w = tl.load(w_ptr + cols).to(tl.float32)
        rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
        tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


@triton.jit
def _touch(y_ptr):
    v = tl.load(y_ptr)
    tl.store(y_ptr, v)


_s = {}


def run(x, weight, eps, y):
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("this solution does not capture")       # the graph phase: a note
    if not _s:
        _s.update(side=torch.cuda.Stream(device=x.device), tail=torch.cuda.Stream(device=x.device),
                  done=torch.cuda.Event())
    side, tail, done = _s["side"], _s["tail"], _s["done"]
    here = torch.cuda.current_stream(x.device)
    side.wait_stream(here)
    with torch.cuda.stream(side):
        kw_stream_hold[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=SPIN_NS, WRITE=True)
        done.record(side)
    tail.wait_event(done)
    with torch.cuda.stream(tail):
        _touch[(1,)](y)
    kw_stream_hold[(1,)](x, weight, y, eps, H=x.shape[1], SPIN=PAD_NS, WRITE=False)
