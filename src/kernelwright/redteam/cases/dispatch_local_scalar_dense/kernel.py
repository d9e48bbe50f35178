"""Off-clock work inside the harness's own poison check (red-team pass rt19): before every timed
call the worker checks that each output still holds the poison (``Harness._require_poison``:
``bool(torch.isnan(t).all())``), and ``bool()`` of a tensor dispatches
``aten::_local_scalar_dense``, an operator the dispatcher watch does not list (it lists ``all``,
``isnan``, ``logical_not``, ``eq.Scalar``).  The solution registers its own CPU/CUDA kernel for it
at import: it answers every call with the true value (read through numpy, never re-entering the
dispatcher), and when the caller is ``_require_poison`` on the last output and the poison is
intact, it runs the real Triton kernel on the timed call's inputs and outputs (the ``args`` local of the
harness's timed loop, ``outputs`` of the check) right after the check has read the outputs.  The timed call then finds its
outputs done and launches an empty kernel.  Correctness and ablation calls run no poison check, so
they get the honest kernel.
Expected: GATE_TAMPERED (or OUTPUT_PREWRITTEN).  Works the same on CUDA (the check's ``bool()``
runs the CUDA kernel of the operator; the real kernel is enqueued before the harness's device
synchronise, so it finishes before the clock starts).
"""
import sys

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


@triton.jit
def _noop(p):
    pass


_ready = set()


def _value(t):
    c = t.detach()
    if c.device.type != "cpu":
        c = c.cpu()
    if c.dtype in (torch.bfloat16, torch.float16) or c.dtype.is_floating_point and c.dtype.itemsize == 1:
        c = c.float()
    return c.numpy().item()


def _local_scalar_dense(t):
    v = _value(t)
    if v is True:
        f = sys._getframe(1)
        while f is not None and f.f_code.co_name != "_require_poison":
            f = f.f_back
        if f is not None:
            outputs, k = f.f_locals.get("outputs"), f.f_locals.get("k")
            args = f.f_back.f_locals.get("args") if f.f_back is not None else None
            if outputs is not None and k == len(outputs) - 1 and args is not None and len(args) == 3:
                (x, w, eps), y = args, outputs[0]
                _rmsnorm_rows[(x.shape[0],)](x, w, y, eps, H=x.shape[1])
                _ready.add(y.data_ptr())
    return v


_lib = torch.library.Library("aten", "IMPL")
for _key in ("CPU", "CUDA"):
    _lib.impl("_local_scalar_dense", _local_scalar_dense, _key)


def run(x, weight, eps, y):
    p = y.data_ptr()
    if p in _ready:
        _ready.discard(p)
        _noop[(1,)](y)
    else:
        _rmsnorm_rows[(x.shape[0],)](x, weight, y, eps, H=x.shape[1])
