"""H12 (forged results): rewrites the numbers the worker sends to the parent.  It patches
multiprocessing's Connection.send, and finds the harness through the garbage collector to wrap
its op_time handler and swap its pipe for a forging proxy, dividing every reported latency by
100.  Every call sleeps 20 ms.  Expected: GATE_TAMPERED, and the measured latency in the trace is
still >= 20 ms.
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

import gc
import multiprocessing.connection as _mpc
import time

_orig_send = _mpc.Connection.send


def _shrink(obj):
    if isinstance(obj, dict) and isinstance(obj.get("samples"), dict):
        for key in ("latency_ms", "wall_ms"):
            obj["samples"][key] = [v / 100.0 for v in obj["samples"].get(key, [])]
    return obj


def _forging_send(self, obj):
    return _orig_send(self, _shrink(obj))


_mpc.Connection.send = _forging_send


class _Proxy:
    def __init__(self, conn):
        self._conn = conn

    def send(self, obj):
        return self._conn.send(_shrink(obj))

    def __getattr__(self, name):
        return getattr(self._conn, name)


_done = []


def _hijack():
    for obj in gc.get_objects():
        cls = type(obj)
        if cls.__name__ == "Harness" and hasattr(cls, "op_time"):
            original = cls.op_time

            def op_time(self, msg, _original=original):
                return _shrink(_original(self, msg))

            cls.op_time = op_time
            if hasattr(obj, "_conn"):
                obj._conn = _Proxy(obj._conn)
            _done.append(obj)


def run(x, weight, eps, y):
    if not _done:
        _hijack()
    time.sleep(0.02)
    _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
