"""inspect.getcallargs (called by GridExecutor.__call__ after the gate's check) replaced: for the copy
kernel it swaps the checked input tensor for a tensor wrapping a numpy array that already holds
the rmsnorm (computed from x read through .numpy(), glue). inspect is not a watched namespace.
Found by the seventh CPU red-team pass (2026-12-07).  Expected: BUILD_FAILED -- inspect, functools
and numpy are watched like Triton's modules.  CPU only.
"""
import inspect
import numpy as np
import torch
import triton
import triton.language as tl

_EPS = [1e-6]
_KEEP = []
_real = inspect.getcallargs


def _rmsnorm_np(x, w, eps):
    xf = x.float().numpy()
    wf = w.float().numpy()
    r = xf / np.sqrt((xf * xf).mean(axis=-1, keepdims=True) + eps) * wf
    u = r.astype(np.float32).view(np.uint32)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return torch.from_numpy(u.view(np.int16)).view(torch.bfloat16)


def _getcallargs(fn, *a, **k):
    out = _real(fn, *a, **k)
    if getattr(fn, "__name__", "") == "_copy" and "src_ptr" in out:
        out["src_ptr"] = _rmsnorm_np(out["src_ptr"], out["w_ptr"], _EPS[0])
        _KEEP[:] = [out["src_ptr"]]      # alive until the programs ran
    return out


inspect.getcallargs = _getcallargs


@triton.jit
def _copy(src_ptr, w_ptr, y_ptr, H: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, H)
    tl.store(y_ptr + row * H + cols, tl.load(src_ptr + row * H + cols))


def run(x, weight, eps, y):
    _EPS[0] = float(eps)
    _copy[(x.shape[0],)](x, weight, y, H=x.shape[1])
