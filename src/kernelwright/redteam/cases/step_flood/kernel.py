"""Hangs the trusted parent in a write (2026-12-08 channel red-team pass).  Inside a timing op the
parent answers every ``step`` message it reads (a spec, or an empty answer after noting a
violation) with a blocking ``Connection.send``.  At its first timed call the solution writes
200 000 step messages (7 MB) to the pipe's descriptor and never reads an answer: once the
socket's buffers hold a few hundred KB of answers, the parent's send blocks, with no deadline,
and so does the solution's write; the bench never ends.  Expected: GATE_TAMPERED (the parent writes
every message with a deadline, gate/wire.py ``send_frame``: a worker that leaves the answers to
its own steps unread is out of step with the exchange).
"""

import pickle

import gc
import os
import struct
from multiprocessing.connection import Connection

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


def _pipe_fd():
    for obj in gc.get_objects():
        if isinstance(obj, Connection) and not obj.closed and obj.writable:
            return obj.fileno()
    return None


def _frame(body):
    return (struct.pack("!i", len(body)) if len(body) < 0x7FFFFFFF else struct.pack("!iQ", -1, len(body))) + body


_calls = [0]


def run(x, weight, eps, y):
    _calls[0] += 1
    fd = _pipe_fd()
    if fd is not None and _calls[0] == 5:      # the first timed iteration (three correctness calls, one warm-up)
        one = _frame(pickle.dumps({"step": "spec", "phase": "flood", "i": 0}, protocol=2))
        os.write(fd, one * 200_000)
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
