"""H19, the flashinfer-bench hole: walks sys._getframe() up the caller's frames and copies any local
tensor that looks like the expected output (same shape and dtype, not one of its own arguments).
In FlashInfer-Bench's runner ref_outputs sit in such a frame.  Here the reference outputs never
exist in the worker process (the parent computes them), so what it finds is other buffers' poison
or stale contents.  Expected: NON_FINITE / TOLERANCE.
"""

import torch
import triton
import triton.language as tl

import sys


def _find_reference(y, exclude):
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            items = value if isinstance(value, (list, tuple)) else [value]
            if isinstance(value, dict):
                items = list(value.values())
            for t in items:
                if isinstance(t, (list, tuple)):
                    continue
                if isinstance(t, torch.Tensor) and t.shape == y.shape and t.dtype == y.dtype \
                        and all(t.data_ptr() != e.data_ptr() for e in exclude):
                    return t
        frame = frame.f_back
    return None


def run(x, weight, eps, y):
    found = _find_reference(y, [x, weight, y])
    if found is not None:
        y.copy_(found)
