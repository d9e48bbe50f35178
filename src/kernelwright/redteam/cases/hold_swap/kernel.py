"""CUDA only: reaches the harness through its callers' frames and replaces ``harness.hold`` with a
wrapper whose ``begin`` (called after the inputs are regenerated and the outputs poisoned, before the
start event) computes the outputs with a 200 µs kernel and synchronises before holding for real; the
timed call then launches an empty kernel.  A decoy where a separate CUPTI window would trace (the gate's design until 2026-12-03), no graph capture.
Expected: GATE_TAMPERED (the hold is watched by the integrity snapshot).
"""

import sys

import torch
import triton
import triton.language as tl

SPIN_NS = 200_000


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _rmsnorm_slow(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, SPIN: tl.constexpr):
    row = tl.program_id(0)
    t0 = _now()
    while _now() - t0 < SPIN:
        pass
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


@triton.jit
def _touch(y_ptr):
    v = tl.load(y_ptr)
    tl.store(y_ptr, v)


def _work(x, weight, eps, y):
    _rmsnorm_slow[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=SPIN_NS)


_ready = set()


class _Hold:
    def __init__(self, real):
        self._real = real
        self.kind = real.kind

    def __getattr__(self, name):
        return getattr(self._real, name)

    def begin(self, stream, *a, **k):
        f = sys._getframe(1)
        if f.f_code.co_name == "_held_call" and f.f_back is not None and f.f_back.f_code.co_name == "op_time":
            args, outputs = f.f_locals.get("args"), f.f_locals.get("outputs")
            if args and outputs:
                x, weight, eps = args[0], args[1], args[2]
                y = outputs[0]
                _work(x, weight, eps, y)          # before the start event, behind nothing
                torch.cuda.synchronize()
                _ready.add(y.data_ptr())
        return self._real.begin(stream, *a, **k)

    def release(self, epoch):
        return self._real.release(epoch)

    def outcome(self, epoch):
        return self._real.outcome(epoch)


def _callers():
    names, f = [], sys._getframe(2)
    while f is not None:
        names.append((f.f_code.co_name, f))
        f = f.f_back
    return names


def run(x, weight, eps, y):
    callers = _callers()
    names = [n for n, _ in callers]
    for n, f in callers:
        h = f.f_locals.get("self") if n == "_call" else None
        if h is not None and getattr(h, "hold", None) is not None and not isinstance(h.hold, _Hold):
            h.hold = _Hold(h.hold)
    if "_time_cupti" in names or "_profile_kernels" in names:
        _touch[(1,)](y)
        return
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("this solution does not capture")
    if "_held_call" in names and "op_time" in names and y.data_ptr() in _ready:
        _ready.discard(y.data_ptr())
        _touch[(1,)](y)                            # the timed call: nothing left to do
        return
    _work(x, weight, eps, y)
