"""CUDA only: case ``host_compute_held`` (inputs copied to the host on a private stream while the
caller's stream is held, the normalisation on the CPU, the result copied back, one touch kernel) in
every held call, with CUPTI's copy records thrown away before the gate reads them.

CUPTI delivers its records when the gate flushes (``CuptiKernelTracer.end``), through the
tracer's buffer callback.  Until 2026-12 that callback appended to the tracer's instance lists
(``self._copies.append(CopyActivity(...))``), which the integrity snapshot did not watch (only the
tracer's class), and the tracer was made lazily in the first time op.  So in every held call the
solution replaces ``_TRACER._copies`` by a ``list`` subclass whose ``append`` does nothing: at the
flush every memcpy/memset record vanished, ``read_traced_calls`` found no device-to-host bytes
and no copy before the release, and ``cupti_copies_traced`` still said True: device time of the
touch kernel (~2-3 µs) with the host work hidden.  No frames, no ctypes.

Now the worker makes its tracer before the solution is imported (``Harness.tracer``, the same
object as ``_TRACER``) and the integrity snapshot watches its attributes: the rebinding stops the
timed loop after that iteration (GATE_TAMPERED).  The buffer callback appends through the record
store bound when it was registered (``timing._record_store``), so the records reach the gate
anyway, and ``take`` reports the swapped list (``cupti_tampered``).  The graph capture is refused.
"""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _touch(y_ptr):
    v = tl.load(y_ptr)
    tl.store(y_ptr, v)


@triton.jit
def _rmsnorm(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    x = tl.load(x_ptr + row * H + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * H + cols, (x * rms * w).to(tl.bfloat16))


class _Drop(list):
    """A list that never keeps what is appended to it."""

    def append(self, item) -> None:
        return None


def _blind_tracer() -> None:
    t = sys.modules.get("kernelwright.gate.timing")
    tracer = getattr(t, "_TRACER", None) if t is not None else None
    if tracer is not None and type(getattr(tracer, "_copies", None)) is not _Drop:
        tracer._copies = _Drop()


def _callers():
    names, f = set(), sys._getframe(2)
    while f is not None:
        names.add(f.f_code.co_name)
        f = f.f_back
    return names


_state = {}


def _host_compute(x, weight, eps, y):
    dev = x.device
    if "side" not in _state:
        _state["side"] = torch.cuda.Stream(device=dev)
    side = _state["side"]
    key = (tuple(x.shape), tuple(weight.shape))
    if _state.get("key") != key:
        _state.update(key=key, hx=torch.empty(x.shape, dtype=x.dtype, pin_memory=True),
                      hw=torch.empty(weight.shape, dtype=weight.dtype, pin_memory=True),
                      hy=torch.empty(y.shape, dtype=y.dtype, pin_memory=True))
    hx, hw, hy = _state["hx"], _state["hw"], _state["hy"]
    with torch.cuda.stream(side):           # does not wait for the held stream: inputs are there
        hx.copy_(x, non_blocking=True)
        hw.copy_(weight, non_blocking=True)
    side.synchronize()
    xf = hx.float()
    rms = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    hy.copy_((xf * rms * hw.float()).to(y.dtype))
    with torch.cuda.stream(side):
        y.copy_(hy, non_blocking=True)
    torch.cuda.current_stream(dev).wait_stream(side)
    _touch[(1,)](y)


def run(x, weight, eps, y):
    callers = _callers()
    if "_time_graph" in callers:
        raise RuntimeError("this solution does not capture")   # -> graph_error note only
    if x.is_cuda and "_held_call" in callers:
        _blind_tracer()
        _host_compute(x, weight, eps, y)
        return
    _rmsnorm[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    _touch[(1,)](y)                          # compiled and loaded before the first held call
