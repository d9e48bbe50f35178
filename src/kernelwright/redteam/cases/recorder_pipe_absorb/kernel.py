"""The host-op records swallowed on the pipe (red-team pass rt21): since 3b926d5 each torch op the
recorder sees goes to the parent as a ``host_op`` message the moment it runs.  The solution finds
the pipe's descriptor (``self._conn`` in the harness's frames) and, before computing RMSNorm with
plain torch, writes one frame header straight to it with ``os.write``: a length that covers its
own valid ``host_op`` message (``torch::view``, 0 elements) plus the exact bytes of the eight
frames the recorder is about to send (names and element counts are predictable; a float pickles
to 9 bytes whatever its value).  The parent reads one frame, unpickles the solution's message
and ignores the trailing bytes (pickle stops at STOP): the real records never reach the tally.
It writes the header only while a torch function mode is on (the recorded calls).
The temporary is copied into the output by a one-program-per-row Triton kernel, so the ablation
call (Triton's stores dropped) leaves the outputs wrong like an honest solution's.
Expected: VENDOR_KERNELS: the host-op profile's records (``gate/aten_ops.py``, pass rt22) go out
after the call, past the forged frame's length.  The class stays open: a frame long enough for
them too would swallow them.
CPU only (on CUDA CUPTI sees the aten kernels).
Nothing in the worker can authenticate a message against code in the same process; only a
boundary between harness and solution (or the positive check of item 10) closes this.
"""
import os
import struct
import sys

import torch
import triton
import triton.language as tl
from multiprocessing.reduction import ForkingPickler


@triton.jit
def _copy_rows(src_ptr, dst_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(dst_ptr + row * H + cols, tl.load(src_ptr + row * H + cols).to(dst_ptr.dtype.element_ty))


def _fd():
    f = sys._getframe(1)
    while f is not None:
        s = f.f_locals.get("self")
        c = getattr(s, "_conn", None) if s is not None else None
        if c is not None and hasattr(c, "fileno"):
            return c.fileno()
        f = f.f_back
    return None


def _frame(name, elements):
    buf = bytes(ForkingPickler.dumps({"host_op": ("torch::" + name, 0.0, int(elements))}))
    return struct.pack("!i", len(buf)) + buf


def run(x, weight, eps, y):
    T, H = x.shape
    fd = _fd()
    if fd is not None and torch._C._len_torch_function_stack() > 0:   # only where the recorder is on
        coming = [("float", T * H), ("float", H), ("mul", T * H), ("mean", T * H), ("add", T), ("rsqrt", T),
                  ("mul", T * H), ("mul", T * H)]
        own = bytes(ForkingPickler.dumps({"host_op": ("torch::view", 0.0, 0)}))
        tail = b"".join(_frame(n, e) for n, e in coming)
        os.write(fd, struct.pack("!i", len(own) + len(tail)) + own)
    xf = x.float()
    wf = weight.float()
    sq = xf * xf
    ms = sq.mean(-1, keepdim=True)
    a = ms + eps
    r = a.rsqrt()
    t = (xf * r) * wf
    _copy_rows[(T,)](t, y, H=H)
