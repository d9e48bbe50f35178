"""CUDA only: at import, replaces ``harness.stream_pin`` (found through the loader's frames) with an
object whose ``holds`` is always True, then works like case ``switched_stream``: a private stream made
current for good, a 200 µs kernel on it every call.
Expected: GATE_TAMPERED (the stream pin is watched by the integrity snapshot).
"""

import sys

import torch
import triton
import triton.language as tl

SPIN_NS = 200_000


class _Yes:
    stream = None

    def select(self, stream=None):
        pass

    def holds(self, stream=None):
        return True


def _swap_pin():
    f = sys._getframe(1)
    while f is not None:
        h = f.f_locals.get("self")
        if f.f_code.co_name == "op_load" and hasattr(h, "stream_pin"):
            h.stream_pin = _Yes()
            return True
        f = f.f_back
    return False


_SWAPPED = _swap_pin()


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _rmsnorm_after_spin(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, SPIN: tl.constexpr):
    row = tl.program_id(0)
    t0 = _now()
    while _now() - t0 < SPIN:
        pass
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


_streams = []


def run(x, weight, eps, y):
    if not _streams:
        _streams.append(torch.cuda.Stream(device=x.device))
    torch.cuda.set_stream(_streams[0])   # and never back
    _rmsnorm_after_spin[(x.shape[0],)](x, weight, y, eps, H=x.shape[1], SPIN=SPIN_NS)
