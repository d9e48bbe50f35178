"""The real work after the timer stops (found by the 2026-11-29 second red-team review).  The
worker's ``Connection.send`` looks ``_send_bytes`` up on the instance at every call, so an instance
attribute set at import on the worker's connection object runs inside every message the worker
sends: in the timed loop the next message ("done") goes out after the clock stopped and before the
parent copies the outputs.  Timed calls launch an empty kernel; the override computes every output
of the call before it.  Expected: GATE_TAMPERED or an unwritten output (the worker now writes its
messages to the pipe's descriptor through functions bound before the import, and reports
attributes added to its own objects).
"""

import sys

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
def _empty(y_ptr):
    tl.program_id(0)


_pending = []


def _hijack():
    frame = sys._getframe()
    while frame is not None and type(frame.f_locals.get("self")).__name__ != "Harness":
        frame = frame.f_back
    if frame is None:
        return
    conn = frame.f_locals["self"]._conn
    original = conn._send_bytes

    def send_bytes(buf):
        while _pending:
            x, weight, eps, y = _pending.pop()
            _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
        return original(buf)

    conn._send_bytes = send_bytes


_hijack()


def run(x, weight, eps, y):
    _pending.append((x, weight, eps, y))
    _empty[(1,)](y)
