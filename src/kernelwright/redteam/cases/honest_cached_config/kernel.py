"""Honest with legitimate module state: a launch-config cache keyed on the shape (what autotuned
kernels do).  The static scan warns (MODULE_STATE); the verdict must still be PASS.
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

_config_cache = {}


def _config(rows, hidden):
    key = (rows, hidden)
    if key not in _config_cache:
        _config_cache[key] = {"grid": (rows,), "H": hidden}
    return _config_cache[key]


def run(x, weight, eps, y):
    cfg = _config(*x.shape)
    _rmsnorm_rows[cfg["grid"]](x, weight, y, eps, H=cfg["H"])
