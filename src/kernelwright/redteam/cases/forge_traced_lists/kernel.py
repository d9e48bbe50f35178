"""CUDA only: case ``host_compute_held`` (inputs copied to the host on a private stream while the
caller's stream is held, the normalisation on the CPU, the result copied back, one touch kernel) in
every held call, and an honest kernel in the idle calls -- plus an edit of what CUPTI saw.

CUPTI's per-traced-call lists (``cupti_d2h_bytes``, ``cupti_prerelease_copies``, ``kernel_sum_ms``,
``kernel_span_ms``, ``kernels``, ``kernel_durations``, ``launched``...) are written into the op's
``TimingSamples`` by ``HeldTracing.end(out)`` before the op's first idle call.  Until 2026-12 they
reached the parent only with the op's reply (``out.__dict__``), after every idle call and the
graph phase had run solution code, and the parent took them from the reply.  So in every idle
call the solution finds ``out`` in the frame of ``op_time`` (reading a frame's locals and mutating
the objects they name works on any Python) and zeroes the entries that would refuse device time:
the device-to-host bytes and the copies started before the release.  Device time of the touch
kernel (~2-3 µs) with the host work hidden, or, with the same edit of ``kernel_sum_ms`` /
``kernel_span_ms`` / ``kernels``, an unjoined private kernel (``unjoined_small``) gone too.

Now ``HeldTracing.end`` sends the lists to the parent (a ``cupti`` sample step) before it returns,
with the garbage collector still off, and the parent judges its own copy: the copies refuse device
time (the eager clock, host work included), and the reply's zeroed lists differ from what was sent
("timing samples edited in the worker"): GATE_TAMPERED.  The graph capture is refused (a note).
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


def _callers():
    names, f = {}, sys._getframe(2)
    while f is not None:
        names.setdefault(f.f_code.co_name, f)
        f = f.f_back
    return names


def _forge(callers) -> None:
    """Zero the op's CUPTI copy lists (filled by HeldTracing.end before the first idle call)."""
    frame = callers.get("op_time")
    out = frame.f_locals.get("out") if frame is not None else None
    if out is None:
        return
    for name in ("cupti_d2h_bytes", "cupti_prerelease_copies"):
        values = getattr(out, name, None)
        if isinstance(values, list):
            values[:] = [0] * len(values)


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
        _host_compute(x, weight, eps, y)
        return
    if "_idle_call" in callers:
        _forge(callers)
    _rmsnorm[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
    _touch[(1,)](y)                          # compiled and loaded before the first held call
